//! `make bench`: the gateway against the native Iggy SDK on one three-node Iggy cluster
//! (docs/performance-history.md, "On a three-node Iggy cluster"; issue 32). The cluster is started once
//! (`conformance/src/iggy_cluster.rs`: three `iggy-server` nodes on loopback, one shard each);
//! then, in turn on it, the native SDK sends and polls 1 KiB messages as the table's native row
//! does, and the in-process gateway, given the three-node roster (CLUSTER-ROSTER-1), takes the
//! same records from librdkafka (acks=all) and serves them back to a librdkafka consumer, as the
//! table's gateway row does. Each row runs a fixed count of records and stops by itself. Prints
//! the table, each phase's CPU (bench process and the three nodes, the time ready with no CPU
//! free and the time taken by the host) and the ratios, and writes them as JSON. Without an
//! `iggy-server` binary it prints `SKIPPED` and why. Asserts nothing about speed.

use anyhow::Context;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use iggy::prelude::{Client, Identifier, IggyClient, IggyMessage, StreamClient, TopicClient, TopicCreateOptions};
use kafka_iggy_conformance::bench::{
    bench_output, child_pids, load_1m, print_phase_cpu, print_table_header, print_table_row, run_native, run_workload,
    write_json_report, Figures, NativeWorkload, PhaseCpu, Workload,
};
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::iggy_cluster::{IggyCluster, NODES, START_TIMEOUT};
use kafka_iggy_conformance::real_iggy::{find_binary, parse_env_pair};
use kafka_iggy_gateway::backend::iggy::{IggyBackend, IggyTls, DEFAULT_FAILOVER_TIMEOUT};
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Row {
    /// The pinned Iggy SDK, connected to the cluster's leader.
    Native,
    /// The gateway in process on the SDK backend, given every node (the roster).
    Gateway,
}

impl Row {
    fn label(self) -> &'static str {
        match self {
            Row::Native => "native SDK, 3 nodes",
            Row::Gateway => "gateway, 3 nodes",
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "The gateway against the native Iggy SDK on one three-node Iggy cluster")]
struct Args {
    /// Records per row (produced, then read back).
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Messages per native send and per native poll.
    #[arg(long, default_value_t = 1000)]
    native_batch: usize,
    /// SDK clients in the gateway's pool (the table's gateway-on-Iggy row has 8).
    #[arg(long, default_value_t = 8)]
    gateway_pool: usize,
    /// Rows to measure (both by default), in the order given.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Row>,
    /// Measures the rows this many times in turn on the same cluster.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// `KEY=VALUE` added to the environment of the nodes (repeatable), as the table's
    /// `--iggy-server-env` is to its server: set in this process's environment before the nodes
    /// start, so they inherit it.
    #[arg(long = "iggy-server-env", value_parser = parse_env_pair)]
    iggy_server_env: Vec<(String, String)>,
    /// Where the JSON goes; `bench/cluster.json` in the target directory when unset.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Serialize)]
struct Measured {
    run: usize,
    row: Row,
    label: &'static str,
    produce_records_per_s: f64,
    fetch_records_per_s: f64,
    produce_p50_ms: f64,
    produce_p99_ms: f64,
    load_1m: f64,
    /// Bench process (client, gateway, SDK) and the three nodes summed (`others`).
    produce_cpu: PhaseCpu,
    fetch_cpu: PhaseCpu,
}

#[derive(Serialize)]
struct Ratio {
    run: usize,
    produce: f64,
    fetch: f64,
}

#[derive(Serialize)]
struct Skipped {
    row: Row,
    reason: String,
}

#[derive(Serialize)]
struct Report {
    records: usize,
    record_bytes: usize,
    native_batch: usize,
    gateway_pool: usize,
    nodes: usize,
    iggy_server_env: Vec<(String, String)>,
    cores: usize,
    runs: usize,
    rows: Vec<Measured>,
    skipped: Vec<Skipped>,
    /// The gateway row over the native row, per run.
    ratios: Vec<Ratio>,
}

/// The native rows' stream; the gateway maps Kafka topics into its default stream.
const NATIVE_STREAM: &str = "kig-native-bench";
const GATEWAY_STREAM: &str = "kafka";

/// The native SDK, logged in at the cluster's leader (where every partition call goes, DIFF-14).
async fn native(cluster: &IggyCluster, pids: &[u32], args: &Args, topic: &str) -> anyhow::Result<Figures> {
    let leader = cluster.leader(START_TIMEOUT).await?;
    let address = cluster.address(leader);
    let connection = format!("iggy://{}:{}@{address}", cluster.username, cluster.password);
    let client = IggyClient::builder_from_connection_string(&connection)?.build()?;
    client
        .connect()
        .await
        .with_context(|| format!("connecting an SDK client to the leader at {address}"))?;
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
    let workload = NativeWorkload {
        stream: &stream,
        topic: &topic_id,
        records: args.records,
        batch: args.native_batch,
        rate_per_s: None,
        watch_pids: pids,
    };
    let figures = run_native(&client, None, &workload, |_| {
        Ok(IggyMessage::builder().payload(value.clone()).build()?)
    })
    .await;
    let _ = client.shutdown().await;
    figures
}

/// The gateway in process on the SDK backend given the cluster's roster, driven by librdkafka.
async fn gateway(cluster: &IggyCluster, pids: &[u32], args: &Args, topic: &str) -> anyhow::Result<Figures> {
    let roster = cluster.roster();
    let backend = IggyBackend::connect_cluster(
        &roster,
        &cluster.username,
        &cluster.password,
        IggyTls::default(),
        args.gateway_pool,
        DEFAULT_FAILOVER_TIMEOUT,
    )
    .await
    .with_context(|| format!("connecting the gateway's backend to the roster {roster}"))?;
    backend.ensure_stream(GATEWAY_STREAM).await?;
    backend
        .create_topic(
            GATEWAY_STREAM,
            topic,
            TopicSpec {
                partitions: 1,
                message_expiry_us: None,
            },
        )
        .await?;
    // Metered as the gateway binary runs it.
    let gateway = LocalGateway::serve(Arc::new(Metered::new(backend)), LocalOptions::default()).await?;
    let workload = Workload {
        topic: topic.to_string(),
        rounds: 1,
        round_records: args.records,
        record_bytes: args.record_bytes,
        watch_pids: pids.to_vec(),
        rate_per_s: None,
        cold_fetch: false,
        idempotent: false,
    };
    let figures = run_workload(&gateway.endpoint.bootstrap, &workload).await;
    gateway.stop().await;
    Ok(figures)
}

fn main() -> anyhow::Result<()> {
    // LIMIT-HEAP-1: this process hosts the gateway, so it runs with the gateway's malloc settings.
    println!("{}", kafka_iggy_gateway::heap_tuning::tune_heap().describe());
    let args = Args::parse();
    let Some(binary) = find_binary() else {
        println!(
            "bench cluster: SKIPPED (no iggy-server binary: IGGY_SERVER_BIN is unset and none is on PATH; the bench starts its own three nodes, so a server at IGGY_ADDR or in Docker does not serve)"
        );
        return Ok(());
    };
    // Before any thread starts: the nodes this process spawns inherit its environment.
    for (key, value) in &args.iggy_server_env {
        std::env::set_var(key, value);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args, binary))
}

