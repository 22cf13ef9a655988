//! CreateTopics and the topic rules (TOPIC-NAME-1, TOPIC-PARTITIONS-1, TOPIC-REPLICATION-1,
//! TOPIC-CONFIG-2, TOPIC-COMPACT-1, TOPIC-EXISTS-1). A topic named more than once is refused at each mention, as
//! Kafka does (LIMIT-CREATETOPICS-DUPLICATES-1).

use crate::auth::sessions::Session;
use crate::backend::{Backend, BackendError, TopicSpec};
use crate::error_map;
use crate::gateway::Gateway;
use crate::topic_configs::{self, Checked, TopicConfig};
use iggy_common::IggyError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;

/// Kafka's longest topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// TOPIC-NAME-1: Kafka's topic-name rules.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(format!(
            "topic name is {} bytes, longer than {MAX_TOPIC_NAME_LEN}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name contains {c:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"
        ));
    }
    Ok(())
}

/// LIMIT-CONFIG-VALUE-2: the longest `retention.ms` sent to Iggy as an expiry, Long.MAX_VALUE
/// microseconds in milliseconds (about 292,000 years). Iggy adds the expiry to a sealed segment's
/// newest timestamp in unchecked u64; this much added to any timestamp before 2^63 µs (the year
/// 294,247) does not wrap.
pub(crate) const RETENTION_MS_NEVER_ABOVE: i64 = i64::MAX / 1_000;

/// TOPIC-CONFIG-2: the Iggy message expiry a `retention.ms` value stands for, or why the value
/// is refused. CreateTopics and the config alterations (ALTERCONFIGS-1) read it alike.
pub(crate) fn retention_ms_expiry(value: Option<&str>) -> Result<Option<u64>, String> {
    let ms: i64 = value
        .ok_or("retention.ms needs a value")?
        .parse()
        .map_err(|_| format!("retention.ms {value:?} is not a number"))?;
    match ms {
        -1 => Ok(None),
        // LIMIT-CONFIG-VALUE-2: a retention longer than Iggy can add to a timestamp without
        // wrapping (a wrapped sum deletes every sealed segment at once) is one no message
        // outlives: never expire, as Kafka's Long.MAX_VALUE is in effect.
        ms if ms > RETENTION_MS_NEVER_ABOVE => Ok(None),
        ms if ms > 0 => Ok(Some(ms as u64 * 1_000)),
        ms => Err(format!("retention.ms {ms} must be positive or -1")),
    }
}

/// TOPIC-CONFIG-2: `retention.ms` becomes the retention, and every other config is decided by
/// the table, of which `cleanup.policy` is kept (TOPIC-COMPACT-1).
fn topic_config(topic: &CreatableTopic) -> Result<TopicConfig, String> {
    let mut out = TopicConfig::default();
    for config in &topic.configs {
        let value = config.value.as_ref().map(|v| v.as_str());
        match config.name.as_str() {
            "retention.ms" => out.retention_us = retention_ms_expiry(value)?,
            other => {
                if let Checked::Policy(policy) = topic_configs::check(other, value)? {
                    out.policy = policy;
                }
            }
        }
    }
    Ok(out)
}

/// The message expiry CreateTopics gives the Iggy topic (TOPIC-COMPACT-1).
#[cfg(test)]
fn message_expiry(topic: &CreatableTopic) -> Result<Option<u64>, String> {
    topic_config(topic).map(|c| c.expiry_us())
}

/// Creates the Iggy topic a Kafka topic maps to, creating its stream when missing. The topic is
/// created first and the stream only when Iggy says it is missing: a user may hold
/// `manage_topics` on a stream without the `read_stream` that looking the stream up needs.
pub(crate) async fn create_kafka_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    partitions: u32,
    message_expiry_us: Option<u64>,
) -> Result<(), i16> {
    let target = gateway.config.topics.resolve(name);
    let context = format!("creating topic {name}");
    let spec = TopicSpec {
        partitions,
        message_expiry_us,
    };
    let create = || session.backend.create_topic(&target.stream, &target.topic, spec);
    match create().await {
        Err(BackendError::Iggy(IggyError::StreamIdNotFound(_) | IggyError::StreamNameNotFound(_))) => {
            session
                .backend
                .ensure_stream(&target.stream)
                .await
                // AUTHZ-MAP-1: a stream the principal may not create is a cluster-level refusal.
                .map_err(|e| error_map::backend_error_on(&e, error_map::Resource::Cluster, &context))?;
            create().await.map_err(|e| error_map::backend_error(&e, &context))
        }
        other => other.map_err(|e| error_map::backend_error(&e, &context)),
    }
}

/// TOPIC-COMPACT-2: records a created topic's policy in its marker groups. A topic whose policy
/// could not be recorded is deleted again, so that it never stands as `delete` when `compact`
/// was asked: the creation is answered as failed.
async fn record_config<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    config: &TopicConfig,
) -> Result<(), (i16, String)> {
    if config.markers().is_empty() {
        return Ok(());
    }
    let target = gateway.config.topics.resolve(name);
    let backend = &*session.backend;
    if let Err(e) = topic_configs::write_markers(backend, &target.stream, &target.topic, config).await {
        let context = format!("recording the configs of topic {name}");
        let code = error_map::backend_error(&e, &context);
        let _ = backend.delete_topic(&target.stream, &target.topic).await;
        return Err((code, format!("topic {name} not created: {context} failed: {e}")));
    }
    gateway
        .compacted_topics
        .note(&target.stream, &target.topic, config.policy);
    Ok(())
}

