//! The table of open client connections: each one's address, when it last sent a request, and
//! a way to close it. It owns the admission of a new connection (LIMIT-CONNECTIONS-1,
//! LIMIT-CONNECTIONS-ADDRESS-1, LIMIT-CONNECTIONS-PREFIX-1) and the choice of the connection
//! closed to make room for it (LIMIT-CONNECTIONS-SHED-1), with clients told apart by their
//! address prefix (LIMIT-ADDRESS-KEY-1).
//!
//! The choice is a pure function ([`choose`]) of a snapshot of the table, the newcomer's address
//! and the time: no randomness, ties broken by connection id, time from tokio's clock, so a
//! simulation seed decides it (PROTO-DETERMINISM-1). The table is locked only to admit and to
//! remove a connection; a connection stamps its activity in atomics of its own.

use crate::limits::AddressPrefixes;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A connection's number in the table, in order of acceptance.
pub type ConnectionId = u64;

/// What admission allows: the resolved `[limits]` that bear on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// Connections from one address prefix (LIMIT-CONNECTIONS-PREFIX-1).
    pub max_connections_per_prefix: usize,
    /// What makes one client (LIMIT-ADDRESS-KEY-1).
    pub prefixes: AddressPrefixes,
    /// Silence after which a connection that has spoken may be shed.
    pub shed_idle_after_ms: u64,
}

/// One connection as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupant {
    pub id: ConnectionId,
    pub address: IpAddr,
    /// When it last sent a request, or was accepted if it never did, in ms of the table's clock.
    pub silent_since_ms: u64,
    /// Whether it has sent a request.
    pub spoke: bool,
    /// Whether a request of its own is being handled (a long-polling Fetch is not silent).
    pub busy: bool,
}

impl Occupant {
    /// LIMIT-CONNECTIONS-SHED-1: a connection may be shed when it is not in a request and has
    /// never sent one, or has been silent for `shed_idle_after_ms`.
    pub fn sheddable(&self, now_ms: u64, limits: &AdmissionLimits) -> bool {
        !self.busy && (!self.spoke || now_ms.saturating_sub(self.silent_since_ms) >= limits.shed_idle_after_ms)
    }
}

/// Why a new connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max_connections` are open and none may be shed (LIMIT-CONNECTIONS-1).
    TableFull,
    /// Its address holds `max_connections_per_address` and none of them may be shed
    /// (LIMIT-CONNECTIONS-ADDRESS-1).
    AddressFull,
    /// Its address prefix holds `max_connections_per_prefix` and none of them may be shed
    /// (LIMIT-CONNECTIONS-PREFIX-1).
    PrefixFull,
}

impl Refusal {
    /// The rule that refused.
    pub fn rule(self) -> &'static str {
        match self {
            Refusal::TableFull => "LIMIT-CONNECTIONS-1",
            Refusal::AddressFull => "LIMIT-CONNECTIONS-ADDRESS-1",
            Refusal::PrefixFull => "LIMIT-CONNECTIONS-PREFIX-1",
        }
    }
}

/// What to do with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Admit it after closing this one.
    AdmitShedding(ConnectionId),
    Refuse(Refusal),
}

/// The silent-longest sheddable occupant among `occupants`, ties to the lowest id.
fn silent_longest<'a>(
    occupants: impl Iterator<Item = &'a Occupant>,
    now_ms: u64,
    limits: &AdmissionLimits,
) -> Option<ConnectionId> {
    occupants
        .filter(|o| o.sheddable(now_ms, limits))
        .min_by_key(|o| (o.silent_since_ms, o.id))
        .map(|o| o.id)
}

