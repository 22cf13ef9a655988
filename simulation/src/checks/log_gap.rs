//! Log gap (violation, OFFSET-IDENTITY-1): a partition's offsets, as the backend holds them, run
//! 0, 1, 2, ... with no hole and no repeat, because Kafka offsets are Iggy's and Iggy numbers a
//! partition's messages consecutively. The first departure per partition is reported. Where the
//! backend's contents were not recorded, the final drain's stand in; where they were, a drain
//! passing over what the backend holds is a [`poll_skip`](super::poll_skip).

use super::index::Index;
use super::{Anomaly, Class};
use crate::history::PartitionLog;

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let history = index.history;
    let sources = history.backend.iter().map(|log| ("the backend", log)).chain(
        history
            .drain
            .iter()
            .filter(|log| history.backend_log(&log.partition).is_none())
            .map(|log| ("the final drain", log)),
    );
    for (source, log) in sources {
        if let Some(what) = first_gap(log) {
            out.push(Anomaly::new(
                Class::LogGap,
                Some(&log.partition),
                format!("{source}: {what}"),
            ));
        }
    }
}

fn first_gap(log: &PartitionLog) -> Option<String> {
    log.records
        .iter()
        .enumerate()
        .find(|(position, record)| record.offset != *position as i64)
        .map(|(position, record)| format!("position {position} holds offset {}", record.offset))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, log_of, set_log};
    use super::super::{check, Class};

    #[test]
    fn offset_identity_1_offsets_that_skip_are_a_log_gap() {
        let mut h = clean();
        let mut log = log_of(&[0, 1, 2, 3, 4, 5]);
        for record in &mut log[4..] {
            record.offset += 1;
        }
        set_log(&mut h, log);
        // Acknowledgements and polls that match the shifted log, so only the gap remains.
        h.produce_outcome(2, 1, 3_100, crate::history::AttemptOutcome::Acked { base_offset: 5 });
        h.consumer_events.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::LogGap], "{verdict:#?}");
        let whats: Vec<_> = verdict.of(Class::LogGap).map(|a| a.what.as_str()).collect();
        assert_eq!(whats, vec!["the backend: position 4 holds offset 5"]);
        h.backend.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::LogGap], "{verdict:#?}");
        assert_eq!(verdict.anomalies[0].what, "the final drain: position 4 holds offset 5");
    }
}
