//! The Java client tier (`make compat-java`, docs/compat.md "The Java client"): the project's own
//! Java program (`java/src/`), compiled by `java/prepare.sh` against the official kafka-clients
//! jars of each client version, run one case per JVM against gateways this process starts (plain,
//! SASL PLAIN and TLS listeners on one backend: the embedded one by default, or a real Iggy server
//! found as the real-Iggy tier finds one), each case under a time limit. Writes the Markdown and
//! JUnit reports of the librdkafka tier (`compat::report`) and a JSON file of every result.
//!
//! Without `java`, or without a client version's compiled classes (no network for the wheels,
//! a hash mismatch: `prepare.sh` writes why), that version's cases are reported as skipped with
//! the reason, never as passed; `JAVA_REQUIRED=1` makes that a failure.

#[path = "compat_java/cases.rs"]
mod cases;

use anyhow::Context;
use cases::{Client, Listener, Listing};
use clap::{Parser, ValueEnum};
use kafka_iggy_conformance::answer_loss_proxy::AnswerLossProxy;
use kafka_iggy_conformance::compat::outcome::{Outcome, Status};
use kafka_iggy_conformance::compat::report::{self, Totals};
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};

/// The Produce requests (by ordinal) whose answers a `lossy_plain` case's proxy loses.
const LOSSY_ANSWERS_AT: [usize; 4] = [3, 10, 20, 40];
use kafka_iggy_conformance::real_iggy::{discover, Discovery};
use kafka_iggy_conformance::tls_fixture::Pki;
use kafka_iggy_gateway::auth::settings::{Mechanism, SaslSettings};
use kafka_iggy_gateway::backend::Backend;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
#[command(about = "Run the project's Java client cases (kafka-clients 4.3.0 and 3.9.1) against the gateway")]
struct Cli {
    /// The fixed quick subset `make test` runs (the cases the Java program marks quick).
    #[arg(long)]
    quick: bool,
    /// Only these cases (comma-separated names; see `java ... --list`).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Client versions to run, each compiled under <work-dir>/classes/<version>.
    #[arg(long, value_delimiter = ',', default_value = "4.3.0,3.9.1")]
    versions: Vec<String>,
    /// Seconds one case may run before its JVM is killed and the case recorded as timed out.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
    /// Which backend the gateways store into.
    #[arg(long, value_enum, default_value_t = BackendChoice::Embedded)]
    backend: BackendChoice,
    /// Write the JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the Markdown report here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write every result (version, case, rules, status, detail) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Where prepare.sh put the jars and classes; the cases' logs go under it. Default:
    /// target/compat-java in the workspace.
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (work, gateway_log) = kafka_iggy_conformance::compat::work_dir::prepare(cli.work_dir.clone(), "compat-java")?;
    println!("compat-java: the gateways log to {}", gateway_log.display());

    // Each version's client and its case list; a version that cannot run says why.
    let mut clients = Vec::new();
    let mut unavailable = Vec::new();
    for version in &cli.versions {
        let found = match Client::find(&work, version) {
            Ok(client) => client.list().await.map(|cases| (client, cases)),
            Err(why) => Err(why),
        };
        match found {
            Ok((client, listing)) => clients.push((client, select(&cli, listing))),
            Err(why) => unavailable.push((version.clone(), format!("{why:#}"))),
        }
    }
    let mut outcomes = Vec::new();
    let mut records = Vec::new();
    for (version, why) in &unavailable {
        println!("compat-java: SKIPPED kafka-clients {version}: {why}");
        outcomes.push(Outcome {
            name: format!("{version} (every case)"),
            status: Status::Skipped,
            duration: Duration::ZERO,
            detail: why.clone(),
        });
    }

