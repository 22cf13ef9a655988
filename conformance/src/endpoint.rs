//! The endpoint a case runs against, and an in-process embedded gateway to run against when no
//! endpoint is given.

use crate::native::{NativeBackend, NativeHandle};
use crate::profile::Profile;
use kafka_iggy_gateway::auth::settings::SaslSettings;
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::SystemClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_iggy_gateway::server::{serve, Shutdown};
use kafka_iggy_gateway::tls::TlsSettings;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A Kafka endpoint and what the suite knows about its configuration. Cases that need a
/// known setting skip (and say so) when it is unknown.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub bootstrap: String,
    /// The gateway's max_frame_size, when known.
    pub max_frame_size: Option<usize>,
    /// The gateway's instance id, when known.
    pub instance_id: Option<u16>,
    /// Whether to expect this spec or Kafka's own behaviour where the two differ.
    pub profile: Profile,
    /// The gateway's backend, to act on as a native Iggy client: known only when the suite runs
    /// the gateway itself.
    pub native: Option<NativeHandle>,
    /// How to create a topic when the endpoint has no CreateTopics (librdkafka's mock cluster
    /// creates topics only through its own API); `None`: through CreateTopics, as a client would.
    pub topic_creator: Option<TopicCreator>,
}

/// The function behind a [`TopicCreator`]: topic name and partition count.
type CreateTopicFn = dyn Fn(&str, i32) -> anyhow::Result<()> + Send + Sync;

/// Creates a topic (name, partition count) out of band, for an endpoint without CreateTopics.
#[derive(Clone)]
pub struct TopicCreator(Arc<CreateTopicFn>);

impl TopicCreator {
    pub fn new(create: impl Fn(&str, i32) -> anyhow::Result<()> + Send + Sync + 'static) -> Self {
        TopicCreator(Arc::new(create))
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        (self.0)(topic, partitions)
    }
}

impl std::fmt::Debug for TopicCreator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TopicCreator(..)")
    }
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

impl Endpoint {
    /// An endpoint known only by its address, held to this spec.
    pub fn at(bootstrap: impl Into<String>) -> Self {
        Endpoint {
            bootstrap: bootstrap.into(),
            max_frame_size: None,
            instance_id: None,
            profile: Profile::Gateway,
            native: None,
            topic_creator: None,
        }
    }

    /// A topic name no other case in this process uses.
    pub fn unique_topic(&self, prefix: &str) -> String {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-{}-{n}", std::process::id())
    }
}

/// The max_frame_size the in-process gateway runs with: small enough that a test can exceed
/// it cheaply, large enough for every case's records.
pub const TEST_MAX_FRAME_SIZE: usize = 4 * 1024 * 1024;
/// The instance id the in-process gateway runs with.
pub const TEST_INSTANCE_ID: u16 = 4242;

/// How to start a [`LocalGateway`]; the defaults suit the suite.
#[derive(Clone, Default)]
pub struct LocalOptions {
    /// Listen here instead of an OS-chosen port (to restart a gateway where clients expect it).
    pub listen: Option<SocketAddr>,
    /// The address Metadata names for this gateway instead of its own (a proxy in front of it).
    pub advertised: Option<String>,
    pub instance_id: Option<u16>,
    /// Other gateways, as `id=host:port`.
    pub peers: Vec<String>,
    /// How often peers are probed (GROUP-COORDINATOR-2); the gateway's default unless set.
    pub peer_probe_interval_ms: Option<u64>,
    /// Kafka's group.min.session.timeout.ms; the suite lowers it so evictions come quickly.
    pub group_min_session_timeout_ms: Option<u64>,
    /// The `[limits]` table (docs/spec/limits.md); the hostile cases' suite lowers some so that
    /// its attacks meet them.
    pub limits: LimitSettings,
    /// The listener's TLS (docs/spec/auth.md, "TLS"); `None` serves plaintext.
    pub tls: Option<TlsSettings>,
    /// The CA that signed `tls`'s certificate, which clients must trust; reported as
    /// [`LocalGateway::tls_ca`]. Defaults to the certificate itself (right for a self-signed
    /// one).
    pub tls_ca: Option<PathBuf>,
    /// The `[sasl]` table (docs/spec/auth.md); unset serves without authentication.
    pub sasl: SaslSettings,
    /// A native client on the same backend, handed to cases as [`Endpoint::native`].
    pub native: Option<Arc<dyn NativeBackend>>,
    /// Create a topic on first Metadata or Produce naming it (off unless set; the compatibility
    /// tier turns it on because librdkafka's tests expect a broker that auto-creates).
    pub auto_create_topics: Option<bool>,
    /// Partitions of an auto-created topic (1 unless set).
    pub default_partitions: Option<u32>,
    /// Command-line flags, as the gateway binary takes them, for what the fields above do not
    /// say; a field above that is set wins over its flag.
    pub extra_args: Vec<String>,
}

