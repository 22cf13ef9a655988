//! A three-node Iggy cluster on loopback for the cluster tier (docs/spec/cluster.md), started from
//! an `iggy-server` binary (the real-Iggy tier's `IGGY_SERVER_BIN` or `PATH`): every node on free
//! loopback ports with a temporary data directory, one after another, each started once the
//! nodes before it agree; nodes are SIGKILLed and restarted by replica id; everything is stopped
//! and removed on drop. Every wait ends on a condition and fails after a bound.
//!
//! The configuration is the one DIFF-15 measured: `[cluster] enabled = true`, a `[[cluster.nodes]]`
//! roster with a client (`tcp`) and a replica (`tcp_replica`) port per node, HTTP, QUIC and
//! WebSocket off (in cluster mode every enabled transport needs a port per node), the server's
//! default `heartbeat_timeout` (5 s).

use anyhow::{bail, ensure, Context};
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, IggyClient, TcpClient, TcpClientConfig, TcpClientReconnectionConfig, UserClient,
};
use iggy_common::locking::IggyRwLockFn;
use iggy_common::ClusterClient;
use iggy_common::{ClusterMetadata, ClusterNodeRole, ClusterNodeStatus};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use crate::stall_proxy::StallProxy;

/// Nodes in the cluster: the smallest with a majority after one node dies.
pub const NODES: usize = 3;
/// The bound on a node's start, and on the cluster agreeing after a start or a restart.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Starts of a fresh cluster before giving up on one whose metadata primary is node 0.
const START_ATTEMPTS: usize = 3;
/// The bound on one question to one node (a login, its cluster metadata).
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// Between two questions to the cluster while waiting for it to agree: never a synchronisation,
/// the wait ends on what the nodes answer.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

struct Node {
    replica_id: u32,
    tcp: u16,
    replica: u16,
    /// The host the cluster's metadata names this node by, when not the one it listens on: a
    /// [`StallProxy`] in front of it listens there.
    advertised: Option<&'static str>,
    /// SIGSTOPped ([`IggyCluster::freeze`]): it answers nothing, so nobody asks it.
    frozen: bool,
    child: Option<Child>,
}

impl Node {
    /// Where the node listens.
    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.tcp)
    }

    /// Where clients reach it: the address the cluster's metadata names.
    fn client_address(&self) -> String {
        format!("{}:{}", self.advertised.unwrap_or("127.0.0.1"), self.tcp)
    }
}

/// Where the proxy in front of node 0 listens ([`IggyCluster::start_fronted`]): another loopback
/// address, on node 0's own port (the server advertises a node's host, never another port).
const FRONT_HOST: &str = "127.0.0.2";

/// A running cluster; dropping it kills every node and removes its directory.
pub struct IggyCluster {
    binary: PathBuf,
    dir: PathBuf,
    nodes: Mutex<Vec<Node>>,
    /// The proxy in front of node 0, for a cluster started fronted.
    front: Option<StallProxy>,
    pub username: String,
    pub password: String,
}

