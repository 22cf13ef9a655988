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
        let rules = case.rules.join(", ");
        match (case.run)(endpoint.clone()).await {
            Ok(Outcome::Passed) => {
                println!("PASS {} [{rules}]", case.name);
                report.passed += 1;
            }
            Ok(Outcome::Skipped(why)) => {
                println!("SKIP {} [{rules}]: {why}", case.name);
                report.skipped.push((case.name, why));
            }
            Err(e) => {
                println!("FAIL {} [{rules}]: {e:#}", case.name);
                report.failed.push((case.name, format!("{e:#}")));
            }
        }
    }
    println!(
        "conformance: {} passed, {} failed, {} skipped",
        report.passed,
        report.failed.len(),
        report.skipped.len()
    );
    report
}
