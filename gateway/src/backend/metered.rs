//! A [`Backend`] decorator that times every backend call and counts its failures by operation,
//! and counts the records appended and read (docs/operating.md). It wraps whichever backend the
//! binary builds, so neither backend nor any handler carries metrics code.

use super::{Backend, BackendError, ClientId, ConsumerOffsets, ReadLimits, TopicInfo, TopicSpec, Watermarks};
use crate::auth::credentials::{Credentials, Principal};
use crate::metrics::metrics;
use iggy_common::IggyMessage;
use std::future::Future;
use std::time::Instant;

/// `inner` with its calls measured.
pub struct Metered<B> {
    inner: B,
}

impl<B> Metered<B> {
    pub fn new(inner: B) -> Self {
        Self { inner }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }
}

/// Awaits `call` and records its time and outcome under `operation`.
async fn timed<T>(
    operation: &'static str,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let started = Instant::now();
    let result = call.await;
    record(operation, started, result.is_err());
    result
}

/// Records one call that began at `started`: in the metrics, and as a trace event so that a
/// timeline of calls can be laid beside a client's (docs/operating.md, "Timelines").
fn record(operation: &'static str, started: Instant, failed: bool) {
    let elapsed = started.elapsed();
    metrics().record_backend_call(operation, elapsed, failed);
    tracing::trace!(
        operation,
        elapsed_us = elapsed.as_micros() as u64,
        failed,
        "backend call"
    );
}

impl<B: Backend> Backend for Metered<B> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn unavailable_reason(&self) -> Option<String> {
        self.inner.unavailable_reason()
    }

    fn degraded_reason(&self) -> Option<String> {
        self.inner.degraded_reason()
    }

    async fn open_session(&self, credentials: &Credentials) -> Result<(Self, Principal), BackendError> {
        let (inner, principal) = timed("open_session", self.inner.open_session(credentials)).await?;
        Ok((Metered { inner }, principal))
    }

    async fn ensure_stream(&self, stream: &str) -> Result<(), BackendError> {
        timed("ensure_stream", self.inner.ensure_stream(stream)).await
    }

    async fn list_topics(&self, stream: &str) -> Result<Vec<TopicInfo>, BackendError> {
        timed("list_topics", self.inner.list_topics(stream)).await
    }

    async fn get_topic(&self, stream: &str, topic: &str) -> Result<Option<TopicInfo>, BackendError> {
        timed("get_topic", self.inner.get_topic(stream, topic)).await
    }

    async fn create_topic(&self, stream: &str, topic: &str, spec: TopicSpec) -> Result<(), BackendError> {
        timed("create_topic", self.inner.create_topic(stream, topic, spec)).await
    }

    async fn delete_topic(&self, stream: &str, topic: &str) -> Result<(), BackendError> {
        timed("delete_topic", self.inner.delete_topic(stream, topic)).await
    }

    async fn add_partitions(&self, stream: &str, topic: &str, count: u32) -> Result<(), BackendError> {
        timed("add_partitions", self.inner.add_partitions(stream, topic, count)).await
    }

    async fn set_message_expiry(
        &self,
        stream: &str,
        topic: &str,
        message_expiry_us: Option<u64>,
    ) -> Result<(), BackendError> {
        timed(
            "set_message_expiry",
            self.inner.set_message_expiry(stream, topic, message_expiry_us),
        )
        .await
    }

    async fn append(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> Result<Option<u64>, BackendError> {
        let records = messages.len();
        let result = timed("append", self.inner.append(stream, topic, partition, messages)).await;
        if result.is_ok() {
            metrics().add_produced_records(records);
        }
        result
    }

    async fn read(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Result<Vec<IggyMessage>, BackendError> {
        let messages = timed("read", self.inner.read(stream, topic, partition, offset, limits)).await?;
        metrics().add_fetched_records(messages.len());
        Ok(messages)
    }

    async fn watermarks(&self, stream: &str, topic: &str, partition: u32) -> Result<Watermarks, BackendError> {
        timed("watermarks", self.inner.watermarks(stream, topic, partition)).await
    }

    fn planned_read_end(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Option<u64> {
        self.inner.planned_read_end(stream, topic, partition, offset, limits)
    }

    async fn read_with_watermarks(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> (Result<Watermarks, BackendError>, Result<Vec<IggyMessage>, BackendError>) {
        let started = Instant::now();
        let (marks, read) = self
            .inner
            .read_with_watermarks(stream, topic, partition, offset, limits)
            .await;
        record("read_with_watermarks", started, marks.is_err() || read.is_err());
        if let Ok(messages) = &read {
            metrics().add_fetched_records(messages.len());
        }
        (marks, read)
    }

    async fn offset_for_timestamp(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_us: u64,
    ) -> Result<Option<(u64, u64)>, BackendError> {
        timed(
            "offset_for_timestamp",
            self.inner.offset_for_timestamp(stream, topic, partition, timestamp_us),
        )
        .await
    }

    fn append_generation(&self) -> u64 {
        self.inner.append_generation()
    }

    // Not timed: a long poll's wait is the client's max_wait_ms, not the backend's latency.
    fn wait_for_append(&self, seen: u64) -> impl Future<Output = ()> + Send {
        self.inner.wait_for_append(seen)
    }
}

impl<B: ConsumerOffsets> ConsumerOffsets for Metered<B> {
    async fn create_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        timed(
            "create_consumer_group",
            self.inner.create_consumer_group(stream, topic, group),
        )
        .await
    }

    fn release_client(&self, client: ClientId) {
        self.inner.release_client(client)
    }

    async fn delete_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        timed(
            "delete_consumer_group",
            self.inner.delete_consumer_group(stream, topic, group),
        )
        .await
    }

    async fn list_consumer_groups(&self, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
        timed("list_consumer_groups", self.inner.list_consumer_groups(stream, topic)).await
    }

    async fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        timed(
            "join_consumer_group",
            self.inner.join_consumer_group(stream, topic, group, client),
        )
        .await
    }

    async fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        timed(
            "leave_consumer_group",
            self.inner.leave_consumer_group(stream, topic, group, client),
        )
        .await
    }

    async fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        timed(
            "store_consumer_offset",
            self.inner
                .store_consumer_offset(stream, topic, partition, group, client, offset),
        )
        .await
    }

    async fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> Result<Option<u64>, BackendError> {
        timed(
            "get_consumer_offset",
            self.inner.get_consumer_offset(stream, topic, partition, group),
        )
        .await
    }

    async fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        timed(
            "delete_consumer_offset",
            self.inner
                .delete_consumer_offset(stream, topic, partition, group, client),
        )
        .await
    }
}

