//! Backend sessions per principal: a client's requests run in a backend session logged in to
//! Iggy as the client's own user, so Iggy's permissions decide them (AUTHZ-SESSION-1). Sessions
//! are pooled by credentials, bounded in number (LIMIT-SESSIONS-1) and in age (AUTH-SESSION-1).

use super::credentials::{Credentials, Principal, SecretKind};
use crate::backend::{Backend, BackendError, ClientId};
use iggy_common::IggyError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The backend a request runs on, and as whom.
pub struct Session<B> {
    pub backend: Arc<B>,
    /// `None`: the gateway's configured account (SASL off).
    pub principal: Option<Principal>,
    /// The backend client that stores this session's committed offsets (CO-MEMBER-1).
    pub offsets_client: ClientId,
    /// When the session logged in, in ms of the gateway's clock.
    pub opened_at_ms: u64,
    /// Topics its lookups found, for Produce (PRODUCE-RESOLVE-2).
    pub known_topics: crate::known_topics::KnownTopics,
}

impl<B> Session<B> {
    /// Who the session acts as, for logs.
    pub fn who(&self) -> String {
        self.principal
            .as_ref()
            .map_or_else(|| "the gateway's account".to_string(), |p| p.to_string())
    }
}

/// Why a login did not give a session.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Iggy refused the credentials, or the token belongs to another user.
    #[error("Iggy refused the login: {0}")]
    Refused(String),
    /// Iggy could not be asked.
    #[error("Iggy could not be reached to check the login: {0}")]
    Unavailable(BackendError),
    /// LIMIT-SESSIONS-1
    #[error("the gateway holds its maximum of {0} backend sessions, all in use")]
    TooManySessions(usize),
}

/// Errors that say the server was not reached, rather than that it refused.
fn is_unreachable(e: &BackendError) -> bool {
    matches!(
        e,
        BackendError::Iggy(
            IggyError::Disconnected
                | IggyError::NotConnected
                | IggyError::CannotEstablishConnection
                | IggyError::StaleClient
                | IggyError::ClientShutdown
                | IggyError::EmptyResponse
        )
    )
}

/// Pooled sessions, keyed by a salted hash of the credentials: a wrong password never finds
/// a right one's session, and the table holds no secret.
pub struct SessionPool<B> {
    entries: Mutex<HashMap<[u8; 32], Arc<Session<B>>>>,
    salt: [u8; 32],
    max_sessions: usize,
    lifetime_ms: u64,
}

