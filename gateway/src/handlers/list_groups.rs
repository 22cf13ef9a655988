//! ListGroups: the groups this gateway coordinates (LISTGROUPS-COORDINATED-1), filtered by state
//! from v4 (LISTGROUPS-STATES-FILTER-1) and by type from v5 (LISTGROUPS-TYPES-FILTER-1, KIP-1043),
//! and to those the principal may join (AUTHZ-GROUP-3), within `max_response_bytes`
//! (LIMIT-GROUP-ANSWER-BYTES-1).

use super::group_authz::{PollPermissions, Verdict};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::response_budget::string_bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

/// LISTGROUPS-TYPES-FILTER-1: whether a group of type `group_type` (`classic` or `consumer`) passes
/// the v5 types filter: an empty filter passes every group, names are compared
/// case-insensitively as Kafka's `GroupType.parse` does, and a name that is no type matches none.
fn type_wanted(filter: &[StrBytes], group_type: &str) -> bool {
    filter.is_empty()
        || filter
            .iter()
            .any(|f| f.as_str().trim().eq_ignore_ascii_case(group_type))
}

/// What one listed group takes in the answer, at most: its four strings and tagged fields.
fn entry_bytes(id: &str, protocol_type: &str, state: &str, group_type: &str) -> usize {
    [id, protocol_type, state, group_type]
        .iter()
        .map(|v| string_bytes(v.len()))
        .sum::<usize>()
        + 1
}

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
        if !wanted || !type_wanted(&request.types_filter, "classic") {
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
    // LIMIT-GROUP-ANSWER-BYTES-1: each entry charged before it is built; past the budget the
    // listing is a top-level error, as OffsetFetch's is, never a silently shortened list.
    let mut budget = gateway.response_budget();
    let past_budget = |exceeded: crate::response_budget::Exceeded, id: &str| {
        exceeded.log("ListGroups", &format!("group {}", crate::log_text::clip(id)));
        ListGroupsResponse::default().with_error_code(ResponseError::UnknownServerError.code())
    };
    let mut groups: Vec<ListedGroup> = Vec::with_capacity(visible.len());
    for (id, protocol_type, state) in visible {
        if let Err(exceeded) = budget.charge(entry_bytes(&id, &protocol_type, state.name(), "classic")) {
            return past_budget(exceeded, &id);
        }
        groups.push(
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state.name()))
                .with_group_type(StrBytes::from_static_str("classic")),
        );
    }
    // GROUP-CONSUMER-DESCRIBE-1: consumer-protocol groups are listed with protocol type `consumer`,
    // as Kafka lists them, under the same state filter and visibility.
    for (id, state) in gateway.groups.consumer_list() {
        let wanted = request.states_filter.is_empty()
            || request
                .states_filter
                .iter()
                .any(|f| f.as_str().eq_ignore_ascii_case(state));
        if !wanted
            || !type_wanted(&request.types_filter, "consumer")
            || (permissions.checks() && permissions.on_group(&id).await != Verdict::Allowed)
        {
            continue;
        }
        if let Err(exceeded) = budget.charge(entry_bytes(&id, "consumer", state, "consumer")) {
            return past_budget(exceeded, &id);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listgroups_types_filter_1_types_are_matched_case_insensitively() {
        let filter =
            |names: &[&str]| -> Vec<StrBytes> { names.iter().map(|n| StrBytes::from_string(n.to_string())).collect() };
        assert!(type_wanted(&[], "classic") && type_wanted(&[], "consumer"));
        assert!(type_wanted(&filter(&["Consumer"]), "consumer"));
        assert!(!type_wanted(&filter(&["consumer"]), "classic"));
        assert!(type_wanted(&filter(&["share", "CLASSIC"]), "classic"));
        assert!(
            !type_wanted(&filter(&["streams"]), "consumer"),
            "a type not served matches nothing"
        );
    }
}
