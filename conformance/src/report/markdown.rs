//! The Markdown matrix: one row per case (area, case, rules, status, duration, reason), after a
//! line with the totals.

use crate::results::{RunResults, Status};
use std::fmt::Write as _;

/// The matrix for `results`.
pub fn render(results: &RunResults) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Conformance: {} profile, {} ({})\n",
        results.profile, results.target, results.endpoint
    );
    let _ = writeln!(
        md,
        "{} passed, {} failed, {} skipped\n",
        results.count(Status::Passed),
        results.count(Status::Failed),
        results.count(Status::Skipped)
    );
    md.push_str("| area | case | rules | status | duration | reason |\n|---|---|---|---|---|---|\n");
    for case in &results.cases {
        let mut rules = case.rules.join(", ");
        if !case.deviations.is_empty() {
            let _ = write!(rules, " (deviates: {})", case.deviations.join(", "));
        }
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} ms | {} |",
            cell(&case.area),
            case.name,
            cell(&rules),
            case.status.as_str(),
            case.duration_ms,
            cell(case.reason.as_deref().unwrap_or(""))
        );
    }
    md
}

/// Text that stays inside one table cell: pipes escaped, line breaks as `<br>`.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace("\r\n", "<br>").replace('\n', "<br>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn a_row_per_case_with_totals_first() {
        let md = render(&sample::results());
        assert!(md.contains("1 passed, 1 failed, 1 skipped"));
        assert!(md.contains(
            "| wire | `produce_then_fetch` | MAP-KEY-1, MAP-VALUE-2 (deviates: MAP-HEADER-1) | passed | 1234 ms |  |"
        ));
        assert!(md.contains(
            "| migration | `needs_a_backend` | MAP-KEY-1, MAP-VALUE-2 | skipped | 1234 ms | needs a backend handle |"
        ));
    }

    #[test]
    fn a_reason_cannot_break_the_table() {
        let md = render(&sample::results());
        assert!(md.contains("want <1> & \"2\" \\| got 'x'<br>second line"));
    }
}
