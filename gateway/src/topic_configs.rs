//! Topic configs beyond `retention.ms` (docs/spec/topics.md, "Topic configs"): the table of every
//! config a framework sets at creation, each honoured, accepted as harmless or refused
//! (TOPIC-CONFIG-2); `cleanup.policy` and what a compacted topic is here (TOPIC-COMPACT-1); and
//! where a topic's policy is kept in Iggy (TOPIC-COMPACT-2).
//!
//! The gateway never compacts: Iggy cannot delete one message, and a Kafka offset is an Iggy
//! offset, so removing records would either move offsets or need gaps Iggy cannot hold. A
//! compacted topic is therefore one whose records time never removes (`compact` alone), so the
//! latest value of every key, and every tombstone, stays readable at its offset for good. What
//! that costs is storage that only grows; `kafka_iggy_gateway_compacted_topic_messages` shows it.
//!
//! The handlers keep reading `retention.ms` themselves (TOPIC-CONFIG-2's first row); every other key
//! comes here through [`check`].

use crate::backend::{Backend, BackendError};
use iggy_common::IggyError;
use std::collections::BTreeSet;

/// Prefix of the Iggy consumer groups that record a topic's configs on it (TOPIC-COMPACT-2), beside
/// the offsets groups' `kafka.cg.`, `kafka.c0.` and `kafka.cr.`.
pub const MARKER_PREFIX: &str = "kafka.tc.";

/// The config names this module decides (DescribeConfigs reads them too).
pub const CLEANUP_POLICY: &str = "cleanup.policy";
pub const RETENTION_MS: &str = "retention.ms";

/// Kafka's `cleanup.policy`, a list of `compact` and `delete` (TOPIC-COMPACT-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Records are removed by retention only (Kafka's default).
    #[default]
    Delete,
    /// Kafka compacts; here nothing is ever removed, retention included.
    Compact,
    /// Kafka compacts and removes by retention; here retention alone removes.
    CompactDelete,
}

impl CleanupPolicy {
    fn of(compact: bool, delete: bool) -> Option<Self> {
        match (compact, delete) {
            (false, true) => Some(Self::Delete),
            (true, false) => Some(Self::Compact),
            (true, true) => Some(Self::CompactDelete),
            (false, false) => None,
        }
    }

    fn flags(self) -> (bool, bool) {
        match self {
            Self::Delete => (false, true),
            Self::Compact => (true, false),
            Self::CompactDelete => (true, true),
        }
    }

    /// A value as Kafka's list validator reads it: comma-separated, blanks trimmed, each `compact`
    /// or `delete` (case-sensitive, as Kafka), at least one.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        let value = value.ok_or("cleanup.policy needs a value")?;
        let (mut compact, mut delete) = (false, false);
        for item in value.split(',').map(str::trim) {
            match item {
                "compact" => compact = true,
                "delete" => delete = true,
                other => {
                    return Err(format!(
                        "cleanup.policy {other:?} is not a cleanup policy: compact, delete or both"
                    ))
                }
            }
        }
        Self::of(compact, delete).ok_or_else(|| "cleanup.policy needs compact, delete or both".to_string())
    }

    /// Kafka's spelling, as DescribeConfigs reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    /// IncrementalAlterConfigs' APPEND (`add`) and SUBTRACT (`!add`) of the list items `given`.
    pub fn edit(self, given: Self, add: bool) -> Result<Self, String> {
        let (mut compact, mut delete) = self.flags();
        let (c, d) = given.flags();
        if add {
            compact |= c;
            delete |= d;
        } else {
            compact &= !c;
            delete &= !d;
        }
        Self::of(compact, delete)
            .ok_or_else(|| "cleanup.policy would be empty: a topic needs compact, delete or both".to_string())
    }
}

