//! Where a paced produce run's latency went (docs/performance.md, the latency target): the
//! moments of the run its slowest records were due in, and librdkafka's own split of a record's
//! time into its queue, its output buffer and the broker's round trip. Figures for the benches,
//! never assertions about speed.
//!
//! A run of 200,000 records at 0.15 M rec/s lasts 1.3 s, so its p99 is decided by the slowest
//! 13 ms worth of records: one stall anywhere in the path moves it. Locating the tail in time,
//! and in the client's stages, tells one stall from a slower path.

use rdkafka::client::ClientContext;
use rdkafka::statistics::{Statistics, Window};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Width of the windows, by due time, that the tail is located in.
pub const TAIL_WINDOW_MS: u64 = 10;
/// The windows holding most tail records that a [`TailShape`] lists.
const WORST_WINDOWS: usize = 5;
/// Intervals of librdkafka statistics a [`ClientStats`] keeps: a latency run's produce phase
/// lasts seconds, emitted every [`STATS_INTERVAL_MS`].
const MAX_STATS_INTERVALS: usize = 10_000;
/// How often librdkafka emits its statistics in a latency run.
pub const STATS_INTERVAL_MS: u64 = 100;

/// One record of a paced run: when it was due, from the run's start, and how long after that it
/// was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timed {
    pub due: Duration,
    pub latency: Duration,
}

/// The `p` quantile (0..=1) of `sorted` in milliseconds, by nearest rank; NaN when empty.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[rank].as_secs_f64() * 1e3
}

/// Where in a run its tail (the records at or above its p99) was due.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailShape {
    /// Records at or above this latency are the tail: the run's p99.
    pub threshold_ms: f64,
    pub tail_records: usize,
    /// Windows of [`TAIL_WINDOW_MS`] holding at least one tail record, of all the run's windows.
    pub windows_with_tail: usize,
    pub windows: usize,
    /// The windows holding most tail records, most first (at most [`WORST_WINDOWS`]).
    pub worst: Vec<TailWindow>,
    /// The share of tail records in `worst`.
    pub share_in_worst: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailWindow {
    /// The window's start, from the run's start.
    pub start_ms: u64,
    pub tail_records: usize,
    /// The slowest record due in the window.
    pub max_ms: f64,
}

/// Locates the records of `records` at or above `threshold` in windows of [`TAIL_WINDOW_MS`] by
/// due time.
///
/// ```
/// use kafka_iggy_conformance::latency::{tail_shape, Timed};
/// use std::time::Duration;
/// let ms = |m| Duration::from_millis(m);
/// // Due at 0, 1, 12 and 13 ms; the two due after 10 ms waited out a stall.
/// let records = [(0, 6), (1, 6), (12, 30), (13, 29)].map(|(due, latency)| Timed { due: ms(due), latency: ms(latency) });
/// let shape = tail_shape(&records, ms(20));
/// assert_eq!((shape.tail_records, shape.windows_with_tail, shape.windows), (2, 1, 2));
/// assert_eq!((shape.worst[0].start_ms, shape.worst[0].tail_records, shape.worst[0].max_ms), (10, 2, 30.0));
/// ```
pub fn tail_shape(records: &[Timed], threshold: Duration) -> TailShape {
    let window = Duration::from_millis(TAIL_WINDOW_MS);
    let windows = records
        .iter()
        .map(|r| r.due.as_millis() as u64 / TAIL_WINDOW_MS + 1)
        .max()
        .unwrap_or(0) as usize;
    // Bounded by the run's length: one slot per window it lasted.
    let mut by_window: Vec<(usize, Duration)> = vec![(0, Duration::ZERO); windows];
    let mut tail_records = 0;
    for r in records.iter().filter(|r| r.latency >= threshold) {
        let slot = &mut by_window[(r.due.as_nanos() / window.as_nanos()) as usize];
        slot.0 += 1;
        slot.1 = slot.1.max(r.latency);
        tail_records += 1;
    }
    let mut with_tail: Vec<TailWindow> = by_window
        .iter()
        .enumerate()
        .filter(|(_, (count, _))| *count > 0)
        .map(|(i, (count, max))| TailWindow {
            start_ms: i as u64 * TAIL_WINDOW_MS,
            tail_records: *count,
            max_ms: max.as_secs_f64() * 1e3,
        })
        .collect();
    let windows_with_tail = with_tail.len();
    with_tail.sort_by(|a, b| b.tail_records.cmp(&a.tail_records).then(a.start_ms.cmp(&b.start_ms)));
    with_tail.truncate(WORST_WINDOWS);
    let in_worst: usize = with_tail.iter().map(|w| w.tail_records).sum();
    TailShape {
        threshold_ms: threshold.as_secs_f64() * 1e3,
        tail_records,
        windows_with_tail,
        windows,
        share_in_worst: if tail_records == 0 {
            0.0
        } else {
            in_worst as f64 / tail_records as f64
        },
        worst: with_tail,
    }
}