impl Drop for IggyCluster {
    fn drop(&mut self) {
        let nodes = self.nodes.get_mut().unwrap_or_else(|e| e.into_inner());
        for node in nodes.iter_mut() {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // KIG_CLUSTER_KEEP=1 keeps the nodes' logs and data to look at after a failure.
        if std::env::var("KIG_CLUSTER_KEEP").as_deref() == Ok("1") {
            println!(
                "cluster tier: kept the cluster's logs and data in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// What the cluster said about itself, as one node answered.
#[derive(Debug, Clone)]
pub struct View {
    /// The replica id of the healthy leader, if one is named.
    pub leader: Option<u32>,
    /// The replica ids the metadata names healthy.
    pub healthy: Vec<u32>,
}

impl IggyCluster {
    /// Starts [`NODES`] nodes from `binary`, one after another: node 0, node 1 once node 0
    /// listens, then node 2 once the first two have elected a leader (nodes started at once can
    /// leave the metadata primary apart from the partition plane, DIFF-14); returns once every
    /// node takes a login and all agree on one leader with every node healthy.
    ///
    /// A start whose metadata plane changed view (a node not yet connected when the first
    /// operation was replicated, seen under load) leaves node 1 or 2 the metadata primary while
    /// every partition created later starts in view 0 with node 0 its primary: every append is
    /// then refused (DIFF-14). Such a cluster is thrown away and another started, on new ports
    /// and data, up to [`START_ATTEMPTS`] times.
    pub async fn start(binary: &Path) -> anyhow::Result<Self> {
        Self::start_with(binary, false).await
    }

    /// [`IggyCluster::start`], with a [`StallProxy`] in front of node 0 (the metadata primary):
    /// the node advertises the proxy's host (`advertised_address`), so the cluster's metadata,
    /// and [`IggyCluster::roster`], name node 0 at the proxy, and every client reaches it
    /// through it.
    pub async fn start_fronted(binary: &Path) -> anyhow::Result<Self> {
        Self::start_with(binary, true).await
    }

    async fn start_with(binary: &Path, fronted: bool) -> anyhow::Result<Self> {
        for attempt in 1..=START_ATTEMPTS {
            let (cluster, leader) = Self::start_once(binary, fronted).await?;
            if leader == 0 {
                return Ok(cluster);
            }
            println!(
                "cluster tier: start {attempt} of {START_ATTEMPTS} elected node {leader} the metadata primary, not node 0 (its partitions would keep node 0 as their primary, DIFF-14); starting another cluster"
            );
        }
        bail!("the Iggy cluster elected another node than node 0 its metadata primary in {START_ATTEMPTS} starts")
    }

    /// One start: the cluster and the leader it agreed on.
    async fn start_once(binary: &Path, fronted: bool) -> anyhow::Result<(Self, u32)> {
        let ports: Vec<u16> = {
            let held: Vec<TcpListener> = (0..2 * NODES)
                .map(|_| TcpListener::bind("127.0.0.1:0"))
                .collect::<Result<_, _>>()?;
            held.iter()
                .map(|l| l.local_addr().map(|a| a.port()))
                .collect::<Result<_, _>>()?
        };
        let dir = std::env::temp_dir().join(format!("kig-cluster-{}-{}", std::process::id(), ports[0]));
        std::fs::create_dir_all(&dir)?;
        let nodes: Vec<Node> = (0..NODES)
            .map(|i| Node {
                replica_id: i as u32,
                tcp: ports[2 * i],
                replica: ports[2 * i + 1],
                advertised: (fronted && i == 0).then_some(FRONT_HOST),
                frozen: false,
                child: None,
            })
            .collect();
        let mut config = String::from("[cluster]\nenabled = true\n");
        for node in &nodes {
            config.push_str(&format!(
                "\n[[cluster.nodes]]\nname = \"kig-node-{id}\"\nip = \"127.0.0.1\"\nreplica_id = {id}\nports = {{ tcp = {tcp}, tcp_replica = {replica} }}\n",
                id = node.replica_id,
                tcp = node.tcp,
                replica = node.replica
            ));
            if let Some(host) = node.advertised {
                config.push_str(&format!("advertised_address = \"{host}\"\n"));
            }
        }
        // Before any node starts: the cluster's own logins follow its metadata to the proxy.
        let front = match nodes.first().filter(|n| n.advertised.is_some()) {
            Some(node) => Some(
                StallProxy::start(node.client_address().parse()?, node.address().parse()?)
                    .await
                    .with_context(|| format!("starting the proxy in front of node 0 on {}", node.client_address()))?,
            ),
            None => None,
        };
        std::fs::write(dir.join("config.toml"), config)?;
        let cluster = IggyCluster {
            binary: binary.to_path_buf(),
            dir,
            nodes: Mutex::new(nodes),
            front,
            username: "iggy".into(),
            password: "iggy".into(),
        };
        let leader = cluster.boot().await?;
        Ok((cluster, leader))
    }

    /// Starts every node, one after another as [`IggyCluster::start`] says, on the ports and data
    /// directories they have (a first start, or a start after the whole cluster stopped); returns
    /// the leader's replica id once every node takes a login and all agree on it.
    async fn boot(&self) -> anyhow::Result<u32> {
        // A lone node takes no login (a login is replicated, and one node is no majority): the
        // first waits for its listener only.
        for id in 0..NODES as u32 {
            self.spawn(id)?;
            self.wait_listening(id, START_TIMEOUT).await?;
            if id == 1 {
                self.wait_view("two nodes elect a leader", START_TIMEOUT, |v| v.leader.is_some())
                    .await?;
            }
        }
        self.wait_agreed(START_TIMEOUT).await
    }

    /// SIGKILLs every running node and reaps it: the whole cluster stops at once.
    pub fn kill_all(&self) -> anyhow::Result<()> {
        for id in self.running() {
            self.kill(id)?;
        }
        Ok(())
    }

    /// Stops every running node as an operator stops a cluster: SIGTERM to each at once, then
    /// waits for each to exit, SIGKILLing one that has not within `within`. Returns the replica
    /// ids that had to be SIGKILLed.
    pub async fn stop_all(&self, within: Duration) -> anyhow::Result<Vec<u32>> {
        let running = self.running();
        for &id in &running {
            let pid = self.lock()[id as usize].child.as_ref().map(Child::id);
            let Some(pid) = pid else { continue };
            let sent = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .context("running kill -TERM")?;
            ensure!(sent.success(), "kill -TERM {pid} (Iggy node {id}) failed: {sent}");
        }
        let deadline = Instant::now() + within;
        let mut killed = Vec::new();
        for id in running {
            loop {
                let exited = {
                    let mut nodes = self.lock();
                    let node = &mut nodes[id as usize];
                    match node.child.as_mut().map(|c| c.try_wait()) {
                        Some(Ok(Some(_))) | None => {
                            node.child = None;
                            true
                        }
                        Some(Ok(None)) => false,
                        Some(Err(e)) => bail!("waiting for Iggy node {id}: {e}"),
                    }
                };
                if exited {
                    break;
                }
                if Instant::now() >= deadline {
                    self.kill(id)?;
                    killed.push(id);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(killed)
    }

    /// Starts every node again after [`IggyCluster::kill_all`] or [`IggyCluster::stop_all`], on
    /// the same ports and data directories, one after another, each once the one before it
    /// listens (no election is waited for between them: two restarted nodes may need the third's
    /// log to finish their view change, which left a restart with nodes 0 and 1 refusing every
    /// login for 60 s); returns the leader's replica id once all agree.
    pub async fn restart_all(&self) -> anyhow::Result<u32> {
        if let Some(id) = self.running().first() {
            bail!("Iggy node {id} is still running: stop the whole cluster first");
        }
        for id in 0..NODES as u32 {
            self.spawn(id)?;
            self.wait_listening(id, START_TIMEOUT).await?;
        }
        self.wait_agreed(START_TIMEOUT).await
    }

    /// Every node's client address, comma separated: the gateway's `--iggy-address` roster
    /// (CLUSTER-ROSTER-1), each node by the address the cluster's metadata names it.
    pub fn roster(&self) -> String {
        self.lock()
            .iter()
            .map(Node::client_address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The address node `id` listens on (for a fronted node 0, behind its proxy).
    pub fn address(&self, id: u32) -> String {
        self.lock()[id as usize].address()
    }

    /// The address clients reach node `id` at, as the roster and the metadata name it.
    pub fn client_address(&self, id: u32) -> String {
        self.lock()[id as usize].client_address()
    }

    /// The proxy in front of node 0, for a cluster [`IggyCluster::start_fronted`].
    pub fn front(&self) -> Option<&StallProxy> {
        self.front.as_ref()
    }

    /// SIGSTOPs node `id`: it keeps its sockets and answers nothing, to clients or to the other
    /// nodes, which elect another primary. Drop still SIGKILLs it.
    pub fn freeze(&self, id: u32) -> anyhow::Result<()> {
        let pid = self.lock()[id as usize]
            .child
            .as_ref()
            .map(Child::id)
            .with_context(|| format!("Iggy node {id} is not running"))?;
        let sent = Command::new("kill")
            .arg("-STOP")
            .arg(pid.to_string())
            .status()
            .context("running kill -STOP")?;
        ensure!(sent.success(), "kill -STOP {pid} (Iggy node {id}) failed: {sent}");
        self.lock()[id as usize].frozen = true;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn log_path(&self, id: u32) -> PathBuf {
        self.dir.join(format!("node-{id}.log"))
    }

    /// The last lines node `id` logged, for a failure's message.
    pub fn log_tail(&self, id: u32, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Starts node `id`'s process on its ports and data directory (kept across restarts).
    fn spawn(&self, id: u32) -> anyhow::Result<()> {
        let mut nodes = self.lock();
        let node = &mut nodes[id as usize];
        if node.child.is_some() {
            bail!("Iggy node {id} is running already");
        }
        let home = self.dir.join(format!("node-{id}"));
        std::fs::create_dir_all(&home)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(id))?;
        let child = Command::new(&self.binary)
            .arg("--replica-id")
            .arg(id.to_string())
            .current_dir(&home)
            .env("IGGY_CONFIG_PATH", self.dir.join("config.toml"))
            .env("IGGY_SYSTEM_PATH", home.join("data"))
            .env("IGGY_TCP_ADDRESS", node.address())
            .env("IGGY_HTTP_ENABLED", "false")
            .env("IGGY_QUIC_ENABLED", "false")
            .env("IGGY_WEBSOCKET_ENABLED", "false")
            .env("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "1")
            .env("IGGY_SYSTEM_SHARDING_PIN_CORES", "false")
            .env("IGGY_ROOT_USERNAME", &self.username)
            .env("IGGY_ROOT_PASSWORD", &self.password)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} --replica-id {id}", self.binary.display()))?;
        node.child = Some(child);
        node.frozen = false;
        Ok(())
    }

    /// SIGKILLs node `id` and reaps it.
    pub fn kill(&self, id: u32) -> anyhow::Result<()> {
        let mut nodes = self.lock();
        let Some(mut child) = nodes[id as usize].child.take() else {
            bail!("Iggy node {id} is not running");
        };
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// Starts the killed node `id` again on its data and waits until it takes a login and the
    /// cluster names every node healthy under one leader.
    pub async fn restart(&self, id: u32) -> anyhow::Result<()> {
        self.spawn(id)?;
        self.wait_login(id, START_TIMEOUT).await?;
        self.wait_agreed(START_TIMEOUT).await.map(|_| ())
    }

    /// The replica ids running now.
    pub fn running(&self) -> Vec<u32> {
        self.lock()
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.replica_id)
            .collect()
    }

    /// A new SDK client logged in at node `id`, bounded. It stays there: the SDK's auto-login
    /// would follow the cluster's metadata to the leader, and so ask a node other than `id`
    /// (or stall on a frozen leader's proxy).
    async fn login(&self, id: u32) -> anyhow::Result<IggyClient> {
        let config = TcpClientConfig {
            server_address: self.address(id),
            auto_login: AutoLogin::Disabled,
            reconnection: TcpClientReconnectionConfig {
                enabled: false,
                ..TcpClientReconnectionConfig::default()
            },
            ..TcpClientConfig::default()
        };
        let client = IggyClient::create(ClientWrapper::Tcp(TcpClient::create(Arc::new(config))?), None, None);
        let login = async {
            client.connect().await?;
            let wrapper = client.client();
            let transport = wrapper.read().await;
            transport.login_user(&self.username, &self.password).await
        };
        match tokio::time::timeout(ASK_TIMEOUT, login).await {
            Ok(Ok(_)) => Ok(client),
            Ok(Err(e)) => {
                let _ = client.shutdown().await;
                bail!("login at node {id}: {e}")
            }
            Err(_) => {
                let _ = client.shutdown().await;
                bail!("login at node {id}: no answer within {ASK_TIMEOUT:?}")
            }
        }
    }

    /// Waits until node `id` accepts TCP connections, or its process exits, or `within` passes.
    async fn wait_listening(&self, id: u32, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        let address = self.address(id);
        loop {
            if tokio::net::TcpStream::connect(&address).await.is_ok() {
                return Ok(());
            }
            self.check_alive(id)?;
            if Instant::now() >= deadline {
                bail!(
                    "Iggy node {id} did not listen on {address} within {within:?}; its log ends:\n{}",
                    self.log_tail(id, 20)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fails when node `id`'s process has exited.
    fn check_alive(&self, id: u32) -> anyhow::Result<()> {
        let exited = self.lock()[id as usize]
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        match exited {
            Some(status) => bail!(
                "Iggy node {id} exited with {status}; its log ends:\n{}",
                self.log_tail(id, 20)
            ),
            None => Ok(()),
        }
    }

    /// Waits until a login at node `id` succeeds, or its process exits, or `within` passes.
    async fn wait_login(&self, id: u32, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.login(id).await {
                Ok(client) => {
                    let _ = client.shutdown().await;
                    return Ok(());
                }
                Err(e) => e,
            };
            self.check_alive(id)?;
            if Instant::now() >= deadline {
                bail!(
                    "Iggy node {id} took no login within {within:?} ({last}); its log ends:\n{}",
                    self.log_tail(id, 20)
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// The cluster's metadata as node `id` answers it (through a login there).
    pub async fn metadata(&self, id: u32) -> anyhow::Result<ClusterMetadata> {
        let client = self.login(id).await?;
        let metadata = tokio::time::timeout(ASK_TIMEOUT, client.get_cluster_metadata()).await;
        let _ = client.shutdown().await;
        match metadata {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(e)) => bail!("cluster metadata from node {id}: {e}"),
            Err(_) => bail!("cluster metadata from node {id}: no answer within {ASK_TIMEOUT:?}"),
        }
    }

    /// What the running nodes say about the cluster: the first that answers.
    pub async fn view(&self) -> anyhow::Result<View> {
        let mut why = Vec::new();
        let frozen: Vec<u32> = self.lock().iter().filter(|n| n.frozen).map(|n| n.replica_id).collect();
        for id in self.running().into_iter().filter(|id| !frozen.contains(id)) {
            match self.metadata(id).await {
                Ok(metadata) => return Ok(self.view_of(&metadata)),
                Err(e) => why.push(e.to_string()),
            }
        }
        bail!("no running node answered: {}", why.join("; "))
    }

    fn view_of(&self, metadata: &ClusterMetadata) -> View {
        let nodes = self.lock();
        let id_of = |port: u16| nodes.iter().find(|n| n.tcp == port).map(|n| n.replica_id);
        let healthy: Vec<u32> = metadata
            .nodes
            .iter()
            .filter(|n| n.status == ClusterNodeStatus::Healthy)
            .filter_map(|n| id_of(n.endpoints.tcp))
            .collect();
        let leader = metadata
            .nodes
            .iter()
            .find(|n| n.role == ClusterNodeRole::Leader && n.status == ClusterNodeStatus::Healthy)
            .and_then(|n| id_of(n.endpoints.tcp));
        View { leader, healthy }
    }

    /// Waits until the cluster's view satisfies `done`, for at most `within`.
    pub async fn wait_view(&self, what: &str, within: Duration, done: impl Fn(&View) -> bool) -> anyhow::Result<View> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.view().await {
                Ok(view) if done(&view) => return Ok(view),
                Ok(view) => format!("{view:?}"),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                bail!("the Iggy cluster did not agree that {what} within {within:?}; last: {last}");
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Waits until every running node takes a login and the cluster names one healthy leader
    /// with every running node healthy; returns the leader's replica id.
    pub async fn wait_agreed(&self, within: Duration) -> anyhow::Result<u32> {
        let deadline = Instant::now() + within;
        for id in self.running() {
            self.wait_login(id, deadline.saturating_duration_since(Instant::now()))
                .await?;
        }
        let running = self.running();
        let view = self
            .wait_view(
                "every running node is healthy under one leader",
                deadline.saturating_duration_since(Instant::now()),
                |v| v.leader.is_some() && running.iter().all(|id| v.healthy.contains(id)),
            )
            .await?;
        Ok(view.leader.expect("waited for a leader"))
    }

    /// The leader's replica id, waiting (bounded) while none is named.
    pub async fn leader(&self, within: Duration) -> anyhow::Result<u32> {
        let view = self
            .wait_view("a leader is named", within, |v| v.leader.is_some())
            .await?;
        Ok(view.leader.expect("waited for a leader"))
    }
}
