//! The checker: reads one run's [`History`] and reports every anomaly in the Jepsen Kafka
//! taxonomy, each with its class, whether the class is allowed or a violation, the spec rules it
//! rests on, and a cause where one can be named. One check per file; [`check`] runs them all and
//! yields the [`Verdict`]. Pure: no simulation, no I/O, so every class is tested on hand-built
//! histories (docs/simulation.md, "The checker's taxonomy").

mod answered_retry;
mod cause;
mod commits;
mod duplicate;
mod inconsistent_offset;
mod index;
mod log_gap;
mod lost_write;
mod misplaced;
mod nonmonotonic_poll;
mod nonmonotonic_send;
mod owned_twice;
mod phantom;
mod poll_skip;
mod redelivery;
mod redelivery_below_commit;
pub mod render;
mod resume_above_commit;
mod unseen_write;

#[cfg(test)]
mod fixture;
#[cfg(test)]
mod model_tests;

use crate::history::{History, RequestId, TopicPartition};
pub use answered_retry::AnsweredRetry;
pub use cause::{AttemptCause, DuplicateCause, Why};
use index::Index;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Whether a class of anomaly breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The gateway's documented guarantees allow it (a plain producer's at-least-once, a group's
    /// re-delivery): reported, never failing.
    Allowed,
    /// A rule is broken: the run fails.
    Violation,
}

/// The classes of anomaly, in the order a report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Acknowledged, absent from the partition.
    LostWrite,
    /// Acknowledged and stored, yet the final drain after the heal did not read it.
    UnseenWrite,
    /// Acknowledged at an offset that holds another record.
    Misplaced,
    /// In the partition, never sent to it.
    Phantom,
    /// The partition's offsets are not 0, 1, 2, ...
    LogGap,
    /// One offset seen holding different records.
    InconsistentOffset,
    /// More copies of a record than sends of it.
    UnexplainedDuplicate,
    /// A record of an idempotent producer stored more than once: its retry was written again
    /// instead of answered with the first copy's offset.
    IdempotentDuplicate,
    /// A producer's send, made after an earlier one was acknowledged, landed below it.
    NonmonotonicSend,
    /// Requests of an idempotent producer in flight together landed out of sequence order.
    IdempotentReorder,
    /// A consumer session's polls of a partition went backwards with no seek or rebalance.
    NonmonotonicPoll,
    /// A consumer session's polls passed over offsets that exist.
    PollSkip,
    /// A consumer started below an offset whose commit was acknowledged.
    RedeliveryBelowCommit,
    /// A consumer started above every offset the group committed: records skipped.
    ResumeAboveCommit,
    /// One partition held by two consumer-protocol members of a group at once.
    OwnedTwice,
    /// A record of a producer without a producer id stored more than once because its request
    /// was sent more than once.
    Duplicate,
    /// Concurrent requests of one producer without a producer id (in flight together) landed out
    /// of send order.
    InFlightReorder,
    /// A consumer re-read records at or above the last acknowledged commit after a rebalance or
    /// restart.
    Redelivery,
    /// A consumer-protocol member still held a partition the coordinator had given to another,
    /// because the coordinator had already let it go (it restarted, or fenced the member) and the
    /// member had not heard yet.
    StaleOwner,
}

impl Class {
    pub const ALL: [Class; 19] = [
        Class::LostWrite,
        Class::UnseenWrite,
        Class::Misplaced,
        Class::Phantom,
        Class::LogGap,
        Class::InconsistentOffset,
        Class::UnexplainedDuplicate,
        Class::IdempotentDuplicate,
        Class::NonmonotonicSend,
        Class::IdempotentReorder,
        Class::NonmonotonicPoll,
        Class::PollSkip,
        Class::RedeliveryBelowCommit,
        Class::ResumeAboveCommit,
        Class::OwnedTwice,
        Class::Duplicate,
        Class::InFlightReorder,
        Class::Redelivery,
        Class::StaleOwner,
    ];

