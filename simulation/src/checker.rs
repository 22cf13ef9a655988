//! Classifies what a run did to the records of one partition, from what the producer logged,
//! what the consumer saw and what the backend holds at the end: lost, misplaced, phantom,
//! duplicated (explained by a retry or not), reordered, and where the consumer's view departs
//! from the log. Pure: no simulation, no I/O, so it is tested on hand-made histories.
//!
//! The guarantees it checks for a producer without a producer id (DELIVERY-2, formerly
//! DELIVERY-1; DELIVERY-ORDER-1): every acknowledged record is in the
//! log at the offset its acknowledgement gave; nothing is in the log that was never sent; a
//! record appears more than once only if its batch was sent more than once; the first
//! occurrences of a producer's records follow its send order (one request in flight); and a
//! consumer sees the log itself, offset for offset, with no gap.

use std::collections::{BTreeMap, BTreeSet};

/// A record's identity: its producer numbers records 0, 1, 2, ... in send order.
pub type RecordId = u64;

/// Everything the checker looks at.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Records in the order the producer first sent them.
    pub sent: Vec<RecordId>,
    /// How many times each record was sent (its batch's attempts).
    pub attempts: BTreeMap<RecordId, u32>,
    /// Acknowledged records and the offsets their acknowledgements gave.
    pub acked: Vec<(RecordId, i64)>,
    /// The partition at the end, from the backend, in offset order.
    pub log: Vec<(i64, RecordId)>,
    /// What the consumer delivered, in delivery order.
    pub consumed: Vec<(i64, RecordId)>,
}

/// The classification. `holds()` is the at-least-once verdict; duplicates with a retry behind
/// them are counted, not faulted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Acknowledged, yet absent from the log.
    pub lost: Vec<RecordId>,
    /// Acknowledged at an offset that holds something else: (record, acknowledged offset).
    pub misplaced: Vec<(RecordId, i64)>,
    /// In the log, never sent.
    pub phantom: Vec<RecordId>,
    /// In the log more than once: (record, copies). Expected after retries.
    pub duplicated: Vec<(RecordId, usize)>,
    /// Duplicated although sent once.
    pub unexplained_duplicates: Vec<RecordId>,
    /// First occurrences out of send order: (record seen, earlier-sent record seen after it).
    pub reordered: Vec<(RecordId, RecordId)>,
    /// Offsets that are not 0, 1, 2, ... in the log.
    pub log_gaps: Vec<String>,
    /// Where the consumer's deliveries are not the log read in order.
    pub consumer_divergence: Vec<String>,
    /// Sent, not acknowledged, yet in the log: the ambiguous outcomes at-least-once allows.
    pub written_without_ack: usize,
}

impl Verdict {
    /// Whether the run kept at-least-once delivery and per-partition order.
    pub fn holds(&self) -> bool {
        self.lost.is_empty()
            && self.misplaced.is_empty()
            && self.phantom.is_empty()
            && self.unexplained_duplicates.is_empty()
            && self.reordered.is_empty()
            && self.log_gaps.is_empty()
            && self.consumer_divergence.is_empty()
    }

    /// One line of counts, for a run's report.
    pub fn summary(&self) -> String {
        format!(
            "lost {}, misplaced {}, phantom {}, duplicated {} ({} unexplained), reordered {}, log gaps {}, consumer divergences {}, written without ack {}",
            self.lost.len(),
            self.misplaced.len(),
            self.phantom.len(),
            self.duplicated.len(),
            self.unexplained_duplicates.len(),
            self.reordered.len(),
            self.log_gaps.len(),
            self.consumer_divergence.len(),
            self.written_without_ack
        )
    }
}

