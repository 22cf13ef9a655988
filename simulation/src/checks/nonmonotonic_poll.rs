//! Nonmonotonic poll (violation, OFFSET-IDENTITY-1, FETCH-BATCH-1): within one consumer session
//! a partition's deliveries go backwards (or repeat an offset) with no seek, restart or
//! rebalance in between. A Kafka consumer fetches from one past its last delivery; records below
//! that mean the gateway answered other offsets than those asked for. Reported once per poll.

use super::index::{secs, session_name, walk_polls, Index};
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let mut last_event: Option<*const crate::history::ConsumerEvent> = None;
    walk_polls(index.history, |step| {
        let Some(expected) = step.expected else {
            return;
        };
        if step.record.offset >= expected || last_event == Some(step.event as *const _) {
            return;
        }
        last_event = Some(step.event as *const _);
        out.push(Anomaly::new(
            Class::NonmonotonicPoll,
            Some(step.partition),
            format!(
                "{} at {}: delivered offset {} after offset {}, with no seek or rebalance between",
                session_name(index.history, step.event),
                secs(step.event.at_us),
                step.record.offset,
                expected - 1
            ),
        ));
    });
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{assigned, clean, polled, positioned};
    use super::super::{check, Class};
    use crate::history::StartFrom;

    #[test]
    fn offset_identity_1_a_session_polling_backwards_is_nonmonotonic() {
        let mut h = clean();
        polled(&mut h, 2, 8_300, &[(4, 4), (5, 5)]);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::NonmonotonicPoll], "{verdict:#?}");
        assert_eq!(
            verdict.anomalies[0].what,
            "consumer session 2 at 0.008 s: delivered offset 4 after offset 5, with no seek or rebalance between"
        );
    }

    #[test]
    fn offset_identity_1_going_back_after_a_seek_or_rebalance_is_not_nonmonotonic() {
        let mut h = clean();
        positioned(&mut h, 2, 8_250, 4, StartFrom::Seek);
        polled(&mut h, 2, 8_300, &[(4, 4), (5, 5)]);
        assigned(&mut h, 2, 8_400, 3);
        polled(&mut h, 2, 8_500, &[(5, 5)]);
        assert_eq!(check(&h).count(Class::NonmonotonicPoll), 0, "{:#?}", check(&h));
    }
}
