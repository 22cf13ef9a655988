//! Cases driven by librdkafka (the `rdkafka` crate): what real clients do.
//!
//! Every case creates its own topics (unique names) through the admin client, so it runs
//! against any Kafka endpoint. Waits are bounded and fail the case when they run out; nothing
//! sleeps to synchronise.
//!
//! Configuration, chosen so that no case needs a group coordinator (the gateway had none when
//! these cases were written, and a case about records should not depend on one):
//!
//! - Consumers set a unique `group.id`: librdkafka refuses `assign()` without one ("Requires a
//!   consumer with group.id configured", `rd_kafka_assign0`), even though an assigned consumer
//!   never joins the group. With a `group.id` librdkafka looks for a coordinator only on
//!   brokers that advertise FindCoordinator; when none does, the group just waits for one,
//!   silently. Partitions assigned at an absolute or logical (BEGINNING, END) offset start
//!   fetching without a coordinator (`rd_kafka_assignment_serve_pending`); only a stored
//!   offset would need one (OffsetFetch). So: explicit start offsets,
//!   `enable.auto.commit=false`, `enable.auto.offset.store=false`, never commit.
//! - `enable.partition.eof=true`: the consumer reports reaching the high watermark. That is how
//!   a case knows, without sleeping, that an END start offset has been resolved, and that no
//!   record follows the ones it expects.
//! - `auto.offset.reset=error`: an out-of-range start or fetch offset fails the case instead of
//!   being silently reset.
//! - `check.crcs=true`: the consumer verifies the CRC32C of every batch Fetch builds.
//! - Metadata and watermark queries go through a consumer without `group.id` (librdkafka allows
//!   that for everything but assign/subscribe), so asking for a topic never auto-creates it
//!   (`allow.auto.create.topics` is false for consumers, true for producer-type clients such as
//!   the admin client). Those calls block, so they run on tokio's blocking pool.
//! - `debug` stays off and `log_level` is 5 (notices and above); producers keep what is logged
//!   to quote it when a delivery fails.
//! - The mapping cases' producers set `statistics.interval.ms`: librdkafka silently sends a
//!   batch uncompressed when it judges from ApiVersions that the broker lacks the codec (lz4
//!   needs FindCoordinator v0 advertised, zstd Produce v7 and Fetch v10), and the batch sizes
//!   in its statistics are how a case sees that the codec was really used.

use super::{require_apis, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{anyhow, bail, ensure, Context as _};
use kafka_protocol::messages::ApiKey;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Message, Offset, Statistics, Timestamp, TopicPartitionList};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The rules the every-mapping-case round trip checks, the same for each codec.
const EVERY_MAPPING_CASE_RULES: &[&str] = &[
    "MAP-KEY-1",
    "MAP-VALUE-1",
    "MAP-VALUE-2",
    "MAP-HEADER-1",
    "ENV-TRIGGER-KEY-LEN-1",
    "ENV-TRIGGER-HEADER-VALUE-1",
    "ENV-TRIGGER-REPEAT-1",
    "BATCH-COMPRESSION-1",
    "FETCH-BATCH-1",
    "MAP-TS-1",
];

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            admin_client_creates_and_deletes_a_topic,
            ["TOPIC-EXISTS-1", "DELETETOPICS-1", "METADATA-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_none,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_gzip,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_snappy,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_lz4,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_zstd,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            idempotent_producer_produces_and_reads_back,
            ["PID-ALLOC-1", "PID-IGNORE-1", "DELIVERY-1"]
        ),
        case!(
            consumer_starting_at_latest_sees_only_new_records,
            ["LISTOFFSETS-LATEST-1"]
        ),
        case!(
            fetch_watermarks_match_produced_count,
            ["LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-LATEST-1"]
        ),
        case!(
            rdkafka_metadata_for_all_topics,
            ["LIMIT-TRAILING-BYTES-1", "METADATA-1"]
        ),
    ]
}

/// How long any one wait (a delivery, a metadata change, the records of a consume) may take
/// before the case fails.
const WAIT: Duration = Duration::from_secs(30);
/// Between two metadata polls while waiting for a real Kafka cluster to converge. The gateway
/// answers right the first time, so it never waits this.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------

fn base_config(endpoint: &Endpoint) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &endpoint.bootstrap)
        .set("client.id", "kafka-iggy-conformance")
        // Notices and above (no `debug`); producers keep them to quote when a delivery fails.
        .set_log_level(RDKafkaLogLevel::Notice);
    config
}