async fn create_one<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    topic: &CreatableTopic,
    validate_only: bool,
) -> Result<u32, (i16, String)> {
    let name = topic.name.0.as_str();
    validate_topic_name(name).map_err(|m| (ResponseError::InvalidTopicException.code(), m))?;
    let partitions = match topic.num_partitions {
        -1 => gateway.config.default_partitions,
        n if n > 0 => n as u32,
        n => return Err((ResponseError::InvalidPartitions.code(), format!("{n} partitions"))),
    };
    if topic.replication_factor == 0 || topic.replication_factor < -1 {
        return Err((
            ResponseError::InvalidReplicationFactor.code(),
            format!("replication factor {}", topic.replication_factor),
        ));
    }
    if !topic.assignments.is_empty() {
        return Err((
            ResponseError::InvalidReplicaAssignment.code(),
            "manual replica assignment is not supported".into(),
        ));
    }
    let config = topic_config(topic).map_err(|m| (ResponseError::InvalidConfig.code(), m))?;
    // TOPIC-VALIDATE-ONLY-1: every check above has run; answer as creating would, create nothing.
    if validate_only {
        let target = gateway.config.topics.resolve(name);
        return match session.backend.get_topic(&target.stream, &target.topic).await {
            Ok(Some(_)) => Err((ResponseError::TopicAlreadyExists.code(), format!("topic {name} exists"))),
            _ => Ok(partitions),
        };
    }
    create_kafka_topic(gateway, session, name, partitions, config.expiry_us())
        .await
        .map_err(|code| (code, format!("topic {name} not created")))?;
    record_config(gateway, session, name, &config).await?;
    Ok(partitions)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    let mut named = std::collections::HashMap::<&str, usize>::new();
    for topic in &request.topics {
        *named.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        // LIMIT-CREATETOPICS-DUPLICATES-1: which mention was meant is unknown; none is created.
        let outcome = if named[topic.name.0.as_str()] > 1 {
            Err((
                ResponseError::InvalidRequest.code(),
                "Found multiple entries for this topic.".to_string(),
            ))
        } else {
            create_one(gateway, session, topic, request.validate_only).await
        };
        results.push(match outcome {
            Ok(partitions) => result
                .with_num_partitions(partitions as i32)
                .with_replication_factor(1)
                .with_configs(Some(vec![])),
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(crate::limits::error_message(message))))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_name_1_kafka_rules() {
        for ok in ["a", "orders.v2", "A_b-c", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a b", "ä", "a/b", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }

    fn with_retention(ms: &str) -> CreatableTopic {
        use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
        CreatableTopic::default().with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(StrBytes::from_string(ms.to_string())))])
    }

    /// What the pinned server does with a sealed segment (`Segment::is_expired`, iggy 0.9.0-edge.5):
    /// `newest_timestamp + expiry <= now` in unchecked u64, which a release build wraps.
    fn iggy_expires(newest_timestamp_us: u64, expiry_us: u64, now_us: u64) -> bool {
        newest_timestamp_us.wrapping_add(expiry_us) <= now_us
    }

    #[test]
    fn limit_config_value_2_no_retention_kafka_accepts_wraps_iggys_segment_check() {
        // 2026 in microseconds, and the last instant below 2^63 µs (the year 294,247).
        let (now, far) = (1_780_000_000_000_000u64, (1u64 << 63) - 1);
        // The report's value: accepted before, and its expiry wrapped Iggy's check, deleting
        // every sealed segment at once.
        let reported = 18_446_744_073_709_551_i64;
        assert!(iggy_expires(now, reported as u64 * 1_000, now), "the fear is real");
        for ms in [reported, RETENTION_MS_NEVER_ABOVE + 1, i64::MAX] {
            assert_eq!(
                message_expiry(&with_retention(&ms.to_string())).unwrap(),
                None,
                "retention.ms {ms}: longer than Iggy can count, so never"
            );
        }
        // The largest expiry sent, added to any timestamp before 2^63 µs, never wraps.
        let largest = message_expiry(&with_retention(&RETENTION_MS_NEVER_ABOVE.to_string()))
            .unwrap()
            .expect("an expiry");
        assert_eq!(largest, RETENTION_MS_NEVER_ABOVE as u64 * 1_000);
        for newest in [now, far] {
            assert!(newest.checked_add(largest).is_some(), "{newest} + {largest}");
            assert!(!iggy_expires(newest, largest, now), "{newest} + {largest}");
        }
        assert_eq!(message_expiry(&with_retention("-1")).unwrap(), None);
        assert_eq!(message_expiry(&with_retention("1500")).unwrap(), Some(1_500_000));
        // Kafka's own refusals stand: not a long, 0 (TOPIC-CONFIG-2), below -1.
        for refused in ["9223372036854775808", "0", "-2", "1e3"] {
            assert!(message_expiry(&with_retention(refused)).is_err(), "{refused}");
        }
    }
}
