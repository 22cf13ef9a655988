//! Workloads `make bench` measures (not tests: they print figures and assert nothing about
//! speed): librdkafka producing and fetching 1 KiB records through any Kafka endpoint, the native
//! Iggy SDK's sends and polls beside it, and the lines both print.

use crate::cpu::{CpuUse, Processes};
use crate::latency::{
    percentile_ms, run_tail, CallTimes, ClientLatency, ClientStats, TailShape, Timed, STATS_INTERVAL_MS,
};
use iggy::prelude::{
    Consumer as IggyConsumer, Identifier, IggyClient, IggyMessage, MessageClient, Partitioning, PollingStrategy,
};
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

/// Seconds spent producing and fetching, produce latency percentiles, and the CPU time each
/// phase cost: this process's threads by kind, and the watched processes' (a server) summed.
pub struct Figures {
    pub produce_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub fetch_s: f64,
    pub produce_cpu: PhaseCpu,
    pub fetch_cpu: PhaseCpu,
    /// A paced run's only: where its latency went.
    pub latency_detail: Option<LatencyDetail>,
    /// Seconds a consumer created after the produce took to read every record back from the
    /// first, its creation and first requests included ([`Workload::cold_fetch`]).
    pub cold_fetch_s: Option<f64>,
}

/// Where a paced produce phase's latency went ([`crate::latency`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LatencyDetail {
    /// When the paced phase began, in seconds since the Unix epoch: where its windows sit on a
    /// timeline of the gateway's trace events (docs/operating.md, "Timelines").
    pub started_unix_s: f64,
    pub tail: TailShape,
    /// librdkafka's own split, for the rows it produces in.
    pub client: Option<ClientLatency>,
    /// The row's own sends, for the native row.
    pub sends: Option<CallTimes>,
}

/// CPU time of one phase: this process's threads by kind, and the watched processes', and the
/// time the machine's host took from its CPUs meanwhile.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PhaseCpu {
    pub own: CpuUse,
    pub others: CpuUse,
    pub stolen_ns: u64,
}

impl PhaseCpu {
    /// Adds the CPU used since `start` by this process and the processes `start` watched.
    pub fn add_since(&mut self, start: &Processes, pids: &[u32]) {
        let now = Processes::take(pids);
        let (own, others) = now.since(start);
        self.own.add(&own);
        self.others.add(&others);
        self.stolen_ns += now.stolen_since(start).as_nanos() as u64;
    }
}

/// What one librdkafka run produces and reads back: `rounds` rounds of `round_records` records
/// of `record_bytes` to partition 0 of `topic`.
#[derive(Debug, Clone)]
pub struct Workload {
    pub topic: String,
    pub rounds: usize,
    pub round_records: usize,
    pub record_bytes: usize,
    /// Other processes whose CPU time each phase counts (the server behind the endpoint).
    pub watch_pids: Vec<u32>,
    /// Produce at this many records per second instead of as fast as the client queues them
    /// (the latency run of docs/performance.md); `None`: unpaced.
    pub rate_per_s: Option<f64>,
    /// After the rounds, a consumer created then (a fresh connection, assigned from the first
    /// record, defaults otherwise) reads every record back: a consumer catching up on a backlog,
    /// next to the warm one that was connected before the produce.
    pub cold_fetch: bool,
    /// The producer sets `enable.idempotence=true`: the gateway checks and records each batch
    /// against its producer's state (docs/spec/producer-ids.md); off, librdkafka's default.
    pub idempotent: bool,
}

