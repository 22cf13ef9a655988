//! A peer process: started in a process group of its own on a loopback port, with its output
//! appended to a log that is kept; ready once a TCP connection to its port succeeds; stopped by
//! signalling the whole group, so children it forks go with it.

use super::Launch;
use std::fs::OpenOptions;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a peer may take to accept its first connection.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a peer may take to leave after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// A loopback port nobody listens on now (the OS picks it; the listener is closed at once).
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn accepts(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).is_ok()
}

/// A running peer.
pub struct PeerProcess {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl PeerProcess {
    /// Starts `launch` with its output appended to `log`, and waits until its port accepts a
    /// connection (at most [`READY_TIMEOUT`]); stops it and says why when it does not.
    pub fn start(launch: &Launch, port: u16, log: &Path) -> Result<PeerProcess, String> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("opening {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = command
            .spawn()
            .map_err(|e| format!("{} did not start: {e}", launch.program.display()))?;
        let mut peer = PeerProcess {
            child,
            port,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = peer.exited() {
                return Err(format!(
                    "exited ({status}) before accepting a connection; see {}",
                    log.display()
                ));
            }
            if accepts(port) {
                return Ok(peer);
            }
            if Instant::now() >= deadline {
                peer.stop();
                return Err(format!(
                    "did not accept a connection on 127.0.0.1:{port} within {READY_TIMEOUT:?}; see {}",
                    log.display()
                ));
            }
            // Between connection attempts: the wait itself is bounded by the deadline above.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its process id (the leader of its process group): what a bench watches for its CPU.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, when the peer has gone.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops the peer's whole process group: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`].
    pub fn stop(&mut self) {
        self.terminate_within(STOP_TIMEOUT);
    }

    /// Sends SIGTERM to the peer's process group and waits up to `limit` for the peer to exit;
    /// its exit status, or `None` when it was still running and was killed (with its group).
    pub fn terminate_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        signal_group(self.child.id(), "TERM");
        let deadline = Instant::now() + limit;
        let mut status = self.exited();
        while status.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            status = self.exited();
        }
        signal_group(self.child.id(), "KILL");
        let _ = self.child.wait();
        status
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.stop();
        }
    }
}

/// Sends SIG`signal` to the process group led by `pid` (the peer was started as its leader).
pub fn signal_group(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
