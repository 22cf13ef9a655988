//! The record of one simulation run, as plain serialisable data: who took part, every Produce
//! request and each attempt of it with its outcome, every consumer session's starts, polls and
//! commits, every fault with its start and end, and what the partitions hold at the end (the
//! final drain through a gateway, and the backend itself). The world appends to it through a
//! [`Recorder`]; the checks ([`crate::checks`]) read it. No I/O here: the only outside thing
//! the [`Recorder`] reads is the simulated clock of the host it is called on.
//!
//! Times are simulated microseconds since the run started (`*_us`). Every record a producer sends
//! carries a [`RecordValue`], unique per producer, so whatever a partition holds names the
//! request that wrote it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// Index of a producer in [`History::producers`].
pub type ProducerIx = usize;
/// Index of a consumer in [`History::consumers`].
pub type ConsumerIx = usize;
/// Index of a Produce request in [`History::produces`].
pub type RequestId = usize;
/// Index of a fault in [`History::faults`].
pub type FaultId = usize;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// What one record carries: its producer and that producer's sequence number for it (0, 1, 2,
/// ... in the order the producer created its records). Unique per producer, so a copy in a
/// partition names the record it is a copy of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RecordValue {
    pub producer: ProducerIx,
    pub seq: u64,
}

impl RecordValue {
    pub fn new(producer: ProducerIx, seq: u64) -> Self {
        Self { producer, seq }
    }

    /// The bytes a record carries as its value: `p<producer>-<seq>`.
    pub fn encode(&self) -> String {
        format!("p{}-{}", self.producer, self.seq)
    }

    /// The value `bytes` encode, if they encode one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (producer, seq) = text.strip_prefix('p')?.split_once('-')?;
        // Reject anything `encode` would not produce (signs, leading zeros), so decoding is exact.
        let value = Self::new(producer.parse().ok()?, seq.parse().ok()?);
        (value.encode() == text).then_some(value)
    }
}

impl fmt::Display for RecordValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}-{}", self.producer, self.seq)
    }
}

/// The name of the header every record a producer sends carries, naming the Produce attempt that
/// sent that copy ([`attempt_header`]): so a copy in a partition says which attempt wrote it.
pub const ATTEMPT_HEADER: &str = "attempt";

/// The [`ATTEMPT_HEADER`] value of `attempt` of `request`: `request/attempt`.
pub fn attempt_header(request: RequestId, attempt: u32) -> String {
    format!("{request}/{attempt}")
}

/// The (request, attempt) an [`ATTEMPT_HEADER`] value names, if it names one.
pub fn parse_attempt_header(value: &[u8]) -> Option<(RequestId, u32)> {
    let text = std::str::from_utf8(value).ok()?;
    let (request, attempt) = text.split_once('/')?;
    Some((request.parse().ok()?, attempt.parse().ok()?))
}

/// One record as a partition holds it or a poll delivered it. `value` is `None` when the bytes
/// name no [`RecordValue`] (then `raw` keeps them, lossily as text, for the report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub offset: i64,
    pub value: Option<RecordValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The Produce request and attempt that wrote this copy, from its [`ATTEMPT_HEADER`];
    /// recorded for the backend's contents, where it tells a retry answered from an earlier
    /// attempt's copy (PRODUCER-DUP-1) from one written itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_by: Option<(RequestId, u32)>,
}

impl Stored {
    /// A record holding `value` at `offset`.
    pub fn record(offset: i64, value: RecordValue) -> Self {
        Self {
            offset,
            value: Some(value),
            raw: None,
            written_by: None,
        }
    }

    /// A record at `offset` whose value bytes are `bytes` (`None`: a null value).
    pub fn from_bytes(offset: i64, bytes: Option<&[u8]>) -> Self {
        match bytes.and_then(RecordValue::decode) {
            Some(value) => Self::record(offset, value),
            None => Self {
                offset,
                value: None,
                raw: Some(match bytes {
                    Some(b) => String::from_utf8_lossy(b).into_owned(),
                    None => "<null>".into(),
                }),
                written_by: None,
            },
        }
    }

