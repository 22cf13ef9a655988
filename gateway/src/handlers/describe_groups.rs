//! DescribeGroups: state, protocol and members of groups this gateway coordinates
//! (DESCRIBEGROUPS-STATE-1, DESCRIBEGROUPS-MEMBERS-1). An unknown group is reported in state
//! `Dead`, as Kafka does (DESCRIBEGROUPS-UNKNOWN-1); a group the principal may not join is
//! GROUP_AUTHORIZATION_FAILED (AUTHZ-GROUP-3).

use super::group_authz::PollPermissions;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut permissions = PollPermissions::new(gateway, session);
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in request.groups {
        let id = group_id.0.as_str().to_string();
        let described = DescribedGroup::default()
            .with_group_id(group_id)
            .with_authorized_operations(i32::MIN);
        let entry = if !gateway.is_coordinator(&id) {
            described.with_error_code(ResponseError::NotCoordinator.code())
        } else {
            let found = gateway.groups.describe(&id);
            // AUTHZ-GROUP-3: members, client ids and assignments only to who may join.
            let hidden = match &found {
                Some(g) => !permissions.may_see(&id, g).await,
                None => false,
            };
            match found {
                _ if hidden => described.with_error_code(ResponseError::GroupAuthorizationFailed.code()),
                // DESCRIBEGROUPS-UNKNOWN-1: never joined, or forgotten once vacant.
                None => described.with_group_state(StrBytes::from_static_str("Dead")),
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
