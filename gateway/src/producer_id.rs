//! Producer id allocation for InitProducerId (PID-ALLOC-1): the configured instance id in bits
//! 47..=62, a 47-bit counter below it, bit 63 clear so the id stays a non-negative i64.
//!
//! The counter is seeded from the clock (PID-ALLOC-2): its value `c` may be handed out once the
//! clock has reached second `c >> 16` after [`COUNTER_EPOCH_S`], so a restarted instance starts
//! past every id it handed out before. Producer ids key producer state that outlives the
//! process (PRODUCER-STATE-REBUILD-1); an id handed out twice would let a new producer's
//! sequence 0 meet an old producer's state.

use std::sync::atomic::{AtomicU64, Ordering};

pub const COUNTER_BITS: u32 = 47;
pub const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;
/// Ids one instance may hand out per second of the clock, sustained (PID-ALLOC-2).
pub const IDS_PER_SECOND_BITS: u32 = 16;
/// 2024-01-01T00:00:00Z: the counter's second 0. 2^31 seconds after it (the year 2092) the
/// counter is spent.
pub const COUNTER_EPOCH_S: u64 = 1_704_067_200;

/// Why no id was handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationRefusal {
    /// PID-ALLOC-2: this second's ids are spent; the next second brings more.
    Busy,
    /// PID-ALLOC-1: all 2^47 ids are spent.
    Exhausted,
}

#[derive(Debug)]
pub struct ProducerIdAllocator {
    instance_id: u16,
    next: AtomicU64,
}

impl ProducerIdAllocator {
    pub fn new(instance_id: u16) -> Self {
        Self {
            instance_id,
            next: AtomicU64::new(0),
        }
    }

    /// The next id at wall-clock time `now_us`.
    pub fn allocate(&self, now_us: u64) -> Result<i64, AllocationRefusal> {
        let second = (now_us / 1_000_000).saturating_sub(COUNTER_EPOCH_S);
        let floor = second.saturating_mul(1 << IDS_PER_SECOND_BITS);
        let ceiling = floor.saturating_add(1 << IDS_PER_SECOND_BITS);
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            let counter = current.max(floor);
            if counter > COUNTER_MAX {
                return Err(AllocationRefusal::Exhausted);
            }
            if counter >= ceiling {
                return Err(AllocationRefusal::Busy);
            }
            match self
                .next
                .compare_exchange_weak(current, counter + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(((u64::from(self.instance_id) << COUNTER_BITS) | counter) as i64),
                Err(seen) => current = seen,
            }
        }
    }

    /// The instance id encoded in `producer_id`.
    pub fn instance_of(producer_id: i64) -> u16 {
        (producer_id as u64 >> COUNTER_BITS) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_US: u64 = (COUNTER_EPOCH_S + 1_000) * 1_000_000;

    #[test]
    fn pid_alloc_1_instance_in_high_bits_counter_below_sign_clear() {
        let a = ProducerIdAllocator::new(u16::MAX);
        let first = a.allocate(NOW_US).unwrap();
        let second = a.allocate(NOW_US).unwrap();
        assert!(first >= 0 && second >= 0, "bit 63 stays clear");
        assert_eq!(second - first, 1);
        assert_eq!(ProducerIdAllocator::instance_of(first), u16::MAX);
        let b = ProducerIdAllocator::new(7);
        assert_eq!(ProducerIdAllocator::instance_of(b.allocate(NOW_US).unwrap()), 7);
    }

    #[test]
    fn pid_alloc_1_exhausted_counter_allocates_nothing() {
        let a = ProducerIdAllocator::new(1);
        a.next.store(COUNTER_MAX, Ordering::Relaxed);
        let far_future_us = (COUNTER_EPOCH_S + (1 << 31) + 10) * 1_000_000;
        assert!(a.allocate(far_future_us).is_err());
        let b = ProducerIdAllocator::new(1);
        b.next.store(COUNTER_MAX, Ordering::Relaxed);
        assert!(b.allocate(u64::MAX).is_err());
    }

    #[test]
    fn pid_alloc_2_a_restarted_instance_starts_past_every_id_it_handed_out() {
        let before = ProducerIdAllocator::new(3);
        let mut last = 0;
        for _ in 0..1_000 {
            last = before.allocate(NOW_US).unwrap();
        }
        // The same instance started again one second later.
        let after = ProducerIdAllocator::new(3);
        let first = after.allocate(NOW_US + 1_000_000).unwrap();
        assert!(first > last, "{first} must be past {last}");
    }

    #[test]
    fn pid_alloc_2_a_seconds_ids_spent_is_busy_until_the_next_second() {
        let a = ProducerIdAllocator::new(3);
        for _ in 0..(1 << IDS_PER_SECOND_BITS) {
            a.allocate(NOW_US).unwrap();
        }
        assert_eq!(a.allocate(NOW_US), Err(AllocationRefusal::Busy));
        assert!(a.allocate(NOW_US + 1_000_000).is_ok());
    }
}
