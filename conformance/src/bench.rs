//! Workloads `make bench` measures (not tests: they print figures and assert nothing about
//! speed): librdkafka producing and fetching 1 KiB records through any Kafka endpoint.

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use std::time::{Duration, Instant};

pub const ROUNDS: usize = 10;
/// Records per round: librdkafka's mock broker retains only about 5 MB per partition, so each
/// round's records are read back before the next round is written.
pub const ROUND_RECORDS: usize = 4_000;
pub const RECORDS: usize = ROUNDS * ROUND_RECORDS;
pub const RECORD_BYTES: usize = 1024;
pub const TOPIC: &str = "bench";

/// Seconds spent producing and fetching, and produce latency percentiles.
pub struct Figures {
    pub produce_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub fetch_s: f64,
}

/// What one librdkafka run produces and reads back: `rounds` rounds of `round_records` records
/// of `record_bytes` to partition 0 of `topic`.
#[derive(Debug, Clone)]
pub struct Workload {
    pub topic: String,
    pub rounds: usize,
    pub round_records: usize,
    pub record_bytes: usize,
}

impl Workload {
    /// The workload of the `gateway` bench (librdkafka's mock broker keeps about 5 MB a partition).
    pub fn standard() -> Self {
        Self {
            topic: TOPIC.to_string(),
            rounds: ROUNDS,
            round_records: ROUND_RECORDS,
            record_bytes: RECORD_BYTES,
        }
    }

    pub fn records(&self) -> usize {
        self.rounds * self.round_records
    }
}

/// Produces and reads back `ROUNDS` rounds through `bootstrap`, topic `TOPIC` partition 0.
pub async fn run(bootstrap: &str) -> Figures {
    run_workload(bootstrap, &Workload::standard()).await
}

/// Produces and reads back `workload` through `bootstrap`.
pub async fn run_workload(bootstrap: &str, workload: &Workload) -> Figures {
    let (topic, rounds, round_records) = (workload.topic.as_str(), workload.rounds, workload.round_records);
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let value = vec![b'x'; workload.record_bytes];
    warm_up(&producer, &consumer, topic, &value).await;
    let mut latencies = Vec::with_capacity(workload.records());
    let (mut produce_s, mut fetch_s) = (0.0, 0.0);
    for round in 0..rounds {
        let start = Instant::now();
        let mut pending = Vec::with_capacity(round_records);
        for i in 0..round_records {
            let key = (round * round_records + i).to_string();
            let record = FutureRecord::to(topic).key(&key).payload(&value).partition(0);
            let sent = Instant::now();
            let delivery = producer.send_result(record).map_err(|(e, _)| e).expect("queued");
            pending.push((sent, delivery));
        }
        let mut first_offset = None;
        // One partition: deliveries complete in order, so awaiting in order sees each completion.
        for (sent, delivery) in pending {
            let delivered = delivery
                .await
                .expect("not cancelled")
                .map_err(|(e, _)| e)
                .expect("delivered");
            first_offset.get_or_insert(delivered.offset);
            latencies.push(sent.elapsed());
        }
        produce_s += start.elapsed().as_secs_f64();

        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Offset(first_offset.expect("a record")))
            .expect("partition");
        consumer.assign(&assignment).expect("assigned");
        let start = Instant::now();
        let mut seen = 0;
        while seen < round_records {
            if let Some(message) = consumer.poll(Duration::from_secs(5)) {
                let message = message.expect("fetched");
                assert_eq!(message.payload().map(<[u8]>::len), Some(workload.record_bytes));
                seen += 1;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "fetch did not finish: {seen} of {round_records}"
            );
        }
        fetch_s += start.elapsed().as_secs_f64();
        // Not assigned while the next round is produced: otherwise the consumer follows the
        // produce, ends it parked in a long-poll Fetch at the high watermark, and the next
        // assign waits out that Fetch's max wait (500 ms) on the clock.
        consumer.unassign().expect("unassigned");
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)].as_secs_f64() * 1e3;
    Figures {
        produce_s,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        fetch_s,
    }
}

/// One record produced and read back, untimed: both clients connect, learn the partition's
/// leader and start their fetcher before the clock runs. Without it the first round measured
/// librdkafka's start-up (about a second of its metadata refresh after the first assign),
/// which swung the fetch figure five-fold from run to run.
async fn warm_up(producer: &FutureProducer, consumer: &BaseConsumer, topic: &str, value: &[u8]) {
    let delivered = producer
        .send(
            FutureRecord::to(topic).key("warm-up").payload(value).partition(0),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| e)
        .expect("the warm-up record is delivered");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(delivered.offset))
        .expect("partition");
    consumer.assign(&assignment).expect("assigned");
    let start = Instant::now();
    while consumer.poll(Duration::from_secs(5)).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the warm-up record was never fetched"
        );
    }
    consumer.unassign().expect("unassigned");
}

/// One line of figures.
pub fn print(name: &str, f: &Figures) {
    let mb = (RECORDS * RECORD_BYTES) as f64 / 1e6;
    println!(
        "{name:<22} produce {:>9.0} records/s {:>7.1} MB/s  p50 {:>7.2} ms  p99 {:>7.2} ms | fetch {:>9.0} records/s {:>7.1} MB/s",
        RECORDS as f64 / f.produce_s,
        mb / f.produce_s,
        f.p50_ms,
        f.p99_ms,
        RECORDS as f64 / f.fetch_s,
        mb / f.fetch_s
    );
}
