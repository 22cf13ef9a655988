//! The cases only a specially configured embedded model can reach (`cases::model_only_cases`),
//! each against an in-process gateway on the model it needs.

use kafka_iggy_conformance::cases::{model_only_cases, Outcome};
use kafka_iggy_conformance::endpoint::{Endpoint, LocalGateway, LocalOptions};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::clock::SystemClock;
use std::future::Future;
use std::sync::Arc;

async fn run_on<F, Fut>(config: EmbeddedConfig, case: F)
where
    F: FnOnce(Endpoint) -> Fut,
    Fut: Future<Output = anyhow::Result<Outcome>>,
{
    let backend = Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), config));
    let gateway = LocalGateway::serve(backend, LocalOptions::default())
        .await
        .expect("gateway starts");
    match case(gateway.endpoint.clone()).await {
        Ok(Outcome::Passed) => {}
        Ok(Outcome::Skipped(why)) => panic!("skipped on the model built for it: {why}"),
        Err(e) => panic!("{e:#}"),
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_base_1_an_unconfirmed_send_is_answered_minus_one() {
    let config = EmbeddedConfig {
        send_confirmations: false,
        ..EmbeddedConfig::default()
    };
    run_on(
        config,
        model_only_cases::offset_base_1_an_unconfirmed_send_is_answered_minus_one,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn co_limit_1_an_offset_store_over_the_key_limit_is_unknown_server_error() {
    let config = EmbeddedConfig {
        consumer_offsets_max: 1,
        ..EmbeddedConfig::default()
    };
    run_on(
        config,
        model_only_cases::co_limit_1_an_offset_store_over_the_key_limit_is_unknown_server_error,
    )
    .await;
}
