//! The group amplification cases (`cases::group_amplification_cases`) against an in-process
//! gateway on the embedded backend, one test per case, with the suite's defaults: the limits
//! under test are the ones a real deployment keeps.

mod common;

suite!(
    group_amplification_cases;
    group_join_subscribing_to_millions_of_empty_topic_names,
    group_one_client_joining_12000_groups_leaves_room_for_others,
);