    /// The class's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::LostWrite => "lost-write",
            Class::UnseenWrite => "unseen-write",
            Class::Misplaced => "misplaced",
            Class::Phantom => "phantom",
            Class::LogGap => "log-gap",
            Class::InconsistentOffset => "inconsistent-offset",
            Class::UnexplainedDuplicate => "unexplained-duplicate",
            Class::IdempotentDuplicate => "idempotent-duplicate",
            Class::NonmonotonicSend => "nonmonotonic-send",
            Class::IdempotentReorder => "idempotent-reorder",
            Class::NonmonotonicPoll => "nonmonotonic-poll",
            Class::PollSkip => "poll-skip",
            Class::RedeliveryBelowCommit => "redelivery-below-commit",
            Class::ResumeAboveCommit => "resume-above-commit",
            Class::OwnedTwice => "owned-twice",
            Class::Duplicate => "duplicate",
            Class::InFlightReorder => "in-flight-reorder",
            Class::Redelivery => "redelivery",
            Class::StaleOwner => "stale-owner",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Class::Duplicate | Class::InFlightReorder | Class::Redelivery | Class::StaleOwner => Severity::Allowed,
            _ => Severity::Violation,
        }
    }

    /// The spec rules the class rests on (docs/spec), every one of them live: DELIVERY-1 and
    /// PID-IGNORE-1 were retired by issue 51 for DELIVERY-2 (nothing acknowledged lost, a plain
    /// producer at least once), DELIVERY-3 and the PRODUCER-* rules (an idempotent producer's
    /// records stored once).
    pub fn rules(self) -> &'static [&'static str] {
        match self {
            Class::LostWrite => &["DELIVERY-2"],
            Class::UnseenWrite => &["DELIVERY-2", "OFFSET-IDENTITY-1"],
            Class::Misplaced => &["OFFSET-BASE-1"],
            Class::Phantom => &["DELIVERY-2", "OFFSET-IDENTITY-1"],
            Class::LogGap => &["OFFSET-IDENTITY-1"],
            Class::InconsistentOffset => &["OFFSET-IDENTITY-1"],
            // More copies than sends: no retry explains them, whoever the producer.
            Class::UnexplainedDuplicate => &["DELIVERY-2", "DELIVERY-3"],
            Class::IdempotentDuplicate => &["DELIVERY-3", "PRODUCER-DUP-1"],
            Class::NonmonotonicSend => &["DELIVERY-ORDER-1"],
            Class::IdempotentReorder => &["PRODUCER-SEQ-1", "DELIVERY-ORDER-1"],
            Class::NonmonotonicPoll => &["OFFSET-IDENTITY-1", "FETCH-BATCH-1"],
            Class::PollSkip => &["FETCH-RANGE-1", "OFFSET-IDENTITY-1"],
            Class::RedeliveryBelowCommit => &["CO-ENCODE-1", "CO-RECLAIM-1"],
            Class::ResumeAboveCommit => &["CO-ENCODE-1", "CO-ZERO-1"],
            Class::OwnedTwice => &["GROUP-CONSUMER-REVOKE-1", "GROUP-CONSUMER-EPOCH-1"],
            Class::Duplicate => &["DELIVERY-2", "PRODUCER-NONE-1"],
            Class::InFlightReorder => &["DELIVERY-ORDER-1", "PRODUCER-NONE-1"],
            Class::Redelivery => &["CO-ENCODE-1", "GROUP-COMMIT-1"],
            Class::StaleOwner => &["GROUP-CONSUMER-EPOCH-1", "GROUP-CONSUMER-COMMIT-1"],
        }
    }

    /// One line on what the class means.
    pub fn meaning(self) -> &'static str {
        match self {
            Class::LostWrite => "acknowledged, absent from the partition",
            Class::UnseenWrite => "acknowledged and stored, not read by the final drain after the heal",
            Class::Misplaced => "acknowledged at an offset that holds another record",
            Class::Phantom => "in the partition, never sent to it",
            Class::LogGap => "the partition's offsets are not 0, 1, 2, ...",
            Class::InconsistentOffset => "one offset seen holding different records",
            Class::UnexplainedDuplicate => "more copies of a record than sends of it",
            Class::IdempotentDuplicate => "an idempotent producer's record stored more than once",
            Class::NonmonotonicSend => "a send made after an earlier one was acknowledged landed below it",
            Class::IdempotentReorder => {
                "an idempotent producer's requests in flight together landed out of sequence order"
            }
            Class::NonmonotonicPoll => "a consumer session's polls went backwards without a seek or rebalance",
            Class::PollSkip => "a consumer session's polls passed over offsets that exist",
            Class::RedeliveryBelowCommit => "a consumer started below an acknowledged commit",
            Class::ResumeAboveCommit => "a consumer started above every offset its group committed",
            Class::OwnedTwice => "a partition held by two members of a consumer-protocol group at once",
            Class::Duplicate => {
                "a plain producer's record stored more than once because its request was sent more than once"
            }
            Class::InFlightReorder => "a plain producer's requests in flight together landed out of send order",
            Class::Redelivery => "re-read at or above the last acknowledged commit after a rebalance or restart",
            Class::StaleOwner => {
                "a member held a partition given to another after the coordinator had let it go, until it heard"
            }
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One anomaly found in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    pub class: Class,
    pub partition: Option<TopicPartition>,
    /// What happened, in one line.
    pub what: String,
    /// Why, in one line, where the history says.
    pub cause: Option<String>,
    /// The Produce request concerned, if one is.
    pub request: Option<RequestId>,
    /// For a duplicate: each copy's offset and each failed attempt's cause.
    pub duplicate: Option<DuplicateCause>,
}

