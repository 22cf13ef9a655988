//! DescribeConfigs (DESCRIBECONFIGS-2): enough for admin clients. Topics report `retention.ms`
//! and `cleanup.policy` as the topic records them (TOPIC-COMPACT-2) and fixed, read-only values
//! for what the gateway decides itself.
//! A topic named more than once is answered at each mention, as Kafka does, and looked up once
//! (LIMIT-DESCRIBECONFIGS-DUPLICATES-1).

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::topic_configs::{self, CleanupPolicy, TopicConfig};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;

fn entry(name: &str, value: String, source: i8, config_type: i8) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(Some(StrBytes::from_string(value)))
        .with_read_only(true)
        .with_config_source(source)
        .with_config_type(config_type)
}

fn topic_configs(config: TopicConfig) -> Vec<DescribeConfigsResourceResult> {
    let retention = match config.retention_us {
        Some(us) => entry(
            "retention.ms",
            (us / 1_000).to_string(),
            SOURCE_DYNAMIC_TOPIC,
            TYPE_LONG,
        ),
        None => entry("retention.ms", "-1".into(), SOURCE_DEFAULT, TYPE_LONG),
    };
    vec![
        retention,
        // CONNECT-INTERNAL-1: Kafka Connect stops unless its internal topics describe exactly
        // `compact` here, as TOPIC-COMPACT-2 recorded it at their creation.
        match config.policy {
            CleanupPolicy::Delete => entry("cleanup.policy", "delete".into(), SOURCE_DEFAULT, TYPE_STRING),
            policy => entry(
                "cleanup.policy",
                policy.as_str().into(),
                SOURCE_DYNAMIC_TOPIC,
                TYPE_STRING,
            ),
        },
        entry("compression.type", "producer".into(), SOURCE_DEFAULT, TYPE_STRING),
        entry(
            "max.message.bytes",
            iggy_common::MAX_PAYLOAD_SIZE.to_string(),
            SOURCE_DEFAULT,
            TYPE_INT,
        ),
        entry(
            "message.timestamp.type",
            "CreateTime".into(),
            SOURCE_DEFAULT,
            TYPE_STRING,
        ),
        entry("min.insync.replicas", "1".into(), SOURCE_DEFAULT, TYPE_INT),
    ]
}

/// The topic configs of `name`, or its error code, looked up once per request however often the
/// request names it (LIMIT-DESCRIBECONFIGS-DUPLICATES-1).
async fn topic_lookup<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    looked_up: &mut HashMap<StrBytes, Result<TopicConfig, i16>>,
    name: &StrBytes,
) -> Result<Vec<DescribeConfigsResourceResult>, i16> {
    let config = match looked_up.get(name) {
        Some(found) => *found,
        None => {
            let found = match super::resolve_topic(gateway, session, name.as_str()).await {
                Ok((target, info)) => {
                    let read =
                        topic_configs::read(&*session.backend, &target.stream, &target.topic, info.message_expiry_us)
                            .await
                            .map_err(|e| {
                                crate::error_map::backend_error(&e, &format!("reading the configs of topic {name}"))
                            });
                    if let Ok(config) = &read {
                        gateway
                            .compacted_topics
                            .note(&target.stream, &target.topic, config.policy);
                    }
                    read
                }
                Err(code) => Err(code),
            };
            looked_up.insert(name.clone(), found);
            found
        }
    };
    config.map(topic_configs)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut looked_up = HashMap::new();
    let mut results = Vec::with_capacity(request.resources.len());
    // As Kafka, every mention is answered with the keys it asks for: a client may name one
    // resource twice for two sets of keys. Each answer is a few fixed entries, bounded by the
    // entry limit.
    for resource in &request.resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let configs = match resource.resource_type {
            RESOURCE_TOPIC => topic_lookup(gateway, session, &mut looked_up, &resource.resource_name).await,
            RESOURCE_BROKER => Ok(vec![]),
            _ => Err(ResponseError::InvalidRequest.code()),
        };
        results.push(match configs {
            Ok(mut configs) => {
                if let Some(keys) = &resource.configuration_keys {
                    configs.retain(|c| keys.iter().any(|k| k.as_str() == c.name.as_str()));
                }
                result.with_configs(configs)
            }
            Err(code) => result.with_error_code(code),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}
