//! Runs cases against an endpoint and reports one line per case, then `N passed, N failed`
//! (and skipped, with the reason, never counted as passed).

use crate::cases::{Case, Outcome};
use crate::endpoint::Endpoint;

/// The result of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: usize,
    pub failed: Vec<(&'static str, String)>,
    pub skipped: Vec<(&'static str, String)>,
}

/// Runs every case whose name contains `filter` (all when `None`).
pub async fn run(endpoint: &Endpoint, cases: &[Case], filter: Option<&str>) -> Report {
    let mut report = Report::default();
    for case in cases.iter().filter(|c| filter.is_none_or(|f| c.name.contains(f))) {
        report.record(case.name, case.rules, (case.run)(endpoint.clone()).await);
    }
    report.print_totals("conformance");
    report
}

impl Report {
    /// Prints a case's line and counts it.
    pub fn record(&mut self, name: &'static str, rules: &[&str], outcome: anyhow::Result<Outcome>) {
        let rules = rules.join(", ");
        match outcome {
            Ok(Outcome::Passed) => {
                println!("PASS {name} [{rules}]");
                self.passed += 1;
            }
            Ok(Outcome::Skipped(why)) => {
                println!("SKIP {name} [{rules}]: {why}");
                self.skipped.push((name, why));
            }
            Err(e) => {
                println!("FAIL {name} [{rules}]: {e:#}");
                self.failed.push((name, format!("{e:#}")));
            }
        }
    }

    /// Prints `<what>: N passed, N failed, N skipped`.
    pub fn print_totals(&self, what: &str) {
        println!(
            "{what}: {} passed, {} failed, {} skipped",
            self.passed,
            self.failed.len(),
            self.skipped.len()
        );
    }
}
