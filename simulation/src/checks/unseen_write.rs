//! Unseen write (violation, DELIVERY-2, OFFSET-IDENTITY-1): after the fault phase the network
//! heals and the final drain reads every partition from 0 to its end through a gateway; a record
//! whose request was acknowledged and that the partition holds, yet the drain did not read, is
//! unseen (a lost one is reported as lost instead). A partition with acknowledged records and no
//! drain at all is one unseen-write anomaly: the liveness phase never read it.

use super::index::{values_text, Index};
use super::{Anomaly, Class};
use std::collections::{BTreeMap, HashSet};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let mut unseen: BTreeMap<_, Vec<_>> = BTreeMap::new();
    let mut undrained: BTreeMap<_, usize> = BTreeMap::new();
    let drained: BTreeMap<_, HashSet<_>> = index
        .history
        .drain
        .iter()
        .map(|log| (&log.partition, log.records.iter().filter_map(|r| r.value).collect()))
        .collect();
    for (request, _) in index.acked() {
        let partition = &request.partition;
        let Some(read) = drained.get(partition) else {
            *undrained.entry(partition).or_default() += request.values.len();
            continue;
        };
        for value in &request.values {
            let stored = index.copies_of(partition, value).is_none_or(|c| !c.is_empty());
            if stored && !read.contains(value) {
                unseen.entry(partition).or_default().push(*value);
            }
        }
    }
    for (partition, records) in undrained {
        out.push(Anomaly::new(
            Class::UnseenWrite,
            Some(partition),
            format!("{records} acknowledged records of {partition}, which the final drain never read"),
        ));
    }
    for (partition, values) in unseen {
        out.push(Anomaly::new(
            Class::UnseenWrite,
            Some(partition),
            format!(
                "{} acknowledged and stored in {partition}, not read by the final drain",
                values_text(&values)
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, log_of, tp};
    use super::super::{check, Class};

    #[test]
    fn delivery_2_an_acknowledged_record_the_final_drain_missed_is_unseen() {
        let mut h = clean();
        h.drain[0].records = log_of(&[0, 1, 2, 3]);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::UnseenWrite], "{verdict:#?}");
        let unseen: Vec<_> = verdict.of(Class::UnseenWrite).collect();
        assert_eq!(unseen.len(), 1);
        assert!(
            unseen[0].what.starts_with("p0-4..=p0-5 acknowledged"),
            "{}",
            unseen[0].what
        );
    }

    #[test]
    fn delivery_2_a_partition_never_drained_is_unseen() {
        let mut h = clean();
        h.drain.clear();
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::UnseenWrite], "{verdict:#?}");
        assert_eq!(verdict.anomalies[0].partition, Some(tp()));
        assert!(verdict.anomalies[0].what.starts_with("6 acknowledged records"));
    }
}
