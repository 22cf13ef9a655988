//! The real-Iggy tier: every conformance case against a gateway on the SDK backend and a real
//! Iggy server (see `real_iggy::discover` for how one is reached). A binary rather than a test,
//! so that a skipped tier prints `SKIPPED` and the reason, never a passing test count. Exits
//! non-zero when a case fails, or when `IGGY_REQUIRED=1` and no server is reachable.

use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::real_iggy::{discover, required, Discovery};
use kafka_iggy_conformance::{cases, differential, runner};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::Backend;
use kafka_iggy_gateway::clock::SystemClock;
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The gateway logs the Iggy error behind every Kafka code that says less (ERR-MAP-1).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "error,rdkafka=off".into()),
        )
        .init();
    let server = match discover().await? {
        Discovery::Found(server) => server,
        Discovery::Skipped(why) => {
            println!("real-Iggy tier: SKIPPED ({why})");
            if required() {
                println!("real-Iggy tier: IGGY_REQUIRED=1, so the skip fails the run");
                std::process::exit(1);
            }
            return Ok(());
        }
    };
    println!("real-Iggy tier: running against {}", server.how);
    let backend = IggyBackend::connect(&server.address, &server.username, &server.password, 4).await?;
    backend.ensure_stream("kafka").await?;
    let backend = Arc::new(backend);
    let gateway = LocalGateway::serve(backend.clone(), LocalOptions::default()).await?;
    let filter = std::env::args().nth(1);
    let report = runner::run(&gateway.endpoint, &cases::all(), filter.as_deref()).await;
    gateway.stop().await;

    // Model vs real: the same random operation sequences on both backends.
    let cases: u32 = std::env::var("KIG_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let model = Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()));
    let handle = tokio::runtime::Handle::current();
    let differential =
        tokio::task::spawn_blocking(move || differential::run(&handle, model.as_ref(), backend.as_ref(), cases))
            .await?;
    match &differential {
        Ok(()) => println!("real-Iggy tier: model vs real: {cases} random sequences observed the same"),
        Err(e) => println!("real-Iggy tier: model vs real differ: {e}"),
    }
    println!(
        "real-Iggy tier: {} passed, {} failed, {} skipped",
        report.passed + usize::from(differential.is_ok()),
        report.failed.len() + usize::from(differential.is_err()),
        report.skipped.len()
    );
    if !report.failed.is_empty() || !report.skipped.is_empty() || differential.is_err() {
        std::process::exit(1);
    }
    Ok(())
}