    /// The same record, written by `attempt` of `request`.
    pub fn written_by(mut self, written_by: Option<(RequestId, u32)>) -> Self {
        self.written_by = written_by;
        self
    }
}

/// A producer taking part in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    pub name: String,
    /// `enable.idempotence=true`: it asked for a producer id and numbers its batches.
    pub idempotent: bool,
    /// Requests it keeps in flight per connection (librdkafka's
    /// `max.in.flight.requests.per.connection`); 1 keeps its sends in order.
    pub max_in_flight: u32,
    /// The producer ids gateways gave it (InitProducerId), in order.
    pub producer_ids: Vec<ProducerIdGrant>,
}

/// One InitProducerId answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdGrant {
    pub at_us: u64,
    pub gateway: String,
    pub producer_id: i64,
    pub epoch: i16,
}

/// One Produce request of one partition's batch, as the producer sent it, with every attempt.
/// A retry is an attempt of the same request: the same records again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceRequest {
    pub id: RequestId,
    pub producer: ProducerIx,
    pub partition: TopicPartition,
    /// The records it carries, in batch order.
    pub values: Vec<RecordValue>,
    /// The batch's base sequence, for an idempotent producer.
    pub base_sequence: Option<i32>,
    pub created_us: u64,
    pub attempts: Vec<ProduceAttempt>,
}

impl ProduceRequest {
    /// The attempt that was acknowledged, and the offset it gave the first record.
    pub fn acked(&self) -> Option<(&ProduceAttempt, i64)> {
        self.attempts.iter().find_map(|a| match a.outcome {
            Some(AttemptOutcome::Acked { base_offset }) => Some((a, base_offset)),
            _ => None,
        })
    }
}

/// One send of a Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProduceAttempt {
    /// 1 for the first send, 2 for the first retry, ...
    pub attempt: u32,
    pub sent_us: u64,
    /// The gateway it went to, and the producer's connection number there.
    pub gateway: String,
    pub connection: u64,
    /// `None` while no outcome is known (at the end of the run: never answered).
    pub outcome: Option<AttemptOutcome>,
    pub outcome_us: Option<u64>,
}

/// How an attempt ended, as the producer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttemptOutcome {
    /// Error 0 with the base offset of the batch.
    Acked { base_offset: i64 },
    /// A Kafka error code for the partition.
    Error { code: i16 },
    /// No answer within the request timeout.
    TimedOut,
    /// The connection failed (refused, reset, closed) before an answer.
    ConnectionLost,
}

/// How a consumer gets its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumerMode {
    /// `assign()`: fixed partitions, no group membership (it may still commit for a group).
    Assign { group: Option<String> },
    /// `subscribe()` in a group: JoinGroup/SyncGroup decide its partitions.
    Group { group: String },
    /// `subscribe()` in a group with `group.protocol=consumer` (KIP-848): the coordinator assigns
    /// its partitions in ConsumerGroupHeartbeat answers, each [`ConsumerEventKind::Assigned`]
    /// carrying the member epoch as its generation.
    ConsumerProtocol { group: String },
}

impl ConsumerMode {
    pub fn group(&self) -> Option<&str> {
        match self {
            ConsumerMode::Assign { group } => group.as_deref(),
            ConsumerMode::Group { group } | ConsumerMode::ConsumerProtocol { group } => Some(group),
        }
    }
}

/// A consumer taking part in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    pub name: String,
    pub mode: ConsumerMode,
    /// The gateway it bootstraps from.
    pub gateway: String,
}

/// Where a consumer starts reading a partition from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartFrom {
    /// The group's committed offset (OffsetFetch answered `offset`).
    Committed,
    /// Nothing committed: `auto.offset.reset=earliest`.
    Earliest,
    /// Nothing committed: `auto.offset.reset=latest`.
    Latest,
    /// An explicit seek by the application.
    Seek,
    /// An OFFSET_OUT_OF_RANGE answer reset the position.
    OutOfRangeReset,
}

/// How an OffsetCommit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommitOutcome {
    Acked,
    Error { code: i16 },
    TimedOut,
    ConnectionLost,
}

