//! Turns per key: at most one holder per key at a time, the others waiting in arrival order.
//! What makes one address's logins take turns (AUTH-SASL-THROTTLE-1) and concurrent logins with
//! the same credentials wait for the first one's session (AUTH-SASL-JOIN-1). A key's entry lives
//! while someone holds or waits for its turn, so the table holds at most one entry per waiter.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// Entries kept at most before those nobody holds (left by waiters that gave up) are cleared.
const PRUNE_ABOVE: usize = 10_000;

/// One lock per key with a holder or a waiter.
pub struct Turns<K> {
    locks: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K> Default for Turns<K> {
    fn default() -> Self {
        Self {
            locks: Mutex::new(HashMap::new()),
        }
    }
}

/// A key's turn; the next waiter's starts when it is dropped.
pub struct Turn<'a, K: Hash + Eq + Clone> {
    turns: &'a Turns<K>,
    key: K,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<K: Hash + Eq + Clone> Turns<K> {
    fn locks(&self) -> std::sync::MutexGuard<'_, HashMap<K, Arc<tokio::sync::Mutex<()>>>> {
        self.locks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until nobody else holds `key`'s turn, in arrival order.
    pub async fn turn(&self, key: K) -> Turn<'_, K> {
        let lock = {
            let mut locks = self.locks();
            if locks.len() >= PRUNE_ABOVE {
                locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            }
            locks.entry(key.clone()).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        Turn {
            turns: self,
            key,
            guard: Some(guard),
        }
    }

    /// Keys with a holder or a waiter.
    pub fn len(&self) -> usize {
        self.locks().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq + Clone> Drop for Turn<'_, K> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.turns.locks();
        if locks.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            locks.remove(&self.key);
        }
    }
}