/// The group.min.session.timeout.ms the in-process gateway runs with.
pub const TEST_MIN_SESSION_TIMEOUT_MS: u64 = 500;

/// A gateway serving on a loopback port until dropped; by default on the embedded backend.
pub struct LocalGateway<B: Backend = EmbeddedBackend> {
    pub endpoint: Endpoint,
    /// The CA a client must trust, when the gateway runs TLS. (Kept here rather than on
    /// [`Endpoint`], which callers build as a struct literal.)
    pub tls_ca: Option<PathBuf>,
    pub gateway: Arc<Gateway<B>>,
    shutdown: Shutdown,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl LocalGateway<EmbeddedBackend> {
    /// Starts a gateway on a fresh embedded backend, on 127.0.0.1 with an OS-chosen port.
    /// Cases get the model itself as their native handle.
    pub async fn start() -> anyhow::Result<Self> {
        let backend = shared_backend();
        let options = LocalOptions {
            native: Some(backend.clone()),
            ..LocalOptions::default()
        };
        LocalGateway::serve(backend, options).await
    }
}

impl<B: Backend> LocalGateway<B> {
    /// Starts a gateway on `backend` as `options` say (the real-Iggy tier passes its SDK backend).
    pub async fn serve(backend: Arc<B>, options: LocalOptions) -> anyhow::Result<Self> {
        let bind = options.listen.unwrap_or_else(|| "127.0.0.1:0".parse().expect("valid"));
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let addr: SocketAddr = listener.local_addr()?;
        let extra = <Args as clap::Parser>::try_parse_from(
            std::iter::once("kafka-iggy-gateway".to_string()).chain(options.extra_args.iter().cloned()),
        )?;
        let instance_id = options.instance_id.or(extra.instance_id).unwrap_or(TEST_INSTANCE_ID);
        let args = Args {
            listen: Some(addr),
            advertised: options.advertised.clone(),
            instance_id: Some(instance_id),
            max_frame_size: Some(TEST_MAX_FRAME_SIZE),
            peers: if options.peers.is_empty() {
                extra.peers.clone()
            } else {
                options.peers.clone()
            },
            peer_probe_interval_ms: options.peer_probe_interval_ms.or(extra.peer_probe_interval_ms),
            auto_create_topics: options.auto_create_topics.or(extra.auto_create_topics),
            default_partitions: options.default_partitions.or(extra.default_partitions),
            ..extra
        };
        let file = FileConfig {
            group_min_session_timeout_ms: Some(
                options
                    .group_min_session_timeout_ms
                    .unwrap_or(TEST_MIN_SESSION_TIMEOUT_MS),
            ),
            limits: options.limits.clone(),
            tls: options.tls.clone().unwrap_or_default(),
            sasl: options.sasl.clone(),
            ..FileConfig::default()
        };
        let config = Config::resolve(args, file)?;
        let native = options
            .native
            .clone()
            .map(|backend| NativeHandle::new(config.topics.default_stream(), backend));
        let seed = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let gateway = Arc::new(Gateway::new(
            Arc::new(config),
            backend,
            Arc::new(SystemClock),
            kafka_iggy_gateway::clock::SharedRng::seeded(seed),
        ));
        let shutdown = Shutdown::default();
        let task = tokio::spawn(serve(listener, gateway.clone(), shutdown.clone()));
        let tls_ca = options
            .tls
            .as_ref()
            .and_then(|tls| tls.tls_cert.as_ref())
            .map(|cert| options.tls_ca.clone().unwrap_or_else(|| cert.clone()));
        Ok(Self {
            tls_ca,
            endpoint: Endpoint {
                max_frame_size: Some(TEST_MAX_FRAME_SIZE),
                instance_id: Some(instance_id),
                native,
                ..Endpoint::at(addr.to_string())
            },
            gateway,
            shutdown,
            task: Some(task),
        })
    }

    /// Waits until the gateway has run its warm-up probe rounds and coordinates its own groups
    /// (GROUP-COORDINATOR-4); at once for a gateway without peers. Fails after 30 s.
    pub async fn warmed_up(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while !self.gateway.peer_health.is_warm() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the gateway on {} never finished its warm-up probe rounds",
                self.endpoint.bootstrap
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Stops accepting, lets connections finish, and waits for the server to end.
    pub async fn stop(mut self) {
        self.shutdown.trigger();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A fresh embedded backend on the system clock, to share between gateways.
pub fn shared_backend() -> Arc<EmbeddedBackend> {
    Arc::new(EmbeddedBackend::new(
        Arc::new(SystemClock),
        kafka_iggy_gateway::backend::embedded::EmbeddedConfig::default(),
    ))
}

impl<B: Backend> Drop for LocalGateway<B> {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}
