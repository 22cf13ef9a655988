//! Where CPU-heavy request work runs (LIMIT-BLOCKING-1): decompressing, checking and mapping a
//! Produce request's batches can take milliseconds per megabyte (gzip, zstd), and on an async
//! worker that time is stolen from every other connection's ApiVersions and Heartbeat. So the
//! work goes to tokio's blocking threads, at most `decode_threads` requests at a time; further
//! requests wait their turn without holding a worker.
//!
//! `decode_threads = 0` decodes on the connection's own task instead: the simulations need it,
//! since work on another OS thread finishes at a moment no simulation seed decides
//! (PROTO-DETERMINISM-1).

use std::sync::Arc;
use tokio::sync::Semaphore;

/// Runs decode work off the async workers, a bounded number at a time.
#[derive(Debug)]
pub struct DecodePool {
    /// `None`: decode inline.
    slots: Option<Arc<Semaphore>>,
}

impl DecodePool {
    pub fn new(threads: usize) -> Self {
        Self {
            slots: (threads > 0).then(|| Arc::new(Semaphore::new(threads))),
        }
    }

    /// Runs `work` where it is (the connection's task) when `cheap`, otherwise as
    /// [`DecodePool::run`]. Cheap is work bounded to microseconds by what the caller read of
    /// its input (an uncompressed Produce of a few records): handing it to a blocking thread and
    /// back cost more than the work, two thread wake-ups a request (issue 53).
    pub async fn run_unless_cheap<T: Send + 'static>(
        &self,
        cheap: bool,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        if cheap {
            return work();
        }
        self.run(work).await
    }

    /// Runs `work` on a blocking thread once a slot is free, or inline when the pool has none.
    /// A panic in `work` is a bug; it resumes in the caller, as it would have inline.
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        let Some(slots) = &self.slots else {
            return work();
        };
        let _slot = slots.acquire().await.expect("the decode semaphore is never closed");
        match tokio::task::spawn_blocking(work).await {
            Ok(result) => result,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// On a one-thread runtime: work that ran on the runtime's only thread would block the test
    /// body that releases it, so each job would wait out its receive and report it.
    #[tokio::test]
    async fn limit_blocking_1_work_runs_off_the_async_workers_a_bounded_number_at_a_time() {
        let pool = Arc::new(DecodePool::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(std::sync::Mutex::new(released));
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (pool, running, most, released) = (pool.clone(), running.clone(), most.clone(), released.clone());
            tasks.push(tokio::spawn(async move {
                pool.run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let got = released.lock().unwrap().recv_timeout(Duration::from_secs(60));
                    running.fetch_sub(1, Ordering::SeqCst);
                    got.is_ok()
                })
                .await
            }));
        }
        // Two jobs hold both slots and block their threads; this task still runs.
        while running.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        for _ in 0..6 {
            release.send(()).unwrap();
        }
        for task in tasks {
            assert!(task.await.unwrap(), "a job blocked the runtime's thread");
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "at most decode_threads jobs at once");
    }

    #[tokio::test]
    async fn zero_threads_runs_inline() {
        let pool = DecodePool::new(0);
        let caller = std::thread::current().id();
        assert_eq!(pool.run(move || std::thread::current().id()).await, caller);
    }
}