/// Something a consumer did. A session is one start of the consumer process: a restart (crash)
/// begins a new one; a rebalance is not a new session but a [`ConsumerEventKind::Assigned`] in
/// the same one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerEvent {
    pub at_us: u64,
    pub consumer: ConsumerIx,
    pub session: u32,
    pub kind: ConsumerEventKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumerEventKind {
    /// The session began (the first start or a restart).
    SessionStarted,
    /// It holds these partitions now: from `assign()`, from a SyncGroup of `generation`, or (a
    /// consumer-protocol member) from a ConsumerGroupHeartbeat answer at member epoch
    /// `generation`, recorded once the partitions it was told to revoke are dropped and whenever
    /// its epoch or partitions change.
    Assigned {
        generation: Option<i32>,
        member_id: Option<String>,
        partitions: Vec<TopicPartition>,
    },
    /// It positioned itself on a partition at `offset` from outside its run of polls: a start or
    /// a rebalance (the committed offset read back, or a reset), or an explicit seek. Record one
    /// whenever the consumer's next fetch offset is not one past its last delivery, or the
    /// checker reads the jump as a nonmonotonic poll or a poll skip.
    Positioned {
        partition: TopicPartition,
        offset: i64,
        from: StartFrom,
    },
    /// A Fetch delivered these records of a partition (those at or past the fetch position, as a
    /// Kafka client drops the rest of a batch), in offset order. Empty fetches need no event.
    Polled {
        partition: TopicPartition,
        records: Vec<Stored>,
    },
    /// An OffsetCommit of `offset` for `group` on a partition, sent at `sent_us`, ended so.
    Committed {
        group: String,
        partition: TopicPartition,
        offset: i64,
        generation: Option<i32>,
        sent_us: u64,
        outcome: CommitOutcome,
    },
    /// A consumer-protocol member was told it is no longer one (FENCED_MEMBER_EPOCH or
    /// UNKNOWN_MEMBER_ID, code `code`, answering epoch `epoch`): the coordinator had let it go
    /// before, so it dropped every partition and joins again with epoch 0.
    Fenced { member_id: String, epoch: i32, code: i16 },
    /// The session ended: a crash or a clean close.
    SessionEnded { clean: bool },
}

/// A network hop a fault acts on. `client` is the producer's or consumer's name, which is also its
/// host's name in the simulated network: the checker matches a Produce attempt's path by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hop {
    /// Between a client host and a gateway.
    ClientGateway { client: String, gateway: String },
    /// Between a gateway and the Iggy host.
    GatewayIggy { gateway: String },
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hop::ClientGateway { client, gateway } => write!(f, "{client}->{gateway}"),
            Hop::GatewayIggy { gateway } => write!(f, "{gateway}->iggy"),
        }
    }
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultKind {
    /// Every message on the hop dropped, both ways, until the fault ends.
    Partition { hop: Hop },
    /// Messages on the hop held back and delivered when the fault ends.
    Hold { hop: Hop },
    /// Every message on the hop takes `extra_ms` longer until the fault ends.
    Delay { hop: Hop, extra_ms: u64 },
    /// One request dropped on its way to the server: never handled.
    RequestLost {
        hop: Hop,
        /// The Produce attempt it carried, when the world knows it.
        produce: Option<(RequestId, u32)>,
    },
    /// One response dropped on its way back, after the server handled (wrote) the request.
    ResponseLost {
        hop: Hop,
        produce: Option<(RequestId, u32)>,
    },
    /// A gateway process restarted: its connections, group members and in-flight requests lost.
    GatewayRestart { gateway: String },
    /// The Iggy server restarted with its data kept; its sessions, group memberships and
    /// in-flight requests lost.
    IggyRestart,
    /// A node of the replicated Iggy cluster (the primary when it fell) crashed; it restarts on
    /// its disk when the fault ends.
    IggyNodeCrash { node: String },
    /// A node of the replicated Iggy cluster (the primary when it fell) was cut off from every
    /// other host until the fault ends.
    IggyNodeIsolated { node: String },
    /// A gateway process crashed and stayed down until the fault ends.
    GatewayCrash { gateway: String },
}

