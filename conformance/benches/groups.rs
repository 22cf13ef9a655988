//! `make bench`, group settle and rebalance (docs/performance-history.md, "Group settle
//! and rebalance"): eight librdkafka consumers subscribe to one 16-partition topic through a gateway
//! in process on the embedded backend, under the classic protocol (cooperative-sticky and range
//! assignors) and the consumer protocol (KIP-848, the coordinator's `uniform` assignor). For each
//! run it measures the time from the first subscribe until the eight members hold a disjoint
//! assignment covering every partition (settle), and from one member's close until the other
//! seven cover every partition again (rebalance); how many partitions changed owner; and how
//! many partitions a surviving member kept yet was told to revoke during the rebalance (the
//! classic eager protocol's stop-the-world). Prints medians and ranges; asserts nothing. Every
//! phase has a deadline, so a run stops by itself; a phase past it is reported as such.

use clap::Parser;
use kafka_iggy_conformance::endpoint::LocalGateway;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "How long a group of 8 takes to settle, and to rebalance when one leaves")]
struct Args {
    /// Runs per row; the table shows their median and range.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[arg(long, default_value_t = 8)]
    members: usize,
    #[arg(long, default_value_t = 16)]
    partitions: i32,
    /// A phase (settle, rebalance) not done by then is reported as timed out.
    #[arg(long, default_value_t = 120)]
    phase_deadline_s: u64,
    /// How long the settled group runs before one member leaves. At 0 the leave comes at once,
    /// when every member has just joined and restarted its heartbeat timer (the slowest phase
    /// for learning of the leave) and librdkafka's one-JoinGroup-a-second interval still runs.
    #[arg(long, default_value_t = 0)]
    hold_ms: u64,
    /// Only the rows whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    rows: Vec<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One configuration of the table: a protocol, an assignor and the client's timing settings.
struct Row {
    name: &'static str,
    /// Client settings on top of the common ones.
    settings: &'static [(&'static str, &'static str)],
    /// What sets the interval at which a member learns the group changed.
    interval: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        name: "classic cooperative-sticky, defaults",
        settings: &[
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "cooperative-sticky"),
        ],
        interval: "heartbeat.interval.ms 3000 (client default)",
    },
    Row {
        name: "classic cooperative-sticky, heartbeat 100 ms",
        settings: &[
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("heartbeat.interval.ms", "100"),
        ],
        interval: "heartbeat.interval.ms 100",
    },
    Row {
        name: "classic range, defaults",
        settings: &[
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "range"),
        ],
        interval: "heartbeat.interval.ms 3000 (client default)",
    },
    Row {
        name: "classic range, heartbeat 100 ms",
        settings: &[
            ("group.protocol", "classic"),
            ("partition.assignment.strategy", "range"),
            ("heartbeat.interval.ms", "100"),
        ],
        interval: "heartbeat.interval.ms 100",
    },
    Row {
        name: "consumer uniform (interval is the server's)",
        settings: &[("group.protocol", "consumer"), ("group.remote.assignor", "uniform")],
        interval: "the coordinator's heartbeat_interval_ms 5000 (not the client's to choose)",
    },
];

/// Every revocation one member's rebalance callback saw, with when.
#[derive(Default)]
struct Revocations(Mutex<Vec<(Instant, Vec<i32>)>>);

struct MemberContext {
    revocations: Arc<Revocations>,
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let partitions = list.elements().iter().map(|e| e.partition()).collect();
            self.revocations
                .0
                .lock()
                .expect("lock")
                .push((Instant::now(), partitions));
        }
    }
}

/// What the monitor sees of one member: its assignment after its latest poll, and whether it
/// has been told to close, and has closed.
struct Member {
    assignment: Mutex<BTreeSet<i32>>,
    close: AtomicBool,
    closed: AtomicBool,
    revocations: Arc<Revocations>,
}

/// One run's figures; `None` for a phase past its deadline.
struct RunFigures {
    settle: Option<Duration>,
    rebalance: Option<Duration>,
    moved: usize,
    kept_but_revoked: usize,
}