fn admin_client(endpoint: &Endpoint) -> anyhow::Result<AdminClient<DefaultClientContext>> {
    base_config(endpoint).create().context("creating the admin client")
}

fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(WAIT))
        .operation_timeout(Some(WAIT))
}

/// A producer with `acks=all`, a bounded delivery timeout and the given extra settings.
fn producer(endpoint: &Endpoint, extra: &[(&str, &str)]) -> anyhow::Result<CaseProducer> {
    let mut config = base_config(endpoint);
    config
        .set("acks", "all")
        .set("message.timeout.ms", WAIT.as_millis().to_string());
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let events = ClientEvents::default();
    let producer = config
        .create_with_context(events.clone())
        .context("creating the producer")?;
    Ok(CaseProducer { producer, events })
}

/// The produced batches of one topic, summed over librdkafka's statistics windows.
#[derive(Debug, Clone, Copy, Default)]
struct BatchStats {
    batches: i64,
    /// The largest batch, in bytes as sent (after compression).
    max_bytes: i64,
}

/// What a librdkafka instance reported on its own: log lines at `log_level` (`debug` is off)
/// and client errors, to quote when something fails; and, when `statistics.interval.ms` is
/// set, the size of the batches it sent, which is how a case tells whether a batch was
/// compressed.
#[derive(Clone)]
struct ClientEvents {
    lines: Arc<Mutex<Vec<String>>>,
    batches: Arc<watch::Sender<HashMap<String, BatchStats>>>,
}

impl Default for ClientEvents {
    fn default() -> Self {
        Self {
            lines: Arc::default(),
            batches: Arc::new(watch::channel(HashMap::new()).0),
        }
    }
}

impl ClientEvents {
    const MAX_LINES: usize = 200;

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() < Self::MAX_LINES {
            lines.push(line);
        }
    }

    /// Everything logged, for an error message.
    fn summary(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.is_empty() {
            "librdkafka logged nothing".into()
        } else {
            format!("librdkafka logged: {}", lines.join(" | "))
        }
    }

    /// Waits (up to [`WAIT`]) for statistics that count at least one batch sent to `topic`.
    async fn batches_of(&self, topic: &str) -> anyhow::Result<BatchStats> {
        let mut receiver = self.batches.subscribe();
        let seen = tokio::time::timeout(WAIT, receiver.wait_for(|m| m.get(topic).is_some_and(|b| b.batches > 0)))
            .await
            .map_err(|_| anyhow!("no statistics counting a batch sent to {topic} within {WAIT:?}"))?
            .map_err(|_| anyhow!("the producer's statistics channel closed"))?;
        Ok(seen[topic])
    }
}

impl ClientContext for ClientEvents {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.push(format!("{level:?} {fac}: {message}"));
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.push(format!("error {error}: {reason}"));
    }

    fn stats(&self, statistics: Statistics) {
        // Each emission covers the window since the previous one.
        self.batches.send_modify(|all| {
            for (name, topic) in &statistics.topics {
                if topic.batchcnt.cnt > 0 {
                    let seen = all.entry(name.clone()).or_default();
                    seen.batches += topic.batchcnt.cnt;
                    seen.max_bytes = seen.max_bytes.max(topic.batchsize.max);
                }
            }
        });
    }
}

/// A producer and what its librdkafka instance reported.
struct CaseProducer {
    producer: FutureProducer<ClientEvents>,
    events: ClientEvents,
}

/// A consumer without `group.id`, for metadata and watermarks only.
fn metadata_client(endpoint: &Endpoint) -> anyhow::Result<Arc<BaseConsumer>> {
    let consumer: BaseConsumer = base_config(endpoint)
        .set("allow.auto.create.topics", "false")
        .create()
        .context("creating the metadata client")?;
    Ok(Arc::new(consumer))
}

/// A consumer with `partition` of `topic` assigned at `start`; see the module doc for why each
/// setting is there.
fn assigned_consumer(
    endpoint: &Endpoint,
    topic: &str,
    partition: i32,
    start: Offset,
) -> anyhow::Result<StreamConsumer> {
    let consumer: StreamConsumer = base_config(endpoint)
        .set("group.id", endpoint.unique_topic("conformance-group"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error")
        .set("check.crcs", "true")
        .create()
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, start)?;
    consumer.assign(&assignment).context("assigning the partition")?;
    Ok(consumer)
}

/// Runs a blocking librdkafka call on tokio's blocking pool, so that it cannot stall the
/// runtime (which may host the gateway under test).
async fn blocking<T, F>(f: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> anyhow::Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.context("blocking task")?
}

/// Drops a client on the blocking pool: closing a consumer and destroying a librdkafka handle
/// wait for its threads.
async fn close<T: Send + 'static>(client: T) {
    let _ = tokio::task::spawn_blocking(move || drop(client)).await;
}

