//! The Kafka requests the world's clients send, over any stream, through the conformance suite's
//! raw client: create a topic, InitProducerId, Metadata's partition leaders, Produce one
//! partition's batch, Fetch several
//! partitions, FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, and
//! the consumer protocol's (KIP-848) ConsumerGroupHeartbeat with OffsetCommit/OffsetFetch v9 as a
//! member. Plain requests at fixed versions, byte for byte what a Kafka client sends.

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, CreateTopicsRequest, CreateTopicsResponse,
    FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, ProduceRequest, ProduceResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use kig_core::batch::{decode_batches, encode_batch, Record, RecordBatch};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use tokio::io::{AsyncRead, AsyncWrite};

/// The most bytes one Fetch asks for per partition.
pub const FETCH_PARTITION_MAX_BYTES: i32 = 1 << 20;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One fetched record: its offset, value and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// A producer's batch: the values, with a header per record naming the attempt that sent it
/// (so every copy in the log says which attempt wrote it), and the idempotent producer's id,
/// epoch and base sequence, or -1s.
pub fn encode_producer_batch(
    values: &[String],
    attempt_header: &str,
    pid: i64,
    epoch: i16,
    base_sequence: i32,
) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: i as i32,
            key: None,
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: vec![kig_core::batch::RecordHeader {
                name: Bytes::from_static(crate::history::ATTEMPT_HEADER.as_bytes()),
                value: Some(Bytes::copy_from_slice(attempt_header.as_bytes())),
            }],
        })
        .collect();
    let mut batch = RecordBatch::from_producer(Compression::None, -1, records);
    batch.header.producer_id = pid;
    batch.header.producer_epoch = epoch;
    batch.header.base_sequence = base_sequence;
    encode_batch(&batch).expect("an uncompressed batch encodes")
}

/// Creates `topic` with `partitions` partitions: the error code.
pub async fn create_topic<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<i16> {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(s(topic)))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let response: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 5, &request).await?;
    Ok(response.topics[0].error_code)
}

/// InitProducerId v4 without a transactional id: (error code, producer id, epoch).
pub async fn init_producer_id<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
) -> anyhow::Result<(i16, i64, i16)> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let response: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 4, &request).await?;
    Ok((response.error_code, response.producer_id.0, response.producer_epoch))
}

/// One partition of a Metadata answer: its error code and the host its leader's broker entry
/// advertises (`None` when the leader is no broker listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeader {
    pub partition: i32,
    pub error_code: i16,
    pub leader_host: Option<String>,
}

/// Metadata v12 of `topic`, not creating it: the topic's error code and each partition's leader.
pub async fn partition_leaders<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
) -> anyhow::Result<(i16, Vec<PartitionLeader>)> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
        ]))
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = client.request(ApiKey::Metadata, 12, &request).await?;
    let Some(answer) = response.topics.first() else {
        anyhow::bail!("a Metadata answer without its topic");
    };
    let host_of = |id: i32| {
        response
            .brokers
            .iter()
            .find(|b| b.node_id.0 == id)
            .map(|b| b.host.to_string())
    };
    let leaders = answer
        .partitions
        .iter()
        .map(|p| PartitionLeader {
            partition: p.partition_index,
            error_code: p.error_code,
            leader_host: host_of(p.leader_id.0),
        })
        .collect();
    Ok((answer.error_code, leaders))
}

/// Produce v9 of one partition's batch with acks=-1, as a frame to send; its correlation id.
pub fn produce_frame<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> anyhow::Result<(i32, Bytes)> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    client.encode_request(ApiKey::Produce, 9, &request)
}

/// Decodes a Produce v9 response frame: (error code, base offset).
pub fn produce_answer(correlation_id: i32, frame: Bytes) -> anyhow::Result<(i16, i64)> {
    let response: ProduceResponse =
        WireClient::<tokio::io::Empty>::decode_response(ApiKey::Produce, 9, correlation_id, frame)?;
    let partition = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| anyhow::anyhow!("a Produce answer without its partition"))?;
    Ok((partition.error_code, partition.base_offset))
}

/// One partition of a Fetch answer.
#[derive(Debug, Clone, Default)]
pub struct FetchedPartition {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub records: Vec<FetchedRecord>,
}

/// Fetch v11 of `positions` (partition, offset) of `topic`.
pub async fn fetch<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    topic: &str,
    positions: &[(i32, i64)],
    max_wait_ms: i32,
) -> anyhow::Result<Vec<FetchedPartition>> {
    let request = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(
                positions
                    .iter()
                    .map(|(p, o)| {
                        FetchPartition::default()
                            .with_partition(*p)
                            .with_fetch_offset(*o)
                            .with_partition_max_bytes(FETCH_PARTITION_MAX_BYTES)
                    })
                    .collect(),
            )]);
    let response: FetchResponse = client.request(ApiKey::Fetch, 11, &request).await?;
    let mut out = Vec::new();
    for topic in &response.responses {
        for p in &topic.partitions {
            let mut fetched = FetchedPartition {
                partition: p.partition_index,
                error_code: p.error_code,
                high_watermark: p.high_watermark,
                records: Vec::new(),
            };
            if let Some(records) = &p.records {
                let mut budget = DecompressionBudget::new(FETCH_PARTITION_MAX_BYTES as usize);
                for batch in decode_batches(records, &mut budget)? {
                    for record in &batch.records {
                        fetched.records.push(FetchedRecord {
                            offset: batch.header.base_offset + i64::from(record.offset_delta),
                            value: record.value.clone(),
                            headers: record
                                .headers
                                .iter()
                                .map(|h| (String::from_utf8_lossy(&h.name).into_owned(), h.value.clone()))
                                .collect(),
                        });
                    }
                }
            }
            out.push(fetched);
        }
    }
    Ok(out)
}

