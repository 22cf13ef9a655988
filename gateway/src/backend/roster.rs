//! The Iggy cluster roster (docs/spec/cluster.md): which node the real backend dials next, given
//! what the nodes answered. Sans-io: the backend (`iggy/`) feeds it answers and asks it for
//! candidates; it never opens a socket or reads a clock, so its decisions are unit-tested here.

use iggy_common::{ClusterMetadata, ClusterNodeRole, ClusterNodeStatus};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long appends must go unanswered while a metadata leader answers before the roster calls
/// it a split (CLUSTER-SPLIT-1): four times a failover's 4.9 s (DIFF-15), so a primary's death
/// and the election after it never count.
pub const SPLIT_AFTER: Duration = Duration::from_secs(20);

/// CLUSTER-FAILOVER-5: how often a member that fails logins is sent one, from the whole gateway:
/// the pace at which a node mid-election is asked again (`ELECTION_POLL`).
pub const LOGIN_GATE: Duration = Duration::from_millis(250);
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

/// The bound on one node's answer, a dial (connect, login, cluster metadata) or one call
/// (CLUSTER-FAILOVER-3): the failover bound shared by the members and one more, so that a call
/// that stalls and then a sweep over every member fit in one failover bound.
pub fn node_bound(failover_timeout: Duration, members: usize) -> Duration {
    let shares = u32::try_from(members).unwrap_or(u32::MAX).saturating_add(1);
    (failover_timeout / shares).max(Duration::from_millis(1))
}

/// A node to dial: its address, and the name its TLS certificate must carry. CLUSTER-ROSTER-2:
/// the name is always one from the configuration (the member's host, or the host of the member
/// that named an unlisted leader), never one a node's metadata gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dial {
    pub address: String,
    pub tls_host: String,
}

impl Dial {
    /// A roster member, its TLS name its own host.
    pub fn member(address: &str) -> Self {
        Dial {
            address: address.to_string(),
            tls_host: host_of(address).to_string(),
        }
    }
}

/// The host of `HOST:PORT`, without an IPv6 literal's brackets.
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// What a node's own answer to a dial or a call says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It took a connection and the login.
    Connected,
    /// The connection was refused or broke, or the node did not answer a dial or a call within
    /// the node bound.
    Down,
}

/// Where a dial goes after the node it reached named the cluster's leader (CLUSTER-ROUTE-1,
/// CLUSTER-ROSTER-2, CLUSTER-FAILOVER-3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This node: it is the leader, or the cluster names none (mid-election, or one node).
    Here,
    /// The leader is another node to dial next.
    To(Dial),
    /// The leader is a member that did not answer when last tried: not moved to now, it comes
    /// last in the sweep, where its own answer decides.
    Later(String),
    /// The leader is no member and may not be dialled: `first` when this is news, to log once.
    Unlisted { address: String, first: bool },
}

/// Which node to dial next (CLUSTER-ROUTE-1, CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-3,
/// CLUSTER-ROSTER-2). Shared by the root backend and every principal's session, so what one
/// connection learns every later dial uses.
#[derive(Debug, Clone)]
pub struct RosterState {
    members: Vec<String>,
    /// The socket addresses each member resolved to when last resolved, to recognise a leader
    /// the cluster names by another spelling of a member's address.
    resolved: Vec<Vec<SocketAddr>>,
    /// The metadata leader as a live node last reported it: a member, or an unlisted node
    /// followed because `follow_unlisted` allows it.
    leader: Option<Dial>,
    /// Members that were down, or did not answer in time, when last dialled or called.
    down: Vec<bool>,
    /// When each member last answered a dial: a failure of an attempt that began before it is
    /// older news and demotes nothing (CLUSTER-FAILOVER-3).
    answered_at: Vec<Option<Instant>>,
    /// The leader last found down while it led: other nodes naming it again say nothing new
    /// (they have not noticed yet), unlike their naming another node found down, which the
    /// cluster may have elected since (CLUSTER-FAILOVER-3).
    deposed: Option<String>,
    /// Where the next sweep over the members starts, so repeated failovers spread over them.
    start: usize,
    /// CLUSTER-ROSTER-2: whether a leader that is no member may be dialled
    /// (`iggy_follow_unlisted_leader`).
    follow_unlisted: bool,
    /// The last unlisted leader that was refused, so it is logged once.
    refused_unlisted: Option<String>,
    /// Why the last reconnect found no node, until one succeeds (CLUSTER-FAILOVER-2).
    unavailable: Option<String>,
    /// Appends unanswered since the last answered one: when the first and the last were
    /// (CLUSTER-SPLIT-1).
    stalled_appends: Option<(Instant, Instant)>,
    /// CLUSTER-FAILOVER-5: per member, while it answers logins with a failure other than a
    /// refusal of the credentials, the instant before which no other login is sent to it.
    login_gate: Vec<Option<Instant>>,
}

