//! The tokio runtime every async target runs on.

use tokio::runtime::{Builder, Runtime};

/// A current-thread runtime with paused time: a sleep or timeout with nothing else to do jumps
/// the clock forward at once, so long-polls, rebalance and session timeouts cost no real time
/// and every run is deterministic.
pub(crate) fn paused() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
}
