//! Consumer-group cases: subscribe()-based librdkafka consumers and committed offsets.
//!
//! Every case creates its own topics and groups (unique names) and runs against any Kafka
//! endpoint. Group membership goes through librdkafka's classic group protocol; what a
//! high-level client cannot express (standalone commits of special values, the offsets of a
//! whole group, over-long group ids, DeleteGroups) goes over the raw wire client, always to
//! the coordinator FindCoordinator names.
//!
//! Consumers (see [`support::GroupConsumer`]):
//!
//! - `session.timeout.ms=6000` (Kafka's default `group.min.session.timeout.ms`, so any broker
//!   accepts it) and `heartbeat.interval.ms=500`, so that a rebalance starts within half a
//!   second of a member joining; `max.poll.interval.ms=20000` bounds the rebalance timeout.
//! - `enable.auto.commit=false`: the cases commit explicitly and synchronously, then read the
//!   commit back, so nothing depends on when librdkafka would have committed.
//! - `auto.offset.reset` is always explicit: `earliest` where a lost commit must show up as a
//!   re-read, `latest` where it must show up as skipped records.
//! - `enable.partition.eof=true`: reaching the high watermark is an event, which is how a case
//!   knows without sleeping that no record precedes it.
//! - `partition.assignment.strategy=range`, an eager strategy: a rebalance revokes everything,
//!   so two members never own one partition at the same time in a settled generation.
//! - One thread per consumer polls it (100 ms poll period) and forwards records, partition
//!   ends and errors to the case; every wait is bounded by [`support::WAIT`] and fails the
//!   case when it runs out. Nothing sleeps to synchronise.

use super::{advertised_max, require_apis, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context as _};
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use rdkafka::Offset;
use std::collections::{BTreeMap, BTreeSet};
use support::*;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            two_members_split_partitions_disjointly,
            ["GROUP-JOIN-1", "GROUP-SYNC-1"]
        ),
        case!(
            leaving_member_hands_over_at_committed_offsets,
            ["GROUP-LEAVE-1", "CO-ENCODE-1"]
        ),
        case!(restarted_consumer_resumes_at_committed_offsets, ["CO-ENCODE-1"]),
        // The commit of a caught-up consumer is the one the real server refuses verbatim (DIFF-2).
        case!(caught_up_commit_survives_a_consumer_restart, ["CO-ENCODE-1"]),
        case!(
            commit_of_zero_on_an_empty_partition_survives_records_arriving,
            ["CO-ZERO-1"]
        ),
        case!(
            offset_delete_removes_the_named_offsets_and_spares_subscribed_topics,
            ["OFFSETDELETE-1", "OFFSETDELETE-2"]
        ),
        case!(
            commit_of_minus_one_deletes_the_committed_offset,
            ["CO-DELETE-1", "CO-METADATA-1"],
            deviates: ["CO-DELETE-1", "CO-METADATA-1"]
        ),
        case!(
            offset_fetch_with_null_topics_lists_committed_partitions,
            ["CO-FETCH-ALL-1"]
        ),
        case!(
            group_id_longer_than_246_bytes_is_invalid,
            ["CO-GROUP-ID-1"],
            deviates: ["CO-GROUP-ID-1"]
        ),
        case!(describe_list_and_delete_groups, ["GROUP-DELETE-1"]),
        case!(
            member_commits_while_a_rebalance_is_prepared_not_while_it_completes,
            ["GROUP-COMMIT-1"]
        ),
        case!(
            find_coordinator_for_transactions_is_refused,
            ["GROUP-TXN-COORDINATOR-1"],
            deviates: ["GROUP-TXN-COORDINATOR-1"]
        ),
    ]
}

/// Clients, raw group requests and waits shared by the cases and by the gateway-specific
/// group cases (`gateway_cases`).
pub mod support {
    use crate::endpoint::Endpoint;
    use anyhow::{anyhow, bail, ensure, Context as _};
    use bytes::Bytes;
    use kafka_protocol::messages::describe_groups_response::DescribedGroup;
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::list_groups_response::ListedGroup;
    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use kafka_protocol::messages::{
        ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
        FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
        JoinGroupRequest, JoinGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest,
        SyncGroupResponse,
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
        commit_one, fetch_one, fetched, offset_commit, offset_fetch, FetchedOffset, COMMIT_LEADER_EPOCH,
        COMMIT_METADATA, OFFSET_COMMIT_V, OFFSET_FETCH_V,
    };

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

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

    /// What a consumer's librdkafka instance logged, to quote when a wait fails, and how many
    /// assignments it has applied.
    #[derive(Clone)]
    pub struct ClientLog {
        lines: Arc<Mutex<Vec<String>>>,
        assignments: Arc<watch::Sender<u64>>,
    }

    impl Default for ClientLog {
        fn default() -> Self {
            Self {
                lines: Arc::default(),
                assignments: Arc::new(watch::channel(0).0),
            }
        }
    }

    impl ClientLog {
        const MAX_LINES: usize = 200;

        fn push(&self, line: String) {
            let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
            if lines.len() < Self::MAX_LINES {
                lines.push(line);
            }
        }

        pub fn summary(&self) -> String {
            let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
            if lines.is_empty() {
                "librdkafka logged nothing".into()
            } else {
                format!("librdkafka logged: {}", lines.join(" | "))
            }
        }
    }

    impl ClientContext for ClientLog {
        fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
            self.push(format!("{level:?} {fac}: {message}"));
        }