async fn fetch_metadata(client: &Arc<BaseConsumer>, topic: &str) -> anyhow::Result<Metadata> {
    let client = client.clone();
    let topic = topic.to_string();
    blocking(move || {
        client
            .fetch_metadata(Some(&topic), WAIT)
            .with_context(|| format!("Metadata for {topic}"))
    })
    .await
}

async fn fetch_watermarks(client: &Arc<BaseConsumer>, topic: &str, partition: i32) -> anyhow::Result<(i64, i64)> {
    let client = client.clone();
    let topic = topic.to_string();
    blocking(move || {
        client
            .fetch_watermarks(&topic, partition, WAIT)
            .with_context(|| format!("watermarks of {topic}-{partition}"))
    })
    .await
}

/// What a Metadata answer says about one topic.
#[derive(Debug, PartialEq)]
enum TopicState {
    Absent,
    Error(RDKafkaErrorCode),
    /// Partition ids, in the order listed.
    Partitions(Vec<i32>),
}

fn topic_state(metadata: &Metadata, topic: &str) -> TopicState {
    match metadata.topics().iter().find(|t| t.name() == topic) {
        None => TopicState::Absent,
        Some(t) => match t.error() {
            Some(e) => TopicState::Error(e.into()),
            None => TopicState::Partitions(t.partitions().iter().map(|p| p.id()).collect()),
        },
    }
}

/// Polls Metadata until `done` holds for the topic's state, failing after [`WAIT`]. The first
/// answer settles it on the gateway; a Kafka cluster may take a moment to propagate a change.
async fn await_topic_state(
    client: &Arc<BaseConsumer>,
    topic: &str,
    what: &str,
    done: impl Fn(&TopicState) -> bool,
) -> anyhow::Result<Metadata> {
    let deadline = Instant::now() + WAIT;
    loop {
        let metadata = fetch_metadata(client, topic).await?;
        let state = topic_state(&metadata, topic);
        if done(&state) {
            return Ok(metadata);
        }
        if Instant::now() >= deadline {
            bail!("Metadata for {topic} never showed {what} within {WAIT:?}; last: {state:?}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Creates `topic` with `partitions` partitions (through CreateTopics, or the endpoint's own
/// topic creator when it has no CreateTopics) and waits until Metadata lists all of them.
async fn create_topic(endpoint: &Endpoint, topic: &str, partitions: i32) -> anyhow::Result<()> {
    if let Some(creator) = endpoint.topic_creator.clone() {
        let name = topic.to_string();
        blocking(move || creator.create(&name, partitions)).await?;
    } else {
        let admin = admin_client(endpoint)?;
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &admin_options(),
            )
            .await
            .with_context(|| format!("CreateTopics {topic}"))?;
        close(admin).await;
        ensure!(results == [Ok(topic.to_string())], "CreateTopics {topic}: {results:?}");
    }
    let metadata = metadata_client(endpoint)?;
    let expected: Vec<i32> = (0..partitions).collect();
    await_topic_state(
        &metadata,
        topic,
        "every partition",
        |s| matches!(s, TopicState::Partitions(p) if sorted(p.clone()) == expected),
    )
    .await?;
    close(metadata).await;
    Ok(())
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

type HeaderList = Vec<(String, Option<Vec<u8>>)>;

/// One record to produce, and how it must come back.
struct Spec {
    label: &'static str,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// As sent, in this order.
    headers: HeaderList,
    timestamp: Option<i64>,
    /// Envelope records keep their headers' order; plain and placeholder records come back
    /// sorted by name (MAP-HEADER-1) from the gateway, in the order sent from Kafka.
    envelope: bool,
}

impl Spec {
    fn new(label: &'static str) -> Self {
        Self {
            label,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
            envelope: false,
        }
    }
    fn key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }
    fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = Some(value.into());
        self
    }
    fn header(mut self, name: &str, value: Option<&[u8]>) -> Self {
        self.headers.push((name.to_string(), value.map(|v| v.to_vec())));
        self
    }
    fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }
    fn envelope(mut self) -> Self {
        self.envelope = true;
        self
    }

    /// The headers as they must come back: as sent from Kafka (and from the gateway for an
    /// envelope record); sorted by name from the gateway otherwise (MAP-HEADER-1, a deviation).
    fn expected_headers(&self, profile: Profile) -> HeaderList {
        let mut headers = self.headers.clone();
        if !self.envelope && !profile.is_kafka() {
            // Stable, and byte order of the names: the order of the stored `kafka.h.<name>`.
            headers.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        }
        headers
    }

    fn owned_headers(&self) -> Option<OwnedHeaders> {
        if self.headers.is_empty() {
            return None;
        }
        Some(self.headers.iter().fold(OwnedHeaders::new(), |headers, (name, value)| {
            headers.insert(Header {
                key: name.as_str(),
                value: value.as_deref(),
            })
        }))
    }
}

/// A consumed record, copied out of librdkafka's buffer.
#[derive(Debug)]
struct Received {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: HeaderList,
    timestamp: Timestamp,
}

impl Received {
    fn of(message: &impl Message) -> Self {
        let headers = message
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(|k| k.to_vec()),
            value: message.payload().map(|v| v.to_vec()),
            headers,
            timestamp: message.timestamp(),
        }
    }
}

