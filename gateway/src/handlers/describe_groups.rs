//! DescribeGroups: state, protocol and members of groups this gateway coordinates
//! (DESCRIBEGROUPS-STATE-1, DESCRIBEGROUPS-MEMBERS-1). An unknown group is reported in state
//! `Dead`, as Kafka does (DESCRIBEGROUPS-UNKNOWN-1), and so is a consumer-protocol group, which
//! from v6 also carries GROUP_ID_NOT_FOUND and a message, as Kafka 4 answers
//! (GROUP-CONSUMER-DESCRIBE-1, KIP-1043); a group the principal may not join is
//! GROUP_AUTHORIZATION_FAILED (AUTHZ-GROUP-3). A group named more than once is described once
//! (LIMIT-DESCRIBEGROUPS-DUPLICATES-1), and the members of all groups answered fit
//! `max_response_bytes` (LIMIT-RESPONSE-BYTES-1).

use super::group_authz::{PollPermissions, Verdict};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::response_budget::string_bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashSet;

/// A group entry's fixed fields (error code, member array length, authorized operations, tagged
/// fields) beyond its strings, at most.
const GROUP_ENTRY_BYTES: usize = 2 + 5 + 4 + 1;

/// What a described group's members and strings take, as `GroupCoordinator::described_bytes`
/// counts them.
fn copied_bytes(group: &crate::groups::DescribedGroup) -> usize {
    let members: usize = group
        .members
        .iter()
        .map(|m| {
            string_bytes(m.member_id.len())
                + string_bytes(m.instance_id.as_ref().map_or(0, String::len))
                + string_bytes(m.client_id.len())
                + string_bytes(m.client_host.len())
                + string_bytes(m.metadata.len())
                + string_bytes(m.assignment.len())
                + 1
        })
        .sum();
    string_bytes(group.state.name().len())
        + string_bytes(group.protocol_type.len())
        + string_bytes(group.protocol.len())
        + members
}

