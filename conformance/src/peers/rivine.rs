//! rivine 0.2 (crates.io): a Kafka rewrite in Rust, binary `rivine-broker`. Its request handler
//! advertises port 9092 in Metadata and FindCoordinator whatever it listens on
//! (`RequestHandler::new` fixes `broker_port: 9092`), so it runs on 127.0.0.1:9092 or not at
//! all; its log directory is set to the run's temporary directory through a config file.

use super::{cargo_install, process, Launch, ProcessPeer};
use std::path::{Path, PathBuf};

/// The only port whose clients can follow rivine's Metadata.
const ADVERTISED_PORT: u16 = 9092;

pub struct Rivine;

impl ProcessPeer for Rivine {
    fn name(&self) -> &'static str {
        "rivine"
    }

    fn version(&self) -> &'static str {
        "0.2.0"
    }

    fn install(&self, dir: &Path) -> Result<PathBuf, String> {
        cargo_install(&dir.join("rivine"), "rivine", self.version(), "rivine-broker", &[])
    }

    fn port(&self) -> Result<u16, String> {
        if process::accepts(ADVERTISED_PORT) {
            return Err(format!(
                "rivine advertises 127.0.0.1:{ADVERTISED_PORT} whatever it listens on, and that port is taken"
            ));
        }
        Ok(ADVERTISED_PORT)
    }

    fn launch(&self, binary: &Path, port: u16, data_dir: &Path) -> anyhow::Result<Launch> {
        let config = data_dir.join("rivine.toml");
        let logs = data_dir.join("logs");
        std::fs::write(
            &config,
            format!(
                "host = \"127.0.0.1\"\nport = {port}\nlog_dirs = [{:?}]\n",
                logs.display().to_string()
            ),
        )?;
        Ok(Launch {
            program: binary.to_path_buf(),
            args: vec!["--config".into(), config.display().to_string()],
            env: vec![
                ("RIVINE_HOST".into(), "127.0.0.1".into()),
                ("RIVINE_PORT".into(), port.to_string()),
            ],
        })
    }
}
