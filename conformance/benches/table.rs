//! `make bench`: the one table of docs/performance.md, every row measured in the same run, back
//! to back, so the ratios compare paths under the same machine load: the native Iggy SDK on a
//! real server, the gateway on that server, the gateway on its embedded backend, and a peer
//! Kafka-compatible broker (tansu, in-memory storage) when its binary is found. Each row skipped
//! says why. Prints the table and the ratios, and writes them as JSON. Asserts nothing.

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use iggy::prelude::{Identifier, IggyClient, IggyMessage, StreamClient, TopicClient, TopicCreateOptions};
use kafka_iggy_conformance::bench::{
    bench_output, load_1m, poll_all, print_phase_cpu, print_table_header, print_table_row, run_native, run_workload,
    unix_s, write_json_report, Figures, LatencyDetail, NativeWorkload, PhaseCpu, Workload,
};
use kafka_iggy_conformance::cpu::Processes;
use kafka_iggy_conformance::delay_proxy::DelayProxy;
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::latency::TAIL_WINDOW_MS;
use kafka_iggy_conformance::real_iggy::{discover_with_env, parse_env_pair, Discovery, IggyServer};
use kafka_iggy_conformance::relay::{Relay, RelayWork};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_iggy_gateway::clock::SystemClock;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "table/paths.rs"]
mod paths;
#[path = "table/summary.rs"]
mod summary;
use paths::*;
use summary::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Row {
    Native,
    /// The native SDK through a relay that only copies bytes: what one hop in the middle costs.
    NativeRelayed,
    GatewayIggy,
    /// The gateway on the same server as it ships: the release binary in a process of its own,
    /// not sharing the bench's allocator, runtime and threads with the client.
    GatewayIggyBinary,
    GatewayEmbedded,
    Tansu,
}

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::Native => "native Iggy SDK",
            Row::NativeRelayed => "native SDK via relay",
            Row::GatewayIggy => "gateway on real Iggy",
            Row::GatewayIggyBinary => "gateway binary on Iggy",
            Row::GatewayEmbedded => "gateway, embedded",
            Row::Tansu => "tansu (memory)",
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "The performance table of docs/performance.md, all rows in one run")]
struct Args {
    /// Records per row (produced, then read back).
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// librdkafka rows produce and read back in rounds of this many records; by default one
    /// round of all of them, the native row's shape: everything produced, then everything read
    /// (round 7: rounds of 50,000 restarted the consumer four times and cost the gateway row
    /// about a quarter of its fetch rate).
    #[arg(long)]
    round_records: Option<usize>,
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Messages per native send and per native poll.
    #[arg(long, default_value_t = 1000)]
    native_batch: usize,
    /// The native row polls through a second connection of its own instead of the one it sent
    /// through. The server hands accepted connections to its shards in turn, so the second
    /// lands on another shard than the first: this measures a read forwarded between shards.
    #[arg(long)]
    native_poll_second_connection: bool,
    /// The native and relayed rows send the messages the gateway stores for the librdkafka
    /// rows' keyed records (the seed's mapping, with its `kafka.key` header), still in sends of
    /// `native_batch`: how much of the server's cost on the gateway's reads is the mapped form.
    #[arg(long)]
    native_mapped: bool,
    /// The librdkafka rows' producer sets `enable.idempotence=true`, so the gateway rows check
    /// and record every batch against its producer's state (docs/spec/producer-ids.md); compare
    /// with a run without it for what producer state costs.
    #[arg(long)]
    idempotent: bool,
    /// Rows to measure (all by default), in the order given.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Row>,
    /// The tansu binary; otherwise `tansu` on PATH or in ~/.cargo/bin.
    #[arg(long, env = "TANSU_BIN")]
    tansu_bin: Option<PathBuf>,
    /// Where the JSON goes; `bench/table.json` in the target directory when unset.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The gateway rows' `fetch_read_ahead_bytes` (FETCH-READAHEAD-1; 0 turns reading ahead
    /// off), to compare the two; the gateway's default when unset.
    #[arg(long)]
    read_ahead_bytes: Option<usize>,
    /// Produce at this many records per second (every row alike) and report the latency at
    /// that rate; the fetch figures stay unpaced.
    #[arg(long)]
    rate: Option<f64>,
    /// Measures the rows this many times in turn on the same server (every row of run 1, then of
    /// run 2, ...) and gives each gateway row's added p99 latency as a median over the runs: one
    /// run's p99 is decided by its slowest 1 %, a few milliseconds of records, and moves by
    /// milliseconds from run to run (docs/performance.md, the latency target).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// Puts the Iggy server this many milliseconds away in each direction, through a delaying
    /// proxy, for the native and gateway-on-Iggy rows alike (0: direct).
    #[arg(long, default_value_t = 0)]
    iggy_delay_ms: u64,
    /// `KEY=VALUE` added to the environment of an Iggy server this run starts (repeatable), such
    /// as `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432` (docs/performance-history.md, round 6).
    #[arg(long = "iggy-server-env", value_parser = parse_env_pair)]
    iggy_server_env: Vec<(String, String)>,
    /// Sets every thread of the Iggy server this run started to this nice value (-20..=19; below
    /// 0 needs root), so on a machine with few cores the server runs first when it and the
    /// client both wait for a core (docs/performance-history.md, round 12). Unset: the server keeps the
    /// bench's priority.
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    iggy_server_nice: Option<i32>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Serialize)]
struct Measured {
    /// Which of `--runs` (from 1).
    run: usize,
    row: Row,
    label: &'static str,
    produce_records_per_s: f64,
    fetch_records_per_s: f64,
    /// A consumer created after the produce reading everything back ([`Workload::cold_fetch`]).
    cold_fetch_records_per_s: Option<f64>,
    produce_p50_ms: f64,
    produce_p99_ms: f64,
    /// The 1-minute load average when the row finished: other work on the machine.
    load_1m: f64,
    /// CPU time of each phase: the bench process's threads by kind (client, gateway, SDK) and
    /// the server process's (Iggy or tansu), when this run started it.
    produce_cpu: PhaseCpu,
    fetch_cpu: PhaseCpu,
    /// The gateway-on-Iggy row only: its stored messages read back by a bare SDK poll.
    mapped_poll: Option<MappedPoll>,
    /// A paced run's only: where the produce latency went.
    latency_detail: Option<LatencyDetail>,
}

