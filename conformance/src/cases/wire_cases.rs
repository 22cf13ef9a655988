//! Cases over the raw wire client: ApiVersions, InitProducerId, frames, malformed requests,
//! compression bombs, and what a high-level client cannot express.
//!
//! Every case creates its own topics (CreateTopics over the wire, unique names) and runs against
//! any Kafka endpoint; a case that needs a setting the [`Endpoint`] does not know skips and says
//! why. Produce is spoken at v9 (flexible) unless a case says otherwise, Fetch at v11, ListOffsets
//! at v7, CreateTopics at v5, Metadata at v9, DeleteTopics at v4 and InitProducerId at v4.
//!
//! No case sleeps or asserts on timing. Where the server is expected to close a connection, the
//! wait for the close is bounded by [`CLOSE_GUARD`] so that a server which keeps waiting for
//! bytes that never come fails the case instead of hanging it.

use super::{gateway_only, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_iggy_gateway::protocol::legacy;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse, FetchRequest, FetchResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_wire_client::{encode_request_header, WireClient};
use kig_core::batch::{
    decode_batches, encode_batch, encode_record, write_batch, BatchAttributes, BatchHeader, Record, RecordBatch,
    RecordHeader,
};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::{compress, compress_snappy_xerial, Compression};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;

type Client = WireClient<TcpStream>;

/// The longest a case waits for the server to close a connection it must close. The gateway
/// closes at once; this only turns "still waiting for bytes that never come" (the gateway's own
/// read timeout is 30 s) into a failure instead of a hang.
pub const CLOSE_GUARD: Duration = Duration::from_secs(20);

// Versions the cases speak.
const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 11;
const LIST_OFFSETS_V: i16 = 7;
const CREATE_TOPICS_V: i16 = 5;
const METADATA_V: i16 = 9;
const DELETE_TOPICS_V: i16 = 4;
const INIT_PRODUCER_ID_V: i16 = 4;
const API_VERSIONS_V: i16 = 3;
const DESCRIBE_CONFIGS_V: i16 = 4;

// Kafka error codes.
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_TIMESTAMP: i16 = 32;
const UNSUPPORTED_VERSION: i16 = 35;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
const INVALID_RECORD: i16 = 87;
const UNKNOWN_TOPIC_ID: i16 = 100;

// ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Generous per-partition Fetch limit for cases that want everything back.
const FETCH_ALL: i32 = 16 * 1024 * 1024;
const HOUR_MS: i64 = 3_600_000;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            api_versions_lists_the_advertised_ranges,
            ["PROTO-VERSION-1", "PROTO-APIVERSIONS-2"],
            deviates: ["PROTO-APIVERSIONS-2"]
        ),
        case!(
            api_versions_v0_matches_the_spec_table,
            ["PROTO-VERSION-1", "PROTO-HEADER-1"]
        ),
        case!(
            api_versions_future_version_gets_v0_unsupported_version,
            ["PROTO-APIVERSIONS-1", "PROTO-HEADER-1"]
        ),
        case!(
            every_served_api_answers_at_its_lowest_and_highest_version,
            ["PROTO-HEADER-1", "PROTO-VERSION-1"]
        ),
        case!(
            init_producer_id_with_transactional_id_is_unsupported_version,
            ["PID-TXN-1"],
            deviates: ["PID-TXN-1"]
        ),
        case!(producer_ids_carry_the_instance_id, ["PID-ALLOC-1"]),
        case!(
            frame_above_max_frame_size_closes_the_connection,
            ["PROTO-FRAME-1", "LIMIT-FRAME-1"]
        ),
        case!(
            frame_of_exactly_max_frame_size_is_read,
            ["LIMIT-FRAME-1", "PROTO-FRAME-1"]
        ),
        case!(
            decompression_bomb_is_message_too_large_and_connection_survives,
            ["BATCH-BUDGET-1", "BATCH-BUDGET-2", "ERR-MAP-2"]
        ),
        case!(
            decompression_budget_is_shared_by_the_whole_request,
            ["BATCH-BUDGET-1", "BATCH-BUDGET-2"]
        ),
        case!(malformed_request_body_closes_the_connection, ["PROTO-MALFORMED-1"]),
        case!(unknown_api_key_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(produce_v2_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(fetch_v3_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(
            version_above_the_advertised_range_closes_the_connection,
            ["PROTO-VERSION-2"]
        ),
        case!(
            produce_then_fetch_round_trips_every_mapping_case,
            [
                "OFFSET-IDENTITY-1",
                "OFFSET-BASE-1",
                "FETCH-BATCH-1",
                "MAP-KEY-1",
                "MAP-VALUE-1",
                "MAP-VALUE-2",
                "MAP-HEADER-1",
                "MAP-TS-1",
                "ENV-LAYOUT-1",
                "ENV-TRIGGER-EMPTY-KEY-1",
                "ENV-TRIGGER-KEY-LEN-1",
                "ENV-TRIGGER-HEADER-VALUE-1",
                "ENV-TRIGGER-REPEAT-1",
                "ENV-TRIGGER-NAME-1",
                "ENV-TRIGGER-NAME-LEN-1",
                "ENV-TRIGGER-BUDGET-1",
                "LIMIT-HEADER-FIELD-1",
                "MAP-RESERVED-1",
            ],
            deviates: ["MAP-HEADER-1", "FETCH-BATCH-1"]
        ),
        case!(
            compressed_batches_round_trip_uncompressed,
            ["BATCH-COMPRESSION-1", "FETCH-BATCH-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            fetch_past_the_high_watermark_is_offset_out_of_range,
            ["FETCH-RANGE-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            fetch_returns_the_first_record_whole_above_max_bytes,
            ["FETCH-LIMIT-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            list_offsets_earliest_latest_and_timestamps,
            [
                "LISTOFFSETS-EARLIEST-1",
                "LISTOFFSETS-LATEST-1",
                "LISTOFFSETS-TIMESTAMP-1"
            ],
            deviates: ["LISTOFFSETS-TIMESTAMP-1"]
        ),
        case!(
            create_topics_rules,
            [
                "TOPIC-NAME-1",
                "METADATA-NAME-1",
                "TOPIC-PARTITIONS-1",
                "TOPIC-REPLICATION-1",
                "TOPIC-CONFIG-1",
                "TOPIC-EXISTS-1",
                "TOPIC-VALIDATE-ONLY-1",
            ],
            deviates: ["TOPIC-CONFIG-1", "TOPIC-REPLICATION-1"]
        ),
        case!(
            delete_topics_then_metadata_reports_unknown,
            ["DELETETOPICS-1", "METADATA-1"],
            deviates: ["METADATA-1"]
        ),
        case!(
            describe_configs_reports_retention_and_fixed_entries,
            ["DESCRIBECONFIGS-1", "TOPIC-CONFIG-1"],
            deviates: ["DESCRIBECONFIGS-1"]
        ),
        case!(
            describe_cluster_agrees_with_metadata,
            ["DESCRIBECLUSTER-1", "DESCRIBECLUSTER-2"]
        ),
        case!(
            alter_configs_change_retention_and_refuse_the_rest,
            ["ALTERCONFIGS-1", "ALTERCONFIGS-3", "ALTERCONFIGS-4", "TOPIC-CONFIG-1"],
            deviates: ["TOPIC-CONFIG-1"]
        ),
        case!(
            corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported,
            [
                "BATCH-CRC-1",
                "BATCH-MAGIC-1",
                "BATCH-DECODE-1",
                "PRODUCE-TXN-1",
                "PRODUCE-ATOMIC-1",
                "ERR-MAP-2"
            ],
            deviates: ["PRODUCE-TXN-1"]
        ),
        case!(
            produce_to_a_named_partition_stays_there,
            ["MAP-PARTITION-1", "ERR-MAP-2"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            acks_zero_gets_no_response_and_order_is_kept,
            ["PRODUCE-ACKS-1", "PROTO-ORDER-1"]
        ),
        case!(pipelined_requests_are_answered_in_order, ["PROTO-ORDER-1"]),
        case!(
            fetch_long_poll_returns_when_data_arrives,
            ["FETCH-WAIT-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            negative_timestamp_is_invalid_timestamp,
            ["MAP-TS-4", "MAP-TS-SPLIT-1", "MAP-TS-2", "MAP-TS-3", "PRODUCE-ATOMIC-1"]
        ),
        case!(
            init_producer_id_and_idempotent_fields_are_ignored,
            ["PID-IGNORE-1", "DELIVERY-1", "PID-ALLOC-1"],
            deviates: ["PID-IGNORE-1", "DELIVERY-1"]
        ),
        // Last: a gateway that aborts on it takes every later case down with it.
        case!(
            huge_array_count_in_a_request_body_closes_the_connection,
            ["PROTO-MALFORMED-1"]
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers: connections, requests, batches.

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

async fn connect(endpoint: &Endpoint) -> anyhow::Result<Client> {
    WireClient::connect(&endpoint.bootstrap).await
}

/// An ApiVersions request with a client software name and version that Kafka's validation accepts.
fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kig-conformance"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

/// ApiVersions answered without error on `client`.
async fn api_versions_answers(client: &mut Client, what: &str) -> anyhow::Result<()> {
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await
        .with_context(|| format!("ApiVersions {what}"))?;
    ensure!(
        response.error_code == NONE,
        "ApiVersions {what}: error {}",
        response.error_code
    );
    ensure!(!response.api_keys.is_empty(), "ApiVersions {what}: no API listed");
    Ok(())
}

/// The endpoint still serves: a new connection answers ApiVersions.
async fn fresh_connection_answers(endpoint: &Endpoint, after: &str) -> anyhow::Result<()> {
    let mut client = connect(endpoint)
        .await
        .with_context(|| format!("connecting again after {after}: did the server die?"))?;
    api_versions_answers(&mut client, &format!("on a new connection after {after}")).await
}

/// Waits for the server to close `client`'s connection, failing if it answers instead or keeps
/// the connection open past [`CLOSE_GUARD`].
async fn expect_closed(client: &mut Client, what: &str) -> anyhow::Result<()> {
    match tokio::time::timeout(CLOSE_GUARD, client.recv_frame()).await {
        Err(_) => bail!("{what}: the connection was still open after {CLOSE_GUARD:?}"),
        Ok(Ok(None)) => Ok(()),
        Ok(Ok(Some(frame))) => bail!("{what}: the server answered ({} bytes) instead of closing", frame.len()),
        Ok(Err(e)) => Err(e).with_context(|| format!("{what}: reading while waiting for the close")),
    }
}

/// A request frame built by hand: key, version, correlation id, client id, the tagged-field
/// section of header v2 when `flexible_header`, then `body`.
fn raw_request(key: i16, version: i16, correlation_id: i32, flexible_header: bool, body: &[u8]) -> Bytes {
    let client_id = b"kig-wire";
    let mut frame = BytesMut::new();
    frame.put_i16(key);
    frame.put_i16(version);
    frame.put_i32(correlation_id);
    frame.put_i16(client_id.len() as i16);
    frame.put_slice(client_id);
    if flexible_header {
        frame.put_u8(0);
    }
    frame.put_slice(body);
    frame.freeze()
}

fn creatable(topic: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

async fn create_topics(
    client: &mut Client,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> anyhow::Result<Vec<CreatableTopicResult>> {
    let names: Vec<String> = topics.iter().map(|t| t.name.0.to_string()).collect();
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only);
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, CREATE_TOPICS_V, &request).await?;
    ensure!(
        response.topics.len() == names.len(),
        "CreateTopics answered {} topics for {} asked",
        response.topics.len(),
        names.len()
    );
    for (result, name) in response.topics.iter().zip(&names) {
        ensure!(
            result.name.0.as_str() == name,
            "CreateTopics answered {:?} where {name:?} was asked",
            result.name.0.as_str()
        );
    }
    Ok(response.topics)
}

/// Creates `topic` with `partitions` partitions; any error fails the case.
async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let result = create_topics(client, vec![creatable(topic, partitions)], false)
        .await?
        .remove(0);
    ensure!(
        result.error_code == NONE,
        "creating topic {topic}: error {} ({:?})",
        result.error_code,
        result.error_message.as_ref().map(|m| m.as_str())
    );
    Ok(())
}

/// A fresh topic of `partitions` partitions, named after `prefix`.
/// A new topic with a unique name: through CreateTopics, or the endpoint's own topic creator
/// when it has no CreateTopics.
async fn new_topic(endpoint: &Endpoint, client: &mut Client, prefix: &str, partitions: i32) -> anyhow::Result<String> {
    let topic = endpoint.unique_topic(prefix);
    match endpoint.topic_creator.clone() {
        Some(creator) => {
            let name = topic.clone();
            tokio::task::spawn_blocking(move || creator.create(&name, partitions))
                .await
                .context("the topic creator's task")??;
        }
        None => create_topic(client, &topic, partitions).await?,
    }
    Ok(topic)
}

/// A record with deltas 0; [`encode`] sets them.
fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Record {
    Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: headers
            .iter()
            .map(|(name, value)| RecordHeader {
                name: Bytes::copy_from_slice(name),
                value: value.map(Bytes::copy_from_slice),
            })
            .collect(),
    }
}

/// What a produced batch claims about its producer and compression.
#[derive(Debug, Clone, Copy)]
struct BatchSpec {
    attributes: BatchAttributes,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl BatchSpec {
    fn plain(codec: Compression) -> Self {
        Self {
            attributes: BatchAttributes::plain(codec),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

fn batch_header(spec: &BatchSpec, timestamps: &[i64]) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: spec.attributes,
        last_offset_delta: timestamps.len() as i32 - 1,
        base_timestamp: timestamps.first().copied().unwrap_or(-1),
        max_timestamp: timestamps.iter().copied().max().unwrap_or(-1),
        producer_id: spec.producer_id,
        producer_epoch: spec.producer_epoch,
        base_sequence: spec.base_sequence,
    }
}

/// One batch holding `records`, each at its absolute timestamp in ms, offset deltas 0, 1, ….
fn encode(spec: &BatchSpec, records: &[(i64, Record)]) -> anyhow::Result<Bytes> {
    let timestamps: Vec<i64> = records.iter().map(|(t, _)| *t).collect();
    let header = batch_header(spec, &timestamps);
    let records = records
        .iter()
        .enumerate()
        .map(|(i, (t, r))| Record {
            offset_delta: i as i32,
            timestamp_delta: t.wrapping_sub(header.base_timestamp),
            ..r.clone()
        })
        .collect();
    Ok(encode_batch(&RecordBatch { header, records })?)
}

/// An uncompressed batch of null-key records with these values, at `timestamp`, `timestamp` + 1, ….
fn values_batch(timestamp: i64, values: &[&[u8]]) -> anyhow::Result<Bytes> {
    let records: Vec<(i64, Record)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (timestamp + i as i64, record(None, Some(v), &[])))
        .collect();
    encode(&BatchSpec::plain(Compression::None), &records)
}

fn produce_request(topic: &str, partitions: Vec<(i32, Bytes)>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(
                partitions
                    .into_iter()
                    .map(|(index, records)| {
                        PartitionProduceData::default()
                            .with_index(index)
                            .with_records(Some(records))
                    })
                    .collect(),
            )])
}

/// Sends a Produce and returns the answer of every partition of its one topic, in order.
async fn produce_all(
    client: &mut Client,
    version: i16,
    request: &ProduceRequest,
) -> anyhow::Result<Vec<PartitionProduceResponse>> {
    let topic = request
        .topic_data
        .first()
        .map(|t| t.name.0.to_string())
        .unwrap_or_default();
    let expected = request.topic_data.first().map_or(0, |t| t.partition_data.len());
    let response: ProduceResponse = client.request(ApiKey::Produce, version, request).await?;
    ensure!(
        response.responses.len() == 1,
        "Produce answered {} topics for one",
        response.responses.len()
    );
    let answer = response.responses.into_iter().next().expect("one topic");
    ensure!(
        answer.name.0.as_str() == topic,
        "Produce answered for topic {:?}, not {topic:?}",
        answer.name.0.as_str()
    );
    ensure!(
        answer.partition_responses.len() == expected,
        "Produce answered {} partitions for {expected}",
        answer.partition_responses.len()
    );
    Ok(answer.partition_responses)
}

/// Produces `records` to one partition with acks -1 and returns that partition's answer.
async fn produce_at(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> anyhow::Result<PartitionProduceResponse> {
    let answer = produce_all(client, version, &produce_request(topic, vec![(partition, records)], -1))
        .await?
        .remove(0);
    ensure!(
        answer.index == partition,
        "Produce answered partition {} for {partition}",
        answer.index
    );
    Ok(answer)
}

async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> anyhow::Result<PartitionProduceResponse> {
    produce_at(client, PRODUCE_V, topic, partition, records).await
}

/// Produces and requires success; returns the base offset.
async fn produce_ok(client: &mut Client, topic: &str, partition: i32, records: Bytes) -> anyhow::Result<i64> {
    let answer = produce(client, topic, partition, records).await?;
    ensure!(
        answer.error_code == NONE,
        "Produce to {topic}-{partition}: error {} ({:?})",
        answer.error_code,
        answer.error_message.as_ref().map(|m| m.as_str())
    );
    Ok(answer.base_offset)
}

fn expect_code(answer: &PartitionProduceResponse, code: i16, what: &str) -> anyhow::Result<()> {
    ensure!(
        answer.error_code == code,
        "{what}: Produce answered error {} ({:?}), expected {code}",
        answer.error_code,
        answer.error_message.as_ref().map(|m| m.as_str())
    );
    Ok(())
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32, partition_max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(partition_max_bytes)])])
}

/// The one partition of a Fetch response to a one-partition request.
fn fetched_partition(response: FetchResponse, topic: &str, partition: i32) -> anyhow::Result<PartitionData> {
    ensure!(
        response.error_code == NONE,
        "Fetch: top-level error {}",
        response.error_code
    );
    ensure!(
        response.responses.len() == 1,
        "Fetch answered {} topics for one",
        response.responses.len()
    );
    let answer = response.responses.into_iter().next().expect("one topic");
    ensure!(
        answer.topic.0.as_str() == topic,
        "Fetch answered topic {:?}, not {topic:?}",
        answer.topic.0.as_str()
    );
    ensure!(
        answer.partitions.len() == 1,
        "Fetch answered {} partitions for one",
        answer.partitions.len()
    );
    let data = answer.partitions.into_iter().next().expect("one partition");
    ensure!(
        data.partition_index == partition,
        "Fetch answered partition {} for {partition}",
        data.partition_index
    );
    Ok(data)
}

async fn fetch_with(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    partition_max_bytes: i32,
) -> anyhow::Result<PartitionData> {
    let request = fetch_request(topic, partition, offset, max_wait_ms, partition_max_bytes);
    let response: FetchResponse = client.request(ApiKey::Fetch, FETCH_V, &request).await?;
    fetched_partition(response, topic, partition)
}

/// Fetches from `offset` without waiting, everything up to [`FETCH_ALL`] bytes.
async fn fetch(client: &mut Client, topic: &str, partition: i32, offset: i64) -> anyhow::Result<PartitionData> {
    fetch_with(client, topic, partition, offset, 0, FETCH_ALL).await
}

/// A fetched record with its absolute offset and timestamp.
#[derive(Debug)]
struct Fetched {
    offset: i64,
    timestamp: i64,
    record: Record,
}

/// Decodes a Fetch partition's records and checks each batch is framed as FETCH-BATCH-1 says:
/// uncompressed CreateTime, leader epoch, producer id, epoch and base sequence -1 (the gateway
/// profile only: Kafka serves the producer's batches, a deviation), base timestamp from the
/// first record, max timestamp the largest, last offset delta the last record's (the CRC is
/// verified by the decoder).
fn fetched_records(profile: Profile, data: &PartitionData) -> anyhow::Result<Vec<Fetched>> {
    ensure!(
        data.error_code == NONE,
        "Fetch partition {}: error {}",
        data.partition_index,
        data.error_code
    );
    let Some(bytes) = &data.records else {
        return Ok(Vec::new());
    };
    let mut budget = DecompressionBudget::new(kafka_wire_client::MAX_RESPONSE_FRAME);
    let batches = decode_batches(bytes, &mut budget).context("decoding the fetched record batches")?;
    let mut out = Vec::new();
    for batch in batches {
        let h = batch.header;
        if profile == Profile::Gateway {
            check_rebuilt_batch(&h)?;
        }
        let (Some(first), Some(last)) = (batch.records.first(), batch.records.last()) else {
            bail!("fetched an empty batch at offset {}", h.base_offset);
        };
        ensure!(
            first.offset_delta == 0,
            "FETCH-BATCH-1: first record's offset delta {}",
            first.offset_delta
        );
        ensure!(
            first.timestamp_delta == 0,
            "FETCH-BATCH-1: base timestamp is not the first record's"
        );
        ensure!(
            h.last_offset_delta == last.offset_delta,
            "FETCH-BATCH-1: last offset delta {} for a last record at {}",
            h.last_offset_delta,
            last.offset_delta
        );
        let max = batch
            .records
            .iter()
            .map(|r| batch.record_timestamp_ms(r))
            .max()
            .expect("non-empty");
        ensure!(
            h.max_timestamp == max,
            "FETCH-BATCH-1: max timestamp {} but the largest record timestamp is {max}",
            h.max_timestamp
        );
        for r in &batch.records {
            out.push(Fetched {
                offset: h.base_offset + i64::from(r.offset_delta),
                timestamp: batch.record_timestamp_ms(r),
                record: r.clone(),
            });
        }
    }
    for pair in out.windows(2) {
        ensure!(
            pair[1].offset > pair[0].offset,
            "fetched offsets do not increase: {} then {}",
            pair[0].offset,
            pair[1].offset
        );
    }
    Ok(out)
}

/// FETCH-BATCH-1's framing of a rebuilt batch: uncompressed CreateTime, partition leader
/// epoch, producer id, producer epoch and base sequence all -1.
fn check_rebuilt_batch(h: &BatchHeader) -> anyhow::Result<()> {
    ensure!(
        h.attributes.0 == 0,
        "FETCH-BATCH-1: fetched batch attributes {:#x}, expected 0",
        h.attributes.0
    );
    ensure!(
        h.partition_leader_epoch == -1,
        "FETCH-BATCH-1: partition leader epoch {}",
        h.partition_leader_epoch
    );
    ensure!(
        (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1),
        "FETCH-BATCH-1: producer id, epoch, base sequence are {:?}, expected -1s",
        (h.producer_id, h.producer_epoch, h.base_sequence)
    );
    Ok(())
}

async fn list_offset(
    client: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> anyhow::Result<ListOffsetsPartitionResponse> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, LIST_OFFSETS_V, &request).await?;
    ensure!(
        response.topics.len() == 1,
        "ListOffsets answered {} topics for one",
        response.topics.len()
    );
    let topic_answer = response.topics.into_iter().next().expect("one topic");
    ensure!(
        topic_answer.partitions.len() == 1,
        "ListOffsets answered {} partitions for one",
        topic_answer.partitions.len()
    );
    let answer = topic_answer.partitions.into_iter().next().expect("one partition");
    ensure!(
        answer.partition_index == partition,
        "ListOffsets answered partition {} for {partition}",
        answer.partition_index
    );
    Ok(answer)
}

/// ListOffsets for `timestamp`, requiring no error: (offset, timestamp).
async fn offset_for(client: &mut Client, topic: &str, partition: i32, timestamp: i64) -> anyhow::Result<(i64, i64)> {
    let answer = list_offset(client, topic, partition, timestamp).await?;
    ensure!(
        answer.error_code == NONE,
        "ListOffsets {topic}-{partition} at {timestamp}: error {}",
        answer.error_code
    );
    Ok((answer.offset, answer.timestamp))
}

/// The high watermark, from ListOffsets LATEST.
async fn latest(client: &mut Client, topic: &str, partition: i32) -> anyhow::Result<i64> {
    Ok(offset_for(client, topic, partition, LATEST).await?.0)
}

async fn metadata(client: &mut Client, topics: Option<&[&str]>) -> anyhow::Result<MetadataResponse> {
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(topics.map(|ts| {
            ts.iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                .collect()
        }));
    client.request(ApiKey::Metadata, METADATA_V, &request).await
}

/// The Metadata error code of one topic asked by name.
async fn metadata_code(client: &mut Client, topic: &str) -> anyhow::Result<i16> {
    let response = metadata(client, Some(&[topic])).await?;
    ensure!(
        response.topics.len() == 1,
        "Metadata answered {} topics for one",
        response.topics.len()
    );
    Ok(response.topics[0].error_code)
}

fn listed(response: &MetadataResponse, topic: &str) -> bool {
    response
        .topics
        .iter()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
}

/// A Metadata topic naming no name and a (random-looking, never assigned) topic id.
fn topic_by_id() -> anyhow::Result<MetadataRequestTopic> {
    let mut raw = BytesMut::new();
    raw.put_slice(b"kig-conformance!"); // 16 bytes: the id
    raw.put_u8(0); // null compact name
    raw.put_u8(0); // no tagged fields
    MetadataRequestTopic::decode(&mut raw.freeze(), 12)
}

async fn delete_topic(client: &mut Client, topic: &str) -> anyhow::Result<i16> {
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic_name(topic)])
        .with_timeout_ms(30_000);
    let response: DeleteTopicsResponse = client.request(ApiKey::DeleteTopics, DELETE_TOPICS_V, &request).await?;
    ensure!(
        response.responses.len() == 1,
        "DeleteTopics answered {} topics for one",
        response.responses.len()
    );
    let answer = &response.responses[0];
    ensure!(
        answer.name.as_ref().is_some_and(|n| n.0.as_str() == topic),
        "DeleteTopics answered for {:?}, not {topic:?}",
        answer.name
    );
    Ok(answer.error_code)
}

