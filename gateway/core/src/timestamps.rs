//! Splitting one Kafka batch into Iggy sends the server accepts (MAP-TS-SPLIT-1).
//!
//! Iggy encodes each message's origin timestamp in a send as a `u32` µs delta from the send's
//! earliest one, so a send whose origin timestamps spread over more than `u32::MAX` µs (about
//! 71.6 minutes) fails whole with `InvalidMessageTimestampDelta`. A Kafka batch may legally mix
//! `-1` (stored as 0) with real times, or span days. Cutting the batch into consecutive runs,
//! each within the spread, and sending the runs in order to the same partition keeps every
//! record, its timestamp and its order.

use std::ops::Range;

/// The widest spread of origin timestamps one Iggy send accepts, in µs.
pub const MAX_ORIGIN_TIMESTAMP_SPREAD_US: u64 = u32::MAX as u64;

/// Consecutive index ranges of `origin_timestamps_us`, each spreading at most
/// [`MAX_ORIGIN_TIMESTAMP_SPREAD_US`]. Greedy, so the number of sends is the fewest possible for
/// runs that keep the input order.
///
/// ```
/// use kig_core::timestamps::send_runs;
/// let hour_us = 3_600_000_000;
/// assert_eq!(send_runs(&[5, 6, 7]), vec![0..3]);
/// assert_eq!(send_runs(&[0, hour_us * 2, hour_us * 2 + 1, 0]), vec![0..1, 1..3, 3..4]);
/// ```
pub fn send_runs(origin_timestamps_us: &[u64]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    let (mut min, mut max) = (u64::MAX, 0u64);
    for (i, &ts) in origin_timestamps_us.iter().enumerate() {
        let (new_min, new_max) = (min.min(ts), max.max(ts));
        if i > start && new_max - new_min > MAX_ORIGIN_TIMESTAMP_SPREAD_US {
            runs.push(start..i);
            start = i;
            (min, max) = (ts, ts);
        } else {
            (min, max) = (new_min, new_max);
        }
    }
    if start < origin_timestamps_us.len() {
        runs.push(start..origin_timestamps_us.len());
    }
    runs
}

/// Whether Iggy accepts these origin timestamps in one send: the same rule the SDK's encoder
/// applies (each delta from the earliest must fit a `u32`).
pub fn fits_one_send(origin_timestamps_us: &[u64]) -> bool {
    let min = origin_timestamps_us.iter().copied().min().unwrap_or(0);
    origin_timestamps_us
        .iter()
        .all(|&ts| ts - min <= MAX_ORIGIN_TIMESTAMP_SPREAD_US)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn map_ts_split_1_minus_one_mixed_with_real_times_splits() {
        let now = 1_764_000_000_000_000u64;
        assert_eq!(send_runs(&[now, 0, now + 1]), vec![0..1, 1..2, 2..3]);
        assert_eq!(send_runs(&[0, 0, now, now]), vec![0..2, 2..4]);
    }

    #[test]
    fn map_ts_split_1_exact_boundary_is_one_send() {
        let spread = MAX_ORIGIN_TIMESTAMP_SPREAD_US;
        assert_eq!(send_runs(&[10, 10 + spread]), vec![0..2]);
        assert_eq!(send_runs(&[10, 11 + spread]), vec![0..1, 1..2]);
        assert!(fits_one_send(&[10, 10 + spread]));
        assert!(!fits_one_send(&[10, 11 + spread]));
    }

    #[test]
    fn empty_input_needs_no_send() {
        assert!(send_runs(&[]).is_empty());
    }

    proptest! {
        #[test]
        fn map_ts_split_1_runs_cover_in_order_and_each_fits(
            ts in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..u64::MAX / 2, Just(1u64 << 40)], 0..40)
        ) {
            let runs = send_runs(&ts);
            let mut next = 0;
            for run in &runs {
                prop_assert_eq!(run.start, next);
                prop_assert!(run.end > run.start);
                prop_assert!(fits_one_send(&ts[run.clone()]));
                next = run.end;
            }
            prop_assert_eq!(next, ts.len());
            // Greedy: no two neighbouring runs could have been one send's prefix.
            for pair in runs.windows(2) {
                let extended = pair[0].start..pair[1].start + 1;
                prop_assert!(!fits_one_send(&ts[extended]));
            }
        }
    }
}
