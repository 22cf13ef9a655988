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
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("fn ") {
        let keyword_alone = rest[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = rest[at + 3..].trim_start();
        if keyword_alone {
            let name: String = after.chars().take_while(|&c| is_ident(c)).collect();
            if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                names.insert(name);
            }
        }
        rest = &rest[at + 3..];
    }
    names
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
