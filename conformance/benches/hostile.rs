//! `make bench`, the hostile part: the release gateway binary on the embedded backend, attacked
//! by every hostile case (`cases::hostile_cases`), then every amplification case
//! (`cases::answer_bound_cases`, `cases::group_amplification_cases`), one after another, while
//! this bench samples
//! the gateway's resident memory (VmRSS) every 50 ms and a connection of its own times
//! ApiVersions round trips every 50 ms. Prints one row per case and one for the whole run: pass
//! or fail, time, peak RSS, RSS at the end, and the ApiVersions p50, p99 and max. Asserts
//! nothing; then stops the gateway with SIGTERM.
//!
//! The gateway runs with the settings of the in-process suite (`SUITE_MAX_CONNECTIONS`,
//! `SUITE_FETCH_MAX_WAIT_MS`) and `make run`'s 8 MiB max_frame_size. Then the hostile cases that
//! start their own gateways (`hostile_cases::OWN_GATEWAY_CASES`: peers, address prefixes,
//! logins) run on release gateways of their own ([`Release`]); while one runs, the RSS sampled
//! and the ApiVersions timed are those of the gateway it started last (the attacked one). A
//! case that needs what only a gateway in this process offers (the Iggy model, to make tokens)
//! runs in process instead, and its row says so: its RSS is then this bench's own. Bounded: each case by
//! its own bounds (the whole run takes well under a minute), and by [`CASE_GUARD`] besides.
//! Build the gateway first: `cargo build --release -p kafka-iggy-gateway` (`make bench` does).

use kafka_iggy_conformance::bench::{bench_output, start_release_gateway};
use kafka_iggy_conformance::cases::hostile_cases::launch::{InProcess, Launched, Launcher, Release};
use kafka_iggy_conformance::cases::hostile_cases::{self, SUITE_FETCH_MAX_WAIT_MS, SUITE_MAX_CONNECTIONS};
use kafka_iggy_conformance::cases::Outcome;
use kafka_iggy_conformance::cases::{answer_bound_cases, group_amplification_cases};
use kafka_iggy_conformance::endpoint::Endpoint;
use kafka_iggy_conformance::peers::process::PeerProcess;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_wire_client::WireClient;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MAX_FRAME_SIZE: usize = 8 * 1024 * 1024;
const INSTANCE_ID: u16 = 7;
/// How often RSS is read and an ApiVersions sent.
const SAMPLE_PERIOD: Duration = Duration::from_millis(50);
/// A case still running after this is abandoned and reported as failed: a backstop, since
/// every case bounds its own waits.
const CASE_GUARD: Duration = Duration::from_secs(90);

/// RSS readings, in KiB, with when they were taken.
type RssLog = Arc<Mutex<Vec<(Instant, u64)>>>;
/// The gateway watched now: its process id and its Kafka address.
type Target = Arc<Mutex<(u32, String)>>;
/// ApiVersions round trips: when each was sent and how long its answer took.
type LatencyLog = Arc<Mutex<Vec<(Instant, Duration)>>>;

/// The gateway's VmRSS in KiB, from /proc.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Reads the target's RSS every [`SAMPLE_PERIOD`] on a thread of its own, so that a busy runtime
/// does not thin the samples, until `stop`.
fn sample_rss(target: Target, log: RssLog, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let pid = target.lock().expect("target").0;
            if let Some(kib) = rss_kib(pid).filter(|_| pid != 0) {
                log.lock().expect("rss log").push((Instant::now(), kib));
            }
            std::thread::sleep(SAMPLE_PERIOD);
        }
    })
}

/// Sends ApiVersions every [`SAMPLE_PERIOD`] on a connection of its own to the target and
/// records every round trip however long it takes (the cases' own watchdogs fail at their
/// liveness bound; this one only measures), reconnecting if the gateway closes it or the target
/// changes, until `stop`.
async fn time_api_versions(target: Target, log: LatencyLog, stop: Arc<AtomicBool>) {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(kafka_protocol::protocol::StrBytes::from_static_str("kig-bench"))
        .with_client_software_version(kafka_protocol::protocol::StrBytes::from_static_str("0.1.0"));
    let mut period = tokio::time::interval(SAMPLE_PERIOD);
    period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client = None;
    let mut connected_to = String::new();
    while !stop.load(Ordering::Relaxed) {
        period.tick().await;
        let bootstrap = target.lock().expect("target").1.clone();
        if bootstrap != connected_to {
            client = None;
            connected_to = bootstrap.clone();
        }
        if bootstrap.is_empty() {
            continue;
        }
        if client.is_none() {
            client = WireClient::connect(&bootstrap).await.ok();
        }
        let Some(connection) = client.as_mut() else {
            continue;
        };
        let sent = Instant::now();
        let answer: anyhow::Result<ApiVersionsResponse> = connection.request(ApiKey::ApiVersions, 3, &request).await;
        match answer {
            Ok(_) => log.lock().expect("latency log").push((sent, sent.elapsed())),
            Err(_) => client = None,
        }
    }
}

