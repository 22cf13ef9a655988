//! Every partition's producer state in one gateway: a slot per partition (its append lock and
//! its [`PartitionProducers`]), the counts LIMIT-PRODUCERS-1 bounds, expiry
//! (PRODUCER-EXPIRY-1) and eviction. No I/O; the caller reads the log and passes the time.

use super::partition::{Owner, PartitionProducers, ProducerEntry};
pub use super::settings::ProducerStateSettings;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which partition: Iggy stream, topic and partition (0-based).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub stream: Arc<str>,
    pub topic: Arc<str>,
    pub partition: u32,
}

/// The owner of entries a read of the log creates before any client claims them: counted in
/// the total only.
pub const LOG_OWNER: &str = "log";

/// One partition's state and the lock that makes this gateway's idempotent appends to it one
/// at a time, from the check through the write to the record (PRODUCER-SEQ-1).
#[derive(Debug, Default)]
pub struct PartitionSlot {
    pub appends: tokio::sync::Mutex<()>,
    state: Mutex<PartitionProducers>,
}

impl PartitionSlot {
    /// The state, locked briefly: never held across an await.
    pub fn state(&self) -> MutexGuard<'_, PartitionProducers> {
        self.state.lock().expect("producer state lock poisoned")
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_owner: HashMap<Owner, usize>,
}

impl Counts {
    fn add(&mut self, owner: &Owner) {
        self.total += 1;
        if &**owner != LOG_OWNER {
            *self.per_owner.entry(owner.clone()).or_default() += 1;
        }
    }

    fn remove(&mut self, owner: &Owner) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_owner.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(owner);
            }
        }
    }
}

/// The gateway's producer state.
#[derive(Debug)]
pub struct ProducerStates {
    pub settings: ProducerStateSettings,
    log_owner: Owner,
    partitions: Mutex<HashMap<PartitionKey, Arc<PartitionSlot>>>,
    counts: Mutex<Counts>,
    /// When the next expiry sweep is due, in ms of the gateway's clock (PRODUCER-EXPIRY-1).
    next_sweep_ms: std::sync::atomic::AtomicU64,
}

/// How often expired entries are swept: Kafka's `producer.id.expiration.check.interval.ms`.
pub const EXPIRY_SWEEP_INTERVAL_MS: u64 = 600_000;

