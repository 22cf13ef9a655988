//! tansu 0.6 (crates.io, Apache-2.0): a Kafka-compatible broker in Rust, built with its
//! `dynostore` feature and run on its in-memory storage engine.

use super::{cargo_install, Launch, ProcessPeer};
use std::path::{Path, PathBuf};

pub struct Tansu;

impl ProcessPeer for Tansu {
    fn name(&self) -> &'static str {
        "tansu"
    }

    fn version(&self) -> &'static str {
        "0.6.0"
    }

    fn install(&self, dir: &Path) -> Result<PathBuf, String> {
        cargo_install(
            &dir.join("tansu"),
            "tansu",
            self.version(),
            "tansu",
            &["--features", "dynostore"],
        )
    }

    fn launch(&self, binary: &Path, port: u16, _data_dir: &Path) -> anyhow::Result<Launch> {
        let url = format!("tcp://127.0.0.1:{port}");
        Ok(Launch {
            program: binary.to_path_buf(),
            args: [
                "broker",
                "--cluster-id",
                "conformance-peers",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
                "--storage-engine",
                "memory://tansu/",
            ]
            .map(str::to_owned)
            .to_vec(),
            env: Vec::new(),
        })
    }
}
