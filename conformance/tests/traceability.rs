//! The spec trace over the real repository: every live rule is checked by a case or a named
//! test, every ID cited anywhere is defined, and every *Code:* and *Tests:* line points at what
//! exists (docs/spec/README.md, "Traceability"); and docs/conformance.md is what the spec, the
//! case list and the committed result sets render.

use kafka_iggy_conformance::traceability::cases::{self, ListedCase};
use kafka_iggy_conformance::traceability::check;
use kafka_iggy_conformance::traceability::matrix;
use kafka_iggy_conformance::traceability::repo;
use kafka_iggy_conformance::traceability::sources::SourceFile;

#[test]
fn every_rule_is_traced_and_every_citation_is_defined() {
    let root = repo::repo_root();
    let spec = repo::load_spec(&root).expect("the spec reads");
    let sources = repo::load_sources(&root).expect("the sources read");
    assert!(
        spec.rules.len() > 100 && sources.len() > 100,
        "the spec and the sources were found"
    );
    let findings = check::check(&spec, &sources, &cases::listed_cases());
    let report: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
    assert!(
        findings.is_empty(),
        "{} traceability finding(s):\n{}",
        findings.len(),
        report.join("\n")
    );
}

/// The same check over the real spec and sources, with one broken citation planted in each
/// place one can hide: a case's rule list, a code comment, a test's name, a *Code:* file and a
/// *Tests:* name.
#[test]
fn planted_broken_citations_are_reported() {
    let root = repo::repo_root();
    let spec = repo::load_spec(&root).expect("the spec reads");
    let mut sources = repo::load_sources(&root).expect("the sources read");
    let mut cases = cases::listed_cases();
    // What the repository itself is found to break (nothing, when the test above passes) is
    // left out, so this test reports only on the planted breaks.
    let baseline = check::check(&spec, &sources, &cases);

    cases.push(ListedCase::new("planted_case", "wire", &["MAP-TS-999"]));
    sources.push(SourceFile::new(
        "gateway/src/planted.rs",
        "// PROTO-PLANTED-1: no such rule\n#[test]\nfn map_ts_99_planted_test() {}\n",
    ));
    // LIMIT-FRAME-1's *Code:* line names gateway/src/protocol/frame.rs: strip the tag there.
    let frame = sources
        .iter_mut()
        .find(|s| s.path == "gateway/src/protocol/frame.rs")
        .expect("frame.rs");
    frame.text = frame.text.replace("LIMIT-FRAME-1", "the frame limit");
    // LIMIT-FRAME-1's and PROTO-FRAME-1's *Tests:* lines name this case function: rename it away.
    let wire = sources
        .iter_mut()
        .find(|s| s.path == "conformance/src/cases/wire_cases/framing.rs")
        .expect("wire_cases/framing.rs");
    wire.text = wire
        .text
        .replace("fn frame_of_exactly_max_frame_size_is_read", "fn renamed_frame_case");

    let mut findings = check::check(&spec, &sources, &cases);
    findings.retain(|f| !baseline.contains(f));
    let found: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
    let expect = [
        (
            "MAP-TS-999",
            "conformance/src/cases/wire_cases.rs",
            "case `planted_case` lists MAP-TS-999",
        ),
        (
            "PROTO-PLANTED-1",
            "gateway/src/planted.rs:1",
            "which no `### PROTO-PLANTED-1` in docs/spec defines",
        ),
        (
            "MAP-TS-99",
            "gateway/src/planted.rs:3",
            "`map_ts_99_planted_test` is named after MAP-TS-99",
        ),
        (
            "LIMIT-FRAME-1",
            "docs/spec/limits.md",
            "gateway/src/protocol/frame.rs, which does not cite LIMIT-FRAME-1",
        ),
        (
            "LIMIT-FRAME-1",
            "docs/spec/limits.md",
            "`frame_of_exactly_max_frame_size_is_read`, which is no `fn`",
        ),
        (
            "PROTO-FRAME-1",
            "docs/spec/protocol.md",
            "`frame_of_exactly_max_frame_size_is_read`, which is no `fn`",
        ),
    ];
    for (id, place, problem) in expect {
        assert!(
            findings
                .iter()
                .any(|f| f.id == id && f.place.starts_with(place) && f.problem.contains(problem)),
            "no finding {id} at {place} saying {problem:?} among:\n{}",
            found.join("\n")
        );
    }
    assert_eq!(
        findings.len(),
        expect.len(),
        "only the planted breaks are found:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_case_list_covers_every_case_file() {
    let listed = cases::listed_cases();
    let dir = repo::repo_root().join("conformance/src/cases");
    for entry in std::fs::read_dir(&dir).expect("the cases directory reads") {
        let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
        if let Some(area) = name.strip_suffix("_cases.rs") {
            assert!(
                listed.iter().any(|c| c.area == area),
                "no case of conformance/src/cases/{name} is traced: add it to cases::all() (or, for cases \
                 that need a backend, to suite::list), or to listed_cases() in conformance/src/traceability/cases.rs"
            );
        }
    }
}

/// docs/conformance.md is what the current spec, case list and committed result sets render,
/// and the result sets are of the current case list. `UPDATE_CONFORMANCE_MD=1` rewrites the
/// matrix instead of comparing it.
#[test]
fn the_conformance_matrix_is_current() {
    let root = repo::repo_root();
    let inputs = repo::load_matrix_inputs(&root).expect("the matrix inputs read");
    for (path, set) in [
        (repo::EMBEDDED_RESULTS_PATH, &inputs.embedded),
        (repo::IGGY_RESULTS_PATH, &inputs.iggy),
    ] {
        if let Some(set) = set {
            let problems = matrix::staleness(&inputs.cases, set);
            assert!(
                problems.is_empty(),
                "{path} is stale against the suite's cases:\n  {}\nrerun the suite to write it again (`make conformance-matrix`), then regenerate \
                 the matrix with `{}`",
                problems.join("\n  "),
                matrix::REGENERATE
            );
        }
    }
    if let Some(set) = &inputs.cluster {
        let problems = matrix::cluster_staleness(&inputs.cases, set);
        assert!(
            problems.is_empty(),
            "{} is stale against the suite's cases:\n  {}\nrerun the cluster tier to write it again (`make cluster-tier`, \
             copying its results.json there), then regenerate the matrix with `{}`",
            repo::CLUSTER_RESULTS_PATH,
            problems.join("\n  "),
            matrix::REGENERATE
        );
    }
    let rendered = inputs.render();
    let path = root.join(repo::MATRIX_PATH);
    if std::env::var_os("UPDATE_CONFORMANCE_MD").is_some_and(|v| v == "1") {
        std::fs::write(&path, &rendered).expect("docs/conformance.md is written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != rendered {
        let first_difference = committed
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(rendered.lines().count()));
        panic!(
            "{} is not what the spec, the cases and the committed result sets render (first difference at line {}); \
             regenerate it with `{}` and commit it",
            repo::MATRIX_PATH,
            first_difference + 1,
            matrix::REGENERATE
        );
    }
}
