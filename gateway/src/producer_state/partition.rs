//! One partition's idempotent producers: each producer's epoch and its last few runs of
//! sequences with the offsets they were stored at, checked against every batch before it is
//! written (PRODUCER-SEQ-1, PRODUCER-DUP-1, PRODUCER-EPOCH-1) and brought up to date from the
//! log (PRODUCER-STATE-REBUILD-1). Pure: no I/O, no clock; the caller passes the time.

use kig_core::producer_tag::{in_sequence, BatchIdentity, ProducerTag};
use std::collections::HashMap;

/// Runs of sequences remembered per producer and partition: Kafka keeps a producer's last five
/// batches (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`), the most a producer has in flight.
pub const RUNS_RETAINED: usize = 5;

/// Whom a producer entry counts against (LIMIT-PRODUCERS-1): a principal, a client address, or
/// the log for an entry a scan found and no client has claimed yet.
pub type Owner = std::sync::Arc<str>;

/// Sequences `first_sequence..=last_sequence` of one producer epoch, stored at consecutive
/// offsets from `first_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceRun {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: u64,
}

/// How far `to` lies after `from` in Kafka's sequence space, which wraps from `i32::MAX` to 0.
pub(crate) fn sequence_distance(from: i32, to: i32) -> u32 {
    (i64::from(to) - i64::from(from)).rem_euclid(1 << 31) as u32
}

impl SequenceRun {
    fn len(&self) -> u32 {
        sequence_distance(self.first_sequence, self.last_sequence) + 1
    }

    pub fn last_offset(&self) -> u64 {
        self.first_offset + u64::from(self.len() - 1)
    }

    /// Whether `sequence` lies in the run.
    fn holds(&self, sequence: i32) -> bool {
        sequence_distance(self.first_sequence, sequence) < self.len()
    }

    fn offset_of(&self, sequence: i32) -> u64 {
        self.first_offset + u64::from(sequence_distance(self.first_sequence, sequence))
    }
}

/// What one producer has written to one partition, as far as the gateway knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first: `runs[..run_count]`. Inline, so an entry is one allocation-free value
    /// (LIMIT-PRODUCERS-1 counts its bytes).
    runs: [SequenceRun; RUNS_RETAINED],
    run_count: u8,
    /// When a batch of the producer was last checked or found, in ms of the gateway's clock;
    /// the entry expires `producer_id_expiration_ms` after it (PRODUCER-EXPIRY-1).
    pub last_seen_ms: u64,
    pub owner: Owner,
}

impl ProducerEntry {
    fn new(epoch: i16, owner: Owner, now_ms: u64) -> Self {
        Self {
            epoch,
            runs: [SequenceRun {
                first_sequence: 0,
                last_sequence: 0,
                first_offset: 0,
            }; RUNS_RETAINED],
            run_count: 0,
            last_seen_ms: now_ms,
            owner,
        }
    }

    pub fn runs(&self) -> &[SequenceRun] {
        &self.runs[..usize::from(self.run_count)]
    }

    fn last_sequence(&self) -> Option<i32> {
        self.runs().last().map(|r| r.last_sequence)
    }

    fn clear_runs(&mut self) {
        self.run_count = 0;
    }

    /// Adds sequences `first..=last` stored from `first_offset`, joining the last run when they
    /// continue it at the next offset.
    fn push(&mut self, first: i32, last: i32, first_offset: u64) {
        if let Some(run) = self.runs[..usize::from(self.run_count)].last_mut() {
            if in_sequence(run.last_sequence, first) && run.last_offset() + 1 == first_offset {
                run.last_sequence = last;
                return;
            }
        }
        if usize::from(self.run_count) == RUNS_RETAINED {
            self.runs.rotate_left(1);
            self.run_count -= 1;
        }
        self.runs[usize::from(self.run_count)] = SequenceRun {
            first_sequence: first,
            last_sequence: last,
            first_offset,
        };
        self.run_count += 1;
    }

