//! Lost write (violation, DELIVERY-2): a record whose request was acknowledged is absent from
//! the partition at the end. A partition whose contents were never recorded is left to
//! [`unseen_write`](super::unseen_write), which reports the missing drain.

use super::index::{offsets_text, values_text, Index};
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for (request, base) in index.acked() {
        let partition = &request.partition;
        let mut lost = Vec::new();
        let mut acked_at = Vec::new();
        for (i, value) in request.values.iter().enumerate() {
            if let Some([]) = index.copies_of(partition, value) {
                lost.push(*value);
                acked_at.push(base + i as i64);
            }
        }
        if lost.is_empty() {
            continue;
        }
        let (attempt, _) = request.acked().expect("an acknowledged request");
        out.push(
            Anomaly::new(
                Class::LostWrite,
                Some(partition),
                format!(
                    "{} of {} (request {}, attempt {}) acknowledged at offsets {}, absent from {partition}",
                    values_text(&lost),
                    index.producer_name(request),
                    request.id,
                    attempt.attempt,
                    offsets_text(&acked_at),
                ),
            )
            .of_request(request.id),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{self, clean, log_of, set_log};
    use super::super::{check, Class};

    #[test]
    fn delivery_2_an_acknowledged_record_absent_from_the_partition_is_a_lost_write() {
        let mut h = clean();
        set_log(&mut h, log_of(&[0, 1, 2, 4, 5]));
        // Drop the consumer, whose polls of offset 3..=5 would now disagree with the log.
        h.consumer_events.clear();
        let verdict = check(&h);
        let lost: Vec<_> = verdict.of(Class::LostWrite).collect();
        assert_eq!(lost.len(), 1, "{verdict:#?}");
        assert!(
            lost[0].what.starts_with("p0-3 of producer (request 1, attempt 1)"),
            "{}",
            lost[0].what
        );
        assert_eq!(lost[0].request, Some(1));
        // The records after it moved down: misplaced, and only those classes.
        assert_eq!(
            verdict.classes(),
            vec![Class::LostWrite, Class::Misplaced],
            "{verdict:#?}"
        );
        assert!(verdict.fails());
        let _ = fixture::tp();
    }
}
