//! What the librdkafka cases share: clients configured as the module doc says, bounded waits for
//! topics and records, and the record specs produced and checked back.

use super::*;
use rdkafka::statistics::Window;

/// How long any one wait (a delivery, a metadata change, the records of a consume) may take
/// before the case fails.
pub(super) const WAIT: Duration = Duration::from_secs(30);

/// Between two metadata polls while waiting for a real Kafka cluster to converge. The gateway
/// answers right the first time, so it never waits this.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------

pub(super) fn base_config(endpoint: &Endpoint) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &endpoint.bootstrap)
        .set("client.id", "kafka-iggy-conformance")
        // Notices and above (no `debug`); producers keep them to quote when a delivery fails.
        .set_log_level(RDKafkaLogLevel::Notice);
    config
}

pub(super) fn admin_client(endpoint: &Endpoint) -> anyhow::Result<AdminClient<DefaultClientContext>> {
    base_config(endpoint).create().context("creating the admin client")
}

pub(super) fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(WAIT))
        .operation_timeout(Some(WAIT))
}

/// A producer with `acks=all`, a bounded delivery timeout and the given extra settings.
pub(super) fn producer(endpoint: &Endpoint, extra: &[(&str, &str)]) -> anyhow::Result<CaseProducer> {
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
pub(super) struct BatchStats {
    pub(super) batches: i64,
    /// The largest batch, in bytes as sent (after compression).
    pub(super) max_bytes: i64,
}

impl BatchStats {
    /// Adds one statistics window of a topic: its batch count and its batch size. librdkafka
    /// rolls the two windows one after the other, so a batch finished between the two rolls is
    /// counted in one emission and sized in the next: each is taken on its own (the CI run of
    /// f4e4e4d saw a batch counted with no size, and the mapping case failed on it).
    fn absorb(&mut self, batch_count: &Window, batch_size: &Window) {
        self.batches += batch_count.cnt;
        if batch_size.cnt > 0 {
            self.max_bytes = self.max_bytes.max(batch_size.max);
        }
    }
}

/// What a librdkafka instance reported on its own: log lines at `log_level` (`debug` is off)
/// and client errors, to quote when something fails; and, when `statistics.interval.ms` is
/// set, the size of the batches it sent, which is how a case tells whether a batch was
/// compressed.
#[derive(Clone)]
pub(super) struct ClientEvents {
    pub(super) lines: Arc<Mutex<Vec<String>>>,
    pub(super) batches: Arc<watch::Sender<HashMap<String, BatchStats>>>,
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
    pub(super) const MAX_LINES: usize = 200;

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

    /// Waits (up to [`WAIT`]) for statistics that count at least one batch sent to `topic` and
    /// give a batch's size.
    pub(super) async fn batches_of(&self, topic: &str) -> anyhow::Result<BatchStats> {
        let mut receiver = self.batches.subscribe();
        let counted_and_sized =
            |m: &HashMap<String, BatchStats>| m.get(topic).is_some_and(|b| b.batches > 0 && b.max_bytes > 0);
        let seen = tokio::time::timeout(WAIT, receiver.wait_for(counted_and_sized))
            .await
            .map_err(|_| anyhow!("no statistics counting and sizing a batch sent to {topic} within {WAIT:?}"))?
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
                if topic.batchcnt.cnt > 0 || topic.batchsize.cnt > 0 {
                    all.entry(name.clone())
                        .or_default()
                        .absorb(&topic.batchcnt, &topic.batchsize);
                }
            }
        });
    }
}

/// A producer and what its librdkafka instance reported.
pub(super) struct CaseProducer {
    pub(super) producer: FutureProducer<ClientEvents>,
    pub(super) events: ClientEvents,
}

/// A consumer without `group.id`, for metadata and watermarks only.
pub(super) fn metadata_client(endpoint: &Endpoint) -> anyhow::Result<Arc<BaseConsumer>> {
    let consumer: BaseConsumer = base_config(endpoint)
        .set("allow.auto.create.topics", "false")
        .create()
        .context("creating the metadata client")?;
    Ok(Arc::new(consumer))
}

/// A consumer with `partition` of `topic` assigned at `start`; see the module doc for why each
/// setting is there.
pub(super) fn assigned_consumer(
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
pub(super) async fn blocking<T, F>(f: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> anyhow::Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.context("blocking task")?
}

/// Drops a client on the blocking pool: closing a consumer and destroying a librdkafka handle
/// wait for its threads.
pub(super) async fn close<T: Send + 'static>(client: T) {
    let _ = tokio::task::spawn_blocking(move || drop(client)).await;
}

