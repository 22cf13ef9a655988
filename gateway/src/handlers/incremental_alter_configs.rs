//! IncrementalAlterConfigs (ALTERCONFIGS-1, ALTERCONFIGS-3, ALTERCONFIGS-6): per-key changes of
//! a topic's configs, of which the gateway honours `retention.ms` and `cleanup.policy`
//! (TOPIC-COMPACT-1), and takes the rest as TOPIC-CONFIG-2's table says. What
//! `Admin.incrementalAlterConfigs` and `kafka-configs --alter` send.

use super::alter_configs::{
    alter_topic, check_resource, invalid_config, invalid_request, mentions, message_of, ConfigChange, Refusal,
    RETENTION_MS,
};
use super::create_topics::retention_ms_expiry;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::topic_configs::{self, CleanupPolicy, PolicyEdit, CLEANUP_POLICY};
use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

/// Kafka's AlterConfigOp.OpType ids.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// ALTERCONFIGS-6: what the operations on one topic change of its configs, or why they are
/// refused. Every operation is checked before anything is applied.
fn config_change(configs: &[AlterableConfig]) -> Result<ConfigChange, Refusal> {
    let mut change = ConfigChange::default();
    for config in configs {
        let name = config.name.as_str();
        if !matches!(config.config_operation, OP_SET | OP_DELETE | OP_APPEND | OP_SUBTRACT) {
            return Err(invalid_request(format!(
                "operation {} on config {name} is not a config operation",
                config.config_operation
            )));
        }
        if name == CLEANUP_POLICY {
            let items = || CleanupPolicy::parse(config.value.as_deref()).map_err(invalid_config);
            change.policy = match config.config_operation {
                OP_SET => PolicyEdit::Set(items()?),
                // Back to the default DescribeConfigs reports: delete.
                OP_DELETE => PolicyEdit::Set(CleanupPolicy::Delete),
                OP_APPEND => PolicyEdit::Append(items()?),
                _ => PolicyEdit::Subtract(items()?),
            };
            continue;
        }
        if name != RETENTION_MS {
            // TOPIC-CONFIG-2: a harmless key is checked as a SET would be, and a DELETE of it (back
            // to Kafka's default) changes nothing; neither is a list.
            match config.config_operation {
                OP_SET => topic_configs::check(name, config.value.as_deref()).map_err(invalid_config)?,
                // A refused row stays refused: DELETE would promise the config is Kafka's default.
                OP_DELETE
                    if topic_configs::row(name).is_some_and(|r| r.decision != topic_configs::Decision::Refused) =>
                {
                    topic_configs::Checked::Ignored
                }
                OP_DELETE => return Err(invalid_config(topic_configs::unsupported(name))),
                _ => {
                    topic_configs::check(name, config.value.as_deref()).map_err(invalid_config)?;
                    return Err(invalid_config(format!(
                        "{name} is not a list: only SET (0) and DELETE (1) apply to it"
                    )));
                }
            };
            continue;
        }
        change.retention = Some(match config.config_operation {
            OP_SET => retention_ms_expiry(config.value.as_deref()).map_err(invalid_config)?,
            // Back to the default DescribeConfigs reports: never expire.
            OP_DELETE => None,
            _ => {
                return Err(invalid_config(format!(
                    "{name} is not a list: only SET (0) and DELETE (1) apply to it"
                )))
            }
        });
    }
    Ok(change)
}

