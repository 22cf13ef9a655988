//! Regular-expression subscriptions of the consumer protocol (GROUP-CONSUMER-REGEX-1), sans-io:
//! a member's `SubscribedTopicRegex` checked and compiled within fixed bounds, and matched
//! against topic names as Kafka's coordinator matches them (RE2/J syntax, the whole name must
//! match), at a cost bounded per pattern (GROUP-CONSUMER-REGEX-COST-1).
//!
//! Patterns run on a lazy DFA alone (`regex_automata::hybrid`), with no fallback to a slower
//! engine: its states are built as names need them, into a cache of bounded size, and when the
//! cache has been cleared a few times while each state served only a few bytes of names, the
//! search gives up and the pattern is "too costly". What one pattern may cost is then bounded by
//! the NFA it compiles to and a fixed number of cache fills, whatever the names.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchErrorKind};
use std::collections::BTreeSet;
use std::time::Duration;

/// The longest pattern accepted, in bytes. Kafka sets no bound; a topic-name pattern of this size
/// is already far beyond any real subscription (librdkafka joins all of a client's patterns into
/// one alternation, so this also bounds how many a client may subscribe).
pub const MAX_PATTERN_BYTES: usize = 1_024;

/// What one pattern may take, in bytes: the heap its NFA takes to compile, and the lazy DFA's
/// cache while it matches names.
pub const MAX_COMPILED_BYTES: usize = 256 * 1024;

/// How often the lazy DFA's cache may be cleared before a pattern whose states each serve fewer
/// than [`MIN_BYTES_PER_STATE`] bytes of names is given up (GROUP-CONSUMER-REGEX-COST-1).
pub const MAX_CACHE_CLEARS: usize = 3;

/// Bytes of names each DFA state built must serve, on average, once the cache has been cleared
/// [`MAX_CACHE_CLEARS`] times.
pub const MIN_BYTES_PER_STATE: usize = 10;

/// Patterns one heartbeat resolves at most (GROUP-CONSUMER-REGEX-COST-1); the others wait for the
/// next heartbeats, the least recently resolved first.
pub const MAX_PATTERNS_PER_HEARTBEAT: usize = 8;

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
    /// Not a pattern, or one whose NFA compiles past [`MAX_COMPILED_BYTES`].
    Invalid(String),
    /// Matching it against the `topics` names listed outgrew its DFA cache
    /// (GROUP-CONSUMER-REGEX-COST-1).
    TooCostly { topics: usize },
}

impl RegexRefusal {
    /// The message the refusal carries to the client.
    pub fn message(&self) -> String {
        match self {
            Self::TooLong(bytes) => format!(
                "SubscribedTopicRegex is {bytes} bytes long; this gateway accepts at most {MAX_PATTERN_BYTES} (GROUP-CONSUMER-REGEX-1)."
            ),
            Self::Invalid(why) => format!("SubscribedTopicRegex is not a valid regular expression: {why}"),
            Self::TooCostly { topics } => format!(
                "SubscribedTopicRegex is too costly to match against the {topics} topics: its automaton outgrew {MAX_COMPILED_BYTES} bytes (GROUP-CONSUMER-REGEX-COST-1)."
            ),
        }
    }
}

/// A pattern compiled to match whole topic names.
#[derive(Debug)]
pub struct CompiledPattern {
    dfa: DFA,
}

fn build(pattern: &str, unicode: bool) -> Result<DFA, Box<regex_automata::hybrid::BuildError>> {
    // Anchored at both ends: a pattern that matches part of a name does not match the name.
    DFA::builder()
        .syntax(syntax::Config::new().unicode(unicode).utf8(false))
        .thompson(thompson::Config::new().nfa_size_limit(Some(MAX_COMPILED_BYTES)))
        .configure(
            DFA::config()
                .cache_capacity(MAX_COMPILED_BYTES)
                .minimum_cache_clear_count(Some(MAX_CACHE_CLEARS))
                .minimum_bytes_per_state(Some(MIN_BYTES_PER_STATE)),
        )
        .build(&format!(r"\A(?:{pattern})\z"))
        .map_err(Box::new)
}

/// The innermost cause of a build error, on one line: the crates' messages span lines, with the
/// pattern drawn.
fn cause(error: &dyn std::error::Error) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    let text = innermost.to_string();
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("invalid");
    let last = last.trim();
    crate::log_text::clip(last.strip_prefix("error: ").unwrap_or(last)).to_string()
}

/// GROUP-CONSUMER-REGEX-1: `pattern` compiled to match a whole topic name, as Kafka's
/// `Pattern.matcher(topic).matches()`, refused before anything is compiled when it is too long.
/// RE2/J's `\w`, `\d`, `\s` and `\b` are ASCII, and Kafka topic names are ASCII, so the pattern
/// is compiled without Unicode classes, which keeps its automaton small; one that needs them
/// (`\pL`) is compiled with them, matching the same ASCII names.
pub fn compile(pattern: &str) -> Result<CompiledPattern, RegexRefusal> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(RegexRefusal::TooLong(pattern.len()));
    }
    match build(pattern, false) {
        Ok(dfa) => Ok(CompiledPattern { dfa }),
        Err(ascii) => build(pattern, true)
            .map(|dfa| CompiledPattern { dfa })
            .map_err(|_| RegexRefusal::Invalid(cause(&*ascii))),
    }
}

