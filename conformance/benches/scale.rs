//! `make bench`, the scale matrix (docs/performance.md; in full in docs/performance-history.md,
//! round 4): the release gateway binary on the embedded backend, with 1, 8 and 64 client
//! connections producing (and as many reading back), topics of 1, 16 and 256 partitions, and
//! records of 100 B, 1 KiB and 64 KiB. For each cell:
//! produce and fetch throughput, produce latency p50/p99 (queued to acknowledged), and the
//! gateway's peak resident memory. Producers connect, fetch the topic's metadata and deliver one
//! record elsewhere before the produce clock starts, and are dropped only after it stops; readers
//! connect and fetch the metadata before the fetch clock starts. So each clock measures the
//! gateway's work and the clients' sending and reading, not librdkafka's start-up and teardown.
//! Every cell has a fixed amount of data and a deadline, so the
//! run stops by itself; a cell past its deadline is reported as such. Prints figures and writes
//! JSON; asserts nothing. Build the gateway first: `cargo build --release -p kafka-iggy-gateway`.

use clap::Parser;
use kafka_iggy_conformance::bench::{bench_output, start_release_gateway, write_json_report};
use kafka_iggy_conformance::cpu::Processes;
use kafka_iggy_conformance::ops_scrape;
use kafka_iggy_conformance::peers::process::PeerProcess;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

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
    #[arg(long, default_value_t = 64 << 20)]
    cell_bytes: usize,
    /// ...and at most this many records.
    #[arg(long, default_value_t = 200_000)]
    cell_records: usize,
    /// A cell not done by then is abandoned and reported as such.
    #[arg(long, default_value_t = 60)]
    cell_deadline_s: u64,
    /// Where the JSON goes; `bench/scale.json` in the target directory when unset.
    #[arg(long)]
    json: Option<PathBuf>,
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
    /// Records the gateway read per Fetch request (long polls that found nothing included).
    records_per_fetch_request: f64,
    /// The same CPU time, for each record fetched.
    fetch_gateway_cpu_us: f64,
    fetch_clients_cpu_us: f64,
    /// Records the gateway appended per Iggy append (one per partition of a Produce request),
    /// and per Produce request: how finely the clients' batching cut the cell's records.
    records_per_append: f64,
    records_per_produce_request: f64,
    load_1m: f64,
    /// Set when the cell hit its deadline; its figures are then partial.
    incomplete: Option<String>,
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

/// What the gateway counted, from its `/metrics` (docs/operating.md): records appended and read,
/// Iggy appends, and Produce and Fetch requests.
#[derive(Clone, Copy)]
struct Counted {
    produced: f64,
    appends: f64,
    produce_requests: f64,
    fetched: f64,
    fetch_requests: f64,
}

impl Counted {
    async fn scrape(ops: std::net::SocketAddr) -> anyhow::Result<Counted> {
        let (status, scrape) = ops_scrape::get(ops, "/metrics").await?;
        anyhow::ensure!(status == 200, "/metrics answered {status}");
        let requests =
            |api: &str| ops_scrape::sum(&scrape, "kafka_iggy_gateway_requests_total", &format!("api=\"{api}\""));
        Ok(Counted {
            produced: ops_scrape::sum(&scrape, "kafka_iggy_gateway_produced_records_total", ""),
            appends: ops_scrape::sum(
                &scrape,
                "kafka_iggy_gateway_backend_call_duration_seconds_count",
                "operation=\"append\"",
            ),
            produce_requests: requests("Produce"),
            fetched: ops_scrape::sum(&scrape, "kafka_iggy_gateway_fetched_records_total", ""),
            fetch_requests: requests("Fetch"),
        })
    }

    fn since(self, start: &Counted) -> Counted {
        Counted {
            produced: self.produced - start.produced,
            appends: self.appends - start.appends,
            produce_requests: self.produce_requests - start.produce_requests,
            fetched: self.fetched - start.fetched,
            fetch_requests: self.fetch_requests - start.fetch_requests,
        }
    }
}