impl RosterState {
    /// A roster of `members` (at least one; see [`parse_roster`]).
    pub fn new(members: Vec<String>) -> Self {
        let n = members.len();
        Self {
            members,
            resolved: vec![Vec::new(); n],
            leader: None,
            down: vec![false; n],
            answered_at: vec![None; n],
            deposed: None,
            start: 0,
            follow_unlisted: false,
            refused_unlisted: None,
            unavailable: None,
            stalled_appends: None,
            login_gate: vec![None; n],
        }
    }

    /// CLUSTER-ROSTER-2: lets a leader that is no member be dialled.
    pub fn follow_unlisted(mut self, follow: bool) -> Self {
        self.follow_unlisted = follow;
        self
    }

    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_ref().map(|d| d.address.as_str())
    }

    /// Why the last reconnect reached no node, while no reconnect has succeeded since.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// Records that a reconnect reached no node, and why.
    pub fn on_unavailable(&mut self, why: String) {
        self.unavailable = Some(why);
    }

    /// CLUSTER-ROUTE-1, CLUSTER-FAILOVER-3: the nodes to dial, in order, for one sweep: the known
    /// leader first unless it is down, then the members not down (from the rotation point),
    /// then those down. Each node once; every member is in it.
    pub fn candidates(&self) -> Vec<Dial> {
        let n = self.members.len();
        let rotated = (0..n).map(|i| (self.start + i) % n);
        let up = rotated.clone().filter(|&i| !self.down[i]);
        let down = rotated.filter(|&i| self.down[i]);
        let leader_up = self
            .leader
            .as_ref()
            .filter(|l| self.index(&l.address).is_none_or(|i| !self.down[i]));
        let mut out: Vec<Dial> = leader_up.cloned().into_iter().collect();
        for i in up.chain(down) {
            if !out.iter().any(|d| d.address == self.members[i]) {
                out.push(Dial::member(&self.members[i]));
            }
        }
        out
    }

    /// CLUSTER-FAILOVER-3: whether a connection on `address` should leave it: a member found
    /// down, or an unlisted node that is no longer the leader followed there.
    pub fn is_down(&self, address: &str) -> bool {
        match self.index(address) {
            Some(i) => self.down[i],
            None => self.leader() != Some(address),
        }
    }

    fn index(&self, address: &str) -> Option<usize> {
        self.members.iter().position(|m| m == address)
    }

    /// Whether `address` is a member as written; a leader named otherwise is matched against the
    /// members' resolved addresses, which the caller refreshes first ([`Self::on_resolved`]).
    pub fn lists(&self, address: &str) -> bool {
        self.index(address).is_some()
    }

    /// The socket addresses each member resolves to now, in roster order.
    pub fn on_resolved(&mut self, resolved: Vec<Vec<SocketAddr>>) {
        if resolved.len() == self.members.len() {
            self.resolved = resolved;
        }
    }

    /// CLUSTER-ROSTER-2: the member `address` names, as written or by a resolved address.
    fn member_for(&self, address: &str) -> Option<usize> {
        self.index(address).or_else(|| {
            let named: SocketAddr = address.parse().ok()?;
            self.resolved.iter().position(|addrs| addrs.contains(&named))
        })
    }

    /// CLUSTER-ROUTE-1, CLUSTER-ROSTER-2, CLUSTER-FAILOVER-3: `from`, just dialled, names
    /// `named` the cluster's leader (`None`: mid-election, or a cluster of one). Records it and
    /// says where the dial goes: a member is dialled under its own address and TLS name; a
    /// leader that is no member only when `follow_unlisted` allows, with the TLS name of the
    /// member that named it; a member found down is left for the end of the sweep, whatever
    /// another node says of it.
    pub fn on_metadata(&mut self, from: &Dial, named: Option<String>) -> Route {
        let Some(named) = named else {
            self.leader = None;
            return Route::Here;
        };
        if let Some(i) = self.member_for(&named) {
            let leader = Dial::member(&self.members[i]);
            self.leader = Some(leader.clone());
            return if leader.address == from.address {
                Route::Here
            } else if self.down[i] && self.deposed.as_deref() == Some(leader.address.as_str()) {
                Route::Later(leader.address)
            } else {
                Route::To(leader)
            };
        }
        if named == from.address {
            // The unlisted leader this dial followed: it is where the calls go.
            return Route::Here;
        }
        if self.follow_unlisted {
            let leader = Dial {
                address: named,
                tls_host: from.tls_host.clone(),
            };
            self.leader = Some(leader.clone());
            return Route::To(leader);
        }
        self.leader = None;
        let first = self.refused_unlisted.as_deref() != Some(named.as_str());
        self.refused_unlisted = Some(named.clone());
        Route::Unlisted { address: named, first }
    }

    /// CLUSTER-FAILOVER-5: whether a login may be sent to `node` at `now`. While the node fails
    /// logins, one login at a time goes to it, one per [`LOGIN_GATE`] for the whole gateway: the
    /// caller that may send it claims the next slot; the others get the instant to ask again.
    /// A node that takes logins (or no member) is never held.
    pub fn claim_login(&mut self, node: &str, now: Instant) -> Result<(), Instant> {
        let Some(i) = self.index(node) else {
            return Ok(());
        };
        match self.login_gate[i] {
            Some(open_at) if now < open_at => Err(open_at),
            Some(_) => {
                self.login_gate[i] = Some(now + LOGIN_GATE);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// CLUSTER-FAILOVER-5: `node` answered a login at `now` with a failure that is not a
    /// refusal of the credentials (seen during an election), or took it (`ok`).
    pub fn on_login(&mut self, node: &str, ok: bool, now: Instant) {
        if let Some(i) = self.index(node) {
            self.login_gate[i] = (!ok).then_some(now + LOGIN_GATE);
        }
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
        let leader = self.leader()?;
        (last.duration_since(since) >= SPLIT_AFTER && now.duration_since(last) < SPLIT_REPORTED_FOR).then(|| {
            format!(
                "appends have had no answer for {} s while {leader} answers as the metadata leader: \
                 the cluster's partitions may have a primary other than its metadata (DIFF-14); \
                 restart its nodes one after another",
                last.duration_since(since).as_secs()
            )
        })
    }

    /// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-3: records `node`'s own answer to a dial or a call:
    /// `at` is when it answered (Connected), or when the attempt that found it down began
    /// (Down). Only a node's own answer brings it back up: another node naming it leader does
    /// not. A failure of an attempt that began before the node's last answer is ignored: a
    /// login sent during an election can time out after another connection has logged in.
    pub fn on_answer(&mut self, node: &str, answer: Answer, at: Instant) {
        let index = self.index(node);
        if answer == Answer::Down && index.is_some_and(|i| self.answered_at[i].is_some_and(|answered| answered > at)) {
            return;
        }
        match answer {
            Answer::Connected => {
                if let Some(i) = index {
                    self.down[i] = false;
                    self.answered_at[i] = Some(at);
                }
                if self.deposed.as_deref() == Some(node) {
                    self.deposed = None;
                }
                self.unavailable = None;
            }
            Answer::Down => {
                if let Some(i) = index {
                    self.down[i] = true;
                    self.start = (i + 1) % self.members.len();
                }
                if self.leader() == Some(node) {
                    self.leader = None;
                    self.deposed = Some(node.to_string());
                }
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
        .map(|n| {
            if n.ip.contains(':') && !n.ip.starts_with('[') {
                format!("[{}]:{}", n.ip, n.endpoints.tcp)
            } else {
                format!("{}:{}", n.ip, n.endpoints.tcp)
            }
        })
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

    fn route_from(r: &mut RosterState, from: &str, named: Option<&str>) -> Route {
        r.on_metadata(&Dial::member(from), named.map(str::to_string))
    }

    #[test]
    fn cluster_route_1_members_in_order_until_a_leader_is_known_then_the_leader_first() {
        let mut r = roster(3);
        assert_eq!(r.candidates(), [a(0), a(1), a(2)].map(|m| Dial::member(&m)));
        assert_eq!(route_from(&mut r, &a(0), Some(&a(2))), Route::To(Dial::member(&a(2))));
        assert_eq!(r.candidates(), [a(2), a(0), a(1)].map(|m| Dial::member(&m)));
        assert_eq!(r.leader(), Some(a(2).as_str()));
        assert_eq!(route_from(&mut r, &a(2), Some(&a(2))), Route::Here);
    }

    #[test]
    fn cluster_failover_1_a_dead_leader_is_dropped_and_tried_last() {
        let order = |r: &RosterState| r.candidates().into_iter().map(|d| d.address).collect::<Vec<_>>();
        let mut r = roster(3);
        assert_eq!(route_from(&mut r, &a(0), Some(&a(0))), Route::Here);
        r.on_answer(&a(0), Answer::Down, Instant::now());
        assert_eq!(r.leader(), None, "the dead leader is forgotten");
        assert_eq!(order(&r), [a(1), a(2), a(0)], "the survivors first, the dead one last");
        r.on_answer(&a(1), Answer::Down, Instant::now());
        assert_eq!(order(&r), [a(2), a(0), a(1)]);
        // The survivors elected a(2); a(0) comes back and is up again once it answers.
        assert_eq!(route_from(&mut r, &a(2), Some(&a(2))), Route::Here);
        r.on_answer(&a(0), Answer::Connected, Instant::now());
        assert_eq!(order(&r), [a(2), a(0), a(1)]);
        // Every node down: every node is still a candidate, once each.
        let mut r = roster(2);
        r.on_answer(&a(0), Answer::Down, Instant::now());
        r.on_answer(&a(1), Answer::Down, Instant::now());
        assert_eq!(order(&r), [a(0), a(1)]);
    }

    #[test]
    fn cluster_failover_1_mid_election_no_leader_means_every_member_in_turn() {
        let mut r = roster(3);
        route_from(&mut r, &a(1), Some(&a(1)));
        assert_eq!(route_from(&mut r, &a(2), None), Route::Here, "no leader named: stay");
        assert_eq!(r.leader(), None);
        assert_eq!(r.candidates(), [a(0), a(1), a(2)].map(|m| Dial::member(&m)));
    }

    /// The report's case: a leader that took logins and then stalled a call stayed first,
    /// because every other node still named it leader.
    #[test]
    fn cluster_failover_3_a_node_that_stalled_stays_last_whatever_the_others_say() {
        let order = |r: &RosterState| r.candidates().into_iter().map(|d| d.address).collect::<Vec<_>>();
        let mut r = roster(3);
        assert_eq!(route_from(&mut r, &a(0), Some(&a(0))), Route::Here);
        // a(0) took the login, then a call got no answer in time: it is demoted.
        r.on_answer(&a(0), Answer::Down, Instant::now());
        // a(1) has not noticed yet and still names a(0) its leader: not moved to now.
        assert_eq!(route_from(&mut r, &a(1), Some(&a(0))), Route::Later(a(0)));
        assert_eq!(order(&r), [a(1), a(2), a(0)], "tried last, still tried");
        assert!(r.is_down(&a(0)) && !r.is_down(&a(1)), "connections on it leave it");
        // Its own answer brings it back first.
        r.on_answer(&a(0), Answer::Connected, Instant::now());
        assert_eq!(order(&r), [a(0), a(1), a(2)]);
    }

    #[test]
    fn cluster_failover_3_a_failure_older_than_the_nodes_last_answer_demotes_nothing() {
        let t0 = Instant::now();
        let mut r = roster(2);
        // A dial began at t0 and timed out; meanwhile another connection logged in at t0 + 1 s.
        r.on_answer(&a(0), Answer::Connected, t0 + Duration::from_secs(1));
        r.on_answer(&a(0), Answer::Down, t0);
        assert!(!r.is_down(&a(0)));
        // A call that began after that answer and failed does demote it.
        r.on_answer(&a(0), Answer::Down, t0 + Duration::from_secs(2));
        assert!(r.is_down(&a(0)));
    }

    /// Seen in the cluster tier: during the election that replaced a stalled leader, a login at
    /// a(1) went unanswered (logins wait for a primary), so a(1) was demoted too; once the
    /// cluster elects a(1), a node naming it is followed at once.
    #[test]
    fn cluster_failover_3_a_node_found_down_that_the_cluster_then_elects_is_followed() {
        let mut r = roster(3);
        route_from(&mut r, &a(0), Some(&a(0)));
        r.on_answer(&a(0), Answer::Down, Instant::now());
        r.on_answer(&a(1), Answer::Down, Instant::now());
        assert_eq!(route_from(&mut r, &a(2), Some(&a(0))), Route::Later(a(0)), "not news");
        assert_eq!(route_from(&mut r, &a(2), Some(&a(1))), Route::To(Dial::member(&a(1))));
    }

    #[test]
    fn cluster_failover_3_one_stalled_call_and_a_sweep_over_every_member_fit_the_bound() {
        let failover = Duration::from_secs(10);
        for members in 1..=7 {
            let bound = node_bound(failover, members);
            println!("{members} members: {bound:?} per node");
            assert!(bound * (members as u32 + 1) <= failover, "{members} members: {bound:?}");
            assert!(bound > Duration::ZERO);
        }
        assert_eq!(node_bound(failover, 3), Duration::from_millis(2_500));
        assert_eq!(node_bound(Duration::from_millis(1), 3), Duration::from_millis(1));
    }

    #[test]
    fn cluster_roster_2_a_leader_outside_the_roster_is_not_dialled() {
        let outsider = "10.0.0.9:8090";
        let mut r = roster(3);
        assert_eq!(
            route_from(&mut r, &a(0), Some(outsider)),
            Route::Unlisted {
                address: outsider.into(),
                first: true
            }
        );
        assert_eq!(r.candidates(), [a(0), a(1), a(2)].map(|m| Dial::member(&m)));
        assert_eq!(r.leader(), None);
        assert_eq!(
            route_from(&mut r, &a(1), Some(outsider)),
            Route::Unlisted {
                address: outsider.into(),
                first: false
            },
            "logged once"
        );
        // Followed when the option says so, under the TLS name of the member that named it.
        let mut r =
            RosterState::new(vec!["iggy-0.example:8090".into(), "iggy-1.example:8090".into()]).follow_unlisted(true);
        let followed = Dial {
            address: outsider.into(),
            tls_host: "iggy-1.example".into(),
        };
        assert_eq!(
            r.on_metadata(&Dial::member("iggy-1.example:8090"), Some(outsider.into())),
            Route::To(followed.clone())
        );
        assert_eq!(r.candidates()[0], followed);
        assert_eq!(r.on_metadata(&followed, Some(outsider.into())), Route::Here);
    }

    #[test]
    fn cluster_roster_2_a_leader_named_by_another_spelling_is_that_member_under_its_name() {
        let mut r = RosterState::new(vec!["localhost:18090".into(), "127.0.0.1:18091".into()]);
        assert!(!r.lists("127.0.0.1:18090"));
        r.on_resolved(vec![
            vec!["127.0.0.1:18090".parse().unwrap(), "[::1]:18090".parse().unwrap()],
            vec!["127.0.0.1:18091".parse().unwrap()],
        ]);
        let leader = Dial {
            address: "localhost:18090".into(),
            tls_host: "localhost".into(),
        };
        assert_eq!(
            route_from(&mut r, "127.0.0.1:18091", Some("127.0.0.1:18090")),
            Route::To(leader.clone())
        );
        assert_eq!(route_from(&mut r, "localhost:18090", Some("[::1]:18090")), Route::Here);
        assert_eq!(host_of("[::1]:8090"), "::1");
        assert_eq!(Dial::member("iggy-2:8090").tls_host, "iggy-2");
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
        let mut v6 = node("b", 18091, Leader, Healthy);
        v6.ip = "::1".into();
        let m = metadata(vec![node("a", 18090, Follower, Healthy), v6]);
        assert_eq!(leader_address(&m).as_deref(), Some("[::1]:18091"));
    }

    #[test]
    fn cluster_split_1_appends_stalled_past_a_failover_with_a_leader_known_are_a_split() {
        let t0 = Instant::now();
        let mut roster = RosterState::new(vec!["a:1".into(), "b:2".into()]);
        roster.on_metadata(&Dial::member("b:2"), Some("a:1".into()));
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
    fn cluster_failover_5_a_node_failing_logins_gets_one_at_a_time_from_the_gateway() {
        let t0 = Instant::now();
        let mut r = roster(2);
        // Taking logins: every connection may log in at once.
        assert_eq!(r.claim_login(&a(0), t0), Ok(()));
        assert_eq!(r.claim_login(&a(0), t0), Ok(()));
        // A failed login holds the node for LOGIN_GATE: the other connections wait.
        r.on_login(&a(0), false, t0);
        assert_eq!(r.claim_login(&a(0), t0), Err(t0 + LOGIN_GATE));
        assert_eq!(r.claim_login(&a(1), t0), Ok(()), "another member is not held");
        // Then one caller claims the next slot and the others wait for the one after.
        let later = t0 + LOGIN_GATE;
        assert_eq!(r.claim_login(&a(0), later), Ok(()));
        assert_eq!(r.claim_login(&a(0), later), Err(later + LOGIN_GATE));
        // A login taken opens the node to every connection again.
        r.on_login(&a(0), true, later);
        assert_eq!(r.claim_login(&a(0), later), Ok(()));
        assert_eq!(r.claim_login(&a(0), later), Ok(()));
        // A node that is no member (an unlisted leader followed) is never held.
        r.on_login("10.0.0.9:8090", false, t0);
        assert_eq!(r.claim_login("10.0.0.9:8090", t0), Ok(()));
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
