//! FETCH-RESOLVE-1 counted at the backend: a Fetch whose every partition answers cleanly makes no
//! topic lookup, and one that names a topic or partition the backend does not hold does, and
//! answers the lookup's error. The only test in its binary, because it reads the process-wide
//! backend-call counters (`Metered`), which another test running beside it would move.

use iggy_common::IggyMessage;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::{SharedRng, TokioClock};
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::handlers::fetch;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kig_core::mapping::{record_to_message, KafkaRecord};
use std::sync::Arc;

mod lookups_support;
use lookups_support::{metered_backend_with_topic, topic_lookups};

/// A Fetch of each `(topic, partition, offset)`, 100 KiB per partition, answered at once.
fn fetch_of(partitions: &[(&'static str, i32, i64)]) -> FetchRequest {
    let topics = partitions
        .iter()
        .map(|(name, partition, offset)| {
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(name)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(*partition)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(100 << 10)])
        })
        .collect();
    FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_max_wait_ms(0)
        .with_topics(topics)
}

/// Each answered partition as (topic, partition, error code, has records).
fn answers(response: &FetchResponse) -> Vec<(String, i32, i16, bool)> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let has_records = p.records.as_ref().is_some_and(|r| !r.is_empty());
                (t.topic.0.to_string(), p.partition_index, p.error_code, has_records)
            })
        })
        .collect()
}

fn keyed_message(i: u32) -> IggyMessage {
    let record = KafkaRecord {
        timestamp_ms: 1_700_000_000_000,
        key: Some(format!("key-{i}").into()),
        value: Some(vec![b'v'; 1_000].into()),
        headers: Vec::new(),
    };
    record_to_message(record).expect("a mappable record").0
}

#[tokio::test]
async fn fetch_resolve_1_a_fetch_answered_cleanly_makes_no_topic_lookup() {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    let clock = Arc::new(TokioClock::new(0));
    let backend = metered_backend_with_topic(&config, clock.clone(), "orders", 2).await;
    let target = config.topics.resolve("orders");
    let messages = (0..300).map(keyed_message).collect();
    backend
        .append(&target.stream, &target.topic, 0, messages)
        .await
        .expect("append");
    let gateway = Gateway::new(Arc::new(config), Arc::new(backend), clock, SharedRng::seeded(1));
    let session = gateway.default_session.clone();

    // Partition 0 holds 300 KiB, so each Fetch of 100 KiB leaves a read made ahead for the next;
    // partition 1 is empty and answered at its high watermark.
    let lookups_before = topic_lookups();
    for offset in [0, 90, 180] {
        let request = fetch_of(&[("orders", 0, offset), ("orders", 1, 0)]);
        let response = fetch::handle(&gateway, &session, request, 12).await;
        assert_eq!(
            answers(&response),
            vec![("orders".into(), 0, 0, true), ("orders".into(), 1, 0, false)],
            "Fetch from offset {offset}"
        );
    }
    assert_eq!(
        topic_lookups(),
        lookups_before,
        "a Fetch every partition of which answered cleanly looked its topics up"
    );

    // An unknown topic and a partition past the topic's count: the pass has errors, so the
    // topics are looked up, and the lookup's error is the answer.
    let request = fetch_of(&[("orders", 0, 0), ("missing", 0, 0), ("orders", 2, 0)]);
    let response = fetch::handle(&gateway, &session, request, 12).await;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        answers(&response),
        vec![
            ("orders".into(), 0, 0, true),
            ("missing".into(), 0, unknown, false),
            ("orders".into(), 2, unknown, false),
        ]
    );
    assert!(
        topic_lookups() >= lookups_before + 2,
        "a Fetch with an error looks up each of its topics"
    );
}
