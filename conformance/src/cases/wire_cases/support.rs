//! What the wire cases share: connections, raw requests, record batches, and one helper per
//! request (Produce, Fetch, ListOffsets, Metadata, CreateTopics, DeleteTopics, InitProducerId).

use super::*;

// ---------------------------------------------------------------------------------------------
// Helpers: connections, requests, batches.

pub(super) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(super) fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

pub(super) async fn connect(endpoint: &Endpoint) -> anyhow::Result<Client> {
    WireClient::connect(&endpoint.bootstrap).await
}

/// ApiVersions answered without error on `client`.
pub(super) async fn api_versions_answers(client: &mut Client, what: &str) -> anyhow::Result<()> {
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
pub(super) async fn fresh_connection_answers(endpoint: &Endpoint, after: &str) -> anyhow::Result<()> {
    let mut client = connect(endpoint)
        .await
        .with_context(|| format!("connecting again after {after}: did the server die?"))?;
    api_versions_answers(&mut client, &format!("on a new connection after {after}")).await
}

/// Waits for the server to close `client`'s connection, failing if it answers instead or keeps
/// the connection open past [`CLOSE_GUARD`].
pub(super) async fn expect_closed(client: &mut Client, what: &str) -> anyhow::Result<()> {
    match tokio::time::timeout(CLOSE_GUARD, client.recv_frame()).await {
        Err(_) => bail!("{what}: the connection was still open after {CLOSE_GUARD:?}"),
        Ok(Ok(None)) => Ok(()),
        Ok(Ok(Some(frame))) => bail!("{what}: the server answered ({} bytes) instead of closing", frame.len()),
        Ok(Err(e)) => Err(e).with_context(|| format!("{what}: reading while waiting for the close")),
    }
}

/// A request frame built by hand: key, version, correlation id, client id, the tagged-field
/// section of header v2 when `flexible_header`, then `body`.
pub(super) fn raw_request(key: i16, version: i16, correlation_id: i32, flexible_header: bool, body: &[u8]) -> Bytes {
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

pub(super) fn creatable(topic: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

pub(super) async fn create_topics(
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
pub(super) async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> anyhow::Result<()> {
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
pub(super) async fn new_topic(
    endpoint: &Endpoint,
    client: &mut Client,
    prefix: &str,
    partitions: i32,
) -> anyhow::Result<String> {
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
pub(super) fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Record {
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
pub(super) struct BatchSpec {
    pub(super) attributes: BatchAttributes,
    pub(super) producer_id: i64,
    pub(super) producer_epoch: i16,
    pub(super) base_sequence: i32,
}

impl BatchSpec {
    pub(super) fn plain(codec: Compression) -> Self {
        Self {
            attributes: BatchAttributes::plain(codec),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

pub(super) fn batch_header(spec: &BatchSpec, timestamps: &[i64]) -> BatchHeader {
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
pub(super) fn encode(spec: &BatchSpec, records: &[(i64, Record)]) -> anyhow::Result<Bytes> {
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
pub(super) fn values_batch(timestamp: i64, values: &[&[u8]]) -> anyhow::Result<Bytes> {
    let records: Vec<(i64, Record)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (timestamp + i as i64, record(None, Some(v), &[])))
        .collect();
    encode(&BatchSpec::plain(Compression::None), &records)
}

pub(super) fn produce_request(topic: &str, partitions: Vec<(i32, Bytes)>, acks: i16) -> ProduceRequest {
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
pub(super) async fn produce_all(
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
pub(super) async fn produce_at(
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

pub(super) async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> anyhow::Result<PartitionProduceResponse> {
    produce_at(client, PRODUCE_V, topic, partition, records).await
}

/// Produces and requires success; returns the base offset.
pub(super) async fn produce_ok(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> anyhow::Result<i64> {
    let answer = produce(client, topic, partition, records).await?;
    ensure!(
        answer.error_code == NONE,
        "Produce to {topic}-{partition}: error {} ({:?})",
        answer.error_code,
        answer.error_message.as_ref().map(|m| m.as_str())
    );
    Ok(answer.base_offset)
}

pub(super) fn expect_code(answer: &PartitionProduceResponse, code: i16, what: &str) -> anyhow::Result<()> {
    ensure!(
        answer.error_code == code,
        "{what}: Produce answered error {} ({:?}), expected {code}",
        answer.error_code,
        answer.error_message.as_ref().map(|m| m.as_str())
    );
    Ok(())
}

pub(super) fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
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
pub(super) fn fetched_partition(response: FetchResponse, topic: &str, partition: i32) -> anyhow::Result<PartitionData> {
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

pub(super) async fn fetch_with(
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
pub(super) async fn fetch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
) -> anyhow::Result<PartitionData> {
    fetch_with(client, topic, partition, offset, 0, FETCH_ALL).await
}

/// A fetched record with its absolute offset and timestamp.
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) offset: i64,
    pub(super) timestamp: i64,
    pub(super) record: Record,
}

/// Decodes a Fetch partition's records and checks each batch is framed as FETCH-BATCH-1 says:
/// uncompressed CreateTime, leader epoch, producer id, epoch and base sequence -1 (the gateway
/// profile only: Kafka serves the producer's batches, a deviation), base timestamp from the
/// first record, max timestamp the largest, last offset delta the last record's (the CRC is
/// verified by the decoder).
pub(super) fn fetched_records(profile: Profile, data: &PartitionData) -> anyhow::Result<Vec<Fetched>> {
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
pub(super) fn check_rebuilt_batch(h: &BatchHeader) -> anyhow::Result<()> {
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

pub(super) async fn list_offset(
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
pub(super) async fn offset_for(
    client: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> anyhow::Result<(i64, i64)> {
    let answer = list_offset(client, topic, partition, timestamp).await?;
    ensure!(
        answer.error_code == NONE,
        "ListOffsets {topic}-{partition} at {timestamp}: error {}",
        answer.error_code
    );
    Ok((answer.offset, answer.timestamp))
}

/// The high watermark, from ListOffsets LATEST.
pub(super) async fn latest(client: &mut Client, topic: &str, partition: i32) -> anyhow::Result<i64> {
    Ok(offset_for(client, topic, partition, LATEST).await?.0)
}

pub(super) async fn metadata(client: &mut Client, topics: Option<&[&str]>) -> anyhow::Result<MetadataResponse> {
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
pub(super) async fn metadata_code(client: &mut Client, topic: &str) -> anyhow::Result<i16> {
    let response = metadata(client, Some(&[topic])).await?;
    ensure!(
        response.topics.len() == 1,
        "Metadata answered {} topics for one",
        response.topics.len()
    );
    Ok(response.topics[0].error_code)
}

pub(super) fn listed(response: &MetadataResponse, topic: &str) -> bool {
    response
        .topics
        .iter()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
}

/// A Metadata topic naming no name and a (random-looking, never assigned) topic id.
pub(super) fn topic_by_id() -> anyhow::Result<MetadataRequestTopic> {
    let mut raw = BytesMut::new();
    raw.put_slice(b"kig-conformance!"); // 16 bytes: the id
    raw.put_u8(0); // null compact name
    raw.put_u8(0); // no tagged fields
    MetadataRequestTopic::decode(&mut raw.freeze(), 12)
}

pub(super) async fn delete_topic(client: &mut Client, topic: &str) -> anyhow::Result<i16> {
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

pub(super) async fn init_producer_id(
    client: &mut Client,
    request: &InitProducerIdRequest,
) -> anyhow::Result<InitProducerIdResponse> {
    client
        .request(ApiKey::InitProducerId, INIT_PRODUCER_ID_V, request)
        .await
}

pub(super) fn codecs() -> [Compression; 4] {
    [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
}
