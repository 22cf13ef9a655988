//! The suite against one column of the matrix, one case per process: `conformance --profile
//! kafka [--bootstrap 127.0.0.1:P] --filter NAME --json …` for the gateway and the process
//! peers, `conformance-peers mock-case NAME --json …` for the mock cluster. Each case process is
//! bounded by a timeout and killed with its process group when it overruns. A peer that exits
//! during a case has the case charged with it and is restarted for the next; a peer that cannot
//! be installed or started has every case skipped with why, never passed.

use super::process::{signal_group, PeerProcess};
use super::ProcessPeer;
use crate::results::{CaseResult, RunResults, Status};
use crate::runner::{CaseInfo, Filter};
use crate::suite;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where a column's files go and how long a case may take.
pub struct RunPlan {
    /// The `conformance` binary.
    pub conformance: PathBuf,
    /// This binary, for the mock cluster's cases.
    pub this_binary: PathBuf,
    /// Where each column writes `<column>/results.json`, `junit.xml`, the logs.
    pub out_dir: PathBuf,
    pub case_timeout: Duration,
    /// Which endpoint cases run (all by default).
    pub filter: Filter,
}

/// The cases every column runs: the endpoint cases (the others start gateways of their own and
/// never run against an outside endpoint).
pub fn endpoint_cases(filter: &Filter) -> Vec<CaseInfo<'static>> {
    suite::list(filter)
        .into_iter()
        .filter(|l| !l.in_process_only)
        .map(|l| l.info)
        .collect()
}

/// Every case skipped with `why`: a column that could not run.
pub fn all_skipped(column: &str, filter: &Filter, why: &str) -> RunResults {
    let cases = endpoint_cases(filter)
        .into_iter()
        .map(|info| result_of(info, Status::Skipped, 0, Some(why.to_owned())))
        .collect();
    RunResults {
        target: column.into(),
        endpoint: String::new(),
        profile: "kafka".into(),
        cases,
    }
}

fn result_of(info: CaseInfo<'_>, status: Status, duration_ms: u64, reason: Option<String>) -> CaseResult {
    info.result(status, duration_ms, reason)
}

/// The gateway on the embedded backend, started in process by each `conformance` run.
pub fn gateway(plan: &RunPlan) -> anyhow::Result<RunResults> {
    let dir = column_dir(plan, "gateway")?;
    let cases = endpoint_cases(&plan.filter)
        .into_iter()
        .map(|info| {
            let mut command = Command::new(&plan.conformance);
            command.args(["--profile", "kafka"]);
            run_case(plan, &dir, info, command)
        })
        .collect();
    Ok(finish("gateway", "in process (embedded backend)", cases))
}

/// librdkafka's mock cluster, a fresh one per case.
pub fn mock(plan: &RunPlan) -> anyhow::Result<RunResults> {
    let dir = column_dir(plan, "mock")?;
    let cases = endpoint_cases(&plan.filter)
        .into_iter()
        .map(|info| {
            let mut command = Command::new(&plan.this_binary);
            command.args(["mock-case", info.name]);
            run_case(plan, &dir, info, command)
        })
        .collect();
    Ok(finish("mock", "librdkafka mock cluster (rdkafka-sys)", cases))
}

/// A peer process: installed under `peers_dir`, started, run case by case, stopped.
pub fn peer(plan: &RunPlan, peer: &dyn ProcessPeer, peers_dir: &Path) -> anyhow::Result<RunResults> {
    let name = peer.name();
    let dir = column_dir(plan, name)?;
    let binary = match peer.install(peers_dir) {
        Ok(binary) => binary,
        Err(why) => {
            println!("conformance-peers: {name} SKIPPED: cannot be installed: {why}");
            return Ok(all_skipped(name, &plan.filter, &format!("{name} not installed: {why}")));
        }
    };
    let log = dir.join("peer.log");
    let _ = std::fs::remove_file(&log);
    let start = |generation: u32| -> Result<(PeerProcess, tempdir::TempDir), String> {
        let port = peer.port()?;
        let data = tempdir::TempDir::new(&dir, generation).map_err(|e| e.to_string())?;
        let launch = peer.launch(&binary, port, &data.path).map_err(|e| e.to_string())?;
        let process = PeerProcess::start(&launch, port, &log)?;
        Ok((process, data))
    };
    let (mut running, mut data) = match start(0) {
        Ok(started) => started,
        Err(why) => {
            println!("conformance-peers: {name} SKIPPED: cannot be started: {why}");
            return Ok(all_skipped(name, &plan.filter, &format!("{name} did not start: {why}")));
        }
    };
    let endpoint = format!("127.0.0.1:{}", running.port);
    println!("conformance-peers: {name} {} listening on {endpoint}", peer.version());
    let mut cases = Vec::new();
    let mut restarts = 0;
    let mut gone: Option<String> = None;
    for info in endpoint_cases(&plan.filter) {
        if let Some(why) = &gone {
            cases.push(result_of(info, Status::Skipped, 0, Some(why.clone())));
            continue;
        }
        let mut command = Command::new(&plan.conformance);
        command
            .args(["--profile", "kafka", "--bootstrap"])
            .arg(format!("127.0.0.1:{}", running.port));
        let mut result = run_case(plan, &dir, info, command);
        if let Some(status) = running.exited() {
            // The case is charged with the crash; the next case gets a fresh peer.
            let before = result.reason.take().unwrap_or_default();
            result.status = Status::Failed;
            result.reason = Some(format!("the peer process exited during this case ({status}); {before}"));
            println!("conformance-peers: {name} exited during {}; restarting it", info.name);
            restarts += 1;
            match start(restarts) {
                Ok((process, fresh)) => {
                    running = process;
                    data = fresh;
                }
                Err(why) => gone = Some(format!("not run: {name} could not be restarted after a crash: {why}")),
            }
        }
        cases.push(result);
    }
    running.stop();
    drop(data);
    Ok(finish(name, &format!("{name} {} on {endpoint}", peer.version()), cases))
}

