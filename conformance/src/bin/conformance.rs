//! The conformance suite's command line. `conformance [run]` runs the suite against an endpoint
//! (`--bootstrap`), a gateway it starts in process on a real Iggy (`--iggy`), or, by default, a
//! gateway it starts in process on the embedded backend; prints a line per case and
//! `conformance: N passed, N failed, N skipped`; writes the reports asked for; and exits 1 when a
//! case failed.

use clap::{Args, Parser, Subcommand};
use kafka_iggy_conformance::endpoint::Endpoint;
use kafka_iggy_conformance::profile::Profile;
use kafka_iggy_conformance::real_iggy::IggyServer;
use kafka_iggy_conformance::report::{self, ReportPaths};
use kafka_iggy_conformance::results::Status;
use kafka_iggy_conformance::runner::Filter;
use kafka_iggy_conformance::suite::{self, Target};
use kafka_iggy_conformance::traceability;

#[derive(Parser)]
#[command(
    name = "conformance",
    version,
    about = "Kafka conformance suite for gateways in front of Apache Iggy"
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
    /// Run the suite (the default).
    Run(Box<RunArgs>),
    /// Write docs/conformance.md (rule → cases → status on the embedded model and on real Iggy)
    /// from the spec, the case list and the committed JSON results under docs/conformance/.
    Matrix,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// A Kafka endpoint to run against. Without it (and without --iggy) the suite starts the
    /// reference gateway in process on the embedded backend.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "iggy")]
    bootstrap: Option<String>,
    /// Start the reference gateway in process on the real Iggy server at ADDR (TCP).
    #[arg(long, value_name = "ADDR")]
    iggy: Option<String>,
    /// The Iggy user the in-process gateway logs in as.
    #[arg(long, env = "IGGY_USERNAME", default_value = "iggy", requires = "iggy")]
    iggy_username: String,
    /// Its password.
    #[arg(
        long,
        env = "IGGY_PASSWORD",
        default_value = "iggy",
        hide_env_values = true,
        requires = "iggy"
    )]
    iggy_password: String,
    /// `gateway`: expect this project's spec. `kafka`: expect Kafka's own behaviour wherever
    /// the spec deviates from it, to run against any Kafka broker.
    #[arg(long, default_value = "gateway", value_name = "gateway|kafka")]
    profile: Profile,
    /// Run only the cases whose name contains TEXT (repeat to take the cases of each).
    #[arg(long, value_name = "TEXT")]
    filter: Vec<String>,
    /// List the cases (area, name, rules) instead of running them.
    #[arg(long)]
    list: bool,
    #[command(flatten)]
    reports: ReportPaths,
    /// The outside endpoint's max frame size, when known; cases that need it skip otherwise.
    #[arg(long, value_name = "BYTES", requires = "bootstrap")]
    max_frame_size: Option<usize>,
    /// The outside endpoint's gateway instance id, when known; cases that need it skip otherwise.
    #[arg(long, value_name = "ID", requires = "bootstrap")]
    instance_id: Option<u16>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Run(args)) => *args,
        Some(Command::Matrix) => return write_matrix(),
        None => cli.run,
    };
    let filter = Filter {
        any_of: args.filter.clone(),
    };
    if args.list {
        for listing in suite::list(&filter) {
            let info = listing.info;
            let scope = if listing.in_process_only {
                " (in process only)"
            } else {
                ""
            };
            println!("{}/{} [{}]{scope}", info.area, info.name, info.rules.join(", "));
        }
        return Ok(());
    }
    let server;
    let target = match (&args.bootstrap, &args.iggy) {
        (Some(bootstrap), _) => Target::Outside(Endpoint {
            max_frame_size: args.max_frame_size,
            instance_id: args.instance_id,
            ..Endpoint::at(bootstrap.clone())
        }),
        (None, Some(address)) => {
            server = IggyServer::external(address.clone(), args.iggy_username.clone(), args.iggy_password.clone());
            Target::Iggy(&server)
        }
        (None, None) => Target::Embedded,
    };
    if let Target::Outside(endpoint) = &target {
        println!(
            "conformance: running against {} ({} profile)",
            endpoint.bootstrap, args.profile
        );
    }
    let results = suite::run(&target, args.profile, &filter).await?;
    println!("{}", results.totals_line("conformance"));
    report::write(&results, &args.reports)?;
    if results.count(Status::Failed) > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Renders the conformance matrix from this checkout and writes it.
fn write_matrix() -> anyhow::Result<()> {
    let root = traceability::repo::repo_root();
    let rendered = traceability::repo::render_matrix(&root)?;
    let path = root.join(traceability::repo::MATRIX_PATH);
    std::fs::write(&path, rendered)?;
    println!("conformance: wrote {}", path.display());
    Ok(())
}
