//! The shared state every connection of one gateway instance uses: configuration, backend,
//! clock and RNG, group coordinator, sessions, and the budgets requests are admitted and
//! decoded against. Handlers take a `&Gateway`; which handler answers a frame is
//! [`crate::dispatch`]'s business, and what a request gets back is [`crate::reply`]'s.

use crate::auth::connection::ConnectionAuth;
use crate::auth::sessions::{Session, SessionPool};
use crate::auth::throttle::{LoginQueues, LoginThrottle, UsernameQueues};
use crate::backend::{Backend, ClientId};
use crate::clock::{Clock, SharedRng};
use crate::config::{Config, Node};
use crate::decode_pool::DecodePool;
use crate::groups::GroupCoordinator;
use crate::offset_store::OffsetMembers;
use crate::producer_id::ProducerIdAllocator;
use crate::protocol::entries::Entries;
use crate::protocol::frame::Admitted;
use crate::protocol::request::{decode_body, Request, RequestError};
use crate::read_ahead::ReadAhead;
use kafka_protocol::protocol::Decodable;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Frames up to this size are read without waiting for the in-flight budget
/// (LIMIT-INFLIGHT-1): at most `max_connections` of them exist at once.
pub const SMALL_FRAME_BYTES: usize = 64 * 1024;

/// One gateway instance: configuration, backend, injected clock and RNG.
pub struct Gateway<B> {
    pub config: Arc<Config>,
    pub backend: Arc<B>,
    pub clock: Arc<dyn Clock>,
    pub rng: SharedRng,
    pub producer_ids: ProducerIdAllocator,
    /// Idempotent producers' state per partition (docs/spec/producer-ids.md).
    pub producer_states: crate::producer_state::ProducerStates,
    /// The compacted topics seen since start, for the storage gauges (TOPIC-COMPACT-1).
    pub compacted_topics: crate::topic_configs::CompactedTopics,
    pub groups: GroupCoordinator,
    /// The backend client that stores committed offsets (CO-MEMBER-1).
    pub offsets_client: ClientId,
    /// Where Produce requests are decoded and mapped (LIMIT-BLOCKING-1).
    pub decode_pool: DecodePool,
    /// Bytes of request frames admitted and not yet answered (LIMIT-INFLIGHT-1).
    inflight_bytes: Arc<Semaphore>,
    /// The one frame at a time that may read the rest of its body beyond the budget
    /// (LIMIT-INFLIGHT-1): one permit.
    inflight_overdraw: Arc<Semaphore>,
    /// Where requests run when SASL is off: the configured account.
    pub default_session: Arc<Session<B>>,
    /// Backend sessions of authenticated principals (AUTHZ-SESSION-1).
    pub sessions: SessionPool<B>,
    /// Failed logins per address and username (AUTH-SASL-THROTTLE-1).
    pub login_throttle: Mutex<LoginThrottle>,
    /// One login at a time per address (AUTH-SASL-THROTTLE-1).
    pub login_queues: LoginQueues,
    /// One untrusted login at a time per username (AUTH-SASL-THROTTLE-2).
    pub username_queues: UsernameQueues,
    /// Whose offsets client is in each offsets group (AUTHZ-OFFSETS-1).
    pub offset_members: OffsetMembers<B>,
    /// Successful KIP-368 re-authentications on open connections, since start.
    pub reauthentications: std::sync::atomic::AtomicU64,
    /// Reads made ahead of consumers' next Fetch (FETCH-READAHEAD-1).
    pub read_ahead: ReadAhead,
    /// Which peer gateways answer probes (GROUP-COORDINATOR-2).
    pub peer_health: crate::peers::PeerHealth,
    /// The peer channel's nonces (GROUP-COORDINATOR-7): a source of their own, so that probing
    /// does not shift what the seed decides elsewhere.
    pub peer_rng: SharedRng,
    /// Whether the runtime serving clients runs, as the peer channel tells peers
    /// (GROUP-COORDINATOR-8).
    pub peer_pulse: Arc<crate::peer_channel::ServingPulse>,
}