fn column_dir(plan: &RunPlan, column: &str) -> anyhow::Result<PathBuf> {
    let dir = plan.out_dir.join(column);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn finish(column: &str, endpoint: &str, cases: Vec<CaseResult>) -> RunResults {
    let results = RunResults {
        target: column.into(),
        endpoint: endpoint.into(),
        profile: "kafka".into(),
        cases,
    };
    println!("{}", results.totals_line(&format!("conformance-peers: {column}")));
    results
}

/// Runs `command --filter NAME --json FILE` for one case, bounded by the plan's case timeout,
/// its output appended to the column's `cases.log`; the case's result as that run wrote it.
fn run_case(plan: &RunPlan, dir: &Path, info: CaseInfo<'static>, mut command: Command) -> CaseResult {
    let json = dir.join("case.json");
    let _ = std::fs::remove_file(&json);
    let log = dir.join("cases.log");
    let out = OpenOptions::new().create(true).append(true).open(&log);
    let (Ok(out), started) = (out, Instant::now()) else {
        return result_of(info, Status::Failed, 0, Some(format!("cannot open {}", log.display())));
    };
    let err = out.try_clone().ok();
    command
        .args(["--filter", info.name, "--json"])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err.map(Stdio::from).unwrap_or_else(Stdio::null))
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return result_of(
                info,
                Status::Failed,
                0,
                Some(format!("the case process did not start: {e}")),
            )
        }
    };
    let deadline = started + plan.case_timeout;
    let mut exit = None;
    let timed_out = loop {
        if let Ok(Some(status)) = child.try_wait() {
            exit = Some(status);
            break false;
        }
        if Instant::now() >= deadline {
            signal_group(child.id(), "KILL");
            let _ = child.wait();
            break true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let result = if timed_out {
        result_of(
            info,
            Status::Failed,
            elapsed_ms,
            Some(format!(
                "no result within {} s: the case process was killed",
                plan.case_timeout.as_secs()
            )),
        )
    } else {
        match read_case(&json, info.name) {
            Ok(result) => result,
            Err(why) => {
                let status = exit.map(|s| s.to_string()).unwrap_or_default();
                let why = format!(
                    "the case process ended ({status}) without its result: {why}; see {}",
                    log.display()
                );
                result_of(info, Status::Failed, elapsed_ms, Some(why))
            }
        }
    };
    let label = match result.status {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
    };
    let why = result
        .reason
        .as_deref()
        .map(|r| format!(": {}", one_line(r, 160)))
        .unwrap_or_default();
    println!(
        "{label} {:>6} ms {}/{}{why}",
        result.duration_ms, result.area, result.name
    );
    result
}

/// The case named `name` in the run results at `path`.
fn read_case(path: &Path, name: &str) -> Result<CaseResult, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("the case process wrote no results ({e})"))?;
    let run: RunResults = serde_json::from_str(&text).map_err(|e| format!("unreadable results: {e}"))?;
    run.cases
        .into_iter()
        .find(|c| c.name == name)
        .ok_or_else(|| format!("the results hold no case {name}"))
}

/// `text` on one line, cut at `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

/// A fresh directory for one start of a peer, removed when dropped.
mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct TempDir {
        pub path: PathBuf,
    }

    impl TempDir {
        pub fn new(parent: &Path, generation: u32) -> std::io::Result<TempDir> {
            let path = parent.join(format!("data-{}-{generation}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path)?;
            Ok(TempDir { path })
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