impl Workload {
    /// The workload of the `gateway` bench (librdkafka's mock broker keeps about 5 MB a partition).
    pub fn standard() -> Self {
        Self {
            topic: TOPIC.to_string(),
            rounds: ROUNDS,
            round_records: ROUND_RECORDS,
            record_bytes: RECORD_BYTES,
            watch_pids: Vec::new(),
            rate_per_s: None,
            cold_fetch: false,
            idempotent: false,
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

/// Seconds since the Unix epoch, now.
pub fn unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The benches' librdkafka producer's settings: acks=all (its default), linger.ms=5, a queue
/// that holds a whole round.
fn producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "false")
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .set("message.timeout.ms", "60000");
    config
}

/// The benches' librdkafka producer ([`producer_config`]).
pub fn producer(bootstrap: &str) -> FutureProducer {
    producer_config(bootstrap).create().expect("producer")
}

/// The same producer keeping librdkafka's statistics in `stats` every [`STATS_INTERVAL_MS`] when
/// `with_statistics`.
fn producer_with_stats(
    bootstrap: &str,
    with_statistics: bool,
    idempotent: bool,
    stats: ClientStats,
) -> FutureProducer<ClientStats> {
    let mut config = producer_config(bootstrap);
    config.set("enable.idempotence", idempotent.to_string());
    if with_statistics {
        config.set("statistics.interval.ms", STATS_INTERVAL_MS.to_string());
    }
    config.create_with_context(stats).expect("producer")
}

/// The offset a delivery was acknowledged at; a failed delivery fails the bench.
async fn delivered_offset(delivery: rdkafka::producer::DeliveryFuture) -> i64 {
    delivery
        .await
        .expect("not cancelled")
        .map_err(|(e, _)| e)
        .expect("delivered")
        .offset
}

/// Produces and reads back `workload` through `bootstrap`.
pub async fn run_workload(bootstrap: &str, workload: &Workload) -> Figures {
    let (topic, rounds, round_records) = (workload.topic.as_str(), workload.rounds, workload.round_records);
    let stats = ClientStats::default();
    let producer = producer_with_stats(
        bootstrap,
        workload.rate_per_s.is_some(),
        workload.idempotent,
        stats.clone(),
    );
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let value = vec![b'x'; workload.record_bytes];
    warm_up(&producer, &consumer, topic, &value).await;
    let mut latencies = Vec::with_capacity(workload.records());
    let mut paced = Vec::new();
    let mut paced_started_unix_s = 0.0;
    let (mut produce_s, mut fetch_s) = (0.0, 0.0);
    let (mut produce_cpu, mut fetch_cpu) = (PhaseCpu::default(), PhaseCpu::default());
    let pids = &workload.watch_pids;
    let mut first_of_all = None;
    for round in 0..rounds {
        let cpu_start = Processes::take(pids);
        let start = Instant::now();
        let first_offset = match workload.rate_per_s {
            None => produce_unpaced(&producer, workload, round, &value, &mut latencies).await,
            Some(rate) => {
                stats.begin();
                paced_started_unix_s = unix_s();
                let first_offset = produce_paced(&producer, workload, round, &value, rate, &mut paced).await;
                latencies.extend(paced.iter().map(|r| r.latency));
                first_offset
            }
        };
        produce_s += start.elapsed().as_secs_f64();
        produce_cpu.add_since(&cpu_start, pids);
        first_of_all = first_of_all.or(first_offset);

        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 0, Offset::Offset(first_offset.expect("a record")))
            .expect("partition");
        consumer.assign(&assignment).expect("assigned");
        let cpu_start = Processes::take(pids);
        let start = Instant::now();
        read_assigned(&consumer, round_records, workload.record_bytes, Duration::from_secs(60));
        fetch_s += start.elapsed().as_secs_f64();
        fetch_cpu.add_since(&cpu_start, pids);
        // Not assigned while the next round is produced: otherwise the consumer follows the
        // produce, ends it parked in a long-poll Fetch at the high watermark, and the next
        // assign waits out that Fetch's max wait (500 ms) on the clock.
        consumer.unassign().expect("unassigned");
    }
    let cold_fetch_s = workload.cold_fetch.then(|| {
        let first = first_of_all.expect("a record");
        read_back_cold(bootstrap, topic, first, workload.records(), workload.record_bytes)
    });
    latencies.sort();
    // A paced run's detail is its last round's (the table's latency run has one).
    let latency_detail = workload.rate_per_s.map(|_| LatencyDetail {
        started_unix_s: paced_started_unix_s,
        tail: run_tail(&paced),
        client: stats.finish(),
        sends: None,
    });
    Figures {
        produce_s,
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
        fetch_s,
        produce_cpu,
        fetch_cpu,
        latency_detail,
        cold_fetch_s,
    }
}