/// What a request does to a topic's `cleanup.policy` (ALTERCONFIGS-5, ALTERCONFIGS-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyEdit {
    #[default]
    Keep,
    Set(CleanupPolicy),
    /// APPEND of these items.
    Append(CleanupPolicy),
    /// SUBTRACT of these items.
    Subtract(CleanupPolicy),
}

impl PolicyEdit {
    /// The policy after the edit of `now`, or why it cannot be.
    pub fn applied_to(self, now: CleanupPolicy) -> Result<CleanupPolicy, String> {
        match self {
            Self::Keep => Ok(now),
            Self::Set(p) => Ok(p),
            Self::Append(items) => now.edit(items, true),
            Self::Subtract(items) => now.edit(items, false),
        }
    }
}

/// What one config other than `retention.ms` is, once [`check`]ed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// `cleanup.policy`: honoured (TOPIC-COMPACT-1).
    Policy(CleanupPolicy),
    /// A key the table accepts as harmless, or a value that is what the gateway does anyway:
    /// nothing to apply, nothing stored.
    Ignored,
}

/// How the table decides one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The gateway does what the value asks.
    Honoured,
    /// Accepted and not applied, because no client can tell the difference here.
    Harmless,
    /// Accepted only at the value the gateway already has; any other value is refused.
    OnlyItsValue,
    /// Refused at any value.
    Refused,
}

/// The kind of value Kafka's validator expects.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// A long at or above the bound.
    LongAtLeast(i64),
    /// An int at or above the bound.
    IntAtLeast(i32),
    /// A double within [0, 1].
    Ratio,
    Bool,
    /// Exactly this text.
    Exactly(&'static str),
    /// The policy list.
    Policy,
    /// `retention.ms`, which the handlers read (its values: TOPIC-CONFIG-2).
    Retention,
    /// Any value is refused.
    Never,
}

/// One row of TOPIC-CONFIG-2's table: the key, its decision, the value it takes, and why.
pub struct Row {
    pub name: &'static str,
    pub decision: Decision,
    value: Value,
    pub why: &'static str,
}

const NOTHING_COMPACTED: &str =
    "nothing is ever compacted away here, so every record stays at least as long as this asks";
const KAFKA_STORAGE: &str =
    "the layout and flushing of Kafka's own log files; Iggy's segments and fsync are the server's settings, and no client sees them";

