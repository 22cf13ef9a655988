//! `make bench`, the first figures of docs/performance.md: the CPU the release gateway binary
//! spends per record and per request, counted whole (every thread of its process, from
//! `/proc/PID/stat`'s utime + stime), beside the Iggy server's for the same records.
//!
//! For each backend (real Iggy: the binary in front of an `iggy-server` this run starts or finds;
//! embedded: the binary with its in-process store, no server) and each record size (100 B, 1 KiB,
//! 64 KiB by default), a librdkafka producer with the client's defaults and acks=all produces N
//! unkeyed records to one partition, then a librdkafka consumer with the client's defaults reads
//! them back. Each process's CPU is read around each phase. Then small requests: many raw
//! connections each sending Produce requests of 1–10 records round the partitions of a topic of
//! many partitions (acks=-1, one request in flight per connection), then fetching each of those
//! batches back by offset, one Fetch per batch: CPU per request.
//!
//! With `--clients java` (a default), the throughput part runs once more with Kafka's official
//! Java client at its own defaults (idempotent producer, batch.size=16384, linger.ms=5; the
//! consumer's fetch defaults), the project's `CpuLoad` program compiled by java/prepare.sh into
//! `--java-work`; without a JVM or the prepared jars those rows are skipped, saying why.
//!
//! Prints one table per run, and with `--runs` above 1 each figure's median and range over the
//! runs; writes JSON. Asserts nothing. Build the gateway first: `cargo build --release -p
//! kafka-iggy-gateway` (`make bench` does).

use anyhow::{ensure, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use kafka_iggy_conformance::bench::{bench_output, load_1m, release_gateway_binary, write_json_report};
use kafka_iggy_conformance::cpu::Snapshot;
use kafka_iggy_conformance::peers::process::{free_port, PeerProcess};
use kafka_iggy_conformance::peers::Launch;
use kafka_iggy_conformance::real_iggy::{discover_with_env, parse_env_pair, Discovery, IggyServer};
use kafka_iggy_conformance::relay::{Relay, RelayWork};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use kig_core::batch::{encode_batch, parse_batches, Record, RecordBatch};
use kig_core::compression::Compression;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum BackendRow {
    /// The release binary on a real Iggy server.
    Iggy,
    /// The release binary on its embedded backend (the store in the gateway's process).
    Embedded,
}

/// Which client drives the throughput part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum ClientRow {
    /// librdkafka through the `rdkafka` crate, with the client's defaults.
    Librdkafka,
    /// Kafka's official Java client with its defaults (java/src/kafkaiggy/compat/CpuLoad.java).
    Java,
}

#[derive(Parser, Debug)]
#[command(about = "CPU per record and per request: the release gateway binary beside the Iggy server")]
struct Args {
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [BackendRow::Iggy, BackendRow::Embedded])]
    backends: Vec<BackendRow>,
    /// Record sizes of the throughput part, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1024, 65536])]
    sizes: Vec<usize>,
    /// Bytes of record values per size (fewer records for larger ones)...
    #[arg(long, default_value_t = 512 << 20)]
    size_bytes: usize,
    /// ...and at most this many records. Enough that each phase takes several tenths of a second
    /// of the gateway's CPU, against /proc's 10 ms ticks.
    #[arg(long, default_value_t = 1_000_000)]
    max_records: usize,
    /// The clients of the throughput part, each with its own defaults.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ClientRow::Librdkafka, ClientRow::Java])]
    clients: Vec<ClientRow>,
    /// The Java tier's work directory, prepared by `java/prepare.sh DIR` (`make bench` does);
    /// `compat-java` in the target directory when unset. `cargo bench` runs this from the
    /// package's directory (conformance/), so a relative DIR is taken from there.
    #[arg(long)]
    java_work: Option<PathBuf>,
    /// The kafka-clients version of java/clients.lock the Java rows run.
    #[arg(long, default_value = "4.3.0")]
    java_version: String,
    /// Connections of the small-request part (0 skips it).
    #[arg(long, default_value_t = 64)]
    small_connections: usize,
    /// Partitions of its topic.
    #[arg(long, default_value_t = 256)]
    small_partitions: i32,
    /// Produce requests per connection (as many Fetches follow); each carries 1 to 10 records.
    #[arg(long, default_value_t = 300)]
    small_requests: usize,
    /// Each small Fetch's partition limit is its records' value bytes alone, short of what the
    /// batch takes, so it serves fewer records than the batch holds and no read made ahead is
    /// ever taken: reads ahead pile up to their limit (the bench's first version, which found
    /// the read-ahead table swept on every read, docs/performance-history.md, round 19).
    #[arg(long)]
    small_fetch_short: bool,
    /// Value bytes of each small record.
    #[arg(long, default_value_t = 100)]
    small_record_bytes: usize,
    /// The whole set this many times, each on a gateway process of its own (one Iggy server).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// `KEY=VALUE` added to the environment of an Iggy server this run starts (repeatable).
    #[arg(long = "iggy-server-env", value_parser = parse_env_pair)]
    iggy_server_env: Vec<(String, String)>,
    /// `KEY=VALUE` added to the gateway binary's environment (repeatable), e.g.
    /// `IGGY_KAFKA_WORKER_THREADS=2` to compare worker counts (LIMIT-WORKERS-1).
    #[arg(long = "gateway-env", value_parser = parse_env_pair)]
    gateway_env: Vec<(String, String)>,
    /// The gateway binary to measure instead of the release build in the target directory (to
    /// compare two builds in interleaved runs: give them as `--gateway-bin A --gateway-bin B`).
    #[arg(long = "gateway-bin")]
    gateway_bins: Vec<PathBuf>,
    /// Every client connects through a relay that only copies bytes (conformance/src/relay.rs, on
    /// a thread of this process; the gateway advertises it), and the relay's CPU per record, and
    /// per request in the small part, is printed beside the gateway's: the least any process
    /// standing between the client and the gateway spends on the same bytes, the kernel's copy in
    /// and copy out with their wake-ups. A small request through it is one read and one write on
    /// each side, as a small Produce on Iggy is for the gateway (the client's side and Iggy's).
    #[arg(long)]
    relay: bool,
    /// With `--relay`: the relay also does what the wire formats demand of any process turning a
    /// Kafka Produce into an Iggy send, on every byte a client sends (Kafka's CRC32C, the pinned
    /// SDK's encoding of each 1 KiB as an Iggy message with its xxHash3 and its copy into the
    /// frame; conformance/src/relay.rs, `RelayWork::FormatChecks`): its 1 KiB produce figure is
    /// the floor of a gateway's.
    #[arg(long, requires = "relay")]
    relay_checks: bool,
    /// Where the JSON goes; `bench/cpu.json` in the target directory when unset.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Linux's clock ticks per second for `/proc/PID/stat` (`USER_HZ`), 100 wherever Linux runs.
