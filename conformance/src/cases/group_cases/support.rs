//! Clients, raw group requests and waits shared by the cases and by the gateway-specific
//! group cases (`gateway_cases`).

use crate::endpoint::Endpoint;
use anyhow::{anyhow, bail, ensure, Context as _};
use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

pub type Client = WireClient<TcpStream>;

/// How long any one wait (a rebalance, the records of a consume, a delivery) may take
/// before the case fails.
pub const WAIT: Duration = Duration::from_secs(30);
/// Between two polls of a state only a request can observe (a DescribeGroups, a Metadata,
/// a coordinator a real cluster has not elected yet). Never a synchronisation: the wait
/// ends when the state shows up, and fails after [`WAIT`].
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long one `poll()` of a consumer's thread blocks.
const POLL_PERIOD: Duration = Duration::from_millis(100);

// Versions the raw requests speak.
pub const FIND_COORDINATOR_V: i16 = 3;
pub const JOIN_GROUP_V: i16 = 5;
pub const SYNC_GROUP_V: i16 = 3;
pub const HEARTBEAT_V: i16 = 3;
pub const DESCRIBE_GROUPS_V: i16 = 5;
pub const LIST_GROUPS_V: i16 = 4;
pub const DELETE_GROUPS_V: i16 = 2;

// Kafka error codes.
pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const INVALID_REQUEST: i16 = 42;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const MEMBER_ID_REQUIRED: i16 = 79;

/// FindCoordinator key types.
pub const KEY_TYPE_GROUP: i8 = 0;
pub const KEY_TYPE_TRANSACTION: i8 = 1;

// The committed-offset requests are the wire client crate's, which the simulations share.
pub use kafka_wire_client::offsets::{
    commit_one, fetch_one, fetched, offset_commit, offset_fetch, FetchedOffset, COMMIT_LEADER_EPOCH, COMMIT_METADATA,
    OFFSET_COMMIT_V, OFFSET_FETCH_V,
};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

mod consumer;
pub use consumer::*;

// -----------------------------------------------------------------------------------------
// librdkafka clients
// -----------------------------------------------------------------------------------------

pub fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "kafka-iggy-conformance-groups")
        .set_log_level(RDKafkaLogLevel::Notice);
    config
}

/// Runs a blocking librdkafka call on tokio's blocking pool, so that it cannot stall the
/// runtime (which may host the gateway under test).
pub async fn blocking<T, F>(f: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> anyhow::Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.context("blocking task")?
}

/// Drops a client on the blocking pool: destroying a librdkafka handle waits for its
/// threads.
pub async fn close<T: Send + 'static>(client: T) {
    let _ = tokio::task::spawn_blocking(move || drop(client)).await;
}

/// Creates `topic` with `partitions` partitions and waits until Metadata lists all of
/// them.
/// (Through the endpoint's own topic creator when it has no CreateTopics.)
pub async fn create_topic(endpoint: &Endpoint, topic: &str, partitions: i32) -> anyhow::Result<()> {
    if let Some(creator) = endpoint.topic_creator.clone() {
        let name = topic.to_string();
        blocking(move || creator.create(&name, partitions)).await?;
    } else {
        let admin: AdminClient<DefaultClientContext> = base_config(&endpoint.bootstrap)
            .create()
            .context("creating the admin client")?;
        let options = AdminOptions::new()
            .request_timeout(Some(WAIT))
            .operation_timeout(Some(WAIT));
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &options,
            )
            .await
            .with_context(|| format!("CreateTopics {topic}"))?;
        close(admin).await;
        ensure!(results == [Ok(topic.to_string())], "CreateTopics {topic}: {results:?}");
    }
    // Metadata through a consumer without group.id: asking never auto-creates the topic.
    let metadata: Arc<BaseConsumer> = Arc::new(
        base_config(&endpoint.bootstrap)
            .set("allow.auto.create.topics", "false")
            .create()
            .context("creating the metadata client")?,
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let client = metadata.clone();
        let name = topic.to_string();
        let listed = blocking(move || {
            let m = client
                .fetch_metadata(Some(&name), WAIT)
                .with_context(|| format!("Metadata for {name}"))?;
            Ok(m.topics()
                .iter()
                .find(|t| t.name() == name && t.error().is_none())
                .map(|t| t.partitions().len()))
        })
        .await?;
        if listed == Some(partitions as usize) {
            break;
        }
        if Instant::now() >= deadline {
            bail!("Metadata never listed {partitions} partitions of {topic} within {WAIT:?}; last: {listed:?}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    close(metadata).await;
    Ok(())
}

/// Produces `count` records to `partition` of `topic`, one at a time so that their offsets
/// follow each other; returns the offsets the broker assigned.
pub async fn produce(endpoint: &Endpoint, topic: &str, partition: i32, count: usize) -> anyhow::Result<Vec<i64>> {
    let producer: FutureProducer = base_config(&endpoint.bootstrap)
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the producer")?;
    let mut offsets = Vec::with_capacity(count);
    for i in 0..count {
        let value = format!("{topic}-{partition}-{i}");
        let delivery = producer
            .send(
                FutureRecord::<(), _>::to(topic)
                    .partition(partition)
                    .payload(value.as_bytes()),
                WAIT,
            )
            .await
            .map_err(|(e, _)| anyhow!("producing record {i} to {topic}-{partition}: {e}"))?;
        ensure!(
            delivery.partition == partition,
            "record {i} for {topic}-{partition} was delivered to partition {}",
            delivery.partition
        );
        offsets.push(delivery.offset);
    }
    let _ = producer.flush(WAIT);
    close(producer).await;
    Ok(offsets)
}

/// Produces `count` records to `partition` and checks they got offsets `first..first+count`.
pub async fn produce_at(
    endpoint: &Endpoint,
    topic: &str,
    partition: i32,
    first: i64,
    count: usize,
) -> anyhow::Result<()> {
    let offsets = produce(endpoint, topic, partition, count).await?;
    let expected: Vec<i64> = (first..first + count as i64).collect();
    ensure!(
        offsets == expected,
        "records produced to {topic}-{partition} got offsets {offsets:?}, expected {expected:?}"
    );
    Ok(())
}

// -----------------------------------------------------------------------------------------
// Raw group requests
// -----------------------------------------------------------------------------------------

/// FindCoordinator v3 (one key).
pub async fn find_coordinator(client: &mut Client, key: &str, key_type: i8) -> anyhow::Result<FindCoordinatorResponse> {
    let request = FindCoordinatorRequest::default()
        .with_key(s(key))
        .with_key_type(key_type);
    client
        .request(ApiKey::FindCoordinator, FIND_COORDINATOR_V, &request)
        .await
        .with_context(|| format!("FindCoordinator {key} (key type {key_type})"))
}

/// A connection to the coordinator of `group`, as FindCoordinator through `bootstrap`
/// names it (a real cluster may need a moment to elect one).
pub async fn coordinator_of(bootstrap: &str, group: &str) -> anyhow::Result<Client> {
    let mut client = Client::connect(bootstrap).await?;
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = find_coordinator(&mut client, group, KEY_TYPE_GROUP).await?;
        match answer.error_code {
            NONE => {
                let address = format!("{}:{}", answer.host.as_str(), answer.port);
                return Client::connect(&address).await;
            }
            COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS if Instant::now() < deadline => {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
            code => bail!("FindCoordinator for group {group}: error {code}"),
        }
    }
}

/// JoinGroup v5 of a "consumer" member offering one protocol.
pub async fn join_group(
    client: &mut Client,
    group: &str,
    member: &str,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    metadata: &[u8],
) -> anyhow::Result<JoinGroupResponse> {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_timeout_ms)
        .with_rebalance_timeout_ms(rebalance_timeout_ms)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::copy_from_slice(metadata))]);
    client
        .request(ApiKey::JoinGroup, JOIN_GROUP_V, &request)
        .await
        .with_context(|| format!("JoinGroup {group} as {member:?}"))
}

