//! The record batch a Fetch serves from a partition's messages: each message mapped back to a
//! Kafka record (MAP-READ-MALFORMED-1 logged where one is not the mapping's form) and added while
//! the batch stays within the byte limit, the first always (FETCH-BATCH-1, FETCH-LIMIT-1). A
//! Fetch builds it, or a read made ahead of the Fetch already did (FETCH-READAHEAD-3).

use crate::backend::stored_bytes;
use bytes::Bytes;
use iggy_common::IggyMessage;
use kig_core::fetch_batch::FetchBatchBuilder;
use kig_core::mapping::{message_to_record, ReadForm};

/// A record's encoding beyond its stored payload and headers (length, attributes, deltas, key
/// and value lengths), about; only sizes the batch buffer.
const RECORD_OVERHEAD_BYTES: usize = 16;

/// A batch built from the first `served` of some messages within `limit_bytes`.
#[derive(Debug, Clone)]
pub(crate) struct FetchedBatch {
    /// The byte limit it was built within.
    pub limit_bytes: usize,
    /// `None` when there were no messages.
    pub batch: Option<Bytes>,
    /// How many of the messages it holds, from the first.
    pub served: usize,
}

impl FetchedBatch {
    /// The batch's length in bytes (0 when there is none).
    pub fn len(&self) -> usize {
        self.batch.as_ref().map_or(0, Bytes::len)
    }
}

/// Builds the batch of `messages` (consecutive, increasing offsets) within `limit_bytes`.
/// `context` names the read in a log line.
pub(crate) fn build(messages: &[IggyMessage], limit_bytes: usize, context: &dyn Fn() -> String) -> FetchedBatch {
    // Room for what was read, up to the limit, so the batch is written without regrowing.
    let stored: usize = messages
        .iter()
        .map(|m| RECORD_OVERHEAD_BYTES + stored_bytes(m) as usize)
        .sum();
    let mut builder = FetchBatchBuilder::with_capacity(stored.min(limit_bytes));
    let mut served = 0;
    for message in messages {
        let (record, form) = message_to_record(message);
        if let ReadForm::Malformed(reason) = &form {
            // MAP-READ-MALFORMED-1
            tracing::warn!(
                "{}: offset {} served as a native message: {reason}",
                context(),
                message.header.offset
            );
        }
        if !builder.push_within(message.header.offset, &record, limit_bytes) {
            break;
        }
        served += 1;
    }
    FetchedBatch {
        limit_bytes,
        batch: builder.finish(),
        served,
    }
}
