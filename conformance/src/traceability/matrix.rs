//! The conformance matrix (docs/conformance.md): per spec file and rule, the cases that check
//! it, the tests its *Tests:* line names, and how its cases fared on the embedded model and on
//! real Iggy. Pure: rendered from the parsed spec, the case list and three optional result sets
//! (the real-Iggy column reads the cluster cases from the cluster tier's set, the only run that
//! has them); a set that is missing reads "not run", and only a case that passed reads "passed".

use super::cases::ListedCase;
use super::spec::{Rule, Spec, TestRef};
use crate::results::{RunResults, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The command that rewrites docs/conformance.md from the current inputs.
pub const REGENERATE: &str = "UPDATE_CONFORMANCE_MD=1 cargo test -p kafka-iggy-conformance --test traceability";

/// One result set and where it was read from, for the matrix's header.
pub struct ResultSet<'a> {
    /// What the column is called: `embedded model`, `real Iggy`.
    pub label: &'a str,
    /// The file it is committed as, from the repository root.
    pub path: &'a str,
    /// `None` when the file is absent: every case reads "not run".
    pub results: Option<&'a RunResults>,
}

/// The area of the cases only the cluster tier runs, whose statuses the real-Iggy column reads
/// from the cluster tier's set.
pub const CLUSTER_AREA: &str = "cluster";

/// docs/conformance.md for `spec`, `cases` and the result sets: the embedded model's, real
/// Iggy's, and the cluster tier's (for the cases of [`CLUSTER_AREA`], shown in the real-Iggy
/// column).
pub fn render(
    spec: &Spec,
    cases: &[ListedCase],
    embedded: &ResultSet<'_>,
    iggy: &ResultSet<'_>,
    cluster: &ResultSet<'_>,
) -> String {
    let mut out = String::new();
    out.push_str("# Conformance matrix\n\n");
    let _ = writeln!(
        out,
        "Generated from docs/spec, the conformance cases (`conformance/src/cases/`) and the result sets \
         below; do not edit by hand. Regenerate with `{REGENERATE}`. The {} column shows the {CLUSTER_AREA} \
         cases as the {} set has them.\n",
        iggy.label, cluster.label
    );
    render_sets(&mut out, &[embedded, iggy, cluster]);
    render_summary(&mut out, spec, cases);
    let mut files: Vec<&str> = Vec::new();
    for rule in &spec.rules {
        if !files.contains(&rule.file.as_str()) {
            files.push(&rule.file);
        }
    }
    for file in files {
        let _ = writeln!(out, "\n## [{}]({})\n", file_name(file), link_path(file));
        let _ = writeln!(
            out,
            "| Rule | Cases | Named tests | {} | {} |",
            embedded.label, iggy.label
        );
        out.push_str("|---|---|---|---|---|\n");
        for rule in spec.rules.iter().filter(|r| r.file == file) {
            render_rule(&mut out, rule, cases, embedded, iggy, cluster);
        }
    }
    out
}

