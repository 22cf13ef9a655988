//! Idempotent retries answered from the log (not an anomaly: what PRODUCER-DUP-1 is for). An
//! idempotent producer's request acknowledged by a retry, whose first record the partition holds
//! at the acknowledged offset in the copy an earlier attempt wrote: the earlier attempt was
//! stored, its answer never reached the producer, and the gateway answered the retry with the
//! first copy's offset instead of writing it again. Counting them shows that a run with no
//! idempotent duplicate had retries to deduplicate, not merely none to make.

use super::cause::{attempt_cause, why_text, Why};
use super::index::Index;
use crate::history::RequestId;
use serde::{Deserialize, Serialize};

/// One retry the gateway answered with an earlier attempt's copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnsweredRetry {
    pub request: RequestId,
    pub producer: String,
    /// The attempt acknowledged.
    pub acked_attempt: u32,
    /// The earlier attempt whose copy the acknowledgement names.
    pub written_by_attempt: u32,
    /// Where that copy's first record is.
    pub offset: i64,
    /// Why the producer did not take the earlier attempt as written: the fault on its path.
    pub why: Why,
}

impl AnsweredRetry {
    /// `producer-1 request 17 attempt 2 answered with attempt 1's copy at 48 (attempt 1: written,
    /// its Produce response lost)`.
    pub fn text(&self) -> String {
        format!(
            "{} request {} attempt {} answered with attempt {}'s copy at {} (attempt {}: {})",
            self.producer,
            self.request,
            self.acked_attempt,
            self.written_by_attempt,
            self.offset,
            self.written_by_attempt,
            why_text(self.why)
        )
    }
}

pub(super) fn find(index: &Index<'_>) -> Vec<AnsweredRetry> {
    let mut out = Vec::new();
    for (request, base) in index.acked() {
        let idempotent = index
            .history
            .producers
            .get(request.producer)
            .is_some_and(|p| p.idempotent);
        let Some((acked, _)) = request.acked() else {
            continue;
        };
        if !idempotent || acked.attempt < 2 {
            continue;
        }
        let Some(copy) = index.at(&request.partition, base) else {
            continue;
        };
        match copy.written_by {
            Some((by_request, by_attempt))
                if by_request == request.id
                    && by_attempt < acked.attempt
                    && copy.value == request.values.first().copied() =>
            {
                let written = &request.attempts[by_attempt as usize - 1];
                out.push(AnsweredRetry {
                    request: request.id,
                    producer: index.producer_name(request).to_string(),
                    acked_attempt: acked.attempt,
                    written_by_attempt: by_attempt,
                    offset: base,
                    why: attempt_cause(index, request, written).why,
                });
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::cause::Why;
    use super::super::fixture::{clean, log_of, set_log, GATEWAY};
    use super::super::{check, Class};
    use crate::history::{AttemptOutcome, FaultKind, History, Hop};

    /// Request 1 (p0-2, p0-3) is written by attempt 1 at 2..=3, whose answer is lost; attempt 2
    /// is acknowledged at `acked_at`. The log holds each record once unless `second_copy`.
    fn retried(idempotent: bool, acked_at: i64, second_copy: bool) -> History {
        let mut h = clean();
        h.producers[0].idempotent = idempotent;
        h.produces[1].attempts[0].outcome = Some(AttemptOutcome::TimedOut);
        h.produces[1].attempts[0].outcome_us = Some(2_900);
        h.produce_attempt(1, 2_950, GATEWAY, 2);
        h.produce_outcome(1, 2, 2_990, AttemptOutcome::Acked { base_offset: acked_at });
        h.fault_at(
            FaultKind::ResponseLost {
                hop: Hop::ClientGateway {
                    client: "producer".into(),
                    gateway: GATEWAY.into(),
                },
                produce: Some((1, 1)),
            },
            2_500,
        );
        let seqs: &[u64] = if second_copy {
            &[0, 1, 2, 3, 2, 3, 4, 5]
        } else {
            &[0, 1, 2, 3, 4, 5]
        };
        let mut log = log_of(seqs);
        for stored in &mut log {
            let request = stored.value.map_or(0, |v| v.seq as usize / 2);
            stored.written_by = Some((request, 1));
        }
        if second_copy {
            log[4].written_by = Some((1, 2));
            log[5].written_by = Some((1, 2));
            h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 6 });
        }
        set_log(&mut h, log);
        h.consumer_events.clear();
        h
    }

    #[test]
    fn producer_dup_1_a_retry_acknowledged_at_its_first_attempts_copy_is_answered_from_the_log() {
        let verdict = check(&retried(true, 2, false));
        assert_eq!(verdict.anomalies, Vec::new(), "{verdict:#?}");
        assert_eq!(verdict.answered_retries.len(), 1);
        assert_eq!(
            verdict.answered_retries[0].text(),
            "producer request 1 attempt 2 answered with attempt 1's copy at 2 (attempt 1: written, its Produce response lost)"
        );
        assert_eq!(verdict.answered_retries[0].why, Why::LostProduceResponse);
    }

    #[test]
    fn producer_dup_1_a_retry_written_again_is_no_answered_retry_but_a_duplicate() {
        let verdict = check(&retried(true, 4, true));
        assert_eq!(verdict.answered_retries, Vec::new());
        assert_eq!(verdict.classes(), vec![Class::IdempotentDuplicate], "{verdict:#?}");
    }

    #[test]
    fn producer_none_1_a_plain_producers_retry_is_never_answered_from_the_log() {
        let verdict = check(&retried(false, 2, false));
        assert_eq!(verdict.answered_retries, Vec::new());
    }
}
