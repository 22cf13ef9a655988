//! Building librdkafka and its test runner from the sources the `rdkafka-sys` crate ships, into
//! a directory of its own under `target/`, and reusing that build on later runs.
//!
//! Only Debian packages the Makefile installs are used (OpenSSL, zlib, rapidjson); librdkafka's own
//! `--install-deps` downloads, so it is never used. Optional dependencies the machine may lack
//! (GSSAPI, libcurl, zstd, an external lz4) are turned off so the build is the same everywhere.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Optional dependencies off: the build must not depend on what else the machine has.
const CONFIGURE_FLAGS: &[&str] = &[
    "--disable-gssapi",
    "--disable-curl",
    "--disable-zstd",
    "--disable-lz4-ext",
    "--disable-syslog",
];

/// Written last, so a build interrupted half way is redone rather than reused.
const STAMP: &str = ".compat-built";

/// A built runner: the `tests/` directory holding `test-runner`, and the libraries it loads.
#[derive(Debug, Clone)]
pub struct Runner {
    pub tests_dir: PathBuf,
    pub library_path: String,
    /// The librdkafka version built, `2.12.1`.
    pub version: String,
}

impl Runner {
    pub fn binary(&self) -> PathBuf {
        self.tests_dir.join("test-runner")
    }
}

/// The `librdkafka` directory of the `rdkafka-sys` crate the workspace builds against, found
/// with `cargo metadata` so it follows the lock file.
pub fn crate_sources(workspace: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Offline, so only this platform's packages: the build downloaded those and no others (a
    // fresh machine's cache lacks, say, chrono's Android dependency, and metadata failed).
    let rustc = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV named no host")?;
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(workspace)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "rdkafka-sys")
        .and_then(|p| p["manifest_path"].as_str())
        .context("rdkafka-sys is not among the workspace's packages")?;
    let dir = Path::new(manifest)
        .parent()
        .context("rdkafka-sys's manifest has no directory")?
        .join("librdkafka");
    if !dir.join("tests").join("test.c").is_file() {
        bail!("{} has no tests/test.c", dir.display());
    }
    Ok(dir)
}

/// The version `src/rdkafka.h` declares (`RD_KAFKA_VERSION 0x020c01ff` → `2.12.1`).
pub fn source_version(sources: &Path) -> anyhow::Result<String> {
    let header = std::fs::read_to_string(sources.join("src").join("rdkafka.h"))?;
    let hex = header
        .lines()
        .find_map(|l| l.strip_prefix("#define RD_KAFKA_VERSION"))
        .map(str::trim)
        .and_then(|v| v.strip_prefix("0x"))
        .context("no RD_KAFKA_VERSION in rdkafka.h")?;
    let v = u32::from_str_radix(hex, 16).context("RD_KAFKA_VERSION is not hex")?;
    Ok(format!("{}.{}.{}", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff))
}

/// Builds (or reuses) librdkafka and `tests/test-runner` in `work/librdkafka-<version>`.
pub fn build(sources: &Path, work: &Path) -> anyhow::Result<Runner> {
    let version = source_version(sources)?;
    let dir = work.join(format!("librdkafka-{version}"));
    let runner = Runner {
        tests_dir: dir.join("tests"),
        library_path: format!("{}:{}", dir.join("src").display(), dir.join("src-cpp").display()),
        version: version.clone(),
    };
    // The stamp holds the recipe: a build from other sources or with other optional
    // dependencies (rapidjson, which some tests use to check the statistics) is redone.
    let recipe = recipe(sources, &version);
    let stamp = std::fs::read_to_string(dir.join(STAMP)).unwrap_or_default();
    if stamp == recipe && runner.binary().is_file() {
        println!("compat: reusing the librdkafka {version} build in {}", dir.display());
        return Ok(runner);
    }
    println!(
        "compat: building librdkafka {version} and its test runner in {}",
        dir.display()
    );
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(work)?;
    let log = work.join("build.log");
    std::fs::write(&log, "")?;
    // The registry copy is shared and read-only in spirit; configure writes into its tree.
    run(
        Command::new("cp").arg("-a").arg(sources).arg(&dir),
        "copying the sources",
        &log,
    )?;
    run(
        Command::new("./configure").args(CONFIGURE_FLAGS).current_dir(&dir),
        "configure",
        &log,
    )?;
    let jobs = format!(
        "-j{}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    run(
        Command::new("make").arg(&jobs).arg("libs").current_dir(&dir),
        "make libs",
        &log,
    )?;
    // `build` also makes the interceptor plugin some tests load.
    run(
        Command::new("make")
            .arg(&jobs)
            .arg("build")
            .current_dir(dir.join("tests")),
        "make -C tests build",
        &log,
    )?;
    std::fs::write(dir.join(STAMP), &recipe)?;
    Ok(runner)
}

/// What a build is made from: the sources, their version, the configure flags, and whether the
/// rapidjson headers (Debian's rapidjson-dev) were there for configure to find.
fn recipe(sources: &Path, version: &str) -> String {
    let rapidjson = Path::new("/usr/include/rapidjson/schema.h").is_file();
    format!(
        "librdkafka {version} from {}\nconfigure {}\nrapidjson {rapidjson}\n",
        sources.display(),
        CONFIGURE_FLAGS.join(" ")
    )
}

/// Runs a build step with its output appended to `log`; a failure names the step and shows the
/// log's last lines.
fn run(command: &mut Command, step: &str, log: &Path) -> anyhow::Result<()> {
    let out = std::fs::OpenOptions::new().append(true).open(log)?;
    let status = command
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .with_context(|| format!("starting {step}"))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{step} failed ({status}); the end of {}:\n{}",
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}
