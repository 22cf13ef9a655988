//! Which peer gateways answer, and so which gateway coordinates each group
//! (GROUP-COORDINATOR-1, GROUP-COORDINATOR-2).
//!
//! Every gateway probes every other one of the configured peers on a fixed period, and counts a
//! peer down after a run of failed probes and up again after a run of answered ones. The
//! coordinator of a group is the peer its id hashes to when that peer is up, else the next one
//! up in node-id order: a pure function of the group id, the peer list and the set of peers up,
//! so every survivor that sees the same peers down names the same coordinator, and only the
//! groups of a peer that went down move. The probes themselves go over the peer channel
//! (`peer_channel`), which the server runs.

use crate::config::Node;
use std::sync::Mutex;

/// Answered probes in a row that count a down peer up again: one answer after an outage may be
/// a process still starting, and groups moving back and forth cost every member a rebalance.
pub const UP_AFTER_PROBES: u32 = 2;

/// Probe rounds a starting gateway lets pass before it coordinates its own groups
/// (GROUP-COORDINATOR-4): a survivor counts it up after [`UP_AFTER_PROBES`] answered probes, the
/// first of which may come up to a period late, so one round more than that, plus one of
/// margin, lets every survivor let go first.
pub const WARM_UP_ROUNDS: u32 = UP_AFTER_PROBES + 2;

/// One peer's standing, from the probes so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Standing {
    up: bool,
    /// Probes in a row whose outcome disagrees with `up`.
    streak: u32,
}

impl Standing {
    /// Counts one probe; `Some(up)` when the peer's standing changes with it.
    fn observe(&mut self, answered: bool, down_after: u32) -> Option<bool> {
        if answered == self.up {
            self.streak = 0;
            return None;
        }
        self.streak += 1;
        let needed = if self.up { down_after } else { UP_AFTER_PROBES };
        if self.streak < needed.max(1) {
            return None;
        }
        self.up = answered;
        self.streak = 0;
        Some(answered)
    }
}

/// The peers and their standing. This gateway is always up in its own eyes.
pub struct PeerHealth {
    /// Every gateway, this one included, sorted by node id (`Config::peers`).
    nodes: Vec<Node>,
    me: i32,
    standings: Mutex<Vec<Standing>>,
    /// Probe rounds still to run before this gateway counts itself up (GROUP-COORDINATOR-4).
    warm_up_rounds: std::sync::atomic::AtomicU32,
    /// Moves whenever a standing changes or the warm-up ends: whatever was decided on who leads
    /// what is stale once it moves (PRODUCER-LEADER-1).
    generation: std::sync::atomic::AtomicU64,
    /// Probe rounds counted since start: what a test or an operator waits on to know that
    /// probes ran, rather than for a time.
    rounds: std::sync::atomic::AtomicU64,
}

/// A peer whose standing changed with the last round of probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub node: Node,
    pub up: bool,
}

