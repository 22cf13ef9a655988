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

    async fn stop(self) {
        self.gateway.stop().await
    }
}

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
