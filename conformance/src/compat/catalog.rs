//! The tests librdkafka's runner knows, read from the table in its `tests/test.c`, and the
//! selection of them the compatibility tier runs: broker tests of the 0000–0199 series.

use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::path::Path;

/// One entry of the runner's table (`_TEST(name, flags, ...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The full name, `0045_subscribe_update_mock`.
    pub name: String,
    /// The four-digit number the runner selects by (`TESTS=0045` runs every 0045 entry).
    pub number: u16,
    /// `TEST_F_LOCAL`: runs without a broker (unit tests, the mock cluster), so says nothing
    /// about the gateway.
    pub local: bool,
    /// `TEST_F_MANUAL`: never run unless named.
    pub manual: bool,
    /// The `.scenario` the entry needs (`noautocreate`), when not the default one.
    pub scenario: Option<String>,
}

impl Entry {
    /// Whether the tier runs this entry: it needs a broker and is in the 0000–0199 series.
    pub fn is_broker_test(&self) -> bool {
        !self.local && !self.manual && self.number < 200
    }
}

/// Reads the entries of the `tests[]` table in `test_c` (librdkafka's `tests/test.c`).
pub fn read(test_c: &Path) -> anyhow::Result<Vec<Entry>> {
    let text = std::fs::read_to_string(test_c).with_context(|| format!("reading {}", test_c.display()))?;
    parse(&text)
}

/// Parses the table: every `_TEST(` after `struct test tests[]`, up to its closing parenthesis.
pub fn parse(text: &str) -> anyhow::Result<Vec<Entry>> {
    let start = text
        .find("struct test tests[]")
        .context("no `struct test tests[]` table in test.c")?;
    let mut rest = &text[start..];
    let mut entries = Vec::new();
    while let Some(at) = rest.find("_TEST(") {
        let body_start = at + "_TEST(".len();
        let body_len = closing_paren(&rest[body_start..]).context("an unclosed _TEST( in test.c")?;
        let body = &rest[body_start..body_start + body_len];
        rest = &rest[body_start + body_len..];
        let mut parts = body.splitn(3, ',');
        let name = parts.next().unwrap_or_default().trim().to_string();
        let flags = parts.next().unwrap_or_default().trim().to_string();
        let extra = parts.next().unwrap_or_default();
        let Some(number) = name.get(..4).and_then(|n| n.parse::<u16>().ok()) else {
            continue;
        };
        entries.push(Entry {
            number,
            local: flags.contains("TEST_F_LOCAL"),
            manual: flags.contains("TEST_F_MANUAL"),
            scenario: scenario(extra),
            name,
        });
    }
    if entries.is_empty() {
        bail!("test.c's table has no entries");
    }
    Ok(entries)
}

/// The length up to the parenthesis closing the one just opened.
fn closing_paren(text: &str) -> Option<usize> {
    let mut depth = 1usize;
    let mut in_string = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `.scenario = "noautocreate"` → `noautocreate`; the runner's default scenario counts as none.
fn scenario(extra: &str) -> Option<String> {
    let at = extra.find(".scenario")?;
    let value = extra[at..].split('"').nth(1)?;
    // "default,ak23" runs in the default scenario.
    if value.split(',').any(|s| s == "default") {
        None
    } else {
        Some(value.to_string())
    }
}

/// Which test numbers a run covers: `0001,0012`, `0040-0060`, or both mixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(BTreeSet<u16>);

impl Selection {
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let mut numbers = BTreeSet::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('-') {
                Some((from, to)) => {
                    let (from, to) = (number(from)?, number(to)?);
                    if from > to {
                        bail!("test range {part} runs backwards");
                    }
                    numbers.extend(from..=to);
                }
                None => {
                    numbers.insert(number(part)?);
                }
            }
        }
        if numbers.is_empty() {
            bail!("no tests named in {spec:?}");
        }
        Ok(Selection(numbers))
    }

    pub fn contains(&self, number: u16) -> bool {
        self.0.contains(&number)
    }
}

fn number(text: &str) -> anyhow::Result<u16> {
    text.trim()
        .parse()
        .with_context(|| format!("{text:?} is not a test number such as 0012"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          .extra = "(x)"),
    _TEST(0012_produce_consume, 0),
    _TEST(0018_cgrp_term, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(0107_topic_recreate,
          0,
          TEST_BRKVER_TOPIC_ADMINAPI,
          .scenario = "noautocreate"),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
"#;

    #[test]
    fn parses_names_flags_and_scenarios() {
        let entries = parse(TABLE).unwrap();
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "0000_unittests",
                "0012_produce_consume",
                "0018_cgrp_term",
                "0103_transactions",
                "0107_topic_recreate",
                "8000_idle"
            ]
        );
        assert!(entries[0].local && !entries[0].is_broker_test());
        assert!(entries[1].is_broker_test());
        assert_eq!(entries[3].scenario, None);
        assert_eq!(entries[4].scenario.as_deref(), Some("noautocreate"));
        assert!(entries[5].manual && !entries[5].is_broker_test());
    }

    #[test]
    fn selections_take_lists_and_ranges() {
        let s = Selection::parse("0001, 0012,0040-0042").unwrap();
        for n in [1, 12, 40, 41, 42] {
            assert!(s.contains(n), "{n}");
        }
        assert!(!s.contains(43));
        assert!(Selection::parse("0042-0040").is_err());
        assert!(Selection::parse("abc").is_err());
    }
}
