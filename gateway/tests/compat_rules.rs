//! Frame-level tests, through `Gateway::handle_frame` on the embedded backend, for the rules the
//! compatibility tier (librdkafka's own test suite, docs/compat.md) found missing or wrong.

use bytes::Bytes;
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

mod common;
use common::{answer, frame};

type EmbeddedGateway = Arc<Gateway<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

/// A gateway that creates topics on first mention, with 4 partitions, as the tier runs it.
fn auto_creating_gateway() -> EmbeddedGateway {
    let args = Args {
        auto_create_topics: Some(true),
        default_partitions: Some(4),
        ..Args::default()
    };
    let config = Config::resolve(args, FileConfig::default()).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7)
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

async fn metadata(gateway: &EmbeddedGateway, names: &[&str], allow_auto_create: bool) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(allow_auto_create);
    answer(
        gateway.handle_frame(frame(ApiKey::Metadata, 12, &request)).await,
        ApiKey::Metadata,
        12,
    )
}

/// librdkafka 0057_invalid_topic: a producer naming `…$#!` must fail at once, and the name must
/// never become a topic, even with automatic creation on.
#[tokio::test]
async fn metadata_name_1_an_invalid_name_is_invalid_topic_and_never_auto_created() {
    let gateway = auto_creating_gateway();
    let response = metadata(&gateway, &["invalid_topic$#!", "good_topic"], true).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [ResponseError::InvalidTopicException.code(), 0]);
    assert_eq!(response.topics[1].partitions.len(), 4, "the valid name is auto-created");
    // Asking again finds nothing was created under the invalid name.
    let again = metadata(&gateway, &["invalid_topic$#!"], true).await;
    assert_eq!(again.topics[0].error_code, ResponseError::InvalidTopicException.code());
    assert!(again.topics[0].partitions.is_empty());
    let listed = answer::<MetadataResponse>(
        gateway
            .handle_frame(frame(
                ApiKey::Metadata,
                12,
                &MetadataRequest::default().with_topics(None),
            ))
            .await,
        ApiKey::Metadata,
        12,
    );
    let names: Vec<String> = listed
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names, ["good_topic"]);
}

/// An existing topic keeps answering by its name (here one made by CreateTopics), and a name
/// Kafka refuses is reported invalid with automatic creation off too.
#[tokio::test]
async fn metadata_name_1_without_auto_create_the_code_is_the_same() {
    let gateway = auto_creating_gateway();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name("made"))
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    let created: CreateTopicsResponse = answer(
        gateway.handle_frame(frame(ApiKey::CreateTopics, 4, &create)).await,
        ApiKey::CreateTopics,
        4,
    );
    assert_eq!(created.topics[0].error_code, 0);
    let response = metadata(&gateway, &["made", "bad name", "missing"], false).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [
            0,
            ResponseError::InvalidTopicException.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
}

async fn create_partitions(
    gateway: &EmbeddedGateway,
    version: i16,
    topics: &[(&str, i32)],
    validate_only: bool,
) -> Vec<(String, i16)> {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    let request = CreatePartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(name, count)| {
                    CreatePartitionsTopic::default()
                        .with_name(topic_name(name))
                        .with_count(*count)
                })
                .collect(),
        )
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only);
    let response: CreatePartitionsResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::CreatePartitions, version, &request))
            .await,
        ApiKey::CreatePartitions,
        version,
    );
    response
        .results
        .into_iter()
        .map(|r| (r.name.0.to_string(), r.error_code))
        .collect()
}

async fn partition_count(gateway: &EmbeddedGateway, name: &str) -> usize {
    metadata(gateway, &[name], false).await.topics[0].partitions.len()
}

/// librdkafka 0044_partition_cnt, 0069_consumer_add_parts, 0112_assign_unknown_part: a topic
/// grows to the requested count, at every advertised version, and the new partitions take
/// records.
#[tokio::test]
async fn topic_add_partitions_1_a_topic_grows_to_the_requested_count() {
    let gateway = auto_creating_gateway();
    assert_eq!(partition_count(&gateway, "grows").await, 0, "not there yet");
    metadata(&gateway, &["grows"], true).await;
    assert_eq!(partition_count(&gateway, "grows").await, 4);
    for (version, count) in [(0, 5), (1, 6), (2, 8), (3, 9)] {
        assert_eq!(
            create_partitions(&gateway, version, &[("grows", count)], false).await,
            [("grows".to_string(), 0)],
            "v{version}"
        );
        assert_eq!(partition_count(&gateway, "grows").await, count as usize, "v{version}");
    }
    // The newest partition takes a record and reports it at offset 0.
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kig_core::batch::{encode_batch, Record, RecordBatch};
    let record = Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: vec![],
    };
    let records = encode_batch(&RecordBatch::from_producer(
        kig_core::compression::Compression::None,
        1_700_000_000_000,
        vec![record],
    ))
    .unwrap();
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name("grows"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(8)
                .with_records(Some(records))])]);
    let produced: ProduceResponse = answer(
        gateway.handle_frame(frame(ApiKey::Produce, 9, &produce)).await,
        ApiKey::Produce,
        9,
    );
    let partition = &produced.responses[0].partition_responses[0];
    assert_eq!((partition.error_code, partition.base_offset), (0, 0));
}

/// Topics and the partition counts asked for them.
type Counts = &'static [(&'static str, i32)];

/// What Kafka refuses is refused the same way, and a refused or validate-only request changes
/// nothing.
#[tokio::test]
async fn topic_add_partitions_1_refusals_and_validate_only_change_nothing() {
    let gateway = auto_creating_gateway();
    metadata(&gateway, &["fixed"], true).await;
    let invalid_partitions = ResponseError::InvalidPartitions.code();
    let cases: &[(Counts, bool, &[i16])] = &[
        (&[("fixed", 3)], false, &[invalid_partitions]),
        (&[("fixed", 4)], false, &[invalid_partitions]),
        (&[("fixed", 4 + 1001)], false, &[invalid_partitions]),
        (
            &[("missing", 8)],
            false,
            &[ResponseError::UnknownTopicOrPartition.code()],
        ),
        (
            &[("fixed", 6), ("fixed", 7)],
            false,
            &[
                ResponseError::InvalidRequest.code(),
                ResponseError::InvalidRequest.code(),
            ],
        ),
        (&[("fixed", 6)], true, &[0]),
    ];
    for (topics, validate_only, codes) in cases {
        let got: Vec<i16> = create_partitions(&gateway, 3, topics, *validate_only)
            .await
            .into_iter()
            .map(|(_, code)| code)
            .collect();
        assert_eq!(&got, codes, "{topics:?} validate_only={validate_only}");
        assert_eq!(
            partition_count(&gateway, "fixed").await,
            4,
            "{topics:?} changed the topic"
        );
    }
    assert_eq!(
        partition_count(&gateway, "missing").await,
        0,
        "the missing topic was created"
    );
}