        fn error(&self, error: KafkaError, reason: &str) {
            self.push(format!("error {error}: {reason}"));
        }
    }

    impl ConsumerContext for ClientLog {
        /// Called on the poll thread once librdkafka's rebalance callback has applied a change.
        fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
            if let Rebalance::Assign(_) = rebalance {
                self.assignments.send_modify(|n| *n += 1);
            }
        }
    }

    /// What a consumer delivered, in order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Event {
        Record {
            partition: i32,
            offset: i64,
        },
        /// The consumer reached the high watermark of the partition.
        Eof(i32),
    }

    /// Every event a consumer delivered so far.
    #[derive(Debug, Default)]
    pub struct History(pub Vec<Event>);

    impl History {
        /// The offsets delivered from `partition`, in delivery order (with any re-delivery).
        pub fn offsets(&self, partition: i32) -> Vec<i64> {
            self.0
                .iter()
                .filter_map(|e| match *e {
                    Event::Record { partition: p, offset } if p == partition => Some(offset),
                    _ => None,
                })
                .collect()
        }

        /// The distinct offsets delivered from `partition`.
        pub fn distinct(&self, partition: i32) -> BTreeSet<i64> {
            self.offsets(partition).into_iter().collect()
        }

        /// Whether every offset of `range` was delivered from `partition`.
        pub fn has_all(&self, partition: i32, range: std::ops::Range<i64>) -> bool {
            let seen = self.distinct(partition);
            range.into_iter().all(|o| seen.contains(&o))
        }

        pub fn records(&self) -> usize {
            self.0.iter().filter(|e| matches!(e, Event::Record { .. })).count()
        }

        pub fn eofs(&self, partition: i32) -> usize {
            self.0.iter().filter(|e| **e == Event::Eof(partition)).count()
        }
    }

    /// A `subscribe()` consumer in a group, polled by a thread of its own that forwards what
    /// it delivers and publishes its assignment.
    pub struct GroupConsumer {
        name: String,
        topic: String,
        consumer: Option<Arc<BaseConsumer<ClientLog>>>,
        pump: Option<std::thread::JoinHandle<()>>,
        stop: Arc<AtomicBool>,
        events: mpsc::UnboundedReceiver<Result<Event, String>>,
        assignment: watch::Receiver<BTreeSet<i32>>,
        log: ClientLog,
        /// Everything delivered so far.
        pub history: History,
        /// Errors the consumer reported (transient ones are normal around a rebalance or a
        /// restart); quoted when a wait fails.
        pub errors: Vec<String>,
    }

    impl GroupConsumer {
        /// Subscribes a new member of `group` to `topic`, through `bootstrap`.
        pub fn subscribe(
            name: &str,
            bootstrap: &str,
            group: &str,
            topic: &str,
            auto_offset_reset: &str,
        ) -> anyhow::Result<Self> {
            Self::subscribe_with(name, bootstrap, group, topic, auto_offset_reset, &[])
        }

        /// [`GroupConsumer::subscribe`] with some settings overridden.
        pub fn subscribe_with(
            name: &str,
            bootstrap: &str,
            group: &str,
            topic: &str,
            auto_offset_reset: &str,
            overrides: &[(&str, &str)],
        ) -> anyhow::Result<Self> {
            let mut config = base_config(bootstrap);
            config
                .set("group.id", group)
                .set("session.timeout.ms", "6000")
                .set("heartbeat.interval.ms", "500")
                .set("max.poll.interval.ms", "20000")
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", auto_offset_reset)
                .set("enable.partition.eof", "true")
                .set("partition.assignment.strategy", "range")
                .set("allow.auto.create.topics", "false")
                .set("check.crcs", "true");
            for (key, value) in overrides {
                config.set(*key, *value);
            }
            Self::from_config(name, topic, &config)
        }

        /// A member subscribed to `topic`, configured by `config` alone (the KIP-848 cases set
        /// `group.protocol=consumer`, which refuses the classic settings above).
        pub fn from_config(name: &str, topic: &str, config: &ClientConfig) -> anyhow::Result<Self> {
            let log = ClientLog::default();
            let consumer: BaseConsumer<ClientLog> = config
                .create_with_context(log.clone())
                .with_context(|| format!("creating {name}"))?;
            consumer
                .subscribe(&[topic])
                .with_context(|| format!("{name} subscribing to {topic}"))?;
            let consumer = Arc::new(consumer);
            let stop = Arc::new(AtomicBool::new(false));
            let (events_tx, events) = mpsc::unbounded_channel();
            let (assignment_tx, assignment) = watch::channel(BTreeSet::new());
            let pump = std::thread::Builder::new()
                .name(format!("poll {name}"))
                .spawn({
                    let (consumer, stop, topic) = (consumer.clone(), stop.clone(), topic.to_string());
                    move || pump(&consumer, &stop, &events_tx, &assignment_tx, &topic)
                })
                .context("spawning the poll thread")?;
            Ok(Self {
                name: name.to_string(),
                topic: topic.to_string(),
                consumer: Some(consumer),
                pump: Some(pump),
                stop,
                events,
                assignment,
                log,
                history: History::default(),
                errors: Vec::new(),
            })
        }

        fn consumer(&self) -> Arc<BaseConsumer<ClientLog>> {
            self.consumer.clone().expect("open until closed")
        }

        fn diagnostics(&self) -> String {
            format!(
                "delivered {:?}; errors {:?}; assignment {:?}; {}",
                self.history.0,
                self.errors,
                *self.assignment.borrow(),
                self.log.summary()
            )
        }

        /// The partitions of the topic assigned right now.
        pub fn assignment(&self) -> BTreeSet<i32> {
            self.assignment.borrow().clone()
        }

        /// How many assignments (rebalances that gave this member partitions, or an empty
        /// share) the consumer has applied so far.
        pub fn assignments_applied(&self) -> u64 {
            *self.log.assignments.borrow()
        }

        /// Waits until the consumer has applied more than `seen` assignments, the last of
        /// which satisfies `done`: a rebalance after a given point has completed on the client
        /// side too, not only at the coordinator.
        pub async fn wait_reassigned(
            &mut self,
            seen: u64,
            what: &str,
            done: impl Fn(&BTreeSet<i32>) -> bool,
        ) -> anyhow::Result<BTreeSet<i32>> {
            let mut applied = self.log.assignments.subscribe();
            let waited = tokio::time::timeout(WAIT, applied.wait_for(|n| *n > seen)).await;
            if waited.is_err() {
                self.drain();
                bail!(
                    "{}: no new assignment within {WAIT:?} (still {seen} applied); {}",
                    self.name,
                    self.diagnostics()
                );
            }
            self.wait_assignment(what, done).await
        }

        /// A receiver that changes with the assignment, to wait on several consumers at once.
        pub fn assignment_watch(&self) -> watch::Receiver<BTreeSet<i32>> {
            self.assignment.clone()
        }

        /// Waits until the assignment satisfies `done`; returns it.
        pub async fn wait_assignment(
            &mut self,
            what: &str,
            done: impl Fn(&BTreeSet<i32>) -> bool,
        ) -> anyhow::Result<BTreeSet<i32>> {
            let mut watch = self.assignment.clone();
            let waited = tokio::time::timeout(WAIT, watch.wait_for(|a| done(a)))
                .await
                .map(|r| r.map(|a| a.clone()));
            match waited {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(_)) => bail!("{}: the poll thread ended before {what}", self.name),
                Err(_) => {
                    self.drain();
                    bail!(
                        "{}: no assignment with {what} within {WAIT:?}; {}",
                        self.name,
                        self.diagnostics()
                    )
                }
            }
        }

        /// Receives one event or error the poll thread forwarded; false once it ended.
        /// Cancel-safe, so that a case can wait on several consumers at once.
        pub async fn recv_one(&mut self) -> bool {
            match self.events.recv().await {
                Some(Ok(event)) => self.history.0.push(event),
                Some(Err(error)) => self.errors.push(error),
                None => return false,
            }
            true
        }

        /// What it delivered, its errors, assignment and client log, for a failure message.
        pub fn report(&mut self) -> String {
            self.drain();
            format!("{}: {}", self.name, self.diagnostics())
        }

        /// Takes what has been forwarded without waiting.
        fn drain(&mut self) {
            while let Ok(event) = self.events.try_recv() {
                match event {
                    Ok(e) => self.history.0.push(e),
                    Err(e) => self.errors.push(e),
                }
            }
        }

        /// Receives until `done` holds for everything delivered so far.
        pub async fn wait_until(&mut self, what: &str, done: impl Fn(&History) -> bool) -> anyhow::Result<()> {
            let deadline = Instant::now() + WAIT;
            loop {
                if done(&self.history) {
                    return Ok(());
                }
                match tokio::time::timeout_at(deadline, self.events.recv()).await {
                    Ok(Some(Ok(event))) => self.history.0.push(event),
                    Ok(Some(Err(error))) => self.errors.push(error),
                    Ok(None) => bail!(
                        "{}: the poll thread ended before {what}; {}",
                        self.name,
                        self.diagnostics()
                    ),
                    Err(_) => bail!(
                        "{}: {what} did not happen within {WAIT:?}; {}",
                        self.name,
                        self.diagnostics()
                    ),
                }
            }
        }

        /// Commits `offsets` (partition, next offset to read) synchronously.
        pub async fn commit(&self, offsets: &[(i32, i64)]) -> anyhow::Result<()> {
            let mut list = TopicPartitionList::new();
            for &(partition, offset) in offsets {
                list.add_partition_offset(&self.topic, partition, Offset::Offset(offset))?;
            }
            let consumer = self.consumer();
            let (name, log) = (self.name.clone(), self.log.clone());
            blocking(move || {
                consumer
                    .commit(&list, CommitMode::Sync)
                    .map_err(|e| anyhow!("{name} committing {list:?}: {e}; {}", log.summary()))
            })
            .await
        }

        /// The committed offsets of `partitions`, read from the coordinator.
        pub async fn committed(&self, partitions: &[i32]) -> anyhow::Result<BTreeMap<i32, Offset>> {
            let mut list = TopicPartitionList::new();
            for &partition in partitions {
                list.add_partition(&self.topic, partition);
            }
            let consumer = self.consumer();
            let name = self.name.clone();
            let committed = blocking(move || {
                consumer
                    .committed_offsets(list, WAIT)
                    .with_context(|| format!("{name} reading its committed offsets"))
            })
            .await?;
            let mut out = BTreeMap::new();
            for e in committed.elements() {
                if let Err(error) = e.error() {
                    bail!(
                        "{}: committed offset of {}-{}: {error}",
                        self.name,
                        e.topic(),
                        e.partition()
                    );
                }
                out.insert(e.partition(), e.offset());
            }
            Ok(out)
        }

        /// Closes the consumer (it leaves the group) and waits until it has.
        pub async fn close(mut self) -> anyhow::Result<()> {
            self.stop.store(true, Ordering::Release);
            let (consumer, pump) = (self.consumer.take(), self.pump.take());
            tokio::task::spawn_blocking(move || {
                if let Some(pump) = pump {
                    let _ = pump.join();
                }
                // The last reference: librdkafka closes the consumer, LeaveGroup included.
                drop(consumer);
            })
            .await
            .context("closing the consumer")
        }
    }

    impl Drop for GroupConsumer {
        /// A case that fails early still closes its consumers, off the runtime.
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Release);
            let (consumer, pump) = (self.consumer.take(), self.pump.take());
            if consumer.is_some() || pump.is_some() {
                std::thread::spawn(move || {
                    if let Some(pump) = pump {
                        let _ = pump.join();
                    }
                    drop(consumer);
                });
            }
        }
    }

    /// The poll loop of a consumer's thread.
    fn pump(
        consumer: &BaseConsumer<ClientLog>,
        stop: &AtomicBool,
        events: &mpsc::UnboundedSender<Result<Event, String>>,
        assignment: &watch::Sender<BTreeSet<i32>>,
        topic: &str,
    ) {
        while !stop.load(Ordering::Acquire) {
            let event = match consumer.poll(POLL_PERIOD) {
                None => None,
                Some(Ok(m)) if m.topic() == topic => Some(Ok(Event::Record {
                    partition: m.partition(),
                    offset: m.offset(),
                })),
                Some(Ok(m)) => Some(Err(format!(
                    "a record of {}-{} at {}, which is not subscribed",
                    m.topic(),
                    m.partition(),
                    m.offset()
                ))),
                Some(Err(KafkaError::PartitionEOF(p))) => Some(Ok(Event::Eof(p))),
                Some(Err(e)) => Some(Err(e.to_string())),
            };
            if let Some(event) = event {
                if events.send(event).is_err() {
                    return;
                }
            }
            if let Ok(list) = consumer.assignment() {
                let now: BTreeSet<i32> = list
                    .elements()
                    .iter()
                    .filter(|e| e.topic() == topic)
                    .map(|e| e.partition())
                    .collect();
                assignment.send_if_modified(|a| {
                    let changed = *a != now;
                    *a = now;
                    changed
                });
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Raw group requests
    // -----------------------------------------------------------------------------------------

    /// FindCoordinator v3 (one key).
    pub async fn find_coordinator(
        client: &mut Client,
        key: &str,
        key_type: i8,
    ) -> anyhow::Result<FindCoordinatorResponse> {
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
}

// ---------------------------------------------------------------------------------------------
// Membership
// ---------------------------------------------------------------------------------------------

pub async fn two_members_split_partitions_disjointly(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-split");
    let group = endpoint.unique_topic("group-split-g");
    create_topic(&endpoint, &topic, 4).await?;
    let all: BTreeSet<i32> = (0..4).collect();
    let a = GroupConsumer::subscribe("consumer A", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let b = GroupConsumer::subscribe("consumer B", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        let union: BTreeSet<i32> = x.union(&y).copied().collect();
        if !x.is_empty() && !y.is_empty() && x.is_disjoint(&y) && union == all {
            break;
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "the two members never split {all:?} into two non-empty disjoint assignments within {WAIT:?}; last: A {x:?}, B {y:?}"
            ),
        }
    }
    a.close().await?;
    b.close().await?;
    Ok(Outcome::Passed)
}

/// Longer than [`WAIT`], within Kafka's default `group.max.session.timeout.ms` (30 min).
const A_SESSION_TIMEOUT_MS: &str = "45000";

pub async fn leaving_member_hands_over_at_committed_offsets(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-handover");
    let group = endpoint.unique_topic("group-handover-g");
    create_topic(&endpoint, &topic, 2).await?;
    for p in 0..2 {
        produce_at(&endpoint, &topic, p, 0, 10).await?;
    }
    // A alone owns both partitions; it reads at least 0..5 of each and commits 5. Its session
    // outlasts every wait of the case: only its LeaveGroup can hand its partitions over in time.
    let mut a = GroupConsumer::subscribe_with(
        "consumer A",
        &endpoint.bootstrap,
        &group,
        &topic,
        "earliest",
        &[
            ("session.timeout.ms", A_SESSION_TIMEOUT_MS),
            ("max.poll.interval.ms", A_SESSION_TIMEOUT_MS),
        ],
    )?;
    a.wait_until("offsets 0..5 of both partitions", |h| {
        h.has_all(0, 0..5) && h.has_all(1, 0..5)
    })
    .await?;
    a.commit(&[(0, 5), (1, 5)]).await?;
    let committed = a.committed(&[0, 1]).await?;
    ensure!(
        committed == BTreeMap::from([(0, Offset::Offset(5)), (1, Offset::Offset(5))]),
        "after committing 5 on both partitions, consumer A reads back {committed:?}"
    );
    // B joins: the group rebalances and B gets a share.
    let mut b = GroupConsumer::subscribe("consumer B", &endpoint.bootstrap, &group, &topic, "earliest")?;
    b.wait_assignment("a partition", |a| !a.is_empty()).await?;
    // A leaves (LeaveGroup on close): B takes everything over at the committed offsets.
    a.close().await?;
    b.wait_assignment("both partitions", |a| a.len() == 2).await?;
    b.wait_until("offsets 5..10 of both partitions", |h| {
        h.has_all(0, 5..10) && h.has_all(1, 5..10)
    })
    .await?;
    for p in 0..2 {
        let offsets = b.history.offsets(p);
        ensure!(
            offsets.first() == Some(&5),
            "consumer B's first record of partition {p} is at {:?}, not at the committed offset 5; delivered {offsets:?}",
            offsets.first()
        );
        let distinct = b.history.distinct(p);
        ensure!(
            distinct == (5..10).collect::<BTreeSet<i64>>(),
            "consumer B read offsets {distinct:?} of partition {p}: 10 - 5 records from 5 expected"
        );
    }
    b.close().await?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Committed offsets through librdkafka
// ---------------------------------------------------------------------------------------------

pub async fn restarted_consumer_resumes_at_committed_offsets(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-resume");
    let group = endpoint.unique_topic("group-resume-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 10).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    first.wait_until("offsets 0..6", |h| h.has_all(0, 0..6)).await?;
    first.commit(&[(0, 6)]).await?;
    first.close().await?;
    // earliest: a lost commit would start the new consumer at 0.
    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let committed = second.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(6)),
        "the restarted consumer reads back the committed offset {committed:?}, not 6"
    );
    second.wait_until("offsets 6..10", |h| h.has_all(0, 6..10)).await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets.first() == Some(&6),
        "the restarted consumer started at {:?}, not at the committed offset 6; delivered {offsets:?}",
        offsets.first()
    );
    ensure!(
        second.history.distinct(0) == (6..10).collect::<BTreeSet<i64>>(),
        "the restarted consumer delivered {offsets:?}; only 6..10 expected"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

pub async fn caught_up_commit_survives_a_consumer_restart(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-caught-up");
    let group = endpoint.unique_topic("group-caught-up-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    first.wait_until("offsets 0..5", |h| h.has_all(0, 0..5)).await?;
    // 5 is the high watermark: the partition's last offset is 4, so Iggy would refuse to store
    // 5 verbatim (DIFF-2).
    first.commit(&[(0, 5)]).await?;
    first.close().await?;

    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    second.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    let committed = second.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(5)),
        "after committing the high watermark 5, a restarted consumer reads back {committed:?}"
    );
    // Caught up: the end of the partition comes before any record.
    second
        .wait_until("the end of partition 0 or a record", |h| {
            h.eofs(0) > 0 || h.records() > 0
        })
        .await?;
    ensure!(
        second.history.records() == 0,
        "the restarted consumer re-delivered {:?} although everything up to 5 was committed",
        second.history.offsets(0)
    );
    produce_at(&endpoint, &topic, 0, 5, 2).await?;
    second
        .wait_until("offsets 5 and 6, then the end of the partition again", |h| {
            h.has_all(0, 5..7) && h.eofs(0) >= 2
        })
        .await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets == [5, 6],
        "after 2 more records the restarted consumer delivered {offsets:?}, expected exactly [5, 6]"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

pub async fn commit_of_zero_on_an_empty_partition_survives_records_arriving(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-zero");
    let group = endpoint.unique_topic("group-zero-g");
    create_topic(&endpoint, &topic, 1).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "latest")?;
    first.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    // 0 on an empty partition: Iggy refuses to store any offset there (DIFF-2).
    first.commit(&[(0, 0)]).await?;
    let committed = first.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(0)),
        "after committing 0 on the empty partition, the consumer reads back {committed:?}"
    );
    first.close().await?;
    // Records arrive while no consumer runs.
    produce_at(&endpoint, &topic, 0, 0, 3).await?;
    // latest: without the commit of 0 the new consumer would start at 3 and see nothing.
    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "latest")?;
    second.wait_until("offsets 0, 1 and 2", |h| h.has_all(0, 0..3)).await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets.first() == Some(&0) && second.history.distinct(0) == BTreeSet::from([0, 1, 2]),
        "the consumer after a commit of 0 delivered {offsets:?}, expected 0, 1, 2 from 0"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Committed offsets over the raw wire
// ---------------------------------------------------------------------------------------------

/// Consumer-protocol metadata: a version-0 subscription to `topics`.
fn consumer_subscription(topics: &[&str]) -> anyhow::Result<Vec<u8>> {
    use kafka_protocol::protocol::Encodable;
    let subscription = kafka_protocol::messages::ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| kafka_protocol::protocol::StrBytes::from_string(t.to_string()))
            .collect(),
    );
    let mut metadata = bytes::BytesMut::new();
    metadata.extend_from_slice(&0i16.to_be_bytes());
    subscription.encode(&mut metadata, 0)?;
    Ok(metadata.to_vec())
}

