//! One client version's compiled Java program: its case list (`--list`) and one case run in its
//! own JVM under a time limit, read back from the one JSON line the program prints.

use anyhow::{bail, Context};
use kafka_iggy_conformance::compat::outcome::{Outcome, Status};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The Java program's entry class.
const MAIN_CLASS: &str = "kafkaiggy.compat.JavaCompat";

/// Which gateway listener a case needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Listener {
    Plain,
    SaslPlain,
    Tls,
    /// Plaintext through a proxy that loses chosen Produce answers (a gateway of its own per
    /// case, advertising the proxy): `crate::LOSSY_ANSWERS_AT`.
    LossyPlain,
}

/// One line of `--list`.
#[derive(Debug, Clone, Deserialize)]
pub struct Listing {
    #[serde(rename = "case")]
    pub name: String,
    pub listener: Listener,
    pub quick: bool,
    pub rules: Vec<String>,
}

/// The line a case run prints last.
#[derive(Debug, Deserialize)]
struct Result {
    status: String,
    detail: String,
    client: String,
}

/// A client version ready to run: `java`, and the classpath of its classes and jars.
pub struct Client {
    pub version: String,
    java: PathBuf,
    classpath: String,
}

impl Client {
    /// The version's classes and jars under `work` (as `java/prepare.sh` leaves them), or why it
    /// cannot run: no `java`, or the reason prepare.sh recorded.
    pub fn find(work: &Path, version: &str) -> anyhow::Result<Client> {
        let java = kafka_iggy_conformance::compat::work_dir::find_java()
            .context("no `java` on PATH or in JAVA_HOME (a JDK 17 is needed: `make setup`)")?;
        let classes = work.join("classes").join(version);
        let jars = work.join("jars").join(version);
        if !classes.join("kafkaiggy/compat/JavaCompat.class").is_file() {
            let why = std::fs::read_to_string(work.join(format!("unavailable-{version}")))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| format!("not compiled under {} (run `make compat-java`)", classes.display()));
            bail!("{why}");
        }
        Ok(Client {
            version: version.to_string(),
            java,
            classpath: format!("{}:{}/*", classes.display(), jars.display()),
        })
    }

    /// The program's case list; a JVM that does not answer within a minute is killed.
    pub async fn list(&self) -> anyhow::Result<Vec<Listing>> {
        kafka_iggy_conformance::compat::work_dir::list_java_cases(&self.java, &self.classpath, MAIN_CLASS).await
    }

    /// Runs `case` with `args` in a JVM of its own, killed after `time_limit`. Its stderr (the
    /// client's log and stack traces, the verifiable tools' events) goes to
    /// `<runs>/<version>/<case>.log`. Returns the outcome (named `<version> <case>`) and a JSON
    /// record of it.
    pub async fn run_case(
        &self,
        case: &Listing,
        args: &[String],
        time_limit: Duration,
        runs: &Path,
    ) -> anyhow::Result<(Outcome, serde_json::Value)> {
        let dir = runs.join(&self.version);
        std::fs::create_dir_all(&dir)?;
        let log_path = dir.join(format!("{}.log", case.name));
        let log = std::fs::File::create(&log_path)?;
        let mut command = tokio::process::Command::new(&self.java);
        command
            .args(["-cp", &self.classpath, MAIN_CLASS, "--case", &case.name])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        let started = Instant::now();
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.java.display()))?;
        let finished = tokio::time::timeout(time_limit, child.wait_with_output()).await;
        let elapsed = started.elapsed();
        let (status, detail) = match finished {
            // The child is killed on drop when the time limit passes.
            Err(_) => (
                Status::TimedOut,
                format!(
                    "still running after {} s; log {}",
                    time_limit.as_secs(),
                    log_path.display()
                ),
            ),
            Ok(output) => {
                let output = output?;
                let stdout = String::from_utf8_lossy(&output.stdout);
                match stdout
                    .lines()
                    .rev()
                    .find(|l| l.starts_with('{'))
                    .map(serde_json::from_str::<Result>)
                {
                    Some(Ok(r)) => {
                        anyhow::ensure!(
                            r.client == self.version,
                            "the classpath of {} runs kafka-clients {}",
                            self.version,
                            r.client
                        );
                        let status = match r.status.as_str() {
                            "passed" => Status::Passed,
                            "skipped" => Status::Skipped,
                            _ => Status::Failed,
                        };
                        (status, r.detail)
                    }
                    _ => (
                        Status::Failed,
                        format!(
                            "the JVM ended ({}) without a result line; log {}",
                            output.status,
                            log_path.display()
                        ),
                    ),
                }
            }
        };
        let record = serde_json::json!({
            "version": self.version,
            "case": case.name,
            "listener": case.listener,
            "rules": case.rules,
            "status": status.label(),
            "seconds": (elapsed.as_secs_f64() * 10.0).round() / 10.0,
            "detail": detail,
        });
        let outcome = Outcome {
            name: format!("{} {}", self.version, case.name),
            status,
            duration: elapsed,
            detail: format!("{detail} [{}]", case.rules.join(", ")),
        };
        Ok((outcome, record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_lines_and_result_lines_are_read() {
        let line = r#"{"case":"consumer_seek","listener":"sasl_plain","quick":true,"rules":["FETCH-RANGE-1"]}"#;
        let listing: Listing = serde_json::from_str(line).expect("a list line");
        assert_eq!(
            (
                listing.name.as_str(),
                listing.listener,
                listing.quick,
                listing.rules.len()
            ),
            ("consumer_seek", Listener::SaslPlain, true, 1)
        );
        let line = r#"{"case":"x","client":"3.9.1","status":"skipped","ms":3,"rules":[],"detail":"why"}"#;
        let result: Result = serde_json::from_str(line).expect("a result line");
        assert_eq!(
            (result.status.as_str(), result.detail.as_str(), result.client.as_str()),
            ("skipped", "why", "3.9.1")
        );
    }

    #[test]
    fn a_version_without_classes_says_why() {
        let work = std::env::temp_dir().join(format!("compat-java-test-{}", std::process::id()));
        std::fs::create_dir_all(&work).expect("a scratch directory");
        std::fs::write(work.join("unavailable-4.3.0"), "pip could not download it\n").expect("written");
        if kafka_iggy_conformance::compat::work_dir::find_java().is_some() {
            let why = Client::find(&work, "4.3.0").err().expect("no classes").to_string();
            assert_eq!(why, "pip could not download it");
            let why = Client::find(&work, "3.9.1").err().expect("no classes").to_string();
            assert!(why.starts_with("not compiled under"), "{why}");
        }
        std::fs::remove_dir_all(&work).expect("removed");
    }
}