/// The release gateway on the embedded backend, as a peer process (stopped with its process
/// group on drop), with the address of its operations listener; and the address it listens on.
fn start_gateway() -> anyhow::Result<(PeerProcess, std::net::SocketAddr, String)> {
    let ops = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let log_path = std::env::temp_dir().join(format!("kig-scale-{}.log", std::process::id()));
    let ops_listen = ops.to_string();
    let args = [
        "--backend",
        "embedded",
        "--instance-id",
        "7",
        "--max-frame-size",
        "8388608",
        "--metrics-listen",
        &ops_listen,
    ];
    let (gateway, address) = start_release_gateway(env!("CARGO_TARGET_TMPDIR"), &args, Vec::new(), &log_path)?;
    Ok((gateway, ops, address))
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

/// Queues `records` records round robin over the partitions, then awaits each delivery; returns
/// each record's queued-to-acknowledged time, and the producer, so that it is dropped only after
/// the cell's clock stops, and off the runtime ([`drop_off_runtime`]).
async fn produce(
    producer: FutureProducer,
    topic: String,
    partitions: u32,
    from: usize,
    records: usize,
    value: Arc<Vec<u8>>,
) -> (Vec<Duration>, FutureProducer) {
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
    (latencies, producer)
}

/// Drops librdkafka clients on a blocking thread. Dropping a `FutureProducer` joins its polling
/// thread, which polls in 100 ms slices, and then flushes: done inside a task, that blocks a
/// runtime worker for 100 ms or more, and every other producer's delivery wake-ups wait behind
/// it. Before this, a producer dropped at the end of its task made 8 and 64 connections look
/// 4–40× slower than one (docs/performance-history.md, "What the round-3 matrix measured instead").
async fn drop_off_runtime<T: Send + 'static>(clients: Vec<T>) {
    let _ = tokio::task::spawn_blocking(move || drop(clients)).await;
}

/// What the readers of a cell share.
struct Reader {
    /// Records read by all of them, and how many there are to read.
    seen: Arc<AtomicU64>,
    expected: u64,
    /// When `seen` reached `expected`, set by the reader that read the last record (the fetch
    /// clock's end, taken there rather than when the cell's task next runs), and the wake-up.
    all_seen_at: Arc<OnceLock<Instant>>,
    all_seen: Arc<Notify>,
    /// Set when the cell is over, read or not.
    stop: Arc<AtomicBool>,
    /// Met three times: once connected; then to start together once the cell has started its
    /// clock (so that no reader runs before the clock does); and last, done, once the cell has
    /// read the threads' CPU time (an ended thread's time is no longer counted).
    ready: Arc<Barrier>,
}

/// Reads `partitions` from offset 0 until the readers have all the records or `stop` is set. The
/// consumer connects and learns the topic's metadata before it meets the others at `ready`, and
/// starts when the cell's fetch clock has: assigned before it knows the partition's leader, librdkafka waits
/// out its 500 ms offset-query timer before the first ListOffsets, which the clock would count as
/// fetching (it did, before: every cell's fetch took 0.5 s or more, whatever its size). It starts
/// at offset 0, the start of the cell's new topic, rather than asking for the beginning: with many
/// partitions their ListOffsets answers come one by one, and a Fetch sent while only drained
/// partitions are ready waits out its 500 ms long poll before the others are fetched, a client's
/// start-up again, not reading.
fn consume(bootstrap: &str, topic: &str, partitions: Vec<i32>, reader: Reader) {
    let Reader {
        seen,
        expected,
        all_seen_at,
        all_seen,
        stop,
        ready,
    } = reader;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "scale")
        .set("enable.auto.commit", "false")
        // librdkafka stops fetching a partition whose prefetch queue holds queued.min.messages
        // (100,000) and by default looks again only 1 s later: a reader of 16 partitions of
        // 100 B records fills that in its first Fetch and then sat idle for most of the cell.
        // That pause is the client's, whatever the broker; 10 ms keeps it out of the measure.
        .set("fetch.queue.backoff.ms", "10")
        .create()
        .expect("consumer");
    let known = consumer.fetch_metadata(Some(topic), Duration::from_secs(30));
    ready.wait();
    ready.wait();
    match known {
        Err(e) => eprintln!("a consumer could not fetch the metadata of {topic}: {e}"),
        Ok(_) => {
            let mut assignment = TopicPartitionList::new();
            for p in partitions {
                assignment
                    .add_partition_offset(topic, p, Offset::Offset(0))
                    .expect("partition");
            }
            consumer.assign(&assignment).expect("assigned");
            while seen.load(Ordering::Relaxed) < expected && !stop.load(Ordering::Relaxed) {
                if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
                    if seen.fetch_add(1, Ordering::Relaxed) + 1 == expected {
                        let _ = all_seen_at.set(Instant::now());
                        all_seen.notify_one();
                    }
                }
            }
        }
    }
    ready.wait();
}

