//! A producer as librdkafka runs one: it asks for a producer id when idempotent, numbers each
//! partition's batches (base sequence), keeps up to `max_in_flight` Produce requests in flight on
//! one connection, gives each attempt `request_timeout`, and after any failure closes the
//! connection, waits `retry_backoff` and sends every unacknowledged batch again, in order, until
//! it is acknowledged. Every request and attempt goes into the [`Recorder`]; every record carries
//! its [`RecordValue`] and a header naming the request and attempt that sent that copy.

use crate::history::{AttemptOutcome, ProducerIx, RecordValue, Recorder, RequestId, TopicPartition};
use crate::kafka::{create_topic, encode_producer_batch, init_producer_id, produce_answer, produce_frame};
use crate::trace::Trace;
use kafka_wire_client::WireClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
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
    /// The host it connects to, and the gateway's name for the record (the same gateway).
    pub target: String,
    pub gateway: String,
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

impl ProducerRun {
    async fn connect(&self) -> std::io::Result<WireClient<TcpStream>> {
        Ok(WireClient::new(
            TcpStream::connect((self.target.as_str(), self.port)).await?,
        ))
    }

    /// Creates the topic (someone may have already) and, when idempotent, gets a producer id;
    /// retried until it works.
    async fn setup(&self) -> (i64, i16) {
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        loop {
            let step = tokio::time::timeout(timeout, async {
                let mut conn = self.connect().await?;
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
                        self.recorder.producer_id_granted(self.index, &self.gateway, pid, epoch);
                        self.trace.event(
                            &format!("producer-{}", self.index),
                            format!("InitProducerId: producer id {pid}, epoch {epoch}"),
                        );
                    }
                    return (pid, epoch);
                }
                Ok(Err(e)) => self
                    .trace
                    .event(&format!("producer-{}", self.index), format!("setup failed: {e:#}")),
                Err(_) => self.trace.event(&format!("producer-{}", self.index), "setup timed out"),
            }
            tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
        }
    }

    /// Sends every record until all are acknowledged.
    pub async fn run(self) {
        let me = format!("producer-{}", self.index);
        let (pid, epoch) = self.setup().await;
        let mut rng = StdRng::seed_from_u64(self.seed);
        // Batches in creation order; the first `acked` are done.
        let mut batches: Vec<Batch> = Vec::new();
        let mut sequences = vec![0i32; self.partitions as usize];
        let mut created: u64 = 0;
        let mut acked = 0usize;
        let mut unsent = 0usize; // the next batch index to send
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        let mut conn: Option<WireClient<TcpStream>> = None;
        let mut connections = 0u64;
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
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
            // Fill the window.
            let mut failure: Option<(AttemptOutcome, String)> = None;
            while unsent < batches.len() && in_flight.len() < self.spec.max_in_flight as usize {
                if conn.is_none() {
                    match tokio::time::timeout(timeout, self.connect()).await {
                        Ok(Ok(c)) => {
                            conn = Some(c);
                            connections += 1;
                        }
                        Ok(Err(e)) => {
                            failure = Some((AttemptOutcome::ConnectionLost, format!("connect: {:?}", e.kind())));
                            break;
                        }
                        Err(_) => {
                            failure = Some((AttemptOutcome::TimedOut, "connect timed out".into()));
                            break;
                        }
                    }
                }
                let client = conn.as_mut().expect("connected above");
                let batch = &batches[unsent];
                let attempt = self.recorder.produce_attempt(batch.request, &self.gateway, connections);
                let records = encode_producer_batch(
                    &batch.values,
                    &format!("{}/{attempt}", batch.request),
                    pid,
                    epoch,
                    if self.spec.idempotent { batch.base_sequence } else { -1 },
                );
                let (correlation_id, frame) =
                    produce_frame(client, &self.topic, batch.partition, records).expect("a Produce request encodes");
                if self.trace.enabled() {
                    self.trace.event(
                        &me,
                        format!(
                            "request {} attempt {attempt}: Produce {} records to partition {} (connection {connections})",
                            batch.request,
                            batch.values.len(),
                            batch.partition
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
                if let Err(e) = client.send_frame(&frame).await {
                    failure = Some((AttemptOutcome::ConnectionLost, format!("send: {:?}", e.kind())));
                    break;
                }
            }
            // Wait for the oldest answer.
            if failure.is_none() {
                if let Some(oldest) = in_flight.front() {
                    let client = conn.as_mut().expect("a request is in flight on it");
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
                conn = None;
                tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
            }
        }
        self.trace.event(&me, "every record acknowledged");
    }
}
