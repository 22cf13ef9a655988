//! The hostile-client cases (`cases::hostile_cases`) against an in-process gateway on the
//! embedded backend, one test per case, with the suite's defaults plus the two lowered limits of
//! `common::hostile_options`.

mod common;

suite!(
    hostile hostile_cases;
    hostile_join_group_with_200000_protocols,
    hostile_join_group_with_a_32760_byte_client_id,
    hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one,
    hostile_retention_ms_beyond_what_iggy_counts_never_expires,
    hostile_many_idle_connections,
    hostile_slow_senders_trickle_frames,
    hostile_pipelined_requests_whose_answers_are_not_read,
    hostile_fetch_naming_one_partition_5000_times_waiting_i32_max,
    hostile_trailing_bytes_after_the_request_body,
    hostile_32767_byte_strings_in_every_echoed_field,
    hostile_zstd_batch_declaring_a_million_empty_records,
    hostile_near_max_frame_zstd_produces_on_two_connections,
    hostile_connections_that_send_only_a_max_frame_length_prefix,
    hostile_consumer_heartbeats_with_megabyte_ids_and_a_group_of_the_largest_members,
    hostile_consumer_heartbeats_from_strangers_naming_patterns,
    hostile_consumer_patterns_costly_to_match_against_many_topics,
    hostile_offset_delete_under_a_consumer_protocol_groups_feet,
);
