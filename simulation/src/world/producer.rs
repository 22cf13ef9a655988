//! A producer as librdkafka runs one: it asks for a producer id when idempotent, numbers each
//! partition's batches (base sequence), keeps up to `max_in_flight` Produce requests in flight on
//! one connection, gives each attempt `request_timeout`, and after any failure (an error code
//! included) closes the connection, waits `retry_backoff` and sends every unacknowledged batch
//! again, in order, until it is acknowledged.
//!
//! A plain producer (no producer id) writes through the one gateway it bootstraps from, as any
//! gateway takes its batches (PRODUCER-NONE-1). An idempotent one knows every gateway, as
//! librdkafka knows its bootstrap brokers, and sends each batch to its partition's leader
//! (PRODUCER-LEADER-1): it asks Metadata for the leaders at its start and after every failure
//! (NOT_LEADER_OR_FOLLOWER among them), keeps a connection to each gateway it has used, and
//! switches gateways only once nothing is in flight, so its window stays on one connection and
//! its batches reach the gateways in sequence order.
//!
//! Every request and attempt goes into the [`Recorder`], each attempt with the gateway it went
//! to; every record carries its [`RecordValue`] and a header naming the request and attempt that
//! sent that copy.

use crate::history::{attempt_header, AttemptOutcome, ProducerIx, RecordValue, Recorder, RequestId, TopicPartition};
use crate::kafka::{
    create_topic, encode_producer_batch, init_producer_id, partition_leaders, produce_answer, produce_frame,
};
use crate::trace::Trace;
use kafka_wire_client::WireClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;
use turmoil::net::TcpStream;

/// Kafka's TOPIC_ALREADY_EXISTS: another client created the topic first.
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// What one producer sends and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProducerSpec {
    pub idempotent: bool,
    pub records: u64,
    pub records_per_batch: u64,
    pub max_in_flight: u32,
    pub request_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    /// Before each batch it pauses up to this long (seeded), to vary interleavings.
    pub max_think_ms: u64,
}

/// Where and as whom it runs.
pub struct ProducerRun {
    pub index: ProducerIx,
    pub spec: ProducerSpec,
    pub topic: String,
    pub partitions: i32,
    /// The gateways it knows, the one it bootstraps from first: that one alone for a plain
    /// producer, every gateway for an idempotent one.
    pub gateways: Vec<String>,
    pub port: u16,
    pub seed: u64,
    pub recorder: Recorder,
    pub trace: Trace,
}

struct Batch {
    request: RequestId,
    partition: i32,
    values: Vec<String>,
    base_sequence: i32,
}

/// One attempt on the wire: which batch, which attempt, its correlation id and deadline.
struct InFlight {
    batch: usize,
    attempt: u32,
    correlation_id: i32,
    deadline: Instant,
}

/// An open connection to a gateway, numbered in the order the producer opened them.
struct Connection {
    client: WireClient<TcpStream>,
    number: u64,
}

/// The producer's connections, one per gateway at most; a gateway's is closed after any failure
/// on it.
#[derive(Default)]
struct Connections {
    open: BTreeMap<String, Connection>,
    opened: u64,
}

impl Connections {
    /// The connection to `gateway`, opened within `timeout` when there is none.
    async fn to(
        &mut self,
        gateway: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<&mut Connection, (AttemptOutcome, String)> {
        if !self.open.contains_key(gateway) {
            let stream = match tokio::time::timeout(timeout, TcpStream::connect((gateway, port))).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err((AttemptOutcome::ConnectionLost, format!("connect: {:?}", e.kind()))),
                Err(_) => return Err((AttemptOutcome::TimedOut, "connect timed out".into())),
            };
            self.opened += 1;
            self.open.insert(
                gateway.to_string(),
                Connection {
                    client: WireClient::new(stream),
                    number: self.opened,
                },
            );
        }
        Ok(self.open.get_mut(gateway).expect("opened above"))
    }

    fn close(&mut self, gateway: &str) {
        self.open.remove(gateway);
    }
}

impl ProducerRun {
    fn name(&self) -> String {
        format!("producer-{}", self.index)
    }

    /// Creates the topic (someone may have already) and, when idempotent, gets a producer id,
    /// at the gateway it bootstraps from; retried until it works.
    async fn setup(&self) -> (i64, i16) {
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        let bootstrap = &self.gateways[0];
        loop {
            let step = tokio::time::timeout(timeout, async {
                let mut conn = WireClient::new(TcpStream::connect((bootstrap.as_str(), self.port)).await?);
                let code = create_topic(&mut conn, &self.topic, self.partitions).await?;
                anyhow::ensure!(
                    code == 0 || code == TOPIC_ALREADY_EXISTS,
                    "CreateTopics answered {code}"
                );
                if !self.spec.idempotent {
                    return Ok((-1, -1));
                }
                let (code, pid, epoch) = init_producer_id(&mut conn).await?;
                anyhow::ensure!(code == 0, "InitProducerId answered {code}");
                Ok((pid, epoch))
            })
            .await;
            match step {
                Ok(Ok((pid, epoch))) => {
                    if self.spec.idempotent {
                        self.recorder.producer_id_granted(self.index, bootstrap, pid, epoch);
                        self.trace.event(
                            &self.name(),
                            format!("InitProducerId at {bootstrap}: producer id {pid}, epoch {epoch}"),
                        );
                    }
                    return (pid, epoch);
                }
                Ok(Err(e)) => self.trace.event(&self.name(), format!("setup failed: {e:#}")),
                Err(_) => self.trace.event(&self.name(), "setup timed out"),
            }
            tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
        }
    }

