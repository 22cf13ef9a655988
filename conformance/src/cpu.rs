//! CPU time spent by each kind of thread of a process, read from Linux's
//! `/proc/<pid>/task/<tid>/schedstat` (nanoseconds on a CPU) and `comm` (the thread's name),
//! so a bench can say where the machine's cores went during a phase: librdkafka's threads, the
//! gateway's runtime, the Iggy server's shards. Benches only; a platform without `/proc`
//! samples nothing.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// CPU time per thread of one process at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// (thread id) -> (thread name, ns on a CPU).
    threads: HashMap<u32, (String, u64)>,
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
            let on_cpu_ns = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()));
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if let Some(ns) = on_cpu_ns {
                threads.insert(tid, (comm.trim().to_string(), ns));
            }
        }
        Self { threads }
    }

    /// CPU time per thread kind since `earlier`. A thread that started since counts whole; one
    /// that ended since is not seen (its time is lost, so figures are lower bounds).
    pub fn since(&self, earlier: &Snapshot) -> CpuUse {
        CpuUse {
            ns_by_kind: self.grouped_since(earlier, kind_of),
        }
    }

    /// CPU time per thread name since `earlier`, each thread apart (`shard-0` and `shard-1` are
    /// two entries), with the same lower-bound caveat as [`Snapshot::since`].
    pub fn by_thread_since(&self, earlier: &Snapshot) -> BTreeMap<String, u64> {
        self.grouped_since(earlier, str::to_string)
    }

    fn grouped_since(&self, earlier: &Snapshot, group_of: impl Fn(&str) -> String) -> BTreeMap<String, u64> {
        let mut by_group = BTreeMap::new();
        for (tid, (name, ns)) in &self.threads {
            let before = earlier.threads.get(tid).map_or(0, |(_, ns)| *ns);
            *by_group.entry(group_of(name)).or_insert(0) += ns.saturating_sub(before);
        }
        by_group
    }
}

/// CPU time per thread kind over a phase, in nanoseconds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CpuUse {
    pub ns_by_kind: BTreeMap<String, u64>,
}

impl CpuUse {
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.ns_by_kind.values().sum())
    }

    /// Adds another phase's figures (or another process's) to these.
    pub fn add(&mut self, other: &CpuUse) {
        for (kind, ns) in &other.ns_by_kind {
            *self.ns_by_kind.entry(kind.clone()).or_insert(0) += ns;
        }
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

/// Snapshots of this process and of other processes taken together.
#[derive(Debug, Clone, Default)]
pub struct Processes {
    own: Snapshot,
    others: Vec<(u32, Snapshot)>,
}

impl Processes {
    pub fn take(others: &[u32]) -> Self {
        Self {
            own: Snapshot::take(None),
            others: others.iter().map(|pid| (*pid, Snapshot::take(Some(*pid)))).collect(),
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