/// The answer for a group this gateway holds no classic group of, as Kafka 4's
/// GroupMetadataManager gives it: state `Dead` and no members; from v6 (KIP-1043) error
/// GROUP_ID_NOT_FOUND with a message saying whether the group is unknown or of the consumer
/// protocol, below v6 error NONE (DESCRIBEGROUPS-UNKNOWN-1, GROUP-CONSUMER-DESCRIBE-1).
fn not_classic(described: DescribedGroup, id: &str, consumer: bool, version: i16) -> DescribedGroup {
    let dead = described.with_group_state(StrBytes::from_static_str("Dead"));
    if version < 6 {
        return dead;
    }
    let message = if consumer {
        format!("Group {} is not a classic group.", crate::log_text::clip(id))
    } else {
        format!("Group {} not found.", crate::log_text::clip(id))
    };
    dead.with_error_code(ResponseError::GroupIdNotFound.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// Each group once, in the order first named (LIMIT-DESCRIBEGROUPS-DUPLICATES-1).
fn distinct(groups: Vec<GroupId>) -> Vec<GroupId> {
    let mut seen = HashSet::with_capacity(groups.len());
    groups.into_iter().filter(|g| seen.insert(g.0.clone())).collect()
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut permissions = PollPermissions::new(gateway, session);
    let mut budget = gateway.response_budget();
    let requested = distinct(request.groups);
    let mut groups = Vec::with_capacity(requested.len());
    for group_id in requested {
        let id = group_id.0.as_str().to_string();
        let entry_bytes = GROUP_ENTRY_BYTES + string_bytes(id.len());
        let described = DescribedGroup::default()
            .with_group_id(group_id)
            .with_authorized_operations(i32::MIN);
        // An entry's id and error are charged whatever it carries: they echo the request, which
        // the frame limit bounds, so they are never refused.
        let _ = budget.charge(entry_bytes);
        let entry = if !gateway.is_coordinator(&id) {
            described.with_error_code(ResponseError::NotCoordinator.code())
        } else {
            // LIMIT-RESPONSE-BYTES-1: the members are charged before they are copied.
            let members_bytes = gateway.groups.described_bytes(&id).unwrap_or(0);
            if let Err(exceeded) = budget.charge(members_bytes) {
                exceeded.log("DescribeGroups", &format!("group {}", crate::log_text::clip(&id)));
                // A group that fits an answer of its own is retried alone by the Java admin
                // client and librdkafka; one that never fits is an error the operator must lift.
                let code = if budget.fits_alone(entry_bytes + members_bytes) {
                    ResponseError::CoordinatorLoadInProgress.code()
                } else {
                    ResponseError::UnknownServerError.code()
                };
                groups.push(described.with_error_code(code));
                continue;
            }
            let found = gateway.groups.describe(&id);
            // A member that joined between the count and the copy is charged too.
            let grown_bytes = found.as_ref().map_or(0, copied_bytes).saturating_sub(members_bytes);
            if let Err(exceeded) = budget.charge(grown_bytes) {
                exceeded.log("DescribeGroups", &format!("group {}", crate::log_text::clip(&id)));
                groups.push(described.with_error_code(ResponseError::CoordinatorLoadInProgress.code()));
                continue;
            }
            // AUTHZ-GROUP-3: members, client ids and assignments only to who may join.
            let hidden = match &found {
                Some(g) => !permissions.may_see(&id, g).await,
                None => false,
            };
            // GROUP-CONSUMER-DESCRIBE-1: a consumer-protocol group is no classic group.
            // Asked without copying the group's members (LIMIT-GROUP-ANSWER-BYTES-1).
            let consumer = found.is_none() && gateway.groups.is_consumer(&id);
            let hidden =
                hidden || (consumer && permissions.checks() && permissions.on_group(&id).await != Verdict::Allowed);
            match found {
                _ if hidden => described.with_error_code(ResponseError::GroupAuthorizationFailed.code()),
                None => not_classic(described, &id, consumer, version),
                // DESCRIBEGROUPS-STATE-1, DESCRIBEGROUPS-MEMBERS-1: the same in every state.
                Some(g) => described
                    .with_group_state(StrBytes::from_static_str(g.state.name()))
                    .with_protocol_type(StrBytes::from_string(g.protocol_type))
                    .with_protocol_data(StrBytes::from_string(g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(StrBytes::from_string(m.member_id))
                                    .with_group_instance_id(m.instance_id.map(StrBytes::from_string))
                                    .with_client_id(StrBytes::from_string(m.client_id))
                                    .with_client_host(StrBytes::from_string(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            }
        };
        groups.push(entry);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_describegroups_duplicates_1_each_group_once_in_first_named_order() {
        let ids = |names: &[&str]| -> Vec<GroupId> {
            names
                .iter()
                .map(|n| GroupId(StrBytes::from_string(n.to_string())))
                .collect()
        };
        assert_eq!(distinct(ids(&["b", "a", "b", "a", "c"])), ids(&["b", "a", "c"]));
    }

    #[test]
    fn group_consumer_describe_1_describegroups_unknown_1_not_classic_by_version() {
        let entry = || DescribedGroup::default();
        for consumer in [false, true] {
            let old = not_classic(entry(), "g", consumer, 5);
            assert_eq!((old.error_code, old.group_state.as_str()), (0, "Dead"));
            assert_eq!(old.error_message, None);
            let new = not_classic(entry(), "g", consumer, 6);
            assert_eq!(
                (new.error_code, new.group_state.as_str()),
                (ResponseError::GroupIdNotFound.code(), "Dead")
            );
            let expected = if consumer {
                "Group g is not a classic group."
            } else {
                "Group g not found."
            };
            assert_eq!(new.error_message.as_deref(), Some(expected));
            assert!(new.members.is_empty() && new.protocol_type.is_empty());
        }
    }
}
