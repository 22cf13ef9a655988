//! DescribeConfigs (DESCRIBECONFIGS-1): enough for admin clients. Topics report `retention.ms`
//! from the Iggy message expiry and fixed, read-only values for what the gateway decides itself.
//! A resource named more than once is answered once, with the keys of every mention
//! (LIMIT-DESCRIBECONFIGS-DUPLICATES-1).

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
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

fn topic_configs(message_expiry_us: Option<u64>) -> Vec<DescribeConfigsResourceResult> {
    let retention = match message_expiry_us {
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
        entry("cleanup.policy", "delete".into(), SOURCE_DEFAULT, TYPE_STRING),
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

/// Each resource once, in the order first named, asking for the keys of all its mentions (all
/// of them when any mention asks for all) (LIMIT-DESCRIBECONFIGS-DUPLICATES-1).
fn distinct_resources(resources: Vec<DescribeConfigsResource>) -> Vec<DescribeConfigsResource> {
    let mut order: Vec<DescribeConfigsResource> = Vec::with_capacity(resources.len());
    let mut index_of = HashMap::<(i8, StrBytes), usize>::new();
    for resource in resources {
        let key = (resource.resource_type, resource.resource_name.clone());
        match index_of.get(&key) {
            None => {
                index_of.insert(key, order.len());
                order.push(resource);
            }
            Some(&slot) => {
                let kept = &mut order[slot];
                match (&mut kept.configuration_keys, resource.configuration_keys) {
                    (Some(keys), Some(more)) => {
                        for k in more {
                            if !keys.contains(&k) {
                                keys.push(k);
                            }
                        }
                    }
                    (kept_keys, _) => *kept_keys = None,
                }
            }
        }
    }
    order
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let resources = distinct_resources(request.resources);
    let mut results = Vec::with_capacity(resources.len());
    for resource in &resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        let configs = match resource.resource_type {
            RESOURCE_TOPIC => match super::resolve_topic(gateway, session, resource.resource_name.as_str()).await {
                Ok((_, info)) => Ok(topic_configs(info.message_expiry_us)),
                Err(code) => Err(code),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(keys.map(|k| k.iter().map(|k| StrBytes::from_string(k.to_string())).collect()))
    }

    #[test]
    fn limit_describeconfigs_duplicates_1_each_resource_once_with_every_key_asked() {
        let kept = distinct_resources(vec![
            resource("a", Some(&["retention.ms"])),
            resource("b", Some(&["cleanup.policy"])),
            resource("a", Some(&["cleanup.policy", "retention.ms"])),
            resource("b", None),
        ]);
        let names: Vec<&str> = kept.iter().map(|r| r.resource_name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let keys: Vec<&str> = kept[0]
            .configuration_keys
            .as_ref()
            .unwrap()
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, ["retention.ms", "cleanup.policy"]);
        assert_eq!(
            kept[1].configuration_keys, None,
            "a mention asking for all asks for all"
        );
    }
}
