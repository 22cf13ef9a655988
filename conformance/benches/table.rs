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
    load_1m, poll_all, print_phase_cpu, print_table_header, print_table_row, run_native, run_workload, unix_s, Figures,
    LatencyDetail, NativeWorkload, PhaseCpu, Workload,
};
use kafka_iggy_conformance::cpu::Processes;
use kafka_iggy_conformance::delay_proxy::DelayProxy;
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::latency::TAIL_WINDOW_MS;
use kafka_iggy_conformance::real_iggy::{discover_with_env, parse_env_pair, Discovery, IggyServer};
use kafka_iggy_conformance::relay::Relay;
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_iggy_gateway::clock::SystemClock;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Row {
    Native,
    /// The native SDK through a relay that only copies bytes: what one hop in the middle costs.
    NativeRelayed,
    GatewayIggy,
    GatewayEmbedded,
    Tansu,
}

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::Native => "native Iggy SDK",
            Row::NativeRelayed => "native SDK via relay",
            Row::GatewayIggy => "gateway on real Iggy",
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
    /// Rows to measure (all by default), in the order given.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Row>,
    /// The tansu binary; otherwise `tansu` on PATH or in ~/.cargo/bin.
    #[arg(long, env = "TANSU_BIN")]
    tansu_bin: Option<PathBuf>,
    /// Where the JSON goes.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench/table.json"))]
    json: PathBuf,
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
}

#[derive(Serialize)]
struct Ratio {
    run: usize,
    over: Row,
    under: Row,
    produce: f64,
    fetch: f64,
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
        produce_p50_ms: f.p50_ms,
        produce_p99_ms: f.p99_ms,
        load_1m: load_1m(),
        produce_cpu: f.produce_cpu.clone(),
        fetch_cpu: f.fetch_cpu.clone(),
        mapped_poll: None,
        latency_detail: f.latency_detail.clone(),
    }
}

/// Where a paced row's latency went: which 10 ms windows of the run its tail was due in, and for
/// the librdkafka rows the client's own split per statistics interval.
fn print_latency_detail(m: &Measured) {
    let Some(detail) = &m.latency_detail else {
        return;
    };
    let tail = &detail.tail;
    let worst: Vec<String> = tail
        .worst
        .iter()
        .map(|w| format!("{} ms ({}, max {:.1} ms)", w.start_ms, w.tail_records, w.max_ms))
        .collect();
    println!(
        "tail {:<22} run {} (began at {:.3} s since the epoch): {} records at or above p99 {:.2} ms, due in {} of {} windows of {TAIL_WINDOW_MS} ms; {:.0} % in the worst {}: {}",
        m.label,
        m.run,
        detail.started_unix_s,
        tail.tail_records,
        tail.threshold_ms,
        tail.windows_with_tail,
        tail.windows,
        tail.share_in_worst * 100.0,
        tail.worst.len(),
        worst.join(", ")
    );
    if let Some(sends) = &detail.sends {
        println!(
            "sends {:<21} run {}: {} sends, send to confirmation p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            m.label, m.run, sends.calls, sends.p50_ms, sends.p99_ms, sends.max_ms
        );
    }
    if let Some(client) = &detail.client {
        let rtt_p99 = median(client.intervals.iter().map(|i| i.rtt_p99_ms).collect());
        println!(
            "client {:<20} run {}: librdkafka over {} intervals, worst p99 / max: queue (linger included) {:.2} / {:.2} ms, output buffer {:.2} / {:.2} ms, round trip {:.2} / {:.2} ms (p99 median {:.2} ms)",
            m.label,
            m.run,
            client.intervals.len(),
            client.max_of(|i| i.queue_p99_ms),
            client.max_of(|i| i.queue_max_ms),
            client.max_of(|i| i.outbuf_p99_ms),
            client.max_of(|i| i.outbuf_max_ms),
            client.max_of(|i| i.rtt_p99_ms),
            client.max_of(|i| i.rtt_max_ms),
            rtt_p99
        );
    }
}