/// The messages the gateway stored for the Kafka client's records, read back by the native
/// row's poll (the SDK, one connection, `native_batch` by offset) once the gateway row is done:
/// what the server spends serving those messages when asked as cheaply as the native row asks.
/// They carry the mapping's headers (the records are keyed: `kafka.key`), which plain messages
/// do not.
#[derive(Serialize)]
struct MappedPoll {
    mapped: PollFigures,
    /// The native row's plain messages polled again, when that row ran: reads interleaved with
    /// the mapped ones, at the same point in the server's life.
    plain: Option<PollFigures>,
}

#[derive(Serialize)]
struct PollFigures {
    records_per_s: f64,
    server_us_per_record: f64,
}

/// The stream the in-process gateway maps Kafka topics into, and the native rows' stream.
const GATEWAY_STREAM: &str = "kafka";
const NATIVE_STREAM: &str = "kig-native-bench";

#[derive(Serialize)]
struct Skipped {
    row: Row,
    reason: String,
}

#[derive(Serialize)]
struct Report {
    records: usize,
    /// Rounds the librdkafka rows produced and read back in.
    librdkafka_rounds: usize,
    /// Records per second every row produced at, when paced.
    rate_per_s: Option<f64>,
    /// Milliseconds added in each direction between the rows and the Iggy server.
    iggy_delay_ms: u64,
    record_bytes: usize,
    native_batch: usize,
    native_poll_second_connection: bool,
    native_mapped: bool,
    /// What was added to the environment of a server this run started.
    iggy_server_env: Vec<(String, String)>,
    /// The nice value given to that server's threads, when one was asked for.
    iggy_server_nice: Option<i32>,
    cores: usize,
    rows: Vec<Measured>,
    skipped: Vec<Skipped>,
    runs: usize,
    /// Throughput of one row over another in one run.
    ratios: Vec<Ratio>,
    /// The most any gateway could fetch on this machine, from each run's CPU figures.
    fetch_bounds: Vec<FetchBound>,
    /// A paced run's: each gateway row's p99 over the native row's, over the runs.
    added_latency: Vec<AddedLatency>,
    /// Each ratio's median, lower quartile and range over the runs.
    ratio_spreads: Vec<RatioSpread>,
}

#[derive(Serialize)]
struct Ratio {
    run: usize,
    over: Row,
    under: Row,
    produce: f64,
    fetch: f64,
    /// The cold consumers' fetch rates over each other, when both rows had one.
    cold_fetch: Option<f64>,
}

/// One ratio over every run: what docs/performance.md's targets are stated by.
#[derive(Serialize)]
struct RatioSpread {
    over: Row,
    under: Row,
    /// `produce`, `fetch` or `cold_fetch`.
    figure: &'static str,
    runs: usize,
    median: f64,
    lower_quartile: f64,
    min: f64,
    max: f64,
}

