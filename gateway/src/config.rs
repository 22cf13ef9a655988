//! Gateway configuration: flags, `IGGY_KAFKA_*` environment variables and an optional TOML file
//! (flags and variables win over the file), and the Kafka-topic-to-Iggy mapping it defines.

use crate::auth::credentials::Secret;
use crate::auth::settings::{Sasl, SaslSettings};
use crate::limits::{LimitSettings, Limits, MAX_FRAME_SIZE_CEILING};
use crate::tls::{IggyTlsSettings, TlsSettings};
use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Which Iggy the gateway talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The in-process model of Iggy (default: runs with no setup).
    #[default]
    Embedded,
    /// A real Iggy server, through the SDK.
    Iggy,
}

/// How log lines are written (docs/operating.md, "Logs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event; coloured only when the output is a terminal.
    #[default]
    Text,
    /// One JSON object per line, span fields included, for log shippers.
    Json,
}

/// Where one Kafka topic lives in Iggy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct IggyTarget {
    pub stream: String,
    pub topic: String,
}

/// Command line; each flag also reads an `IGGY_KAFKA_*` variable.
#[derive(Debug, Parser, Default)]
#[command(
    name = "kafka-iggy-gateway",
    about = "A Kafka wire-protocol gateway in front of Apache Iggy"
)]
pub struct Args {
    /// TOML configuration file; flags and environment variables override it.
    #[arg(long, env = "IGGY_KAFKA_CONFIG")]
    pub config: Option<PathBuf>,
    #[arg(long, env = "IGGY_KAFKA_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// host:port clients are told to connect to (defaults to the listen address).
    #[arg(long, env = "IGGY_KAFKA_ADVERTISED")]
    pub advertised: Option<String>,
    /// 0..=65535; high 16 bits of every producer id, and this gateway's node id.
    #[arg(long, env = "IGGY_KAFKA_INSTANCE_ID")]
    pub instance_id: Option<u16>,
    /// Other gateways fronting the same Iggy, comma separated, each as id=host:port/peer_port
    /// (or id=host:port/peer_host:peer_port): its Kafka listener, then its peer channel
    /// (GROUP-COORDINATOR-6).
    #[arg(long, env = "IGGY_KAFKA_PEERS", value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Where this gateway answers its peers' probes, apart from Kafka clients
    /// (GROUP-COORDINATOR-6); required with peers. Reachable by the peers only.
    #[arg(long, env = "IGGY_KAFKA_PEER_LISTEN")]
    pub peer_listen: Option<SocketAddr>,
    /// The secret every peer gateway shares, at least 16 bytes, that probes and answers are
    /// authenticated with (GROUP-COORDINATOR-7); required with peers. Prefer the variable or the
    /// file to the flag, which other users of the host can read.
    #[arg(long, env = "IGGY_KAFKA_PEER_SECRET")]
    pub peer_secret: Option<Secret>,
    /// How long the runtime serving a peer's clients may go without running before its probes
    /// count as failed (GROUP-COORDINATOR-8; default 10000).
    #[arg(long, env = "IGGY_KAFKA_PEER_STALL_LIMIT_MS")]
    pub peer_stall_limit_ms: Option<u64>,
    /// How often each peer gateway is probed, and how long a probe may take
    /// (GROUP-COORDINATOR-2; default 1000).
    #[arg(long, env = "IGGY_KAFKA_PEER_PROBE_INTERVAL_MS")]
    pub peer_probe_interval_ms: Option<u64>,
    /// Failed probes in a row after which a peer's groups move (GROUP-COORDINATOR-2; default 3).
    #[arg(long, env = "IGGY_KAFKA_PEER_DOWN_AFTER_PROBES")]
    pub peer_down_after_probes: Option<u32>,
    #[arg(long, env = "IGGY_KAFKA_MAX_FRAME_SIZE")]
    pub max_frame_size: Option<usize>,
    #[arg(long, env = "IGGY_KAFKA_BACKEND", value_enum)]
    pub backend: Option<BackendKind>,
    /// The Iggy server, or every node of an Iggy cluster: HOST:PORT, comma separated
    /// (CLUSTER-ROSTER-1).
    #[arg(long, env = "IGGY_KAFKA_IGGY_ADDRESS")]
    pub iggy_address: Option<String>,
    /// The longest a request waits for an Iggy primary, failover included, before the client is
    /// answered with a retriable error (CLUSTER-FAILOVER-2, default 10000).
    #[arg(long, env = "IGGY_KAFKA_IGGY_FAILOVER_TIMEOUT_MS")]
    pub iggy_failover_timeout_ms: Option<u64>,
    /// Also dial a cluster leader that no `iggy_address` entry names, when a listed node names
    /// it, with that node's TLS name (CLUSTER-ROSTER-2; default false: only listed nodes).
    #[arg(long, env = "IGGY_KAFKA_IGGY_FOLLOW_UNLISTED_LEADER")]
    pub iggy_follow_unlisted_leader: Option<bool>,
    #[arg(long, env = "IGGY_KAFKA_IGGY_USERNAME")]
    pub iggy_username: Option<String>,
    #[arg(long, env = "IGGY_KAFKA_IGGY_PASSWORD")]
    pub iggy_password: Option<Secret>,
    #[arg(long, env = "IGGY_KAFKA_DEFAULT_STREAM")]
    pub default_stream: Option<String>,
    #[arg(long, env = "IGGY_KAFKA_DEFAULT_PARTITIONS")]
    pub default_partitions: Option<u32>,
    #[arg(long, env = "IGGY_KAFKA_AUTO_CREATE_TOPICS")]
    pub auto_create_topics: Option<bool>,
    /// A connection with no request for this long is closed (PROTO-TIMEOUT-1).
    #[arg(long, env = "IGGY_KAFKA_IDLE_TIMEOUT_MS")]
    pub idle_timeout_ms: Option<u64>,
    /// A started request frame must arrive within this (PROTO-TIMEOUT-1).
    #[arg(long, env = "IGGY_KAFKA_READ_TIMEOUT_MS")]
    pub read_timeout_ms: Option<u64>,
    /// A response must be written within this (PROTO-TIMEOUT-1).
    #[arg(long, env = "IGGY_KAFKA_WRITE_TIMEOUT_MS")]
    pub write_timeout_ms: Option<u64>,
    /// Kafka's group.min.session.timeout.ms (default 6000).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS")]
    pub group_min_session_timeout_ms: Option<u64>,
    /// Kafka's group.max.session.timeout.ms (default 1800000).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_SESSION_TIMEOUT_MS")]
    pub group_max_session_timeout_ms: Option<u64>,
    /// Members per group (GROUP-LIMIT-1, default 1000).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_MEMBERS")]
    pub group_max_members: Option<usize>,
    /// Groups this gateway coordinates (GROUP-LIMIT-1, default 10000).
    #[arg(long, env = "IGGY_KAFKA_MAX_GROUPS")]
    pub max_groups: Option<usize>,
    /// HTTP listener for /metrics, /healthz and /readyz (off unless set).
    #[arg(long, env = "IGGY_KAFKA_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// text (default) or json.
    #[arg(long, env = "IGGY_KAFKA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    #[command(flatten)]
    pub limits: LimitSettings,
    #[command(flatten)]
    pub producers: crate::producer_state::settings::ProducerArgs,
    #[command(flatten)]
    pub sasl: SaslSettings,
    #[command(flatten)]
    pub tls: TlsSettings,
    #[command(flatten)]
    pub iggy_tls: IggyTlsSettings,
}

