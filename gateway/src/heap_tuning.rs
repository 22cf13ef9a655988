//! The process's malloc settings for the gateway's buffer sizes (LIMIT-HEAP-1). A Fetch builds
//! its record batch in a buffer of up to `max.partition.fetch.bytes` (1 MiB by default), the SDK
//! reads each Iggy poll answer into one of about that size, and a Produce request arrives in
//! chunks of 64 KiB to 1 MiB (LIMIT-INFLIGHT-1); all are freed within the request. glibc's
//! defaults give such a buffer a fresh mapping when it is over the mmap threshold, and trim the
//! heap's top back to the system once more than the trim threshold is free there, so the next
//! request's buffer faults its pages in and has them zeroed again. Measured on a fetch of 1 KiB
//! records through the gateway on Iggy, that was about a third of the gateway's CPU at the
//! median, up to half (docs/performance-history.md, "A standalone gateway's CPU").
//! [`gateway_sets_thresholds`] is the pure decision; [`tune_heap`] the call into glibc.

/// Allocations at least this large get a mapping of their own and give it back when freed:
/// above any buffer a default-sized request needs, below what would pin much memory in the heap.
pub const MMAP_THRESHOLD_BYTES: usize = 4 << 20;

/// Free heap at a heap's top past which glibc returns it to the system: several requests'
/// buffers, so a steady stream of Fetches reuses pages instead of faulting them in each time.
pub const TRIM_THRESHOLD_BYTES: usize = 64 << 20;

/// What [`tune_heap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapTuning {
    /// The thresholds above are set.
    Applied,
    /// `GLIBC_TUNABLES` sets malloc parameters: the operator's choice stands.
    LeftToTunables,
    /// Not glibc: its allocator is left as it is.
    Unsupported,
    /// glibc refused a setting; its defaults stay.
    Refused,
}

impl HeapTuning {
    /// A line for the start-up log.
    pub fn describe(self) -> String {
        match self {
            Self::Applied => format!(
                "malloc: mmap threshold {} MiB, trim threshold {} MiB (LIMIT-HEAP-1)",
                MMAP_THRESHOLD_BYTES >> 20,
                TRIM_THRESHOLD_BYTES >> 20
            ),
            Self::LeftToTunables => "malloc: as GLIBC_TUNABLES sets it (LIMIT-HEAP-1)".to_string(),
            Self::Unsupported => "malloc: not glibc, left as it is (LIMIT-HEAP-1)".to_string(),
            Self::Refused => "malloc: glibc refused the thresholds, its defaults stay (LIMIT-HEAP-1)".to_string(),
        }
    }
}

/// Whether the gateway sets its thresholds, given the process's `GLIBC_TUNABLES`: not when the
/// operator's tunables name any malloc parameter.
pub fn gateway_sets_thresholds(glibc_tunables: Option<&str>) -> bool {
    !glibc_tunables.is_some_and(|t| t.split(':').any(|setting| setting.trim().starts_with("glibc.malloc.")))
}

/// LIMIT-HEAP-1: sets glibc's mmap and trim thresholds for this process, unless the operator's
/// `GLIBC_TUNABLES` already sets malloc. Process-wide: a process hosting a gateway (a bench, a
/// test binary) calls it once, at start.
pub fn tune_heap() -> HeapTuning {
    if !gateway_sets_thresholds(std::env::var("GLIBC_TUNABLES").ok().as_deref()) {
        return HeapTuning::LeftToTunables;
    }
    set_thresholds()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> HeapTuning {
    let as_int = |bytes: usize| libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only changes the allocator's parameters, under its own lock; the values
    // are within what glibc accepts (the mmap threshold at most half its 64 MiB heap size).
    let set = unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, as_int(MMAP_THRESHOLD_BYTES)) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, as_int(TRIM_THRESHOLD_BYTES)) == 1
    };
    if set {
        HeapTuning::Applied
    } else {
        HeapTuning::Refused
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> HeapTuning {
    HeapTuning::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_heap_1_the_operators_malloc_tunables_stand() {
        assert!(gateway_sets_thresholds(None));
        assert!(gateway_sets_thresholds(Some("")));
        assert!(gateway_sets_thresholds(Some("glibc.pthread.rseq=0")));
        assert!(!gateway_sets_thresholds(Some("glibc.malloc.trim_threshold=131072")));
        assert!(!gateway_sets_thresholds(Some(
            "glibc.pthread.rseq=0:glibc.malloc.arena_max=1"
        )));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn limit_heap_1_glibc_takes_the_thresholds() {
        assert_eq!(set_thresholds(), HeapTuning::Applied);
    }
}
