//! Metadata (METADATA-1): the configured gateways as brokers, every partition led by the gateway
//! that answers, unknown topics reported (or created when auto-create is on).

use super::create_topics::{create_kafka_topic, validate_topic_name};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

pub const CLUSTER_ID: &str = "kafka-iggy-gateway";

fn topic_entry(name: &str, partitions: u32, leader: i32) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_partitions(
            (0..partitions as i32)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(BrokerId(leader))
                        // No leader epochs: -1 keeps clients from validating against one.
                        .with_leader_epoch(-1)
                        .with_replica_nodes(vec![BrokerId(leader)])
                        .with_isr_nodes(vec![BrokerId(leader)])
                })
                .collect(),
        )
}

fn error_entry(name: &str, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_error_code(code)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let config = &gateway.config;
    let me = config.advertised.id;
    let brokers = config
        .peers
        .iter()
        .map(|n| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n.id))
                .with_host(StrBytes::from_string(n.host.clone()))
                .with_port(n.port)
        })
        .collect();
    let mut topics = Vec::new();
    match request.topics {
        // v0 sends an empty list for "all"; v1+ sends null.
        Some(requested) if !(version == 0 && requested.is_empty()) => {
            // v4+ asks per request; v0-3 follow the gateway's setting alone.
            let auto_create = config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
            for t in requested {
                let Some(name) = t.name else {
                    topics.push(MetadataResponseTopic::default().with_error_code(ResponseError::UnknownTopicId.code()));
                    continue;
                };
                let name = name.0.as_str().to_string();
                topics.push(describe_topic(gateway, session, &name, auto_create, me).await);
            }
        }
        _ => {
            // AUTHZ-METADATA-1: listed in the principal's session, so Iggy's GetTopics decides
            // what it sees; a stream it may not list contributes nothing.
            for stream in config.topics.streams() {
                let listed = match session.backend.list_topics(&stream).await {
                    Ok(listed) => listed,
                    Err(e) => {
                        tracing::debug!("listing topics of stream {stream}: {e}");
                        continue;
                    }
                };
                for info in listed {
                    let target = crate::config::IggyTarget {
                        stream: stream.clone(),
                        topic: info.name.clone(),
                    };
                    if let Some(kafka) = config.topics.reverse(&target) {
                        topics.push(topic_entry(&kafka, info.partitions, me));
                    }
                }
            }
        }
    }
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(BrokerId(config.peers.first().map_or(me, |p| p.id)))
        .with_topics(topics)
}

async fn describe_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    auto_create: bool,
    me: i32,
) -> MetadataResponseTopic {
    let target = gateway.config.topics.resolve(name);
    // AUTHZ-METADATA-1: a topic the principal may not read is TOPIC_AUTHORIZATION_FAILED.
    match session.backend.get_topic(&target.stream, &target.topic).await {
        Ok(Some(info)) => topic_entry(name, info.partitions, me),
        // METADATA-NAME-1: a name Kafka refuses is never created, and is reported as invalid
        // rather than unknown, so a producer fails it at once instead of waiting for it to appear.
        // (An existing Iggy topic keeps its name, whatever it is: the branch above.)
        Ok(None) if validate_topic_name(name).is_err() => {
            error_entry(name, ResponseError::InvalidTopicException.code())
        }
        Ok(None) if auto_create => {
            let partitions = gateway.config.default_partitions;
            match create_kafka_topic(gateway, session, name, partitions, None).await {
                Ok(()) => topic_entry(name, partitions, me),
                Err(code) if code == ResponseError::TopicAlreadyExists.code() => {
                    match session.backend.get_topic(&target.stream, &target.topic).await {
                        Ok(Some(info)) => topic_entry(name, info.partitions, me),
                        _ => error_entry(name, ResponseError::LeaderNotAvailable.code()),
                    }
                }
                Err(code) => error_entry(name, code),
            }
        }
        Ok(None) => error_entry(name, ResponseError::UnknownTopicOrPartition.code()),
        Err(e) => error_entry(
            name,
            error_map::backend_error(&e, &format!("Metadata for topic {name}")),
        ),
    }
}
