//! The requests simulated clients send, through the conformance suite's raw client: create a
//! one-partition topic, produce a batch to partition 0 with acks=-1, fetch partition 0. Plain
//! Kafka requests at fixed versions, so a simulation speaks to the gateway exactly as a
//! conformance case would over a real socket.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use kig_core::batch::{decode_batches, encode_batch, Record, RecordBatch};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use tokio::io::{AsyncRead, AsyncWrite};

/// The most bytes one Fetch asks for on its partition.
pub const FETCH_PARTITION_MAX_BYTES: i32 = 1 << 20;

/// One fetched record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// An uncompressed batch of `(key, value)` records. A `base_timestamp` of -1 gives every record
/// "no timestamp", which the gateway reads back as its append time (MAP-TS-2); otherwise
/// record `i` is stamped `base_timestamp + 10 i` ms.
pub fn batch<K: AsRef<[u8]>, V: AsRef<[u8]>>(base_timestamp: i64, records: &[(Option<K>, V)]) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            attributes: 0,
            timestamp_delta: if base_timestamp == -1 { 0 } else { i as i64 * 10 },
            offset_delta: i as i32,
            key: key.as_ref().map(|k| Bytes::copy_from_slice(k.as_ref())),
            value: Some(Bytes::copy_from_slice(value.as_ref())),
            headers: vec![],
        })
        .collect();
    encode_batch(&RecordBatch::from_producer(Compression::None, base_timestamp, records))
        .expect("an uncompressed batch encodes")
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// Creates `topic` with one partition: the error code.
pub async fn create_topic<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
) -> anyhow::Result<i16> {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 5, &request).await?;
    Ok(response.topics[0].error_code)
}

/// Produces `records` to partition 0 of `topic` with acks=-1: the error code and base offset.
pub async fn produce<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
    records: Bytes,
) -> anyhow::Result<(i16, i64)> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    let partition = &response.responses[0].partition_responses[0];
    Ok((partition.error_code, partition.base_offset))
}

/// Fetches partition 0 of `topic` from `offset`, waiting up to `max_wait_ms` for a first
/// byte: the records and the high watermark. A partition error is an error.
pub async fn fetch<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
) -> anyhow::Result<(Vec<Fetched>, i64)> {
    let request = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(FETCH_PARTITION_MAX_BYTES)])]);
    let response: FetchResponse = client.request(ApiKey::Fetch, 11, &request).await?;
    let partition = &response.responses[0].partitions[0];
    anyhow::ensure!(
        partition.error_code == 0,
        "Fetch answered error {}",
        partition.error_code
    );
    let mut fetched = Vec::new();
    if let Some(records) = &partition.records {
        let mut budget = DecompressionBudget::new(FETCH_PARTITION_MAX_BYTES as usize);
        for batch in decode_batches(records, &mut budget)? {
            for record in &batch.records {
                fetched.push(Fetched {
                    offset: batch.header.base_offset + i64::from(record.offset_delta),
                    timestamp_ms: batch.record_timestamp_ms(record),
                    key: record.key.clone(),
                    value: record.value.clone(),
                });
            }
        }
    }
    Ok((fetched, partition.high_watermark))
}
