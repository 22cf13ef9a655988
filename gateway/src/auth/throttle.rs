//! Slowing down password guessing through the gateway (AUTH-SASL-THROTTLE-1): failed logins are
//! counted per (address, username), per address and per username, and a login waits before Iggy
//! is asked, for as long as the worst of the three says. [`LoginThrottle`] is the pure count and
//! decision (the caller passes the time and sleeps); [`LoginQueues`] makes one address's logins
//! take turns, so parallel guesses from it wait behind one another instead of all reaching Iggy.
//! The address is the client's address key, its prefix (LIMIT-ADDRESS-KEY-1).
//!
//! AUTH-SASL-THROTTLE-2: the logins of one username take turns too, whatever their address
//! ([`UsernameQueues`]), so guesses from many addresses reach Iggy one at a time and each waits
//! out the username's count; but a login from an address key where that username logged in
//! within [`TRUSTED_FOR_MS`] skips the username's turn and count, so that guessing at a user
//! slows down new places the user logs in from, never the ones it uses.

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
/// AUTH-SASL-THROTTLE-2: how long a success makes its (address key, username) trusted: a week,
/// so that a client that logs in daily or weekly, or re-authenticates every session, keeps it.
pub const TRUSTED_FOR_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// AUTH-SASL-THROTTLE-2: places one username is trusted from at most; beyond, its own stalest is
/// forgotten. So one account logging in from many addresses cannot push other users' places out
/// of the table, which holds [`MAX_ADDRESSES`] over every username.
pub const MAX_TRUSTED_PER_USERNAME: usize = 64;

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

/// Failed logins per (address, username), per address and per username; and where each
/// username last logged in (AUTH-SASL-THROTTLE-2).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    pairs: Counts<(IpAddr, String)>,
    addresses: Counts<IpAddr>,
    usernames: Counts<String>,
    /// Where each username last logged in, and when (AUTH-SASL-THROTTLE-2).
    trusted: Trusted,
}

/// The places each username logged in from: at most [`MAX_TRUSTED_PER_USERNAME`] per username
/// and [`MAX_ADDRESSES`] in all.
#[derive(Debug, Default)]
struct Trusted {
    by_username: HashMap<String, Vec<(IpAddr, u64)>>,
    places: usize,
}

impl Trusted {
    fn since(&self, address: IpAddr, username: &str) -> Option<u64> {
        let places = self.by_username.get(username)?;
        places.iter().find(|(a, _)| *a == address).map(|(_, at)| *at)
    }

    fn insert(&mut self, address: IpAddr, username: String, now_ms: u64) {
        if let Some(place) = self
            .by_username
            .get_mut(&username)
            .and_then(|places| places.iter_mut().find(|(a, _)| *a == address))
        {
            place.1 = now_ms;
            return;
        }
        let own = self.by_username.get(&username).map_or(0, Vec::len);
        if own >= MAX_TRUSTED_PER_USERNAME {
            self.forget_stalest_of(&username);
        } else if self.places >= MAX_ADDRESSES {
            self.forget_lapsed(now_ms);
            if self.places >= MAX_ADDRESSES {
                self.forget_stalest();
            }
        }
        self.by_username.entry(username).or_default().push((address, now_ms));
        self.places += 1;
    }

    fn forget_stalest_of(&mut self, username: &str) {
        if let Some(places) = self.by_username.get_mut(username) {
            if let Some(stalest) = (0..places.len()).min_by_key(|i| places[*i].1) {
                places.swap_remove(stalest);
                self.places -= 1;
            }
        }
    }

    fn forget_lapsed(&mut self, now_ms: u64) {
        for places in self.by_username.values_mut() {
            places.retain(|(_, at)| now_ms.saturating_sub(*at) < TRUSTED_FOR_MS);
        }
        self.by_username.retain(|_, places| !places.is_empty());
        self.places = self.by_username.values().map(Vec::len).sum();
    }

    fn forget_stalest(&mut self) {
        let stalest = self
            .by_username
            .iter()
            .filter_map(|(username, places)| places.iter().map(|(_, at)| *at).min().map(|at| (at, username)))
            .min()
            .map(|(_, username)| username.clone());
        if let Some(username) = stalest {
            self.forget_stalest_of(&username);
            if self.by_username.get(&username).is_some_and(Vec::is_empty) {
                self.by_username.remove(&username);
            }
        }
    }
}

fn username_key(username: &str) -> String {
    crate::limits::truncate_utf8(username, MAX_USERNAME_KEY_BYTES)
}

impl LoginThrottle {
    /// How long a login of `username` from `address` waits at `now_ms` before Iggy is asked:
    /// as the next failure of the pair, of the address or of the username would be slowed,
    /// whichever is longest.
    ///
    /// AUTH-SASL-THROTTLE-2: from a trusted (address, username), the username's count is not
    /// waited for; the pair's and the address's still are.
    pub fn wait_before_ms(&self, address: IpAddr, username: &str, now_ms: u64) -> u64 {
        let trusted = self.is_trusted(address, username, now_ms);
        let username = username_key(username);
        let pair = self.pairs.recent(&(address, username.clone()), now_ms);
        let from_address = self.addresses.recent(&address, now_ms);
        let of_username = if trusted {
            0
        } else {
            self.usernames.recent(&username, now_ms)
        };
        delay_ms(pair.saturating_add(1), FREE_FAILURES)
            .max(delay_ms(from_address.saturating_add(1), FREE_SHARED_FAILURES))
            .max(delay_ms(of_username.saturating_add(1), FREE_SHARED_FAILURES))
    }