    /// How much of a batch `first..=last` of the current epoch the runs already hold, from its
    /// first record on: the records held and the offset of the first. Runs that continue each
    /// other's sequences are followed, so a batch written in parts is found whole.
    fn written_prefix(&self, first: i32, last: i32) -> Option<(u32, u64)> {
        let runs = self.runs();
        let start = runs.iter().position(|r| r.holds(first))?;
        let first_offset = runs[start].offset_of(first);
        let wanted = sequence_distance(first, last) + 1;
        let mut held = 0u32;
        let mut next = first;
        for run in &runs[start..] {
            if !run.holds(next) {
                break;
            }
            let here = sequence_distance(next, run.last_sequence) + 1;
            held = held.saturating_add(here);
            if held >= wanted {
                return Some((wanted, first_offset));
            }
            next = kig_core::producer_tag::increment_sequence(run.last_sequence, 1);
        }
        Some((held, first_offset))
    }
}

/// Why a batch is refused (the Kafka code is chosen in `error_map::producer_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerRefusal {
    /// PRODUCER-EPOCH-1: the batch's epoch is older than the producer's.
    #[error("producer {producer_id} epoch {epoch} is older than its current epoch {current}")]
    StaleEpoch { producer_id: i64, epoch: i16, current: i16 },
    /// PRODUCER-SEQ-1: the sequence does not follow the producer's last one, or a new epoch
    /// does not start at 0.
    #[error("producer {producer_id} epoch {epoch}: sequence {first} does not follow {expected_after}")]
    OutOfOrder {
        producer_id: i64,
        epoch: i16,
        first: i32,
        /// The last sequence stored, or -1 when a new epoch must start at 0.
        expected_after: i32,
    },
    /// PRODUCER-UNKNOWN-3: a gap against a state read from the log lately: the log may not show
    /// yet what a new Iggy primary stores, so the batch is retried, not refused for good.
    #[error("producer {producer_id} epoch {epoch}: sequence {first} does not follow {expected_after} in the log read back; it is read again at the next attempt (the log may lag after a failover)")]
    LogBehind {
        producer_id: i64,
        epoch: i16,
        first: i32,
        expected_after: i32,
    },
    /// PRODUCER-BATCH-1: an idempotent batch with a negative epoch or sequence.
    #[error("producer {producer_id}: epoch {epoch} and base sequence {first} must not be negative")]
    Invalid { producer_id: i64, epoch: i16, first: i32 },
}

/// What the state says of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// New: write it whole.
    Append,
    /// PRODUCER-DUP-1: already written whole: answer with its first offset, write nothing.
    Duplicate {
        first_offset: u64,
    },
    /// PRODUCER-DUP-2: its first `written` records were written (a send of several failed after
    /// the first): write the rest, answer with the first offset.
    Partial {
        written: u32,
        first_offset: u64,
    },
    Refuse(ProducerRefusal),
}

/// One partition's producers, and how far the log has been read into them.
#[derive(Debug, Default)]
pub struct PartitionProducers {
    producers: HashMap<i64, ProducerEntry>,
    /// Every stored message below this offset is accounted for. `None`: the log was never read
    /// (a partition this gateway has not written idempotent batches to since it started, or
    /// one whose leadership it just gained): it is read before the next check.
    applied_end: Option<u64>,
    /// An append's outcome is unknown (CLUSTER-UNKNOWN-1): the log from `applied_end` on is
    /// read before the next check (PRODUCER-UNKNOWN-1).
    needs_read: bool,
    /// The peers' generation the state was read under (PRODUCER-LEADER-1).
    leadership_generation: u64,
    /// When the log was first read since the state last matched the log's end (an append of
    /// this gateway stored right where the read ended): until `settle_ms` after it, a gap may
    /// be the log lagging (PRODUCER-UNKNOWN-3).
    unsettled_since_ms: Option<u64>,
}

/// What must be read from the log before a batch can be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadNeed {
    /// The state is current.
    Nothing,
    /// Read the log's tail, within the rebuild window (PRODUCER-STATE-REBUILD-1).
    Tail,
    /// Read from this offset to the end (PRODUCER-UNKNOWN-1).
    From(u64),
}

impl PartitionProducers {
    pub fn read_need(&self) -> ReadNeed {
        match (self.applied_end, self.needs_read) {
            (None, _) => ReadNeed::Tail,
            (Some(end), true) => ReadNeed::From(end),
            (Some(_), false) => ReadNeed::Nothing,
        }
    }

