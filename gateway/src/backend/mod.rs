//! The backend port: exactly the Iggy operations the gateway needs, shaped so the Iggy SDK fits
//! it. Names are Iggy names (stream, topic); partitions are 0-based on both sides.

pub mod append_signal;
pub mod embedded;
mod error;
pub mod iggy;
pub mod iggy_layout;
pub mod metered;
pub mod permissions;
pub mod roster;
pub mod users;

pub use error::BackendError;

use crate::auth::credentials::{Credentials, Principal};
use iggy_common::IggyMessage;
use std::future::Future;

/// A message's payload and user-header bytes: what Iggy's size limits and the gateway's read
/// limits count.
pub fn stored_bytes(message: &IggyMessage) -> u64 {
    (message.payload.len() + message.user_headers.as_ref().map_or(0, |h| h.len())) as u64
}

/// `items` cut into `ranges`, consecutive from 0 to its end, each a send of its own. The first
/// keeps `items`' own memory; later ones are moved out of its tail. `Vec::split_off(0)` copies
/// every element into a new vector, and messages are about 130 bytes each: that was 1 % of the
/// gateway's CPU on a 1 KiB produce, where the first range is usually the only one.
pub(crate) fn split_into_ranges<T>(mut items: Vec<T>, ranges: &[std::ops::Range<usize>]) -> Vec<Vec<T>> {
    let mut parts: Vec<Vec<T>> = ranges
        .iter()
        .skip(1)
        .rev()
        .map(|range| items.split_off(range.start))
        .collect();
    parts.push(items);
    parts.reverse();
    parts
}

/// How old a log start offset a read made ahead may report (FETCH-READAHEAD-1): as old as the
/// read itself may be when it is served.
pub const READ_AHEAD_LOG_START_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// A partition's watermarks and a read from `offset`, asked at once so the caller waits for one
/// backend round trip instead of two; the read is judged against the watermarks afterwards,
/// exactly as if it had been made after them.
pub async fn watermarks_and_read<B: Backend + ?Sized>(
    backend: &B,
    stream: &str,
    topic: &str,
    partition: u32,
    offset: u64,
    limits: ReadLimits,
) -> (Result<Watermarks, BackendError>, Result<Vec<IggyMessage>, BackendError>) {
    tokio::join!(
        backend.watermarks(stream, topic, partition),
        backend.read(stream, topic, partition, offset, limits)
    )
}

/// What CreateTopics asks of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSpec {
    pub partitions: u32,
    /// `None`: messages never expire.
    pub message_expiry_us: Option<u64>,
}

/// A topic as the backend reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub partitions: u32,
    pub message_expiry_us: Option<u64>,
}

/// Offsets bounding a partition's retained messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// Offset of the first retained message; equals `high_watermark` when none is retained.
    pub log_start_offset: u64,
    /// Offset the next appended message will get (last offset + 1; 0 when empty).
    pub high_watermark: u64,
}

/// Limits of one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    pub max_messages: u32,
    /// Stop once this many bytes of payload and headers are returned; the first message is
    /// always returned whole.
    pub max_bytes: u64,
}

