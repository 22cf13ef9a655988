//! Hostile clients (issue 8): requests and connection patterns no cooperative Kafka client
//! sends, which any Kafka endpoint must survive (docs/spec/limits.md, "Limits against hostile
//! clients"). This file owns those cases and the [`Watchdog`] they run under.
//!
//! Each case runs one attack under a [`Watchdog`]: a well-behaved client on connections of its
//! own, opened before the attack, that sends ApiVersions and Metadata every [`WATCH_PERIOD`]
//! and, where the attack aims at the group coordinator, heartbeats as the one member of a group
//! of its own. A case passes when the endpoint answers each hostile request with a well-formed
//! response (checked where the Kafka protocol implies the answer) or closes that one
//! connection, and the watchdog is answered within [`LIVENESS`] on every request, throughout
//! the attack and once after it. LIVENESS is a liveness bound, not a performance assertion.
//!
//! The cases know nothing of the implementation and run against a Kafka broker too: a size the
//! [`Endpoint`] does not tell is taken as Kafka's default `message.max.bytes`, and every group
//! request goes to the coordinator FindCoordinator names. Every wait for the endpoint is a read
//! bounded by a timeout; the only pauses are the attacks' own pacing (a trickle, a stall of
//! unread answers, idle connections held open), never a synchronisation. Each case is bounded
//! in time (under 20 s on the in-process gateway, most well under; the long-poll Fetch waits
//! out the endpoint's own cap, at most [`LONG_POLL_GUARD`]) and in the client's memory (tens
//! of MB).

use super::group_cases::support::{
    coordinator_of, heartbeat, join_group, sync_group, MEMBER_ID_REQUIRED, POLL_INTERVAL, WAIT,
};
use super::{Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use anyhow::{anyhow, bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    DeleteGroupsRequest, DeleteGroupsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, ProduceRequest, ProduceResponse, RequestHeader,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_wire_client::WireClient;
use kig_core::batch::{
    decode_batches, encode_batch, encode_record, write_batch, BatchAttributes, BatchHeader, Record, RecordBatch,
};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::{compress, Compression};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant, MissedTickBehavior};

type Client = WireClient<TcpStream>;

/// How long a well-behaved request may go unanswered during or after an attack before the
/// case fails: a liveness bound, generous on purpose.
pub const LIVENESS: Duration = Duration::from_secs(10);
/// How often the watchdog sends its requests while an attack runs.
pub const WATCH_PERIOD: Duration = Duration::from_millis(50);
/// The longest a case waits for a Fetch that asked to wait i32::MAX ms: past any endpoint's
/// sensible cap (the gateway's default is 30 s), short of hanging the suite.
pub const LONG_POLL_GUARD: Duration = Duration::from_secs(35);
/// What a case assumes of an endpoint that does not tell its max_frame_size: Kafka's default
/// `message.max.bytes`, so that a request sized by it is an ordinary one for a broker.
pub(crate) const ASSUMED_MAX_FRAME_SIZE: usize = 1024 * 1024;
/// The longest Kafka string with an INT16 length: every non-flexible string field's ceiling.
const KAFKA_STRING_MAX: usize = i16::MAX as usize;

/// The settings the in-process suite (tests/hostile_suite.rs) and the bench (benches/hostile.rs)
/// run the gateway with, so that the connection limit is met by
/// [`hostile_many_idle_connections`] and the long-poll cap ends
/// [`hostile_fetch_naming_one_partition_5000_times_waiting_i32_max`] in about a second. The
/// cases themselves never read them.
pub const SUITE_MAX_CONNECTIONS: usize = 1_000;
pub const SUITE_FETCH_MAX_WAIT_MS: u64 = 1_000;

// Versions the cases speak where the attack does not choose one.
const API_VERSIONS_V: i16 = 3;
const METADATA_V: i16 = 9;
const CREATE_TOPICS_V: i16 = 5;
const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 11;
const LIST_OFFSETS_V: i16 = 7;
const LEAVE_GROUP_V: i16 = 3;

// Kafka error codes.
const NONE: i16 = 0;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_CONFIG: i16 = 40;

/// ListOffsets' special timestamp for the high watermark.
const LATEST: i64 = -1;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            hostile_join_group_with_200000_protocols,
            ["LIMIT-ENTRIES-1", "LIMIT-JOIN-PROTOCOLS-1", "LIMIT-BLOCKING-1"]
        ),
        case!(hostile_join_group_with_a_32760_byte_client_id, ["LIMIT-BUILT-STRING-1"]),
        case!(
            hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one,
            ["LIMIT-BUILT-STRING-1", "PROTO-ENCODE-1"]
        ),
        case!(
            hostile_create_topic_with_retention_ms_whose_microseconds_overflow,
            ["LIMIT-CONFIG-VALUE-1"]
        ),
        case!(hostile_many_idle_connections, ["LIMIT-CONNECTIONS-1", "LIMIT-ACCEPT-1"]),
        case!(
            hostile_slow_senders_trickle_frames,
            ["PROTO-TIMEOUT-1", "LIMIT-INFLIGHT-1"]
        ),
        case!(
            hostile_connections_that_send_only_a_max_frame_length_prefix,
            ["LIMIT-INFLIGHT-1", "PROTO-TIMEOUT-1"]
        ),
        case!(
            hostile_pipelined_requests_whose_answers_are_not_read,
            ["PROTO-TIMEOUT-1", "PROTO-ORDER-1"]
        ),
        case!(
            hostile_fetch_naming_one_partition_5000_times_waiting_i32_max,
            ["LIMIT-FETCH-DUPLICATES-1", "LIMIT-FETCH-WAIT-1", "LIMIT-ENTRIES-1"]
        ),
        case!(
            hostile_trailing_bytes_after_the_request_body,
            ["LIMIT-TRAILING-BYTES-1"]
        ),
        case!(
            hostile_32767_byte_strings_in_every_echoed_field,
            ["LIMIT-BUILT-STRING-1", "PROTO-ENCODE-1"]
        ),
        case!(
            hostile_zstd_batch_declaring_a_million_empty_records,
            ["LIMIT-RECORDS-1", "LIMIT-BLOCKING-1"]
        ),
        case!(
            hostile_near_max_frame_zstd_produces_on_two_connections,
            ["LIMIT-BLOCKING-1"]
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The watchdog: a well-behaved client that must be answered while an attack runs.

/// Which requests the watchdog sends each period. ApiVersions always: it needs nothing but a
/// live request loop.
#[derive(Debug, Clone, Copy)]
pub struct Probes {
    /// A Metadata naming no topic: the request every client sends first and refreshes.
    pub metadata: bool,
    /// Heartbeats as the one member of a group of the watchdog's own, on a connection to its
    /// coordinator: what an attack on the group coordinator would starve.
    pub group_member: bool,
}

impl Probes {
    /// ApiVersions only: what the bench times.
    pub const API_VERSIONS: Probes = Probes {
        metadata: false,
        group_member: false,
    };
    /// ApiVersions and Metadata.
    pub const SERVING: Probes = Probes {
        metadata: true,
        group_member: false,
    };
    /// ApiVersions, Metadata and a group member's Heartbeat.
    pub const SERVING_AND_MEMBER: Probes = Probes {
        metadata: true,
        group_member: true,
    };
}

/// One of the watchdog's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    ApiVersions,
    Metadata,
    Heartbeat,
}

