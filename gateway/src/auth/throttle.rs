//! Slowing down password guessing through the gateway (AUTH-SASL-THROTTLE-1): failed logins are
//! counted per (address, username), per address and per username, and a login waits before Iggy
//! is asked, for as long as the worst of the three says. [`LoginThrottle`] is the pure count and
//! decision (the caller passes the time and sleeps); [`LoginQueues`] makes one address's logins
//! take turns, so parallel guesses from it wait behind one another instead of all reaching Iggy.

use std::collections::HashMap;
use std::net::IpAddr;

/// Failures of one username from one address that cost no wait.
pub const FREE_FAILURES: u32 = 3;
/// Failures from one address over every username, or of one username over every address, that
/// cost no wait: more than for one pair, since many clients may share an address (NAT) and one
/// user may run many clients.
pub const FREE_SHARED_FAILURES: u32 = 10;
/// The wait after the first failure beyond the free ones; it doubles with each further one.
pub const FIRST_DELAY_MS: u64 = 250;
/// The longest wait.
pub const MAX_DELAY_MS: u64 = 5_000;
/// A count with no failure for this long starts afresh.
pub const FORGET_AFTER_MS: u64 = 60_000;
/// Entries remembered at once in each table; beyond it the stalest is forgotten, so spoofed or
/// many addresses and usernames cannot grow them (a limit on everything).
pub const MAX_ADDRESSES: usize = 10_000;
/// The longest username kept as a key; longer ones are cut (Iggy's own limit is 50).
const MAX_USERNAME_KEY_BYTES: usize = 255;

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last_failure_ms: u64,
}

/// Failures keyed by `K`, bounded and forgotten after a quiet minute.
#[derive(Debug)]
struct Counts<K> {
    records: HashMap<K, Record>,
}

