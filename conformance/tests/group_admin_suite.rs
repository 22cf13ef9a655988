//! DescribeGroups and ListGroups (`cases::group_admin_cases`) against an in-process gateway on
//! the embedded backend.

mod common;

suite!(group_admin_cases;
    describegroups_state_1_describegroups_members_1_a_group_through_its_states,
    describegroups_unknown_1_a_group_nobody_joined_is_dead,
    listgroups_coordinated_1_listgroups_states_filter_1_lists_by_state,
);
