//! The Iggy cluster roster (docs/spec/cluster.md): which node the real backend dials next, given
//! what the nodes answered. Sans-io: the backend (`iggy/`) feeds it answers and asks it for
//! candidates; it never opens a socket or reads a clock, so its decisions are unit-tested here.

use iggy_common::{ClusterMetadata, ClusterNodeRole, ClusterNodeStatus};
use std::time::{Duration, Instant};

/// How long appends must go unanswered while a metadata leader answers before the roster calls
/// it a split (CLUSTER-SPLIT-1): four times a failover's 4.9 s (DIFF-15), so a primary's death
/// and the election after it never count.
pub const SPLIT_AFTER: Duration = Duration::from_secs(20);
/// How long a suspected split is reported after the last unanswered append: appends that stop
/// coming do not keep the gateway not ready for ever.
pub const SPLIT_REPORTED_FOR: Duration = Duration::from_secs(60);

/// CLUSTER-ROSTER-1: `iggy_address` as a list of `HOST:PORT` members, comma separated, in the
/// order given; one address is a roster of one. Empty entries, entries without a port and
/// repeated members are refused.
pub fn parse_roster(spec: &str) -> Result<Vec<String>, String> {
    let mut members: Vec<String> = Vec::new();
    for entry in spec.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!("iggy_address {spec:?} has an empty entry"));
        }
        match entry.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => return Err(format!("iggy_address entry {entry:?} is not HOST:PORT")),
        }
        if members.iter().any(|m| m == entry) {
            return Err(format!("iggy_address lists {entry:?} twice"));
        }
        members.push(entry.to_string());
    }
    Ok(members)
}

/// What a node answered when the backend dialled it or sent it a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Connected and logged in (the SDK may have moved on to the leader itself).
    Connected,
    /// The connection was refused or broke, or the node did not answer in time.
    Down,
    /// The cluster's metadata, read from a live node, names this leader (`HOST:PORT` of its TCP
    /// endpoint), or none (mid-election).
    Leader(Option<String>),
}

/// Which node to dial next (CLUSTER-ROUTE-1, CLUSTER-FAILOVER-1). Shared by the root backend
/// and every principal's session, so what one connection learns every later dial uses.
#[derive(Debug, Clone)]
pub struct RosterState {
    members: Vec<String>,
    /// The metadata leader as a live node last reported it.
    leader: Option<String>,
    /// Members that were down when last dialled, tried after the others.
    down: Vec<bool>,
    /// Where the next sweep over the members starts, so repeated failovers spread over them.
    start: usize,
    /// Why the last reconnect found no node, until one succeeds (CLUSTER-FAILOVER-2).
    unavailable: Option<String>,
    /// Appends unanswered since the last answered one: when the first and the last were
    /// (CLUSTER-SPLIT-1).
    stalled_appends: Option<(Instant, Instant)>,
}

impl RosterState {
    /// A roster of `members` (at least one; see [`parse_roster`]).
    pub fn new(members: Vec<String>) -> Self {
        let down = vec![false; members.len()];
        Self {
            members,
            leader: None,
            down,
            start: 0,
            unavailable: None,
            stalled_appends: None,
        }
    }

    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// Why the last reconnect reached no node, while no reconnect has succeeded since.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// Records that a reconnect reached no node, and why.
    pub fn on_unavailable(&mut self, why: String) {
        self.unavailable = Some(why);
    }

    /// CLUSTER-ROUTE-1: the nodes to dial, in order, for one sweep: the known leader first, then
    /// the members not known down (from the rotation point), then those known down. Each node
    /// once.
    pub fn candidates(&self) -> Vec<String> {
        let n = self.members.len();
        let rotated = (0..n).map(|i| (self.start + i) % n);
        let up = rotated.clone().filter(|&i| !self.down[i]);
        let down = rotated.filter(|&i| self.down[i]);
        let mut out: Vec<String> = self.leader.iter().cloned().collect();
        for i in up.chain(down) {
            if !out.contains(&self.members[i]) {
                out.push(self.members[i].clone());
            }
        }
        out
    }

    /// CLUSTER-SPLIT-1: an append was answered; any stall is over.
    pub fn on_append_answered(&mut self) {
        self.stalled_appends = None;
    }

    /// CLUSTER-SPLIT-1: an append got no answer (an unknown outcome) or found no primary at
    /// `now`. True exactly once per stall: when it has lasted [`SPLIT_AFTER`] with a metadata
    /// leader known, the moment to say so in the log.
    pub fn on_append_unanswered(&mut self, now: Instant) -> bool {
        let (since, last) = self.stalled_appends.get_or_insert((now, now));
        let was = last.duration_since(*since) >= SPLIT_AFTER;
        *last = now;
        let is = now.duration_since(*since) >= SPLIT_AFTER;
        is && !was && self.leader.is_some()
    }

