//! `kafka-iggy-gateway`: runs the gateway until SIGTERM or SIGINT, then shuts down gracefully
//! within the shutdown timeout; a second signal stops the process at once (PROTO-SHUTDOWN-2).

use anyhow::Context;
use clap::Parser;
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::{SharedRng, SystemClock};
use kafka_iggy_gateway::config::{Args, BackendKind, Config, LogFormat};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::ops_http::{serve_ops, GatewayOps};
use kafka_iggy_gateway::server::{try_serve, Shutdown};
use std::io::IsTerminal;
use std::sync::Arc;

/// Whether logs are JSON: lifecycle lines then go through the JSON log too, so a log shipper
/// reads nothing but JSON.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A lifecycle line (listening, shutting down, stopped): printed as it is in text mode, which
/// scripts wait for whatever RUST_LOG says; a log event at info level in JSON mode.
macro_rules! announce {
    ($($arg:tt)*) => {
        if JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::info!($($arg)*);
        } else {
            println!($($arg)*);
        }
    };
}

/// SDK clients in the real backend's pool: enough that one slow request does not stall every
/// Kafka connection.
const IGGY_POOL_SIZE: usize = 8;

async fn run<B: Backend>(listener: tokio::net::TcpListener, gateway: Arc<Gateway<B>>) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let tls = if gateway.config.tls.is_some() { "on" } else { "off" };
    announce!(
        "kafka-iggy-gateway listening on {local} (backend: {}, TLS: {tls}, SASL: {})",
        gateway.backend.kind(),
        gateway.config.sasl.mechanism.map_or("off", |m| m.name())
    );
    let shutdown = Shutdown::default();
    let ops = match gateway.config.metrics_listen {
        Some(addr) => {
            let ops_listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the metrics listener {addr}"))?;
            announce!(
                "metrics listener on {} (/metrics, /healthz, /readyz)",
                ops_listener.local_addr()?
            );
            let source = Arc::new(GatewayOps {
                gateway: gateway.clone(),
                shutdown: shutdown.clone(),
            });
            Some(tokio::spawn(serve_ops(ops_listener, source)))
        }
        None => None,
    };
    let trigger = shutdown.clone();
    let mut signals = Signals::new()?;
    let timeout = gateway.config.limits.shutdown_timeout;
    tokio::spawn(async move {
        let first = signals.next().await;
        announce!(
            "{first}: shutting down, finishing in-flight requests (at most {timeout:?}); a second signal stops at once"
        );
        trigger.trigger();
        let second = signals.next().await;
        eprintln!("{second} during shutdown: stopping now");
        std::process::exit(1);
    });
    // GROUP-COORDINATOR-6: a peer channel that cannot be served fails the start.
    try_serve(listener, gateway, shutdown).await?;
    // /readyz answered 503 while the connections drained; now the listener goes too.
    if let Some(ops) = ops {
        ops.abort();
    }
    announce!("stopped");
    Ok(())
}

/// SIGTERM (what containers and systemd send) and SIGINT (Ctrl-C).
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        })
    }

    /// The name of the next signal to arrive.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// LIMIT-DESCRIPTORS-1: raises the open-file limit to its hard limit and lowers
/// `max_connections` (and the per-address quota with it) below what it leaves, keeping a reserve
/// for the gateway's own descriptors and its connections to Iggy.
fn fit_connections_to_descriptors(config: &mut Config) {
    use kafka_iggy_gateway::descriptors::{connections_within, raise_open_file_limit, BASE_RESERVE};
    // The real backend's pool, and under SASL each pooled session's two SDK connections
    // (LIMIT-SESSIONS-1).
    let backend = match config.backend {
        BackendKind::Embedded => 0,
        BackendKind::Iggy => {
            let sessions = if config.sasl.enabled() {
                2 * config.sasl.max_sessions
            } else {
                0
            };
            (IGGY_POOL_SIZE + sessions) as u64
        }
    };
    let reserve = BASE_RESERVE + backend;
    let limits = &mut config.limits;
    match raise_open_file_limit() {
        Ok(limit) => {
            let allowed = connections_within(limits.max_connections, limit.soft, reserve);
            if allowed < limits.max_connections {
                tracing::warn!(
                    "max_connections lowered from {} to {allowed}: the open-file limit is {} (hard {}), {reserve} kept for the gateway and Iggy (LIMIT-DESCRIPTORS-1)",
                    limits.max_connections,
                    limit.soft,
                    limit.hard
                );
            } else {
                tracing::info!(
                    "open-file limit {} (raised from {}, hard {}): room for max_connections {} and {reserve} more (LIMIT-DESCRIPTORS-1)",
                    limit.soft,
                    limit.before,
                    limit.hard,
                    limits.max_connections
                );
            }
            limits.max_connections = allowed;
            limits.max_connections_per_address = limits.max_connections_per_address.min(allowed);
            limits.max_connections_per_prefix = limits.max_connections_per_prefix.min(allowed);
        }
        Err(e) => tracing::warn!(
            "could not read or raise the open-file limit: {e}; max_connections stays {}",
            limits.max_connections
        ),
    }
}

