//! Nonmonotonic send (violation, DELIVERY-ORDER-1), in-flight reorder (allowed for a producer
//! without a producer id: DELIVERY-ORDER-1, PRODUCER-NONE-1) and idempotent reorder (violation:
//! PRODUCER-SEQ-1). A producer's request sent after an earlier request of it to the same
//! partition was acknowledged must land above that one: its acknowledged offset and every copy
//! of it. Requests in flight together (a producer with `max.in.flight` above 1, retrying one of
//! them) may land out of send order when the producer has no id: the gateway keeps the order it
//! receives requests in, and a retry arrives after what was sent meanwhile; that is reported, and
//! allowed. An idempotent producer's batches carry sequences, and the gateway writes a batch only
//! when its sequence follows the last one stored (PRODUCER-SEQ-1), refusing a later one that
//! overtook an earlier one, so for it the reorder breaks that rule.

use super::index::Index;
use super::{Anomaly, Class};
use crate::history::ProduceRequest;
use std::collections::BTreeMap;

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let mut streams: BTreeMap<_, Vec<&ProduceRequest>> = BTreeMap::new();
    for request in &index.history.produces {
        streams
            .entry((request.producer, &request.partition))
            .or_default()
            .push(request);
    }
    for ((_, partition), requests) in streams {
        let known = index.logs.contains_key(partition);
        // (ack time, last acknowledged offset, request) of the acknowledged ones, counting only
        // offsets that hold what was acknowledged there: a lost or misplaced record has its own
        // class and says nothing about order.
        let acked: Vec<(u64, i64, &ProduceRequest)> = requests
            .iter()
            .filter_map(|r| {
                let (attempt, base) = r.acked()?;
                let at = attempt.outcome_us?;
                if base < 0 {
                    return None;
                }
                let last = (0..r.values.len() as i64).rev().find(|i| {
                    !known || index.at(partition, base + i).and_then(|s| s.value) == Some(r.values[*i as usize])
                })?;
                Some((at, base + last, *r))
            })
            .collect();
        for later in &requests {
            let Some(first_sent) = later.attempts.first().map(|a| a.sent_us) else {
                continue;
            };
            let later_base = later.acked().map(|(_, base)| base).filter(|b| *b >= 0);
            // Where it landed: its lowest copy, or, when the partition's contents are unknown,
            // where its acknowledgement said.
            let lowest = if known {
                later
                    .values
                    .iter()
                    .filter_map(|v| index.copies_of(partition, v).and_then(|c| c.first().copied()))
                    .min()
            } else {
                later_base
            };
            // The highest acknowledged before `later` was first sent.
            let before = acked
                .iter()
                .filter(|(at, _, r)| *at < first_sent && r.id != later.id)
                .max_by_key(|(_, last, _)| *last);
            if let (Some(lowest), Some((at, last, earlier))) = (lowest, before) {
                if lowest <= *last {
                    out.push(
                        Anomaly::new(
                            Class::NonmonotonicSend,
                            Some(partition),
                            format!(
                                "{}: request {} (sent at {}) landed at offset {lowest}, at or below request {}'s offset {last}, acknowledged before it was sent (at {})",
                                index.producer_name(later),
                                later.id,
                                super::index::secs(first_sent),
                                earlier.id,
                                super::index::secs(*at)
                            ),
                        )
                        .of_request(later.id),
                    );
                    continue;
                }
            }
            // In flight together: an earlier-created request acknowledged after `later` was sent,
            // at a higher offset.
            let Some(later_base) = later_base else {
                continue;
            };
            let overtaken = acked
                .iter()
                .filter(|(at, last, r)| r.id < later.id && *at >= first_sent && *last > later_base)
                .filter(|(_, _, r)| r.acked().is_some_and(|(_, base)| base > later_base))
                .max_by_key(|(_, last, _)| *last);
            if let Some((_, _, earlier)) = overtaken {
                let idempotent = index
                    .history
                    .producers
                    .get(later.producer)
                    .is_some_and(|p| p.idempotent);
                let (class, cause) = if idempotent {
                    (
                        Class::IdempotentReorder,
                        "in flight together; an idempotent producer's later sequence was written before the earlier one it follows (PRODUCER-SEQ-1)",
                    )
                } else {
                    (Class::InFlightReorder, "in flight together, the earlier one retried")
                };
                out.push(
                    Anomaly::new(
                        class,
                        Some(partition),
                        format!(
                            "{}: request {} landed at {later_base}, below request {} created before it and in flight with it",
                            index.producer_name(later),
                            later.id,
                            earlier.id
                        ),
                    )
                    .because(cause.into())
                    .of_request(later.id),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, log_of, set_log, GATEWAY};
    use super::super::{check, Class};
    use crate::history::AttemptOutcome;

    #[test]
    fn delivery_order_1_a_send_after_an_acknowledgement_landing_below_it_is_nonmonotonic() {
        // Request 2 (sent after request 1 was acknowledged at 2..=3) lands at 2..=3, request 1 at 4..=5.
        let mut h = clean();
        h.produce_outcome(1, 1, 2_100, AttemptOutcome::Acked { base_offset: 4 });
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 2 });
        set_log(&mut h, log_of(&[0, 1, 4, 5, 2, 3]));
        h.consumer_events.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::NonmonotonicSend], "{verdict:#?}");
        assert_eq!(verdict.anomalies[0].request, Some(2));
        assert!(verdict.anomalies[0]
            .what
            .contains("landed at offset 2, at or below request 1's offset 5"));
    }

    #[test]
    fn delivery_order_1_a_late_first_copy_below_an_earlier_ack_is_nonmonotonic() {
        // Request 2's acknowledged copy is in place, but an unacknowledged earlier copy of it sits
        // below request 1: its first copy was written before request 1's, though sent after.
        let mut h = clean();
        h.produce_outcome(1, 1, 2_100, AttemptOutcome::Acked { base_offset: 4 });
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 6 });
        h.produce_attempt(2, 3_050, GATEWAY, 1);
        set_log(&mut h, log_of(&[0, 1, 4, 5, 2, 3, 4, 5]));
        h.consumer_events.clear();
        let verdict = check(&h);
        assert!(verdict.count(Class::NonmonotonicSend) == 1, "{verdict:#?}");
    }

    /// Request 2 sent before request 1 was answered: 1 was retried and landed after 2.
    fn overtaken(idempotent: bool) -> crate::history::History {
        let mut h = clean();
        h.producers[0].max_in_flight = 5;
        h.producers[0].idempotent = idempotent;
        h.produces[1].attempts[0].outcome = Some(AttemptOutcome::Acked { base_offset: 4 });
        h.produces[1].attempts[0].outcome_us = Some(3_500);
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 2 });
        set_log(&mut h, log_of(&[0, 1, 4, 5, 2, 3]));
        h.consumer_events.clear();
        h
    }

    #[test]
    fn delivery_order_1_producer_none_1_a_plain_producers_requests_in_flight_together_may_land_out_of_order() {
        let verdict = check(&overtaken(false));
        assert_eq!(verdict.classes(), vec![Class::InFlightReorder], "{verdict:#?}");
        assert!(!verdict.fails());
    }

    #[test]
    fn producer_seq_1_an_idempotent_producers_in_flight_reorder_is_a_violation() {
        let verdict = check(&overtaken(true));
        assert_eq!(verdict.classes(), vec![Class::IdempotentReorder], "{verdict:#?}");
        assert!(verdict.fails());
        assert_eq!(verdict.anomalies[0].request, Some(2));
        assert!(verdict.anomalies[0]
            .cause
            .as_deref()
            .is_some_and(|c| c.ends_with("(PRODUCER-SEQ-1)")));
    }
}
