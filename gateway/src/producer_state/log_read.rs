//! Bringing one partition's producer state up to date from its log, through the backend port:
//! the tail of a partition this gateway has not read (PRODUCER-STATE-REBUILD-1), or everything
//! stored since an append whose outcome is unknown (PRODUCER-UNKNOWN-1). Only the message ids
//! are kept (the producer tags); payloads are dropped chunk by chunk.
//!
//! The partition's high watermark only says where to start reading back: the log is read on
//! past it until a read comes back empty, so a count reported behind what a node stores does
//! not cut the read short. A node just elected primary may still serve a log without the last
//! records the old one acknowledged; PRODUCER-UNKNOWN-3 retries the batch that then seems to
//! leave a gap, and reads again.

use super::partition::ReadNeed;
use super::table::{PartitionKey, PartitionSlot, ProducerStates};
use crate::backend::{stored_bytes, Backend, BackendError, ReadLimits};
use kig_core::producer_tag::ProducerTag;

/// Messages asked for by one backward step of the read.
const STEP_MESSAGES: u64 = 4_096;
/// Bytes one backend read may return: a step takes several reads when its messages are large.
const READ_BYTES: u64 = 1024 * 1024;

/// What one forward read found: the tags, where it ended, the bytes it went over.
struct Forward {
    tags: Vec<(u64, ProducerTag)>,
    /// One past the last message read, or where the read began when it found none.
    end: u64,
    bytes: u64,
}

/// Reads forward from `start` while messages come back, up to `stop` when given, else until a
/// read is empty or `max_messages` have been read.
async fn read_forward<B: Backend>(
    backend: &B,
    key: &PartitionKey,
    start: u64,
    stop: Option<u64>,
    max_messages: u64,
) -> Result<Forward, BackendError> {
    let mut out = Forward {
        tags: Vec::new(),
        end: start,
        bytes: 0,
    };
    let limit = stop.unwrap_or(u64::MAX).min(start.saturating_add(max_messages));
    while out.end < limit {
        let wanted = u32::try_from((limit - out.end).min(STEP_MESSAGES)).unwrap_or(u32::MAX);
        let limits = ReadLimits {
            max_messages: wanted,
            max_bytes: READ_BYTES,
        };
        let messages = backend
            .read(&key.stream, &key.topic, key.partition, out.end, limits)
            .await?;
        let mut advanced = false;
        for message in messages.iter().take_while(|m| m.header.offset < limit) {
            if message.header.offset < out.end {
                continue;
            }
            out.bytes += stored_bytes(message);
            if let Some(tag) = ProducerTag::from_id(message.header.id) {
                out.tags.push((message.header.offset, tag));
            }
            out.end = message.header.offset + 1;
            advanced = true;
        }
        if !advanced {
            break;
        }
    }
    Ok(out)
}

/// Reads what the partition's state needs from the log and applies it. Called with the
/// partition's append lock held, so no append of this gateway races the read. Reads go
/// through `backend`, the gateway's own account: the log is read for the state only, and
/// nothing read reaches the client.
pub async fn bring_up_to_date<B: Backend>(
    backend: &B,
    key: &PartitionKey,
    slot: &PartitionSlot,
    states: &ProducerStates,
    now_ms: u64,
) -> Result<(), BackendError> {
    let from = match slot.state().read_need() {
        ReadNeed::Nothing => return Ok(()),
        ReadNeed::Tail => None,
        ReadNeed::From(offset) => Some(offset),
    };
    let marks = backend.watermarks(&key.stream, &key.topic, key.partition).await?;
    let settings = &states.settings;
    let window_floor = marks
        .high_watermark
        .saturating_sub(settings.rebuild_window_messages)
        .max(marks.log_start_offset);
    let from = match from {
        // The reported end is behind what the state was read to: either the count lags (a new
        // primary), or the topic was deleted and made again. The message before `offset` says
        // which.
        Some(offset) if offset > marks.high_watermark => {
            let last = read_forward(backend, key, offset - 1, Some(offset), 1).await?;
            if last.end == offset {
                Some(offset)
            } else {
                let forgotten = slot.state().forget();
                states.removed_entries(&forgotten);
                None
            }
        }
        other => other,
    };
    let mut tags: Vec<(u64, ProducerTag)> = Vec::new();
    let mut bytes = 0u64;
    let (read_from, past) = match from {
        Some(offset) => {
            // PRODUCER-UNKNOWN-1: everything stored since, within the window.
            let start = offset.max(window_floor);
            (start, start)
        }
        None => {
            // PRODUCER-STATE-REBUILD-1: backwards from the reported end, a step at a time, so
            // the window's byte bound keeps the newest messages.
            let mut steps: Vec<Vec<(u64, ProducerTag)>> = Vec::new();
            let mut end = marks.high_watermark;
            while end > window_floor && bytes < settings.rebuild_window_bytes {
                let start = end.saturating_sub(STEP_MESSAGES).max(window_floor);
                let step = read_forward(backend, key, start, Some(end), STEP_MESSAGES).await?;
                bytes += step.bytes;
                steps.push(step.tags);
                end = start;
            }
            tags.extend(steps.into_iter().rev().flatten());
            (end, marks.high_watermark)
        }
    };
    // On past the reported end until a read is empty (the module doc says why).
    let rest = read_forward(backend, key, past, None, settings.rebuild_window_messages).await?;
    bytes += rest.bytes;
    tags.extend(rest.tags);
    let created = slot.state().apply_read(tags, rest.end, states.log_owner(), now_ms);
    states.created(states.log_owner(), created);
    crate::metrics::metrics().producer_log_read(rest.end.saturating_sub(read_from), bytes);
    Ok(())
}
