//! One module per Kafka API the gateway answers.

pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod legacy;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
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
