//! What every check looks things up in, built once per history: the partitions, each one's
//! authoritative contents (the backend's, else the final drain's), where each record's copies
//! are, and which Produce requests carried each record.

use crate::history::{History, ProduceRequest, RecordValue, RequestId, Stored, TopicPartition};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(crate) struct Index<'h> {
    pub history: &'h History,
    /// Each partition's contents at the end: the backend's, else the final drain's.
    pub logs: BTreeMap<TopicPartition, &'h [Stored]>,
    /// Each partition's record copies: value → offsets, ascending.
    pub copies: BTreeMap<TopicPartition, HashMap<RecordValue, Vec<i64>>>,
    /// The requests that carried each value to each partition.
    pub carried_by: HashMap<(TopicPartition, RecordValue), Vec<RequestId>>,
}

impl<'h> Index<'h> {
    pub fn new(history: &'h History) -> Self {
        let mut partitions: BTreeSet<TopicPartition> = history.partitions.iter().cloned().collect();
        partitions.extend(history.produces.iter().map(|r| r.partition.clone()));
        partitions.extend(history.backend.iter().map(|l| l.partition.clone()));
        partitions.extend(history.drain.iter().map(|l| l.partition.clone()));
        let mut logs = BTreeMap::new();
        for partition in &partitions {
            let log = history.backend_log(partition).or_else(|| history.drain_log(partition));
            if let Some(log) = log {
                logs.insert(partition.clone(), log.records.as_slice());
            }
        }
        let mut copies: BTreeMap<TopicPartition, HashMap<RecordValue, Vec<i64>>> = BTreeMap::new();
        for (partition, records) in &logs {
            let of_partition = copies.entry(partition.clone()).or_default();
            for record in records.iter() {
                if let Some(value) = record.value {
                    of_partition.entry(value).or_default().push(record.offset);
                }
            }
            for offsets in of_partition.values_mut() {
                offsets.sort_unstable();
            }
        }
        let mut carried_by: HashMap<(TopicPartition, RecordValue), Vec<RequestId>> = HashMap::new();
        for request in &history.produces {
            for value in &request.values {
                carried_by
                    .entry((request.partition.clone(), *value))
                    .or_default()
                    .push(request.id);
            }
        }
        Self {
            history,
            logs,
            copies,
            carried_by,
        }
    }

    /// The offsets `value` is stored at in `partition`, if the partition's contents are known.
    pub fn copies_of(&self, partition: &TopicPartition, value: &RecordValue) -> Option<&[i64]> {
        let of_partition = self.copies.get(partition)?;
        Some(of_partition.get(value).map_or(&[][..], Vec::as_slice))
    }

    /// The record `partition` holds at `offset`, if its contents are known and it holds one.
    pub fn at(&self, partition: &TopicPartition, offset: i64) -> Option<&'h Stored> {
        let records = self.logs.get(partition)?;
        // Offsets are normally 0, 1, 2, ...; fall back to a search when they are not.
        match usize::try_from(offset).ok().and_then(|i| records.get(i)) {
            Some(record) if record.offset == offset => Some(record),
            _ => records
                .binary_search_by_key(&offset, |r| r.offset)
                .ok()
                .map(|i| &records[i]),
        }
    }

    /// Whether `partition` holds a record at some offset in `from..to`.
    pub fn holds_any_in(&self, partition: &TopicPartition, from: i64, to: i64) -> Vec<i64> {
        let Some(records) = self.logs.get(partition) else {
            return Vec::new();
        };
        let start = records.partition_point(|r| r.offset < from);
        records[start..]
            .iter()
            .take_while(|r| r.offset < to)
            .map(|r| r.offset)
            .collect()
    }

    pub fn request(&self, id: RequestId) -> &'h ProduceRequest {
        &self.history.produces[id]
    }

    /// The producer's name, for reports.
    pub fn producer_name(&self, request: &ProduceRequest) -> &'h str {
        self.history
            .producers
            .get(request.producer)
            .map_or("?", |p| p.name.as_str())
    }

    /// The acknowledged requests: (request, base offset), in request order.
    pub fn acked(&self) -> impl Iterator<Item = (&'h ProduceRequest, i64)> {
        self.history
            .produces
            .iter()
            .filter_map(|r| r.acked().map(|(_, base)| (r, base)))
    }
}

/// Simulated µs as seconds with milliseconds, for reports.
pub(crate) fn secs(us: u64) -> String {
    format!("{}.{:03} s", us / 1_000_000, (us / 1_000) % 1_000)
}

/// Values as a short range when they are one producer's consecutive sequence numbers.
pub(crate) fn values_text(values: &[RecordValue]) -> String {
    match values {
        [] => "no records".into(),
        [one] => one.to_string(),
        [first, .., last]
            if values.iter().all(|v| v.producer == first.producer)
                && last.seq >= first.seq
                && last.seq - first.seq + 1 == values.len() as u64 =>
        {
            format!("{first}..={last}")
        }
        [first, ..] if values.len() > 4 => format!("{first} and {} more", values.len() - 1),
        _ => values.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
    }
}

/// Offsets as short ranges: `3..=5, 9`.
pub(crate) fn offsets_text(offsets: &[i64]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < offsets.len() {
        let mut j = i;
        while j + 1 < offsets.len() && offsets[j + 1] == offsets[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            offsets[i].to_string()
        } else {
            format!("{}..={}", offsets[i], offsets[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// One delivered record in a consumer session's walk over its polls.
pub(crate) struct PollStep<'h> {
    pub event: &'h crate::history::ConsumerEvent,
    pub partition: &'h TopicPartition,
    /// The offset the session should deliver next on the partition: one past the last delivery,
    /// or where it was positioned; `None` after a rebalance with no position since.
    pub expected: Option<i64>,
    pub record: &'h Stored,
}

/// Walks every consumer session's deliveries in the order recorded, tracking where each
/// session should be on each partition. A rebalance (an assignment) forgets the positions; a
/// positioning (start, seek) sets one; a new session starts with none.
pub(crate) fn walk_polls<'h>(history: &'h History, mut visit: impl FnMut(PollStep<'h>)) {
    use crate::history::ConsumerEventKind;
    let mut expected: HashMap<(usize, u32, &'h TopicPartition), i64> = HashMap::new();
    for event in &history.consumer_events {
        match &event.kind {
            ConsumerEventKind::Assigned { .. } => {
                expected.retain(|(c, s, _), _| (*c, *s) != (event.consumer, event.session));
            }
            ConsumerEventKind::Positioned { partition, offset, .. } => {
                expected.insert((event.consumer, event.session, partition), *offset);
            }
            ConsumerEventKind::Polled { partition, records } => {
                for record in records {
                    let key = (event.consumer, event.session, partition);
                    visit(PollStep {
                        event,
                        partition,
                        expected: expected.get(&key).copied(),
                        record,
                    });
                    expected.insert(key, record.offset + 1);
                }
            }
            _ => {}
        }
    }
}

/// `consumer session N`, for reports.
pub(crate) fn session_name(history: &History, event: &crate::history::ConsumerEvent) -> String {
    let name = history.consumers.get(event.consumer).map_or("?", |c| c.name.as_str());
    format!("{name} session {}", event.session)
}
