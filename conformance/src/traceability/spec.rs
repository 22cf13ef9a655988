//! Reads the spec's markdown (docs/spec/*.md) into its rules and facts: each `### RULE-ID`
//! heading with its statement, whether it is **Retired** (and for what), the tests its *Tests:*
//! line names with the files holding them, what it leaves pending, and the files its *Code:*
//! line names. Works on text; reading the files is `repo`'s job.

use super::ids::{self, Citation};

/// One spec file's path (relative to the repository root) and its text.
pub struct SpecText<'a> {
    pub path: &'a str,
    pub text: &'a str,
}

/// The whole spec: its rules, its facts, and every ID any of its text cites.
#[derive(Debug, Default)]
pub struct Spec {
    pub rules: Vec<Rule>,
    pub facts: Vec<Fact>,
    /// Every ID-shaped token in the spec's text, headings included, with its file.
    pub citations: Vec<(String, Citation)>,
}

/// One `### RULE-ID` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    /// The spec file, relative to the repository root.
    pub file: String,
    /// The line of its heading.
    pub line: usize,
    /// Marked **Retired**: kept for the record, checked by nothing.
    pub retired: bool,
    /// The rules a retired one names as its replacement.
    pub successors: Vec<String>,
    /// Whether it has a *Tests:* line at all.
    pub has_tests_line: bool,
    pub tests: Vec<TestRef>,
    /// What its *Tests:* line says is still owed (`pending: conformance`, …).
    pub pending: Vec<String>,
    /// Whether it has a *Code:* line at all.
    pub has_code_line: bool,
    pub code: Vec<CodeRef>,
}

/// A test a *Tests:* line names. A name ending in `*` stands for every test it prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRef {
    pub name: String,
    /// The files the line says hold it; empty when it names none (then it may be anywhere).
    pub files: Vec<String>,
}

/// A code site a *Code:* line names: a file (as written: from the repository root, or relative
/// to a crate's `src`) and, when given, an item in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRef {
    pub file: String,
    pub item: Option<String>,
}

/// A `### DIFF-N — …` measured fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub id: String,
    pub file: String,
    pub line: usize,
}

