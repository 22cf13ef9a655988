//! Regular-expression subscriptions of the consumer protocol (GROUP-CONSUMER-REGEX-1), sans-io:
//! a member's `SubscribedTopicRegex` checked and compiled within fixed bounds, and matched
//! against topic names as Kafka's coordinator matches them (RE2/J syntax, the whole name must
//! match). The `regex` crate is linear-time in the name, so no pattern can make a match slow;
//! the bounds below cap what compiling one may cost.

use regex::{Regex, RegexBuilder};
use std::collections::BTreeSet;
use std::time::Duration;

/// The longest pattern accepted, in bytes. Kafka sets no bound; a topic-name pattern of this size
/// is already far beyond any real subscription (librdkafka joins all of a client's patterns into
/// one alternation, so this also bounds how many a client may subscribe).
pub const MAX_PATTERN_BYTES: usize = 1_024;

/// What one compiled pattern may take, in bytes of program and of lazy DFA cache.
pub const MAX_COMPILED_BYTES: usize = 1 << 20;

/// How long a resolution of a group's patterns stands before a heartbeat resolves them again:
/// Kafka's least interval between two resolutions of a group's regular expressions
/// (`REGEX_BATCH_REFRESH_MIN_INTERVAL_MS` in its GroupMetadataManager).
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(10);

/// Why a pattern is refused; INVALID_REGULAR_EXPRESSION (128) either way
/// (`error_map::regex_code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegexRefusal {
    /// Longer than [`MAX_PATTERN_BYTES`].
    TooLong(usize),
    /// Not a pattern, or one that compiles past [`MAX_COMPILED_BYTES`].
    Invalid(String),
}

impl RegexRefusal {
    /// The message the refusal carries to the client.
    pub fn message(&self) -> String {
        match self {
            Self::TooLong(bytes) => format!(
                "SubscribedTopicRegex is {bytes} bytes long; this gateway accepts at most {MAX_PATTERN_BYTES} (GROUP-CONSUMER-REGEX-1)."
            ),
            Self::Invalid(why) => format!("SubscribedTopicRegex is not a valid regular expression: {why}"),
        }
    }
}

/// GROUP-CONSUMER-REGEX-1: `pattern` compiled to match a whole topic name, as Kafka's
/// `Pattern.matcher(topic).matches()`, refused before anything is compiled when it is too long.
pub fn compile(pattern: &str) -> Result<Regex, RegexRefusal> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(RegexRefusal::TooLong(pattern.len()));
    }
    // Anchored at both ends: a pattern that matches part of a name does not match the name.
    RegexBuilder::new(&format!(r"\A(?:{pattern})\z"))
        .size_limit(MAX_COMPILED_BYTES)
        .dfa_size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|e| {
            // The crate's message spans lines, with the pattern drawn: one line is enough.
            let text = e.to_string();
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("invalid");
            RegexRefusal::Invalid(crate::log_text::clip(last.trim()).to_string())
        })
}

/// The names of `topics` that `regex` matches whole.
pub fn matching<'a>(regex: &Regex, topics: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    topics
        .into_iter()
        .filter(|t| regex.is_match(t))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_consumer_regex_1_a_pattern_matches_whole_names_only() {
        let regex = compile("^orders-.*").expect("valid");
        let topics = ["orders-eu", "orders-", "my-orders-eu", "orders", "audit"];
        assert_eq!(
            matching(&regex, topics),
            BTreeSet::from(["orders-eu".to_string(), "orders-".to_string()])
        );
        // Without wildcards a pattern matches only the name it spells, not names containing it.
        let exact = compile("orders").expect("valid");
        assert_eq!(matching(&exact, topics), BTreeSet::from(["orders".to_string()]));
        // librdkafka joins several patterns into one alternation.
        let joined = compile("(^orders-eu)|(^audit)").expect("valid");
        assert_eq!(
            matching(&joined, topics),
            BTreeSet::from(["orders-eu".to_string(), "audit".to_string()])
        );
    }

    #[test]
    fn group_consumer_regex_1_long_invalid_and_costly_patterns_are_refused() {
        assert_eq!(
            compile(&"a".repeat(MAX_PATTERN_BYTES + 1)).err(),
            Some(RegexRefusal::TooLong(MAX_PATTERN_BYTES + 1))
        );
        assert!(compile(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
        assert!(matches!(compile("orders-("), Err(RegexRefusal::Invalid(_))));
        // Short, but its compiled program is past the size limit: counted repetition multiplies.
        let costly = r"(\w{1000}){1000}";
        assert!(costly.len() <= MAX_PATTERN_BYTES);
        let refused = compile(costly).expect_err("too large once compiled");
        assert!(matches!(refused, RegexRefusal::Invalid(_)));
        assert!(refused.message().contains("not a valid regular expression"));
    }
}
