//! Target `request_header`: the request header every frame starts with (PROTO-HEADER-1), then
//! the body the gateway would decode for a served key and version.

use bytes::Bytes;
use kafka_iggy_gateway::protocol::api::serves;
use kafka_iggy_gateway::protocol::request::{parse_request, peek_header};

/// The input is one request frame without its size prefix.
pub fn request_header(data: &[u8]) {
    let Ok((key, version, correlation_id)) = peek_header(data) else {
        assert!(data.len() < 8, "peek_header refused {} bytes", data.len());
        return;
    };
    let Ok(request) = parse_request(Bytes::copy_from_slice(data)) else {
        return;
    };
    assert_eq!(request.key as i16, key);
    assert_eq!(request.version, version);
    assert_eq!(request.header.request_api_key, key);
    assert_eq!(request.header.request_api_version, version);
    assert_eq!(request.header.correlation_id, correlation_id);
    assert!(request.body.len() <= data.len() - 8);
    if serves(request.key, version) {
        crate::request_bodies::check_body(request.key, version, request.body);
    }
}
