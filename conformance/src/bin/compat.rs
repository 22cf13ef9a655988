//! The compatibility tier (`make compat`): builds librdkafka's test runner from the
//! `rdkafka-sys` crate's sources, starts a gateway in process (embedded backend, or a real Iggy
//! server found as the real-Iggy tier finds one), runs librdkafka's broker tests one test number
//! at a time under a time limit, and writes a Markdown and a JUnit report. Exits non-zero when a
//! test failed or timed out. See docs/compat.md.

use anyhow::Context;
use clap::{Parser, ValueEnum};
use kafka_iggy_conformance::compat::build;
use kafka_iggy_conformance::compat::catalog::{self, Selection};
use kafka_iggy_conformance::compat::report::{self, Totals};
use kafka_iggy_conformance::compat::tier::{self, Gateways};
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};
use kafka_iggy_conformance::real_iggy::{discover, Discovery};
use kafka_iggy_gateway::backend::Backend;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Partitions of an auto-created topic: librdkafka's tests assume a broker configured with
/// several (its own test clusters use 4), and some (0011, 0048) spread messages over them.
const DEFAULT_PARTITIONS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    /// The in-process model of Iggy.
    Embedded,
    /// A real Iggy server: IGGY_ADDR, an iggy-server binary (PATH or IGGY_SERVER_BIN), or Docker.
    Iggy,
    /// A real Iggy server when one is found that way, else the embedded backend.
    Auto,
}

#[derive(Debug, Parser)]
#[command(about = "Run librdkafka's own broker tests against the gateway")]
struct Cli {
    /// Test numbers to run: a list (`0001,0012`), ranges (`0040-0060`) or both. Default: the
    /// whole 0000-0199 series.
    #[arg(long, conflicts_with = "quick")]
    tests: Option<String>,
    /// The fixed quick subset `make test` runs.
    #[arg(long)]
    quick: bool,
    /// Seconds one test number may run before it is killed and recorded as timed out.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Which backend the gateway stores into.
    #[arg(long, value_enum, default_value_t = BackendChoice::Embedded)]
    backend: BackendChoice,
    /// Write the JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the Markdown report here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Where librdkafka is built and the runs' logs go. Default: target/compat in the workspace.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// librdkafka's source tree. Default: the rdkafka-sys crate's, found with cargo metadata.
    #[arg(long)]
    librdkafka_src: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (work, gateway_log) = kafka_iggy_conformance::compat::work_dir::prepare(cli.work_dir.clone(), "compat")?;
    println!("compat: the gateway logs to {}", gateway_log.display());
    let selection = Selection::parse(match (&cli.tests, cli.quick) {
        (_, true) => tier::QUICK,
        (Some(tests), false) => tests,
        (None, false) => "0000-0199",
    })?;
    let sources = match &cli.librdkafka_src {
        Some(dir) => dir.clone(),
        None => build::crate_sources(&kafka_iggy_conformance::compat::work_dir::workspace()?)?,
    };
    let runner = tokio::task::spawn_blocking({
        let work = work.clone();
        move || build::build(&sources, &work)
    })
    .await??;
    let entries = catalog::read(&runner.tests_dir.join("test.c"))?;

    let (outcomes, target) = match cli.backend {
        BackendChoice::Embedded => (
            run(&cli, &runner, &entries, &selection, &work, shared_backend()).await?,
            "the embedded backend".to_string(),
        ),
        choice => match discover().await? {
            Discovery::Found(server) => {
                let backend = Arc::new(server.gateway_backend().await?);
                let outcomes = run(&cli, &runner, &entries, &selection, &work, backend).await?;
                (outcomes, format!("a real Iggy server ({})", server.how))
            }
            Discovery::Skipped(why) if choice == BackendChoice::Auto => {
                println!("compat: no real Iggy server ({why}); using the embedded backend");
                (
                    run(&cli, &runner, &entries, &selection, &work, shared_backend()).await?,
                    "the embedded backend".to_string(),
                )
            }
            Discovery::Skipped(why) => anyhow::bail!("--backend iggy, but no Iggy server: {why}"),
        },
    };

    let title = format!(
        "librdkafka {} broker tests against the gateway on {target}",
        runner.version
    );
    if let Some(path) = &cli.markdown {
        std::fs::write(path, report::markdown(&title, &outcomes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.junit {
        std::fs::write(path, report::junit("librdkafka-compat", &outcomes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let totals = Totals::of(&outcomes);
    println!("compat: {}", totals.line());
    if totals.is_failure() {
        std::process::exit(1);
    }
    Ok(())
}

/// Starts the two gateways on `backend` and runs the selection against them.
async fn run<B: Backend>(
    cli: &Cli,
    runner: &build::Runner,
    entries: &[catalog::Entry],
    selection: &Selection,
    work: &std::path::Path,
    backend: Arc<B>,
) -> anyhow::Result<Vec<kafka_iggy_conformance::compat::outcome::Outcome>> {
    let auto = LocalGateway::serve(
        backend.clone(),
        LocalOptions {
            auto_create_topics: Some(true),
            default_partitions: Some(DEFAULT_PARTITIONS),
            ..LocalOptions::default()
        },
    )
    .await?;
    let manual = LocalGateway::serve(
        backend,
        LocalOptions {
            default_partitions: Some(DEFAULT_PARTITIONS),
            ..LocalOptions::default()
        },
    )
    .await?;
    let gateways = Gateways {
        default: &auto.endpoint.bootstrap,
        no_auto_create: &manual.endpoint.bootstrap,
    };
    let time_limit = Duration::from_secs(cli.timeout_s);
    let outcomes = tier::run_all(runner, entries, selection, &gateways, time_limit, &work.join("runs")).await;
    auto.stop().await;
    manual.stop().await;
    outcomes
}
