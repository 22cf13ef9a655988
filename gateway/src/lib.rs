//! The reference Kafka-to-Iggy gateway: a Kafka wire-protocol server over a backend port, with
//! an embedded in-process model of Iggy as the default backend.
//!
//! - [`server`]: accept loop and per-connection request loop, generic over the stream type.
//! - [`gateway`]: the state shared by every connection of one gateway instance.
//! - [`dispatch`]: one request frame to its handler, by API key.
//! - [`reply`]: what a request gets back, and the encoder responses go through.
//! - [`handlers`]: one module per Kafka API.
//! - [`backend`]: the Iggy operations the gateway needs, and the embedded model.
//! - [`error_map`]: the one table from backend and core errors to Kafka codes.
//! - [`metrics`] and [`ops_http`]: Prometheus metrics, health and readiness (docs/operating.md).

pub mod auth;
pub mod backend;
pub mod clock;
pub mod config;
pub mod connections;
pub mod decode_pool;
pub mod descriptors;
pub mod dispatch;
pub mod error_map;
pub mod gateway;
pub mod groups;
pub mod handlers;
pub mod heap_tuning;
pub mod known_topics;
pub mod limits;
pub mod log_text;
pub mod metrics;
pub mod offset_store;
pub mod ops_http;
pub mod peer_channel;
pub mod peers;
pub mod producer_id;
pub mod producer_state;
pub mod protocol;
pub mod read_ahead;
pub mod reply;
pub mod response_budget;
pub mod server;
pub mod tls;
pub mod topic_configs;

use backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use clock::{Clock, SharedRng};
use config::Config;
use gateway::Gateway;
use std::sync::Arc;

/// A fresh embedded backend whose root account is the one `config` names.
pub fn embedded_backend(config: &Config, clock: Arc<dyn Clock>) -> EmbeddedBackend {
    EmbeddedBackend::new(
        clock,
        EmbeddedConfig {
            username: config.iggy_username.clone(),
            password: config.iggy_password.clone(),
            ..EmbeddedConfig::default()
        },
    )
}

/// A gateway on a fresh embedded backend: the default setup, and what tests start.
pub fn embedded_gateway(config: Config, clock: Arc<dyn Clock>, seed: u64) -> Arc<Gateway<EmbeddedBackend>> {
    let backend = embedded_backend(&config, clock.clone());
    Arc::new(Gateway::new(
        Arc::new(config),
        Arc::new(backend),
        clock,
        SharedRng::seeded(seed),
    ))
}
