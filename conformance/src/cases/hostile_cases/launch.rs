//! Gateways a hostile case starts for itself. The attacks of issue 50 on peer probes, address
//! keys, login guessing and sessions need two peered gateways, or settings of their own, so they
//! cannot run against one given endpoint. Such a case asks a [`Launcher`] for each gateway by
//! its command-line flags. The suite's launcher, [`InProcess`], serves them in this process on
//! one embedded model; the hostile bench (conformance/benches/hostile.rs) starts the release
//! binary, so that the RSS it samples is a gateway's own.

use crate::endpoint::{Endpoint, LocalGateway, LocalOptions};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::clock::SystemClock;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Starts gateways for a case.
pub trait Launcher: Send + Sync {
    type Gateway: Launched;

    /// A gateway listening on `listen` for Kafka clients, configured by `flags` as the binary
    /// takes them; returns once it listens.
    fn start(
        &self,
        listen: SocketAddr,
        flags: Vec<String>,
    ) -> impl Future<Output = anyhow::Result<Self::Gateway>> + Send;

    /// The Iggy model under every gateway it starts, where a case can make users and tokens;
    /// `None` when the backend is out of the case's reach (a gateway in another process).
    fn model(&self) -> Option<Arc<EmbeddedBackend>>;
}

/// A gateway a [`Launcher`] started, and what a case may read of it besides the wire.
pub trait Launched: Send + Sync {
    fn endpoint(&self) -> &Endpoint;

    /// The peer-probe rounds it has run since it started (GROUP-COORDINATOR-2): what a case
    /// waits on to know probes ran, rather than for a time.
    fn probe_rounds(&self) -> impl Future<Output = anyhow::Result<u64>> + Send;

    /// The logins it has asked of Iggy since it started, failed ones included.
    fn iggy_logins(&self) -> impl Future<Output = anyhow::Result<u64>> + Send;

    /// How often `rule` refused, closed, clamped or delayed something
    /// (`kafka_iggy_gateway_limits_hit_total`, docs/operating.md). In process the count is the
    /// process's, every gateway's in it: a case reads it before and after, and the suite runs no
    /// other case that hits the same rule.
    fn limit_hits(&self, rule: &str) -> impl Future<Output = anyhow::Result<u64>> + Send;

    /// The process serving it, whose memory a bench samples: this one for a gateway in process.
    fn pid(&self) -> u32;

    fn stop(self) -> impl Future<Output = ()> + Send;
}

/// Gateways served in this process on one fresh embedded model, shared by every gateway it
/// starts (as peers share one Iggy).
pub struct InProcess {
    model: Arc<EmbeddedBackend>,
}

impl InProcess {
    /// A fresh model whose logins each take `login_delay`, as a real server's round trip does,
    /// so that logins that overlap can be told from logins that take turns.
    pub fn new(login_delay: Duration) -> Self {
        Self {
            model: Arc::new(EmbeddedBackend::new(
                Arc::new(SystemClock),
                EmbeddedConfig {
                    login_delay,
                    ..EmbeddedConfig::default()
                },
            )),
        }
    }
}

impl Default for InProcess {
    fn default() -> Self {
        Self::new(Duration::ZERO)
    }
}

impl Launcher for InProcess {
    type Gateway = InProcessGateway;

    async fn start(&self, listen: SocketAddr, flags: Vec<String>) -> anyhow::Result<InProcessGateway> {
        let gateway = LocalGateway::serve(
            self.model.clone(),
            LocalOptions {
                listen: Some(listen),
                extra_args: flags,
                ..LocalOptions::default()
            },
        )
        .await?;
        Ok(InProcessGateway {
            gateway,
            model: self.model.clone(),
        })
    }

    fn model(&self) -> Option<Arc<EmbeddedBackend>> {
        Some(self.model.clone())
    }
}

/// A gateway [`InProcess`] started.
pub struct InProcessGateway {
    pub gateway: LocalGateway<EmbeddedBackend>,
    model: Arc<EmbeddedBackend>,
}

impl Launched for InProcessGateway {
    fn endpoint(&self) -> &Endpoint {
        &self.gateway.endpoint
    }

    async fn probe_rounds(&self) -> anyhow::Result<u64> {
        Ok(self.gateway.gateway.peer_health.rounds())
    }

    /// The model counts the logins of every gateway on it; the cases that read it start one.
    async fn iggy_logins(&self) -> anyhow::Result<u64> {
        Ok(self.model.logins_attempted())
    }

