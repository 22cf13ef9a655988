//! Idempotent producers, honoured (docs/spec/producer-ids.md): per producer id and partition,
//! the epoch and the last runs of sequences written, checked before every idempotent batch is
//! written so a retried batch is stored once.
//!
//! - [`partition`]: the sans-io state of one partition and Kafka's checks against it.
//! - [`table`]: every partition's state in this gateway, its limits and expiry.
//! - [`settings`]: the `[producers]` settings and their defaults.
//! - [`log_read`]: bringing a partition's state up to date from the log through the backend,
//!   where the producer tags of the stored messages (kig-core's `producer_tag`) say who wrote
//!   what; the state itself is a cache of the log, which is why it survives a gateway restart
//!   and an Iggy failover.

pub mod log_read;
pub mod partition;
pub mod settings;
pub mod table;

#[cfg(test)]
mod tests;

pub use partition::{Owner, PartitionProducers, ProducerRefusal, Verdict};
pub use table::{PartitionKey, PartitionSlot, ProducerStateSettings, ProducerStates};
