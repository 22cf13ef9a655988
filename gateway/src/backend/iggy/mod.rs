//! The real backend: the port (`Backend`, `ConsumerOffsets`) over the pinned Iggy SDK
//! (`iggy` 0.11.0-edge.4), speaking TCP to an Iggy server (0.9.0-edge.5). It answers with the
//! semantics of the embedded model (`embedded.rs`) wherever the server allows it; where the
//! server cannot give an exact answer the choice is documented at the method.
//!
//! Connections:
//! - A pool of SDK clients, each connected and logged in at [`IggyBackend::connect`]. The appends
//!   of one partition always go through the same client (hash of stream, topic and partition),
//!   so the order of sends to a partition is the order they were issued; reads and admin calls
//!   go round-robin. An append larger than the server's disk read chunk goes in parts
//!   (APPEND-PARTS-1), sent back to back under that client's append lock, and reads end where a
//!   part ended when they can (FETCH-ALIGN-1): see `iggy_layout.rs`.
//! - One dedicated client per [`ClientId`] for consumer-group membership and the offsets stored
//!   under it, created on first use: Iggy ties group membership to the connection.
//!   [`ConsumerOffsets::release_client`] shuts that client down, which ends its memberships.
//!
//! Reconnection is this module's, not the SDK's. With its own reconnection enabled, the SDK
//! replays any request that failed on a broken connection once after reconnecting, sends
//! included, and with unlimited retries (the connection-string default) a call can hang for as
//! long as the server is away. So the SDK's reconnection is disabled, and here:
//! - before a call, a client known to be disconnected is reconnected (nothing was sent yet);
//! - a read, a metadata or admin call, or a consumer-group call that fails for the connection,
//!   or gets no answer within the node bound (CLUSTER-FAILOVER-3), reconnects that client and
//!   is retried while the failover bound allows;
//! - an append that fails for the connection is NOT retried: the server may or may not have
//!   stored it, and the error goes back to the producer (at-least-once). The client is marked
//!   broken, so the next call reconnects it first.
//! - a background task reconnects idle clients found disconnected every few seconds, so an idle
//!   client's heartbeat does not keep failing after an Iggy restart.
//!
//! Logins are this module's too (CLUSTER-ROSTER-2): the SDK's auto-login is off, because after it
//! the SDK follows the cluster's metadata to whatever address a node names and logs in there.
//! The gateway dials a roster member, logs in through the transport's own login (which follows
//! nothing), reads the cluster's metadata and moves to the leader itself, only to a member. The
//! credentials go to that login directly rather than through an `iggy://USER:PASS@HOST:PORT`
//! connection string: the SDK's parser does not unescape, so a password holding `@`, `:` or `?`
//! would not survive it.

use super::iggy_layout::{append_parts, PartEnds};
use super::roster::{leader_address, node_bound, parse_roster, Answer, Dial, RosterState, Route};
use super::{
    stored_bytes, watermarks_and_read, Backend, BackendError, ClientId, ConsumerOffsets, ReadLimits, TopicInfo,
    TopicSpec, Watermarks, READ_AHEAD_LOG_START_MAX_AGE,
};
use crate::auth::credentials::{Credentials as GatewayCredentials, Principal, SecretKind};
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, ClusterClient, Consumer, ConsumerGroupClient, ConsumerOffsetClient, Identifier,
    IggyClient, IggyDuration, IggyError, IggyExpiry, IggyMessage, IggyTimestamp, MessageClient, PartitionClient,
    Partitioning, PersonalAccessTokenClient, PollingStrategy, StreamClient, SystemClient, TcpClient, TcpClientConfig,
    TcpClientReconnectionConfig, TopicClient, TopicCreateOptions, TopicDetails, TopicUpdateOptions, UserClient,
};
use iggy_common::locking::IggyRwLockFn;
use iggy_common::{BinaryTransport, ClientState};
use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often a waiting Fetch is woken without an append of this gateway's. Iggy has no push
/// notification of new messages, so messages written by other producers (native Iggy clients,
/// other gateway instances) are only noticed at this interval; Fetch's own deadline (max_wait_ms)
/// still bounds every wait.
pub const WAKE_INTERVAL: Duration = Duration::from_millis(100);

