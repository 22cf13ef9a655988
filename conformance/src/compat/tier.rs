//! The tier's loop: for each selected test number with a broker test that applies, one runner
//! invocation against the gateway the entries' scenario needs, then each entry's outcome.

use super::build::Runner;
use super::catalog::{Entry, Selection};
use super::not_applicable;
use super::outcome::{self, Outcome, Status};
use super::run::{self, Invocation};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The quick subset `make test` runs: short, stable tests covering produce and consume, null
/// and empty messages, headers, offset commits, consumer groups and metadata.
pub const QUICK: &str = "0001,0012,0013,0030,0035,0085";

/// Where the runner finds a gateway: `default` auto-creates topics (the runner's default
/// scenario expects that of a broker); `no_auto_create` does not, for the `noautocreate`
/// scenario's tests.
pub struct Gateways<'a> {
    pub default: &'a str,
    pub no_auto_create: &'a str,
}

/// Runs every selected broker test and returns one outcome per entry, in test order.
pub async fn run_all(
    runner: &Runner,
    entries: &[Entry],
    selection: &Selection,
    gateways: &Gateways<'_>,
    time_limit: Duration,
    work: &Path,
) -> anyhow::Result<Vec<Outcome>> {
    let mut by_number: BTreeMap<(u16, Option<String>), Vec<&Entry>> = BTreeMap::new();
    for entry in entries
        .iter()
        .filter(|e| e.is_broker_test() && selection.contains(e.number))
    {
        by_number
            .entry((entry.number, entry.scenario.clone()))
            .or_default()
            .push(entry);
    }
    let mut outcomes = Vec::new();
    for ((number, scenario), group) in by_number {
        let applies = group.iter().any(|e| not_applicable::lookup(&e.name).is_none());
        let finished = if applies {
            let bootstrap = match scenario.as_deref() {
                Some("noautocreate") => gateways.no_auto_create,
                _ => gateways.default,
            };
            let invocation = Invocation {
                runner,
                bootstrap,
                number,
                scenario: scenario.as_deref(),
                time_limit,
                work,
            };
            Some(run::run(&invocation).await?)
        } else {
            None
        };
        for entry in group {
            let result = match (not_applicable::lookup(&entry.name), &finished) {
                (Some(na), _) => Outcome {
                    name: entry.name.clone(),
                    status: Status::NotApplicable,
                    duration: Duration::ZERO,
                    detail: format!("{} ({})", na.reason, na.source),
                },
                (None, Some(f)) => outcome::outcome(&f.log, &entry.name, f.timed_out, f.elapsed),
                (None, None) => unreachable!("a number with an applicable entry is run"),
            };
            let log = finished
                .as_ref()
                .map(|f| format!(" [{}]", f.log_path.display()))
                .unwrap_or_default();
            println!(
                "compat: {:<48} {:<14} {:>7.1} s {}{}",
                result.name,
                result.status.label(),
                result.duration.as_secs_f64(),
                result.detail,
                if matches!(result.status, Status::Failed | Status::TimedOut) {
                    log
                } else {
                    String::new()
                }
            );
            outcomes.push(result);
        }
    }
    Ok(outcomes)
}