/// OffsetDelete v0 of partition 0 of each of `topics`: the top-level code and each topic's.
async fn offset_delete(client: &mut Client, group: &str, topics: &[&str]) -> anyhow::Result<(i16, Vec<i16>)> {
    use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    use kafka_protocol::messages::{GroupId, OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)])
                })
                .collect(),
        );
    let response: OffsetDeleteResponse = client
        .request(ApiKey::OffsetDelete, 0, &request)
        .await
        .with_context(|| format!("OffsetDelete {group}"))?;
    let codes = response
        .topics
        .iter()
        .map(|t| t.partitions.first().map_or(i16::MIN, |p| p.error_code))
        .collect();
    Ok((response.error_code, codes))
}

pub async fn offset_delete_removes_the_named_offsets_and_spares_subscribed_topics(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    if let Some(skip) = require_apis(&endpoint, &[ApiKey::OffsetDelete]).await? {
        return Ok(skip);
    }
    let subscribed = endpoint.unique_topic("offset-delete-subscribed");
    let other = endpoint.unique_topic("offset-delete-other");
    let group = endpoint.unique_topic("offset-delete-g");
    for topic in [&subscribed, &other] {
        create_topic(&endpoint, topic, 1).await?;
        produce_at(&endpoint, topic, 0, 0, 5).await?;
    }
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    // OFFSETDELETE-1: a group with neither members nor offsets does not exist.
    let (code, _) = offset_delete(&mut client, &group, &[&other]).await?;
    ensure!(
        code == GROUP_ID_NOT_FOUND,
        "OffsetDelete of a group nobody used: error {code}, expected GROUP_ID_NOT_FOUND ({GROUP_ID_NOT_FOUND})"
    );
    for topic in [&subscribed, &other] {
        let code = commit_one(&mut client, &group, topic, 0, 3).await?;
        ensure!(code == NONE, "standalone commit of 3 on {topic}: error {code}");
    }
    // Without members every named offset goes.
    let (code, codes) = offset_delete(&mut client, &group, &[&other]).await?;
    ensure!(
        (code, codes.clone()) == (NONE, vec![NONE]),
        "OffsetDelete of an empty group: (error, per topic) ({code}, {codes:?}), expected (0, [0])"
    );
    let fetched = fetch_one(&mut client, &group, &other, 0).await?;
    ensure!(
        fetched.0 == -1,
        "OffsetFetch after OffsetDelete: offset {}, expected -1",
        fetched.0
    );
    let code = commit_one(&mut client, &group, &other, 0, 3).await?;
    ensure!(code == NONE, "second commit of 3 on {other}: error {code}");
    // OFFSETDELETE-2: a member subscribed to one topic keeps that topic's offsets.
    let metadata = consumer_subscription(&[&subscribed])?;
    let first = join_group(&mut client, &group, "", 10_000, 10_000, &metadata).await?;
    let member = if first.error_code == MEMBER_ID_REQUIRED {
        let id = first.member_id.as_str().to_string();
        let joined = join_group(&mut client, &group, &id, 10_000, 10_000, &metadata).await?;
        ensure!(
            joined.error_code == NONE,
            "JoinGroup as {id}: error {}",
            joined.error_code
        );
        (id, joined.generation_id)
    } else {
        ensure!(first.error_code == NONE, "JoinGroup: error {}", first.error_code);
        (first.member_id.as_str().to_string(), first.generation_id)
    };
    let synced = sync_group(&mut client, &group, member.1, &member.0, &[(&member.0, b"")]).await?;
    ensure!(synced.error_code == NONE, "SyncGroup: error {}", synced.error_code);
    let (code, codes) = offset_delete(&mut client, &group, &[&subscribed, &other]).await?;
    ensure!(
        (code, codes.clone()) == (NONE, vec![GROUP_SUBSCRIBED_TO_TOPIC, NONE]),
        "OffsetDelete with a member subscribed to {subscribed}: (error, per topic) ({code}, {codes:?}), \
         expected (0, [GROUP_SUBSCRIBED_TO_TOPIC ({GROUP_SUBSCRIBED_TO_TOPIC}), 0])"
    );
    let kept = fetch_one(&mut client, &group, &subscribed, 0).await?;
    let gone = fetch_one(&mut client, &group, &other, 0).await?;
    ensure!(
        (kept.0, gone.0) == (3, -1),
        "committed offsets after OffsetDelete: {subscribed} {}, {other} {}; expected 3 and -1",
        kept.0,
        gone.0
    );
    Ok(Outcome::Passed)
}