impl Spec {
    /// Reads every file of the spec.
    pub fn parse(files: &[SpecText<'_>]) -> Spec {
        let mut spec = Spec::default();
        for file in files {
            spec.read_file(file);
        }
        spec
    }

    /// The rule with this ID.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Whether `id` is a rule (live or retired) this spec defines.
    pub fn defines_rule(&self, id: &str) -> bool {
        self.rule(id).is_some()
    }

    /// Whether `id` is a fact this spec records.
    pub fn defines_fact(&self, id: &str) -> bool {
        self.facts.iter().any(|f| f.id == id)
    }

    fn read_file(&mut self, file: &SpecText<'_>) {
        for citation in ids::citations(file.text) {
            self.citations.push((file.path.to_string(), citation));
        }
        let lines: Vec<&str> = file.text.lines().collect();
        let mut index = 0;
        while index < lines.len() {
            let Some(id) = heading_id(lines[index]) else {
                index += 1;
                continue;
            };
            let start = index;
            index += 1;
            let body_start = index;
            while index < lines.len() && !lines[index].starts_with('#') {
                index += 1;
            }
            if ids::is_fact(&id) {
                self.facts.push(Fact {
                    id,
                    file: file.path.to_string(),
                    line: start + 1,
                });
            } else {
                self.rules
                    .push(read_rule(id, file.path, start + 1, &lines[body_start..index]));
            }
        }
    }
}

/// The ID of a `### ID` or `### ID — title` heading.
fn heading_id(line: &str) -> Option<String> {
    let rest = line.strip_prefix("### ")?;
    let word = rest.split_whitespace().next()?;
    ids::is_id_shaped(word).then(|| word.to_string())
}

/// The name of a field a line starts (`*Tests:*` → `Tests`, `*Why (then):*` → `Why (then)`).
fn field_start(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('*')?;
    let end = rest.find(":*")?;
    let name = &rest[..end];
    (!name.is_empty() && !name.contains('*')).then(|| (name, &rest[end + 2..]))
}

fn read_rule(id: String, file: &str, line: usize, body: &[&str]) -> Rule {
    let mut statement = String::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut in_field = false;
    for text in body {
        if let Some((name, rest)) = field_start(text) {
            fields.push((name.to_string(), rest.trim().to_string()));
            in_field = true;
        } else if text.trim().is_empty() {
            in_field = false;
        } else if in_field {
            let (_, value) = fields.last_mut().expect("in a field");
            value.push(' ');
            value.push_str(text.trim());
        } else if fields.is_empty() {
            statement.push_str(text.trim());
            statement.push(' ');
        }
    }
    let retired = statement.trim_start().starts_with("**Retired**");
    let successors = if retired {
        let head = statement.split(':').next().unwrap_or_default();
        ids::citations(head).into_iter().map(|c| c.id).collect()
    } else {
        Vec::new()
    };
    let tests_field = fields.iter().find(|(n, _)| n == "Tests").map(|(_, v)| v.as_str());
    let code_field = fields.iter().find(|(n, _)| n == "Code").map(|(_, v)| v.as_str());
    let (tests, pending) = tests_field.map(parse_tests).unwrap_or_default();
    Rule {
        id,
        file: file.to_string(),
        line,
        retired,
        successors,
        has_tests_line: tests_field.is_some(),
        tests,
        pending,
        has_code_line: code_field.is_some(),
        code: code_field.map(parse_code).unwrap_or_default(),
    }
}

/// A field's text cut into what the *Tests:* and *Code:* grammars care about.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    /// A backticked span outside parentheses.
    Ticked(&'a str),
    /// A parenthesized remark, with the `.rs` paths in it.
    Paths(Vec<&'a str>),
    /// Plain text outside both.
    Prose(&'a str),
}

fn pieces(field: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = field;
    while !rest.is_empty() {
        let next = rest.find(['`', '(']).unwrap_or(rest.len());
        if next > 0 {
            out.push(Piece::Prose(&rest[..next]));
            rest = &rest[next..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('`') {
            let end = after.find('`').unwrap_or(after.len());
            out.push(Piece::Ticked(&after[..end]));
            rest = after.get(end + 1..).unwrap_or("");
        } else {
            let mut depth = 0usize;
            let mut end = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            out.push(Piece::Paths(rs_paths(&rest[1..end])));
            rest = rest.get(end + 1..).unwrap_or("");
        }
    }
    out
}

/// The `.rs` file paths a remark mentions.
fn rs_paths(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '`'))
        .filter(|w| w.ends_with(".rs") && w.len() > 3)
        .collect()
}

/// Whether a backticked span is a test name (or a `prefix_*` pattern of test names).
fn is_test_name(span: &str) -> bool {
    let name = span.strip_suffix('*').unwrap_or(span);
    name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A *Tests:* field: test names, each with the files of the first parenthesized remark after it
/// that names any, and the `pending: …` notes (up to the next `;`).
fn parse_tests(field: &str) -> (Vec<TestRef>, Vec<String>) {
    let mut tests: Vec<TestRef> = Vec::new();
    let mut pending = Vec::new();
    let mut unplaced = 0;
    for piece in pieces(field) {
        match piece {
            Piece::Ticked(span) if is_test_name(span) => {
                tests.push(TestRef {
                    name: span.to_string(),
                    files: Vec::new(),
                });
                unplaced += 1;
            }
            Piece::Ticked(_) => {}
            Piece::Paths(paths) if !paths.is_empty() => {
                let from = tests.len() - unplaced;
                for test in &mut tests[from..] {
                    test.files = paths.iter().map(|p| p.to_string()).collect();
                }
                unplaced = 0;
            }
            Piece::Paths(_) => {}
            Piece::Prose(text) => {
                if let Some(at) = text.find("pending:") {
                    let note = text[at + "pending:".len()..].split(';').next().unwrap_or_default();
                    pending.push(note.trim().trim_end_matches(['.', ',']).to_string());
                }
            }
        }
    }
    (tests, pending)
}

/// A *Code:* field: every file it names, as `path.rs::item`, `path.rs`, `::item` (the previous
/// file again), or `item` followed by a remark naming the file.
fn parse_code(field: &str) -> Vec<CodeRef> {
    let mut code: Vec<CodeRef> = Vec::new();
    let mut items_without_file: Vec<String> = Vec::new();
    for piece in pieces(field) {
        match piece {
            Piece::Ticked(span) => {
                if let Some(at) = span.find(".rs") {
                    let file = &span[..at + 3];
                    let item = span[at + 3..].strip_prefix("::").map(str::to_string);
                    code.push(CodeRef {
                        file: file.to_string(),
                        item,
                    });
                    items_without_file.clear();
                } else if let Some(item) = span.strip_prefix("::") {
                    if let Some(previous) = code.last() {
                        let file = previous.file.clone();
                        code.push(CodeRef {
                            file,
                            item: Some(item.to_string()),
                        });
                    }
                } else {
                    items_without_file.push(span.to_string());
                }
            }
            Piece::Paths(paths) => {
                for path in paths {
                    if items_without_file.is_empty() {
                        code.push(CodeRef {
                            file: path.to_string(),
                            item: None,
                        });
                    }
                    for item in &items_without_file {
                        code.push(CodeRef {
                            file: path.to_string(),
                            item: Some(item.clone()),
                        });
                    }
                }
                items_without_file.clear();
            }
            Piece::Prose(_) => {}
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "# Limits\n\
\n\
| Limit | Rule |\n\
|---|---|\n\
| Request frame | LIMIT-FRAME-1 |\n\
\n\
### LIMIT-FRAME-1\n\
**MUST** close the connection when the length prefix exceeds `max_frame_size`\n\
(LIMIT-FRAME-CEILING-1).\n\
*Why:* memory per connection must be bounded.\n\
*Tests:* `frame_above_max_frame_size_closes_the_connection`,\n\
`frame_of_exactly_max_frame_size_is_read` (conformance/src/cases/wire_cases.rs);\n\
`limit_frame_1_unit` (gateway/src/server.rs, run twice); `limit_frame_1_anywhere`\n\
*Code:* `gateway/src/protocol/frame.rs::read_frame`, `::read_admitted_frame`; `server::connection` (gateway/src/server.rs),\n\
`handlers/fetch.rs` (module doc; `handle`)\n\
\n\
Prose after the rule mentions DIFF-5.\n\
\n\
### CO-VERBATIM-1\n\
**Retired**, replaced by CO-ENCODE-1 and CO-ZERO-1: the real server refuses it (DIFF-2).\n\
*Why (then):* history.\n\
\n\
## Section\n\
\n\
### GROUP-TXN-1\n\
**MUST** refuse.\n\
*Tests:* the `authz_model_1_*` tests (gateway/src/backend/users.rs,\n\
gateway/src/backend/permissions.rs); pending: conformance; `x_1` (see `Other::thing`)\n";

    const DIFFERS: &str =
        "# Differs\n\n### DIFF-2 — stored offsets are range-checked\nText.\n*Consequence:* CO-VERBATIM-1.\n";

    fn spec() -> Spec {
        Spec::parse(&[
            SpecText {
                path: "docs/spec/limits.md",
                text: LIMITS,
            },
            SpecText {
                path: "docs/spec/real-iggy-differs.md",
                text: DIFFERS,
            },
        ])
    }

    #[test]
    fn rules_and_facts_are_told_apart() {
        let spec = spec();
        let ids: Vec<&str> = spec.rules.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["LIMIT-FRAME-1", "CO-VERBATIM-1", "GROUP-TXN-1"]);
        assert_eq!(
            spec.facts,
            [Fact {
                id: "DIFF-2".into(),
                file: "docs/spec/real-iggy-differs.md".into(),
                line: 3
            }]
        );
        assert!(spec.defines_fact("DIFF-2") && !spec.defines_rule("DIFF-2"));
        assert_eq!(spec.rule("LIMIT-FRAME-1").unwrap().line, 7);
    }

    #[test]
    fn tests_line_over_several_lines_places_each_name_in_its_files() {
        let spec = spec();
        let rule = spec.rule("LIMIT-FRAME-1").unwrap();
        let wire = vec!["conformance/src/cases/wire_cases.rs".to_string()];
        assert_eq!(
            rule.tests,
            [
                TestRef {
                    name: "frame_above_max_frame_size_closes_the_connection".into(),
                    files: wire.clone()
                },
                TestRef {
                    name: "frame_of_exactly_max_frame_size_is_read".into(),
                    files: wire
                },
                TestRef {
                    name: "limit_frame_1_unit".into(),
                    files: vec!["gateway/src/server.rs".into()]
                },
                TestRef {
                    name: "limit_frame_1_anywhere".into(),
                    files: vec![]
                },
            ]
        );
        assert!(rule.pending.is_empty() && !rule.retired && rule.has_tests_line);
    }

    #[test]
    fn code_line_forms() {
        let spec = spec();
        let code: Vec<(String, Option<String>)> = spec
            .rule("LIMIT-FRAME-1")
            .unwrap()
            .code
            .iter()
            .map(|c| (c.file.clone(), c.item.clone()))
            .collect();
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            code,
            [
                ("gateway/src/protocol/frame.rs".to_string(), some("read_frame")),
                ("gateway/src/protocol/frame.rs".to_string(), some("read_admitted_frame")),
                ("gateway/src/server.rs".to_string(), some("server::connection")),
                ("handlers/fetch.rs".to_string(), None),
            ]
        );
    }

    #[test]
    fn retired_rule_names_its_successors_and_has_no_fields() {
        let spec = spec();
        let rule = spec.rule("CO-VERBATIM-1").unwrap();
        assert!(rule.retired);
        assert_eq!(rule.successors, ["CO-ENCODE-1", "CO-ZERO-1"]);
        assert!(!rule.has_tests_line && !rule.has_code_line);
    }

    #[test]
    fn patterns_pending_notes_and_remarks_without_files() {
        let spec = spec();
        let rule = spec.rule("GROUP-TXN-1").unwrap();
        let files = vec![
            "gateway/src/backend/users.rs".to_string(),
            "gateway/src/backend/permissions.rs".to_string(),
        ];
        assert_eq!(
            rule.tests,
            [
                TestRef {
                    name: "authz_model_1_*".into(),
                    files
                },
                TestRef {
                    name: "x_1".into(),
                    files: vec![]
                }
            ]
        );
        assert_eq!(rule.pending, ["conformance"]);
        assert!(!rule.has_code_line && rule.code.is_empty());
    }

    #[test]
    fn every_id_the_text_cites_is_kept_with_its_file() {
        let spec = spec();
        let cited: Vec<(&str, &str, usize)> = spec
            .citations
            .iter()
            .map(|(f, c)| (f.as_str(), c.id.as_str(), c.line))
            .collect();
        assert!(cited.contains(&("docs/spec/limits.md", "LIMIT-FRAME-CEILING-1", 9)));
        assert!(cited.contains(&("docs/spec/limits.md", "DIFF-5", 17)));
        assert!(cited.contains(&("docs/spec/real-iggy-differs.md", "CO-VERBATIM-1", 5)));
    }
}
