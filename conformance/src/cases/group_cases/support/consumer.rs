//! The [`GroupConsumer`]: a subscribed librdkafka consumer polled by a thread of its own, whose
//! records, partition ends, rebalances and errors the cases wait on (every wait bounded by
//! [`WAIT`]), and the [`ClientLog`] that keeps librdkafka's log lines for a failure's message.

use super::*;

/// What a consumer's librdkafka instance logged, to quote when a wait fails, and how many
/// assignments it has applied.
#[derive(Clone)]
pub struct ClientLog {
    pub(super) lines: Arc<Mutex<Vec<String>>>,
    pub(super) assignments: Arc<watch::Sender<u64>>,
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
    pub(super) const MAX_LINES: usize = 200;

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
    pub(super) name: String,
    pub(super) topic: String,
    pub(super) consumer: Option<Arc<BaseConsumer<ClientLog>>>,
    pub(super) pump: Option<std::thread::JoinHandle<()>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) events: mpsc::UnboundedReceiver<Result<Event, String>>,
    pub(super) assignment: watch::Receiver<BTreeSet<i32>>,
    pub(super) log: ClientLog,
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
pub(super) fn pump(
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