fn main() {
    // LIMIT-HEAP-1: this process hosts the gateway, so it runs with the gateway's malloc settings.
    println!("{}", kafka_iggy_gateway::heap_tuning::tune_heap().describe());
    let args = Args::parse();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let gateway = runtime.block_on(LocalGateway::start()).expect("gateway");
    let bootstrap = gateway.endpoint.bootstrap.clone();
    let topic = "groups-bench";
    runtime.block_on(async {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .expect("admin");
        let created = admin
            .create_topics(
                &[NewTopic::new(topic, args.partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await
            .expect("create topics");
        for result in created {
            result.expect("topic created");
        }
    });
    println!(
        "groups bench: {} members, one topic of {} partitions, gateway in process on the embedded backend, \
         librdkafka {}; {} runs per row; one member leaves {} ms after the group settles; load {}",
        args.members,
        args.partitions,
        rdkafka::util::get_rdkafka_version().1,
        args.runs,
        args.hold_ms,
        load()
    );
    let deadline = Duration::from_secs(args.phase_deadline_s);
    let mut table = Vec::new();
    let mut group_number = 0;
    for row in ROWS {
        if !args.rows.is_empty() && !args.rows.iter().any(|r| row.name.contains(r.as_str())) {
            continue;
        }
        let mut figures = Vec::new();
        for run in 0..args.runs {
            group_number += 1;
            let group = format!("groups-bench-{}-{group_number}", std::process::id());
            let f = one_run(&bootstrap, topic, &group, row, &args, deadline);
            println!(
                "  {:<46} run {}: settle {}, rebalance {}, moved {}, kept but revoked {}",
                row.name,
                run + 1,
                shown(f.settle),
                shown(f.rebalance),
                f.moved,
                f.kept_but_revoked
            );
            figures.push(f);
        }
        table.push((row, figures));
    }
    println!();
    println!(
        "| row | settle s, median (range) | rebalance after one leaves s, median (range) | partitions moved | kept partitions revoked | interval |"
    );
    println!("|---|--:|--:|--:|--:|---|");
    for (row, figures) in &table {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row.name,
            summary(figures.iter().map(|f| f.settle).collect()),
            summary(figures.iter().map(|f| f.rebalance).collect()),
            range_of(figures.iter().map(|f| f.moved).collect()),
            range_of(figures.iter().map(|f| f.kept_but_revoked).collect()),
            row.interval
        );
    }
    println!("load at the end: {}", load());
    runtime.block_on(gateway.stop());
}

/// Eight members subscribe at once; the monitor times the settle, closes the last member and
/// times the rebalance; then the rest close.
fn one_run(bootstrap: &str, topic: &str, group: &str, row: &Row, args: &Args, deadline: Duration) -> RunFigures {
    let members: Vec<Arc<Member>> = (0..args.members)
        .map(|_| {
            Arc::new(Member {
                assignment: Mutex::new(BTreeSet::new()),
                close: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                revocations: Arc::new(Revocations::default()),
            })
        })
        .collect();
    // Each member's consumer is created before the clock starts; the barrier releases the
    // subscribes together, and the monitor's clock starts as it does.
    let start = Arc::new(Barrier::new(args.members + 1));
    let threads: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, member)| {
            let member = member.clone();
            let start = start.clone();
            let mut config = ClientConfig::new();
            config
                .set("bootstrap.servers", bootstrap)
                .set("group.id", group)
                .set("client.id", format!("groups-bench-{i}"))
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest");
            for (key, value) in row.settings {
                config.set(*key, *value);
            }
            let topic = topic.to_string();
            std::thread::spawn(move || {
                let consumer: BaseConsumer<MemberContext> = config
                    .create_with_context(MemberContext {
                        revocations: member.revocations.clone(),
                    })
                    .expect("consumer");
                start.wait();
                consumer.subscribe(&[&topic]).expect("subscribe");
                while !member.close.load(Ordering::Acquire) {
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(20)) {
                        eprintln!("groups bench: member {i}: {e}");
                    }
                    let held: BTreeSet<i32> = consumer
                        .assignment()
                        .map(|list| list.elements().iter().map(|e| e.partition()).collect())
                        .unwrap_or_default();
                    *member.assignment.lock().expect("lock") = held;
                }
                // Dropping the consumer closes it: it leaves the group (LeaveGroup, or a
                // heartbeat with epoch -1) and serves its last rebalance callbacks.
                drop(consumer);
                member.assignment.lock().expect("lock").clear();
                member.closed.store(true, Ordering::Release);
            })
        })
        .collect();

    start.wait();
    let started = Instant::now();
    let all: Vec<usize> = (0..args.members).collect();
    let settle = wait_for_cover(&members, &all, args.partitions, started, deadline);
    let leaver = args.members - 1;
    let rest: Vec<usize> = (0..leaver).collect();
    let mut rebalance = None;
    let mut moved = 0;
    let mut kept_but_revoked = 0;
    if settle.is_some() {
        // Not synchronisation: the group is left to run as it would between changes.
        std::thread::sleep(Duration::from_millis(args.hold_ms));
        let before = owners(&members, &all);
        let left = Instant::now();
        members[leaver].close.store(true, Ordering::Release);
        rebalance = wait_for_cover(&members, &rest, args.partitions, left, deadline);
        if rebalance.is_some() {
            let after = owners(&members, &rest);
            moved = (0..args.partitions).filter(|p| before.get(p) != after.get(p)).count();
            for &m in &rest {
                let kept: BTreeSet<i32> = (0..args.partitions)
                    .filter(|p| before.get(p) == Some(&m) && after.get(p) == Some(&m))
                    .collect();
                let revoked: BTreeSet<i32> = members[m]
                    .revocations
                    .0
                    .lock()
                    .expect("lock")
                    .iter()
                    .filter(|(at, _)| *at >= left)
                    .flat_map(|(_, ps)| ps.iter().copied())
                    .collect();
                kept_but_revoked += kept.intersection(&revoked).count();
            }
        }
    }
    for member in &members {
        member.close.store(true, Ordering::Release);
    }
    for thread in threads {
        thread.join().expect("a member thread");
    }
    RunFigures {
        settle,
        rebalance,
        moved,
        kept_but_revoked,
    }
}

