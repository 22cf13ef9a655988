//! Deterministic simulations of the gateway under [turmoil].
//!
//! The gateway host runs the very server code the binary runs — [`serve`] with its accept loop
//! and per-connection request loop — over turmoil's simulated TCP instead of tokio's sockets,
//! on the embedded Iggy model. Nothing in it reads the machine: the clock is a [`TokioClock`]
//! at the fixed epoch [`EPOCH_US`], which follows the host's simulated tokio time, and the RNG is
//! [`SharedRng::seeded`] from the simulation seed. Given the seed, turmoil decides message
//! latencies and scheduling, so one seed always plays out the same way: the same offsets, the
//! same server timestamps, the same timeouts.
//!
//! - [`TurmoilListener`]: the server's [`Listener`] over `turmoil::net::TcpListener`.
//! - [`gateway_config`], [`run_gateway`], [`gateway_host`]: a gateway host listening on
//!   `0.0.0.0:9092` and advertising `gateway:9092`.
//! - [`gateway_host_on`]: the same host over an [`EmbeddedBackend`] that outlives it, standing in
//!   for the Iggy server behind a gateway process that restarts; its clock is [`SimClock`].
//! - [`connect`]: a raw [`WireClient`] over a simulated connection to that host.
//! - [`producer`], [`consumer`]: clients that retry as Kafka clients do and log what they saw;
//!   [`checker`]: classifies lost, duplicated and reordered records from those logs.
//! - [`committing_consumer`]: a group consumer that commits and restarts from its commits;
//!   [`commit_checker`]: checks that acknowledged commits are durable and nothing is skipped.
//! - `replica`: three simulated Iggy nodes holding one replicated log (a quorum-acknowledged
//!   primary, elections after a heartbeat timeout) for the `replicated-iggy` scenarios.
//!
//! A client in the simulation speaks to the gateway with the conformance suite's raw client, so
//! the requests are byte for byte what a conformance case would send over a real socket.

pub mod checker;
pub mod checks;
pub mod commit_checker;
pub mod committing_consumer;
pub mod consumer;
pub mod history;
pub mod iggy_host;
pub mod iggy_wire;
pub mod kafka;
pub mod producer;
pub mod remote;
pub(crate) mod replica;
pub mod requests;
pub mod scenarios;
pub mod trace;
pub mod world;

use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::{Clock, SharedRng, TokioClock};
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::embedded_gateway;
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_iggy_gateway::peer_channel::{spawn_on_this_runtime, PeerListener, Responder};
use kafka_iggy_gateway::server::{serve, Listener, Shutdown};
use kafka_wire_client::WireClient;
use std::net::SocketAddr;
use std::sync::Arc;
use turmoil::net::{TcpListener, TcpStream};

/// The gateway's host name in the simulated network.
pub const GATEWAY_HOST: &str = "gateway";
/// The port the gateway listens on.
pub const GATEWAY_PORT: u16 = 9092;
/// The port a gateway with peers answers their probes on (GROUP-COORDINATOR-6).
pub const PEER_PORT: u16 = 9192;
/// The secret the simulated gateways share (GROUP-COORDINATOR-7).
pub const PEER_SECRET: &str = "kig-simulated-peers";
/// What the gateway's clock reads when the simulation starts: 2023-11-14T22:13:20Z, in µs.
pub const EPOCH_US: u64 = 1_700_000_000_000_000;

/// turmoil's TCP listener as a source of connections for [`serve`]. turmoil's `TcpStream`
/// implements tokio's `AsyncRead` and `AsyncWrite`, so the server's connection loop runs on it
/// unchanged.
pub struct TurmoilListener(pub TcpListener);

impl Listener for TurmoilListener {
    type Stream = TcpStream;

    async fn accept(&mut self) -> std::io::Result<(Self::Stream, SocketAddr)> {
        self.0.accept().await
    }

    async fn dial(address: String) -> std::io::Result<Self::Stream> {
        TcpStream::connect(address).await
    }