async fn cell(
    args: &Args,
    bootstrap: &str,
    pid: u32,
    ops: std::net::SocketAddr,
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
    let produce_counted = Counted::scrape(ops).await?;
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
    let produced_counted = Counted::scrape(ops).await?.since(&produce_counted);
    let mut incomplete = None;
    let mut latencies: Vec<Duration> = match produced {
        Ok(all) => {
            let (latencies, producers): (Vec<_>, Vec<_>) = all.into_iter().unzip();
            drop_off_runtime(producers).await;
            latencies.into_iter().flatten().collect()
        }
        Err(_) => {
            aborts.iter().for_each(|a| a.abort());
            incomplete = Some(format!("produce not done within {deadline:?}"));
            Vec::new()
        }
    };
    let seen = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let all_seen = Arc::new(Notify::new());
    let all_seen_at = Arc::new(OnceLock::new());
    // One reader per connection that has partitions to read (64 readers of one partition: one).
    let assignments: Vec<Vec<i32>> = (0..connections)
        .map(|c| {
            (0..partitions as i32)
                .filter(|p| *p as usize % connections == c)
                .collect()
        })
        .filter(|mine: &Vec<i32>| !mine.is_empty())
        .collect();
    let ready = Arc::new(Barrier::new(assignments.len() + 1));
    let readers: Vec<_> = assignments
        .into_iter()
        .map(|mine| {
            let reader = Reader {
                seen: seen.clone(),
                expected: records as u64,
                all_seen_at: all_seen_at.clone(),
                all_seen: all_seen.clone(),
                stop: stop.clone(),
                ready: ready.clone(),
            };
            let (bootstrap, topic) = (bootstrap.to_string(), topic.clone());
            std::thread::spawn(move || consume(&bootstrap, &topic, mine, reader))
        })
        .collect();
    let fetch_counted = Counted::scrape(ops).await?;
    // Once the readers are connected and know the topic, the fetch clock starts, on the thread
    // that releases them: a task on the runtime could be scheduled after the readers had run (64
    // of them and their librdkafka threads share two cores with it).
    let releasing = ready.clone();
    let (fetch_cpu_start, start) = tokio::task::spawn_blocking(move || {
        let ready = releasing;
        ready.wait();
        let clock = (Processes::take(&[pid]), Instant::now());
        ready.wait();
        clock
    })
    .await?;
    if incomplete.is_none() {
        let _ = tokio::time::timeout(deadline, all_seen.notified()).await;
    }
    let fetch_s = all_seen_at
        .get()
        .map_or_else(|| start.elapsed(), |at| *at - start)
        .as_secs_f64();
    let (fetch_clients_cpu, fetch_gateway_cpu) = Processes::take(&[pid]).since(&fetch_cpu_start);
    let fetched_counted = Counted::scrape(ops).await?.since(&fetch_counted);
    let fetched = seen.load(Ordering::Relaxed);
    if fetched < records as u64 && incomplete.is_none() {
        incomplete = Some(format!("fetched {fetched} of {records} within {deadline:?}"));
    }
    stop.store(true, Ordering::Relaxed);
    sampling.store(false, Ordering::Relaxed);
    // Off the runtime: the readers are let go, and a consumer closes as its thread ends, which
    // blocks.
    let _ = tokio::task::spawn_blocking(move || {
        ready.wait();
        readers.into_iter().for_each(|r| drop(r.join()));
        drop(sampler.join());
    })
    .await;
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
        records_per_append: produced_counted.produced / produced_counted.appends,
        fetch_gateway_cpu_us: fetch_gateway_cpu.total().as_secs_f64() * 1e6 / fetched.max(1) as f64,
        fetch_clients_cpu_us: fetch_clients_cpu.total().as_secs_f64() * 1e6 / fetched.max(1) as f64,
        records_per_produce_request: produced_counted.produced / produced_counted.produce_requests,
        records_per_fetch_request: fetched_counted.fetched / fetched_counted.fetch_requests,
        load_1m: load_1m(),
        incomplete,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (gateway, ops, bootstrap) = start_gateway()?;
    let pid = gateway.pid();
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
    println!("| conns | parts | record | records | produce rec/s | MB/s | p50 ms | p99 ms | produce CPU µs/rec: gateway, clients | records per append, per request | fetch rec/s | MB/s | fetch CPU µs/rec: gateway, clients | records per Fetch | peak RSS MiB | load |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut cells = Vec::new();
    for &record_bytes in &args.record_bytes {
        for &partitions in &args.partitions {
            for &connections in &args.connections {
                let c = cell(&args, &bootstrap, pid, ops, connections, partitions, record_bytes).await?;
                println!(
                    "| {} | {} | {} B | {} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2}, {:.2} | {:.1}, {:.0} | {:.0} | {:.1} | {:.2}, {:.2} | {:.0} | {:.0} | {:.1} |{}",
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
                    c.records_per_append,
                    c.records_per_produce_request,
                    c.fetch_records_per_s,
                    c.fetch_mb_per_s,
                    c.fetch_gateway_cpu_us,
                    c.fetch_clients_cpu_us,
                    c.records_per_fetch_request,
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
    let json = args
        .json
        .unwrap_or_else(|| bench_output(env!("CARGO_TARGET_TMPDIR"), "scale.json"));
    write_json_report(&json, &cells)?;
    Ok(())
}
