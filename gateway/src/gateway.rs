//! The shared state every connection of one gateway instance uses, and the dispatch of one
//! request frame to its handler: header, version, body decode with its entry limit, handler,
//! response encode. No error a client can cause here panics; each closes the connection with a
//! log line naming it.

use crate::auth::connection::{Access, ConnectionAuth};
use crate::auth::sessions::{Session, SessionPool};
use crate::auth::throttle::{LoginQueues, LoginThrottle};
use crate::backend::{Backend, ClientId};
use crate::clock::{Clock, SharedRng};
use crate::config::{Config, Node};
use crate::decode_pool::DecodePool;
use crate::groups::GroupCoordinator;
use crate::handlers;
use crate::offset_store::OffsetMembers;
use crate::producer_id::ProducerIdAllocator;
use crate::protocol::api::serves;
use crate::protocol::entries::Entries;
use crate::protocol::legacy;
use crate::protocol::request::{decode_body, encode_response, parse_request, peek_header, Request, RequestError};
use crate::protocol::response_frame::{encode_response_segments, ResponseFrame};
use crate::read_ahead::ReadAhead;
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use std::net::{IpAddr, Ipv4Addr};
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
    pub groups: GroupCoordinator,
    /// The backend client that stores committed offsets (CO-MEMBER-1).
    pub offsets_client: ClientId,
    /// Where Produce requests are decoded and mapped (LIMIT-BLOCKING-1).
    pub decode_pool: DecodePool,
    /// Bytes of request frames admitted and not yet answered (LIMIT-INFLIGHT-1).
    inflight_bytes: Arc<Semaphore>,
    /// Where requests run when SASL is off: the configured account.
    pub default_session: Arc<Session<B>>,
    /// Backend sessions of authenticated principals (AUTHZ-SESSION-1).
    pub sessions: SessionPool<B>,
    /// Failed logins per address and username (AUTH-SASL-THROTTLE-1).
    pub login_throttle: Mutex<LoginThrottle>,
    /// One login at a time per address (AUTH-SASL-THROTTLE-1).
    pub login_queues: LoginQueues,
    /// Whose offsets client is in each offsets group (AUTHZ-OFFSETS-1).
    pub offset_members: OffsetMembers<B>,
    /// Successful KIP-368 re-authentications on open connections, since start.
    pub reauthentications: std::sync::atomic::AtomicU64,
    /// Reads made ahead of consumers' next Fetch (FETCH-READAHEAD-1).
    pub read_ahead: ReadAhead,
    /// Which peer gateways answer probes (GROUP-COORDINATOR-2).
    pub peer_health: crate::peers::PeerHealth,
}

/// What a request gets back.
#[derive(Debug)]
pub enum Reply {
    /// A response frame body (header and body, without the size prefix).
    Frame(ResponseFrame),
    /// Nothing: Produce with acks=0.
    Nothing,
    /// A frame, after which the connection closes: a failed authentication
    /// (AUTH-SASL-FAIL-1).
    FrameThenClose(ResponseFrame),
}

