//! DescribeGroups: state, protocol and members of groups this gateway coordinates. An unknown
//! group is reported in state `Dead`, as Kafka does.

use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let groups = request
        .groups
        .into_iter()
        .map(|group_id| {
            let id = group_id.0.as_str().to_string();
            let described = DescribedGroup::default()
                .with_group_id(group_id)
                .with_authorized_operations(i32::MIN);
            if !gateway.is_coordinator(&id) {
                return described.with_error_code(ResponseError::NotCoordinator.code());
            }
            match gateway.groups.describe(&id) {
                None => described.with_group_state(StrBytes::from_static_str("Dead")),
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
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