fn render_sets(out: &mut String, sets: &[&ResultSet<'_>]) {
    out.push_str("| Result set | File | Target | Profile | Passed | Failed | Skipped |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for set in sets {
        match set.results {
            Some(r) => {
                let _ = writeln!(
                    out,
                    "| {} | `{}` | {} | {} | {} | {} | {} |",
                    set.label,
                    set.path,
                    cell(&r.target),
                    cell(&r.profile),
                    r.count(Status::Passed),
                    r.count(Status::Failed),
                    r.count(Status::Skipped)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "| {} | `{}` (absent) | not run | — | — | — | — |",
                    set.label, set.path
                );
            }
        }
    }
}

fn render_summary(out: &mut String, spec: &Spec, cases: &[ListedCase]) {
    let live: Vec<&Rule> = spec.rules.iter().filter(|r| !r.retired).collect();
    let with_case = live.iter().filter(|r| !cases_of(r, cases).is_empty()).count();
    let tests_only = live
        .iter()
        .filter(|r| cases_of(r, cases).is_empty() && !r.tests.is_empty())
        .count();
    let _ = writeln!(
        out,
        "\n{} live rules: {with_case} checked by conformance cases, {tests_only} by named tests only; {} retired; \
         {} cases.",
        live.len(),
        spec.rules.len() - live.len(),
        cases.len()
    );
}

fn render_rule(
    out: &mut String,
    rule: &Rule,
    cases: &[ListedCase],
    embedded: &ResultSet<'_>,
    iggy: &ResultSet<'_>,
    cluster: &ResultSet<'_>,
) {
    let anchor = format!(
        "[{}]({}#{})",
        rule.id,
        link_path(&rule.file),
        rule.id.to_ascii_lowercase()
    );
    if rule.retired {
        let successors: Vec<String> = rule.successors.iter().map(|s| s.to_string()).collect();
        let _ = writeln!(
            out,
            "| {anchor} | retired, replaced by {} | — | — | — |",
            successors.join(", ")
        );
        return;
    }
    let own = cases_of(rule, cases);
    let case_cell = if own.is_empty() {
        "—".to_string()
    } else {
        own.iter()
            .map(|c| format!("`{}` ({})", c.name, c.area))
            .collect::<Vec<_>>()
            .join("<br>")
    };
    let status_cells = [
        status_cell(&own, |_| embedded.results),
        status_cell(&own, |case| {
            if case.area == CLUSTER_AREA {
                cluster.results
            } else {
                iggy.results
            }
        }),
    ];
    let _ = writeln!(
        out,
        "| {anchor} | {case_cell} | {} | {} |",
        tests_cell(&rule.tests, &rule.pending, &own),
        status_cells.join(" | ")
    );
}

/// The cases that list `rule`, in suite order.
fn cases_of<'c>(rule: &Rule, cases: &'c [ListedCase]) -> Vec<&'c ListedCase> {
    cases.iter().filter(|c| c.rules.contains(&rule.id)).collect()
}

/// The named tests other than the rule's own cases (listed beside them already), grouped by the
/// files the *Tests:* line gives, then what is pending.
fn tests_cell(tests: &[TestRef], pending: &[String], own: &[&ListedCase]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for test in tests.iter().filter(|t| !own.iter().any(|c| c.name == t.name)) {
        let files = test.files.join(", ");
        match groups.last_mut() {
            Some((last, names)) if *last == files => names.push(&test.name),
            _ => groups.push((files, vec![&test.name])),
        }
    }
    let mut parts: Vec<String> = groups
        .into_iter()
        .map(|(files, names)| {
            let names = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            if files.is_empty() {
                names
            } else {
                format!("{names} ({files})")
            }
        })
        .collect();
    parts.extend(pending.iter().map(|p| format!("pending: {}", cell(p))));
    if parts.is_empty() {
        "—".to_string()
    } else {
        parts.join("<br>")
    }
}

/// How a rule's cases fared in one column: each case in the result set `set_of` gives it.
fn status_cell<'r>(own: &[&ListedCase], set_of: impl Fn(&ListedCase) -> Option<&'r RunResults>) -> String {
    if own.is_empty() {
        return "no case".to_string();
    }
    if own.iter().all(|case| set_of(case).is_none()) {
        return "not run".to_string();
    }
    let mut by_status: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for case in own {
        let status = set_of(case)
            .and_then(|results| results.cases.iter().find(|r| r.name == case.name))
            .map_or("not in the run", |r| r.status.as_str());
        by_status.entry(status).or_default().push(&case.name);
    }
    if by_status.len() == 1 && by_status.contains_key(Status::Passed.as_str()) {
        return format!("passed ({}/{})", own.len(), own.len());
    }
    // Everything that is not a pass is named, so a partial pass never reads as one.
    let mut parts = Vec::new();
    for status in [Status::Failed.as_str(), Status::Skipped.as_str(), "not in the run"] {
        if let Some(names) = by_status.get(status) {
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            parts.push(format!("**{status}**: {}", names.join(", ")));
        }
    }
    if let Some(passed) = by_status.get(Status::Passed.as_str()) {
        parts.push(format!("passed {} of {}", passed.len(), own.len()));
    }
    parts.join("<br>")
}

