//! `kafka-iggy-gateway`: runs the gateway until Ctrl-C, then shuts down gracefully.

use anyhow::Context;
use clap::Parser;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::SystemClock;
use kafka_iggy_gateway::config::{Args, BackendKind, Config};
use kafka_iggy_gateway::server::{serve, Shutdown};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let config = Config::load(Args::parse())?;
    if config.backend == BackendKind::Iggy {
        anyhow::bail!(
            "--backend iggy needs the real-Iggy backend, which this build does not include yet; use --backend embedded"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let local = listener.local_addr()?;
    let gateway = kafka_iggy_gateway::embedded_gateway(config, Arc::new(SystemClock), rand::random());
    println!(
        "kafka-iggy-gateway listening on {local} (backend: {})",
        gateway.backend.kind()
    );
    let shutdown = Shutdown::default();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            println!("shutting down: finishing in-flight requests");
            trigger.trigger();
        }
    });
    serve(listener, gateway, shutdown).await;
    println!("stopped");
    Ok(())
}
