//! What a read remembers between Fetches (message sizes, log starts) and how it assembles the
//! messages of several polls into one bounded answer.

use super::*;

/// The first poll of a read asks for this many messages when the partition's message size is
/// not known yet: small messages fill a Fetch in a few polls, and large ones do not drag
/// megabytes past the byte limit over the wire.
pub(super) const FIRST_POLL_MESSAGES: u32 = 64;

/// Partitions whose average message size is remembered; past it the memory is cleared, so it
/// stays bounded whatever topics come and go.
pub(super) const REMEMBERED_SIZES: usize = 16_384;

/// Per partition, the average message size (payload and headers, bytes) the last read saw, so
/// the next read's first poll asks for about what its byte limit holds: one round trip per
/// Fetch instead of two when sizes are steady.
#[derive(Default)]
pub(super) struct MessageSizes(Mutex<HashMap<PartitionKey, u64>>);

impl MessageSizes {
    pub(super) fn get(&self, stream: &str, topic: &str, partition: u32) -> Option<u64> {
        let sizes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sizes.get(&(stream.to_string(), topic.to_string(), partition)).copied()
    }

    pub(super) fn remember(&self, stream: &str, topic: &str, partition: u32, average: u64) {
        let mut sizes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if sizes.len() >= REMEMBERED_SIZES {
            sizes.clear();
        }
        sizes.insert((stream.to_string(), topic.to_string(), partition), average);
    }
}

/// Per partition, the log start offset the last `watermarks` call found and when, so a read made
/// ahead can report it without asking again while it is younger than
/// [`READ_AHEAD_LOG_START_MAX_AGE`]; bounded as [`MessageSizes`] is.
#[derive(Default)]
pub(super) struct LogStarts(Mutex<HashMap<PartitionKey, (u64, Instant)>>);

/// Stream, topic and partition.
pub(super) type PartitionKey = (String, String, u32);

impl LogStarts {
    pub(super) fn fresh(&self, stream: &str, topic: &str, partition: u32) -> Option<u64> {
        let starts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (start, at) = starts.get(&(stream.to_string(), topic.to_string(), partition))?;
        (at.elapsed() < READ_AHEAD_LOG_START_MAX_AGE).then_some(*start)
    }

    pub(super) fn remember(&self, stream: &str, topic: &str, partition: u32, log_start_offset: u64) {
        let mut starts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if starts.len() >= REMEMBERED_SIZES {
            starts.clear();
        }
        starts.insert(
            (stream.to_string(), topic.to_string(), partition),
            (log_start_offset, Instant::now()),
        );
    }
}

/// The watermarks of a read that found `kept` from a partition whose log started at
/// `log_start_offset` a moment ago, given the partition's last offset as the read's last poll
/// reported it: `None` when the read found nothing (an empty partition's last offset reads as
/// 0, as one holding a single message does, so only a full `watermarks` call tells them apart).
pub(super) fn read_watermarks(log_start_offset: u64, last_offset: u64, kept: &[IggyMessage]) -> Option<Watermarks> {
    let last_kept = kept.last()?.header.offset;
    Some(Watermarks {
        log_start_offset,
        high_watermark: last_offset.max(last_kept) + 1,
    })
}

/// One read's progress over several polls. Iggy's poll takes a count, not a byte limit; asking
/// for the read's whole message limit at once pulled up to 10,000 messages over the wire to
/// keep the first megabyte. So each poll asks for as many messages as the bytes left hold at
/// the average size kept so far (plus one, so every poll makes progress), and messages are kept
/// while their bytes fit the limit; the first is always kept.
pub(super) struct ChunkedRead {
    pub(super) limits: ReadLimits,
    /// The partition's average message size from an earlier read, if known.
    pub(super) expected_size: Option<u64>,
    pub(super) kept: Vec<IggyMessage>,
    pub(super) kept_bytes: u64,
    /// Set once a message did not fit or a poll came back short (the partition's end).
    pub(super) done: bool,
}

impl ChunkedRead {
    pub(super) fn new(limits: ReadLimits, expected_size: Option<u64>) -> Self {
        Self {
            limits,
            expected_size,
            kept: Vec::new(),
            kept_bytes: 0,
            done: false,
        }
    }

    /// How many messages the next poll asks for; 0 when the read is complete.
    pub(super) fn next_count(&self) -> u32 {
        let left = self.limits.max_messages.saturating_sub(self.kept.len() as u32);
        if self.done || left == 0 {
            return 0;
        }
        let average = match (self.kept.is_empty(), self.expected_size) {
            (true, None) => return FIRST_POLL_MESSAGES.min(left),
            (true, Some(expected)) => expected.max(1),
            (false, _) => self.average(),
        };
        // Saturating: a read bounded by count alone asks `u64::MAX` bytes (ListOffsets'
        // MAX_TIMESTAMP), and an average of 1 byte would overflow the `+ 1`.
        let fits = (self.limits.max_bytes.saturating_sub(self.kept_bytes) / average).saturating_add(1);
        fits.min(u64::from(left)) as u32
    }

    /// FETCH-ALIGN-1: whether a poll of `count` may be ended early on a part. Only when it asks
    /// fewer messages than the read's count limit leaves, that is when bytes, not the count,
    /// decide where the read ends: a read asked for `n` messages that fit is given all `n`, as
    /// from the model (BACKEND-MODEL-1).
    pub(super) fn may_align(&self, count: u32) -> bool {
        count < self.limits.max_messages.saturating_sub(self.kept.len() as u32)
    }

    /// The average size of the messages kept so far (at least 1).
    pub(super) fn average(&self) -> u64 {
        (self.kept_bytes / self.kept.len().max(1) as u64).max(1)
    }

    /// The offset the next poll starts from, given the read's first offset.
    pub(super) fn next_offset(&self, first: u64) -> u64 {
        self.kept.last().map_or(first, |m| m.header.offset + 1)
    }

    /// Keeps what fits of a poll that asked for `asked` messages. A read's first poll is
    /// usually its only one, so its list is kept as it came rather than moved message by
    /// message into another.
    pub(super) fn take(&mut self, mut polled: Vec<IggyMessage>, asked: u32) {
        self.done = (polled.len() as u32) < asked;
        let mut fitting = 0;
        for message in &polled {
            let size = stored_bytes(message);
            let first = self.kept.is_empty() && fitting == 0;
            if !first && self.kept_bytes + size > self.limits.max_bytes {
                self.done = true;
                break;
            }
            self.kept_bytes += size;
            fitting += 1;
        }
        polled.truncate(fitting);
        if self.kept.is_empty() {
            self.kept = polled;
        } else {
            self.kept.append(&mut polled);
        }
    }
}