/// The areas a suite run does not cover: the model-only and the pre-authentication cases run
/// on models built for them (`model_only_suite`, `preauth_suite`), the cluster cases on three
/// real Iggy nodes of their own (`cluster-tier`), the hostile cases that start their own
/// gateways in `hostile_gateways_suite` and the hostile bench.
const NOT_IN_SUITE_RUNS: &[&str] = &["model_only", "preauth", "cluster", "hostile_gateways"];
/// The areas a run may hold beyond the suite: the real-Iggy tier's own checks.
const BEYOND_THE_SUITE: &[&str] = &["real_iggy"];

/// What makes a committed result set stale against the current case list: cases it lacks,
/// cases it holds that the suite no longer does, and cases whose rules changed since.
pub fn staleness(cases: &[ListedCase], results: &RunResults) -> Vec<String> {
    let mut problems = Vec::new();
    for case in cases.iter().filter(|c| !NOT_IN_SUITE_RUNS.contains(&c.area.as_str())) {
        match results.cases.iter().find(|r| r.name == case.name) {
            None => problems.push(format!("case `{}` is not in the set", case.name)),
            Some(r) if r.rules != case.rules => problems.push(format!(
                "case `{}` checks {:?} in the set but {:?} now",
                case.name, r.rules, case.rules
            )),
            Some(_) => {}
        }
    }
    for result in results
        .cases
        .iter()
        .filter(|r| !BEYOND_THE_SUITE.contains(&r.area.as_str()))
    {
        if !cases.iter().any(|c| c.name == result.name) {
            problems.push(format!(
                "the set holds `{}`, which is no case of the suite",
                result.name
            ));
        }
    }
    problems
}

