//! The run's reports, one format per file: JUnit XML for CI systems ([`junit`]), a Markdown
//! matrix for people ([`markdown`]), and JSON ([`RunResults`] as serde writes it) for tools and
//! for the conformance matrix in docs/conformance.md. Each renderer is a pure function of the
//! results; [`write`] is the one place that touches files.

pub mod junit;
pub mod markdown;

use crate::results::RunResults;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where to write each report; `None` writes none of that kind. Both command lines take these
/// options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReportPaths {
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a Markdown matrix (case, rules, status, duration, reason) here.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

/// A report format: a pure function of the results.
type Renderer = fn(&RunResults) -> String;

/// The JSON report.
pub fn json(results: &RunResults) -> String {
    let mut text = serde_json::to_string_pretty(results).expect("results serialize: plain strings and numbers");
    text.push('\n');
    text
}

/// Writes every report `paths` asks for, creating parent directories.
pub fn write(results: &RunResults, paths: &ReportPaths) -> anyhow::Result<()> {
    let renders: [(&Option<PathBuf>, Renderer); 3] = [
        (&paths.junit, junit::render),
        (&paths.json, json),
        (&paths.markdown, markdown::render),
    ];
    for (path, render) in renders {
        if let Some(path) = path {
            write_file(path, &render(results))?;
        }
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
pub(crate) mod sample {
    use crate::results::{CaseResult, RunResults, Status};

    /// A run with one case of each status, and text that needs escaping in every format.
    pub fn results() -> RunResults {
        let case = |name: &str, area: &str, status, reason: Option<&str>| CaseResult {
            name: name.into(),
            area: area.into(),
            rules: vec!["MAP-KEY-1".into(), "MAP-VALUE-2".into()],
            deviations: if status == Status::Passed {
                vec!["MAP-HEADER-1".into()]
            } else {
                vec![]
            },
            authority: Some("KIP-82 <headers> & \"order\"".into()),
            status,
            duration_ms: 1234,
            reason: reason.map(Into::into),
        };
        RunResults {
            target: "embedded".into(),
            endpoint: "127.0.0.1:9092".into(),
            profile: "gateway".into(),
            cases: vec![
                case("produce_then_fetch", "wire", Status::Passed, None),
                case(
                    "group_commit",
                    "group",
                    Status::Failed,
                    Some("want <1> & \"2\" | got 'x'\nsecond line"),
                ),
                case(
                    "needs_a_backend",
                    "migration",
                    Status::Skipped,
                    Some("needs a backend handle"),
                ),
            ],
        }
    }
}
