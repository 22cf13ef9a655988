//! JoinGroup (GROUP-JOIN-1): KIP-394 member ids from v4, protocol selection by vote,
//! generations, the leader gets the member list.

use super::group_authz::{owner, PollPermissions};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::groups::subscription::{subscribed_topics, SubscriptionError};
use crate::groups::{JoinAttempt, JoinOutcome, JoinRequest};
use crate::log_text::clip;
use crate::offset_store::MAX_GROUP_ID_LEN;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use std::net::IpAddr;
use std::time::Duration;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// CO-GROUP-ID-1: an empty id, or one too long for its Iggy key, is refused (INVALID_GROUP_ID).
pub(crate) fn valid_group_id(group_id: &str) -> bool {
    !group_id.is_empty() && group_id.len() <= MAX_GROUP_ID_LEN
}

/// Rounds of asking Iggy before a join whose group keeps gaining topics is answered
/// COORDINATOR_NOT_AVAILABLE, for the client to retry (AUTHZ-GROUP-4).
const AUTHORIZATION_ROUNDS: usize = 3;

/// The topics a consumer-protocol member subscribes to, from every protocol it offers, read
/// only after the coordinator admitted the request's sizes (GROUP-SUBSCRIPTION-1); none for
/// other protocol types or metadata that does not decode. Each subscription may name at most
/// `max_request_entries` topics: more is INVALID_REQUEST.
fn read_subscriptions<B>(gateway: &Gateway<B>, join: &JoinRequest) -> Result<Vec<String>, i16> {
    if join.protocol_type != "consumer" {
        // CONNECT-GROUP-1: Kafka Connect's `connect` groups (and any other type) carry their
        // workers' own state in the metadata, which names no topic: it is relayed to the leader
        // unread.
        return Ok(Vec::new());
    }
    let limit = gateway.config.limits.max_request_entries;
    let mut topics = std::collections::BTreeSet::new();
    for (name, metadata) in &join.protocols {
        match subscribed_topics(metadata, limit) {
            Ok(named) => topics.extend(named),
            Err(e @ SubscriptionError::TooManyTopics { .. }) => {
                crate::metrics::metrics().limit_hit("GROUP-SUBSCRIPTION-1");
                tracing::error!(
                    "JoinGroup for {}: protocol {}: {e} (GROUP-SUBSCRIPTION-1)",
                    clip(&join.group_id),
                    clip(name)
                );
                return Err(ResponseError::InvalidRequest.code());
            }
            Err(e) => tracing::debug!(
                "JoinGroup for {}: protocol {}: {e}; it names no topic",
                clip(&join.group_id),
                clip(name)
            ),
        }
    }
    Ok(topics.into_iter().collect())
}

/// Joins with SASL on (AUTHZ-GROUP-1, AUTHZ-GROUP-4): a joiner who is not yet a member needs
/// poll on its own topics and on every topic of the group; a rejoining member on its own.
/// What was authorized goes with the join, and the coordinator sends it back when the group
/// gained a topic meanwhile.
async fn join_authorized<B: Backend>(gateway: &Gateway<B>, session: &Session<B>, mut join: JoinRequest) -> JoinOutcome {
    let mut permissions = PollPermissions::new(gateway, session);
    if !permissions.checks() {
        return gateway.groups.join(join).await;
    }
    let mut needed: std::collections::BTreeSet<String> = join.topics.iter().cloned().collect();
    needed.extend(gateway.groups.topics_for_joiner(&join.group_id, &join.member_id));
    for _ in 0..AUTHORIZATION_ROUNDS {
        let topics: Vec<&str> = needed.iter().map(String::as_str).collect();
        let verdict = permissions.verdict(&join.group_id, &topics).await;
        if let Some(code) = verdict.refusal_code() {
            return JoinOutcome::error(code, &join.member_id);
        }
        match gateway.groups.join_authorized(join, Some(&needed)).await {
            JoinAttempt::Done(outcome) => return outcome,
            JoinAttempt::Recheck { request, topics } => {
                join = *request;
                needed.extend(topics);
            }
        }
    }
    tracing::warn!(
        "JoinGroup for {}: the group gained topics during {AUTHORIZATION_ROUNDS} rounds of authorization; asking the client to retry (AUTHZ-GROUP-4)",
        clip(&join.group_id)
    );
    JoinOutcome::error(ResponseError::CoordinatorNotAvailable.code(), &join.member_id)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    peer: IpAddr,
    request: JoinGroupRequest,
    header: &RequestHeader,
    version: i16,
) -> JoinGroupResponse {
    let group_id = request.group_id.0.as_str().to_string();
    let outcome = if !valid_group_id(&group_id) {
        JoinOutcome::error(ResponseError::InvalidGroupId.code(), request.member_id.as_str())
    } else if !gateway.is_coordinator(&group_id) {
        JoinOutcome::error(ResponseError::NotCoordinator.code(), request.member_id.as_str())
    } else {
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        let rebalance_ms = if version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        };
        let mut join = JoinRequest {
            group_id,
            member_id: request.member_id.as_str().to_string(),
            instance_id: request.group_instance_id.as_ref().map(|i| i.as_str().to_string()),
            client_id: header
                .client_id
                .as_ref()
                .map_or(String::new(), |c| c.as_str().to_string()),
            client_host: String::new(),
            session_timeout: Duration::from_millis(u64::try_from(request.session_timeout_ms).unwrap_or(0)),
            rebalance_timeout: Duration::from_millis(u64::try_from(rebalance_ms).unwrap_or(0)),
            protocol_type: request.protocol_type.as_str().to_string(),
            protocols: request
                .protocols
                .iter()
                // LIMIT-GROUP-METADATA-1: copied out, so the group does not keep the whole
                // request frame alive for as long as the member stays.
                .map(|p| (p.name.as_str().to_string(), bytes::Bytes::copy_from_slice(&p.metadata)))
                .collect(),
            require_known_member_id: version >= 4,
            owner: owner(gateway, session, peer),
            topics: Vec::new(),
        };
        // GROUP-SUBSCRIPTION-1: sizes first, then the subscription, read once.
        match gateway
            .groups
            .admit(&mut join)
            .and_then(|()| read_subscriptions(gateway, &join))
        {
            Err(error_code) => JoinOutcome::error(error_code, &join.member_id),
            Ok(topics) => {
                join.topics = topics;
                join_authorized(gateway, session, join).await
            }
        }
    };
    JoinGroupResponse::default()
        .with_error_code(outcome.error_code)
        .with_generation_id(outcome.generation)
        .with_protocol_type(outcome.protocol_type.as_deref().map(s))
        .with_protocol_name(Some(s(outcome.protocol_name.as_deref().unwrap_or_default())))
        .with_leader(s(&outcome.leader))
        .with_member_id(s(&outcome.member_id))
        .with_members(
            outcome
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(s(&id))
                        .with_group_instance_id(instance.as_deref().map(s))
                        .with_metadata(metadata)
                })
                .collect(),
        )
}