const TICKS_PER_S: f64 = 100.0;

/// The CPU time of process `pid` so far, every thread it has or had (utime + stime of
/// `/proc/PID/stat`, which include threads that have exited), in seconds; `None` without it.
fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: the name may hold spaces, so split at the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_S)
}

/// The context switches of process `pid`'s live threads so far, voluntary and not (each
/// `/proc/PID/task/TID/status`); 0 without them. (`/proc/PID/io` counts no socket call, so the
/// bench cannot count the gateway's reads and writes that way; `strace -c -f -p PID` does.)
fn process_switches(pid: u32) -> u64 {
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .map(|task| {
                    let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
                    field(&status, "voluntary_ctxt_switches:") + field(&status, "nonvoluntary_ctxt_switches:")
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Whole-process CPU of the gateway and the server (when there is one) around one phase, with
/// the gateway's threads by kind (from their schedstat; threads that ended are not in these).
struct Around {
    gateway_pid: u32,
    server_pid: Option<u32>,
    gateway_s: f64,
    server_s: f64,
    threads: Snapshot,
    /// This process's threads, for the relay's (`--relay`).
    own_threads: Snapshot,
    switches: u64,
    at: Instant,
}

/// The name of the relay's thread (conformance/src/relay.rs).
const RELAY_THREAD: &str = "relay";

impl Around {
    fn start(gateway_pid: u32, server_pid: Option<u32>) -> Self {
        Self {
            gateway_pid,
            server_pid,
            gateway_s: process_cpu_s(gateway_pid).unwrap_or(f64::NAN),
            server_s: server_pid.and_then(process_cpu_s).unwrap_or(f64::NAN),
            threads: Snapshot::take(Some(gateway_pid)),
            own_threads: Snapshot::take(None),
            switches: process_switches(gateway_pid),
            at: Instant::now(),
        }
    }

    fn end(self) -> PhaseCpu {
        let gateway_s = process_cpu_s(self.gateway_pid).unwrap_or(f64::NAN) - self.gateway_s;
        let server_s = self.server_pid.and_then(process_cpu_s).unwrap_or(f64::NAN) - self.server_s;
        let threads = Snapshot::take(Some(self.gateway_pid)).since(&self.threads);
        let relay_ns = Snapshot::take(None)
            .by_thread_since(&self.own_threads)
            .get(RELAY_THREAD)
            .copied();
        let switches = process_switches(self.gateway_pid).saturating_sub(self.switches);
        PhaseCpu {
            elapsed_s: self.at.elapsed().as_secs_f64(),
            gateway_switches: switches,
            gateway_s,
            server_s: self.server_pid.map(|_| server_s),
            relay_s: relay_ns.map(|ns| ns as f64 / 1e9),
            gateway_threads: threads.top(4),
        }
    }
}

#[derive(Serialize, Clone)]
struct PhaseCpu {
    elapsed_s: f64,
    /// The gateway process's CPU, whole.
    gateway_s: f64,
    /// The Iggy server process's CPU, whole; `None` on the embedded backend.
    server_s: Option<f64>,
    /// The relay's CPU (its one thread), with `--relay`.
    relay_s: Option<f64>,
    /// The context switches of the gateway's live threads over the phase.
    gateway_switches: u64,
    /// The gateway's thread kinds that spent the most, as `kind 1.23 s`.
    gateway_threads: String,
}

#[derive(Serialize, Clone)]
struct Measured {
    run: usize,
    /// Which of the binaries measured (`--gateway-bin`), from 1; 1 when there is one.
    binary: usize,
    backend: BackendRow,
    /// The client of a throughput phase; librdkafka for the raw small requests, which are the
    /// project's wire client.
    client: ClientRow,
    /// `produce`, `fetch`, `small produce`, `small fetch`, `idle`.
    phase: &'static str,
    record_bytes: usize,
    records: usize,
    /// Kafka requests the phase sent (the small-request part only).
    requests: Option<usize>,
    cpu: PhaseCpu,
    load_1m: f64,
}

impl Measured {
    fn per_record_us(&self, s: f64) -> f64 {
        s / self.records.max(1) as f64 * 1e6
    }

    fn per_request_us(&self, s: f64) -> Option<f64> {
        self.requests.map(|n| s / n.max(1) as f64 * 1e6)
    }

    fn ratio(&self) -> Option<f64> {
        self.cpu.server_s.map(|server| self.cpu.gateway_s / server)
    }
}

#[derive(Serialize)]
struct Report {
    sizes: Vec<usize>,
    runs: usize,
    cores: usize,
    iggy_server_env: Vec<(String, String)>,
    gateway_env: Vec<(String, String)>,
    /// Whether the clients went through the relay (`--relay`).
    relay: bool,
    /// Whether the relay did the formats' work too (`--relay-checks`).
    relay_checks: bool,
    /// The gateway binaries measured, in `Measured::binary` order.
    binaries: Vec<PathBuf>,
    rows: Vec<Measured>,
    skipped: Vec<String>,
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await?;
    for result in results {
        result.map_err(|(topic, code)| anyhow::anyhow!("creating {topic}: {code}"))?;
    }
    Ok(())
}

/// librdkafka's defaults (acks=all, linger.ms=5, no idempotence), with a queue deep enough that
/// the sender never waits on it.
fn producer(bootstrap: &str) -> anyhow::Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "2097151")
        .set("message.timeout.ms", "120000")
        .create()?)
}

