//! JoinGroup (GROUP-JOIN-1): KIP-394 member ids from v4, protocol selection by vote,
//! generations, the leader gets the member list.

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::groups::{JoinOutcome, JoinRequest};
use crate::offset_store::MAX_GROUP_ID_LEN;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// CO-GROUP-ID-1: an empty id, or one too long for its Iggy key, is refused (INVALID_GROUP_ID).
pub(crate) fn valid_group_id(group_id: &str) -> bool {
    !group_id.is_empty() && group_id.len() <= MAX_GROUP_ID_LEN
}

/// The topics a consumer-protocol member subscribes to, from every protocol it offers; none for
/// other protocol types or metadata that does not decode (the group then carries no topic).
pub(crate) fn subscribed_topics(protocol_type: &str, protocols: &[(String, bytes::Bytes)]) -> Vec<String> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Decodable;
    if protocol_type != "consumer" {
        return Vec::new();
    }
    let mut topics: Vec<String> = Vec::new();
    for (_, metadata) in protocols {
        let mut bytes = metadata.clone();
        if bytes.len() < 2 {
            continue;
        }
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        let _ = bytes::Buf::get_i16(&mut bytes);
        if let Ok(subscription) = ConsumerProtocolSubscription::decode(&mut bytes, version.clamp(0, 3)) {
            topics.extend(subscription.topics.iter().map(|t| t.as_str().to_string()));
        }
    }
    topics.sort();
    topics.dedup();
    topics
}

/// The topics a group's members subscribe to, from the metadata of the protocol it chose.
pub(crate) fn group_topics(group: &crate::groups::DescribedGroup) -> Vec<String> {
    let protocols: Vec<(String, bytes::Bytes)> = group
        .members
        .iter()
        .map(|m| (group.protocol.clone(), m.metadata.clone()))
        .collect();
    subscribed_topics(&group.protocol_type, &protocols)
}

/// Whether a session may poll topics, each asked of Iggy once per request however many groups
/// name it.
pub(crate) struct PollPermissions<'a, B> {
    gateway: &'a Gateway<B>,
    session: &'a Session<B>,
    known: std::collections::HashMap<String, bool>,
}

impl<'a, B: Backend> PollPermissions<'a, B> {
    /// Whether anything is checked: without SASL every session may everything.
    pub(crate) fn checks(&self) -> bool {
        self.session.principal.is_some()
    }

    /// AUTHZ-GROUP-3: whether the session may see `group` (it could join it).
    pub(crate) async fn may_see(&mut self, group_id: &str, group: &crate::groups::DescribedGroup) -> bool {
        !self.checks() || self.all(group_id, &group_topics(group)).await
    }

    pub(crate) fn new(gateway: &'a Gateway<B>, session: &'a Session<B>) -> Self {
        Self {
            gateway,
            session,
            known: std::collections::HashMap::new(),
        }
    }

    /// AUTHZ-GROUP-1: Iggy lets the session poll every existing topic of `topics`, asked by
    /// reading `group_id`'s stored offset of partition 0 in the session (Iggy's GetConsumerOffset
    /// rule is its poll rule). Without SASL everyone may.
    pub(crate) async fn all(&mut self, group_id: &str, topics: &[String]) -> bool {
        if !self.checks() {
            return true;
        }
        let key = crate::offset_store::offsets_group(group_id);
        for topic in topics {
            let allowed = match self.known.get(topic) {
                Some(&allowed) => allowed,
                None => {
                    let target = self.gateway.config.topics.resolve(topic);
                    let answer = self
                        .session
                        .backend
                        .get_consumer_offset(&target.stream, &target.topic, 0, &key)
                        .await;
                    let allowed = !matches!(&answer, Err(e) if crate::error_map::is_denied(e));
                    self.known.insert(topic.clone(), allowed);
                    allowed
                }
            };
            if !allowed {
                tracing::info!(
                    "group {}: {} may not poll subscribed topic {} (AUTHZ-GROUP-1)",
                    crate::log_text::clip(group_id),
                    self.session.who(),
                    crate::log_text::clip(topic)
                );
                return false;
            }
        }
        true
    }
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
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
        let join = JoinRequest {
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
        };
        let topics = subscribed_topics(&join.protocol_type, &join.protocols);
        if PollPermissions::new(gateway, session)
            .all(&join.group_id, &topics)
            .await
        {
            gateway.groups.join(join).await
        } else {
            JoinOutcome::error(ResponseError::GroupAuthorizationFailed.code(), &join.member_id)
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
