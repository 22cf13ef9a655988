//! Every conformance case with its area and the rule IDs it checks, whichever way its file
//! declares it: the `Case` lists `cases::all()` gathers, and the cases that start their own
//! gateways (`auth_cases`, `gateway_cases`), which list their rules in their own macros.

use crate::cases::{self, auth_cases, gateway_cases, group_cases, hostile_cases, rdkafka_cases, wire_cases, Case};

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

/// The areas whose cases `cases::all()` gathers, each with its own list.
fn gathered_areas() -> [(&'static str, Vec<Case>); 4] {
    [
        ("wire", wire_cases::cases()),
        ("rdkafka", rdkafka_cases::cases()),
        ("group", group_cases::cases()),
        ("hostile", hostile_cases::cases()),
    ]
}

/// Every case of the suite, in suite order: `cases::all()`'s, then the gateway cases, then the
/// authorization cases.
pub fn listed_cases() -> Vec<ListedCase> {
    let mut listed = Vec::new();
    for (area, cases) in gathered_areas() {
        listed.extend(cases.iter().map(|c| ListedCase::new(c.name, area, c.rules)));
    }
    listed.extend(
        gateway_cases::RULES
            .iter()
            .map(|(name, rules)| ListedCase::new(name, "gateway", rules)),
    );
    listed.extend(
        auth_cases::RULES
            .iter()
            .map(|(name, rules)| ListedCase::new(name, "auth", rules)),
    );
    listed
}

/// The names `cases::all()` holds that no area here lists, and those listed here that it does
/// not hold: both empty unless a case file was added to one and not the other.
pub fn unlisted_areas() -> (Vec<String>, Vec<String>) {
    let all: Vec<String> = cases::all()
        .iter()
        .map(|c| ListedCase::new(c.name, "", c.rules).name)
        .collect();
    let gathered: Vec<String> = gathered_areas()
        .iter()
        .flat_map(|(area, cases)| cases.iter().map(|c| ListedCase::new(c.name, area, c.rules).name))
        .collect();
    let missing = all.iter().filter(|n| !gathered.contains(n)).cloned().collect();
    let extra = gathered.iter().filter(|n| !all.contains(n)).cloned().collect();
    (missing, extra)
}