/// One answered watchdog request: when it was sent and how long its answer took.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub probe: Probe,
    pub sent: Instant,
    pub latency: Duration,
}

/// A well-behaved client on connections of its own, sending its [`Probes`] every
/// [`WATCH_PERIOD`] until stopped, and failing on the first request not answered within
/// [`LIVENESS`] (or answered with an error), naming it.
pub struct Watchdog {
    stop: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<Vec<Sample>>>,
}

impl Watchdog {
    /// Connects, checks the endpoint answers every probe before any attack, and starts watching.
    pub async fn start(endpoint: &Endpoint, probes: Probes) -> anyhow::Result<Self> {
        let mut prober = Prober::connect(endpoint, probes)
            .await
            .context("the watchdog could not connect before the attack")?;
        prober.round("before the attack").await?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(prober.watch(stopped));
        Ok(Self { stop, task })
    }

    /// Runs `attack` under the watchdog. Fails with the watchdog's error as soon as a watchdog
    /// request goes unanswered (the attack is then dropped, closing its connections);
    /// otherwise, once the attack ends, the watchdog makes one more round and stops.
    pub async fn guard<T>(mut self, attack: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
        let mut attack = std::pin::pin!(attack);
        let attacked = tokio::select! {
            attacked = &mut attack => attacked,
            // The watch loop ends before it is told to only on a failure.
            watched = &mut self.task => {
                let error = match watched {
                    Ok(Err(e)) => e,
                    Ok(Ok(_)) => anyhow!("the watchdog stopped on its own"),
                    Err(e) => anyhow!("the watchdog task failed: {e}"),
                };
                return Err(error.context("a well-behaved client was not served during the attack"));
            }
        };
        let watched = self.stop().await;
        match (attacked, watched) {
            (Ok(value), Ok(_)) => Ok(value),
            (Err(attack), Ok(_)) => Err(attack),
            (Ok(_), Err(watch)) => Err(watch.context("a well-behaved client was not served after the attack")),
            (Err(attack), Err(watch)) => Err(attack.context(format!(
                "and a well-behaved client was not served after the attack: {watch:#}"
            ))),
        }
    }

    /// Stops watching after one more round; every answered request's sample.
    pub async fn stop(self) -> anyhow::Result<Vec<Sample>> {
        self.stop.send_replace(true);
        self.task.await.context("the watchdog task")?
    }
}

/// The watchdog's connections and what it has seen.
struct Prober {
    client: Client,
    metadata: bool,
    member: Option<Member>,
    started: Instant,
    rounds: u64,
    samples: Vec<Sample>,
}

impl Prober {
    async fn connect(endpoint: &Endpoint, probes: Probes) -> anyhow::Result<Self> {
        let client = Client::connect(&endpoint.bootstrap).await?;
        let member = if probes.group_member {
            Some(Member::join(endpoint).await?)
        } else {
            None
        };
        Ok(Self {
            client,
            metadata: probes.metadata,
            member,
            started: Instant::now(),
            rounds: 0,
            samples: Vec::new(),
        })
    }

    /// Sends every probe once, each bounded by [`LIVENESS`].
    async fn round(&mut self, phase: &str) -> anyhow::Result<()> {
        self.rounds += 1;
        let (round, started) = (self.rounds, self.started);
        let name = |probe: Probe, sent: Instant| {
            format!(
                "watchdog {probe:?} #{round} {phase}, sent {:.2} s after the watchdog started",
                (sent - started).as_secs_f64()
            )
        };
        let client = &mut self.client;
        let sent = Instant::now();
        let answer = bounded(&name(Probe::ApiVersions, sent), api_versions(client)).await?;
        ensure!(
            answer.error_code == NONE,
            "{}: error {}",
            name(Probe::ApiVersions, sent),
            answer.error_code
        );
        self.samples.push(Sample {
            probe: Probe::ApiVersions,
            sent,
            latency: sent.elapsed(),
        });
        if self.metadata {
            let sent = Instant::now();
            let request = MetadataRequest::default().with_allow_auto_topic_creation(false);
            let _: MetadataResponse = bounded(
                &name(Probe::Metadata, sent),
                client.request(ApiKey::Metadata, METADATA_V, &request),
            )
            .await?;
            self.samples.push(Sample {
                probe: Probe::Metadata,
                sent,
                latency: sent.elapsed(),
            });
        }
        if let Some(member) = &mut self.member {
            let sent = Instant::now();
            let what = name(Probe::Heartbeat, sent);
            let code = bounded(&what, member.heartbeat()).await?;
            ensure!(
                code == NONE,
                "{what}: error {code}; the member of {} lost its place in the group",
                member.group
            );
            self.samples.push(Sample {
                probe: Probe::Heartbeat,
                sent,
                latency: sent.elapsed(),
            });
        }
        Ok(())
    }

    /// Sends a round every [`WATCH_PERIOD`] until `stop`, then one more, then leaves the group.
    async fn watch(mut self, mut stop: watch::Receiver<bool>) -> anyhow::Result<Vec<Sample>> {
        let mut period = tokio::time::interval(WATCH_PERIOD);
        // A round slower than the period delays the next one rather than bunching them.
        period.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                _ = period.tick() => {}
            }
            self.round("during the attack").await?;
        }
        self.round("after the attack").await?;
        if let Some(member) = &mut self.member {
            bounded("the watchdog member's LeaveGroup after the attack", member.leave()).await?;
        }
        Ok(self.samples)
    }
}

/// The watchdog's group member: joined and synced before the attack, heartbeating during it.
struct Member {
    client: Client,
    group: String,
    id: String,
    generation: i32,
}

/// Kafka's default group.min.session.timeout.ms is 6 s; 10 s is above it and far above
/// [`WATCH_PERIOD`], so the member never lapses while it is answered.
pub(crate) const MEMBER_SESSION_TIMEOUT_MS: i32 = 10_000;

impl Member {
    async fn join(endpoint: &Endpoint) -> anyhow::Result<Self> {
        let group = endpoint.unique_topic("kig-hostile-watchdog");
        let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
        // KIP-394: the first JoinGroup may only hand out the member id to join with.
        let session = MEMBER_SESSION_TIMEOUT_MS;
        let first = timeout(WAIT, join_group(&mut client, &group, "", session, session, b"watchdog"))
            .await
            .context("the watchdog member's first JoinGroup")??;
        let joined = match first.error_code {
            NONE => first,
            MEMBER_ID_REQUIRED => {
                let id = first.member_id.as_str().to_string();
                timeout(
                    WAIT,
                    join_group(&mut client, &group, &id, session, session, b"watchdog"),
                )
                .await
                .context("the watchdog member's JoinGroup with its member id")??
            }
            code => bail!("the watchdog member's JoinGroup of {group}: error {code}"),
        };
        ensure!(
            joined.error_code == NONE,
            "the watchdog member's JoinGroup of {group}: error {}",
            joined.error_code
        );
        let id = joined.member_id.as_str().to_string();
        let synced = timeout(
            WAIT,
            sync_group(&mut client, &group, joined.generation_id, &id, &[(&id, b"")]),
        )
        .await
        .context("the watchdog member's SyncGroup")??;
        ensure!(
            synced.error_code == NONE,
            "the watchdog member's SyncGroup of {group}: error {}",
            synced.error_code
        );
        Ok(Self {
            client,
            group,
            id,
            generation: joined.generation_id,
        })
    }

