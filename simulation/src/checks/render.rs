//! Pure rendering of what the checker found: the human report of one run (each anomaly in one or
//! two lines with its cause, then the verdict) and the aggregate of a sweep (anomalies by class
//! with counts and the first seeds of each), serialisable to JSON for `--json`. The exit-code
//! rule lives here too: a violation of a rule fails, an allowed anomaly never does.

use super::{Class, Severity, Verdict};
use crate::history::History;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// How many seeds per class an aggregate keeps: the lowest, so the table is the same whatever
/// order parallel jobs finish in.
pub const FIRST_SEEDS: usize = 5;

/// The process exit code for a verdict or a sweep: 1 when a rule was broken, else 0.
pub fn exit_code(fails: bool) -> i32 {
    i32::from(fails)
}

/// The report of one run: a header, each anomaly with its cause, the verdict.
pub fn report(history: &History, verdict: &Verdict) -> String {
    let mut out = String::new();
    let violations = verdict.violations().count();
    let _ = writeln!(
        out,
        "anomalies in {} seed {}: {} ({violations} violating a rule, {} allowed)",
        history.scenario,
        history.seed,
        verdict.anomalies.len(),
        verdict.anomalies.len() - violations
    );
    for anomaly in &verdict.anomalies {
        let partition = anomaly.partition.as_ref().map(|p| format!(" {p}:")).unwrap_or_default();
        let _ = writeln!(out, "  [{}]{partition} {}", anomaly.class, anomaly.what);
        if let Some(cause) = &anomaly.cause {
            let _ = writeln!(out, "      cause: {cause}");
        }
    }
    if !verdict.answered_retries.is_empty() {
        let _ = writeln!(
            out,
            "idempotent retries answered with an earlier attempt's copy, not written again (PRODUCER-DUP-1): {}",
            verdict.answered_retries.len()
        );
        for retry in &verdict.answered_retries {
            let _ = writeln!(out, "  {}", retry.text());
        }
    }
    let _ = writeln!(out, "{}", verdict_line(verdict));
    out
}

/// `verdict: PASS ...` or `verdict: FAIL ...`, with the counts by class and their rules.
pub fn verdict_line(verdict: &Verdict) -> String {
    let counts = |severity: Severity| -> Vec<String> {
        verdict
            .classes()
            .into_iter()
            .filter(|c| c.severity() == severity)
            .map(|c| format!("{c} x{} ({})", verdict.count(c), c.rules().join(", ")))
            .collect()
    };
    let allowed = counts(Severity::Allowed);
    let allowed = if allowed.is_empty() {
        String::new()
    } else {
        format!("; allowed: {}", allowed.join(", "))
    };
    if verdict.fails() {
        format!(
            "verdict: FAIL, rules broken: {}{allowed}",
            counts(Severity::Violation).join(", ")
        )
    } else {
        format!("verdict: PASS, no rule broken{allowed}")
    }
}

/// One class's line in a sweep's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTally {
    pub class: Class,
    pub severity: Severity,
    pub rules: Vec<String>,
    /// Anomalies of the class over every seed.
    pub anomalies: u64,
    /// Seeds with at least one.
    pub seeds: u64,
    /// The lowest such seeds, at most [`FIRST_SEEDS`].
    pub first_seeds: Vec<u64>,
}

/// What a sweep found, seed by seed merged; jobs' aggregates merge in any order to the same value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    pub scenario: String,
    pub seeds_run: u64,
    /// Every seed that broke a rule, ascending.
    pub failing_seeds: Vec<u64>,
    /// The classes found, in class order.
    pub classes: Vec<ClassTally>,
    /// Idempotent retries answered with an earlier attempt's copy (PRODUCER-DUP-1, not an
    /// anomaly), and the seeds with at least one.
    #[serde(default)]
    pub answered_retries: u64,
    #[serde(default)]
    pub answered_retry_seeds: u64,
}

impl Aggregate {
    pub fn new(scenario: impl Into<String>) -> Self {
        Self {
            scenario: scenario.into(),
            ..Self::default()
        }
    }

