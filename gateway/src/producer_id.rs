//! Producer id allocation for InitProducerId (PID-ALLOC-1): the configured instance id in bits
//! 47..=62, a 47-bit counter below it, bit 63 clear so the id stays a non-negative i64.

use std::sync::atomic::{AtomicU64, Ordering};

pub const COUNTER_BITS: u32 = 47;
pub const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;

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

    /// The next id, or `None` once this instance's 2^47 ids are spent.
    pub fn allocate(&self) -> Option<i64> {
        let counter = self.next.fetch_add(1, Ordering::Relaxed);
        (counter <= COUNTER_MAX).then(|| ((u64::from(self.instance_id) << COUNTER_BITS) | counter) as i64)
    }

    /// The instance id encoded in `producer_id`.
    pub fn instance_of(producer_id: i64) -> u16 {
        (producer_id as u64 >> COUNTER_BITS) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_alloc_1_instance_in_high_bits_counter_below_sign_clear() {
        let a = ProducerIdAllocator::new(u16::MAX);
        let first = a.allocate().unwrap();
        let second = a.allocate().unwrap();
        assert!(first >= 0 && second >= 0, "bit 63 stays clear");
        assert_eq!(second - first, 1);
        assert_eq!(ProducerIdAllocator::instance_of(first), u16::MAX);
        assert_eq!(first as u64 & COUNTER_MAX, 0);
        let b = ProducerIdAllocator::new(7);
        assert_eq!(ProducerIdAllocator::instance_of(b.allocate().unwrap()), 7);
    }

    #[test]
    fn pid_alloc_1_exhausted_counter_allocates_nothing() {
        let a = ProducerIdAllocator::new(1);
        a.next.store(COUNTER_MAX, Ordering::Relaxed);
        assert!(a.allocate().is_some());
        assert_eq!(a.allocate(), None);
    }
}