pub async fn commit_of_minus_one_deletes_the_committed_offset(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-delete-offset");
    let group = endpoint.unique_topic("group-delete-offset-g");
    create_topic(&endpoint, &topic, 1).await?;
    // Records up to offset 4, so that a commit of 3 is within the partition on any server.
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;

    let before = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        before == (-1, -1, Some(String::new()), NONE),
        "OffsetFetch before any commit: (offset, leader epoch, metadata, error) {before:?}, expected (-1, -1, \"\", 0)"
    );
    let code = commit_one(&mut client, &group, &topic, 0, 3).await?;
    ensure!(code == NONE, "standalone commit of 3: error {code}");
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    // CO-METADATA-1 (a deviation): the gateway keeps the offset alone; Kafka keeps the
    // commit's leader epoch and metadata too.
    let expected = match endpoint.profile {
        Profile::Gateway => (3, -1, Some(String::new()), NONE),
        Profile::Kafka => (3, COMMIT_LEADER_EPOCH, Some(COMMIT_METADATA.to_string()), NONE),
    };
    ensure!(
        fetched == expected,
        "OffsetFetch after committing 3 with metadata {COMMIT_METADATA:?} and leader epoch {COMMIT_LEADER_EPOCH}: \
         (offset, leader epoch, metadata, error) {fetched:?}, expected {expected:?} (CO-METADATA-1)"
    );
    let code = commit_one(&mut client, &group, &topic, 0, -1).await?;
    ensure!(code == NONE, "commit of -1: error {code}, expected 0");
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    if endpoint.profile.is_kafka() {
        // Kafka stores -1 as it stores any offset, with the commit's epoch and metadata, and -1
        // reads as nothing committed. What it does with other negative offsets is no rule of
        // its; refusing them is CO-DELETE-1's.
        ensure!(
            fetched.0 == -1 && fetched.3 == NONE,
            "OffsetFetch after committing -1: (offset, error) ({}, {}), expected (-1, 0)",
            fetched.0,
            fetched.3
        );
        return Ok(Outcome::Passed);
    }
    // CO-DELETE-1 (a deviation): the gateway deletes the offset instead of storing -1.
    ensure!(
        fetched == (-1, -1, Some(String::new()), NONE),
        "OffsetFetch after committing -1: {fetched:?}, expected nothing committed (-1, -1, \"\", 0)"
    );
    // Deleting what is not there is not an error either.
    let code = commit_one(&mut client, &group, &topic, 0, -1).await?;
    ensure!(code == NONE, "second commit of -1: error {code}, expected 0");
    let code = commit_one(&mut client, &group, &topic, 0, -2).await?;
    ensure!(
        code == OFFSET_OUT_OF_RANGE,
        "commit of -2: error {code}, expected OFFSET_OUT_OF_RANGE ({OFFSET_OUT_OF_RANGE})"
    );
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        fetched.0 == -1,
        "OffsetFetch after a refused commit of -2: offset {}, expected still -1",
        fetched.0
    );
    Ok(Outcome::Passed)
}

