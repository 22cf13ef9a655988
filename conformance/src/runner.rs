//! Runs cases and keeps what each found: a progress line per case as it ends (status, area,
//! name, rules, duration, and the reason when it did not pass), then
//! `<what>: N passed, N failed, N skipped`. A skip is never counted as a pass.

use crate::authority;
use crate::cases::{Case, Outcome};
use crate::endpoint::Endpoint;
use crate::results::{CaseResult, RunResults, Status};
use std::future::Future;
use std::time::Instant;

/// What a run found so far, case by case, in run order.
#[derive(Debug, Default)]
pub struct Report {
    pub results: Vec<CaseResult>,
}

/// What a case is, apart from its body: enough to list it, report it, or skip it unrun.
#[derive(Debug, Clone, Copy)]
pub struct CaseInfo<'a> {
    pub area: &'a str,
    pub name: &'a str,
    pub rules: &'a [&'a str],
    pub deviations: &'a [&'a str],
}

impl CaseInfo<'_> {
    /// The case's result as the reports write it, with the authority its kafka-profile
    /// expectation rests on (`crate::authority`).
    pub fn result(&self, status: Status, duration_ms: u64, reason: Option<String>) -> CaseResult {
        CaseResult {
            name: self.name.to_owned(),
            area: self.area.to_owned(),
            rules: self.rules.iter().map(|r| (*r).to_owned()).collect(),
            deviations: self.deviations.iter().map(|r| (*r).to_owned()).collect(),
            authority: authority::of(self.name).map(str::to_owned),
            status,
            duration_ms,
            reason,
        }
    }
}

/// Which cases a run takes: those whose name contains any of the texts, or all when none is
/// given.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub any_of: Vec<String>,
}

impl Filter {
    /// Every case.
    pub fn all() -> Self {
        Filter::default()
    }

    /// The cases whose name contains `text`.
    pub fn containing(text: &str) -> Self {
        Filter {
            any_of: vec![text.to_owned()],
        }
    }

    pub fn selects(&self, name: &str) -> bool {
        self.any_of.is_empty() || self.any_of.iter().any(|text| name.contains(text.as_str()))
    }
}

/// Runs every case `filter` selects against `endpoint`.
pub async fn run(endpoint: &Endpoint, cases: &[Case], filter: &Filter) -> Report {
    let mut report = Report::default();
    for case in cases.iter().filter(|c| filter.selects(c.name)) {
        report.run_case(case.info(), (case.run)(endpoint.clone())).await;
    }
    report
}

impl Report {
    /// Runs one case, times it, prints its line and keeps its result.
    pub async fn run_case(&mut self, info: CaseInfo<'_>, body: impl Future<Output = anyhow::Result<Outcome>>) {
        let started = Instant::now();
        let outcome = body.await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, reason) = match outcome {
            Ok(Outcome::Passed) => (Status::Passed, None),
            Ok(Outcome::Skipped(why)) => (Status::Skipped, Some(why)),
            Err(e) => (Status::Failed, Some(format!("{e:#}"))),
        };
        self.keep(info, status, duration_ms, reason);
    }

    /// Records a case that was not run, and why.
    pub fn skip(&mut self, info: CaseInfo<'_>, why: &str) {
        self.keep(info, Status::Skipped, 0, Some(why.to_owned()));
    }

    fn keep(&mut self, info: CaseInfo<'_>, status: Status, duration_ms: u64, reason: Option<String>) {
        let label = match status {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Skipped => "SKIP",
        };
        let rules = info.rules.join(", ");
        let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        println!("{label} {duration_ms:>6} ms {}/{} [{rules}]{why}", info.area, info.name);
        self.results.push(info.result(status, duration_ms, reason));
    }

    /// Takes in what another report found.
    pub fn extend(&mut self, other: Report) {
        self.results.extend(other.results);
    }

    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }

    /// The cases that failed, with why.
    pub fn failures(&self) -> impl Iterator<Item = &CaseResult> {
        self.results.iter().filter(|r| r.status == Status::Failed)
    }

    /// Prints `<what>: N passed, N failed, N skipped`.
    pub fn print_totals(&self, what: &str) {
        println!(
            "{what}: {} passed, {} failed, {} skipped",
            self.count(Status::Passed),
            self.count(Status::Failed),
            self.count(Status::Skipped)
        );
    }

    /// The run as the reports write it.
    pub fn into_results(self, target: &str, endpoint: &str, profile: &str) -> RunResults {
        RunResults {
            target: target.to_owned(),
            endpoint: endpoint.to_owned(),
            profile: profile.to_owned(),
            cases: self.results,
        }
    }
}
