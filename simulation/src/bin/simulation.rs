//! `simulation`: runs the scenario catalogue. `list` names the scenarios; `run` plays one seed
//! and explains every anomaly; `sweep` plays a range of seeds on several threads (one turmoil
//! simulation per thread) and tabulates the anomalies, exiting non-zero when any seed broke a
//! rule; `bench` measures seeds per minute and simulated-to-wall time.

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kafka_iggy_simulation::checks::{check, render};
use kafka_iggy_simulation::history::{FaultKind, History};
use kafka_iggy_simulation::scenarios::{catalogue, find, Scenario};
use kafka_iggy_simulation::world::{run_world, RunOutput};
use std::io::IsTerminal;
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "simulation",
    about = "Deterministic simulations of Kafka clients, gateways and Iggy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every scenario with one line of what it shows.
    List,
    /// Plays one seed of a scenario and explains what happened.
    Run {
        scenario: String,
        /// Defaults to the scenario's committed seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Adds the request-level event log.
        #[arg(long)]
        trace: bool,
    },
    /// Plays a range of seeds and tabulates the anomalies by class.
    Sweep {
        scenario: String,
        /// A-B (inclusive) or one seed.
        #[arg(long, value_parser = parse_seeds)]
        seeds: RangeInclusive<u64>,
        /// Seeds played at once, one simulation per thread.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Writes the aggregate as JSON here.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// Seeds per minute and simulated-to-wall time of every scenario (or one).
    Bench {
        /// Seeds per scenario.
        #[arg(long, default_value_t = 200)]
        seeds: u64,
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        scenario: Option<String>,
    },
}

fn parse_seeds(text: &str) -> Result<RangeInclusive<u64>, String> {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    let a: u64 = a.trim().parse().map_err(|e| format!("{a}: {e}"))?;
    let b: u64 = b.trim().parse().map_err(|e| format!("{b}: {e}"))?;
    if a > b {
        return Err(format!("{a}-{b} is empty"));
    }
    Ok(a..=b)
}

fn scenario(name: &str) -> Result<Scenario, ExitCode> {
    find(name).ok_or_else(|| {
        eprintln!("no scenario {name}; `simulation list` names them");
        ExitCode::from(2)
    })
}

fn ms(us: u64) -> String {
    format!("{:>8.1} ms", us as f64 / 1000.0)
}

/// The fault timeline in simulated time; `fault_phase_limit_ms` tells why the faults stopped.
fn timeline(history: &History, fault_phase_limit_ms: Option<u64>) -> String {
    let mut faults = history.faults.clone();
    faults.sort_by_key(|f| (f.start_us, f.id));
    let mut out = String::new();
    for f in &faults {
        let what = match &f.kind {
            FaultKind::Partition { hop } => format!("partition {hop}"),
            FaultKind::Hold { hop } => format!("hold {hop} (delivered late)"),
            FaultKind::Delay { hop, extra_ms } => format!("delay {hop} by {extra_ms} ms"),
            FaultKind::RequestLost { hop, produce } => format!("request lost on {hop}{}", produce_of(produce)),
            FaultKind::ResponseLost { hop, produce } => {
                format!("response lost on {hop} after the write{}", produce_of(produce))
            }
            FaultKind::GatewayRestart { gateway } => format!("{gateway} restarted"),
            FaultKind::IggyRestart => "iggy restarted (data kept)".to_string(),
            FaultKind::IggyNodeCrash { node } => format!("{node} crashed (the primary)"),
            FaultKind::IggyNodeIsolated { node } => format!("{node} isolated (the primary)"),
            FaultKind::GatewayCrash { gateway } => format!("{gateway} crashed"),
        };
        let end = match f.end_us {
            Some(end) if end != f.start_us => format!(" until {}", ms(end).trim()),
            Some(_) => String::new(),
            None => " (never ended)".into(),
        };
        out.push_str(&format!("  {}  {what}{end}\n", ms(f.start_us)));
    }
    if let Some(healed) = history.healed_us {
        let why = match fault_phase_limit_ms {
            Some(limit) if healed >= limit * 1_000 => "fault phase at its limit",
            _ => "producers done",
        };
        out.push_str(&format!("  {}  {why}: network healed, liveness phase\n", ms(healed)));
    }
    if faults.is_empty() {
        out.push_str("  no fault\n");
    }
    out
}

fn produce_of(produce: &Option<(usize, u32)>) -> String {
    produce.map_or(String::new(), |(r, a)| format!(" (request {r} attempt {a})"))
}

