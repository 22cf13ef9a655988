//! SaslAuthenticate, and the bare PLAIN frame after a v0 SaslHandshake: the PLAIN message is
//! checked by logging in to Iggy as its user (AUTH-SASL-PLAIN-1), and the connection then runs in
//! that user's backend session (AUTHZ-SESSION-1). A failure is answered
//! SASL_AUTHENTICATION_FAILED and closes the connection (AUTH-SASL-FAIL-1), after a delay that
//! grows with repeated failures from the address (AUTH-SASL-THROTTLE-1). Re-authentication
//! (KIP-368) must prove the same user (AUTH-SASL-REAUTH-1).

use crate::auth::connection::{AuthState, ConnectionAuth, Handshake};
use crate::auth::plain;
use crate::auth::sessions::{LoginError, Session};
use crate::backend::Backend;
use crate::gateway::{Gateway, Reply};
use crate::protocol::request::RequestError;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;

/// What a client is told when Iggy refuses its login; which part was wrong is not disclosed.
const REFUSED: &str = "Authentication failed: invalid username or password";

/// Authenticates `message` on `connection`: a session, or the message to answer with. Failures
/// are logged (never with the secret) and held for the throttle's delay.
async fn authenticate<B: Backend>(
    gateway: &Gateway<B>,
    connection: &mut ConnectionAuth<B>,
    message: &[u8],
) -> Result<Arc<Session<B>>, String> {
    let peer = connection.peer;
    let outcome = match plain::parse(message) {
        Err(e) => Err((String::new(), e.to_string(), format!("Authentication failed: {e}"))),
        Ok(credentials) => {
            let offsets_client = gateway.rng.next_u64();
            match gateway
                .sessions
                .login(&gateway.backend, &credentials, gateway.now_ms(), offsets_client)
                .await
            {
                Ok(session) => Ok(session),
                Err(e) => {
                    let told = match &e {
                        LoginError::Refused(_) => REFUSED.to_string(),
                        LoginError::Unavailable(_) => "Authentication failed: Iggy is unreachable; retry later".into(),
                        LoginError::TooManySessions(_) => {
                            "Authentication failed: the gateway has no room for another session; retry later".into()
                        }
                    };
                    Err((credentials.username.clone(), e.to_string(), told))
                }
            }
        }
    };
    let session = match outcome {
        Ok(session) => session,
        Err((username, cause, told)) => {
            let delay_ms = gateway
                .login_throttle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .failed(peer, gateway.now_ms());
            tracing::warn!(
                %peer,
                username = %crate::limits::truncate_utf8(&username, 64),
                "SASL authentication failed: {cause}; answering after {delay_ms} ms (AUTH-SASL-FAIL-1)"
            );
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            return Err(told);
        }
    };
    // AUTH-SASL-REAUTH-1: re-authentication keeps the principal.
    let reauthenticating = matches!(connection.state, AuthState::Authenticated { .. });
    if let AuthState::Authenticated { session: before, .. } = &connection.state {
        if before.principal != session.principal {
            tracing::warn!(
                %peer,
                "SASL re-authentication as {} on a connection of {} refused (AUTH-SASL-REAUTH-1)",
                session.who(),
                before.who()
            );
            return Err("Authentication failed: re-authentication must be as the same user".into());
        }
    }
    gateway
        .login_throttle
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .succeeded(peer);
    let expires_at_ms = gateway.sessions.expires_at_ms(&session);
    if reauthenticating {
        gateway
            .reauthentications
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    tracing::debug!(%peer, "SASL authenticated as {}", session.who());
    connection.state = AuthState::Authenticated {
        session: session.clone(),
        expires_at_ms,
        handshake: None,
    };
    Ok(session)
}

/// SaslAuthenticate. The second value says whether the connection closes after the answer.
pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    connection: &mut ConnectionAuth<B>,
    request: SaslAuthenticateRequest,
    version: i16,
) -> (SaslAuthenticateResponse, bool) {
    if connection.pending_handshake() != Some(Handshake::Framed) {
        tracing::warn!(peer = %connection.peer, "SaslAuthenticate without a SaslHandshake v1 choosing PLAIN; closing");
        let response = SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate must follow a SaslHandshake (v1) that chose PLAIN",
            )));
        return (response, true);
    }
    match authenticate(gateway, connection, &request.auth_bytes).await {
        Ok(session) => {
            let remaining_ms = gateway
                .sessions
                .expires_at_ms(&session)
                .saturating_sub(gateway.now_ms());
            let mut response = SaslAuthenticateResponse::default();
            // KIP-368: v1+ clients re-authenticate before this runs out.
            if version >= 1 {
                response = response.with_session_lifetime_ms(i64::try_from(remaining_ms).unwrap_or(i64::MAX));
            }
            (response, false)
        }
        Err(told) => (
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_string(told))),
            true,
        ),
    }
}

/// The bare PLAIN frame after SaslHandshake v0: an empty frame on success; on failure the
/// connection closes without an answer, as Kafka's v0 exchange has no error field.
pub async fn handle_raw<B: Backend>(
    gateway: &Gateway<B>,
    connection: &mut ConnectionAuth<B>,
    frame: Bytes,
) -> Result<Reply, RequestError> {
    match authenticate(gateway, connection, &frame).await {
        Ok(_) => Ok(Reply::Frame(Bytes::new().into())),
        Err(told) => Err(RequestError::NotAuthenticated(format!(
            "bare SASL PLAIN frame after SaslHandshake v0: {told} (AUTH-SASL-FAIL-1)"
        ))),
    }
}