/// librdkafka's consumer defaults; assigned, not subscribed, so no group round is on the clock.
fn consumer(bootstrap: &str) -> anyhow::Result<BaseConsumer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kig-cpu-bench")
        .set("enable.auto.commit", "false")
        .create()?)
}

/// One throughput pass: `records` unkeyed values of `record_bytes` to partition 0 of `topic`
/// through `bootstrap`, the gateway's and server's CPU counted around each phase.
struct Pass<'a> {
    bootstrap: &'a str,
    topic: &'a str,
    records: usize,
    record_bytes: usize,
    gateway_pid: u32,
    server_pid: Option<u32>,
}

/// Produces the pass's records with librdkafka, then reads them back.
async fn throughput(pass: &Pass<'_>) -> anyhow::Result<(PhaseCpu, PhaseCpu)> {
    let &Pass {
        bootstrap,
        topic,
        records,
        record_bytes,
        gateway_pid,
        server_pid,
    } = pass;
    let producer = producer(bootstrap)?;
    let value = vec![b'x'; record_bytes];
    // Connected and the partition's leader known before the clock runs.
    let first = producer
        .send(
            FutureRecord::<(), _>::to(topic).payload(&value).partition(0),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| e)
        .context("the warm-up record")?
        .offset;
    let around = Around::start(gateway_pid, server_pid);
    let mut pending = Vec::with_capacity(records);
    for _ in 0..records {
        loop {
            match producer.send_result(FutureRecord::<(), _>::to(topic).payload(&value).partition(0)) {
                Ok(delivery) => {
                    pending.push(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }
    for delivery in pending {
        delivery.await?.map_err(|(e, _)| e).context("a record not delivered")?;
    }
    let produce = around.end();
    drop(producer);

    let consumer = consumer(bootstrap)?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Offset(first + 1))?;
    let around = Around::start(gateway_pid, server_pid);
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut seen = 0;
    while seen < records {
        if let Some(message) = consumer.poll(Duration::from_secs(1)) {
            let message = message?;
            ensure!(
                message.payload().map(<[u8]>::len) == Some(record_bytes),
                "a record of another size"
            );
            seen += 1;
        }
        ensure!(Instant::now() < deadline, "fetch did not finish: {seen} of {records}");
    }
    let fetch = around.end();
    Ok((produce, fetch))
}

/// How to run the Java client's `CpuLoad`: `java` and the class path, or why it cannot run.
struct JavaLoad {
    java: PathBuf,
    class_path: String,
}

impl JavaLoad {
    fn find(work: &std::path::Path, version: &str) -> Result<JavaLoad, String> {
        if let Ok(why) = std::fs::read_to_string(work.join(format!("unavailable-{version}"))) {
            return Err(format!("kafka-clients {version}: {}", why.trim()));
        }
        let classes = work.join("classes").join(version);
        let jars = work.join("jars").join(version);
        if !classes.join("kafkaiggy/compat/CpuLoad.class").is_file() {
            return Err(format!(
                "no CpuLoad class under {} (`java/prepare.sh {}` compiles it; `make bench` does)",
                classes.display(),
                work.display()
            ));
        }
        let java = kafka_iggy_conformance::compat::work_dir::find_java()
            .ok_or("no java on PATH or in JAVA_HOME (make setup installs a JDK)")?;
        Ok(JavaLoad {
            java,
            class_path: format!("{}:{}/*", classes.display(), jars.display()),
        })
    }

    /// Runs one `CpuLoad` phase and returns the gateway's and server's CPU around it, the JVM's
    /// start and connection left out (the program says `ready` and waits for a line), and the
    /// offset it said (the first record's, for a produce).
    async fn phase(
        &self,
        args: &[String],
        gateway_pid: u32,
        server_pid: Option<u32>,
    ) -> anyhow::Result<(PhaseCpu, i64)> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let mut child = tokio::process::Command::new(&self.java)
            .arg("-cp")
            .arg(&self.class_path)
            .arg("kafkaiggy.compat.CpuLoad")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting java")?;
        let mut stdin = child.stdin.take().context("java's stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("java's stdout")?).lines();
        let limit = Duration::from_secs(360);
        let ready = next_line(&mut lines, limit, "ready").await;
        let offset = match ready.as_deref().map(|l| l.strip_prefix("ready ")) {
            Ok(Some(offset)) => offset.parse::<i64>().context("CpuLoad's ready offset")?,
            _ => {
                let mut stderr = String::new();
                if let Some(mut err) = child.stderr.take() {
                    use tokio::io::AsyncReadExt;
                    let _ = tokio::time::timeout(limit, err.read_to_string(&mut stderr)).await;
                }
                anyhow::bail!("CpuLoad {}: {:?}; its stderr: {}", args.join(" "), ready, stderr.trim());
            }
        };
        let around = Around::start(gateway_pid, server_pid);
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
        let done = next_line(&mut lines, limit, "done").await?;
        let cpu = around.end();
        ensure!(done.starts_with("done "), "CpuLoad said {done:?}, not done");
        let status = tokio::time::timeout(limit, child.wait())
            .await
            .context("CpuLoad did not exit")??;
        ensure!(status.success(), "CpuLoad {} exited with {status}", args.join(" "));
        Ok((cpu, offset))
    }
}

/// The next line `CpuLoad` prints, within `limit`.
async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    limit: Duration,
    what: &str,
) -> anyhow::Result<String> {
    match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(Ok(None)) => anyhow::bail!("CpuLoad ended before it said {what}"),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => anyhow::bail!("CpuLoad said no {what} within {limit:?}"),
    }
}

/// Produces the pass's records with the Java client, then reads them back, each phase in a JVM of
/// its own.
async fn java_throughput(java: &JavaLoad, pass: &Pass<'_>) -> anyhow::Result<(PhaseCpu, PhaseCpu)> {
    let common = |phase: &str| {
        let (records, size) = (pass.records.to_string(), pass.record_bytes.to_string());
        ["--phase", phase, "--bootstrap", pass.bootstrap, "--topic", pass.topic]
            .into_iter()
            .chain(["--records", &records, "--size", &size])
            .map(str::to_owned)
            .collect::<Vec<String>>()
    };
    let (produce, first) = java
        .phase(&common("produce"), pass.gateway_pid, pass.server_pid)
        .await?;
    let mut consume = common("consume");
    consume.extend(["--from".to_owned(), (first + 1).to_string()]);
    let (fetch, _) = java.phase(&consume, pass.gateway_pid, pass.server_pid).await?;
    Ok((produce, fetch))
}

/// One uncompressed batch of `count` unkeyed records of `value`.
fn small_batch(count: usize, value: &Bytes) -> anyhow::Result<Bytes> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let records = (0..count)
        .map(|_| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 0,
            key: None,
            value: Some(value.clone()),
            headers: Vec::new(),
        })
        .collect();
    Ok(encode_batch(&RecordBatch::from_producer(
        Compression::None,
        now,
        records,
    ))?)
}