/// The TOML file's shape; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<SocketAddr>,
    pub advertised: Option<String>,
    pub instance_id: Option<u16>,
    #[serde(default)]
    pub peers: Vec<String>,
    pub peer_listen: Option<SocketAddr>,
    pub peer_secret: Option<Secret>,
    pub peer_stall_limit_ms: Option<u64>,
    pub peer_probe_interval_ms: Option<u64>,
    pub peer_down_after_probes: Option<u32>,
    pub max_frame_size: Option<usize>,
    pub backend: Option<BackendKind>,
    pub iggy_address: Option<String>,
    pub iggy_failover_timeout_ms: Option<u64>,
    pub iggy_follow_unlisted_leader: Option<bool>,
    pub iggy_username: Option<String>,
    pub iggy_password: Option<Secret>,
    pub default_stream: Option<String>,
    pub default_partitions: Option<u32>,
    pub auto_create_topics: Option<bool>,
    pub idle_timeout_ms: Option<u64>,
    pub read_timeout_ms: Option<u64>,
    pub write_timeout_ms: Option<u64>,
    /// Kafka's group.min.session.timeout.ms (default 6000).
    pub group_min_session_timeout_ms: Option<u64>,
    pub group_max_session_timeout_ms: Option<u64>,
    pub group_max_members: Option<usize>,
    pub max_groups: Option<usize>,
    pub metrics_listen: Option<SocketAddr>,
    pub log_format: Option<LogFormat>,
    /// Kafka topic name -> Iggy stream and topic.
    #[serde(default)]
    pub topics: BTreeMap<String, IggyTarget>,
    /// The `[limits]` table (docs/spec/limits.md).
    #[serde(default)]
    pub limits: LimitSettings,
    /// The `[producers]` table (docs/spec/producer-ids.md).
    #[serde(default)]
    pub producers: crate::producer_state::settings::ProducerArgs,
    /// The `[sasl]` table (docs/spec/auth.md).
    #[serde(default)]
    pub sasl: SaslSettings,
    /// The `[tls]` table: the Kafka listener's TLS (docs/spec/auth.md).
    #[serde(default)]
    pub tls: TlsSettings,
    /// The `[iggy_tls]` table: the connection to Iggy over TLS (docs/spec/auth.md).
    #[serde(default)]
    pub iggy_tls: IggyTlsSettings,
}

