//! The traceability check: from the parsed spec, the repository's Rust sources and the case
//! list, every place where the spec, the code and the tests no longer point at each other.
//! Pure: it gets text and lists and returns findings, each naming the rule, the file, and what
//! to do about it.

use super::cases::ListedCase;
use super::ids;
use super::sources::{self, SourceFile};
use super::spec::Spec;
use std::collections::BTreeSet;
use std::fmt;

/// Files whose citations are not checked: the checker's own tests, which plant undefined IDs on
/// purpose to see them reported.
pub const PLANTED_CITATION_FILES: &[&str] = &["conformance/src/traceability/", "conformance/tests/traceability.rs"];

/// One broken link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule or fact ID concerned.
    pub id: String,
    /// Where to look: a file, with a line when one is known (`path:line`).
    pub place: String,
    /// What is wrong and what to do.
    pub problem: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.id, self.place, self.problem)
    }
}

/// Every finding, in a stable order: rules in spec order first, then citations by file.
pub fn check(spec: &Spec, sources: &[SourceFile], cases: &[ListedCase]) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_rules(spec, sources, cases, &mut findings);
    check_case_declarations(spec, cases, &mut findings);
    check_source_citations(spec, sources, &mut findings);
    check_spec_citations(spec, &mut findings);
    findings
}

fn check_rules(spec: &Spec, sources: &[SourceFile], cases: &[ListedCase], findings: &mut Vec<Finding>) {
    let all_fns: BTreeSet<String> = sources.iter().flat_map(|s| s.fn_names()).collect();
    for rule in &spec.rules {
        let mut report = |problem: String| {
            findings.push(Finding {
                id: rule.id.clone(),
                place: format!("{}:{}", rule.file, rule.line),
                problem,
            })
        };
        if rule.retired {
            for successor in &rule.successors {
                if spec.rule(successor).is_none_or(|s| s.retired) {
                    report(format!(
                        "retired, and names {successor} as its successor, which is not a live rule; name the rule \
                         that replaced it"
                    ));
                }
            }
            continue;
        }
        let has_case = cases.iter().any(|c| c.rules.contains(&rule.id));
        if !has_case && rule.tests.is_empty() {
            report(format!(
                "no conformance case lists it and its *Tests:* line names no test; add the ID to the case!(…) that \
                 checks it, or name the test (`{}_…`) and its file on the *Tests:* line",
                ids::snake_case(&rule.id)
            ));
        }
        for test in &rule.tests {
            check_named_test(&test.name, &test.files, sources, &all_fns, &mut report);
        }
        if !rule.has_code_line || rule.code.is_empty() {
            report(format!(
                "its *Code:* line names no file; add `// {}: …` at the code that implements it and name that file \
                 (`path.rs::item`) on the *Code:* line",
                rule.id
            ));
        }
        let mut seen = BTreeSet::new();
        for code in rule.code.iter().filter(|c| seen.insert(c.file.clone())) {
            let named: Vec<&SourceFile> = sources.iter().filter(|s| s.is_named_by(&code.file)).collect();
            if named.is_empty() {
                report(format!(
                    "its *Code:* line names {}, which is no Rust file of the repository; correct the path",
                    code.file
                ));
            } else if !named.iter().any(|s| s.cites(&rule.id)) {
                let paths: Vec<&str> = named.iter().map(|s| s.path.as_str()).collect();
                report(format!(
                    "its *Code:* line names {}, which does not cite {}; add `// {}: …` at the code there that \
                     implements it, or name the file that does",
                    paths.join(" or "),
                    rule.id,
                    rule.id
                ));
            }
        }
    }
}

fn check_named_test(
    name: &str,
    files: &[String],
    sources: &[SourceFile],
    all_fns: &BTreeSet<String>,
    report: &mut impl FnMut(String),
) {
    if files.is_empty() {
        if !sources::matches_any(name, all_fns) {
            report(format!(
                "its *Tests:* line names `{name}`, which is no `fn` anywhere in the repository; name the test that \
                 exists (and its file)"
            ));
        }
        return;
    }
    let named: Vec<&SourceFile> = sources
        .iter()
        .filter(|s| files.iter().any(|f| s.is_named_by(f)))
        .collect();
    for file in files {
        if !sources.iter().any(|s| s.is_named_by(file)) {
            report(format!(
                "its *Tests:* line says `{name}` is in {file}, which is no Rust file of the repository; correct the \
                 path"
            ));
        }
    }
    if !named.is_empty() && !named.iter().any(|s| sources::matches_any(name, &s.fn_names())) {
        report(format!(
            "its *Tests:* line names `{name}`, which is no `fn` in {}; name the test that exists there, or the file \
             that holds it",
            files.join(", ")
        ));
    }
}