    /// PRODUCER-LEADER-1: each partition's leader, from the first gateway, trying them in turn
    /// from the `turn`-th, whose Metadata answer names a known gateway as the leader of every
    /// partition; `None` when none does. A gateway that fails to answer loses its connection.
    async fn partition_leaders(&self, connections: &mut Connections, turn: usize) -> Option<BTreeMap<i32, String>> {
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        let n = self.gateways.len();
        for step in 0..n {
            let gateway = &self.gateways[(turn + step) % n];
            let asked = async {
                let connection = connections
                    .to(gateway, self.port, timeout)
                    .await
                    .map_err(|(_, why)| why)?;
                match tokio::time::timeout(timeout, partition_leaders(&mut connection.client, &self.topic)).await {
                    Ok(Ok(answer)) => Ok(answer),
                    Ok(Err(e)) => Err(format!("{e:#}")),
                    Err(_) => Err(format!("no answer within {timeout:?}")),
                }
            }
            .await;
            let (code, partitions) = match asked {
                Ok(answer) => answer,
                Err(why) => {
                    connections.close(gateway);
                    self.trace.event(&self.name(), format!("Metadata at {gateway}: {why}"));
                    continue;
                }
            };
            let leaders: BTreeMap<i32, String> = partitions
                .into_iter()
                .filter(|p| p.error_code == 0)
                .filter_map(|p| Some((p.partition, p.leader_host.filter(|h| self.gateways.contains(h))?)))
                .collect();
            let whole = code == 0 && (0..self.partitions).all(|p| leaders.contains_key(&p));
            if self.trace.enabled() {
                let named: Vec<String> = leaders.iter().map(|(p, g)| format!("{p} at {g}")).collect();
                self.trace.event(
                    &self.name(),
                    format!("Metadata at {gateway}: error {code}, leaders {}", named.join(", ")),
                );
            }
            if whole {
                return Some(leaders);
            }
        }
        None
    }