/// SyncGroup v3; `assignments` is empty for a follower.
pub async fn sync_group(
    client: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &[u8])],
) -> anyhow::Result<SyncGroupResponse> {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        );
    client
        .request(ApiKey::SyncGroup, SYNC_GROUP_V, &request)
        .await
        .with_context(|| format!("SyncGroup {group} as {member}"))
}

/// Heartbeat v3; returns its error code.
pub async fn heartbeat(client: &mut Client, group: &str, generation: i32, member: &str) -> anyhow::Result<i16> {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member));
    let response: HeartbeatResponse = client
        .request(ApiKey::Heartbeat, HEARTBEAT_V, &request)
        .await
        .with_context(|| format!("Heartbeat {group} as {member}"))?;
    Ok(response.error_code)
}

/// DescribeGroups v5 of one group.
pub async fn describe_group(client: &mut Client, group: &str) -> anyhow::Result<DescribedGroup> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let response: DescribeGroupsResponse = client
        .request(ApiKey::DescribeGroups, DESCRIBE_GROUPS_V, &request)
        .await
        .with_context(|| format!("DescribeGroups {group}"))?;
    match <[DescribedGroup; 1]>::try_from(response.groups) {
        Ok([g]) if g.group_id.0.as_str() == group => Ok(g),
        Ok([g]) => bail!("DescribeGroups {group} described {:?}", g.group_id),
        Err(groups) => bail!("DescribeGroups {group} answered {} groups", groups.len()),
    }
}

/// Polls DescribeGroups until `done` holds for the group.
pub async fn await_described(
    client: &mut Client,
    group: &str,
    what: &str,
    done: impl Fn(&DescribedGroup) -> bool,
) -> anyhow::Result<DescribedGroup> {
    let deadline = Instant::now() + WAIT;
    loop {
        let described = describe_group(client, group).await?;
        if done(&described) {
            return Ok(described);
        }
        if Instant::now() >= deadline {
            bail!(
                "DescribeGroups {group} never showed {what} within {WAIT:?}; last: state {} members {:?} error {}",
                described.group_state.as_str(),
                member_ids(&described),
                described.error_code
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

pub fn member_ids(group: &DescribedGroup) -> Vec<String> {
    group.members.iter().map(|m| m.member_id.as_str().to_string()).collect()
}

/// ListGroups v4, every state.
pub async fn list_groups(client: &mut Client) -> anyhow::Result<Vec<ListedGroup>> {
    let response: ListGroupsResponse = client
        .request(ApiKey::ListGroups, LIST_GROUPS_V, &ListGroupsRequest::default())
        .await
        .context("ListGroups")?;
    ensure!(response.error_code == NONE, "ListGroups: error {}", response.error_code);
    Ok(response.groups)
}

/// DeleteGroups v2 of one group; returns its error code.
pub async fn delete_group(client: &mut Client, group: &str) -> anyhow::Result<i16> {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
    let response: DeleteGroupsResponse = client
        .request(ApiKey::DeleteGroups, DELETE_GROUPS_V, &request)
        .await
        .with_context(|| format!("DeleteGroups {group}"))?;
    match response.results.as_slice() {
        [r] if r.group_id.0.as_str() == group => Ok(r.error_code),
        other => bail!("DeleteGroups {group} answered {other:?}"),
    }
}