/// Every this many wake ticks (5 s), disconnected idle clients are reconnected.
const HEAL_EVERY_TICKS: u64 = 50;

/// The SDK's heartbeat (ping) interval, its default.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// The consumer reads poll as. Reads never store an offset (auto-commit off, explicit offsets),
/// so this identity leaves nothing on the server.
const READER_CONSUMER: &str = "kafka-iggy-gateway.reader";

mod conn;
mod consumer_offsets;
mod convert;
mod reads;
#[cfg(test)]
mod tests;

pub use conn::IggyTls;
use conn::*;
use convert::*;
use reads::*;

/// Which pool client carries a partition's appends: always the same one, so a partition's
/// sends land in the order they were issued (DELIVERY-ORDER-1).
fn append_slot(stream: &str, topic: &str, partition: u32, pool: usize) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (stream, topic, partition).hash(&mut h);
    (h.finish() % pool.max(1) as u64) as usize
}

/// How many times an idempotent call is sent before the failover timeout ends it: enough to
/// move twice (a dead node, then a node that lost its primaryship), few enough not to spin.
const RETRY_ATTEMPTS: usize = 3;

/// CLUSTER-FAILOVER-2: the default bound on waiting for a failover, well under the SDK's 30 s
/// request timeout and above a failover with the server's default `heartbeat_timeout` of 5 s
/// (4.9 s measured, DIFF-15).
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Locks an append's parts are sent under (APPEND-PARTS-1), by hash of the partition: a fixed
/// number, so their memory is bounded whatever partitions come and go.
const APPEND_LOCK_STRIPES: usize = 64;

struct Inner {
    /// CLUSTER-FAILOVER-2: the longest a call waits for a primary, failover included.
    failover_timeout: Duration,
    target: Target,
    pool: Vec<Arc<Conn>>,
    next: AtomicUsize,
    groups: Mutex<HashMap<ClientId, Arc<Conn>>>,
    /// Shared by a backend and the sessions opened from it, so a Fetch in one principal's
    /// session wakes on another's append.
    appends: Arc<watch::Sender<u64>>,
    /// Whether this backend's keeper ticks `appends` (the root backend's does; sessions share it).
    wakes: bool,
    healing: AtomicBool,
    reader: Consumer,
    sizes: MessageSizes,
    log_starts: LogStarts,
    /// Striped by partition and shared with the sessions opened from this backend: held across
    /// an append's parts, so no other append through this gateway, whichever principal's,
    /// lands between them (APPEND-PARTS-1).
    append_locks: Arc<[tokio::sync::Mutex<()>]>,
    /// Shared by a backend and the sessions opened from it, as `appends` is: a consumer reads
    /// aligned to what another principal's producer appended (FETCH-ALIGN-1).
    part_ends: Arc<PartEnds>,
}