    /// Adds one seed's verdict.
    pub fn add(&mut self, seed: u64, verdict: &Verdict) {
        let mut one = Aggregate::new(self.scenario.clone());
        one.seeds_run = 1;
        one.answered_retries = verdict.answered_retries.len() as u64;
        one.answered_retry_seeds = u64::from(!verdict.answered_retries.is_empty());
        if verdict.fails() {
            one.failing_seeds.push(seed);
        }
        for class in verdict.classes() {
            one.classes.push(ClassTally {
                class,
                severity: class.severity(),
                rules: class.rules().iter().map(|r| r.to_string()).collect(),
                anomalies: verdict.count(class) as u64,
                seeds: 1,
                first_seeds: vec![seed],
            });
        }
        self.merge(one);
    }

    /// Adds another aggregate of the same scenario (another job's seeds).
    pub fn merge(&mut self, other: Aggregate) {
        self.seeds_run += other.seeds_run;
        self.answered_retries += other.answered_retries;
        self.answered_retry_seeds += other.answered_retry_seeds;
        self.failing_seeds.extend(other.failing_seeds);
        self.failing_seeds.sort_unstable();
        self.failing_seeds.dedup();
        let mut by_class: BTreeMap<Class, ClassTally> = std::mem::take(&mut self.classes)
            .into_iter()
            .map(|t| (t.class, t))
            .collect();
        for tally in other.classes {
            match by_class.get_mut(&tally.class) {
                Some(mine) => {
                    mine.anomalies += tally.anomalies;
                    mine.seeds += tally.seeds;
                    mine.first_seeds.extend(tally.first_seeds);
                    mine.first_seeds.sort_unstable();
                    mine.first_seeds.dedup();
                    mine.first_seeds.truncate(FIRST_SEEDS);
                }
                None => {
                    by_class.insert(tally.class, tally);
                }
            }
        }
        self.classes = by_class.into_values().collect();
    }

    /// Whether any seed broke a rule.
    pub fn fails(&self) -> bool {
        !self.failing_seeds.is_empty()
    }

