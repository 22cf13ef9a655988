//! `make bench`, the Iggy read probe (docs/performance.md, "The Iggy server per 1 MiB read"):
//! what one Fetch-sized read costs the server through the gateway's SDK backend alone, with no
//! Kafka client and no gateway around it. For each size of append (messages per send), it fills
//! a fresh one-partition topic, reads it back in 1 MiB reads twice, and prints the wall time and
//! the server's CPU time per read (from the server's /proc schedstat), then the server CPU of one
//! `watermarks` call. Needs a server found as the real-Iggy tier finds one (`IGGY_ADDR`,
//! `IGGY_SERVER_BIN` or `iggy-server` on PATH); otherwise says why it skipped. Server CPU is
//! only known for a server this bench started. Asserts nothing; bounded by its arguments.

use clap::Parser;
use iggy_common::IggyMessage;
use kafka_iggy_conformance::cpu::Snapshot;
use kafka_iggy_conformance::real_iggy::{discover, Discovery, DEFAULT_STREAM};
use kafka_iggy_gateway::backend::{Backend, ReadLimits, TopicSpec};
use std::time::Instant;

/// The bytes one read asks for: librdkafka's default max.partition.fetch.bytes.
const READ_BYTES: u64 = 1 << 20;
/// At most this many messages per read, as the gateway's Fetch asks.
const READ_MESSAGES: u32 = 10_000;

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
    let server = match discover().await? {
        Discovery::Found(server) => server,
        Discovery::Skipped(why) => {
            println!("iggy read probe: SKIPPED: {why}");
            return Ok(());
        }
    };
    let pid = server.pid();
    let backend = server.gateway_backend().await?;
    let limits = ReadLimits {
        max_messages: READ_MESSAGES,
        max_bytes: READ_BYTES,
    };
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
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        backend.create_topic(DEFAULT_STREAM, &topic, spec).await?;
        let mut sent = 0;
        while sent < args.messages {
            let n = batch.max(1).min(args.messages - sent);
            let messages = (0..n)
                .map(|_| {
                    IggyMessage::builder()
                        .payload(vec![b'x'; args.message_bytes].into())
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            backend.append(DEFAULT_STREAM, &topic, 0, messages).await?;
            sent += n;
        }
        for round in 0..args.rounds {
            let before = Snapshot::take(pid);
            let started = Instant::now();
            let (mut offset, mut reads) = (0u64, 0usize);
            while offset < args.messages as u64 {
                let read = backend.read(DEFAULT_STREAM, &topic, 0, offset, limits).await?;
                let Some(last) = read.last() else { break };
                offset = last.header.offset + 1;
                reads += 1;
            }
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
