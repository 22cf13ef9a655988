//! A count of appends that wakes the Fetches waiting for it to move, in the order they began
//! waiting (PROTO-DETERMINISM-1).
//!
//! tokio's `watch` channel did this job until a sweep of seeds showed histories that differed
//! between runs of one seed: a `watch` receiver waits on one of eight queues picked by the
//! runtime's random numbers, which are seeded from the OS, and a send wakes the queues in turn,
//! so Fetches woken by one append ran in an order no seed decided. `Notify` keeps its waiters in
//! one list and wakes the oldest first.

use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct AppendSignal {
    generation: AtomicU64,
    moved: Notify,
}

impl AppendSignal {
    /// The count of appends so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Counts one append and wakes every waiter.
    pub fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.moved.notify_waiters();
    }

    /// Resolves once the count differs from `seen`.
    pub async fn changed_from(&self, seen: u64) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            // Registered before the count is read, so a bump in between is not missed.
            moved.as_mut().enable();
            if self.generation() != seen {
                return;
            }
            moved.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn a_count_that_already_moved_is_not_waited_for() {
        let signal = AppendSignal::default();
        signal.bump();
        signal.changed_from(0).await;
        assert_eq!(signal.generation(), 1);
    }

    /// The regression: with `watch`, the six waiters below woke in an order drawn from the
    /// runtime's OS-seeded random numbers, so a simulation seed did not decide its history.
    #[tokio::test]
    async fn proto_determinism_1_waiters_wake_in_the_order_they_began_waiting() {
        for _ in 0..20 {
            let signal = Arc::new(AppendSignal::default());
            let woken = Arc::new(Mutex::new(Vec::new()));
            let mut waiters = Vec::new();
            for i in 0..6 {
                let (signal, woken) = (signal.clone(), woken.clone());
                waiters.push(tokio::spawn(async move {
                    signal.changed_from(0).await;
                    woken.lock().unwrap().push(i);
                }));
                // Each waiter registers before the next is spawned.
                tokio::task::yield_now().await;
            }
            signal.bump();
            for waiter in waiters {
                waiter.await.unwrap();
            }
            assert_eq!(*woken.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        }
    }
}