async fn init_producer_id(
    client: &mut Client,
    request: &InitProducerIdRequest,
) -> anyhow::Result<InitProducerIdResponse> {
    client
        .request(ApiKey::InitProducerId, INIT_PRODUCER_ID_V, request)
        .await
}

fn codecs() -> [Compression; 4] {
    [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
}

// ---------------------------------------------------------------------------------------------
// ApiVersions and headers.

pub async fn api_versions_lists_the_advertised_ranges(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await?;
    ensure!(response.error_code == 0, "error {}", response.error_code);
    let range = |key: ApiKey| {
        response
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    let within = |key, v| range(key).is_some_and(|(lo, hi)| (lo..=hi).contains(&v));
    ensure!(
        within(ApiKey::Produce, 3) && within(ApiKey::Fetch, 4),
        "librdkafka's MsgVer2 gate (Produce v3, Fetch v4) is not met: {response:?}"
    );
    ensure!(
        within(ApiKey::Produce, 0),
        "Produce must be advertised from v0 (KAFKA-18659)"
    );
    ensure!(
        within(ApiKey::InitProducerId, 0),
        "idempotence gate (InitProducerId v0) is not met"
    );
    // PROTO-APIVERSIONS-2 (a deviation): Kafka sends its features (KIP-584) in these tags.
    if !endpoint.profile.is_kafka() {
        ensure!(
            response.supported_features.is_empty() && response.finalized_features.is_empty(),
            "feature tags are sent"
        );
    }
    Ok(Outcome::Passed)
}

/// PROTO-VERSION-1's table, exactly.
const SPEC_TABLE: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 0, 8),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 0, 4),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterConfigs, 0, 2),
    // AUTH-SASL-HANDSHAKE-1: advertised whether SASL is on or not, as Kafka brokers do.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The consumer-group APIs ("the group APIs (added by issue 4)" in PROTO-VERSION-1).