/// Decides a new connection from `address` at `now_ms`, the table holding `occupants`.
///
/// LIMIT-CONNECTIONS-ADDRESS-1: an address at its quota may only replace a silent connection of
/// its own; LIMIT-CONNECTIONS-PREFIX-1: so may an address prefix at its quota. LIMIT-ADDRESS-KEY-1,
/// LIMIT-CONNECTIONS-SHED-1: a full table makes room by closing the sheddable connection silent
/// longest; when the newcomer's prefix already holds its fair share of the table
/// (`max_connections` over the prefixes present), its own silent connections go first.
pub fn choose(occupants: &[Occupant], address: IpAddr, now_ms: u64, limits: &AdmissionLimits) -> Admission {
    let own = || occupants.iter().filter(|o| o.address == address);
    if own().count() >= limits.max_connections_per_address {
        return match silent_longest(own(), now_ms, limits) {
            Some(victim) => Admission::AdmitShedding(victim),
            None => Admission::Refuse(Refusal::AddressFull),
        };
    }
    let key = limits.prefixes.key(address);
    let kin = || occupants.iter().filter(|o| limits.prefixes.key(o.address) == key);
    let from_prefix = kin().count();
    if from_prefix >= limits.max_connections_per_prefix {
        return match silent_longest(kin(), now_ms, limits) {
            Some(victim) => Admission::AdmitShedding(victim),
            None => Admission::Refuse(Refusal::PrefixFull),
        };
    }
    if occupants.len() < limits.max_connections {
        return Admission::Admit;
    }
    let mut clients: Vec<IpAddr> = occupants.iter().map(|o| limits.prefixes.key(o.address)).collect();
    clients.push(key);
    clients.sort_unstable();
    clients.dedup();
    let fair_share = (limits.max_connections / clients.len()).max(1);
    let own_first = if from_prefix >= fair_share {
        silent_longest(kin(), now_ms, limits)
    } else {
        None
    };
    match own_first.or_else(|| silent_longest(occupants.iter(), now_ms, limits)) {
        Some(victim) => Admission::AdmitShedding(victim),
        None => Admission::Refuse(Refusal::TableFull),
    }
}

/// What a connection's task shares with the table: its activity stamps and its close signal.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    silent_since_ms: AtomicU64,
    spoke: AtomicBool,
    busy: AtomicBool,
    shed: Notify,
}

impl Activity {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A request arrived: the connection has spoken and is busy until it is answered.
    pub fn request_started(&self) {
        self.spoke.store(true, Ordering::Relaxed);
        self.busy.store(true, Ordering::Relaxed);
        self.silent_since_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The request was answered: silence counts from now.
    pub fn request_done(&self) {
        self.silent_since_ms.store(self.now_ms(), Ordering::Relaxed);
        self.busy.store(false, Ordering::Relaxed);
    }

    /// Resolves once the accept loop shed this connection (LIMIT-CONNECTIONS-SHED-1), or
    /// someone [closed](Activity::close) it.
    pub async fn shed(&self) {
        self.shed.notified().await
    }

    /// Tells the connection's task to close, as shedding does: how the peer channel closes a
    /// peer's older link when the peer opens a newer one (GROUP-COORDINATOR-6).
    pub fn close(&self) {
        self.shed.notify_one();
    }
}

struct Entry {
    address: IpAddr,
    /// Its address's key (LIMIT-ADDRESS-KEY-1).
    prefix: IpAddr,
    activity: Arc<Activity>,
}

/// The open connections, and how many of them each address and each prefix holds.
#[derive(Default)]
struct Entries {
    by_id: BTreeMap<ConnectionId, Entry>,
    per_address: HashMap<IpAddr, usize>,
    per_prefix: HashMap<IpAddr, usize>,
}

/// One fewer for `key` in `counts`, forgetting it at zero.
fn count_down(counts: &mut HashMap<IpAddr, usize>, key: &IpAddr) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

impl Entries {
    fn insert(&mut self, id: ConnectionId, entry: Entry) {
        *self.per_address.entry(entry.address).or_default() += 1;
        *self.per_prefix.entry(entry.prefix).or_default() += 1;
        self.by_id.insert(id, entry);
    }

    fn remove(&mut self, id: &ConnectionId) -> Option<Entry> {
        let entry = self.by_id.remove(id)?;
        count_down(&mut self.per_address, &entry.address);
        count_down(&mut self.per_prefix, &entry.prefix);
        Some(entry)
    }
}

/// The open connections.
pub struct ConnectionTable {
    epoch: Instant,
    limits: AdmissionLimits,
    entries: Mutex<Entries>,
    next_id: AtomicU64,
}

/// A connection that was closed to make room, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    pub address: IpAddr,
    pub silent_for: Duration,
    pub spoke: bool,
}

