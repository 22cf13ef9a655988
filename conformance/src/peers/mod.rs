//! `conformance-peers`: the suite's `kafka` profile run against independent Kafka-protocol
//! brokers (tansu, rivine, noida-db, librdkafka's mock cluster) beside the gateway, and the
//! matrix of case × peer rendered from the results with a hand-written verdict for every
//! disagreement (docs/conformance-peers.md).
//!
//! - [`process`]: a peer process: a free loopback port, a temporary directory, a readiness wait
//!   by connecting, its log kept, and its process group stopped.
//! - [`tansu`], [`rivine`], [`noida`]: how each peer is installed (pinned) and started.
//! - [`mock`]: librdkafka's mock cluster, run in process one case at a time.
//! - [`run`]: the suite against one peer, one case per `conformance` process, so a case that
//!   crashes or hangs the peer is charged to that case and the peer restarted for the next.
//! - [`matrix`]: the page, from the JSON results and the verdicts file.

pub mod matrix;
pub mod mock;
pub mod noida;
pub mod process;
pub mod rivine;
pub mod run;
pub mod tansu;

use std::path::{Path, PathBuf};

/// The columns of the matrix, in order: the gateway first, then the peers.
pub const COLUMNS: &[&str] = &["gateway", "mock", "tansu", "rivine", "noida-db"];

/// How a peer is started once installed: the program, its arguments and environment, given the
/// port it must listen on and a fresh directory of its own.
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A peer that runs as a process of its own.
pub trait ProcessPeer {
    /// Its column name.
    fn name(&self) -> &'static str;
    /// The pinned version installed.
    fn version(&self) -> &'static str;
    /// Installs it under `dir` unless already there; the binary's path, or why it cannot be.
    fn install(&self, dir: &Path) -> Result<PathBuf, String>;
    /// The port to listen on: a free one unless the peer can only work on a fixed port.
    fn port(&self) -> Result<u16, String> {
        process::free_port().map_err(|e| format!("no free loopback port: {e}"))
    }
    /// How to start it listening on 127.0.0.1:`port`, with `data_dir` as its own directory.
    fn launch(&self, binary: &Path, port: u16, data_dir: &Path) -> anyhow::Result<Launch>;
}

/// `cargo install --locked --version =VERSION --root ROOT CRATE [ARGS]`, unless `ROOT/bin/BIN`
/// is already there.
pub fn cargo_install(root: &Path, krate: &str, version: &str, bin: &str, extra: &[&str]) -> Result<PathBuf, String> {
    let binary = root.join("bin").join(bin);
    if binary.is_file() {
        return Ok(binary);
    }
    let exact = format!("={version}");
    let mut args = vec!["install", "--locked", "--version", &exact, "--root"];
    let root_text = root.to_string_lossy().into_owned();
    args.push(&root_text);
    args.push(krate);
    args.extend_from_slice(extra);
    println!("conformance-peers: cargo {}", args.join(" "));
    let status = std::process::Command::new("cargo")
        .args(&args)
        .status()
        .map_err(|e| format!("cargo install {krate} {version} could not start: {e}"))?;
    if !status.success() || !binary.is_file() {
        return Err(format!(
            "cargo install {krate} {version} failed ({status}); no {}",
            binary.display()
        ));
    }
    Ok(binary)
}