const GROUP_APIS: &[ApiKey] = &[
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    // GROUP-CONSUMER-HEARTBEAT-1, GROUP-CONSUMER-DESCRIBE-1: KIP-848's consumer group protocol.
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

pub async fn api_versions_v0_matches_the_spec_table(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PROTO-VERSION-1's table is this gateway's own choice of APIs and versions",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    // v0: the version every client can send first; answered with response header v0.
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    ensure!(
        response.error_code == NONE,
        "ApiVersions v0: error {}",
        response.error_code
    );
    let listed: Vec<(i16, i16, i16)> = response
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    for &(key, lo, hi) in SPEC_TABLE {
        let got: Vec<_> = listed.iter().filter(|l| l.0 == key as i16).collect();
        ensure!(
            got == vec![&(key as i16, lo, hi)],
            "{key:?} (key {}): ApiVersions v0 lists {got:?}, the spec table says {lo}..={hi}",
            key as i16
        );
    }
    // Anything beyond the table may only be the consumer-group APIs, which the spec leaves to
    // issue 4; never SASL, transactions or any other API.
    let extra: Vec<_> = listed
        .iter()
        .filter(|l| !SPEC_TABLE.iter().any(|s| s.0 as i16 == l.0) && !GROUP_APIS.iter().any(|g| *g as i16 == l.0))
        .collect();
    ensure!(
        extra.is_empty(),
        "ApiVersions v0 advertises APIs outside the spec table: (key, min, max) {extra:?}"
    );
    Ok(Outcome::Passed)
}

pub async fn api_versions_future_version_gets_v0_unsupported_version(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    // The endpoint's own ApiVersions range, from a v0 request every broker answers.
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    ensure!(
        advertised.error_code == NONE,
        "ApiVersions v0: error {}",
        advertised.error_code
    );
    let own = advertised
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .context("ApiVersions v0 does not list ApiVersions (key 18)")?;
    let (lo, hi) = (own.min_version, own.max_version);
    let mut versions = vec![hi + 1, 99, 127];
    versions.retain(|&v| v > hi);
    versions.dedup();
    for version in versions {
        let correlation_id = 7000 + i32::from(version);
        // A header v2 (what a flexible ApiVersions carries) and a v3-shaped body: two empty
        // compact strings and an empty tag section. The server must not need to parse either.
        let frame = raw_request(ApiKey::ApiVersions as i16, version, correlation_id, true, &[1, 1, 0]);
        client.send_frame(&frame).await?;
        let reply = client
            .recv_frame()
            .await?
            .with_context(|| format!("the connection closed instead of answering ApiVersions v{version}"))?;
        let not_v0 = || format!("ApiVersions v{version}: not a v0 body behind response header v0");
        let response: ApiVersionsResponse =
            Client::decode_response(ApiKey::ApiVersions, 0, correlation_id, reply).with_context(not_v0)?;
        ensure!(
            response.error_code == UNSUPPORTED_VERSION,
            "ApiVersions v{version}: error {}, expected UNSUPPORTED_VERSION (35)",
            response.error_code
        );
        let entries: Vec<&ApiVersion> = response.api_keys.iter().collect();
        ensure!(
            entries.len() == 1 && entries[0].api_key == ApiKey::ApiVersions as i16,
            "ApiVersions v{version}: expected the single entry for key 18, got {entries:?}"
        );
        ensure!(
            (entries[0].min_version, entries[0].max_version) == (lo, hi),
            "ApiVersions v{version}: lists ApiVersions {}..={}, but the endpoint advertises {lo}..={hi}",
            entries[0].min_version,
            entries[0].max_version
        );
    }
    // KIP-511: the client retries on the same connection at the highest version both speak.
    let retry = hi.min(ApiKey::ApiVersions.valid_versions().max);
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, retry, &api_versions_request())
        .await
        .with_context(|| format!("ApiVersions v{retry} on the same connection after the refusal"))?;
    ensure!(
        response.error_code == NONE,
        "ApiVersions v{retry} retry: error {}",
        response.error_code
    );
    Ok(Outcome::Passed)
}

/// Sends a harmless request for `key` at `version` and decodes its answer (header and body, no
/// bytes left over). `false` when the suite has no request to send for `key`.
async fn harmless_request(client: &mut Client, key: ApiKey, version: i16) -> anyhow::Result<bool> {
    if legacy::decodes(key, version) {
        // PROTO-LEGACY-1: versions below kafka-protocol's range go through the legacy codec.
        return super::legacy_cases::harmless_legacy_request(client, key, version)
            .await
            .map(|()| true);
    }
    match key {
        ApiKey::Produce => {
            let request = ProduceRequest::default().with_acks(1).with_timeout_ms(1000);
            let _: ProduceResponse = client.request(key, version, &request).await?;
        }
        ApiKey::Fetch => {
            let _: FetchResponse = client.request(key, version, &FetchRequest::default()).await?;
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1));
            let _: ListOffsetsResponse = client.request(key, version, &request).await?;
        }
        ApiKey::Metadata => {
            // allow_auto_topic_creation exists from v4; before it the request cannot carry false.
            let request = MetadataRequest::default().with_allow_auto_topic_creation(version < 4);
            let _: MetadataResponse = client.request(key, version, &request).await?;
        }
        ApiKey::ApiVersions => {
            let _: ApiVersionsResponse = client.request(key, version, &api_versions_request()).await?;
        }
        ApiKey::CreateTopics => {
            let _: CreateTopicsResponse = client.request(key, version, &CreateTopicsRequest::default()).await?;
        }
        ApiKey::DeleteTopics => {
            let _: DeleteTopicsResponse = client.request(key, version, &DeleteTopicsRequest::default()).await?;
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            let _: InitProducerIdResponse = client.request(key, version, &request).await?;
        }
        ApiKey::DescribeConfigs => {
            let _: DescribeConfigsResponse = client.request(key, version, &DescribeConfigsRequest::default()).await?;
        }
        ApiKey::DescribeCluster => {
            let _: DescribeClusterResponse = client.request(key, version, &DescribeClusterRequest::default()).await?;
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = IncrementalAlterConfigsRequest::default().with_validate_only(true);
            let _: IncrementalAlterConfigsResponse = client.request(key, version, &request).await?;
        }
        ApiKey::AlterConfigs => {
            let request = AlterConfigsRequest::default().with_validate_only(true);
            let _: AlterConfigsResponse = client.request(key, version, &request).await?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

pub async fn every_served_api_answers_at_its_lowest_and_highest_version(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    ensure!(
        advertised.error_code == NONE,
        "ApiVersions: error {}",
        advertised.error_code
    );
    let mut exercised = 0;
    for entry in &advertised.api_keys {
        let Ok(key) = ApiKey::try_from(entry.api_key) else {
            continue;
        };
        // Produce v0-2 are advertised but not served (PROTO-VERSION-2); neither kafka-protocol
        // nor the gateway's legacy codec encodes them. Below kafka-protocol's range, the legacy
        // codec encodes the old versions the gateway serves (PROTO-LEGACY-1).
        let valid = key.valid_versions();
        let lowest = legacy::lowest_decodable(key);
        let (lo, hi) = (entry.min_version.max(lowest), entry.max_version.min(valid.max));
        if lo > hi {
            continue;
        }
        for version in [lo, hi] {
            // Header versions: the request header follows the body's flexibility and the
            // response header v0/v1 likewise (ApiVersions: always v0); decoding checks both.
            let sent = harmless_request(&mut client, key, version).await.with_context(|| {
                format!(
                    "{key:?} v{version} (advertised {}..={})",
                    entry.min_version, entry.max_version
                )
            })?;
            exercised += usize::from(sent);
        }
    }
    ensure!(exercised > 0, "no advertised API could be exercised");
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// InitProducerId.

pub async fn init_producer_id_with_transactional_id_is_unsupported_version(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
            endpoint.unique_topic("kig-txn"),
        ))))
        .with_transaction_timeout_ms(60_000);
    let response = init_producer_id(&mut client, &request).await?;
    // PID-TXN-1 (a deviation): Kafka hands transactional producers ids, from the transaction
    // coordinator (NOT_COORDINATOR from any other broker, a retriable wait while the
    // coordinator loads).
    let expected: &[i16] = match endpoint.profile {
        Profile::Gateway => &[UNSUPPORTED_VERSION],
        Profile::Kafka => &[
            NONE,
            NOT_COORDINATOR,
            COORDINATOR_NOT_AVAILABLE,
            COORDINATOR_LOAD_IN_PROGRESS,
        ],
    };
    ensure!(
        expected.contains(&response.error_code),
        "InitProducerId with a transactional id: error {}, expected one of {expected:?}",
        response.error_code
    );
    // The connection stays usable.
    api_versions_answers(&mut client, "after the refused InitProducerId").await?;
    Ok(Outcome::Passed)
}

pub async fn producer_ids_carry_the_instance_id(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PID-ALLOC-1 builds producer ids from this gateway's instance id",
    ) {
        return Ok(skip);
    }
    let Some(instance_id) = endpoint.instance_id else {
        return Ok(Outcome::Skipped(
            "the endpoint's instance id is unknown (--instance-id)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let plain = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    // v3+ may carry an existing producer id and epoch; the gateway ignores them.
    let with_old_id = plain
        .clone()
        .with_producer_id(ProducerId(12_345))
        .with_producer_epoch(7);
    let mut ids = Vec::new();
    for (what, request) in [("first", &plain), ("second, carrying id 12345 epoch 7", &with_old_id)] {
        let response = init_producer_id(&mut client, request).await?;
        ensure!(
            response.error_code == NONE,
            "InitProducerId ({what}): error {}",
            response.error_code
        );
        let id = response.producer_id.0;
        ensure!(
            id >= 0,
            "InitProducerId ({what}): producer id {id} is negative (bit 63 set)"
        );
        ensure!(
            id >> 47 == i64::from(instance_id),
            "InitProducerId ({what}): producer id {id:#x} holds instance {} in bits 47..=62, expected {instance_id}",
            id >> 47
        );
        ensure!(
            response.producer_epoch == 0,
            "InitProducerId ({what}): epoch {}, expected 0",
            response.producer_epoch
        );
        ids.push(id);
    }
    ensure!(
        ids[0] != ids[1],
        "two InitProducerId calls both got producer id {}",
        ids[0]
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Frames.

pub async fn frame_above_max_frame_size_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let oversized = i32::try_from(max + 1).context("max_frame_size + 1 does not fit a frame length")?;
    for (what, size) in [("max_frame_size + 1", oversized), ("0", 0), ("-1", -1)] {
        let mut client = connect(&endpoint).await?;
        // The size prefix alone: a server that waits for the body would never answer or close.
        client.send_bytes(&size.to_be_bytes()).await?;
        expect_closed(&mut client, &format!("a frame length of {what} ({size}) with no body")).await?;
        fresh_connection_answers(&endpoint, &format!("the frame length {what}")).await?;
    }
    Ok(Outcome::Passed)
}

pub async fn frame_of_exactly_max_frame_size_is_read(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-frame-exact", 1).await?;
    let timestamp = now_ms()?;
    // Grow one record's value until the whole request frame (without its size prefix) is
    // exactly max_frame_size bytes; varint widths make this converge in a few steps.
    let mut value_len = max.saturating_sub(1024);
    let mut exact = None;
    for _ in 0..8 {
        let value = vec![b'x'; value_len];
        let records = values_batch(timestamp, &[&value])?;
        let (correlation_id, frame) = client.encode_request(
            ApiKey::Produce,
            PRODUCE_V,
            &produce_request(&topic, vec![(0, records)], -1),
        )?;
        if frame.len() == max {
            exact = Some((correlation_id, frame));
            break;
        }
        value_len = (value_len as i64 + max as i64 - frame.len() as i64).max(1) as usize;
    }
    let (correlation_id, frame) =
        exact.with_context(|| format!("could not build a Produce frame of exactly {max} bytes"))?;
    client.send_frame(&frame).await?;
    let reply = client
        .recv_frame()
        .await?
        .context("the connection closed on a frame of exactly max_frame_size bytes")?;
    let response: ProduceResponse = Client::decode_response(ApiKey::Produce, PRODUCE_V, correlation_id, reply)?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .context("Produce answered no partition")?;
    expect_code(answer, NONE, "a Produce frame of exactly max_frame_size")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the record of the max_frame_size frame was not stored"
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Decompression budget.

pub async fn decompression_bomb_is_message_too_large_and_connection_survives(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "BATCH-BUDGET-2's decompression budget is this gateway's limit",
    ) {
        return Ok(skip);
    }
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-bomb", 1).await?;
    let zeros = vec![0u8; max + (1 << 20)];
    let timestamp = now_ms()?;
    for (stored, codec) in codecs().into_iter().enumerate() {
        let spec = BatchSpec::plain(codec);
        let bomb = encode(&spec, &[(timestamp, record(None, Some(&zeros), &[]))])?;
        ensure!(
            bomb.len() + 4096 < max,
            "the {} bomb is {} bytes compressed and does not fit max_frame_size {max}",
            codec.name(),
            bomb.len()
        );
        let answer = produce(&mut client, &topic, 0, bomb).await.with_context(|| {
            format!(
                "the {} bomb ({} bytes expanding to {} bytes)",
                codec.name(),
                zeros.len(),
                zeros.len()
            )
        })?;
        expect_code(
            &answer,
            MESSAGE_TOO_LARGE,
            &format!("a {} batch expanding past max_frame_size", codec.name()),
        )?;
        // The connection stays open and usable: another API, then a normal Produce.
        api_versions_answers(
            &mut client,
            &format!("on the connection that sent the {} bomb", codec.name()),
        )
        .await?;
        let small = encode(&spec, &[(timestamp, record(None, Some(b"after the bomb"), &[]))])?;
        let base = produce_ok(&mut client, &topic, 0, small)
            .await
            .with_context(|| format!("a small {} Produce after the bomb", codec.name()))?;
        ensure!(
            base == stored as i64,
            "the small {} Produce landed at offset {base}, expected {stored}: the bomb wrote something",
            codec.name()
        );
    }
    ensure!(
        latest(&mut client, &topic, 0).await? == 4,
        "the partition does not hold exactly the four small records"
    );
    Ok(Outcome::Passed)
}

pub async fn decompression_budget_is_shared_by_the_whole_request(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "BATCH-BUDGET-2's decompression budget is this gateway's limit",
    ) {
        return Ok(skip);
    }
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-budget", 2).await?;
    // Each batch alone expands to a little over half the budget: one fits, two do not.
    let half = vec![0u8; max / 2 + (256 << 10)];
    let timestamp = now_ms()?;
    let batch = encode(
        &BatchSpec::plain(Compression::Gzip),
        &[(timestamp, record(None, Some(&half), &[]))],
    )?;
    let answers = produce_all(
        &mut client,
        PRODUCE_V,
        &produce_request(&topic, vec![(0, batch.clone()), (1, batch.clone())], -1),
    )
    .await?;
    let codes: Vec<i16> = answers.iter().map(|a| a.error_code).collect();
    ensure!(
        codes.iter().filter(|&&c| c == MESSAGE_TOO_LARGE).count() == 1 && codes.contains(&NONE),
        "two partitions whose batches together expand past max_frame_size answered {codes:?}; \
         one budget for the whole request should refuse exactly one with MESSAGE_TOO_LARGE (10)"
    );
    let refused = answers
        .iter()
        .find(|a| a.error_code == MESSAGE_TOO_LARGE)
        .expect("one refused")
        .index;
    let accepted = 1 - refused;
    ensure!(
        latest(&mut client, &topic, refused).await? == 0,
        "the refused partition {refused} stored something"
    );
    ensure!(
        latest(&mut client, &topic, accepted).await? == 1,
        "the accepted partition {accepted} did not store its record"
    );
    // Alone, the refused partition's batch fits: the refusal came from the shared budget.
    produce_ok(&mut client, &topic, refused, batch)
        .await
        .context("the refused batch sent alone")?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Malformed requests and unsupported versions.

pub async fn malformed_request_body_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let valid_body = {
        let records = values_batch(now_ms()?, &[b"never stored"])?;
        let mut body = BytesMut::new();
        produce_request("kig-malformed", vec![(0, records)], -1).encode(&mut body, PRODUCE_V)?;
        body.freeze()
    };
    let mut garbage = encode_request_header(ApiKey::Produce, PRODUCE_V, 41)?;
    // Four bytes with their continuation bits set: the transactional id's length never ends.
    garbage.put_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let mut truncated = encode_request_header(ApiKey::Produce, PRODUCE_V, 42)?;
    truncated.put_slice(&valid_body[..valid_body.len() / 2]);
    let mut fetch_garbage = encode_request_header(ApiKey::Fetch, FETCH_V, 45)?;
    fetch_garbage.put_slice(&[0xff; 3]);
    // Metadata v9, header v2: the client id declares 1000 bytes and 3 follow.
    let mut bad_header = BytesMut::new();
    bad_header.put_i16(ApiKey::Metadata as i16);
    bad_header.put_i16(METADATA_V);
    bad_header.put_i32(46);
    bad_header.put_i16(1000);
    bad_header.put_slice(b"abc");
    let variants: [(&str, Bytes); 5] = [
        ("a Fetch v11 header followed by 3 bytes of 0xff", fetch_garbage.freeze()),
        (
            "a Metadata v9 header whose client id runs past the frame",
            bad_header.freeze(),
        ),
        ("a Produce v9 header followed by garbage", garbage.freeze()),
        ("a Produce v9 body cut in half", truncated.freeze()),
        (
            "a 7-byte frame, shorter than key, version and correlation id",
            Bytes::from_static(&[0, 0, 0, 9, 0, 0, 0]),
        ),
    ];
    for (what, frame) in variants {
        let mut client = connect(&endpoint).await?;
        client.send_frame(&frame).await?;
        expect_closed(&mut client, what).await?;
        fresh_connection_answers(&endpoint, what).await?;
    }
    Ok(Outcome::Passed)
}

pub async fn huge_array_count_in_a_request_body_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // Produce v3 (non-flexible): null transactional id, acks, timeout, then a topic array that
    // declares i32::MAX entries and holds none. A decoder that sizes an allocation from the
    // count asks for hundreds of gigabytes.
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i16(-1);
    body.put_i32(30_000);
    body.put_i32(i32::MAX);
    let frame = raw_request(ApiKey::Produce as i16, 3, 43, false, &body);
    let mut client = connect(&endpoint).await?;
    client.send_frame(&frame).await?;
    expect_closed(&mut client, "a Produce v3 whose topic array declares i32::MAX entries").await?;
    fresh_connection_answers(&endpoint, "a Produce declaring i32::MAX topics").await?;
    // The flexible form: a compact array count of u32::MAX - 1 entries.
    let mut body = BytesMut::new();
    body.put_u8(0); // null compact transactional id
    body.put_i16(-1);
    body.put_i32(30_000);
    body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // unsigned varint u32::MAX
    let frame = raw_request(ApiKey::Produce as i16, PRODUCE_V, 44, true, &body);
    let mut client = connect(&endpoint).await?;
    client.send_frame(&frame).await?;
    expect_closed(
        &mut client,
        "a Produce v9 whose topic array declares u32::MAX - 1 entries",
    )
    .await?;
    fresh_connection_answers(&endpoint, "a Produce declaring u32::MAX - 1 topics").await?;
    Ok(Outcome::Passed)
}

pub async fn unknown_api_key_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    client.send_frame(&raw_request(9999, 0, 51, false, &[])).await?;
    expect_closed(&mut client, "a request with API key 9999").await?;
    fresh_connection_answers(&endpoint, "API key 9999").await?;
    Ok(Outcome::Passed)
}