/// A gateway node as Metadata reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: i32,
    pub host: String,
    pub port: i32,
}

/// The peer channel: where this gateway answers its peers' probes and where it probes theirs
/// (GROUP-COORDINATOR-6), and the secret they share (GROUP-COORDINATOR-7).
#[derive(Debug, Clone)]
pub struct PeerChannel {
    pub listen: SocketAddr,
    /// Each other gateway's peer channel, `host:port`, by node id.
    pub addresses: BTreeMap<i32, String>,
    pub secret: Secret,
    /// GROUP-COORDINATOR-8.
    pub stall_limit: Duration,
}

impl PeerChannel {
    /// What this gateway's responder needs of the configuration.
    pub fn responder_settings(&self, config: &Config) -> crate::peer_channel::ResponderSettings {
        crate::peer_channel::ResponderSettings {
            me: config.advertised.id,
            peers: self.addresses.keys().copied().collect(),
            secret: self.secret.clone(),
            stall_limit: self.stall_limit,
            // Ten probe periods without a probe: the peer is gone, or has a newer link.
            idle_timeout: (config.peer_probe_interval * 10).max(Duration::from_secs(10)),
        }
    }
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub advertised: Node,
    pub instance_id: u16,
    /// Every gateway fronting the same Iggy, this one included, sorted by id.
    pub peers: Vec<Node>,
    /// The period of the peer probes, and each probe's timeout (GROUP-COORDINATOR-2).
    pub peer_probe_interval: Duration,
    /// Failed probes in a row that count a peer down (GROUP-COORDINATOR-2).
    pub peer_down_after_probes: u32,
    /// Where peers probe each other; `Some` whenever another gateway is configured.
    pub peer_channel: Option<PeerChannel>,
    pub max_frame_size: usize,
    pub backend: BackendKind,
    /// One `HOST:PORT`, or a cluster's roster, comma separated (CLUSTER-ROSTER-1).
    pub iggy_address: String,
    /// CLUSTER-FAILOVER-2: the longest a request waits for an Iggy primary.
    pub iggy_failover_timeout: Duration,
    /// CLUSTER-ROSTER-2: whether a leader no roster entry names may be dialled.
    pub iggy_follow_unlisted_leader: bool,
    pub iggy_username: String,
    pub iggy_password: Secret,
    pub default_partitions: u32,
    pub auto_create_topics: bool,
    pub idle_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    pub topics: TopicMapping,
    pub group_limits: crate::groups::GroupLimits,
    pub limits: Limits,
    /// Idempotent producers' state (docs/spec/producer-ids.md).
    pub producers: crate::producer_state::ProducerStateSettings,
    pub sasl: Sasl,
    /// The listener's TLS, built from the `tls` settings at startup; `None` serves plaintext.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The connection to Iggy over TLS.
    pub iggy_tls: IggyTlsSettings,
    /// The operations listener (/metrics, /healthz, /readyz); `None`: off.
    pub metrics_listen: Option<SocketAddr>,
    pub log_format: LogFormat,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";
pub const DEFAULT_MAX_FRAME_SIZE: usize = 8 * 1024 * 1024;
pub const DEFAULT_STREAM: &str = "kafka";
/// CLUSTER-FAILOVER-2: well under the SDK's 30 s request timeout, above a failover with the
/// server's default `heartbeat_timeout` of 5 s (measured at 4.9 s: DIFF-15).
pub const DEFAULT_IGGY_FAILOVER_TIMEOUT_MS: u64 = 10_000;
/// A probe a second: a dead coordinator's groups move within about three seconds, well inside
/// the 10 s session timeout Kafka's consumers default to.
pub const DEFAULT_PEER_PROBE_INTERVAL_MS: u64 = 1_000;
pub const DEFAULT_PEER_DOWN_AFTER_PROBES: u32 = 3;
/// GROUP-COORDINATOR-8: a runtime that has not run for 10 s serves no client either (Kafka's
/// consumers time out a request after 30 s, their sessions after 45 s); far above the stalls of
/// hundreds of ms a hostile request may cause, which must not move groups.
pub const DEFAULT_PEER_STALL_LIMIT_MS: u64 = 10_000;

impl Default for Config {
    fn default() -> Self {
        Config::resolve(Args::default(), FileConfig::default()).expect("defaults are valid")
    }
}

/// A peer as configured: its node, and its peer channel's `host:port` when given after a `/`
/// (`id=host:port/peer_port` takes the Kafka listener's host).
fn parse_peer(spec: &str) -> anyhow::Result<(Node, Option<String>)> {
    let (kafka, channel) = match spec.split_once('/') {
        Some((kafka, channel)) => (kafka, Some(channel)),
        None => (spec, None),
    };
    let node = parse_node(kafka)?;
    let channel = match channel {
        None => None,
        Some(channel) => {
            let (host, port) = channel.rsplit_once(':').unwrap_or((&node.host, channel));
            let port: u16 = port.parse().with_context(|| format!("peer channel port in {spec:?}"))?;
            if host.is_empty() {
                bail!("peer {spec:?} has an empty peer channel host");
            }
            Some(format!("{host}:{port}"))
        }
    };
    Ok((node, channel))
}

fn parse_node(spec: &str) -> anyhow::Result<Node> {
    let (id, addr) = spec
        .split_once('=')
        .with_context(|| format!("peer {spec:?} is not id=host:port"))?;
    let (host, port) = addr
        .rsplit_once(':')
        .with_context(|| format!("peer {spec:?} has no port"))?;
    Ok(Node {
        id: id.parse().with_context(|| format!("peer id in {spec:?}"))?,
        host: host.to_string(),
        port: port.parse().with_context(|| format!("peer port in {spec:?}"))?,
    })
}

impl Config {
    /// Reads the file named by `args.config`, if any, and resolves.
    pub fn load(args: Args) -> anyhow::Result<Config> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        Config::resolve(args, file)
    }