/// Classifies `history`.
pub fn check(history: &History) -> Verdict {
    let mut verdict = Verdict::default();
    let at_offset: BTreeMap<i64, RecordId> = history.log.iter().copied().collect();
    let mut copies: BTreeMap<RecordId, usize> = BTreeMap::new();
    for (_, id) in &history.log {
        *copies.entry(*id).or_default() += 1;
    }

    for (expected, (offset, _)) in history.log.iter().enumerate() {
        if *offset != expected as i64 {
            verdict
                .log_gaps
                .push(format!("log position {expected} holds offset {offset}"));
            break;
        }
    }

    let acked: BTreeSet<RecordId> = history.acked.iter().map(|(id, _)| *id).collect();
    for (id, offset) in &history.acked {
        if !copies.contains_key(id) {
            verdict.lost.push(*id);
        } else if at_offset.get(offset) != Some(id) {
            verdict.misplaced.push((*id, *offset));
        }
    }

    let send_position: BTreeMap<RecordId, usize> = history.sent.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for (id, n) in &copies {
        if !send_position.contains_key(id) {
            verdict.phantom.push(*id);
            continue;
        }
        if *n > 1 {
            verdict.duplicated.push((*id, *n));
            if history.attempts.get(id).copied().unwrap_or(1) < 2 {
                verdict.unexplained_duplicates.push(*id);
            }
        }
        if !acked.contains(id) {
            verdict.written_without_ack += 1;
        }
    }

    // First occurrences must come in send order.
    let mut seen = BTreeSet::new();
    let mut latest: Option<(RecordId, usize)> = None;
    for (_, id) in &history.log {
        let Some(position) = send_position.get(id).copied() else {
            continue;
        };
        if !seen.insert(*id) {
            continue;
        }
        if let Some((before, before_position)) = latest {
            if position < before_position {
                verdict.reordered.push((before, *id));
                continue;
            }
        }
        latest = Some((*id, position));
    }

    // The consumer reads from offset 0 and must see exactly the log, in order, no gap.
    for (i, (offset, id)) in history.consumed.iter().enumerate() {
        match history.log.get(i) {
            Some((log_offset, log_id)) if log_offset == offset && log_id == id => {}
            Some((log_offset, log_id)) => {
                verdict.consumer_divergence.push(format!(
                    "delivery {i}: record {id} at offset {offset}, the log has {log_id} at {log_offset}"
                ));
                break;
            }
            None => {
                verdict.consumer_divergence.push(format!(
                    "delivery {i}: record {id} at offset {offset}, past the log's end"
                ));
                break;
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three records sent once each, acknowledged, logged and consumed in order.
    fn clean() -> History {
        History {
            sent: vec![0, 1, 2],
            attempts: [(0, 1), (1, 1), (2, 1)].into(),
            acked: vec![(0, 0), (1, 1), (2, 2)],
            log: vec![(0, 0), (1, 1), (2, 2)],
            consumed: vec![(0, 0), (1, 1), (2, 2)],
        }
    }

    #[test]
    fn a_clean_history_holds() {
        let verdict = check(&clean());
        assert!(verdict.holds(), "{}", verdict.summary());
        assert_eq!(verdict, Verdict::default());
    }

    #[test]
    fn delivery_1_an_acknowledged_record_missing_from_the_log_is_lost() {
        let mut h = clean();
        h.log = vec![(0, 0), (1, 2)];
        h.consumed = h.log.clone();
        let verdict = check(&h);
        assert_eq!(verdict.lost, vec![1]);
        assert_eq!(verdict.misplaced, vec![(2, 2)], "2 was acknowledged at offset 2");
        assert!(!verdict.holds());
    }

    #[test]
    fn delivery_1_a_retried_batch_may_be_duplicated_but_a_single_send_may_not() {
        let mut h = clean();
        h.attempts.insert(1, 2);
        h.acked = vec![(0, 0), (1, 2), (2, 3)];
        h.log = vec![(0, 0), (1, 1), (2, 1), (3, 2)];
        h.consumed = h.log.clone();
        let verdict = check(&h);
        assert_eq!(verdict.duplicated, vec![(1, 2)]);
        assert!(verdict.unexplained_duplicates.is_empty());
        assert!(verdict.holds(), "{}", verdict.summary());

        h.attempts.insert(1, 1);
        let verdict = check(&h);
        assert_eq!(verdict.unexplained_duplicates, vec![1]);
        assert!(!verdict.holds());
    }

    #[test]
    fn delivery_1_a_record_never_sent_is_phantom() {
        let mut h = clean();
        h.log.push((3, 99));
        let verdict = check(&h);
        assert_eq!(verdict.phantom, vec![99]);
        assert!(!verdict.holds());
    }

    #[test]
    fn delivery_order_1_first_occurrences_out_of_send_order_are_reordered() {
        let mut h = clean();
        h.acked = vec![(0, 0), (2, 1), (1, 2)];
        h.log = vec![(0, 0), (1, 2), (2, 1)];
        h.consumed = h.log.clone();
        let verdict = check(&h);
        assert_eq!(verdict.reordered, vec![(2, 1)]);
        assert!(!verdict.holds());
    }

    #[test]
    fn delivery_order_1_a_late_copy_of_an_earlier_record_is_a_duplicate_not_a_reorder() {
        // A held request lands after its retry and after the next batch.
        let mut h = clean();
        h.attempts.insert(1, 2);
        h.acked = vec![(0, 0), (1, 1), (2, 2)];
        h.log = vec![(0, 0), (1, 1), (2, 2), (3, 1)];
        h.consumed = h.log.clone();
        let verdict = check(&h);
        assert!(verdict.reordered.is_empty());
        assert_eq!(verdict.duplicated, vec![(1, 2)]);
        assert!(verdict.holds(), "{}", verdict.summary());
    }

    #[test]
    fn an_unacknowledged_record_in_the_log_is_allowed_and_counted() {
        let mut h = clean();
        h.acked.pop();
        let verdict = check(&h);
        assert_eq!(verdict.written_without_ack, 1);
        assert!(verdict.holds());
    }

    #[test]
    fn a_consumer_that_skips_or_invents_an_offset_diverges() {
        let mut h = clean();
        h.consumed = vec![(0, 0), (2, 2)];
        assert_eq!(check(&h).consumer_divergence.len(), 1);
        h.consumed = vec![(0, 0), (1, 1), (2, 2), (3, 7)];
        assert_eq!(check(&h).consumer_divergence.len(), 1);
        h.consumed = vec![(0, 0)];
        assert!(check(&h).holds(), "a consumer that stopped early saw a prefix");
    }

    #[test]
    fn a_log_whose_offsets_skip_has_a_gap() {
        let mut h = clean();
        h.log = vec![(0, 0), (2, 1), (3, 2)];
        h.acked = vec![(0, 0), (1, 2), (2, 3)];
        h.consumed = h.log.clone();
        assert_eq!(check(&h).log_gaps.len(), 1);
    }
}