    /// Sends every record until all are acknowledged.
    pub async fn run(self) {
        let me = self.name();
        let (pid, epoch) = self.setup().await;
        let mut rng = StdRng::seed_from_u64(self.seed);
        // Batches in creation order; the first `acked` are done.
        let mut batches: Vec<Batch> = Vec::new();
        let mut sequences = vec![0i32; self.partitions as usize];
        let mut created: u64 = 0;
        let mut acked = 0usize;
        let mut unsent = 0usize; // the next batch index to send
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        let mut connections = Connections::default();
        // The gateway the window is on: every request in flight went to it.
        let mut active: Option<String> = None;
        // Each partition's leader (an idempotent producer's); stale at the start and after any
        // failure, so it is asked again before the next send.
        let mut leaders: BTreeMap<i32, String> = BTreeMap::new();
        let mut leaders_stale = self.spec.idempotent;
        // Which gateway the next Metadata request starts at: they take turns, so one that does
        // not answer is not asked first every time.
        let mut metadata_turn = 0usize;
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        let backoff = Duration::from_millis(self.spec.retry_backoff_ms);
        while acked < batches.len() || created < self.spec.records {
            // Create the next batch when the window has room for it.
            if unsent == batches.len()
                && created < self.spec.records
                && in_flight.len() < self.spec.max_in_flight as usize
            {
                let think = rng.random_range(0..=self.spec.max_think_ms * 1000);
                tokio::time::sleep(Duration::from_micros(think)).await;
                let partition = (batches.len() as i32) % self.partitions;
                let n = self.spec.records_per_batch.min(self.spec.records - created);
                let values: Vec<RecordValue> = (created..created + n)
                    .map(|s| RecordValue::new(self.index, s))
                    .collect();
                created += n;
                let base_sequence = sequences[partition as usize];
                sequences[partition as usize] += n as i32;
                let request = self.recorder.produce_request(
                    self.index,
                    TopicPartition::new(&self.topic, partition),
                    values.clone(),
                    self.spec.idempotent.then_some(base_sequence),
                );
                batches.push(Batch {
                    request,
                    partition,
                    values: values.iter().map(RecordValue::encode).collect(),
                    base_sequence,
                });
            }
            if leaders_stale && in_flight.is_empty() {
                metadata_turn += 1;
                match self.partition_leaders(&mut connections, metadata_turn).await {
                    Some(found) => {
                        leaders = found;
                        leaders_stale = false;
                    }
                    None => {
                        tokio::time::sleep(backoff).await;
                        continue;
                    }
                }
            }
            // Fill the window.
            let mut failure: Option<(AttemptOutcome, String)> = None;
            while unsent < batches.len() && in_flight.len() < self.spec.max_in_flight as usize {
                let batch = &batches[unsent];
                let gateway = if self.spec.idempotent {
                    leaders
                        .get(&batch.partition)
                        .expect("the leaders name every partition")
                        .clone()
                } else {
                    self.gateways[0].clone()
                };
                if active.as_ref().is_some_and(|a| *a != gateway) && !in_flight.is_empty() {
                    // Another gateway leads this batch's partition: the window drains first, so
                    // the batches in flight on the old connection are answered before the next
                    // is sent on another, and the partitions' sequences reach the gateways in
                    // order.
                    break;
                }
                active = Some(gateway.clone());
                let connection = match connections.to(&gateway, self.port, timeout).await {
                    Ok(connection) => connection,
                    Err(failed) => {
                        failure = Some(failed);
                        break;
                    }
                };
                let attempt = self
                    .recorder
                    .produce_attempt(batch.request, &gateway, connection.number);
                let records = encode_producer_batch(
                    &batch.values,
                    &attempt_header(batch.request, attempt),
                    pid,
                    epoch,
                    if self.spec.idempotent { batch.base_sequence } else { -1 },
                );
                let (correlation_id, frame) =
                    produce_frame(&mut connection.client, &self.topic, batch.partition, records)
                        .expect("a Produce request encodes");
                if self.trace.enabled() {
                    self.trace.event(
                        &me,
                        format!(
                            "request {} attempt {attempt}: Produce {} records to partition {} at {gateway} (connection {})",
                            batch.request,
                            batch.values.len(),
                            batch.partition,
                            connection.number
                        ),
                    );
                }
                in_flight.push_back(InFlight {
                    batch: unsent,
                    attempt,
                    correlation_id,
                    deadline: Instant::now() + timeout,
                });
                unsent += 1;
                if let Err(e) = connection.client.send_frame(&frame).await {
                    failure = Some((AttemptOutcome::ConnectionLost, format!("send: {:?}", e.kind())));
                    break;
                }
            }
            // Wait for the oldest answer.
            if failure.is_none() {
                if let Some(oldest) = in_flight.front() {
                    let gateway = active.as_deref().expect("a request is in flight");
                    let client = &mut connections
                        .open
                        .get_mut(gateway)
                        .expect("a request is in flight on it")
                        .client;
                    match tokio::time::timeout_at(oldest.deadline, client.recv_frame()).await {
                        Err(_) => failure = Some((AttemptOutcome::TimedOut, format!("no answer within {timeout:?}"))),
                        Ok(Ok(None)) => failure = Some((AttemptOutcome::ConnectionLost, "connection closed".into())),
                        Ok(Err(e)) => failure = Some((AttemptOutcome::ConnectionLost, format!("{e:#}"))),
                        Ok(Ok(Some(frame))) => match produce_answer(oldest.correlation_id, frame) {
                            Ok((0, base_offset)) => {
                                let done = in_flight.pop_front().expect("the oldest");
                                let batch = &batches[done.batch];
                                self.recorder.produce_outcome(
                                    batch.request,
                                    done.attempt,
                                    AttemptOutcome::Acked { base_offset },
                                );
                                if self.trace.enabled() {
                                    self.trace.event(
                                        &me,
                                        format!(
                                            "request {} attempt {}: acknowledged at offset {base_offset}",
                                            batch.request, done.attempt
                                        ),
                                    );
                                }
                                acked += 1;
                            }
                            Ok((code, _)) => failure = Some((AttemptOutcome::Error { code }, format!("error {code}"))),
                            Err(e) => failure = Some((AttemptOutcome::ConnectionLost, format!("{e:#}"))),
                        },
                    }
                }
            }
            if let Some((outcome, why)) = failure {
                // The oldest attempt ended so; the others on the connection are abandoned with it
                // (their requests may still be written). All go again, in order.
                let mut first = true;
                for lost in in_flight.drain(..) {
                    let batch = &batches[lost.batch];
                    let outcome = if first { outcome } else { AttemptOutcome::ConnectionLost };
                    self.recorder.produce_outcome(batch.request, lost.attempt, outcome);
                    if self.trace.enabled() {
                        self.trace.event(
                            &me,
                            format!(
                                "request {} attempt {}: {}",
                                batch.request,
                                lost.attempt,
                                if first {
                                    why.as_str()
                                } else {
                                    "abandoned with the connection"
                                }
                            ),
                        );
                    }
                    first = false;
                }
                unsent = acked;
                if let Some(gateway) = active.take() {
                    connections.close(&gateway);
                }
                // A failure may mean the partition's leader moved (NOT_LEADER_OR_FOLLOWER, a
                // gateway down): ask again before the retry, as librdkafka refreshes its
                // metadata.
                leaders_stale = self.spec.idempotent;
                tokio::time::sleep(backoff).await;
            }
        }
        self.trace.event(&me, "every record acknowledged");
    }
}
