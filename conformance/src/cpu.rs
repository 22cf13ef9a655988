//! CPU time spent by each kind of thread of a process, and time it waited for a CPU, read from
//! Linux's `/proc/<pid>/task/<tid>/schedstat` (nanoseconds on a CPU, then nanoseconds runnable
//! on a run queue) and `comm` (the thread's name), so a bench can say where the machine's cores
//! went during a phase (librdkafka's threads, the gateway's runtime, the Iggy server's shards)
//! and how long each process was ready to run with no core free. Benches only; a platform
//! without `/proc` samples nothing.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// CPU time per thread of one process at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// (thread id) -> (thread name, ns on a CPU, ns waiting on a run queue).
    threads: HashMap<u32, (String, u64, u64)>,
}

/// A thread's kind: its name with digits removed, so `rdk:broker4242` and `rdk:broker1` are
/// one kind and `shard-0` and `shard-1` are another.
fn kind_of(comm: &str) -> String {
    let kind: String = comm.trim().chars().filter(|c| !c.is_ascii_digit()).collect();
    kind.trim_end_matches(['-', '_', ' ']).to_string()
}

impl Snapshot {
    /// The threads of `pid` (`None`: this process) now.
    pub fn take(pid: Option<u32>) -> Self {
        let root = match pid {
            Some(pid) => format!("/proc/{pid}/task"),
            None => "/proc/self/task".to_string(),
        };
        let mut threads = HashMap::new();
        let Ok(entries) = std::fs::read_dir(&root) else {
            return Self { threads };
        };
        for entry in entries.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let path = entry.path();
            let Some((on_cpu_ns, waiting_ns)) = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| parse_schedstat(&s))
            else {
                continue;
            };
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            threads.insert(tid, (comm.trim().to_string(), on_cpu_ns, waiting_ns));
        }
        Self { threads }
    }

    /// CPU time per thread kind since `earlier`. A thread that started since counts whole; one
    /// that ended since is not seen (its time is lost, so figures are lower bounds).
    pub fn since(&self, earlier: &Snapshot) -> CpuUse {
        CpuUse {
            ns_by_kind: self.grouped_since(earlier, kind_of),
            waiting_ns: self
                .threads
                .iter()
                .map(|(tid, (_, _, ns))| ns.saturating_sub(earlier.threads.get(tid).map_or(0, |t| t.2)))
                .sum(),
        }
    }

    /// CPU time per thread name since `earlier`, each thread apart (`shard-0` and `shard-1` are
    /// two entries), with the same lower-bound caveat as [`Snapshot::since`].
    pub fn by_thread_since(&self, earlier: &Snapshot) -> BTreeMap<String, u64> {
        self.grouped_since(earlier, str::to_string)
    }

    fn grouped_since(&self, earlier: &Snapshot, group_of: impl Fn(&str) -> String) -> BTreeMap<String, u64> {
        let mut by_group = BTreeMap::new();
        for (tid, (name, ns, _)) in &self.threads {
            let before = earlier.threads.get(tid).map_or(0, |(_, ns, _)| *ns);
            *by_group.entry(group_of(name)).or_insert(0) += ns.saturating_sub(before);
        }
        by_group
    }
}

/// The time on a CPU and the time waiting for one in a `schedstat` file's text; `None` when it
/// does not hold both.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// CPU time per thread kind over a phase, and the time all its threads together waited on a run
/// queue (ready, with no CPU free for them), in nanoseconds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CpuUse {
    pub ns_by_kind: BTreeMap<String, u64>,
    pub waiting_ns: u64,
}

impl CpuUse {
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.ns_by_kind.values().sum())
    }

    /// Time the threads spent ready to run with no CPU free, summed over threads.
    pub fn waiting(&self) -> Duration {
        Duration::from_nanos(self.waiting_ns)
    }

    /// Adds another phase's figures (or another process's) to these.
    pub fn add(&mut self, other: &CpuUse) {
        for (kind, ns) in &other.ns_by_kind {
            *self.ns_by_kind.entry(kind.clone()).or_insert(0) += ns;
        }
        self.waiting_ns += other.waiting_ns;
    }

    /// The kinds that used the most CPU, largest first, as `kind 1.23 s` (at most `n`).
    pub fn top(&self, n: usize) -> String {
        let mut kinds: Vec<(&String, &u64)> = self.ns_by_kind.iter().filter(|(_, ns)| **ns > 0).collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1));
        kinds
            .iter()
            .take(n)
            .map(|(kind, ns)| format!("{kind} {:.2} s", **ns as f64 / 1e9))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Snapshots of this process and of other processes taken together, with the machine's stolen