/// Where one phase's CPU went, per record, and the throughput the machine's cores would allow
/// if that phase had them all: the ceiling a CPU-bound path cannot pass on this machine.
fn print_cpu(m: &Measured, records: usize, cores: usize) {
    for (phase, cpu, rate) in [
        ("produce", &m.produce_cpu, m.produce_records_per_s),
        ("fetch", &m.fetch_cpu, m.fetch_records_per_s),
    ] {
        print_phase_cpu(m.label, phase, cpu, rate, records, cores);
    }
}

/// The pinned SDK on the same server: sends of `batch` messages, then polls of `batch` by offset.
async fn native(server: &IggyServer, address: &str, args: &Args, topic: &str) -> anyhow::Result<Figures> {
    let client = server.sdk_client_at(address).await?;
    let stream = Identifier::named(NATIVE_STREAM)?;
    let topic_id = Identifier::named(topic)?;
    let _ = client.create_stream(NATIVE_STREAM).await;
    client
        .create_topic(
            &stream,
            topic,
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..Default::default()
            },
        )
        .await?;
    let value = Bytes::from(vec![b'x'; args.record_bytes]);
    let pids: Vec<u32> = server.pid().into_iter().collect();
    // Opened before the clock runs; the poll goes through it after the produce.
    let second_client = if args.native_poll_second_connection {
        Some(server.sdk_client_at(address).await?)
    } else {
        None
    };
    let workload = NativeWorkload {
        stream: &stream,
        topic: &topic_id,
        records: args.records,
        batch: args.native_batch,
        rate_per_s: args.rate,
        watch_pids: &pids,
    };
    run_native(&client, second_client.as_ref(), &workload, |i| {
        native_message(args.native_mapped, i, &value)
    })
    .await
}

/// The native row's `i`th message: plain, or with `mapped` the one the gateway stores for the
/// librdkafka rows' `i`th record (keyed by its index, MAP-KEY-1).
fn native_message(mapped: bool, i: usize, value: &Bytes) -> anyhow::Result<IggyMessage> {
    if !mapped {
        return Ok(IggyMessage::builder().payload(value.clone()).build()?);
    }
    let record = kig_core::mapping::KafkaRecord {
        timestamp_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as i64,
        key: Some(Bytes::from(i.to_string())),
        value: Some(value.clone()),
        headers: Vec::new(),
    };
    let (message, _) = kig_core::mapping::record_to_message(&record)?;
    Ok(message)
}

/// The first socket address `address` (`host:port`) resolves to: what a proxy or relay in front
/// of the Iggy server connects to.
async fn socket_address(address: &str) -> anyhow::Result<std::net::SocketAddr> {
    tokio::net::lookup_host(address)
        .await?
        .next()
        .with_context(|| format!("{address} resolves to no address"))
}

/// The native row's workload with its SDK client behind a [`Relay`] of its own.
async fn native_relayed(server: &IggyServer, address: &str, args: &Args, topic: &str) -> anyhow::Result<Figures> {
    let relay = Relay::start(socket_address(address).await?)?;
    let figures = native(server, &relay.address.to_string(), args, topic).await;
    drop(relay);
    figures
}

/// The in-process gateway's options: the defaults, with the read-ahead budget asked for.
fn gateway_options(read_ahead_bytes: Option<usize>) -> LocalOptions {
    let mut options = LocalOptions::default();
    options.limits.fetch_read_ahead_bytes = read_ahead_bytes;
    options
}