impl Inner {
    fn groups(&self) -> MutexGuard<'_, HashMap<ClientId, Arc<Conn>>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn any(&self) -> &Arc<Conn> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        &self.pool[i]
    }

    /// The dedicated client of `client`, created (not yet connected) on first use.
    fn member(&self, client: ClientId) -> Result<Arc<Conn>, IggyError> {
        let mut groups = self.groups();
        if let Some(conn) = groups.get(&client) {
            return Ok(conn.clone());
        }
        let conn = Arc::new(Conn::new(self.target.clone())?);
        groups.insert(client, conn.clone());
        Ok(conn)
    }

    /// When a call that starts now must have its answer, failover included (CLUSTER-FAILOVER-2).
    fn deadline(&self) -> Instant {
        Instant::now() + self.failover_timeout
    }

    /// Runs an idempotent call on `conn` within the failover timeout: connects first if needed
    /// (through the roster), and after a connection failure, a not-primary answer or a node that
    /// did not answer within the node bound (CLUSTER-FAILOVER-3), moves (CLUSTER-FAILOVER-1)
    /// and runs it again, while the timeout allows.
    async fn retrying<T, F, Fut>(&self, conn: &Arc<Conn>, op: F) -> Result<T, BackendError>
    where
        F: Fn(Arc<IggyClient>) -> Fut + Send,
        Fut: Future<Output = Result<T, IggyError>> + Send,
        T: Send,
    {
        let deadline = self.deadline();
        let started = Instant::now();
        let bound = self.target.node_bound();
        let mut last = None;
        for _ in 0..RETRY_ATTEMPTS {
            let epoch = conn.ensure_connected(deadline).await?;
            let since = Instant::now();
            let until = (since + bound).min(deadline);
            match tokio::time::timeout_at(until, op(conn.client())).await {
                Ok(Err(e)) if is_connection_error(&e) || answered_mid_election(&e) => {
                    tracing::debug!("Iggy call failed on the connection ({e}); moving and retrying");
                    let why = format!("failed a call ({e})");
                    let demote = (classify(&e) == Failure::Unknown || answered_mid_election(&e))
                        .then_some(Demotion { why: &why, since });
                    conn.mark_broken(epoch, demote).await;
                    last = Some(e.to_string());
                }
                Ok(other) => return other.map_err(BackendError::from),
                Err(_) => {
                    // CLUSTER-FAILOVER-3: a node that stalls is left for the others, within the
                    // same failover bound.
                    let why = format!("did not answer a call within {} ms", bound.as_millis());
                    conn.mark_broken(epoch, Some(Demotion { why: &why, since })).await;
                    last = Some(format!("the Iggy node {why}"));
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(BackendError::NoPrimary {
            waited_ms: started.elapsed().as_millis() as u64,
            reason: last.unwrap_or_else(|| "the Iggy node did not answer in time".into()),
        })
    }

    /// Runs a call that must not be repeated (a send, or a create or delete whose lost answer
    /// would come back as "exists" or "not found"): connects first if needed (moving to another
    /// node then is safe: nothing was sent), runs it once within the node bound
    /// (CLUSTER-FAILOVER-3), and after a connection failure or no answer replaces the client,
    /// demoting its node, so its next use reconnects first. CLUSTER-UNKNOWN-1: a call that was
    /// sent and got no answer is [`BackendError::OutcomeUnknown`], never a success and never
    /// sent again here; one that never reached a primary is [`BackendError::NoPrimary`].
    async fn once<T, F, Fut>(&self, conn: &Arc<Conn>, call: F) -> Result<T, BackendError>
    where
        F: FnOnce(Arc<IggyClient>) -> Fut,
        Fut: Future<Output = Result<T, IggyError>>,
    {
        let deadline = self.deadline();
        let started = Instant::now();
        let epoch = conn.ensure_connected(deadline).await?;
        let bound = self.target.node_bound();
        let since = Instant::now();
        let until = (since + bound).min(deadline);
        let e = match tokio::time::timeout_at(until, call(conn.client())).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => e,
            Err(_) => {
                let why = format!("did not answer a call within {} ms", bound.as_millis());
                conn.mark_broken(epoch, Some(Demotion { why: &why, since })).await;
                return Err(BackendError::OutcomeUnknown(format!("the Iggy node {why}")));
            }
        };
        match classify(&e) {
            Failure::Refused => Err(e.into()),
            Failure::NotSent => {
                conn.mark_broken(epoch, None).await;
                Err(BackendError::NoPrimary {
                    waited_ms: started.elapsed().as_millis() as u64,
                    reason: e.to_string(),
                })
            }
            Failure::Unknown => {
                let why = format!("failed a call ({e})");
                conn.mark_broken(epoch, Some(Demotion { why: &why, since })).await;
                Err(BackendError::OutcomeUnknown(e.to_string()))
            }
        }
    }

    /// An idempotent call on the next pool client.
    async fn pooled<T, F, Fut>(&self, op: F) -> Result<T, BackendError>
    where
        F: Fn(Arc<IggyClient>) -> Fut + Send,
        Fut: Future<Output = Result<T, IggyError>> + Send,
        T: Send,
    {
        let conn = self.any().clone();
        self.retrying(&conn, op).await
    }

    async fn topic_details(&self, stream: &str, topic: &str) -> Result<Option<TopicDetails>, BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let result = self
            .pooled(|c| {
                let (s, t) = (s.clone(), t.clone());
                async move { c.get_topic(&s, &t).await }
            })
            .await;
        match result {
            Err(BackendError::Iggy(e)) if is_not_found(&e) => Ok(None),
            other => other,
        }
    }

    /// A poll's messages and the partition's last offset, as the server answered them.
    async fn poll(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        strategy: PollingStrategy,
        count: u32,
    ) -> Result<(Vec<IggyMessage>, u64), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let polled = self
            .pooled(|c| {
                let (s, t, reader) = (s.clone(), t.clone(), self.reader.clone());
                async move {
                    c.poll_messages(&s, &t, Some(partition), &reader, &strategy, count, false)
                        .await
                }
            })
            .await?;
        Ok((polled.messages, polled.current_offset))
    }

    /// Reconnects disconnected clients, pool and per-`ClientId`, one at a time.
    async fn heal(&self) {
        let mut conns: Vec<Arc<Conn>> = self.pool.clone();
        conns.extend(self.groups().values().cloned());
        for conn in conns {
            let epoch = conn.epoch.load(Ordering::Acquire);
            let state = conn.state().await;
            if state != ClientState::Authenticated && state != ClientState::Shutdown {
                let _ = conn.reconnect(epoch, self.deadline(), false).await;
            }
        }
    }
}

