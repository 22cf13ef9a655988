//! What a Rust source file offers the trace: the rule IDs it cites (in comments, strings and
//! case declarations alike) and the names of the functions it defines, tests included. Works on
//! text; reading the files is `repo`'s job.

use super::ids::{self, Citation};
use std::collections::BTreeSet;

/// One Rust file of the repository: its path from the root, with `/` separators, and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// Every non-foreign ID-shaped token in the file.
    pub fn citations(&self) -> Vec<Citation> {
        ids::citations(&self.text)
    }

    /// Whether the file cites `id` anywhere.
    pub fn cites(&self, id: &str) -> bool {
        self.citations().iter().any(|c| c.id == id)
    }

    /// The name of every `fn` the file defines.
    pub fn fn_names(&self) -> BTreeSet<String> {
        fn_names(&self.text)
    }

    /// Whether `path`, as a spec line writes it (from the root, or from inside a crate such as
    /// `handlers/fetch.rs`), names this file.
    pub fn is_named_by(&self, path: &str) -> bool {
        self.path == path || self.path.ends_with(&format!("/{path}"))
    }
}

/// The identifier after every `fn` keyword of `text`.
pub fn fn_names(text: &str) -> BTreeSet<String> {
    fn_definitions(text).into_iter().map(|(name, _)| name).collect()
}

/// The identifier after every `fn` keyword of `text`, with its 1-based line, in order.
pub fn fn_definitions(text: &str) -> Vec<(String, usize)> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut offset = 0;
    while let Some(at) = text[offset..].find("fn ").map(|i| i + offset) {
        let keyword_alone = text[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        if keyword_alone {
            let name: String = text[at + 3..]
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                found.push((name, text[..at].matches('\n').count() + 1));
            }
        }
        offset = at + 3;
    }
    found
}

/// The rule IDs a function's name cites by the naming convention of docs/spec/README.md
/// (`co_encode_1_co_zero_1_commit_encoding` cites CO-ENCODE-1 and CO-ZERO-1): from its start,
/// words up to an all-digit word whose stem (`co_encode`) is in `stems`, the stems of the
/// spec's rules in snake case; then, past an `and`, the same again. A name that does not open
/// with a known stem (`group_id_longer_than_246_bytes`) cites nothing.
pub fn name_citations(name: &str, stems: &BTreeSet<String>) -> Vec<String> {
    let words: Vec<&str> = name.split('_').collect();
    let mut cited = Vec::new();
    let mut start = 0;
    while let Some(counter) = (start..words.len())
        .find(|&j| j > start && words[j].bytes().all(|b| b.is_ascii_digit()) && !words[j].is_empty())
    {
        let stem = words[start..counter].join("_");
        if !stems.contains(&stem) {
            break;
        }
        cited.push(format!(
            "{}-{}",
            stem.to_ascii_uppercase().replace('_', "-"),
            words[counter]
        ));
        start = counter + 1;
        if words.get(start) == Some(&"and") {
            start += 1;
        }
    }
    cited
}

/// Whether a test name, or a `prefix_*` pattern, matches one of `names`.
pub fn matches_any(pattern: &str, names: &BTreeSet<String>) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => names.iter().any(|n| n.starts_with(prefix)),
        None => names.contains(pattern),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "//! MAP-TS-3 lives here.\n\
pub fn record_to_message() {}\n\
async fn  spaced() {}\n\
fn generic<T>() {} // not a refn x\n\
let f: fn(u8) = g; // defn_trap\n\
#[test]\n\
fn map_ts_3_minus_one() {}\n";

    #[test]
    fn every_fn_keyword_gives_its_name() {
        let names: Vec<String> = fn_names(FILE).into_iter().collect();
        assert_eq!(names, ["generic", "map_ts_3_minus_one", "record_to_message", "spaced"]);
    }

    #[test]
    fn definitions_carry_their_lines() {
        let defined = fn_definitions(FILE);
        assert_eq!(defined[0], ("record_to_message".to_string(), 2));
        assert_eq!(defined.last().unwrap(), &("map_ts_3_minus_one".to_string(), 7));
    }

    #[test]
    fn test_names_cite_the_rules_they_open_with() {
        let stems: BTreeSet<String> = [
            "co_encode",
            "co_zero",
            "fetch_batch",
            "map_value",
            "batch_budget",
            "group",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        let cites = |name: &str| name_citations(name, &stems);
        assert_eq!(
            cites("co_encode_1_co_zero_1_commit_encoding"),
            ["CO-ENCODE-1", "CO-ZERO-1"]
        );
        assert_eq!(
            cites("fetch_batch_1_map_value_2_plain_record"),
            ["FETCH-BATCH-1", "MAP-VALUE-2"]
        );
        assert_eq!(
            cites("batch_budget_2_and_co_zero_7_codes"),
            ["BATCH-BUDGET-2", "CO-ZERO-7"]
        );
        assert_eq!(cites("batch_budget_2_snappy_67_byte_block"), ["BATCH-BUDGET-2"]);
        assert!(cites("group_id_longer_than_246_bytes_is_invalid").is_empty());
        assert!(cites("map_error").is_empty() && cites("co_encode_x").is_empty());
    }

    #[test]
    fn patterns_match_by_prefix_and_names_exactly() {
        let names = fn_names(FILE);
        assert!(matches_any("map_ts_3_*", &names));
        assert!(matches_any("spaced", &names));
        assert!(!matches_any("map_ts_4_*", &names));
        assert!(!matches_any("spac", &names));
    }

    #[test]
    fn a_spec_path_names_a_file_from_the_root_or_inside_a_crate() {
        let file = SourceFile::new("gateway/src/handlers/fetch.rs", FILE);
        assert!(file.is_named_by("gateway/src/handlers/fetch.rs"));
        assert!(file.is_named_by("handlers/fetch.rs"));
        assert!(!file.is_named_by("s/fetch.rs"));
        assert!(file.cites("MAP-TS-3") && !file.cites("MAP-TS-2"));
    }
}
