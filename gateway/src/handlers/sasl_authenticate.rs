//! SaslAuthenticate, and the bare PLAIN frame after a v0 SaslHandshake: the PLAIN message is
//! checked by logging in to Iggy as its user (AUTH-SASL-PLAIN-1), and the connection then runs in
//! that user's backend session (AUTHZ-SESSION-1). A failure is answered
//! SASL_AUTHENTICATION_FAILED and closes the connection (AUTH-SASL-FAIL-1); a login after
//! recent failures waits before Iggy is asked, one at a time per address (AUTH-SASL-THROTTLE-1). Re-authentication
//! (KIP-368) must prove the same user (AUTH-SASL-REAUTH-1).

use crate::auth::connection::{AuthState, ConnectionAuth, Handshake};
use crate::auth::plain;
use crate::auth::sessions::{LoginError, Session};
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::protocol::request::RequestError;
use crate::reply::Reply;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;

/// What a client is told when Iggy refuses its login; which part was wrong is not disclosed.
const REFUSED: &str = "Authentication failed: invalid username or password";

/// Authenticates `message` on `connection`: a session, or the message to answer with.
///
/// AUTH-SASL-THROTTLE-1: the logins of one address key take turns, and each waits, before Iggy
/// is asked, as long as the failures of its address, its username and the pair say; Iggy is
/// asked once per message. AUTH-SASL-THROTTLE-2: a login from a place its username has not
/// logged in from lately also takes the username's turn, across addresses. Failures are
/// logged, never with the secret.
async fn authenticate<B: Backend>(
    gateway: &Gateway<B>,
    connection: &mut ConnectionAuth<B>,
    message: &[u8],
) -> Result<Arc<Session<B>>, String> {
    let peer = connection.peer;
    // LIMIT-ADDRESS-KEY-1: the counts and turns are per client, an IPv6 /64 being one.
    let address = gateway.config.limits.address_prefixes.key(peer);
    let throttle = || gateway.login_throttle.lock().unwrap_or_else(|e| e.into_inner());
    let credentials = match plain::parse(message) {
        Ok(credentials) => credentials,
        Err(e) => {
            throttle().failed(address, "", gateway.now_ms());
            tracing::warn!(%peer, "SASL authentication failed: {e} (AUTH-SASL-FAIL-1)");
            return Err(format!("Authentication failed: {e}"));
        }
    };
    let username = crate::limits::truncate_utf8(&credentials.username, 64);
    // LIMIT-SESSIONS-1: a re-authenticating connection lets go of its session before the login,
    // so that at full capacity an expired session held by nothing else makes room for its
    // successor. A re-authentication that fails closes the connection anyway
    // (AUTH-SASL-FAIL-1), so nothing is served in between.
    let before = match &connection.state {
        AuthState::Authenticated { session, .. } => Some((session.principal.clone(), session.who())),
        _ => None,
    };
    if before.is_some() {
        connection.state = AuthState::Unauthenticated {
            handshake: connection.pending_handshake(),
        };
    }
    let turn = gateway.login_queues.turn(address).await;
    let trusted = throttle().is_trusted(address, &credentials.username, gateway.now_ms());
    let username_turn = if trusted {
        None
    } else {
        let key = crate::auth::throttle::username_turn_key(&credentials.username);
        Some(gateway.username_queues.turn(key).await)
    };
    let wait_ms = throttle().wait_before_ms(address, &credentials.username, gateway.now_ms());
    if wait_ms > 0 {
        crate::metrics::metrics().limit_hit("AUTH-SASL-THROTTLE-1");
        tracing::debug!(%peer, %username, "SASL login waits {wait_ms} ms after recent failures (AUTH-SASL-THROTTLE-1)");
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
    let offsets_client = gateway.rng.next_u64();
    let login = gateway
        .sessions
        .login(&gateway.backend, &credentials, gateway.now_ms(), offsets_client)
        .await;
    let session = match login {
        Ok(session) => {
            throttle().succeeded(address, &credentials.username, gateway.now_ms());
            drop((username_turn, turn));
            session
        }
        Err(e) => {
            let told = match &e {
                LoginError::Refused(_) => {
                    // Only a refusal is a guess; Iggy unreachable or no room is not the client's.
                    throttle().failed(address, &credentials.username, gateway.now_ms());
                    REFUSED.to_string()
                }
                LoginError::Unavailable(_) => "Authentication failed: Iggy is unreachable; retry later".into(),
                LoginError::TooManySessions(_) => {
                    "Authentication failed: the gateway has no room for another session; retry later".into()
                }
                // LIMIT-SESSIONS-USER-1: told only after Iggy accepted the credentials, so it
                // tells a guesser nothing of the user.
                LoginError::TooManySessionsForUser(_) => {
                    "Authentication failed: the user has no room for another session (all in use); retry later".into()
                }
            };
            drop((username_turn, turn));
            tracing::warn!(%peer, %username, "SASL authentication failed: {e} (AUTH-SASL-FAIL-1)");
            return Err(told);
        }
    };
    // AUTH-SASL-REAUTH-1: re-authentication keeps the principal.
    let reauthenticating = before.is_some();
    if let Some((principal, who)) = before {
        if principal != session.principal {
            tracing::warn!(
                %peer,
                "SASL re-authentication as {} on a connection of {who} refused (AUTH-SASL-REAUTH-1)",
                session.who(),
            );
            return Err("Authentication failed: re-authentication must be as the same user".into());
        }
    }
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
