//! The model-vs-real harness checked on two embedded models: identical backends must never be
//! reported as differing, and a backend that differs must be caught and shrunk. The same for the
//! authentication and authorization differential (`run_auth`), offline.

use iggy_common::{Permissions, UserStatus};
use kafka_iggy_conformance::differential::{self, Admin};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::BackendError;
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

/// A root that grants every user global poll_messages on top of what it is asked for: an
/// authorization difference the auth differential must catch.
struct Lenient(Arc<EmbeddedBackend>);

fn with_poll(permissions: Option<Permissions>) -> Option<Permissions> {
    let mut p = permissions.unwrap_or_default();
    p.global.poll_messages = true;
    Some(p)
}

impl Admin for Lenient {
    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<(), BackendError> {
        Admin::create_user(self.0.as_ref(), username, password, status, with_poll(permissions)).await
    }

    async fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        Admin::update_permissions(self.0.as_ref(), username, with_poll(permissions)).await
    }

    async fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        Admin::update_user_status(self.0.as_ref(), username, status).await
    }

    async fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        Admin::delete_user(self.0.as_ref(), username).await
    }

    async fn create_token(&self, username: &str, password: &str, name: &str) -> Result<String, BackendError> {
        self.0.create_token(username, password, name).await
    }

    async fn topic_ids(&self, stream: &str, topic: &str) -> Result<(usize, usize), BackendError> {
        Admin::topic_ids(self.0.as_ref(), stream, topic).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_identical_backends_never_differ() {
    let (a, b) = (model(4096), model(4096));
    let seed = differential::seed_from_env();
    let result = differential::run_auth(a.as_ref(), a.as_ref(), b.as_ref(), b.as_ref(), 48, seed).await;
    let report = result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.users, 48);
    // Setup, 20 login steps, then per user: 2 topic ids, create, login, and 4 rounds of 26.
    assert!(
        report.checks > 48 * 100,
        "seed {seed}: only {} steps compared",
        report.checks
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_a_differing_authorization_is_caught() {
    let (a, b) = (model(4096), model(4096));
    let lenient = Lenient(b.clone());
    let result = differential::run_auth(a.as_ref(), a.as_ref(), b.as_ref(), &lenient, 8, 7).await;
    let err = result.expect_err("a root that grants more must be caught");
    assert!(err.starts_with("seed 7 "), "{err}");
    // The model refuses (Unauthorized, TOPIC_AUTHORIZATION_FAILED) where the other reads.
    assert!(err.contains("model Refused { iggy: 41, kafka: 29 }, real Ok("), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn op_sequences_are_reproducible_by_seed() {
    // With no room for offset keys the other side differs; the failure names the seed.
    let (a, b) = (model(4096), model(0));
    let handle = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || differential::run_seeded(&handle, a.as_ref(), b.as_ref(), 4, 42))
        .await
        .unwrap();
    let err = result.expect_err("caught");
    assert!(err.starts_with("seed 42 "), "{err}");
}
