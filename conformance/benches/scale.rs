//! `make bench`, the scale matrix of docs/performance.md: the release gateway binary on the
//! embedded backend, with 1, 8 and 64 client connections producing (and as many reading back),
//! topics of 1, 16 and 256 partitions, and records of 100 B, 1 KiB and 64 KiB. For each cell:
//! produce and fetch throughput, produce latency p50/p99 (queued to acknowledged), and the
//! gateway's peak resident memory. Producers connect, fetch the topic's metadata and deliver one
//! record elsewhere before the clock starts. Every cell has a fixed amount of data and a deadline, so the
//! run stops by itself; a cell past its deadline is reported as such. Prints figures and writes
//! JSON; asserts nothing. Build the gateway first: `cargo build --release -p kafka-iggy-gateway`.

use clap::Parser;
use kafka_iggy_conformance::cpu::Processes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "The gateway's scale matrix: connections x partitions x record sizes")]
struct Args {
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64])]
    connections: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 16, 256])]
    partitions: Vec<u32>,
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1024, 65536])]
    record_bytes: Vec<usize>,
    /// Bytes of record values per cell (fewer records for larger ones)...
    #[arg(long, default_value_t = 16 << 20)]
    cell_bytes: usize,
    /// ...and at most this many records.
    #[arg(long, default_value_t = 40_000)]
    cell_records: usize,
    /// A cell not done by then is abandoned and reported as such.
    #[arg(long, default_value_t = 60)]
    cell_deadline_s: u64,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench/scale.json"))]
    json: PathBuf,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Serialize)]
struct Cell {
    connections: usize,
    partitions: u32,
    record_bytes: usize,
    records: usize,
    produce_records_per_s: f64,
    produce_mb_per_s: f64,
    produce_p50_ms: f64,
    produce_p99_ms: f64,
    fetch_records_per_s: f64,
    fetch_mb_per_s: f64,
    /// The gateway's peak VmRSS during the cell.
    gateway_peak_rss_mib: f64,
    /// CPU time per record produced: the gateway process's, and this process's (the clients').
    produce_gateway_cpu_us: f64,
    produce_clients_cpu_us: f64,
    load_1m: f64,
    /// Set when the cell hit its deadline; its figures are then partial.
    incomplete: Option<String>,
}