/// Wakes waiting Fetches every [`WAKE_INTERVAL`] and reconnects idle clients now and then. Ends
/// when the backend is dropped.
async fn keeper(backend: Weak<Inner>) {
    let mut ticks = tokio::time::interval(WAKE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut n = 0u64;
    loop {
        ticks.tick().await;
        let Some(inner) = backend.upgrade() else {
            return;
        };
        if inner.wakes && inner.appends.receiver_count() > 0 {
            inner.appends.send_modify(|g| *g = g.wrapping_add(1));
        }
        n += 1;
        if n.is_multiple_of(HEAL_EVERY_TICKS) && !inner.healing.swap(true, Ordering::AcqRel) {
            tokio::spawn(async move {
                inner.heal().await;
                inner.healing.store(false, Ordering::Release);
            });
        }
    }
}

/// The backend on a real Iggy server.
pub struct IggyBackend {
    inner: Arc<Inner>,
    keeper: JoinHandle<()>,
}

impl Drop for IggyBackend {
    fn drop(&mut self) {
        self.keeper.abort();
        // A session's connections end with it (sessions come and go; the root lives as long as
        // the gateway). Shut down in the background when a runtime is running; otherwise
        // dropping the clients closes their sockets.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let mut conns: Vec<Arc<Conn>> = self.inner.pool.clone();
            conns.extend(self.inner.groups().drain().map(|(_, c)| c));
            runtime.spawn(async move {
                for conn in conns {
                    let _ = conn.client().shutdown().await;
                }
            });
        }
    }
}

/// SDK clients in a principal's session pool (AUTHZ-SESSION-1): sessions are many, so each
/// gets few connections; group membership clients come on top, one per offsets client.
pub const SESSION_POOL_SIZE: usize = 2;

impl IggyBackend {
    /// Opens `pool_size` clients (at least one) to the Iggy server at `address` (`HOST:PORT`),
    /// each connected and logged in as `username`. Fails if any of them cannot connect or log in.
    /// Must run inside a Tokio runtime (it starts a background task).
    pub async fn connect(
        address: &str,
        username: &str,
        password: &str,
        pool_size: usize,
    ) -> Result<Self, BackendError> {
        Self::connect_with_tls(address, username, password, IggyTls::default(), pool_size).await
    }

    /// [`IggyBackend::connect`], over TLS as `tls` says (AUTH-TLS-3).
    pub async fn connect_with_tls(
        address: &str,
        username: &str,
        password: &str,
        tls: IggyTls,
        pool_size: usize,
    ) -> Result<Self, BackendError> {
        Self::connect_cluster(address, username, password, tls, pool_size, DEFAULT_FAILOVER_TIMEOUT).await
    }

    /// [`IggyBackend::connect_with_tls`] to a cluster: `address` is its roster, one `HOST:PORT`
    /// or several comma separated (CLUSTER-ROSTER-1), and no call waits longer than
    /// `failover_timeout` for a primary to answer (CLUSTER-FAILOVER-2). Only roster members are
    /// dialled (CLUSTER-ROSTER-2).
    pub async fn connect_cluster(
        address: &str,
        username: &str,
        password: &str,
        tls: IggyTls,
        pool_size: usize,
        failover_timeout: Duration,
    ) -> Result<Self, BackendError> {
        Self::connect_roster(address, username, password, tls, pool_size, failover_timeout, false).await
    }