/// One fault: a window for the lasting kinds, a moment (`end_us == Some(start_us)`) for the
/// one-shot ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub id: FaultId,
    pub kind: FaultKind,
    pub start_us: u64,
    /// `None`: still active when the run ended (the heal ends every fault, so this is rare).
    pub end_us: Option<u64>,
}

impl Fault {
    /// Whether the fault was active at `at_us`.
    pub fn active_at(&self, at_us: u64) -> bool {
        self.start_us <= at_us && self.end_us.is_none_or(|end| at_us <= end)
    }

    /// Whether the fault overlaps `[from_us, to_us]`.
    pub fn overlaps(&self, from_us: u64, to_us: u64) -> bool {
        self.start_us <= to_us && self.end_us.is_none_or(|end| from_us <= end)
    }
}

/// A partition's contents, in offset order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLog {
    pub partition: TopicPartition,
    pub records: Vec<Stored>,
}

/// Everything one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub scenario: String,
    pub seed: u64,
    /// The gateways' names (hosts).
    pub gateways: Vec<String>,
    /// The partitions the run writes to and reads from.
    pub partitions: Vec<TopicPartition>,
    pub producers: Vec<Producer>,
    pub produces: Vec<ProduceRequest>,
    pub consumers: Vec<Consumer>,
    /// Consumer events in the order they happened.
    pub consumer_events: Vec<ConsumerEvent>,
    pub faults: Vec<Fault>,
    /// When the network healed and faults stopped: the liveness phase begins.
    pub healed_us: Option<u64>,
    /// Every partition read from offset 0 to its end through a gateway after the heal.
    pub drain: Vec<PartitionLog>,
    /// What the backend holds at the end, read directly.
    pub backend: Vec<PartitionLog>,
}

impl History {
    pub fn new(scenario: impl Into<String>, seed: u64) -> Self {
        Self {
            scenario: scenario.into(),
            seed,
            ..Self::default()
        }
    }

    pub fn add_gateway(&mut self, name: impl Into<String>) {
        self.gateways.push(name.into());
    }

    pub fn add_partition(&mut self, partition: TopicPartition) {
        if !self.partitions.contains(&partition) {
            self.partitions.push(partition);
        }
    }

    pub fn add_producer(&mut self, name: impl Into<String>, idempotent: bool, max_in_flight: u32) -> ProducerIx {
        self.producers.push(Producer {
            name: name.into(),
            idempotent,
            max_in_flight: max_in_flight.max(1),
            producer_ids: Vec::new(),
        });
        self.producers.len() - 1
    }

    pub fn producer_id_granted(
        &mut self,
        producer: ProducerIx,
        at_us: u64,
        gateway: impl Into<String>,
        producer_id: i64,
        epoch: i16,
    ) {
        self.producers[producer].producer_ids.push(ProducerIdGrant {
            at_us,
            gateway: gateway.into(),
            producer_id,
            epoch,
        });
    }

    /// A new Produce request of `values` to `partition`; its attempts follow.
    pub fn produce_request(
        &mut self,
        producer: ProducerIx,
        at_us: u64,
        partition: TopicPartition,
        values: Vec<RecordValue>,
        base_sequence: Option<i32>,
    ) -> RequestId {
        let id = self.produces.len();
        self.produces.push(ProduceRequest {
            id,
            producer,
            partition,
            values,
            base_sequence,
            created_us: at_us,
            attempts: Vec::new(),
        });
        id
    }

    /// Another send of `request`: its attempt number.
    pub fn produce_attempt(
        &mut self,
        request: RequestId,
        at_us: u64,
        gateway: impl Into<String>,
        connection: u64,
    ) -> u32 {
        let attempts = &mut self.produces[request].attempts;
        let attempt = attempts.len() as u32 + 1;
        attempts.push(ProduceAttempt {
            attempt,
            sent_us: at_us,
            gateway: gateway.into(),
            connection,
            outcome: None,
            outcome_us: None,
        });
        attempt
    }

    /// How attempt `attempt` of `request` ended.
    pub fn produce_outcome(&mut self, request: RequestId, attempt: u32, at_us: u64, outcome: AttemptOutcome) {
        let slot = &mut self.produces[request].attempts[attempt as usize - 1];
        slot.outcome = Some(outcome);
        slot.outcome_us = Some(at_us);
    }