/// Starts the release gateway on a free loopback port with the in-process suite's settings
/// (ready once the port accepts; killed with its process group if it does not within 30 s, or
/// on drop) and returns it with that address.
fn start_gateway(log_path: &Path) -> (PeerProcess, String) {
    // A log of this run only: the peer appends to it.
    let _ = std::fs::remove_file(log_path);
    let (instance, frame) = (INSTANCE_ID.to_string(), MAX_FRAME_SIZE.to_string());
    let (connections, wait) = (SUITE_MAX_CONNECTIONS.to_string(), SUITE_FETCH_MAX_WAIT_MS.to_string());
    let args = [
        "--backend",
        "embedded",
        "--instance-id",
        &instance,
        "--max-frame-size",
        &frame,
        "--max-connections",
        &connections,
        "--fetch-max-wait-ms",
        &wait,
    ];
    start_release_gateway(env!("CARGO_TARGET_TMPDIR"), &args, Vec::new(), log_path).unwrap_or_else(|e| panic!("{e:#}"))
}

/// A launcher whose every new gateway becomes the bench's target.
struct Watched<L> {
    inner: L,
    target: Target,
}

impl<L: Launcher> Launcher for Watched<L> {
    type Gateway = L::Gateway;

    async fn start(&self, listen: std::net::SocketAddr, flags: Vec<String>) -> anyhow::Result<L::Gateway> {
        let gateway = self.inner.start(listen, flags).await?;
        *self.target.lock().expect("target") = (gateway.pid(), gateway.endpoint().bootstrap.clone());
        Ok(gateway)
    }

    fn model(&self) -> Option<Arc<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>> {
        self.inner.model()
    }
}

/// The result of an outcome as a row shows it, recording a failure.
fn result_of(
    name: &str,
    outcome: Result<anyhow::Result<Outcome>, tokio::time::error::Elapsed>,
    failures: &mut Vec<String>,
) -> String {
    match outcome {
        Ok(Ok(Outcome::Passed)) => "pass".to_string(),
        Ok(Ok(Outcome::Skipped(why))) => format!("skipped: {why}"),
        Ok(Err(e)) => {
            failures.push(format!("{name}: {e:#}"));
            "FAIL".to_string()
        }
        Err(_) => {
            failures.push(format!("{name}: still running after {CASE_GUARD:?}"));
            "FAIL".to_string()
        }
    }
}

/// One row of the table.
struct Row {
    name: String,
    result: String,
    seconds: f64,
    peak_rss_kib: u64,
    end_rss_kib: u64,
    latencies: Vec<Duration>,
}

/// The RSS readings and round trips between `from` and `to`, as a row.
fn row(name: &str, result: String, from: Instant, to: Instant, rss: &RssLog, latency: &LatencyLog) -> Row {
    let rss = rss.lock().expect("rss log");
    let window: Vec<u64> = rss
        .iter()
        .filter(|(at, _)| *at >= from && *at <= to)
        .map(|(_, kib)| *kib)
        .collect();
    let latencies = latency
        .lock()
        .expect("latency log")
        .iter()
        .filter(|(sent, _)| *sent >= from && *sent <= to)
        .map(|(_, took)| *took)
        .collect();
    Row {
        name: name.to_string(),
        result,
        seconds: (to - from).as_secs_f64(),
        peak_rss_kib: window.iter().copied().max().unwrap_or(0),
        end_rss_kib: window.last().copied().unwrap_or(0),
        latencies,
    }
}

/// The `p` quantile of `sorted`, in milliseconds (nearest rank).
fn percentile(sorted: &[Duration], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[index].as_secs_f64() * 1e3)
}

/// Milliseconds with two decimals, or a dash when there is nothing to show.
fn ms(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.2}"))
}

fn print_table(rows: &[Row]) {
    println!(
        "| case | result | time s | peak RSS MiB | RSS at end MiB | ApiVersions p50 ms | p99 ms | max ms | round trips |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|");
    for r in rows {
        let mut sorted = r.latencies.clone();
        sorted.sort();
        println!(
            "| {} | {} | {:.1} | {:.0} | {:.0} | {} | {} | {} | {} |",
            r.name,
            r.result,
            r.seconds,
            r.peak_rss_kib as f64 / 1024.0,
            r.end_rss_kib as f64 / 1024.0,
            ms(percentile(&sorted, 0.50)),
            ms(percentile(&sorted, 0.99)),
            ms(sorted.last().map(|d| d.as_secs_f64() * 1e3)),
            sorted.len()
        );
    }
}