    /// GROUP-COORDINATOR-6 on the simulated network: a host's sockets belong to its one runtime,
    /// so the peer channel is a task there, as everything the seed decides must be.
    async fn serve_peers(
        address: SocketAddr,
        responder: Arc<Responder>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> std::io::Result<PeerListener> {
        let listener = TcpListener::bind(address).await?;
        Ok(spawn_on_this_runtime(TurmoilListener(listener), responder, stop))
    }
}

/// The gateway's configuration in a simulation: listening on every address of its host at
/// [`GATEWAY_PORT`] and advertising `gateway:9092`; everything else at its default.
pub fn gateway_config() -> Config {
    let args = Args {
        listen: Some(SocketAddr::from(([0, 0, 0, 0], GATEWAY_PORT))),
        advertised: Some(format!("{GATEWAY_HOST}:{GATEWAY_PORT}")),
        limits: LimitSettings {
            // Decoding on another OS thread would finish at a moment no seed decides
            // (PROTO-DETERMINISM-1).
            decode_threads: Some(0),
            ..LimitSettings::default()
        },
        ..Args::default()
    };
    Config::resolve(args, FileConfig::default()).expect("the simulation's configuration is valid")
}

/// Runs one gateway until `shutdown` triggers: binds the listener, builds a gateway on a fresh
/// embedded backend with a [`TokioClock`] at [`EPOCH_US`] and an RNG seeded with `seed`, and
/// serves. Call it inside a turmoil host, whose runtime the clock then follows.
pub async fn run_gateway(seed: u64, shutdown: Shutdown) -> turmoil::Result {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new(EPOCH_US));
    serve_on_host(embedded_gateway(gateway_config(), clock, seed), shutdown).await
}

/// Binds `gateway`'s listen address on the current host and serves until `shutdown`.
pub(crate) async fn serve_on_host<B: Backend>(gateway: Arc<Gateway<B>>, shutdown: Shutdown) -> turmoil::Result {
    let listener = TcpListener::bind(gateway.config.listen).await?;
    serve(TurmoilListener(listener), gateway, shutdown).await;
    Ok(())
}

/// Registers the host [`GATEWAY_HOST`] running a gateway seeded with `seed`. A restarted
/// (bounced) host starts again on an empty backend, as a process restart of the embedded model
/// would.
pub fn gateway_host(sim: &mut turmoil::Sim<'_>, seed: u64) {
    sim.host(GATEWAY_HOST, move || run_gateway(seed, Shutdown::default()));
}

/// The simulation's own time since it started, from the epoch [`EPOCH_US`]: a clock for state
/// that outlives any one host (a backend shared across gateway restarts), which a host's tokio
/// clock cannot be because it restarts with the host. Outside a simulation it reads the epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimClock;

impl Clock for SimClock {
    fn now_us(&self) -> u64 {
        EPOCH_US + turmoil::sim_elapsed().unwrap_or_default().as_micros() as u64
    }
}

/// Simulated milliseconds since the simulation started, for the clients' logs.
pub fn sim_ms() -> u128 {
    turmoil::sim_elapsed().unwrap_or_default().as_millis()
}

/// An embedded backend on the [`SimClock`], to outlive the gateway hosts that use it.
pub fn shared_backend() -> Arc<EmbeddedBackend> {
    Arc::new(EmbeddedBackend::new(Arc::new(SimClock), EmbeddedConfig::default()))
}

/// Registers the host [`GATEWAY_HOST`] running a gateway over `backend`. A bounced host starts a
/// new gateway (no group members, a new offsets client) over the same backend, as a restarted
/// gateway process finds the Iggy server as its predecessor left it. The RNG is seeded with
/// `seed` and the number of starts, so each incarnation differs and every run repeats.
pub fn gateway_host_on(sim: &mut turmoil::Sim<'_>, backend: Arc<EmbeddedBackend>, seed: u64) {
    let starts = Arc::new(std::sync::atomic::AtomicU64::new(0));
    sim.host(GATEWAY_HOST, move || {
        let backend = backend.clone();
        let start = starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gateway = Arc::new(Gateway::new(
            Arc::new(gateway_config()),
            backend,
            Arc::new(SimClock),
            SharedRng::seeded(seed.wrapping_add(start.wrapping_mul(0x9E37_79B9_7F4A_7C15))),
        ));
        serve_on_host(gateway, Shutdown::default())
    });
}

/// Opens a new connection to the gateway host. Call it inside a turmoil client or host.
pub async fn connect() -> std::io::Result<WireClient<TcpStream>> {
    let stream = TcpStream::connect((GATEWAY_HOST, GATEWAY_PORT)).await?;
    Ok(WireClient::new(stream))
}
