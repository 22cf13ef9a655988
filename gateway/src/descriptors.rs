//! The process's open-file limit and what it leaves for client connections
//! (LIMIT-DESCRIPTORS-1): at start the soft limit is raised to the hard one, and
//! `max_connections` is lowered below it by a reserve, so the gateway refuses or sheds
//! connections (LIMIT-CONNECTIONS-1) before the kernel fails its accepts and its own sockets.
//! [`connections_within`] is the pure decision; [`raise_open_file_limit`] the system call.

/// Descriptors kept for the gateway itself whatever its backend: the listeners, the metrics
/// listener's connections, log files, the runtime's epoll and event descriptors, TLS key files.
pub const BASE_RESERVE: u64 = 64;

/// The open-file limit after the raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before the raise.
    pub before: u64,
}

/// The most client connections `soft` descriptors carry once `reserve` are kept back, and at
/// most `max_connections`; at least 1, so a misjudged reserve still serves someone.
pub fn connections_within(max_connections: usize, soft: u64, reserve: u64) -> usize {
    let room = usize::try_from(soft.saturating_sub(reserve)).unwrap_or(usize::MAX);
    max_connections.min(room).max(1)
}

/// The ceiling Linux puts on a raise when the hard limit is unlimited (`fs.nr_open`'s
/// default); asking for more fails.
const UNLIMITED_RAISE: u64 = 1 << 20;

/// Raises RLIMIT_NOFILE's soft limit to its hard limit and reports both.
// `rlim_t` is u64 on Linux but not on every platform the gateway builds on.
#[allow(clippy::unnecessary_cast)]
pub fn raise_open_file_limit() -> std::io::Result<OpenFileLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = limit.rlim_cur as u64;
    let hard = limit.rlim_max as u64;
    let target = if limit.rlim_max == libc::RLIM_INFINITY {
        UNLIMITED_RAISE.max(before)
    } else {
        hard
    };
    if target > before {
        let raised = libc::rlimit {
            rlim_cur: target as libc::rlim_t,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given, which lives for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(OpenFileLimit {
        soft: target.max(before),
        hard,
        before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_descriptors_1_max_connections_is_clamped_below_the_limit_with_a_reserve() {
        // The common default soft limit of 1,024 cannot carry 4,096 connections.
        assert_eq!(connections_within(4_096, 1_024, BASE_RESERVE), 960);
        // A limit with room leaves max_connections as configured.
        assert_eq!(connections_within(4_096, 1_048_576, BASE_RESERVE + 2_056), 4_096);
        // A reserve larger than the limit still leaves one connection, never zero or a wrap.
        assert_eq!(connections_within(4_096, 32, BASE_RESERVE), 1);
        assert_eq!(connections_within(10, u64::MAX, 0), 10);
    }
}