/// Seconds a consumer created now takes to read `records` records of partition 0 of `topic`
/// from offset `first`, its creation, connections and metadata included.
fn read_back_cold(bootstrap: &str, topic: &str, first: i64, records: usize, record_bytes: usize) -> f64 {
    let start = Instant::now();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-cold")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(first))
        .expect("partition");
    consumer.assign(&assignment).expect("assigned");
    read_assigned(&consumer, records, record_bytes, Duration::from_secs(120));
    start.elapsed().as_secs_f64()
}

/// Polls `consumer` until `records` records of `record_bytes` each came back; panics past
/// `limit`, so a stuck read ends the bench rather than hanging it.
fn read_assigned(consumer: &BaseConsumer, records: usize, record_bytes: usize, limit: Duration) {
    let start = Instant::now();
    let mut seen = 0;
    while seen < records {
        if let Some(message) = consumer.poll(Duration::from_secs(5)) {
            let message = message.expect("fetched");
            assert_eq!(message.payload().map(<[u8]>::len), Some(record_bytes));
            seen += 1;
        }
        assert!(start.elapsed() < limit, "fetch did not finish: {seen} of {records}");
    }
}

/// Queues a round's records as fast as librdkafka takes them, then awaits each delivery; returns
/// the first record's offset and adds each record's queued-to-acknowledged time to `latencies`.
async fn produce_unpaced(
    producer: &FutureProducer<ClientStats>,
    workload: &Workload,
    round: usize,
    value: &[u8],
    latencies: &mut Vec<Duration>,
) -> Option<i64> {
    let round_records = workload.round_records;
    let mut pending = Vec::with_capacity(round_records);
    for i in 0..round_records {
        let key = (round * round_records + i).to_string();
        let record = FutureRecord::to(&workload.topic).key(&key).payload(value).partition(0);
        let sent = Instant::now();
        let delivery = producer.send_result(record).map_err(|(e, _)| e).expect("queued");
        pending.push((sent, delivery));
    }
    let mut first_offset = None;
    // One partition: deliveries complete in order, so awaiting in order sees each completion.
    for (sent, delivery) in pending {
        let offset = delivered_offset(delivery).await;
        first_offset.get_or_insert(offset);
        latencies.push(sent.elapsed());
    }
    first_offset
}

/// Queues a round's records at `rate` records per second (record `i` is due `i / rate` seconds
/// after the round starts; tokio's timer wakes the pacer each millisecond, so records due within
/// one go out together) while a second task awaits each delivery as it completes. Each latency
/// counts from the record's due time, as the native row's do, so a pacer that falls behind shows
/// in the figures instead of hiding in them. `paced` gets this round's records, each with its
/// due time from the round's start.
async fn produce_paced(
    producer: &FutureProducer<ClientStats>,
    workload: &Workload,
    round: usize,
    value: &[u8],
    rate: f64,
    paced: &mut Vec<Timed>,
) -> Option<i64> {
    let round_records = workload.round_records;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    let waiter = tokio::spawn(async move {
        let mut first_offset = None;
        let mut measured = Vec::new();
        while let Some((due, delivery)) = rx.recv().await {
            let due: tokio::time::Instant = due;
            let offset = delivered_offset(delivery).await;
            first_offset.get_or_insert(offset);
            measured.push(Timed {
                due: due - start,
                latency: due.elapsed(),
            });
        }
        (first_offset, measured)
    });
    for i in 0..round_records {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if due > tokio::time::Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        let key = (round * round_records + i).to_string();
        let record = FutureRecord::to(&workload.topic).key(&key).payload(value).partition(0);
        let delivery = producer.send_result(record).map_err(|(e, _)| e).expect("queued");
        tx.send((due, delivery))
            .expect("the waiter runs until the sender is dropped");
    }
    drop(tx);
    let (first_offset, measured) = waiter.await.expect("the waiter does not panic");
    *paced = measured;
    first_offset
}

