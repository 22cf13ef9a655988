//! Bringing one partition's producer state up to date from its log, through the backend port:
//! the tail of a partition this gateway has not read (PRODUCER-STATE-REBUILD-1), or everything
//! stored since an append whose outcome is unknown (PRODUCER-UNKNOWN-1). Only the message ids
//! are kept (the producer tags); payloads are dropped chunk by chunk.

use super::partition::ReadNeed;
use super::table::{PartitionKey, PartitionSlot, ProducerStates};
use crate::backend::{stored_bytes, Backend, BackendError, ReadLimits};
use kig_core::producer_tag::ProducerTag;

/// Messages asked for by one backward step of the read.
const STEP_MESSAGES: u64 = 4_096;
/// Bytes one backend read may return: a step takes several reads when its messages are large.
const READ_BYTES: u64 = 1024 * 1024;

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
    let floor = match from {
        // The log ends before what was read of it: the topic was deleted and made again, so
        // nothing read before stands.
        Some(offset) if offset > marks.high_watermark => {
            let forgotten = slot.state().forget();
            states.removed_entries(&forgotten);
            window_floor
        }
        Some(offset) => offset.max(window_floor),
        None => window_floor,
    };
    let mut steps: Vec<Vec<(u64, ProducerTag)>> = Vec::new();
    let mut end = marks.high_watermark;
    let mut bytes = 0u64;
    // Backwards, a step at a time, so the window's byte bound keeps the newest messages.
    while end > floor && bytes < settings.rebuild_window_bytes {
        let start = end.saturating_sub(STEP_MESSAGES).max(floor);
        let mut tags = Vec::new();
        let mut at = start;
        while at < end {
            let wanted = u32::try_from(end - at).unwrap_or(u32::MAX);
            let limits = ReadLimits {
                max_messages: wanted,
                max_bytes: READ_BYTES,
            };
            let messages = backend.read(&key.stream, &key.topic, key.partition, at, limits).await?;
            let mut advanced = false;
            for message in messages.iter().take_while(|m| m.header.offset < end) {
                if message.header.offset < at {
                    continue;
                }
                bytes += stored_bytes(message);
                if let Some(tag) = ProducerTag::from_id(message.header.id) {
                    tags.push((message.header.offset, tag));
                }
                at = message.header.offset + 1;
                advanced = true;
            }
            if !advanced {
                // Nothing more below `end` (retention took it meanwhile).
                break;
            }
        }
        steps.push(tags);
        end = start;
    }
    let tags = steps.into_iter().rev().flatten();
    let created = slot
        .state()
        .apply_read(tags, marks.high_watermark, states.log_owner(), now_ms);
    states.created(states.log_owner(), created);
    crate::metrics::metrics().producer_log_read(marks.high_watermark - end.max(floor), bytes);
    Ok(())
}