pub(super) async fn fetch_metadata(client: &Arc<BaseConsumer>, topic: &str) -> anyhow::Result<Metadata> {
    let client = client.clone();
    let topic = topic.to_string();
    blocking(move || {
        client
            .fetch_metadata(Some(&topic), WAIT)
            .with_context(|| format!("Metadata for {topic}"))
    })
    .await
}

pub(super) async fn fetch_watermarks(
    client: &Arc<BaseConsumer>,
    topic: &str,
    partition: i32,
) -> anyhow::Result<(i64, i64)> {
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
pub(super) enum TopicState {
    Absent,
    Error(RDKafkaErrorCode),
    /// Partition ids, in the order listed.
    Partitions(Vec<i32>),
}

pub(super) fn topic_state(metadata: &Metadata, topic: &str) -> TopicState {
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
pub(super) async fn await_topic_state(
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
pub(super) async fn create_topic(endpoint: &Endpoint, topic: &str, partitions: i32) -> anyhow::Result<()> {
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

pub(super) fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------

pub(super) type HeaderList = Vec<(String, Option<Vec<u8>>)>;

/// One record to produce, and how it must come back.
pub(super) struct Spec {
    pub(super) label: &'static str,
    pub(super) key: Option<Vec<u8>>,
    pub(super) value: Option<Vec<u8>>,
    /// As sent, in this order.
    pub(super) headers: HeaderList,
    pub(super) timestamp: Option<i64>,
    /// Envelope records keep their headers' order; plain and placeholder records come back
    /// sorted by name (MAP-HEADER-1) from the gateway, in the order sent from Kafka.
    pub(super) envelope: bool,
}

impl Spec {
    pub(super) fn new(label: &'static str) -> Self {
        Self {
            label,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
            envelope: false,
        }
    }
    pub(super) fn key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub(super) fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = Some(value.into());
        self
    }
    pub(super) fn header(mut self, name: &str, value: Option<&[u8]>) -> Self {
        self.headers.push((name.to_string(), value.map(|v| v.to_vec())));
        self
    }
    pub(super) fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }
    pub(super) fn envelope(mut self) -> Self {
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
pub(super) struct Received {
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) key: Option<Vec<u8>>,
    pub(super) value: Option<Vec<u8>>,
    pub(super) headers: HeaderList,
    pub(super) timestamp: Timestamp,
}

impl Received {
    pub(super) fn of(message: &impl Message) -> Self {
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
pub(super) fn show(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.len() <= 40 => format!("{:?}", String::from_utf8_lossy(b)),
        Some(b) => format!("{} bytes starting {:?}", b.len(), String::from_utf8_lossy(&b[..24])),
    }
}

pub(super) fn show_headers(headers: &HeaderList) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(name, value)| format!("{name}={}", show(value)))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// A delivered record: where the broker put it, and the time it was produced with.
pub(super) struct Produced {
    pub(super) partition: i32,
    pub(super) offset: i64,
    /// The record's CreateTime: the spec's own, or the wall-clock time it was enqueued at.
    pub(super) timestamp_ms: i64,
}

pub(super) fn now_ms() -> i64 {
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
pub(super) async fn produce_all(
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
pub(super) fn check_deliveries(
    deliveries: &[Produced],
    partition: i32,
    first: i64,
    specs: &[Spec],
) -> anyhow::Result<()> {
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

pub(super) enum Event {
    Record(Received),
    /// The consumer reached the partition's high watermark (`enable.partition.eof`).
    EndOfPartition,
}

pub(super) async fn next_event(consumer: &StreamConsumer, deadline: Instant) -> anyhow::Result<Event> {
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
pub(super) async fn consume_exactly(consumer: &StreamConsumer, n: usize) -> anyhow::Result<Vec<Received>> {
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
pub(super) fn check_received(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn window(cnt: i64, max: i64) -> Window {
        Window {
            cnt,
            max,
            ..Window::default()
        }
    }

    /// The CI run of f4e4e4d: a batch counted in one emission and sized in the next is one
    /// batch of its size, and a window with no batch sized leaves the size alone.
    #[test]
    fn a_batch_counted_and_sized_in_two_emissions_is_one_batch_of_its_size() {
        let mut seen = BatchStats::default();
        seen.absorb(&window(1, 0), &window(0, 0));
        assert_eq!((seen.batches, seen.max_bytes), (1, 0), "counted, not yet sized");
        seen.absorb(&window(0, 0), &window(1, 4_200));
        assert_eq!((seen.batches, seen.max_bytes), (1, 4_200));
        seen.absorb(&window(2, 0), &window(0, 0));
        assert_eq!((seen.batches, seen.max_bytes), (3, 4_200));
    }
}