impl<B: Backend> Gateway<B> {
    pub fn new(config: Arc<Config>, backend: Arc<B>, clock: Arc<dyn Clock>, rng: SharedRng) -> Self {
        let producer_ids = ProducerIdAllocator::new(config.instance_id);
        let producer_states = crate::producer_state::ProducerStates::new(config.producers.clone());
        let groups = GroupCoordinator::new(config.group_limits.clone(), rng.clone());
        let offsets_client = rng.next_u64();
        let decode_pool = DecodePool::new(config.limits.decode_threads);
        let inflight_bytes = Arc::new(Semaphore::new(config.limits.max_inflight_request_bytes));
        let read_ahead_bytes = config.limits.fetch_read_ahead_bytes;
        let default_session = Arc::new(Session {
            backend: backend.clone(),
            principal: None,
            offsets_client,
            opened_at_ms: 0,
            known_topics: Default::default(),
            slot: None,
        });
        let mut salt = [0u8; 32];
        for chunk in salt.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_be_bytes());
        }
        let sessions = SessionPool::new(config.sasl.max_sessions, config.sasl.session_lifetime_ms, salt)
            .with_max_sessions_per_user(config.sasl.max_sessions_per_user);
        let peer_health = crate::peers::PeerHealth::new(config.peers.clone(), config.advertised.id);
        let peer_rng = rng.fork(u64::from_be_bytes(*b"kig-peer"));
        Self {
            config,
            backend,
            clock,
            rng,
            producer_ids,
            producer_states,
            compacted_topics: Default::default(),
            groups,
            offsets_client,
            decode_pool,
            inflight_bytes,
            inflight_overdraw: Arc::new(Semaphore::new(1)),
            default_session,
            sessions,
            login_throttle: Mutex::new(LoginThrottle::default()),
            login_queues: LoginQueues::default(),
            username_queues: UsernameQueues::default(),
            offset_members: OffsetMembers::default(),
            reauthentications: std::sync::atomic::AtomicU64::new(0),
            read_ahead: ReadAhead::new(read_ahead_bytes),
            peer_health,
            peer_rng,
            peer_pulse: Default::default(),
        }
    }

    /// The authentication state a new connection from `peer` starts in.
    pub fn new_connection(&self, peer: IpAddr) -> ConnectionAuth<B> {
        if self.config.sasl.enabled() {
            ConnectionAuth::unauthenticated(peer)
        } else {
            ConnectionAuth::open(peer, self.default_session.clone())
        }
    }

    /// Now, in ms of the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_us() / 1_000
    }

    /// Waits until `chunk` more bytes of a frame of `frame_size` bytes, `received` of them read,
    /// fit the in-flight budget (LIMIT-INFLIGHT-1). A frame of at most [`SMALL_FRAME_BYTES`]
    /// needs no room: ApiVersions, Heartbeats, commits and Fetches stay answered whoever holds the
    /// budget, and they are bounded by the connection limit instead.
    ///
    /// A frame that already holds room and finds none left may instead take the overdraw, and
    /// with it the rest of its body. Without it, frames that each hold part of the budget and
    /// wait for more (or one frame larger than the budget) would wait on each other until their
    /// idle timeout closed them. One overdraw at a time keeps the bound at the budget plus one
    /// frame. A frame holding nothing just waits: it is in no such cycle.
    pub async fn admit_request_bytes(
        &self,
        frame_size: usize,
        received: usize,
        chunk: usize,
    ) -> Admitted<Option<OwnedSemaphorePermit>> {
        if frame_size <= SMALL_FRAME_BYTES {
            return Admitted::Chunk(None);
        }
        let permits = u32::try_from(chunk).expect("a chunk is at most MAX_ADMISSION_CHUNK bytes");
        // Counted when the budget makes a frame wait, not for every chunk admitted.
        if let Ok(permit) = self.inflight_bytes.clone().try_acquire_many_owned(permits) {
            return Admitted::Chunk(Some(permit));
        }
        crate::metrics::metrics().limit_hit("LIMIT-INFLIGHT-1");
        let room = self.inflight_bytes.clone().acquire_many_owned(permits);
        if received == 0 {
            return Admitted::Chunk(Some(room.await.expect("the in-flight semaphore is never closed")));
        }
        tokio::select! {
            // Room in the budget first when both are there, so the overdraw is left for a frame
            // that has no other way on.
            biased;
            permit = room => Admitted::Chunk(Some(permit.expect("the in-flight semaphore is never closed"))),
            overdraw = self.inflight_overdraw.clone().acquire_owned() => {
                tracing::debug!(
                    "a frame of {frame_size} bytes holding {received} reads its rest beyond the in-flight budget (LIMIT-INFLIGHT-1)"
                );
                Admitted::Rest(Some(overdraw.expect("the overdraw semaphore is never closed")))
            }
        }
    }

    /// Decodes a request body and holds it to the entry limit (LIMIT-ENTRIES-1).
    pub(crate) fn decode<T: Decodable + Entries>(&self, request: &Request) -> Result<T, RequestError> {
        let body: T = decode_body(request)?;
        let entries = body.entries();
        let limit = self.config.limits.max_request_entries;
        if entries > limit {
            crate::metrics::metrics().limit_hit("LIMIT-ENTRIES-1");
            return Err(RequestError::TooManyEntries {
                key: request.key,
                version: request.version,
                entries,
                limit,
            });
        }
        Ok(body)
    }

    /// An empty budget for one response (LIMIT-RESPONSE-BYTES-1).
    pub fn response_budget(&self) -> crate::response_budget::ResponseBudget {
        crate::response_budget::ResponseBudget::new(self.config.limits.max_response_bytes)
    }

    /// The gateway that coordinates `group_id` (GROUP-COORDINATOR-1, GROUP-COORDINATOR-2).
    pub fn coordinator(&self, group_id: &str) -> &Node {
        self.peer_health.coordinator(group_id)
    }

    /// Whether this gateway coordinates `group_id`.
    pub fn is_coordinator(&self, group_id: &str) -> bool {
        self.coordinator(group_id).id == self.config.advertised.id
    }

    /// The gateway that leads a partition of Kafka topic `kafka_topic` (PRODUCER-LEADER-1):
    /// Metadata names it, and only it writes the partition's idempotent batches.
    pub fn partition_leader(&self, kafka_topic: &str, partition: i32) -> &Node {
        self.peer_health.partition_leader(kafka_topic, partition)
    }

    /// Whether this gateway leads the partition.
    pub fn leads_partition(&self, kafka_topic: &str, partition: i32) -> bool {
        self.partition_leader(kafka_topic, partition).id == self.config.advertised.id
    }
}