/// The tail of a paced run: its records sorted by latency give its p99, and [`tail_shape`] where
/// those at or above it were due.
pub fn run_tail(records: &[Timed]) -> TailShape {
    let mut sorted: Vec<Duration> = records.iter().map(|r| r.latency).collect();
    sorted.sort();
    let threshold = Duration::from_secs_f64(percentile_ms(&sorted, 0.99).max(0.0) / 1e3);
    tail_shape(records, threshold)
}

/// How long a row's own sends took, from the send to its confirmation: for the native row, the
/// figure the gateway's appends (its `backend call` trace events) compare with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallTimes {
    pub calls: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl CallTimes {
    pub fn of(mut times: Vec<Duration>) -> Self {
        times.sort();
        Self {
            calls: times.len(),
            p50_ms: percentile_ms(&times, 0.5),
            p99_ms: percentile_ms(&times, 0.99),
            max_ms: times.last().map_or(f64::NAN, |t| t.as_secs_f64() * 1e3),
        }
    }
}

/// One statistics interval of the broker a producer sent to: its p99 and max, in milliseconds,
/// of a record's wait in librdkafka's queue (`int_latency`, linger included), of a request's
/// wait in the output buffer before it is written (`outbuf_latency`), and of the broker's
/// round trip (`rtt`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientInterval {
    pub queue_p99_ms: f64,
    pub queue_max_ms: f64,
    pub outbuf_p99_ms: f64,
    pub outbuf_max_ms: f64,
    pub rtt_p99_ms: f64,
    pub rtt_max_ms: f64,
    pub requests: i64,
}

/// librdkafka's split of a phase's latency, one [`ClientInterval`] per statistics interval in
/// which requests were answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientLatency {
    pub intervals: Vec<ClientInterval>,
}

impl ClientLatency {
    /// The largest of `field` over the intervals, NaN with none.
    pub fn max_of(&self, field: impl Fn(&ClientInterval) -> f64) -> f64 {
        self.intervals.iter().map(field).fold(f64::NAN, f64::max)
    }
}

/// A producer context that keeps librdkafka's broker latency windows while collecting is on
/// (statistics come only when `statistics.interval.ms` is set). Clones share what is kept: the
/// producer owns its context, so the bench keeps a clone to read it.
#[derive(Default, Clone)]
pub struct ClientStats {
    collected: Arc<Mutex<Option<Vec<ClientInterval>>>>,
}

impl ClientStats {
    /// Keeps the intervals emitted from now on, dropping any kept before.
    pub fn begin(&self) {
        *self.collected.lock().expect("not poisoned") = Some(Vec::new());
    }

    /// Stops keeping intervals and gives those kept since [`Self::begin`].
    pub fn finish(&self) -> Option<ClientLatency> {
        let intervals = self.collected.lock().expect("not poisoned").take()?;
        Some(ClientLatency { intervals })
    }
}

fn ms(us: i64) -> f64 {
    us as f64 / 1e3
}