/// Bytes for an error message: short ones as text, long ones by length and prefix.
fn show(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.len() <= 40 => format!("{:?}", String::from_utf8_lossy(b)),
        Some(b) => format!("{} bytes starting {:?}", b.len(), String::from_utf8_lossy(&b[..24])),
    }
}

fn show_headers(headers: &HeaderList) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(name, value)| format!("{name}={}", show(value)))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// A delivered record: where the broker put it, and the time it was produced with.
struct Produced {
    partition: i32,
    offset: i64,
    /// The record's CreateTime: the spec's own, or the wall-clock time it was enqueued at.
    timestamp_ms: i64,
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    since_epoch.as_millis() as i64
}

/// Enqueues every record before awaiting any delivery, so that the producer batches them
/// (up to `linger.ms`), then awaits each delivery report in order.
///
/// A record without a time of its own is given the time at enqueueing, as librdkafka would
/// give it (`rd_kafka_msg_new0`: a timestamp of 0 becomes the current time); the batch on the
/// wire is the same. The case knows the time that way instead of from the delivery report,
/// which carries the Produce response's LogAppendTime when that is not -1: Kafka answers -1
/// for a CreateTime topic, librdkafka's mock cluster 1234 (rdkafka_mock_handlers.c,
/// rd_kafka_mock_handle_Produce), and the record time is what is checked, not that answer.
async fn produce_all(
    producer: &CaseProducer,
    topic: &str,
    partition: i32,
    specs: &[Spec],
) -> anyhow::Result<Vec<Produced>> {
    let mut pending = Vec::with_capacity(specs.len());
    for spec in specs {
        let timestamp_ms = spec.timestamp.unwrap_or_else(now_ms);
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).partition(partition);
        if let Some(key) = &spec.key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = &spec.value {
            record = record.payload(value.as_slice());
        }
        record = record.timestamp(timestamp_ms);
        if let Some(headers) = spec.owned_headers() {
            record = record.headers(headers);
        }
        let delivery = producer
            .producer
            .send_result(record)
            .map_err(|(e, _)| anyhow!("enqueueing record {:?}: {e}", spec.label))?;
        pending.push((delivery, timestamp_ms));
    }
    let mut delivered = Vec::with_capacity(pending.len());
    for (spec, (delivery, timestamp_ms)) in specs.iter().zip(pending) {
        // message.timeout.ms bounds this already; the outer timeout guards against a lost report.
        let report = tokio::time::timeout(WAIT * 2, delivery)
            .await
            .map_err(|_| anyhow!("no delivery report for record {:?}", spec.label))?
            .map_err(|_| anyhow!("delivery of record {:?} was cancelled", spec.label))?;
        let delivery = report.map_err(|(e, _)| {
            anyhow!(
                "record {:?} was not delivered: {e}; {}",
                spec.label,
                producer.events.summary()
            )
        })?;
        delivered.push(Produced {
            partition: delivery.partition,
            offset: delivery.offset,
            timestamp_ms,
        });
    }
    Ok(delivered)
}

/// Checks the delivery reports: partition as requested, offsets `first, first + 1, ...`.
fn check_deliveries(deliveries: &[Produced], partition: i32, first: i64, specs: &[Spec]) -> anyhow::Result<()> {
    for (i, (delivery, spec)) in deliveries.iter().zip(specs).enumerate() {
        let expected = first + i as i64;
        ensure!(
            delivery.partition == partition && delivery.offset == expected,
            "record {i} ({:?}) was delivered to partition {} offset {}, expected partition {partition} offset {expected}",
            spec.label,
            delivery.partition,
            delivery.offset
        );
    }
    Ok(())
}

