//! What the hostile cases share: connections, hostile frames sent and their answers read, and
//! the ordinary requests (CreateTopics, Produce, ListOffsets, Fetch) that set an attack up.

use super::*;

// ---------------------------------------------------------------------------------------------
// Helpers: hostile requests, their answers, and the ordinary requests around them.

pub(crate) fn string(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(string(name))
}

pub(super) fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

/// `request` bounded by [`LIVENESS`]; `what` names it in the error.
pub(crate) async fn bounded<T>(what: &str, request: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    timeout(LIVENESS, request)
        .await
        .map_err(|_| anyhow!("{what}: not answered within {LIVENESS:?}"))?
        .with_context(|| what.to_string())
}

pub(crate) async fn connect(endpoint: &Endpoint) -> anyhow::Result<Client> {
    Client::connect(&endpoint.bootstrap).await
}

pub(super) async fn socket_address(endpoint: &Endpoint) -> anyhow::Result<SocketAddr> {
    tokio::net::lookup_host(&endpoint.bootstrap)
        .await?
        .next()
        .with_context(|| format!("{} resolves to no address", endpoint.bootstrap))
}

pub(super) async fn api_versions(client: &mut Client) -> anyhow::Result<ApiVersionsResponse> {
    client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await
}

/// A new connection is answered: after an attack that may still hold the endpoint's
/// connection slots for a moment, retried every [`POLL_INTERVAL`] for at most [`LIVENESS`].
pub(crate) async fn new_connection_answers(endpoint: &Endpoint, after: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + LIVENESS;
    loop {
        let attempt = async {
            let mut client = connect(endpoint).await?;
            let answer = api_versions(&mut client).await?;
            ensure!(answer.error_code == NONE, "ApiVersions: error {}", answer.error_code);
            Ok(())
        };
        let failure = match timeout(LIVENESS, attempt).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => anyhow!("not answered within {LIVENESS:?}"),
        };
        if Instant::now() >= deadline {
            return Err(failure.context(format!(
                "no new connection was answered within {LIVENESS:?} after {after}"
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A request frame (without its size prefix) whose header carries `client_id`.
pub(crate) fn request_frame<Req: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &Req,
) -> anyhow::Result<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(string(client_id)));
    let mut frame = BytesMut::new();
    header.encode(&mut frame, key.request_header_version(version))?;
    body.encode(&mut frame, version)
        .with_context(|| format!("encoding the {key:?} v{version} request"))?;
    Ok(frame.freeze())
}

/// What the endpoint did with one hostile request.
pub(crate) enum Answer {
    Frame(Bytes),
    Closed,
}

/// Whether a write failed because the peer had closed the connection.
pub(super) fn closed_by_peer(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(error.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
}

/// Sends `frame` and waits at most `within` for its answer or the connection's close; a
/// connection closed while the frame was still being written counts as closed.
pub(crate) async fn send_hostile(
    client: &mut Client,
    frame: &[u8],
    what: &str,
    within: Duration,
) -> anyhow::Result<Answer> {
    match client.send_frame(frame).await {
        Ok(()) => {}
        Err(e) if closed_by_peer(&e) => return Ok(Answer::Closed),
        Err(e) => return Err(e).with_context(|| format!("{what}: sending it")),
    }
    match timeout(within, client.recv_frame()).await {
        Err(_) => bail!("{what}: neither answered nor closed the connection within {within:?}"),
        Ok(Ok(Some(frame))) => Ok(Answer::Frame(frame)),
        Ok(Ok(None)) => Ok(Answer::Closed),
        Ok(Err(e)) => Err(e).with_context(|| format!("{what}: reading the answer")),
    }
}

/// An answer decoded as `key` at `version`, correlation id and length checked.
pub(crate) fn decoded<Resp: Decodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: Bytes,
    what: &str,
) -> anyhow::Result<Resp> {
    Client::decode_response(key, version, correlation_id, frame)
        .with_context(|| format!("{what}: the answer is not a well-formed {key:?} v{version} response"))
}

/// Creates `topic` with `partitions` partitions; any error fails the case.
pub(super) async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)]);
    let response: CreateTopicsResponse = bounded(
        &format!("CreateTopics {topic}"),
        client.request(ApiKey::CreateTopics, CREATE_TOPICS_V, &request),
    )
    .await?;
    let code = response.topics.first().map(|t| t.error_code);
    ensure!(code == Some(NONE), "creating topic {topic}: error {code:?}");
    Ok(())
}