impl<B: Backend> Gateway<B> {
    pub fn new(config: Arc<Config>, backend: Arc<B>, clock: Arc<dyn Clock>, rng: SharedRng) -> Self {
        let producer_ids = ProducerIdAllocator::new(config.instance_id);
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
        let sessions = SessionPool::new(config.sasl.max_sessions, config.sasl.session_lifetime_ms, salt);
        let peer_health = crate::peers::PeerHealth::new(config.peers.clone(), config.advertised.id);
        Self {
            config,
            backend,
            clock,
            rng,
            producer_ids,
            groups,
            offsets_client,
            decode_pool,
            inflight_bytes,
            default_session,
            sessions,
            login_throttle: Mutex::new(LoginThrottle::default()),
            login_queues: LoginQueues::default(),
            offset_members: OffsetMembers::default(),
            reauthentications: std::sync::atomic::AtomicU64::new(0),
            read_ahead: ReadAhead::new(read_ahead_bytes),
            peer_health,
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

    /// Waits until `chunk` more bytes of a frame of `frame_size` bytes fit the in-flight budget
    /// (LIMIT-INFLIGHT-1). A frame of at most [`SMALL_FRAME_BYTES`] needs no room: ApiVersions,
    /// Heartbeats, commits and Fetches stay answered whoever holds the budget, and they are
    /// bounded by the connection limit instead.
    pub async fn admit_request_bytes(&self, frame_size: usize, chunk: usize) -> Option<OwnedSemaphorePermit> {
        if frame_size <= SMALL_FRAME_BYTES {
            return None;
        }
        let permits = u32::try_from(chunk).expect("a chunk is at most ADMISSION_CHUNK bytes");
        // Counted when the budget makes a frame wait, not for every chunk admitted.
        if let Ok(permit) = self.inflight_bytes.clone().try_acquire_many_owned(permits) {
            return Some(permit);
        }
        crate::metrics::metrics().limit_hit("LIMIT-INFLIGHT-1");
        let permit = self
            .inflight_bytes
            .clone()
            .acquire_many_owned(permits)
            .await
            .expect("the in-flight semaphore is never closed");
        Some(permit)
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

    /// Answers one request frame on a connection of its own: what tests and fuzzing use. On a
    /// gateway with SASL, only ApiVersions and the SASL APIs are answered this way.
    pub async fn handle_frame(&self, frame: Bytes) -> Result<Reply, RequestError> {
        let mut connection = self.new_connection(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        self.handle(frame, &mut connection).await
    }

    /// Answers one request frame of `connection`. An error means the connection must close
    /// (PROTO-VERSION-2, PROTO-MALFORMED-1, AUTH-SASL-GATE-1); the caller logs it.
    pub async fn handle(&self, frame: Bytes, connection: &mut ConnectionAuth<B>) -> Result<Reply, RequestError> {
        if connection.expects_raw_token() {
            // AUTH-SASL-HANDSHAKE-1: after SaslHandshake v0 the PLAIN message comes bare.
            return handlers::sasl_authenticate::handle_raw(self, connection, frame).await;
        }
        let (raw_key, version, correlation_id) = peek_header(&frame)?;
        if raw_key == ApiKey::ApiVersions as i16 && !serves(ApiKey::ApiVersions, version) {
            // PROTO-APIVERSIONS-1 (KIP-511): the header may not even parse; answer in v0.
            let body = handlers::api_versions::unsupported_version();
            return encode_response(correlation_id, 0, &body, 0)
                .map(|frame| Reply::Frame(frame.into()))
                .map_err(|e| RequestError::Encode {
                    key: ApiKey::ApiVersions,
                    version: 0,
                    reason: format!("{e:#}"),
                });
        }
        let request = parse_request(frame)?;
        let (key, version) = (request.key, request.version);
        if !serves(key, version) {
            return Err(RequestError::UnsupportedVersion {
                key,
                version,
                correlation_id,
            });
        }
        let session = match connection.access(key, self.now_ms()) {
            Access::Serve(session) => Some(session),
            Access::Unscoped => None,
            Access::Refuse(reason) => {
                return Err(RequestError::NotAuthenticated(format!(
                    "{reason} (AUTH-SASL-GATE-1, correlation id {correlation_id})"
                )))
            }
        };
        // Only ApiVersions and the SASL APIs have no session, and they do not use one.
        let session = || {
            session
                .as_ref()
                .expect("every API but ApiVersions and SASL is served in a session")
        };
        // PROTO-HEADER-1: ApiVersions always answers with response header v0.
        let header_version = if key == ApiKey::ApiVersions {
            0
        } else {
            key.response_header_version(version)
        };
        // PROTO-ENCODE-1: a response that does not encode closes the connection with a log line;
        // it never panics the connection task.
        let encode_error = |e: anyhow::Error| RequestError::Encode {
            key,
            version,
            reason: format!("{e:#}"),
        };
        // LIMIT-RESPONSE-BYTES-1: the backstop behind the handlers' own budgets. Fetch, bounded
        // by fetch_max_bytes, is encoded on its own path below.
        let max_response_bytes = self.config.limits.max_response_bytes;
        let reply = |body: &dyn ErasedEncodable| {
            // Sized before the frame is allocated.
            let body_bytes = body.encoded_bytes(version).map_err(encode_error)?;
            if body_bytes > max_response_bytes {
                crate::metrics::metrics().limit_hit("LIMIT-RESPONSE-BYTES-1");
                return Err(RequestError::ResponseTooLarge {
                    key,
                    version,
                    bytes: body_bytes,
                    limit: max_response_bytes,
                });
            }
            body.encode_frame(correlation_id, header_version, version)
                .map(|frame| Reply::Frame(frame.into()))
                .map_err(encode_error)
        };
        match key {
            // PROTO-LEGACY-1: versions kafka-protocol no longer decodes.
            _ if legacy::decodes(key, version) => reply(&*handlers::legacy::handle(self, session(), &request).await?),
            ApiKey::ApiVersions => reply(&handlers::api_versions::handle(self.decode(&request)?)),
            ApiKey::Metadata => {
                reply(&handlers::metadata::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::Produce => {
                match handlers::produce::handle(self, session(), self.decode(&request)?, version).await {
                    Some(response) => reply(&response),
                    None => Ok(Reply::Nothing),
                }
            }
            ApiKey::Fetch => {
                let response = handlers::fetch::handle(self, session(), self.decode(&request)?, version).await;
                // FETCH-WRITE-1: the record batches go out from their own buffers.
                let batches: Vec<Bytes> = response
                    .responses
                    .iter()
                    .flat_map(|topic| topic.partitions.iter().filter_map(|p| p.records.clone()))
                    .collect();
                encode_response_segments(correlation_id, header_version, &response, version, &batches)
                    .map(Reply::Frame)
                    .map_err(encode_error)
            }
            ApiKey::ListOffsets => {
                reply(&handlers::list_offsets::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::CreateTopics => {
                reply(&handlers::create_topics::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::CreatePartitions => {
                reply(&handlers::create_partitions::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::DeleteTopics => {
                reply(&handlers::delete_topics::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::InitProducerId => reply(&handlers::init_producer_id::handle(self, self.decode(&request)?)),
            ApiKey::DescribeConfigs => {
                reply(&handlers::describe_configs::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::FindCoordinator => reply(&handlers::find_coordinator::handle(
                self,
                self.decode(&request)?,
                version,
            )),
            ApiKey::JoinGroup => reply(
                &handlers::join_group::handle(
                    self,
                    session(),
                    connection.peer,
                    self.decode(&request)?,
                    &request.header,
                    version,
                )
                .await,
            ),
            ApiKey::ConsumerGroupHeartbeat => reply(
                &handlers::consumer_group_heartbeat::handle(
                    self,
                    session(),
                    connection.peer,
                    self.decode(&request)?,
                    &request.header,
                    version,
                )
                .await,
            ),
            ApiKey::ConsumerGroupDescribe => {
                reply(&handlers::consumer_group_describe::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::SyncGroup => reply(&handlers::sync_group::handle(self, self.decode(&request)?).await),
            ApiKey::Heartbeat => reply(&handlers::heartbeat::handle(self, self.decode(&request)?)),
            ApiKey::LeaveGroup => {
                reply(&handlers::leave_group::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::DescribeGroups => {
                reply(&handlers::describe_groups::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::ListGroups => reply(&handlers::list_groups::handle(self, session(), self.decode(&request)?).await),
            ApiKey::DeleteGroups => {
                reply(&handlers::delete_groups::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::OffsetCommit => {
                reply(&handlers::offset_commit::handle(self, session(), self.decode(&request)?, version).await)
            }
            ApiKey::OffsetDelete => {
                reply(&handlers::offset_delete::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::DescribeCluster => reply(&handlers::describe_cluster::handle(self, self.decode(&request)?)),
            ApiKey::IncrementalAlterConfigs => {
                reply(&handlers::incremental_alter_configs::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::AlterConfigs => {
                reply(&handlers::alter_configs::handle(self, session(), self.decode(&request)?).await)
            }
            ApiKey::SaslHandshake => {
                let response = handlers::sasl_handshake::handle(self, connection, self.decode(&request)?, version);
                reply(&response)
            }
            ApiKey::SaslAuthenticate => {
                let (response, close) =
                    handlers::sasl_authenticate::handle(self, connection, self.decode(&request)?, version).await;
                match reply(&response)? {
                    Reply::Frame(frame) if close => Ok(Reply::FrameThenClose(frame)),
                    other => Ok(other),
                }
            }
            ApiKey::OffsetFetch => {
                reply(&handlers::offset_fetch::handle(self, session(), self.decode(&request)?, version).await)
            }
            // Unreachable while ADVERTISED and this table agree; a conformance case calls every
            // advertised API at both ends of its range to keep them so.
            other => {
                tracing::error!("{other:?} v{version} is advertised but has no handler");
                Err(RequestError::UnsupportedVersion {
                    key: other,
                    version,
                    correlation_id,
                })
            }
        }
    }
}

/// Lets the dispatch table hand differently typed responses to one encoder.
pub(crate) trait ErasedEncodable {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> anyhow::Result<Bytes>;
    /// The body's encoded size, computed without encoding it.
    fn encoded_bytes(&self, version: i16) -> anyhow::Result<usize>;
}

impl<T: Encodable> ErasedEncodable for T {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> anyhow::Result<Bytes> {
        encode_response(correlation_id, header_version, self, version)
    }

    fn encoded_bytes(&self, version: i16) -> anyhow::Result<usize> {
        self.compute_size(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::JoinGroupResponse;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn proto_encode_1_a_response_that_does_not_encode_is_an_error() {
        // A member id past a Kafka string's 32,767 bytes: what a 32,760-byte client id made.
        let response = JoinGroupResponse::default().with_member_id(StrBytes::from_string("m".repeat(40_000)));
        let erased: &dyn ErasedEncodable = &response;
        assert!(erased.encode_frame(1, 0, 5).is_err());
        assert!(JoinGroupResponse::default().encode_frame(1, 0, 5).is_ok());
    }
}