impl PeerHealth {
    /// Every peer starts up: until probes say otherwise, the groups stay where the hash puts
    /// them, as they did before peers were probed.
    pub fn new(nodes: Vec<Node>, me: i32) -> Self {
        let standings = vec![Standing { up: true, streak: 0 }; nodes.len()];
        // Alone, nobody else may hold a group: no warm-up.
        let warm_up = if nodes.len() > 1 { WARM_UP_ROUNDS } else { 0 };
        Self {
            nodes,
            me,
            standings: Mutex::new(standings),
            warm_up_rounds: std::sync::atomic::AtomicU32::new(warm_up),
            generation: std::sync::atomic::AtomicU64::new(0),
            rounds: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Probe rounds counted since this gateway started.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Standing>> {
        self.standings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gateway that coordinates `group_id` now (GROUP-COORDINATOR-1).
    pub fn coordinator(&self, group_id: &str) -> &Node {
        self.first_up_from(hashed_index(group_id, self.nodes.len()))
    }

    /// The gateway that leads partition `partition` of Kafka topic `topic` now
    /// (PRODUCER-LEADER-1): a topic's partitions go round the gateways from the one its name
    /// hashes to, and a partition whose gateway is down goes to the next one up, as a group does
    /// (GROUP-COORDINATOR-2, GROUP-COORDINATOR-4).
    pub fn partition_leader(&self, topic: &str, partition: i32) -> &Node {
        let n = self.nodes.len().max(1);
        let first = (hashed_index(topic, n) + partition.rem_euclid(n as i32) as usize) % n;
        self.first_up_from(first)
    }

    /// The node at index `first`, or the next one up after it, wrapping.
    fn first_up_from(&self, first: usize) -> &Node {
        let standings = self.lock();
        let warm = self.is_warm();
        let index = first_up_among(first, &self.nodes, |i| {
            if self.nodes[i].id == self.me {
                warm
            } else {
                standings[i].up
            }
        });
        &self.nodes[index]
    }

    /// A count that moves whenever who leads or coordinates what may have changed
    /// (PRODUCER-LEADER-1).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// GROUP-COORDINATOR-8: warms up again, as a gateway that restarted, once its peers may
    /// have counted it down and taken its groups: it names the next peer up for its own groups
    /// until [`WARM_UP_ROUNDS`] more probe rounds have run.
    pub fn rewarm(&self) {
        if self.has_others() {
            self.warm_up_rounds
                .store(WARM_UP_ROUNDS, std::sync::atomic::Ordering::Release);
            // PRODUCER-LEADER-1: its partitions go to the next peer up until it warms up again.
            self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Whether this gateway has run its warm-up probe rounds and coordinates its own groups
    /// (GROUP-COORDINATOR-4).
    pub fn is_warm(&self) -> bool {
        self.warm_up_rounds.load(std::sync::atomic::Ordering::Acquire) == 0
    }

    /// The peers other than this gateway, to probe.
    pub fn others(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.id != self.me)
    }

    /// Whether more than this gateway is configured: only then is anything probed.
    pub fn has_others(&self) -> bool {
        self.nodes.len() > 1
    }

    /// The peers counted down now, for `/readyz`-style reports and logs.
    pub fn down(&self) -> Vec<Node> {
        let standings = self.lock();
        self.nodes
            .iter()
            .zip(standings.iter())
            .filter(|(n, s)| n.id != self.me && !s.up)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Counts one round of probes, `answered[k]` for the k-th of [`PeerHealth::others`]; the
    /// peers whose standing changed (GROUP-COORDINATOR-2).
    pub fn record(&self, answered: &[bool], down_after: u32) -> Vec<Change> {
        // GROUP-COORDINATOR-4: one warm-up round fewer, whatever the probes said.
        let warmed_up = self.warm_up_rounds.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |r| r.checked_sub(1),
        ) == Ok(1);
        let mut standings = self.lock();
        let mut outcomes = answered.iter();
        let mut changes = Vec::new();
        for (node, standing) in self.nodes.iter().zip(standings.iter_mut()) {
            if node.id == self.me {
                continue;
            }
            let Some(&answered) = outcomes.next() else { break };
            if let Some(up) = standing.observe(answered, down_after) {
                changes.push(Change { node: node.clone(), up });
            }
        }
        if warmed_up || !changes.is_empty() {
            self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        // Counted under the lock, so whoever reads the count sees the standings it counts.
        self.rounds.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        changes
    }
}

/// FNV-1a-64 of the group id, modulo the node count (GROUP-COORDINATOR-1).
pub fn hashed_index(group_id: &str, nodes: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in group_id.as_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % nodes.max(1) as u64) as usize
}

/// The index of the node coordinating `group_id` among `nodes` (sorted by id): the hashed one
/// when `up`, else the next one up, wrapping; the hashed one when none is
/// (GROUP-COORDINATOR-2).
pub fn coordinator_among(group_id: &str, nodes: &[Node], up: impl Fn(usize) -> bool) -> usize {
    first_up_among(hashed_index(group_id, nodes.len()), nodes, up)
}

/// The index `first` among `nodes` when `up`, else the next one up, wrapping; `first` when none
/// is.
pub fn first_up_among(first: usize, nodes: &[Node], up: impl Fn(usize) -> bool) -> usize {
    let n = nodes.len().max(1);
    (0..n).map(|step| (first + step) % n).find(|&i| up(i)).unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: i32) -> Vec<Node> {
        (0..n)
            .map(|id| Node {
                id,
                host: "127.0.0.1".into(),
                port: 9092 + id,
            })
            .collect()
    }

    #[test]
    fn group_coordinator_2_only_the_groups_of_a_peer_that_is_down_move() {
        let nodes = nodes(3);
        let groups: Vec<String> = (0..300).map(|i| format!("group-{i}")).collect();
        let all_up = |_: usize| true;
        let one_down = |i: usize| i != 1;
        for g in &groups {
            let before = coordinator_among(g, &nodes, all_up);
            let after = coordinator_among(g, &nodes, one_down);
            if before == 1 {
                assert_eq!(after, 2, "{g}: node 1's groups go to the next node up");
            } else {
                assert_eq!(after, before, "{g}: a group of a live node stays");
            }
        }
        // Node 2 down too: everything lands on node 0, wrapping around.
        for g in &groups {
            assert_eq!(coordinator_among(g, &nodes, |i| i == 0), 0);
        }
    }

    #[test]
    fn group_coordinator_1_with_every_peer_up_the_hash_decides() {
        let nodes = nodes(4);
        for i in 0..100 {
            let g = format!("g{i}");
            assert_eq!(coordinator_among(&g, &nodes, |_| true), hashed_index(&g, 4));
        }
    }

    /// A gateway past its warm-up, as every one is after a few probe rounds.
    fn warm(nodes: Vec<Node>, me: i32) -> PeerHealth {
        let health = PeerHealth::new(nodes, me);
        health.warm_up_rounds.store(0, std::sync::atomic::Ordering::Release);
        health
    }

    #[test]
    fn producer_leader_1_a_topics_partitions_go_round_the_gateways_and_a_down_ones_to_the_next() {
        let health = warm(nodes(3), 0);
        let leaders: Vec<i32> = (0..6).map(|p| health.partition_leader("orders", p).id).collect();
        let first = hashed_index("orders", 3) as i32;
        let expected: Vec<i32> = (0..6).map(|p| nodes(3)[((first + p) % 3) as usize].id).collect();
        assert_eq!(leaders, expected, "round the gateways from the hashed one");
        let generation = health.generation();
        // The second node goes down: its partitions go to the next node up, the others stay.
        for _ in 0..3 {
            health.record(&[false, true], 3);
        }
        assert!(
            health.generation() > generation,
            "a standing change moves the generation"
        );
        let down = nodes(3)[1].id;
        for (p, before) in leaders.iter().enumerate() {
            let now = health.partition_leader("orders", p as i32).id;
            if *before == down {
                assert_eq!(now, nodes(3)[2].id);
            } else {
                assert_eq!(now, *before);
            }
        }
    }

    #[test]
    fn group_coordinator_4_a_starting_gateway_takes_its_groups_only_after_its_warm_up() {
        let health = PeerHealth::new(nodes(2), 1);
        let group = (0..)
            .map(|i| format!("g{i}"))
            .find(|g| hashed_index(g, 2) == 1)
            .expect("some group hashes to node 1");
        for round in 0..WARM_UP_ROUNDS {
            assert!(!health.is_warm());
            assert_eq!(
                health.coordinator(&group).id,
                0,
                "round {round}: the peer that held the group while this one was away keeps it"
            );
            health.record(&[true], 3);
        }
        assert!(health.is_warm());
        assert_eq!(health.coordinator(&group).id, 1);
        assert!(PeerHealth::new(nodes(1), 0).is_warm(), "alone, no warm-up");
    }

    #[test]
    fn group_coordinator_2_down_after_a_run_of_failures_up_after_two_answers() {
        let health = warm(nodes(2), 0);
        let group = (0..)
            .map(|i| format!("g{i}"))
            .find(|g| hashed_index(g, 2) == 1)
            .expect("some group hashes to node 1");
        assert_eq!(health.coordinator(&group).id, 1);
        assert!(health.record(&[false], 3).is_empty());
        assert!(health.record(&[true], 3).is_empty(), "an answer resets the run");
        assert!(health.record(&[false], 3).is_empty());
        assert!(health.record(&[false], 3).is_empty());
        assert_eq!(health.coordinator(&group).id, 1, "two failures are not yet down");
        let changes = health.record(&[false], 3);
        assert_eq!(changes.len(), 1);
        assert!(!changes[0].up);
        assert_eq!(health.coordinator(&group).id, 0, "this gateway takes node 1's group");
        assert_eq!(health.down().len(), 1);
        assert!(health.record(&[true], 3).is_empty(), "one answer is not yet up");
        assert_eq!(health.record(&[true], 3).len(), 1);
        assert_eq!(health.coordinator(&group).id, 1, "the group moves back");
    }

    #[test]
    fn group_coordinator_8_a_gateway_told_stalled_names_the_next_peer_until_it_warmed_up_again() {
        let health = warm(nodes(2), 1);
        let group = (0..)
            .map(|i| format!("g{i}"))
            .find(|g| hashed_index(g, 2) == 1)
            .expect("some group hashes to node 1");
        assert_eq!(health.coordinator(&group).id, 1);
        health.rewarm();
        for round in 0..WARM_UP_ROUNDS {
            assert_eq!(
                health.coordinator(&group).id,
                0,
                "round {round}: the peer that took the group while this one stalled keeps it"
            );
            health.record(&[true], 3);
        }
        assert_eq!(health.coordinator(&group).id, 1);
        let alone = PeerHealth::new(nodes(1), 0);
        alone.rewarm();
        assert!(alone.is_warm(), "alone, nobody took anything");
    }

    #[test]
    fn group_coordinator_2_this_gateway_is_never_down_in_its_own_eyes() {
        let health = warm(nodes(3), 2);
        assert_eq!(health.others().map(|n| n.id).collect::<Vec<_>>(), [0, 1]);
        for _ in 0..5 {
            health.record(&[false, false], 1);
        }
        for i in 0..50 {
            assert_eq!(health.coordinator(&format!("g{i}")).id, 2);
        }
    }
}