    pub fn producers(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Forgets everything, so the log is read again before the next check: the partition's
    /// leadership moved (PRODUCER-LEADER-1) or the log no longer holds what was read.
    pub fn forget(&mut self) -> Vec<ProducerEntry> {
        self.applied_end = None;
        self.needs_read = false;
        self.unsettled_since_ms = None;
        self.producers.drain().map(|(_, e)| e).collect()
    }

    /// PRODUCER-LEADER-1: forgets the state when who leads what may have changed since it was
    /// read (`generation` is the peers' generation now), returning the entries forgotten.
    pub fn under_generation(&mut self, generation: u64) -> Vec<ProducerEntry> {
        if self.leadership_generation == generation {
            return Vec::new();
        }
        self.leadership_generation = generation;
        self.forget()
    }

    /// PRODUCER-UNKNOWN-1: an append was sent and its outcome is unknown.
    pub fn outcome_unknown(&mut self) {
        if self.applied_end.is_some() {
            self.needs_read = true;
        }
    }

    /// Checks a batch as [`Self::check`] does, at `now_ms`: a gap found within `settle_ms` of
    /// the first log read since the state last matched the log's end is
    /// [`ProducerRefusal::LogBehind`] (PRODUCER-UNKNOWN-3), and the log is read again before the
    /// next check. Kafka's leader never reads its own log behind; an Iggy node just elected
    /// primary was seen serving reads without the last records the old one acknowledged.
    pub fn check_at(&mut self, batch: &BatchIdentity, now_ms: u64, settle_ms: u64) -> Verdict {
        let verdict = self.check(batch);
        let Verdict::Refuse(ProducerRefusal::OutOfOrder {
            producer_id,
            epoch,
            first,
            expected_after,
        }) = verdict
        else {
            return verdict;
        };
        let ahead = match self.producers.get(&producer_id) {
            Some(entry) if epoch > entry.epoch => true,
            _ => (1..1 << 30).contains(&sequence_distance(expected_after, first)),
        };
        let lately = self
            .unsettled_since_ms
            .is_some_and(|since| now_ms < since.saturating_add(settle_ms));
        if !(ahead && lately) {
            return verdict;
        }
        self.needs_read = self.applied_end.is_some();
        Verdict::Refuse(ProducerRefusal::LogBehind {
            producer_id,
            epoch,
            first,
            expected_after,
        })
    }

    /// Checks a batch against the producer's state (PRODUCER-SEQ-1, PRODUCER-DUP-1,
    /// PRODUCER-EPOCH-1). Nothing changes.
    pub fn check(&self, batch: &BatchIdentity) -> Verdict {
        if batch.producer_epoch < 0 || batch.first_sequence < 0 {
            return Verdict::Refuse(ProducerRefusal::Invalid {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                first: batch.first_sequence,
            });
        }
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // PRODUCER-UNKNOWN-2: a producer with no state here (new, expired, or older than
            // the log read back) starts wherever it is, as Kafka accepts any sequence when it
            // has no entry for the producer.
            return Verdict::Append;
        };
        if batch.producer_epoch < entry.epoch {
            return Verdict::Refuse(ProducerRefusal::StaleEpoch {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                current: entry.epoch,
            });
        }
        if batch.producer_epoch > entry.epoch {
            return if batch.first_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Refuse(ProducerRefusal::OutOfOrder {
                    producer_id: batch.producer_id,
                    epoch: batch.producer_epoch,
                    first: batch.first_sequence,
                    expected_after: -1,
                })
            };
        }
        if let Some((written, first_offset)) = entry.written_prefix(batch.first_sequence, batch.last_sequence) {
            let wanted = sequence_distance(batch.first_sequence, batch.last_sequence) + 1;
            return if written >= wanted {
                Verdict::Duplicate { first_offset }
            } else if entry.last_sequence()
                == Some(kig_core::producer_tag::increment_sequence(
                    batch.first_sequence,
                    written as i32 - 1,
                ))
            {
                // Only the producer's newest batch can have been cut short.
                Verdict::Partial { written, first_offset }
            } else {
                Verdict::Refuse(ProducerRefusal::OutOfOrder {
                    producer_id: batch.producer_id,
                    epoch: batch.producer_epoch,
                    first: batch.first_sequence,
                    expected_after: entry.last_sequence().unwrap_or(-1),
                })
            };
        }
        match entry.last_sequence() {
            None => Verdict::Append,
            Some(last) if in_sequence(last, batch.first_sequence) => Verdict::Append,
            Some(last) => Verdict::Refuse(ProducerRefusal::OutOfOrder {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                first: batch.first_sequence,
                expected_after: last,
            }),
        }
    }

    /// Whether the partition has no entry for `producer_id` yet (it would be created by
    /// [`Self::record`]): the caller makes room for it first (LIMIT-PRODUCERS-1).
    pub fn is_new(&self, producer_id: i64) -> bool {
        !self.producers.contains_key(&producer_id)
    }

    /// Records that records `first..=last` of `batch`'s producer and epoch were stored from
    /// `first_offset` on, by this gateway. `owner` is whom a new entry counts against (an
    /// entry keeps the owner it was created with). Returns whether an entry was created.
    pub fn record(
        &mut self,
        batch: &BatchIdentity,
        first: i32,
        last: i32,
        first_offset: u64,
        owner: &Owner,
        now_ms: u64,
    ) -> bool {
        let created = self.is_new(batch.producer_id);
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.producer_epoch, owner.clone(), now_ms));
        if batch.producer_epoch > entry.epoch {
            entry.epoch = batch.producer_epoch;
            entry.clear_runs();
        }
        entry.push(first, last, first_offset);
        entry.last_seen_ms = now_ms;
        // Messages between the end read and this send are not the tagged records of any
        // producer: this gateway is the partition's one idempotent writer (PRODUCER-LEADER-1).
        if let Some(end) = self.applied_end {
            if first_offset == end && !self.needs_read {
                // Stored where the read ended: the log was read whole (PRODUCER-UNKNOWN-3).
                self.unsettled_since_ms = None;
            }
            if first_offset >= end {
                self.applied_end = Some(first_offset + u64::from(sequence_distance(first, last)) + 1);
            }
        }
        created
    }

    /// Marks a producer seen now, so a batch checked but not written (a duplicate) keeps its
    /// entry from expiring.
    pub fn touch(&mut self, producer_id: i64, now_ms: u64) {
        if let Some(entry) = self.producers.get_mut(&producer_id) {
            entry.last_seen_ms = now_ms;
        }
    }

    /// PRODUCER-STATE-REBUILD-1: applies the tags of the stored messages in `from..end`, in
    /// offset order, and marks the log read up to `end`. An entry a tag creates counts against
    /// `log_owner`; the count of created entries is returned.
    pub fn apply_read(
        &mut self,
        tags: impl IntoIterator<Item = (u64, ProducerTag)>,
        end: u64,
        log_owner: &Owner,
        now_ms: u64,
    ) -> usize {
        let mut created = 0;
        for (offset, tag) in tags {
            let entry = self.producers.entry(tag.producer_id).or_insert_with(|| {
                created += 1;
                ProducerEntry::new(tag.producer_epoch, log_owner.clone(), now_ms)
            });
            entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
            if tag.producer_epoch < entry.epoch {
                continue;
            }
            if tag.producer_epoch > entry.epoch {
                entry.epoch = tag.producer_epoch;
                entry.clear_runs();
            }
            match entry.last_sequence() {
                // A copy of a sequence already held, or an older one: the first copy stands.
                Some(last) if sequence_distance(last, tag.sequence) == 0 => continue,
                Some(last) if sequence_distance(last, tag.sequence) >= 1 << 30 => continue,
                _ => entry.push(tag.sequence, tag.sequence, offset),
            }
        }
        self.applied_end = Some(end);
        self.needs_read = false;
        self.unsettled_since_ms.get_or_insert(now_ms);
        created
    }

    /// Removes entries last seen before `cutoff_ms` (PRODUCER-EXPIRY-1) and returns them.
    pub fn expire(&mut self, cutoff_ms: u64) -> Vec<ProducerEntry> {
        let expired: Vec<i64> = self
            .producers
            .iter()
            .filter(|(_, e)| e.last_seen_ms < cutoff_ms)
            .map(|(id, _)| *id)
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.producers.remove(&id))
            .collect()
    }

    /// Removes one producer's entry (LIMIT-PRODUCERS-1's eviction).
    pub fn remove(&mut self, producer_id: i64) -> Option<ProducerEntry> {
        self.producers.remove(&producer_id)
    }
}