pub async fn produce_v2_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PROTO-VERSION-2 refuses the advertised Produce v0-v2, as Kafka 4.0 does and Kafka 3.x does not",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    // The advertisement includes Produce v2 (PROTO-VERSION-1) ...
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    let produce = advertised
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .context("Produce is not advertised")?;
    ensure!(
        produce.min_version <= 2,
        "Produce v2 is not advertised ({}..={})",
        produce.min_version,
        produce.max_version
    );
    // ... but a v2 request (acks 1, timeout 1 s, no topics) closes the connection.
    let mut body = BytesMut::new();
    body.put_i16(1);
    body.put_i32(1000);
    body.put_i32(0);
    client
        .send_frame(&raw_request(ApiKey::Produce as i16, 2, 52, false, &body))
        .await?;
    expect_closed(&mut client, "a Produce v2 request").await?;
    fresh_connection_answers(&endpoint, "Produce v2").await?;
    Ok(Outcome::Passed)
}

pub async fn fetch_v3_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // Fetch v3 is outside the gateway's range; Kafka before 4.0 serves it.
    if endpoint.profile.is_kafka()
        && super::advertised_min(&endpoint, ApiKey::Fetch)
            .await?
            .is_some_and(|min| min <= 3)
    {
        return Ok(Outcome::Skipped(
            "the endpoint advertises Fetch v3, which this case needs unadvertised".into(),
        ));
    }
    let mut client = connect(&endpoint).await?;
    // Fetch v3: replica id, max wait, min bytes, max bytes, no topics.
    let mut body = BytesMut::new();
    body.put_i32(-1);
    body.put_i32(0);
    body.put_i32(0);
    body.put_i32(1 << 20);
    body.put_i32(0);
    client
        .send_frame(&raw_request(ApiKey::Fetch as i16, 3, 53, false, &body))
        .await?;
    expect_closed(&mut client, "a Fetch v3 request").await?;
    fresh_connection_answers(&endpoint, "Fetch v3").await?;
    Ok(Outcome::Passed)
}

pub async fn version_above_the_advertised_range_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    let mut tried = 0;
    for key in [ApiKey::Metadata, ApiKey::Produce, ApiKey::Fetch] {
        let Some(entry) = advertised.api_keys.iter().find(|k| k.api_key == key as i16) else {
            continue;
        };
        let version = entry.max_version + 1;
        if version > key.valid_versions().max {
            continue;
        }
        let mut client = connect(&endpoint).await?;
        match key {
            ApiKey::Metadata => client.send_only(key, version, &MetadataRequest::default()).await?,
            ApiKey::Produce => {
                client
                    .send_only(
                        key,
                        version,
                        &ProduceRequest::default().with_acks(1).with_timeout_ms(1000),
                    )
                    .await?
            }
            _ => client.send_only(key, version, &FetchRequest::default()).await?,
        }
        expect_closed(
            &mut client,
            &format!("{key:?} v{version}, one above the advertised {}", entry.max_version),
        )
        .await?;
        fresh_connection_answers(&endpoint, &format!("{key:?} v{version}")).await?;
        tried += 1;
    }
    ensure!(
        tried > 0,
        "no API had a version above its advertised range that the client can encode"
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Produce, Fetch, offsets.

pub async fn compressed_batches_round_trip_uncompressed(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-codecs", 1).await?;
    let t = now_ms()?;
    let payload = b"compressible compressible compressible compressible".to_vec();
    let sent = |codec: &str| -> Vec<(i64, Record)> {
        (0..3)
            .map(|i| {
                let key = format!("{codec}-{i}");
                (
                    t + i,
                    record(
                        Some(key.as_bytes()),
                        Some(&payload),
                        &[(b"codec", Some(codec.as_bytes()))],
                    ),
                )
            })
            .collect()
    };
    let mut batches: Vec<(&str, Bytes)> = Vec::new();
    for codec in codecs() {
        batches.push((codec.name(), encode(&BatchSpec::plain(codec), &sent(codec.name()))?));
    }
    // The Java client's xerial-framed snappy, and a zstd section built outside encode_batch.
    for (name, codec, compressor) in [
        (
            "snappy-xerial",
            Compression::Snappy,
            compress_snappy_xerial as fn(&[u8]) -> Vec<u8>,
        ),
        ("zstd-direct", Compression::Zstd, |b: &[u8]| {
            compress(Compression::Zstd, b)
        }),
    ] {
        let records = sent(name);
        let timestamps: Vec<i64> = records.iter().map(|(t, _)| *t).collect();
        let header = batch_header(&BatchSpec::plain(codec), &timestamps);
        let mut section = BytesMut::new();
        for (i, (ts, r)) in records.iter().enumerate() {
            let r = Record {
                offset_delta: i as i32,
                timestamp_delta: ts - header.base_timestamp,
                ..r.clone()
            };
            encode_record(&mut section, &r);
        }
        batches.push((name, write_batch(&header, records.len() as i32, &compressor(&section))));
    }
    for (i, (name, batch)) in batches.iter().enumerate() {
        let base = produce_ok(&mut client, &topic, 0, batch.clone())
            .await
            .with_context(|| format!("a {name} batch"))?;
        ensure!(
            base == 3 * i as i64,
            "the {name} batch landed at {base}, expected {}",
            3 * i
        );
    }
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 0).await?)?;
    ensure!(
        fetched.len() == 3 * batches.len(),
        "fetched {} records, produced {}",
        fetched.len(),
        3 * batches.len()
    );
    for (f, (offset, (name, i))) in fetched.iter().zip(
        batches
            .iter()
            .flat_map(|(n, _)| (0..3).map(move |i| (*n, i)))
            .enumerate(),
    ) {
        ensure!(
            f.offset == offset as i64,
            "record {offset} fetched at offset {}",
            f.offset
        );
        ensure!(
            f.timestamp == t + i,
            "the {name} record {i} came back with timestamp {}",
            f.timestamp
        );
        let key = format!("{name}-{i}");
        check_record(
            &format!("{name} record {i}"),
            &f.record,
            &expected(
                Some(key.as_bytes()),
                Some(&payload),
                &[(b"codec", Some(name.as_bytes()))],
            ),
        )?;
    }
    Ok(Outcome::Passed)
}

/// What Fetch must return for one produced record.
struct Expected {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn expected(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Expected {
    Expected {
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_vec(), v.map(<[u8]>::to_vec)))
            .collect(),
    }
}

/// A record as Kafka serves it back: exactly as produced, headers in their order.
fn expected_as_sent(sent: &Record) -> Expected {
    Expected {
        key: sent.key.as_ref().map(|k| k.to_vec()),
        value: sent.value.as_ref().map(|v| v.to_vec()),
        headers: sent
            .headers
            .iter()
            .map(|h| (h.name.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
            .collect(),
    }
}

/// Bytes for a failure message: `null`, or escaped and cut after 40 bytes.
fn show(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.len() > 40 => format!("\"{}\"... ({} bytes)", b[..40].escape_ascii(), b.len()),
        Some(b) => format!("\"{}\"", b.escape_ascii()),
    }
}

fn show_headers(headers: &[(Vec<u8>, Option<Vec<u8>>)]) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(n, v)| format!("{}={}", show(Some(n)), show(v.as_deref())))
        .collect();
    if shown.len() > 6 {
        format!("[{}, ... ({} headers)]", shown[..6].join(", "), shown.len())
    } else {
        format!("[{}]", shown.join(", "))
    }
}