    /// Flags and variables over the file over the defaults.
    pub fn resolve(args: Args, file: FileConfig) -> anyhow::Result<Config> {
        let listen = args
            .listen
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("valid"));
        let instance_id = args.instance_id.or(file.instance_id).unwrap_or(0);
        let advertised = args
            .advertised
            .or(file.advertised)
            .unwrap_or_else(|| listen.to_string());
        let advertised = parse_node(&format!("{instance_id}={advertised}"))?;
        let peer_specs = if args.peers.is_empty() { file.peers } else { args.peers };
        let parsed = peer_specs
            .iter()
            .map(|p| parse_peer(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let channels: BTreeMap<i32, String> = parsed
            .iter()
            .filter(|(node, _)| node.id != advertised.id)
            .filter_map(|(node, channel)| Some((node.id, channel.clone()?)))
            .collect();
        let mut peers: Vec<Node> = parsed.into_iter().map(|(node, _)| node).collect();
        if !peers.iter().any(|p| p.id == advertised.id) {
            peers.push(advertised.clone());
        }
        peers.sort_by_key(|p| p.id);
        if peers.windows(2).any(|w| w[0].id == w[1].id) {
            bail!("two peers share a node id");
        }
        let peer_probe_interval_ms = args
            .peer_probe_interval_ms
            .or(file.peer_probe_interval_ms)
            .unwrap_or(DEFAULT_PEER_PROBE_INTERVAL_MS);
        let peer_down_after_probes = args
            .peer_down_after_probes
            .or(file.peer_down_after_probes)
            .unwrap_or(DEFAULT_PEER_DOWN_AFTER_PROBES);
        if peer_probe_interval_ms == 0 || peer_down_after_probes == 0 {
            bail!("peer_probe_interval_ms and peer_down_after_probes must be at least 1");
        }
        let peer_channel = if peers.len() > 1 {
            Some(resolve_peer_channel(
                &peers,
                advertised.id,
                channels,
                args.peer_listen.or(file.peer_listen),
                args.peer_secret.or(file.peer_secret),
                args.peer_stall_limit_ms.or(file.peer_stall_limit_ms),
                peer_probe_interval_ms,
            )?)
        } else {
            None
        };
        let max_frame_size = args
            .max_frame_size
            .or(file.max_frame_size)
            .unwrap_or(DEFAULT_MAX_FRAME_SIZE);
        // LIMIT-FRAME-CEILING-1
        if !(1024..=MAX_FRAME_SIZE_CEILING).contains(&max_frame_size) {
            bail!("max_frame_size must be between 1024 and {MAX_FRAME_SIZE_CEILING}");
        }
        let (limits, group_settings) = Limits::resolve(&args.limits.or(file.limits))?;
        let default_partitions = args.default_partitions.or(file.default_partitions).unwrap_or(1);
        if default_partitions == 0 {
            bail!("default_partitions must be at least 1");
        }
        let default_stream = args
            .default_stream
            .or(file.default_stream)
            .unwrap_or_else(|| DEFAULT_STREAM.to_string());
        let tls = crate::tls::server_config(&args.tls.or(file.tls))?;
        let iggy_address = args
            .iggy_address
            .or(file.iggy_address)
            .unwrap_or_else(|| "127.0.0.1:8090".into());
        // CLUSTER-ROSTER-1: refused here, at start, rather than at the first connect.
        if let Err(e) = crate::backend::roster::parse_roster(&iggy_address) {
            bail!("{e}");
        }
        let iggy_failover_timeout_ms = args
            .iggy_failover_timeout_ms
            .or(file.iggy_failover_timeout_ms)
            .unwrap_or(DEFAULT_IGGY_FAILOVER_TIMEOUT_MS);
        if iggy_failover_timeout_ms == 0 {
            bail!("iggy_failover_timeout_ms must be at least 1");
        }
        Ok(Config {
            listen,
            advertised,
            instance_id,
            peers,
            peer_probe_interval: Duration::from_millis(peer_probe_interval_ms),
            peer_down_after_probes,
            peer_channel,
            max_frame_size,
            backend: args.backend.or(file.backend).unwrap_or_default(),
            iggy_address,
            iggy_failover_timeout: Duration::from_millis(iggy_failover_timeout_ms),
            iggy_follow_unlisted_leader: args
                .iggy_follow_unlisted_leader
                .or(file.iggy_follow_unlisted_leader)
                .unwrap_or(false),
            iggy_username: args
                .iggy_username
                .or(file.iggy_username)
                .unwrap_or_else(|| "iggy".into()),
            iggy_password: args
                .iggy_password
                .or(file.iggy_password)
                .unwrap_or_else(|| Secret::new("iggy")),
            default_partitions,
            auto_create_topics: args.auto_create_topics.or(file.auto_create_topics).unwrap_or(false),
            idle_timeout: Duration::from_millis(args.idle_timeout_ms.or(file.idle_timeout_ms).unwrap_or(600_000)),
            read_timeout: Duration::from_millis(args.read_timeout_ms.or(file.read_timeout_ms).unwrap_or(30_000)),
            write_timeout: Duration::from_millis(args.write_timeout_ms.or(file.write_timeout_ms).unwrap_or(30_000)),
            topics: TopicMapping::new(default_stream, file.topics)?,
            group_limits: {
                let d = crate::groups::GroupLimits::default();
                crate::groups::GroupLimits {
                    max_groups: args.max_groups.or(file.max_groups).unwrap_or(d.max_groups),
                    max_members_per_group: args
                        .group_max_members
                        .or(file.group_max_members)
                        .unwrap_or(d.max_members_per_group),
                    max_metadata_bytes: group_settings.max_metadata_bytes,
                    min_session_timeout: args
                        .group_min_session_timeout_ms
                        .or(file.group_min_session_timeout_ms)
                        .map_or(d.min_session_timeout, Duration::from_millis),
                    max_session_timeout: args
                        .group_max_session_timeout_ms
                        .or(file.group_max_session_timeout_ms)
                        .map_or(d.max_session_timeout, Duration::from_millis),
                    max_protocols: group_settings.max_join_protocols,
                    max_rebalance_timeout: group_settings.max_rebalance_timeout,
                    pending_member_timeout: group_settings.pending_member_timeout,
                    max_members_total: group_settings.max_members_total,
                    max_stored_bytes: group_settings.max_stored_bytes,
                    max_groups_per_owner: group_settings.max_groups_per_owner,
                    max_members_per_owner: group_settings.max_members_per_owner,
                    consumer_session_timeout: d.consumer_session_timeout,
                    consumer_heartbeat_interval: d.consumer_heartbeat_interval,
                }
            },
            limits,
            producers: crate::producer_state::ProducerStateSettings::resolve(&args.producers.or(file.producers))?,
            sasl: Sasl::resolve(&args.sasl.or(file.sasl))?,
            tls,
            iggy_tls: args.iggy_tls.or(file.iggy_tls),
            metrics_listen: args.metrics_listen.or(file.metrics_listen),
            log_format: args.log_format.or(file.log_format).unwrap_or_default(),
        })
    }
}

/// GROUP-COORDINATOR-6, GROUP-COORDINATOR-7: with peers, a peer listener, a peer channel for
/// every other gateway and a shared secret are required, refused at start when missing, so that
/// no gateway probes its peers through their Kafka listeners nor unauthenticated.
fn resolve_peer_channel(
    peers: &[Node],
    me: i32,
    addresses: BTreeMap<i32, String>,
    listen: Option<SocketAddr>,
    secret: Option<Secret>,
    stall_limit_ms: Option<u64>,
    probe_interval_ms: u64,
) -> anyhow::Result<PeerChannel> {
    let listen = listen.context(
        "peers are configured: set peer_listen, where this gateway answers its peers' probes (GROUP-COORDINATOR-6)",
    )?;
    if let Some(node) = peers.iter().find(|p| p.id != me && !addresses.contains_key(&p.id)) {
        bail!(
            "peer {} names no peer channel: write it as {}={}:{}/PEER_PORT (GROUP-COORDINATOR-6)",
            node.id,
            node.id,
            node.host,
            node.port
        );
    }
    let secret = secret
        .context("peers are configured: set peer_secret, the secret every peer gateway shares (GROUP-COORDINATOR-7)")?;
    let min = crate::peer_channel::MIN_SECRET_BYTES;
    if secret.expose().len() < min {
        bail!("peer_secret must be at least {min} bytes (GROUP-COORDINATOR-7)");
    }
    let stall_limit_ms = stall_limit_ms.unwrap_or(DEFAULT_PEER_STALL_LIMIT_MS);
    // A runtime that runs is seen between two probes; a limit below two periods would count a
    // healthy one stalled.
    if stall_limit_ms < 2 * probe_interval_ms {
        bail!(
            "peer_stall_limit_ms ({stall_limit_ms}) must be at least twice peer_probe_interval_ms ({probe_interval_ms}) (GROUP-COORDINATOR-8)"
        );
    }
    Ok(PeerChannel {
        listen,
        addresses,
        secret,
        stall_limit: Duration::from_millis(stall_limit_ms),
    })
}

/// Kafka topic names to Iggy streams and topics (TOPIC-MAPPING-1).
#[derive(Debug, Clone)]
pub struct TopicMapping {
    default_stream: String,
    overrides: BTreeMap<String, IggyTarget>,
    reverse: BTreeMap<IggyTarget, String>,
}

impl TopicMapping {
    /// Refuses two overrides that share a target, so the reverse index is a function.
    pub fn new(default_stream: String, overrides: BTreeMap<String, IggyTarget>) -> anyhow::Result<Self> {
        let mut reverse = BTreeMap::new();
        for (kafka, target) in &overrides {
            if let Some(other) = reverse.insert(target.clone(), kafka.clone()) {
                bail!(
                    "Kafka topics {other:?} and {kafka:?} both map to Iggy {}/{}",
                    target.stream,
                    target.topic
                );
            }
        }
        Ok(Self {
            default_stream,
            overrides,
            reverse,
        })
    }

