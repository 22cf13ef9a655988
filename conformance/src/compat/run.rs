//! Running the test runner for one test number against a gateway, with a time limit: it is
//! killed when over it. Its output goes to a log file per test number, which `outcome` reads.

use super::build::Runner;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One invocation of the runner.
pub struct Invocation<'a> {
    pub runner: &'a Runner,
    /// The gateway's `host:port`.
    pub bootstrap: &'a str,
    /// The four-digit test number; the runner runs every entry of it.
    pub number: u16,
    /// A scenario other than the default (`noautocreate`), passed as `-s`.
    pub scenario: Option<&'a str>,
    pub time_limit: Duration,
    /// Where the run's `test.conf` and log go.
    pub work: &'a Path,
}

/// What one invocation left behind.
pub struct Finished {
    pub log: String,
    pub log_path: PathBuf,
    pub timed_out: bool,
    pub elapsed: Duration,
}

/// Runs the runner and waits for it, at most the time limit.
pub async fn run(inv: &Invocation<'_>) -> anyhow::Result<Finished> {
    let dir = inv.work.join(format!(
        "{:04}{}",
        inv.number,
        inv.scenario.map(|s| format!("-{s}")).unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir)?;
    // Some tests open files of the source tree relative to the runner's own directory
    // (`../src/statistics_schema.json`); a `src` beside the run directories answers them.
    let src = inv.work.join("src");
    if !src.exists() {
        let target = inv
            .runner
            .tests_dir
            .parent()
            .context("the runner has no source tree")?
            .join("src");
        std::os::unix::fs::symlink(&target, &src).with_context(|| format!("linking {}", src.display()))?;
    }
    // The runner reads test.conf from its working directory. Its tests randomise most topic
    // names themselves; the gateway is new for every tier run.
    std::fs::write(
        dir.join("test.conf"),
        format!("metadata.broker.list={}\n", inv.bootstrap),
    )?;
    let log_path = dir.join("runner.log");
    let log = std::fs::File::create(&log_path)?;
    let mut command = tokio::process::Command::new(inv.runner.binary());
    command
        .current_dir(&dir)
        .env("TESTS", format!("{:04}", inv.number))
        .env("LD_LIBRARY_PATH", &inv.runner.library_path)
        // -p1: the entries of one number one after another; -Q: the runner's quick mode (fewer
        // iterations and messages), as its own `make quick` uses; -L: no broker-less entries.
        .args(["-p1", "-Q", "-L"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
    if let Some(scenario) = inv.scenario {
        command.args(["-s", scenario]);
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {}", inv.runner.binary().display()))?;
    let timed_out = match tokio::time::timeout(inv.time_limit, child.wait()).await {
        Ok(status) => {
            status?;
            false
        }
        Err(_) => {
            child.kill().await.context("killing the runner at its time limit")?;
            true
        }
    };
    let elapsed = started.elapsed();
    let bytes = std::fs::read(&log_path)?;
    Ok(Finished {
        log: String::from_utf8_lossy(&bytes).into_owned(),
        log_path,
        timed_out,
        elapsed,
    })
}
