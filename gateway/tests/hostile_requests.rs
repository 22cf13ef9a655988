//! Requests no cooperative client sends, answered through `Gateway::handle_frame` on the
//! embedded backend: each pins one row of the hostile-client report (issue 8) or one LIMIT-*
//! rule. Every test here panicked, hung or answered wrongly before its limit existed.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kig_core::batch::{encode_batch, Record, RecordBatch};
use kig_core::compression::Compression;
use std::sync::Arc;
use std::time::Duration;

type EmbeddedGateway = Arc<Gateway<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

fn gateway_with(limits: LimitSettings) -> EmbeddedGateway {
    let file = FileConfig {
        group_min_session_timeout_ms: Some(1_000),
        limits,
        ..FileConfig::default()
    };
    let config = Config::resolve(Args::default(), file).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7)
}

fn gateway() -> EmbeddedGateway {
    gateway_with(LimitSettings::default())
}

/// A request frame (without its size prefix) with `client_id` in its header.
fn frame_from<T: Encodable>(key: ApiKey, version: i16, client_id: Option<&str>, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(11)
        .with_client_id(client_id.map(|c| StrBytes::from_string(c.to_string())));
    let mut out = BytesMut::new();
    header.encode(&mut out, key.request_header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Bytes {
    frame_from(key, version, Some("hostile"), body)
}

/// The response body of an answered frame, decoded at `version`.
fn answer<T: Decodable>(reply: Result<Reply, RequestError>, key: ApiKey, version: i16) -> T {
    let Reply::Frame(frame) = reply.expect("answered, not closed") else {
        panic!("no response");
    };
    let mut bytes = frame.to_bytes();
    ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    T::decode(&mut bytes, version).unwrap()
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

async fn create_topic(gateway: &EmbeddedGateway, name: &str) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let response: CreateTopicsResponse = answer(
        gateway.handle_frame(frame(ApiKey::CreateTopics, 4, &request)).await,
        ApiKey::CreateTopics,
        4,
    );
    assert_eq!(response.topics[0].error_code, 0);
}

fn records(values: &[&[u8]]) -> Bytes {
    let records = values
        .iter()
        .map(|v| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: vec![],
        })
        .collect();
    encode_batch(&RecordBatch::from_producer(
        Compression::None,
        1_700_000_000_000,
        records,
    ))
    .unwrap()
}

fn produce_to(topics: &[(&str, Bytes)]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(
            topics
                .iter()
                .map(|(name, records)| {
                    TopicProduceData::default()
                        .with_name(topic_name(name))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records.clone()))])
                })
                .collect(),
        )
}

fn join_group(group: &str, protocols: usize) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(
            (0..protocols)
                .map(|i| {
                    JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_string(format!("assignor-{i}")))
                        .with_metadata(Bytes::from(vec![1u8; 1024]))
                })
                .collect(),
        )
}

