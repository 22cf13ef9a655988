//! How the Iggy backend shapes what it stores and reads for the server's disk reads (sans-io):
//! an append split into parts that each fit one of the server's disk read chunks
//! (APPEND-PARTS-1), the part boundaries remembered per partition, and a read's poll trimmed to
//! end on one of them (FETCH-ALIGN-1).
//!
//! Why: the pinned server reads a poll from disk in 1 MiB chunks from the start of the stored
//! batch holding the first offset, verifies every batch it walks whole, and re-reads a batch
//! that does not fit a chunk with a chunk four times larger. A librdkafka batch of 1 MB lands as
//! one Iggy batch of about 1.07 MB, over the chunk, and a read of "1 MiB of messages" from
//! anywhere straddles two of them: round 9 of docs/performance-history.md measured the server's CPU
//! per record on the gateway's reads a third lower with parts under a chunk and reads ending on one.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Mutex;

/// The most an Iggy batch stored from one send may take on disk (APPEND-PARTS-1): the pinned
/// server's disk read chunk.
pub const STORED_BATCH_MAX_BYTES: u64 = 1 << 20;

/// What the pinned server stores per batch besides its messages.
pub const STORED_BATCH_HEADER_BYTES: u64 = 256;

/// What the pinned server stores per message besides its payload and user headers.
pub const STORED_MESSAGE_HEADER_BYTES: u64 = 64;

/// Part ends remembered per partition (FETCH-ALIGN-1): at about 1 MiB a part, the last 256 MiB
/// or so appended, enough for consumers that keep up; a reader further behind reads unaligned.
pub const BOUNDARIES_PER_PARTITION: usize = 256;

/// Partitions whose part ends are remembered; past it the memory is cleared, so it stays
/// bounded whatever topics come and go.
pub const BOUNDARY_PARTITIONS: usize = 16_384;

/// Consecutive index ranges of messages whose sizes (payload and user headers) are
/// `message_bytes`, each stored in at most [`STORED_BATCH_MAX_BYTES`] when the whole would take
/// more (APPEND-PARTS-1). The parts are as even in count as the fewest parts allow, so a read
/// of about a chunk ends near a part's end; a message too large for a part alone is a part of
/// its own (the server's own limits decide whether it is accepted).
///
/// ```
/// use kafka_iggy_gateway::backend::iggy_layout::append_parts;
/// assert_eq!(append_parts(&[1_000; 10]), vec![0..10]);
/// // 962 messages of 1,048 bytes: 1.07 MB stored, so two parts of 481.
/// assert_eq!(append_parts(&[1_048; 962]), vec![0..481, 481..962]);
/// ```
pub fn append_parts(message_bytes: &[u64]) -> Vec<Range<usize>> {
    let stored =
        |sizes: &[u64]| STORED_BATCH_HEADER_BYTES + sizes.iter().map(|b| b + STORED_MESSAGE_HEADER_BYTES).sum::<u64>();
    let total = stored(message_bytes);
    if total <= STORED_BATCH_MAX_BYTES || message_bytes.len() <= 1 {
        let whole = 0..message_bytes.len();
        return vec![whole];
    }
    let mut parts_count = total.div_ceil(STORED_BATCH_MAX_BYTES).max(1) as usize;
    loop {
        let parts = even_ranges(message_bytes.len(), parts_count);
        let fits = parts
            .iter()
            .all(|part| part.len() == 1 || stored(&message_bytes[part.clone()]) <= STORED_BATCH_MAX_BYTES);
        if fits || parts_count >= message_bytes.len() {
            return parts;
        }
        // Uneven sizes: one more part, until every part fits or each holds one message.
        parts_count += 1;
    }
}

/// `len` indices in `parts` consecutive ranges whose lengths differ by at most one.
fn even_ranges(len: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.clamp(1, len.max(1));
    let (base, extra) = (len / parts, len % parts);
    let mut start = 0;
    (0..parts)
        .map(|i| {
            let end = start + base + usize::from(i < extra);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// The count a poll from `start` asking for `count` messages is trimmed to so that it ends on
/// one of `part_ends` (FETCH-ALIGN-1), or `None` to poll as asked. Only an end in the second
/// half of the poll is taken: a read trimmed to a few messages would cost a Fetch more than the
/// alignment saves the server. The last of the `count` messages is the read's probe past its
/// byte limit ([`super::iggy`]'s chunked read asks one more than fits), so the end may not be
/// past it.
///
/// ```
/// use kafka_iggy_gateway::backend::iggy_layout::aligned_count;
/// assert_eq!(aligned_count([481, 962, 1443], 100, 943), Some(862));
/// assert_eq!(aligned_count([481, 962], 900, 943), None);
/// ```
pub fn aligned_count(part_ends: impl IntoIterator<Item = u64>, start: u64, count: u32) -> Option<u32> {
    if count < 2 {
        return None;
    }
    let lowest = start + u64::from(count).div_ceil(2);
    let highest = start + u64::from(count) - 1;
    part_ends
        .into_iter()
        .filter(|end| (lowest..=highest).contains(end))
        .max()
        .map(|end| (end - start) as u32)
}

/// Per partition, the ends of the last [`BOUNDARIES_PER_PARTITION`] parts this backend appended
/// (FETCH-ALIGN-1).
#[derive(Default)]
pub struct PartEnds(Mutex<HashMap<(String, String, u32), VecDeque<u64>>>);

impl PartEnds {
    /// Remembers that a part ending before `end` (its last offset plus one) was stored.
    pub fn remember(&self, stream: &str, topic: &str, partition: u32, end: u64) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (stream.to_string(), topic.to_string(), partition);
        if !all.contains_key(&key) && all.len() >= BOUNDARY_PARTITIONS {
            all.clear();
        }
        let ends = all.entry(key).or_default();
        if ends.len() >= BOUNDARIES_PER_PARTITION {
            ends.pop_front();
        }
        ends.push_back(end);
    }

    /// [`aligned_count`] over the partition's remembered part ends.
    pub fn aligned_count(&self, stream: &str, topic: &str, partition: u32, start: u64, count: u32) -> Option<u32> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let ends = all.get(&(stream.to_string(), topic.to_string(), partition))?;
        aligned_count(ends.iter().copied(), start, count)
    }

    /// Forgets a partition's part ends: its messages were purged or it was deleted, so the
    /// offsets may be reused.
    pub fn forget_topic(&self, stream: &str, topic: &str) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(s, t, _), _| !(s == stream && t == topic));
    }
}

