//! Every conformance case with its area and the rule IDs it checks: the suite's list (whichever
//! way a case file declares its cases) and the model-only cases.

use crate::cases::{cluster_cases, hostile_cases, model_only_cases, preauth_cases};
use crate::runner::Filter;
use crate::suite;

/// One case as the trace and the matrix see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCase {
    /// Its function's name, unique in the suite.
    pub name: String,
    /// Its case file without `_cases` (`wire`, `group`, `auth`, …).
    pub area: String,
    /// Its file, from the repository root.
    pub file: String,
    /// The IDs its declaration lists, as written.
    pub rules: Vec<String>,
}

impl ListedCase {
    pub fn new(name: &str, area: &str, rules: &[&str]) -> ListedCase {
        // A case named by a path (`support::x`) is known by its function's name.
        let name = name.rsplit("::").next().unwrap_or(name);
        ListedCase {
            name: name.to_string(),
            area: area.to_string(),
            file: format!("conformance/src/cases/{area}_cases.rs"),
            rules: rules.iter().map(|r| r.to_string()).collect(),
        }
    }
}

/// Every case of the suite, in suite order (`suite::list`: `cases::all()`'s, then the gateway
/// cases, then the authorization cases), then the model-only cases, which `model_only_suite`
/// runs on models built for them, then the pre-authentication cases, which `preauth_suite` runs
/// on models built for them, then the cluster tier's fault cases, which `cluster-tier` runs on
/// three real Iggy nodes, then the hostile cases that start their own gateways.
pub fn listed_cases() -> Vec<ListedCase> {
    let mut listed: Vec<ListedCase> = suite::list(&Filter::all())
        .iter()
        .map(|l| ListedCase::new(l.info.name, l.info.area, l.info.rules))
        .collect();
    listed.extend(
        model_only_cases::CASES
            .iter()
            .map(|c| ListedCase::new(c.name, "model_only", c.rules)),
    );
    listed.extend(
        preauth_cases::CASES
            .iter()
            .map(|c| ListedCase::new(c.name, preauth_cases::AREA, c.rules)),
    );
    listed.extend(
        cluster_cases::CASES
            .iter()
            .map(|c| ListedCase::new(c.name, cluster_cases::AREA, c.rules)),
    );
    // The hostile cases that start their own gateways, which `hostile_gateways_suite` runs.
    listed.extend(hostile_cases::OWN_GATEWAY_CASES.iter().map(|c| ListedCase {
        file: "conformance/src/cases/hostile_cases.rs".into(),
        ..ListedCase::new(c.name, hostile_cases::OWN_GATEWAY_AREA, c.rules)
    }));
    listed
}