enum Event {
    Record(Received),
    /// The consumer reached the partition's high watermark (`enable.partition.eof`).
    EndOfPartition,
}

async fn next_event(consumer: &StreamConsumer, deadline: Instant) -> anyhow::Result<Event> {
    match tokio::time::timeout_at(deadline, consumer.recv()).await {
        Err(_) => bail!("no record and no end of partition within {WAIT:?}"),
        Ok(Err(KafkaError::PartitionEOF(_))) => Ok(Event::EndOfPartition),
        Ok(Err(e)) => Err(e).context("consuming"),
        Ok(Ok(message)) => Ok(Event::Record(Received::of(&message))),
    }
}

/// Consumes exactly `n` records: waits (up to [`WAIT`]) for `n` records, passing over
/// end-of-partition events between them, then requires the next event to be the end of the
/// partition, so that a record beyond the `n` fails the case.
async fn consume_exactly(consumer: &StreamConsumer, n: usize) -> anyhow::Result<Vec<Received>> {
    let deadline = Instant::now() + WAIT;
    let mut records = Vec::with_capacity(n);
    while records.len() < n {
        match next_event(consumer, deadline)
            .await
            .with_context(|| format!("after {} of {n} records", records.len()))?
        {
            Event::Record(record) => records.push(record),
            Event::EndOfPartition => {}
        }
    }
    match next_event(consumer, deadline)
        .await
        .with_context(|| format!("waiting for the end of the partition after {n} records"))?
    {
        Event::EndOfPartition => Ok(records),
        Event::Record(extra) => bail!(
            "a record beyond the {n} expected: offset {} key {} value {}",
            extra.offset,
            show(&extra.key),
            show(&extra.value)
        ),
    }
}