/// TOPIC-CONFIG-2: every topic config the gateway takes. A key not listed is refused.
pub const TABLE: &[Row] = &[
    Row { name: RETENTION_MS, decision: Decision::Honoured, value: Value::Retention,
        why: "the Iggy topic's message expiry: a positive value in ms, -1 never; kept, not applied, while cleanup.policy is compact alone (TOPIC-COMPACT-1)" },
    Row { name: CLEANUP_POLICY, decision: Decision::Honoured, value: Value::Policy,
        why: "compact: time never removes a record; delete and compact,delete: retention.ms does (TOPIC-COMPACT-1)" },
    Row { name: "min.compaction.lag.ms", decision: Decision::Harmless, value: Value::LongAtLeast(0), why: NOTHING_COMPACTED },
    Row { name: "min.cleanable.dirty.ratio", decision: Decision::Harmless, value: Value::Ratio,
        why: "when Kafka's cleaner runs; nothing is compacted here" },
    Row { name: "delete.retention.ms", decision: Decision::Harmless, value: Value::LongAtLeast(0),
        why: "tombstones are never removed from a compacted topic here, so they stay readable at least this long" },
    Row { name: "max.compaction.lag.ms", decision: Decision::OnlyItsValue, value: Value::Exactly("9223372036854775807"),
        why: "it promises that an overwritten value is gone within the bound; the gateway never compacts, so only the default (no bound) is true" },
    Row { name: "segment.bytes", decision: Decision::Harmless, value: Value::IntAtLeast(14), why: KAFKA_STORAGE },
    Row { name: "segment.ms", decision: Decision::Harmless, value: Value::LongAtLeast(1), why: KAFKA_STORAGE },
    Row { name: "segment.jitter.ms", decision: Decision::Harmless, value: Value::LongAtLeast(0), why: KAFKA_STORAGE },
    Row { name: "segment.index.bytes", decision: Decision::Harmless, value: Value::IntAtLeast(4), why: KAFKA_STORAGE },
    Row { name: "index.interval.bytes", decision: Decision::Harmless, value: Value::IntAtLeast(0), why: KAFKA_STORAGE },
    Row { name: "file.delete.delay.ms", decision: Decision::Harmless, value: Value::LongAtLeast(0), why: KAFKA_STORAGE },
    Row { name: "flush.messages", decision: Decision::Harmless, value: Value::LongAtLeast(1), why: KAFKA_STORAGE },
    Row { name: "flush.ms", decision: Decision::Harmless, value: Value::LongAtLeast(0), why: KAFKA_STORAGE },
    Row { name: "preallocate", decision: Decision::Harmless, value: Value::Bool, why: KAFKA_STORAGE },
    Row { name: "retention.bytes", decision: Decision::OnlyItsValue, value: Value::Exactly("-1"),
        why: "no size bound per partition exists here (Iggy's topic size limit refuses writes when full instead of removing old ones); -1, no bound, is what the gateway does" },
    Row { name: "message.timestamp.type", decision: Decision::OnlyItsValue, value: Value::Exactly("CreateTime"),
        why: "batches keep the producer's timestamps (FETCH-BATCH-1); LogAppendTime is not served" },
    Row { name: "min.insync.replicas", decision: Decision::OnlyItsValue, value: Value::Exactly("1"),
        why: "a write is acknowledged once Iggy has it (PRODUCE-ACKS-1); the gateway cannot promise more in-sync replicas" },
    Row { name: "compression.type", decision: Decision::OnlyItsValue, value: Value::Exactly("producer"),
        why: "records are stored as decoded and served uncompressed (FETCH-BATCH-1); no other codec is applied" },
    Row { name: "max.message.bytes", decision: Decision::Refused, value: Value::Never,
        why: "the gateway cannot enforce a batch size per topic; its own limits apply to every topic (docs/spec/limits.md)" },
];

/// The table's row of `name`.
pub fn row(name: &str) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.name == name)
}

/// Why `name` is refused: its row's reason, or that the gateway does not take it.
pub fn unsupported(name: &str) -> String {
    match row(name) {
        Some(r) => format!("config {name} is not supported by this gateway: {}", r.why),
        None => format!(
            "config {name} is not supported by this gateway (docs/spec/topics.md lists the topic configs it takes)"
        ),
    }
}

/// TOPIC-CONFIG-2: a config other than `retention.ms` checked against the table: its value as
/// Kafka's validator would read it, then the row's decision. The error names the key.
pub fn check(name: &str, value: Option<&str>) -> Result<Checked, String> {
    let Some(row) = row(name) else {
        return Err(unsupported(name));
    };
    let value_of = || value.ok_or_else(|| format!("config {name} needs a value"));
    match row.value {
        Value::Policy => return CleanupPolicy::parse(value).map(Checked::Policy),
        Value::Retention => unreachable!("retention.ms is read by the handlers"),
        Value::Never => return Err(unsupported(name)),
        Value::LongAtLeast(min) => {
            let v: i64 = value_of()?
                .trim()
                .parse()
                .map_err(|_| format!("config {name} {value:?} is not a long"))?;
            if v < min {
                return Err(format!("config {name} {v} is below {min}"));
            }
        }
        Value::IntAtLeast(min) => {
            let v: i32 = value_of()?
                .trim()
                .parse()
                .map_err(|_| format!("config {name} {value:?} is not an int"))?;
            if v < min {
                return Err(format!("config {name} {v} is below {min}"));
            }
        }
        Value::Ratio => {
            let v: f64 = value_of()?
                .trim()
                .parse()
                .map_err(|_| format!("config {name} {value:?} is not a number"))?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("config {name} {v} is not within [0, 1]"));
            }
        }
        Value::Bool => {
            let v = value_of()?.trim().to_ascii_lowercase();
            if v != "true" && v != "false" {
                return Err(format!("config {name} {value:?} is not a boolean"));
            }
        }
        Value::Exactly(only) => {
            let v = value_of()?.trim();
            if v != only {
                return Err(format!(
                    "config {name} {v:?} is not supported by this gateway, only {only}: {}",
                    row.why
                ));
            }
        }
    }
    Ok(Checked::Ignored)
}

