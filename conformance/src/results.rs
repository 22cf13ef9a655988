//! What a run found, case by case, in the shape the JSON report writes and the conformance
//! matrix (docs/conformance.md) reads back.

use serde::{Deserialize, Serialize};

/// How one case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    /// Not run, and why: never counted as passed.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// One case's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case's name, unique in the suite.
    pub name: String,
    /// The area it belongs to: its case file without `_cases` (`wire`, `groups`, …).
    pub area: String,
    /// The spec rule IDs it checks.
    pub rules: Vec<String>,
    /// The spec rules whose behaviour departs from Kafka's and that this case's expectation
    /// depends on (docs/spec, "Deviations from Kafka"); under the `kafka` profile the case
    /// expects Kafka's answer instead.
    #[serde(default)]
    pub deviations: Vec<String>,
    /// On whose authority the case expects what it does under the kafka profile: a KIP, a
    /// protocol-guide section or Kafka's code by class and method (`crate::authority`); `None`
    /// for a case that never runs against an outside endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    pub status: Status,
    pub duration_ms: u64,
    /// Why it failed or was skipped; `None` when it passed.
    pub reason: Option<String>,
}

/// A whole run: where it ran, under which profile, and every case's result in run order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// `embedded` (an in-process gateway on the embedded backend), `iggy` (an in-process
    /// gateway on a real Iggy server) or `bootstrap` (an outside endpoint).
    pub target: String,
    /// The address the cases ran against.
    pub endpoint: String,
    pub profile: String,
    pub cases: Vec<CaseResult>,
}

impl RunResults {
    /// How many cases ended with `status`.
    pub fn count(&self, status: Status) -> usize {
        self.cases.iter().filter(|c| c.status == status).count()
    }

    /// `<what>: N passed, N failed, N skipped`, the closing line of every run.
    pub fn totals_line(&self, what: &str) -> String {
        format!(
            "{what}: {} passed, {} failed, {} skipped",
            self.count(Status::Passed),
            self.count(Status::Failed),
            self.count(Status::Skipped)
        )
    }
}