/// Compares every field of each received record with its spec and delivery report: offsets
/// `first..`, in order, key, value (null vs empty), headers (order per form), and the
/// timestamp, exact to the millisecond, as CreateTime.
fn check_received(
    received: &[Received],
    specs: &[Spec],
    deliveries: &[Produced],
    partition: i32,
    first: i64,
    profile: Profile,
) -> anyhow::Result<()> {
    ensure!(
        received.len() == specs.len(),
        "{} records read, {} produced",
        received.len(),
        specs.len()
    );
    for (i, ((got, spec), delivery)) in received.iter().zip(specs).zip(deliveries).enumerate() {
        let label = spec.label;
        let offset = first + i as i64;
        ensure!(
            got.partition == partition && got.offset == offset,
            "record {i} ({label:?}): read from partition {} offset {}, expected partition {partition} offset {offset}",
            got.partition,
            got.offset
        );
        ensure!(
            got.key == spec.key,
            "record {i} ({label:?}): key {} came back as {}",
            show(&spec.key),
            show(&got.key)
        );
        ensure!(
            got.value == spec.value,
            "record {i} ({label:?}): value {} came back as {}",
            show(&spec.value),
            show(&got.value)
        );
        let headers = spec.expected_headers(profile);
        ensure!(
            got.headers == headers,
            "record {i} ({label:?}): headers sent as {}, expected back as {}, came back as {}",
            show_headers(&spec.headers),
            show_headers(&headers),
            show_headers(&got.headers)
        );
        let expected_ms = delivery.timestamp_ms;
        ensure!(
            got.timestamp == Timestamp::CreateTime(expected_ms),
            "record {i} ({label:?}): timestamp {:?}, expected CreateTime({expected_ms})",
            got.timestamp
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// CreateTopics with 3 partitions, Metadata lists them (each led by a listed broker, replicas
/// and ISR that broker alone), a second CreateTopics answers TOPIC_ALREADY_EXISTS, DeleteTopics
/// removes the topic from Metadata, and a second DeleteTopics answers UNKNOWN_TOPIC_OR_PARTITION.
/// librdkafka's metadata for all topics (a regex subscription's, an admin listing's) lists a
/// topic just created. Its request carries three bytes past the body, which closed the
/// connection until LIMIT-TRAILING-BYTES-1 ignored them as Kafka does.
pub async fn rdkafka_metadata_for_all_topics(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-all-topics");
    create_topic(&endpoint, &topic, 2).await?;
    let client = metadata_client(&endpoint)?;
    let listed = {
        let client = client.clone();
        blocking(move || client.fetch_metadata(None, WAIT).context("Metadata for all topics")).await?
    };
    ensure!(
        topic_state(&listed, &topic) == TopicState::Partitions(vec![0, 1]),
        "{topic} in the all-topics metadata: {:?}",
        topic_state(&listed, &topic)
    );
    close(client).await;
    Ok(Outcome::Passed)
}

pub async fn admin_client_creates_and_deletes_a_topic(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DeleteTopics]).await? {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("rdkafka-admin");
    let admin = admin_client(&endpoint)?;
    let metadata_client = metadata_client(&endpoint)?;
    let new_topic = NewTopic::new(&topic, 3, TopicReplication::Fixed(1));

    let created = admin
        .create_topics([&new_topic], &admin_options())
        .await
        .context("CreateTopics")?;
    ensure!(
        created == [Ok(topic.clone())],
        "CreateTopics of a new topic: {created:?}"
    );

    let metadata = await_topic_state(
        &metadata_client,
        &topic,
        "3 partitions",
        |s| matches!(s, TopicState::Partitions(p) if sorted(p.clone()) == [0, 1, 2]),
    )
    .await?;
    let brokers: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    let listed = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| anyhow!("{topic} vanished from Metadata"))?;
    for p in listed.partitions() {
        ensure!(p.error().is_none(), "partition {} reports {:?}", p.id(), p.error());
        ensure!(
            brokers.contains(&p.leader()),
            "partition {} is led by {}, not one of the brokers {brokers:?}",
            p.id(),
            p.leader()
        );
        ensure!(
            p.replicas() == [p.leader()] && p.isr() == [p.leader()],
            "partition {}: replicas {:?} and ISR {:?}, expected the leader {} alone",
            p.id(),
            p.replicas(),
            p.isr(),
            p.leader()
        );
    }

    let again = admin
        .create_topics([&new_topic], &admin_options())
        .await
        .context("second CreateTopics")?;
    ensure!(
        again == [Err((topic.clone(), RDKafkaErrorCode::TopicAlreadyExists))],
        "CreateTopics of an existing topic: {again:?}, expected TopicAlreadyExists"
    );

    let deleted = admin
        .delete_topics(&[&topic], &admin_options())
        .await
        .context("DeleteTopics")?;
    ensure!(
        deleted == [Ok(topic.clone())],
        "DeleteTopics of an existing topic: {deleted:?}"
    );
    await_topic_state(&metadata_client, &topic, "the topic gone", |s| {
        matches!(
            s,
            TopicState::Absent | TopicState::Error(RDKafkaErrorCode::UnknownTopicOrPartition)
        )
    })
    .await?;

    let deleted_again = admin
        .delete_topics(&[&topic], &admin_options())
        .await
        .context("second DeleteTopics")?;
    ensure!(
        deleted_again == [Err((topic.clone(), RDKafkaErrorCode::UnknownTopicOrPartition))],
        "DeleteTopics of a deleted topic: {deleted_again:?}, expected UnknownTopicOrPartition"
    );

    close(metadata_client).await;
    close(admin).await;
    Ok(Outcome::Passed)
}

/// A record time far from now (2009-02-13T23:31:30.123Z), so that a wrong unit or a substituted
/// append time cannot pass.
const EXPLICIT_TIMESTAMP_MS: i64 = 1_234_567_890_123;

/// The length of the one large, compressible value among [`mapping_specs`].
const BIG_VALUE_LEN: usize = 4096;

/// The records of the mapping cases: every stored form, in one producer batch.
fn mapping_specs() -> Vec<Spec> {
    // Compressible, and large enough that librdkafka keeps the compressed batch (it sends a
    // batch uncompressed when compression would not make it smaller).
    let big_value: Vec<u8> = b"the quick brown fox jumps over the lazy dog; "
        .iter()
        .copied()
        .cycle()
        .take(BIG_VALUE_LEN)
        .collect();
    let long_key: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
    vec![
        // Plain: MAP-KEY-1, MAP-VALUE-2, MAP-HEADER-1 (headers come back sorted).
        Spec::new("plain, keyed, headers zeta then alpha")
            .key("key-plain")
            .value(big_value)
            .header("zeta", Some(b"last letter"))
            .header("alpha", Some(b"first letter")),
        // Placeholder, null value: MAP-VALUE-1, headers still sorted.
        Spec::new("tombstone")
            .key("key-tombstone")
            .header("zeta", Some(b"z"))
            .header("alpha", Some(b"a")),
        // Placeholder, empty value, null key: MAP-VALUE-1, MAP-KEY-1.
        Spec::new("empty value, null key").value(Vec::new()),
        // A single zero byte is a plain value, not a placeholder: MAP-VALUE-2.
        Spec::new("value of one zero byte").key("key-zero").value(vec![0u8]),
        // Envelope, key over 255 bytes: ENV-TRIGGER-KEY-LEN-1; headers keep their order.
        Spec::new("300-byte key")
            .key(long_key)
            .value("value-long-key")
            .header("zeta", Some(b"1"))
            .header("alpha", Some(b"2"))
            .envelope(),
        // Envelope, null header value: ENV-TRIGGER-HEADER-VALUE-1.
        Spec::new("null header value")
            .key("key-null-header")
            .value("value-null-header")
            .header("zeta", None)
            .header("alpha", Some(b"a"))
            .envelope(),
        // Envelope, repeated header name: ENV-TRIGGER-REPEAT-1.
        Spec::new("repeated header name")
            .key("key-repeat")
            .value("value-repeat")
            .header("dup", Some(b"first"))
            .header("alpha", Some(b"between"))
            .header("dup", Some(b"second"))
            .envelope(),
        // Explicit timestamp: MAP-TS-1, exact to the millisecond.
        Spec::new("explicit timestamp")
            .key("key-timestamp")
            .value("value-timestamp")
            .timestamp(EXPLICIT_TIMESTAMP_MS),
        // And a plain record after it, at the current time again.
        Spec::new("plain after the explicit timestamp")
            .key("key-last")
            .value("value-last")
            .header("h", Some(b"v")),
    ]
}

/// Produces [`mapping_specs`] in one batch compressed with `codec` to a new one-partition topic,
/// then reads them back from the beginning and checks every field.
async fn produce_and_consume_every_mapping_case(endpoint: Endpoint, codec: &str) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic(&format!("rdkafka-mapping-{codec}"));
    create_topic(&endpoint, &topic, 1).await?;
    let specs = mapping_specs();

    let producer = producer(
        &endpoint,
        &[
            ("compression.type", codec),
            // Every record is enqueued before any is sent; linger lets them share a batch.
            ("linger.ms", "100"),
            ("batch.num.messages", "1000"),
            // Statistics report the size of each batch as sent: see below.
            ("statistics.interval.ms", "100"),
        ],
    )?;
    let deliveries = produce_all(&producer, &topic, 0, &specs)
        .await
        .with_context(|| format!("producing with compression.type={codec}"))?;
    check_deliveries(&deliveries, 0, 0, &specs)?;
    // librdkafka quietly sends a batch uncompressed when it concludes from ApiVersions that the
    // broker lacks the codec (lz4 needs FindCoordinator v0 advertised, zstd Produce v7 and
    // Fetch v10), or when compressing does not make the batch smaller. Only the size of what it
    // sent tells: with the big value inside, an uncompressed batch is larger than that value,
    // and a compressed one much smaller.
    let sent = producer.events.batches_of(&topic).await?;
    if codec == "none" {
        ensure!(
            sent.max_bytes > BIG_VALUE_LEN as i64,
            "the uncompressed batch measured {} bytes, not more than the {BIG_VALUE_LEN}-byte \
             value it holds: the size check cannot tell compressed from uncompressed ({sent:?})",
            sent.max_bytes
        );
    } else {
        ensure!(
            sent.max_bytes < BIG_VALUE_LEN as i64,
            "librdkafka sent the records uncompressed ({} bytes for {} batch(es), more than the \
             {BIG_VALUE_LEN}-byte value alone) although compression.type={codec}, so decoding {codec} \
             (BATCH-COMPRESSION-1) was not exercised; librdkafka does this when the broker's \
             ApiVersions fail its gate for the codec (lz4: FindCoordinator v0; zstd: Produce v7 \
             and Fetch v10)",
            sent.max_bytes,
            sent.batches
        );
    }

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::Beginning)?;
    let received = consume_exactly(&consumer, specs.len())
        .await
        .with_context(|| format!("reading back what was produced with {codec}"))?;
    check_received(&received, &specs, &deliveries, 0, 0, endpoint.profile)
        .with_context(|| format!("compression.type={codec}"))?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

