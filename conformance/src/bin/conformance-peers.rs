//! `conformance-peers`: runs the suite's `kafka` profile against the gateway and against
//! independent Kafka-protocol brokers, one at a time, and renders docs/conformance-peers.md
//! (`make conformance-peers`). `render` re-renders the page from the results already written;
//! `mock-case` is the per-case process the runner starts for librdkafka's mock cluster.

use clap::{Args, Parser, Subcommand};
use kafka_iggy_conformance::peers::matrix::{self, Verdicts};
use kafka_iggy_conformance::peers::noida::Noida;
use kafka_iggy_conformance::peers::rivine::Rivine;
use kafka_iggy_conformance::peers::run::{self, RunPlan};
use kafka_iggy_conformance::peers::tansu::Tansu;
use kafka_iggy_conformance::peers::{mock, ProcessPeer, COLUMNS};
use kafka_iggy_conformance::report::{self, ReportPaths};
use kafka_iggy_conformance::runner::Filter;
use kafka_iggy_conformance::traceability;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "conformance-peers",
    about = "The kafka profile against independent Kafka brokers"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Install, start and run every column, then render the page (the default).
    Run(Box<RunArgs>),
    /// Render the page from the results under --out and the verdicts file.
    Render(Box<PageArgs>),
    /// Run one endpoint case against a fresh librdkafka mock cluster (the runner's per-case
    /// process).
    MockCase {
        name: String,
        #[arg(long)]
        filter: Option<String>,
        #[arg(long)]
        json: PathBuf,
    },
}

#[derive(Args, Clone)]
struct PageArgs {
    /// Where each column's results.json, junit.xml and logs go.
    #[arg(long, value_name = "DIR", default_value = "target/peers/results")]
    out: PathBuf,
    /// The page to write (relative paths are from the repository root).
    #[arg(long, default_value = "docs/conformance-peers.md")]
    doc: PathBuf,
    /// The hand-written verdicts.
    #[arg(long, default_value = "docs/conformance-peers-verdicts.toml")]
    verdicts: PathBuf,
    /// Exit 1 when a failure has no verdict or a verdict is stale.
    #[arg(long)]
    strict: bool,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Where peers are installed (`<dir>/tansu`, `<dir>/rivine`, `<dir>/noida`).
    #[arg(long, env = "PEERS_DIR", value_name = "DIR", default_value = "target/peers")]
    peers_dir: PathBuf,
    /// Only these columns (repeat); every column by default.
    #[arg(long, value_name = "COLUMN")]
    only: Vec<String>,
    /// Only the cases whose name contains TEXT (repeat).
    #[arg(long, value_name = "TEXT")]
    filter: Vec<String>,
    /// How long one case may run before its process is killed and the case failed.
    #[arg(long, default_value_t = 150)]
    case_timeout_s: u64,
    #[command(flatten)]
    page: PageArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::MockCase { name, json, .. }) => mock_case(&name, json),
        Some(Command::Render(page)) => render(&page),
        Some(Command::Run(args)) => run_all(&args),
        None => run_all(&cli.run),
    }
}

fn mock_case(name: &str, json: PathBuf) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let results = runtime.block_on(mock::run_case(name))?;
    report::write(
        &results,
        &ReportPaths {
            json: Some(json),
            junit: None,
            markdown: None,
        },
    )
}

fn run_all(args: &RunArgs) -> anyhow::Result<()> {
    let this_binary = std::env::current_exe()?;
    let conformance = this_binary.with_file_name("conformance");
    anyhow::ensure!(
        conformance.is_file(),
        "no conformance binary beside {} (cargo build -p kafka-iggy-conformance --bin conformance)",
        this_binary.display()
    );
    let plan = RunPlan {
        conformance,
        this_binary,
        out_dir: args.page.out.clone(),
        case_timeout: Duration::from_secs(args.case_timeout_s),
        filter: Filter {
            any_of: args.filter.clone(),
        },
    };
    std::fs::create_dir_all(&args.peers_dir)?;
    let peers: [&dyn ProcessPeer; 3] = [&Tansu, &Rivine, &Noida];
    for column in COLUMNS {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == column) {
            continue;
        }
        println!("conformance-peers: column {column}");
        let results = match *column {
            "gateway" => run::gateway(&plan)?,
            "mock" => run::mock(&plan)?,
            name => {
                let peer = peers
                    .iter()
                    .find(|p| p.name() == name)
                    .ok_or_else(|| anyhow::anyhow!("no peer {name}"))?;
                run::peer(&plan, *peer, &args.peers_dir)?
            }
        };
        let dir = plan.out_dir.join(column);
        report::write(
            &results,
            &ReportPaths {
                json: Some(dir.join("results.json")),
                junit: Some(dir.join("junit.xml")),
                markdown: None,
            },
        )?;
    }
    render(&args.page)
}

fn render(page: &PageArgs) -> anyhow::Result<()> {
    let root = traceability::repo::repo_root();
    let doc = root.join(&page.doc);
    let verdicts = Verdicts::load(&root.join(&page.verdicts))?;
    let runs = matrix::load_runs(&page.out)?;
    anyhow::ensure!(!runs.is_empty(), "no results under {}", page.out.display());
    let rendered = matrix::render(&runs, &verdicts);
    std::fs::write(&doc, &rendered.page)?;
    println!(
        "conformance-peers: wrote {} ({} failures without a verdict, {} stale verdicts)",
        doc.display(),
        rendered.without_verdict,
        rendered.stale_verdicts
    );
    if page.strict && (rendered.without_verdict > 0 || rendered.stale_verdicts > 0) {
        std::process::exit(1);
    }
    Ok(())
}