#[tokio::main]
async fn main() {
    let log_path = bench_output(env!("CARGO_TARGET_TMPDIR"), "hostile-gateway.log");
    let (mut gateway, bootstrap) = start_gateway(&log_path);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "hostile bench: release gateway (pid {}) on {bootstrap}, embedded backend, max_frame_size {MAX_FRAME_SIZE}, \
         max_connections {SUITE_MAX_CONNECTIONS}, fetch_max_wait_ms {SUITE_FETCH_MAX_WAIT_MS}; {cores} cores; \
         RSS and an ApiVersions round trip every {} ms; gateway log {}",
        gateway.pid(),
        SAMPLE_PERIOD.as_millis(),
        log_path.display()
    );
    let rss: RssLog = Arc::default();
    let latency: LatencyLog = Arc::default();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let main_target = (gateway.pid(), bootstrap.clone());
    let target: Target = Arc::new(Mutex::new(main_target.clone()));
    let sampler = sample_rss(target.clone(), rss.clone(), stop_sampling.clone());
    let timer = tokio::spawn(time_api_versions(
        target.clone(),
        latency.clone(),
        stop_sampling.clone(),
    ));
    let endpoint = Endpoint {
        max_frame_size: Some(MAX_FRAME_SIZE),
        instance_id: Some(INSTANCE_ID),
        ..Endpoint::at(bootstrap.clone())
    };

    let run_started = Instant::now();
    // Each case's name, result and time window; the rows are computed once the timer has
    // recorded its last round trip, which a stalled gateway answers only after the case.
    let mut windows = Vec::new();
    let mut failures = Vec::new();
    // The amplification cases (issue 31) run after the hostile ones, under the same watch.
    let cases = hostile_cases::cases()
        .into_iter()
        .chain(answer_bound_cases::cases())
        .chain(group_amplification_cases::cases());
    for case in cases {
        let name = case.name.rsplit("::").next().unwrap_or(case.name);
        let started = Instant::now();
        let outcome = tokio::time::timeout(CASE_GUARD, (case.run)(endpoint.clone())).await;
        let ended = Instant::now();
        let result = result_of(name, outcome, &mut failures);
        // One reading at the case's end, so the last value is the end, not up to 50 ms before.
        if let Some(kib) = rss_kib(gateway.pid()) {
            rss.lock().expect("rss log").push((ended, kib));
        }
        windows.push((name.to_string(), result, started, ended));
    }
    // The cases that start their own gateways (issue 50): on release gateways, or in process
    // when they need the model.
    let release = Watched {
        inner: Release::new(
            kafka_iggy_conformance::bench::release_gateway_binary(env!("CARGO_TARGET_TMPDIR")),
            log_path.parent().map_or_else(std::env::temp_dir, Path::to_path_buf),
        ),
        target: target.clone(),
    };
    // Nothing is watched until a case starts its first gateway.
    let unwatched = (0, String::new());
    for case in hostile_cases::OWN_GATEWAY_CASES {
        *target.lock().expect("target") = unwatched.clone();
        let started = Instant::now();
        let outcome = tokio::time::timeout(CASE_GUARD, hostile_cases::run_own_gateway_case(case.name, &release)).await;
        let (outcome, name, started) = if matches!(outcome, Ok(Ok(Outcome::Skipped(_)))) {
            let in_process = Watched {
                inner: InProcess::new(Duration::from_millis(25)),
                target: target.clone(),
            };
            *target.lock().expect("target") = unwatched.clone();
            let started = Instant::now();
            let outcome =
                tokio::time::timeout(CASE_GUARD, hostile_cases::run_own_gateway_case(case.name, &in_process)).await;
            (outcome, format!("{} (in process)", case.name), started)
        } else {
            (outcome, case.name.to_string(), started)
        };
        let ended = Instant::now();
        let result = result_of(&name, outcome, &mut failures);
        // The case stopped its gateways: the end is the last reading taken while they ran.
        windows.push((name, result, started, ended));
        *target.lock().expect("target") = main_target.clone();
    }
    let run_ended = Instant::now();
    stop_sampling.store(true, Ordering::Relaxed);
    if tokio::time::timeout(CASE_GUARD, timer).await.is_err() {
        println!("the ApiVersions timer was still waiting for an answer {CASE_GUARD:?} after the run");
    }
    sampler.join().expect("the RSS sampler");
    let mut rows: Vec<Row> = windows
        .into_iter()
        .map(|(name, result, started, ended)| row(&name, result, started, ended, &rss, &latency))
        .collect();
    let passed = rows.iter().filter(|r| r.result == "pass").count();
    rows.push(row(
        "**whole run**",
        format!("{passed}/{} pass", rows.len()),
        run_started,
        run_ended,
        &rss,
        &latency,
    ));

    print_table(&rows);
    for failure in &failures {
        println!("FAIL {failure}");
    }

    // SIGTERM, as a container runtime sends it; the gateway drains and exits.
    let terminated = Instant::now();
    match gateway.terminate_within(Duration::from_secs(40)) {
        Some(status) => println!(
            "gateway stopped on SIGTERM in {:.2} s ({status})",
            terminated.elapsed().as_secs_f64()
        ),
        None => println!("gateway still running 40 s after SIGTERM: killed"),
    }
}