fn main() -> anyhow::Result<()> {
    // LIMIT-HEAP-1: before the first request's buffers are allocated.
    let heap = kafka_iggy_gateway::heap_tuning::tune_heap();
    let mut config = Config::load(Args::parse())?;
    init_logs(config.log_format);
    tracing::info!("{}", heap.describe());
    fit_connections_to_descriptors(&mut config);
    tracing::info!(
        "async worker threads: {} (LIMIT-WORKERS-1)",
        config.limits.worker_threads
    );
    serving_runtime(config.limits.worker_threads)
        .context("starting the async runtime")?
        .block_on(serve(config))
}

/// LIMIT-WORKERS-1: the runtime every client connection, the backend's clients and the ops
/// endpoint run on, with `worker_threads` async workers. Blocking work (LIMIT-BLOCKING-1) goes
/// to its blocking threads, which are not counted here.
fn serving_runtime(worker_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .enable_all()
        .build()
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    match config.backend {
        BackendKind::Embedded => {
            let clock = Arc::new(SystemClock);
            let backend = kafka_iggy_gateway::embedded_backend(&config, clock.clone());
            let gateway = Arc::new(Gateway::new(
                Arc::new(config),
                Arc::new(Metered::new(backend)),
                clock,
                SharedRng::seeded(rand::random()),
            ));
            run(listener, gateway).await
        }
        BackendKind::Iggy => {
            // AUTHZ-SESSION-1: without SASL there is no principal to log in as.
            if !config.sasl.enabled() {
                tracing::warn!(
                    "SASL is off (--sasl not set): every Kafka client acts as Iggy user {:?} with all its permissions",
                    config.iggy_username
                );
            }
            let backend = IggyBackend::connect_roster(
                &config.iggy_address,
                &config.iggy_username,
                config.iggy_password.expose(),
                config.iggy_tls.to_backend(),
                IGGY_POOL_SIZE,
                config.iggy_failover_timeout,
                config.iggy_follow_unlisted_leader,
            )
            .await
            .with_context(|| format!("connecting to Iggy at {}", config.iggy_address))?;
            // The default stream exists from the start, so Metadata can list it.
            backend
                .ensure_stream(config.topics.default_stream())
                .await
                .with_context(|| format!("creating stream {}", config.topics.default_stream()))?;
            let gateway = Arc::new(Gateway::new(
                Arc::new(config),
                Arc::new(Metered::new(backend)),
                Arc::new(SystemClock),
                SharedRng::seeded(rand::random()),
            ));
            run(listener, gateway).await
        }
    }
}

/// Logs to standard output, filtered by `RUST_LOG` (default `info`): text, coloured only on a
/// terminal so a file or a pipe gets no escape codes, or one JSON object per line.
fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stdout().is_terminal()).init(),
        LogFormat::Json => {
            JSON_LOGS.store(true, std::sync::atomic::Ordering::Relaxed);
            builder.json().with_current_span(false).with_span_list(true).init()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_workers_1_the_serving_runtime_has_the_workers_it_was_given() {
        for workers in [1, 3] {
            let runtime = serving_runtime(workers).unwrap();
            assert_eq!(runtime.metrics().num_workers(), workers);
        }
    }
}