fn run(name: &str, seed: Option<u64>, trace: bool) -> ExitCode {
    let scenario = match scenario(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let seed = seed.unwrap_or(scenario.seed);
    let started = Instant::now();
    let output = run_world(scenario.name, &scenario.config, seed, trace);
    let wall = started.elapsed();
    println!("scenario {} seed {seed}", scenario.name);
    println!("{}\n", scenario.explanation);
    println!("configuration:");
    let config = serde_json::to_string_pretty(&scenario.config).expect("a configuration serialises");
    for line in config.lines() {
        println!("  {line}");
    }
    let h = &output.history;
    let attempts: usize = h.produces.iter().map(|p| p.attempts.len()).sum();
    let acked = h.produces.iter().filter(|p| p.acked().is_some()).count();
    println!(
        "\nran {} ms simulated in {:.0} ms: {} Produce requests ({acked} acknowledged) in {attempts} attempts; {} records stored",
        output.simulated_ms,
        wall.as_secs_f64() * 1000.0,
        h.produces.len(),
        h.backend.iter().map(|l| l.records.len()).sum::<usize>()
    );
    println!(
        "\nfault timeline (simulated time):\n{}",
        timeline(h, scenario.config.fault_phase_limit_ms)
    );
    if trace {
        println!("event log:");
        for e in &output.events {
            println!("  {:>8} ms  {:<12} {}", e.at_ms, e.source, e.what);
        }
        println!();
    }
    if let Some(why) = &output.unfinished {
        println!("liveness: the run did not finish: {why}");
    }
    let verdict = check(h);
    print!("{}", render::report(h, &verdict));
    println!(
        "replay: cargo run --release -p kafka-iggy-simulation --bin simulation -- run {} --seed {seed}{}",
        scenario.name,
        if trace { " --trace" } else { "" }
    );
    if verdict.fails() || output.unfinished.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What a sweep's threads return: the aggregate, unfinished seeds, and simulated ms.
struct Sweep {
    aggregate: render::Aggregate,
    unfinished: Vec<u64>,
    simulated_ms: u64,
}

/// Plays `seeds` of `scenario` on `jobs` threads; `tick` is called after every seed.
fn sweep_seeds(
    scenario: &Scenario,
    seeds: RangeInclusive<u64>,
    jobs: usize,
    tick: &(dyn Fn(u64, &RunOutput) + Sync),
) -> Sweep {
    let next = AtomicU64::new(*seeds.start());
    let end = *seeds.end();
    let results: Vec<Sweep> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Sweep {
                        aggregate: render::Aggregate::new(scenario.name),
                        unfinished: Vec::new(),
                        simulated_ms: 0,
                    };
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed > end {
                            return mine;
                        }
                        let output = run_world(scenario.name, &scenario.config, seed, false);
                        let verdict = check(&output.history);
                        mine.aggregate.add(seed, &verdict);
                        if output.unfinished.is_some() {
                            mine.unfinished.push(seed);
                        }
                        mine.simulated_ms += output.simulated_ms;
                        tick(seed, &output);
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a sweep thread")).collect()
    });
    let mut all = Sweep {
        aggregate: render::Aggregate::new(scenario.name),
        unfinished: Vec::new(),
        simulated_ms: 0,
    };
    for r in results {
        all.aggregate.merge(r.aggregate);
        all.unfinished.extend(r.unfinished);
        all.simulated_ms += r.simulated_ms;
    }
    all.unfinished.sort_unstable();
    all
}

fn sweep(name: &str, seeds: RangeInclusive<u64>, jobs: usize, json: Option<std::path::PathBuf>) -> ExitCode {
    let scenario = match scenario(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let total = seeds.end() - seeds.start() + 1;
    let done = Arc::new(AtomicU64::new(0));
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} seeds, {per_sec}, eta {eta}")
                .expect("a progress template")
                .progress_chars("=> "),
        );
        bar.set_prefix(scenario.name);
        bar
    });
    let step = (total / 20).max(1);
    let started = Instant::now();
    let result = sweep_seeds(&scenario, seeds.clone(), jobs, &|_, _| {
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        match &bar {
            Some(bar) => bar.inc(1),
            None if n.is_multiple_of(step) || n == total => {
                eprintln!(
                    "{}: {n}/{total} seeds, {:.1} s",
                    scenario.name,
                    started.elapsed().as_secs_f64()
                )
            }
            None => {}
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    print!("{}", result.aggregate.table());
    if !result.unfinished.is_empty() {
        println!(
            "liveness: {} seeds did not finish within the simulated limit: {:?}",
            result.unfinished.len(),
            &result.unfinished[..result.unfinished.len().min(10)]
        );
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{total} seeds in {wall:.1} s with {jobs} job(s): {:.0} seeds/min; {:.0} s simulated",
        total as f64 * 60.0 / wall,
        result.simulated_ms as f64 / 1000.0
    );
    if let Some(first) = result.aggregate.failing_seeds.first() {
        println!(
            "replay the first failing seed: cargo run --release -p kafka-iggy-simulation --bin simulation -- run {} --seed {first}",
            scenario.name
        );
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&result.aggregate).expect("an aggregate serialises");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if result.aggregate.fails() || !result.unfinished.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(seeds: u64, jobs: usize, only: Option<String>) -> ExitCode {
    println!(
        "{:<24} {:>6} {:>9} {:>12} {:>14}",
        "scenario", "seeds", "wall s", "seeds/min", "simulated/wall"
    );
    for scenario in catalogue() {
        if only.as_deref().is_some_and(|o| o != scenario.name) {
            continue;
        }
        let started = Instant::now();
        let result = sweep_seeds(&scenario, 1..=seeds, jobs, &|_, _| {});
        let wall = started.elapsed().as_secs_f64();
        println!(
            "{:<24} {:>6} {:>9.1} {:>12.0} {:>13.0}x",
            scenario.name,
            seeds,
            wall,
            seeds as f64 * 60.0 / wall,
            result.simulated_ms as f64 / 1000.0 / wall
        );
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => {
            for s in catalogue() {
                println!("{:<24} {}", s.name, s.summary);
            }
            ExitCode::SUCCESS
        }
        Command::Run { scenario, seed, trace } => run(&scenario, seed, trace),
        Command::Sweep {
            scenario,
            seeds,
            jobs,
            json,
        } => sweep(&scenario, seeds, jobs, json),
        Command::Bench { seeds, jobs, scenario } => bench(seeds, jobs, scenario),
    }
}
