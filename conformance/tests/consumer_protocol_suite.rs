//! The KIP-848 consumer-protocol cases against an in-process gateway on the embedded backend.

mod common;

suite!(
    consumer_protocol_cases;
    consumer_protocol_two_members_split_a_topic_and_read_everything,
    consumer_protocol_new_member_resumes_after_the_members_commits,
    consumer_protocol_member_joining_and_leaving_while_producing_never_shares_a_partition,
    consumer_protocol_member_is_fenced_after_its_session_lapses,
    consumer_protocol_regex_subscription_is_assigned_the_matching_topics_only,
    consumer_protocol_static_member_restarts_into_its_partitions,
);
