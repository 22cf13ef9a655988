//! ConsumerGroupDescribe (API 69, KIP-848): each consumer-protocol group this gateway coordinates,
//! with its epochs, assignor and members' current and target assignments
//! (GROUP-CONSUMER-DESCRIBE-1). A group not held here, or a classic one, is GROUP_ID_NOT_FOUND, as
//! Kafka answers; one the principal may not join is GROUP_AUTHORIZATION_FAILED (AUTHZ-GROUP-3). The
//! answer stays within `max_response_bytes` as it is built (LIMIT-GROUP-ANSWER-BYTES-1).

use super::group_authz::{PollPermissions, Verdict};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::groups::consumer_protocol::Assignment;
use crate::groups::topic_id::topic_id;
use crate::groups::ConsumerDescription;
use crate::log_text::clip;
use crate::response_budget::string_bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashSet;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn wire(assignment: &Assignment) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        assignment
            .iter()
            .map(|(topic, ps)| {
                TopicPartitions::default()
                    .with_topic_id(topic_id(topic))
                    .with_topic_name(TopicName(s(topic)))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// A group entry's fixed fields (error code, error message's prefix, authorized operations,
/// tagged fields) beyond its id, at most.
const GROUP_ENTRY_BYTES: usize = 2 + 5 + 4 + 1;

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut permissions = PollPermissions::new(gateway, session);
    let mut budget = gateway.response_budget();
    let mut seen = HashSet::new();
    let mut groups = Vec::new();
    for group_id in request.group_ids {
        if !seen.insert(group_id.0.clone()) {
            continue;
        }
        let id = group_id.0.as_str().to_string();
        let entry_bytes = GROUP_ENTRY_BYTES + string_bytes(id.len());
        // The id and error echo the request, which the frame limit bounds: never refused.
        let _ = budget.charge(entry_bytes);
        let entry = DescribedGroup::default()
            .with_group_id(group_id)
            .with_authorized_operations(i32::MIN);
        let error = |code: i16, message: &str| entry.clone().with_error_code(code).with_error_message(Some(s(message)));
        if !gateway.is_coordinator(&id) {
            groups.push(error(ResponseError::NotCoordinator.code(), "Not the coordinator."));
            continue;
        }
        let not_found = || {
            let message = if gateway.groups.is_classic(&id) {
                format!("Group {} is not a consumer group.", clip(&id))
            } else {
                format!("Group {} not found.", clip(&id))
            };
            error(ResponseError::GroupIdNotFound.code(), &message)
        };
        if !gateway.groups.is_consumer(&id) {
            groups.push(not_found());
            continue;
        }
        if permissions.checks() && permissions.on_group(&id).await != Verdict::Allowed {
            groups.push(error(ResponseError::GroupAuthorizationFailed.code(), "Not authorized."));
            continue;
        }
        // LIMIT-GROUP-ANSWER-BYTES-1: the members are charged under the coordinator's lock before
        // they are copied; past the budget the group is an error, as DescribeGroups answers one.
        let described = match gateway.groups.consumer_describe_within(&id, &mut budget) {
            ConsumerDescription::NotHeld => {
                groups.push(not_found());
                continue;
            }
            ConsumerDescription::TooLarge { bytes, exceeded } => {
                exceeded.log("ConsumerGroupDescribe", &format!("group {}", clip(&id)));
                // One that fits an answer of its own is retried alone by the admin clients.
                let code = if budget.fits_alone(entry_bytes + bytes) {
                    ResponseError::CoordinatorLoadInProgress.code()
                } else {
                    ResponseError::UnknownServerError.code()
                };
                groups.push(error(
                    code,
                    "The group's description is past the gateway's max_response_bytes.",
                ));
                continue;
            }
            ConsumerDescription::Described(described) => described,
        };
        // The copies made under the lock are moved into the answer, not copied again.
        let owned = StrBytes::from_string;
        let members = described
            .members
            .into_iter()
            .map(|(m, target)| {
                Member::default()
                    .with_member_epoch(m.epoch)
                    .with_assignment(wire(&m.assigned))
                    .with_target_assignment(wire(&target))
                    .with_member_id(owned(m.id))
                    .with_instance_id(m.instance_id.map(owned))
                    .with_rack_id(m.rack_id.map(owned))
                    .with_client_id(owned(m.client_id))
                    .with_client_host(owned(m.client_host))
                    .with_subscribed_topic_names(m.subscribed.into_iter().map(|t| TopicName(owned(t))).collect())
                    // GROUP-CONSUMER-REGEX-1: the pattern apart from the names, as Kafka reports it.
                    .with_subscribed_topic_regex(m.subscribed_regex.map(owned))
                    // v1: 1 is a consumer-protocol member (0 would be a classic one).
                    .with_member_type(1)
            })
            .collect();
        groups.push(
            entry
                .with_group_state(s(described.state))
                .with_group_epoch(described.group_epoch)
                .with_assignment_epoch(described.assignment_epoch)
                .with_assignor_name(s(described.assignor))
                .with_members(members),
        );
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