/// The Iggy operations the gateway uses.
pub trait Backend: ConsumerOffsets + Send + Sync + 'static {
    /// A short name for logs: "embedded" or "iggy".
    fn kind(&self) -> &'static str;

    /// Why the backend cannot reach a primary right now, when it knows (CLUSTER-FAILOVER-2):
    /// `/readyz` adds it to its answer. `None`: nothing known to be wrong.
    fn unavailable_reason(&self) -> Option<String> {
        None
    }

    /// Why the backend is unfit to serve although its metadata calls answer (CLUSTER-SPLIT-1):
    /// `/readyz` says not ready with it even when its probe succeeds. `None`: nothing known.
    fn degraded_reason(&self) -> Option<String> {
        None
    }

    /// Logs in to Iggy as `credentials` and returns a backend on which Iggy authorizes every
    /// operation as that user, and the user (AUTHZ-SESSION-1). It shares this backend's server
    /// (or model) and its append notifications. A personal access token logs in as its own user,
    /// whatever the name in `credentials`; the caller compares the names.
    fn open_session(
        &self,
        credentials: &Credentials,
    ) -> impl Future<Output = Result<(Self, Principal), BackendError>> + Send
    where
        Self: Sized;

    /// Creates the stream when it does not exist.
    fn ensure_stream(&self, stream: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn list_topics(&self, stream: &str) -> impl Future<Output = Result<Vec<TopicInfo>, BackendError>> + Send;

    /// `Ok(None)` when the stream or the topic does not exist.
    fn get_topic(
        &self,
        stream: &str,
        topic: &str,
    ) -> impl Future<Output = Result<Option<TopicInfo>, BackendError>> + Send;

    fn create_topic(
        &self,
        stream: &str,
        topic: &str,
        spec: TopicSpec,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn delete_topic(&self, stream: &str, topic: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Adds `count` partitions to the topic, numbered after its last one (Iggy's
    /// CreatePartitions; it needs the permission to manage the topic). TOPIC-ADD-PARTITIONS-1: the
    /// only way the gateway changes a topic's partition count.
    fn add_partitions(
        &self,
        stream: &str,
        topic: &str,
        count: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Sets the topic's message expiry (`None`: never expire), leaving everything else of it
    /// alone (Iggy's UpdateTopic; it needs the permission to manage the topic). ALTERCONFIGS-1:
    /// the only topic setting the gateway changes after creation. A backend without it refuses
    /// with Iggy's FeatureUnavailable.
    fn set_message_expiry(
        &self,
        _stream: &str,
        _topic: &str,
        _message_expiry_us: Option<u64>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(Err(BackendError::Iggy(iggy_common::IggyError::FeatureUnavailable)))
    }

    /// Appends `messages` to one partition in one send. Returns the base offset from the
    /// confirmation, or `None` when the server sent none.
    fn append(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> impl Future<Output = Result<Option<u64>, BackendError>> + Send;

    /// Messages from `offset` on, within `limits`; empty past the end.
    fn read(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> impl Future<Output = Result<Vec<IggyMessage>, BackendError>> + Send;

    fn watermarks(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
    ) -> impl Future<Output = Result<Watermarks, BackendError>> + Send;

    /// Where a read from `offset` within `limits` will end (its last offset plus one), when the
    /// backend knows it exactly before reading, so that the read after it can be started at
    /// once (FETCH-READAHEAD-2). `None` when it does not; a wrong answer costs a wasted read,
    /// never a wrong one.
    fn planned_read_end(
        &self,
        _stream: &str,
        _topic: &str,
        _partition: u32,
        _offset: u64,
        _limits: ReadLimits,
    ) -> Option<u64> {
        None
    }

    /// What a read made ahead of a Fetch needs (FETCH-READAHEAD-1): the partition's watermarks
    /// and the messages from `offset` on, within `limits`. The default asks both at once. A
    /// backend whose read answers the high watermark itself may take it from there, with a log
    /// start offset it was told less than [`READ_AHEAD_LOG_START_MAX_AGE`] before, and so save a
    /// round trip.
    fn read_with_watermarks(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> impl Future<Output = (Result<Watermarks, BackendError>, Result<Vec<IggyMessage>, BackendError>)> + Send {
        watermarks_and_read(self, stream, topic, partition, offset, limits)
    }

    /// The first retained message whose server timestamp is at or after `timestamp_us`:
    /// its offset and server timestamp.
    fn offset_for_timestamp(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_us: u64,
    ) -> impl Future<Output = Result<Option<(u64, u64)>, BackendError>> + Send;

    /// A counter that moves whenever any partition gains messages.
    fn append_generation(&self) -> u64;

    /// Resolves once `append_generation()` differs from `seen`. Fetch long-polls with it under
    /// its own deadline.
    fn wait_for_append(&self, seen: u64) -> impl Future<Output = ()> + Send;
}

/// Identifies the backend client (one SDK connection) a consumer-group operation is made on.
/// Iggy ties group membership to the connection, so the gateway must say which one it uses.
pub type ClientId = u64;

/// Consumer groups and consumer offsets, the store of Kafka committed offsets
/// (docs/spec/consumer-offsets.md). Offsets are always of the consumer-group kind.
pub trait ConsumerOffsets: Send + Sync + 'static {
    /// Creates the Iggy consumer group; an existing group is an error
    /// (`ConsumerGroupNameAlreadyExists`).
    fn create_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Deletes the Iggy consumer group and every offset stored under it.
    /// The client's connection ended (gateway shutdown): Iggy drops its group memberships. The
    /// SDK backend closes the connection; the embedded model drops them itself.
    fn release_client(&self, client: ClientId);

    fn delete_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// The names of the topic's consumer groups.
    fn list_consumer_groups(
        &self,
        stream: &str,
        topic: &str,
    ) -> impl Future<Output = Result<Vec<String>, BackendError>> + Send;

    fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Reading needs no membership. `Ok(None)` when nothing is stored.
    fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> impl Future<Output = Result<Option<u64>, BackendError>> + Send;

    fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges come back in order, whole; the first keeps the vector's memory, so a send of one
    /// range copies no message (the regression: `split_off(0)` copied them all).
    #[test]
    fn split_into_ranges_keeps_order_and_moves_the_first_range_without_copying() {
        let items: Vec<u32> = (0..6).collect();
        let memory = items.as_ptr();
        let parts = split_into_ranges(items, &[0..3, 3..5, 5..6]);
        assert_eq!(parts, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
        assert_eq!(parts[0].as_ptr(), memory);
        let items: Vec<u32> = (0..4).collect();
        let memory = items.as_ptr();
        let whole = std::iter::once(0..4).collect::<Vec<_>>();
        let parts = split_into_ranges(items, &whole);
        assert_eq!(parts, vec![vec![0, 1, 2, 3]]);
        assert_eq!(parts[0].as_ptr(), memory);
    }
}