async fn gateway_on_iggy(
    server: &IggyServer,
    address: &str,
    workload: &Workload,
    options: LocalOptions,
    native_topic: Option<&str>,
    batch: usize,
) -> anyhow::Result<(Figures, Option<MappedPoll>)> {
    let workload = &Workload {
        watch_pids: server.pid().into_iter().collect(),
        ..workload.clone()
    };
    let backend = IggyBackend::connect(address, &server.username, &server.password, 8).await?;
    backend.ensure_stream(GATEWAY_STREAM).await?;
    backend
        .create_topic(
            GATEWAY_STREAM,
            &workload.topic,
            TopicSpec {
                partitions: 1,
                message_expiry_us: None,
            },
        )
        .await?;
    // Metered as the gateway binary runs it, which also gives the `backend call` trace events.
    let gateway = LocalGateway::serve(Arc::new(Metered::new(backend)), options).await?;
    let figures = run_workload(&gateway.endpoint.bootstrap, workload).await;
    print_read_ahead("gateway on real Iggy", &gateway.gateway.read_ahead);
    gateway.stop().await;
    // The row stands without it: only the extra reading is lost.
    let mapped_poll = match mapped_poll(
        server,
        address,
        &workload.topic,
        native_topic,
        workload.records(),
        batch,
    )
    .await
    {
        Ok(poll) => Some(poll),
        Err(e) => {
            println!("gateway on real Iggy: its stored messages could not be read back: {e:#}");
            None
        }
    };
    Ok((figures, mapped_poll))
}

/// Reads the first `records` messages the gateway stored in `topic` back with the native row's
/// poll ([`MappedPoll`]). When the native row ran before (`native_topic`), its plain messages are
/// read the same way as a control. Each topic is read once through each of two clients opened one
/// after the other, which the server gives to different shards: a topic's partition lives on one
/// shard, and a read through the other is forwarded and dearer, so one client would compare
/// shard paths as much as messages. The order (mapped, plain, plain, mapped) also cancels a
/// steady drift in the server's cost over the run.
async fn mapped_poll(
    server: &IggyServer,
    address: &str,
    topic: &str,
    native_topic: Option<&str>,
    records: usize,
    batch: usize,
) -> anyhow::Result<MappedPoll> {
    let first_client = server.sdk_client_at(address).await?;
    let second_client = server.sdk_client_at(address).await?;
    let pids: Vec<u32> = server.pid().into_iter().collect();
    let read_all = |client, stream, topic| timed_poll(client, &pids, stream, topic, records, batch);
    let figures = |reads: &[(f64, f64)]| {
        let polled = (records * reads.len()) as f64;
        PollFigures {
            records_per_s: polled / reads.iter().map(|r| r.0).sum::<f64>(),
            server_us_per_record: reads.iter().map(|r| r.1).sum::<f64>() / polled * 1e6,
        }
    };
    let mapped_first = read_all(&first_client, GATEWAY_STREAM, topic).await?;
    let Some(native_topic) = native_topic else {
        let mapped_second = read_all(&second_client, GATEWAY_STREAM, topic).await?;
        return Ok(MappedPoll {
            mapped: figures(&[mapped_first, mapped_second]),
            plain: None,
        });
    };
    let plain_first = read_all(&second_client, NATIVE_STREAM, native_topic).await?;
    let plain_second = read_all(&first_client, NATIVE_STREAM, native_topic).await?;
    let mapped_second = read_all(&second_client, GATEWAY_STREAM, topic).await?;
    Ok(MappedPoll {
        mapped: figures(&[mapped_first, mapped_second]),
        plain: Some(figures(&[plain_first, plain_second])),
    })
}

/// Elapsed seconds and server CPU seconds of one read of the first `records` messages of
/// `stream`/`topic` through `client`.
async fn timed_poll(
    client: &IggyClient,
    pids: &[u32],
    stream: &str,
    topic: &str,
    records: usize,
    batch: usize,
) -> anyhow::Result<(f64, f64)> {
    let mut cpu = PhaseCpu::default();
    let cpu_start = Processes::take(pids);
    let start = Instant::now();
    poll_all(
        client,
        &Identifier::named(stream)?,
        &Identifier::named(topic)?,
        records,
        batch,
    )
    .await?;
    let elapsed_s = start.elapsed().as_secs_f64();
    cpu.add_since(&cpu_start, pids);
    Ok((elapsed_s, cpu.others.total().as_secs_f64()))
}

async fn create_topic(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await?;
    for result in results {
        result.map_err(|(topic, code)| anyhow::anyhow!("creating {topic}: {code}"))?;
    }
    Ok(())
}