const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 11;

/// One connection's produced batches: (partition, base offset, records).
type Produced = Vec<(i32, i64, usize)>;

/// One connection's Produce requests: request `j` carries `1 + j % 10` records to the `j`th of
/// its partitions (`index`, `index + connections`, ...), so no two connections write one
/// partition.
async fn small_produce(
    bootstrap: String,
    topic: String,
    index: usize,
    connections: usize,
    partitions: i32,
    requests: usize,
    value: Bytes,
) -> anyhow::Result<Produced> {
    let mut client = WireClient::connect(&bootstrap).await?;
    let own: Vec<i32> = (index as i32..partitions).step_by(connections).collect();
    ensure!(!own.is_empty(), "more connections than partitions");
    let mut produced = Vec::with_capacity(requests);
    for j in 0..requests {
        let partition = own[j % own.len()];
        let count = 1 + j % 10;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(&topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(small_batch(count, &value)?))])]);
        let response: ProduceResponse = client.request(ApiKey::Produce, PRODUCE_V, &request).await?;
        let answer = response
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .context("Produce answered no partition")?;
        ensure!(answer.error_code == 0, "Produce: error {}", answer.error_code);
        produced.push((partition, answer.base_offset, count));
    }
    Ok(produced)
}

/// A batch's header, and room for each unkeyed record beyond its value (its length, attributes,
/// deltas, key and value lengths and header count take 7 bytes at these sizes): a partition
/// limit of `BATCH_HEADER_BYTES + count * (value + RECORD_ROOM_BYTES)` holds `count` records and
/// not `count + 1` for the counts sent here (1–10).
const BATCH_HEADER_BYTES: usize = 61;
const RECORD_ROOM_BYTES: usize = 16;

