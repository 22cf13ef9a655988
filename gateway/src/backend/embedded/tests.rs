//! The embedded model answers as Iggy server 0.9.0-edge.5 does (docs/spec/real-iggy-differs.md).

use super::*;
use bytes::Bytes;
use iggy_common::{HeaderKey, HeaderValue};
use std::sync::atomic::{AtomicU64, Ordering};

struct StepClock(AtomicU64);

impl Clock for StepClock {
    fn now_us(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

fn backend() -> (EmbeddedBackend, Arc<StepClock>) {
    let clock = Arc::new(StepClock(AtomicU64::new(1_000_000)));
    (EmbeddedBackend::new(clock.clone(), EmbeddedConfig::default()), clock)
}

fn msg(payload: &'static [u8]) -> IggyMessage {
    IggyMessage::builder()
        .payload(Bytes::from_static(payload))
        .build()
        .unwrap()
}

fn code(e: BackendError) -> u32 {
    match e {
        BackendError::Iggy(e) => e.as_code(),
        BackendError::TooManyConsumerOffsets => 3024,
        other => panic!("the embedded model raised {other}"),
    }
}

async fn topic(b: &EmbeddedBackend, partitions: u32) {
    b.ensure_stream("s").await.unwrap();
    b.create_topic(
        "s",
        "t",
        TopicSpec {
            partitions,
            message_expiry_us: None,
        },
    )
    .await
    .unwrap();
}

const ALL: ReadLimits = ReadLimits {
    max_messages: 1000,
    max_bytes: u64::MAX,
};

#[tokio::test]
async fn offsets_start_at_zero_and_the_confirmation_names_the_base() {
    let (b, _) = backend();
    topic(&b, 2).await;
    assert_eq!(
        b.append("s", "t", 1, vec![msg(b"a"), msg(b"b")]).await.unwrap(),
        Some(0)
    );
    assert_eq!(b.append("s", "t", 1, vec![msg(b"c")]).await.unwrap(), Some(2));
    let read = b.read("s", "t", 1, 1, ALL).await.unwrap();
    assert_eq!(read.iter().map(|m| m.header.offset).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(
        read[0].header.timestamp, 1_000_000,
        "server timestamp from the injected clock"
    );
    assert!(
        b.read("s", "t", 1, 3, ALL).await.unwrap().is_empty(),
        "past the end is empty, not an error"
    );
    let marks = b.watermarks("s", "t", 1).await.unwrap();
    assert_eq!((marks.log_start_offset, marks.high_watermark), (0, 3));
}

#[tokio::test]
async fn offset_base_1_a_model_without_confirmations_stores_and_confirms_nothing() {
    let clock = Arc::new(StepClock(AtomicU64::new(1)));
    let b = EmbeddedBackend::new(
        clock,
        EmbeddedConfig {
            send_confirmations: false,
            ..EmbeddedConfig::default()
        },
    );
    topic(&b, 1).await;
    assert_eq!(b.append("s", "t", 0, vec![msg(b"a"), msg(b"b")]).await.unwrap(), None);
    assert_eq!(b.append("s", "t", 0, vec![msg(b"c")]).await.unwrap(), None);
    let read = b.read("s", "t", 0, 0, ALL).await.unwrap();
    assert_eq!(
        read.iter()
            .map(|m| (m.header.offset, m.payload.clone()))
            .collect::<Vec<_>>(),
        vec![
            (0, Bytes::from_static(b"a")),
            (1, Bytes::from_static(b"b")),
            (2, Bytes::from_static(b"c"))
        ],
        "unconfirmed sends are stored all the same"
    );
}

#[tokio::test]
async fn diff_8_missing_partition_is_resource_not_found() {
    let (b, _) = backend();
    topic(&b, 1).await;
    let err = b.append("s", "t", 1, vec![msg(b"a")]).await.unwrap_err();
    assert_eq!(code(err), IggyError::ResourceNotFound(String::new()).as_code());
}

#[tokio::test]
async fn map_ts_split_1_model_refuses_a_send_spreading_more_than_u32_micros() {
    let (b, _) = backend();
    topic(&b, 1).await;
    let mut old = msg(b"old");
    old.header.origin_timestamp = 0;
    let mut now = msg(b"now");
    now.header.origin_timestamp = u64::from(u32::MAX) + 1;
    let err = b.append("s", "t", 0, vec![old, now]).await.unwrap_err();
    assert_eq!(code(err), 4038);
    assert_eq!(
        b.watermarks("s", "t", 0).await.unwrap().high_watermark,
        0,
        "nothing of the send is stored"
    );
    let mut edge = msg(b"edge");
    edge.header.origin_timestamp = u64::from(u32::MAX);
    let mut zero = msg(b"zero");
    zero.header.origin_timestamp = 0;
    b.append("s", "t", 0, vec![zero, edge]).await.unwrap();
}

#[tokio::test]
async fn limit_header_field_1_model_validates_like_the_sdk() {
    let (b, _) = backend();
    topic(&b, 1).await;
    // DIFF-10: an empty payload sent past the SDK's builder is stored, as the server does.
    let empty = IggyMessage {
        payload: Bytes::new(),
        ..IggyMessage::default()
    };
    assert_eq!(b.append("s", "t", 0, vec![empty]).await.unwrap(), Some(0));
    assert!(
        IggyMessage::builder().payload(Bytes::new()).build().is_err(),
        "the builder refuses it"
    );
    let too_big_headers = IggyMessage {
        payload: Bytes::from_static(b"x"),
        user_headers: Some(Bytes::from(vec![0u8; MAX_USER_HEADERS_SIZE as usize + 1])),
        ..IggyMessage::default()
    };
    assert_eq!(
        code(b.append("s", "t", 0, vec![too_big_headers]).await.unwrap_err()),
        4017
    );
    assert!(HeaderValue::try_from(vec![0u8; 256]).is_err());
    assert!(HeaderKey::try_from("").is_err());
}

#[tokio::test]
async fn diff_1_storing_needs_membership_and_ownership_reading_does_not() {
    let (b, _) = backend();
    topic(&b, 3).await;
    for p in 0..3 {
        b.append("s", "t", p, vec![msg(b"a"), msg(b"b")]).await.unwrap();
    }
    b.create_consumer_group("s", "t", "kafka.cg.g").await.unwrap();
    let not_found = IggyError::ResourceNotFound(String::new()).as_code();
    assert_eq!(
        code(
            b.store_consumer_offset("s", "t", 0, "kafka.cg.g", 1, 0)
                .await
                .unwrap_err()
        ),
        not_found
    );
    b.join_consumer_group("s", "t", "kafka.cg.g", 1).await.unwrap();
    for p in 0..3 {
        b.store_consumer_offset("s", "t", p, "kafka.cg.g", 1, 1).await.unwrap();
    }
    // Two members: A holds [0, 1], B holds [2], as measured on the real server.
    b.join_consumer_group("s", "t", "kafka.cg.g", 2).await.unwrap();
    b.store_consumer_offset("s", "t", 1, "kafka.cg.g", 1, 0).await.unwrap();
    assert_eq!(
        code(
            b.store_consumer_offset("s", "t", 2, "kafka.cg.g", 1, 0)
                .await
                .unwrap_err()
        ),
        not_found
    );
    b.store_consumer_offset("s", "t", 2, "kafka.cg.g", 2, 0).await.unwrap();
    assert_eq!(
        code(
            b.store_consumer_offset("s", "t", 0, "kafka.cg.g", 2, 0)
                .await
                .unwrap_err()
        ),
        not_found
    );
    // B leaves: A holds all three again.
    b.leave_consumer_group("s", "t", "kafka.cg.g", 2).await.unwrap();
    b.store_consumer_offset("s", "t", 2, "kafka.cg.g", 1, 1).await.unwrap();
    // Reading needs no membership.
    assert_eq!(b.get_consumer_offset("s", "t", 1, "kafka.cg.g").await.unwrap(), Some(0));
}

#[tokio::test]
async fn diff_2_offsets_above_the_last_offset_are_invalid_and_may_move_backwards() {
    let (b, _) = backend();
    topic(&b, 1).await;
    b.create_consumer_group("s", "t", "g").await.unwrap();
    b.join_consumer_group("s", "t", "g", 9).await.unwrap();
    assert_eq!(
        code(b.store_consumer_offset("s", "t", 0, "g", 9, 0).await.unwrap_err()),
        4100,
        "0 on an empty partition"
    );
    b.append("s", "t", 0, vec![msg(b"a"), msg(b"b")]).await.unwrap();
    b.store_consumer_offset("s", "t", 0, "g", 9, 1).await.unwrap();
    assert_eq!(
        code(b.store_consumer_offset("s", "t", 0, "g", 9, 2).await.unwrap_err()),
        4100,
        "caught-up commit"
    );
    b.store_consumer_offset("s", "t", 0, "g", 9, 0).await.unwrap();
    assert_eq!(b.get_consumer_offset("s", "t", 0, "g").await.unwrap(), Some(0));
}

#[tokio::test]
async fn diff_3_deleting_an_absent_offset_is_consumer_offset_not_found() {
    let (b, _) = backend();
    topic(&b, 1).await;
    b.create_consumer_group("s", "t", "g").await.unwrap();
    b.join_consumer_group("s", "t", "g", 1).await.unwrap();
    assert_eq!(
        code(b.delete_consumer_offset("s", "t", 0, "g", 1).await.unwrap_err()),
        3021
    );
}

#[tokio::test]
async fn limit_offset_keys_1_too_many_consumer_offsets() {
    let clock = Arc::new(StepClock(AtomicU64::new(1)));
    let b = EmbeddedBackend::new(
        clock,
        EmbeddedConfig {
            consumer_offsets_max: 2,
            ..EmbeddedConfig::default()
        },
    );
    topic(&b, 1).await;
    b.append("s", "t", 0, vec![msg(b"a")]).await.unwrap();
    for g in ["g1", "g2", "g3"] {
        b.create_consumer_group("s", "t", g).await.unwrap();
        b.join_consumer_group("s", "t", g, 1).await.unwrap();
    }
    b.store_consumer_offset("s", "t", 0, "g1", 1, 0).await.unwrap();
    b.store_consumer_offset("s", "t", 0, "g2", 1, 0).await.unwrap();
    b.store_consumer_offset("s", "t", 0, "g2", 1, 0).await.unwrap();
    assert!(matches!(
        b.store_consumer_offset("s", "t", 0, "g3", 1, 0).await.unwrap_err(),
        BackendError::TooManyConsumerOffsets
    ));
}

#[tokio::test]
async fn expiry_drops_old_messages_and_moves_the_log_start() {
    let (b, clock) = backend();
    b.ensure_stream("s").await.unwrap();
    b.create_topic(
        "s",
        "t",
        TopicSpec {
            partitions: 1,
            message_expiry_us: Some(10),
        },
    )
    .await
    .unwrap();
    b.append("s", "t", 0, vec![msg(b"a")]).await.unwrap();
    clock.0.fetch_add(100, Ordering::Relaxed);
    b.append("s", "t", 0, vec![msg(b"b")]).await.unwrap();
    let marks = b.watermarks("s", "t", 0).await.unwrap();
    assert_eq!((marks.log_start_offset, marks.high_watermark), (1, 2));
}

#[tokio::test]
async fn timestamp_lookup_finds_the_first_message_at_or_after() {
    let (b, clock) = backend();
    topic(&b, 1).await;
    b.append("s", "t", 0, vec![msg(b"a")]).await.unwrap();
    clock.0.store(2_000_000, Ordering::Relaxed);
    b.append("s", "t", 0, vec![msg(b"b")]).await.unwrap();
    assert_eq!(
        b.offset_for_timestamp("s", "t", 0, 1_500_000).await.unwrap(),
        Some((1, 2_000_000))
    );
    assert_eq!(
        b.offset_for_timestamp("s", "t", 0, 0).await.unwrap(),
        Some((0, 1_000_000))
    );
    assert_eq!(b.offset_for_timestamp("s", "t", 0, 3_000_000).await.unwrap(), None);
}

#[tokio::test]
async fn wait_for_append_resolves_once_an_append_happens() {
    let (b, _) = backend();
    topic(&b, 1).await;
    let b = Arc::new(b);
    let seen = b.append_generation();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.wait_for_append(seen).await }
    });
    b.append("s", "t", 0, vec![msg(b"a")]).await.unwrap();
    waiter.await.unwrap();
    assert_ne!(b.append_generation(), seen);
}