    /// AUTH-SASL-THROTTLE-2: whether `username` logged in from `address` within
    /// [`TRUSTED_FOR_MS`].
    pub fn is_trusted(&self, address: IpAddr, username: &str, now_ms: u64) -> bool {
        self.trusted
            .since(address, &username_key(username))
            .is_some_and(|at| now_ms.saturating_sub(at) < TRUSTED_FOR_MS)
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
    ///
    /// AUTH-SASL-THROTTLE-2: it also makes the (address, username) trusted. A username trusted
    /// from [`MAX_TRUSTED_PER_USERNAME`] places forgets its own stalest; a full table forgets
    /// the lapsed places, then the stalest of all.
    pub fn succeeded(&mut self, address: IpAddr, username: &str, now_ms: u64) {
        let username = username_key(username);
        self.pairs.clear(&(address, username.clone()));
        self.trusted.insert(address, username, now_ms);
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

/// One lock per username with an untrusted login under way: its logins from places it has not
/// logged in from take turns, whatever their address (AUTH-SASL-THROTTLE-2).
pub type UsernameQueues = super::turns::Turns<String>;

/// The key a username's turn is taken under: the same cut as its counts'.
pub fn username_turn_key(username: &str) -> String {
    username_key(username)
}

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
        t.succeeded(ip(1), "ann", 50);
        assert_eq!(t.wait_before_ms(ip(1), "ann", 100), 0);
        waits(&mut t, ip(3), "cat", 5, 0);
        assert_eq!(t.wait_before_ms(ip(3), "cat", 40 + FORGET_AFTER_MS), 0);
    }

    #[test]
    fn auth_sasl_throttle_1_a_success_for_one_user_keeps_another_users_failures() {
        let mut t = LoginThrottle::default();
        waits(&mut t, ip(1), "ann", 5, 0);
        // Ben logs in from the same address: ann's failures there are not forgiven.
        t.succeeded(ip(1), "ben", 50);
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
        t.succeeded(ip(1), "mine", 5);
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
    fn auth_sasl_throttle_2_a_trusted_place_is_not_slowed_by_guesses_elsewhere() {
        let mut t = LoginThrottle::default();
        t.succeeded(ip(1), "ann", 0);
        // Fifteen guesses at ann from fifteen other addresses.
        for address in 100..115 {
            t.failed(ip(address), "ann", 1_000);
        }
        assert!(t.is_trusted(ip(1), "ann", 1_010));
        assert_eq!(t.wait_before_ms(ip(1), "ann", 1_010), 0, "ann's own place waits not");
        assert_eq!(
            t.wait_before_ms(ip(2), "ann", 1_010),
            MAX_DELAY_MS,
            "a new place waits the username's count"
        );
        assert!(!t.is_trusted(ip(1), "ben", 1_010), "trust is per username");
        // The pair's own failures still count against a trusted place.
        waits(&mut t, ip(1), "ann", 4, 2_000);
        assert_eq!(t.wait_before_ms(ip(1), "ann", 2_100), 500);
        // Trust lapses.
        assert!(!t.is_trusted(ip(1), "ann", TRUSTED_FOR_MS));
    }

    #[test]
    fn auth_sasl_throttle_2_the_places_trusted_are_bounded_per_username_and_in_all() {
        let mut t = LoginThrottle::default();
        t.succeeded(ip(1), "ann", 0);
        // One account logging in from many places keeps its latest 64 and pushes out nobody's.
        for i in 0..1_000u32 {
            t.succeeded(
                IpAddr::from((0x0a00_0000 + i).to_be_bytes()),
                "mallory",
                10 + u64::from(i),
            );
        }
        assert_eq!(t.trusted.by_username["mallory"].len(), MAX_TRUSTED_PER_USERNAME);
        assert!(t.is_trusted(IpAddr::from((0x0a00_0000u32 + 999).to_be_bytes()), "mallory", 2_000));
        assert!(!t.is_trusted(IpAddr::from(0x0a00_0000u32.to_be_bytes()), "mallory", 2_000));
        assert!(
            t.is_trusted(ip(1), "ann", 2_000),
            "ann's place was pushed out by mallory's"
        );
        // Many usernames fill the table: it holds MAX_ADDRESSES, forgetting the stalest.
        for i in 0..(MAX_ADDRESSES as u32 + 50) {
            t.succeeded(ip(2), &format!("u{i}"), 5_000 + u64::from(i));
        }
        assert_eq!(t.trusted.places, MAX_ADDRESSES);
        assert_eq!(
            t.trusted.by_username.values().map(Vec::len).sum::<usize>(),
            MAX_ADDRESSES
        );
        assert!(!t.is_trusted(ip(1), "ann", 100_000), "the stalest went first");
        // A place trusted again is refreshed, not added twice.
        let places = t.trusted.places;
        t.succeeded(ip(2), &format!("u{}", MAX_ADDRESSES), 200_000);
        assert_eq!(t.trusted.places, places);
    }

    #[tokio::test(start_paused = true)]
    async fn auth_sasl_throttle_2_logins_of_one_username_take_turns_across_addresses() {
        let queues = Arc::new(UsernameQueues::default());
        let first = queues.turn(username_turn_key("ann")).await;
        let second = tokio::spawn({
            let queues = queues.clone();
            async move {
                let _turn = queues.turn(username_turn_key("ann")).await;
            }
        });
        drop(queues.turn(username_turn_key("ben")).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!second.is_finished(), "a second login of ann went ahead");
        drop(first);
        second.await.unwrap();
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
