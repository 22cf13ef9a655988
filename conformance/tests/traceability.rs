//! The spec trace over the real repository: every live rule is checked by a case or a named
//! test, every ID cited anywhere is defined, and every *Code:* and *Tests:* line points at what
//! exists (docs/spec/README.md, "Traceability").

use kafka_iggy_conformance::traceability::{cases, check, repo};

#[test]
fn every_rule_is_traced_and_every_citation_is_defined() {
    let root = repo::repo_root();
    let spec = repo::load_spec(&root).expect("the spec reads");
    let sources = repo::load_sources(&root).expect("the sources read");
    let findings = check::check(&spec, &sources, &cases::listed_cases());
    let report: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
    assert!(
        findings.is_empty(),
        "{} traceability finding(s):\n{}",
        findings.len(),
        report.join("\n")
    );
}

#[test]
fn the_case_list_covers_every_case_file() {
    let (missing, extra) = cases::unlisted_areas();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "cases::all() holds {missing:?} that traceability::cases does not list, and it lists {extra:?} that \
         cases::all() does not hold: add the new case file to gathered_areas() in conformance/src/traceability/cases.rs"
    );
}
