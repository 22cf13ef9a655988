//! One pattern job per principal at a time (GROUP-CONSUMER-REGEX-COST-1): a ConsumerGroupHeartbeat
//! that must compile or match patterns first takes its owner's slot (the SASL principal, or the
//! client's address without SASL, as LIMIT-GROUP-OWNER-1 counts), so one owner's patterns keep
//! at most one decode-pool thread busy, and its further heartbeats wait behind its own, not
//! behind everyone's.

use super::Owner;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Slots kept before the ones nobody holds or waits for are dropped.
const KEPT_SLOTS: usize = 1_024;

/// Every owner's slot.
#[derive(Debug, Default)]
pub struct RegexSlots {
    slots: Mutex<HashMap<Owner, Arc<Semaphore>>>,
}

impl RegexSlots {
    /// Waits for `owner`'s slot; it is free again when the permit is dropped.
    pub async fn acquire(&self, owner: &Owner) -> OwnedSemaphorePermit {
        let slot = {
            let mut slots = self.slots.lock().expect("regex slots poisoned");
            if slots.len() >= KEPT_SLOTS {
                slots.retain(|_, slot| Arc::strong_count(slot) > 1);
            }
            slots
                .entry(owner.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        slot.acquire_owned().await.expect("a slot is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// On paused time a timeout fires only once nothing else can run: the acquisition it bounds
    /// was waiting, not slow.
    #[tokio::test(start_paused = true)]
    async fn group_consumer_regex_cost_1_one_pattern_job_per_owner_at_a_time() {
        let slots = RegexSlots::default();
        let (ann, ben): (Owner, Owner) = ("user:ann".into(), "user:ben".into());
        let held = slots.acquire(&ann).await;
        let waiting = tokio::time::timeout(Duration::from_secs(1), slots.acquire(&ann)).await;
        assert!(waiting.is_err(), "ann's second job waits for her first");
        let other = tokio::time::timeout(Duration::from_secs(1), slots.acquire(&ben)).await;
        assert!(other.is_ok(), "ben is not queued behind ann");
        drop(held);
        let next = tokio::time::timeout(Duration::from_secs(1), slots.acquire(&ann)).await;
        assert!(next.is_ok(), "ann's slot is free once her job ends");
    }
}
