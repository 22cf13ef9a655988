//! `make bench`, the Iggy read probe (docs/performance-history.md, "The Iggy server per 1 MiB read"):
//! what one Fetch-sized read costs the server with no Kafka client and no gateway around it.
//!
//! - **The shard probe** (round 6) stores the same records twice, plain (as the native row
//!   stores them) and mapped (as the gateway stores a keyed Kafka record), and reads each whole,
//!   in polls of 1,000 through SDK connections of its own and in 1 MiB reads through gateway
//!   backends of 4 and 1 connections. Each line gives the wall time and the server's CPU per
//!   poll, split by server thread, so which shard served a poll, and whether it was forwarded
//!   there, shows.
//! - **The read probe**, for each size of append (messages per send), fills a fresh
//!   one-partition topic, reads it back in 1 MiB reads, and prints the wall time and the
//!   server's CPU per read, then the server CPU of one `watermarks` call.
//!
//! Server CPU comes from the server's /proc schedstat, so it is only known for a server this
//! bench started. Needs a server found as the real-Iggy tier finds one (`IGGY_ADDR`,
//! `IGGY_SERVER_BIN` or `iggy-server` on PATH); otherwise says why it skipped. Asserts nothing;
//! bounded by its arguments.

use clap::Parser;
use iggy::prelude::{Consumer, Identifier, IggyClient, MessageClient, PollingStrategy};
use iggy_common::IggyMessage;
use kafka_iggy_conformance::cpu::Snapshot;
use kafka_iggy_conformance::real_iggy::{discover_with_env, parse_env_pair, Discovery, IggyServer, DEFAULT_STREAM};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::{Backend, ReadLimits, TopicSpec};
use kig_core::mapping::{record_to_message, KafkaRecord};
use std::time::Instant;

/// The bytes one read asks for: librdkafka's default max.partition.fetch.bytes.
const READ_BYTES: u64 = 1 << 20;
/// At most this many messages per read, as the gateway's Fetch asks.
const READ_MESSAGES: u32 = 10_000;
/// A Fetch-sized read, as the gateway's backend is asked for one.
const READ_LIMITS: ReadLimits = ReadLimits {
    max_messages: READ_MESSAGES,
    max_bytes: READ_BYTES,
};
/// Messages per poll and per send in the shard probe: the table's native row's batch.
const PROBE_BATCH: usize = 1_000;

