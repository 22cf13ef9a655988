//! The librdkafka cases against an in-process gateway on the embedded backend.

mod common;

suite!(
    rdkafka_cases;
    admin_client_creates_and_deletes_a_topic,
    produce_and_consume_every_mapping_case_with_none,
    produce_and_consume_every_mapping_case_with_gzip,
    produce_and_consume_every_mapping_case_with_snappy,
    produce_and_consume_every_mapping_case_with_lz4,
    produce_and_consume_every_mapping_case_with_zstd,
    idempotent_producer_produces_and_reads_back,
    consumer_starting_at_latest_sees_only_new_records,
    fetch_watermarks_match_produced_count,
    rdkafka_metadata_for_all_topics,
);
