//! The shared state every connection of one gateway instance uses, and the dispatch of one
//! request frame to its handler.

use crate::backend::{Backend, ClientId};
use crate::clock::{Clock, SharedRng};
use crate::config::{Config, Node};
use crate::groups::{coordinator_index, GroupCoordinator};
use crate::handlers;
use crate::producer_id::ProducerIdAllocator;
use crate::protocol::api::serves;
use crate::protocol::request::{decode_body, encode_response, parse_request, peek_header, RequestError};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;
use std::sync::Arc;

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
}

/// What a request gets back.
#[derive(Debug)]
pub enum Reply {
    /// A response frame body (header and body, without the size prefix).
    Frame(Bytes),
    /// Nothing: Produce with acks=0.
    Nothing,
}

impl<B: Backend> Gateway<B> {
    pub fn new(config: Arc<Config>, backend: Arc<B>, clock: Arc<dyn Clock>, rng: SharedRng) -> Self {
        let producer_ids = ProducerIdAllocator::new(config.instance_id);
        let groups = GroupCoordinator::new(config.group_limits.clone(), rng.clone());
        let offsets_client = rng.next_u64();
        Self {
            config,
            backend,
            clock,
            rng,
            producer_ids,
            groups,
            offsets_client,
        }
    }

    /// The gateway that coordinates `group_id` (GROUP-COORDINATOR-1).
    pub fn coordinator(&self, group_id: &str) -> &Node {
        let peers = &self.config.peers;
        &peers[coordinator_index(group_id, peers.len())]
    }

    /// Whether this gateway coordinates `group_id`.
    pub fn is_coordinator(&self, group_id: &str) -> bool {
        self.coordinator(group_id).id == self.config.advertised.id
    }

    /// Answers one request frame. An error means the connection must close (PROTO-VERSION-2,
    /// PROTO-MALFORMED-1); the caller logs it.
    pub async fn handle_frame(&self, frame: Bytes) -> Result<Reply, RequestError> {
        let (raw_key, version, correlation_id) = peek_header(&frame)?;
        if raw_key == ApiKey::ApiVersions as i16 && !serves(ApiKey::ApiVersions, version) {
            // PROTO-APIVERSIONS-1 (KIP-511): the header may not even parse; answer in v0.
            let body = handlers::api_versions::unsupported_version();
            return Ok(Reply::Frame(encode(correlation_id, 0, &body, 0)));
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
        // PROTO-HEADER-1: ApiVersions always answers with response header v0.
        let header_version = if key == ApiKey::ApiVersions {
            0
        } else {
            key.response_header_version(version)
        };
        let reply =
            |body: &dyn ErasedEncodable| Reply::Frame(body.encode_frame(correlation_id, header_version, version));
        Ok(match key {
            ApiKey::ApiVersions => reply(&handlers::api_versions::handle(decode_body(&request)?)),
            ApiKey::Metadata => reply(&handlers::metadata::handle(self, decode_body(&request)?, version).await),
            ApiKey::Produce => match handlers::produce::handle(self, decode_body(&request)?, version).await {
                Some(response) => reply(&response),
                None => Reply::Nothing,
            },
            ApiKey::Fetch => reply(&handlers::fetch::handle(self, decode_body(&request)?, version).await),
            ApiKey::ListOffsets => reply(&handlers::list_offsets::handle(self, decode_body(&request)?, version).await),
            ApiKey::CreateTopics => {
                reply(&handlers::create_topics::handle(self, decode_body(&request)?, version).await)
            }
            ApiKey::DeleteTopics => {
                reply(&handlers::delete_topics::handle(self, decode_body(&request)?, version).await)
            }
            ApiKey::InitProducerId => reply(&handlers::init_producer_id::handle(self, decode_body(&request)?)),
            ApiKey::DescribeConfigs => reply(&handlers::describe_configs::handle(self, decode_body(&request)?).await),
            ApiKey::FindCoordinator => reply(&handlers::find_coordinator::handle(
                self,
                decode_body(&request)?,
                version,
            )),
            ApiKey::JoinGroup => {
                reply(&handlers::join_group::handle(self, decode_body(&request)?, &request.header, version).await)
            }
            ApiKey::SyncGroup => reply(&handlers::sync_group::handle(self, decode_body(&request)?).await),
            ApiKey::Heartbeat => reply(&handlers::heartbeat::handle(self, decode_body(&request)?)),
            ApiKey::LeaveGroup => reply(&handlers::leave_group::handle(self, decode_body(&request)?, version)),
            ApiKey::DescribeGroups => reply(&handlers::describe_groups::handle(self, decode_body(&request)?)),
            ApiKey::ListGroups => reply(&handlers::list_groups::handle(self, decode_body(&request)?)),
            ApiKey::DeleteGroups => reply(&handlers::delete_groups::handle(self, decode_body(&request)?).await),
            ApiKey::OffsetCommit => reply(&handlers::offset_commit::handle(self, decode_body(&request)?).await),
            ApiKey::OffsetFetch => reply(&handlers::offset_fetch::handle(self, decode_body(&request)?, version).await),
            // Unreachable while ADVERTISED and this table agree; a conformance case calls every
            // advertised API at both ends of its range to keep them so.
            other => {
                tracing::error!("{other:?} v{version} is advertised but has no handler");
                return Err(RequestError::UnsupportedVersion {
                    key: other,
                    version,
                    correlation_id,
                });
            }
        })
    }
}

fn encode<T: Encodable>(correlation_id: i32, header_version: i16, body: &T, version: i16) -> Bytes {
    // A response built by a handler for a version it serves always encodes; failing here is a
    // handler bug, not a client error.
    encode_response(correlation_id, header_version, body, version)
        .expect("response encodes at the version it was built for")
}

/// Lets the dispatch table hand differently typed responses to one encoder.
trait ErasedEncodable {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> Bytes;
}

impl<T: Encodable> ErasedEncodable for T {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> Bytes {
        encode(correlation_id, header_version, self, version)
    }
}
