//! Metadata (METADATA-2): the configured gateways as brokers, each partition led by the gateway
//! PRODUCER-LEADER-1 names (the answering one when it has no peers), unknown topics reported (or created when auto-create is on). A topic named more
//! than once is answered once (LIMIT-METADATA-DUPLICATES-1), and the partitions answered fit
//! `max_response_bytes` (LIMIT-RESPONSE-BYTES-1).

use super::create_topics::{create_kafka_topic, validate_topic_name};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::response_budget::{string_bytes, ResponseBudget};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet};

pub const CLUSTER_ID: &str = "kafka-iggy-gateway";

/// METADATA-2: the controller every gateway names, the lowest node id among the gateways
/// (the peers, this one included, sorted by id at configuration load). DescribeCluster answers
/// the same (DESCRIBECLUSTER-1).
pub(crate) fn controller_id(config: &crate::config::Config) -> i32 {
    config.peers.first().map_or(config.advertised.id, |p| p.id)
}

fn topic_entry(name: &str, partitions: u32, leader: &dyn Fn(i32) -> i32) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        // GROUP-CONSUMER-TOPIC-ID-1: clients map KIP-848 assignments to topics by id.
        .with_topic_id(crate::groups::topic_id::topic_id(name))
        .with_partitions(
            (0..partitions as i32)
                .map(|p| {
                    let leader = leader(p);
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

/// One partition entry's encoded bytes at most: error, index, leader, epoch, one replica, one
/// in-sync replica, no offline replica, tagged fields.
const PARTITION_ENTRY_BYTES: usize = 2 + 4 + 4 + 4 + (5 + 4) + (5 + 4) + 5 + 1;
/// One topic entry's encoded bytes beyond its name and partitions, at most: error, topic id,
/// is_internal, partition array length, authorized operations, tagged fields.
const TOPIC_ENTRY_BYTES: usize = 2 + 16 + 1 + 5 + 4 + 1;

/// The entry of topic `name` with `partitions` partitions, or, when they do not fit `budget`,
/// the topic with an error (LIMIT-RESPONSE-BYTES-1). Charged before the partitions are built.
fn budgeted_topic_entry(
    budget: &mut ResponseBudget,
    name: &str,
    partitions: u32,
    leader: &dyn Fn(i32) -> i32,
) -> MetadataResponseTopic {
    let bytes = TOPIC_ENTRY_BYTES + string_bytes(name.len()) + partitions as usize * PARTITION_ENTRY_BYTES;
    match budget.charge(bytes) {
        Ok(()) => topic_entry(name, partitions, leader),
        Err(exceeded) => {
            exceeded.log(
                "Metadata",
                &format!("the {partitions} partitions of topic {}", crate::log_text::clip(name)),
            );
            error_entry(name, ResponseError::UnknownServerError.code())
        }
    }
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
    let mut budget = gateway.response_budget();
    match request.topics {
        // v0 sends an empty list for "all"; v1+ sends null.
        Some(requested) if !(version == 0 && requested.is_empty()) => {
            // v4+ asks per request; v0-3 follow the gateway's setting alone.
            let auto_create = config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
            // LIMIT-METADATA-DUPLICATES-1: as Kafka, which takes the requested names as a set.
            let mut named = HashSet::with_capacity(requested.len());
            let mut named_ids = HashSet::new();
            // Listed once per request, on the first id: an id is found only by listing.
            let mut by_id: Option<HashMap<uuid::Uuid, (String, u32)>> = None;
            for t in requested {
                let Some(name) = t.name else {
                    // GROUP-CONSUMER-TOPIC-ID-1: v12 names topics by id; librdkafka asks so for
                    // the topics of a KIP-848 assignment. LIMIT-METADATA-DUPLICATES-1: ids too
                    // are taken as a set.
                    if !named_ids.insert(t.topic_id) {
                        continue;
                    }
                    let found = match t.topic_id.is_nil() {
                        true => None,
                        false => {
                            if by_id.is_none() {
                                by_id = Some(topics_by_id(gateway, session).await);
                            }
                            by_id.as_ref().and_then(|ids| ids.get(&t.topic_id)).cloned()
                        }
                    };
                    topics.push(match found {
                        Some((kafka, partitions)) => budgeted_topic_entry(&mut budget, &kafka, partitions, &|p| {
                            gateway.partition_leader(&kafka, p).id
                        }),
                        None => MetadataResponseTopic::default()
                            .with_topic_id(t.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code()),
                    });
                    continue;
                };
                if !named.insert(name.0.clone()) {
                    continue;
                }
                let name = name.0.as_str().to_string();
                topics.push(match describe_topic(gateway, session, &name, auto_create).await {
                    Ok(partitions) => budgeted_topic_entry(&mut budget, &name, partitions, &|p| {
                        gateway.partition_leader(&name, p).id
                    }),
                    Err(code) => error_entry(&name, code),
                });
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
                        topics.push(budgeted_topic_entry(&mut budget, &kafka, info.partitions, &|p| {
                            gateway.partition_leader(&kafka, p).id
                        }));
                    }
                }
            }
        }
    }
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(BrokerId(controller_id(config)))
        .with_topics(topics)
}

/// Every Kafka topic the session may list, with its partition count, by topic id
/// (GROUP-CONSUMER-TOPIC-ID-1).
async fn topics_by_id<B: Backend>(gateway: &Gateway<B>, session: &Session<B>) -> HashMap<uuid::Uuid, (String, u32)> {
    let config = &gateway.config;
    let mut by_id = HashMap::new();
    for stream in config.topics.streams() {
        let Ok(listed) = session.backend.list_topics(&stream).await else {
            continue;
        };
        for info in listed {
            let target = crate::config::IggyTarget {
                stream: stream.clone(),
                topic: info.name.clone(),
            };
            if let Some(kafka) = config.topics.reverse(&target) {
                by_id.insert(crate::groups::topic_id::topic_id(&kafka), (kafka, info.partitions));
            }
        }
    }
    by_id
}

/// The partition count of topic `name`, created first when `auto_create` allows, or the error
/// code its entry answers.
async fn describe_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    auto_create: bool,
) -> Result<u32, i16> {
    let target = gateway.config.topics.resolve(name);
    // AUTHZ-METADATA-1: a topic the principal may not read is TOPIC_AUTHORIZATION_FAILED.
    match session.backend.get_topic(&target.stream, &target.topic).await {
        Ok(Some(info)) => Ok(info.partitions),
        // METADATA-NAME-1: a name Kafka refuses is never created, and is reported as invalid
        // rather than unknown, so a producer fails it at once instead of waiting for it to appear.
        // (An existing Iggy topic keeps its name, whatever it is: the branch above.)
        Ok(None) if validate_topic_name(name).is_err() => Err(ResponseError::InvalidTopicException.code()),
        Ok(None) if auto_create => {
            let partitions = gateway.config.default_partitions;
            match create_kafka_topic(gateway, session, name, partitions, None).await {
                Ok(()) => Ok(partitions),
                Err(code) if code == ResponseError::TopicAlreadyExists.code() => {
                    match session.backend.get_topic(&target.stream, &target.topic).await {
                        Ok(Some(info)) => Ok(info.partitions),
                        _ => Err(ResponseError::LeaderNotAvailable.code()),
                    }
                }
                Err(code) => Err(code),
            }
        }
        Ok(None) => Err(ResponseError::UnknownTopicOrPartition.code()),
        Err(e) => Err(error_map::backend_error(&e, &format!("Metadata for topic {name}"))),
    }
}