/// A topic's configs as the gateway keeps them: its policy and its configured retention
/// (`None`: never expire). TOPIC-COMPACT-1: what Iggy's message expiry is follows from both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopicConfig {
    pub policy: CleanupPolicy,
    /// `retention.ms` as configured, in microseconds.
    pub retention_us: Option<u64>,
}

impl TopicConfig {
    /// TOPIC-COMPACT-1: the Iggy topic's message expiry: never for `compact` alone, whatever
    /// `retention.ms` says, else the retention.
    pub fn expiry_us(&self) -> Option<u64> {
        match self.policy {
            CleanupPolicy::Compact => None,
            _ => self.retention_us,
        }
    }

    /// TOPIC-COMPACT-2: the marker groups that record this config on the Iggy topic: the policy
    /// unless it is `delete`, and the retention while the expiry cannot hold it.
    pub fn markers(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if self.policy != CleanupPolicy::Delete {
            out.insert(format!("{MARKER_PREFIX}{CLEANUP_POLICY}={}", self.policy.as_str()));
        }
        if let (CleanupPolicy::Compact, Some(us)) = (self.policy, self.retention_us) {
            out.insert(format!("{MARKER_PREFIX}{RETENTION_MS}={}", us / 1_000));
        }
        out
    }

    /// TOPIC-COMPACT-2: the config recorded on a topic whose Iggy expiry is `expiry_us` and whose
    /// consumer groups are `groups`. Of several policy markers (a change cut short), one that
    /// keeps records from time wins: `compact` alone, then `compact,delete`.
    pub fn read(expiry_us: Option<u64>, groups: &[String]) -> Self {
        let mut policies = Vec::new();
        let mut retention = None;
        for marker in groups.iter().filter_map(|g| g.strip_prefix(MARKER_PREFIX)) {
            if let Some(v) = marker.strip_prefix("cleanup.policy=") {
                if let Ok(p) = CleanupPolicy::parse(Some(v)) {
                    policies.push(p);
                }
            } else if let Some(v) = marker.strip_prefix("retention.ms=") {
                retention = v.parse::<u64>().ok().and_then(|ms| ms.checked_mul(1_000));
            }
        }
        let policy = [CleanupPolicy::Compact, CleanupPolicy::CompactDelete]
            .into_iter()
            .find(|p| policies.contains(p))
            .unwrap_or_default();
        let retention_us = match policy {
            CleanupPolicy::Compact => retention,
            _ => expiry_us,
        };
        Self { policy, retention_us }
    }
}

/// The marker groups on the Iggy topic.
async fn markers_of<B: Backend>(backend: &B, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
    Ok(backend
        .list_consumer_groups(stream, topic)
        .await?
        .into_iter()
        .filter(|g| g.starts_with(MARKER_PREFIX))
        .collect())
}

/// TOPIC-COMPACT-2: the topic's config as recorded, from its expiry and its marker groups.
pub async fn read<B: Backend>(
    backend: &B,
    stream: &str,
    topic: &str,
    expiry_us: Option<u64>,
) -> Result<TopicConfig, BackendError> {
    Ok(TopicConfig::read(expiry_us, &markers_of(backend, stream, topic).await?))
}