pub(crate) async fn new_topic(
    endpoint: &Endpoint,
    client: &mut Client,
    prefix: &str,
    partitions: i32,
) -> anyhow::Result<String> {
    let topic = endpoint.unique_topic(prefix);
    create_topic(client, &topic, partitions).await?;
    Ok(topic)
}

/// An uncompressed batch of one null-key record per value.
pub(super) fn values_batch(values: &[&[u8]]) -> anyhow::Result<Bytes> {
    let records = values
        .iter()
        .map(|value| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
            headers: vec![],
        })
        .collect();
    Ok(encode_batch(&RecordBatch::from_producer(
        Compression::None,
        now_ms()?,
        records,
    ))?)
}

pub(super) fn produce_request(topics: Vec<(&str, Vec<(i32, Bytes)>)>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicProduceData::default()
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
                        )
                })
                .collect(),
        )
}

/// Produces `values` to one partition; any error fails the case. Returns the base offset.
pub(super) async fn produce_ok(
    client: &mut Client,
    topic: &str,
    partition: i32,
    values: &[&[u8]],
) -> anyhow::Result<i64> {
    let request = produce_request(vec![(topic, vec![(partition, values_batch(values)?)])]);
    let response: ProduceResponse = bounded(
        &format!("Produce to {topic}-{partition}"),
        client.request(ApiKey::Produce, PRODUCE_V, &request),
    )
    .await?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .with_context(|| format!("Produce to {topic}-{partition} answered no partition"))?;
    ensure!(
        answer.error_code == NONE,
        "Produce to {topic}-{partition}: error {}",
        answer.error_code
    );
    Ok(answer.base_offset)
}

/// The high watermark of one partition, from ListOffsets LATEST.
pub(super) async fn latest(client: &mut Client, topic: &str, partition: i32) -> anyhow::Result<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(LATEST)])]);
    let response: ListOffsetsResponse = bounded(
        &format!("ListOffsets {topic}-{partition}"),
        client.request(ApiKey::ListOffsets, LIST_OFFSETS_V, &request),
    )
    .await?;
    let answer = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .with_context(|| format!("ListOffsets {topic}-{partition} answered no partition"))?;
    ensure!(
        answer.error_code == NONE,
        "ListOffsets {topic}-{partition}: error {}",
        answer.error_code
    );
    Ok(answer.offset)
}

/// A Fetch of `topic`'s `partition` from `offset`, the partition named `mentions` times.
pub(super) fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    mentions: usize,
    max_wait_ms: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(16 * 1024 * 1024)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                (0..mentions)
                    .map(|_| {
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1024 * 1024)
                    })
                    .collect(),
            )])
}

/// The values of every record a Fetch answered for one partition.
pub(super) fn fetched_values(
    response: &FetchResponse,
    topic: &str,
    partition: i32,
) -> anyhow::Result<Vec<Option<Bytes>>> {
    ensure!(response.error_code == NONE, "Fetch: error {}", response.error_code);
    let data = response
        .responses
        .iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
        .with_context(|| format!("Fetch answered nothing for {topic}-{partition}"))?;
    ensure!(
        data.error_code == NONE,
        "Fetch {topic}-{partition}: error {}",
        data.error_code
    );
    let Some(records) = &data.records else {
        return Ok(Vec::new());
    };
    let mut budget = DecompressionBudget::new(kafka_wire_client::MAX_RESPONSE_FRAME);
    let batches = decode_batches(records, &mut budget).context("decoding the fetched batches")?;
    Ok(batches
        .into_iter()
        .flat_map(|b| b.records.into_iter().map(|r| r.value))
        .collect())
}

/// Reads one frame from a read half; `None` on a clean close (or a reset) before its prefix.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> anyhow::Result<Option<Bytes>> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), std::io::ErrorKind::UnexpectedEof) || closed_by_peer(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(size);
    ensure!(
        size >= 0 && size as usize <= kafka_wire_client::MAX_RESPONSE_FRAME,
        "response frame size {size} out of range"
    );
    let mut body = BytesMut::zeroed(size as usize);
    reader.read_exact(&mut body).await?;
    Ok(Some(body.freeze()))
}

/// Deterministic filler bytes (xorshift64 over 26 letters): compressible about as well as
/// text, so a codec has real work to do, unlike with a run of zeros.
pub(super) fn letters(len: usize, seed: u64) -> Vec<u8> {
    // Spread the seeds so that neighbouring ones start far apart (and never at zero).
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'a' + (state % 26) as u8
        })
        .collect()
}