    /// The table a sweep prints: one line per class, then the verdict.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}: {} seeds", self.scenario, self.seeds_run);
        let _ = writeln!(
            out,
            "  {:<24} {:<9} {:>9} {:>6}  {:<26} rules",
            "class", "severity", "anomalies", "seeds", "first seeds"
        );
        for tally in &self.classes {
            let severity = match tally.severity {
                Severity::Allowed => "allowed",
                Severity::Violation => "VIOLATION",
            };
            let first: Vec<String> = tally.first_seeds.iter().map(u64::to_string).collect();
            let _ = writeln!(
                out,
                "  {:<24} {:<9} {:>9} {:>6}  {:<26} {}",
                tally.class.name(),
                severity,
                tally.anomalies,
                tally.seeds,
                first.join(" "),
                tally.rules.join(", ")
            );
        }
        if self.classes.is_empty() {
            let _ = writeln!(out, "  no anomaly");
        }
        if self.answered_retries > 0 {
            let _ = writeln!(
                out,
                "  not anomalies: {} idempotent retries in {} seeds answered with an earlier attempt's copy (PRODUCER-DUP-1)",
                self.answered_retries, self.answered_retry_seeds
            );
        }
        if self.fails() {
            let shown: Vec<String> = self.failing_seeds.iter().take(10).map(u64::to_string).collect();
            let more = self.failing_seeds.len().saturating_sub(10);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "verdict: FAIL, {} of {} seeds broke a rule: {}{more}",
                self.failing_seeds.len(),
                self.seeds_run,
                shown.join(" ")
            );
        } else {
            let _ = writeln!(out, "verdict: PASS, no seed broke a rule");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{clean, log_of, set_log};
    use super::super::{check, Class};
    use super::*;

    fn lossy() -> Verdict {
        let mut h = clean();
        set_log(&mut h, log_of(&[0, 1, 2, 3, 4]));
        h.consumer_events.clear();
        check(&h)
    }

    #[test]
    fn a_report_lists_each_anomaly_and_the_verdict() {
        let h = clean();
        let text = report(&h, &check(&h));
        assert_eq!(
            text,
            "anomalies in fixture seed 1: 0 (0 violating a rule, 0 allowed)\nverdict: PASS, no rule broken\n"
        );
        let verdict = lossy();
        let text = report(&h, &verdict);
        assert!(text.contains("  [lost-write] t-0: p0-5 of producer (request 2, attempt 1) acknowledged at offsets 5, absent from t-0\n"), "{text}");
        assert!(
            text.ends_with("verdict: FAIL, rules broken: lost-write x1 (DELIVERY-2)\n"),
            "{text}"
        );
        assert_eq!(exit_code(verdict.fails()), 1);
    }

    #[test]
    fn a_sweep_counts_classes_keeps_the_lowest_seeds_and_fails_only_on_violations() {
        let lossy = lossy();
        let mut a = Aggregate::new("s");
        let mut b = Aggregate::new("s");
        for seed in [9, 3, 7] {
            a.add(seed, &lossy);
        }
        for seed in [1, 8, 2, 4, 6] {
            b.add(seed, &Verdict::default());
            b.add(seed + 100, &lossy);
        }
        a.merge(b);
        assert_eq!(a.seeds_run, 13);
        assert_eq!(a.failing_seeds, vec![3, 7, 9, 101, 102, 104, 106, 108]);
        let lost = a
            .classes
            .iter()
            .find(|t| t.class == Class::LostWrite)
            .expect("lost-write");
        assert_eq!((lost.anomalies, lost.seeds), (8, 8));
        assert_eq!(lost.first_seeds, vec![3, 7, 9, 101, 102]);
        assert!(a.fails());
        assert!(a
            .table()
            .contains("verdict: FAIL, 8 of 13 seeds broke a rule: 3 7 9 101 102 104 106 108\n"));
        let json = serde_json::to_string(&a).expect("serialises");
        assert!(json.contains("\"class\":\"lost-write\""), "{json}");
        assert_eq!(serde_json::from_str::<Aggregate>(&json).expect("parses"), a);

        let mut allowed_only = Aggregate::new("s");
        let mut verdict = Verdict::default();
        verdict
            .anomalies
            .push(super::super::Anomaly::new(Class::Duplicate, None, "x".into()));
        allowed_only.add(5, &verdict);
        assert!(!allowed_only.fails(), "an allowed duplicate never fails a sweep");
        assert!(allowed_only.table().ends_with("verdict: PASS, no seed broke a rule\n"));
    }

    #[test]
    fn producer_dup_1_a_sweep_counts_answered_retries_apart_from_anomalies() {
        let retry = super::super::AnsweredRetry {
            request: 3,
            producer: "producer-1".into(),
            acked_attempt: 2,
            written_by_attempt: 1,
            offset: 12,
            why: super::super::Why::GatewayRestart,
        };
        let verdict = Verdict {
            anomalies: Vec::new(),
            answered_retries: vec![retry.clone(), retry],
        };
        let mut a = Aggregate::new("s");
        a.add(1, &verdict);
        let mut b = Aggregate::new("s");
        b.add(2, &verdict);
        b.add(3, &Verdict::default());
        a.merge(b);
        assert_eq!((a.answered_retries, a.answered_retry_seeds), (4, 2));
        assert!(!a.fails(), "an answered retry is no anomaly");
        assert!(
            a.table().contains("  not anomalies: 4 idempotent retries in 2 seeds answered with an earlier attempt's copy (PRODUCER-DUP-1)\n"),
            "{}",
            a.table()
        );
        let text = report(&clean(), &verdict);
        assert!(
            text.contains("(PRODUCER-DUP-1): 2\n  producer-1 request 3 attempt 2 answered with attempt 1's copy at 12 (attempt 1: the gateway restarted with it in flight)\n"),
            "{text}"
        );
    }
}