/// Every operation name the decorator records, for docs/operating.md and its test.
pub const OPERATIONS: &[&str] = &[
    "open_session",
    "ensure_stream",
    "list_topics",
    "get_topic",
    "create_topic",
    "delete_topic",
    "add_partitions",
    "append",
    "read",
    "watermarks",
    "read_with_watermarks",
    "offset_for_timestamp",
    "create_consumer_group",
    "delete_consumer_group",
    "list_consumer_groups",
    "join_consumer_group",
    "leave_consumer_group",
    "store_consumer_offset",
    "get_consumer_offset",
    "delete_consumer_offset",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
    use crate::clock::SystemClock;
    use std::sync::Arc;

    #[tokio::test]
    async fn calls_pass_through_and_are_counted_by_operation() {
        let backend = Metered::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()));
        backend.ensure_stream("metered").await.unwrap();
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        backend.create_topic("metered", "t", spec).await.unwrap();
        assert!(
            backend.create_topic("metered", "t", spec).await.is_err(),
            "a second create fails"
        );
        let topic = backend.get_topic("metered", "t").await.unwrap();
        assert_eq!(topic.map(|t| t.partitions), Some(1), "the inner backend's answer");
        let text = metrics().encode();
        let count = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        assert!(count("kafka_iggy_gateway_backend_errors_total{operation=\"create_topic\"}") >= 1.0);
        assert!(count("kafka_iggy_gateway_backend_call_duration_seconds_count{operation=\"get_topic\"}") >= 1.0);
    }
}
