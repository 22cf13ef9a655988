//! Typed errors of the sans-io core. Each variant names the real cause; the gateway maps them
//! to Kafka error codes in one place (`gateway/src/error_map.rs`).

use thiserror::Error;

/// Why a record batch, a compressed blob or an envelope could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("input ends after {available} bytes, {needed} more needed for {what}")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("record batch magic {0} is not supported (only magic 2)")]
    UnsupportedMagic(i8),
    #[error("record batch CRC32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid {what}: {value}")]
    Invalid { what: &'static str, value: i64 },
    #[error("varint for {0} is longer than its type allows")]
    VarintOverflow(&'static str),
    #[error("record batch declares {declared} records but holds {actual}")]
    RecordCountMismatch { declared: i32, actual: usize },
    #[error("{trailing} unread bytes after the last record of the batch")]
    TrailingBytes { trailing: usize },
    #[error("compression codec id {0} is not defined")]
    UnknownCodec(u8),
    #[error("{codec} stream is corrupt: {reason}")]
    Corrupt { codec: &'static str, reason: String },
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    #[error(transparent)]
    RecordBudget(#[from] RecordBudgetExceeded),
}

/// The shared per-request decompression budget would be exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "decompressed output would exceed the request budget: {requested} bytes requested, {remaining} left of {limit}"
)]
pub struct BudgetExceeded {
    pub requested: u64,
    pub remaining: usize,
    pub limit: usize,
}

/// The per-request record budget would be exceeded (LIMIT-RECORDS-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the request would decode more records than allowed: {requested} declared, {remaining} left of {limit}")]
pub struct RecordBudgetExceeded {
    pub requested: usize,
    pub remaining: usize,
    pub limit: usize,
}