/// A small Fetch's partition limit for a batch of `count` records of `record_bytes`
/// (`short`: [`Args::small_fetch_short`]).
fn partition_limit(count: usize, record_bytes: usize, short: bool) -> i32 {
    let bytes = if short {
        count * record_bytes
    } else {
        BATCH_HEADER_BYTES + count * (record_bytes + RECORD_ROOM_BYTES)
    };
    i32::try_from(bytes).unwrap_or(i32::MAX)
}

/// Fetches each of `produced` back by its base offset, one Fetch per batch, its partition limit
/// room for that batch's records and not one more, as a consumer catching up in small steps
/// would; returns the records that came back.
async fn small_fetch(
    bootstrap: String,
    topic: String,
    produced: Produced,
    record_bytes: usize,
    short: bool,
) -> anyhow::Result<usize> {
    let mut client = WireClient::connect(&bootstrap).await?;
    let mut records = 0;
    for (partition, offset, count) in produced {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(i32::MAX)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(&topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(partition_limit(count, record_bytes, short))])]);
        let response: FetchResponse = client.request(ApiKey::Fetch, FETCH_V, &request).await?;
        let data = response
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .context("Fetch answered no partition")?;
        ensure!(data.error_code == 0, "Fetch: error {}", data.error_code);
        let batches = parse_batches(data.records.as_ref().context("no records")?)?;
        let fetched: usize = batches.iter().map(|b| b.records_count as usize).sum();
        ensure!(
            fetched > 0,
            "Fetch at {offset} of partition {partition} came back empty"
        );
        records += fetched;
    }
    Ok(records)
}

/// The small-request part: `Produce` then `Fetch` from every connection at once.
async fn small_requests(
    args: &Args,
    bootstrap: &str,
    topic: &str,
    gateway_pid: u32,
    server_pid: Option<u32>,
) -> anyhow::Result<[(PhaseCpu, usize, usize); 2]> {
    create_topic(bootstrap, topic, args.small_partitions).await?;
    let value = Bytes::from(vec![b'x'; args.small_record_bytes]);
    // Each connection's partitions are known to the gateway before the clock: one request each.
    let warm = small_produce(
        bootstrap.to_string(),
        topic.to_string(),
        0,
        1,
        args.small_partitions,
        args.small_partitions as usize,
        value.clone(),
    )
    .await
    .context("warming up every partition")?;
    drop(warm);
    let around = Around::start(gateway_pid, server_pid);
    let tasks: Vec<_> = (0..args.small_connections)
        .map(|i| {
            tokio::spawn(small_produce(
                bootstrap.to_string(),
                topic.to_string(),
                i,
                args.small_connections,
                args.small_partitions,
                args.small_requests,
                value.clone(),
            ))
        })
        .collect();
    let mut produced = Vec::new();
    for task in tasks {
        produced.push(task.await??);
    }
    let produce = around.end();
    let requests = args.small_connections * args.small_requests;
    let records: usize = produced.iter().flatten().map(|(_, _, n)| n).sum();

    let around = Around::start(gateway_pid, server_pid);
    let tasks: Vec<_> = produced
        .into_iter()
        .map(|batches| {
            tokio::spawn(small_fetch(
                bootstrap.to_string(),
                topic.to_string(),
                batches,
                args.small_record_bytes,
                args.small_fetch_short,
            ))
        })
        .collect();
    let mut fetched = 0;
    for task in tasks {
        fetched += task.await??;
    }
    let fetch = around.end();
    Ok([(produce, requests, records), (fetch, requests, fetched)])
}