impl ProducerStates {
    pub fn new(settings: ProducerStateSettings) -> Self {
        Self {
            settings,
            log_owner: Arc::from(LOG_OWNER),
            partitions: Mutex::default(),
            counts: Mutex::default(),
            next_sweep_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn log_owner(&self) -> &Owner {
        &self.log_owner
    }

    fn partitions(&self) -> MutexGuard<'_, HashMap<PartitionKey, Arc<PartitionSlot>>> {
        self.partitions.lock().expect("producer partitions lock poisoned")
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().expect("producer counts lock poisoned")
    }

    /// The partition's slot, created empty (its log not yet read) when there is none.
    pub fn slot(&self, key: &PartitionKey) -> Arc<PartitionSlot> {
        self.partitions().entry(key.clone()).or_default().clone()
    }

    /// Producer entries in all.
    pub fn total(&self) -> usize {
        self.counts().total
    }

    /// Entries `owner` created.
    pub fn owned_by(&self, owner: &str) -> usize {
        self.counts().per_owner.get(owner).copied().unwrap_or(0)
    }

    /// Counts entries a read of the log or a record created.
    pub fn created(&self, owner: &Owner, count: usize) {
        let mut counts = self.counts();
        for _ in 0..count {
            counts.add(owner);
        }
    }

    pub fn removed_entries(&self, entries: &[ProducerEntry]) {
        let mut counts = self.counts();
        for entry in entries {
            counts.remove(&entry.owner);
        }
    }

    /// LIMIT-PRODUCERS-1: makes room for one more entry of `owner` before it is created: when
    /// the owner holds its maximum, the eighth of its entries seen longest ago go; when the
    /// gateway holds its maximum, the expired entries go, then the eighth of all entries seen
    /// longest ago. An evicted producer is one the gateway no longer knows (PRODUCER-UNKNOWN-2).
    /// Returns how many entries were evicted. The caller holds no partition's state locked.
    pub fn make_room(&self, owner: &Owner, now_ms: u64) -> usize {
        let (owner_full, total_full) = {
            let counts = self.counts();
            let owned = counts.per_owner.get(owner).copied().unwrap_or(0);
            (
                &**owner != LOG_OWNER && owned >= self.settings.max_producers_per_principal,
                counts.total >= self.settings.max_producers,
            )
        };
        let mut evicted = 0;
        if owner_full {
            evicted += self.evict_oldest(Some(owner), self.settings.max_producers_per_principal);
        }
        if total_full {
            evicted += self.expire(now_ms);
            if self.total() >= self.settings.max_producers {
                evicted += self.evict_oldest(None, self.settings.max_producers);
            }
        }
        if evicted > 0 {
            crate::metrics::metrics().limit_hit("LIMIT-PRODUCERS-1");
            tracing::warn!(
                "producer state: {evicted} producer entries forgotten to make room for {} (LIMIT-PRODUCERS-1); \
                 their next batches are taken as from producers the gateway does not know",
                crate::log_text::clip(owner)
            );
        }
        evicted
    }

    /// Removes the eighth (at least one) of `owner`'s entries, or of all entries, seen longest
    /// ago, out of a cap of `cap`.
    fn evict_oldest(&self, owner: Option<&Owner>, cap: usize) -> usize {
        let slots: Vec<Arc<PartitionSlot>> = self.partitions().values().cloned().collect();
        let mut candidates: Vec<(u64, usize, i64)> = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            let state = slot.state();
            candidates.extend(
                state
                    .producers()
                    .filter(|(_, e)| owner.is_none_or(|o| &e.owner == o))
                    .map(|(id, e)| (e.last_seen_ms, i, *id)),
            );
        }
        let wanted = (cap / 8).max(1).min(candidates.len());
        if wanted == 0 {
            return 0;
        }
        candidates.select_nth_unstable(wanted - 1);
        let mut removed = Vec::with_capacity(wanted);
        for &(_, i, id) in &candidates[..wanted] {
            if let Some(entry) = slots[i].state().remove(id) {
                removed.push(entry);
            }
        }
        self.removed_entries(&removed);
        removed.len()
    }

    /// PRODUCER-EXPIRY-1: sweeps expired entries when a sweep is due; the first call sweeps
    /// nothing and sets the first due time. One caller in a period does the sweep.
    pub fn expire_when_due(&self, now_ms: u64) {
        use std::sync::atomic::Ordering;
        let due = self.next_sweep_ms.load(Ordering::Relaxed);
        if now_ms < due {
            return;
        }
        let next = now_ms + EXPIRY_SWEEP_INTERVAL_MS;
        if self
            .next_sweep_ms
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
            && due != 0
        {
            self.expire(now_ms);
        }
    }

    /// PRODUCER-EXPIRY-1: removes every entry last seen `producer_id_expiration_ms` or longer
    /// ago, and the slots left with no entry and no append in progress. Returns how many
    /// entries went.
    pub fn expire(&self, now_ms: u64) -> usize {
        let cutoff_ms = now_ms.saturating_sub(self.settings.producer_id_expiration_ms);
        let mut partitions = self.partitions();
        let mut expired = Vec::new();
        partitions.retain(|_, slot| {
            let mut state = slot.state();
            expired.extend(state.expire(cutoff_ms));
            // A slot in use elsewhere (its Arc held) stays: its holder may be mid-append.
            !(state.is_empty() && Arc::strong_count(slot) == 1)
        });
        drop(partitions);
        self.removed_entries(&expired);
        expired.len()
    }

    /// PRODUCER-LEADER-1: forgets the state of every partition `moved` says moved to or from
    /// this gateway, so the log is read again before its next idempotent batch.
    pub fn forget_where(&self, moved: impl Fn(&PartitionKey) -> bool) {
        let slots: Vec<Arc<PartitionSlot>> = self
            .partitions()
            .iter()
            .filter(|(k, _)| moved(k))
            .map(|(_, s)| s.clone())
            .collect();
        for slot in slots {
            let forgotten = slot.state().forget();
            self.removed_entries(&forgotten);
        }
    }

    /// Forgets a partition outright (its topic was deleted): a topic created again under the
    /// name starts with no producer state.
    pub fn forget_topic(&self, stream: &str, topic: &str) {
        self.forget_where(|k| &*k.stream == stream && &*k.topic == topic);
    }
}