    pub fn add_consumer(
        &mut self,
        name: impl Into<String>,
        mode: ConsumerMode,
        gateway: impl Into<String>,
    ) -> ConsumerIx {
        self.consumers.push(Consumer {
            name: name.into(),
            mode,
            gateway: gateway.into(),
        });
        self.consumers.len() - 1
    }

    /// The consumer's current session number (0 before it ever started).
    pub fn current_session(&self, consumer: ConsumerIx) -> u32 {
        self.consumer_events
            .iter()
            .rev()
            .find(|e| e.consumer == consumer)
            .map_or(0, |e| e.session)
    }

    /// A new session of `consumer`: its number, 1 for the first.
    pub fn start_session(&mut self, consumer: ConsumerIx, at_us: u64) -> u32 {
        let session = self
            .consumer_events
            .iter()
            .filter(|e| e.consumer == consumer && e.kind == ConsumerEventKind::SessionStarted)
            .count() as u32
            + 1;
        self.consumer_event(consumer, session, at_us, ConsumerEventKind::SessionStarted);
        session
    }

    pub fn consumer_event(&mut self, consumer: ConsumerIx, session: u32, at_us: u64, kind: ConsumerEventKind) {
        self.consumer_events.push(ConsumerEvent {
            at_us,
            consumer,
            session,
            kind,
        });
    }

    /// A fault began: its id, to end it with.
    pub fn fault_started(&mut self, kind: FaultKind, at_us: u64) -> FaultId {
        let id = self.faults.len();
        self.faults.push(Fault {
            id,
            kind,
            start_us: at_us,
            end_us: None,
        });
        id
    }

    pub fn fault_ended(&mut self, fault: FaultId, at_us: u64) {
        self.faults[fault].end_us = Some(at_us);
    }

    /// A one-shot fault (a lost request or response, a restart).
    pub fn fault_at(&mut self, kind: FaultKind, at_us: u64) -> FaultId {
        let id = self.fault_started(kind, at_us);
        self.fault_ended(id, at_us);
        id
    }

    /// The network healed: every fault still active ends now.
    pub fn healed(&mut self, at_us: u64) {
        for fault in self.faults.iter_mut().filter(|f| f.end_us.is_none()) {
            fault.end_us = Some(at_us);
        }
        self.healed_us = Some(at_us);
    }

    pub fn drained(&mut self, log: PartitionLog) {
        self.drain.push(log);
    }

    pub fn backend_holds(&mut self, log: PartitionLog) {
        self.backend.push(log);
    }

    /// The backend's contents of `partition`, if recorded.
    pub fn backend_log(&self, partition: &TopicPartition) -> Option<&PartitionLog> {
        self.backend.iter().find(|l| &l.partition == partition)
    }

    /// The final drain of `partition`, if recorded.
    pub fn drain_log(&self, partition: &TopicPartition) -> Option<&PartitionLog> {
        self.drain.iter().find(|l| &l.partition == partition)
    }
}

/// Simulated microseconds since the run started, on the turmoil host this is called on; 0
/// outside one (the driver between steps passes its own time instead).
pub fn sim_now_us() -> u64 {
    turmoil::sim_elapsed().unwrap_or_default().as_micros() as u64
}

/// A cheap, cloneable handle the world's hosts and driver record through. Methods without an
/// `at_us` argument stamp the current host's simulated time ([`sim_now_us`]); the driver, which
/// runs outside any host, uses the `*_at` methods with `sim.elapsed()`.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<History>>);

impl Recorder {
    pub fn new(scenario: impl Into<String>, seed: u64) -> Self {
        Self::from_history(History::new(scenario, seed))
    }

    pub fn from_history(history: History) -> Self {
        Self(Arc::new(Mutex::new(history)))
    }

    /// The history, to record into or read directly.
    pub fn lock(&self) -> MutexGuard<'_, History> {
        // A panic while recording leaves plain data behind; keep using it.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of the history as it stands.
    pub fn snapshot(&self) -> History {
        self.lock().clone()
    }

