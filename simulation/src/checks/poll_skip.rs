//! Poll skip (violation, FETCH-RANGE-1, OFFSET-IDENTITY-1): within one consumer session a
//! partition's deliveries pass over offsets the partition holds, with no seek or rebalance in
//! between; and the final drain, which reads every partition from 0, passing over offsets the
//! backend holds. Reported once per poll.

use super::index::{offsets_text, secs, session_name, walk_polls, Index};
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let mut last_event: Option<*const crate::history::ConsumerEvent> = None;
    walk_polls(index.history, |step| {
        let Some(expected) = step.expected else {
            return;
        };
        if step.record.offset <= expected || last_event == Some(step.event as *const _) {
            return;
        }
        let skipped = index.holds_any_in(step.partition, expected, step.record.offset);
        if skipped.is_empty() {
            return;
        }
        last_event = Some(step.event as *const _);
        out.push(Anomaly::new(
            Class::PollSkip,
            Some(step.partition),
            format!(
                "{} at {}: delivered offset {} after {}, passing over {}",
                session_name(index.history, step.event),
                secs(step.event.at_us),
                step.record.offset,
                expected - 1,
                offsets_text(&skipped)
            ),
        ));
    });
    for drain in &index.history.drain {
        let mut next = 0;
        for record in &drain.records {
            let skipped = index.holds_any_in(&drain.partition, next, record.offset);
            if !skipped.is_empty() {
                out.push(Anomaly::new(
                    Class::PollSkip,
                    Some(&drain.partition),
                    format!("the final drain passed over {}", offsets_text(&skipped)),
                ));
                break;
            }
            next = next.max(record.offset + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, polled, positioned};
    use super::super::{check, Class};
    use crate::history::StartFrom;

    #[test]
    fn fetch_range_1_a_session_passing_over_existing_offsets_skips() {
        let mut h = clean();
        positioned(&mut h, 2, 8_250, 0, StartFrom::Seek);
        polled(&mut h, 2, 8_300, &[(0, 0), (3, 3)]);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::PollSkip], "{verdict:#?}");
        assert_eq!(
            verdict.anomalies[0].what,
            "consumer session 2 at 0.008 s: delivered offset 3 after 0, passing over 1..=2"
        );
    }

    #[test]
    fn fetch_range_1_the_final_drain_passing_over_stored_offsets_skips() {
        let mut h = clean();
        h.drain[0].records.remove(0);
        let verdict = check(&h);
        // p0-0 unread is also an unseen write.
        assert_eq!(
            verdict.classes(),
            vec![Class::UnseenWrite, Class::PollSkip],
            "{verdict:#?}"
        );
        assert_eq!(
            verdict.of(Class::PollSkip).next().unwrap().what,
            "the final drain passed over 0"
        );
    }
}
