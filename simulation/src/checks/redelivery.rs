//! Re-delivery (allowed, CO-ENCODE-1, GROUP-COMMIT-1): after a restart or a rebalance a group's
//! consumer started on a partition at or above the last acknowledged commit but below what the
//! group had already read, so it reads those records again. At-least-once consumption: what was
//! read after the last acknowledged commit is read again by whoever takes the partition over.

use super::commits::starts;
use super::index::{session_name, Index};
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for start in starts(index) {
        let floor = start.last_acked.map_or(i64::MIN, |(offset, _)| offset);
        if start.offset < floor || start.offset >= start.delivered_end {
            continue;
        }
        out.push(
            Anomaly::new(
                Class::Redelivery,
                Some(start.partition),
                format!(
                    "{} re-reads {}..={} {}, starting at {} ({:?})",
                    session_name(index.history, start.event),
                    start.offset,
                    start.delivered_end - 1,
                    start.trigger_text(),
                    start.offset,
                    start.from
                ),
            )
            .because(match start.last_acked {
                Some((commit, _)) => format!(
                    "{} had read up to {} but its last acknowledged commit was {commit}",
                    start.group,
                    start.delivered_end - 1
                ),
                None => format!("{} had no acknowledged commit", start.group),
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, commit, positioned};
    use super::super::{check, Class};
    use crate::history::{CommitOutcome, StartFrom};

    #[test]
    fn co_encode_1_re_reading_above_the_last_acknowledged_commit_is_allowed() {
        let mut h = clean();
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        // The commit of 6 was never answered: the group restarts from the acknowledged 3.
        h.consumer_events
            .retain(|e| !matches!(e.kind, crate::history::ConsumerEventKind::Committed { offset: 6, .. }));
        commit(&mut h, 1, 7_100, 6, CommitOutcome::TimedOut);
        positioned(&mut h, 2, 8_200, 3, StartFrom::Committed);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::Redelivery], "{verdict:#?}");
        assert!(!verdict.fails());
        assert_eq!(
            verdict.anomalies[0].what,
            "consumer session 2 re-reads 3..=5 after the rebalance to generation 2, starting at 3 (Committed)"
        );
        assert_eq!(
            verdict.anomalies[0].cause.as_deref(),
            Some("g had read up to 5 but its last acknowledged commit was 3")
        );
    }
}