impl<B: Backend> SessionPool<B> {
    pub fn new(max_sessions: usize, lifetime_ms: u64, salt: [u8; 32]) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            salt,
            max_sessions,
            lifetime_ms,
        }
    }

    /// How long a session is used for new logins, and how long a connection stays
    /// authenticated before it must re-authenticate (AUTH-SESSION-1).
    pub fn lifetime_ms(&self) -> u64 {
        self.lifetime_ms
    }

    fn key(&self, credentials: &Credentials) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(self.salt);
        hash.update((credentials.username.len() as u64).to_be_bytes());
        hash.update(credentials.username.as_bytes());
        hash.update([matches!(credentials.kind, SecretKind::PersonalAccessToken) as u8]);
        hash.update(credentials.secret.expose().as_bytes());
        hash.finalize().into()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Session<B>>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions pooled now.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A session logged in as `credentials`: a pooled one younger than the lifetime, or a new
    /// login to Iggy. A token-shaped secret that Iggy does not take as a token is tried as a
    /// password (AUTH-SASL-PAT-1).
    pub async fn login(
        &self,
        root: &B,
        credentials: &Credentials,
        now_ms: u64,
        offsets_client: ClientId,
    ) -> Result<Arc<Session<B>>, LoginError> {
        let mut attempts = vec![credentials.clone()];
        if credentials.kind == SecretKind::PersonalAccessToken {
            attempts.push(Credentials {
                kind: SecretKind::Password,
                ..credentials.clone()
            });
        }
        let mut refusal = String::new();
        for attempt in attempts {
            let key = self.key(&attempt);
            if let Some(session) = self.pooled(&key, now_ms) {
                return Ok(session);
            }
            // LIMIT-SESSIONS-1 before any Iggy connection is opened (evicting nothing: the login
            // may yet fail); `insert` makes the room, as logins run concurrently.
            if !self.has_room(now_ms) {
                crate::metrics::metrics().limit_hit("LIMIT-SESSIONS-1");
                return Err(LoginError::TooManySessions(self.max_sessions));
            }
            match root.open_session(&attempt).await {
                Ok((backend, principal)) => {
                    // A token names its own user; it must be the user the client named.
                    if principal.username != attempt.username {
                        refusal = format!(
                            "the personal access token belongs to another user than {:?}",
                            attempt.username
                        );
                        continue;
                    }
                    let session = Arc::new(Session {
                        backend: Arc::new(backend),
                        principal: Some(principal),
                        offsets_client,
                        opened_at_ms: now_ms,
                        known_topics: Default::default(),
                    });
                    self.insert(key, session.clone(), now_ms)?;
                    return Ok(session);
                }
                Err(e) if is_unreachable(&e) => return Err(LoginError::Unavailable(e)),
                Err(e) => refusal = e.to_string(),
            }
        }
        Err(LoginError::Refused(refusal))
    }

    /// A pooled session is reused for new logins during the first half of its lifetime, so a
    /// connection that gets it has at least half a lifetime before it must re-authenticate.
    fn pooled(&self, key: &[u8; 32], now_ms: u64) -> Option<Arc<Session<B>>> {
        let entries = self.entries();
        entries
            .get(key)
            .filter(|s| now_ms.saturating_sub(s.opened_at_ms) < self.lifetime_ms / 2)
            .cloned()
    }

    /// When a connection authenticated with `session` must re-authenticate (AUTH-SESSION-1):
    /// the session's own end, so no connection outlives the login it relies on by more than
    /// one lifetime.
    pub fn expires_at_ms(&self, session: &Session<B>) -> u64 {
        session.opened_at_ms.saturating_add(self.lifetime_ms)
    }

    /// LIMIT-SESSIONS-1: expired sessions leave the pool first, then idle ones (held by no
    /// connection), oldest first; when every pooled session is young and in use, the login is
    /// refused rather than opening more Iggy connections.
    fn insert(&self, key: [u8; 32], session: Arc<Session<B>>, now_ms: u64) -> Result<(), LoginError> {
        let mut entries = self.entries();
        if !entries.contains_key(&key) {
            self.make_room(&mut entries, now_ms)?;
        }
        entries.insert(key, session);
        Ok(())
    }

    /// Whether one more session would fit: the pool is not full, or holds an expired or idle one.
    fn has_room(&self, now_ms: u64) -> bool {
        let entries = self.entries();
        entries.len() < self.max_sessions
            || entries
                .values()
                .any(|s| now_ms.saturating_sub(s.opened_at_ms) >= self.lifetime_ms || Arc::strong_count(s) == 1)
    }

    /// Leaves room for one more session, evicting an expired or idle one if the pool is full.
    fn make_room(&self, entries: &mut HashMap<[u8; 32], Arc<Session<B>>>, now_ms: u64) -> Result<(), LoginError> {
        entries.retain(|_, s| now_ms.saturating_sub(s.opened_at_ms) < self.lifetime_ms);
        if entries.len() < self.max_sessions {
            return Ok(());
        }
        let idle = entries
            .iter()
            .filter(|(_, s)| Arc::strong_count(s) == 1)
            .min_by_key(|(_, s)| s.opened_at_ms)
            .map(|(k, _)| *k);
        match idle {
            Some(k) => {
                entries.remove(&k);
                Ok(())
            }
            None => Err(LoginError::TooManySessions(self.max_sessions)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
    use crate::clock::SystemClock;
    use iggy_common::UserStatus;

    fn model() -> EmbeddedBackend {
        let b = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
        for user in ["ann", "ben", "cat"] {
            b.create_user(user, "secret", UserStatus::Active, None).unwrap();
        }
        b
    }

    #[tokio::test]
    async fn sessions_are_pooled_by_credentials_and_bounded() {
        let root = model();
        let pool = SessionPool::<EmbeddedBackend>::new(2, 60_000, [7; 32]);
        let ann = Credentials::password("ann", "secret");
        let first = pool.login(&root, &ann, 0, 1).await.unwrap();
        let again = pool.login(&root, &ann, 10, 2).await.unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the same credentials reuse the session");
        assert!(matches!(
            pool.login(&root, &Credentials::password("ann", "wrong"), 10, 3).await,
            Err(LoginError::Refused(_))
        ));
        let ben = pool
            .login(&root, &Credentials::password("ben", "secret"), 20, 4)
            .await
            .unwrap();
        assert_eq!(pool.len(), 2);
        // LIMIT-SESSIONS-1: both pooled sessions are held by connections: no room.
        assert!(matches!(
            pool.login(&root, &Credentials::password("cat", "secret"), 30, 5).await,
            Err(LoginError::TooManySessions(2))
        ));
        drop((first, again));
        // Ann's session is idle now: it makes room.
        let cat = pool
            .login(&root, &Credentials::password("cat", "secret"), 40, 6)
            .await
            .unwrap();
        assert_eq!(cat.principal.as_ref().map(|p| p.username.as_str()), Some("cat"));
        assert_eq!(pool.len(), 2);
        drop((ben, cat));
        // AUTH-SESSION-1: past half its lifetime a session is not reused; a new login replaces it.
        let late = pool
            .login(&root, &Credentials::password("cat", "secret"), 40 + 30_000, 7)
            .await
            .unwrap();
        assert_eq!(late.opened_at_ms, 40 + 30_000);
        assert_eq!(pool.expires_at_ms(&late), 40 + 30_000 + 60_000);
    }
}
