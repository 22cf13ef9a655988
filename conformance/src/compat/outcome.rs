//! Reading what one run of librdkafka's `test-runner` says about each of its entries: the
//! summary table it prints at the end, or, when it was killed before that, the per-test markers
//! and failure lines it printed along the way.

use std::time::Duration;

/// How one entry ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Passed,
    Failed,
    /// The test decided it could not run here (`TEST_SKIP`), or the runner filtered it.
    Skipped,
    /// On the tier's not-applicable list; see `not_applicable`.
    NotApplicable,
    /// Still running when the time limit killed the runner.
    TimedOut,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::NotApplicable => "not applicable",
            Status::TimedOut => "timed out",
        }
    }
}

/// One entry's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub name: String,
    pub status: Status,
    pub duration: Duration,
    /// The first failure line, the skip reason, or why it is not applicable; empty on a pass.
    pub detail: String,
}

/// What the runner's output says about `name`. `timed_out`: the runner was killed at the time
/// limit, after `elapsed`.
pub fn outcome(log: &str, name: &str, timed_out: bool, elapsed: Duration) -> Outcome {
    let log = strip_ansi(log);
    let (status, duration, detail) = if let Some(row) = summary_row(&log, name) {
        row
    } else if let Some(status) = marker(&log, name) {
        (status, elapsed, first_failure(&log, name).unwrap_or_default())
    } else if let Some(line) = first_failure(&log, name) {
        // A fatal assertion aborts the runner before its markers and summary.
        (Status::Failed, elapsed, line)
    } else if timed_out {
        let detail = if log.contains(&format!("Running test {name} ")) {
            "still running at the time limit".to_string()
        } else {
            "not reached before the time limit".to_string()
        };
        (Status::TimedOut, elapsed, detail)
    } else if log.contains(&format!("Running test {name} ")) {
        (
            Status::Failed,
            elapsed,
            "the runner ended before the test finished".to_string(),
        )
    } else {
        // The runner filters some entries silently (a scenario or flag it was not given).
        (
            Status::Skipped,
            Duration::ZERO,
            "not run by the test runner".to_string(),
        )
    };
    let detail = if status == Status::Failed && detail.is_empty() {
        "failed without a failure line".to_string()
    } else {
        detail
    };
    Outcome {
        name: name.to_string(),
        status,
        duration,
        // One line: reasons the runner prints can carry line breaks.
        detail: detail.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// The runner's summary row: `| 0012_produce_consume | PASSED | 1.234s | reason`.
fn summary_row(log: &str, name: &str) -> Option<(Status, Duration, String)> {
    log.lines().find_map(|line| {
        let cells: Vec<&str> = line.strip_prefix('|')?.splitn(4, '|').collect();
        if cells.len() < 4 || cells[0].trim() != name {
            return None;
        }
        let status = match cells[1].trim() {
            "PASSED" => Status::Passed,
            "FAILED" | "RUNNING" => Status::Failed,
            "SKIPPED" | "DNS" => Status::Skipped,
            _ => return None,
        };
        let seconds: f64 = cells[2].trim().trim_end_matches('s').parse().ok()?;
        let mut detail = cells[3].trim().to_string();
        if status == Status::Failed && detail.is_empty() {
            detail = first_failure(log, name).unwrap_or_default();
        }
        Some((status, Duration::from_secs_f64(seconds.max(0.0)), detail))
    })
}

/// `================= Test <name> PASSED =================` and its siblings.
fn marker(log: &str, name: &str) -> Option<Status> {
    [
        ("PASSED", Status::Passed),
        ("FAILED", Status::Failed),
        ("SKIPPED", Status::Skipped),
    ]
    .into_iter()
    .find(|(word, _)| log.contains(&format!("Test {name} {word}")))
    .map(|(_, status)| status)
}

/// The line after the first `### Test "<name>..." failed at ...###` header.
fn first_failure(log: &str, name: &str) -> Option<String> {
    let header = format!("### Test \"{name}");
    let mut lines = log.lines();
    lines.find(|l| l.contains(&header) && l.contains("failed at"))?;
    lines.next().map(|l| l.trim().to_string())
}

/// Removes the terminal colour sequences (`ESC [ ... m`) the runner prints.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FINISHED: &str = "\
[0012_produce_consume / 1.2s] ================= Running test 0012_produce_consume =================
\u{1b}[31m### Test \"0099_commit_metadata\" failed at 0099.c:42:do_commit() at Tue: ###
commit failed: Broker: Offset out of range
TEST 20261201 (bare, scenario default) SUMMARY
#==================================================================#
|\u{1b}[32m 0012_produce_consume                     |     PASSED |   1.234s \u{1b}[0m|
|\u{1b}[31m 0099_commit_metadata                     |     FAILED |   0.500s \u{1b}[0m|\u{1b}[31m do_commit():42: commit failed: Broker: Offset out of range\u{1b}[0m
|\u{1b}[36m 0052_msg_timestamps                      |    SKIPPED |   0.001s \u{1b}[0m|\u{1b}[36m needs LogAppendTime\u{1b}[0m
";

    #[test]
    fn reads_the_summary_rows() {
        let d = Duration::from_secs(9);
        let passed = outcome(FINISHED, "0012_produce_consume", false, d);
        assert_eq!(
            (passed.status, passed.duration),
            (Status::Passed, Duration::from_millis(1234))
        );
        let failed = outcome(FINISHED, "0099_commit_metadata", false, d);
        assert_eq!(failed.status, Status::Failed);
        assert!(failed.detail.contains("Offset out of range"), "{}", failed.detail);
        assert!(!failed.detail.contains('\u{1b}'));
        let skipped = outcome(FINISHED, "0052_msg_timestamps", false, d);
        assert_eq!(
            (skipped.status, skipped.detail.as_str()),
            (Status::Skipped, "needs LogAppendTime")
        );
    }

    #[test]
    fn a_killed_run_is_read_from_markers_and_failure_lines() {
        let log = "\
================= Running test 0045_a =================
================= Test 0045_a PASSED =================
================= Running test 0045_b =================
### Test \"0045_b (sub)\" failed at x.c:1:f() at now: ###
sub: f():1: boom
================= Test 0045_b FAILED =================
================= Running test 0045_c =================
";
        let d = Duration::from_secs(60);
        assert_eq!(outcome(log, "0045_a", true, d).status, Status::Passed);
        let b = outcome(log, "0045_b", true, d);
        assert_eq!((b.status, b.detail.as_str()), (Status::Failed, "sub: f():1: boom"));
        let c = outcome(log, "0045_c", true, d);
        assert_eq!(
            (c.status, c.detail.as_str()),
            (Status::TimedOut, "still running at the time limit")
        );
        assert_eq!(outcome(log, "0045_d", true, d).status, Status::TimedOut);
        assert_eq!(outcome(log, "0045_d", false, d).status, Status::Skipped);
        let c = outcome(log, "0045_c", false, d);
        assert_eq!(
            (c.status, c.detail.as_str()),
            (Status::Failed, "the runner ended before the test finished")
        );
    }

    #[test]
    fn an_aborted_run_fails_the_test_with_its_failure_line() {
        let log = "\
================= Running test 0011_a =================
### Test \"0011_a (sub:629)\" failed at 0011.c:718:sub() at now: ###
Test assertion failed: \"n == 10\":
test-runner: test.c:7488: test_fail0: Assertion `0' failed.
";
        let a = outcome(log, "0011_a", false, Duration::from_secs(3));
        assert_eq!(
            (a.status, a.detail.as_str()),
            (Status::Failed, "Test assertion failed: \"n == 10\":")
        );
    }
}