pub async fn produce_and_consume_every_mapping_case_with_none(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "none").await
}

pub async fn produce_and_consume_every_mapping_case_with_gzip(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "gzip").await
}

pub async fn produce_and_consume_every_mapping_case_with_snappy(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "snappy").await
}

pub async fn produce_and_consume_every_mapping_case_with_lz4(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "lz4").await
}

pub async fn produce_and_consume_every_mapping_case_with_zstd(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "zstd").await
}

fn numbered_specs(prefix: &'static str, range: std::ops::Range<usize>) -> Vec<Spec> {
    range
        .map(|i| {
            Spec::new(prefix)
                .key(format!("{prefix}-key-{i}"))
                .value(format!("{prefix}-value-{i}"))
        })
        .collect()
}

/// An idempotent producer (InitProducerId, then batches with producer id, epoch and sequences)
/// delivers 100 records at offsets 0..100, and they read back in order.
pub async fn idempotent_producer_produces_and_reads_back(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const N: usize = 100;
    let topic = endpoint.unique_topic("rdkafka-idempotent");
    create_topic(&endpoint, &topic, 1).await?;
    let specs = numbered_specs("idempotent", 0..N);

    let producer = producer(&endpoint, &[("enable.idempotence", "true"), ("linger.ms", "5")])?;
    let deliveries = produce_all(&producer, &topic, 0, &specs)
        .await
        .context("producing with enable.idempotence=true")?;
    check_deliveries(&deliveries, 0, 0, &specs)?;
    if let Some((code, reason)) = producer.producer.client().fatal_error() {
        bail!("the idempotent producer raised a fatal error: {code:?}: {reason}");
    }

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::Beginning)?;
    let received = consume_exactly(&consumer, N).await?;
    check_received(&received, &specs, &deliveries, 0, 0, endpoint.profile)?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

