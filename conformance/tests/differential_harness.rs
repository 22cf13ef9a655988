//! The model-vs-real harness checked on two embedded models: identical backends must never be
//! reported as differing, and a backend that differs must be caught and shrunk.

use kafka_iggy_conformance::differential;
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::clock::SystemClock;
use std::sync::Arc;

fn model(consumer_offsets_max: usize) -> Arc<EmbeddedBackend> {
    Arc::new(EmbeddedBackend::new(
        Arc::new(SystemClock),
        EmbeddedConfig {
            consumer_offsets_max,
            ..EmbeddedConfig::default()
        },
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_backends_never_differ() {
    let (a, b) = (model(4096), model(4096));
    let handle = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || differential::run(&handle, a.as_ref(), b.as_ref(), 64))
        .await
        .unwrap();
    assert_eq!(result, Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_differing_backend_is_caught() {
    // With no room for offset keys, the setup's store, accepted by the model, fails on the
    // other: caught on every run, whatever the random steps.
    let (a, b) = (model(4096), model(0));
    let handle = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || differential::run(&handle, a.as_ref(), b.as_ref(), 8))
        .await
        .unwrap();
    let err = result.expect_err("a store the other side refuses must be caught");
    assert!(err.contains("Error(-1)"), "{err}");
}
