//! ListGroups: the groups this gateway coordinates (LISTGROUPS-COORDINATED-1), filtered by state
//! from v4 (LISTGROUPS-STATES-FILTER-1), and to those the principal may join (AUTHZ-GROUP-3).

use super::group_authz::{PollPermissions, Verdict};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    let mut permissions = PollPermissions::new(gateway, session);
    let mut visible = Vec::new();
    // LISTGROUPS-COORDINATED-1: only the groups held here, never those known by offsets alone.
    for (id, protocol_type, state) in gateway.groups.list() {
        // LISTGROUPS-STATES-FILTER-1: Kafka matches state names case-insensitively.
        let wanted = request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(state.name()));
        if !wanted {
            continue;
        }
        // AUTHZ-GROUP-3: each distinct topic is asked of Iggy once per request; without SASL
        // nothing is asked. The topics were read from the subscriptions when members joined
        // (GROUP-SUBSCRIPTION-1): nothing is decoded or copied per request.
        let seen = !permissions.checks() || permissions.on_group(&id).await == Verdict::Allowed;
        if seen {
            visible.push((id, protocol_type, state));
        }
    }
    let mut groups: Vec<ListedGroup> = visible
        .into_iter()
        .map(|(id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state.name()))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    // GROUP-CONSUMER-DESCRIBE-1: consumer-protocol groups are listed with protocol type `consumer`,
    // as Kafka lists them, under the same state filter and visibility.
    for (id, state) in gateway.groups.consumer_list() {
        let wanted = request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(state));
        if !wanted || (permissions.checks() && permissions.on_group(&id).await != Verdict::Allowed) {
            continue;
        }
        groups.push(
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str("consumer")),
        );
    }
    ListGroupsResponse::default().with_groups(groups)
}