    /// CLUSTER-SPLIT-1: why the cluster looks split at `now`: appends unanswered for
    /// [`SPLIT_AFTER`] while a metadata leader answers, the last within
    /// [`SPLIT_REPORTED_FOR`].
    pub fn split_suspected(&self, now: Instant) -> Option<String> {
        let (since, last) = self.stalled_appends?;
        let leader = self.leader.as_deref()?;
        (last.duration_since(since) >= SPLIT_AFTER && now.duration_since(last) < SPLIT_REPORTED_FOR).then(|| {
            format!(
                "appends have had no answer for {} s while {leader} answers as the metadata leader: \
                 the cluster's partitions may have a primary other than its metadata (DIFF-14); \
                 restart its nodes one after another",
                last.duration_since(since).as_secs()
            )
        })
    }

    /// CLUSTER-FAILOVER-1: records `node`'s answer.
    pub fn on_answer(&mut self, node: &str, answer: Answer) {
        let index = self.members.iter().position(|m| m == node);
        match answer {
            Answer::Connected => {
                if let Some(i) = index {
                    self.down[i] = false;
                }
                self.unavailable = None;
            }
            Answer::Down => {
                if let Some(i) = index {
                    self.down[i] = true;
                    self.start = (i + 1) % self.members.len();
                }
                if self.leader.as_deref() == Some(node) {
                    self.leader = None;
                }
            }
            Answer::Leader(leader) => {
                if let Some(i) = leader.as_ref().and_then(|l| self.members.iter().position(|m| m == l)) {
                    self.down[i] = false;
                }
                self.leader = leader;
            }
        }
    }
}