fn check_record(what: &str, got: &Record, want: &Expected) -> anyhow::Result<()> {
    let key = got.key.as_ref().map(|b| b.to_vec());
    ensure!(
        key == want.key,
        "{what}: key {}, expected {}",
        show(key.as_deref()),
        show(want.key.as_deref())
    );
    let value = got.value.as_ref().map(|b| b.to_vec());
    ensure!(
        value == want.value,
        "{what}: value {}, expected {}",
        show(value.as_deref()),
        show(want.value.as_deref())
    );
    let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = got
        .headers
        .iter()
        .map(|h| (h.name.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
        .collect();
    ensure!(
        headers == want.headers,
        "{what}: headers {}, expected {}",
        show_headers(&headers),
        show_headers(&want.headers)
    );
    Ok(())
}

pub async fn produce_then_fetch_round_trips_every_mapping_case(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-mapping", 1).await?;
    let long_key = vec![b'k'; 300];
    let key_255 = vec![b'k'; 255];
    let name_247 = vec![b'a'; 247];
    let name_248 = vec![b'a'; 248];
    let value_256 = vec![b'v'; 256];
    let header_value = vec![b'b'; 250];
    // Descending names: 500 headers take 500 x (10 + 12 + 250) = 136,000 bytes of Iggy headers
    // (over 100,000: envelope, order kept); 360 take 97,920 (plain, sorted).
    let over_budget_names: Vec<Vec<u8>> = (0..500).rev().map(|i| format!("h{i:03}").into_bytes()).collect();
    let under_budget_names: Vec<Vec<u8>> = (0..360).rev().map(|i| format!("h{i:03}").into_bytes()).collect();
    let t0 = now_ms()?;
    type H<'a> = (&'a [u8], Option<&'a [u8]>);
    let plain_headers: [H; 3] = [(b"zeta", Some(b"z")), (b"alpha", Some(b"a")), (b"mid", Some(b"m"))];
    let env_order: [H; 2] = [(b"b", Some(b"2")), (b"a", Some(b"1"))];
    let null_header: [H; 2] = [(b"z", Some(b"1")), (b"n", None)];
    let over_budget: Vec<H> = over_budget_names
        .iter()
        .map(|n| (n.as_slice(), Some(header_value.as_slice())))
        .collect();
    let under_budget: Vec<H> = under_budget_names
        .iter()
        .map(|n| (n.as_slice(), Some(header_value.as_slice())))
        .collect();
    let mut under_budget_sorted = under_budget.clone();
    under_budget_sorted.sort();
    let long_names: [H; 2] = [(b"zz", Some(b"1")), (&name_247, Some(b"2"))];
    let long_names_sorted: [H; 2] = [(&name_247, Some(b"2")), (b"zz", Some(b"1"))];
    let too_long_name: [H; 2] = [(b"zz", Some(b"1")), (&name_248, Some(b"2"))];
    let not_utf8: [H; 2] = [(b"zz", Some(b"1")), (&[0xff, 0xfe], Some(b"2"))];
    let empty_value: [H; 2] = [(b"zz", Some(b"1")), (b"e", Some(b""))];
    let long_value: [H; 2] = [(b"zz", Some(b"1")), (b"l", Some(&value_256))];
    let reserved: [H; 2] = [(b"kafka.value", Some(b"null")), (b"kafka.key", Some(b"not the key"))];
    let reserved_sorted: [H; 2] = [(b"kafka.key", Some(b"not the key")), (b"kafka.value", Some(b"null"))];
    let repeated: [H; 3] = [(b"dup", Some(b"1")), (b"x", Some(b"x")), (b"dup", Some(b"2"))];
    // (what, sent, expected back)
    let cases: Vec<(&str, Record, Expected)> = vec![
        (
            "plain keyed record with unsorted headers (MAP-KEY-1, MAP-HEADER-1: sorted by name)",
            record(Some(b"key-0"), Some(b"value-0"), &plain_headers),
            expected(
                Some(b"key-0"),
                Some(b"value-0"),
                &[(b"alpha", Some(b"a")), (b"mid", Some(b"m")), (b"zeta", Some(b"z"))],
            ),
        ),
        (
            "tombstone (MAP-VALUE-1: null)",
            record(Some(b"key-1"), None, &[]),
            expected(Some(b"key-1"), None, &[]),
        ),
        (
            "empty value (MAP-VALUE-1: empty, not null)",
            record(Some(b"key-2"), Some(b""), &[(b"h", Some(b"1"))]),
            expected(Some(b"key-2"), Some(b""), &[(b"h", Some(b"1"))]),
        ),
        (
            "300-byte key (ENV-TRIGGER-KEY-LEN-1: envelope keeps header order)",
            record(Some(&long_key), Some(b"value-3"), &env_order),
            expected(Some(&long_key), Some(b"value-3"), &env_order),
        ),
        (
            "header with a null value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(Some(b"key-4"), Some(b"value-4"), &null_header),
            expected(Some(b"key-4"), Some(b"value-4"), &null_header),
        ),
        (
            "repeated header names (ENV-TRIGGER-REPEAT-1)",
            record(None, Some(b"value-5"), &repeated),
            expected(None, Some(b"value-5"), &repeated),
        ),
        (
            "empty key (ENV-TRIGGER-EMPTY-KEY-1: not null)",
            record(Some(b""), Some(b"value-6"), &[]),
            expected(Some(b""), Some(b"value-6"), &[]),
        ),
        (
            "the one-byte value 0x00 (MAP-VALUE-2: not a placeholder)",
            record(None, Some(&[0]), &[]),
            expected(None, Some(&[0]), &[]),
        ),
        (
            "null key and null value",
            record(None, None, &[]),
            expected(None, None, &[]),
        ),
        (
            "a 255-byte key (plain: MAP-KEY-1)",
            record(Some(&key_255), Some(b"value-9"), &[]),
            expected(Some(&key_255), Some(b"value-9"), &[]),
        ),
        (
            "a 247-byte header name (plain, sorted: LIMIT-HEADER-FIELD-1)",
            record(None, Some(b"value-10"), &long_names),
            expected(None, Some(b"value-10"), &long_names_sorted),
        ),
        (
            "a 248-byte header name (ENV-TRIGGER-NAME-LEN-1)",
            record(None, Some(b"value-11"), &too_long_name),
            expected(None, Some(b"value-11"), &too_long_name),
        ),
        (
            "a header name that is not UTF-8 (ENV-TRIGGER-NAME-1)",
            record(None, Some(b"value-12"), &not_utf8),
            expected(None, Some(b"value-12"), &not_utf8),
        ),
        (
            "an empty header value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(None, Some(b"value-13"), &empty_value),
            expected(None, Some(b"value-13"), &empty_value),
        ),
        (
            "a 256-byte header value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(None, Some(b"value-14"), &long_value),
            expected(None, Some(b"value-14"), &long_value),
        ),
        (
            "headers over 100,000 bytes of Iggy headers (ENV-TRIGGER-BUDGET-1)",
            record(None, Some(b"value-15"), &over_budget),
            expected(None, Some(b"value-15"), &over_budget),
        ),
        (
            "headers just under 100,000 bytes of Iggy headers (plain, sorted)",
            record(None, Some(b"value-16"), &under_budget),
            expected(None, Some(b"value-16"), &under_budget_sorted),
        ),
        (
            "Kafka headers named kafka.key and kafka.value (MAP-RESERVED-1)",
            record(Some(b"key-17"), Some(b"value-17"), &reserved),
            expected(Some(b"key-17"), Some(b"value-17"), &reserved_sorted),
        ),
    ];
    let n = cases.len() as i64;
    let sent: Vec<(i64, Record)> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, r, _))| (t0 + i as i64, r.clone()))
        .collect();
    let base = produce_ok(
        &mut client,
        &topic,
        0,
        encode(&BatchSpec::plain(Compression::None), &sent)?,
    )
    .await?;
    ensure!(
        base == 0,
        "OFFSET-BASE-1: the first Produce to an empty partition answered base offset {base}, expected 0"
    );

    let data = fetch(&mut client, &topic, 0, 0).await?;
    ensure!(
        data.high_watermark == n,
        "Fetch high watermark {}, expected {n}",
        data.high_watermark
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(
        fetched.len() as i64 == n,
        "fetched {} records, produced {n}",
        fetched.len()
    );
    for (i, (f, (what, sent, want))) in fetched.iter().zip(&cases).enumerate() {
        ensure!(
            f.offset == i as i64,
            "OFFSET-IDENTITY-1: record {i} ({what}) fetched at offset {}",
            f.offset
        );
        // MAP-HEADER-1 (a deviation): from Kafka every record comes back as it was sent.
        let as_sent;
        let want = match endpoint.profile {
            Profile::Gateway => want,
            Profile::Kafka => {
                as_sent = expected_as_sent(sent);
                &as_sent
            }
        };
        ensure!(
            f.timestamp == t0 + i as i64,
            "MAP-TS-1: record {i} ({what}) timestamp {}, produced {}",
            f.timestamp,
            t0 + i as i64
        );
        check_record(&format!("record {i}, {what}"), &f.record, want)?;
    }

    // A second Produce continues where the first ended, and Fetch from there agrees.
    let base = produce_ok(&mut client, &topic, 0, values_batch(t0, &[b"second-0", b"second-1"])?).await?;
    ensure!(
        base == n,
        "OFFSET-BASE-1: the second Produce answered base offset {base}, expected {n}"
    );
    let data = fetch(&mut client, &topic, 0, n).await?;
    ensure!(
        data.high_watermark == n + 2,
        "Fetch high watermark {}, expected {}",
        data.high_watermark,
        n + 2
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    let offsets: Vec<i64> = fetched.iter().map(|f| f.offset).collect();
    ensure!(
        offsets == vec![n, n + 1],
        "OFFSET-IDENTITY-1: fetching from {n} returned offsets {offsets:?}"
    );
    check_record(
        "second batch, record 0",
        &fetched[0].record,
        &expected(None, Some(b"second-0"), &[]),
    )?;
    check_record(
        "second batch, record 1",
        &fetched[1].record,
        &expected(None, Some(b"second-1"), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn fetch_past_the_high_watermark_is_offset_out_of_range(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-fetch-range", 1).await?;
    // Empty partition: the HW is 0, so 1 is past it.
    let data = fetch(&mut client, &topic, 0, 1).await?;
    ensure!(
        data.error_code == OFFSET_OUT_OF_RANGE,
        "Fetch at 1 of an empty partition: error {}, expected 1",
        data.error_code
    );
    produce_ok(&mut client, &topic, 0, values_batch(now_ms()?, &[b"a", b"b"])?).await?;
    for offset in [3, 100, -1] {
        let data = fetch(&mut client, &topic, 0, offset).await?;
        ensure!(
            data.error_code == OFFSET_OUT_OF_RANGE,
            "Fetch at {offset} with HW 2: error {}, expected OFFSET_OUT_OF_RANGE (1)",
            data.error_code
        );
        if offset > 0 {
            ensure!(
                data.high_watermark == 2,
                "Fetch at {offset}: high watermark {}, expected 2",
                data.high_watermark
            );
        }
    }
    // At the HW: no error and no records, even without waiting.
    let data = fetch(&mut client, &topic, 0, 2).await?;
    ensure!(data.error_code == NONE, "Fetch at the HW: error {}", data.error_code);
    ensure!(
        data.high_watermark == 2,
        "Fetch at the HW: high watermark {}, expected 2",
        data.high_watermark
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(fetched.is_empty(), "Fetch at the HW returned {} records", fetched.len());
    Ok(Outcome::Passed)
}

pub async fn fetch_returns_the_first_record_whole_above_max_bytes(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-fetch-limit", 1).await?;
    let big = vec![b'v'; 1000];
    let t = now_ms()?;
    // Three separate batches, so that "whole first batch" and "whole first record" agree.
    for _ in 0..3 {
        produce_ok(&mut client, &topic, 0, values_batch(t, &[&big])?).await?;
    }
    let data = fetch_with(&mut client, &topic, 0, 0, 0, 100).await?;
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(
        fetched.len() == 1,
        "Fetch with partition_max_bytes 100 below a 1000-byte record returned {} records, expected the first one only",
        fetched.len()
    );
    ensure!(
        fetched[0].offset == 0,
        "the record returned is at offset {}",
        fetched[0].offset
    );
    check_record(
        "the first record above the limit",
        &fetched[0].record,
        &expected(None, Some(&big), &[]),
    )?;
    // The request-wide max_bytes works the same way.
    let request = fetch_request(&topic, 0, 0, 0, FETCH_ALL).with_max_bytes(100);
    let response: FetchResponse = client.request(ApiKey::Fetch, FETCH_V, &request).await?;
    let fetched = fetched_records(endpoint.profile, &fetched_partition(response, &topic, 0)?)?;
    ensure!(
        fetched.len() == 1,
        "Fetch with max_bytes 100 returned {} records, expected the first one whole",
        fetched.len()
    );
    check_record(
        "the first record above max_bytes",
        &fetched[0].record,
        &expected(None, Some(&big), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn list_offsets_earliest_latest_and_timestamps(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-list-offsets", 1).await?;
    // Empty partition.
    ensure!(
        offset_for(&mut client, &topic, 0, EARLIEST).await? == (0, -1),
        "EARLIEST of an empty partition is not (0, -1)"
    );
    ensure!(
        offset_for(&mut client, &topic, 0, LATEST).await? == (0, -1),
        "LATEST of an empty partition is not (0, -1)"
    );
    ensure!(
        offset_for(&mut client, &topic, 0, MAX_TIMESTAMP).await? == (-1, -1),
        "MAX_TIMESTAMP of an empty partition is not (-1, -1)"
    );
    let t0 = now_ms()?;
    // One message: Iggy reports current_offset 0 both empty and with one message (DIFF-7).
    produce_ok(&mut client, &topic, 0, values_batch(t0, &[b"r0"])?).await?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "LATEST after one record is not 1"
    );
    produce_ok(&mut client, &topic, 0, values_batch(t0 + 1, &[b"r1", b"r2"])?).await?;
    ensure!(
        offset_for(&mut client, &topic, 0, EARLIEST).await? == (0, -1),
        "EARLIEST after three records is not (0, -1)"
    );
    ensure!(
        offset_for(&mut client, &topic, 0, LATEST).await? == (3, -1),
        "LATEST after three records is not (3, -1)"
    );
    let (offset, timestamp) = offset_for(&mut client, &topic, 0, 0).await?;
    ensure!(offset == 0, "timestamp 0 found offset {offset}, expected 0");
    ensure!(
        timestamp > 0,
        "timestamp 0 found offset 0 with timestamp {timestamp}, expected its append time"
    );
    // Year 2100: no record is that late.
    let far_future = 4_102_444_800_000;
    ensure!(
        offset_for(&mut client, &topic, 0, far_future).await? == (-1, -1),
        "a far-future timestamp did not answer (-1, -1)"
    );
    let (offset, timestamp) = offset_for(&mut client, &topic, 0, MAX_TIMESTAMP).await?;
    ensure!(
        (offset, timestamp) == (2, t0 + 2),
        "MAX_TIMESTAMP answered ({offset}, {timestamp}), expected the last record (2, {})",
        t0 + 2
    );
    // EARLIEST_LOCAL (-4, v8): no tiered storage, so the earliest offset.
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(&topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(EARLIEST_LOCAL)])]);
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 8, &request).await?;
    let answer = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("ListOffsets v8 answered no partition")?;
    ensure!(
        (answer.error_code, answer.offset, answer.timestamp) == (NONE, 0, -1),
        "EARLIEST_LOCAL answered error {}, ({}, {}), expected (0, -1)",
        answer.error_code,
        answer.offset,
        answer.timestamp
    );
    // LISTOFFSETS-TIMESTAMP-1 (a deviation) refuses a negative target Kafka does not define;
    // Kafka has no rule for one to hold it to.
    if endpoint.profile.is_kafka() {
        return Ok(Outcome::Passed);
    }
    let answer = list_offset(&mut client, &topic, 0, -5).await?;
    ensure!(
        answer.error_code == INVALID_REQUEST,
        "ListOffsets at timestamp -5: error {}, expected INVALID_REQUEST (42)",
        answer.error_code
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Topics.

fn with_config(topic: CreatableTopic, name: &str, value: Option<&str>) -> CreatableTopic {
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(value.map(|v| StrBytes::from_string(v.to_string())));
    let mut configs = topic.configs.clone();
    configs.push(config);
    topic.with_configs(configs)
}

pub async fn create_topics_rules(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = super::require_apis(&endpoint, &[ApiKey::CreateTopics]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let fresh = |p: &str| endpoint.unique_topic(p);
    // (what, topic, expected code), all refused: sent in one request.
    let long_name = "x".repeat(250);
    let mut refused: Vec<(&str, CreatableTopic, i16)> = vec![
        ("a name with a space", creatable("bad name", 1), INVALID_TOPIC_EXCEPTION),
        ("an empty name", creatable("", 1), INVALID_TOPIC_EXCEPTION),
        ("the name ..", creatable("..", 1), INVALID_TOPIC_EXCEPTION),
        ("the name .", creatable(".", 1), INVALID_TOPIC_EXCEPTION),
        ("a 250-byte name", creatable(&long_name, 1), INVALID_TOPIC_EXCEPTION),
        ("a name with /", creatable("a/b", 1), INVALID_TOPIC_EXCEPTION),
        (
            "0 partitions",
            creatable(&fresh("kig-zero-partitions"), 0),
            INVALID_PARTITIONS,
        ),
        (
            "-2 partitions",
            creatable(&fresh("kig-minus-two-partitions"), -2),
            INVALID_PARTITIONS,
        ),
        (
            "replication factor 0",
            creatable(&fresh("kig-rf-zero"), 1).with_replication_factor(0),
            INVALID_REPLICATION_FACTOR,
        ),
        (
            "replication factor -2",
            creatable(&fresh("kig-rf-minus-two"), 1).with_replication_factor(-2),
            INVALID_REPLICATION_FACTOR,
        ),
        (
            "a manual replica assignment",
            creatable(&fresh("kig-assignment"), -1).with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(0)])]),
            INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            "an unknown config",
            with_config(
                creatable(&fresh("kig-cfg-unknown"), 1),
                "cleanup.policy",
                Some("compact"),
            ),
            INVALID_CONFIG,
        ),
        (
            "retention.ms 0",
            with_config(creatable(&fresh("kig-cfg-zero"), 1), "retention.ms", Some("0")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms -2",
            with_config(creatable(&fresh("kig-cfg-minus-two"), 1), "retention.ms", Some("-2")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms abc",
            with_config(creatable(&fresh("kig-cfg-abc"), 1), "retention.ms", Some("abc")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms null",
            with_config(creatable(&fresh("kig-cfg-null"), 1), "retention.ms", None),
            INVALID_CONFIG,
        ),
    ];
    if endpoint.profile.is_kafka() {
        // TOPIC-CONFIG-1 and TOPIC-REPLICATION-1 (deviations): Kafka takes every config it
        // defines, retention.ms 0 included, and honours a manual replica assignment.
        refused.retain(|(what, _, _)| {
            !matches!(
                *what,
                "an unknown config" | "retention.ms 0" | "a manual replica assignment"
            )
        });
    }
    let names: Vec<String> = refused.iter().map(|(_, t, _)| t.name.0.to_string()).collect();
    let results = create_topics(&mut client, refused.iter().map(|(_, t, _)| t.clone()).collect(), false).await?;
    for ((what, _, code), result) in refused.iter().zip(&results) {
        ensure!(
            result.error_code == *code,
            "CreateTopics with {what}: error {}, expected {code}",
            result.error_code
        );
    }
    for ((_, _, refusal), name) in refused.iter().zip(&names).filter(|(_, n)| !n.is_empty()) {
        // METADATA-NAME-1: a name Kafka refuses is reported invalid rather than unknown.
        let absent = if *refusal == INVALID_TOPIC_EXCEPTION {
            INVALID_TOPIC_EXCEPTION
        } else {
            UNKNOWN_TOPIC_OR_PARTITION
        };
        let code = metadata_code(&mut client, name).await?;
        ensure!(
            code == absent,
            "refused topic {name:?}: Metadata answers {code}, expected {absent}"
        );
    }

    // Accepted: retention.ms, and -1 partitions taking the default.
    let mut longest = fresh("kig-longest-name-");
    longest.extend(std::iter::repeat_n('x', 249 - longest.len()));
    let retained = fresh("kig-retention");
    let defaulted = fresh("kig-default-partitions");
    let never = fresh("kig-retention-never");
    let results = create_topics(
        &mut client,
        vec![
            with_config(creatable(&retained, 2), "retention.ms", Some("3600000")),
            creatable(&defaulted, -1),
            with_config(creatable(&never, 1), "retention.ms", Some("-1")),
            creatable(&longest, 1),
        ],
        false,
    )
    .await?;
    for result in &results {
        ensure!(
            result.error_code == NONE,
            "CreateTopics {}: error {} ({:?})",
            result.name.0.as_str(),
            result.error_code,
            result.error_message
        );
    }
    let response = metadata(&mut client, Some(&[&retained, &defaulted, &never])).await?;
    let partitions = |name: &str| {
        response
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            .map(|t| (t.error_code, t.partitions.len()))
    };
    ensure!(
        partitions(&retained) == Some((NONE, 2)),
        "topic created with 2 partitions: Metadata says {:?}",
        partitions(&retained)
    );
    // TOPIC-PARTITIONS-1: the default is `default_partitions`, 1 unless configured otherwise.
    ensure!(
        partitions(&defaulted) == Some((NONE, 1)),
        "topic created with -1 partitions: Metadata says {:?}, expected the default 1",
        partitions(&defaulted)
    );
    ensure!(
        results[1].num_partitions == 1,
        "CreateTopics with -1 partitions answered num_partitions {}",
        results[1].num_partitions
    );

    // TOPIC-EXISTS-1, also under validate_only.
    for validate_only in [false, true] {
        let result = create_topics(&mut client, vec![creatable(&retained, 1)], validate_only)
            .await?
            .remove(0);
        ensure!(
            result.error_code == TOPIC_ALREADY_EXISTS,
            "CreateTopics (validate_only {validate_only}) for an existing topic: error {}, expected 36",
            result.error_code
        );
    }

    // TOPIC-VALIDATE-ONLY-1: every check applies, nothing is created.
    let preview = fresh("kig-validate-only");
    let results = create_topics(
        &mut client,
        vec![
            creatable(&preview, 3),
            // A config the gateway does not know; for Kafka, a value no Kafka accepts.
            match endpoint.profile {
                Profile::Gateway => with_config(
                    creatable(&fresh("kig-validate-bad-config"), 1),
                    "segment.bytes",
                    Some("1024"),
                ),
                Profile::Kafka => with_config(
                    creatable(&fresh("kig-validate-bad-config"), 1),
                    "retention.ms",
                    Some("abc"),
                ),
            },
            creatable("bad name", 1),
        ],
        true,
    )
    .await?;
    let codes: Vec<i16> = results.iter().map(|r| r.error_code).collect();
    ensure!(
        codes == vec![NONE, INVALID_CONFIG, INVALID_TOPIC_EXCEPTION],
        "validate_only answered {codes:?}, expected [0, 40, 17]"
    );
    ensure!(
        metadata_code(&mut client, &preview).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "validate_only created topic {preview}"
    );
    // And it can still be created for real.
    create_topic(&mut client, &preview, 3)
        .await
        .context("creating the topic validate_only previewed")?;
    Ok(Outcome::Passed)
}

pub async fn delete_topics_then_metadata_reports_unknown(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = super::require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DeleteTopics]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let topic = endpoint.unique_topic("kig-delete");
    ensure!(
        metadata_code(&mut client, &topic).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "Metadata for a topic never created did not answer UNKNOWN_TOPIC_OR_PARTITION (3)"
    );
    create_topic(&mut client, &topic, 3).await?;
    let response = metadata(&mut client, Some(&[&topic])).await?;
    let brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
    ensure!(!brokers.is_empty(), "Metadata lists no broker");
    ensure!(
        brokers.contains(&response.controller_id.0),
        "controller {} is not a listed broker {brokers:?}",
        response.controller_id.0
    );
    let lowest = *brokers.iter().min().expect("non-empty");
    ensure!(
        response.controller_id.0 == lowest,
        "controller {} is not the lowest node id {lowest}",
        response.controller_id.0
    );
    if let Some(instance_id) = endpoint.instance_id {
        ensure!(
            brokers.contains(&i32::from(instance_id)),
            "the answering gateway (node {instance_id}) is not among the brokers {brokers:?}"
        );
    }
    ensure!(
        response.topics.len() == 1,
        "Metadata answered {} topics for one",
        response.topics.len()
    );
    let described = &response.topics[0];
    ensure!(
        described.error_code == NONE,
        "Metadata for {topic}: error {}",
        described.error_code
    );
    let mut indexes: Vec<i32> = described.partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort_unstable();
    ensure!(
        indexes == vec![0, 1, 2],
        "Metadata lists partitions {indexes:?}, expected [0, 1, 2]"
    );
    for p in &described.partitions {
        let leader = p.leader_id.0;
        ensure!(
            p.error_code == NONE,
            "partition {}: error {}",
            p.partition_index,
            p.error_code
        );
        ensure!(
            brokers.contains(&leader),
            "partition {} is led by {leader}, not a listed broker {brokers:?}",
            p.partition_index
        );
        if let Some(instance_id) = endpoint.instance_id {
            ensure!(
                leader == i32::from(instance_id),
                "partition {} is led by {leader}, not by the answering node {instance_id}",
                p.partition_index
            );
        }
        // METADATA-1 (a deviation): Kafka's leader epochs start at 0.
        let epoch_ok = match endpoint.profile {
            Profile::Gateway => p.leader_epoch == -1,
            Profile::Kafka => p.leader_epoch >= 0,
        };
        ensure!(
            epoch_ok,
            "partition {}: leader epoch {}, expected {}",
            p.partition_index,
            p.leader_epoch,
            if endpoint.profile.is_kafka() { "0 or more" } else { "-1" }
        );
        let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
        let isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
        ensure!(
            replicas == vec![leader] && isr == vec![leader],
            "partition {}: replicas {replicas:?}, ISR {isr:?}, expected the leader alone",
            p.partition_index
        );
    }
    ensure!(
        listed(&metadata(&mut client, None).await?, &topic),
        "Metadata for all topics does not list {topic}"
    );
    // v0 asks for every topic with an empty list.
    let all_v0: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            0,
            &MetadataRequest::default().with_topics(Some(vec![])),
        )
        .await?;
    ensure!(
        listed(&all_v0, &topic),
        "Metadata v0 with an empty topic list does not list {topic}"
    );
    // Topics named only by id: the gateway assigns no ids.
    let by_id = topic_by_id()?;
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![by_id.clone()]));
    let response: MetadataResponse = client.request(ApiKey::Metadata, 12, &request).await?;
    ensure!(
        response.topics.len() == 1 && response.topics[0].error_code == UNKNOWN_TOPIC_ID,
        "Metadata v12 for a topic named only by id: {:?}, expected UNKNOWN_TOPIC_ID (100)",
        response.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
    );
    let request = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default()
            .with_name(None)
            .with_topic_id(by_id.topic_id)])
        .with_timeout_ms(30_000);
    let response: DeleteTopicsResponse = client.request(ApiKey::DeleteTopics, 6, &request).await?;
    ensure!(
        response.responses.len() == 1 && response.responses[0].error_code == UNKNOWN_TOPIC_ID,
        "DeleteTopics v6 by id: {:?}, expected UNKNOWN_TOPIC_ID (100)",
        response.responses.iter().map(|t| t.error_code).collect::<Vec<_>>()
    );

    ensure!(
        delete_topic(&mut client, &topic).await? == NONE,
        "DeleteTopics of an existing topic failed"
    );
    ensure!(
        metadata_code(&mut client, &topic).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "Metadata after DeleteTopics did not answer UNKNOWN_TOPIC_OR_PARTITION (3)"
    );
    ensure!(
        !listed(&metadata(&mut client, None).await?, &topic),
        "Metadata for all topics still lists the deleted {topic}"
    );
    let again = delete_topic(&mut client, &topic).await?;
    ensure!(
        again == UNKNOWN_TOPIC_OR_PARTITION,
        "deleting {topic} again: error {again}, expected 3"
    );
    // The name is free again.
    create_topic(&mut client, &topic, 1)
        .await
        .context("re-creating a deleted topic")?;
    Ok(Outcome::Passed)
}

