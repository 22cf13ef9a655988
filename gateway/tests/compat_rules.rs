//! Frame-level tests, through `Gateway::handle_frame` on the embedded backend, for the rules the
//! compatibility tier (librdkafka's own test suite, docs/compat.md) found missing or wrong.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::{Gateway, Reply};
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::sync::Arc;

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

fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(5)
        .with_client_id(Some(StrBytes::from_static_str("compat")));
    let mut out = BytesMut::new();
    header.encode(&mut out, key.request_header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn answer<T: Decodable>(reply: Result<Reply, RequestError>, key: ApiKey, version: i16) -> T {
    let Reply::Frame(mut bytes) = reply.expect("answered, not closed") else {
        panic!("no response");
    };
    ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    T::decode(&mut bytes, version).unwrap()
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