async fn run(args: Args, binary: PathBuf) -> anyhow::Result<()> {
    let rows = if args.only.is_empty() {
        vec![Row::Native, Row::Gateway]
    } else {
        args.only.clone()
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let records = args.records;
    println!(
        "bench cluster: {records} records of {} B per row, one partition, on {NODES} iggy-server nodes (one shard each) of {}; native sends and polls of {}; gateway: librdkafka acks=all linger.ms=5, produced then read in one round, a pool of {} SDK clients given the roster; {cores} cores",
        args.record_bytes,
        binary.display(),
        args.native_batch,
        args.gateway_pool
    );
    for (key, value) in &args.iggy_server_env {
        println!("Iggy nodes' environment: {key}={value}");
    }
    let cluster = IggyCluster::start(&binary).await?;
    let leader = cluster.leader(START_TIMEOUT).await?;
    let pids = child_pids("iggy-server");
    println!(
        "Iggy cluster: roster {}, leader node {leader}; node processes {pids:?}",
        cluster.roster()
    );
    if pids.len() != NODES {
        println!(
            "Iggy cluster: {} node processes found, not {NODES}: the server's CPU figures are short",
            pids.len()
        );
    }
    let mut report = Report {
        records,
        record_bytes: args.record_bytes,
        native_batch: args.native_batch,
        gateway_pool: args.gateway_pool,
        nodes: NODES,
        iggy_server_env: args.iggy_server_env.clone(),
        cores,
        runs: args.runs.into(),
        rows: Vec::new(),
        skipped: Vec::new(),
        ratios: Vec::new(),
    };
    let run_id = std::process::id();
    print_table_header();
    for run in 1..=usize::from(args.runs) {
        if args.runs > 1 {
            println!("| run {run} of {}", args.runs);
        }
        for &row in &rows {
            let outcome = match row {
                Row::Native => native(&cluster, &pids, &args, &format!("native-{run_id}-{run}")).await,
                Row::Gateway => gateway(&cluster, &pids, &args, &format!("cluster-{run_id}-{run}")).await,
            };
            match outcome {
                Ok(f) => {
                    let m = Measured {
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
                    };
                    print_table_row(m.label, records, args.record_bytes, &f, m.load_1m);
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
        for (phase, cpu, rate) in [
            ("produce", &m.produce_cpu, m.produce_records_per_s),
            ("fetch", &m.fetch_cpu, m.fetch_records_per_s),
        ] {
            // With several runs each line names its run: "native SDK, 3 nodes #2".
            let label = if args.runs > 1 {
                format!("{} #{}", m.label, m.run)
            } else {
                m.label.to_string()
            };
            print_phase_cpu(&label, phase, cpu, rate, records, cores, "servers");
        }
    }
    for run in 1..=usize::from(args.runs) {
        let find = |row: Row| report.rows.iter().find(|m| m.row == row && m.run == run);
        if let (Some(g), Some(n)) = (find(Row::Gateway), find(Row::Native)) {
            let ratio = Ratio {
                run,
                produce: g.produce_records_per_s / n.produce_records_per_s,
                fetch: g.fetch_records_per_s / n.fetch_records_per_s,
            };
            println!(
                "run {run}: ratio {} / {}: produce {:.2}×, fetch {:.2}×",
                Row::Gateway.label(),
                Row::Native.label(),
                ratio.produce,
                ratio.fetch
            );
            report.ratios.push(ratio);
        }
    }
    drop(cluster);
    let json = args
        .json
        .unwrap_or_else(|| bench_output(env!("CARGO_TARGET_TMPDIR"), "cluster.json"));
    write_json_report(&json, &report)?;
    Ok(())
}