#[derive(Parser)]
#[command(about = "Server CPU and wall time per 1 MiB read through the SDK backend")]
struct Args {
    /// Messages appended (and read back) per topic.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    #[arg(long, default_value_t = 1024)]
    message_bytes: usize,
    /// Messages per send, one topic each, in this order.
    #[arg(long, value_delimiter = ',', default_values_t = [50usize, 250, 1000])]
    send_batches: Vec<usize>,
    /// Reads of the whole topic per send size.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// `watermarks` calls timed per topic.
    #[arg(long, default_value_t = 500)]
    watermark_calls: usize,
    /// SDK connections of its own the shard probe polls through. The server hands new
    /// connections to its shards in turn, so two reach both of a two-shard server (0: no probe).
    #[arg(long, default_value_t = 2)]
    shard_probe_connections: usize,
    /// `KEY=VALUE` added to the environment of an Iggy server this run starts (repeatable), such
    /// as `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432` (docs/performance-history.md, round 6).
    #[arg(long = "iggy-server-env", value_parser = parse_env_pair)]
    iggy_server_env: Vec<(String, String)>,
    /// Passed by `cargo bench`; ignored. Without it `make bench` stopped at this bench.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Milliseconds of server CPU between two snapshots, when the server's process is known.
fn server_ms(before: &Snapshot, pid: Option<u32>) -> Option<f64> {
    pid.map(|_| Snapshot::take(pid).since(before).total().as_secs_f64() * 1e3)
}

fn per(total: Option<f64>, n: usize) -> String {
    total.map_or("unknown (external server)".into(), |t| {
        format!("{:.3}", t / n.max(1) as f64)
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = match discover_with_env(args.iggy_server_env.clone()).await? {
        Discovery::Found(server) => server,
        Discovery::Skipped(why) => {
            println!("iggy read probe: SKIPPED: {why}");
            return Ok(());
        }
    };
    let pid = server.pid();
    let backend = server.gateway_backend().await?;
    shard_probe(&server, &backend, &args, pid).await?;
    println!(
        "iggy read probe: {} messages of {} B per topic, reads of {READ_BYTES} B, server CPU from {}",
        args.messages,
        args.message_bytes,
        if pid.is_some() {
            "schedstat"
        } else {
            "nowhere (external server)"
        }
    );
    for &batch in &args.send_batches {
        let topic = format!("iggy-read-probe-{batch}");
        fill_topic(&backend, &topic, false, batch, &args).await?;
        for round in 0..args.rounds {
            let before = Snapshot::take(pid);
            let started = Instant::now();
            let reads = read_through(&backend, &topic, args.messages).await?;
            let wall_ms = started.elapsed().as_secs_f64() * 1e3 / reads.max(1) as f64;
            println!(
                "sends of {batch:5}, round {round}: {reads} reads, wall {wall_ms:.2} ms/read, server CPU {} ms/read",
                per(server_ms(&before, pid), reads)
            );
        }
        let before = Snapshot::take(pid);
        for _ in 0..args.watermark_calls {
            backend.watermarks(DEFAULT_STREAM, &topic, 0).await?;
        }
        let per_call_us = server_ms(&before, pid).map(|ms| ms * 1e3);
        println!(
            "sends of {batch:5}: watermarks, server CPU {} µs/call",
            per(per_call_us, args.watermark_calls)
        );
    }
    Ok(())
}

/// A fresh one-partition topic of `args.messages` records of `args.message_bytes` each, keyed as
/// the table's producer keys them, stored plain (payload only) or mapped (MAP-KEY-1's
/// `kafka.key` header and an origin timestamp, byte for byte what the gateway appends), in sends
/// of `batch`.
async fn fill_topic(backend: &IggyBackend, topic: &str, mapped: bool, batch: usize, args: &Args) -> anyhow::Result<()> {
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    backend.create_topic(DEFAULT_STREAM, topic, spec).await?;
    let value = bytes::Bytes::from(vec![b'x'; args.message_bytes]);
    let mut sent = 0;
    while sent < args.messages {
        let n = batch.max(1).min(args.messages - sent);
        let mut messages = Vec::with_capacity(n);
        for i in sent..sent + n {
            let message = if mapped {
                let record = KafkaRecord {
                    timestamp_ms: 1_700_000_000_000,
                    key: Some(i.to_string().into()),
                    value: Some(value.clone()),
                    headers: Vec::new(),
                };
                record_to_message(record)?.0
            } else {
                IggyMessage::builder().payload(value.clone()).build()?
            };
            messages.push(message);
        }
        backend.append(DEFAULT_STREAM, topic, 0, messages).await?;
        sent += n;
    }
    Ok(())
}

/// Polls the whole topic in polls of [`PROBE_BATCH`] by offset through `client`; the polls made.
async fn poll_through(client: &IggyClient, topic: &str, messages: usize) -> anyhow::Result<usize> {
    let (stream, topic) = (Identifier::named(DEFAULT_STREAM)?, Identifier::named(topic)?);
    let consumer = Consumer::new(Identifier::named("kig-shard-probe")?);
    let (mut next, mut polls) = (0u64, 0usize);
    while (next as usize) < messages {
        let strategy = PollingStrategy::offset(next);
        let polled = client
            .poll_messages(
                &stream,
                &topic,
                Some(0),
                &consumer,
                &strategy,
                PROBE_BATCH as u32,
                false,
            )
            .await?;
        anyhow::ensure!(!polled.messages.is_empty(), "poll at {next} came back empty");
        next += polled.messages.len() as u64;
        polls += 1;
    }
    Ok(polls)
}

/// The server's CPU per poll in all, then its three busiest threads' shares, in ms.
fn per_thread(ns_by_thread: &std::collections::BTreeMap<String, u64>, polls: usize) -> String {
    let ms_per_poll = |ns: u64| ns as f64 / 1e6 / polls.max(1) as f64;
    let mut busy: Vec<(&String, &u64)> = ns_by_thread.iter().filter(|(_, ns)| **ns > 0).collect();
    busy.sort_by(|a, b| b.1.cmp(a.1));
    let parts: Vec<String> = busy
        .iter()
        .take(3)
        .map(|(name, ns)| format!("{name} {:.3}", ms_per_poll(**ns)))
        .collect();
    let total = ms_per_poll(ns_by_thread.values().sum());
    format!("{total:.3} ms/poll ({})", parts.join(", "))
}

/// What the shard probe reads through.
#[derive(Clone, Copy)]
enum Through<'a> {
    Client(&'a IggyClient),
    Backend(&'a IggyBackend),
}

/// Reads the whole topic through the gateway's backend, as a Fetch of 1 MiB does; the reads made.
async fn read_through(backend: &IggyBackend, topic: &str, messages: usize) -> anyhow::Result<usize> {
    let (mut next, mut reads) = (0u64, 0usize);
    while (next as usize) < messages {
        let read = backend.read(DEFAULT_STREAM, topic, 0, next, READ_LIMITS).await?;
        let Some(last) = read.last() else {
            anyhow::bail!("read at {next} came back empty");
        };
        next = last.header.offset + 1;
        reads += 1;
    }
    Ok(reads)
}

/// The shard probe (see the file's doc): for each round, connection and content, the wall time
/// and the server's CPU per poll, that CPU split by server thread.
async fn shard_probe(server: &IggyServer, backend: &IggyBackend, args: &Args, pid: Option<u32>) -> anyhow::Result<()> {
    if args.shard_probe_connections == 0 {
        return Ok(());
    }
    let contents = [("plain", false), ("mapped", true)];
    for (content, mapped) in contents {
        fill_topic(
            backend,
            &format!("iggy-shard-probe-{content}"),
            mapped,
            PROBE_BATCH,
            args,
        )
        .await?;
    }
    let mut clients = Vec::with_capacity(args.shard_probe_connections);
    for _ in 0..args.shard_probe_connections {
        clients.push(server.sdk_client_at(&server.address).await?);
    }
    let single = IggyBackend::connect(&server.address, &server.username, &server.password, 1).await?;
    println!(
        "shard probe: {} messages of {} B per topic, polls of {PROBE_BATCH}, {} connections",
        args.messages,
        args.message_bytes,
        clients.len()
    );
    for round in 0..args.rounds {
        // The SDK connections, then the gateway's backends reading 1 MiB at a time.
        let clients = clients.iter().map(Through::Client);
        let backends = [Through::Backend(backend), Through::Backend(&single)];
        for (connection, through) in clients.chain(backends).enumerate() {
            for (content, _) in contents {
                let topic = format!("iggy-shard-probe-{content}");
                let before = Snapshot::take(pid);
                let started = Instant::now();
                let polls = match through {
                    Through::Client(client) => poll_through(client, &topic, args.messages).await?,
                    Through::Backend(backend) => read_through(backend, &topic, args.messages).await?,
                };
                let wall_ms = started.elapsed().as_secs_f64() * 1e3 / polls.max(1) as f64;
                let split = pid.map_or("unknown (external server)".to_string(), |_| {
                    per_thread(&Snapshot::take(pid).by_thread_since(&before), polls)
                });
                let through = match through {
                    Through::Client(_) => format!("connection {connection}"),
                    Through::Backend(b) => format!("gateway backend of {} connections", b.pool_size()),
                };
                println!(
                    "shard probe, round {round}, {through}, {content:6}: {polls} polls, wall {wall_ms:.2} ms/poll, server CPU {split}"
                );
            }
        }
    }
    Ok(())
}