pub async fn describe_configs_reports_retention_and_fixed_entries(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = super::require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DescribeConfigs]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let retained = endpoint.unique_topic("kig-describe-retained");
    let plain = endpoint.unique_topic("kig-describe-plain");
    let results = create_topics(
        &mut client,
        vec![
            with_config(creatable(&retained, 1), "retention.ms", Some("3600000")),
            creatable(&plain, 1),
        ],
        false,
    )
    .await?;
    ensure!(
        results.iter().all(|r| r.error_code == NONE),
        "creating the topics: {:?}",
        results.iter().map(|r| r.error_code).collect::<Vec<_>>()
    );
    let resource = |kind: i8, name: &str, keys: Option<Vec<&str>>| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(
                keys.map(|ks| ks.into_iter().map(|k| StrBytes::from_string(k.to_string())).collect()),
            )
    };
    let missing = endpoint.unique_topic("kig-describe-missing");
    let request = DescribeConfigsRequest::default().with_resources(vec![
        resource(2, &retained, None),
        resource(2, &plain, None),
        resource(2, &retained, Some(vec!["retention.ms"])),
        resource(2, &missing, None),
        resource(4, "0", None),
        resource(99, "what", None),
    ]);
    let response: DescribeConfigsResponse = client
        .request(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_V, &request)
        .await?;
    ensure!(
        response.results.len() == 6,
        "DescribeConfigs answered {} resources for 6",
        response.results.len()
    );
    let entries = |i: usize| -> Vec<(String, Option<String>, i8, bool)> {
        let mut e: Vec<_> = response.results[i]
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(|v| v.to_string()),
                    c.config_source,
                    c.read_only,
                )
            })
            .collect();
        e.sort();
        e
    };
    let fixed = |retention: &str, source: i8| {
        let mut e = vec![
            ("retention.ms".to_string(), Some(retention.to_string()), source, true),
            ("cleanup.policy".into(), Some("delete".into()), 5, true),
            ("compression.type".into(), Some("producer".into()), 5, true),
            ("max.message.bytes".into(), Some("64000000".into()), 5, true),
            ("message.timestamp.type".into(), Some("CreateTime".into()), 5, true),
            ("min.insync.replicas".into(), Some("1".into()), 5, true),
        ];
        e.sort();
        e
    };
    for i in 0..3 {
        ensure!(
            response.results[i].error_code == NONE,
            "DescribeConfigs resource {i}: error {}",
            response.results[i].error_code
        );
    }
    if endpoint.profile.is_kafka() {
        // DESCRIBECONFIGS-1 (a deviation): Kafka lists all of a topic's configs, alterable,
        // and its brokers' own for a broker resource; what holds everywhere is the retention
        // set at creation, as a topic override, and the answers for what does not exist.
        let retention = ("retention.ms".to_string(), Some("3600000".to_string()), 1, false);
        ensure!(
            entries(0).contains(&retention) && entries(2) == vec![retention.clone()],
            "topic with retention.ms 3600000: all {:?}, narrowed {:?}, expected {retention:?} in both",
            entries(0),
            entries(2)
        );
        ensure!(
            response.results[3].error_code == UNKNOWN_TOPIC_OR_PARTITION,
            "unknown topic: error {}",
            response.results[3].error_code
        );
        ensure!(
            response.results[5].error_code == INVALID_REQUEST,
            "resource type 99: error {}, expected INVALID_REQUEST (42)",
            response.results[5].error_code
        );
        return Ok(Outcome::Passed);
    }
    ensure!(
        entries(0) == fixed("3600000", 1),
        "topic with retention.ms 3600000: {:?}",
        entries(0)
    );
    ensure!(
        entries(1) == fixed("-1", 5),
        "topic without retention: {:?}",
        entries(1)
    );
    ensure!(
        entries(2) == vec![("retention.ms".to_string(), Some("3600000".to_string()), 1, true)],
        "narrowed to retention.ms: {:?}",
        entries(2)
    );
    ensure!(
        response.results[3].error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "unknown topic: error {}",
        response.results[3].error_code
    );
    ensure!(
        response.results[4].error_code == NONE && response.results[4].configs.is_empty(),
        "broker resource: error {} with {} entries, expected 0 and none",
        response.results[4].error_code,
        response.results[4].configs.len()
    );
    ensure!(
        response.results[5].error_code == INVALID_REQUEST,
        "resource type 99: error {}, expected INVALID_REQUEST (42)",
        response.results[5].error_code
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Produce refusals.

pub async fn corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-corrupt", 1).await?;
    let t = now_ms()?;
    let good = values_batch(t, &[b"first", b"second"])?;

    let mut flipped = BytesMut::from(&good[..]);
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    let flipped = flipped.freeze();

    let mut magic_1 = BytesMut::from(&good[..]);
    magic_1[16] = 1;

    let transactional = encode(
        &BatchSpec {
            attributes: BatchAttributes(0x10),
            ..BatchSpec::plain(Compression::None)
        },
        &[(t, record(None, Some(b"txn"), &[]))],
    )?;
    let control = encode(
        &BatchSpec {
            attributes: BatchAttributes(0x20),
            ..BatchSpec::plain(Compression::None)
        },
        &[(t, record(None, Some(b"ctl"), &[]))],
    )?;

    // A batch declaring two records and holding one.
    let miscounted = {
        let r = Record {
            offset_delta: 0,
            ..record(None, Some(b"only"), &[])
        };
        let mut section = BytesMut::new();
        encode_record(&mut section, &r);
        let header = batch_header(&BatchSpec::plain(Compression::None), &[t, t]);
        write_batch(&header, 2, &section)
    };

    // A gzip batch whose records section is not gzip.
    let not_gzip = write_batch(
        &batch_header(&BatchSpec::plain(Compression::Gzip), &[t]),
        1,
        b"this is not a gzip stream",
    );

    let mut good_then_corrupt = BytesMut::from(&good[..]);
    good_then_corrupt.extend_from_slice(&flipped);

    let refusals: Vec<(&str, Bytes, i16)> = vec![
        ("a flipped byte in the records (BATCH-CRC-1)", flipped, CORRUPT_MESSAGE),
        (
            "magic byte 1 (BATCH-MAGIC-1)",
            magic_1.freeze(),
            UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ),
        ("a transactional batch (PRODUCE-TXN-1)", transactional, INVALID_RECORD),
        ("a control batch (PRODUCE-TXN-1)", control, INVALID_RECORD),
        (
            "a record count above the records present (BATCH-DECODE-1)",
            miscounted,
            CORRUPT_MESSAGE,
        ),
        (
            "a gzip batch holding no gzip stream (BATCH-COMPRESSION-1)",
            not_gzip,
            CORRUPT_MESSAGE,
        ),
        (
            "a good batch followed by a corrupt one (PRODUCE-ATOMIC-1)",
            good_then_corrupt.freeze(),
            CORRUPT_MESSAGE,
        ),
    ];
    for (what, records, code) in refusals {
        // PRODUCE-TXN-1 (a deviation): Kafka writes transactional batches, within a transaction.
        if endpoint.profile.is_kafka() && what.contains("PRODUCE-TXN-1") {
            continue;
        }
        let answer = produce(&mut client, &topic, 0, records)
            .await
            .with_context(|| what.to_string())?;
        expect_code(&answer, code, what)?;
        ensure!(
            latest(&mut client, &topic, 0).await? == 0,
            "PRODUCE-ATOMIC-1: {what} was refused but records were written"
        );
    }

    // Null records, empty records, and a batch holding no record (PRODUCE-ATOMIC-1, ERR-MAP-2).
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(None)])]);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, CORRUPT_MESSAGE, "a Produce with null records")?;
    let answer = produce(&mut client, &topic, 0, Bytes::new()).await?;
    expect_code(&answer, CORRUPT_MESSAGE, "a Produce with empty records")?;
    let empty_batch = write_batch(&batch_header(&BatchSpec::plain(Compression::None), &[t]), 0, &[]);
    let answer = produce(&mut client, &topic, 0, empty_batch).await?;
    expect_code(&answer, CORRUPT_MESSAGE, "a batch of zero records")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "an empty Produce wrote records"
    );

    // A transactional id on the request refuses every partition (PRODUCE-TXN-1, a deviation:
    // Kafka checks it against the producer's transaction instead).
    if !endpoint.profile.is_kafka() {
        let request = produce_request(&topic, vec![(0, good.clone())], -1)
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("kig-txn"))));
        let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
        expect_code(&answer, INVALID_RECORD, "a Produce carrying a transactional id")?;
        ensure!(
            latest(&mut client, &topic, 0).await? == 0,
            "a Produce carrying a transactional id wrote records"
        );
    }

    // The connection and the partition are fine: the good batch alone lands at 0.
    let base = produce_ok(&mut client, &topic, 0, good).await?;
    ensure!(
        base == 0,
        "the good batch landed at {base}, expected 0: a refused batch wrote something"
    );
    Ok(Outcome::Passed)
}

