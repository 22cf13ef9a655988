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
//! - a read, a metadata or admin call, or a consumer-group call that fails for the connection
//!   reconnects that client once and is retried once;
//! - an append that fails for the connection is NOT retried: the server may or may not have
//!   stored it, and the error goes back to the producer (at-least-once). The client is marked
//!   broken, so the next call reconnects it first.
//! - a background task reconnects idle clients found disconnected every few seconds, so an idle
//!   client's heartbeat does not keep failing after an Iggy restart.
//!
//! Credentials go into the SDK's TCP configuration directly rather than through an
//! `iggy://USER:PASS@HOST:PORT` connection string: the SDK's parser does not unescape, so a
//! password holding `@`, `:` or `?` would not survive it. The effect is the same (auto-login on
//! every connect).

use super::iggy_layout::{append_parts, PartEnds};
use super::roster::{leader_address, parse_roster, Answer, RosterState};
use super::{
    stored_bytes, watermarks_and_read, Backend, BackendError, ClientId, ConsumerOffsets, ReadLimits, TopicInfo,
    TopicSpec, Watermarks, READ_AHEAD_LOG_START_MAX_AGE,
};
use crate::auth::credentials::{Credentials as GatewayCredentials, Principal, SecretKind};
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, ClusterClient, Consumer, ConsumerGroupClient, ConsumerOffsetClient, Credentials,
    Identifier, IggyClient, IggyDuration, IggyError, IggyExpiry, IggyMessage, IggyTimestamp, MessageClient,
    PartitionClient, Partitioning, PollingStrategy, StreamClient, SystemClient, TcpClient, TcpClientConfig,
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

/// Where and as whom to connect; kept to open the per-`ClientId` clients later.
#[derive(Clone)]
struct Target {
    /// CLUSTER-ROSTER-1: the cluster's members, and what the backend learned of them; shared by
    /// the root backend and every session opened from it.
    roster: Arc<Mutex<RosterState>>,
    /// Whether the roster holds unanswered appends (CLUSTER-SPLIT-1), so that an answered
    /// append, every Produce's case, takes the roster's lock only to end a stall.
    appends_stalled: Arc<AtomicBool>,
    credentials: GatewayCredentials,
    tls: IggyTls,
}

/// TLS to the Iggy server (AUTH-TLS-3): off by default.
#[derive(Debug, Clone, Default)]
pub struct IggyTls {
    pub enabled: bool,
    /// The name the server's certificate must carry; empty: the host of the address.
    pub domain: String,
    /// A CA file to trust instead of the system's roots.
    pub ca_file: Option<String>,
}

impl Target {
    fn roster(&self) -> MutexGuard<'_, RosterState> {
        self.roster.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An SDK client for the node at `address` that logs in on every connect and does not
    /// reconnect by itself. The SDK follows the cluster's metadata leader from there
    /// (`leader_aware`), but only ever redials the node it last reached: moving to another node
    /// takes a new client (docs/decisions.md, "Iggy cluster: a roster around the SDK").
    fn client_for(&self, address: &str) -> Result<IggyClient, IggyError> {
        let secret = self.credentials.secret.expose().to_string().into();
        let login = match self.credentials.kind {
            SecretKind::Password => Credentials::UsernamePassword(self.credentials.username.clone(), secret),
            SecretKind::PersonalAccessToken => Credentials::PersonalAccessToken(secret),
        };
        let domain = if self.tls.domain.is_empty() {
            address.rsplit_once(':').map_or(address, |(host, _)| host).to_string()
        } else {
            self.tls.domain.clone()
        };
        let config = TcpClientConfig {
            server_address: address.to_string(),
            auto_login: AutoLogin::Enabled(login),
            reconnection: TcpClientReconnectionConfig {
                enabled: false,
                max_retries: Some(0),
                interval: IggyDuration::from(Duration::from_secs(1)),
                // No cool-down before a reconnect: this module reconnects at most once per call.
                reestablish_after: IggyDuration::from(Duration::ZERO),
            },
            heartbeat_interval: IggyDuration::from(HEARTBEAT_INTERVAL),
            nodelay: true,
            tls_enabled: self.tls.enabled,
            tls_domain: domain,
            tls_ca_file: self.tls.ca_file.clone(),
            ..TcpClientConfig::default()
        };
        let tcp = TcpClient::create(Arc::new(config))?;
        Ok(IggyClient::create(ClientWrapper::Tcp(tcp), None, None))
    }

    /// A client, not connected, for the first node the roster would dial.
    fn client(&self) -> Result<IggyClient, IggyError> {
        let first = self.roster().candidates().into_iter().next().unwrap_or_default();
        self.client_for(&first)
    }
}

/// How long a reconnect that found every roster member down waits before sweeping the roster
/// again, while the failover timeout allows: about the cluster's election time, so a sweep
/// does not spin while the survivors elect a primary.
const SWEEP_PAUSE: Duration = Duration::from_millis(200);

/// How a failed call left the request (CLUSTER-UNKNOWN-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The server answered: the request was refused, nothing to do with a failover.
    Refused,
    /// The request never reached a primary that could apply it (no connection, a refused
    /// connection, a node that said it was not primary): safe to send again anywhere.
    NotSent,
    /// The request was sent and the connection broke or timed out before the answer, or the
    /// server said it could not commit it yet: the server may or may not apply it.
    Unknown,
}

/// CLUSTER-UNKNOWN-1: which of [`Failure`] an SDK error is.
fn classify(e: &IggyError) -> Failure {
    match e {
        IggyError::NotConnected
        | IggyError::CannotEstablishConnection
        | IggyError::ClientShutdown
        | IggyError::Unauthenticated
        | IggyError::TransientNotAccepted => Failure::NotSent,
        IggyError::Disconnected
        | IggyError::EmptyResponse
        | IggyError::StaleClient
        | IggyError::TcpError
        | IggyError::TransientNotCommitted => Failure::Unknown,
        _ => Failure::Refused,
    }
}

/// One SDK client and its reconnection bookkeeping. The client is replaced, not reconnected,
/// when the backend moves to another node or gives up on a call that did not answer in time
/// (the SDK's own request task may still hold the old one's socket for up to 30 s).
struct Conn {
    client: std::sync::RwLock<Arc<IggyClient>>,
    target: Target,
    /// Moves on every reconnect (or forced disconnect), so concurrent callers that saw the same
    /// failure reconnect only once.
    epoch: AtomicU64,
    reconnecting: tokio::sync::Mutex<()>,
}