/// One row's p99 produce latency minus the native row's, at the same rate, run by run.
#[derive(Serialize)]
struct AddedLatency {
    row: Row,
    added_p99_ms: Vec<f64>,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    /// Runs in which it added more than the target's 1 ms.
    above_1_ms: usize,
}

/// The median of `values`, NaN when empty.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The lower quartile of `values` (the median of the lower half, the middle value excluded when
/// odd, as Tukey's hinges), NaN when empty.
fn lower_quartile(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        1 => values[0],
        n => median(values[..n / 2].to_vec()),
    }
}

/// An upper bound on the gateway-on-Iggy row's fetch rate on this machine, from CPU time per
/// record measured in this run: any gateway receives every byte the server sends and sends it on
/// (at least the relay's work), the server serves it (at least the less of what it spent on the
/// native and the relayed polls, whose messages carry no mapping headers), and the Kafka client
/// reads it (what librdkafka spent in the gateway row). The cores cannot do all three faster.
#[derive(Serialize)]
struct FetchBound {
    run: usize,
    server_us_per_record: f64,
    relay_us_per_record: f64,
    client_us_per_record: f64,
    records_per_s: f64,
    /// `records_per_s` over the native row's fetch rate.
    of_native: f64,
    /// The same bound for the messages the seed's mapping stores for these records, which cost
    /// the server more to read than plain ones ([`MappedPoll`]).
    mapped: Option<MappedBound>,
}

#[derive(Serialize)]
struct MappedBound {
    /// The server's CPU per record on the gateway's stored messages over the native row's plain
    /// ones, both read back by the same poll one after the other.
    mapped_over_plain: f64,
    /// The plain bound's server share times `mapped_over_plain`.
    server_us_per_record: f64,
    records_per_s: f64,
    of_native: f64,
}

/// The bench process's thread kind that runs the in-process gateway and its Iggy SDK; every
/// other thread of a gateway row is the Kafka client (librdkafka and the application thread).
const GATEWAY_THREAD_KIND: &str = "tokio-rt-worker";
/// The relay's own thread ([`Relay`]).
const RELAY_THREAD_KIND: &str = "relay";

fn fetch_bound(native: &Measured, relayed: &Measured, gateway: &Measured, records: usize, cores: usize) -> FetchBound {
    let per_record_us = |ns: u64| ns as f64 / records as f64 / 1e3;
    let kind_ns = |m: &Measured, kind: &str| m.fetch_cpu.own.ns_by_kind.get(kind).copied().unwrap_or(0);
    let server_ns = |m: &Measured| m.fetch_cpu.others.ns_by_kind.values().sum::<u64>();
    let server_us_per_record = per_record_us(server_ns(native).min(server_ns(relayed)));
    let relay_us_per_record = per_record_us(kind_ns(relayed, RELAY_THREAD_KIND));
    let client_ns: u64 = gateway.fetch_cpu.own.ns_by_kind.values().sum::<u64>() - kind_ns(gateway, GATEWAY_THREAD_KIND);
    let client_us_per_record = per_record_us(client_ns);
    let bound = |server_us_per_record: f64| {
        cores as f64 / (server_us_per_record + relay_us_per_record + client_us_per_record) * 1e6
    };
    let records_per_s = bound(server_us_per_record);
    // The mapped form's cost over plain messages', both read the same way at the same moment
    // (late in the run, when reads cost the server more than in the native row).
    let mapped = gateway.mapped_poll.as_ref().and_then(|poll| {
        let plain = poll.plain.as_ref()?;
        let mapped_over_plain = poll.mapped.server_us_per_record / plain.server_us_per_record;
        let server_us_per_record = server_us_per_record * mapped_over_plain;
        Some(MappedBound {
            mapped_over_plain,
            server_us_per_record,
            records_per_s: bound(server_us_per_record),
            of_native: bound(server_us_per_record) / native.fetch_records_per_s,
        })
    });
    FetchBound {
        run: native.run,
        server_us_per_record,
        relay_us_per_record,
        client_us_per_record,
        records_per_s,
        of_native: records_per_s / native.fetch_records_per_s,
        mapped,
    }
}

fn measured(run: usize, row: Row, records: usize, f: &Figures) -> Measured {
    Measured {
        run,
        row,
        label: row.label(),
        produce_records_per_s: records as f64 / f.produce_s,
        fetch_records_per_s: records as f64 / f.fetch_s,
        cold_fetch_records_per_s: f.cold_fetch_s.map(|s| records as f64 / s),
        produce_p50_ms: f.p50_ms,
        produce_p99_ms: f.p99_ms,
        load_1m: load_1m(),
        produce_cpu: f.produce_cpu.clone(),
        fetch_cpu: f.fetch_cpu.clone(),
        mapped_poll: None,
        latency_detail: f.latency_detail.clone(),
    }
}