#[tokio::test(start_paused = true)]
async fn limit_built_string_1_long_client_id_and_topic_name_are_answered() {
    let gateway = gateway();
    // Row 2: JoinGroup v0 from a client whose id is 32,760 bytes. The member id built from it
    // did not encode, and the connection task panicked with the member left in the group.
    let long_client = "c".repeat(32_760);
    let reply = gateway
        .handle_frame(frame_from(
            ApiKey::JoinGroup,
            0,
            Some(&long_client),
            &join_group("g", 1),
        ))
        .await;
    let joined: JoinGroupResponse = answer(reply, ApiKey::JoinGroup, 0);
    assert_eq!(joined.error_code, 0);
    assert!(
        joined.member_id.len() < 200,
        "member id of {} bytes",
        joined.member_id.len()
    );
    // Row 3: Produce v8 to an unknown topic whose name is 32,767 bytes, after a partition that
    // is written. The error message quoted the name and did not encode: the written partition
    // was never acknowledged.
    create_topic(&gateway, "known").await;
    let long_topic = "t".repeat(32_767);
    let request = produce_to(&[("known", records(&[b"kept"])), (&long_topic, records(&[b"x"]))]);
    let produced: ProduceResponse = answer(
        gateway.handle_frame(frame(ApiKey::Produce, 8, &request)).await,
        ApiKey::Produce,
        8,
    );
    let known = &produced.responses[0].partition_responses[0];
    assert_eq!(
        (known.error_code, known.base_offset),
        (0, 0),
        "the write is acknowledged"
    );
    let unknown = &produced.responses[1].partition_responses[0];
    assert_eq!(unknown.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let message = unknown.error_message.as_ref().expect("a message");
    assert!(message.len() <= 512, "error message of {} bytes", message.len());
}

#[tokio::test(start_paused = true)]
async fn limit_entries_1_a_request_with_too_many_entries_closes_the_connection() {
    let gateway = gateway();
    // Row 1: a JoinGroup v0 of 200,000 protocols (1.6 MB with empty metadata). Selecting among
    // them was quadratic under the coordinator's lock and stalled every runtime worker.
    let mut request = join_group("g", 0);
    request.protocols = (0..200_000)
        .map(|i| JoinGroupRequestProtocol::default().with_name(StrBytes::from_string(format!("{i}"))))
        .collect();
    let err = gateway
        .handle_frame(frame(ApiKey::JoinGroup, 0, &request))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::TooManyEntries {
                entries: 200_000,
                limit: 10_000,
                ..
            }
        ),
        "{err}"
    );
    let topics: Vec<MetadataRequestTopic> = (0..10_001)
        .map(|i| MetadataRequestTopic::default().with_name(Some(topic_name(&format!("t{i}")))))
        .collect();
    let err = gateway
        .handle_frame(frame(
            ApiKey::Metadata,
            4,
            &MetadataRequest::default().with_topics(Some(topics)),
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, RequestError::TooManyEntries { .. }), "{err}");
    // The gateway still answers, and a JoinGroup with a real client's protocols joins.
    let joined: JoinGroupResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::JoinGroup, 0, &join_group("g", 2)))
            .await,
        ApiKey::JoinGroup,
        0,
    );
    assert_eq!(joined.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn limit_join_protocols_1_many_protocols_within_the_entry_limit_are_refused_by_the_coordinator() {
    let gateway = gateway_with(LimitSettings {
        max_request_entries: Some(300_000),
        ..LimitSettings::default()
    });
    let mut request = join_group("g", 0);
    request.protocols = (0..200_000)
        .map(|i| JoinGroupRequestProtocol::default().with_name(StrBytes::from_string(format!("{i}"))))
        .collect();
    let refused: JoinGroupResponse = answer(
        gateway.handle_frame(frame(ApiKey::JoinGroup, 0, &request)).await,
        ApiKey::JoinGroup,
        0,
    );
    assert_eq!(refused.error_code, 42, "INVALID_REQUEST");
}

#[tokio::test(start_paused = true)]
async fn limit_trailing_bytes_1_bytes_after_the_body_are_ignored_as_kafka_does() {
    let gateway = gateway();
    let body = HeartbeatRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g")));
    let exact = frame(ApiKey::Heartbeat, 0, &body);
    let mut trailing = BytesMut::from(&exact[..]);
    trailing.extend_from_slice(&[0, 0, 0]);
    let answered: HeartbeatResponse = answer(gateway.handle_frame(trailing.freeze()).await, ApiKey::Heartbeat, 0);
    let expected: HeartbeatResponse = answer(gateway.handle_frame(exact).await, ApiKey::Heartbeat, 0);
    assert_eq!(answered, expected);
}

/// The regression of issue 9's TLS work: librdkafka 2.12's Metadata v12 for all topics is seven
/// zero bytes. It reserves a 4-byte array count, leaves it as a varint null without shrinking
/// it, then writes AllowAutoTopicCreation, IncludeTopicAuthorizedOperations and empty tags.
/// Closing on the 3 trailing bytes failed every "all topics" metadata fetch (regex
/// subscriptions, admin listings).
#[tokio::test(start_paused = true)]
async fn limit_trailing_bytes_1_librdkafka_metadata_for_all_topics_is_answered() {
    let gateway = gateway();
    create_topic(&gateway, "listed").await;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(12)
        .with_correlation_id(3)
        .with_client_id(Some(StrBytes::from_static_str("rdkafka")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, ApiKey::Metadata.request_header_version(12))
        .unwrap();
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0]);
    let response: MetadataResponse = answer(gateway.handle_frame(out.freeze()).await, ApiKey::Metadata, 12);
    let names: Vec<String> = response
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names, vec!["listed".to_string()]);
}