/// The names of `topics` that `pattern` matches whole; [`RegexRefusal::TooCostly`] when the lazy
/// DFA gives up on them (GROUP-CONSUMER-REGEX-COST-1).
pub fn matching<'a>(
    pattern: &CompiledPattern,
    topics: impl ExactSizeIterator<Item = &'a str>,
) -> Result<BTreeSet<String>, RegexRefusal> {
    let listed = topics.len();
    let mut cache = Cache::new(&pattern.dfa);
    let mut matched = BTreeSet::new();
    for topic in topics {
        let input = Input::new(topic.as_bytes()).anchored(Anchored::Yes);
        match pattern.dfa.try_search_fwd(&mut cache, &input) {
            Ok(Some(_)) => {
                matched.insert(topic.to_string());
            }
            Ok(None) => {}
            Err(e) if matches!(e.kind(), MatchErrorKind::GaveUp { .. }) => {
                return Err(RegexRefusal::TooCostly { topics: listed })
            }
            // Only a give-up can happen without quit bytes or an unanchored start state; treat
            // anything else alike rather than answer a partial match.
            Err(_) => return Err(RegexRefusal::TooCostly { topics: listed }),
        }
    }
    Ok(matched)
}

/// Each of `patterns` compiled and matched against `topics`: the work a heartbeat hands to the
/// decode pool (GROUP-CONSUMER-REGEX-COST-1), at most [`MAX_PATTERNS_PER_HEARTBEAT`] patterns.
pub fn resolve(patterns: &[String], topics: &[String]) -> Vec<(String, Result<BTreeSet<String>, RegexRefusal>)> {
    patterns
        .iter()
        .map(|p| {
            let outcome = compile(p).and_then(|c| matching(&c, topics.iter().map(String::as_str)));
            (p.clone(), outcome)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matched(pattern: &str, topics: &[&str]) -> BTreeSet<String> {
        matching(&compile(pattern).expect("valid"), topics.iter().copied()).expect("not costly")
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn group_consumer_regex_1_a_pattern_matches_whole_names_only() {
        let topics = ["orders-eu", "orders-", "my-orders-eu", "orders", "audit"];
        assert_eq!(matched("^orders-.*", &topics), set(&["orders-eu", "orders-"]));
        // Without wildcards a pattern matches only the name it spells, not names containing it.
        assert_eq!(matched("orders", &topics), set(&["orders"]));
        // librdkafka joins several patterns into one alternation.
        assert_eq!(matched("(^orders-eu)|(^audit)", &topics), set(&["orders-eu", "audit"]));
        // RE2/J's Perl classes are ASCII; a Unicode class is accepted and matches the same names.
        assert_eq!(matched(r"\w+-\w\w", &topics), set(&["orders-eu"]));
        assert_eq!(matched(r"\pL+", &topics), set(&["orders", "audit"]));
        assert_eq!(matched("(?i)AUDIT", &topics), set(&["audit"]));
    }

    #[test]
    fn group_consumer_regex_1_long_invalid_and_costly_patterns_are_refused() {
        assert_eq!(
            compile(&"a".repeat(MAX_PATTERN_BYTES + 1)).err(),
            Some(RegexRefusal::TooLong(MAX_PATTERN_BYTES + 1))
        );
        assert!(compile(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
        let refused = compile("orders-(").expect_err("unclosed group");
        assert_eq!(refused, RegexRefusal::Invalid("unclosed group".into()));
        // Short, but its NFA is past the size limit: counted repetition multiplies.
        let costly = r"(\w{1000}){1000}";
        assert!(costly.len() <= MAX_PATTERN_BYTES);
        let refused = compile(costly).expect_err("too large once compiled");
        assert!(matches!(refused, RegexRefusal::Invalid(_)));
        assert!(refused.message().contains("not a valid regular expression"));
    }

    /// Names of 200 letters `a` and `b`, pseudo-random.
    fn binary_names(count: usize) -> Vec<String> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..count)
            .map(|_| {
                (0..200)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        if state & 1 == 0 {
                            'a'
                        } else {
                            'b'
                        }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn group_consumer_regex_cost_1_a_pattern_whose_automaton_outgrows_its_cache_gives_up() {
        let names = binary_names(64);
        let topics = || names.iter().map(String::as_str);
        // `.*a.{20}` needs a DFA state per distinct 21-letter window of the names: ~2^21 of them.
        // A backtracking or NFA engine would answer, at a cost per name the pattern chooses.
        for pattern in [".*a.{20}", "(a|b)*a(a|b){18}(a|b)*", "(.*a.{15}){3}"] {
            let compiled = compile(pattern).expect("a valid, small pattern");
            assert_eq!(
                matching(&compiled, topics()),
                Err(RegexRefusal::TooCostly { topics: 64 }),
                "{pattern}"
            );
        }
        // Ordinary patterns over the same names build a handful of states.
        let all = compile("[ab]+").expect("valid");
        assert_eq!(matching(&all, topics()).expect("cheap").len(), 64);
        let literals: Vec<String> = (0..60).map(|i| format!("orders-{i}-eu")).collect();
        let alternation = compile(&literals.join("|")).expect("valid");
        assert!(matching(&alternation, topics()).expect("cheap").is_empty());
        let outcome = resolve(&[".*a.{20}".to_string(), "a.*".to_string()], &names);
        assert!(matches!(outcome[0].1, Err(RegexRefusal::TooCostly { .. })));
        assert!(outcome[1]
            .1
            .as_ref()
            .is_ok_and(|m| m.iter().all(|n| n.starts_with('a'))));
    }
}
