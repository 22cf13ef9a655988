//! The amplification cases (`cases::answer_bound_cases`, issue 31) against an in-process gateway
//! on the embedded backend, one test per case, with the hostile suite's settings.

mod common;

suite!(
    hostile answer_bound_cases;
    answer_describe_groups_naming_one_400_kib_group_2500_times,
    answer_metadata_naming_one_100_partition_topic_4000_times,
    answer_list_offsets_naming_one_partition_4000_times,
    answer_offset_fetch_naming_one_partition_4000_times,
    answer_describe_configs_naming_one_topic_4000_times,
    answer_delete_groups_naming_one_group_4000_times,
);