#[tokio::test]
async fn topic_names_and_duplicates() {
    let (b, _) = backend();
    topic(&b, 1).await;
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    assert_eq!(code(b.create_topic("s", "t", spec).await.unwrap_err()), 2013);
    b.delete_topic("s", "t").await.unwrap();
    b.create_topic("s", "t", spec).await.unwrap();
    assert_eq!(code(b.create_topic("nope", "t", spec).await.unwrap_err()), 1009);
}

/// Found by the auth differential: Iggy gives a new topic the lowest free id, so a deleted
/// topic's id (and any grant naming it) passes to the next topic created in the stream.
#[tokio::test]
async fn authz_model_1_a_deleted_topics_id_is_reused() {
    let (b, _) = backend();
    b.ensure_stream("s").await.unwrap();
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    for t in ["a", "b", "c"] {
        b.create_topic("s", t, spec).await.unwrap();
    }
    assert_eq!(b.topic_ids("s", "c"), Some((0, 2)));
    b.delete_topic("s", "b").await.unwrap();
    b.create_topic("s", "d", spec).await.unwrap();
    assert_eq!(b.topic_ids("s", "d"), Some((0, 1)));
    b.create_topic("s", "e", spec).await.unwrap();
    assert_eq!(b.topic_ids("s", "e"), Some((0, 3)));
}

