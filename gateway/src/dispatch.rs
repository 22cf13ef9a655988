//! The dispatch of one request frame to its handler: header, version, authentication gate,
//! body decode with its entry limit, the API-key table, response encode and its size backstop.
//! No error a client can cause here panics; each closes the connection with a log line naming
//! it. Handlers depend on the state ([`crate::gateway`]) and on [`crate::reply`], never on this
//! module.

use crate::auth::connection::{Access, ConnectionAuth};
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::handlers;
use crate::protocol::api::serves;
use crate::protocol::legacy;
use crate::protocol::request::{encode_response, parse_request, peek_header, RequestError};
use crate::protocol::response_frame::encode_response_segments;
use crate::reply::{ErasedEncodable, Reply};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use std::net::{IpAddr, Ipv4Addr};

impl<B: Backend> Gateway<B> {
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
        // AUTHZ-SESSION-1: a request runs in the backend session of its connection's principal.
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
                match handlers::produce::handle(self, session(), connection.peer, self.decode(&request)?, version).await
                {
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
