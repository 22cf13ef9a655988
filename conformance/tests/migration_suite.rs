//! The migration read path (`cases::migration_cases`) against an in-process gateway on the
//! embedded backend, which hands the cases the model to write to as a native Iggy client.

mod common;

suite!(migration_cases;
    map_read_native_1_iggy_written_messages_read_as_kafka_records,
    map_read_order_1_gateway_headers_decide_how_a_message_reads,
    env_mark_1_env_version_1_envelopes_are_marked_and_read_by_version,
    map_read_malformed_1_undecodable_gateway_headers_are_served_natively,
);