/// TOPIC-COMPACT-2: makes the Iggy topic hold `next` (its expiry and its markers), `now` being
/// what it holds. The order keeps TOPIC-COMPACT-1 through a change cut short: records never
/// expire while a marker says `compact` alone, so a change to `compact` sets the expiry before
/// the markers and a change from it the markers before the expiry. The expiry is set in every
/// change, first when markers come first at its current value: Iggy's UpdateTopic asks the
/// permission to manage the topic (ALTERCONFIGS-1), which creating a consumer group does not.
pub async fn apply<B: Backend>(
    backend: &B,
    stream: &str,
    topic: &str,
    now: TopicConfig,
    next: TopicConfig,
) -> Result<(), BackendError> {
    let markers_first = now.policy == CleanupPolicy::Compact && next.policy != CleanupPolicy::Compact;
    if markers_first {
        backend.set_message_expiry(stream, topic, now.expiry_us()).await?;
        write_markers(backend, stream, topic, &next).await?;
        backend.set_message_expiry(stream, topic, next.expiry_us()).await
    } else {
        backend.set_message_expiry(stream, topic, next.expiry_us()).await?;
        write_markers(backend, stream, topic, &next).await
    }
}

/// Creates the markers `config` needs and deletes the others, the new ones first.
pub async fn write_markers<B: Backend>(
    backend: &B,
    stream: &str,
    topic: &str,
    config: &TopicConfig,
) -> Result<(), BackendError> {
    let held: BTreeSet<String> = markers_of(backend, stream, topic).await?.into_iter().collect();
    let wanted = config.markers();
    for marker in wanted.difference(&held) {
        match backend.create_consumer_group(stream, topic, marker).await {
            Err(BackendError::Iggy(IggyError::ConsumerGroupNameAlreadyExists(..))) | Ok(()) => {}
            Err(e) => return Err(e),
        }
    }
    for marker in held.difference(&wanted) {
        match backend.delete_consumer_group(stream, topic, marker).await {
            Err(BackendError::Iggy(
                IggyError::ConsumerGroupIdNotFound(..) | IggyError::ConsumerGroupNameNotFound(..),
            ))
            | Ok(()) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The compacted topics (`compact` or `compact,delete`) this gateway has created, altered or
/// described since it started, for the storage gauges (docs/operating.md): what never compacting
/// costs (TOPIC-COMPACT-1) is storage that only grows, and these topics are where it grows.
#[derive(Debug, Default)]
pub struct CompactedTopics(std::sync::Mutex<BTreeSet<(String, String)>>);

impl CompactedTopics {
    /// Records what a topic's policy was found or set to.
    pub fn note(&self, stream: &str, topic: &str, policy: CleanupPolicy) {
        let mut known = self.0.lock().expect("the compacted-topic set is never poisoned");
        let key = (stream.to_string(), topic.to_string());
        if policy == CleanupPolicy::Delete {
            known.remove(&key);
        } else {
            known.insert(key);
        }
    }

    /// The known compacted topics that still exist, and the messages their partitions hold
    /// (high watermark less log start, summed). A topic found deleted is forgotten; one the
    /// backend does not answer for is left out of this count.
    pub async fn retained<B: Backend>(&self, backend: &B) -> (u64, u64) {
        let known: Vec<(String, String)> = self
            .0
            .lock()
            .expect("the compacted-topic set is never poisoned")
            .iter()
            .cloned()
            .collect();
        let (mut topics, mut messages) = (0, 0);
        for (stream, topic) in known {
            match backend.get_topic(&stream, &topic).await {
                Ok(Some(info)) => {
                    topics += 1;
                    for partition in 0..info.partitions {
                        if let Ok(w) = backend.watermarks(&stream, &topic, partition).await {
                            messages += w.high_watermark.saturating_sub(w.log_start_offset);
                        }
                    }
                }
                Ok(None) => {
                    self.0
                        .lock()
                        .expect("the compacted-topic set is never poisoned")
                        .remove(&(stream, topic));
                }
                Err(_) => {}
            }
        }
        (topics, messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_compact_1_policy_values_are_kafkas_list() {
        for (value, policy) in [
            ("delete", CleanupPolicy::Delete),
            ("compact", CleanupPolicy::Compact),
            ("compact,delete", CleanupPolicy::CompactDelete),
            ("delete, compact", CleanupPolicy::CompactDelete),
            ("compact,compact", CleanupPolicy::Compact),
        ] {
            assert_eq!(CleanupPolicy::parse(Some(value)), Ok(policy), "{value}");
        }
        for bad in [None, Some(""), Some("Compact"), Some("compact,none"), Some("none")] {
            assert!(CleanupPolicy::parse(bad).is_err(), "{bad:?}");
        }
        // APPEND and SUBTRACT of list items.
        assert_eq!(
            PolicyEdit::Append(CleanupPolicy::Compact).applied_to(CleanupPolicy::Delete),
            Ok(CleanupPolicy::CompactDelete)
        );
        assert_eq!(
            PolicyEdit::Subtract(CleanupPolicy::Delete).applied_to(CleanupPolicy::CompactDelete),
            Ok(CleanupPolicy::Compact)
        );
        assert!(PolicyEdit::Subtract(CleanupPolicy::Compact)
            .applied_to(CleanupPolicy::Compact)
            .is_err());
    }

    #[test]
    fn topic_compact_1_compact_alone_never_expires_and_keeps_its_retention() {
        let day = Some(86_400_000_000);
        let compact = TopicConfig {
            policy: CleanupPolicy::Compact,
            retention_us: day,
        };
        assert_eq!(compact.expiry_us(), None);
        for policy in [CleanupPolicy::Delete, CleanupPolicy::CompactDelete] {
            assert_eq!(
                TopicConfig {
                    policy,
                    retention_us: day
                }
                .expiry_us(),
                day
            );
        }
    }

    #[test]
    fn topic_compact_2_markers_round_trip() {
        let day = Some(86_400_000_000);
        for config in [
            TopicConfig::default(),
            TopicConfig {
                policy: CleanupPolicy::Delete,
                retention_us: day,
            },
            TopicConfig {
                policy: CleanupPolicy::Compact,
                retention_us: None,
            },
            TopicConfig {
                policy: CleanupPolicy::Compact,
                retention_us: day,
            },
            TopicConfig {
                policy: CleanupPolicy::CompactDelete,
                retention_us: day,
            },
        ] {
            let mut groups: Vec<String> = config.markers().into_iter().collect();
            // Offsets groups beside them are not markers.
            groups.push("kafka.cg.cleanup.policy=delete".into());
            assert_eq!(TopicConfig::read(config.expiry_us(), &groups), config, "{groups:?}");
        }
        assert_eq!(
            TopicConfig {
                policy: CleanupPolicy::Compact,
                retention_us: day
            }
            .markers()
            .into_iter()
            .collect::<Vec<_>>(),
            ["kafka.tc.cleanup.policy=compact", "kafka.tc.retention.ms=86400000"]
        );
        // A change cut short between two policy markers: compact alone wins, keeping records.
        let both = [
            "kafka.tc.cleanup.policy=compact,delete".to_string(),
            "kafka.tc.cleanup.policy=compact".into(),
        ];
        assert_eq!(TopicConfig::read(day, &both).policy, CleanupPolicy::Compact);
    }

    #[test]
    fn topic_config_2_every_row_is_decided_and_other_keys_refused() {
        // Harmless keys take Kafka's valid values, and are refused outside them, naming the key.
        for (name, ok, bad) in [
            ("min.compaction.lag.ms", "3600000", "-1"),
            ("min.cleanable.dirty.ratio", "0.5", "1.5"),
            ("delete.retention.ms", "86400000", "x"),
            ("segment.bytes", "52428800", "1"),
            ("segment.ms", "604800000", "0"),
            ("preallocate", "true", "yes"),
            ("flush.messages", "1", "0"),
        ] {
            assert_eq!(check(name, Some(ok)), Ok(Checked::Ignored), "{name}={ok}");
            let refused = check(name, Some(bad)).unwrap_err();
            assert!(refused.contains(name), "{refused}");
            assert!(check(name, None).is_err(), "{name} without a value");
        }
        // Keys taken at the gateway's own value only.
        for (name, ok, bad) in [
            ("retention.bytes", "-1", "1073741824"),
            ("message.timestamp.type", "CreateTime", "LogAppendTime"),
            ("min.insync.replicas", "1", "2"),
            ("compression.type", "producer", "zstd"),
            ("max.compaction.lag.ms", "9223372036854775807", "86400000"),
        ] {
            assert_eq!(check(name, Some(ok)), Ok(Checked::Ignored), "{name}={ok}");
            let refused = check(name, Some(bad)).unwrap_err();
            assert!(refused.contains(name), "{refused}");
        }
        assert_eq!(
            check("cleanup.policy", Some("compact,delete")),
            Ok(Checked::Policy(CleanupPolicy::CompactDelete))
        );
        for name in [
            "max.message.bytes",
            "confluent.value.schema.validation",
            "remote.storage.enable",
        ] {
            let refused = check(name, Some("1")).unwrap_err();
            assert!(refused.contains(name), "{refused}");
        }
        // Every row has a reason, and no name is listed twice.
        let names: BTreeSet<&str> = TABLE.iter().map(|r| r.name).collect();
        assert_eq!(names.len(), TABLE.len());
        assert!(TABLE.iter().all(|r| !r.why.is_empty()));
    }

    /// The storage gauges' count: the messages of the compacted topics known, forgetting a topic
    /// set back to `delete` or deleted.
    #[tokio::test]
    async fn compacted_topics_count_what_their_partitions_hold() {
        use crate::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
        use crate::backend::TopicSpec;
        use crate::clock::SystemClock;
        use bytes::Bytes;
        use iggy_common::IggyMessage;
        let backend = EmbeddedBackend::new(std::sync::Arc::new(SystemClock), EmbeddedConfig::default());
        backend.ensure_stream("s").await.unwrap();
        for (topic, partitions) in [("configs", 1), ("offsets", 2), ("plain", 1)] {
            let spec = TopicSpec {
                partitions,
                message_expiry_us: None,
            };
            backend.create_topic("s", topic, spec).await.unwrap();
        }
        let messages = |n: usize| -> Vec<IggyMessage> {
            (0..n)
                .map(|_| {
                    IggyMessage::builder()
                        .payload(Bytes::from_static(b"v"))
                        .build()
                        .unwrap()
                })
                .collect()
        };
        backend.append("s", "configs", 0, messages(3)).await.unwrap();
        backend.append("s", "offsets", 0, messages(4)).await.unwrap();
        backend.append("s", "offsets", 1, messages(5)).await.unwrap();
        backend.append("s", "plain", 0, messages(7)).await.unwrap();
        let known = CompactedTopics::default();
        assert_eq!(known.retained(&backend).await, (0, 0));
        known.note("s", "configs", CleanupPolicy::Compact);
        known.note("s", "offsets", CleanupPolicy::CompactDelete);
        known.note("s", "plain", CleanupPolicy::Delete);
        assert_eq!(known.retained(&backend).await, (2, 12));
        known.note("s", "offsets", CleanupPolicy::Delete);
        assert_eq!(known.retained(&backend).await, (1, 3));
        backend.delete_topic("s", "configs").await.unwrap();
        assert_eq!(known.retained(&backend).await, (0, 0));
        assert!(known.0.lock().unwrap().is_empty(), "a deleted topic is forgotten");
    }
}
