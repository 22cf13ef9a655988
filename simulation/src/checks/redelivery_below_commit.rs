//! Re-delivery below a committed offset (violation, CO-ENCODE-1, CO-RECLAIM-1): a group's
//! consumer started on a partition below the last commit acknowledged before the restart or
//! rebalance that led to the start. An acknowledged commit must survive gateway restarts
//! (CO-ENCODE-1: it lives in Iggy) and Iggy restarts (CO-RECLAIM-1). An explicit seek is exempt.

use super::commits::starts;
use super::index::{secs, session_name, Index};
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for start in starts(index) {
        let Some((commit, acked_us)) = start.last_acked else {
            continue;
        };
        if start.offset >= commit {
            continue;
        }
        out.push(
            Anomaly::new(
                Class::RedeliveryBelowCommit,
                Some(start.partition),
                format!(
                    "{} started at {} ({:?}) {}, below {}'s commit of {commit} acknowledged at {}",
                    session_name(index.history, start.event),
                    start.offset,
                    start.from,
                    start.trigger_text(),
                    start.group,
                    secs(acked_us)
                ),
            )
            .because(format!(
                "the acknowledged commit was not what the group read back{}",
                start.restarts_text(index)
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, positioned};
    use super::super::{check, Class};
    use crate::history::{FaultKind, StartFrom};

    #[test]
    fn co_encode_1_starting_below_an_acknowledged_commit_is_a_violation() {
        let mut h = clean();
        h.fault_at(FaultKind::IggyRestart, 7_500);
        // Session 2 read back 3, though 6 was acknowledged before it started.
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        positioned(&mut h, 2, 8_200, 3, StartFrom::Committed);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::RedeliveryBelowCommit], "{verdict:#?}");
        let anomaly = &verdict.anomalies[0];
        assert_eq!(
            anomaly.what,
            "consumer session 2 started at 3 (Committed) after the rebalance to generation 2, below g's commit of 6 acknowledged at 0.007 s"
        );
        assert!(anomaly
            .cause
            .as_deref()
            .unwrap()
            .ends_with("restarts since that commit: #0 iggy restart"));
    }

    #[test]
    fn co_encode_1_a_commit_acknowledged_after_the_rebalance_need_not_be_seen() {
        let mut h = clean();
        // The commit of 6 is acknowledged only after session 2's assignment (8 100 µs).
        for event in &mut h.consumer_events {
            if let crate::history::ConsumerEventKind::Committed { offset: 6, .. } = event.kind {
                event.at_us = 8_150;
            }
        }
        let last = h.consumer_events.len() - 1;
        h.consumer_events.truncate(last);
        positioned(&mut h, 2, 8_200, 3, StartFrom::Committed);
        let verdict = check(&h);
        assert_eq!(verdict.count(Class::RedeliveryBelowCommit), 0, "{verdict:#?}");
        assert_eq!(verdict.classes(), vec![Class::Redelivery], "{verdict:#?}");
    }
}