/// Waits until the members named hold disjoint, non-empty assignments covering every
/// partition; the time since `from`, or `None` past `deadline`. The monitor looks every
/// millisecond: the figures are seconds.
fn wait_for_cover(
    members: &[Arc<Member>],
    which: &[usize],
    partitions: i32,
    from: Instant,
    deadline: Duration,
) -> Option<Duration> {
    loop {
        if covers(members, which, partitions) {
            return Some(from.elapsed());
        }
        if from.elapsed() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn covers(members: &[Arc<Member>], which: &[usize], partitions: i32) -> bool {
    let mut seen = BTreeSet::new();
    for &m in which {
        let held = members[m].assignment.lock().expect("lock");
        if held.is_empty() {
            return false;
        }
        for p in held.iter() {
            if !seen.insert(*p) {
                return false;
            }
        }
    }
    seen.len() == partitions as usize && seen.iter().all(|p| (0..partitions).contains(p))
}

fn owners(members: &[Arc<Member>], which: &[usize]) -> BTreeMap<i32, usize> {
    let mut out = BTreeMap::new();
    for &m in which {
        for p in members[m].assignment.lock().expect("lock").iter() {
            out.insert(*p, m);
        }
    }
    out
}

fn shown(d: Option<Duration>) -> String {
    d.map_or("timed out".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

/// The median and range of the phases that finished, and how many did not.
fn summary(mut times: Vec<Option<Duration>>) -> String {
    let missing = times.iter().filter(|t| t.is_none()).count();
    times.retain(Option::is_some);
    let mut secs: Vec<f64> = times.into_iter().flatten().map(|d| d.as_secs_f64()).collect();
    if secs.is_empty() {
        return "timed out".into();
    }
    secs.sort_by(f64::total_cmp);
    let median = secs[secs.len() / 2];
    let mut out = format!("{median:.2} ({:.2}–{:.2})", secs[0], secs[secs.len() - 1]);
    if missing > 0 {
        out.push_str(&format!(", {missing} timed out"));
    }
    out
}

fn range_of(mut counts: Vec<usize>) -> String {
    counts.sort_unstable();
    match (counts.first(), counts.last()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        _ => "-".into(),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