    async fn heartbeat(&mut self) -> anyhow::Result<i16> {
        heartbeat(&mut self.client, &self.group, self.generation, &self.id).await
    }

    async fn leave(&mut self) -> anyhow::Result<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(string(&self.group)))
            .with_members(vec![MemberIdentity::default().with_member_id(string(&self.id))]);
        let left: LeaveGroupResponse = self.client.request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &request).await?;
        ensure!(
            left.error_code == NONE,
            "LeaveGroup of {}: error {}",
            self.group,
            left.error_code
        );
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers: hostile requests, their answers, and the ordinary requests around them.

pub(crate) fn string(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(string(name))
}

fn now_ms() -> anyhow::Result<i64> {
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

async fn socket_address(endpoint: &Endpoint) -> anyhow::Result<SocketAddr> {
    tokio::net::lookup_host(&endpoint.bootstrap)
        .await?
        .next()
        .with_context(|| format!("{} resolves to no address", endpoint.bootstrap))
}

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kig-conformance"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

async fn api_versions(client: &mut Client) -> anyhow::Result<ApiVersionsResponse> {
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
fn closed_by_peer(error: &std::io::Error) -> bool {
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
async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> anyhow::Result<()> {
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
fn values_batch(values: &[&[u8]]) -> anyhow::Result<Bytes> {
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

fn produce_request(topics: Vec<(&str, Vec<(i32, Bytes)>)>) -> ProduceRequest {
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
async fn produce_ok(client: &mut Client, topic: &str, partition: i32, values: &[&[u8]]) -> anyhow::Result<i64> {
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
async fn latest(client: &mut Client, topic: &str, partition: i32) -> anyhow::Result<i64> {
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
fn fetch_request(topic: &str, partition: i32, offset: i64, mentions: usize, max_wait_ms: i32) -> FetchRequest {
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
fn fetched_values(response: &FetchResponse, topic: &str, partition: i32) -> anyhow::Result<Vec<Option<Bytes>>> {
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
async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> anyhow::Result<Option<Bytes>> {
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
fn letters(len: usize, seed: u64) -> Vec<u8> {
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

// ---------------------------------------------------------------------------------------------
// The group coordinator.

/// A JoinGroup v0 offering 200,000 distinct protocols with empty metadata (about 1.6 MB):
/// selecting a protocol among them was quadratic under the coordinator's lock. The endpoint
/// may refuse it any way the protocol allows, or close the connection; the watchdog's own
/// group member keeps heartbeating throughout.
pub async fn hostile_join_group_with_200000_protocols(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-hostile-protocols");
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(
                    (0..200_000)
                        .map(|i| JoinGroupRequestProtocol::default().with_name(string(&format!("p{i}"))))
                        .collect(),
                );
            let frame = request_frame(ApiKey::JoinGroup, 0, 1, "kig-hostile", &request)?;
            let what = format!("a JoinGroup v0 of {} bytes offering 200,000 protocols", frame.len());
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            if let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                let _: JoinGroupResponse = decoded(ApiKey::JoinGroup, 0, 1, answer, &what)?;
            }
            new_connection_answers(&endpoint, &what).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// JoinGroup v0 and v5 from a client whose id is 32,760 bytes: a member id built from the
/// client id (Kafka's are `client.id-UUID`) must still be a string the response can carry.
/// Answered with a member id (v0 joins at once; v5 may first answer MEMBER_ID_REQUIRED with
/// it), or closed.
pub async fn hostile_join_group_with_a_32760_byte_client_id(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let client_id = "c".repeat(32_760);
            for version in [0, 5] {
                let group = endpoint.unique_topic("kig-hostile-client-id");
                let request = JoinGroupRequest::default()
                    .with_group_id(GroupId(string(&group)))
                    .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                    .with_rebalance_timeout_ms(if version >= 1 { MEMBER_SESSION_TIMEOUT_MS } else { -1 })
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocols(vec![JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_static_str("range"))
                        .with_metadata(Bytes::from_static(b"m"))]);
                let frame = request_frame(ApiKey::JoinGroup, version, 2, &client_id, &request)?;
                let what = format!("a JoinGroup v{version} from a client whose id is 32,760 bytes");
                let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
                let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? else {
                    continue;
                };
                let joined: JoinGroupResponse = decoded(ApiKey::JoinGroup, version, 2, answer, &what)?;
                if matches!(joined.error_code, NONE | MEMBER_ID_REQUIRED) {
                    ensure!(
                        !joined.member_id.is_empty(),
                        "{what}: error {} with an empty member id",
                        joined.error_code
                    );
                }
                if joined.error_code == NONE {
                    // A joined member would otherwise hold the group until its session lapses.
                    let leave = LeaveGroupRequest::default()
                        .with_group_id(GroupId(string(&group)))
                        .with_members(vec![MemberIdentity::default().with_member_id(joined.member_id.clone())]);
                    let _: LeaveGroupResponse = bounded(
                        &format!("LeaveGroup after {what}"),
                        client.request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &leave),
                    )
                    .await?;
                }
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Topics and records.

/// A Produce v8 writing one record to a real topic, then one to an unknown topic whose name is
/// 32,767 bytes. An error message quoting that name does not fit a string: the response must
/// still come, acknowledging the written record, or the producer retries a stored write.
pub async fn hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-long-topic", 1).await?;
            let unknown = "t".repeat(KAFKA_STRING_MAX);
            let request = produce_request(vec![
                (&topic, vec![(0, values_batch(&[b"kept"])?)]),
                (unknown.as_str(), vec![(0, values_batch(&[b"nowhere"])?)]),
            ]);
            let what = "a Produce v8 to a real topic and an unknown 32,767-byte one";
            let produced: ProduceResponse = bounded(what, client.request(ApiKey::Produce, 8, &request))
                .await
                .context("the record written to the real topic was never acknowledged")?;
            let codes: BTreeMap<&str, Vec<i16>> = produced
                .responses
                .iter()
                .map(|t| {
                    (
                        t.name.0.as_str(),
                        t.partition_responses.iter().map(|p| p.error_code).collect(),
                    )
                })
                .collect();
            ensure!(
                codes.get(topic.as_str()) == Some(&vec![NONE]),
                "{what}: the real topic's partition answered {:?}, expected [0]",
                codes.get(topic.as_str())
            );
            let unknown_codes = codes
                .get(unknown.as_str())
                .with_context(|| format!("{what}: no answer for the unknown topic"))?;
            ensure!(
                unknown_codes.len() == 1 && unknown_codes[0] != NONE,
                "{what}: the unknown topic's partition answered {unknown_codes:?}, expected one error"
            );
            ensure!(
                latest(&mut client, &topic, 0).await? == 1,
                "{what}: the real topic does not hold exactly its one record"
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// CreateTopics v2 with `retention.ms` = 18,446,744,073,709,552, whose microseconds overflow
/// u64 (a wrapped expiry deletes every record at once). Refused with INVALID_CONFIG (and not
/// created), or created with a retention under which a record just written is still there.
pub async fn hostile_create_topic_with_retention_ms_whose_microseconds_overflow(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = endpoint.unique_topic("kig-hostile-retention");
            let request =
                CreateTopicsRequest::default()
                    .with_timeout_ms(30_000)
                    .with_topics(vec![CreatableTopic::default()
                        .with_name(topic_name(&topic))
                        .with_num_partitions(1)
                        // -1 (the broker's default) exists from v4 on.
                        .with_replication_factor(1)
                        .with_configs(vec![CreatableTopicConfig::default()
                            .with_name(StrBytes::from_static_str("retention.ms"))
                            .with_value(Some(StrBytes::from_static_str("18446744073709552")))])]);
            let what = "CreateTopics v2 with retention.ms 18446744073709552";
            let response: CreateTopicsResponse =
                bounded(what, client.request(ApiKey::CreateTopics, 2, &request)).await?;
            let code = response.topics.first().map(|t| t.error_code);
            match code {
                Some(INVALID_CONFIG) => {
                    let metadata = MetadataRequest::default()
                        .with_allow_auto_topic_creation(false)
                        .with_topics(Some(vec![
                            MetadataRequestTopic::default().with_name(Some(topic_name(&topic)))
                        ]));
                    let listed: MetadataResponse = bounded(
                        "Metadata after the refusal",
                        client.request(ApiKey::Metadata, METADATA_V, &metadata),
                    )
                    .await?;
                    ensure!(
                        listed.topics.iter().all(|t| t.error_code != NONE),
                        "{what}: refused with INVALID_CONFIG, yet Metadata lists {topic}"
                    );
                }
                Some(NONE) => {
                    let offset = produce_ok(&mut client, &topic, 0, &[b"still here"]).await?;
                    let fetched: FetchResponse = bounded(
                        "Fetch of the record just written",
                        client.request(ApiKey::Fetch, FETCH_V, &fetch_request(&topic, 0, offset, 1, 0)),
                    )
                    .await?;
                    let values = fetched_values(&fetched, &topic, 0)?;
                    ensure!(
                        values.first() == Some(&Some(Bytes::from_static(b"still here"))),
                        "{what}: accepted, but the record written at offset {offset} was not there at once: \
                         fetched {values:?}; the retention expired it"
                    );
                }
                other => bail!("{what}: answered {other:?}, expected INVALID_CONFIG ({INVALID_CONFIG}) or success"),
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// A Fetch v11 naming one partition of a real topic 5,000 times, first where a record waits
/// (answered at once: each partition at most once, as Kafka's fetch map keeps one entry per
/// partition), then at the high watermark with max_wait_ms = i32::MAX (24 days): the endpoint
/// must answer within its own cap on the wait, or close; still waiting after
/// [`LONG_POLL_GUARD`] fails.
pub async fn hostile_fetch_naming_one_partition_5000_times_waiting_i32_max(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-fetch", 1).await?;
            let offset = produce_ok(&mut client, &topic, 0, &[b"once"]).await?;
            for (from, what, within) in [
                (
                    offset,
                    "a Fetch v11 naming a partition with a record 5,000 times",
                    LIVENESS,
                ),
                (
                    offset + 1,
                    "a Fetch v11 naming a partition 5,000 times at its high watermark, waiting i32::MAX ms",
                    LONG_POLL_GUARD,
                ),
            ] {
                let mut fetcher = connect(&endpoint).await?;
                let request = fetch_request(&topic, 0, from, 5_000, i32::MAX);
                let (correlation_id, frame) = fetcher.encode_request(ApiKey::Fetch, FETCH_V, &request)?;
                let Answer::Frame(answer) = send_hostile(&mut fetcher, &frame, what, within).await? else {
                    continue;
                };
                let fetched: FetchResponse = decoded(ApiKey::Fetch, FETCH_V, correlation_id, answer, what)?;
                let mentions = fetched
                    .responses
                    .iter()
                    .filter(|t| t.topic.0.as_str() == topic)
                    .flat_map(|t| &t.partitions)
                    .filter(|p| p.partition_index == 0)
                    .count();
                ensure!(
                    mentions <= 1,
                    "{what}: the answer holds partition 0 {mentions} times; Kafka answers a partition once"
                );
                if from == offset && mentions == 1 {
                    let values = fetched_values(&fetched, &topic, 0)?;
                    ensure!(
                        values.first() == Some(&Some(Bytes::from_static(b"once"))),
                        "{what}: fetched {values:?}, expected the record \"once\" first"
                    );
                }
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Requests whose body is followed by bytes no field accounts for: closed (the body was not
/// written by the version it claims) or answered with a well-formed response of that API.
pub async fn hostile_trailing_bytes_after_the_request_body(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-hostile-trailing");
            let metadata = MetadataRequest::default().with_allow_auto_topic_creation(false);
            let heartbeat = HeartbeatRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_generation_id(1)
                .with_member_id(StrBytes::from_static_str("nobody"));
            let variants = [
                (
                    ApiKey::ApiVersions,
                    API_VERSIONS_V,
                    request_frame(
                        ApiKey::ApiVersions,
                        API_VERSIONS_V,
                        3,
                        "kig-hostile",
                        &api_versions_request(),
                    )?,
                ),
                (
                    ApiKey::Metadata,
                    METADATA_V,
                    request_frame(ApiKey::Metadata, METADATA_V, 3, "kig-hostile", &metadata)?,
                ),
                (
                    ApiKey::Heartbeat,
                    3,
                    request_frame(ApiKey::Heartbeat, 3, 3, "kig-hostile", &heartbeat)?,
                ),
            ];
            for (key, version, exact) in variants {
                let mut frame = BytesMut::from(&exact[..]);
                frame.put_slice(&[0, 0, 0, 0, 0]);
                let what = format!("a {key:?} v{version} request followed by 5 bytes");
                let mut client = connect(&endpoint).await?;
                if let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                    match key {
                        ApiKey::ApiVersions => {
                            let _: ApiVersionsResponse = decoded(key, version, 3, answer, &what)?;
                        }
                        ApiKey::Metadata => {
                            let _: MetadataResponse = decoded(key, version, 3, answer, &what)?;
                        }
                        _ => {
                            let _: HeartbeatResponse = decoded(key, version, 3, answer, &what)?;
                        }
                    }
                }
                new_connection_answers(&endpoint, &what).await?;
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One request of [`hostile_32767_byte_strings_in_every_echoed_field`]: its frame and the check
/// of its decoded answer.
struct LongStringRequest {
    what: String,
    frame: Bytes,
    check: Box<dyn Fn(Bytes) -> anyhow::Result<()> + Send + Sync>,
}

/// The correlation id of every [`LongStringRequest`] (each goes on a connection of its own).
const LONG_STRING_CORRELATION_ID: i32 = 77;

impl LongStringRequest {
    /// `body` sent as `key` at `version` behind a 32,767-byte client id; its answer must decode
    /// as `Resp` and pass `check`.
    fn new<Req: Encodable, Resp: Decodable + 'static>(
        what: &str,
        key: ApiKey,
        version: i16,
        client_id: &str,
        body: &Req,
        check: impl Fn(&Resp) -> anyhow::Result<()> + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let what = format!("{what} ({key:?} v{version}, 32,767-byte client id)");
        let frame = request_frame(key, version, LONG_STRING_CORRELATION_ID, client_id, body)?;
        let context = what.clone();
        let check = Box::new(move |answer: Bytes| {
            let response: Resp = decoded(key, version, LONG_STRING_CORRELATION_ID, answer, &context)?;
            check(&response).with_context(|| context.clone())
        });
        Ok(Self { what, frame, check })
    }
}

/// 32,767-byte strings (the longest a non-flexible string holds) in every field a response
/// echoes or an error message may quote: topic names (Metadata, ListOffsets, OffsetCommit,
/// OffsetFetch, CreateTopics, DeleteTopics), group ids (FindCoordinator, DescribeGroups,
/// DeleteGroups, OffsetFetch, OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup) and
/// member ids, each behind a 32,767-byte client id, at the highest non-flexible version and
/// the first flexible one. Each is answered with a decodable response — echoing the name and
/// refusing it where Kafka does — or closed.
pub async fn hostile_32767_byte_strings_in_every_echoed_field(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let real_topic = new_topic(&endpoint, &mut client, "kig-hostile-strings", 1).await?;
            let real_group = endpoint.unique_topic("kig-hostile-strings");
            let long = |c: &str| c.repeat(KAFKA_STRING_MAX);
            let (topic, group, member, client_id) = (long("t"), long("g"), long("m"), long("c"));
            let mut requests = Vec::new();
            {
                for version in [8, 9] {
                    let request = MetadataRequest::default()
                        .with_allow_auto_topic_creation(false)
                        .with_topics(Some(vec![
                            MetadataRequestTopic::default().with_name(Some(topic_name(&topic)))
                        ]));
                    let echoed = topic.clone();
                    requests.push(LongStringRequest::new(
                        "Metadata of a 32,767-byte topic",
                        ApiKey::Metadata,
                        version,
                        &client_id,
                        &request,
                        move |r: &MetadataResponse| {
                            let answered: Vec<_> = r
                                .topics
                                .iter()
                                .map(|t| (t.name.as_ref().map(|n| n.0.len()), t.error_code))
                                .collect();
                            ensure!(
                                r.topics.len() == 1
                                    && r.topics[0].name.as_ref().map(|n| n.0.as_str()) == Some(echoed.as_str())
                                    && r.topics[0].error_code != NONE,
                                "expected the topic echoed with an error, got (name length, error) {answered:?}"
                            );
                            Ok(())
                        },
                    )?);
                }
            }
            for version in [5, 6] {
                let request = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(LATEST)])]);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "ListOffsets of a 32,767-byte topic",
                    ApiKey::ListOffsets,
                    version,
                    &client_id,
                    &request,
                    move |r: &ListOffsetsResponse| {
                        let answered: Vec<_> = r
                            .topics
                            .iter()
                            .map(|t| {
                                (
                                    t.name.0.len(),
                                    t.partitions.iter().map(|p| p.error_code).collect::<Vec<_>>(),
                                )
                            })
                            .collect();
                        ensure!(
                            r.topics.len() == 1
                                && r.topics[0].name.0.as_str() == echoed
                                && r.topics[0].partitions.len() == 1
                                && r.topics[0].partitions[0].error_code != NONE,
                            "expected the topic echoed with an error, got (name length, errors) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [4, 5] {
                let request =
                    CreateTopicsRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topics(vec![CreatableTopic::default()
                            .with_name(topic_name(&topic))
                            .with_num_partitions(1)
                            .with_replication_factor(-1)]);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "CreateTopics of a 32,767-byte topic",
                    ApiKey::CreateTopics,
                    version,
                    &client_id,
                    &request,
                    move |r: &CreateTopicsResponse| {
                        let answered: Vec<_> = r.topics.iter().map(|t| (t.name.0.len(), t.error_code)).collect();
                        ensure!(
                            r.topics.len() == 1
                                && r.topics[0].name.0.as_str() == echoed
                                && r.topics[0].error_code == INVALID_TOPIC_EXCEPTION,
                            "expected the topic echoed with INVALID_TOPIC_EXCEPTION ({INVALID_TOPIC_EXCEPTION}), \
                             got (name length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [3, 4] {
                let request = DeleteTopicsRequest::default()
                    .with_topic_names(vec![topic_name(&topic)])
                    .with_timeout_ms(30_000);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "DeleteTopics of a 32,767-byte topic",
                    ApiKey::DeleteTopics,
                    version,
                    &client_id,
                    &request,
                    move |r: &DeleteTopicsResponse| {
                        let answered: Vec<_> = r
                            .responses
                            .iter()
                            .map(|t| (t.name.as_ref().map(|n| n.0.len()), t.error_code))
                            .collect();
                        ensure!(
                            r.responses.len() == 1
                                && r.responses[0].name.as_ref().map(|n| n.0.as_str()) == Some(echoed.as_str())
                                && r.responses[0].error_code != NONE,
                            "expected the topic echoed with an error, got (name length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            // OffsetCommit and OffsetFetch: a long topic under a real group id, then a long
            // group id over the real topic; OffsetCommit also with a long member id.
            for version in [7, 8] {
                for (what, group_id, member_id, topic_id) in [
                    ("OffsetCommit of a 32,767-byte topic", &real_group, "", &topic),
                    ("OffsetCommit for a 32,767-byte group id", &group, "", &real_topic),
                    (
                        "OffsetCommit from a 32,767-byte member id",
                        &real_group,
                        member.as_str(),
                        &real_topic,
                    ),
                ] {
                    let request = OffsetCommitRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id_or_member_epoch(if member_id.is_empty() { -1 } else { 1 })
                        .with_member_id(string(member_id))
                        .with_topics(vec![OffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic_id))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(0)])]);
                    requests.push(LongStringRequest::new(
                        what,
                        ApiKey::OffsetCommit,
                        version,
                        &client_id,
                        &request,
                        |_: &OffsetCommitResponse| Ok(()),
                    )?);
                }
            }
            for version in [5, 6] {
                for (what, group_id, topic_id) in [
                    ("OffsetFetch of a 32,767-byte topic", &real_group, &topic),
                    ("OffsetFetch for a 32,767-byte group id", &group, &real_topic),
                ] {
                    let request = OffsetFetchRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                            .with_name(topic_name(topic_id))
                            .with_partition_indexes(vec![0])]));
                    requests.push(LongStringRequest::new(
                        what,
                        ApiKey::OffsetFetch,
                        version,
                        &client_id,
                        &request,
                        |_: &OffsetFetchResponse| Ok(()),
                    )?);
                }
            }
            for version in [2, 3] {
                let request = FindCoordinatorRequest::default().with_key(string(&group));
                requests.push(LongStringRequest::new(
                    "FindCoordinator for a 32,767-byte group id",
                    ApiKey::FindCoordinator,
                    version,
                    &client_id,
                    &request,
                    |_: &FindCoordinatorResponse| Ok(()),
                )?);
            }
            for version in [4, 5] {
                let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(string(&group))]);
                let echoed = group.clone();
                requests.push(LongStringRequest::new(
                    "DescribeGroups of a 32,767-byte group id",
                    ApiKey::DescribeGroups,
                    version,
                    &client_id,
                    &request,
                    move |r: &DescribeGroupsResponse| {
                        let lengths: Vec<usize> = r.groups.iter().map(|g| g.group_id.0.len()).collect();
                        ensure!(
                            r.groups.len() == 1 && r.groups[0].group_id.0.as_str() == echoed,
                            "expected the group echoed, got group ids of lengths {lengths:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [1, 2] {
                let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(string(&group))]);
                let echoed = group.clone();
                requests.push(LongStringRequest::new(
                    "DeleteGroups of a 32,767-byte group id",
                    ApiKey::DeleteGroups,
                    version,
                    &client_id,
                    &request,
                    move |r: &DeleteGroupsResponse| {
                        let answered: Vec<_> = r.results.iter().map(|g| (g.group_id.0.len(), g.error_code)).collect();
                        ensure!(
                            r.results.len() == 1
                                && r.results[0].group_id.0.as_str() == echoed
                                && r.results[0].error_code != NONE,
                            "expected the group echoed with an error, got (group id length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            // The member's requests: a long group id with a plain member id, then a real group
            // id with a long member id.
            let members = [
                ("a 32,767-byte group id", &group, "kig-hostile-member"),
                ("a 32,767-byte member id", &real_group, member.as_str()),
            ];
            {
                for version in [5, 6] {
                    for (field, group_id, member_id) in members {
                        let request = JoinGroupRequest::default()
                            .with_group_id(GroupId(string(group_id)))
                            .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                            .with_rebalance_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                            .with_member_id(string(member_id))
                            .with_protocol_type(StrBytes::from_static_str("consumer"))
                            .with_protocols(vec![JoinGroupRequestProtocol::default()
                                .with_name(StrBytes::from_static_str("range"))
                                .with_metadata(Bytes::from_static(b"m"))]);
                        requests.push(LongStringRequest::new(
                            &format!("JoinGroup with {field}"),
                            ApiKey::JoinGroup,
                            version,
                            &client_id,
                            &request,
                            |_: &JoinGroupResponse| Ok(()),
                        )?);
                    }
                }
            }
            for version in [3, 4] {
                for (field, group_id, member_id) in members {
                    let heartbeat = HeartbeatRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id(1)
                        .with_member_id(string(member_id));
                    requests.push(LongStringRequest::new(
                        &format!("Heartbeat with {field}"),
                        ApiKey::Heartbeat,
                        version,
                        &client_id,
                        &heartbeat,
                        |_: &HeartbeatResponse| Ok(()),
                    )?);
                    let leave = LeaveGroupRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_members(vec![MemberIdentity::default().with_member_id(string(member_id))]);
                    requests.push(LongStringRequest::new(
                        &format!("LeaveGroup with {field}"),
                        ApiKey::LeaveGroup,
                        version,
                        &client_id,
                        &leave,
                        |_: &LeaveGroupResponse| Ok(()),
                    )?);
                    let sync = SyncGroupRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id(1)
                        .with_member_id(string(member_id))
                        .with_assignments(vec![SyncGroupRequestAssignment::default()
                            .with_member_id(string(member_id))
                            .with_assignment(Bytes::from_static(b"a"))]);
                    requests.push(LongStringRequest::new(
                        &format!("SyncGroup with {field}"),
                        ApiKey::SyncGroup,
                        version,
                        &client_id,
                        &sync,
                        |_: &SyncGroupResponse| Ok(()),
                    )?);
                }
            }
            for request in requests {
                // All to the bootstrap broker: one that does not coordinate a group answers
                // NOT_COORDINATOR, which is as much an answer as any here.
                let mut connection = connect(&endpoint).await?;
                if let Answer::Frame(answer) =
                    send_hostile(&mut connection, &request.frame, &request.what, LIVENESS).await?
                {
                    (request.check)(answer)?;
                }
            }
            new_connection_answers(&endpoint, "the 32,767-byte strings").await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One zstd batch of a few KB declaring, and holding, 1,000,000 empty records (7 MB
/// decompressed): decoded, each costs far more than its bytes on the wire. Every record's
/// offset delta is 0, which keeps the batch a few KB (an endpoint may renumber such records or
/// refuse them; either answer passes). Refused for its partition with any error code (nothing
/// stored), or acknowledged (every record stored); never a silence.
pub async fn hostile_zstd_batch_declaring_a_million_empty_records(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const RECORDS: i32 = 1_000_000;
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-records", 1).await?;
            let mut section = BytesMut::new();
            let record = Record {
                attributes: 0,
                timestamp_delta: 0,
                offset_delta: 0,
                key: None,
                value: Some(Bytes::new()),
                headers: vec![],
            };
            for _ in 0..RECORDS {
                encode_record(&mut section, &record);
            }
            let timestamp = now_ms()?;
            let header = BatchHeader {
                base_offset: 0,
                partition_leader_epoch: -1,
                attributes: BatchAttributes::plain(Compression::Zstd),
                last_offset_delta: RECORDS - 1,
                base_timestamp: timestamp,
                max_timestamp: timestamp,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
            };
            let batch = write_batch(&header, RECORDS, &compress(Compression::Zstd, &section));
            let what = format!(
                "a Produce of one zstd batch of {} bytes holding {RECORDS} empty records ({} bytes decompressed)",
                batch.len(),
                section.len()
            );
            drop(section);
            let request = produce_request(vec![(topic.as_str(), vec![(0, batch)])]);
            let produced: ProduceResponse =
                bounded(&what, client.request(ApiKey::Produce, PRODUCE_V, &request)).await?;
            let code = produced
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .map(|p| p.error_code)
                .with_context(|| format!("{what}: no answer for the partition"))?;
            let stored = latest(&mut client, &topic, 0).await?;
            let expected = if code == NONE { i64::from(RECORDS) } else { 0 };
            ensure!(
                stored == expected,
                "{what}: answered error {code}, yet the partition holds {stored} records (expected {expected})"
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Produce requests of several zstd batches that together decompress to 90% of the endpoint's
/// max_frame_size, sent back to back on two connections for [`NEAR_MAX_FOR`]: decompressing
/// them must not stop the watchdog's ApiVersions, Metadata or its group member's Heartbeats.
/// The last record of each batch has the timestamp -2, which Kafka refuses (INVALID_TIMESTAMP)
/// only once the batch is decompressed and read to its end: the endpoint does all the work and
/// stores nothing, so the attack can last without filling it. Each request must be answered,
/// for every partition, with any code; a partition holds exactly the records of the batches
/// acknowledged for it.
pub async fn hostile_near_max_frame_zstd_produces_on_two_connections(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const PARTITIONS: i32 = 4;
    const VALUE_BYTES: usize = 16 * 1024;
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-near-max", PARTITIONS).await?;
            let records_per_batch = max_frame_size * 9 / 10 / PARTITIONS as usize / VALUE_BYTES;
            let base_timestamp = now_ms()?;
            let records: Vec<Record> = (0..records_per_batch)
                .map(|i| Record {
                    attributes: 0,
                    // The last record's timestamp is -2; the batch's max timestamp stays valid.
                    timestamp_delta: if i + 1 == records_per_batch { -(base_timestamp + 2) } else { 0 },
                    offset_delta: 0,
                    key: None,
                    value: Some(Bytes::from(letters(VALUE_BYTES, i as u64 + 1))),
                    headers: vec![],
                })
                .collect();
            let batch = encode_batch(&RecordBatch::from_producer(Compression::Zstd, base_timestamp, records))?;
            let request = produce_request(vec![(topic.as_str(), (0..PARTITIONS).map(|p| (p, batch.clone())).collect())]);
            let decompressed = records_per_batch * VALUE_BYTES * PARTITIONS as usize;
            let framed = batch.len() * PARTITIONS as usize;
            let deadline = Instant::now() + NEAR_MAX_FOR;
            // Each connection's acknowledgements, per partition.
            let sender = |connection: usize| {
                let (endpoint, request, topic) = (endpoint.clone(), request.clone(), topic.clone());
                async move {
                    let mut client = connect(&endpoint).await?;
                    let mut acknowledged = [0i64; PARTITIONS as usize];
                    let mut sent = 0;
                    while Instant::now() < deadline {
                        sent += 1;
                        let what = format!(
                            "Produce #{sent} on connection {connection} ({framed} bytes of {PARTITIONS} zstd batches, {decompressed} decompressed)"
                        );
                        let produced: ProduceResponse =
                            bounded(&what, client.request(ApiKey::Produce, PRODUCE_V, &request)).await?;
                        let answers: Vec<(i32, i16)> = produced
                            .responses
                            .iter()
                            .filter(|t| t.name.0.as_str() == topic)
                            .flat_map(|t| t.partition_responses.iter().map(|p| (p.index, p.error_code)))
                            .collect();
                        let mut indexes: Vec<i32> = answers.iter().map(|(index, _)| *index).collect();
                        indexes.sort();
                        ensure!(
                            indexes == (0..PARTITIONS).collect::<Vec<_>>(),
                            "{what}: answered partitions {indexes:?}, expected each of 0..{PARTITIONS} once"
                        );
                        for (index, code) in answers {
                            if code == NONE {
                                acknowledged[index as usize] += 1;
                            }
                        }
                    }
                    anyhow::Ok(acknowledged)
                }
            };
            let (first, second) = tokio::try_join!(sender(1), sender(2))?;
            for partition in 0..PARTITIONS {
                let batches = first[partition as usize] + second[partition as usize];
                let expected = batches * records_per_batch as i64;
                let stored = latest(&mut client, &topic, partition).await?;
                ensure!(
                    stored == expected,
                    "partition {partition} holds {stored} records; {batches} batches of {records_per_batch} were acknowledged"
                );
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How long [`hostile_near_max_frame_zstd_produces_on_two_connections`] keeps sending.
const NEAR_MAX_FOR: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------------------------
// Connections.

/// How many idle connections [`hostile_many_idle_connections`] opens.
const IDLE_CONNECTIONS: usize = 1_500;
/// How long it holds them open once opened: the attack's duration, in which the watchdog runs
/// about twenty rounds.
const IDLE_HOLD: Duration = Duration::from_secs(1);

/// 1,500 connections that never send a byte, opened after the watchdog's (stopping early, and
/// saying so only if none could be opened, when a connect fails): the endpoint may close those
/// beyond its limit. Once they are dropped, a new connection is answered.
pub async fn hostile_many_idle_connections(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let address = socket_address(&endpoint).await?;
            let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
            let mut stopped_opening = None;
            while idle.len() < IDLE_CONNECTIONS {
                match timeout(LIVENESS, TcpStream::connect(address)).await {
                    Ok(Ok(stream)) => idle.push(stream),
                    Ok(Err(e)) => {
                        stopped_opening = Some(format!("connect failed: {e}"));
                        break;
                    }
                    Err(_) => {
                        stopped_opening = Some(format!("connect took over {LIVENESS:?}"));
                        break;
                    }
                }
            }
            ensure!(
                !idle.is_empty(),
                "not one idle connection could be opened: {}",
                stopped_opening.unwrap_or_default()
            );
            tokio::time::sleep(IDLE_HOLD).await;
            let closed = idle
                .iter()
                .filter(|s| match s.try_read(&mut [0u8; 1]) {
                    Ok(0) => true,
                    Err(e) => closed_by_peer(&e),
                    Ok(_) => false,
                })
                .count();
            tracing::info!(
                opened = idle.len(),
                closed_by_endpoint = closed,
                stopped_opening = stopped_opening.as_deref().unwrap_or("no"),
                "hostile_many_idle_connections"
            );
            let opened = idle.len();
            drop(idle);
            new_connection_answers(
                &endpoint,
                &format!("{opened} idle connections ({closed} closed by the endpoint)"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How long a slow sender trickles.
const TRICKLE_FOR: Duration = Duration::from_secs(3);

/// Two slow senders for [`TRICKLE_FOR`]: one trickles a whole ApiVersions request a byte at a
/// time and must then be answered (or closed); the other declares a frame of max_frame_size
/// bytes, trickles a few bytes of its body at a time, then goes silent and disconnects, its
/// frame never complete. Nothing else waits on either.
pub async fn hostile_slow_senders_trickle_frames(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let complete = async {
                let mut client = connect(&endpoint).await?;
                let request = request_frame(
                    ApiKey::ApiVersions,
                    API_VERSIONS_V,
                    5,
                    "kig-hostile",
                    &api_versions_request(),
                )?;
                let mut frame = (request.len() as i32).to_be_bytes().to_vec();
                frame.extend_from_slice(&request);
                let pace = TRICKLE_FOR / frame.len() as u32;
                for byte in &frame {
                    match client.send_bytes(std::slice::from_ref(byte)).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return Ok(()),
                        Err(e) => return Err(e).context("trickling an ApiVersions request"),
                    }
                    tokio::time::sleep(pace).await;
                }
                let what = "an ApiVersions request trickled a byte at a time";
                match timeout(LIVENESS, client.recv_frame()).await {
                    Err(_) => bail!("{what}: neither answered nor closed within {LIVENESS:?} of its last byte"),
                    Ok(Ok(None)) => Ok(()),
                    Ok(Ok(Some(answer))) => {
                        let answered: ApiVersionsResponse =
                            decoded(ApiKey::ApiVersions, API_VERSIONS_V, 5, answer, what)?;
                        ensure!(answered.error_code == NONE, "{what}: error {}", answered.error_code);
                        Ok(())
                    }
                    Ok(Err(e)) => Err(e).context(what),
                }
            };
            let abandoned = async {
                let mut client = connect(&endpoint).await?;
                let declared = i32::try_from(max_frame_size).context("max_frame_size does not fit a frame length")?;
                let started = Instant::now();
                // The length prefix, then four bytes of body every 100 ms.
                let mut chunk = declared.to_be_bytes();
                while started.elapsed() < TRICKLE_FOR {
                    match client.send_bytes(&chunk).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return Ok(()),
                        Err(e) => return Err(e).context("trickling a max_frame_size frame"),
                    }
                    chunk = [0; 4];
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                anyhow::Ok(())
            };
            tokio::try_join!(complete, abandoned)?;
            new_connection_answers(&endpoint, "the slow senders").await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How many requests [`hostile_pipelined_requests_whose_answers_are_not_read`] pipelines.
const PIPELINED: usize = 1_000;
/// How long it leaves their answers unread: the attack's duration.
const UNREAD_FOR: Duration = Duration::from_secs(2);

/// 1,000 Metadata requests pipelined on one connection, each naming 100 unknown 240-byte
/// topics (about 25 KB each way), on a socket whose receive buffer is 4 KB: the answers fill
/// the buffers and the endpoint's writes stall. They stay unread for [`UNREAD_FOR`]; then the
/// client reads, and every answer must come in request order, until all 1,000 are read or the
/// endpoint closes the connection (it may give up on a client that does not read).
pub async fn hostile_pipelined_requests_whose_answers_are_not_read(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let address = socket_address(&endpoint).await?;
            let socket = if address.is_ipv4() {
                tokio::net::TcpSocket::new_v4()?
            } else {
                tokio::net::TcpSocket::new_v6()?
            };
            socket.set_recv_buffer_size(4096)?;
            let stream = timeout(LIVENESS, socket.connect(address))
                .await
                .context("connecting the pipelining client")??;
            stream.set_nodelay(true)?;
            let (mut reader, mut writer) = stream.into_split();
            let topics: Vec<MetadataRequestTopic> = (0..100)
                .map(|i| MetadataRequestTopic::default().with_name(Some(topic_name(&format!("{i:0>240}")))))
                .collect();
            let request = MetadataRequest::default()
                .with_allow_auto_topic_creation(false)
                .with_topics(Some(topics));
            // The writer runs on its own: once the endpoint stops reading, its writes wait.
            let written = tokio::spawn(async move {
                for correlation_id in 1..=PIPELINED as i32 {
                    let frame = request_frame(ApiKey::Metadata, METADATA_V, correlation_id, "kig-hostile", &request)?;
                    let mut prefixed = BytesMut::with_capacity(frame.len() + 4);
                    prefixed.put_i32(frame.len() as i32);
                    prefixed.put_slice(&frame);
                    match writer.write_all(&prefixed).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return anyhow::Ok(None),
                        Err(e) => return Err(e).context("writing the pipelined requests"),
                    }
                }
                // Handed back open: the connection stays whole while the answers are read.
                anyhow::Ok(Some(writer))
            });
            tokio::time::sleep(UNREAD_FOR).await;
            let mut answered = 0;
            while answered < PIPELINED {
                let next = answered as i32 + 1;
                let what = format!("the answer to pipelined Metadata request {next} of {PIPELINED}");
                let frame = match timeout(LIVENESS, read_frame(&mut reader)).await {
                    Err(_) => bail!("{what}: neither answered nor closed within {LIVENESS:?}"),
                    Ok(Ok(Some(frame))) => frame,
                    Ok(Ok(None)) => break,
                    Ok(Err(e)) => return Err(e).context(what),
                };
                let _: MetadataResponse = decoded(ApiKey::Metadata, METADATA_V, next, frame, &what)
                    .context("PROTO-ORDER-1: answers must come in request order")?;
                answered += 1;
            }
            // Every answer read means every request was read, so the writer is done; a close
            // fails its next write.
            let writer = timeout(LIVENESS, written)
                .await
                .context("the pipelining writer was still blocked after the reads ended")?
                .context("the pipelining writer")??;
            drop(writer);
            tracing::info!(answered, "hostile_pipelined_requests_whose_answers_are_not_read");
            new_connection_answers(
                &endpoint,
                &format!("{PIPELINED} pipelined requests ({answered} answered)"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How many bytes of frames [`hostile_connections_that_send_only_a_max_frame_length_prefix`]
/// declares in all: more than a server would want to hold for connections that send nothing,
/// little enough for a Kafka broker's default heap.
const DECLARED_IN_ALL: usize = 320 * 1024 * 1024;
/// How long it holds them: longer than [`LIVENESS`], so that a server which makes every other
/// request wait for them fails the watchdog.
const PREFIXES_HELD_FOR: Duration = Duration::from_secs(12);
/// The value a well-behaved producer writes meanwhile, every [`PRODUCE_PERIOD`]: a batch as
/// large as a producer's default (librdkafka's `batch.size` is 1 MB), and larger than a small
/// request.
const PRODUCED_WHILE_HELD: usize = 512 * 1024;
/// How often the well-behaved producer writes: from the start of the hold to its end, so that
/// its writes meet the prefixes however soon the endpoint reads them.
const PRODUCE_PERIOD: Duration = Duration::from_secs(1);

/// Connections that each send the 4-byte length prefix of a max_frame_size frame and nothing
/// more, [`DECLARED_IN_ALL`] bytes declared over all of them, held for [`PREFIXES_HELD_FOR`]:
/// the cheapest slow-sender attack, 4 bytes per connection. The endpoint may close them or let
/// them wait; other clients' requests must not wait on them: neither the watchdog's nor a
/// well-behaved producer's [`PRODUCED_WHILE_HELD`]-byte records, one every [`PRODUCE_PERIOD`]
/// while the prefixes are held.
pub async fn hostile_connections_that_send_only_a_max_frame_length_prefix(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let connections = DECLARED_IN_ALL.div_ceil(max_frame_size);
    let declared = i32::try_from(max_frame_size).context("max_frame_size does not fit a frame length")?;
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut producer = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut producer, "kig-hostile-prefixes", 1).await?;
            let mut held = Vec::with_capacity(connections);
            for _ in 0..connections {
                let mut client = connect(&endpoint).await?;
                match client.send_bytes(&declared.to_be_bytes()).await {
                    Ok(()) => held.push(client),
                    Err(e) if closed_by_peer(&e) => {}
                    Err(e) => return Err(e).context("sending a length prefix"),
                }
            }
            let value = vec![b'v'; PRODUCED_WHILE_HELD];
            let holding = held.len();
            let produced = async {
                let hold_started = Instant::now();
                let mut period = tokio::time::interval(PRODUCE_PERIOD);
                let mut written = 0;
                while hold_started.elapsed() < PREFIXES_HELD_FOR {
                    period.tick().await;
                    written += 1;
                    let sent = hold_started.elapsed();
                    produce_ok(&mut producer, &topic, 0, &[&value]).await.with_context(|| {
                        format!(
                            "well-behaved Produce #{written} of a {PRODUCED_WHILE_HELD}-byte record, sent {:.1} s \
                             after {holding} connections began to hold {max_frame_size}-byte frame prefixes",
                            sent.as_secs_f64()
                        )
                    })?;
                }
                anyhow::Ok(())
            };
            let (produced, ()) = tokio::join!(produced, tokio::time::sleep(PREFIXES_HELD_FOR));
            produced?;
            drop(held);
            new_connection_answers(
                &endpoint,
                &format!("{connections} connections declaring {max_frame_size}-byte frames"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}