/// A consumer assigned at END after 5 records resolves END to 5 (ListOffsets LATEST = HW): it
/// first reports the end of the partition, sees nothing of the first 5, and then reads exactly
/// the 3 records produced after that, at offsets 5, 6, 7.
pub async fn consumer_starting_at_latest_sees_only_new_records(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-latest");
    create_topic(&endpoint, &topic, 1).await?;
    let producer = producer(&endpoint, &[])?;

    let old = numbered_specs("old", 0..5);
    let old_deliveries = produce_all(&producer, &topic, 0, &old).await?;
    check_deliveries(&old_deliveries, 0, 0, &old)?;

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::End)?;
    // The end-of-partition event means END was resolved and the fetcher sits at the HW: only
    // now are the new records produced, so they cannot have been counted into END.
    match next_event(&consumer, Instant::now() + WAIT)
        .await
        .context("waiting for the consumer at END to reach the end of the partition")?
    {
        Event::EndOfPartition => {}
        Event::Record(r) => bail!(
            "a consumer starting at END read an existing record: offset {} value {}",
            r.offset,
            show(&r.value)
        ),
    }

    let new = numbered_specs("new", 5..8);
    let new_deliveries = produce_all(&producer, &topic, 0, &new).await?;
    check_deliveries(&new_deliveries, 0, 5, &new)?;
    let received = consume_exactly(&consumer, new.len()).await?;
    check_received(&received, &new, &new_deliveries, 0, 5, endpoint.profile)?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

/// Watermarks (ListOffsets EARLIEST and LATEST) of a partition as it fills: (0, 0) empty,
/// (0, 1) after one record, (0, 2) after two, (0, 7) after seven; the other partition of the
/// topic stays (0, 0).
pub async fn fetch_watermarks_match_produced_count(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-watermarks");
    create_topic(&endpoint, &topic, 2).await?;
    let client = metadata_client(&endpoint)?;
    let producer = producer(&endpoint, &[])?;

    let marks = fetch_watermarks(&client, &topic, 0).await?;
    ensure!(
        marks == (0, 0),
        "watermarks of an empty partition: {marks:?}, expected (0, 0)"
    );

    let specs = numbered_specs("watermark", 0..7);
    let mut produced = 0;
    for upto in [1, 2, 7] {
        let batch = &specs[produced..upto];
        let deliveries = produce_all(&producer, &topic, 0, batch).await?;
        check_deliveries(&deliveries, 0, produced as i64, batch)?;
        produced = upto;
        let marks = fetch_watermarks(&client, &topic, 0).await?;
        ensure!(
            marks == (0, produced as i64),
            "watermarks after {produced} records: {marks:?}, expected (0, {produced})"
        );
    }
    let other = fetch_watermarks(&client, &topic, 1).await?;
    ensure!(
        other == (0, 0),
        "watermarks of the partition nothing was produced to: {other:?}, expected (0, 0)"
    );

    close(producer.producer).await;
    close(client).await;
    Ok(Outcome::Passed)
}
