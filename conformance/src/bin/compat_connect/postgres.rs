//! A throwaway PostgreSQL for the CDC case: Debian's server binaries (`initdb`, `pg_ctl`, found on
//! PATH or under /usr/lib/postgresql/<version>/bin), a data directory of its own, `wal_level =
//! logical` for Debezium's replication slot, listening on a free loopback port with trust
//! authentication. PostgreSQL refuses to run as root, so as root it runs as the `postgres` user
//! Debian's package creates (through `runuser`). When it cannot start, the caller skips the case
//! with the error.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Postgres {
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
}

/// The directory holding `initdb` and `pg_ctl`.
fn find_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) =
            std::env::split_paths(&path).find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        {
            return Ok(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .filter(|d| d.join("initdb").is_file())
        .context("no initdb on PATH or under /usr/lib/postgresql (Debian's postgresql package: `make setup`)")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    pub async fn start(work: &Path) -> anyhow::Result<Postgres> {
        let bin = find_bin()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let data = std::env::temp_dir().join(format!("kig-connect-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(work)?;
        std::fs::create_dir_all(&data)?;
        let as_postgres = is_root();
        let pg = Postgres {
            port,
            bin,
            data,
            as_postgres,
        };
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&pg.data)
                .status()?;
            anyhow::ensure!(
                status.success(),
                "chown of {} to the postgres user failed",
                pg.data.display()
            );
        }
        let pw = pg.data.join("pwfile");
        std::fs::write(&pw, "postgres\n")?;
        if as_postgres {
            Command::new("chown").args(["postgres:postgres"]).arg(&pw).status()?;
        }
        let db = pg.data.join("db");
        pg.run(
            "initdb",
            &[
                "-D".into(),
                db.display().to_string(),
                "-U".into(),
                "postgres".into(),
                "-A".into(),
                "trust".into(),
                format!("--pwfile={}", pw.display()),
            ],
            &work.join("initdb.log"),
        )?;
        let options = format!(
            "-c wal_level=logical -c max_replication_slots=8 -c max_wal_senders=8 -c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={}",
            pg.data.display()
        );
        let log = pg.data.join("server.log");
        pg.run(
            "pg_ctl",
            &[
                "-D".into(),
                db.display().to_string(),
                "-o".into(),
                options,
                "-l".into(),
                log.display().to_string(),
                "-w".into(),
                "-t".into(),
                "60".into(),
                "start".into(),
            ],
            &work.join("pg_ctl.log"),
        )
        .with_context(|| {
            format!(
                "server log: {}",
                std::fs::read_to_string(&log).unwrap_or_default().trim()
            )
        })?;
        Ok(pg)
    }

    /// Runs one of the server's programs, as the postgres user when this process is root.
    fn run(&self, program: &str, args: &[String], log: &Path) -> anyhow::Result<()> {
        let exe = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let output = command
            .args(args)
            .current_dir(&self.data)
            .output()
            .with_context(|| format!("running {}", exe.display()))?;
        std::fs::write(log, [output.stdout.as_slice(), output.stderr.as_slice()].concat())?;
        if !output.status.success() {
            bail!(
                "{program} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Postgres {
    /// Stops the server (fast shutdown) and removes its data directory.
    fn drop(&mut self) {
        let db = self.data.join("db");
        let _ = self.run(
            "pg_ctl",
            &[
                "-D".into(),
                db.display().to_string(),
                "-m".into(),
                "fast".into(),
                "-w".into(),
                "stop".into(),
            ],
            &self.data.join("stop.log"),
        );
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
