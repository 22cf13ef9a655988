//! The consumer-group cases against an in-process gateway on the embedded backend.

mod common;

suite!(
    group_cases;
    two_members_split_partitions_disjointly,
    leaving_member_hands_over_at_committed_offsets,
    restarted_consumer_resumes_at_committed_offsets,
    caught_up_commit_survives_a_consumer_restart,
    commit_of_zero_on_an_empty_partition_survives_records_arriving,
    commit_of_minus_one_deletes_the_committed_offset,
    offset_delete_removes_the_named_offsets_and_spares_subscribed_topics,
    offset_fetch_with_null_topics_lists_committed_partitions,
    group_id_longer_than_246_bytes_is_invalid,
    describe_list_and_delete_groups,
    member_commits_while_a_rebalance_is_prepared_not_while_it_completes,
    find_coordinator_for_transactions_is_refused,
);
