//! Phantom (violation, DELIVERY-2, OFFSET-IDENTITY-1): a partition holds a record no Produce
//! request sent to it: a value no producer made, a value sent to another partition, or bytes
//! that name no record.

use super::index::Index;
use super::{Anomaly, Class};

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    for (partition, records) in &index.logs {
        for record in records.iter() {
            let what = match record.value {
                None => format!(
                    "offset {} holds {:?}, which names no record",
                    record.offset,
                    record.raw.as_deref().unwrap_or("")
                ),
                Some(value) if !index.carried_by.contains_key(&(partition.clone(), value)) => {
                    let elsewhere: Vec<String> = index
                        .history
                        .produces
                        .iter()
                        .filter(|r| r.values.contains(&value))
                        .map(|r| format!("request {} to {}", r.id, r.partition))
                        .collect();
                    if elsewhere.is_empty() {
                        format!("offset {} holds {value}, which no request sent", record.offset)
                    } else {
                        format!(
                            "offset {} holds {value}, sent only by {}",
                            record.offset,
                            elsewhere.join(", ")
                        )
                    }
                }
                Some(_) => continue,
            };
            out.push(Anomaly::new(Class::Phantom, Some(partition), what));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, set_log, value};
    use super::super::{check, Class};
    use crate::history::Stored;

    #[test]
    fn delivery_2_a_record_never_sent_is_a_phantom() {
        let mut h = clean();
        let mut log = h.backend[0].records.clone();
        log.push(Stored::record(6, value(99)));
        log.push(Stored::from_bytes(7, Some(b"junk")));
        set_log(&mut h, log);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::Phantom], "{verdict:#?}");
        let found: Vec<_> = verdict.of(Class::Phantom).map(|a| a.what.as_str()).collect();
        assert_eq!(
            found,
            vec![
                "offset 6 holds p0-99, which no request sent",
                "offset 7 holds \"junk\", which names no record"
            ]
        );
    }
}
