//! Resume above the commit (violation, CO-ENCODE-1, CO-ZERO-1): a group's consumer started on a
//! partition above what the group committed, so the records between were never delivered to it:
//! at a "committed" offset that no commit of the group carried and that is above the last
//! acknowledged one, or by `auto.offset.reset` (the gateway answered "nothing committed") above
//! an acknowledged commit. CO-ZERO-1 is what keeps "committed 0" and "nothing committed" apart.

use super::commits::starts;
use super::index::{secs, session_name, Index};
use super::{Anomaly, Class};
use crate::history::StartFrom;

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for start in starts(index) {
        let last = start.last_acked.map(|(offset, _)| offset);
        let what = match start.from {
            StartFrom::Committed => {
                let above = start.offset > last.unwrap_or(0);
                if !above || start.committed.contains(&start.offset) {
                    continue;
                }
                format!(
                    "{} started at the committed offset {} {}, which no commit of {} carried (last acknowledged: {})",
                    session_name(index.history, start.event),
                    start.offset,
                    start.trigger_text(),
                    start.group,
                    last.map_or("none".into(), |c| c.to_string())
                )
            }
            StartFrom::Earliest | StartFrom::Latest | StartFrom::OutOfRangeReset => {
                let Some((commit, acked_us)) = start.last_acked else {
                    continue;
                };
                if start.offset <= commit {
                    continue; // below is a redelivery-below-commit
                }
                format!(
                    "{} reset to {} ({:?}) {}, skipping from {}'s commit of {commit} acknowledged at {}",
                    session_name(index.history, start.event),
                    start.offset,
                    start.from,
                    start.trigger_text(),
                    start.group,
                    secs(acked_us)
                )
            }
            StartFrom::Seek => continue,
        };
        out.push(
            Anomaly::new(Class::ResumeAboveCommit, Some(start.partition), what)
                .because(format!("records were skipped{}", start.restarts_text(index))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, positioned};
    use super::super::{check, Class};
    use crate::history::StartFrom;

    fn restart_at(offset: i64, from: StartFrom) -> super::super::Verdict {
        let mut h = clean();
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        positioned(&mut h, 2, 8_200, offset, from);
        check(&h)
    }

    #[test]
    fn co_encode_1_starting_at_an_offset_nobody_committed_skips() {
        let verdict = restart_at(5, StartFrom::Committed);
        // 5 is below the acknowledged 6: that is the other class.
        assert_eq!(verdict.classes(), vec![Class::RedeliveryBelowCommit], "{verdict:#?}");
        let mut h = clean();
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        positioned(&mut h, 2, 8_200, 8, StartFrom::Committed);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::ResumeAboveCommit], "{verdict:#?}");
        assert!(verdict.anomalies[0]
            .what
            .contains("which no commit of g carried (last acknowledged: 6)"));
    }

    #[test]
    fn co_zero_1_a_reset_past_an_acknowledged_commit_skips() {
        let verdict = restart_at(6, StartFrom::Latest);
        assert_eq!(
            verdict.count(Class::ResumeAboveCommit),
            0,
            "at the commit: nothing skipped"
        );
        let mut h = clean();
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        // A commit of 3 only, then a reset to latest (6): 3..=5 skipped.
        h.consumer_events
            .retain(|e| !matches!(e.kind, crate::history::ConsumerEventKind::Committed { offset: 6, .. }));
        positioned(&mut h, 2, 8_200, 6, StartFrom::Latest);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::ResumeAboveCommit], "{verdict:#?}");
        assert!(verdict.anomalies[0]
            .what
            .contains("reset to 6 (Latest) after the rebalance to generation 2, skipping from g's commit of 3"));
    }

    #[test]
    fn co_encode_1_a_commit_in_flight_at_the_start_may_be_what_it_read_back() {
        // Another member sent a commit of 8 at 8 100 µs; it timed out, recorded only at 9 500
        // µs, after the start at 8 200 read 8 back: the commit had landed.
        let mut h = clean();
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        positioned(&mut h, 2, 8_200, 8, StartFrom::Committed);
        h.consumer_event(
            0,
            1,
            9_500,
            crate::history::ConsumerEventKind::Committed {
                group: "g".into(),
                partition: super::super::fixture::tp(),
                offset: 8,
                generation: None,
                sent_us: 8_100,
                outcome: crate::history::CommitOutcome::TimedOut,
            },
        );
        let verdict = check(&h);
        assert_eq!(verdict.count(Class::ResumeAboveCommit), 0, "{verdict:#?}");
    }
}
