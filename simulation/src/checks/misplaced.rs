//! Misplaced (violation, OFFSET-BASE-1): a record acknowledged at offset `base + i` of its batch
//! is stored, but not at that offset. A base offset of -1 (no confirmation, OFFSET-BASE-1) names
//! no offset and is not checked.

use super::index::Index;
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for (request, base) in index.acked() {
        if base < 0 {
            continue;
        }
        let partition = &request.partition;
        for (i, value) in request.values.iter().enumerate() {
            let Some(copies) = index.copies_of(partition, value) else {
                continue;
            };
            let acked_at = base + i as i64;
            if copies.is_empty() || copies.contains(&acked_at) {
                continue;
            }
            let holds = index
                .at(partition, acked_at)
                .map_or("nothing".to_string(), |r| match (r.value, &r.raw) {
                    (Some(v), _) => v.to_string(),
                    (None, raw) => format!("{:?}", raw.as_deref().unwrap_or("")),
                });
            out.push(
                Anomaly::new(
                    Class::Misplaced,
                    Some(partition),
                    format!(
                        "{value} (request {}) acknowledged at offset {acked_at}, which holds {holds}; it is at {copies:?}",
                        request.id
                    ),
                )
                .of_request(request.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::clean;
    use super::super::{check, Class};
    use crate::history::AttemptOutcome;

    #[test]
    fn offset_base_1_an_acknowledgement_naming_the_wrong_offset_is_misplaced() {
        let mut h = clean();
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: 3 });
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::Misplaced], "{verdict:#?}");
        let found: Vec<_> = verdict.of(Class::Misplaced).collect();
        assert_eq!(found.len(), 2, "both records of the batch: {found:#?}");
        assert!(found[0]
            .what
            .starts_with("p0-4 (request 2) acknowledged at offset 3, which holds p0-3"));
    }

    #[test]
    fn offset_base_1_an_unconfirmed_base_of_minus_one_is_not_misplaced() {
        let mut h = clean();
        h.produce_outcome(2, 1, 3_100, AttemptOutcome::Acked { base_offset: -1 });
        assert_eq!(check(&h).anomalies, vec![]);
    }
}