fn gateway_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("release/kafka-iggy-gateway")
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn load_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// The gateway process, killed on drop.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_gateway() -> anyhow::Result<(Gateway, String)> {
    let binary = gateway_binary();
    anyhow::ensure!(
        binary.exists(),
        "{} is missing: run `cargo build --release -p kafka-iggy-gateway` first",
        binary.display()
    );
    // A port chosen here: the gateway advertises its configured address.
    let address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string();
    let log_path = std::env::temp_dir().join(format!("kig-scale-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path)?;
    let child = Command::new(&binary)
        .args(["--listen", &address, "--backend", "embedded", "--instance-id", "7"])
        .args(["--max-frame-size", "8388608"])
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()?;
    let gateway = Gateway(child);
    let start = Instant::now();
    // Readiness of a process this run started: its log line, bounded.
    while !std::fs::read_to_string(&log_path).is_ok_and(|t| t.contains("listening on")) {
        anyhow::ensure!(start.elapsed() < Duration::from_secs(10), "the gateway did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((gateway, address))
}

fn admin(bootstrap: &str) -> anyhow::Result<AdminClient<DefaultClientContext>> {
    Ok(ClientConfig::new().set("bootstrap.servers", bootstrap).create()?)
}

/// A topic each producer writes one record to before a cell's clock starts.
const WARM_UP_TOPIC: &str = "scale-warm-up";

/// A producer connected to the gateway, with `topic`'s metadata fetched and one record delivered
/// (to [`WARM_UP_TOPIC`], so the cell's topic holds only the cell's records): a cell's clock then
/// measures producing, not librdkafka's start-up, which opens a second connection to the broker
/// it learns from the metadata at its first produce (64 of them start at once in a cell).
async fn connected_producer(bootstrap: String, topic: String) -> anyhow::Result<FutureProducer> {
    let producer = kafka_iggy_conformance::bench::producer(&bootstrap);
    let asking = producer.clone();
    tokio::task::spawn_blocking(move || asking.client().fetch_metadata(Some(&topic), Duration::from_secs(30)))
        .await??;
    producer
        .send(
            FutureRecord::<(), [u8]>::to(WARM_UP_TOPIC)
                .payload(b"warm-up")
                .partition(0),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| anyhow::anyhow!("the warm-up record: {e}"))?;
    Ok(producer)
}

async fn produce(
    producer: FutureProducer,
    topic: String,
    partitions: u32,
    from: usize,
    records: usize,
    value: Arc<Vec<u8>>,
) -> Vec<Duration> {
    let mut pending = Vec::with_capacity(records);
    for i in from..from + records {
        let partition = (i % partitions as usize) as i32;
        let mut record = FutureRecord::<(), [u8]>::to(&topic)
            .payload(value.as_slice())
            .partition(partition);
        let sent = Instant::now();
        loop {
            match producer.send_result(record) {
                Ok(delivery) => {
                    pending.push((sent, delivery));
                    break;
                }
                // The local queue is full (64 KiB records): wait for deliveries, then retry.
                Err((_, back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
    let mut latencies = Vec::with_capacity(records);
    for (sent, delivery) in pending {
        if let Ok(Ok(_)) = delivery.await {
            latencies.push(sent.elapsed());
        }
    }
    latencies
}

/// Reads `partitions` from offset 0 until `expected` records arrived or `stop` is set.
fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: Vec<i32>,
    expected: u64,
    seen: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    if partitions.is_empty() {
        return;
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "scale")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    consumer.assign(&assignment).expect("assigned");
    while seen.load(Ordering::Relaxed) < expected && !stop.load(Ordering::Relaxed) {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
            seen.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn cell(
    args: &Args,
    bootstrap: &str,
    pid: u32,
    connections: usize,
    partitions: u32,
    record_bytes: usize,
) -> anyhow::Result<Cell> {
    let records = (args.cell_bytes / record_bytes).min(args.cell_records).max(connections);
    let topic = format!("scale-{connections}-{partitions}-{record_bytes}");
    let admin = admin(bootstrap)?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(
            &[NewTopic::new(&topic, partitions as i32, TopicReplication::Fixed(1))],
            &options,
        )
        .await?
    {
        r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
    }
    let peak_kib = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak_kib, sampling) = (peak_kib.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                if let Some(kib) = rss_kib(pid) {
                    peak_kib.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let deadline = Duration::from_secs(args.cell_deadline_s);
    let value = Arc::new(vec![b'x'; record_bytes]);
    let per_connection = records / connections;
    let records = per_connection * connections;
    let connecting: Vec<_> = (0..connections)
        .map(|_| {
            let (bootstrap, topic) = (bootstrap.to_string(), topic.clone());
            tokio::spawn(connected_producer(bootstrap, topic))
        })
        .collect();
    let mut connected = Vec::with_capacity(connections);
    for producer in connecting {
        connected.push(producer.await??);
    }
    let cpu_start = Processes::take(&[pid]);
    let start = Instant::now();
    let producers: Vec<_> = connected
        .into_iter()
        .enumerate()
        .map(|(c, producer)| {
            let work = produce(
                producer,
                topic.clone(),
                partitions,
                c * per_connection,
                per_connection,
                value.clone(),
            );
            tokio::spawn(work)
        })
        .collect();
    let aborts: Vec<_> = producers.iter().map(|p| p.abort_handle()).collect();
    let produced = tokio::time::timeout(deadline, async {
        let mut all = Vec::new();
        for p in producers {
            all.push(p.await.expect("a producer task"));
        }
        all
    })
    .await;
    let produce_s = start.elapsed().as_secs_f64();
    let (clients_cpu, gateway_cpu) = Processes::take(&[pid]).since(&cpu_start);
    let mut incomplete = None;
    let mut latencies: Vec<Duration> = match produced {
        Ok(all) => all.into_iter().flatten().collect(),
        Err(_) => {
            aborts.iter().for_each(|a| a.abort());
            incomplete = Some(format!("produce not done within {deadline:?}"));
            Vec::new()
        }
    };
    let seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let readers: Vec<_> = (0..connections)
        .map(|c| {
            let mine: Vec<i32> = (0..partitions as i32)
                .filter(|p| *p as usize % connections == c)
                .collect();
            let (bootstrap, topic, seen, stop) = (bootstrap.to_string(), topic.clone(), seen.clone(), stop.clone());
            std::thread::spawn(move || consume(&bootstrap, &topic, mine, records as u64, seen, stop))
        })
        .collect();
    while seen.load(Ordering::Relaxed) < records as u64 && start.elapsed() < deadline && incomplete.is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fetch_s = start.elapsed().as_secs_f64();
    let fetched = seen.load(Ordering::Relaxed);
    if fetched < records as u64 && incomplete.is_none() {
        incomplete = Some(format!("fetched {fetched} of {records} within {deadline:?}"));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let _ = r.join();
    }
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    let _ = admin.delete_topics(&[&topic], &options).await;
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    };
    let mb = (records * record_bytes) as f64 / 1e6;
    Ok(Cell {
        connections,
        partitions,
        record_bytes,
        records,
        produce_records_per_s: records as f64 / produce_s,
        produce_mb_per_s: mb / produce_s,
        produce_p50_ms: pct(0.5),
        produce_p99_ms: pct(0.99),
        fetch_records_per_s: fetched as f64 / fetch_s,
        fetch_mb_per_s: fetched as f64 * record_bytes as f64 / 1e6 / fetch_s,
        gateway_peak_rss_mib: peak_kib.load(Ordering::Relaxed) as f64 / 1024.0,
        produce_gateway_cpu_us: gateway_cpu.total().as_secs_f64() * 1e6 / records as f64,
        produce_clients_cpu_us: clients_cpu.total().as_secs_f64() * 1e6 / records as f64,
        load_1m: load_1m(),
        incomplete,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (gateway, bootstrap) = start_gateway()?;
    let pid = gateway.0.id();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin(&bootstrap)?
        .create_topics(&[NewTopic::new(WARM_UP_TOPIC, 1, TopicReplication::Fixed(1))], &options)
        .await?
    {
        r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
    }
    println!(
        "scale matrix: gateway (embedded) at {bootstrap}; per cell at most {} records, {} MiB of values, {} s",
        args.cell_records,
        args.cell_bytes >> 20,
        args.cell_deadline_s
    );
    println!("| conns | parts | record | records | produce rec/s | MB/s | p50 ms | p99 ms | produce CPU µs/rec: gateway, clients | fetch rec/s | MB/s | peak RSS MiB | load |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut cells = Vec::new();
    for &record_bytes in &args.record_bytes {
        for &partitions in &args.partitions {
            for &connections in &args.connections {
                let c = cell(&args, &bootstrap, pid, connections, partitions, record_bytes).await?;
                println!(
                    "| {} | {} | {} B | {} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2}, {:.2} | {:.0} | {:.1} | {:.0} | {:.1} |{}",
                    c.connections,
                    c.partitions,
                    c.record_bytes,
                    c.records,
                    c.produce_records_per_s,
                    c.produce_mb_per_s,
                    c.produce_p50_ms,
                    c.produce_p99_ms,
                    c.produce_gateway_cpu_us,
                    c.produce_clients_cpu_us,
                    c.fetch_records_per_s,
                    c.fetch_mb_per_s,
                    c.gateway_peak_rss_mib,
                    c.load_1m,
                    c.incomplete
                        .as_ref()
                        .map_or(String::new(), |why| format!(" INCOMPLETE: {why}"))
                );
                cells.push(c);
            }
        }
    }
    drop(gateway);
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&cells)?)?;
    println!("JSON: {}", args.json.display());
    Ok(())
}
