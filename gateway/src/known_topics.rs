//! Topics a backend session has found by a lookup, kept for a second so that a stream of
//! Produce requests does not make a topic lookup each (PRODUCE-RESOLVE-2).
//!
//! Why: on the real Iggy backend a lookup is a `get_topic` round trip that waits behind the
//! server's appends. Round 11 of docs/performance-history.md traced it at 0.7–1.1 ms at the median and
//! 1.7–3.6 ms at the p99 per Produce, longer at the tail than the decode it overlaps, so it set
//! the latency tail of every record. A kept topic only lets a Produce go on to its append, which
//! the backend checks again; a refusal always comes from a fresh lookup.

use crate::backend::TopicInfo;
use std::collections::HashMap;
use std::sync::Mutex;

/// How long a lookup's answer is used for (gateway clock, µs).
pub const KNOWN_TOPIC_TTL_US: u64 = 1_000_000;
/// Topics kept per session (docs/spec/limits.md); when full, the record is cleared.
pub const MAX_KNOWN_TOPICS: usize = 4096;

/// A session's record of found topics, by Kafka topic name: the topic mapping gives each one
/// Iggy target, so the name is the key, and a lookup borrows it.
#[derive(Default)]
pub struct KnownTopics {
    found: Mutex<HashMap<String, (TopicInfo, u64)>>,
}

impl KnownTopics {
    /// The topic `kafka_topic` as a lookup found it at most [`KNOWN_TOPIC_TTL_US`] before `now_us`.
    pub fn get(&self, kafka_topic: &str, now_us: u64) -> Option<TopicInfo> {
        let found = self.found.lock().expect("known topics lock poisoned");
        let (info, found_at_us) = found.get(kafka_topic)?;
        (now_us.saturating_sub(*found_at_us) < KNOWN_TOPIC_TTL_US).then(|| info.clone())
    }

    /// Records that a lookup at `now_us` found `kafka_topic` as `info`.
    pub fn remember(&self, kafka_topic: &str, info: &TopicInfo, now_us: u64) {
        let mut found = self.found.lock().expect("known topics lock poisoned");
        // PRODUCE-RESOLVE-2's bound: a client naming ever new topics cannot grow the record.
        if found.len() >= MAX_KNOWN_TOPICS {
            found.clear();
        }
        found.insert(kafka_topic.to_string(), (info.clone(), now_us));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(partitions: u32) -> TopicInfo {
        TopicInfo {
            name: "t".into(),
            partitions,
            message_expiry_us: None,
        }
    }

    #[test]
    fn produce_resolve_2_a_found_topic_is_kept_for_its_ttl_and_not_after() {
        let known = KnownTopics::default();
        assert_eq!(known.get("orders", 0), None);
        known.remember("orders", &info(3), 10);
        assert_eq!(known.get("orders", 10 + KNOWN_TOPIC_TTL_US - 1), Some(info(3)));
        assert_eq!(known.get("orders", 10 + KNOWN_TOPIC_TTL_US), None);
        assert_eq!(known.get("other", 10), None);
    }

    #[test]
    fn produce_resolve_2_a_full_record_is_cleared_not_grown() {
        let known = KnownTopics::default();
        for i in 0..MAX_KNOWN_TOPICS {
            known.remember(&format!("t{i}"), &info(1), 0);
        }
        known.remember("one-more", &info(1), 0);
        assert_eq!(known.found.lock().expect("not poisoned").len(), 1);
        assert_eq!(known.get("t0", 0), None);
        assert_eq!(known.get("one-more", 0), Some(info(1)));
    }
}
