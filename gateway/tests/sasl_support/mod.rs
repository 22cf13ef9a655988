//! Shared by the SASL test files: a gateway on the embedded backend with SASL PLAIN on, request
//! frames for it, and a login by handshake and SaslAuthenticate.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::auth::connection::ConnectionAuth;
use kafka_iggy_gateway::auth::settings::{Mechanism, SaslSettings};
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_iggy_gateway::protocol::response_frame::ResponseFrame;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::net::IpAddr;
use std::sync::Arc;

pub type EmbeddedGateway = Arc<Gateway<EmbeddedBackend>>;

pub fn gateway_with(sasl: Option<Mechanism>, lifetime_ms: Option<u64>) -> EmbeddedGateway {
    let args = Args {
        sasl: SaslSettings {
            mechanism: sasl,
            session_lifetime_ms: lifetime_ms,
            ..SaslSettings::default()
        },
        ..Args::default()
    };
    let config = Config::resolve(args, FileConfig::default()).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7)
}

pub fn gateway() -> EmbeddedGateway {
    gateway_with(Some(Mechanism::Plain), None)
}

pub fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(5)
        .with_client_id(Some(StrBytes::from_static_str("sasl-test")));
    let mut out = BytesMut::new();
    header.encode(&mut out, key.request_header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

pub fn decode<T: Decodable>(frame: ResponseFrame, key: ApiKey, version: i16) -> T {
    let mut bytes = frame.to_bytes();
    ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    T::decode(&mut bytes, version).unwrap()
}

pub fn answer<T: Decodable>(reply: Result<Reply, RequestError>, key: ApiKey, version: i16) -> T {
    match reply.expect("answered, not closed") {
        Reply::Frame(bytes) => decode(bytes, key, version),
        other => panic!("expected a frame that keeps the connection, got {other:?}"),
    }
}

pub fn peer() -> IpAddr {
    IpAddr::from([127, 0, 0, 9])
}

pub async fn handshake(
    g: &EmbeddedGateway,
    c: &mut ConnectionAuth<EmbeddedBackend>,
    version: i16,
) -> SaslHandshakeResponse {
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    answer(
        g.handle(frame(ApiKey::SaslHandshake, version, &request), c).await,
        ApiKey::SaslHandshake,
        version,
    )
}

pub fn plain(user: &str, secret: &str) -> Bytes {
    Bytes::from(format!("\0{user}\0{secret}"))
}

/// Handshake v1 and SaslAuthenticate v2; the reply, decoded, and whether it closes.
pub async fn login(
    g: &EmbeddedGateway,
    c: &mut ConnectionAuth<EmbeddedBackend>,
    user: &str,
    secret: &str,
) -> (SaslAuthenticateResponse, bool) {
    assert_eq!(handshake(g, c, 1).await.error_code, 0);
    let request = SaslAuthenticateRequest::default().with_auth_bytes(plain(user, secret));
    match g
        .handle(frame(ApiKey::SaslAuthenticate, 2, &request), c)
        .await
        .expect("answered")
    {
        Reply::Frame(b) => (decode(b, ApiKey::SaslAuthenticate, 2), false),
        Reply::FrameThenClose(b) => (decode(b, ApiKey::SaslAuthenticate, 2), true),
        Reply::Nothing => panic!("no answer"),
    }
}
