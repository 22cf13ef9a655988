//! The topic list of a consumer-protocol subscription (the metadata a `consumer` member sends in
//! JoinGroup), read from its bytes with every count checked before anything is allocated
//! (GROUP-SUBSCRIPTION-1). Pure: bytes in, topics out.
//!
//! `ConsumerProtocolSubscription` is not flexible in any version, and its first field, in every
//! version, is `topics`: an INT32 count, then that many INT16-length strings. Nothing after it
//! is needed to know what a member subscribes to, so nothing after it is read.

use std::collections::BTreeSet;

/// Why a subscription names no topic the gateway can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// Too short, a negative version or count, a string past the end, or a name not UTF-8.
    #[error("the subscription does not decode: {0}")]
    Malformed(&'static str),
    /// More topics declared than a JoinGroup may name (LIMIT-ENTRIES-1's limit).
    #[error("the subscription declares {declared} topics, at most {limit} are accepted")]
    TooManyTopics { declared: usize, limit: usize },
}

/// The distinct, non-empty topic names `metadata` subscribes to, sorted. A declared count is
/// checked against `max_topics` and against the bytes left (each name takes at least its
/// two-byte length) before any name is read.
///
/// ```
/// use kafka_iggy_gateway::groups::subscription::subscribed_topics;
/// // Version 0, two topics: "b" and "a", then user data (not read).
/// let metadata = [0, 0, 0, 0, 0, 2, 0, 1, b'b', 0, 1, b'a', 255, 255, 255, 255];
/// assert_eq!(subscribed_topics(&metadata, 10).unwrap(), ["a", "b"]);
/// ```
pub fn subscribed_topics(metadata: &[u8], max_topics: usize) -> Result<Vec<String>, SubscriptionError> {
    let mut rest = metadata;
    let version = take_i16(&mut rest).ok_or(SubscriptionError::Malformed("no version"))?;
    if version < 0 {
        return Err(SubscriptionError::Malformed("negative version"));
    }
    let count = take_i32(&mut rest).ok_or(SubscriptionError::Malformed("no topic count"))?;
    let declared = usize::try_from(count).map_err(|_| SubscriptionError::Malformed("negative topic count"))?;
    if declared.saturating_mul(2) > rest.len() {
        return Err(SubscriptionError::Malformed("more topics declared than bytes left"));
    }
    if declared > max_topics {
        return Err(SubscriptionError::TooManyTopics {
            declared,
            limit: max_topics,
        });
    }
    let mut topics = BTreeSet::new();
    for _ in 0..declared {
        let len = take_i16(&mut rest).ok_or(SubscriptionError::Malformed("topic name cut short"))?;
        let len = usize::try_from(len).map_err(|_| SubscriptionError::Malformed("null topic name"))?;
        if len > rest.len() {
            return Err(SubscriptionError::Malformed("topic name past the end"));
        }
        let (name, tail) = rest.split_at(len);
        rest = tail;
        let name = std::str::from_utf8(name).map_err(|_| SubscriptionError::Malformed("topic name not UTF-8"))?;
        // An empty name is no topic: a subscription of a million of them subscribes to nothing.
        if !name.is_empty() && !topics.contains(name) {
            topics.insert(name.to_string());
        }
    }
    Ok(topics.into_iter().collect())
}

fn take_i16(rest: &mut &[u8]) -> Option<i16> {
    let (head, tail) = rest.split_first_chunk::<2>()?;
    *rest = tail;
    Some(i16::from_be_bytes(*head))
}

fn take_i32(rest: &mut &[u8]) -> Option<i32> {
    let (head, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(i32::from_be_bytes(*head))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    fn encoded(version: i16, topics: &[&str]) -> Vec<u8> {
        let subscription = ConsumerProtocolSubscription::default()
            .with_topics(topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect())
            .with_user_data(Some(bytes::Bytes::from_static(b"user data")));
        let mut out = bytes::BytesMut::new();
        out.extend_from_slice(&version.to_be_bytes());
        subscription.encode(&mut out, version).unwrap();
        out.to_vec()
    }

    #[test]
    fn group_subscription_1_every_version_reads_its_topics() {
        for version in 0..=3 {
            assert_eq!(
                subscribed_topics(&encoded(version, &["orders", "audit", "orders"]), 10).unwrap(),
                ["audit", "orders"],
                "v{version}"
            );
        }
    }

    #[test]
    fn group_subscription_1_a_declared_count_is_checked_before_reading() {
        // 4,192,248 empty names in 8 MiB: the count passes the bytes-left check, not the limit.
        let mut metadata = vec![0, 0];
        metadata.extend_from_slice(&4_192_248i32.to_be_bytes());
        metadata.resize(6 + 2 * 4_192_248, 0);
        assert_eq!(
            subscribed_topics(&metadata, 10_000),
            Err(SubscriptionError::TooManyTopics {
                declared: 4_192_248,
                limit: 10_000
            })
        );
        // A count past the bytes left is refused whatever the limit.
        let mut short = vec![0, 0];
        short.extend_from_slice(&1_000i32.to_be_bytes());
        assert!(matches!(
            subscribed_topics(&short, usize::MAX),
            Err(SubscriptionError::Malformed(_))
        ));
    }

    #[test]
    fn group_subscription_1_empty_names_are_no_topics() {
        let mut metadata = vec![0, 0];
        metadata.extend_from_slice(&5_000i32.to_be_bytes());
        metadata.resize(6 + 2 * 5_000, 0);
        assert_eq!(subscribed_topics(&metadata, 10_000).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn group_subscription_1_malformed_input_is_an_error() {
        for bad in [
            &[][..],
            &[0][..],
            &[255, 255, 0, 0, 0, 0][..],
            &[0, 0, 255, 255, 255, 255][..],
        ] {
            assert!(matches!(
                subscribed_topics(bad, 10),
                Err(SubscriptionError::Malformed(_))
            ));
        }
        // A name running past the end, a null name, a name that is not UTF-8.
        for bad in [
            &[0, 0, 0, 0, 0, 1, 0, 9, b'a'][..],
            &[0, 0, 0, 0, 0, 1, 255, 255][..],
            &[0, 0, 0, 0, 0, 1, 0, 1, 0xff][..],
        ] {
            assert!(subscribed_topics(bad, 10).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn group_subscription_1_agrees_with_the_full_decoder(
            version in 0i16..=3,
            topics in proptest::collection::vec("[a-z.]{0,12}", 0..20),
        ) {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let mut expected: Vec<String> = topics.iter().filter(|t| !t.is_empty()).cloned().collect();
            expected.sort();
            expected.dedup();
            prop_assert_eq!(subscribed_topics(&encoded(version, &names), 100).unwrap(), expected);
        }

        #[test]
        fn group_subscription_1_never_panics(metadata in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = subscribed_topics(&metadata, 8);
        }
    }
}