    pub fn default_stream(&self) -> &str {
        &self.default_stream
    }

    /// Every stream a Kafka topic can map to.
    pub fn streams(&self) -> Vec<String> {
        let mut streams: Vec<String> = self.overrides.values().map(|t| t.stream.clone()).collect();
        streams.push(self.default_stream.clone());
        streams.sort();
        streams.dedup();
        streams
    }

    pub fn resolve(&self, kafka_topic: &str) -> IggyTarget {
        self.overrides.get(kafka_topic).cloned().unwrap_or_else(|| IggyTarget {
            stream: self.default_stream.clone(),
            topic: kafka_topic.to_string(),
        })
    }

    /// The Kafka name of an Iggy topic, or `None` when no Kafka topic maps to it. An Iggy topic
    /// in the default stream named like an override's target reverses to the override.
    pub fn reverse(&self, target: &IggyTarget) -> Option<String> {
        if let Some(kafka) = self.reverse.get(target) {
            return Some(kafka.clone());
        }
        (target.stream == self.default_stream && !self.overrides.contains_key(&target.topic))
            .then(|| target.topic.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(s: &str, t: &str) -> IggyTarget {
        IggyTarget {
            stream: s.into(),
            topic: t.into(),
        }
    }

    #[test]
    fn cluster_roster_2_following_an_unlisted_leader_is_off_unless_set() {
        assert!(!Config::default().iggy_follow_unlisted_leader);
        let file: FileConfig = toml::from_str("iggy_follow_unlisted_leader = true").unwrap();
        assert!(
            Config::resolve(Args::default(), file)
                .unwrap()
                .iggy_follow_unlisted_leader
        );
        let flags = Args::try_parse_from(["gw", "--iggy-follow-unlisted-leader", "true"]).unwrap();
        assert!(
            Config::resolve(flags, FileConfig::default())
                .unwrap()
                .iggy_follow_unlisted_leader
        );
        let file: FileConfig = toml::from_str("iggy_follow_unlisted_leader = true").unwrap();
        let flags = Args::try_parse_from(["gw", "--iggy-follow-unlisted-leader", "false"]).unwrap();
        assert!(
            !Config::resolve(flags, file).unwrap().iggy_follow_unlisted_leader,
            "the flag wins"
        );
    }

    #[test]
    fn cluster_roster_1_cluster_failover_2_iggy_address_is_a_roster_and_the_failover_timeout_a_setting() {
        let c = Config::default();
        assert_eq!(c.iggy_address, "127.0.0.1:8090");
        assert_eq!(
            c.iggy_failover_timeout,
            Duration::from_millis(DEFAULT_IGGY_FAILOVER_TIMEOUT_MS)
        );
        let file: FileConfig = toml::from_str(
            "iggy_address = \"127.0.0.1:18090,127.0.0.1:18091,127.0.0.1:18092\"\niggy_failover_timeout_ms = 2500",
        )
        .unwrap();
        let c = Config::resolve(Args::default(), file).unwrap();
        assert_eq!(c.iggy_address, "127.0.0.1:18090,127.0.0.1:18091,127.0.0.1:18092");
        assert_eq!(c.iggy_failover_timeout, Duration::from_millis(2500));
        let flags =
            Args::try_parse_from(["gw", "--iggy-address", "a:1,b:2", "--iggy-failover-timeout-ms", "800"]).unwrap();
        let c = Config::resolve(flags, FileConfig::default()).unwrap();
        assert_eq!(
            (c.iggy_address.as_str(), c.iggy_failover_timeout),
            ("a:1,b:2", Duration::from_millis(800))
        );
        for bad in ["a:1,,b:2", "a:1,a:1", "nohost"] {
            let args = Args {
                iggy_address: Some(bad.into()),
                ..Args::default()
            };
            assert!(Config::resolve(args, FileConfig::default()).is_err(), "{bad}");
        }
        let zero = Args {
            iggy_failover_timeout_ms: Some(0),
            ..Args::default()
        };
        assert!(Config::resolve(zero, FileConfig::default()).is_err());
    }

    #[test]
    fn group_coordinator_6_group_coordinator_7_peers_need_a_peer_listener_a_channel_each_and_a_secret() {
        let resolve = |peers: &str, flags: &[&str]| {
            let args = Args::try_parse_from(
                ["gw", "--instance-id", "1", "--peers", peers]
                    .into_iter()
                    .chain(flags.iter().copied()),
            )
            .unwrap();
            Config::resolve(args, FileConfig::default())
        };
        let peers = "1=a:9092/9192,2=b:9093/c:9300";
        let channel = ["--peer-listen", "0.0.0.0:9192", "--peer-secret", "0123456789abcdef"];
        let c = resolve(peers, &channel).unwrap();
        let resolved = c.peer_channel.clone().expect("a peer channel");
        assert_eq!(resolved.listen, "0.0.0.0:9192".parse().unwrap());
        assert_eq!(
            resolved.addresses,
            BTreeMap::from([(2, "c:9300".to_string())]),
            "the other gateway's channel, on the host given"
        );
        assert_eq!(resolved.stall_limit, Duration::from_millis(DEFAULT_PEER_STALL_LIMIT_MS));
        assert_eq!(
            c.peers.iter().map(|p| (p.id, p.port)).collect::<Vec<_>>(),
            [(1, 9092), (2, 9093)],
            "the Kafka listeners, as FindCoordinator names them"
        );
        let c = resolve("1=a:9092,2=b:9093/9193", &channel).unwrap();
        assert_eq!(
            c.peer_channel.unwrap().addresses[&2],
            "b:9193",
            "else on its Kafka host"
        );
        for (peers, flags, names) in [
            (peers, &["--peer-secret", "0123456789abcdef"][..], "peer_listen"),
            (peers, &["--peer-listen", "0.0.0.0:9192"][..], "peer_secret"),
            ("1=a:9092/9192,2=b:9093", &channel[..], "names no peer channel"),
            ("1=a:9092,2=b:9093/x", &channel[..], "peer channel port"),
            (
                peers,
                &["--peer-listen", "0.0.0.0:9192", "--peer-secret", "short"][..],
                "at least 16 bytes",
            ),
        ] {
            let err = resolve(peers, flags).expect_err(names);
            assert!(format!("{err:#}").contains(names), "{names}: {err:#}");
        }
        let err = resolve(peers, &[&channel[..], &["--peer-stall-limit-ms", "1500"]].concat()).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
        // Alone, no peer channel is needed.
        let alone = Config::resolve(Args::default(), FileConfig::default()).unwrap();
        assert!(alone.peer_channel.is_none());
        // The secret prints as nothing (AUTH-SASL-SECRET-1's type).
        assert!(!format!("{:?}", resolve(peers, &channel).unwrap()).contains("0123456789abcdef"));
    }

    #[test]
    fn topic_mapping_1_overrides_and_default_stream() {
        let m = TopicMapping::new(
            "kafka".into(),
            BTreeMap::from([("orders".into(), target("shop", "orders-v2"))]),
        )
        .unwrap();
        assert_eq!(m.resolve("orders"), target("shop", "orders-v2"));
        assert_eq!(m.resolve("clicks"), target("kafka", "clicks"));
        assert_eq!(m.reverse(&target("shop", "orders-v2")).as_deref(), Some("orders"));
        assert_eq!(m.reverse(&target("kafka", "clicks")).as_deref(), Some("clicks"));
        assert_eq!(
            m.reverse(&target("kafka", "orders")),
            None,
            "an overridden name does not reverse to itself"
        );
        assert_eq!(m.reverse(&target("other", "x")), None);
        assert_eq!(m.streams(), vec!["kafka".to_string(), "shop".to_string()]);
    }

    #[test]
    fn topic_mapping_1_two_overrides_may_not_share_a_target() {
        let err = TopicMapping::new(
            "kafka".into(),
            BTreeMap::from([("a".into(), target("s", "t")), ("b".into(), target("s", "t"))]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("both map to"), "{err}");
    }

    #[test]
    fn toml_file_with_overrides_resolves_and_flags_win() {
        let file: FileConfig = toml::from_str(
            r#"
            listen = "127.0.0.1:19092"
            instance_id = 3
            peers = ["1=10.0.0.1:9092/9192"]
            peer_listen = "0.0.0.0:9192"
            peer_secret = "0123456789abcdef"
            default_stream = "main"
            [topics.orders]
            stream = "shop"
            topic = "orders"
            "#,
        )
        .unwrap();
        let args = Args {
            instance_id: Some(4),
            ..Args::default()
        };
        let c = Config::resolve(args, file).unwrap();
        assert_eq!(c.listen, "127.0.0.1:19092".parse().unwrap());
        assert_eq!(c.instance_id, 4);
        assert_eq!(c.peers.iter().map(|p| p.id).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(c.topics.resolve("orders"), target("shop", "orders"));
        assert_eq!(c.topics.default_stream(), "main");
    }

    #[test]
    fn limit_frame_ceiling_1_max_frame_size_above_100_mib_is_refused_at_startup() {
        let at = |size: usize| {
            Config::resolve(
                Args {
                    max_frame_size: Some(size),
                    ..Args::default()
                },
                FileConfig::default(),
            )
        };
        assert!(at(MAX_FRAME_SIZE_CEILING).is_ok());
        let err = at(MAX_FRAME_SIZE_CEILING + 1).unwrap_err();
        assert!(err.to_string().contains("max_frame_size"), "{err}");
        assert!(at(i32::MAX as usize).is_err());
    }

    #[test]
    fn limits_come_from_flags_over_the_toml_limits_table() {
        let file: FileConfig = toml::from_str(
            r#"
            [limits]
            max_connections = 10
            fetch_max_wait_ms = 1000
            max_join_protocols = 3
            "#,
        )
        .unwrap();
        let args = Args::try_parse_from(["gw", "--max-connections", "20"]).unwrap();
        let c = Config::resolve(args, file).unwrap();
        assert_eq!(c.limits.max_connections, 20, "the flag wins");
        assert_eq!(
            c.limits.fetch_max_wait,
            Duration::from_millis(1000),
            "the file fills in"
        );
        assert_eq!(c.group_limits.max_protocols, 3);
        assert!(toml::from_str::<FileConfig>("[limits]\nmax_conections = 1").is_err());
    }

    #[test]
    fn tls_tables_resolve_flag_over_file() {
        let file: FileConfig = toml::from_str(
            r#"
            [tls]
            tls_cert = "/nonexistent/server.pem"
            [iggy_tls]
            iggy_tls = true
            iggy_tls_domain = "iggy.example"
            "#,
        )
        .unwrap();
        assert_eq!(file.tls.tls_cert, Some(PathBuf::from("/nonexistent/server.pem")));
        // A certificate without a key is refused at startup, not at the first connection.
        let err = Config::resolve(Args::default(), file).unwrap_err();
        assert!(err.to_string().contains("tls_key"), "{err}");
        let file: FileConfig = toml::from_str("[iggy_tls]\niggy_tls = true\niggy_tls_domain = \"a\"").unwrap();
        let args = Args::try_parse_from(["gw", "--iggy-tls-domain", "b"]).unwrap();
        let c = Config::resolve(args, file).unwrap();
        assert!(c.iggy_tls.enabled());
        assert_eq!(c.iggy_tls.iggy_tls_domain.as_deref(), Some("b"), "the flag wins");
        assert!(c.tls.is_none());
        assert!(toml::from_str::<FileConfig>("[tls]\ncert = \"x\"").is_err());
    }

    #[test]
    fn metrics_listener_and_log_format_are_off_and_text_by_default_and_flags_win() {
        let c = Config::default();
        assert_eq!(c.metrics_listen, None);
        assert_eq!(c.log_format, LogFormat::Text);
        let file: FileConfig = toml::from_str("metrics_listen = \"127.0.0.1:9100\"\nlog_format = \"json\"").unwrap();
        let c = Config::resolve(Args::default(), file).unwrap();
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(c.log_format, LogFormat::Json);
        let file: FileConfig = toml::from_str("metrics_listen = \"127.0.0.1:9100\"").unwrap();
        let args = Args::try_parse_from(["gw", "--metrics-listen", "127.0.0.1:9200", "--log-format", "json"]).unwrap();
        let c = Config::resolve(args, file).unwrap();
        assert_eq!(
            c.metrics_listen,
            Some("127.0.0.1:9200".parse().unwrap()),
            "the flag wins"
        );
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn unknown_toml_keys_are_refused() {
        assert!(toml::from_str::<FileConfig>("lisen = \"x\"").is_err());
    }
}