#[cfg(test)]
// A one-part answer is a `Vec` holding one range, which is what these tests compare against.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn stored(sizes: &[u64]) -> u64 {
        STORED_BATCH_HEADER_BYTES + sizes.iter().map(|b| b + STORED_MESSAGE_HEADER_BYTES).sum::<u64>()
    }

    #[test]
    fn append_parts_1_an_append_that_fits_a_chunk_is_one_part() {
        let sizes = vec![1_000; 900];
        assert!(stored(&sizes) <= STORED_BATCH_MAX_BYTES);
        assert_eq!(append_parts(&sizes), vec![0..900]);
        // Nothing to split is one part as it is: the send decides what an empty append means.
        assert_eq!(append_parts(&[]), vec![0..0]);
    }

    #[test]
    fn append_parts_1_a_larger_append_is_split_into_the_fewest_even_parts_that_fit() {
        // librdkafka's 1 MB batch of 1 KiB keyed records, as the gateway stores it.
        let sizes = vec![1_048; 962];
        let parts = append_parts(&sizes);
        assert_eq!(parts, vec![0..481, 481..962]);
        // Three chunks' worth: three parts, each fitting.
        let sizes = vec![1_048; 2_800];
        let parts = append_parts(&sizes);
        assert_eq!(parts.len(), 3);
        for part in &parts {
            assert!(stored(&sizes[part.clone()]) <= STORED_BATCH_MAX_BYTES, "{part:?}");
        }
        assert_eq!(parts.last().map(|p| p.end), Some(2_800));
    }

    #[test]
    fn append_parts_1_uneven_sizes_get_more_parts_until_each_fits() {
        // Even counts would put the two large messages in one part.
        let mut sizes = vec![10; 100];
        sizes.extend([600_000, 600_000]);
        let parts = append_parts(&sizes);
        for part in &parts {
            assert!(
                part.len() == 1 || stored(&sizes[part.clone()]) <= STORED_BATCH_MAX_BYTES,
                "{part:?}"
            );
        }
        let covered: Vec<usize> = parts.iter().flat_map(|p| p.clone()).collect();
        assert_eq!(covered, (0..102).collect::<Vec<_>>());
    }

    #[test]
    fn append_parts_1_a_message_over_the_limit_alone_is_a_part_of_its_own() {
        let parts = append_parts(&[10, 2 << 20, 10]);
        assert_eq!(parts, vec![0..1, 1..2, 2..3]);
    }

    #[test]
    fn fetch_align_1_a_poll_is_trimmed_to_the_last_part_end_in_its_second_half() {
        // Parts of 481 from 0; a read from 962 of 1,001 messages (1,000 fit its bytes, and one
        // probe past them): two whole parts.
        let ends = [481, 962, 1_443, 1_924, 2_405];
        assert_eq!(aligned_count(ends, 962, 1_001), Some(962));
        // An end at the probe message is not taken: the probe stays in the poll.
        assert_eq!(aligned_count(ends, 962, 962), Some(481));
        assert_eq!(aligned_count(ends, 962, 963), Some(962));
        // Only one end past half the poll, and it is the first: one part.
        assert_eq!(aligned_count(ends, 962, 943), Some(481));
    }

    #[test]
    fn fetch_align_1_no_end_in_the_second_half_polls_as_asked() {
        assert_eq!(aligned_count([481, 962], 900, 943), None);
        assert_eq!(aligned_count([], 0, 943), None);
        assert_eq!(aligned_count([1], 0, 1), None);
    }

    #[test]
    fn fetch_align_1_part_ends_are_bounded_per_partition_and_in_partitions() {
        let ends = PartEnds::default();
        for i in 0..(BOUNDARIES_PER_PARTITION as u64 + 10) {
            ends.remember("s", "t", 0, (i + 1) * 100);
        }
        // The oldest ten were dropped: a read there polls as asked.
        assert_eq!(ends.aligned_count("s", "t", 0, 0, 150), None);
        assert_eq!(ends.aligned_count("s", "t", 0, 2_000, 150), Some(100));
        assert_eq!(
            ends.aligned_count("s", "t", 0, BOUNDARIES_PER_PARTITION as u64 * 100, 150),
            Some(100)
        );
        ends.forget_topic("s", "t");
        assert_eq!(ends.aligned_count("s", "t", 0, 2_000, 150), None);
        for p in 0..BOUNDARY_PARTITIONS as u32 {
            ends.remember("s", "u", p, 10);
        }
        ends.remember("s", "v", 0, 10);
        assert_eq!(ends.aligned_count("s", "u", 0, 0, 12), None, "cleared when full");
        assert_eq!(ends.aligned_count("s", "v", 0, 0, 12), Some(10));
    }
}
