//! A partition's stored messages in the embedded backend: an append-only log kept in segments
//! of at most [`SEGMENT_MESSAGES`], trimmed from the front (message expiry), indexed from its
//! first kept message.
//!
//! Why segments: one contiguous buffer copies every stored message each time it doubles, and
//! the embedded backend does that under its one model lock, so every client of every partition
//! waits for the copy and its page faults. Round 11 of docs/performance-history.md saw it as the
//! whole latency tail of the embedded row: 7–17 ms stalls at 65,536 and 131,072 messages. Here a
//! growing log never moves a full segment; the most one append copies is a segment still
//! growing, half of [`SEGMENT_MESSAGES`] messages (EMBED-LOG-1).

use std::collections::VecDeque;

/// Messages per segment. A power of two, so a segment grown from empty by doubling ends at
/// exactly this capacity. About half a MiB of stored-message records per full segment; the
/// payloads are shared buffers held elsewhere.
const SEGMENT_MESSAGES: usize = 4096;

/// The messages of one partition, oldest first.
pub(crate) struct MessageLog<T> {
    /// Every segment but the last is full. A message trimmed from the front is taken out of
    /// its slot (so its payload is freed) and the slot stays until its segment is dropped whole.
    segments: VecDeque<Vec<Option<T>>>,
    /// Slots trimmed at the front of the first segment.
    trimmed: usize,
}

impl<T> Default for MessageLog<T> {
    fn default() -> Self {
        Self {
            segments: VecDeque::new(),
            trimmed: 0,
        }
    }
}

impl<T> MessageLog<T> {
    /// Messages kept.
    pub(crate) fn len(&self) -> usize {
        let slots = match self.segments.back() {
            Some(last) => (self.segments.len() - 1) * SEGMENT_MESSAGES + last.len(),
            None => 0,
        };
        slots - self.trimmed
    }

    /// Appends `message` after the last kept one (EMBED-LOG-1: a full segment is never moved).
    pub(crate) fn push_back(&mut self, message: T) {
        if self.segments.back().is_none_or(|last| last.len() == SEGMENT_MESSAGES) {
            self.segments.push_back(Vec::new());
        }
        self.segments
            .back_mut()
            .expect("a segment with room was just ensured")
            .push(Some(message));
    }

    /// The `index`th kept message, from the oldest.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        if index >= self.len() {
            return None;
        }
        let slot = index + self.trimmed;
        self.segments[slot / SEGMENT_MESSAGES][slot % SEGMENT_MESSAGES].as_ref()
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// Removes the oldest kept message.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len() == 0 {
            return None;
        }
        let first = self.segments.front_mut().expect("a kept message has a segment");
        let message = first[self.trimmed].take();
        self.trimmed += 1;
        if self.trimmed == SEGMENT_MESSAGES {
            self.segments.pop_front();
            self.trimmed = 0;
        }
        message
    }

    /// The kept messages from the `index`th on, oldest first.
    pub(crate) fn iter_from(&self, index: usize) -> impl Iterator<Item = &T> {
        (index..self.len()).filter_map(|i| self.get(i))
    }

    /// The index of the first kept message for which `before` is false, with `before` true for
    /// a prefix of the log and false for the rest (as `slice::partition_point`).
    pub(crate) fn partition_point(&self, before: impl Fn(&T) -> bool) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            if self.get(middle).is_some_and(&before) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// EMBED-LOG-1, the bug it pins: a partition's messages in one `VecDeque` were all copied
    /// each time it doubled, under the model lock (7–17 ms stalls of every client in round 11).
    #[test]
    fn a_full_segment_is_never_moved_by_later_appends() {
        let mut log = MessageLog::default();
        for i in 0..SEGMENT_MESSAGES as u64 {
            log.push_back(i);
        }
        let first: *const u64 = log.get(0).expect("kept");
        let last_of_segment: *const u64 = log.get(SEGMENT_MESSAGES - 1).expect("kept");
        for i in 0..(10 * SEGMENT_MESSAGES) as u64 {
            log.push_back(i);
        }
        assert!(std::ptr::eq(first, log.get(0).expect("kept")));
        assert!(std::ptr::eq(
            last_of_segment,
            log.get(SEGMENT_MESSAGES - 1).expect("kept")
        ));
        assert_eq!(log.len(), 11 * SEGMENT_MESSAGES);
    }

    #[test]
    fn trimming_a_whole_segment_drops_it_and_indexes_from_the_next() {
        let mut log = MessageLog::default();
        for i in 0..(2 * SEGMENT_MESSAGES + 3) as u64 {
            log.push_back(i);
        }
        for i in 0..SEGMENT_MESSAGES as u64 {
            assert_eq!(log.pop_front(), Some(i));
        }
        assert_eq!(log.segments.len(), 2);
        assert_eq!((log.trimmed, log.len()), (0, SEGMENT_MESSAGES + 3));
        assert_eq!(log.front(), Some(&(SEGMENT_MESSAGES as u64)));
        assert_eq!(log.get(SEGMENT_MESSAGES + 2), Some(&(2 * SEGMENT_MESSAGES as u64 + 2)));
        assert_eq!(log.get(SEGMENT_MESSAGES + 3), None);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![2 => any::<u32>().prop_map(Op::Push), 1 => Just(Op::Pop)]
    }

    proptest! {
        /// The log answers as one `VecDeque` does, across segment boundaries and trims.
        #[test]
        fn it_answers_as_a_single_deque(
            ops in prop::collection::vec(op(), 0..3 * SEGMENT_MESSAGES),
            probe in any::<prop::sample::Index>(),
            from in any::<prop::sample::Index>(),
        ) {
            let (mut log, mut model) = (MessageLog::default(), VecDeque::new());
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    // Increasing values, so a prefix of the log is below any bound.
                    Op::Push(step) => {
                        let value = (n as u64) << 32 | u64::from(step);
                        log.push_back(value);
                        model.push_back(value);
                    }
                    Op::Pop => prop_assert_eq!(log.pop_front(), model.pop_front()),
                }
            }
            prop_assert_eq!(log.len(), model.len());
            prop_assert_eq!(log.front(), model.front());
            let index = probe.index(model.len() + 1);
            prop_assert_eq!(log.get(index), model.get(index));
            let start = from.index(model.len() + 1);
            prop_assert!(log.iter_from(start).eq(model.iter().skip(start)));
            let bound = model.get(index).copied().unwrap_or(u64::MAX);
            prop_assert_eq!(log.partition_point(|v| *v < bound), model.partition_point(|v| *v < bound));
        }
    }
}