impl Anomaly {
    pub(crate) fn new(class: Class, partition: Option<&TopicPartition>, what: String) -> Self {
        Self {
            class,
            partition: partition.cloned(),
            what,
            cause: None,
            request: None,
            duplicate: None,
        }
    }

    pub(crate) fn because(mut self, cause: String) -> Self {
        self.cause = Some(cause);
        self
    }

    pub(crate) fn of_request(mut self, request: RequestId) -> Self {
        self.request = Some(request);
        self
    }

    pub fn severity(&self) -> Severity {
        self.class.severity()
    }
}

/// Every anomaly of one run, in class order, and what follows from them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub anomalies: Vec<Anomaly>,
    /// Not anomalies: the idempotent retries the gateway answered with an earlier attempt's copy
    /// (PRODUCER-DUP-1), in request order.
    #[serde(default)]
    pub answered_retries: Vec<AnsweredRetry>,
}

impl Verdict {
    /// Whether any anomaly breaks a rule: the run fails (an allowed duplicate never does).
    pub fn fails(&self) -> bool {
        self.anomalies.iter().any(|a| a.severity() == Severity::Violation)
    }

    pub fn violations(&self) -> impl Iterator<Item = &Anomaly> {
        self.anomalies.iter().filter(|a| a.severity() == Severity::Violation)
    }

    pub fn of(&self, class: Class) -> impl Iterator<Item = &Anomaly> {
        self.anomalies.iter().filter(move |a| a.class == class)
    }

    pub fn count(&self, class: Class) -> usize {
        self.of(class).count()
    }

    /// The classes found, each once, in class order.
    pub fn classes(&self) -> Vec<Class> {
        let mut classes: Vec<Class> = self.anomalies.iter().map(|a| a.class).collect();
        classes.sort();
        classes.dedup();
        classes
    }
}

/// Runs every check on `history`.
pub fn check(history: &History) -> Verdict {
    let index = Index::new(history);
    let mut anomalies = Vec::new();
    lost_write::check(&index, &mut anomalies);
    unseen_write::check(&index, &mut anomalies);
    misplaced::check(&index, &mut anomalies);
    phantom::check(&index, &mut anomalies);
    log_gap::check(&index, &mut anomalies);
    inconsistent_offset::check(&index, &mut anomalies);
    duplicate::check(&index, &mut anomalies);
    nonmonotonic_send::check(&index, &mut anomalies);
    nonmonotonic_poll::check(&index, &mut anomalies);
    poll_skip::check(&index, &mut anomalies);
    redelivery_below_commit::check(&index, &mut anomalies);
    resume_above_commit::check(&index, &mut anomalies);
    redelivery::check(&index, &mut anomalies);
    owned_twice::check(&index, &mut anomalies);
    // Stable: within a class, the order the checks found them (partition, then offset or time).
    anomalies.sort_by_key(|a| a.class);
    Verdict {
        anomalies,
        answered_retries: answered_retry::find(&index),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_history_reports_nothing() {
        let verdict = check(&fixture::clean());
        assert_eq!(verdict, Verdict::default());
        assert!(!verdict.fails());
    }

    #[test]
    fn every_class_has_a_name_a_meaning_and_existing_rules() {
        let spec: String = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec"))
            .expect("docs/spec")
            .map(|entry| std::fs::read_to_string(entry.expect("entry").path()).unwrap_or_default())
            .collect();
        let mut names: Vec<&str> = Class::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Class::ALL.len(), "class names are unique");
        for class in Class::ALL {
            assert!(!class.meaning().is_empty());
            for rule in class.rules() {
                let heading = format!("### {rule}\n");
                let Some(at) = spec.find(&heading) else {
                    panic!("{class}: rule {rule} is not in docs/spec");
                };
                // A retired rule keeps its heading for the record; a class must not rest on it
                // (DELIVERY-1 and PID-IGNORE-1, retired by issue 51).
                assert!(
                    !spec[at + heading.len()..].starts_with("**Retired**"),
                    "{class}: rule {rule} is retired"
                );
            }
        }
    }

    #[test]
    fn only_a_plain_producers_duplicates_and_reorders_are_allowed() {
        // DELIVERY-2, PRODUCER-NONE-1: a producer without an id is delivered at least once;
        // DELIVERY-3, PRODUCER-SEQ-1: an idempotent one exactly once and in sequence order.
        assert_eq!(Class::Duplicate.severity(), Severity::Allowed);
        assert_eq!(Class::InFlightReorder.severity(), Severity::Allowed);
        assert_eq!(Class::IdempotentDuplicate.severity(), Severity::Violation);
        assert_eq!(Class::IdempotentReorder.severity(), Severity::Violation);
    }
}