/// A connection's place in the table; dropping it frees the place.
pub struct Registration {
    table: Arc<ConnectionTable>,
    id: ConnectionId,
    pub activity: Arc<Activity>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table.entries().remove(&self.id);
    }
}

impl ConnectionTable {
    pub fn new(limits: AdmissionLimits) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            limits,
            entries: Mutex::new(Entries::default()),
            next_id: AtomicU64::new(0),
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Connections in the table.
    pub fn len(&self) -> usize {
        self.entries().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn snapshot(entries: &Entries) -> Vec<Occupant> {
        entries
            .by_id
            .iter()
            .map(|(&id, e)| Occupant {
                id,
                address: e.address,
                silent_since_ms: e.activity.silent_since_ms.load(Ordering::Relaxed),
                spoke: e.activity.spoke.load(Ordering::Relaxed),
                busy: e.activity.busy.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Removes `victim` from the table and tells its task to close.
    fn shed(&self, entries: &mut Entries, victim: ConnectionId, now_ms: u64) -> Option<Shed> {
        let entry = entries.remove(&victim)?;
        entry.activity.shed.notify_one();
        let since = entry.activity.silent_since_ms.load(Ordering::Relaxed);
        Some(Shed {
            address: entry.address,
            silent_for: Duration::from_millis(now_ms.saturating_sub(since)),
            spoke: entry.activity.spoke.load(Ordering::Relaxed),
        })
    }

    /// Admits a connection from `address`, shedding a silent one if the table or the address is
    /// full, or says why not. A shed connection leaves the table at once; its task closes it at
    /// its next poll.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Result<(Registration, Option<Shed>), Refusal> {
        let now_ms = self.now_ms();
        let mut entries = self.entries();
        // Below every limit nothing is chosen: no snapshot is taken.
        let prefix = self.limits.prefixes.key(address);
        let from_address = entries.per_address.get(&address).copied().unwrap_or(0);
        let from_prefix = entries.per_prefix.get(&prefix).copied().unwrap_or(0);
        let room = entries.by_id.len() < self.limits.max_connections
            && from_address < self.limits.max_connections_per_address
            && from_prefix < self.limits.max_connections_per_prefix;
        let admission = if room {
            Admission::Admit
        } else {
            choose(&Self::snapshot(&entries), address, now_ms, &self.limits)
        };
        let shed = match admission {
            Admission::Admit => None,
            Admission::AdmitShedding(victim) => self.shed(&mut entries, victim, now_ms),
            Admission::Refuse(refusal) => return Err(refusal),
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity {
            epoch: self.epoch,
            silent_since_ms: AtomicU64::new(now_ms),
            spoke: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            shed: Notify::new(),
        });
        entries.insert(
            id,
            Entry {
                address,
                prefix,
                activity: activity.clone(),
            },
        );
        Ok((
            Registration {
                table: self.clone(),
                id,
                activity,
            },
            shed,
        ))
    }

    /// After a failed accept (EMFILE, ENFILE): closes the sheddable connection silent longest,
    /// whatever its address, so its descriptor serves the connection waiting to be accepted.
    pub fn shed_for_descriptor(&self) -> Option<Shed> {
        let now_ms = self.now_ms();
        let mut entries = self.entries();
        let victim = silent_longest(Self::snapshot(&entries).iter(), now_ms, &self.limits)?;
        self.shed(&mut entries, victim, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: AdmissionLimits = AdmissionLimits {
        max_connections: 4,
        max_connections_per_address: 4,
        max_connections_per_prefix: 4,
        prefixes: AddressPrefixes {
            v4: crate::limits::DEFAULT_ADDRESS_PREFIX_V4,
            v6: crate::limits::DEFAULT_ADDRESS_PREFIX_V6,
        },
        shed_idle_after_ms: 10_000,
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn occupant(id: ConnectionId, address: u8, silent_since_ms: u64, spoke: bool) -> Occupant {
        Occupant {
            id,
            address: ip(address),
            silent_since_ms,
            spoke,
            busy: false,
        }
    }

    #[test]
    fn limit_connections_shed_1_a_full_table_sheds_the_connection_silent_longest() {
        let now = 20_000;
        // Two that spoke recently, one that never spoke (accepted at 15 s), one idle since 5 s.
        let table = [
            occupant(0, 1, 19_000, true),
            occupant(1, 2, 15_000, false),
            occupant(2, 3, 5_000, true),
            occupant(3, 4, 19_500, true),
        ];
        assert_eq!(choose(&table, ip(9), now, &LIMITS), Admission::AdmitShedding(2));
        // Without the idle one, the one that never spoke goes, however recent.
        let table = [table[0], table[1], occupant(2, 3, 18_000, true), table[3]];
        assert_eq!(choose(&table, ip(9), now, &LIMITS), Admission::AdmitShedding(1));
        // Every one spoke recently: the newcomer is refused, as before.
        let busy_talkers = [table[0], occupant(1, 2, 19_000, true), table[2], table[3]];
        assert_eq!(
            choose(&busy_talkers, ip(9), now, &LIMITS),
            Admission::Refuse(Refusal::TableFull)
        );
        // A connection in a long request is never shed, however old its stamp.
        let mut polling = busy_talkers;
        polling[0].silent_since_ms = 0;
        polling[0].busy = true;
        assert_eq!(
            choose(&polling, ip(9), now, &LIMITS),
            Admission::Refuse(Refusal::TableFull)
        );
        // Below the limit nothing is shed.
        assert_eq!(choose(&table[..3], ip(9), now, &LIMITS), Admission::Admit);
        // Ties go to the lowest id: the choice is deterministic.
        let twins = [
            occupant(7, 1, 100, false),
            occupant(3, 2, 100, false),
            occupant(5, 3, 100, false),
            occupant(9, 4, 100, false),
        ];
        assert_eq!(choose(&twins, ip(9), now, &LIMITS), Admission::AdmitShedding(3));
    }

    #[test]
    fn limit_connections_shed_1_an_address_over_its_share_sheds_its_own_first() {
        let now = 20_000;
        // Address 1 holds three of four places (its fair share with a newcomer of its own and
        // one other address is 2); address 2's silent connection is older.
        let table = [
            occupant(0, 2, 1_000, false),
            occupant(1, 1, 2_000, false),
            occupant(2, 1, 3_000, false),
            occupant(3, 1, 4_000, false),
        ];
        assert_eq!(choose(&table, ip(1), now, &LIMITS), Admission::AdmitShedding(1));
        // A newcomer from another address takes the oldest overall.
        assert_eq!(choose(&table, ip(3), now, &LIMITS), Admission::AdmitShedding(0));
    }

    fn v6(last: u16) -> IpAddr {
        IpAddr::from([0x2001, 0xdb8, 0, 7, 0, 0, 0, last])
    }

    #[test]
    fn limit_address_key_1_an_ipv6_64_rotating_its_addresses_sheds_its_own_first() {
        let now = 20_000;
        // A victim's connection that never spoke, the oldest; three of one /64, each from an
        // address of its own, as a client rotating through its prefix connects.
        let table = [
            Occupant {
                address: ip(1),
                ..occupant(0, 1, 1_000, false)
            },
            Occupant {
                address: v6(1),
                ..occupant(1, 0, 2_000, false)
            },
            Occupant {
                address: v6(2),
                ..occupant(2, 0, 3_000, false)
            },
            Occupant {
                address: v6(3),
                ..occupant(3, 0, 4_000, false)
            },
        ];
        // A fourth address of the /64 holds more than its share: its own prefix's go first.
        assert_eq!(choose(&table, v6(4), now, &LIMITS), Admission::AdmitShedding(1));
        // Another /64 is another client.
        let elsewhere = IpAddr::from([0x2001, 0xdb8, 0, 8, 0, 0, 0, 1]);
        assert_eq!(choose(&table, elsewhere, now, &LIMITS), Admission::AdmitShedding(0));
    }

    #[test]
    fn limit_connections_address_1_an_address_at_its_quota_replaces_only_its_own() {
        let limits = AdmissionLimits {
            max_connections_per_address: 2,
            ..LIMITS
        };
        let now = 20_000;
        let table = [
            occupant(0, 2, 0, false),
            occupant(1, 1, 19_000, true),
            occupant(2, 1, 19_500, true),
        ];
        // Address 1 is at its quota and both of its connections are talking: refused, though
        // the table has room and address 2 holds a silent one.
        assert_eq!(
            choose(&table, ip(1), now, &limits),
            Admission::Refuse(Refusal::AddressFull)
        );
        assert_eq!(choose(&table, ip(2), now, &limits), Admission::Admit);
        let table = [table[0], table[1], occupant(2, 1, 100, false)];
        assert_eq!(choose(&table, ip(1), now, &limits), Admission::AdmitShedding(2));
    }

    #[test]
    fn limit_connections_prefix_1_a_prefix_at_its_quota_replaces_only_its_own() {
        let limits = AdmissionLimits {
            max_connections_per_prefix: 2,
            ..LIMITS
        };
        let now = 20_000;
        let talking = |id, address| Occupant {
            address,
            ..occupant(id, 0, 19_000, true)
        };
        let table = [talking(0, v6(1)), talking(1, v6(2)), occupant(2, 5, 0, false)];
        // A third address of the /64 is refused though each address holds one connection.
        assert_eq!(
            choose(&table, v6(3), now, &limits),
            Admission::Refuse(Refusal::PrefixFull)
        );
        assert_eq!(choose(&table, ip(6), now, &limits), Admission::Admit);
        // A silent one of the prefix makes room for it, and only for it.
        let table = [
            table[0],
            Occupant {
                address: v6(2),
                ..occupant(1, 0, 100, false)
            },
            table[2],
        ];
        assert_eq!(choose(&table, v6(3), now, &limits), Admission::AdmitShedding(1));
        // IPv4 keyed by a /24 when configured: 10.0.0.x are one client.
        let limits = AdmissionLimits {
            prefixes: AddressPrefixes { v4: 24, v6: 64 },
            ..limits
        };
        let table = [occupant(0, 1, 19_000, true), occupant(1, 2, 19_000, true)];
        assert_eq!(
            choose(&table, ip(3), now, &limits),
            Admission::Refuse(Refusal::PrefixFull)
        );
        assert_eq!(
            choose(&table, IpAddr::from([10, 0, 1, 3]), now, &limits),
            Admission::Admit
        );
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_prefix_1_the_table_counts_prefixes_as_connections_come_and_go() {
        let table = ConnectionTable::new(AdmissionLimits {
            max_connections_per_prefix: 2,
            ..LIMITS
        });
        let (a, _) = table.admit(v6(1)).unwrap();
        let (b, _) = table.admit(v6(2)).unwrap();
        for held in [&a, &b] {
            held.activity.request_started();
        }
        assert_eq!(table.admit(v6(3)).err(), Some(Refusal::PrefixFull));
        drop(a);
        let (_c, _) = table.admit(v6(3)).expect("a place of the prefix was given back");
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_shed_1_the_table_sheds_and_frees_places() {
        let table = ConnectionTable::new(AdmissionLimits {
            max_connections: 2,
            ..LIMITS
        });
        let (a, _) = table.admit(ip(1)).unwrap();
        a.activity.request_started();
        a.activity.request_done();
        let (b, _) = table.admit(ip(2)).unwrap();
        // b never spoke: the third connection sheds it, and b's task is told.
        let (c, shed) = table.admit(ip(3)).unwrap();
        assert_eq!(shed.map(|s| (s.address, s.spoke)), Some((ip(2), false)));
        tokio::time::timeout(Duration::from_secs(1), b.activity.shed())
            .await
            .expect("b is told to close");
        assert_eq!(table.len(), 2);
        drop(b);
        assert_eq!(table.len(), 2, "b had left already");
        c.activity.request_started();
        // a and c have spoken, c is in a request: a fourth is refused until a is silent 10 s.
        assert_eq!(table.admit(ip(4)).err(), Some(Refusal::TableFull));
        tokio::time::advance(Duration::from_secs(10)).await;
        let (_d, shed) = table.admit(ip(4)).unwrap();
        assert_eq!(shed.map(|s| s.address), Some(ip(1)));
        // For a descriptor, the silent one goes whatever its address: d never spoke, c is busy.
        assert_eq!(table.shed_for_descriptor().map(|s| s.address), Some(ip(4)));
        assert!(table.shed_for_descriptor().is_none(), "c is busy");
        drop(a);
        assert_eq!(table.len(), 1);
    }
}