fn fetch(topic: &str, partitions: usize, max_wait_ms: i32, max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                (0..partitions)
                    .map(|_| FetchPartition::default().with_partition_max_bytes(max_bytes))
                    .collect(),
            )])
}

async fn produce(gateway: &EmbeddedGateway, topic: &str, values: &[&[u8]]) {
    let produced: ProduceResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::Produce, 8, &produce_to(&[(topic, records(values))])))
            .await,
        ApiKey::Produce,
        8,
    );
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn limit_fetch_duplicates_1_a_repeated_partition_is_answered_once() {
    let gateway = gateway();
    create_topic(&gateway, "dup").await;
    produce(&gateway, "dup", &[b"a", b"b"]).await;
    let fetched: FetchResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::Fetch, 11, &fetch("dup", 5_000, 0, 1 << 20)))
            .await,
        ApiKey::Fetch,
        11,
    );
    let partitions = &fetched.responses[0].partitions;
    assert_eq!(partitions.len(), 1, "one answer for partition 0, named 5,000 times");
    assert!(partitions[0].records.as_ref().is_some_and(|r| !r.is_empty()));
}

#[tokio::test(start_paused = true)]
async fn limit_fetch_wait_1_a_fetch_waits_at_most_fetch_max_wait() {
    let gateway = gateway_with(LimitSettings {
        fetch_max_wait_ms: Some(2_000),
        ..LimitSettings::default()
    });
    create_topic(&gateway, "quiet").await;
    let started = tokio::time::Instant::now();
    let fetched: FetchResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::Fetch, 11, &fetch("quiet", 1, i32::MAX, 1 << 20)))
            .await,
        ApiKey::Fetch,
        11,
    );
    assert_eq!(fetched.responses[0].partitions[0].error_code, 0);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2_000) && waited < Duration::from_secs(60),
        "a Fetch asking for i32::MAX ms waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn limit_fetch_bytes_1_max_bytes_is_lowered_to_fetch_max_bytes() {
    let gateway = gateway_with(LimitSettings {
        fetch_max_bytes: Some(2_500),
        ..LimitSettings::default()
    });
    create_topic(&gateway, "big").await;
    let value = [9u8; 1_000];
    produce(&gateway, "big", &[&value, &value, &value, &value, &value]).await;
    let fetched: FetchResponse = answer(
        gateway
            .handle_frame(frame(ApiKey::Fetch, 11, &fetch("big", 1, 0, i32::MAX)))
            .await,
        ApiKey::Fetch,
        11,
    );
    let records = fetched.responses[0].partitions[0].records.clone().expect("records");
    assert!(records.len() <= 2_500, "{} bytes of records", records.len());
    assert!(records.len() >= 1_000, "at least one record");
}

#[tokio::test(start_paused = true)]
async fn limit_group_metadata_1_kept_metadata_does_not_hold_the_request_frame() {
    let gateway = gateway();
    let request = frame(ApiKey::JoinGroup, 0, &join_group("kept", 1));
    let frame_range = request.as_ptr() as usize..request.as_ptr() as usize + request.len();
    let joined: JoinGroupResponse = answer(gateway.handle_frame(request.clone()).await, ApiKey::JoinGroup, 0);
    assert_eq!(joined.error_code, 0);
    let group = gateway.groups.describe("kept").expect("the group exists");
    let metadata = &group.members[0].metadata;
    assert_eq!(metadata.len(), 1024);
    assert!(
        !frame_range.contains(&(metadata.as_ptr() as usize)),
        "the kept metadata is a slice of the request frame"
    );
}