pub async fn offset_fetch_with_null_topics_lists_committed_partitions(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let first = endpoint.unique_topic("group-fetch-all-a");
    let second = endpoint.unique_topic("group-fetch-all-b");
    let untouched = endpoint.unique_topic("group-fetch-all-c");
    let group = endpoint.unique_topic("group-fetch-all-g");
    create_topic(&endpoint, &first, 2).await?;
    create_topic(&endpoint, &second, 2).await?;
    create_topic(&endpoint, &untouched, 1).await?;
    produce_at(&endpoint, &first, 1, 0, 3).await?;
    produce_at(&endpoint, &second, 0, 0, 2).await?;
    produce_at(&endpoint, &untouched, 0, 0, 1).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    // first-0 is empty: its commit of 0 is a zero marker on the gateway (CO-ZERO-1).
    let answers = offset_commit(
        &mut client,
        &group,
        -1,
        "",
        &[(&first, 0, 0), (&first, 1, 2), (&second, 0, 1)],
    )
    .await?;
    ensure!(
        answers.len() == 3 && answers.iter().all(|(_, _, code)| *code == NONE),
        "standalone commits on two topics answered {answers:?}"
    );
    let response = offset_fetch(&mut client, &group, None).await?;
    ensure!(
        response.error_code == NONE,
        "OffsetFetch with null topics: error {}",
        response.error_code
    );
    let listed: BTreeMap<(String, i32), i64> = fetched(&response)
        .into_iter()
        .map(|(key, (offset, _, _, code))| {
            ensure!(code == NONE, "OffsetFetch listed {key:?} with error {code}");
            Ok((key, offset))
        })
        .collect::<anyhow::Result<_>>()?;
    let expected = BTreeMap::from([
        ((first.clone(), 0), 0),
        ((first.clone(), 1), 2),
        ((second.clone(), 0), 1),
    ]);
    ensure!(
        listed == expected,
        "OffsetFetch with null topics listed {listed:?}; expected exactly the committed partitions {expected:?} \
         ({second}-1 and {untouched} have nothing committed)"
    );
    Ok(Outcome::Passed)
}

