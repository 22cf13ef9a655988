//! One connection's authentication state, and what it may ask in each (AUTH-SASL-GATE-1,
//! AUTH-SASL-REAUTH-1). Pure: the dispatch asks, this answers.

use super::sessions::Session;
use kafka_protocol::messages::ApiKey;
use std::net::IpAddr;
use std::sync::Arc;

/// Where a connection stands.
pub enum AuthState<B> {
    /// SASL is off: every request runs in the gateway's own session.
    Open(Arc<Session<B>>),
    /// SASL is on; `handshake` says a SaslHandshake chose PLAIN, and whether it was v0, after
    /// which the client sends the PLAIN message as a bare frame instead of a SaslAuthenticate.
    Unauthenticated { handshake: Option<Handshake> },
    /// Authenticated until `expires_at_ms`; `handshake` is a re-authentication under way
    /// (KIP-368).
    Authenticated {
        session: Arc<Session<B>>,
        expires_at_ms: u64,
        handshake: Option<Handshake>,
    },
}

/// A SaslHandshake that chose PLAIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// v1: SaslAuthenticate requests follow.
    Framed,
    /// v0: the PLAIN message follows as a bare size-prefixed frame, answered by one.
    Raw,
}

/// What the dispatch does with a request.
pub enum Access<B> {
    /// Answer it in this session.
    Serve(Arc<Session<B>>),
    /// Answer it without a session (ApiVersions, the SASL APIs).
    Unscoped,
    /// Close the connection; the reason is logged.
    Refuse(String),
}

/// A connection's peer and authentication state.
pub struct ConnectionAuth<B> {
    pub peer: IpAddr,
    pub state: AuthState<B>,
}

impl<B> ConnectionAuth<B> {
    /// A connection on a gateway without SASL.
    pub fn open(peer: IpAddr, session: Arc<Session<B>>) -> Self {
        Self {
            peer,
            state: AuthState::Open(session),
        }
    }

    /// A connection on a gateway with SASL, before its handshake.
    pub fn unauthenticated(peer: IpAddr) -> Self {
        Self {
            peer,
            state: AuthState::Unauthenticated { handshake: None },
        }
    }

    /// Whether SASL is on and the connection has not authenticated yet (LIMIT-PREAUTH-FRAME-1,
    /// LIMIT-PREAUTH-DEADLINE-1); a connection re-authenticating (KIP-368) has.
    pub fn is_unauthenticated(&self) -> bool {
        matches!(self.state, AuthState::Unauthenticated { .. })
    }

    /// Whether the next frame is a bare PLAIN message rather than a Kafka request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            AuthState::Unauthenticated {
                handshake: Some(Handshake::Raw)
            } | AuthState::Authenticated {
                handshake: Some(Handshake::Raw),
                ..
            }
        )
    }

    /// The handshake a SaslAuthenticate would complete, if any.
    pub fn pending_handshake(&self) -> Option<Handshake> {
        match &self.state {
            AuthState::Unauthenticated { handshake } | AuthState::Authenticated { handshake, .. } => *handshake,
            AuthState::Open(_) => None,
        }
    }

    /// Records a SaslHandshake that chose PLAIN.
    pub fn handshaken(&mut self, how: Handshake) {
        match &mut self.state {
            AuthState::Unauthenticated { handshake } | AuthState::Authenticated { handshake, .. } => {
                *handshake = Some(how)
            }
            AuthState::Open(_) => {}
        }
    }

    /// The principal of an authenticated connection, if any.
    pub fn session(&self) -> Option<&Arc<Session<B>>> {
        match &self.state {
            AuthState::Open(s) | AuthState::Authenticated { session: s, .. } => Some(s),
            AuthState::Unauthenticated { .. } => None,
        }
    }

    /// AUTH-SASL-GATE-1: before authentication only ApiVersions and the SASL APIs are answered;
    /// anything else closes the connection, as a Kafka broker's SASL listener does.
    /// AUTH-SASL-REAUTH-1: once the session's lifetime has passed, the same holds until the
    /// client re-authenticates.
    pub fn access(&self, key: ApiKey, now_ms: u64) -> Access<B> {
        if matches!(
            key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        ) {
            return Access::Unscoped;
        }
        match &self.state {
            AuthState::Open(session) => Access::Serve(session.clone()),
            AuthState::Unauthenticated { .. } => Access::Refuse(format!(
                "{key:?} before SASL authentication (only ApiVersions, SaslHandshake and SaslAuthenticate are answered)"
            )),
            AuthState::Authenticated {
                session, expires_at_ms, ..
            } => {
                if now_ms >= *expires_at_ms {
                    Access::Refuse(format!(
                        "{key:?} after the SASL session of {} expired; the client did not re-authenticate",
                        session.who()
                    ))
                } else {
                    Access::Serve(session.clone())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::Principal;

    fn session() -> Arc<Session<()>> {
        Arc::new(Session {
            backend: Arc::new(()),
            principal: Some(Principal {
                user_id: 7,
                username: "alice".into(),
            }),
            offsets_client: 1,
            opened_at_ms: 0,
            known_topics: Default::default(),
            slot: None,
        })
    }

    fn peer() -> IpAddr {
        IpAddr::from([127, 0, 0, 1])
    }

    #[test]
    fn auth_sasl_gate_1_only_the_sasl_apis_before_authentication() {
        let mut c = ConnectionAuth::<()>::unauthenticated(peer());
        assert!(matches!(c.access(ApiKey::ApiVersions, 0), Access::Unscoped));
        assert!(matches!(c.access(ApiKey::SaslHandshake, 0), Access::Unscoped));
        assert!(matches!(c.access(ApiKey::Metadata, 0), Access::Refuse(_)));
        assert!(matches!(c.access(ApiKey::Produce, 0), Access::Refuse(_)));
        c.handshaken(Handshake::Framed);
        assert!(matches!(c.access(ApiKey::Fetch, 0), Access::Refuse(_)));
        assert!(!c.expects_raw_token());
        c.handshaken(Handshake::Raw);
        assert!(c.expects_raw_token());
        c.state = AuthState::Authenticated {
            session: session(),
            expires_at_ms: 100,
            handshake: None,
        };
        assert!(matches!(c.access(ApiKey::Produce, 99), Access::Serve(_)));
    }

    #[test]
    fn auth_sasl_reauth_1_an_expired_session_serves_nothing_but_re_authentication() {
        let c = ConnectionAuth {
            peer: peer(),
            state: AuthState::Authenticated {
                session: session(),
                expires_at_ms: 100,
                handshake: None,
            },
        };
        assert!(matches!(c.access(ApiKey::Produce, 100), Access::Refuse(_)));
        assert!(matches!(c.access(ApiKey::SaslHandshake, 100), Access::Unscoped));
        assert!(matches!(c.access(ApiKey::SaslAuthenticate, 100), Access::Unscoped));
    }

    #[test]
    fn open_connections_serve_everything_in_the_gateway_session() {
        let c = ConnectionAuth::open(peer(), session());
        assert!(matches!(c.access(ApiKey::DeleteTopics, u64::MAX), Access::Serve(_)));
    }
}
