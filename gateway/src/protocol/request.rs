//! Request headers in and response frames out, with the header versions each API key and
//! version call for (PROTO-HEADER-1).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

/// Why a frame is not a request the gateway can answer. Each ends the connection
/// (PROTO-VERSION-2, PROTO-MALFORMED-1) after an error log naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("frame of {0} bytes is too short for a request header")]
    Short(usize),
    #[error("unknown API key {key} (version {version}, correlation id {correlation_id})")]
    UnknownKey {
        key: i16,
        version: i16,
        correlation_id: i32,
    },
    #[error("{key:?} v{version} is not served (correlation id {correlation_id})")]
    UnsupportedVersion {
        key: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    #[error("malformed {what} for {key:?} v{version}: {reason}")]
    Malformed {
        what: &'static str,
        key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("{key:?} v{version} carries {entries} entries, more than max_request_entries {limit} (LIMIT-ENTRIES-1)")]
    TooManyEntries {
        key: ApiKey,
        version: i16,
        entries: usize,
        limit: usize,
    },
    #[error("the {key:?} v{version} response does not encode: {reason} (PROTO-ENCODE-1)")]
    Encode { key: ApiKey, version: i16, reason: String },
    /// LIMIT-RESPONSE-BYTES-1: the dispatch's backstop, for an answer no handler bounded.
    #[error("the {key:?} v{version} response encodes to {bytes} bytes, above max_response_bytes {limit}; not sent (LIMIT-RESPONSE-BYTES-1)")]
    ResponseTooLarge {
        key: ApiKey,
        version: i16,
        bytes: usize,
        limit: usize,
    },
    /// AUTH-SASL-GATE-1, AUTH-SASL-REAUTH-1
    #[error("{0}")]
    NotAuthenticated(String),
}

/// A request whose header is decoded and whose body is not.
#[derive(Debug)]
pub struct Request {
    pub key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// The fixed first fields of every request header, readable whatever the key and version.
pub fn peek_header(frame: &[u8]) -> Result<(i16, i16, i32), RequestError> {
    if frame.len() < 8 {
        return Err(RequestError::Short(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Ok((key, version, correlation_id))
}

/// Decodes the request header of `frame` with the version its key and version call for.
pub fn parse_request(frame: Bytes) -> Result<Request, RequestError> {
    let (raw_key, version, correlation_id) = peek_header(&frame)?;
    let key = ApiKey::try_from(raw_key).map_err(|_| RequestError::UnknownKey {
        key: raw_key,
        version,
        correlation_id,
    })?;
    let mut body = frame;
    let header =
        RequestHeader::decode(&mut body, key.request_header_version(version)).map_err(|e| RequestError::Malformed {
            what: "request header",
            key,
            version,
            reason: e.to_string(),
        })?;
    Ok(Request {
        key,
        version,
        header,
        body,
    })
}

/// Decodes a request body, naming the cause when it does not decode. Bytes after the body are
/// ignored, as Kafka brokers ignore them (LIMIT-TRAILING-BYTES-1): librdkafka's Metadata v9+ for
/// all topics leaves three.
pub fn decode_body<T: Decodable>(request: &Request) -> Result<T, RequestError> {
    let mut body = request.body.clone();
    let decoded = T::decode(&mut body, request.version).map_err(|e| RequestError::Malformed {
        what: "request body",
        key: request.key,
        version: request.version,
        reason: e.to_string(),
    })?;
    if !body.is_empty() {
        // LIMIT-TRAILING-BYTES-1: they cost nothing more; the frame was bounded and admitted.
        tracing::debug!(
            "{:?} v{}: ignoring {} bytes after the end of the body, as Kafka does",
            request.key,
            request.version,
            body.len()
        );
    }
    Ok(decoded)
}

/// Encodes a response frame body: header of the given version, then the body at `version`.
pub fn encode_response<T: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &T,
    version: i16,
) -> anyhow::Result<Bytes> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut out = BytesMut::with_capacity(header.compute_size(header_version)? + body.compute_size(version)?);
    header.encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    Ok(out.freeze())
}
