//! SaslHandshake (AUTH-SASL-HANDSHAKE-1): the client names its mechanism; PLAIN is the one the
//! gateway offers when SASL is on. v0 means the PLAIN message follows as a bare frame, v1 that a
//! SaslAuthenticate carries it.

use crate::auth::connection::{ConnectionAuth, Handshake};
use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

pub fn handle<B: Backend>(
    gateway: &Gateway<B>,
    connection: &mut ConnectionAuth<B>,
    request: SaslHandshakeRequest,
    version: i16,
) -> SaslHandshakeResponse {
    let Some(mechanism) = gateway.config.sasl.mechanism else {
        // SASL is off: no mechanism is offered, and the client's error says so.
        return SaslHandshakeResponse::default().with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    };
    let offered = vec![StrBytes::from_static_str(mechanism.name())];
    if request.mechanism.as_str() != mechanism.name() {
        // AUTH-SASL-MECHANISM-1: counted, and logged at debug: a client probing mechanisms, or
        // a flood of them, makes one per connection.
        crate::metrics::metrics().limit_hit("AUTH-SASL-MECHANISM-1");
        tracing::debug!(
            peer = %connection.peer,
            "SaslHandshake asked for mechanism {:?}; only {} is offered (AUTH-SASL-MECHANISM-1)",
            crate::limits::truncate_utf8(request.mechanism.as_str(), 64),
            mechanism.name()
        );
        return SaslHandshakeResponse::default()
            .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
            .with_mechanisms(offered);
    }
    connection.handshaken(if version == 0 {
        Handshake::Raw
    } else {
        Handshake::Framed
    });
    SaslHandshakeResponse::default().with_mechanisms(offered)
}