/// Starts gateway `binary` on `backend` as a process of its own, listening (and advertising) on
/// a free loopback port, its output appended to `log`; stopped on drop.
/// With `relay`, clients are given a relay doing that work in front of it instead: its address
/// is the one returned and the one the gateway advertises.
fn start_gateway(
    binary: &std::path::Path,
    backend: BackendRow,
    server: Option<&IggyServer>,
    gateway_env: &[(String, String)],
    log: &std::path::Path,
    relay: Option<RelayWork>,
) -> anyhow::Result<(PeerProcess, String, Option<Relay>)> {
    ensure!(
        binary.is_file(),
        "no gateway binary at {} (`cargo build --release -p kafka-iggy-gateway` builds it; `make bench` does)",
        binary.display()
    );
    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let mut env = gateway_env.to_vec();
    let mut args = vec!["--listen".to_owned(), listen.clone()];
    let relay = match relay {
        Some(work) => {
            let relay = Relay::start(listen.parse()?, work)?;
            args.extend(["--advertised".to_owned(), relay.address.to_string()]);
            Some(relay)
        }
        None => None,
    };
    match backend {
        BackendRow::Embedded => args.extend(["--backend".to_owned(), "embedded".to_owned()]),
        BackendRow::Iggy => {
            let server = server.context("no Iggy server")?;
            // Credentials in the environment the gateway reads them from, not on its command line.
            env.push(("IGGY_KAFKA_IGGY_USERNAME".to_owned(), server.username.clone()));
            env.push(("IGGY_KAFKA_IGGY_PASSWORD".to_owned(), server.password.clone()));
            args.extend(["--backend", "iggy", "--iggy-address", &server.address].map(str::to_owned));
        }
    }
    let launch = Launch {
        program: binary.to_path_buf(),
        args,
        env,
    };
    let gateway = PeerProcess::start(&launch, port, log).map_err(|why| anyhow::anyhow!("the gateway binary: {why}"))?;
    let bootstrap = relay.as_ref().map_or(listen, |r| r.address.to_string());
    Ok((gateway, bootstrap, relay))
}

/// The relay `--relay` and `--relay-checks` ask for, if any.
fn relay_work(args: &Args) -> Option<RelayWork> {
    match (args.relay, args.relay_checks) {
        (false, _) => None,
        (true, false) => Some(RelayWork::CopyOnly),
        (true, true) => Some(RelayWork::FormatChecks),
    }
}

fn records_for(args: &Args, size: usize) -> usize {
    (args.size_bytes / size.max(1)).clamp(1, args.max_records)
}

fn print_header() {
    println!("| run | bin | backend  | client     | phase         | size    | records | requests | gateway µs/record | server µs/record | gateway ÷ server | gateway µs/request | server µs/request | relay µs/record | relay µs/request | elapsed s | gateway switches per 1,000 records | gateway threads (schedstat) |");
    println!("|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|");
}

