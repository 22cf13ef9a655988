//! Backend sessions per principal: a client's requests run in a backend session logged in to
//! Iggy as the client's own user, so Iggy's permissions decide them (AUTHZ-SESSION-1). Sessions
//! are pooled by credentials, joined when logins with the same credentials overlap
//! (AUTH-SASL-JOIN-1), bounded in number, counting every live one (LIMIT-SESSIONS-1), per user
//! (LIMIT-SESSIONS-USER-1), and in age (AUTH-SESSION-1).

use super::credentials::{Credentials, Principal, SecretKind};
use crate::backend::{Backend, BackendError, ClientId};
use iggy_common::IggyError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// Its place among the pool's live sessions, given back when the last connection holding
    /// it lets go (LIMIT-SESSIONS-1); `None` for the gateway's own session.
    pub slot: Option<SessionSlot>,
}

/// Live sessions per username (LIMIT-SESSIONS-USER-1).
type UserSessions = Mutex<HashMap<String, usize>>;

/// A place among a pool's live sessions (LIMIT-SESSIONS-1) and among its user's
/// (LIMIT-SESSIONS-USER-1), given back on drop: a session replaced in the pool, or expired,
/// still counts while connections hold it.
#[derive(Debug)]
pub struct SessionSlot {
    live: Arc<AtomicUsize>,
    users: Arc<UserSessions>,
    user: String,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = users.get_mut(&self.user) {
            *held -= 1;
            if *held == 0 {
                users.remove(&self.user);
            }
        }
    }
}

/// Which bound a new session would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// `max_sessions` (LIMIT-SESSIONS-1).
    Pool,
    /// `max_sessions_per_user` (LIMIT-SESSIONS-USER-1).
    User,
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
    /// LIMIT-SESSIONS-USER-1
    #[error("the user holds its maximum of {0} backend sessions, all in use")]
    TooManySessionsForUser(usize),
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
    /// Sessions alive, pooled or not (LIMIT-SESSIONS-1).
    live: Arc<AtomicUsize>,
    /// Of them, each user's (LIMIT-SESSIONS-USER-1).
    users: Arc<UserSessions>,
    max_per_user: usize,
    /// One login at a time per credentials (AUTH-SASL-JOIN-1).
    joins: super::turns::Turns<[u8; 32]>,
    salt: [u8; 32],
    max_sessions: usize,
    lifetime_ms: u64,
}

