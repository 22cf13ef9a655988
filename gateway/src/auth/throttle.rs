//! Slowing down repeated failed logins from one address (AUTH-SASL-THROTTLE-1). Pure: the
//! caller passes the time and sleeps for the delay it is given.

use std::collections::HashMap;
use std::net::IpAddr;

/// Failures from one address answered without delay.
pub const FREE_FAILURES: u32 = 3;
/// The delay after the first failure beyond the free ones; it doubles with each further one.
pub const FIRST_DELAY_MS: u64 = 250;
/// The longest delay.
pub const MAX_DELAY_MS: u64 = 5_000;
/// An address with no failure for this long starts afresh.
pub const FORGET_AFTER_MS: u64 = 60_000;
/// Addresses remembered at once; beyond it the stalest is forgotten, so spoofed or many
/// addresses cannot grow the table (a limit on everything).
pub const MAX_ADDRESSES: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last_failure_ms: u64,
}

/// Failed logins per client address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    records: HashMap<IpAddr, Record>,
}

impl LoginThrottle {
    /// How long to hold a failed login's answer from `address` at `now_ms`, after counting it.
    pub fn failed(&mut self, address: IpAddr, now_ms: u64) -> u64 {
        if !self.records.contains_key(&address) && self.records.len() >= MAX_ADDRESSES {
            self.forget_stalest(now_ms);
        }
        let record = self.records.entry(address).or_insert(Record {
            failures: 0,
            last_failure_ms: now_ms,
        });
        if now_ms.saturating_sub(record.last_failure_ms) >= FORGET_AFTER_MS {
            record.failures = 0;
        }
        record.failures = record.failures.saturating_add(1);
        record.last_failure_ms = now_ms;
        delay_ms(record.failures)
    }

    /// A successful login from `address` clears its failures.
    pub fn succeeded(&mut self, address: IpAddr) {
        self.records.remove(&address);
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn forget_stalest(&mut self, now_ms: u64) {
        self.records
            .retain(|_, r| now_ms.saturating_sub(r.last_failure_ms) < FORGET_AFTER_MS);
        if self.records.len() >= MAX_ADDRESSES {
            if let Some(stalest) = self
                .records
                .iter()
                .min_by_key(|(_, r)| r.last_failure_ms)
                .map(|(a, _)| *a)
            {
                self.records.remove(&stalest);
            }
        }
    }
}

/// The delay after the `failures`-th failure in a row.
pub fn delay_ms(failures: u32) -> u64 {
    if failures <= FREE_FAILURES {
        return 0;
    }
    let doublings = (failures - FREE_FAILURES - 1).min(16);
    (FIRST_DELAY_MS << doublings).min(MAX_DELAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn auth_sasl_throttle_1_failures_beyond_three_are_slowed_doubling_to_five_seconds() {
        let mut t = LoginThrottle::default();
        let delays: Vec<u64> = (0..10).map(|i| t.failed(ip(1), i * 10)).collect();
        assert_eq!(delays, [0, 0, 0, 250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
        assert_eq!(t.failed(ip(2), 100), 0, "another address is not slowed");
    }

    #[test]
    fn auth_sasl_throttle_1_success_and_a_quiet_minute_clear_the_count() {
        let mut t = LoginThrottle::default();
        for i in 0..5 {
            t.failed(ip(1), i);
        }
        t.succeeded(ip(1));
        assert_eq!(t.failed(ip(1), 10), 0);
        for i in 0..5 {
            t.failed(ip(3), i);
        }
        assert_eq!(t.failed(ip(3), 5 + FORGET_AFTER_MS), 0);
    }

    #[test]
    fn auth_sasl_throttle_1_the_table_is_bounded() {
        let mut t = LoginThrottle::default();
        for i in 0..(MAX_ADDRESSES as u32 + 50) {
            t.failed(IpAddr::from(i.to_be_bytes()), u64::from(i));
        }
        assert_eq!(t.len(), MAX_ADDRESSES);
    }
}