pub async fn produce_to_a_named_partition_stays_there(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-partition", 3).await?;
    let t = now_ms()?;
    let base = produce_ok(&mut client, &topic, 2, values_batch(t, &[b"to partition 2"])?).await?;
    ensure!(base == 0, "the first record of partition 2 landed at {base}");
    for (partition, expected_hw) in [(0, 0), (1, 0), (2, 1)] {
        let hw = latest(&mut client, &topic, partition).await?;
        ensure!(
            hw == expected_hw,
            "partition {partition} holds {hw} records, expected {expected_hw}"
        );
    }
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 2, 0).await?)?;
    ensure!(
        fetched.len() == 1,
        "partition 2 fetched {} records, expected 1",
        fetched.len()
    );
    check_record(
        "the record of partition 2",
        &fetched[0].record,
        &expected(None, Some(b"to partition 2"), &[]),
    )?;
    for partition in [3, -1] {
        let answer = produce(&mut client, &topic, partition, values_batch(t, &[b"nowhere"])?).await?;
        expect_code(
            &answer,
            UNKNOWN_TOPIC_OR_PARTITION,
            &format!("Produce to partition {partition} of 3"),
        )?;
    }
    let data = fetch(&mut client, &topic, 3, 0).await?;
    ensure!(
        data.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "Fetch from partition 3 of 3: error {}, expected 3",
        data.error_code
    );
    let answer = list_offset(&mut client, &topic, 3, LATEST).await?;
    ensure!(
        answer.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "ListOffsets of partition 3 of 3: error {}, expected 3",
        answer.error_code
    );
    let missing = endpoint.unique_topic("kig-never-created");
    let answer = produce(&mut client, &missing, 0, values_batch(t, &[b"nowhere"])?).await?;
    expect_code(
        &answer,
        UNKNOWN_TOPIC_OR_PARTITION,
        "Produce to a topic that does not exist",
    )?;
    let data = fetch(&mut client, &missing, 0, 0).await?;
    ensure!(
        data.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "Fetch from a topic that does not exist: error {}, expected 3",
        data.error_code
    );

    // ERR-MAP-2: one refused partition leaves the others of the request alone.
    let mut corrupt = BytesMut::from(&values_batch(t, &[b"corrupt"])?[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let request = produce_request(
        &topic,
        vec![
            (0, corrupt.freeze()),
            (1, values_batch(t, &[b"fine"])?),
            (7, values_batch(t, &[b"nowhere"])?),
        ],
        -1,
    );
    let answers = produce_all(&mut client, PRODUCE_V, &request).await?;
    let codes: Vec<(i32, i16)> = answers.iter().map(|a| (a.index, a.error_code)).collect();
    ensure!(
        codes == vec![(0, CORRUPT_MESSAGE), (1, NONE), (7, UNKNOWN_TOPIC_OR_PARTITION)],
        "a Produce to a corrupt, a good and a missing partition answered {codes:?}"
    );
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "the corrupt partition 0 stored something"
    );
    ensure!(
        latest(&mut client, &topic, 1).await? == 1,
        "the good partition 1 did not store its record"
    );
    Ok(Outcome::Passed)
}

pub async fn acks_zero_gets_no_response_and_order_is_kept(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-acks", 1).await?;
    let t = now_ms()?;
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"fire and forget"])?)], 0);
    client.send_only(ApiKey::Produce, PRODUCE_V, &request).await?;
    // The next frame must be ApiVersions' answer: `request` checks its correlation id.
    api_versions_answers(&mut client, "right after a Produce with acks 0")
        .await
        .context("PRODUCE-ACKS-1: the frame after an acks=0 Produce")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the acks=0 record was not written"
    );
    // A refused acks=0 Produce gets no answer either.
    let missing = endpoint.unique_topic("kig-acks-missing");
    let request = produce_request(&missing, vec![(0, values_batch(t, &[b"nowhere"])?)], 0);
    client.send_only(ApiKey::Produce, PRODUCE_V, &request).await?;
    api_versions_answers(&mut client, "right after a refused Produce with acks 0")
        .await
        .context("PRODUCE-ACKS-1: the frame after a refused acks=0 Produce")?;
    // acks 2 is refused and writes nothing.
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"acks two"])?)], 2);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, INVALID_REQUIRED_ACKS, "a Produce with acks 2")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the acks=2 Produce wrote a record"
    );
    // acks 1 is answered.
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"acks one"])?)], 1);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, NONE, "a Produce with acks 1")?;
    ensure!(
        answer.base_offset == 1,
        "the acks=1 record landed at {}, expected 1",
        answer.base_offset
    );
    Ok(Outcome::Passed)
}

pub async fn pipelined_requests_are_answered_in_order(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-pipeline", 1).await?;
    // A Fetch long-poll at the HW of an empty partition (it finishes last, after its wait),
    // then Metadata and ApiVersions, which could be answered at once: all sent before reading.
    let fetch = fetch_request(&topic, 0, 0, 300, FETCH_ALL);
    let (fetch_id, fetch_frame) = client.encode_request(ApiKey::Fetch, FETCH_V, &fetch)?;
    let meta = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(&topic)))
        ]));
    let (meta_id, meta_frame) = client.encode_request(ApiKey::Metadata, METADATA_V, &meta)?;
    let (versions_id, versions_frame) =
        client.encode_request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())?;
    for frame in [&fetch_frame, &meta_frame, &versions_frame] {
        client.send_frame(frame).await?;
    }
    let mut replies = Vec::new();
    for what in ["first", "second", "third"] {
        replies.push(
            client
                .recv_frame()
                .await?
                .with_context(|| format!("the connection closed before the {what} answer"))?,
        );
    }
    let [first, second, third]: [Bytes; 3] = replies.try_into().expect("three replies");
    let fetched: FetchResponse = Client::decode_response(ApiKey::Fetch, FETCH_V, fetch_id, first)
        .context("PROTO-ORDER-1: the first answer is not the Fetch's")?;
    let data = fetched_partition(fetched, &topic, 0)?;
    ensure!(
        data.error_code == NONE,
        "the long-poll Fetch: error {}",
        data.error_code
    );
    let _: MetadataResponse = Client::decode_response(ApiKey::Metadata, METADATA_V, meta_id, second)
        .context("PROTO-ORDER-1: the second answer is not the Metadata's")?;
    let _: ApiVersionsResponse = Client::decode_response(ApiKey::ApiVersions, API_VERSIONS_V, versions_id, third)
        .context("PROTO-ORDER-1: the third answer is not the ApiVersions'")?;
    Ok(Outcome::Passed)
}