    let mut target = "the embedded backend".to_string();
    if !clients.is_empty() {
        let (mut ran, on) = match cli.backend {
            BackendChoice::Embedded => (
                run(&cli, &clients, &work, shared_backend(), ("iggy", "iggy")).await?,
                "the embedded backend".to_string(),
            ),
            choice => match discover().await? {
                Discovery::Found(server) => {
                    let backend = Arc::new(server.gateway_backend().await?);
                    let ran = run(&cli, &clients, &work, backend, (&server.username, &server.password)).await?;
                    (ran, format!("a real Iggy server ({})", server.how))
                }
                Discovery::Skipped(why) if choice == BackendChoice::Auto => {
                    println!("compat-java: no real Iggy server ({why}); using the embedded backend");
                    (
                        run(&cli, &clients, &work, shared_backend(), ("iggy", "iggy")).await?,
                        "the embedded backend".to_string(),
                    )
                }
                Discovery::Skipped(why) => anyhow::bail!("--backend iggy, but no Iggy server: {why}"),
            },
        };
        target = on;
        for (outcome, record) in ran.drain(..) {
            outcomes.push(outcome);
            records.push(record);
        }
    }

    let title = format!("The Java client cases against the gateway on {target}");
    if let Some(path) = &cli.markdown {
        std::fs::write(path, report::markdown(&title, &outcomes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.junit {
        std::fs::write(
            path,
            report::junit_with_class("java-compat", "kafka-clients", &outcomes),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.json {
        let doc = serde_json::json!({ "backend": target, "results": records });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let totals = Totals::of(&outcomes);
    println!("compat-java: {}", totals.line());
    let required = std::env::var("JAVA_REQUIRED").is_ok_and(|v| v == "1");
    if totals.is_failure() || (required && !unavailable.is_empty()) {
        if required && !unavailable.is_empty() {
            println!("compat-java: JAVA_REQUIRED=1 and a client version could not run");
        }
        std::process::exit(1);
    }
    Ok(())
}

/// The cases of `listing` this run selects.
fn select(cli: &Cli, listing: Vec<Listing>) -> Vec<Listing> {
    listing
        .into_iter()
        .filter(|case| !cli.quick || case.quick)
        .filter(|case| cli.cases.is_empty() || cli.cases.iter().any(|name| name == &case.name))
        .collect()
}

/// Starts the listeners the selected cases need on `backend` and runs every case of every client.
/// `root`: the username and password a SASL PLAIN client logs in with.
async fn run<B: Backend>(
    cli: &Cli,
    clients: &[(Client, Vec<Listing>)],
    work: &std::path::Path,
    backend: Arc<B>,
    root: (&str, &str),
) -> anyhow::Result<Vec<(Outcome, serde_json::Value)>> {
    let needs = |listener: Listener| {
        clients
            .iter()
            .any(|(_, cases)| cases.iter().any(|c| c.listener == listener))
    };
    let plain = LocalGateway::serve(backend.clone(), LocalOptions::default()).await?;
    let sasl = if needs(Listener::SaslPlain) {
        Some(
            LocalGateway::serve(
                backend.clone(),
                LocalOptions {
                    sasl: SaslSettings {
                        mechanism: Some(Mechanism::Plain),
                        ..SaslSettings::default()
                    },
                    ..LocalOptions::default()
                },
            )
            .await?,
        )
    } else {
        None
    };
    let pki = if needs(Listener::Tls) {
        Some(Pki::generate()?)
    } else {
        None
    };
    let tls = match &pki {
        Some(pki) => Some(
            LocalGateway::serve(
                backend.clone(),
                LocalOptions {
                    tls: Some(pki.server_settings(false)),
                    tls_ca: Some(pki.ca.clone()),
                    ..LocalOptions::default()
                },
            )
            .await?,
        ),
        None => None,
    };
    let time_limit = Duration::from_secs(cli.timeout_s);
    let mut out = Vec::new();
    for (client, listing) in clients {
        for case in listing {
            // A proxy losing Produce answers, and a gateway of its own advertising it, per case.
            let lossy = match case.listener {
                Listener::LossyPlain => {
                    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                    let proxy = AnswerLossProxy::start(listen, LOSSY_ANSWERS_AT.into_iter().collect()).await?;
                    let gateway = LocalGateway::serve(
                        backend.clone(),
                        LocalOptions {
                            listen: Some(listen),
                            advertised: Some(proxy.address.to_string()),
                            ..LocalOptions::default()
                        },
                    )
                    .await?;
                    Some((proxy, gateway))
                }
                _ => None,
            };
            let args = match case.listener {
                Listener::Plain => vec!["--bootstrap".to_string(), plain.endpoint.bootstrap.clone()],
                Listener::LossyPlain => {
                    let (proxy, _) = lossy.as_ref().context("the lossy listener")?;
                    vec!["--bootstrap".to_string(), proxy.address.to_string()]
                }
                Listener::SaslPlain => {
                    let gateway = sasl.as_ref().context("the SASL listener")?;
                    vec![
                        "--bootstrap".into(),
                        gateway.endpoint.bootstrap.clone(),
                        "--security-protocol".into(),
                        "SASL_PLAINTEXT".into(),
                        "--sasl-username".into(),
                        root.0.to_string(),
                        "--sasl-password".into(),
                        root.1.to_string(),
                    ]
                }
                Listener::Tls => {
                    let gateway = tls.as_ref().context("the TLS listener")?;
                    let ca = gateway.tls_ca.as_ref().context("the TLS listener's CA")?;
                    vec![
                        "--bootstrap".into(),
                        gateway.endpoint.bootstrap.clone(),
                        "--security-protocol".into(),
                        "SSL".into(),
                        "--ssl-ca".into(),
                        ca.display().to_string(),
                    ]
                }
            };
            let mut result = client.run_case(case, &args, time_limit, &work.join("runs")).await?;
            if let Some((proxy, gateway)) = lossy {
                // The case proves nothing unless the answers were really lost.
                if result.0.status == Status::Passed && proxy.answers_lost() != LOSSY_ANSWERS_AT.len() {
                    result.0.status = Status::Failed;
                    result.0.detail = format!(
                        "the proxy lost {} of the answers to {} Produce requests, expected {}",
                        proxy.answers_lost(),
                        proxy.produce_requests(),
                        LOSSY_ANSWERS_AT.len()
                    );
                } else if result.0.status == Status::Passed {
                    result.0.detail = format!("{} ({} Produce answers lost)", result.0.detail, proxy.answers_lost());
                }
                result.1["status"] = result.0.status.label().into();
                result.1["detail"] = result.0.detail.clone().into();
                gateway.stop().await;
            }
            println!(
                "compat-java: {:<6} {:<52} {:<10} {:>6.1} s {}",
                client.version,
                case.name,
                result.0.status.label(),
                result.0.duration.as_secs_f64(),
                result.0.detail
            );
            out.push(result);
        }
    }
    plain.stop().await;
    if let Some(g) = sasl {
        g.stop().await;
    }
    if let Some(g) = tls {
        g.stop().await;
    }
    drop(pki);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(name: &str, quick: bool) -> Listing {
        Listing {
            name: name.into(),
            listener: Listener::Plain,
            quick,
            rules: vec!["DELIVERY-2".into()],
        }
    }

    #[test]
    fn quick_and_named_cases_narrow_the_selection() {
        let all = || vec![listing("a", true), listing("b", false), listing("c", true)];
        let names = |cli: &Cli| select(cli, all()).into_iter().map(|l| l.name).collect::<Vec<_>>();
        assert_eq!(names(&Cli::parse_from(["compat-java"])), ["a", "b", "c"]);
        assert_eq!(names(&Cli::parse_from(["compat-java", "--quick"])), ["a", "c"]);
        assert_eq!(names(&Cli::parse_from(["compat-java", "--cases", "b,c"])), ["b", "c"]);
        assert_eq!(
            names(&Cli::parse_from(["compat-java", "--quick", "--cases", "b,c"])),
            ["c"]
        );
    }
}