fn check_case_declarations(spec: &Spec, cases: &[ListedCase], findings: &mut Vec<Finding>) {
    for case in cases {
        for id in &case.rules {
            let problem = if ids::is_fact(id) {
                if spec.defines_fact(id) {
                    format!(
                        "case `{}` lists the fact {id} among its rules; facts are not rules: list the rule the case \
                         checks and cite the fact in a comment (`// … ({id})`)",
                        case.name
                    )
                } else {
                    format!(
                        "case `{}` lists {id}, which the spec does not record; remove it",
                        case.name
                    )
                }
            } else {
                match spec.rule(id) {
                    None => format!(
                        "case `{}` lists {id}, which no `### {id}` in docs/spec defines; correct the ID or add the \
                         rule to the spec",
                        case.name
                    ),
                    Some(rule) if rule.retired => format!(
                        "case `{}` lists {id}, which is retired; list its successor ({})",
                        case.name,
                        rule.successors.join(", ")
                    ),
                    Some(_) => continue,
                }
            };
            findings.push(Finding {
                id: id.clone(),
                place: case.file.clone(),
                problem,
            });
        }
    }
}

fn check_source_citations(spec: &Spec, sources: &[SourceFile], findings: &mut Vec<Finding>) {
    let planted = |path: &str| PLANTED_CITATION_FILES.iter().any(|p| path.starts_with(p));
    let stems: BTreeSet<String> = spec
        .rules
        .iter()
        .filter_map(|r| r.id.rsplit_once('-'))
        .map(|(stem, _)| ids::snake_case(stem))
        .collect();
    for source in sources.iter().filter(|s| !planted(&s.path)) {
        for (name, line) in sources::fn_definitions(&source.text) {
            for id in sources::name_citations(&name, &stems) {
                if !spec.defines_rule(&id) {
                    findings.push(Finding {
                        id: id.clone(),
                        place: format!("{}:{line}", source.path),
                        problem: format!(
                            "`{name}` is named after {id}, which no `### {id}` in docs/spec defines; rename it after \
                             the rule it checks"
                        ),
                    });
                }
            }
        }
        for citation in source.citations() {
            if !spec.defines_rule(&citation.id) && !spec.defines_fact(&citation.id) {
                findings.push(Finding {
                    id: citation.id.clone(),
                    place: format!("{}:{}", source.path, citation.line),
                    problem: undefined(&citation.id),
                });
            }
        }
    }
}

fn check_spec_citations(spec: &Spec, findings: &mut Vec<Finding>) {
    for (file, citation) in &spec.citations {
        if !spec.defines_rule(&citation.id) && !spec.defines_fact(&citation.id) {
            findings.push(Finding {
                id: citation.id.clone(),
                place: format!("{file}:{}", citation.line),
                problem: undefined(&citation.id),
            });
        }
    }
}

