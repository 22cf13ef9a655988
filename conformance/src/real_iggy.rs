//! Reaching a real Iggy server for the real-Iggy tier, in this order: `IGGY_ADDR` (with
//! `IGGY_USERNAME`/`IGGY_PASSWORD`) for a server already running; an `iggy-server` binary (on
//! `PATH`, or named by `IGGY_SERVER_BIN`) started for this run on a free loopback port with a
//! temporary data directory; a container of the `apache/iggy` image (`IGGY_IMAGE`) when a Docker
//! daemon answers. When none is available the tier is skipped with the reason, and
//! `IGGY_REQUIRED=1` turns the skip into a failure. A skipped tier is never reported as passed.

use crate::cases::gateway_cases::BackendSource;
use anyhow::{bail, Context};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::Backend;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// The image matching the pinned SDK's server (0.9.0-edge.5).
pub const DEFAULT_IMAGE: &str = "apache/iggy:0.9.0-edge.5";
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A reachable server and what keeps it alive.
pub struct IggyServer {
    pub address: String,
    pub username: String,
    pub password: String,
    /// How it was reached, for the tier's output.
    pub how: String,
    _guard: Guard,
}

enum Guard {
    External,
    Process {
        child: Child,
        _data: TempDir,
        binary: PathBuf,
        /// Environment beyond the defaults (a TLS server's certificate).
        env: Vec<(String, String)>,
    },
    /// Dropping the container stops it.
    Container(#[allow(dead_code)] Box<ContainerAsync<GenericImage>>),
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Guard::Process { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl IggyServer {
    /// The server's process id when this run started it (benches count its CPU time).
    pub fn pid(&self) -> Option<u32> {
        match &self._guard {
            Guard::Process { child, .. } => Some(child.id()),
            _ => None,
        }
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The outcome of looking for a server.
pub enum Discovery {
    Found(IggyServer),
    Skipped(String),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn credentials() -> (String, String) {
    (
        env("IGGY_USERNAME").unwrap_or_else(|| "iggy".into()),
        env("IGGY_PASSWORD").unwrap_or_else(|| "iggy".into()),
    )
}

/// The `iggy-server` binary this run may start: `IGGY_SERVER_BIN`, else the first on `PATH`.
pub fn find_binary() -> Option<PathBuf> {
    if let Some(path) = env("IGGY_SERVER_BIN") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("iggy-server"))
        .find(|p| p.is_file())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until the server accepts TCP connections: readiness of a process we started, bounded.
fn wait_until_listening(address: &str, child: &mut Child) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if std::net::TcpStream::connect(address).is_ok() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!("iggy-server exited with {status} before listening on {address}");
        }
        if start.elapsed() > READY_TIMEOUT {
            bail!("iggy-server did not listen on {address} within {READY_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts the binary on `address` with its data in `dir`, and waits until it listens.
fn start_process(binary: &PathBuf, address: &str, dir: &PathBuf, env: &[(String, String)]) -> anyhow::Result<Child> {
    let (username, password) = credentials();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))?;
    let mut child = Command::new(binary)
        .current_dir(dir)
        .env("IGGY_SYSTEM_PATH", dir.join("data"))
        .env("IGGY_TCP_ADDRESS", address)
        .env("IGGY_HTTP_ENABLED", "false")
        .env("IGGY_QUIC_ENABLED", "false")
        .env("IGGY_WEBSOCKET_ENABLED", "false")
        .env("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "2")
        .env("IGGY_SYSTEM_SHARDING_PIN_CORES", "false")
        .env("IGGY_ROOT_USERNAME", &username)
        .env("IGGY_ROOT_PASSWORD", &password)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    if let Err(e) = wait_until_listening(address, &mut child) {
        let _ = child.kill();
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        bail!(
            "{e}; last server log lines:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(child)
}

fn spawn(binary: PathBuf, env: Vec<(String, String)>) -> anyhow::Result<IggyServer> {
    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let data = TempDir(std::env::temp_dir().join(format!("kig-iggy-{}-{port}", std::process::id())));
    std::fs::create_dir_all(&data.0)?;
    let (username, password) = credentials();
    let child = start_process(&binary, &address, &data.0, &env)?;
    Ok(IggyServer {
        how: format!("started {} on {address}", binary.display()),
        address,
        username,
        password,
        _guard: Guard::Process {
            child,
            _data: data,
            binary,
            env,
        },
    })
}

impl IggyServer {
    /// A server already running at `address`, which this run neither starts nor stops.
    pub fn external(address: String, username: String, password: String) -> Self {
        IggyServer {
            how: format!("the server at {address}"),
            address,
            username,
            password,
            _guard: Guard::External,
        }
    }

    /// Whether this run started the server, and so can restart it.
    pub fn restartable(&self) -> bool {
        matches!(self._guard, Guard::Process { .. })
    }

    /// Stops the server (SIGTERM, then waits) and starts it again on the same address and data.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop()?;
        self.start_again()
    }

    /// Stops the server (SIGTERM, then waits for it to exit); [`Self::start_again`] brings it back.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Guard::Process { child, .. } = &mut self._guard else {
            bail!("only a server this run started can be stopped");
        };
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status()?;
        child.wait()?;
        Ok(())
    }

    /// Starts the stopped server again on the same address and data.
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        let Guard::Process {
            child,
            _data,
            binary,
            env,
        } = &mut self._guard
        else {
            bail!("only a server this run started can be restarted");
        };
        *child = start_process(binary, &self.address, &_data.0, env)?;
        Ok(())
    }

    /// Another server from this run's binary, speaking TLS on its TCP port with `cert` and `key`
    /// (PEM), for AUTH-TLS-3; `None` when this run did not start its server (no binary to run).
    pub fn spawn_tls(&self, cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<Option<IggyServer>> {
        let Guard::Process { binary, .. } = &self._guard else {
            return Ok(None);
        };
        let env = vec![
            ("IGGY_TCP_TLS_ENABLED".to_string(), "true".to_string()),
            ("IGGY_TCP_TLS_SELF_SIGNED".to_string(), "false".to_string()),
            ("IGGY_TCP_TLS_CERT_FILE".to_string(), cert.display().to_string()),
            ("IGGY_TCP_TLS_KEY_FILE".to_string(), key.display().to_string()),
        ];
        spawn(binary.clone(), env).map(Some)
    }
}

fn docker_answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

async fn container() -> anyhow::Result<IggyServer> {
    let image = env("IGGY_IMAGE").unwrap_or_else(|| DEFAULT_IMAGE.into());
    let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
    let (username, password) = credentials();
    let container = GenericImage::new(name, tag)
        .with_exposed_port(8090.tcp())
        .with_wait_for(WaitFor::message_on_stdout("listening"))
        .with_env_var("IGGY_ROOT_USERNAME", &username)
        .with_env_var("IGGY_ROOT_PASSWORD", &password)
        .with_env_var("IGGY_TCP_ADDRESS", "0.0.0.0:8090")
        .with_env_var("IGGY_HTTP_ENABLED", "false")
        .with_env_var("IGGY_QUIC_ENABLED", "false")
        .with_env_var("IGGY_WEBSOCKET_ENABLED", "false")
        .start()
        .await
        .with_context(|| format!("starting container {image}"))?;
    let port = container.get_host_port_ipv4(8090.tcp()).await?;
    Ok(IggyServer {
        address: format!("127.0.0.1:{port}"),
        username,
        password,
        how: format!("container {image} on 127.0.0.1:{port}"),
        _guard: Guard::Container(Box::new(container)),
    })
}

/// The SDK clients each gateway on the real server pools.
pub const GATEWAY_POOL_SIZE: usize = 4;
/// The stream unlisted Kafka topics map to (the gateway's default).
pub const DEFAULT_STREAM: &str = "kafka";

impl IggyServer {
    /// A plain SDK client of its own, connected and logged in to this server's account, through
    /// `address` (the server's, or a proxy's in front of it). Each is one new TCP connection.
    pub async fn sdk_client_at(&self, address: &str) -> anyhow::Result<iggy::prelude::IggyClient> {
        let connection = format!("iggy://{}:{}@{address}", self.username, self.password);
        let client = iggy::prelude::IggyClient::builder_from_connection_string(&connection)?.build()?;
        iggy::prelude::Client::connect(&client)
            .await
            .with_context(|| format!("connecting an SDK client to {address}"))?;
        Ok(client)
    }

    /// A gateway's backend on this server: its own pool of logged-in SDK clients, and the default
    /// stream ensured, as a gateway process does when it starts.
    pub async fn gateway_backend(&self) -> anyhow::Result<IggyBackend> {
        let backend = IggyBackend::connect(&self.address, &self.username, &self.password, GATEWAY_POOL_SIZE)
            .await
            .with_context(|| format!("connecting a gateway backend to {}", self.address))?;
        backend.ensure_stream(DEFAULT_STREAM).await?;
        Ok(backend)
    }
}

/// Each gateway a case starts gets its own connections to the server, as a separate gateway
/// process would: two gateways are two sets of Iggy clients, and a restarted one starts afresh.
impl BackendSource for IggyServer {
    type Backend = IggyBackend;
    async fn backend_for_new_gateway(&self) -> anyhow::Result<Arc<IggyBackend>> {
        Ok(Arc::new(self.gateway_backend().await?))
    }
}

/// Looks for a server in the documented order.
pub async fn discover() -> anyhow::Result<Discovery> {
    discover_with_env(Vec::new()).await
}

/// [`discover`], with `server_env` added to the environment of a server this run starts (a
/// bench's server settings, such as its shard count or its allocator's tunables); a server found
/// at `IGGY_ADDR` or in a container runs as it was started.
pub async fn discover_with_env(server_env: Vec<(String, String)>) -> anyhow::Result<Discovery> {
    if let Some(address) = env("IGGY_ADDR") {
        let (username, password) = credentials();
        let mut server = IggyServer::external(address, username, password);
        server.how = format!("IGGY_ADDR={}", server.address);
        return Ok(Discovery::Found(server));
    }
    if let Some(binary) = find_binary() {
        return spawn(binary, server_env).map(Discovery::Found);
    }
    if docker_answers() {
        return container().await.map(Discovery::Found);
    }
    Ok(Discovery::Skipped(
        "no server: IGGY_ADDR is unset, no iggy-server binary (IGGY_SERVER_BIN or PATH), and no Docker daemon answers"
            .into(),
    ))
}

/// A `KEY=VALUE` of a bench's `--iggy-server-env`.
pub fn parse_env_pair(pair: &str) -> Result<(String, String), String> {
    match pair.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{pair:?} is not KEY=VALUE")),
    }
}

/// Whether a skip must fail the run.
pub fn required() -> bool {
    env("IGGY_REQUIRED").as_deref() == Some("1")
}