/// What [`config_change`] changes of the retention.
#[cfg(test)]
fn expiry_change(configs: &[AlterableConfig]) -> Result<crate::handlers::alter_configs::ExpiryChange, Refusal> {
    config_change(configs).map(|c| c.retention)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let named = mentions(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let name = resource.resource_name.as_str();
        let checked = check_resource(
            resource.resource_type,
            name,
            named[&(resource.resource_type, name)],
            resource.configs.iter().map(|c| c.name.as_str()),
        )
        .and_then(|()| config_change(&resource.configs));
        let outcome = match checked {
            Ok(change) => alter_topic(gateway, session, name, change, request.validate_only).await,
            Err(refusal) => Err(refusal),
        };
        let (code, message) = message_of(&outcome);
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn op(name: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_config_operation(operation)
            .with_value(value.map(|v| StrBytes::from_string(v.into())))
    }

    #[test]
    fn alterconfigs_6_operations_on_retention_ms() {
        assert_eq!(expiry_change(&[]), Ok(None));
        assert_eq!(
            expiry_change(&[op("retention.ms", OP_SET, Some("60000"))]),
            Ok(Some(Some(60_000_000)))
        );
        assert_eq!(expiry_change(&[op("retention.ms", OP_SET, Some("-1"))]), Ok(Some(None)));
        assert_eq!(expiry_change(&[op("retention.ms", OP_DELETE, None)]), Ok(Some(None)));
        for refused in [
            op("retention.ms", OP_SET, Some("0")),
            op("retention.ms", OP_SET, None),
            op("retention.ms", OP_APPEND, Some("1")),
            op("retention.ms", OP_SUBTRACT, Some("1")),
            op("max.message.bytes", OP_SET, Some("2000000")),
        ] {
            let (code, message) = expiry_change(std::slice::from_ref(&refused)).unwrap_err();
            assert_eq!(code, 40, "{refused:?}");
            assert!(message.contains(refused.name.as_str()), "{message}");
        }
        let (code, _) = expiry_change(&[op("retention.ms", 7, Some("1"))]).unwrap_err();
        assert_eq!(code, 42);
    }

    /// The report's probe: a SET whose expiry wrapped Iggy's segment check is never expire.
    #[test]
    fn limit_config_value_2_a_set_beyond_what_iggy_counts_never_expires() {
        for value in ["18446744073709551", "9223372036854775807"] {
            assert_eq!(
                expiry_change(&[op("retention.ms", OP_SET, Some(value))]),
                Ok(Some(None)),
                "{value}"
            );
        }
        let (code, _) = expiry_change(&[op("retention.ms", OP_SET, Some("9223372036854775808"))]).unwrap_err();
        assert_eq!(code, 40, "not a long, as Kafka refuses it");
    }

    #[test]
    fn alterconfigs_6_operations_on_cleanup_policy_and_the_tables_keys() {
        let policy = |ops: &[AlterableConfig]| config_change(ops).map(|c| c.policy);
        assert_eq!(
            policy(&[op("cleanup.policy", OP_SET, Some("compact"))]),
            Ok(PolicyEdit::Set(CleanupPolicy::Compact))
        );
        assert_eq!(
            policy(&[op("cleanup.policy", OP_DELETE, None)]),
            Ok(PolicyEdit::Set(CleanupPolicy::Delete))
        );
        assert_eq!(
            policy(&[op("cleanup.policy", OP_APPEND, Some("compact"))]),
            Ok(PolicyEdit::Append(CleanupPolicy::Compact))
        );
        assert_eq!(
            policy(&[op("cleanup.policy", OP_SUBTRACT, Some("delete"))]),
            Ok(PolicyEdit::Subtract(CleanupPolicy::Delete))
        );
        // Harmless keys: SET of a valid value and DELETE change nothing.
        assert_eq!(
            config_change(&[
                op("min.compaction.lag.ms", OP_SET, Some("60000")),
                op("segment.bytes", OP_DELETE, None)
            ]),
            Ok(ConfigChange::default())
        );
        for refused in [
            op("cleanup.policy", OP_SET, Some("none")),
            op("cleanup.policy", OP_SET, None),
            op("min.compaction.lag.ms", OP_SET, Some("-5")),
            op("segment.bytes", OP_APPEND, Some("1048576")),
            op("message.timestamp.type", OP_SET, Some("LogAppendTime")),
            op("max.message.bytes", OP_DELETE, None),
        ] {
            let (code, message) = config_change(std::slice::from_ref(&refused)).unwrap_err();
            assert_eq!(code, 40, "{refused:?}");
            assert!(message.contains(refused.name.as_str()), "{message}");
        }
    }
}
