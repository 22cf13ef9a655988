//! ListGroups: the groups this gateway coordinates, filtered by state from v4.

use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: ListGroupsRequest) -> ListGroupsResponse {
    let groups = gateway
        .groups
        .list()
        .into_iter()
        // Kafka matches state names case-insensitively.
        .filter(|(_, _, state)| {
            request.states_filter.is_empty()
                || request
                    .states_filter
                    .iter()
                    .any(|f| f.as_str().eq_ignore_ascii_case(state.name()))
        })
        .map(|(id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state.name()))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
