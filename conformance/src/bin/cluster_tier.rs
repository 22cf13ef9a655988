//! The cluster tier (docs/spec/cluster.md, issue 32): a three-node Iggy cluster started from an
//! `iggy-server` binary (`IGGY_SERVER_BIN`, or `PATH`; a server at `IGGY_ADDR` or in Docker cannot
//! be killed node by node, so they do not serve), a gateway on the real SDK backend given the
//! cluster's roster, a representative part of the conformance suite through it (the librdkafka
//! cases and the cases that start their own gateways, two gateways with one stopped among them),
//! then the fault cases (`cases::cluster_cases`), each on a cluster of its own (`--kills N` sets the
//! primary kills of the failover-gap case; `cluster-tier --kills 10 failover_gap` runs it alone).
//! Without a binary it prints `cluster tier: SKIPPED` and why, never a passing count; then
//! `IGGY_CLUSTER_REQUIRED=1` fails the run. Exits non-zero when a case fails.

use clap::Parser;
use kafka_iggy_conformance::cases::{self, cluster_cases, gateway_cases};
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::iggy_cluster::IggyCluster;
use kafka_iggy_conformance::real_iggy::find_binary;
use kafka_iggy_conformance::report::{self, ReportPaths};
use kafka_iggy_conformance::results::Status;
use kafka_iggy_conformance::runner::{self, Filter};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "cluster-tier",
    about = "The conformance suite and fault cases against a three-node Iggy cluster"
)]
struct Cli {
    /// Run only the cases whose name contains TEXT.
    filter: Option<String>,
    /// Primary kills of the failover-gap case (`primary_killed_again_and_again_gives_the_failover_gap`),
    /// each on a cluster of its own; it prints every gap and their min, median and max.
    #[arg(long, value_name = "N", default_value_t = cluster_cases::DEFAULT_KILLS)]
    kills: usize,
    #[command(flatten)]
    reports: ReportPaths,
}

/// The endpoint cases run through the gateway on the cluster: the librdkafka area (produce,
/// consume, compression, idempotence, groups through a real client).
const SUITE_AREAS: &[&str] = &["rdkafka"];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,rdkafka=off,iggy=off".into()),
        )
        .init();
    let Some(binary) = find_binary() else {
        println!(
            "cluster tier: SKIPPED (no iggy-server binary: IGGY_SERVER_BIN is unset and none is on PATH; the tier starts and kills its own nodes, so a server at IGGY_ADDR or in Docker does not serve)"
        );
        if std::env::var("IGGY_CLUSTER_REQUIRED").as_deref() == Ok("1") {
            println!("cluster tier: IGGY_CLUSTER_REQUIRED=1, so the skip fails the run");
            std::process::exit(1);
        }
        return Ok(());
    };
    let filter = &Filter {
        any_of: cli.filter.into_iter().collect(),
    };

    // The suite's part: one cluster, one gateway given its roster.
    let suite: Vec<_> = cases::all()
        .into_iter()
        .filter(|c| SUITE_AREAS.contains(&c.area()) && filter.selects(c.name))
        .collect();
    let own_gateways = gateway_cases::NAMES.iter().any(|n| filter.selects(n));
    let mut report = runner::Report::default();
    if !suite.is_empty() || own_gateways {
        let cluster = IggyCluster::start(&binary).await?;
        println!(
            "cluster tier: three nodes of {} on {}",
            binary.display(),
            cluster.roster()
        );
        let backend = Arc::new(cluster_cases::cluster_backend(&cluster).await?);
        let gateway = LocalGateway::serve(backend, LocalOptions::default()).await?;
        report.extend(runner::run(&gateway.endpoint, &suite, filter).await);
        gateway.stop().await;
        report.extend(gateway_cases::run(&cluster, filter).await);
    }

    // The fault cases, each on a cluster of its own.
    let settings = cluster_cases::Settings { kills: cli.kills };
    report.extend(cluster_cases::run(&binary, filter, settings).await);

    let results = report.into_results("iggy-cluster", "three iggy-server nodes on loopback", "gateway");
    println!("{}", results.totals_line("cluster tier"));
    report::write(&results, &cli.reports)?;
    if results.count(Status::Failed) > 0 {
        std::process::exit(1);
    }
    Ok(())
}