/// What makes the cluster tier's committed set stale: cluster cases it lacks, and cases it holds
/// that the suite no longer has or whose rules changed since (it holds part of the suite too).
pub fn cluster_staleness(cases: &[ListedCase], results: &RunResults) -> Vec<String> {
    let mut problems = Vec::new();
    for case in cases.iter().filter(|c| c.area == CLUSTER_AREA) {
        if !results.cases.iter().any(|r| r.name == case.name) {
            problems.push(format!("case `{}` is not in the set", case.name));
        }
    }
    for result in &results.cases {
        match cases.iter().find(|c| c.name == result.name) {
            None => problems.push(format!(
                "the set holds `{}`, which is no case of the suite",
                result.name
            )),
            Some(case) if case.rules != result.rules => problems.push(format!(
                "case `{}` checks {:?} in the set but {:?} now",
                case.name, result.rules, case.rules
            )),
            Some(_) => {}
        }
    }
    problems
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A spec file's path as a link from docs/conformance.md.
fn link_path(path: &str) -> &str {
    path.strip_prefix("docs/").unwrap_or(path)
}

/// Text made safe for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::CaseResult;
    use crate::traceability::spec::SpecText;

    const SPEC: &str = "# Mapping\n\n\
### MAP-TS-1\n**MUST** map.\n*Tests:* `map_ts_1_unit`, `map_ts_1_more` (gateway/core/src/mapping.rs); pending: simulation\n\n\
### MAP-TS-2\n**MUST** also map.\n*Tests:* `a_case` (conformance/src/cases/wire_cases.rs)\n\n\
### MAP-TS-3\n**MUST** map both.\n*Tests:* `a_case`, `b_case` (conformance/src/cases/wire_cases.rs)\n\n\
### MAP-OLD-1\n**Retired**, replaced by MAP-TS-1: gone.\n";

    fn spec() -> Spec {
        Spec::parse(&[SpecText {
            path: "docs/spec/mapping.md",
            text: SPEC,
        }])
    }

    fn cases() -> Vec<ListedCase> {
        vec![
            ListedCase::new("a_case", "wire", &["MAP-TS-2", "MAP-TS-3"]),
            ListedCase::new("b_case", "wire", &["MAP-TS-3"]),
        ]
    }

    fn result(name: &str, rules: &[&str], status: Status) -> CaseResult {
        CaseResult {
            name: name.into(),
            area: "wire".into(),
            rules: rules.iter().map(|r| r.to_string()).collect(),
            deviations: vec![],
            authority: None,
            status,
            duration_ms: 1,
            reason: (status != Status::Passed).then(|| "why".into()),
        }
    }

    fn run(b_status: Status) -> RunResults {
        RunResults {
            target: "embedded".into(),
            endpoint: "127.0.0.1:9092".into(),
            profile: "spec".into(),
            cases: vec![
                result("a_case", &["MAP-TS-2", "MAP-TS-3"], Status::Passed),
                result("b_case", &["MAP-TS-3"], b_status),
            ],
        }
    }

    fn rendered(embedded: Option<&RunResults>, iggy: Option<&RunResults>) -> String {
        rendered_with_cluster(embedded, iggy, None)
    }

    fn rendered_with_cluster(
        embedded: Option<&RunResults>,
        iggy: Option<&RunResults>,
        cluster: Option<&RunResults>,
    ) -> String {
        render(
            &spec(),
            &cases(),
            &ResultSet {
                label: "embedded model",
                path: "docs/conformance/embedded.json",
                results: embedded,
            },
            &ResultSet {
                label: "real Iggy",
                path: "docs/conformance/real-iggy.json",
                results: iggy,
            },
            &ResultSet {
                label: "real Iggy cluster",
                path: "docs/conformance/cluster.json",
                results: cluster,
            },
        )
    }

    fn row<'a>(text: &'a str, id: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(&format!("| [{id}]")))
            .unwrap_or_else(|| panic!("no row for {id}"))
    }

    #[test]
    fn missing_sets_read_not_run_and_never_passed() {
        let text = rendered(None, None);
        assert!(!text.contains("passed ("), "{text}");
        assert_eq!(
            row(&text, "MAP-TS-2"),
            "| [MAP-TS-2](spec/mapping.md#map-ts-2) | `a_case` (wire) | — | not run | not run |"
        );
        assert!(text.contains("| embedded model | `docs/conformance/embedded.json` (absent) | not run |"));
    }

    #[test]
    fn a_rule_with_only_named_tests_shows_them_and_no_status() {
        let text = rendered(Some(&run(Status::Passed)), None);
        assert_eq!(
            row(&text, "MAP-TS-1"),
            "| [MAP-TS-1](spec/mapping.md#map-ts-1) | — | `map_ts_1_unit`, `map_ts_1_more` (gateway/core/src/mapping.rs)\
             <br>pending: simulation | no case | no case |"
        );
    }

    #[test]
    fn statuses_per_set_name_every_case_that_did_not_pass() {
        let passing = run(Status::Passed);
        let failing = run(Status::Failed);
        let text = rendered(Some(&passing), Some(&failing));
        assert!(row(&text, "MAP-TS-3").ends_with(" | passed (2/2) | **failed**: `b_case`<br>passed 1 of 2 |"));
        assert!(row(&text, "MAP-TS-2").ends_with(" | passed (1/1) | passed (1/1) |"));
        let skipped = run(Status::Skipped);
        let text = rendered(Some(&skipped), None);
        assert!(row(&text, "MAP-TS-3").ends_with(" | **skipped**: `b_case`<br>passed 1 of 2 | not run |"));
        assert!(text.contains("| embedded model | `docs/conformance/embedded.json` | embedded | spec | 1 | 0 | 1 |"));
    }

    #[test]
    fn a_case_missing_from_a_set_is_named() {
        let mut partial = run(Status::Passed);
        partial.cases.pop();
        let text = rendered(Some(&partial), None);
        assert!(row(&text, "MAP-TS-3").contains("**not in the run**: `b_case`<br>passed 1 of 2"));
    }

    #[test]
    fn retired_rules_and_the_summary() {
        let text = rendered(None, None);
        assert_eq!(
            row(&text, "MAP-OLD-1"),
            "| [MAP-OLD-1](spec/mapping.md#map-old-1) | retired, replaced by MAP-TS-1 | — | — | — |"
        );
        assert!(
            text.contains("3 live rules: 2 checked by conformance cases, 1 by named tests only; 1 retired; 2 cases.")
        );
        assert!(text.contains("## [mapping.md](spec/mapping.md)"));
    }

    #[test]
    fn staleness_names_missing_extra_and_changed_cases() {
        assert!(staleness(&cases(), &run(Status::Passed)).is_empty());
        let mut stale = run(Status::Passed);
        stale.cases.remove(1);
        stale.cases[0].rules = vec!["MAP-TS-2".into()];
        stale.cases.push(result("gone_case", &["MAP-TS-1"], Status::Passed));
        assert_eq!(
            staleness(&cases(), &stale),
            [
                "case `a_case` checks [\"MAP-TS-2\"] in the set but [\"MAP-TS-2\", \"MAP-TS-3\"] now",
                "case `b_case` is not in the set",
                "the set holds `gone_case`, which is no case of the suite",
            ]
        );
    }

    #[test]
    fn the_real_iggy_column_reads_the_cluster_cases_from_the_cluster_set() {
        let spec = Spec::parse(&[SpecText {
            path: "docs/spec/cluster.md",
            text: "# Cluster\n\n### CLUSTER-X-1\n**MUST** fail over.\n*Tests:* `kill_case` (conformance/src/cases/cluster_cases.rs)\n",
        }]);
        let cases = vec![ListedCase::new("kill_case", "cluster", &["CLUSTER-X-1"])];
        let cluster = RunResults {
            target: "iggy-cluster".into(),
            endpoint: "three nodes".into(),
            profile: "gateway".into(),
            cases: vec![CaseResult {
                area: "cluster".into(),
                ..result("kill_case", &["CLUSTER-X-1"], Status::Passed)
            }],
        };
        fn set<'a>(label: &'a str, path: &'a str, results: Option<&'a RunResults>) -> ResultSet<'a> {
            ResultSet { label, path, results }
        }
        let render_with = |iggy: Option<&RunResults>, cluster: Option<&RunResults>| -> String {
            render(
                &spec,
                &cases,
                &set("embedded model", "e.json", None),
                &set("real Iggy", "i.json", iggy),
                &set("real Iggy cluster", "c.json", cluster),
            )
        };
        let text = render_with(Some(&run(Status::Passed)), Some(&cluster));
        assert!(
            row(&text, "CLUSTER-X-1").ends_with(" | not run | passed (1/1) |"),
            "{text}"
        );
        assert!(text.contains("| real Iggy cluster | `c.json` | iggy-cluster | gateway | 1 | 0 | 0 |"));
        let text = render_with(Some(&run(Status::Passed)), None);
        assert!(row(&text, "CLUSTER-X-1").ends_with(" | not run | not run |"), "{text}");
        assert!(cluster_staleness(&cases, &cluster).is_empty());
        assert_eq!(
            cluster_staleness(&cases, &run(Status::Passed)),
            [
                "case `kill_case` is not in the set",
                "the set holds `a_case`, which is no case of the suite",
                "the set holds `b_case`, which is no case of the suite",
            ]
        );
    }
}
