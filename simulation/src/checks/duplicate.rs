//! Duplicate (allowed: DELIVERY-2, PRODUCER-NONE-1), idempotent duplicate (violation:
//! DELIVERY-3, PRODUCER-DUP-1) and unexplained duplicate (violation). A record stored more than
//! once is allowed when its producer has no producer id and its request was sent at least as many
//! times as there are copies: at-least-once delivery stores a retry again. An idempotent
//! producer's retry must be answered with the first copy's offset and not written again, so any
//! second copy of its record is a violation, whatever the fault behind the retry. Either anomaly
//! names the request, the offsets the copies ended at, and for each attempt that was not
//! acknowledged the fault that made the producer send again. More copies than sends has no retry
//! behind it.

use super::cause::{attempt_cause, DuplicateCause};
use super::index::{offsets_text, values_text, Index};
use super::{Anomaly, Class};
use crate::history::RecordValue;
use std::collections::BTreeMap;

/// How many copies' offsets a duplicate's line lists (all are in its `DuplicateCause`).
const SHOWN_COPIES: usize = 8;

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for (partition, copies) in &index.copies {
        // request → (its duplicated values with their copies, unexplained values)
        type PerRequest = (Vec<(RecordValue, Vec<i64>)>, Vec<RecordValue>);
        let mut by_request: BTreeMap<usize, PerRequest> = BTreeMap::new();
        for (value, offsets) in copies {
            if offsets.len() < 2 {
                continue;
            }
            let Some(requests) = index.carried_by.get(&(partition.clone(), *value)) else {
                continue; // a phantom, reported as such
            };
            let sends: usize = requests.iter().map(|r| index.request(*r).attempts.len()).sum();
            let entry = by_request.entry(requests[0]).or_default();
            if offsets.len() > sends {
                entry.1.push(*value);
            } else {
                entry.0.push((*value, offsets.clone()));
            }
        }
        for (id, (mut explained, mut unexplained)) in by_request {
            let request = index.request(id);
            let producer = index.producer_name(request);
            explained.sort();
            unexplained.sort();
            if !unexplained.is_empty() {
                out.push(
                    Anomaly::new(
                        Class::UnexplainedDuplicate,
                        Some(partition),
                        format!(
                            "{} of {producer} (request {id}) stored more times than its {} sends",
                            values_text(&unexplained),
                            request.attempts.len()
                        ),
                    )
                    .of_request(id),
                );
            }
            if explained.is_empty() {
                continue;
            }
            let first_copies = explained[0].1.clone();
            let idempotent = index
                .history
                .producers
                .get(request.producer)
                .is_some_and(|p| p.idempotent);
            let cause = DuplicateCause {
                request: id,
                producer: producer.to_string(),
                idempotent,
                values: explained.iter().map(|(v, _)| *v).collect(),
                copies: first_copies.clone(),
                acked: request.acked().map(|(a, base)| {
                    let position = request.values.iter().position(|v| *v == explained[0].0).unwrap_or(0);
                    (a.attempt, base + position as i64)
                }),
                failed: request
                    .attempts
                    .iter()
                    .filter(|a| !matches!(a.outcome, Some(crate::history::AttemptOutcome::Acked { .. })))
                    .map(|a| attempt_cause(index, request, a))
                    .collect(),
            };
            let values: Vec<RecordValue> = cause.values.clone();
            // DELIVERY-3: an idempotent producer's retry is recognised by producer id, epoch and
            // sequence; DELIVERY-2 lets only a producer without an id have it stored again.
            let class = if idempotent {
                Class::IdempotentDuplicate
            } else {
                Class::Duplicate
            };
            let mut anomaly = Anomaly::new(
                class,
                Some(partition),
                format!(
                    "{} of {producer} (request {id}) stored {} times, the first at offsets {}{}",
                    values_text(&values),
                    first_copies.len(),
                    offsets_text(&first_copies[..first_copies.len().min(SHOWN_COPIES)]),
                    if first_copies.len() > SHOWN_COPIES { ", ..." } else { "" }
                ),
            )
            .of_request(id)
            .because(cause.text(index));
            anomaly.duplicate = Some(cause);
            out.push(anomaly);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cause::Why;
    use super::super::fixture::{clean, log_of, set_log, GATEWAY};
    use super::super::{check, Class};
    use crate::history::{AttemptOutcome, FaultKind, Hop};

    /// Request 1 (p0-2, p0-3) is written by attempt 1, which times out under `fault`; attempt 2
    /// writes it again at 4..=5 and is acknowledged; request 2 follows at 6..=7.
    fn retried(fault: FaultKind) -> crate::history::History {
        let mut h = clean();
        h.produces[1].attempts[0].outcome = Some(AttemptOutcome::TimedOut);
        h.produces[1].attempts[0].outcome_us = Some(2_900);
        h.produce_attempt(1, 2_950, GATEWAY, 2);
        h.produce_outcome(1, 2, 2_990, AttemptOutcome::Acked { base_offset: 4 });
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 6 });
        h.fault_at(fault, 2_500);
        set_log(&mut h, log_of(&[0, 1, 2, 3, 2, 3, 4, 5]));
        h.consumer_events.clear();
        h
    }

    #[test]
    fn delivery_2_a_plain_producers_retried_request_may_be_stored_twice_and_says_why() {
        let lost = FaultKind::ResponseLost {
            hop: Hop::ClientGateway {
                client: "producer".into(),
                gateway: GATEWAY.into(),
            },
            produce: Some((1, 1)),
        };
        let verdict = check(&retried(lost));
        assert_eq!(verdict.classes(), vec![Class::Duplicate], "{verdict:#?}");
        assert!(!verdict.fails());
        let duplicate = verdict.of(Class::Duplicate).next().expect("one");
        assert_eq!(
            duplicate.what,
            "p0-2..=p0-3 of producer (request 1) stored 2 times, the first at offsets 2, 4"
        );
        let cause = duplicate.duplicate.as_ref().expect("a cause");
        assert_eq!(cause.copies, vec![2, 4]);
        assert_eq!(cause.acked, Some((2, 4)));
        assert_eq!(cause.failed.len(), 1);
        assert_eq!(cause.failed[0].why, Why::LostProduceResponse);
        assert_eq!(cause.failed[0].fault, Some(0));
        assert_eq!(
            duplicate.cause.as_deref(),
            Some("attempt 1 to gateway (no answer in time): written, its Produce response lost (fault #0: response lost on producer->gateway at 0.002 s); attempt 2 acknowledged at 4")
        );
    }

    #[test]
    fn producer_dup_1_an_idempotent_producers_duplicate_is_a_violation() {
        // DELIVERY-3, PRODUCER-DUP-1: the retry after a lost answer should have been answered
        // with the first copy's offset, 2, not written again at 4.
        let mut h = retried(FaultKind::ResponseLost {
            hop: Hop::ClientGateway {
                client: "producer".into(),
                gateway: GATEWAY.into(),
            },
            produce: Some((1, 1)),
        });
        h.producers[0].idempotent = true;
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::IdempotentDuplicate], "{verdict:#?}");
        assert!(verdict.fails());
        let duplicate = verdict.of(Class::IdempotentDuplicate).next().expect("one");
        assert_eq!(
            duplicate.what,
            "p0-2..=p0-3 of producer (request 1) stored 2 times, the first at offsets 2, 4"
        );
        let cause = duplicate.duplicate.as_ref().expect("a cause");
        assert!(cause.idempotent);
        assert_eq!(cause.failed[0].why, Why::LostProduceResponse);
        // The same cause as a plain producer's, and nothing claiming the gateway ignores ids.
        assert_eq!(
            duplicate.cause.as_deref(),
            Some("attempt 1 to gateway (no answer in time): written, its Produce response lost (fault #0: response lost on producer->gateway at 0.002 s); attempt 2 acknowledged at 4")
        );
        assert_eq!(
            crate::checks::render::verdict_line(&verdict),
            "verdict: FAIL, rules broken: idempotent-duplicate x1 (DELIVERY-3, PRODUCER-DUP-1)"
        );
    }

    #[test]
    fn producer_none_1_a_plain_producers_duplicate_is_still_allowed() {
        // DELIVERY-2, PRODUCER-NONE-1: without a producer id the gateway cannot tell the retry
        // from a new batch, so a second copy is at least once, and allowed.
        let verdict = check(&retried(FaultKind::GatewayRestart {
            gateway: GATEWAY.into(),
        }));
        assert_eq!(verdict.classes(), vec![Class::Duplicate], "{verdict:#?}");
        assert!(!verdict.fails());
        let cause = verdict.of(Class::Duplicate).next().unwrap().duplicate.clone().unwrap();
        assert!(!cause.idempotent);
        assert_eq!(cause.failed[0].why, Why::GatewayRestart);
        assert_eq!(
            crate::checks::render::verdict_line(&verdict),
            "verdict: PASS, no rule broken; allowed: duplicate x1 (DELIVERY-2, PRODUCER-NONE-1)"
        );
    }

    #[test]
    fn delivery_3_an_idempotent_duplicate_names_the_fault_behind_each_retry() {
        for (fault, why) in [
            (
                FaultKind::ResponseLost {
                    hop: Hop::GatewayIggy {
                        gateway: GATEWAY.into(),
                    },
                    produce: None,
                },
                Why::LostIggyResponse,
            ),
            (FaultKind::IggyRestart, Why::IggyRestart),
            (
                FaultKind::GatewayRestart {
                    gateway: GATEWAY.into(),
                },
                Why::GatewayRestart,
            ),
        ] {
            let mut h = retried(fault);
            h.producers[0].idempotent = true;
            let verdict = check(&h);
            assert_eq!(verdict.classes(), vec![Class::IdempotentDuplicate], "{verdict:#?}");
            let cause = verdict.anomalies[0].duplicate.clone().expect("a cause");
            assert_eq!(cause.failed[0].why, why);
        }
    }

    #[test]
    fn delivery_2_a_request_abandoned_with_its_connection_names_the_failure_behind_it() {
        // A window of two: request 1 times out under a lost response; request 2, in flight on
        // the same connection, is abandoned with it; both are sent again and written twice.
        let mut h = clean();
        h.producers[0].max_in_flight = 2;
        h.produces[1].attempts[0].outcome = Some(AttemptOutcome::TimedOut);
        h.produces[1].attempts[0].outcome_us = Some(3_500);
        h.produces[2].attempts[0].outcome = Some(AttemptOutcome::ConnectionLost);
        h.produces[2].attempts[0].sent_us = 2_100;
        h.produces[2].attempts[0].outcome_us = Some(3_500);
        h.produce_attempt(1, 3_600, GATEWAY, 2);
        h.produce_outcome(1, 2, 3_650, AttemptOutcome::Acked { base_offset: 6 });
        h.produce_attempt(2, 3_610, GATEWAY, 2);
        h.produce_outcome(2, 2, 3_700, AttemptOutcome::Acked { base_offset: 8 });
        h.fault_at(
            FaultKind::ResponseLost {
                hop: Hop::GatewayIggy {
                    gateway: GATEWAY.into(),
                },
                produce: Some((1, 1)),
            },
            2_500,
        );
        set_log(&mut h, log_of(&[0, 1, 2, 3, 4, 5, 2, 3, 4, 5]));
        h.consumer_events.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::Duplicate], "{verdict:#?}");
        let causes: Vec<_> = verdict
            .of(Class::Duplicate)
            .map(|d| d.duplicate.clone().expect("a cause").failed[0].clone())
            .collect();
        assert_eq!(causes[0].why, Why::LostIggyResponse);
        assert_eq!(causes[1].why, Why::AbandonedWithConnection);
        assert_eq!((causes[1].behind, causes[1].fault), (Some((1, 1)), Some(0)));
    }

    #[test]
    fn delivery_2_a_request_sent_many_times_is_summarised_in_two_lines() {
        // Request 2 (p0-4, p0-5) fails nine times with no fault on its path, each attempt
        // written, then is acknowledged: ten copies.
        let mut h = clean();
        h.produces[2].attempts[0].outcome = Some(AttemptOutcome::Error { code: 6 });
        for attempt in 2..=10u32 {
            h.produce_attempt(2, 3_000 + 10 * u64::from(attempt), GATEWAY, 1);
            let outcome = if attempt == 10 {
                AttemptOutcome::Acked { base_offset: 22 }
            } else {
                AttemptOutcome::Error { code: 6 }
            };
            h.produce_outcome(2, attempt, 3_005 + 10 * u64::from(attempt), outcome);
        }
        let seqs: Vec<u64> = (0..4).chain((0..10).flat_map(|_| [4, 5])).collect();
        set_log(&mut h, log_of(&seqs));
        h.consumer_events.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::Duplicate], "{verdict:#?}");
        let duplicate = &verdict.anomalies[0];
        assert_eq!(
            duplicate.what,
            "p0-4..=p0-5 of producer (request 2) stored 10 times, the first at offsets 4, 6, 8, 10, 12, 14, 16, 18, ..."
        );
        let cause = duplicate.cause.as_deref().expect("a cause");
        assert!(
            cause.contains("attempt 4 to gateway (answered error 6): no fault on its path; 5 more failed attempts: 5 no fault on its path; attempt 10 acknowledged at 22"),
            "{cause}"
        );
        assert_eq!(duplicate.duplicate.as_ref().expect("structured").copies.len(), 10);
    }

    #[test]
    fn delivery_2_delivery_3_more_copies_than_sends_is_unexplained_whoever_the_producer() {
        for idempotent in [false, true] {
            let mut h = clean();
            h.producers[0].idempotent = idempotent;
            set_log(&mut h, log_of(&[0, 1, 2, 3, 4, 5, 5]));
            h.consumer_events.clear();
            let verdict = check(&h);
            assert_eq!(verdict.classes(), vec![Class::UnexplainedDuplicate], "{verdict:#?}");
            assert_eq!(
                verdict.anomalies[0].what,
                "p0-5 of producer (request 2) stored more times than its 1 sends"
            );
            assert!(verdict.fails());
        }
    }
}
