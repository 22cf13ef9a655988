//! Sans-io core of the Kafka-to-Iggy gateway: pure functions over bytes and values.
//!
//! - [`batch`]: the Kafka record batch (magic 2), decode and encode, CRC32C.
//! - [`compression`]: gzip, snappy, lz4 and zstd under one per-request [`budget`].
//! - [`mapping`]: a Kafka record becomes an Iggy message and back, per `docs/spec/mapping.md`.
//! - [`envelope`]: the fallback payload layout for records Iggy cannot hold natively.
//! - [`fetch_batch`]: the uncompressed batch a Fetch answers with.
//! - [`timestamps`]: splitting one Kafka batch into Iggy sends that the server accepts.
//! - [`producer_tag`]: the idempotent producer's id, epoch and sequence in a stored message's id.
//!
//! Nothing here opens a socket, reads a clock or spawns a task.

pub mod batch;
pub mod budget;
pub mod compression;
pub mod envelope;
pub mod error;
pub mod fetch_batch;
pub mod mapping;
pub mod producer_tag;
pub mod timestamps;
pub mod varint;