impl<K> Default for Counts<K> {
    fn default() -> Self {
        Self {
            records: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone> Counts<K> {
    /// Recent failures of `key` at `now_ms`.
    fn recent(&self, key: &K, now_ms: u64) -> u32 {
        self.records
            .get(key)
            .filter(|r| now_ms.saturating_sub(r.last_failure_ms) < FORGET_AFTER_MS)
            .map_or(0, |r| r.failures)
    }

    fn failed(&mut self, key: K, now_ms: u64) {
        let failures = self.recent(&key, now_ms);
        if !self.records.contains_key(&key) && self.records.len() >= MAX_ADDRESSES {
            self.forget_stalest(now_ms);
        }
        self.records.insert(
            key,
            Record {
                failures: failures.saturating_add(1),
                last_failure_ms: now_ms,
            },
        );
    }

    fn clear(&mut self, key: &K) {
        self.records.remove(key);
    }

    fn forget_stalest(&mut self, now_ms: u64) {
        self.records
            .retain(|_, r| now_ms.saturating_sub(r.last_failure_ms) < FORGET_AFTER_MS);
        if self.records.len() >= MAX_ADDRESSES {
            if let Some(stalest) = self
                .records
                .iter()
                .min_by_key(|(_, r)| r.last_failure_ms)
                .map(|(k, _)| k.clone())
            {
                self.records.remove(&stalest);
            }
        }
    }
}

/// Failed logins per (address, username), per address and per username.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    pairs: Counts<(IpAddr, String)>,
    addresses: Counts<IpAddr>,
    usernames: Counts<String>,
}

fn username_key(username: &str) -> String {
    crate::limits::truncate_utf8(username, MAX_USERNAME_KEY_BYTES)
}

impl LoginThrottle {
    /// How long a login of `username` from `address` waits at `now_ms` before Iggy is asked:
    /// as the next failure of the pair, of the address or of the username would be slowed,
    /// whichever is longest.
    pub fn wait_before_ms(&self, address: IpAddr, username: &str, now_ms: u64) -> u64 {
        let username = username_key(username);
        let pair = self.pairs.recent(&(address, username.clone()), now_ms);
        let from_address = self.addresses.recent(&address, now_ms);
        let of_username = self.usernames.recent(&username, now_ms);
        delay_ms(pair.saturating_add(1), FREE_FAILURES)
            .max(delay_ms(from_address.saturating_add(1), FREE_SHARED_FAILURES))
            .max(delay_ms(of_username.saturating_add(1), FREE_SHARED_FAILURES))
    }

    /// Counts a failed login of `username` from `address`; an empty username (a message that
    /// did not parse) counts against the address alone.
    pub fn failed(&mut self, address: IpAddr, username: &str, now_ms: u64) {
        self.addresses.failed(address, now_ms);
        if !username.is_empty() {
            let username = username_key(username);
            self.pairs.failed((address, username.clone()), now_ms);
            self.usernames.failed(username, now_ms);
        }
    }

    /// A successful login clears the failures of its own (address, username) only: another
    /// user's from the same address stay, and so do the address's and the username's counts,
    /// which only a quiet minute clears, so a guesser cannot reset them by logging in to an
    /// account of its own.
    pub fn succeeded(&mut self, address: IpAddr, username: &str) {
        self.pairs.clear(&(address, username_key(username)));
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.addresses.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The wait before the `attempt`-th attempt, counting failures in a row, when `free` cost none.
pub fn delay_ms(attempt: u32, free: u32) -> u64 {
    if attempt <= free {
        return 0;
    }
    let doublings = (attempt - free - 1).min(16);
    (FIRST_DELAY_MS << doublings).min(MAX_DELAY_MS)
}

/// One lock per address with a login under way: the logins of one address take turns
/// (AUTH-SASL-THROTTLE-1).
pub type LoginQueues = super::turns::Turns<IpAddr>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// The wait before each attempt, each attempt then failing.
    fn waits(t: &mut LoginThrottle, address: IpAddr, username: &str, attempts: u64, start_ms: u64) -> Vec<u64> {
        (0..attempts)
            .map(|i| {
                let now = start_ms + i * 10;
                let wait = t.wait_before_ms(address, username, now);
                t.failed(address, username, now);
                wait
            })
            .collect()
    }

    #[test]
    fn auth_sasl_throttle_1_failures_beyond_three_are_slowed_doubling_to_five_seconds() {
        let mut t = LoginThrottle::default();
        assert_eq!(
            waits(&mut t, ip(1), "ann", 10, 0),
            [0, 0, 0, 250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]
        );
        assert_eq!(
            t.wait_before_ms(ip(2), "ben", 100),
            0,
            "another address and user wait not"
        );
    }

    #[test]
    fn auth_sasl_throttle_1_a_success_clears_its_own_pair_and_a_quiet_minute_all() {
        let mut t = LoginThrottle::default();
        waits(&mut t, ip(1), "ann", 5, 0);
        t.succeeded(ip(1), "ann");
        assert_eq!(t.wait_before_ms(ip(1), "ann", 100), 0);
        waits(&mut t, ip(3), "cat", 5, 0);
        assert_eq!(t.wait_before_ms(ip(3), "cat", 40 + FORGET_AFTER_MS), 0);
    }

    #[test]
    fn auth_sasl_throttle_1_a_success_for_one_user_keeps_another_users_failures() {
        let mut t = LoginThrottle::default();
        waits(&mut t, ip(1), "ann", 5, 0);
        // Ben logs in from the same address: ann's failures there are not forgiven.
        t.succeeded(ip(1), "ben");
        assert_eq!(t.wait_before_ms(ip(1), "ann", 100), 1_000);
    }

    #[test]
    fn auth_sasl_throttle_1_an_address_and_a_username_are_counted_across_the_other() {
        let mut t = LoginThrottle::default();
        // One address guessing one password for each of ten users: each pair is fresh, the
        // address is not, and a success of its own does not clear it.
        for user in 0..FREE_SHARED_FAILURES {
            t.failed(ip(1), &format!("user{user}"), 0);
        }
        t.succeeded(ip(1), "mine");
        assert_eq!(t.wait_before_ms(ip(1), "mine", 10), 250);
        assert_eq!(t.wait_before_ms(ip(2), "mine", 10), 0);
        // One username guessed from ten addresses: an eleventh waits.
        for address in 10..(10 + FREE_SHARED_FAILURES as u8) {
            t.failed(ip(address), "dan", 0);
        }
        assert_eq!(t.wait_before_ms(ip(200), "dan", 10), 250);
        assert_eq!(t.wait_before_ms(ip(200), "eve", 10), 0);
    }

    #[test]
    fn auth_sasl_throttle_1_the_table_is_bounded() {
        let mut t = LoginThrottle::default();
        for i in 0..(MAX_ADDRESSES as u32 + 50) {
            t.failed(IpAddr::from(i.to_be_bytes()), &format!("u{i}"), u64::from(i));
        }
        assert_eq!(t.len(), MAX_ADDRESSES);
        assert_eq!(t.pairs.records.len(), MAX_ADDRESSES);
        assert_eq!(t.usernames.records.len(), MAX_ADDRESSES);
    }

    #[tokio::test(start_paused = true)]
    async fn auth_sasl_throttle_1_logins_from_one_address_take_turns() {
        let queues = Arc::new(LoginQueues::default());
        let first = queues.turn(ip(1)).await;
        let second = tokio::spawn({
            let queues = queues.clone();
            async move {
                let _turn = queues.turn(ip(1)).await;
            }
        });
        // Another address does not wait.
        drop(queues.turn(ip(2)).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!second.is_finished(), "the second login of the address went ahead");
        drop(first);
        second.await.unwrap();
        assert!(queues.is_empty(), "no entry outlives its logins");
    }
}