    /// The history, once the world is done with it (a copy if other handles remain).
    pub fn finish(self) -> History {
        match Arc::try_unwrap(self.0) {
            Ok(mutex) => mutex.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()),
            Err(shared) => shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone(),
        }
    }

    pub fn add_gateway(&self, name: impl Into<String>) {
        self.lock().add_gateway(name);
    }

    pub fn add_partition(&self, partition: TopicPartition) {
        self.lock().add_partition(partition);
    }

    pub fn add_producer(&self, name: impl Into<String>, idempotent: bool, max_in_flight: u32) -> ProducerIx {
        self.lock().add_producer(name, idempotent, max_in_flight)
    }

    pub fn producer_id_granted(&self, producer: ProducerIx, gateway: impl Into<String>, producer_id: i64, epoch: i16) {
        self.lock()
            .producer_id_granted(producer, sim_now_us(), gateway, producer_id, epoch);
    }

    pub fn produce_request(
        &self,
        producer: ProducerIx,
        partition: TopicPartition,
        values: Vec<RecordValue>,
        base_sequence: Option<i32>,
    ) -> RequestId {
        self.lock()
            .produce_request(producer, sim_now_us(), partition, values, base_sequence)
    }

    pub fn produce_attempt(&self, request: RequestId, gateway: impl Into<String>, connection: u64) -> u32 {
        self.lock().produce_attempt(request, sim_now_us(), gateway, connection)
    }

    pub fn produce_outcome(&self, request: RequestId, attempt: u32, outcome: AttemptOutcome) {
        self.lock().produce_outcome(request, attempt, sim_now_us(), outcome);
    }

    pub fn add_consumer(&self, name: impl Into<String>, mode: ConsumerMode, gateway: impl Into<String>) -> ConsumerIx {
        self.lock().add_consumer(name, mode, gateway)
    }

    pub fn start_session(&self, consumer: ConsumerIx) -> u32 {
        self.lock().start_session(consumer, sim_now_us())
    }

    pub fn end_session(&self, consumer: ConsumerIx, session: u32, clean: bool) {
        self.consumer_event(consumer, session, ConsumerEventKind::SessionEnded { clean });
    }

    pub fn assigned(
        &self,
        consumer: ConsumerIx,
        session: u32,
        generation: Option<i32>,
        member_id: Option<String>,
        partitions: Vec<TopicPartition>,
    ) {
        self.consumer_event(
            consumer,
            session,
            ConsumerEventKind::Assigned {
                generation,
                member_id,
                partitions,
            },
        );
    }

    pub fn positioned(
        &self,
        consumer: ConsumerIx,
        session: u32,
        partition: TopicPartition,
        offset: i64,
        from: StartFrom,
    ) {
        self.consumer_event(
            consumer,
            session,
            ConsumerEventKind::Positioned {
                partition,
                offset,
                from,
            },
        );
    }

    pub fn polled(&self, consumer: ConsumerIx, session: u32, partition: TopicPartition, records: Vec<Stored>) {
        self.consumer_event(consumer, session, ConsumerEventKind::Polled { partition, records });
    }

    /// An OffsetCommit's end; `sent_us` is when it was sent ([`sim_now_us`] then).
    #[allow(clippy::too_many_arguments)]
    pub fn committed(
        &self,
        consumer: ConsumerIx,
        session: u32,
        group: impl Into<String>,
        partition: TopicPartition,
        offset: i64,
        generation: Option<i32>,
        sent_us: u64,
        outcome: CommitOutcome,
    ) {
        self.consumer_event(
            consumer,
            session,
            ConsumerEventKind::Committed {
                group: group.into(),
                partition,
                offset,
                generation,
                sent_us,
                outcome,
            },
        );
    }

    pub fn consumer_event(&self, consumer: ConsumerIx, session: u32, kind: ConsumerEventKind) {
        self.lock().consumer_event(consumer, session, sim_now_us(), kind);
    }

    pub fn fault_started_at(&self, kind: FaultKind, at_us: u64) -> FaultId {
        self.lock().fault_started(kind, at_us)
    }

    pub fn fault_ended_at(&self, fault: FaultId, at_us: u64) {
        self.lock().fault_ended(fault, at_us);
    }

    pub fn fault_at(&self, kind: FaultKind, at_us: u64) -> FaultId {
        self.lock().fault_at(kind, at_us)
    }

    /// A one-shot fault seen from inside a host (e.g. the gateway-to-Iggy adapter dropping a
    /// response), stamped with that host's time.
    pub fn fault_now(&self, kind: FaultKind) -> FaultId {
        self.fault_at(kind, sim_now_us())
    }

    pub fn healed_at(&self, at_us: u64) {
        self.lock().healed(at_us);
    }

    pub fn drained(&self, log: PartitionLog) {
        self.lock().drained(log);
    }

    pub fn backend_holds(&self, log: PartitionLog) {
        self.lock().backend_holds(log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_value_round_trips_and_nothing_else_decodes() {
        let value = RecordValue::new(3, 1_234);
        assert_eq!(value.encode(), "p3-1234");
        assert_eq!(RecordValue::decode(value.encode().as_bytes()), Some(value));
        for other in ["p3-01", "p-1", "3-1", "p3-", "p3-+1", "p3-1-2", "17"] {
            assert_eq!(RecordValue::decode(other.as_bytes()), None, "{other}");
        }
        assert_eq!(Stored::from_bytes(4, Some(b"hello")).raw.as_deref(), Some("hello"));
        assert_eq!(Stored::from_bytes(4, None).raw.as_deref(), Some("<null>"));
    }

    #[test]
    fn an_attempt_header_round_trips_and_nothing_else_parses() {
        assert_eq!(parse_attempt_header(attempt_header(17, 2).as_bytes()), Some((17, 2)));
        for other in ["17", "17/", "/2", "a/2", "17/-1"] {
            assert_eq!(parse_attempt_header(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn attempts_are_numbered_and_the_ack_is_found() {
        let mut h = History::new("t", 1);
        let p = h.add_producer("p", false, 1);
        let tp = TopicPartition::new("t", 0);
        let r = h.produce_request(p, 10, tp, vec![RecordValue::new(p, 0)], None);
        assert_eq!(h.produce_attempt(r, 10, "gw", 1), 1);
        h.produce_outcome(r, 1, 20, AttemptOutcome::TimedOut);
        assert_eq!(h.produce_attempt(r, 30, "gw", 2), 2);
        assert!(h.produces[r].acked().is_none());
        h.produce_outcome(r, 2, 40, AttemptOutcome::Acked { base_offset: 7 });
        let (attempt, base) = h.produces[r].acked().expect("acked");
        assert_eq!((attempt.attempt, base), (2, 7));
    }

    #[test]
    fn sessions_count_up_and_heal_ends_open_faults() {
        let mut h = History::new("t", 1);
        let c = h.add_consumer("c", ConsumerMode::Group { group: "g".into() }, "gw");
        assert_eq!(h.current_session(c), 0);
        assert_eq!(h.start_session(c, 1), 1);
        assert_eq!(h.start_session(c, 2), 2);
        assert_eq!(h.current_session(c), 2);
        let hop = Hop::GatewayIggy { gateway: "gw".into() };
        let open = h.fault_started(FaultKind::Partition { hop }, 5);
        let once = h.fault_at(FaultKind::IggyRestart, 6);
        h.healed(9);
        assert_eq!(h.faults[open].end_us, Some(9));
        assert_eq!(h.faults[once].end_us, Some(6));
        assert!(h.faults[open].active_at(7) && !h.faults[open].active_at(10));
    }

    #[test]
    fn a_history_round_trips_through_json() {
        let recorder = Recorder::new("s", 9);
        let p = recorder.add_producer("p", true, 5);
        let r = recorder.produce_request(p, TopicPartition::new("t", 1), vec![RecordValue::new(p, 0)], Some(0));
        let a = recorder.produce_attempt(r, "gw", 1);
        recorder.produce_outcome(r, a, AttemptOutcome::Error { code: 7 });
        recorder.fault_at(
            FaultKind::ResponseLost {
                hop: Hop::GatewayIggy { gateway: "gw".into() },
                produce: Some((r, a)),
            },
            3,
        );
        let history = recorder.finish();
        let json = serde_json::to_string(&history).expect("serialises");
        let back: History = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, history);
    }
}