/// The interval of the broker that answered most requests in `statistics`, when any did.
fn busiest_broker(statistics: &Statistics) -> Option<ClientInterval> {
    let (rtt, broker) = statistics
        .brokers
        .values()
        .filter(|b| b.nodeid >= 0)
        .filter_map(|b| Some((b.rtt.as_ref()?, b)))
        .filter(|(rtt, _)| rtt.cnt > 0)
        .max_by_key(|(rtt, _)| rtt.cnt)?;
    let p99_max = |w: &Option<Window>| w.as_ref().map_or((f64::NAN, f64::NAN), |w| (ms(w.p99), ms(w.max)));
    let (queue_p99_ms, queue_max_ms) = p99_max(&broker.int_latency);
    let (outbuf_p99_ms, outbuf_max_ms) = p99_max(&broker.outbuf_latency);
    Some(ClientInterval {
        queue_p99_ms,
        queue_max_ms,
        outbuf_p99_ms,
        outbuf_max_ms,
        rtt_p99_ms: ms(rtt.p99),
        rtt_max_ms: ms(rtt.max),
        requests: rtt.cnt,
    })
}

impl ClientContext for ClientStats {
    fn stats(&self, statistics: Statistics) {
        let mut collected = self.collected.lock().expect("not poisoned");
        if let Some(intervals) = collected.as_mut().filter(|i| i.len() < MAX_STATS_INTERVALS) {
            intervals.extend(busiest_broker(&statistics));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(due_ms: u64, latency_ms: u64) -> Timed {
        Timed {
            due: Duration::from_millis(due_ms),
            latency: Duration::from_millis(latency_ms),
        }
    }

    #[test]
    fn a_tail_spread_over_the_run_fills_many_windows_and_no_window_holds_most_of_it() {
        // Every tenth record slow, one due each millisecond for 1 s.
        let records: Vec<Timed> = (0..1000).map(|i| timed(i, if i % 10 == 0 { 20 } else { 6 })).collect();
        let shape = tail_shape(&records, Duration::from_millis(20));
        assert_eq!(shape.tail_records, 100);
        assert_eq!((shape.windows_with_tail, shape.windows), (100, 100));
        assert!(shape.share_in_worst <= 0.05, "{shape:?}");
    }

    #[test]
    fn a_stall_puts_the_whole_tail_in_the_windows_it_covered() {
        // Records due in 500..520 ms waited out a stall that ended at 550 ms.
        let records: Vec<Timed> = (0..1000)
            .map(|i| timed(i, if (500..520).contains(&i) { 550 - i } else { 6 }))
            .collect();
        let shape = tail_shape(&records, Duration::from_millis(31));
        assert_eq!((shape.tail_records, shape.windows_with_tail), (20, 2));
        assert_eq!(shape.share_in_worst, 1.0);
        assert_eq!((shape.worst[0].start_ms, shape.worst[0].max_ms), (500, 50.0));
        // Its own p99 is the 991st of 1,000: the tenth slowest.
        let tail = run_tail(&records);
        assert_eq!(
            (tail.threshold_ms, tail.tail_records, tail.windows_with_tail),
            (41.0, 10, 1)
        );
    }

    #[test]
    fn percentiles_are_nearest_rank_and_nan_when_empty() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&sorted, 0.5), 51.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 100.0);
        assert!(percentile_ms(&[], 0.5).is_nan());
    }

    #[test]
    fn call_times_take_nearest_rank_percentiles_and_the_slowest() {
        let times = CallTimes::of((1..=200).rev().map(Duration::from_millis).collect());
        assert_eq!(
            (times.calls, times.p50_ms, times.p99_ms, times.max_ms),
            (200, 101.0, 199.0, 200.0)
        );
    }

    #[test]
    fn statistics_are_kept_only_between_begin_and_finish() {
        let stats = ClientStats::default();
        assert_eq!(stats.finish(), None);
        stats.begin();
        assert_eq!(stats.finish(), Some(ClientLatency { intervals: Vec::new() }));
        assert_eq!(stats.finish(), None);
    }
}