/// FindCoordinator v3 of a group: (error code, node id, host, port).
pub async fn find_coordinator<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
) -> anyhow::Result<(i16, i32, String, i32)> {
    let request = FindCoordinatorRequest::default().with_key(s(group)).with_key_type(0);
    let response: FindCoordinatorResponse = client.request(ApiKey::FindCoordinator, 3, &request).await?;
    Ok((
        response.error_code,
        response.node_id.0,
        response.host.to_string(),
        response.port,
    ))
}

/// JoinGroup v5 of a "consumer" member offering the range protocol with `metadata`.
pub async fn join_group<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    member: &str,
    session_timeout_ms: i32,
    metadata: Bytes,
) -> anyhow::Result<JoinGroupResponse> {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(session_timeout_ms)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(metadata)]);
    client.request(ApiKey::JoinGroup, 5, &request).await
}

/// SyncGroup v3; `assignments` is empty for a follower.
pub async fn sync_group<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    generation: i32,
    member: &str,
    assignments: Vec<(String, Bytes)>,
) -> anyhow::Result<SyncGroupResponse> {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(
            assignments
                .into_iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(&m))
                        .with_assignment(a)
                })
                .collect(),
        );
    client.request(ApiKey::SyncGroup, 3, &request).await
}

/// Heartbeat v3: the error code.
pub async fn heartbeat<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    generation: i32,
    member: &str,
) -> anyhow::Result<i16> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member));
    let response: HeartbeatResponse = client.request(ApiKey::Heartbeat, 3, &request).await?;
    Ok(response.error_code)
}

/// OffsetCommit v8 of `offsets` (partition, offset) as `member` of `generation`: each
/// partition's error code.
pub async fn offset_commit<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> anyhow::Result<Vec<(i32, i16)>> {
    offset_commit_at(client, 8, group, generation, member, topic, offsets).await
}

/// OffsetCommit at `version` of `offsets` (partition, offset) as `member`, whose generation (v8)
/// or member epoch (v9) is `generation_or_epoch`: each partition's error code.
async fn offset_commit_at<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    version: i16,
    group: &str,
    generation_or_epoch: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> anyhow::Result<Vec<(i32, i16)>> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation_or_epoch)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(
                offsets
                    .iter()
                    .map(|(p, o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*o)
                    })
                    .collect(),
            )]);
    let response: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, version, &request).await?;
    Ok(response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)))
        .collect())
}

/// OffsetFetch v5 of `partitions`, the wire client's request: (group error, [(partition,
/// committed offset, error)]).
pub async fn offset_fetch<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<(i16, Vec<(i32, i64, i16)>)> {
    let response = kafka_wire_client::offsets::offset_fetch(client, group, Some(&[(topic, partitions)])).await?;
    Ok((
        response.error_code,
        response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.committed_offset, p.error_code))
            })
            .collect(),
    ))
}

/// One ConsumerGroupHeartbeat (v1) as a consumer-protocol member sends it. `None` fields are
/// "unchanged since the last heartbeat" (a rebalance timeout of -1, null topics and owned
/// partitions), as Kafka's client leaves them out when nothing changed.
#[derive(Debug, Clone)]
pub struct MemberHeartbeat<'a> {
    pub group: &'a str,
    pub member_id: &'a str,
    pub member_epoch: i32,
    pub rebalance_timeout_ms: Option<i32>,
    pub subscribed_topics: Option<&'a [String]>,
    /// Owned partitions of one topic, by its id.
    pub owned: Option<(uuid::Uuid, &'a [i32])>,
}

/// ConsumerGroupHeartbeat v1.
pub async fn consumer_group_heartbeat<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    beat: &MemberHeartbeat<'_>,
) -> anyhow::Result<ConsumerGroupHeartbeatResponse> {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(beat.group)))
        .with_member_id(s(beat.member_id))
        .with_member_epoch(beat.member_epoch)
        .with_rebalance_timeout_ms(beat.rebalance_timeout_ms.unwrap_or(-1))
        .with_subscribed_topic_names(
            beat.subscribed_topics
                .map(|topics| topics.iter().map(|t| TopicName(s(t))).collect()),
        )
        .with_topic_partitions(beat.owned.map(|(id, partitions)| {
            if partitions.is_empty() {
                Vec::new()
            } else {
                vec![OwnedTopic::default()
                    .with_topic_id(id)
                    .with_partitions(partitions.to_vec())]
            }
        }));
    client.request(ApiKey::ConsumerGroupHeartbeat, 1, &request).await
}

/// OffsetCommit v9 of `offsets` (partition, offset) as consumer-protocol `member` at
/// `member_epoch`: each partition's error code.
pub async fn offset_commit_as_member<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    member_epoch: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> anyhow::Result<Vec<(i32, i16)>> {
    offset_commit_at(client, 9, group, member_epoch, member, topic, offsets).await
}

/// OffsetFetch v9 of `partitions` as consumer-protocol `member` at `member_epoch`: (the group's
/// error, [(partition, committed offset, error)]).
pub async fn offset_fetch_as_member<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    member_epoch: i32,
    member: &str,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<(i16, Vec<(i32, i64, i16)>)> {
    let request = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(Some(s(member)))
        .with_member_epoch(member_epoch)
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(partitions.to_vec())]))]);
    let response: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 9, &request).await?;
    let Some(answer) = response.groups.first() else {
        anyhow::bail!("an OffsetFetch v9 answer without its group");
    };
    Ok((
        answer.error_code,
        answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.committed_offset, p.error_code))
            })
            .collect(),
    ))
}
