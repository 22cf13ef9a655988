//! The old versions of six APIs (PROTO-LEGACY-1): each request decodes through
//! `protocol::legacy` into the modern struct, goes to the same handler as its modern versions,
//! and its response is re-shaped for the old version. Only the decisions an old version forces
//! are taken here (CO-LEGACY-COMMIT-1, LISTOFFSETS-V0-1, TOPIC-CREATE-LEGACY-1,
//! DESCRIBECONFIGS-V0-1).

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::handlers;
use crate::protocol::legacy::create_topics::{CreateTopicsV0V1Request, CreateTopicsV0V1Response};
use crate::protocol::legacy::delete_topics::{DeleteTopicsV0Request, DeleteTopicsV0Response};
use crate::protocol::legacy::describe_configs::{DescribeConfigsV0Request, DescribeConfigsV0Response};
use crate::protocol::legacy::list_offsets::ListOffsetsV0Request;
use crate::protocol::legacy::offset_commit::{OffsetCommitV0V1Request, OffsetCommitV0V1Response};
use crate::protocol::legacy::offset_fetch::{OffsetFetchV0Request, OffsetFetchV0Response};
use crate::protocol::legacy::LaidOutAs;
use crate::protocol::request::{Request, RequestError};
use crate::reply::ErasedEncodable;
use kafka_protocol::messages::ApiKey;
use std::sync::Arc;

/// The response to an old-version request, ready for the dispatch's encoder.
pub(crate) type LegacyResponse = Box<dyn ErasedEncodable + Send>;

/// Answers `request`, whose key and version `protocol::legacy::decodes` accepts.
pub(crate) async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Arc<Session<B>>,
    request: &Request,
) -> Result<LegacyResponse, RequestError> {
    let version = request.version;
    Ok(match request.key {
        ApiKey::OffsetCommit => {
            // CO-LEGACY-COMMIT-1, CO-LEGACY-COMMIT-2: the commit timestamps are not used.
            let old: OffsetCommitV0V1Request = gateway.decode(request)?;
            let response = handlers::offset_commit::handle(gateway, session, old.request, version).await;
            let old_layout: OffsetCommitV0V1Response = LaidOutAs(response);
            Box::new(old_layout)
        }
        ApiKey::OffsetFetch => {
            let old: OffsetFetchV0Request = gateway.decode(request)?;
            let response = handlers::offset_fetch::handle(gateway, session, old.0, version).await;
            let old_layout: OffsetFetchV0Response = LaidOutAs(response);
            Box::new(old_layout)
        }
        ApiKey::ListOffsets => {
            let old: ListOffsetsV0Request = gateway.decode(request)?;
            let response = handlers::list_offsets::handle(gateway, session, old.request.clone(), version).await;
            Box::new(old.respond(response))
        }
        ApiKey::CreateTopics => {
            let old: CreateTopicsV0V1Request = gateway.decode(request)?;
            let response = handlers::create_topics::handle(gateway, session, old.0, version).await;
            Box::new(CreateTopicsV0V1Response(response))
        }
        ApiKey::DeleteTopics => {
            let old: DeleteTopicsV0Request = gateway.decode(request)?;
            let response = handlers::delete_topics::handle(gateway, session, old.0, version).await;
            Box::new(DeleteTopicsV0Response(response))
        }
        ApiKey::DescribeConfigs => {
            let old: DescribeConfigsV0Request = gateway.decode(request)?;
            let response = handlers::describe_configs::handle(gateway, session, old.0).await;
            Box::new(DescribeConfigsV0Response(response))
        }
        other => {
            return Err(RequestError::UnsupportedVersion {
                key: other,
                version,
                correlation_id: request.header.correlation_id,
            })
        }
    })
}