fn print_row(m: &Measured) {
    let server = |s: Option<f64>, f: &dyn Fn(f64) -> Option<f64>| s.and_then(f);
    let fmt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    println!(
        "| {} | {} | {:<8} | {:<10} | {:<13} | {:>7} | {:>7} | {:>8} | {:>6.3} | {:>6} | {:>6} | {:>6} | {:>6} | {:>6} | {:>6} | {:>5.2} | {:.1} | {} |",
        m.run,
        m.binary,
        format!("{:?}", m.backend).to_lowercase(),
        format!("{:?}", m.client).to_lowercase(),
        m.phase,
        if m.record_bytes > 0 {
            format!("{} B", m.record_bytes)
        } else {
            "–".into()
        },
        m.records,
        m.requests.map_or("–".into(), |n| n.to_string()),
        m.per_record_us(m.cpu.gateway_s),
        fmt(server(m.cpu.server_s, &|s| Some(m.per_record_us(s))), 3),
        fmt(m.ratio(), 2),
        fmt(m.per_request_us(m.cpu.gateway_s), 1),
        fmt(server(m.cpu.server_s, &|s| m.per_request_us(s)), 1),
        fmt(m.cpu.relay_s.map(|s| m.per_record_us(s)), 3),
        fmt(m.cpu.relay_s.and_then(|s| m.per_request_us(s)), 1),
        m.cpu.elapsed_s,
        m.cpu.gateway_switches as f64 * 1000.0 / m.records.max(1) as f64,
        m.cpu.gateway_threads,
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Each (backend, phase, size)'s median and range over the runs.
fn print_summary(rows: &[Measured]) {
    println!();
    println!("over the runs: median (min–max)");
    println!("| bin | backend  | client     | phase         | size    | runs | gateway µs/record | server µs/record | gateway ÷ server | gateway µs/request | relay µs/record | relay µs/request |");
    println!("|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut keys: Vec<(usize, BackendRow, ClientRow, &'static str, usize)> = Vec::new();
    for m in rows {
        let key = (m.binary, m.backend, m.client, m.phase, m.record_bytes);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let spread = |values: Vec<f64>, digits: usize| {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.is_empty() {
            return "–".to_string();
        }
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{:.digits$} ({min:.digits$}–{max:.digits$})", median(finite))
    };
    for (binary, backend, client, phase, size) in keys {
        let of: Vec<&Measured> = rows
            .iter()
            .filter(|m| {
                m.binary == binary
                    && m.backend == backend
                    && m.client == client
                    && m.phase == phase
                    && m.record_bytes == size
            })
            .collect();
        println!(
            "| {binary} | {:<8} | {:<10} | {:<13} | {:>7} | {} | {} | {} | {} | {} | {} | {} |",
            format!("{backend:?}").to_lowercase(),
            format!("{client:?}").to_lowercase(),
            phase,
            if size > 0 { format!("{size} B") } else { "–".into() },
            of.len(),
            spread(of.iter().map(|m| m.per_record_us(m.cpu.gateway_s)).collect(), 3),
            spread(
                of.iter()
                    .map(|m| m.cpu.server_s.map_or(f64::NAN, |s| m.per_record_us(s)))
                    .collect(),
                3
            ),
            spread(of.iter().map(|m| m.ratio().unwrap_or(f64::NAN)).collect(), 2),
            spread(
                of.iter()
                    .map(|m| m.per_request_us(m.cpu.gateway_s).unwrap_or(f64::NAN))
                    .collect(),
                1
            ),
            spread(
                of.iter()
                    .map(|m| m.cpu.relay_s.map_or(f64::NAN, |s| m.per_record_us(s)))
                    .collect(),
                3
            ),
            spread(
                of.iter()
                    .map(|m| m.cpu.relay_s.and_then(|s| m.per_request_us(s)).unwrap_or(f64::NAN))
                    .collect(),
                1
            ),
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench cpu: the release gateway binary's CPU, whole process (/proc/PID/stat utime+stime), beside the Iggy server's; clients {:?} at their defaults (acks=all), unkeyed records to one partition; sizes {:?}; small requests: {} connections x {} Produce of 1–10 records of {} B over {} partitions, then one Fetch per batch; {cores} cores",
        args.clients, args.sizes, args.small_connections, args.small_requests, args.small_record_bytes, args.small_partitions
    );
    match relay_work(&args) {
        Some(RelayWork::CopyOnly) => println!("relay: every client through a relay that only copies"),
        Some(RelayWork::FormatChecks) => println!(
            "relay: every client through a relay that also checks and encodes every byte a client sends as a translator must (CRC32C, Iggy messages of 1 KiB with their xxHash3): its 1 KiB produce is the floor of a gateway's"
        ),
        None => {}
    }
    let mut report = Report {
        sizes: args.sizes.clone(),
        runs: args.runs.into(),
        cores,
        iggy_server_env: args.iggy_server_env.clone(),
        gateway_env: args.gateway_env.clone(),
        relay: args.relay,
        relay_checks: args.relay_checks,
        binaries: Vec::new(),
        rows: Vec::new(),
        skipped: Vec::new(),
    };
    let server = if args.backends.contains(&BackendRow::Iggy) {
        match discover_with_env(args.iggy_server_env.clone()).await? {
            Discovery::Found(server) => {
                println!("Iggy server: {}", server.how);
                if server.pid().is_none() {
                    println!("Iggy server: not started here, so its CPU is not counted");
                }
                Some(server)
            }
            Discovery::Skipped(why) => {
                println!("backend iggy: SKIPPED: {why}");
                report.skipped.push(format!("iggy: {why}"));
                None
            }
        }
    } else {
        None
    };
    let java = if args.clients.contains(&ClientRow::Java) {
        let work = args.java_work.clone().unwrap_or_else(|| {
            kafka_iggy_conformance::bench::target_dir(env!("CARGO_TARGET_TMPDIR")).join("compat-java")
        });
        // Printed whole, so a relative DIR that missed its mark says where it was looked for.
        let work = std::path::absolute(&work).unwrap_or(work);
        match JavaLoad::find(&work, &args.java_version) {
            Ok(java) => {
                println!(
                    "Java client: kafka-clients {} from {}",
                    args.java_version,
                    work.display()
                );
                Some(java)
            }
            Err(why) => {
                println!("client java: SKIPPED: {why}");
                report.skipped.push(format!("java: {why}"));
                None
            }
        }
    } else {
        None
    };
    let binaries = if args.gateway_bins.is_empty() {
        vec![release_gateway_binary(env!("CARGO_TARGET_TMPDIR"))]
    } else {
        args.gateway_bins.clone()
    };
    for (b, binary) in binaries.iter().enumerate() {
        println!("gateway binary {}: {}", b + 1, binary.display());
    }
    report.binaries = binaries.clone();
    print_header();
    let run_id = std::process::id();
    for run in 1..=usize::from(args.runs) {
        for (b, binary) in binaries.iter().enumerate() {
            for &backend in &args.backends {
                if backend == BackendRow::Iggy && server.is_none() {
                    continue;
                }
                let log = std::env::temp_dir().join(format!("kig-cpu-gateway-{run_id}-{run}-{b}-{backend:?}.log"));
                let (gateway, bootstrap, relay) = match start_gateway(
                    binary,
                    backend,
                    server.as_ref(),
                    &args.gateway_env,
                    &log,
                    relay_work(&args),
                ) {
                    Ok(started) => started,
                    Err(e) => {
                        println!("backend {backend:?}: SKIPPED: {e:#}");
                        report.skipped.push(format!("{backend:?}: {e:#}"));
                        break;
                    }
                };
                let gateway_pid = gateway.pid();
                let server_pid = match backend {
                    BackendRow::Iggy => server.as_ref().and_then(IggyServer::pid),
                    BackendRow::Embedded => None,
                };
                let mut push = |m: Measured| {
                    print_row(&m);
                    report.rows.push(m);
                };
                for (&client, &size) in args.clients.iter().flat_map(|c| args.sizes.iter().map(move |s| (c, s))) {
                    let topic = format!("cpu-{run_id}-{run}-{b}-{client:?}-{size}").to_lowercase();
                    let records = records_for(&args, size);
                    let pass = Pass {
                        bootstrap: &bootstrap,
                        topic: &topic,
                        records,
                        record_bytes: size,
                        gateway_pid,
                        server_pid,
                    };
                    let (produce, fetch) = match (client, &java) {
                        (ClientRow::Librdkafka, _) => {
                            create_topic(&bootstrap, &topic, 1).await?;
                            throughput(&pass).await
                        }
                        (ClientRow::Java, Some(java)) => {
                            create_topic(&bootstrap, &topic, 1).await?;
                            java_throughput(java, &pass).await
                        }
                        (ClientRow::Java, None) => continue,
                    }
                    .with_context(|| format!("{backend:?}, {client:?}, {size} B"))?;
                    for (phase, cpu) in [("produce", produce), ("fetch", fetch)] {
                        push(Measured {
                            run,
                            binary: b + 1,
                            backend,
                            client,
                            phase,
                            record_bytes: size,
                            records,
                            requests: None,
                            cpu,
                            load_1m: load_1m(),
                        });
                    }
                }
                if args.small_connections > 0 {
                    let topic = format!("cpu-small-{run_id}-{run}-{b}");
                    let phases = small_requests(&args, &bootstrap, &topic, gateway_pid, server_pid)
                        .await
                        .with_context(|| format!("{backend:?}, small requests"))?;
                    for (phase, (cpu, requests, records)) in ["small produce", "small fetch"].into_iter().zip(phases) {
                        push(Measured {
                            run,
                            binary: b + 1,
                            backend,
                            client: ClientRow::Librdkafka,
                            phase,
                            record_bytes: args.small_record_bytes,
                            records,
                            requests: Some(requests),
                            cpu,
                            load_1m: load_1m(),
                        });
                    }
                }
                // What the gateway spends with its clients gone: timers and polling, per second.
                let around = Around::start(gateway_pid, server_pid);
                tokio::time::sleep(Duration::from_secs(2)).await;
                let idle = around.end();
                println!(
                    "| {run} | {} | {:<8} | –          | idle          | gateway {:.1} ms CPU a second ({}) |",
                    b + 1,
                    format!("{backend:?}").to_lowercase(),
                    idle.gateway_s / idle.elapsed_s * 1e3,
                    idle.gateway_threads
                );
                drop(gateway);
                drop(relay);
            }
        }
    }
    if args.runs > 1 || binaries.len() > 1 {
        print_summary(&report.rows);
    }
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| bench_output(env!("CARGO_TARGET_TMPDIR"), "cpu.json"));
    write_json_report(&json, &report)?;
    Ok(())
}