pub async fn fetch_long_poll_returns_when_data_arrives(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut poller = connect(&endpoint).await?;
    let mut producer = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut producer, "kig-long-poll", 1).await?;
    // A Fetch that ran out its wait returns no records and no error.
    let data = fetch_with(&mut poller, &topic, 0, 0, 50, FETCH_ALL).await?;
    ensure!(
        data.error_code == NONE && fetched_records(endpoint.profile, &data)?.is_empty(),
        "a Fetch at the HW of an empty partition returned something"
    );
    // Long-poll: sent first, answered when the Produce on the other connection lands.
    let request = fetch_request(&topic, 0, 0, 30_000, FETCH_ALL);
    let (correlation_id, frame) = poller.encode_request(ApiKey::Fetch, FETCH_V, &request)?;
    poller.send_frame(&frame).await?;
    produce_ok(&mut producer, &topic, 0, values_batch(now_ms()?, &[b"wake up"])?).await?;
    let reply = poller
        .recv_frame()
        .await?
        .context("the connection closed instead of answering the long-poll Fetch")?;
    let response: FetchResponse = Client::decode_response(ApiKey::Fetch, FETCH_V, correlation_id, reply)?;
    let fetched = fetched_records(endpoint.profile, &fetched_partition(response, &topic, 0)?)?;
    ensure!(
        fetched.len() == 1,
        "the long-poll Fetch returned {} records, expected the one produced",
        fetched.len()
    );
    check_record(
        "the long-polled record",
        &fetched[0].record,
        &expected(None, Some(b"wake up"), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn negative_timestamp_is_invalid_timestamp(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "MAP-TS-4 refuses times Iggy cannot store; a Kafka broker's answer depends on its \
         log.message.timestamp.*.max.ms settings",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-timestamps", 1).await?;
    let now = now_ms()?;
    let spec = BatchSpec::plain(Compression::None);
    // MAP-TS-4: -5 is no time; the whole partition's data is refused (a good record first).
    let bad = encode(
        &spec,
        &[
            (now, record(None, Some(b"fine"), &[])),
            (-5, record(None, Some(b"minus five"), &[])),
        ],
    )?;
    let answer = produce(&mut client, &topic, 0, bad).await?;
    expect_code(&answer, INVALID_TIMESTAMP, "a record with timestamp -5")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "PRODUCE-ATOMIC-1: the batch with a -5 timestamp wrote records"
    );

    // MAP-TS-4: a time whose microseconds overflow an i64 is refused too.
    let overflow = encode(&spec, &[(9_223_372_036_854_776, record(None, Some(b"too late"), &[]))])?;
    let answer = produce(&mut client, &topic, 0, overflow).await?;
    expect_code(&answer, INVALID_TIMESTAMP, "a record at 9,223,372,036,854,776 ms")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "the overflowing timestamp wrote a record"
    );

    // MAP-TS-SPLIT-1: "none", now, three hours ago and the epoch in one batch: stored whole.
    let three_hours_ago = now - 3 * HOUR_MS;
    let mixed = encode(
        &spec,
        &[
            (-1, record(None, Some(b"no time"), &[])),
            (now, record(None, Some(b"now"), &[])),
            (three_hours_ago, record(None, Some(b"three hours ago"), &[])),
            (0, record(None, Some(b"epoch"), &[])),
        ],
    )?;
    let base = produce_ok(&mut client, &topic, 0, mixed).await?;
    ensure!(base == 0, "the mixed batch landed at {base}, expected 0");
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 0).await?)?;
    let values: Vec<Vec<u8>> = fetched
        .iter()
        .map(|f| f.record.value.as_ref().map_or(vec![], |v| v.to_vec()))
        .collect();
    ensure!(
        values
            == vec![
                b"no time".to_vec(),
                b"now".to_vec(),
                b"three hours ago".to_vec(),
                b"epoch".to_vec()
            ],
        "MAP-TS-SPLIT-1: the mixed batch came back as {:?}",
        values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
    );
    let offsets: Vec<i64> = fetched.iter().map(|f| f.offset).collect();
    ensure!(offsets == vec![0, 1, 2, 3], "the mixed batch's offsets are {offsets:?}");
    ensure!(
        fetched[0].timestamp > 0,
        "MAP-TS-2: the -1 record came back with timestamp {}, expected the append time",
        fetched[0].timestamp
    );
    ensure!(
        fetched[1].timestamp == now,
        "MAP-TS-1: timestamp {} came back as {}",
        now,
        fetched[1].timestamp
    );
    ensure!(
        fetched[2].timestamp == three_hours_ago,
        "MAP-TS-1: timestamp {three_hours_ago} came back as {}",
        fetched[2].timestamp
    );
    ensure!(
        fetched[3].timestamp == 0,
        "MAP-TS-3: timestamp 0 came back as {}",
        fetched[3].timestamp
    );

    // MAP-TS-4's bound itself: the largest time whose microseconds fit an i64 is accepted.
    let largest = 9_223_372_036_854_775;
    let last = encode(&spec, &[(largest, record(None, Some(b"the last ms"), &[]))])?;
    let base = produce_ok(&mut client, &topic, 0, last).await?;
    ensure!(base == 4, "the record at {largest} ms landed at {base}, expected 4");
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 4).await?)?;
    ensure!(
        fetched.len() == 1 && fetched[0].timestamp == largest,
        "the record at {largest} ms came back as {:?}",
        fetched.iter().map(|f| f.timestamp).collect::<Vec<_>>()
    );
    Ok(Outcome::Passed)
}

pub async fn init_producer_id_and_idempotent_fields_are_ignored(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-idempotent", 1).await?;
    let pid = init_producer_id(
        &mut client,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    )
    .await?;
    ensure!(pid.error_code == NONE, "InitProducerId: error {}", pid.error_code);
    ensure!(
        pid.producer_epoch == 0,
        "InitProducerId: epoch {}, expected 0",
        pid.producer_epoch
    );
    let t = now_ms()?;
    let idempotent = |producer_id: i64, producer_epoch: i16, base_sequence: i32| -> anyhow::Result<Bytes> {
        let spec = BatchSpec {
            producer_id,
            producer_epoch,
            base_sequence,
            ..BatchSpec::plain(Compression::None)
        };
        encode(&spec, &[(t, record(Some(b"k"), Some(b"idempotent"), &[]))])
    };
    let batch = idempotent(pid.producer_id.0, 0, 0)?;
    // The same batch twice (a retry), the second at Produce v3, then a sequence gap and an id
    // the gateway never handed out: all stored, with new offsets each time (DELIVERY-1).
    let sends: Vec<(&str, i16, Bytes)> = vec![
        ("the first send (sequence 0)", PRODUCE_V, batch.clone()),
        ("the same batch again at Produce v3 (a retry)", 3, batch),
        (
            "a sequence gap (sequence 100)",
            PRODUCE_V,
            idempotent(pid.producer_id.0, 0, 100)?,
        ),
        (
            "an unknown producer id and epoch",
            PRODUCE_V,
            idempotent(987_654_321, 5, 0)?,
        ),
    ];
    if endpoint.profile.is_kafka() {
        // DELIVERY-1 and PID-IGNORE-1 (deviations): Kafka recognises the retry and answers it
        // with the first send's offset without writing it again, and refuses the gap. (What
        // it does with an unknown producer id depends on the version; no rule to hold it to.)
        let expected = [(NONE, 0), (NONE, 0), (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)];
        for ((what, version, records), (code, offset)) in sends.into_iter().zip(expected) {
            let answer = produce_at(&mut client, version, &topic, 0, records)
                .await
                .with_context(|| what.to_string())?;
            expect_code(&answer, code, what)?;
            ensure!(
                code != NONE || answer.base_offset == offset,
                "{what} landed at {}, expected {offset}",
                answer.base_offset
            );
        }
        ensure!(
            latest(&mut client, &topic, 0).await? == 1,
            "the partition holds more than the first send: the retry or the gap was written"
        );
        return Ok(Outcome::Passed);
    }
    for (expected_offset, (what, version, records)) in sends.into_iter().enumerate() {
        let answer = produce_at(&mut client, version, &topic, 0, records)
            .await
            .with_context(|| what.to_string())?;
        ensure!(
            answer.error_code != OUT_OF_ORDER_SEQUENCE_NUMBER && answer.error_code != DUPLICATE_SEQUENCE_NUMBER,
            "PID-IGNORE-1: {what} answered {}",
            answer.error_code
        );
        expect_code(&answer, NONE, what)?;
        ensure!(
            answer.base_offset == expected_offset as i64,
            "{what} landed at {}, expected {expected_offset}",
            answer.base_offset
        );
    }
    ensure!(
        latest(&mut client, &topic, 0).await? == 4,
        "the partition does not hold all four sends, duplicate included"
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// DescribeCluster and the config alterations (docs/spec/admin.md).

pub async fn describe_cluster_agrees_with_metadata(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = super::require_apis(&endpoint, &[ApiKey::DescribeCluster]).await? {
        return Ok(skip);
    }
    let max = super::advertised_max(&endpoint, ApiKey::DescribeCluster)
        .await?
        .unwrap_or(0)
        .min(ApiKey::DescribeCluster.valid_versions().max);
    let mut client = connect(&endpoint).await?;
    let metadata: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            METADATA_V,
            &MetadataRequest::default().with_topics(Some(vec![])),
        )
        .await?;
    let mut listed: Vec<(i32, String, i32)> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    listed.sort();
    for version in 0..=max {
        let response: DescribeClusterResponse = client
            .request(ApiKey::DescribeCluster, version, &DescribeClusterRequest::default())
            .await
            .with_context(|| format!("DescribeCluster v{version}"))?;
        ensure!(
            response.error_code == NONE,
            "DescribeCluster v{version}: error {}",
            response.error_code
        );
        ensure!(
            Some(&response.cluster_id) == metadata.cluster_id.as_ref(),
            "DescribeCluster v{version}: cluster id {:?}, Metadata says {:?}",
            response.cluster_id,
            metadata.cluster_id
        );
        ensure!(
            response.controller_id == metadata.controller_id,
            "DescribeCluster v{version}: controller {:?}, Metadata says {:?}",
            response.controller_id,
            metadata.controller_id
        );
        let mut brokers: Vec<(i32, String, i32)> = response
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
            .collect();
        brokers.sort();
        ensure!(
            brokers == listed,
            "DescribeCluster v{version}: brokers {brokers:?}, Metadata lists {listed:?}"
        );
        // DESCRIBECLUSTER-2: not asked, Kafka's "not provided".
        ensure!(
            response.cluster_authorized_operations == i32::MIN,
            "DescribeCluster v{version}: authorized operations {} when not asked, expected {}",
            response.cluster_authorized_operations,
            i32::MIN
        );
    }
    Ok(Outcome::Passed)
}

/// One IncrementalAlterConfigs v1 resource of `topic`: [(key, operation, value)].
fn alter_resource(
    topic: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let s = |text: &str| StrBytes::from_string(text.to_string());
    AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(topic))
        .with_configs(
            configs
                .iter()
                .map(|(key, op, value)| {
                    AlterableConfig::default()
                        .with_name(s(key))
                        .with_config_operation(*op)
                        .with_value(value.map(s))
                })
                .collect(),
        )
}

/// Each resource's code.
async fn alter_configs(
    client: &mut Client,
    resources: Vec<kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource>,
    validate_only: bool,
) -> anyhow::Result<Vec<i16>> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(validate_only);
    let response: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await
        .context("IncrementalAlterConfigs v1")?;
    Ok(response.responses.iter().map(|r| r.error_code).collect())
}

/// The topic's `retention.ms` as DescribeConfigs reports it.
async fn retention_ms(client: &mut Client, topic: &str) -> anyhow::Result<Option<String>> {
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    let response: DescribeConfigsResponse = client
        .request(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_V, &request)
        .await?;
    let result = response.results.first().context("DescribeConfigs: no result")?;
    ensure!(
        result.error_code == NONE,
        "DescribeConfigs {topic}: error {}",
        result.error_code
    );
    Ok(result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .and_then(|c| c.value.as_ref().map(|v| v.to_string())))
}

pub async fn alter_configs_change_retention_and_refuse_the_rest(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) =
        super::require_apis(&endpoint, &[ApiKey::IncrementalAlterConfigs, ApiKey::DescribeConfigs]).await?
    {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("alter-configs");
    let mut client = connect(&endpoint).await?;
    create_topic(&mut client, &topic, 1).await?;
    // ALTERCONFIGS-1: validate_only changes nothing; SET changes what DescribeConfigs reports.
    let set = || alter_resource(&topic, &[("retention.ms", 0, Some("3600000"))]);
    let before = retention_ms(&mut client, &topic).await?;
    ensure!(
        alter_configs(&mut client, vec![set()], true).await? == [NONE],
        "validate_only SET refused"
    );
    ensure!(
        retention_ms(&mut client, &topic).await? == before,
        "validate_only changed retention.ms"
    );
    ensure!(
        alter_configs(&mut client, vec![set()], false).await? == [NONE],
        "SET retention.ms refused"
    );
    let after = retention_ms(&mut client, &topic).await?;
    ensure!(
        after.as_deref() == Some("3600000"),
        "retention.ms after SET 3600000: {after:?}"
    );
    // ALTERCONFIGS-4: retention.ms is not a list.
    let append = alter_resource(&topic, &[("retention.ms", 2, Some("1"))]);
    let codes = alter_configs(&mut client, vec![append], false).await?;
    ensure!(
        codes == [INVALID_CONFIG],
        "APPEND to retention.ms: {codes:?}, expected [INVALID_CONFIG (40)]"
    );
    // TOPIC-CONFIG-1 (a deviation): the gateway honours retention.ms alone.
    let other = alter_resource(&topic, &[("cleanup.policy", 0, Some("delete"))]);
    let codes = alter_configs(&mut client, vec![other], true).await?;
    let expected = match endpoint.profile {
        Profile::Gateway => INVALID_CONFIG,
        Profile::Kafka => NONE,
    };
    ensure!(
        codes == [expected],
        "SET cleanup.policy: {codes:?}, expected [{expected}]"
    );
    // ALTERCONFIGS-3: a topic named twice is refused at both mentions, and nothing changes.
    let twice = vec![
        alter_resource(&topic, &[("retention.ms", 0, Some("7200000"))]),
        alter_resource(&topic, &[("retention.ms", 0, Some("7200000"))]),
    ];
    let codes = alter_configs(&mut client, twice, false).await?;
    ensure!(
        codes == [INVALID_REQUEST, INVALID_REQUEST],
        "a topic named twice: {codes:?}, expected INVALID_REQUEST (42) twice"
    );
    let unchanged = retention_ms(&mut client, &topic).await?;
    ensure!(
        unchanged.as_deref() == Some("3600000"),
        "retention.ms after refused changes: {unchanged:?}"
    );
    // An unknown topic.
    let missing = alter_resource(
        &endpoint.unique_topic("alter-configs-missing"),
        &[("retention.ms", 0, Some("1000"))],
    );
    let codes = alter_configs(&mut client, vec![missing], false).await?;
    ensure!(
        codes == [UNKNOWN_TOPIC_OR_PARTITION],
        "an unknown topic: {codes:?}, expected [UNKNOWN_TOPIC_OR_PARTITION (3)]"
    );
    Ok(Outcome::Passed)
}