/// One record produced and read back, untimed: both clients connect, learn the partition's
/// leader and start their fetcher before the clock runs. Without it the first round measured
/// librdkafka's start-up (about a second of its metadata refresh after the first assign),
/// which swung the fetch figure five-fold from run to run.
async fn warm_up(producer: &FutureProducer<ClientStats>, consumer: &BaseConsumer, topic: &str, value: &[u8]) {
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

/// The 1-minute load average now (NaN without `/proc`): other work on the machine.
pub fn load_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// The target directory a bench works in: `CARGO_TARGET_DIR` when this run sets it, otherwise
/// the one the bench was built in. Benches pass `env!("CARGO_TARGET_TMPDIR")`, which cargo sets
/// when it builds them to that directory's `tmp`, so cargo's own configuration is followed too,
/// as the Makefile's `TARGET_DIR` follows it.
pub fn target_dir(target_tmpdir: &str) -> std::path::PathBuf {
    target_dir_of(std::env::var_os("CARGO_TARGET_DIR"), target_tmpdir)
}

fn target_dir_of(run_target_dir: Option<std::ffi::OsString>, target_tmpdir: &str) -> std::path::PathBuf {
    let built_in = || {
        let tmp = std::path::Path::new(target_tmpdir);
        tmp.parent().unwrap_or(tmp).to_path_buf()
    };
    run_target_dir.map(std::path::PathBuf::from).unwrap_or_else(built_in)
}

/// Where a bench's output named `file` goes unless it is told: `bench/` in its [`target_dir`].
pub fn bench_output(target_tmpdir: &str, file: &str) -> std::path::PathBuf {
    target_dir(target_tmpdir).join("bench").join(file)
}

/// Writes `report` to `path` as pretty JSON, its directory created, and prints where.
pub fn write_json_report(path: &std::path::Path, report: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(report)?)?;
    println!("JSON: {}", path.display());
    Ok(())
}

/// Where `cargo build --release -p kafka-iggy-gateway` puts the gateway binary, in the bench's
/// [`target_dir`]: the benches that measure it as it ships run this file.
pub fn release_gateway_binary(target_tmpdir: &str) -> std::path::PathBuf {
    target_dir(target_tmpdir).join("release/kafka-iggy-gateway")
}

/// Starts the release gateway binary ([`release_gateway_binary`] of `target_tmpdir`) with `args`, `env` and
/// `--listen` on a free loopback port, as a peer process: its own process group, output
/// appended to `log`, ready once the port accepts, stopped with its group on drop. Returns it
/// with the address it listens on, which it also advertises (so not port 0). Fails saying how
/// to build the binary when it is missing.
pub fn start_release_gateway(
    target_tmpdir: &str,
    args: &[&str],
    env: Vec<(String, String)>,
    log: &std::path::Path,
) -> anyhow::Result<(crate::peers::process::PeerProcess, String)> {
    let binary = release_gateway_binary(target_tmpdir);
    anyhow::ensure!(
        binary.is_file(),
        "no gateway binary at {} (`cargo build --release -p kafka-iggy-gateway` builds it; `make bench` does)",
        binary.display()
    );
    let port = crate::peers::process::free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let launch = crate::peers::Launch {
        program: binary,
        args: args
            .iter()
            .copied()
            .chain(["--listen", &listen])
            .map(str::to_owned)
            .collect(),
        env,
    };
    let gateway = crate::peers::process::PeerProcess::start(&launch, port, log)
        .map_err(|why| anyhow::anyhow!("the gateway binary: {why}"))?;
    Ok((gateway, listen))
}

