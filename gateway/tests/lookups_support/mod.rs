//! Shared by the test files that count topic lookups at the backend (FETCH-RESOLVE-1,
//! PRODUCE-RESOLVE-2): the process-wide `get_topic` count, and a metered embedded backend
//! holding one Kafka topic.

use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::metered::Metered;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::Config;
use kafka_iggy_gateway::metrics::metrics;
use std::sync::Arc;

/// How many `get_topic` calls the backend has answered in this process.
pub fn topic_lookups() -> u64 {
    let text = metrics().encode();
    let name = "kafka_iggy_gateway_backend_call_duration_seconds_count{operation=\"get_topic\"}";
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse::<u64>().expect("a count"))
}

/// A metered embedded backend on `clock` holding the Kafka topic `kafka_topic` with `partitions`.
pub async fn metered_backend_with_topic(
    config: &Config,
    clock: Arc<TokioClock>,
    kafka_topic: &str,
    partitions: u32,
) -> Metered<EmbeddedBackend> {
    let backend = Metered::new(kafka_iggy_gateway::embedded_backend(config, clock));
    let target = config.topics.resolve(kafka_topic);
    backend.ensure_stream(&target.stream).await.expect("stream");
    let spec = TopicSpec {
        partitions,
        message_expiry_us: None,
    };
    backend
        .create_topic(&target.stream, &target.topic, spec)
        .await
        .expect("topic");
    backend
}