async fn gateway_embedded(workload: &Workload, options: LocalOptions) -> anyhow::Result<Figures> {
    let backend = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
    let gateway = LocalGateway::serve(Arc::new(Metered::new(backend)), options).await?;
    create_topic(&gateway.endpoint.bootstrap, &workload.topic).await?;
    let figures = run_workload(&gateway.endpoint.bootstrap, workload).await;
    print_read_ahead("gateway, embedded", &gateway.gateway.read_ahead);
    gateway.stop().await;
    Ok(figures)
}

/// How often Fetches were served from reads made ahead (FETCH-READAHEAD-1).
fn print_read_ahead(label: &str, read_ahead: &kafka_iggy_gateway::read_ahead::ReadAhead) {
    let (started, served, unfinished) = read_ahead.counts();
    eprintln!("{label}: reads made ahead {started}, Fetches served from one {served} ({unfinished} still under way when asked)");
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

fn find_tansu(args: &Args) -> Option<PathBuf> {
    if let Some(path) = &args.tansu_bin {
        return Some(path.clone());
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join("tansu")).find(|p| p.is_file())
}

/// A tansu broker with in-memory storage on a free loopback port, killed on drop.
struct Tansu(Child);

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_tansu(binary: &PathBuf) -> anyhow::Result<(Tansu, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let address = format!("127.0.0.1:{port}");
    let url = format!("tcp://{address}");
    let log = std::fs::File::create(std::env::temp_dir().join(format!("kig-tansu-{port}.log")))?;
    let child = Command::new(binary)
        .args(["broker", "--storage-engine", "memory://tansu/"])
        .args(["--listener-url", &url, "--advertised-listener-url", &url])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut tansu = Tansu(child);
    let start = Instant::now();
    // Readiness of a process this run started: poll its port, bounded.
    while std::net::TcpStream::connect(&address).is_err() {
        if let Some(status) = tansu.0.try_wait()? {
            bail!("tansu exited with {status} before listening (log in /tmp/kig-tansu-{port}.log)");
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("tansu did not listen on {address} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((tansu, address))
}

async fn tansu(binary: &PathBuf, workload: &Workload) -> anyhow::Result<Figures> {
    let (tansu, address) = start_tansu(binary)?;
    let workload = &Workload {
        watch_pids: vec![tansu.0.id()],
        ..workload.clone()
    };
    create_topic(&address, &workload.topic).await?;
    Ok(run_workload(&address, workload).await)
}

/// One run's lines after its rows: the stored messages read back, the ratios and the fetch bound.
fn summarise_run(report: &mut Report, args: &Args, run: usize, records: usize, cores: usize) {
    let find = |row: Row| report.rows.iter().find(|m| m.row == row && m.run == run);
    let native_fetch = find(Row::Native).map(|m| m.fetch_records_per_s);
    for (m, poll) in report
        .rows
        .iter()
        .filter(|m| m.run == run)
        .filter_map(|m| Some((m, m.mapped_poll.as_ref()?)))
    {
        let of_native = |rate: f64| native_fetch.map_or(String::new(), |n| format!(" ({:.2}× native)", rate / n));
        println!(
            "cpu {:<22} its stored messages read back by the native row's poll: {:.3} M rec/s{}, server {:.2} µs/record",
            m.label,
            poll.mapped.records_per_s / 1e6,
            of_native(poll.mapped.records_per_s),
            poll.mapped.server_us_per_record
        );
        if let Some(plain) = &poll.plain {
            println!(
                "cpu {:<22} the native row's messages read again the same way, in turn with those: {:.3} M rec/s{}, server {:.2} µs/record; the row's fetch is {:.2}× this",
                m.label,
                plain.records_per_s / 1e6,
                of_native(plain.records_per_s),
                plain.server_us_per_record,
                m.fetch_records_per_s / plain.records_per_s
            );
        }
    }
    let run_label = if args.runs > 1 {
        format!("run {run}: ")
    } else {
        String::new()
    };
    let mut ratios = Vec::new();
    for (over, under) in [
        (Row::NativeRelayed, Row::Native),
        (Row::GatewayIggy, Row::Native),
        (Row::GatewayEmbedded, Row::Tansu),
        (Row::GatewayEmbedded, Row::Native),
    ] {
        if let (Some(a), Some(b)) = (find(over), find(under)) {
            let produce = a.produce_records_per_s / b.produce_records_per_s;
            let fetch = a.fetch_records_per_s / b.fetch_records_per_s;
            println!(
                "{run_label}ratio {} / {}: produce {produce:.2}×, fetch {fetch:.2}×",
                over.label(),
                under.label()
            );
            ratios.push(Ratio {
                run,
                over,
                under,
                produce,
                fetch,
            });
        }
    }
    let bound = match (find(Row::Native), find(Row::NativeRelayed), find(Row::GatewayIggy)) {
        (Some(native), Some(relayed), Some(gateway)) => Some(fetch_bound(native, relayed, gateway, records, cores)),
        _ => None,
    };
    report.ratios.extend(ratios);
    let Some(bound) = bound else {
        return;
    };
    println!(
        "{run_label}fetch bound for any gateway here: {:.3} M rec/s ({:.2}× native) = {cores} cores / (server {:.2} + relay {:.2} + Kafka client {:.2} µs/record)",
        bound.records_per_s / 1e6,
        bound.of_native,
        bound.server_us_per_record,
        bound.relay_us_per_record,
        bound.client_us_per_record
    );
    if let Some(mapped) = &bound.mapped {
        println!(
            "{run_label}fetch bound for any gateway storing these records as the seed maps them: {:.3} M rec/s ({:.2}× native) = {cores} cores / (server {:.2} (×{:.2}, the mapped form's cost over plain messages') + relay {:.2} + Kafka client {:.2} µs/record)",
            mapped.records_per_s / 1e6,
            mapped.of_native,
            mapped.server_us_per_record,
            mapped.mapped_over_plain,
            bound.relay_us_per_record,
            bound.client_us_per_record
        );
    }
    report.fetch_bounds.push(bound);
}

/// Each gateway row's p99 over the native row's at the same rate, run by run, and over the runs:
/// the latency target's measure (docs/performance.md).
fn summarise_latency(report: &mut Report, rate: f64) {
    for row in [Row::GatewayIggy, Row::GatewayEmbedded] {
        let mut added = Vec::new();
        for m in report.rows.iter().filter(|m| m.row == row) {
            let Some(native) = report.rows.iter().find(|n| n.row == Row::Native && n.run == m.run) else {
                continue;
            };
            let added_ms = m.produce_p99_ms - native.produce_p99_ms;
            println!(
                "latency at {:.3} M rec/s, run {}: {} p99 {:.2} ms, native p99 {:.2} ms: added {added_ms:.2} ms",
                rate / 1e6,
                m.run,
                row.label(),
                m.produce_p99_ms,
                native.produce_p99_ms,
            );
            added.push(added_ms);
        }
        if added.is_empty() {
            continue;
        }
        let summary = AddedLatency {
            row,
            median_ms: median(added.clone()),
            min_ms: added.iter().copied().fold(f64::INFINITY, f64::min),
            max_ms: added.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            above_1_ms: added.iter().filter(|&&a| a > 1.0).count(),
            added_p99_ms: added,
        };
        println!(
            "latency at {:.3} M rec/s: {} added p99 median {:.2} ms over {} run(s) (from {:.2} to {:.2}; above 1 ms in {})",
            rate / 1e6,
            row.label(),
            summary.median_ms,
            summary.added_p99_ms.len(),
            summary.min_ms,
            summary.max_ms,
            summary.above_1_ms
        );
        report.added_latency.push(summary);
    }
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
    };
    let records = workload("x", 0).records();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench table: {records} records of {} B per row, one partition; librdkafka acks=all linger.ms=5, produced then read in {rounds} round(s); native sends and polls of {}; {cores} cores",
        args.record_bytes, args.native_batch
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
    let needs_iggy = rows
        .iter()
        .any(|r| matches!(r, Row::Native | Row::NativeRelayed | Row::GatewayIggy));
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
    if let Some(rate) = args.rate {
        summarise_latency(&mut report, rate);
    }
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    println!("JSON: {}", args.json.display());
    Ok(())
}