    async fn limit_hits(&self, rule: &str) -> anyhow::Result<u64> {
        Ok(count_of_limit(&kafka_iggy_gateway::metrics::metrics().encode(), rule))
    }

    fn pid(&self) -> u32 {
        std::process::id()
    }

    async fn stop(self) {
        self.gateway.stop().await
    }
}

/// `rule`'s count in a scrape of the gateway's metrics.
pub fn count_of_limit(scrape: &str, rule: &str) -> u64 {
    crate::ops_scrape::sum(
        scrape,
        "kafka_iggy_gateway_limits_hit_total",
        &format!("rule=\"{rule}\""),
    ) as u64
}

/// The root user of the embedded backend, in process and in the binary alike (the gateway's
/// default `iggy_username` and `iggy_password`).
pub const ROOT: (&str, &str) = ("iggy", "iggy");

/// `n` free loopback addresses, all held at once while picking so that they differ.
pub fn free_addresses(n: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<std::io::Result<Vec<_>>>()?)
}

/// Gateways started as the release binary on the embedded backend, each with an operations
/// listener of its own from which its counts are read (docs/operating.md, "Metrics"); their
/// output appended to `<log_dir>/<case port>.log`. What the hostile bench runs these cases on,
/// so that a gateway's memory is its own process's.
pub struct Release {
    binary: std::path::PathBuf,
    log_dir: std::path::PathBuf,
}

impl Release {
    /// Starts `binary` (`crate::bench::release_gateway_binary`), logging under `log_dir`.
    pub fn new(binary: std::path::PathBuf, log_dir: std::path::PathBuf) -> Self {
        Self { binary, log_dir }
    }
}

impl Launcher for Release {
    type Gateway = ReleaseGateway;

    async fn start(&self, listen: SocketAddr, flags: Vec<String>) -> anyhow::Result<ReleaseGateway> {
        anyhow::ensure!(
            self.binary.is_file(),
            "no gateway binary at {} (`cargo build --release -p kafka-iggy-gateway` builds it)",
            self.binary.display()
        );
        let ops = free_addresses(1)?[0];
        let mut args = vec![
            "--backend".to_string(),
            "embedded".to_string(),
            "--listen".to_string(),
            listen.to_string(),
            "--metrics-listen".to_string(),
            ops.to_string(),
        ];
        args.extend(flags);
        let launch = crate::peers::Launch {
            program: self.binary.clone(),
            args,
            env: Vec::new(),
        };
        let log = self.log_dir.join(format!("hostile-gateway-{}.log", listen.port()));
        // Starting waits, with blocking sleeps between connection attempts, until it listens.
        let process = tokio::task::spawn_blocking(move || {
            let _ = std::fs::remove_file(&log);
            crate::peers::process::PeerProcess::start(&launch, listen.port(), &log)
        })
        .await?
        .map_err(|why| anyhow::anyhow!("the gateway binary: {why}"))?;
        Ok(ReleaseGateway {
            endpoint: Endpoint::at(listen.to_string()),
            process,
            ops,
        })
    }

    fn model(&self) -> Option<Arc<EmbeddedBackend>> {
        None
    }
}

/// A gateway [`Release`] started.
pub struct ReleaseGateway {
    endpoint: Endpoint,
    process: crate::peers::process::PeerProcess,
    ops: SocketAddr,
}

impl ReleaseGateway {
    async fn scrape(&self) -> anyhow::Result<String> {
        let (status, body) = crate::ops_scrape::get(self.ops, "/metrics").await?;
        anyhow::ensure!(
            status == 200,
            "/metrics of {} answered {status}",
            self.endpoint.bootstrap
        );
        Ok(body)
    }
}

impl Launched for ReleaseGateway {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn probe_rounds(&self) -> anyhow::Result<u64> {
        let scrape = self.scrape().await?;
        Ok(crate::ops_scrape::sum(&scrape, "kafka_iggy_gateway_peer_probe_rounds_total", "") as u64)
    }

    async fn iggy_logins(&self) -> anyhow::Result<u64> {
        let scrape = self.scrape().await?;
        Ok(crate::ops_scrape::sum(
            &scrape,
            "kafka_iggy_gateway_backend_call_duration_seconds_count",
            "operation=\"open_session\"",
        ) as u64)
    }

    async fn limit_hits(&self, rule: &str) -> anyhow::Result<u64> {
        Ok(count_of_limit(&self.scrape().await?, rule))
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    async fn stop(mut self) {
        // SIGTERM, then SIGKILL if it lingers: blocking waits, off the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || self.process.stop()).await;
    }
}