pub async fn group_id_longer_than_246_bytes_is_invalid(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-long-id");
    create_topic(&endpoint, &topic, 2).await?;
    produce_at(&endpoint, &topic, 0, 0, 2).await?;
    let unique = endpoint.unique_topic("g");
    let pad = |len: usize| format!("{unique}{}", "x".repeat(len - unique.len()));
    let (longest, too_long) = (pad(246), pad(247));
    ensure!(longest.len() == 246 && too_long.len() == 247, "group id lengths");

    // 246 bytes is the longest that works, for a commit of 0 (a marker named after the id on the
    // gateway) as for any other.
    let mut client = coordinator_of(&endpoint.bootstrap, &longest).await?;
    let answers = offset_commit(&mut client, &longest, -1, "", &[(&topic, 0, 2), (&topic, 1, 0)]).await?;
    ensure!(
        answers.len() == 2 && answers.iter().all(|a| a.2 == NONE),
        "standalone OffsetCommit with a 246-byte group id answered {answers:?}"
    );
    let response = offset_fetch(&mut client, &longest, Some(&[(&topic, &[0, 1])])).await?;
    let got: Vec<(i64, i16)> = fetched(&response).values().map(|f| (f.0, f.3)).collect();
    ensure!(
        response.error_code == NONE && got == [(2, NONE), (0, NONE)],
        "OffsetFetch with a 246-byte group id: error {}, (offset, error) {got:?}, expected [(2, 0), (0, 0)]",
        response.error_code
    );
    // CO-GROUP-ID-1 (a deviation): Kafka sets no length limit on a group id below the
    // protocol's 32767 bytes, and takes a 247-byte one like any other: the commit is stored
    // and a new member is asked for its member id.
    let (commit_code, join_code) = match endpoint.profile {
        Profile::Gateway => (INVALID_GROUP_ID, INVALID_GROUP_ID),
        Profile::Kafka => (NONE, MEMBER_ID_REQUIRED),
    };
    let mut client = coordinator_of(&endpoint.bootstrap, &too_long).await?;
    let answers = offset_commit(&mut client, &too_long, -1, "", &[(&topic, 0, 1)]).await?;
    ensure!(
        answers.iter().map(|a| a.2).collect::<Vec<_>>() == [commit_code],
        "OffsetCommit with a 247-byte group id answered {answers:?}, expected error {commit_code}"
    );
    let joined = join_group(&mut client, &too_long, "", 10_000, 10_000, b"m").await?;
    ensure!(
        joined.error_code == join_code,
        "JoinGroup with a 247-byte group id: error {}, expected {join_code}",
        joined.error_code
    );

    Ok(Outcome::Passed)
}

