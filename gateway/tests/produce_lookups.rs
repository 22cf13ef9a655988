//! PRODUCE-RESOLVE-2 counted at the backend: a stream of Produce requests to one topic makes one
//! topic lookup a second, a partition past the kept count is looked up again (and accepted once
//! it exists), and a topic deleted since answers its append's UNKNOWN_TOPIC_OR_PARTITION. The
//! only test in its binary, because it reads the process-wide backend-call counters (`Metered`),
//! which another test running beside it would move.

use bytes::Bytes;
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::{SharedRng, TokioClock};
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::handlers::produce;
use kafka_iggy_gateway::known_topics::KNOWN_TOPIC_TTL_US;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kig_core::batch::{encode_batch, Record, RecordBatch};
use kig_core::compression::Compression;
use std::sync::Arc;

mod lookups_support;
use lookups_support::{metered_backend_with_topic, topic_lookups};
use std::time::Duration;

/// A Produce of one 3-record batch to `orders`-`partition`, acks=all.
fn produce_to(partition: i32) -> ProduceRequest {
    let records = (0..3)
        .map(|i| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: i,
            key: None,
            value: Some(Bytes::from_static(b"value")),
            headers: vec![],
        })
        .collect();
    let batch = encode_batch(&RecordBatch::from_producer(
        Compression::None,
        1_700_000_000_000,
        records,
    ))
    .expect("encoded");
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("orders")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// The one partition's error code.
async fn produce_code(
    gateway: &Gateway<Metered<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>,
    partition: i32,
) -> i16 {
    let session = gateway.default_session.clone();
    let response = produce::handle(
        gateway,
        &session,
        std::net::Ipv4Addr::LOCALHOST.into(),
        produce_to(partition),
        9,
    )
    .await
    .expect("acks=all is answered");
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test(start_paused = true)]
async fn produce_resolve_2_a_stream_of_produces_makes_one_topic_lookup() {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    let clock = Arc::new(TokioClock::new(0));
    let backend = metered_backend_with_topic(&config, clock.clone(), "orders", 1).await;
    let target = config.topics.resolve("orders");
    let gateway = Gateway::new(Arc::new(config), Arc::new(backend), clock, SharedRng::seeded(1));

    let before = topic_lookups();
    for _ in 0..5 {
        assert_eq!(produce_code(&gateway, 0).await, 0);
    }
    assert_eq!(
        topic_lookups(),
        before + 1,
        "five Produces within a second looked the topic up once each"
    );

    // A partition past the kept count: looked up afresh, and accepted once it exists.
    let backend = gateway.backend.clone();
    backend
        .add_partitions(&target.stream, &target.topic, 1)
        .await
        .expect("a second partition");
    assert_eq!(produce_code(&gateway, 1).await, 0);
    assert_eq!(topic_lookups(), before + 2);
    assert_eq!(
        produce_code(&gateway, 2).await,
        ResponseError::UnknownTopicOrPartition.code(),
        "a partition past the fresh count is refused"
    );
    assert_eq!(topic_lookups(), before + 3, "a refusal comes from a fresh lookup");

    // The kept answer lapses after a second.
    tokio::time::advance(Duration::from_micros(KNOWN_TOPIC_TTL_US)).await;
    assert_eq!(produce_code(&gateway, 0).await, 0);
    assert_eq!(topic_lookups(), before + 4);

    // Deleted since the last lookup: the append answers what the lookup would have.
    backend
        .delete_topic(&target.stream, &target.topic)
        .await
        .expect("deleted");
    assert_eq!(
        produce_code(&gateway, 0).await,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(topic_lookups(), before + 4, "the append, not a lookup, refused it");
}
