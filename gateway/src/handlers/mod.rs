//! One module per Kafka API the gateway answers.

pub mod alter_configs;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub(crate) mod group_authz;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod legacy;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;

use crate::auth::sessions::Session;
use crate::backend::{Backend, TopicInfo};
use crate::config::IggyTarget;
use crate::error_map;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;

/// A Kafka topic resolved to its Iggy topic, or the Kafka error code for why it is not there.
pub(crate) async fn resolve_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    kafka_topic: &str,
) -> Result<(IggyTarget, TopicInfo), i16> {
    let target = gateway.config.topics.resolve(kafka_topic);
    match session.backend.get_topic(&target.stream, &target.topic).await {
        Ok(Some(info)) => Ok((target, info)),
        Ok(None) => Err(ResponseError::UnknownTopicOrPartition.code()),
        Err(e) => Err(error_map::backend_error(&e, &format!("looking up topic {kafka_topic}"))),
    }
}

/// What the handlers' unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::backend::embedded::EmbeddedBackend;
    use crate::backend::{Backend, TopicSpec};
    use crate::clock::TokioClock;
    use crate::config::{Args, Config, FileConfig};
    use crate::gateway::Gateway;
    use std::sync::Arc;

    /// A gateway on a fresh embedded backend configured by `file`, holding the Kafka topic
    /// `kafka_topic` with one partition.
    pub(crate) async fn gateway_with_topic(file: FileConfig, kafka_topic: &str) -> Arc<Gateway<EmbeddedBackend>> {
        let config = Config::resolve(Args::default(), file).expect("valid config");
        let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
        let target = gateway.config.topics.resolve(kafka_topic);
        let backend = &gateway.default_session.backend;
        backend.ensure_stream(&target.stream).await.expect("stream");
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        backend
            .create_topic(&target.stream, &target.topic, spec)
            .await
            .expect("topic");
        gateway
    }
}
