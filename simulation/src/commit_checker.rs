//! Checks a committing consumer's history against the partition's log: every delivery is the
//! log's record at that offset; between restarts deliveries are consecutive; a restart resumes
//! no lower than the last acknowledged commit (a commit, once acknowledged, is durable) and no
//! higher than what was delivered (nothing skipped); acknowledged commits never go backwards;
//! and the consumer read the log to its end. Pure, like [`checker`](crate::checker).

use crate::checker::RecordId;
use crate::committing_consumer::{CommittingConsumerLog, Resume};

/// What departs from the guarantees, one line each; empty when the history holds.
pub fn check_committing_consumer(log: &[(i64, RecordId)], consumer: &CommittingConsumerLog) -> Vec<String> {
    let mut problems = Vec::new();
    let mut resumes = consumer.resumes.iter().peekable();
    let mut expected: Option<i64> = None;
    // The highest offset delivered so far, plus one.
    let mut delivered_end = 0i64;
    let check_resume = |resume: &Resume, delivered_end: i64, problems: &mut Vec<String>| {
        if let Some(commit) = resume.last_acked_commit {
            if resume.at < commit {
                problems.push(format!(
                    "restart after {} deliveries resumed at {}, below the acknowledged commit {commit} (CO-ENCODE-1)",
                    resume.after_deliveries, resume.at
                ));
            }
        }
        if resume.at > delivered_end {
            problems.push(format!(
                "restart after {} deliveries resumed at {}, past the {delivered_end} records delivered: skipped records",
                resume.after_deliveries, resume.at
            ));
        }
    };
    for (i, (offset, id)) in consumer.delivered.iter().enumerate() {
        while let Some(resume) = resumes.next_if(|r| r.after_deliveries == i) {
            check_resume(resume, delivered_end, &mut problems);
            expected = Some(resume.at);
        }
        match expected {
            Some(e) if e != *offset => {
                problems.push(format!("delivery {i}: offset {offset}, expected {e}"));
                break;
            }
            None => {
                problems.push(format!(
                    "delivery {i}: offset {offset} before the consumer ever started"
                ));
                break;
            }
            Some(_) => {}
        }
        match log.get(*offset as usize) {
            Some((o, logged)) if o == offset && logged == id => {}
            other => {
                problems.push(format!(
                    "delivery {i}: record {id} at offset {offset}, the log has {other:?}"
                ));
                break;
            }
        }
        expected = Some(offset + 1);
        delivered_end = delivered_end.max(offset + 1);
    }
    for resume in resumes {
        check_resume(resume, delivered_end, &mut problems);
    }
    if let Some(w) = consumer.acked_commits.windows(2).find(|w| w[1] < w[0]) {
        problems.push(format!("acknowledged commits went backwards: {} then {}", w[0], w[1]));
    }
    if delivered_end != log.len() as i64 {
        problems.push(format!(
            "the consumer read up to offset {delivered_end}, the log ends at {}",
            log.len()
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Vec<(i64, RecordId)> {
        (0..6).map(|i| (i, i as u64 * 10)).collect()
    }

    fn resume(after_deliveries: usize, at: i64, last_acked_commit: Option<i64>) -> Resume {
        Resume {
            after_deliveries,
            at,
            last_acked_commit,
        }
    }

    /// Reads 0..4, commits 4, restarts at 4, reads 4..6, commits 6.
    fn clean() -> CommittingConsumerLog {
        CommittingConsumerLog {
            delivered: log().into_iter().collect(),
            resumes: vec![resume(0, 0, None), resume(4, 4, Some(4))],
            acked_commits: vec![4, 6],
            failures: vec![],
        }
    }

    #[test]
    fn a_clean_history_holds() {
        assert_eq!(check_committing_consumer(&log(), &clean()), Vec::<String>::new());
    }

    #[test]
    fn redelivery_from_an_older_commit_is_allowed() {
        let mut c = clean();
        // Read 0..4 but the commit of 4 was never acknowledged: restart at 2 (an older commit).
        c.delivered = [0, 1, 2, 3, 2, 3, 4, 5].iter().map(|&o| (o, o as u64 * 10)).collect();
        c.resumes = vec![resume(0, 0, None), resume(4, 2, Some(2))];
        c.acked_commits = vec![2, 6];
        assert_eq!(check_committing_consumer(&log(), &c), Vec::<String>::new());
    }

    #[test]
    fn co_encode_1_resuming_below_an_acknowledged_commit_is_a_lost_commit() {
        let mut c = clean();
        c.delivered = [0, 1, 2, 3, 2, 3, 4, 5].iter().map(|&o| (o, o as u64 * 10)).collect();
        c.resumes = vec![resume(0, 0, None), resume(4, 2, Some(4))];
        let problems = check_committing_consumer(&log(), &c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("below the acknowledged commit 4"), "{problems:?}");
    }

    #[test]
    fn resuming_past_what_was_delivered_skips_records() {
        let mut c = clean();
        c.delivered = [0, 1, 4, 5].iter().map(|&o| (o, o as u64 * 10)).collect();
        c.resumes = vec![resume(0, 0, None), resume(2, 4, Some(2))];
        c.acked_commits = vec![2, 6];
        let problems = check_committing_consumer(&log(), &c);
        assert!(problems.iter().any(|p| p.contains("skipped")), "{problems:?}");
    }

    #[test]
    fn a_gap_between_restarts_or_a_wrong_record_is_caught() {
        let mut c = clean();
        c.delivered.remove(2);
        assert!(!check_committing_consumer(&log(), &c).is_empty());
        let mut c = clean();
        c.delivered[3].1 = 99;
        assert!(!check_committing_consumer(&log(), &c).is_empty());
    }

    #[test]
    fn commits_going_backwards_or_an_unfinished_read_are_caught() {
        let mut c = clean();
        c.acked_commits = vec![4, 3, 6];
        assert!(check_committing_consumer(&log(), &c)[0].contains("backwards"));
        let mut c = clean();
        c.delivered.truncate(5);
        assert!(check_committing_consumer(&log(), &c)[0].contains("read up to offset 5"));
    }
}