impl Conn {
    fn new(target: Target) -> Result<Self, IggyError> {
        Ok(Self {
            client: std::sync::RwLock::new(Arc::new(target.client()?)),
            target,
            epoch: AtomicU64::new(0),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The current SDK client.
    fn client(&self) -> Arc<IggyClient> {
        self.client.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `client` in place and shuts the old one down in the background.
    fn install(&self, client: Arc<IggyClient>) {
        let old = std::mem::replace(&mut *self.client.write().unwrap_or_else(|e| e.into_inner()), client);
        retire(old);
    }

    async fn state(&self) -> ClientState {
        let client = self.client();
        let wrapper = client.client();
        let guard = wrapper.read().await;
        match &*guard {
            ClientWrapper::Tcp(tcp) => tcp.get_state().await,
            // Only TCP clients are built here.
            _ => ClientState::Authenticated,
        }
    }

    /// Reconnects the client unless it is logged in, within `deadline`; returns the epoch to
    /// pass to [`Conn::mark_broken`] if the following call fails.
    async fn ensure_connected(&self, deadline: Instant) -> Result<u64, BackendError> {
        let epoch = self.epoch.load(Ordering::Acquire);
        if self.state().await == ClientState::Authenticated {
            return Ok(epoch);
        }
        self.reconnect(epoch, deadline, true).await?;
        Ok(self.epoch.load(Ordering::Acquire))
    }

    /// CLUSTER-FAILOVER-1: a new client, logged in, on the first roster member that answers
    /// (the SDK then moves it to the metadata leader), unless another caller already reconnected
    /// since `seen`. Sweeps the roster once, or, with `until_deadline`, again after a pause while
    /// `deadline` allows; each node's answer goes to the roster, and the leader the cluster's
    /// metadata names is remembered, so later dials go there first. A login refusal ends it at
    /// once (it is the same on every node). After only one sweep the last SDK error is returned,
    /// so a gateway pointed at nothing fails at start with `CannotEstablishConnection`;
    /// otherwise [`BackendError::NoPrimary`] (CLUSTER-FAILOVER-2).
    async fn reconnect(&self, seen: u64, deadline: Instant, until_deadline: bool) -> Result<(), BackendError> {
        let started = Instant::now();
        let no_primary = |reason: String| BackendError::NoPrimary {
            waited_ms: started.elapsed().as_millis() as u64,
            reason,
        };
        let Ok(_guard) = tokio::time::timeout_at(deadline, self.reconnecting.lock()).await else {
            return Err(no_primary("another reconnect of this client is still under way".into()));
        };
        let result = self.sweep(seen, deadline, until_deadline, &no_primary).await;
        match &result {
            // A login refusal says nothing about the cluster.
            Err(e) if e.is_unavailable() => self.target.roster().on_unavailable(format!("no Iggy primary: {e}")),
            _ => {}
        }
        result
    }

    /// [`Conn::reconnect`]'s sweeps over the roster, under its lock.
    async fn sweep(
        &self,
        seen: u64,
        deadline: Instant,
        until_deadline: bool,
        no_primary: &(dyn Fn(String) -> BackendError + Send + Sync),
    ) -> Result<(), BackendError> {
        if self.epoch.load(Ordering::Acquire) != seen && self.state().await == ClientState::Authenticated {
            return Ok(());
        }
        let mut last = IggyError::CannotEstablishConnection;
        let mut why = Vec::new();
        loop {
            let candidates = self.target.roster().candidates();
            for address in candidates {
                let client = Arc::new(self.target.client_for(&address)?);
                let connected = tokio::time::timeout_at(deadline, client.connect()).await;
                match connected {
                    Ok(Ok(())) => {
                        self.target.roster().on_answer(&address, Answer::Connected);
                        // Learn the leader, so later dials go there first; the SDK has moved
                        // this client there already when there is one.
                        if let Ok(Ok(metadata)) = tokio::time::timeout_at(deadline, client.get_cluster_metadata()).await
                        {
                            let leader = leader_address(&metadata);
                            tracing::debug!("Iggy cluster metadata from {address}: leader {leader:?}");
                            self.target.roster().on_answer(&address, Answer::Leader(leader));
                        }
                        tracing::info!("connected to Iggy through {address}");
                        self.install(client);
                        self.epoch.fetch_add(1, Ordering::AcqRel);
                        return Ok(());
                    }
                    Ok(Err(e)) if classify(&e) == Failure::Refused => {
                        retire(client);
                        tracing::warn!("Iggy at {address} refused the login: {e}");
                        return Err(e.into());
                    }
                    Ok(Err(e)) => {
                        retire(client);
                        tracing::warn!("Iggy at {address} did not take the connection: {e}");
                        self.target.roster().on_answer(&address, Answer::Down);
                        why.push(format!("{address}: {e}"));
                        last = e;
                    }
                    Err(_) => {
                        retire(client);
                        self.target.roster().on_answer(&address, Answer::Down);
                        why.push(format!("{address}: no answer in time"));
                        return Err(no_primary(why.join("; ")));
                    }
                }
            }
            if !until_deadline {
                return Err(last.into());
            }
            let pause = Instant::now() + SWEEP_PAUSE;
            if pause >= deadline {
                return Err(no_primary(why.join("; ")));
            }
            tokio::time::sleep_until(pause).await;
            why.clear();
        }
    }

    /// Replaces the client after a failure whose outcome is unknown or a node that stopped
    /// answering, so that the next call reconnects (through the roster) before sending.
    async fn mark_broken(&self, seen: u64) {
        let _guard = self.reconnecting.lock().await;
        if self.epoch.load(Ordering::Acquire) == seen {
            if let Ok(fresh) = self.target.client() {
                self.install(Arc::new(fresh));
            }
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Shuts a client down in the background (its socket may be held by the SDK's request task
/// for a while), or drops it when no runtime runs.
fn retire(client: Arc<IggyClient>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = client.shutdown().await;
        });
    }
}

/// Errors that say the connection, not the request, failed.
fn is_connection_error(e: &IggyError) -> bool {
    classify(e) != Failure::Refused
}

/// Errors that say the stream or topic does not exist.
fn is_not_found(e: &IggyError) -> bool {
    matches!(
        e,
        IggyError::StreamNameNotFound(_)
            | IggyError::StreamIdNotFound(_)
            | IggyError::TopicNameNotFound(..)
            | IggyError::TopicIdNotFound(..)
            | IggyError::ResourceNotFound(_)
    )
}

fn name(value: &str) -> Result<Identifier, IggyError> {
    Identifier::named(value)
}

/// The model's expiry (`None`: never) as Iggy's. Iggy's wire value 0 means "server default", so
/// an expiry of 0 µs cannot be expressed; it is sent as 1 µs.
fn expiry_to_iggy(expiry_us: Option<u64>) -> IggyExpiry {
    match expiry_us {
        None | Some(u64::MAX) => IggyExpiry::NeverExpire,
        Some(us) => IggyExpiry::ExpireDuration(IggyDuration::from(us.max(1))),
    }
}

/// Iggy's expiry as the model's. The server resolves "server default" at creation, so it should
/// not come back; if it does it is reported as never (the server's shipped default).
fn expiry_from_iggy(expiry: IggyExpiry) -> Option<u64> {
    match expiry {
        IggyExpiry::ExpireDuration(d) => Some(d.as_micros()),
        IggyExpiry::NeverExpire | IggyExpiry::ServerDefault => None,
    }
}

fn topic_info(name: String, partitions: u32, expiry: IggyExpiry) -> TopicInfo {
    TopicInfo {
        name,
        partitions,
        message_expiry_us: expiry_from_iggy(expiry),
    }
}

/// The high watermark (last offset + 1; 0 when nothing was ever appended) from a partition's
/// `messages_count` and `current_offset` (its last offset, 0 both when empty and after one
/// message: DIFF-7).
///
/// When every retained message has expired, `messages_count` is 0 while `current_offset` still
/// names the last offset ever appended; the watermark is then `current_offset + 1`. The one case
/// this cannot tell apart: a partition whose only message (offset 0) has expired reads as empty
/// (watermark 0 instead of 1). Nothing is retained in either case, so a reader misses nothing;
/// only the reported offsets differ by one.
fn high_watermark(messages_count: u64, current_offset: u64) -> u64 {
    if messages_count == 0 && current_offset == 0 {
        0
    } else {
        current_offset + 1
    }
}

/// The first poll of a read asks for this many messages when the partition's message size is
/// not known yet: small messages fill a Fetch in a few polls, and large ones do not drag
/// megabytes past the byte limit over the wire.
const FIRST_POLL_MESSAGES: u32 = 64;

/// Partitions whose average message size is remembered; past it the memory is cleared, so it
/// stays bounded whatever topics come and go.
const REMEMBERED_SIZES: usize = 16_384;

/// Per partition, the average message size (payload and headers, bytes) the last read saw, so
/// the next read's first poll asks for about what its byte limit holds: one round trip per
/// Fetch instead of two when sizes are steady.
#[derive(Default)]
struct MessageSizes(Mutex<HashMap<PartitionKey, u64>>);

impl MessageSizes {
    fn get(&self, stream: &str, topic: &str, partition: u32) -> Option<u64> {
        let sizes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sizes.get(&(stream.to_string(), topic.to_string(), partition)).copied()
    }

    fn remember(&self, stream: &str, topic: &str, partition: u32, average: u64) {
        let mut sizes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if sizes.len() >= REMEMBERED_SIZES {
            sizes.clear();
        }
        sizes.insert((stream.to_string(), topic.to_string(), partition), average);
    }
}

/// Per partition, the log start offset the last `watermarks` call found and when, so a read made
/// ahead can report it without asking again while it is younger than
/// [`READ_AHEAD_LOG_START_MAX_AGE`]; bounded as [`MessageSizes`] is.
#[derive(Default)]
struct LogStarts(Mutex<HashMap<PartitionKey, (u64, Instant)>>);

/// Stream, topic and partition.
type PartitionKey = (String, String, u32);

impl LogStarts {
    fn fresh(&self, stream: &str, topic: &str, partition: u32) -> Option<u64> {
        let starts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (start, at) = starts.get(&(stream.to_string(), topic.to_string(), partition))?;
        (at.elapsed() < READ_AHEAD_LOG_START_MAX_AGE).then_some(*start)
    }

    fn remember(&self, stream: &str, topic: &str, partition: u32, log_start_offset: u64) {
        let mut starts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if starts.len() >= REMEMBERED_SIZES {
            starts.clear();
        }
        starts.insert(
            (stream.to_string(), topic.to_string(), partition),
            (log_start_offset, Instant::now()),
        );
    }
}

/// The watermarks of a read that found `kept` from a partition whose log started at
/// `log_start_offset` a moment ago, given the partition's last offset as the read's last poll
/// reported it: `None` when the read found nothing (an empty partition's last offset reads as
/// 0, as one holding a single message does, so only a full `watermarks` call tells them apart).
fn read_watermarks(log_start_offset: u64, last_offset: u64, kept: &[IggyMessage]) -> Option<Watermarks> {
    let last_kept = kept.last()?.header.offset;
    Some(Watermarks {
        log_start_offset,
        high_watermark: last_offset.max(last_kept) + 1,
    })
}

/// One read's progress over several polls. Iggy's poll takes a count, not a byte limit; asking
/// for the read's whole message limit at once pulled up to 10,000 messages over the wire to
/// keep the first megabyte. So each poll asks for as many messages as the bytes left hold at
/// the average size kept so far (plus one, so every poll makes progress), and messages are kept
/// while their bytes fit the limit; the first is always kept.
struct ChunkedRead {
    limits: ReadLimits,
    /// The partition's average message size from an earlier read, if known.
    expected_size: Option<u64>,
    kept: Vec<IggyMessage>,
    kept_bytes: u64,
    /// Set once a message did not fit or a poll came back short (the partition's end).
    done: bool,
}

impl ChunkedRead {
    fn new(limits: ReadLimits, expected_size: Option<u64>) -> Self {
        Self {
            limits,
            expected_size,
            kept: Vec::new(),
            kept_bytes: 0,
            done: false,
        }
    }

    /// How many messages the next poll asks for; 0 when the read is complete.
    fn next_count(&self) -> u32 {
        let left = self.limits.max_messages.saturating_sub(self.kept.len() as u32);
        if self.done || left == 0 {
            return 0;
        }
        let average = match (self.kept.is_empty(), self.expected_size) {
            (true, None) => return FIRST_POLL_MESSAGES.min(left),
            (true, Some(expected)) => expected.max(1),
            (false, _) => self.average(),
        };
        let fits = self.limits.max_bytes.saturating_sub(self.kept_bytes) / average + 1;
        fits.min(u64::from(left)) as u32
    }

    /// FETCH-ALIGN-1: whether a poll of `count` may be ended early on a part. Only when it asks
    /// fewer messages than the read's count limit leaves, that is when bytes, not the count,
    /// decide where the read ends: a read asked for `n` messages that fit is given all `n`, as
    /// from the model (BACKEND-MODEL-1).
    fn may_align(&self, count: u32) -> bool {
        count < self.limits.max_messages.saturating_sub(self.kept.len() as u32)
    }

    /// The average size of the messages kept so far (at least 1).
    fn average(&self) -> u64 {
        (self.kept_bytes / self.kept.len().max(1) as u64).max(1)
    }

    /// The offset the next poll starts from, given the read's first offset.
    fn next_offset(&self, first: u64) -> u64 {
        self.kept.last().map_or(first, |m| m.header.offset + 1)
    }

    /// Keeps what fits of a poll that asked for `asked` messages.
    fn take(&mut self, polled: Vec<IggyMessage>, asked: u32) {
        self.done = (polled.len() as u32) < asked;
        for message in polled {
            let size = stored_bytes(&message);
            if !self.kept.is_empty() && self.kept_bytes + size > self.limits.max_bytes {
                self.done = true;
                return;
            }
            self.kept_bytes += size;
            self.kept.push(message);
        }
    }
}

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
    /// stopped answering, moves (CLUSTER-FAILOVER-1) and runs it again, while the timeout
    /// allows.
    async fn retrying<T, F, Fut>(&self, conn: &Arc<Conn>, op: F) -> Result<T, BackendError>
    where
        F: Fn(Arc<IggyClient>) -> Fut + Send,
        Fut: Future<Output = Result<T, IggyError>> + Send,
        T: Send,
    {
        let deadline = self.deadline();
        let started = Instant::now();
        let mut last = None;
        for _ in 0..RETRY_ATTEMPTS {
            let epoch = conn.ensure_connected(deadline).await?;
            match tokio::time::timeout_at(deadline, op(conn.client())).await {
                Ok(Err(e)) if is_connection_error(&e) => {
                    tracing::debug!("Iggy call failed on the connection ({e}); moving and retrying");
                    conn.mark_broken(epoch).await;
                    last = Some(e);
                }
                Ok(other) => return other.map_err(BackendError::from),
                Err(_) => {
                    conn.mark_broken(epoch).await;
                    last = None;
                    break;
                }
            }
        }
        Err(BackendError::NoPrimary {
            waited_ms: started.elapsed().as_millis() as u64,
            reason: last.map_or_else(|| "the Iggy node did not answer in time".into(), |e| e.to_string()),
        })
    }

    /// Runs a call that must not be repeated (a send, or a create or delete whose lost answer
    /// would come back as "exists" or "not found"): connects first if needed (moving to another
    /// node then is safe: nothing was sent), runs it once within the failover timeout, and
    /// after a connection failure or no answer replaces the client so its next use reconnects
    /// first. CLUSTER-UNKNOWN-1: a call that was sent and got no answer is
    /// [`BackendError::OutcomeUnknown`], never a success and never sent again here; one that
    /// never reached a primary is [`BackendError::NoPrimary`].
    async fn once<T, F, Fut>(&self, conn: &Arc<Conn>, call: F) -> Result<T, BackendError>
    where
        F: FnOnce(Arc<IggyClient>) -> Fut,
        Fut: Future<Output = Result<T, IggyError>>,
    {
        let deadline = self.deadline();
        let started = Instant::now();
        let epoch = conn.ensure_connected(deadline).await?;
        let e = match tokio::time::timeout_at(deadline, call(conn.client())).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) => e,
            Err(_) => {
                conn.mark_broken(epoch).await;
                return Err(BackendError::OutcomeUnknown(format!(
                    "no answer within the failover timeout ({} ms)",
                    self.failover_timeout.as_millis()
                )));
            }
        };
        match classify(&e) {
            Failure::Refused => Err(e.into()),
            Failure::NotSent => {
                conn.mark_broken(epoch).await;
                Err(BackendError::NoPrimary {
                    waited_ms: started.elapsed().as_millis() as u64,
                    reason: e.to_string(),
                })
            }
            Failure::Unknown => {
                conn.mark_broken(epoch).await;
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
    /// `failover_timeout` for a primary to answer (CLUSTER-FAILOVER-2).
    pub async fn connect_cluster(
        address: &str,
        username: &str,
        password: &str,
        tls: IggyTls,
        pool_size: usize,
        failover_timeout: Duration,
    ) -> Result<Self, BackendError> {
        let members = parse_roster(address).map_err(|e| {
            tracing::error!("{e}");
            IggyError::InvalidServerAddress
        })?;
        let target = Target {
            roster: Arc::new(Mutex::new(RosterState::new(members))),
            appends_stalled: Arc::default(),
            credentials: GatewayCredentials::password(username, password),
            tls,
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

    /// A new pool of [`SESSION_POOL_SIZE`] clients logged in with `credentials`; the user is
    /// who Iggy says it is (`get_me`), named by its own account (`get_user` on oneself needs
    /// no permission).
    async fn open_session(&self, credentials: &GatewayCredentials) -> Result<(Self, Principal), BackendError> {
        let target = Target {
            roster: self.inner.target.roster.clone(),
            appends_stalled: self.inner.target.appends_stalled.clone(),
            credentials: credentials.clone(),
            tls: self.inner.target.tls.clone(),
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
        mut messages: Vec<IggyMessage>,
    ) -> Result<Option<u64>, BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let slot = append_slot(stream, topic, partition, self.inner.pool.len());
        let conn = self.inner.pool[slot].clone();
        let sizes: Vec<u64> = messages.iter().map(stored_bytes).collect();
        // Split from the back so each part is moved out without copying the messages.
        let mut parts: Vec<Vec<IggyMessage>> = append_parts(&sizes)
            .iter()
            .rev()
            .map(|part| messages.split_off(part.start))
            .collect();
        parts.reverse();
        let parts_count = parts.len();
        let partitioning = Partitioning::partition_id(partition);
        let mut base_offset = None;
        let stripe = append_slot(stream, topic, partition, self.inner.append_locks.len());
        let _contiguous = self.inner.append_locks[stripe].lock().await;
        for (i, mut part) in parts.into_iter().enumerate() {
            // A client known to be broken is reconnected (through the roster) before anything is
            // sent; the send itself is never repeated. CLUSTER-UNKNOWN-1: a send whose node
            // failed before answering is OutcomeUnknown, answered as a retriable error, and the
            // producer's retry is what DELIVERY-1 counts as at-least-once.
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
                    "append to {stream}/{topic}/{partition}: part {} of {parts_count} failed after earlier parts were written (DELIVERY-1): {e}",
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

impl ConsumerOffsets for IggyBackend {
    async fn create_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        if name(group).is_err() {
            return Err(IggyError::InvalidConsumerGroupName.into());
        }
        // Not retried: a lost answer would turn into ConsumerGroupNameAlreadyExists.
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.create_consumer_group(&s, &t, group).await })
            .await?;
        Ok(())
    }

    /// Shuts the client's dedicated connection down (in the background when a Tokio runtime is
    /// running; otherwise dropping it closes the socket): Iggy then drops its memberships.
    fn release_client(&self, client: ClientId) {
        let Some(conn) = self.inner.groups().remove(&client) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conn.client().shutdown().await;
            });
        }
    }

    async fn delete_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        // Not retried: a lost answer would turn into ConsumerGroupNameNotFound.
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.delete_consumer_group(&s, &t, &g).await })
            .await?;
        Ok(())
    }

    async fn list_consumer_groups(&self, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let groups = self
            .inner
            .pooled(|c| {
                let (s, t) = (s.clone(), t.clone());
                async move { c.get_consumer_groups(&s, &t).await }
            })
            .await?;
        Ok(groups.into_iter().map(|g| g.name).collect())
    }

    /// Retried after a connection failure: a new connection holds no membership, so joining
    /// again is what is needed anyway.
    async fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, g) = (s.clone(), t.clone(), g.clone());
                async move { c.join_consumer_group(&s, &t, &g).await }
            })
            .await
    }

    /// Not retried after a connection failure: the reconnected client is no member (the failed
    /// connection's membership ended with it), so there is nothing left to leave; the error is
    /// reported.
    async fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .once(&conn, |c| async move { c.leave_consumer_group(&s, &t, &g).await })
            .await?;
        Ok(())
    }

    /// Through the client's own connection (membership: DIFF-1). After a reconnect the new
    /// connection is no member, so the retry answers ResourceNotFound and the caller joins again
    /// (CO-MEMBER-1).
    ///
    /// Iggy's TooManyConsumerOffsets (3024) cannot be recognised: the pinned SDK turns unknown
    /// codes into the generic `IggyError::Error` (DIFF-9), and the server built from the pinned
    /// sources has no such code or limit. Errors pass through as `BackendError::Iggy`.
    async fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move {
                    c.store_consumer_offset(&consumer, &s, &t, Some(partition), offset)
                        .await
                }
            })
            .await
    }

    /// Reading needs no membership: any pooled client.
    async fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> Result<Option<u64>, BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let info = self
            .inner
            .pooled(|c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move { c.get_consumer_offset(&consumer, &s, &t, Some(partition)).await }
            })
            .await?;
        Ok(info.map(|i| i.stored_offset))
    }

    /// Retried after a connection failure; a delete that did land the first time then answers
    /// ConsumerOffsetNotFound, which the caller counts as success (CO-DELETE-1).
    async fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move { c.delete_consumer_offset(&consumer, &s, &t, Some(partition)).await }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FETCH-READAHEAD-1: the read's own answer gives the high watermark, never below what it
    /// found, and a read that found nothing gives none (a full `watermarks` call is needed).
    #[test]
    fn fetch_readahead_1_the_high_watermark_comes_from_the_polls_last_offset() {
        let kept = |offsets: &[u64]| -> Vec<IggyMessage> {
            offsets
                .iter()
                .map(|&o| {
                    let mut m = msg(b"x");
                    m.header.offset = o;
                    m
                })
                .collect()
        };
        let marks = read_watermarks(3, 40, &kept(&[10, 11])).expect("found messages");
        assert_eq!((marks.log_start_offset, marks.high_watermark), (3, 41));
        let marks = read_watermarks(0, 0, &kept(&[0])).expect("found one message");
        assert_eq!(
            marks.high_watermark, 1,
            "one message at offset 0: last offset 0, watermark 1"
        );
        assert_eq!(read_watermarks(0, 0, &[]), None);
    }

    /// FETCH-READAHEAD-1: a log start is reported without asking again only while it is younger
    /// than the read-ahead's own age limit.
    #[tokio::test(start_paused = true)]
    async fn fetch_readahead_1_a_remembered_log_start_is_used_only_while_fresh() {
        let starts = LogStarts::default();
        assert_eq!(starts.fresh("s", "t", 0), None);
        starts.remember("s", "t", 0, 7);
        assert_eq!(starts.fresh("s", "t", 0), Some(7));
        assert_eq!(starts.fresh("s", "t", 1), None, "another partition");
        tokio::time::advance(READ_AHEAD_LOG_START_MAX_AGE).await;
        assert_eq!(starts.fresh("s", "t", 0), None, "too old");
    }
    use bytes::Bytes;
    use std::collections::BTreeMap;

    fn msg(payload: &'static [u8]) -> IggyMessage {
        IggyMessage::builder()
            .payload(Bytes::from_static(payload))
            .build()
            .unwrap()
    }

    fn msg_with_header(payload: &'static [u8], value: &'static [u8]) -> IggyMessage {
        use iggy_common::{HeaderKey, HeaderKind, HeaderValue};
        let mut headers = BTreeMap::new();
        headers.insert(
            HeaderKey::try_from("h").unwrap(),
            HeaderValue::from_raw(HeaderKind::Raw, value).unwrap(),
        );
        IggyMessage::builder()
            .payload(Bytes::from_static(payload))
            .user_headers(headers)
            .build()
            .unwrap()
    }

    fn code(e: BackendError) -> u32 {
        match e {
            BackendError::Iggy(e) => e.as_code(),
            BackendError::TooManyConsumerOffsets => 3024,
            other => panic!("not an Iggy answer: {other}"),
        }
    }

    #[test]
    fn high_watermark_tells_empty_from_one_message_by_count() {
        assert_eq!(high_watermark(0, 0), 0, "empty");
        assert_eq!(high_watermark(1, 0), 1, "one message at offset 0");
        assert_eq!(high_watermark(5, 4), 5);
        // Everything expired: the last offset still counts.
        assert_eq!(high_watermark(0, 9), 10);
    }

    /// Feeds `read` the polls a server holding `len` messages would answer, message `i` being
    /// `message(i)` at offset `i`: the offsets kept and the counts asked for.
    fn drive(mut read: ChunkedRead, len: u64, message: impl Fn(u64) -> IggyMessage) -> (Vec<u64>, Vec<u32>) {
        let mut asked = Vec::new();
        loop {
            let count = read.next_count();
            if count == 0 {
                break;
            }
            asked.push(count);
            let from = read.next_offset(0);
            let polled = (from..len.min(from + u64::from(count)))
                .map(|i| {
                    let mut m = message(i);
                    m.header.offset = i;
                    m
                })
                .collect();
            read.take(polled, count);
        }
        (read.kept.iter().map(|m| m.header.offset).collect(), asked)
    }

    fn limits(max_messages: u32, max_bytes: u64) -> ReadLimits {
        ReadLimits {
            max_messages,
            max_bytes,
        }
    }

    #[test]
    fn chunked_read_keeps_the_first_message_and_counts_payload_and_headers() {
        let four = |_| msg(b"aaaa");
        assert_eq!(
            drive(ChunkedRead::new(limits(10, 1), None), 3, four).0,
            [0],
            "the first message is always kept"
        );
        assert_eq!(drive(ChunkedRead::new(limits(10, 8), None), 3, four).0, [0, 1]);
        assert_eq!(drive(ChunkedRead::new(limits(10, 7), None), 3, four).0, [0]);
        assert_eq!(
            drive(ChunkedRead::new(limits(2, 1_000), None), 3, four).0,
            [0, 1],
            "the message limit"
        );
        assert_eq!(
            drive(ChunkedRead::new(limits(0, 1_000), None), 3, four),
            (vec![], vec![]),
            "nothing polled"
        );
        let with_headers = msg_with_header(b"aaaa", b"vv");
        let header_bytes = with_headers.user_headers.as_ref().map_or(0, |h| h.len()) as u64;
        assert!(header_bytes > 0);
        assert_eq!(stored_bytes(&with_headers), 4 + header_bytes);
        let headed_then_plain = |i| {
            if i == 0 {
                msg_with_header(b"aaaa", b"vv")
            } else {
                msg(b"bbbb")
            }
        };
        assert_eq!(
            drive(ChunkedRead::new(limits(10, 8), None), 2, headed_then_plain).0,
            [0],
            "headers count against the limit"
        );
    }

    #[test]
    fn chunked_read_polls_about_what_the_byte_limit_holds() {
        static KIB: [u8; 1024] = [7; 1024];
        let kib = |_| msg(&KIB);
        // 1 KiB messages, a 100 KiB limit: 64 first, then what the rest holds, not 10,000.
        let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 100 * 1024), None), 5_000, kib);
        assert_eq!(
            kept,
            (0..100).collect::<Vec<u64>>(),
            "consecutive offsets from the first"
        );
        assert_eq!(asked, [64, 37], "the second poll asks for the 36 that fit, plus one");
        // A short poll is the partition's end: no further poll.
        let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 1 << 20), None), 10, kib);
        assert_eq!((kept.len(), asked), (10, vec![64]));
    }

    /// Found by the real-Iggy tier's differential (seed 1796137915538088092): a read of three
    /// messages from 0, after an append of two, was ended at that append's end and gave two
    /// where the model gave three. Only a poll the bytes cut short may end on a part.
    #[test]
    fn fetch_align_1_a_read_its_count_limit_ends_is_never_aligned() {
        let read = ChunkedRead::new(limits(3, 1 << 20), Some(100));
        assert_eq!(read.next_count(), 3);
        assert!(!read.may_align(3), "the count limit ends this read");
        let read = ChunkedRead::new(limits(10_000, 1 << 20), Some(1024));
        let count = read.next_count();
        assert!(count < 10_000 && read.may_align(count), "the bytes end this one");
    }

    #[test]
    fn chunked_read_with_a_known_size_fills_the_limit_in_one_poll() {
        static KIB: [u8; 1024] = [7; 1024];
        let kib = |_| msg(&KIB);
        let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 100 * 1024), Some(1024)), 5_000, kib);
        assert_eq!(kept.len(), 100);
        assert_eq!(asked, [101], "what the limit holds at the remembered size, plus one");
        // A remembered size far below the real one costs bytes, never a wrong answer.
        let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 10 * 1024), Some(100)), 5_000, kib);
        assert_eq!((kept.len(), asked), (10, vec![103]));
    }

    #[test]
    fn expiry_round_trips_and_none_means_never() {
        assert_eq!(expiry_to_iggy(None), IggyExpiry::NeverExpire);
        assert_eq!(expiry_from_iggy(expiry_to_iggy(None)), None);
        assert_eq!(expiry_from_iggy(expiry_to_iggy(Some(60_000_000))), Some(60_000_000));
        assert_eq!(expiry_from_iggy(IggyExpiry::ServerDefault), None);
        // 0 on the wire would mean "server default".
        assert_eq!(u64::from(expiry_to_iggy(Some(0))), 1);
    }

    #[test]
    fn a_partition_always_appends_through_the_same_client() {
        for pool in 1..6 {
            for p in 0..20 {
                let a = append_slot("s", "t", p, pool);
                assert!(a < pool);
                assert_eq!(a, append_slot("s", "t", p, pool));
            }
        }
        assert_eq!(append_slot("s", "t", 3, 0), 0);
    }

    #[test]
    fn only_connection_failures_reconnect() {
        assert!(is_connection_error(&IggyError::Disconnected));
        assert!(is_connection_error(&IggyError::NotConnected));
        assert!(!is_connection_error(&IggyError::ResourceNotFound("x".into())));
        assert!(!is_connection_error(&IggyError::InvalidOffset(1)));
    }

    /// CLUSTER-UNKNOWN-1: which failures leave a request unsent (safe to send anywhere), which
    /// leave its outcome unknown, and which are the server's answer.
    #[test]
    fn cluster_unknown_1_a_broken_connection_after_sending_is_an_unknown_outcome() {
        for e in [
            IggyError::NotConnected,
            IggyError::CannotEstablishConnection,
            IggyError::TransientNotAccepted,
            IggyError::Unauthenticated,
        ] {
            assert_eq!(classify(&e), Failure::NotSent, "{e}");
        }
        for e in [
            IggyError::Disconnected,
            IggyError::EmptyResponse,
            IggyError::TcpError,
            IggyError::TransientNotCommitted,
        ] {
            assert_eq!(classify(&e), Failure::Unknown, "{e}");
        }
        for e in [IggyError::ResourceNotFound("x".into()), IggyError::InvalidCredentials] {
            assert_eq!(classify(&e), Failure::Refused, "{e}");
        }
        // What an append then reports: never success, and a retriable Kafka error.
        let unknown = BackendError::OutcomeUnknown(IggyError::Disconnected.to_string());
        assert!(unknown.is_unavailable());
        assert_eq!(crate::error_map::kafka_code(&unknown).0, 6);
    }

    /// A free loopback port nothing listens on.
    fn refused_address() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    fn target(roster: &str) -> Target {
        Target {
            roster: Arc::new(Mutex::new(RosterState::new(parse_roster(roster).unwrap()))),
            appends_stalled: Arc::default(),
            credentials: GatewayCredentials::password("iggy", "iggy"),
            tls: IggyTls::default(),
        }
    }

    /// CLUSTER-FAILOVER-1: a roster whose first member refuses connections dials the next one
    /// (here a stub that accepts and hangs up, so the login fails and it is marked down too).
    #[tokio::test]
    async fn cluster_failover_1_a_refused_member_moves_the_dial_to_the_next() {
        let refused = refused_address();
        let stub = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stub_address = stub.local_addr().unwrap().to_string();
        let accepted = tokio::spawn(async move {
            let (socket, _) = stub.accept().await.unwrap();
            drop(socket);
        });
        let target = target(&format!("{refused},{stub_address}"));
        let conn = Conn::new(target.clone()).unwrap();
        let result = conn.reconnect(0, Instant::now() + Duration::from_secs(30), false).await;
        accepted
            .await
            .expect("the second member was dialled after the first refused");
        assert!(result.is_err(), "the stub speaks no Iggy");
        let roster = target.roster();
        assert_eq!(roster.leader(), None);
        // Both down; the next sweep starts after the last one that failed.
        assert_eq!(roster.candidates(), [refused.clone(), stub_address.clone()]);
    }

    /// CLUSTER-FAILOVER-2: with every member down, a reconnect that may sweep until its deadline
    /// ends in NoPrimary, naming each member and why; a start-up sweep keeps the SDK's error.
    #[tokio::test]
    async fn cluster_failover_2_every_member_down_is_no_primary_naming_them() {
        let (a, b) = (refused_address(), refused_address());
        let conn = Conn::new(target(&format!("{a},{b}"))).unwrap();
        // A deadline shorter than the pause between sweeps: one sweep, then NoPrimary.
        let deadline = Instant::now() + SWEEP_PAUSE / 2;
        let Err(BackendError::NoPrimary { reason, .. }) = conn.reconnect(0, deadline, true).await else {
            panic!("expected NoPrimary");
        };
        assert!(reason.contains(&a) && reason.contains(&b), "{reason}");
        let e = conn
            .reconnect(0, Instant::now() + Duration::from_secs(30), false)
            .await
            .unwrap_err();
        assert_eq!(code(e), IggyError::CannotEstablishConnection.as_code());
        assert_eq!(
            crate::error_map::kafka_code(&BackendError::NoPrimary { waited_ms: 1, reason }).0,
            6
        );
    }

    /// Nothing listens on the port: connecting fails at once instead of retrying forever.
    #[tokio::test]
    async fn connect_to_nothing_fails_fast() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let started = std::time::Instant::now();
        let result = IggyBackend::connect(&format!("127.0.0.1:{port}"), "iggy", "iggy", 2).await;
        let Err(e) = result else {
            panic!("connected to a closed port");
        };
        assert_eq!(code(e), IggyError::CannotEstablishConnection.as_code());
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// Against a running Iggy server (address in IGGY_TEST_ADDRESS, default 127.0.0.1:18090,
    /// user and password iggy/iggy): `cargo test -p kafka-iggy-gateway backend::iggy -- --ignored`.
    #[tokio::test]
    #[ignore = "needs a running Iggy server"]
    async fn smoke_against_a_real_server() {
        let address = std::env::var("IGGY_TEST_ADDRESS").unwrap_or_else(|_| "127.0.0.1:18090".into());
        let b = IggyBackend::connect(&address, "iggy", "iggy", 2).await.unwrap();
        assert_eq!(b.kind(), "iggy");
        assert_eq!(b.pool_size(), 2);
        let (_, root) = b
            .open_session(&GatewayCredentials::password("iggy", "iggy"))
            .await
            .unwrap();
        assert_eq!(root.username, "iggy");
        assert!(b
            .open_session(&GatewayCredentials::password("iggy", "not-the-password"))
            .await
            .is_err());

        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let s = format!("kig-smoke-{nanos}");
        b.ensure_stream(&s).await.unwrap();
        b.ensure_stream(&s).await.unwrap();
        assert_eq!(b.get_topic(&s, "t").await.unwrap(), None);
        assert_eq!(b.get_topic("no-such-stream-kig", "t").await.unwrap(), None);
        let spec = TopicSpec {
            partitions: 3,
            message_expiry_us: None,
        };
        b.create_topic(&s, "t", spec).await.unwrap();
        let info = b.get_topic(&s, "t").await.unwrap().unwrap();
        assert_eq!(
            info,
            TopicInfo {
                name: "t".into(),
                partitions: 3,
                message_expiry_us: None
            }
        );
        b.create_topic(
            &s,
            "expiring",
            TopicSpec {
                partitions: 1,
                message_expiry_us: Some(3_600_000_000),
            },
        )
        .await
        .unwrap();
        let mut topics = b.list_topics(&s).await.unwrap();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(topics.len(), 2);
        assert_eq!(topics[0].message_expiry_us, Some(3_600_000_000));
        assert_eq!(topics[1], info);
        let again = b.create_topic(&s, "t", spec).await.unwrap_err();
        assert_eq!(
            code(again),
            IggyError::TopicNameAlreadyExists(String::new(), Identifier::default()).as_code()
        );

        // Empty partition.
        let empty = Watermarks {
            log_start_offset: 0,
            high_watermark: 0,
        };
        assert_eq!(b.watermarks(&s, "t", 0).await.unwrap(), empty);
        let limits = ReadLimits {
            max_messages: 10,
            max_bytes: 1 << 20,
        };
        assert!(b.read(&s, "t", 0, 0, limits).await.unwrap().is_empty());
        assert_eq!(b.offset_for_timestamp(&s, "t", 0, 0).await.unwrap(), None);
        let missing = b.watermarks(&s, "t", 7).await.unwrap_err();
        assert_eq!(code(missing), IggyError::ResourceNotFound(String::new()).as_code());
        let missing = b.append(&s, "t", 7, vec![msg(b"x")]).await.unwrap_err();
        assert_eq!(code(missing), IggyError::ResourceNotFound(String::new()).as_code());
        let missing = b.watermarks(&s, "nope", 0).await.unwrap_err();
        assert_eq!(
            code(missing),
            IggyError::TopicNameNotFound(String::new(), String::new()).as_code()
        );

        // One message, then three.
        let generation = b.append_generation();
        assert_eq!(b.append(&s, "t", 0, vec![msg(b"m0")]).await.unwrap(), Some(0));
        assert_ne!(b.append_generation(), generation);
        b.wait_for_append(generation).await;
        assert_eq!(
            b.watermarks(&s, "t", 0).await.unwrap(),
            Watermarks {
                log_start_offset: 0,
                high_watermark: 1
            }
        );
        let base = b
            .append(&s, "t", 0, vec![msg(b"m1"), msg_with_header(b"m2", b"v"), msg(b"m3")])
            .await
            .unwrap();
        assert_eq!(base, Some(1));
        assert_eq!(
            b.watermarks(&s, "t", 0).await.unwrap(),
            Watermarks {
                log_start_offset: 0,
                high_watermark: 4
            }
        );
        let all = b.read(&s, "t", 0, 0, limits).await.unwrap();
        let offsets: Vec<u64> = all.iter().map(|m| m.header.offset).collect();
        assert_eq!(offsets, vec![0, 1, 2, 3]);
        assert_eq!(all[2].payload, Bytes::from_static(b"m2"));
        let headers = all[2].user_headers_map().unwrap().unwrap();
        assert_eq!(headers.len(), 1);
        let from_two = b
            .read(
                &s,
                "t",
                0,
                2,
                ReadLimits {
                    max_messages: 1,
                    max_bytes: 1 << 20,
                },
            )
            .await
            .unwrap();
        assert_eq!(from_two.len(), 1);
        assert_eq!(from_two[0].header.offset, 2);
        let small = b
            .read(
                &s,
                "t",
                0,
                1,
                ReadLimits {
                    max_messages: 10,
                    max_bytes: 1,
                },
            )
            .await
            .unwrap();
        assert_eq!(small.len(), 1, "the first message is always returned");
        assert!(b.read(&s, "t", 0, 4, limits).await.unwrap().is_empty());
        assert!(b.read(&s, "t", 0, 100, limits).await.unwrap().is_empty());
        let none = ReadLimits {
            max_messages: 0,
            max_bytes: 1 << 20,
        };
        assert!(b.read(&s, "t", 0, 0, none).await.unwrap().is_empty());

        // Timestamps: server timestamps, first at or after.
        let (o, ts0) = b.offset_for_timestamp(&s, "t", 0, 0).await.unwrap().unwrap();
        assert_eq!((o, ts0), (0, all[0].header.timestamp));
        let ts3 = all[3].header.timestamp;
        let (o, ts) = b.offset_for_timestamp(&s, "t", 0, ts3).await.unwrap().unwrap();
        assert!(o <= 3 && ts >= ts3 && all[o as usize].header.timestamp == ts);
        assert_eq!(b.offset_for_timestamp(&s, "t", 0, ts3 + 1).await.unwrap(), None);

        // A waiting Fetch is woken by the interval even with no append of ours.
        let seen = b.append_generation();
        tokio::time::timeout(Duration::from_secs(2), b.wait_for_append(seen))
            .await
            .expect("woken within the wake interval");

        // Consumer offsets (DIFF-1..3).
        let g = "kafka.cg.smoke";
        b.create_consumer_group(&s, "t", g).await.unwrap();
        let dup = b.create_consumer_group(&s, "t", g).await.unwrap_err();
        assert_eq!(
            code(dup),
            IggyError::ConsumerGroupNameAlreadyExists(String::new(), Identifier::default()).as_code()
        );
        assert_eq!(b.list_consumer_groups(&s, "t").await.unwrap(), vec![g.to_string()]);
        let not_member = b.store_consumer_offset(&s, "t", 0, g, 1, 1).await.unwrap_err();
        assert_eq!(code(not_member), IggyError::ResourceNotFound(String::new()).as_code());
        b.join_consumer_group(&s, "t", g, 1).await.unwrap();
        b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap();
        assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(2));
        b.store_consumer_offset(&s, "t", 0, g, 1, 3).await.unwrap();
        b.store_consumer_offset(&s, "t", 0, g, 1, 1).await.unwrap();
        assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(1));
        let above = b.store_consumer_offset(&s, "t", 0, g, 1, 4).await.unwrap_err();
        assert_eq!(code(above), IggyError::InvalidOffset(0).as_code());
        let on_empty = b.store_consumer_offset(&s, "t", 1, g, 1, 0).await.unwrap_err();
        assert_eq!(code(on_empty), IggyError::InvalidOffset(0).as_code());
        assert_eq!(b.get_consumer_offset(&s, "t", 1, g).await.unwrap(), None);
        b.delete_consumer_offset(&s, "t", 0, g, 1).await.unwrap();
        assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), None);
        let absent = b.delete_consumer_offset(&s, "t", 0, g, 1).await.unwrap_err();
        assert_eq!(code(absent), IggyError::ConsumerOffsetNotFound(0).as_code());

        // After leaving and releasing, the same id is a new connection, no member.
        b.store_consumer_offset(&s, "t", 0, g, 1, 3).await.unwrap();
        b.leave_consumer_group(&s, "t", g, 1).await.unwrap();
        b.release_client(1);
        let rejoined = b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap_err();
        assert_eq!(code(rejoined), IggyError::ResourceNotFound(String::new()).as_code());
        b.join_consumer_group(&s, "t", g, 1).await.unwrap();
        b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap();
        assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(2));
        b.leave_consumer_group(&s, "t", g, 1).await.unwrap();
        b.release_client(1);

        b.delete_consumer_group(&s, "t", g).await.unwrap();
        assert!(b.list_consumer_groups(&s, "t").await.unwrap().is_empty());
        b.delete_topic(&s, "t").await.unwrap();
        b.delete_topic(&s, "expiring").await.unwrap();
        assert_eq!(b.get_topic(&s, "t").await.unwrap(), None);
    }
}
