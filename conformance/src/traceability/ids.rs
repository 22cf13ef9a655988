//! What counts as a rule ID in text: the `AREA-TOPIC-N` shape of docs/spec/README.md, minus the
//! outside identifiers that share it (KIP-394, UTF-8, SHA-256, …), and the snake-case form test
//! names carry.

/// Prefixes of tokens that have a rule ID's shape but name something outside this spec.
pub const FOREIGN_PREFIXES: &[&str] = &["KIP-", "KAFKA-", "UTF-", "SHA-", "SCRAM-", "RFC-"];

/// The prefix of the measured facts about the real server (docs/spec/real-iggy-differs.md):
/// citable in comments and prose, never as a rule a case or test checks.
pub const FACT_PREFIX: &str = "DIFF-";

/// One ID-shaped token found in a text, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    pub id: String,
    pub line: usize,
}

/// Whether `token` has a rule ID's shape: upper-case words joined by dashes, the first all
/// letters, the last a decimal counter (`MAP-TS-3`, `DIFF-2`, `UTF-8`).
pub fn is_id_shaped(token: &str) -> bool {
    let parts: Vec<&str> = token.split('-').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return false;
    };
    !first.is_empty()
        && first.bytes().all(|b| b.is_ascii_uppercase())
        && !last.is_empty()
        && last.bytes().all(|b| b.is_ascii_digit())
        && middle
            .iter()
            .all(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
}

/// Whether an ID-shaped token names something outside this spec.
pub fn is_foreign(id: &str) -> bool {
    FOREIGN_PREFIXES.iter().any(|p| id.starts_with(p))
}

/// Whether an ID names a measured fact rather than a rule.
pub fn is_fact(id: &str) -> bool {
    id.starts_with(FACT_PREFIX)
}

/// Every ID-shaped token of `text` that is not foreign, in order. A token is a maximal run of
/// letters, digits, `_` and `-`, with dashes at its ends dropped, so `MAP-TS-3:` and
/// `(DIFF-1..3)` cite `MAP-TS-3` and `DIFF-1`, while `map_ts_3` and `x-MAP-TS-3` cite nothing.
pub fn citations(text: &str) -> Vec<Citation> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for token in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
            let token = token.trim_matches('-');
            if is_id_shaped(token) && !is_foreign(token) {
                found.push(Citation {
                    id: token.to_string(),
                    line: index + 1,
                });
            }
        }
    }
    found
}

/// A rule ID in the form test names carry: lower case, dashes as underscores.
pub fn snake_case(id: &str) -> String {
    id.to_ascii_lowercase().replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for id in [
            "MAP-TS-3",
            "ENV-TRIGGER-KEY-LEN-1",
            "DIFF-12",
            "LIMIT-FRAME-CEILING-1",
            "UTF-8",
        ] {
            assert!(is_id_shaped(id), "{id}");
        }
        for not in [
            "MAP",
            "MAP-",
            "-1",
            "map-ts-3",
            "MAP-TS-3a",
            "MAP--3",
            "Map-TS-3",
            "3-MAP-1",
            "MAP-TS-x",
        ] {
            assert!(!is_id_shaped(not), "{not}");
        }
    }

    #[test]
    fn citations_in_text_with_lines() {
        let text = "// MAP-TS-3: stored as 0\n/// see (DIFF-1..3), KIP-394 and UTF-8; not map_ts_3 or x-MAP-TS-1\nLIMIT-FRAME-1's";
        let ids: Vec<(String, usize)> = citations(text).into_iter().map(|c| (c.id, c.line)).collect();
        assert_eq!(
            ids,
            vec![
                ("MAP-TS-3".into(), 1),
                ("DIFF-1".into(), 2),
                ("LIMIT-FRAME-1".into(), 3)
            ]
        );
    }

    #[test]
    fn snake_case_of_an_id() {
        assert_eq!(snake_case("ENV-TRIGGER-KEY-LEN-1"), "env_trigger_key_len_1");
    }

    #[test]
    fn facts_and_foreign_ids() {
        assert!(is_fact("DIFF-2") && !is_fact("CO-ENCODE-1"));
        assert!(is_foreign("SHA-256") && is_foreign("RFC-2119") && !is_foreign("SASL-1"));
    }
}
