//! JUnit XML, in the shape the common schema (Jenkins' junit-10.xsd, read by GitHub, GitLab and
//! Jenkins reporters) accepts: one `<testsuite>` per area, one `<testcase>` per case with
//! `classname` = area, `<failure message>` and `<skipped message>` for the reason.
//!
//! That schema allows `<properties>` only on a test suite, so a case's rule IDs (and the
//! deviations from Kafka it declares, and the authority its kafka-profile expectation rests on)
//! are properties of its area's suite named after the case (`<case>.rules`, `<case>.deviations`,
//! `<case>.authority`), and are repeated in the case's `<system-out>`.

use crate::results::{CaseResult, RunResults, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The report for `results`.
pub fn render(results: &RunResults) -> String {
    let mut areas: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
    for case in &results.cases {
        areas.entry(case.area.as_str()).or_default().push(case);
    }
    let total_ms: u64 = results.cases.iter().map(|c| c.duration_ms).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{}\">",
        escape(&format!(
            "kafka-iggy conformance ({} profile, {})",
            results.profile, results.target
        )),
        results.cases.len(),
        results.count(Status::Failed),
        seconds(total_ms)
    );
    for (area, cases) in &areas {
        let failures = cases.iter().filter(|c| c.status == Status::Failed).count();
        let skipped = cases.iter().filter(|c| c.status == Status::Skipped).count();
        let area_ms: u64 = cases.iter().map(|c| c.duration_ms).sum();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">",
            escape(area),
            cases.len(),
            seconds(area_ms)
        );
        xml.push_str("    <properties>\n");
        property(&mut xml, "target", &results.target);
        property(&mut xml, "endpoint", &results.endpoint);
        property(&mut xml, "profile", &results.profile);
        for case in cases {
            property(&mut xml, &format!("{}.rules", case.name), &case.rules.join(" "));
            if !case.deviations.is_empty() {
                property(
                    &mut xml,
                    &format!("{}.deviations", case.name),
                    &case.deviations.join(" "),
                );
            }
            if let Some(authority) = &case.authority {
                property(&mut xml, &format!("{}.authority", case.name), authority);
            }
        }
        xml.push_str("    </properties>\n");
        for case in cases {
            testcase(&mut xml, case);
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

fn property(xml: &mut String, name: &str, value: &str) {
    let _ = writeln!(
        xml,
        "      <property name=\"{}\" value=\"{}\"/>",
        escape(name),
        escape(value)
    );
}

fn testcase(xml: &mut String, case: &CaseResult) {
    let _ = writeln!(
        xml,
        "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\">",
        escape(&case.name),
        escape(&case.area),
        seconds(case.duration_ms)
    );
    let reason = case.reason.as_deref().unwrap_or("");
    match case.status {
        Status::Passed => {}
        Status::Failed => {
            let _ = writeln!(
                xml,
                "      <failure message=\"{}\" type=\"nonconformance\">{}</failure>",
                escape(first_line(reason)),
                escape(reason)
            );
        }
        Status::Skipped => {
            let _ = writeln!(xml, "      <skipped message=\"{}\"/>", escape(reason));
        }
    }
    let mut out = format!("rules: {}", case.rules.join(", "));
    if !case.deviations.is_empty() {
        let _ = write!(out, "\ndeviations from Kafka: {}", case.deviations.join(", "));
    }
    if let Some(authority) = &case.authority {
        let _ = write!(out, "\nauthority: {authority}");
    }
    let _ = writeln!(xml, "      <system-out>{}</system-out>", escape(&out));
    xml.push_str("    </testcase>\n");
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Seconds with three decimals: the schema's time pattern allows no more.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Text as XML attribute or element content. Characters XML 1.0 cannot carry at all (most
/// control characters) become U+FFFD, so that a reason quoting raw bytes keeps the file valid.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn one_testcase_per_case_with_area_as_classname() {
        let xml = render(&sample::results());
        assert_eq!(xml.matches("<testcase ").count(), 3);
        assert!(xml.contains("<testcase name=\"produce_then_fetch\" classname=\"wire\" time=\"1.234\">"));
        assert!(xml.contains(
            "<testsuites name=\"kafka-iggy conformance (gateway profile, embedded)\" tests=\"3\" failures=\"1\""
        ));
    }

    #[test]
    fn rules_are_properties_and_skip_reasons_are_skipped_messages() {
        let xml = render(&sample::results());
        assert!(xml.contains("<property name=\"group_commit.rules\" value=\"MAP-KEY-1 MAP-VALUE-2\"/>"));
        assert!(xml.contains("<property name=\"produce_then_fetch.deviations\" value=\"MAP-HEADER-1\"/>"));
        assert!(xml.contains("<skipped message=\"needs a backend handle\"/>"));
    }

    #[test]
    fn the_authority_is_a_property_and_in_the_output_of_each_case() {
        let xml = render(&sample::results());
        assert!(xml.contains(
            "<property name=\"produce_then_fetch.authority\" value=\"KIP-82 &lt;headers&gt; &amp; &quot;order&quot;\"/>"
        ));
        assert!(xml.contains("authority: KIP-82 &lt;headers&gt; &amp; &quot;order&quot;</system-out>"));
    }

    #[test]
    fn failure_text_is_escaped_and_its_first_line_is_the_message() {
        let xml = render(&sample::results());
        assert!(xml.contains(
            "<failure message=\"want &lt;1&gt; &amp; &quot;2&quot; | got &apos;x&apos;\" type=\"nonconformance\">want &lt;1&gt; &amp; &quot;2&quot; | got &apos;x&apos;&#10;second line</failure>"
        ));
    }

    #[test]
    fn control_characters_cannot_break_the_document() {
        assert_eq!(escape("a\u{0}b\u{1b}c"), "a\u{FFFD}b\u{FFFD}c");
    }

    #[test]
    fn times_have_at_most_three_decimals() {
        assert_eq!(seconds(0), "0.000");
        assert_eq!(seconds(61_005), "61.005");
    }
}