    /// [`IggyBackend::connect_cluster`], dialling also a leader that no member is when a member
    /// names it and `follow_unlisted_leader` says so (`iggy_follow_unlisted_leader`,
    /// CLUSTER-ROSTER-2).
    pub async fn connect_roster(
        address: &str,
        username: &str,
        password: &str,
        tls: IggyTls,
        pool_size: usize,
        failover_timeout: Duration,
        follow_unlisted_leader: bool,
    ) -> Result<Self, BackendError> {
        let members = parse_roster(address).map_err(|e| {
            tracing::error!("{e}");
            IggyError::InvalidServerAddress
        })?;
        let roster = RosterState::new(members).follow_unlisted(follow_unlisted_leader);
        let target = Target {
            roster: Arc::new(Mutex::new(roster)),
            appends_stalled: Arc::default(),
            credentials: GatewayCredentials::password(username, password),
            tls,
            failover_timeout,
            demotions: Arc::default(),
        };
        let append_locks = (0..APPEND_LOCK_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect();
        Self::open(
            target,
            pool_size,
            Arc::new(watch::Sender::new(0)),
            Arc::default(),
            append_locks,
            true,
            failover_timeout,
        )
        .await
    }

    /// Connects the pool: each client through the roster, one sweep (a gateway pointed at no
    /// live node fails at start rather than waiting).
    #[allow(clippy::too_many_arguments)]
    async fn open(
        target: Target,
        pool_size: usize,
        appends: Arc<watch::Sender<u64>>,
        part_ends: Arc<PartEnds>,
        append_locks: Arc<[tokio::sync::Mutex<()>]>,
        wakes: bool,
        failover_timeout: Duration,
    ) -> Result<Self, BackendError> {
        let mut pool = Vec::with_capacity(pool_size.max(1));
        for _ in 0..pool_size.max(1) {
            let conn = Arc::new(Conn::new(target.clone())?);
            let deadline = Instant::now() + failover_timeout;
            if let Err(e) = conn.reconnect(0, deadline, false).await {
                for opened in pool.iter().chain([&conn]) {
                    let _ = opened.client().shutdown().await;
                }
                return Err(e);
            }
            pool.push(conn);
        }
        let inner = Arc::new(Inner {
            failover_timeout,
            target,
            pool,
            next: AtomicUsize::new(0),
            groups: Mutex::new(HashMap::new()),
            appends,
            wakes,
            healing: AtomicBool::new(false),
            reader: Consumer::new(name(READER_CONSUMER)?),
            sizes: MessageSizes::default(),
            log_starts: LogStarts::default(),
            append_locks,
            part_ends,
        });
        let keeper = tokio::spawn(keeper(Arc::downgrade(&inner)));
        Ok(Self { inner, keeper })
    }

    /// The number of pooled clients.
    pub fn pool_size(&self) -> usize {
        self.inner.pool.len()
    }

    /// FETCH-ALIGN-1: the count `read`'s next poll of `count` from `start` is cut to, when it
    /// may end on a part this gateway appended; one place for the read and for its planned end
    /// (FETCH-READAHEAD-2), so the two cannot disagree.
    fn aligned_poll(
        &self,
        read: &ChunkedRead,
        stream: &str,
        topic: &str,
        partition: u32,
        start: u64,
        count: u32,
    ) -> Option<u32> {
        if !read.may_align(count) {
            return None;
        }
        self.inner
            .part_ends
            .aligned_count(stream, topic, partition, start, count)
    }

    /// A read in as many polls as its limits take, and the partition's last offset as the last
    /// poll reported it.
    async fn read_chunked(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Result<(Vec<IggyMessage>, u64), BackendError> {
        // A count of 0 polls nothing: the SDK refuses a poll of 0 messages; the model answers empty.
        let expected_size = self.inner.sizes.get(stream, topic, partition);
        let mut read = ChunkedRead::new(limits, expected_size);
        let mut last_offset = 0;
        loop {
            let count = read.next_count();
            if count == 0 {
                if !read.kept.is_empty() {
                    self.inner.sizes.remember(stream, topic, partition, read.average());
                }
                return Ok((read.kept, last_offset));
            }
            let start = read.next_offset(offset);
            // FETCH-ALIGN-1: end the poll, and the read, where a part this gateway appended ended.
            let aligned = self.aligned_poll(&read, stream, topic, partition, start, count);
            let count = aligned.unwrap_or(count);
            let from = PollingStrategy::offset(start);
            let (polled, partition_last) = self.inner.poll(stream, topic, partition, from, count).await?;
            last_offset = partition_last;
            read.take(polled, count);
            if aligned.is_some() {
                read.done = true;
            }
        }
    }
}

impl Backend for IggyBackend {
    fn kind(&self) -> &'static str {
        "iggy"
    }

    fn unavailable_reason(&self) -> Option<String> {
        let roster = self.inner.target.roster();
        roster
            .unavailable()
            .map(str::to_string)
            .or_else(|| roster.split_suspected(std::time::Instant::now()))
    }

    /// CLUSTER-SPLIT-1: a suspected split, which the metadata probe of `/readyz` cannot see.
    fn degraded_reason(&self) -> Option<String> {
        self.inner.target.roster().split_suspected(std::time::Instant::now())
    }

    /// A new pool of [`SESSION_POOL_SIZE`] clients logged in with `credentials`; the user is
    /// who Iggy says it is (`get_me`), named by its own account (`get_user` on oneself needs
    /// no permission).
    async fn open_session(&self, credentials: &GatewayCredentials) -> Result<(Self, Principal), BackendError> {
        let target = Target {
            credentials: credentials.clone(),
            ..self.inner.target.clone()
        };
        let session = Self::open(
            target,
            SESSION_POOL_SIZE,
            self.inner.appends.clone(),
            self.inner.part_ends.clone(),
            self.inner.append_locks.clone(),
            false,
            self.inner.failover_timeout,
        )
        .await?;
        let me = session.inner.pooled(|c| async move { c.get_me().await }).await?;
        let user_id = me.user_id.ok_or(IggyError::Unauthenticated)?;
        let user = session
            .inner
            .pooled(|c| async move { c.get_user(&Identifier::numeric(user_id)?).await })
            .await?
            .ok_or(IggyError::Unauthenticated)?;
        Ok((
            session,
            Principal {
                user_id,
                username: user.username,
            },
        ))
    }

    async fn ensure_stream(&self, stream: &str) -> Result<(), BackendError> {
        let s = name(stream).map_err(|_| IggyError::InvalidStreamName)?;
        let exists = self
            .inner
            .pooled(|c| {
                let s = s.clone();
                async move { c.get_stream(&s).await }
            })
            .await;
        match exists {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(BackendError::Iggy(e)) if is_not_found(&e) => {}
            Err(e) => return Err(e),
        }
        let created = self
            .inner
            .pooled(|c| {
                let stream = stream.to_string();
                async move { c.create_stream(&stream).await }
            })
            .await;
        match created {
            // Another gateway (or a retry of ours whose first answer was lost) created it.
            Ok(_) | Err(BackendError::Iggy(IggyError::StreamNameAlreadyExists(_))) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list_topics(&self, stream: &str) -> Result<Vec<TopicInfo>, BackendError> {
        let s = name(stream)?;
        let topics = self
            .inner
            .pooled(|c| {
                let s = s.clone();
                async move { c.get_topics(&s).await }
            })
            .await?;
        Ok(topics
            .into_iter()
            .map(|t| topic_info(t.name, t.partitions_count, t.message_expiry))
            .collect())
    }

    async fn get_topic(&self, stream: &str, topic: &str) -> Result<Option<TopicInfo>, BackendError> {
        if name(stream).is_err() || name(topic).is_err() {
            return Ok(None);
        }
        Ok(self
            .inner
            .topic_details(stream, topic)
            .await?
            .map(|t| topic_info(t.name, t.partitions_count, t.message_expiry)))
    }

    /// Not retried after a connection failure: a create whose answer was lost would be retried
    /// into `TopicNameAlreadyExists`, which would be wrong to report.
    async fn create_topic(&self, stream: &str, topic: &str, spec: TopicSpec) -> Result<(), BackendError> {
        let s = name(stream)?;
        if name(topic).is_err() {
            return Err(IggyError::InvalidTopicName.into());
        }
        let options = TopicCreateOptions {
            partitions_count: Some(spec.partitions),
            message_expiry: Some(expiry_to_iggy(spec.message_expiry_us)),
            ..TopicCreateOptions::default()
        };
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.create_topic(&s, topic, &options).await })
            .await?;
        Ok(())
    }

    async fn delete_topic(&self, stream: &str, topic: &str) -> Result<(), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.delete_topic(&s, &t).await })
            .await?;
        self.inner.part_ends.forget_topic(stream, topic);
        Ok(())
    }

    async fn add_partitions(&self, stream: &str, topic: &str, count: u32) -> Result<(), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.create_partitions(&s, &t, count).await })
            .await?;
        Ok(())
    }

    /// ALTERCONFIGS-1: Iggy's UpdateTopic with only the expiry set; the name stays, and every
    /// option left out keeps its value. Not retried after a connection failure, like the other
    /// topic changes.
    async fn set_message_expiry(
        &self,
        stream: &str,
        topic: &str,
        message_expiry_us: Option<u64>,
    ) -> Result<(), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let options = TopicUpdateOptions {
            message_expiry: Some(expiry_to_iggy(message_expiry_us)),
            ..TopicUpdateOptions::default()
        };
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.update_topic(&s, &t, topic, &options).await })
            .await?;
        Ok(())
    }

    /// One send per part (APPEND-PARTS-1) through the partition's own client, under its append
    /// lock; the base offset is the first part's. A failure is reported, never retried here:
    /// after a connection failure the server may have stored the messages or not.
    async fn append(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> Result<Option<u64>, BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let slot = append_slot(stream, topic, partition, self.inner.pool.len());
        let conn = self.inner.pool[slot].clone();
        let sizes: Vec<u64> = messages.iter().map(stored_bytes).collect();
        let parts = crate::backend::split_into_ranges(messages, &append_parts(&sizes));
        let parts_count = parts.len();
        let partitioning = Partitioning::partition_id(partition);
        let mut base_offset = None;
        let stripe = append_slot(stream, topic, partition, self.inner.append_locks.len());
        let _contiguous = self.inner.append_locks[stripe].lock().await;
        for (i, mut part) in parts.into_iter().enumerate() {
            // A client known to be broken is reconnected (through the roster) before anything is
            // sent; the send itself is never repeated. CLUSTER-UNKNOWN-1: a send whose node
            // failed before answering is OutcomeUnknown, answered as a retriable error, and the
            // producer's retry is what DELIVERY-2 counts as at-least-once (an idempotent one's writes only
            // the parts not stored, PRODUCER-DUP-2).
            let sent = self
                .inner
                .once(&conn, |c| {
                    let (part, s, t, partitioning) = (&mut part, &s, &t, &partitioning);
                    async move { c.send_messages(s, t, partitioning, part).await }
                })
                .await;
            // CLUSTER-SPLIT-1: appends that stall while the metadata leader answers.
            let stalled = &self.inner.target.appends_stalled;
            match &sent {
                Ok(_) => {
                    if stalled.swap(false, Ordering::AcqRel) {
                        self.inner.target.roster().on_append_answered();
                    }
                }
                Err(e) if e.is_unavailable() || matches!(e, BackendError::OutcomeUnknown(_)) => {
                    let now = std::time::Instant::now();
                    let mut roster = self.inner.target.roster();
                    stalled.store(true, Ordering::Release);
                    if roster.on_append_unanswered(now) {
                        if let Some(reason) = roster.split_suspected(now) {
                            tracing::error!("{reason} (CLUSTER-SPLIT-1)");
                        }
                    }
                }
                Err(_) => {}
            }
            let e = match sent {
                Ok(response) => {
                    self.inner.appends.send_modify(|g| *g = g.wrapping_add(1));
                    let part_base = response.confirmations.first().map(|c| c.base_offset);
                    if let Some(base) = part_base {
                        self.inner
                            .part_ends
                            .remember(stream, topic, partition, base + part.len() as u64);
                    }
                    if i == 0 {
                        base_offset = part_base;
                    }
                    continue;
                }
                Err(e) => e,
            };
            if i > 0 {
                tracing::warn!(
                    "append to {stream}/{topic}/{partition}: part {} of {parts_count} failed after earlier parts were written (DELIVERY-2, PRODUCER-DUP-2): {e}",
                    i + 1
                );
            }
            if e.is_unavailable() {
                tracing::warn!("append to {stream}/{topic}/{partition} failed on the connection, not retried: {e}");
            }
            return Err(e);
        }
        Ok(base_offset)
    }

    /// Polls by explicit offset with a consumer that stores nothing, then cuts to the byte limit.
    async fn read(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Result<Vec<IggyMessage>, BackendError> {
        Ok(self.read_chunked(stream, topic, partition, offset, limits).await?.0)
    }

    /// FETCH-READAHEAD-2: a read whose first poll [`read_chunked`](Self::read_chunked) would
    /// end on a part this gateway appended (FETCH-ALIGN-1) ends there, so its end is known
    /// before it is made.
    fn planned_read_end(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Option<u64> {
        let read = ChunkedRead::new(limits, self.inner.sizes.get(stream, topic, partition));
        let aligned = self.aligned_poll(&read, stream, topic, partition, offset, read.next_count())?;
        Some(offset + u64::from(aligned))
    }

    /// FETCH-READAHEAD-1: a poll answers the partition's last offset with its messages, so a read
    /// that finds messages needs no `get_topic` for the high watermark, only a log start offset
    /// asked less than [`READ_AHEAD_LOG_START_MAX_AGE`] ago. Otherwise both are asked at once.
    async fn read_with_watermarks(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> (Result<Watermarks, BackendError>, Result<Vec<IggyMessage>, BackendError>) {
        let Some(log_start_offset) = self.inner.log_starts.fresh(stream, topic, partition) else {
            return watermarks_and_read(self, stream, topic, partition, offset, limits).await;
        };
        match self.read_chunked(stream, topic, partition, offset, limits).await {
            Ok((kept, last_offset)) => match read_watermarks(log_start_offset, last_offset, &kept) {
                Some(marks) => (Ok(marks), Ok(kept)),
                None => (self.watermarks(stream, topic, partition).await, Ok(kept)),
            },
            Err(e) => (self.watermarks(stream, topic, partition).await, Err(e)),
        }
    }

    /// From `get_topic`'s partition counters (see [`high_watermark`]). The log start is 0 when
    /// the partition still holds as many messages as were ever appended; otherwise (expiry
    /// removed segments) it is the offset of the first message a poll from offset 0 returns.
    async fn watermarks(&self, stream: &str, topic: &str, partition: u32) -> Result<Watermarks, BackendError> {
        let details = self
            .inner
            .topic_details(stream, topic)
            .await?
            .ok_or_else(|| IggyError::TopicNameNotFound(topic.to_string(), stream.to_string()))?;
        let p = details
            .partitions
            .iter()
            .find(|p| p.id == partition)
            .ok_or_else(|| IggyError::ResourceNotFound(format!("partition {partition} of {stream}/{topic}")))?;
        let high_watermark = high_watermark(p.messages_count, p.current_offset);
        let log_start_offset = if p.messages_count == 0 {
            high_watermark
        } else if p.messages_count >= high_watermark {
            0
        } else {
            let (first, _) = self
                .inner
                .poll(stream, topic, partition, PollingStrategy::offset(0), 1)
                .await?;
            first.first().map_or(high_watermark, |m| m.header.offset)
        };
        self.inner
            .log_starts
            .remember(stream, topic, partition, log_start_offset);
        Ok(Watermarks {
            log_start_offset,
            high_watermark,
        })
    }

    async fn offset_for_timestamp(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_us: u64,
    ) -> Result<Option<(u64, u64)>, BackendError> {
        let (messages, _) = self
            .inner
            .poll(
                stream,
                topic,
                partition,
                PollingStrategy::timestamp(IggyTimestamp::from(timestamp_us)),
                1,
            )
            .await?;
        Ok(messages.first().map(|m| (m.header.offset, m.header.timestamp)))
    }

    /// Moves after each append through this backend, and every [`WAKE_INTERVAL`] while a Fetch
    /// waits (the server cannot tell of other producers' appends; see [`WAKE_INTERVAL`]).
    fn append_generation(&self) -> u64 {
        *self.inner.appends.borrow()
    }

    async fn wait_for_append(&self, seen: u64) {
        let mut rx = self.inner.appends.subscribe();
        // The sender lives as long as the backend; the keeper moves the value at least every
        // WAKE_INTERVAL while this receiver exists.
        let _ = rx.wait_for(|g| *g != seen).await;
    }
}
