//! Values between the model's types and the SDK's: names, expiries, topic details, watermarks.

use super::*;

pub(super) fn name(value: &str) -> Result<Identifier, IggyError> {
    Identifier::named(value)
}

/// The model's expiry (`None`: never) as Iggy's. Iggy's wire value 0 means "server default", so
/// an expiry of 0 µs cannot be expressed; it is sent as 1 µs.
pub(super) fn expiry_to_iggy(expiry_us: Option<u64>) -> IggyExpiry {
    match expiry_us {
        None | Some(u64::MAX) => IggyExpiry::NeverExpire,
        Some(us) => IggyExpiry::ExpireDuration(IggyDuration::from(us.max(1))),
    }
}

/// Iggy's expiry as the model's. The server resolves "server default" at creation, so it should
/// not come back; if it does it is reported as never (the server's shipped default).
pub(super) fn expiry_from_iggy(expiry: IggyExpiry) -> Option<u64> {
    match expiry {
        IggyExpiry::ExpireDuration(d) => Some(d.as_micros()),
        IggyExpiry::NeverExpire | IggyExpiry::ServerDefault => None,
    }
}

pub(super) fn topic_info(name: String, partitions: u32, expiry: IggyExpiry) -> TopicInfo {
    TopicInfo {
        name,
        partitions,
        message_expiry_us: expiry_from_iggy(expiry),
    }
}

/// The high watermark (last offset + 1; 0 when nothing was ever appended) from a partition's
/// `messages_count` and `current_offset` (its last offset, 0 both when empty and after one
/// message: DIFF-7).
///
/// When every retained message has expired, `messages_count` is 0 while `current_offset` still
/// names the last offset ever appended; the watermark is then `current_offset + 1`. The one case
/// this cannot tell apart: a partition whose only message (offset 0) has expired reads as empty
/// (watermark 0 instead of 1). Nothing is retained in either case, so a reader misses nothing;
/// only the reported offsets differ by one.
pub(super) fn high_watermark(messages_count: u64, current_offset: u64) -> u64 {
    if messages_count == 0 && current_offset == 0 {
        0
    } else {
        current_offset + 1
    }
}