impl<B: Backend> SessionPool<B> {
    pub fn new(max_sessions: usize, lifetime_ms: u64, salt: [u8; 32]) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            live: Arc::new(AtomicUsize::new(0)),
            users: Default::default(),
            max_per_user: super::settings::DEFAULT_MAX_SESSIONS_PER_USER.min(max_sessions),
            joins: Default::default(),
            salt,
            max_sessions,
            lifetime_ms,
        }
    }

    /// At most `max` live sessions per user (LIMIT-SESSIONS-USER-1).
    pub fn with_max_sessions_per_user(mut self, max: usize) -> Self {
        self.max_per_user = max;
        self
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

    /// Sessions alive now, pooled or only held by connections (LIMIT-SESSIONS-1).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
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
            // AUTH-SASL-JOIN-1: a login with the same credentials as one under way waits for
            // it, then finds its session pooled, instead of opening a session of its own.
            let _turn = self.joins.turn(key).await;
            if let Some(session) = self.pooled(&key, now_ms) {
                return Ok(session);
            }
            // LIMIT-SESSIONS-1 before any Iggy connection is opened (evicting nothing: the login
            // may yet fail); `take_slot` makes the room, as logins run concurrently.
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
                    let slot = self.take_slot(now_ms, &principal.username)?;
                    let session = Arc::new(Session {
                        backend: Arc::new(backend),
                        principal: Some(principal),
                        offsets_client,
                        opened_at_ms: now_ms,
                        known_topics: Default::default(),
                        slot: Some(slot),
                    });
                    // A session this replaces stays counted while connections hold it.
                    self.entries().insert(key, session.clone());
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

    fn users(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more live session of `user`, if there is one now; else the bound in
    /// the way, the user's first.
    fn try_slot(&self, user: &str) -> Result<SessionSlot, Full> {
        let mut users = self.users();
        let held = users.get(user).copied().unwrap_or(0);
        if held >= self.max_per_user {
            return Err(Full::User);
        }
        self.live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |live| {
                (live < self.max_sessions).then_some(live + 1)
            })
            .map_err(|_| Full::Pool)?;
        users.insert(user.to_string(), held + 1);
        Ok(SessionSlot {
            live: self.live.clone(),
            users: self.users.clone(),
            user: user.to_string(),
        })
    }

    /// Whether one more session would fit: fewer live than `max_sessions`, or an idle one
    /// (held by no connection) in the pool to close.
    fn has_room(&self, _now_ms: u64) -> bool {
        self.live() < self.max_sessions || self.entries().values().any(|s| Arc::strong_count(s) == 1)
    }

    /// LIMIT-SESSIONS-1: a place for a new session. Expired sessions leave the pool first, then
    /// idle ones, oldest first, and each gives its place back when no connection holds it; a
    /// session a connection still holds keeps its place, pooled or not. When every live session
    /// is young or in use, the login is refused rather than opening more Iggy connections.
    /// LIMIT-SESSIONS-USER-1: a user at its cap makes room only from its own sessions: the idle
    /// one that goes is its own, and when all of its are in use its login is refused.
    fn take_slot(&self, now_ms: u64, user: &str) -> Result<SessionSlot, LoginError> {
        let full = match self.try_slot(user) {
            Ok(slot) => return Ok(slot),
            Err(full) => full,
        };
        let evicted = {
            let mut entries = self.entries();
            let mut evicted = Vec::new();
            let expired: Vec<[u8; 32]> = entries
                .iter()
                .filter(|(_, s)| now_ms.saturating_sub(s.opened_at_ms) >= self.lifetime_ms)
                .map(|(k, _)| *k)
                .collect();
            for key in expired {
                evicted.extend(entries.remove(&key));
            }
            let of_user = |s: &Session<B>| s.principal.as_ref().is_some_and(|p| p.username == user);
            let idle = entries
                .iter()
                .filter(|(_, s)| Arc::strong_count(s) == 1)
                .filter(|(_, s)| full == Full::Pool || of_user(s))
                .min_by_key(|(_, s)| s.opened_at_ms)
                .map(|(k, _)| *k);
            evicted.extend(idle.and_then(|k| entries.remove(&k)));
            evicted
        };
        // Dropped outside the lock: an idle one gives its place back here.
        drop(evicted);
        self.try_slot(user).map_err(|full| match full {
            Full::Pool => {
                crate::metrics::metrics().limit_hit("LIMIT-SESSIONS-1");
                LoginError::TooManySessions(self.max_sessions)
            }
            Full::User => {
                crate::metrics::metrics().limit_hit("LIMIT-SESSIONS-USER-1");
                LoginError::TooManySessionsForUser(self.max_per_user)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
    use crate::clock::SystemClock;
    use iggy_common::UserStatus;
    use std::sync::Arc;

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

    #[tokio::test(start_paused = true)]
    async fn auth_sasl_join_1_concurrent_logins_with_the_same_credentials_share_one_session() {
        let root = Arc::new(EmbeddedBackend::new(
            Arc::new(SystemClock),
            EmbeddedConfig {
                login_delay: std::time::Duration::from_millis(50),
                ..EmbeddedConfig::default()
            },
        ));
        root.create_user("ann", "secret", UserStatus::Active, None).unwrap();
        let pool = Arc::new(SessionPool::<EmbeddedBackend>::new(8, 60_000, [7; 32]));
        let logins: Vec<_> = (0..4)
            .map(|i| {
                let (root, pool) = (root.clone(), pool.clone());
                tokio::spawn(async move {
                    pool.login(&root, &Credentials::password("ann", "secret"), 0, i)
                        .await
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut sessions = Vec::new();
        for login in logins {
            sessions.push(login.await.unwrap().expect("logged in"));
        }
        assert_eq!(root.logins_attempted(), 1, "each login opened a session of its own");
        assert!(sessions.iter().all(|s| Arc::ptr_eq(s, &sessions[0])));
        assert_eq!(pool.live(), 1);
        // A wrong password does not join the right one's login, nor the right one its.
        let wrong = pool.login(&*root, &Credentials::password("ann", "wrong"), 0, 9).await;
        assert!(matches!(wrong, Err(LoginError::Refused(_))));
        assert_eq!(root.logins_attempted(), 2);
    }

    #[tokio::test]
    async fn limit_sessions_user_1_one_user_with_many_tokens_leaves_sessions_for_others() {
        let root = model();
        let (ann, _) = root
            .open_session(&Credentials::password("ann", "secret"))
            .await
            .unwrap();
        let pool = SessionPool::<EmbeddedBackend>::new(64, 60_000, [7; 32]);
        let mut held = Vec::new();
        for i in 0..20 {
            let token = ann.create_personal_access_token(&format!("t{i}"), None).unwrap();
            held.push(pool.login(&root, &Credentials::token("ann", token), 0, i).await);
        }
        let refused = held.iter().filter(|login| login.is_err()).count();
        assert_eq!(refused, 4, "ann's 17th and later sessions were opened");
        assert!(matches!(held[16], Err(LoginError::TooManySessionsForUser(16))));
        assert_eq!(pool.live(), 16);
        // Another user still logs in.
        let ben = pool.login(&root, &Credentials::password("ben", "secret"), 0, 99).await;
        assert!(ben.is_ok());
        // When one of ann's sessions is let go, another of hers takes its place, not a
        // stranger's: with every place of the pool taken, ann makes room from her own.
        let pool = SessionPool::<EmbeddedBackend>::new(3, 60_000, [7; 32]).with_max_sessions_per_user(2);
        let mut tokens = Vec::new();
        for i in 0..3 {
            tokens.push(ann.create_personal_access_token(&format!("u{i}"), None).unwrap());
        }
        let first = pool
            .login(&root, &Credentials::token("ann", tokens[0].clone()), 0, 1)
            .await
            .unwrap();
        let _second = pool
            .login(&root, &Credentials::token("ann", tokens[1].clone()), 10, 2)
            .await
            .unwrap();
        let ben = pool
            .login(&root, &Credentials::password("ben", "secret"), 20, 3)
            .await
            .unwrap();
        drop(ben);
        assert!(
            matches!(
                pool.login(&root, &Credentials::token("ann", tokens[2].clone()), 30, 4)
                    .await,
                Err(LoginError::TooManySessionsForUser(2))
            ),
            "ben's idle session is no room for ann"
        );
        drop(first);
        pool.login(&root, &Credentials::token("ann", tokens[2].clone()), 40, 5)
            .await
            .expect("ann's own idle session makes room");
        assert_eq!(pool.live(), 3);
    }

    #[tokio::test]
    async fn limit_sessions_1_an_expired_or_replaced_session_counts_until_dropped() {
        let root = model();
        let pool = SessionPool::<EmbeddedBackend>::new(1, 60_000, [7; 32]);
        let ann = pool
            .login(&root, &Credentials::password("ann", "secret"), 0, 1)
            .await
            .unwrap();
        // Past its lifetime, ann's session leaves the pool, but a connection still holds it
        // and its Iggy connections: no second session opens beside it.
        let ben = pool
            .login(&root, &Credentials::password("ben", "secret"), 60_000, 2)
            .await;
        assert!(
            matches!(ben, Err(LoginError::TooManySessions(1))),
            "{:?}",
            ben.map(|_| ())
        );
        assert_eq!(pool.live(), 1);
        drop(ann);
        // Idle now, it makes way for ben's and gives its place back.
        let ben = pool
            .login(&root, &Credentials::password("ben", "secret"), 60_000, 3)
            .await
            .unwrap();
        assert_eq!(pool.live(), 1);
        drop(ben);
        // A newer login replacing a pooled session in use: the old one counts until dropped.
        let pool = SessionPool::<EmbeddedBackend>::new(2, 60_000, [7; 32]);
        let first = pool
            .login(&root, &Credentials::password("cat", "secret"), 0, 4)
            .await
            .unwrap();
        let second = pool
            .login(&root, &Credentials::password("cat", "secret"), 30_000, 5)
            .await
            .unwrap();
        assert!(
            !Arc::ptr_eq(&first, &second),
            "past half its lifetime a session is replaced"
        );
        assert_eq!((pool.len(), pool.live()), (1, 2));
        assert!(matches!(
            pool.login(&root, &Credentials::password("ann", "secret"), 30_000, 6)
                .await,
            Err(LoginError::TooManySessions(2))
        ));
        drop(first);
        assert_eq!(pool.live(), 1);
    }
}