/// Sets every thread of process `pid` to nice value `nice`, returning how many there were.
/// Linux keeps a nice value per thread, and a thread the server starts later inherits its
/// starter's; `renice` is given each thread id.
fn renice_threads(pid: u32, nice: i32) -> anyhow::Result<usize> {
    let mut threads = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let tid = entry?.file_name().to_string_lossy().into_owned();
        let status = Command::new("renice")
            .args(["-n", &nice.to_string(), "-p", &tid])
            .stdout(Stdio::null())
            .status()
            .context("running renice")?;
        if !status.success() {
            bail!("renice -n {nice} -p {tid} failed ({status}): a nice value below 0 needs root");
        }
        threads += 1;
    }
    Ok(threads)
}

/// Log timestamps in seconds since the Unix epoch, as the latency lines give a run's start, so a
/// tail window and the gateway's trace events line up by subtraction.
struct UnixSeconds;

impl tracing_subscriber::fmt::time::FormatTime for UnixSeconds {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:.6}", unix_s())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // LIMIT-HEAP-1: this process hosts the gateway, so it runs with the gateway's malloc settings.
    println!("{}", kafka_iggy_gateway::heap_tuning::tune_heap().describe());
    let args = Args::parse();
    // The in-process gateways log only when asked, to standard error, e.g. one Fetch's timeline
    // with RUST_LOG=kafka_iggy_gateway::read_ahead=trace (docs/performance-history.md, round 5).
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_timer(UnixSeconds)
            .init();
    }
    let rows = if args.only.is_empty() {
        vec![
            Row::Native,
            Row::NativeRelayed,
            Row::GatewayIggy,
            Row::GatewayIggyBinary,
            Row::GatewayEmbedded,
            Row::Tansu,
        ]
    } else {
        args.only.clone()
    };
    let rounds = args
        .records
        .div_ceil(args.round_records.unwrap_or(args.records).max(1))
        .max(1);
    let run_id = std::process::id();
    let workload = |row: &str, run: usize| Workload {
        topic: format!("bench-{row}-{run_id}-{run}"),
        rounds,
        round_records: args.records / rounds,
        record_bytes: args.record_bytes,
        watch_pids: Vec::new(),
        rate_per_s: args.rate,
        // A paced run measures latency; the cold reader is a throughput figure.
        cold_fetch: args.rate.is_none(),
        idempotent: args.idempotent,
    };
    let records = workload("x", 0).records();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench table: {records} records of {} B per row, one partition; librdkafka acks=all linger.ms=5 enable.idempotence={}, produced then read in {rounds} round(s); native sends and polls of {}; {cores} cores",
        args.record_bytes, args.idempotent, args.native_batch
    );
    if args.native_poll_second_connection {
        println!("native row: polls through a second connection (another server shard than its sends)");
    }
    if args.runs > 1 {
        println!("{} runs of the rows in turn, on one server", args.runs);
    }
    if let Some(rate) = args.rate {
        println!(
            "produce paced at {:.3} M rec/s in every row (native: what came due, sent every 5 ms); latency from each record's due time",
            rate / 1e6
        );
    }
    let needs_iggy = rows.iter().any(|r| {
        matches!(
            r,
            Row::Native | Row::NativeRelayed | Row::GatewayIggy | Row::GatewayIggyBinary
        )
    });
    let server = if needs_iggy {
        match discover_with_env(args.iggy_server_env.clone()).await? {
            Discovery::Found(server) => {
                println!("Iggy server: {}", server.how);
                for (key, value) in &args.iggy_server_env {
                    println!("Iggy server environment (if started here): {key}={value}");
                }
                if let Some(nice) = args.iggy_server_nice {
                    let pid = server
                        .pid()
                        .context("--iggy-server-nice needs a server this run started")?;
                    let threads = renice_threads(pid, nice)?;
                    println!("Iggy server: its {threads} threads run at nice {nice}");
                }
                Ok(server)
            }
            Discovery::Skipped(why) => Err(why),
        }
    } else {
        Err("not asked for".to_string())
    };
    // The rows reach Iggy directly, or through a proxy that puts it a network hop away.
    let proxy = match (&server, args.iggy_delay_ms) {
        (Ok(server), delay_ms) if delay_ms > 0 => {
            let upstream = socket_address(&server.address).await?;
            let proxy = DelayProxy::start(upstream, Duration::from_millis(delay_ms)).await?;
            println!("Iggy reached through a proxy delaying each direction by {delay_ms} ms");
            Some(proxy)
        }
        _ => None,
    };
    let iggy_address = match (&proxy, &server) {
        (Some(proxy), _) => proxy.address.to_string(),
        (None, Ok(server)) => server.address.clone(),
        (None, Err(_)) => String::new(),
    };
    let mut report = Report {
        records,
        librdkafka_rounds: rounds,
        rate_per_s: args.rate,
        iggy_delay_ms: args.iggy_delay_ms,
        record_bytes: args.record_bytes,
        native_batch: args.native_batch,
        native_poll_second_connection: args.native_poll_second_connection,
        native_mapped: args.native_mapped,
        iggy_server_env: args.iggy_server_env.clone(),
        iggy_server_nice: args.iggy_server_nice,
        cores,
        rows: Vec::new(),
        skipped: Vec::new(),
        runs: args.runs.into(),
        ratios: Vec::new(),
        fetch_bounds: Vec::new(),
        added_latency: Vec::new(),
        ratio_spreads: Vec::new(),
    };
    print_table_header();
    for run in 1..=usize::from(args.runs) {
        if args.runs > 1 {
            println!("| run {run} of {}", args.runs);
        }
        let native_topic = format!("native-{run_id}-{run}");
        for &row in &rows {
            let mut mapped = None;
            let outcome: anyhow::Result<Figures> = match row {
            Row::Native => match &server {
                Ok(server) => native(server, &iggy_address, &args, &native_topic).await,
                Err(why) => Err(anyhow::anyhow!("no Iggy server: {why}")),
            },
            Row::NativeRelayed => match &server {
                Ok(server) => native_relayed(server, &iggy_address, &args, &format!("relayed-{run_id}-{run}")).await,
                Err(why) => Err(anyhow::anyhow!("no Iggy server: {why}")),
            },
            Row::GatewayIggy => match &server {
                Ok(server) => {
                    let options = gateway_options(args.read_ahead_bytes);
                    let native_ran = report.rows.iter().any(|m| m.row == Row::Native && m.run == run);
                    let native_topic = native_ran.then_some(native_topic.as_str());
                    gateway_on_iggy(server, &iggy_address, &workload("iggy", run), options, native_topic, args.native_batch)
                        .await
                        .map(|(figures, poll)| {
                            mapped = poll;
                            figures
                        })
                }
                Err(why) => Err(anyhow::anyhow!("no Iggy server: {why}")),
            },
            Row::GatewayIggyBinary => match &server {
                Ok(server) => gateway_binary_on_iggy(server, &iggy_address, &workload("iggy-binary", run)).await,
                Err(why) => Err(anyhow::anyhow!("no Iggy server: {why}")),
            },
            Row::GatewayEmbedded => {
                gateway_embedded(&workload("embedded", run), gateway_options(args.read_ahead_bytes)).await
            }
            Row::Tansu => match find_tansu(&args) {
                Some(binary) => tansu(&binary, &workload("tansu", run)).await,
                None => Err(anyhow::anyhow!(
                    "no tansu binary (TANSU_BIN, PATH or ~/.cargo/bin; `cargo install tansu --version 0.6.0 --locked --features dynostore` builds it with its in-memory storage)"
                )),
            },
        };
            match outcome {
                Ok(figures) => {
                    let mut m = measured(run, row, records, &figures);
                    m.mapped_poll = mapped;
                    print_table_row(m.label, records, args.record_bytes, &figures, m.load_1m);
                    if let Some(cold) = m.cold_fetch_records_per_s {
                        println!(
                            "| {:<22} | cold consumer: fetch {:.3} M rec/s, {:.1} MB/s",
                            m.label,
                            cold / 1e6,
                            cold * args.record_bytes as f64 / 1e6
                        );
                    }
                    report.rows.push(m);
                }
                Err(e) => {
                    println!("| {:<22} | SKIPPED: {e:#}", row.label());
                    report.skipped.push(Skipped {
                        row,
                        reason: format!("{e:#}"),
                    });
                }
            }
        }
    }
    for m in &report.rows {
        print_cpu(m, records, cores);
        print_latency_detail(m);
    }
    for run in 1..=usize::from(args.runs) {
        summarise_run(&mut report, &args, run, records, cores);
    }
    summarise_ratios(&mut report);
    if let Some(rate) = args.rate {
        summarise_latency(&mut report, rate);
    }
    let json = args
        .json
        .unwrap_or_else(|| bench_output(env!("CARGO_TARGET_TMPDIR"), "table.json"));
    write_json_report(&json, &report)?;
    Ok(())
}
