//! Where a compatibility tier works and where the gateways it starts log: shared by the
//! librdkafka tier (`compat`), the Java tier (`compat-java`) and the Connect tier (`compat-connect`),
//! which also find `java` here and list a Java case program's cases.

use anyhow::Context;
use std::path::PathBuf;

/// The tier's work directory (`work_dir`, or `target/<default_name>` in the workspace), created,
/// with the gateways' log routed to `gateway.log` in it: every Iggy error behind a Kafka code
/// (ERR-MAP-1) lands next to the logs a failing case points to. Returns the directory and the
/// log's path.
pub fn prepare(work_dir: Option<PathBuf>, default_name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let work = match work_dir {
        Some(work) => work,
        None => workspace()?.join("target").join(default_name),
    };
    std::fs::create_dir_all(&work)?;
    let gateway_log = work.join("gateway.log");
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,iggy=off".into()),
        )
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(std::fs::File::create(&gateway_log)?))
        .init();
    Ok((work, gateway_log))
}

/// The workspace's root directory.
pub fn workspace() -> anyhow::Result<PathBuf> {
    Ok(PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the conformance crate has no parent directory")?
        .to_path_buf())
}

/// `$JAVA_HOME/bin/java`, else `java` on PATH.
pub fn find_java() -> Option<std::path::PathBuf> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = std::path::PathBuf::from(home).join("bin").join("java");
        if java.is_file() {
            return Some(java);
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("java"))
            .find(|java| java.is_file())
    })
}

/// The case list of a Java case program (`main_class` on `classpath`, run with `--list`): one JSON
/// object a line, other lines ignored. A JVM that does not answer within a minute is killed.
pub async fn list_java_cases<T: serde::de::DeserializeOwned>(
    java: &std::path::Path,
    classpath: &str,
    main_class: &str,
) -> anyhow::Result<Vec<T>> {
    let child = tokio::process::Command::new(java)
        .args(["-cp", classpath, main_class, "--list"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {} {main_class} --list", java.display()))?;
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .with_context(|| format!("{main_class} --list did not answer within 60 s"))??;
    anyhow::ensure!(out.status.success(), "{main_class} --list failed: {}", out.status);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).with_context(|| format!("reading the case line {l}")))
        .collect()
}