/// The healthy leader's TCP endpoint in `metadata` (`None` mid-election, or for a cluster of one
/// node, which reports itself whatever its role). Follows the SDK's own choice
/// (`leader_aware.rs`): the node with role Leader and status Healthy.
pub fn leader_address(metadata: &ClusterMetadata) -> Option<String> {
    if metadata.nodes.len() < 2 {
        return None;
    }
    metadata
        .nodes
        .iter()
        .find(|n| n.role == ClusterNodeRole::Leader && n.status == ClusterNodeStatus::Healthy)
        .map(|n| format!("{}:{}", n.ip, n.endpoints.tcp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster(n: usize) -> RosterState {
        RosterState::new((0..n).map(|i| format!("127.0.0.1:{}", 18090 + i)).collect())
    }

    fn a(i: usize) -> String {
        format!("127.0.0.1:{}", 18090 + i)
    }

    #[test]
    fn cluster_roster_1_one_address_or_a_comma_separated_list() {
        assert_eq!(parse_roster("127.0.0.1:8090").unwrap(), ["127.0.0.1:8090"]);
        assert_eq!(
            parse_roster("127.0.0.1:18090, 127.0.0.1:18091,iggy-2:18092").unwrap(),
            ["127.0.0.1:18090", "127.0.0.1:18091", "iggy-2:18092"]
        );
        assert_eq!(parse_roster("[::1]:8090").unwrap(), ["[::1]:8090"]);
        assert!(parse_roster("").is_err());
        assert!(parse_roster("a:1,,b:2").is_err(), "empty entry");
        assert!(parse_roster("a:1,b").is_err(), "no port");
        assert!(parse_roster("a:1,b:x").is_err(), "bad port");
        assert!(parse_roster("a:1,a:1").is_err(), "repeated");
    }

    #[test]
    fn cluster_route_1_members_in_order_until_a_leader_is_known_then_the_leader_first() {
        let mut r = roster(3);
        assert_eq!(r.candidates(), [a(0), a(1), a(2)]);
        r.on_answer(&a(0), Answer::Leader(Some(a(2))));
        assert_eq!(r.candidates(), [a(2), a(0), a(1)]);
        assert_eq!(r.leader(), Some(a(2).as_str()));
        // A leader outside the configured roster (another advertised address) is tried first too.
        r.on_answer(&a(2), Answer::Leader(Some("10.0.0.9:8090".into())));
        assert_eq!(r.candidates(), ["10.0.0.9:8090".to_string(), a(0), a(1), a(2)]);
    }

    #[test]
    fn cluster_failover_1_a_dead_leader_is_dropped_and_tried_last() {
        let mut r = roster(3);
        r.on_answer(&a(0), Answer::Leader(Some(a(0))));
        r.on_answer(&a(0), Answer::Down);
        assert_eq!(r.leader(), None, "the dead leader is forgotten");
        assert_eq!(
            r.candidates(),
            [a(1), a(2), a(0)],
            "the survivors first, the dead one last"
        );
        r.on_answer(&a(1), Answer::Down);
        assert_eq!(r.candidates(), [a(2), a(0), a(1)]);
        // The survivors elected a(2); a(0) comes back and is up again once it answers.
        r.on_answer(&a(2), Answer::Leader(Some(a(2))));
        r.on_answer(&a(0), Answer::Connected);
        assert_eq!(r.candidates(), [a(2), a(0), a(1)]);
        // Every node down: every node is still a candidate, once each.
        let mut r = roster(2);
        r.on_answer(&a(0), Answer::Down);
        r.on_answer(&a(1), Answer::Down);
        assert_eq!(r.candidates(), [a(0), a(1)]);
    }

    #[test]
    fn cluster_failover_1_mid_election_no_leader_means_every_member_in_turn() {
        let mut r = roster(3);
        r.on_answer(&a(1), Answer::Leader(Some(a(1))));
        r.on_answer(&a(2), Answer::Leader(None));
        assert_eq!(r.leader(), None);
        assert_eq!(r.candidates(), [a(0), a(1), a(2)]);
    }

    fn node(name: &str, port: u16, role: ClusterNodeRole, status: ClusterNodeStatus) -> iggy_common::ClusterNode {
        iggy_common::ClusterNode {
            name: name.into(),
            ip: "127.0.0.1".into(),
            endpoints: iggy_common::TransportEndpoints {
                tcp: port,
                quic: 0,
                http: 0,
                websocket: 0,
            },
            role,
            status,
        }
    }

    #[test]
    fn cluster_route_1_the_leader_is_the_healthy_node_in_role_leader() {
        use ClusterNodeRole::*;
        use ClusterNodeStatus::*;
        let metadata = |nodes| ClusterMetadata {
            name: "c".into(),
            nodes,
        };
        let m = metadata(vec![
            node("a", 18090, Follower, Healthy),
            node("b", 18091, Leader, Healthy),
            node("c", 18092, Follower, Healthy),
        ]);
        assert_eq!(leader_address(&m), Some(a(1)));
        let m = metadata(vec![
            node("a", 18090, Leader, Unreachable),
            node("b", 18091, Follower, Healthy),
        ]);
        assert_eq!(leader_address(&m), None, "an unhealthy leader is no leader");
        let m = metadata(vec![node("a", 18090, Leader, Healthy)]);
        assert_eq!(leader_address(&m), None, "one node: no redirection");
    }

    #[test]
    fn cluster_split_1_appends_stalled_past_a_failover_with_a_leader_known_are_a_split() {
        let t0 = Instant::now();
        let mut roster = RosterState::new(vec!["a:1".into(), "b:2".into()]);
        roster.on_answer("a:1", Answer::Leader(Some("a:1".into())));
        assert!(!roster.on_append_unanswered(t0));
        // A failover's worth of unanswered appends, then one answered: no split.
        assert!(!roster.on_append_unanswered(t0 + Duration::from_secs(5)));
        roster.on_append_answered();
        assert!(roster.split_suspected(t0 + Duration::from_secs(5)).is_none());
        // Unanswered for SPLIT_AFTER with the leader answering: said once, then reported.
        assert!(!roster.on_append_unanswered(t0 + Duration::from_secs(10)));
        assert!(roster.on_append_unanswered(t0 + Duration::from_secs(10) + SPLIT_AFTER));
        assert!(!roster.on_append_unanswered(t0 + Duration::from_secs(11) + SPLIT_AFTER));
        let later = t0 + Duration::from_secs(12) + SPLIT_AFTER;
        let reason = roster.split_suspected(later).expect("a split is reported");
        assert!(reason.contains("a:1") && reason.contains("DIFF-14"), "{reason}");
        // No append for SPLIT_REPORTED_FOR: no longer reported; an answered one ends it.
        assert!(roster.split_suspected(later + SPLIT_REPORTED_FOR).is_none());
        roster.on_append_answered();
        assert!(roster.split_suspected(later).is_none());
    }

    #[test]
    fn cluster_split_1_without_a_leader_it_is_an_outage_not_a_split() {
        let t0 = Instant::now();
        let mut roster = RosterState::new(vec!["a:1".into()]);
        roster.on_append_unanswered(t0);
        assert!(!roster.on_append_unanswered(t0 + SPLIT_AFTER));
        assert!(roster.split_suspected(t0 + SPLIT_AFTER).is_none());
    }
}