/// The processes this one started that are named `name` (their `comm`), by process id: how a
/// bench finds the servers a harness started for it, to count their CPU.
pub fn child_pids(name: &str) -> Vec<u32> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`: the name may hold spaces, so split at the last ')'.
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let comm = head.split_once('(').map_or("", |(_, c)| c);
            let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
            comm == name && ppid == Some(own)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// One phase's `cpu` line: µs of CPU a record, the thread kinds that spent it (bench process and
/// the watched processes, which `watched` names: the server, or the server and a gateway binary),
/// cores busy, the CPU-bound ceiling (the rate at which that work would use all `cores`), time
/// ready with no CPU free, and time taken by the host.
pub fn print_phase_cpu(
    label: &str,
    phase: &str,
    cpu: &PhaseCpu,
    rate: f64,
    records: usize,
    cores: usize,
    watched: &str,
) {
    let own = cpu.own.total().as_secs_f64();
    let others = cpu.others.total().as_secs_f64();
    let per_record_us = (own + others) / records as f64 * 1e6;
    let ceiling = cores as f64 / ((own + others) / records as f64);
    let busy = rate * (own + others) / records as f64;
    println!(
        "cpu {label:<22} {phase:<7}: {per_record_us:>5.2} µs/record (bench process {own:.2} s: {}; {watched} {others:.2} s: {}); cores busy {busy:.2} of {cores}; CPU-bound ceiling {:.3} M rec/s; ready with no CPU free: bench process {:.3} s, {watched} {:.3} s; taken by the host {:.3} s",
        cpu.own.top(4),
        cpu.others.top(3),
        ceiling / 1e6,
        cpu.own.waiting().as_secs_f64(),
        cpu.others.waiting().as_secs_f64(),
        cpu.stolen_ns as f64 / 1e9
    );
}

/// The table's header: produce, its latency, fetch, load.
pub fn print_table_header() {
    println!("| path                   | produce                         | produce latency (queued → acked) | fetch                           | load  |");
    println!("|------------------------|---------------------------------|----------------------------------|---------------------------------|-------|");
}

/// One row of the table ([`print_table_header`]).
pub fn print_table_row(label: &str, records: usize, record_bytes: usize, f: &Figures, load_1m: f64) {
    let (produce, fetch) = (records as f64 / f.produce_s, records as f64 / f.fetch_s);
    println!(
        "| {:<22} | {:>7.3} M rec/s {:>6.1} MB/s | p50 {:>7.2} ms p99 {:>7.2} ms | {:>7.3} M rec/s {:>6.1} MB/s | {:>5.2} |",
        label,
        produce / 1e6,
        produce * record_bytes as f64 / 1e6,
        f.p50_ms,
        f.p99_ms,
        fetch / 1e6,
        fetch * record_bytes as f64 / 1e6,
        load_1m
    );
}

/// What the native Iggy SDK workload sends and reads back: `records` messages to partition 0 of
/// `stream`/`topic` in sends of `batch`, then polls of `batch` by offset from 0.
pub struct NativeWorkload<'a> {
    pub stream: &'a Identifier,
    pub topic: &'a Identifier,
    pub records: usize,
    pub batch: usize,
    /// Send at this many messages per second (what has come due, every 5 ms, as librdkafka's
    /// linger.ms here) instead of sends of `batch` back to back.
    pub rate_per_s: Option<f64>,
    /// The server processes whose CPU each phase counts.
    pub watch_pids: &'a [u32],
}

/// The native SDK's produce then read back ([`NativeWorkload`]) through `client` (the poll
/// through `poller` when given). `message(i)` is the `i`th message. Latencies count from each
/// send (unpaced) or each message's due time (paced); every message of a send is confirmed at once.
pub async fn run_native(
    client: &IggyClient,
    poller: Option<&IggyClient>,
    w: &NativeWorkload<'_>,
    mut message: impl FnMut(usize) -> anyhow::Result<IggyMessage>,
) -> anyhow::Result<Figures> {
    let mut latencies = Vec::with_capacity(w.records);
    let mut paced = Vec::new();
    let mut send_times = Vec::new();
    let pids = w.watch_pids;
    let (mut produce_cpu, mut fetch_cpu) = (PhaseCpu::default(), PhaseCpu::default());
    let cpu_start = Processes::take(pids);
    let started_unix_s = unix_s();
    let start = Instant::now();
    let mut sent_records = 0;
    let paced_start = tokio::time::Instant::now();
    while sent_records < w.records {
        let (n, due_times) = match w.rate_per_s {
            None => (w.batch.min(w.records - sent_records), None),
            Some(rate) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let elapsed_s = paced_start.elapsed().as_secs_f64();
                let due = ((elapsed_s * rate) as usize).min(w.records);
                if due <= sent_records {
                    continue;
                }
                let dues: Vec<tokio::time::Instant> = (sent_records..due)
                    .map(|i| paced_start + Duration::from_secs_f64(i as f64 / rate))
                    .collect();
                (due - sent_records, Some(dues))
            }
        };
        let mut messages: Vec<IggyMessage> = (sent_records..sent_records + n)
            .map(&mut message)
            .collect::<anyhow::Result<_>>()?;
        let sent = Instant::now();
        client
            .send_messages(w.stream, w.topic, &Partitioning::partition_id(0), &mut messages)
            .await?;
        match due_times {
            None => latencies.extend(std::iter::repeat_n(sent.elapsed(), n)),
            Some(dues) => {
                send_times.push(sent.elapsed());
                for due in dues {
                    let latency = due.elapsed();
                    latencies.push(latency);
                    paced.push(Timed {
                        due: due - paced_start,
                        latency,
                    });
                }
            }
        }
        sent_records += n;
    }
    let produce_s = start.elapsed().as_secs_f64();
    produce_cpu.add_since(&cpu_start, pids);
    let cpu_start = Processes::take(pids);
    let start = Instant::now();
    poll_all(poller.unwrap_or(client), w.stream, w.topic, w.records, w.batch).await?;
    let fetch_s = start.elapsed().as_secs_f64();
    fetch_cpu.add_since(&cpu_start, pids);
    latencies.sort();
    Ok(Figures {
        produce_s,
        p50_ms: percentile_ms(&latencies, 0.5),
        p99_ms: percentile_ms(&latencies, 0.99),
        fetch_s,
        produce_cpu,
        fetch_cpu,
        latency_detail: w.rate_per_s.map(|_| LatencyDetail {
            started_unix_s,
            tail: run_tail(&paced),
            client: None,
            sends: Some(CallTimes::of(send_times)),
        }),
        cold_fetch_s: None,
    })
}

/// Polls partition 0 of `stream`/`topic` by offset from 0, `batch` messages at a time, until
/// `records` have come back: the native SDK's sequential read.
pub async fn poll_all(
    poller: &IggyClient,
    stream: &Identifier,
    topic: &Identifier,
    records: usize,
    batch: usize,
) -> anyhow::Result<()> {
    let consumer = IggyConsumer::new(Identifier::named("kig-native-reader")?);
    let mut next = 0u64;
    while (next as usize) < records {
        let polled = poller
            .poll_messages(
                stream,
                topic,
                Some(0),
                &consumer,
                &PollingStrategy::offset(next),
                batch as u32,
                false,
            )
            .await?;
        if polled.messages.is_empty() {
            anyhow::bail!("native poll at {next} came back empty");
        }
        next += polled.messages.len() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::target_dir_of;
    use std::path::Path;

    /// The benches wrote their JSON under the source tree's `target/` whatever `CARGO_TARGET_DIR`
    /// said, while the Makefile's comments (and its `TARGET_DIR`) named the target directory; and
    /// they looked for the gateway binary by another rule than the one they wrote by.
    #[test]
    fn bench_target_dir_is_the_runs_cargo_target_dir_else_the_one_the_bench_was_built_in() {
        assert_eq!(target_dir_of(None, "/elsewhere/tgt/tmp"), Path::new("/elsewhere/tgt"));
        assert_eq!(
            target_dir_of(Some("/run/tgt".into()), "/elsewhere/tgt/tmp"),
            Path::new("/run/tgt")
        );
    }
}