/// time then.
#[derive(Debug, Clone, Default)]
pub struct Processes {
    own: Snapshot,
    others: Vec<(u32, Snapshot)>,
    stolen_ticks: Option<u64>,
}

/// Linux's clock ticks per second for `/proc/stat` (`USER_HZ`), 100 on every platform Linux
/// runs on today.
const TICKS_PER_S: u64 = 100;

/// The time, over all CPUs, the hypervisor ran something else while this machine had work
/// (`/proc/stat`'s `steal`), in clock ticks; `None` without `/proc`.
fn stolen_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_stolen_ticks(stat.lines().next()?)
}

/// The `steal` field (the eighth number) of `/proc/stat`'s `cpu` line.
fn parse_stolen_ticks(cpu_line: &str) -> Option<u64> {
    let mut fields = cpu_line.split_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    fields.nth(7)?.parse().ok()
}

impl Processes {
    pub fn take(others: &[u32]) -> Self {
        Self {
            own: Snapshot::take(None),
            others: others.iter().map(|pid| (*pid, Snapshot::take(Some(*pid)))).collect(),
            stolen_ticks: stolen_ticks(),
        }
    }

    /// CPU time the hypervisor took from this machine since `earlier`, over all its CPUs: a
    /// phase whose threads waited for a CPU while little of this machine's own work ran lost
    /// its cores to the host, not to its neighbours here.
    pub fn stolen_since(&self, earlier: &Processes) -> Duration {
        match (self.stolen_ticks, earlier.stolen_ticks) {
            (Some(now), Some(then)) => Duration::from_millis(now.saturating_sub(then) * 1000 / TICKS_PER_S),
            _ => Duration::ZERO,
        }
    }

    /// CPU use since `earlier`: this process's, and the other processes' summed.
    pub fn since(&self, earlier: &Processes) -> (CpuUse, CpuUse) {
        let own = self.own.since(&earlier.own);
        let mut others = CpuUse::default();
        for (pid, now) in &self.others {
            if let Some((_, before)) = earlier.others.iter().find(|(p, _)| p == pid) {
                others.add(&now.since(before));
            }
        }
        (own, others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_kinds_drop_their_numbers() {
        assert_eq!(kind_of("rdk:broker4242\n"), "rdk:broker");
        assert_eq!(kind_of("shard-1"), "shard");
        assert_eq!(kind_of("tokio-runtime-w"), "tokio-runtime-w");
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let line = "cpu  938218 1230001 134351 8361202 6324 0 3793 30539 0 0";
        assert_eq!(parse_stolen_ticks(line), Some(30_539));
        assert_eq!(parse_stolen_ticks("cpu0 1 2 3 4 5 6 7 8 9 10"), None);
        assert_eq!(parse_stolen_ticks("cpu 1 2 3"), None);
    }

    #[test]
    fn schedstat_gives_time_on_a_cpu_then_time_waiting() {
        assert_eq!(parse_schedstat("2041475 9139 2\n"), Some((2_041_475, 9_139)));
        assert_eq!(parse_schedstat("2041475"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn busy_work_on_this_thread_is_counted() {
        let before = Snapshot::take(None);
        if before.threads.is_empty() {
            return; // no /proc here: nothing is sampled, by design
        }
        // The kernel adds a running thread's time to schedstat at its scheduler ticks, not as it
        // runs: one short burst was once read back as 0 ns (a fresh-clone CI run). So work in
        // bursts until the counter moves, up to a bound that takes seconds of CPU.
        let mut x = 0u64;
        let mut used = Snapshot::take(None).since(&before);
        for _ in 0..200 {
            for i in 0..5_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            used = Snapshot::take(None).since(&before);
            if used.total() > Duration::ZERO {
                break;
            }
        }
        assert!(used.total() > Duration::ZERO, "no CPU time counted: {used:?}");
    }
}
