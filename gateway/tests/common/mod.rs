//! Shared by the frame-level test files: a request frame on the wire, and the decoded answer
//! to it, checked to be a whole response to that request.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The correlation id every request of these tests carries, and its answer must echo.
pub const CORRELATION_ID: i32 = 11;

/// `body` as a request frame of `key` at `version`, with the header version they call for.
pub fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str("gateway-tests")));
    let mut out = BytesMut::new();
    header.encode(&mut out, key.request_header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

/// The response body of `reply`: a frame that echoes the correlation id and holds nothing after
/// the body.
pub fn answer<T: Decodable>(reply: Result<Reply, RequestError>, key: ApiKey, version: i16) -> T {
    let Reply::Frame(frame) = reply.expect("answered, not closed") else {
        panic!("no response");
    };
    let mut bytes = frame.to_bytes();
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, CORRELATION_ID);
    let body = T::decode(&mut bytes, version).unwrap();
    assert!(
        bytes.is_empty(),
        "{} bytes after the {key:?} v{version} body",
        bytes.len()
    );
    body
}