/// Found by the auth differential: storing or deleting a group offset as a non-member is
/// ResourceNotFound whatever the user's permissions; the poll rule comes after membership.
#[tokio::test]
async fn authz_model_1_membership_is_checked_before_the_poll_rule() {
    use crate::auth::credentials::Credentials;
    let (b, _) = backend();
    topic(&b, 1).await;
    b.append("s", "t", 0, vec![msg(b"a")]).await.unwrap();
    b.create_consumer_group("s", "t", "g").await.unwrap();
    b.create_user("nobody", "secret", iggy_common::UserStatus::Active, None)
        .unwrap();
    let (as_nobody, _) = b
        .open_session(&Credentials::password("nobody", "secret"))
        .await
        .unwrap();
    let not_found = IggyError::ResourceNotFound(String::new()).as_code();
    assert_eq!(
        code(
            as_nobody
                .store_consumer_offset("s", "t", 0, "g", 9, 0)
                .await
                .unwrap_err()
        ),
        not_found
    );
    assert_eq!(
        code(as_nobody.delete_consumer_offset("s", "t", 0, "g", 9).await.unwrap_err()),
        not_found
    );
    b.join_consumer_group("s", "t", "g", 9).await.unwrap();
    let denied = IggyError::Unauthorized.as_code();
    assert_eq!(
        code(
            as_nobody
                .store_consumer_offset("s", "t", 0, "g", 9, 0)
                .await
                .unwrap_err()
        ),
        denied
    );
}