fn undefined(id: &str) -> String {
    if ids::is_fact(id) {
        format!("cites {id}, which docs/spec/real-iggy-differs.md does not record; correct the number")
    } else {
        format!(
            "cites {id}, which no `### {id}` in docs/spec defines; correct the ID, add the rule to the spec, or (for \
             an outside identifier) add its prefix to traceability::ids::FOREIGN_PREFIXES"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traceability::spec::SpecText;

    const SPEC: &str = "### MAP-TS-1\n\
**MUST** map.\n\
*Tests:* `map_ts_1_unit` (gateway/core/src/mapping.rs)\n\
*Code:* `gateway/core/src/mapping.rs::origin`\n\
\n\
### MAP-TS-2\n\
**MUST** also map.\n\
*Tests:* pending: conformance\n\
*Code:* `mapping.rs::origin`\n\
\n\
### MAP-OLD-1\n\
**Retired**, replaced by MAP-TS-1: see DIFF-1.\n";

    const FACTS: &str = "### DIFF-1 — a fact\nText.\n";

    fn spec() -> Spec {
        Spec::parse(&[
            SpecText {
                path: "docs/spec/mapping.md",
                text: SPEC,
            },
            SpecText {
                path: "docs/spec/real-iggy-differs.md",
                text: FACTS,
            },
        ])
    }

    fn sound_sources() -> Vec<SourceFile> {
        vec![SourceFile::new(
            "gateway/core/src/mapping.rs",
            "// MAP-TS-1: the origin. MAP-TS-2: also. (DIFF-1)\nfn origin() {}\n#[test]\nfn map_ts_1_unit() {}\n",
        )]
    }

    fn sound_cases() -> Vec<ListedCase> {
        vec![ListedCase::new("maps_timestamps", "wire", &["MAP-TS-2"])]
    }

    fn problems(findings: &[Finding]) -> Vec<String> {
        findings.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn a_sound_trace_has_no_findings() {
        assert_eq!(
            problems(&check(&spec(), &sound_sources(), &sound_cases())),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_rule_without_a_case_or_test_is_reported() {
        let findings = check(&spec(), &sound_sources(), &[]);
        assert_eq!(findings.len(), 1, "{:?}", problems(&findings));
        assert_eq!(findings[0].id, "MAP-TS-2");
        assert_eq!(findings[0].place, "docs/spec/mapping.md:6");
        assert!(findings[0].problem.contains("no conformance case lists it"));
    }

    #[test]
    fn a_case_citing_an_undefined_retired_or_fact_id_is_reported() {
        let cases = vec![
            ListedCase::new("maps_timestamps", "wire", &["MAP-TS-2", "MAP-TS-9"]),
            ListedCase::new("old", "group", &["MAP-OLD-1", "DIFF-1"]),
        ];
        let findings = check(&spec(), &sound_sources(), &cases);
        let found: Vec<(&str, &str)> = findings.iter().map(|f| (f.id.as_str(), f.place.as_str())).collect();
        assert_eq!(
            found,
            [
                ("MAP-TS-9", "conformance/src/cases/wire_cases.rs"),
                ("MAP-OLD-1", "conformance/src/cases/group_cases.rs"),
                ("DIFF-1", "conformance/src/cases/group_cases.rs"),
            ]
        );
        assert!(findings[1].problem.contains("list its successor (MAP-TS-1)"));
        assert!(findings[2].problem.contains("facts are not rules"));
    }

    #[test]
    fn a_comment_citing_an_undefined_id_is_reported_with_its_line() {
        let mut sources = sound_sources();
        sources.push(SourceFile::new(
            "gateway/src/x.rs",
            "fn f() {}\n// MAP-TS-7 and DIFF-9, not KIP-394\n",
        ));
        let findings = check(&spec(), &sources, &sound_cases());
        let found: Vec<(&str, &str)> = findings.iter().map(|f| (f.id.as_str(), f.place.as_str())).collect();
        assert_eq!(
            found,
            [("MAP-TS-7", "gateway/src/x.rs:2"), ("DIFF-9", "gateway/src/x.rs:2")]
        );
    }

    #[test]
    fn a_test_named_after_an_undefined_rule_is_reported() {
        let mut sources = sound_sources();
        sources.push(SourceFile::new(
            "gateway/src/x.rs",
            "#[test]\nfn map_ts_1_and_map_ts_8_both() {}\n",
        ));
        let findings = check(&spec(), &sources, &sound_cases());
        assert_eq!(findings.len(), 1, "{:?}", problems(&findings));
        assert_eq!(
            (findings[0].id.as_str(), findings[0].place.as_str()),
            ("MAP-TS-8", "gateway/src/x.rs:2")
        );
        assert!(findings[0]
            .problem
            .contains("`map_ts_1_and_map_ts_8_both` is named after MAP-TS-8"));
    }

    #[test]
    fn a_code_line_naming_a_file_without_the_id_is_reported() {
        let sources = vec![
            SourceFile::new(
                "gateway/core/src/mapping.rs",
                "// MAP-TS-1\nfn origin() {}\nfn map_ts_1_unit() {}\n",
            ),
            SourceFile::new("gateway/src/mapping.rs", "// nothing here\n"),
        ];
        let findings = check(&spec(), &sources, &sound_cases());
        assert_eq!(findings.len(), 1, "{:?}", problems(&findings));
        assert_eq!(findings[0].id, "MAP-TS-2");
        assert!(
            findings[0]
                .problem
                .contains("gateway/core/src/mapping.rs or gateway/src/mapping.rs, which does not cite"),
            "{}",
            findings[0].problem
        );
    }

    #[test]
    fn a_code_line_naming_a_missing_file_is_reported() {
        let spec_text = SPEC.replace("`mapping.rs::origin`", "`gateway/src/gone.rs`");
        let spec = Spec::parse(&[
            SpecText {
                path: "docs/spec/mapping.md",
                text: &spec_text,
            },
            SpecText {
                path: "docs/spec/real-iggy-differs.md",
                text: FACTS,
            },
        ]);
        let findings = check(&spec, &sound_sources(), &sound_cases());
        assert_eq!(problems(&findings).len(), 1);
        assert!(findings[0]
            .problem
            .contains("names gateway/src/gone.rs, which is no Rust file"));
    }

    #[test]
    fn a_tests_line_naming_a_missing_test_is_reported() {
        let sources = vec![
            SourceFile::new(
                "gateway/core/src/mapping.rs",
                "// MAP-TS-1 MAP-TS-2 (DIFF-1)\nfn origin() {}\n",
            ),
            SourceFile::new("gateway/src/other.rs", "fn map_ts_1_unit() {}\n"),
        ];
        let findings = check(&spec(), &sources, &sound_cases());
        assert_eq!(findings.len(), 1, "{:?}", problems(&findings));
        assert!(findings[0]
            .problem
            .contains("`map_ts_1_unit`, which is no `fn` in gateway/core/src/mapping.rs"));
    }

    #[test]
    fn a_spec_citing_an_undefined_id_is_reported() {
        let spec_text = format!("{SPEC}\nSee MAP-TS-5.\n");
        let spec = Spec::parse(&[
            SpecText {
                path: "docs/spec/mapping.md",
                text: &spec_text,
            },
            SpecText {
                path: "docs/spec/real-iggy-differs.md",
                text: FACTS,
            },
        ]);
        let findings = check(&spec, &sound_sources(), &sound_cases());
        assert_eq!(problems(&findings), ["MAP-TS-5 (docs/spec/mapping.md:14): cites MAP-TS-5, which no `### MAP-TS-5` in docs/spec defines; correct the ID, add the rule to the spec, or (for an outside identifier) add its prefix to traceability::ids::FOREIGN_PREFIXES"]);
    }
}