pub async fn describe_list_and_delete_groups(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let needed = [ApiKey::ListGroups, ApiKey::DescribeGroups, ApiKey::DeleteGroups];
    if let Some(skip) = require_apis(&endpoint, &needed).await? {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("group-admin");
    let group = endpoint.unique_topic("group-admin-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 3).await?;
    let mut consumer = GroupConsumer::subscribe("consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    consumer.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    consumer.commit(&[(0, 2)]).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;

    let listed = list_groups(&mut client).await?;
    let entry = listed
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .with_context(|| format!("ListGroups does not list {group} while a consumer is in it"))?;
    ensure!(
        entry.protocol_type.as_str() == "consumer" && entry.group_state.as_str() == "Stable",
        "ListGroups lists {group} with protocol type {:?} and state {:?}, expected consumer and Stable",
        entry.protocol_type.as_str(),
        entry.group_state.as_str()
    );
    let described = describe_group(&mut client, &group).await?;
    ensure!(
        described.error_code == NONE
            && described.group_state.as_str() == "Stable"
            && described.protocol_type.as_str() == "consumer"
            && described.protocol_data.as_str() == "range",
        "DescribeGroups {group}: error {}, state {:?}, protocol type {:?}, protocol {:?}; expected 0, Stable, consumer, range",
        described.error_code,
        described.group_state.as_str(),
        described.protocol_type.as_str(),
        described.protocol_data.as_str()
    );
    ensure!(
        described.members.len() == 1 && !described.members[0].member_assignment.is_empty(),
        "DescribeGroups {group}: members {:?} with assignment sizes {:?}; expected one member with an assignment",
        member_ids(&described),
        described
            .members
            .iter()
            .map(|m| m.member_assignment.len())
            .collect::<Vec<_>>()
    );

    let code = delete_group(&mut client, &group).await?;
    ensure!(
        code == NON_EMPTY_GROUP,
        "DeleteGroups of a group with a member: error {code}, expected NON_EMPTY_GROUP ({NON_EMPTY_GROUP})"
    );
    let kept = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        kept.0 == 2,
        "after a refused DeleteGroups the committed offset is {}, expected still 2",
        kept.0
    );

    consumer.close().await?;
    await_described(&mut client, &group, "no members", |g| g.members.is_empty()).await?;
    let code = delete_group(&mut client, &group).await?;
    ensure!(code == NONE, "DeleteGroups of an empty group: error {code}");
    let gone = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        gone.0 == -1 && gone.3 == NONE,
        "OffsetFetch after DeleteGroups: (offset, error) ({}, {}), expected (-1, 0)",
        gone.0,
        gone.3
    );
    let listed = list_groups(&mut client).await?;
    ensure!(
        !listed.iter().any(|g| g.group_id.0.as_str() == group),
        "ListGroups still lists {group} after DeleteGroups"
    );
    Ok(Outcome::Passed)
}

/// Kafka's classic coordinator takes a commit of a current member (right member id and
/// generation) while the group is preparing a rebalance: that is when clients commit what they
/// consumed before giving their partitions up (librdkafka's and the Java client's commit on
/// revocation). It refuses one while the join has completed but the leader's SyncGroup has not
/// (REBALANCE_IN_PROGRESS): the member has no assignment in the new generation yet.
/// (`ClassicGroup.validateOffsetCommit`; `GroupCoordinator.doCommitOffsets` before it.)
pub async fn member_commits_while_a_rebalance_is_prepared_not_while_it_completes(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-commit-rebalance");
    let group = endpoint.unique_topic("group-commit-rebalance-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    const SESSION_MS: i32 = 10_000;
    const REBALANCE_MS: i32 = 10_000;

    // A joins alone and syncs: Stable, generation g.
    let mut a = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut a, &group, "", SESSION_MS, REBALANCE_MS, b"a").await?;
    let a_id = match first.error_code {
        MEMBER_ID_REQUIRED => first.member_id.as_str().to_string(),
        code => bail!("A's first JoinGroup: error {code}, expected MEMBER_ID_REQUIRED ({MEMBER_ID_REQUIRED})"),
    };
    let joined = join_group(&mut a, &group, &a_id, SESSION_MS, REBALANCE_MS, b"a").await?;
    ensure!(
        joined.error_code == NONE && joined.leader.as_str() == a_id,
        "A's JoinGroup: error {}, leader {:?}",
        joined.error_code,
        joined.leader.as_str()
    );
    let generation = joined.generation_id;
    let synced = sync_group(&mut a, &group, generation, &a_id, &[(&a_id, b"all")]).await?;
    ensure!(synced.error_code == NONE, "A's SyncGroup: error {}", synced.error_code);
    let answers = offset_commit(&mut a, &group, generation, &a_id, &[(&topic, 0, 1)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "A's commit in a stable group: {answers:?}"
    );

    // B joins: the group prepares a rebalance, which A learns from its heartbeat.
    let mut b = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut b, &group, "", SESSION_MS, REBALANCE_MS, b"b").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "B's first JoinGroup: error {}",
        first.error_code
    );
    let b_id = first.member_id.as_str().to_string();
    let b_join = tokio::spawn({
        let (group, b_id) = (group.clone(), b_id.clone());
        async move {
            let joined = join_group(&mut b, &group, &b_id, SESSION_MS, REBALANCE_MS, b"b").await;
            (b, joined)
        }
    });
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match heartbeat(&mut a, &group, generation, &a_id).await? {
            REBALANCE_IN_PROGRESS => break,
            NONE if tokio::time::Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            code => bail!(
                "A's heartbeat after B joined: error {code}, expected REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS})"
            ),
        }
    }
    // A commits what it consumed before rejoining, still in generation g.
    let answers = offset_commit(&mut a, &group, generation, &a_id, &[(&topic, 0, 3)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "a commit of the current member and generation while the rebalance is being prepared: {answers:?}, expected NONE; \
         refusing it loses what a member commits as it gives its partitions up"
    );
    let fetched = fetch_one(&mut a, &group, &topic, 0).await?;
    ensure!(
        fetched.0 == 3,
        "after the commit during the rebalance the committed offset is {}",
        fetched.0
    );

    // A rejoins: the join completes (generation g + 1), nobody has synced yet.
    let rejoined = join_group(&mut a, &group, &a_id, SESSION_MS, REBALANCE_MS, b"a").await?;
    let (mut b, b_joined) = tokio::time::timeout(WAIT, b_join)
        .await
        .context("B's JoinGroup did not complete after A rejoined")?
        .context("B's join task")?;
    let b_joined = b_joined?;
    ensure!(
        rejoined.error_code == NONE && b_joined.error_code == NONE && rejoined.generation_id == b_joined.generation_id,
        "the rebalance: A error {} generation {}, B error {} generation {}",
        rejoined.error_code,
        rejoined.generation_id,
        b_joined.error_code,
        b_joined.generation_id
    );
    let next = rejoined.generation_id;
    let answers = offset_commit(&mut a, &group, next, &a_id, &[(&topic, 0, 4)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [REBALANCE_IN_PROGRESS],
        "a commit in the new generation before SyncGroup: {answers:?}, expected REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS})"
    );
    let leader = rejoined.leader.as_str().to_string();
    let (leader_client, follower_client, follower_id) = if leader == a_id {
        (&mut a, &mut b, b_id.clone())
    } else {
        (&mut b, &mut a, a_id.clone())
    };
    let assignments: [(&str, &[u8]); 2] = [(&a_id, b"a"), (&b_id, b"b")];
    let synced = sync_group(leader_client, &group, next, &leader, &assignments).await?;
    ensure!(
        synced.error_code == NONE,
        "the leader's SyncGroup: error {}",
        synced.error_code
    );
    let synced = sync_group(follower_client, &group, next, &follower_id, &[]).await?;
    ensure!(
        synced.error_code == NONE,
        "the follower's SyncGroup: error {}",
        synced.error_code
    );
    let answers = offset_commit(&mut a, &group, next, &a_id, &[(&topic, 0, 4)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "a commit in the new generation once stable: {answers:?}"
    );
    let fetched = fetch_one(&mut a, &group, &topic, 0).await?;
    ensure!(fetched.0 == 4, "the committed offset is {}, expected 4", fetched.0);
    Ok(Outcome::Passed)
}

pub async fn find_coordinator_for_transactions_is_refused(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // GROUP-TXN-COORDINATOR-1 (a deviation): the gateway has no transaction coordinator; a
    // Kafka broker names one.
    let refused = !endpoint.profile.is_kafka();
    let txn_code = if refused { UNSUPPORTED_VERSION } else { NONE };
    let v4 = advertised_max(&endpoint, ApiKey::FindCoordinator)
        .await?
        .is_some_and(|max| max >= 4);
    let mut client = kafka_wire_client::WireClient::connect(&endpoint.bootstrap).await?;
    let key = endpoint.unique_topic("txn");
    let answer = find_coordinator(&mut client, &key, KEY_TYPE_TRANSACTION).await?;
    ensure!(
        answer.error_code == txn_code && (refused || answer.node_id.0 >= 0),
        "FindCoordinator v{FIND_COORDINATOR_V} for a transaction coordinator: error {}, node {}, expected error {txn_code}",
        answer.error_code,
        answer.node_id.0
    );
    // v4 batches keys; each is answered on its own. (A Kafka implementation may stop at v3.)
    if refused || v4 {
        let request = FindCoordinatorRequest::default()
            .with_key_type(KEY_TYPE_TRANSACTION)
            .with_coordinator_keys(vec![kafka_protocol::protocol::StrBytes::from_string(key.clone())]);
        let batched: FindCoordinatorResponse = client
            .request(ApiKey::FindCoordinator, 4, &request)
            .await
            .context("FindCoordinator v4")?;
        let codes: Vec<i16> = batched.coordinators.iter().map(|c| c.error_code).collect();
        ensure!(
            codes == [txn_code],
            "FindCoordinator v4 for a transaction coordinator: codes {codes:?}, expected [{txn_code}]"
        );
    }
    // A key type Kafka does not define is an invalid request.
    let unknown = find_coordinator(&mut client, &key, 7).await?;
    ensure!(
        unknown.error_code == INVALID_REQUEST,
        "FindCoordinator with key type 7: error {}, expected INVALID_REQUEST ({INVALID_REQUEST})",
        unknown.error_code
    );
    // The same connection still finds group coordinators.
    let group = find_coordinator(&mut client, &key, KEY_TYPE_GROUP).await?;
    if group.error_code != NONE || group.node_id.0 < 0 {
        bail!(
            "FindCoordinator for a group after the refusals: error {}, node {}",
            group.error_code,
            group.node_id.0
        );
    }
    Ok(Outcome::Passed)
}
