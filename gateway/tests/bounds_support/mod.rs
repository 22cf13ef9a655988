//! Shared by the tests of answers and members bounded by the gateway's limits
//! (answer_bounds.rs, consumer_protocol_bounds.rs): an embedded gateway under given limits, and
//! a request through `Gateway::handle_frame` with its answer's size in bytes.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::sync::Arc;

pub type EmbeddedGateway = Arc<Gateway<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

const CORRELATION_ID: i32 = 31;

pub fn gateway_with(limits: LimitSettings) -> EmbeddedGateway {
    let file = FileConfig {
        limits,
        ..FileConfig::default()
    };
    let config = Config::resolve(Args::default(), file).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 31)
}

pub fn gateway() -> EmbeddedGateway {
    gateway_with(LimitSettings::default())
}

pub fn gateway_answering_at_most(max_response_bytes: usize) -> EmbeddedGateway {
    gateway_with(LimitSettings {
        max_response_bytes: Some(max_response_bytes),
        ..LimitSettings::default()
    })
}

pub fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

pub fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(s("bounds")));
    let mut out = BytesMut::new();
    header.encode(&mut out, key.request_header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

/// The answer's frame bytes and its body decoded at `version`.
pub fn answer<T: Decodable>(reply: Result<Reply, RequestError>, key: ApiKey, version: i16) -> (usize, T) {
    let Reply::Frame(frame) = reply.expect("answered, not closed") else {
        panic!("no response");
    };
    let mut bytes = frame.to_bytes();
    let len = bytes.len();
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, CORRELATION_ID);
    (len, T::decode(&mut bytes, version).unwrap())
}

pub async fn ask<Req: Encodable, Resp: Decodable>(
    gateway: &EmbeddedGateway,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> (usize, Resp) {
    answer(gateway.handle_frame(frame(key, version, request)).await, key, version)
}
