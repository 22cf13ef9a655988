//! The tier's reports: a Markdown table, a JUnit XML file (one testcase per test), and the
//! closing line with the totals.

use super::outcome::{Outcome, Status};
use std::fmt::Write as _;

/// Counts by status.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub not_applicable: usize,
    pub timed_out: usize,
}

impl Totals {
    pub fn of(outcomes: &[Outcome]) -> Self {
        let mut t = Totals::default();
        for o in outcomes {
            match o.status {
                Status::Passed => t.passed += 1,
                Status::Failed => t.failed += 1,
                Status::Skipped => t.skipped += 1,
                Status::NotApplicable => t.not_applicable += 1,
                Status::TimedOut => t.timed_out += 1,
            }
        }
        t
    }

    pub fn total(&self) -> usize {
        self.passed + self.failed + self.skipped + self.not_applicable + self.timed_out
    }

    /// Whether the run is a failure: a test failed or ran out of time.
    pub fn is_failure(&self) -> bool {
        self.failed + self.timed_out > 0
    }

    /// `12 passed, 1 failed, 2 skipped, 3 not applicable, 0 timed out of 18`.
    pub fn line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped, {} not applicable, {} timed out of {}",
            self.passed,
            self.failed,
            self.skipped,
            self.not_applicable,
            self.timed_out,
            self.total()
        )
    }
}

/// The Markdown report: a heading line about the run, the table, the totals.
pub fn markdown(title: &str, outcomes: &[Outcome]) -> String {
    let mut out =
        format!("# {title}\n\n| Test | Status | Duration | First failure line / reason |\n|---|---|---|---|\n");
    for o in outcomes {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} s | {} |",
            o.name,
            o.status.label(),
            o.duration.as_secs_f64(),
            o.detail.replace('|', "\\|").replace('\n', " ")
        );
    }
    let _ = writeln!(out, "\n{}", Totals::of(outcomes).line());
    out
}

/// The JUnit XML report: one `<testcase>` per test, `<failure>` for failed and timed-out tests,
/// `<skipped>` for skipped and not-applicable ones.
pub fn junit(suite: &str, outcomes: &[Outcome]) -> String {
    junit_with_class(suite, "librdkafka", outcomes)
}

/// [`junit`] with another `classname` on every testcase (the Java client tier's).
pub fn junit_with_class(suite: &str, classname: &str, outcomes: &[Outcome]) -> String {
    let t = Totals::of(outcomes);
    let seconds: f64 = outcomes.iter().map(|o| o.duration.as_secs_f64()).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" time=\"{seconds:.3}\">",
        escape(suite),
        t.total(),
        t.failed + t.timed_out,
        t.skipped + t.not_applicable
    );
    for o in outcomes {
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(classname),
            escape(&o.name),
            o.duration.as_secs_f64()
        );
        match o.status {
            Status::Passed => out.push_str("/>\n"),
            Status::Failed | Status::TimedOut => {
                let message = if o.status == Status::TimedOut {
                    format!("timed out: {}", o.detail)
                } else {
                    o.detail.clone()
                };
                let _ = writeln!(out, ">\n    <failure message=\"{}\"/>\n  </testcase>", escape(&message));
            }
            Status::Skipped | Status::NotApplicable => {
                let message = if o.status == Status::NotApplicable {
                    format!("not applicable: {}", o.detail)
                } else {
                    o.detail.clone()
                };
                let _ = writeln!(out, ">\n    <skipped message=\"{}\"/>\n  </testcase>", escape(&message));
            }
        }
    }
    out.push_str("</testsuite>\n");
    out
}

/// XML attribute escaping; control characters the runner may print are dropped, since XML 1.0
/// cannot carry them.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(name: &str, status: Status, detail: &str) -> Outcome {
        Outcome {
            name: name.into(),
            status,
            duration: Duration::from_millis(1500),
            detail: detail.into(),
        }
    }

    fn sample() -> Vec<Outcome> {
        vec![
            outcome("0012_produce_consume", Status::Passed, ""),
            outcome("0099_commit_metadata", Status::Failed, "expected <meta> & \"x\""),
            outcome("0052_msg_timestamps", Status::NotApplicable, "LogAppendTime"),
            outcome("0101_fetch_from_follower", Status::Skipped, "no racks"),
            outcome(
                "0045_subscribe_update",
                Status::TimedOut,
                "still running at the time limit",
            ),
        ]
    }

    #[test]
    fn totals_count_every_status_and_fail_on_failures_and_timeouts() {
        let t = Totals::of(&sample());
        assert_eq!(
            t.line(),
            "1 passed, 1 failed, 1 skipped, 1 not applicable, 1 timed out of 5"
        );
        assert!(t.is_failure());
        assert!(!Totals::of(&sample()[..1]).is_failure());
        assert!(!Totals::of(&sample()[2..4]).is_failure());
    }

    #[test]
    fn junit_has_one_escaped_testcase_per_test() {
        let xml = junit("compat", &sample());
        assert_eq!(xml.matches("<testcase ").count(), 5);
        assert!(xml.contains("tests=\"5\" failures=\"2\" skipped=\"2\""));
        assert!(xml.contains("<failure message=\"expected &lt;meta&gt; &amp; &quot;x&quot;\"/>"));
        assert!(xml.contains("<skipped message=\"not applicable: LogAppendTime\"/>"));
        assert!(xml.contains("<failure message=\"timed out: still running at the time limit\"/>"));
    }

    #[test]
    fn markdown_has_a_row_per_test_and_the_totals() {
        let md = markdown("run", &sample());
        assert!(md.contains("| 0012_produce_consume | passed | 1.5 s |  |"));
        assert!(md.contains("| 0052_msg_timestamps | not applicable | 1.5 s | LogAppendTime |"));
        assert!(md.trim_end().ends_with("of 5"));
    }
}
