//! Inconsistent offset (violation, OFFSET-IDENTITY-1): one offset of a partition seen holding
//! different records: by the backend, the final drain and every consumer poll. A poll or the
//! drain reading an offset the backend does not hold counts too. (An acknowledgement naming an
//! offset that holds another record is [`misplaced`](super::misplaced).)

use super::index::Index;
use super::{Anomaly, Class};
use crate::history::{ConsumerEventKind, Stored, TopicPartition};
use std::collections::BTreeMap;

/// What one reader saw at one offset: (who, what).
type Sightings = Vec<(String, String)>;

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let history = index.history;
    let mut seen: BTreeMap<(TopicPartition, i64), Sightings> = BTreeMap::new();
    let mut note = |partition: &TopicPartition, record: &Stored, who: String| {
        let what = match (record.value, &record.raw) {
            (Some(value), _) => value.to_string(),
            (None, raw) => format!("{:?}", raw.as_deref().unwrap_or("")),
        };
        let sightings = seen.entry((partition.clone(), record.offset)).or_default();
        if !sightings.iter().any(|(w, s)| *w == who && *s == what) {
            sightings.push((who, what));
        }
    };
    for log in &history.backend {
        for record in &log.records {
            note(&log.partition, record, "the backend".into());
        }
    }
    for log in &history.drain {
        for record in &log.records {
            note(&log.partition, record, "the final drain".into());
        }
    }
    for event in &history.consumer_events {
        if let ConsumerEventKind::Polled { partition, records } = &event.kind {
            let name = history.consumers.get(event.consumer).map_or("?", |c| c.name.as_str());
            for record in records {
                note(partition, record, format!("{name} session {}", event.session));
            }
        }
    }
    let backend_known: Vec<&TopicPartition> = history.backend.iter().map(|l| &l.partition).collect();
    for ((partition, offset), sightings) in seen {
        let mut values: Vec<&str> = sightings.iter().map(|(_, what)| what.as_str()).collect();
        values.sort_unstable();
        values.dedup();
        let backend_silent = backend_known.contains(&&partition) && !sightings.iter().any(|(w, _)| w == "the backend");
        if values.len() < 2 && !backend_silent {
            continue;
        }
        let mut readings: Vec<String> = sightings
            .iter()
            .map(|(who, what)| format!("{who} read {what}"))
            .collect();
        if backend_silent {
            readings.push("the backend holds nothing there".into());
        }
        out.push(Anomaly::new(
            Class::InconsistentOffset,
            Some(&partition),
            format!("offset {offset}: {}", readings.join("; ")),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, polled, positioned, value};
    use super::super::{check, Class};
    use crate::history::{StartFrom, Stored};

    #[test]
    fn offset_identity_1_one_offset_read_as_two_records_is_inconsistent() {
        let mut h = clean();
        positioned(&mut h, 2, 8_250, 2, StartFrom::Seek);
        polled(&mut h, 2, 8_300, &[(2, 7)]);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::InconsistentOffset], "{verdict:#?}");
        assert_eq!(
            verdict.anomalies[0].what,
            "offset 2: the backend read p0-2; the final drain read p0-2; consumer session 1 read p0-2; consumer session 2 read p0-7"
        );
        // The drain disagreeing with the backend is one too (and leaves p0-2 unseen).
        let mut h = clean();
        h.drain[0].records[2] = Stored::record(2, value(7));
        let verdict = check(&h);
        assert_eq!(verdict.count(Class::InconsistentOffset), 1, "{verdict:#?}");
    }

    #[test]
    fn offset_identity_1_a_poll_past_the_backends_end_is_inconsistent() {
        let mut h = clean();
        polled(&mut h, 2, 8_300, &[(6, 6)]);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::InconsistentOffset], "{verdict:#?}");
        assert!(verdict.anomalies[0].what.ends_with("the backend holds nothing there"));
    }
}
