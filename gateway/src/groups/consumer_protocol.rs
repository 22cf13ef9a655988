//! KIP-848's consumer group protocol (ConsumerGroupHeartbeat), sans-io: one group's members,
//! its group epoch, the target assignment the server computes (`uniform` or `range`), and each
//! member's reconciliation towards it, revocation before assignment (docs/spec/groups.md,
//! GROUP-CONSUMER-*). No I/O and no clock: callers pass the time and the partition counts of the
//! topics the group subscribes to.
//!
//! The invariant every transition keeps (GROUP-CONSUMER-REVOKE-1): a partition is held (assigned,
//! or revoked but not yet acknowledged) by at most one member. A member is given a partition only
//! once no other member holds it, and a member lets go of a revoked partition only when its
//! heartbeat's owned partitions no longer name it.

use super::Owner;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// Partitions by topic name.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The server-side assignors (GROUP-CONSUMER-ASSIGNOR-1), by the names Kafka gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "uniform" => Some(Self::Uniform),
            "range" => Some(Self::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Range => "range",
        }
    }
}

/// Why a heartbeat was refused; `error_map::consumer_group_code` gives the Kafka code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupError {
    UnknownMemberId,
    FencedMemberEpoch(String),
    FencedInstanceId,
    UnreleasedInstanceId,
    GroupMaxSizeReached,
    /// The group id is a classic group's (GROUP-CONSUMER-TYPE-1).
    NotConsumerGroup,
    NotCoordinator,
    /// A gateway-wide or per-owner limit, named by its rule (GROUP-LIMIT-1, LIMIT-GROUP-MEMBERS-1,
    /// LIMIT-GROUP-OWNER-1, LIMIT-GROUP-BYTES-1): the refusal's message names it.
    CoordinatorNotAvailable(&'static str),
}

/// A member's reconciliation state, as Kafka's `MemberState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// It must revoke partitions (and acknowledge it) before it gets more.
    UnrevokedPartitions,
    /// It waits for partitions other members still hold.
    UnreleasedPartitions,
}

/// What one ConsumerGroupHeartbeat asks, decoded and checked for shape by the handler.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub rebalance_timeout: Option<Duration>,
    pub subscribed_topics: Option<Vec<String>>,
    /// `SubscribedTopicRegex`, already checked (GROUP-CONSUMER-REGEX-1); `None`: unchanged, and an
    /// empty pattern: none.
    pub subscribed_regex: Option<String>,
    pub assignor: Option<Assignor>,
    /// The partitions the member says it owns; `None`: unchanged.
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
    pub owner: Owner,
    /// Whose permissions resolve the member's pattern (GROUP-CONSUMER-REGEX-SCOPE-1): the SASL
    /// principal, or empty when nothing is checked (every session then lists the same topics).
    pub pattern_scope: Owner,
    /// What the patterns handed out by [`ConsumerGroup::pattern_plan`] matched, resolved in
    /// `pattern_scope`; applied only once the heartbeat is known to come from a member
    /// (GROUP-CONSUMER-NONMEMBER-1).
    pub resolutions: BTreeMap<String, BTreeSet<String>>,
}

/// What a heartbeat must do with patterns before the coordinator takes it
/// (GROUP-CONSUMER-NONMEMBER-1, GROUP-CONSUMER-REGEX-COST-1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternPlan {
    /// The pattern it subscribes to, when the member did not hold it already: compiled to be
    /// checked, as Kafka compiles a member's regex only when it changed.
    pub validate: Option<String>,
    /// The patterns to resolve now, in the heartbeat's scope.
    pub resolve: Vec<String>,
    /// The names the heartbeat brings that no member of the group names yet: looked up one by
    /// one (GROUP-CONSUMER-LOOKUPS-1).
    pub look_up: Vec<String>,
    /// When due, every topic the group names: checked against one listing of the Kafka topics
    /// (GROUP-CONSUMER-LOOKUPS-1).
    pub list_names: Option<Vec<String>>,
}

/// What the heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's assignment, when it changed or the request was a full one.
    pub assignment: Option<Assignment>,
}

/// Group-wide settings of the protocol.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    pub session_timeout: Duration,
    pub max_members: usize,
    pub default_assignor: Assignor,
}

#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// Held and current.
    pub assigned: Assignment,
    /// Held until the member acknowledges their revocation.
    pub revoking: Assignment,
    pub subscribed: Vec<String>,
    /// Its `SubscribedTopicRegex`, if any: the topics it matches are subscribed too
    /// (GROUP-CONSUMER-REGEX-1).
    pub subscribed_regex: Option<String>,
    pub assignor: Option<Assignor>,
    pub rebalance_timeout: Duration,
    pub client_id: String,
    pub client_host: String,
    pub owner: Owner,
    /// Whose permissions resolved its pattern (GROUP-CONSUMER-REGEX-SCOPE-1).
    pub pattern_scope: Owner,
    session_deadline: Instant,
    /// When a member asked to revoke must have done so (GROUP-CONSUMER-TIMEOUT-1).
    revocation_deadline: Option<Instant>,
    /// A static member that left with epoch -2: kept, with its partitions, until its session
    /// lapses or its instance rejoins.
    pub left_static: bool,
}

/// One consumer-protocol group.
#[derive(Debug)]
pub struct ConsumerGroup {
    id: String,
    creator: Owner,
    group_epoch: i32,
    target_epoch: i32,
    members: BTreeMap<String, ConsumerMember>,
    /// The target assignment of `target_epoch`, per member.
    target: BTreeMap<String, Assignment>,
    /// Partition counts of the subscribed topics the last heartbeat saw.
    topics: BTreeMap<String, u32>,
    /// Who holds each partition (assigned or revoking): the single-owner invariant's ledger.
    holders: HashMap<(String, i32), String>,
    owner_changes: Vec<(Owner, isize)>,
    /// Bytes of the members' strings held (LIMIT-GROUP-BYTES-1, LIMIT-GROUP-MEMBER-BYTES-1),
    /// regex resolutions included.
    stored_bytes: usize,
    /// Per scope, the topics each pattern its members subscribe to matched when last resolved
    /// (GROUP-CONSUMER-REGEX-1, GROUP-CONSUMER-REGEX-SCOPE-1), shared by the members of the scope
    /// naming the same pattern; an entry goes with the last member naming it.
    resolved: BTreeMap<Owner, BTreeMap<String, ResolvedRegex>>,
    /// How many members name each topic (GROUP-CONSUMER-LOOKUPS-1): the group's named topics in
    /// O(distinct topics), however many members name them.
    name_support: BTreeMap<String, usize>,
    /// When the group's named topics were last handed out to be checked against a listing
    /// (GROUP-CONSUMER-LOOKUPS-1).
    names_listed_at: Option<Instant>,
}

/// What one pattern matched, and when it was last handed out to be resolved
/// (GROUP-CONSUMER-REGEX-1).
#[derive(Debug, Clone)]
pub struct ResolvedRegex {
    pub topics: BTreeSet<String>,
    pub resolved_at: Instant,
}

fn count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

fn subscription_bytes(topics: &[String]) -> usize {
    topics.iter().map(String::len).sum()
}

fn optional_bytes(value: &Option<String>) -> usize {
    value.as_ref().map_or(0, String::len)
}

/// What a member holds in bytes (LIMIT-GROUP-BYTES-1, LIMIT-GROUP-MEMBER-BYTES-1): every string
/// it brought, its ids, client id and host, subscribed names and pattern.
fn member_bytes(m: &ConsumerMember) -> usize {
    m.id.len()
        + optional_bytes(&m.instance_id)
        + optional_bytes(&m.rack_id)
        + m.client_id.len()
        + m.client_host.len()
        + subscription_bytes(&m.subscribed)
        + optional_bytes(&m.subscribed_regex)
}

impl Heartbeat {
    /// The bytes of the distinct subscribed names this heartbeat brings that `known` does not
    /// hold: what the group's index of named topics would gain (GROUP-CONSUMER-LOOKUPS-1).
    pub fn new_name_bytes(&self, known: Option<&BTreeMap<String, usize>>) -> usize {
        let names: BTreeSet<&str> = self
            .subscribed_topics
            .iter()
            .flatten()
            .map(String::as_str)
            .filter(|n| !n.is_empty() && known.is_none_or(|k| !k.contains_key(*n)))
            .collect();
        names.into_iter().map(str::len).sum()
    }

    /// Every string this heartbeat brings for its member: what a joiner would keep
    /// (LIMIT-GROUP-MEMBER-BYTES-1).
    pub fn string_bytes(&self) -> usize {
        self.member_id.len()
            + optional_bytes(&self.instance_id)
            + optional_bytes(&self.rack_id)
            + self.client_id.len()
            + self.client_host.len()
            + self.subscribed_topics.as_deref().map_or(0, subscription_bytes)
            + optional_bytes(&self.subscribed_regex)
    }
}

/// What one pattern's resolution holds in bytes: the pattern and the topics it matched.
fn resolution_bytes(pattern: &str, topics: &BTreeSet<String>) -> usize {
    pattern.len() + topics.iter().map(String::len).sum::<usize>()
}

/// Counts a member's (sorted, distinct) subscribed names in or out of `support`
/// (GROUP-CONSUMER-LOOKUPS-1). The group's own copy of each name is stored too: its bytes go in
/// and out of `stored_bytes` with it (LIMIT-GROUP-MEMBER-BYTES-1).
fn count_names(support: &mut BTreeMap<String, usize>, stored_bytes: &mut usize, names: &[String], add: bool) {
    for name in names {
        if add {
            let count = support.entry(name.clone()).or_insert_with(|| {
                *stored_bytes += name.len();
                0
            });
            *count += 1;
        } else if let Some(count) = support.get_mut(name) {
            *count -= 1;
            if *count == 0 {
                support.remove(name);
                *stored_bytes -= name.len();
            }
        }
    }
}

/// A member's growth in the strings `request` replaces (LIMIT-GROUP-BYTES-1).
fn member_growth(m: &ConsumerMember, request: &Heartbeat) -> usize {
    let growth = |new: Option<usize>, old: usize| new.map_or(0, |n| n.saturating_sub(old));
    growth(
        request.subscribed_topics.as_deref().map(subscription_bytes),
        subscription_bytes(&m.subscribed),
    ) + growth(
        request.subscribed_regex.as_ref().map(String::len),
        optional_bytes(&m.subscribed_regex),
    ) + growth(request.rack_id.as_ref().map(String::len), optional_bytes(&m.rack_id))
}

fn is_subset(small: &Assignment, big: &Assignment) -> bool {
    small
        .iter()
        .all(|(t, ps)| ps.is_empty() || big.get(t).is_some_and(|b| ps.is_subset(b)))
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|other| !ps.is_disjoint(other)))
}

fn normalized(mut a: Assignment) -> Assignment {
    a.retain(|_, ps| !ps.is_empty());
    a
}

impl ConsumerGroup {
    pub fn new(id: String, creator: Owner) -> Self {
        Self {
            id,
            creator,
            group_epoch: 0,
            target_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            topics: BTreeMap::new(),
            holders: HashMap::new(),
            owner_changes: Vec::new(),
            stored_bytes: 0,
            resolved: BTreeMap::new(),
            name_support: BTreeMap::new(),
            names_listed_at: None,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn creator(&self) -> &Owner {
        &self.creator
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn target_epoch(&self) -> i32 {
        self.target_epoch
    }

    pub fn members(&self) -> impl Iterator<Item = &ConsumerMember> {
        self.members.values()
    }

    pub fn member(&self, id: &str) -> Option<&ConsumerMember> {
        self.members.get(id)
    }

    pub fn target_of(&self, id: &str) -> Assignment {
        self.target.get(id).cloned().unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members held, and bytes of their strings and of the patterns' resolutions
    /// (LIMIT-GROUP-MEMBERS-1, LIMIT-GROUP-BYTES-1).
    pub fn usage(&self) -> (usize, usize) {
        (self.members.len(), self.stored_bytes)
    }

    /// LIMIT-GROUP-BYTES-1: how many bytes `request` may add to what the group holds, at most: a
    /// joiner's every string, a member's growth in the strings it replaces, and the names new to
    /// the group's index of named topics; nothing for a leave.
    pub fn bytes_added(&self, request: &Heartbeat) -> usize {
        if request.member_epoch < 0 {
            return 0;
        }
        let new_names = request.new_name_bytes(Some(&self.name_support));
        let Some(m) = self.members.get(&request.member_id) else {
            return request.string_bytes() + new_names;
        };
        new_names + member_growth(m, request)
    }

    pub fn take_owner_changes(&mut self) -> Vec<(Owner, isize)> {
        std::mem::take(&mut self.owner_changes)
    }

    /// Every topic the members subscribe to, by name or by pattern, each once, in name order
    /// (AUTHZ-GROUP-4, GROUP-CONSUMER-REGEX-1).
    pub fn topics(&self) -> BTreeSet<String> {
        self.topic_refs().into_iter().cloned().collect()
    }

    /// As [`Self::topics`], borrowed: O(distinct topics), whatever the members (every resolution
    /// kept is of a pattern some member names, GROUP-CONSUMER-NONMEMBER-1).
    fn topic_refs(&self) -> BTreeSet<&String> {
        let matched = self.resolved.values().flat_map(|p| p.values()).flat_map(|r| &r.topics);
        self.name_support.keys().chain(matched).collect()
    }

    /// The topics the members subscribe to by name, each once (the topics patterns match are
    /// counted when the patterns are resolved).
    pub fn named_topics(&self) -> BTreeSet<String> {
        self.name_support.keys().cloned().collect()
    }

    /// GROUP-CONSUMER-REGEX-1: a member's subscription, the union of the names it subscribes to
    /// and the topics its pattern matched when last resolved in its scope.
    pub fn subscription_of(&self, member: &ConsumerMember) -> BTreeSet<String> {
        let matched = member
            .subscribed_regex
            .as_ref()
            .and_then(|r| self.resolution(&member.pattern_scope, r))
            .into_iter()
            .flat_map(|r| r.topics.iter().cloned());
        member.subscribed.iter().cloned().chain(matched).collect()
    }

    /// The last resolution of `pattern` in `scope`, if any (GROUP-CONSUMER-REGEX-SCOPE-1).
    pub fn resolution(&self, scope: &str, pattern: &str) -> Option<&ResolvedRegex> {
        self.resolved.get(scope).and_then(|patterns| patterns.get(pattern))
    }

    /// What a heartbeat of `member_id` at `epoch`, subscribing to `requested`, must do with
    /// patterns in `scope` before the coordinator takes it, at `now`:
    /// - GROUP-CONSUMER-NONMEMBER-1: a heartbeat under an id the group does not know, with an
    ///   epoch other than 0 (join) or below (leave), is UNKNOWN_MEMBER_ID, and nothing is handed
    ///   out or marked; a joiner resolves its own new pattern only;
    /// - GROUP-CONSUMER-REGEX-COST-1: the requested pattern is compiled when the member did not
    ///   hold it; a pattern never resolved in the scope is resolved now, and a member's heartbeat
    ///   also refreshes the scope's patterns last resolved `refresh_interval` ago or more, the
    ///   least recent first, at most `max_patterns` in all. What a member's heartbeat hands out is
    ///   taken as resolving, so concurrent heartbeats do not list topics again.
    #[allow(clippy::too_many_arguments)]
    pub fn pattern_plan(
        &mut self,
        member_id: &str,
        epoch: i32,
        requested: Option<&str>,
        names: Option<&[&str]>,
        scope: &Owner,
        now: Instant,
        refresh_interval: Duration,
        max_patterns: usize,
    ) -> Result<PatternPlan, ConsumerGroupError> {
        if epoch < 0 {
            return Ok(PatternPlan::default());
        }
        let member = self.members.get(member_id);
        if epoch != 0 && member.is_none() {
            return Err(ConsumerGroupError::UnknownMemberId);
        }
        let requested = requested.filter(|r| !r.is_empty());
        let validate = requested
            .filter(|r| member.is_none_or(|m| m.subscribed_regex.as_deref() != Some(*r)))
            .map(str::to_string);
        let mut resolve: Vec<String> = requested
            .filter(|r| self.resolution(scope, r).is_none())
            .map(str::to_string)
            .into_iter()
            .collect();
        if member.is_some() {
            if let Some(patterns) = self.resolved.get_mut(scope) {
                let mut stale: Vec<(Instant, &String)> = patterns
                    .iter()
                    .filter(|(_, r)| now.duration_since(r.resolved_at) >= refresh_interval)
                    .map(|(p, r)| (r.resolved_at, p))
                    .collect();
                stale.sort();
                let due: Vec<String> = stale
                    .into_iter()
                    .map(|(_, p)| p.clone())
                    .take(max_patterns.saturating_sub(resolve.len()))
                    .collect();
                for pattern in &due {
                    patterns.get_mut(pattern).expect("listed").resolved_at = now;
                }
                resolve.extend(due);
            }
        }
        resolve.truncate(max_patterns);
        // GROUP-CONSUMER-LOOKUPS-1: a heartbeat looks up what it brings that the group does not
        // name; a member's heartbeat checks the group's names against a listing once due.
        let look_up: BTreeSet<&str> = names
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(|n| !n.is_empty() && !self.name_support.contains_key(*n))
            .collect();
        let due = self
            .names_listed_at
            .is_none_or(|at| now.duration_since(at) >= refresh_interval);
        let list_names = (member.is_some() && due && !self.name_support.is_empty()).then(|| {
            self.names_listed_at = Some(now);
            self.named_topics().into_iter().collect()
        });
        Ok(PatternPlan {
            validate,
            resolve,
            look_up: look_up.into_iter().map(str::to_string).collect(),
            list_names,
        })
    }

    /// GROUP-CONSUMER-REGEX-1, GROUP-CONSUMER-NONMEMBER-1: stores what each pattern matched in
    /// `scope`, for the patterns a member of that scope subscribes to and no other. Returns
    /// whether what a subscribed pattern matches changed: a new group epoch, as in Kafka.
    fn apply_resolutions(
        &mut self,
        scope: &Owner,
        resolutions: BTreeMap<String, BTreeSet<String>>,
        now: Instant,
    ) -> bool {
        let mut changed = false;
        for (pattern, topics) in resolutions {
            let used = self
                .members
                .values()
                .any(|m| m.pattern_scope == *scope && m.subscribed_regex.as_deref() == Some(pattern.as_str()));
            if !used {
                continue;
            }
            let added = resolution_bytes(&pattern, &topics);
            let patterns = self.resolved.entry(scope.clone()).or_default();
            match patterns.get_mut(&pattern) {
                Some(previous) if previous.topics == topics => {
                    previous.resolved_at = now;
                    continue;
                }
                Some(previous) => {
                    self.stored_bytes = self.stored_bytes - resolution_bytes(&pattern, &previous.topics) + added;
                    *previous = ResolvedRegex {
                        topics,
                        resolved_at: now,
                    };
                }
                None => {
                    self.stored_bytes += added;
                    patterns.insert(
                        pattern,
                        ResolvedRegex {
                            topics,
                            resolved_at: now,
                        },
                    );
                }
            }
            changed = true;
        }
        changed
    }

    /// Forgets resolutions no member's pattern needs any more, in any scope, with their bytes.
    fn drop_unused_resolutions(&mut self) {
        let used: BTreeSet<(&str, &str)> = self
            .members
            .values()
            .filter_map(|m| m.subscribed_regex.as_deref().map(|r| (&*m.pattern_scope, r)))
            .collect();
        let mut freed = 0;
        self.resolved.retain(|scope, patterns| {
            patterns.retain(|pattern, r| {
                let keep = used.contains(&(&**scope, pattern.as_str()));
                if !keep {
                    freed += resolution_bytes(pattern, &r.topics);
                }
                keep
            });
            !patterns.is_empty()
        });
        self.stored_bytes -= freed;
    }

    /// What a ConsumerGroupDescribe answer of this group takes, in encoded bytes at most
    /// (LIMIT-GROUP-ANSWER-BYTES-1): counted without copying anything, every string and array
    /// with its longest length prefix.
    pub fn described_bytes(&self) -> usize {
        use crate::response_budget::{string_bytes, LENGTH_PREFIX_BYTES};
        let optional = |v: &Option<String>| string_bytes(optional_bytes(v));
        let assignment = |a: &Assignment| {
            LENGTH_PREFIX_BYTES
                + 1
                + a.iter()
                    .map(|(topic, ps)| 16 + string_bytes(topic.len()) + LENGTH_PREFIX_BYTES + 4 * ps.len() + 1)
                    .sum::<usize>()
        };
        let members: usize = self
            .members
            .values()
            .map(|m| {
                string_bytes(m.id.len())
                    + optional(&m.instance_id)
                    + optional(&m.rack_id)
                    + 4
                    + string_bytes(m.client_id.len())
                    + string_bytes(m.client_host.len())
                    + LENGTH_PREFIX_BYTES
                    + m.subscribed.iter().map(|t| string_bytes(t.len())).sum::<usize>()
                    + optional(&m.subscribed_regex)
                    + assignment(&m.assigned)
                    + self.target.get(&m.id).map_or(LENGTH_PREFIX_BYTES + 1, assignment)
                    + 1
                    + 1
            })
            .sum();
        // State, epochs, assignor and the member array's prefix.
        let header = string_bytes(self.state_name().len()) + 4 + 4 + string_bytes(16) + LENGTH_PREFIX_BYTES;
        header + members
    }

    /// Kafka's state names: Empty, Assigning, Reconciling, Stable.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.target_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.target_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the group uses: the one most members chose, else the default.
    pub fn assignor(&self, default: Assignor) -> Assignor {
        let mut votes: BTreeMap<Assignor, usize> = BTreeMap::new();
        for a in self.members.values().filter_map(|m| m.assignor) {
            *votes.entry(a).or_default() += 1;
        }
        votes
            .into_iter()
            .max_by_key(|(a, n)| (*n, std::cmp::Reverse(*a)))
            .map_or(default, |(a, _)| a)
    }

    /// The partition holder ledger, for tests and the invariant check.
    pub fn holders(&self) -> &HashMap<(String, i32), String> {
        &self.holders
    }

    fn bump(&mut self) {
        self.group_epoch += 1;
    }

    fn release(&mut self, member_id: &str, partitions: &Assignment) {
        for (topic, ps) in partitions {
            for p in ps {
                let key = (topic.clone(), *p);
                if self.holders.get(&key).is_some_and(|h| h == member_id) {
                    self.holders.remove(&key);
                }
            }
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        if let Some(m) = self.members.remove(member_id) {
            self.release(member_id, &m.assigned);
            self.release(member_id, &m.revoking);
            self.stored_bytes -= member_bytes(&m);
            count_names(&mut self.name_support, &mut self.stored_bytes, &m.subscribed, false);
            self.owner_changes.push((m.owner, -1));
            self.target.remove(member_id);
            self.bump();
        }
    }

    /// One ConsumerGroupHeartbeat (GROUP-CONSUMER-HEARTBEAT-1). `topics` holds what the caller
    /// looked up or listed (GROUP-CONSUMER-LOOKUPS-1: the names new to the group, the group's
    /// names when due, the topics patterns matched): a partition count, or `None` for a topic that
    /// does not exist; a topic not looked up keeps what was known.
    pub fn heartbeat(
        &mut self,
        mut request: Heartbeat,
        topics: &BTreeMap<String, Option<u32>>,
        settings: &ConsumerSettings,
        now: Instant,
    ) -> Result<HeartbeatAnswer, ConsumerGroupError> {
        // GROUP-CONSUMER-LEAVE-1
        if request.member_epoch < 0 {
            return self.leave(&request);
        }
        let full = request.member_epoch == 0
            || (request.rebalance_timeout.is_some() && request.subscribed_topics.is_some() && request.owned.is_some());
        let mut member_id = request.member_id.clone();
        let mut previously_assigned = Assignment::new();
        if request.member_epoch == 0 {
            self.join(&request, &mut member_id, settings, now)?;
        } else {
            let Some(member) = self.members.get(&member_id) else {
                return Err(ConsumerGroupError::UnknownMemberId);
            };
            if request.instance_id.is_some() && member.instance_id != request.instance_id {
                return Err(ConsumerGroupError::FencedInstanceId);
            }
            // GROUP-CONSUMER-EPOCH-1: as Kafka's throwIfMemberEpochIsInvalid.
            if request.member_epoch > member.epoch {
                return Err(ConsumerGroupError::FencedMemberEpoch(format!(
                    "member epoch {} is greater than the coordinator's {}",
                    request.member_epoch, member.epoch
                )));
            }
            if request.member_epoch < member.epoch
                && (request.member_epoch != member.previous_epoch
                    || !request.owned.as_ref().is_some_and(|o| is_subset(o, &member.assigned)))
            {
                return Err(ConsumerGroupError::FencedMemberEpoch(format!(
                    "member epoch {} is smaller than the coordinator's {}",
                    request.member_epoch, member.epoch
                )));
            }
            previously_assigned = member.assigned.clone();
        }
        let member = self.members.get_mut(&member_id).expect("joined or known");
        member.session_deadline = now + settings.session_timeout;
        member.left_static = false;
        if request.rack_id.is_some() && request.rack_id != member.rack_id {
            self.stored_bytes = self.stored_bytes - optional_bytes(&member.rack_id) + optional_bytes(&request.rack_id);
            member.rack_id = request.rack_id.clone();
        }
        if let Some(timeout) = request.rebalance_timeout {
            member.rebalance_timeout = timeout;
        }
        let mut changed = request.member_epoch == 0 && member.epoch == 0 && member.assigned.is_empty();
        if let Some(subscribed) = &request.subscribed_topics {
            let mut subscribed: Vec<String> = subscribed.iter().filter(|t| !t.is_empty()).cloned().collect();
            subscribed.sort();
            subscribed.dedup();
            if subscribed != member.subscribed {
                self.stored_bytes =
                    self.stored_bytes - subscription_bytes(&member.subscribed) + subscription_bytes(&subscribed);
                count_names(&mut self.name_support, &mut self.stored_bytes, &subscribed, true);
                count_names(
                    &mut self.name_support,
                    &mut self.stored_bytes,
                    &member.subscribed,
                    false,
                );
                member.subscribed = subscribed;
                changed = true;
            }
        }
        // GROUP-CONSUMER-REGEX-1: an empty pattern is none, as librdkafka sends it.
        if let Some(regex) = &request.subscribed_regex {
            let regex = Some(regex.clone()).filter(|r| !r.is_empty());
            if regex != member.subscribed_regex {
                let (old, new) = (
                    member.subscribed_regex.as_ref().map_or(0, String::len),
                    regex.as_ref().map_or(0, String::len),
                );
                self.stored_bytes = self.stored_bytes - old + new;
                member.subscribed_regex = regex;
                changed = true;
            }
        }
        if request.assignor.is_some() && request.assignor != member.assignor {
            member.assignor = request.assignor;
            changed = true;
        }
        if member.pattern_scope != request.pattern_scope {
            member.pattern_scope = request.pattern_scope.clone();
            changed = true;
        }
        // GROUP-CONSUMER-NONMEMBER-1: only now, the heartbeat known to be a member's and its
        // pattern set, are its resolutions kept, for the patterns members subscribe to.
        let resolutions = std::mem::take(&mut request.resolutions);
        changed |= self.apply_resolutions(&request.pattern_scope, resolutions, now);
        // Metadata of the subscribed topics: a new topic or more partitions is a new epoch.
        // GROUP-CONSUMER-LOOKUPS-1: rebuilt only when the subscriptions changed or the heartbeat
        // brings what it looked up; a steady heartbeat walks none of the group's topics.
        if changed || !topics.is_empty() {
            let image: BTreeMap<String, u32> = self
                .topic_refs()
                .into_iter()
                .filter_map(|t| match topics.get(t) {
                    Some(looked_up) => looked_up.map(|n| (t.clone(), n)),
                    // Not looked up for this heartbeat (another member subscribed meanwhile): as known.
                    None => self.topics.get(t).map(|n| (t.clone(), *n)),
                })
                .collect();
            if image != self.topics {
                self.topics = image;
                changed = true;
            }
        }
        if changed {
            self.bump();
            self.drop_unused_resolutions();
        }
        if self.group_epoch > self.target_epoch {
            self.compute_target(settings.default_assignor);
        }
        self.reconcile(&member_id, request.owned.as_ref(), now);
        let member = &self.members[&member_id];
        let assignment = (full || member.assigned != previously_assigned).then(|| member.assigned.clone());
        Ok(HeartbeatAnswer {
            member_id,
            member_epoch: member.epoch,
            assignment,
        })
    }

    fn join(
        &mut self,
        request: &Heartbeat,
        member_id: &mut String,
        settings: &ConsumerSettings,
        now: Instant,
    ) -> Result<(), ConsumerGroupError> {
        // GROUP-CONSUMER-STATIC-1
        if let Some(instance) = &request.instance_id {
            let existing = self
                .members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance))
                .map(|m| (m.id.clone(), m.left_static));
            match existing {
                Some((old, true)) if old != *member_id => {
                    // The instance comes back under a new id: it takes over the old member,
                    // its epoch and its partitions, as Kafka does.
                    let mut m = self.members.remove(&old).expect("present");
                    for key in self.holders.iter_mut().filter(|(_, h)| **h == old).map(|(_, h)| h) {
                        key.clone_from(member_id);
                    }
                    if let Some(t) = self.target.remove(&old) {
                        self.target.insert(member_id.clone(), t);
                    }
                    self.stored_bytes = self.stored_bytes - m.id.len() + member_id.len();
                    m.id = member_id.clone();
                    m.left_static = false;
                    self.owner_changes.push((m.owner.clone(), -1));
                    self.owner_changes.push((request.owner.clone(), 1));
                    m.owner = request.owner.clone();
                    self.members.insert(member_id.clone(), m);
                    return Ok(());
                }
                Some((old, _)) if old != *member_id => return Err(ConsumerGroupError::UnreleasedInstanceId),
                _ => {}
            }
        }
        if self.members.contains_key(member_id.as_str()) {
            // A member rejoining with epoch 0 gave up everything it held: it starts afresh.
            let old = self.members[member_id.as_str()].clone();
            self.remove_member(member_id);
            self.stored_bytes += member_bytes(&old);
            count_names(&mut self.name_support, &mut self.stored_bytes, &old.subscribed, true);
            self.owner_changes.push((old.owner.clone(), 1));
            self.members.insert(
                member_id.clone(),
                ConsumerMember {
                    epoch: 0,
                    previous_epoch: 0,
                    state: MemberState::Stable,
                    assigned: Assignment::new(),
                    revoking: Assignment::new(),
                    revocation_deadline: None,
                    session_deadline: now + settings.session_timeout,
                    ..old
                },
            );
            return Ok(());
        }
        // GROUP-LIMIT-1: members per group.
        if self.members.len() >= settings.max_members {
            return Err(ConsumerGroupError::GroupMaxSizeReached);
        }
        self.owner_changes.push((request.owner.clone(), 1));
        let member = ConsumerMember {
            id: member_id.clone(),
            instance_id: request.instance_id.clone(),
            rack_id: request.rack_id.clone(),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            subscribed: Vec::new(),
            subscribed_regex: None,
            assignor: None,
            rebalance_timeout: request.rebalance_timeout.unwrap_or(Duration::from_secs(300)),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            owner: request.owner.clone(),
            pattern_scope: request.pattern_scope.clone(),
            session_deadline: now + settings.session_timeout,
            revocation_deadline: None,
            left_static: false,
        };
        // Its subscription is counted as the heartbeat sets it.
        self.stored_bytes += member_bytes(&member);
        self.members.insert(member_id.clone(), member);
        // Its group epoch bump is the heartbeat's, with its subscription's.
        Ok(())
    }

    /// GROUP-CONSUMER-LEAVE-1: epoch -1 leaves; -2, a static member's, leaves its partitions
    /// with it until it rejoins or its session lapses.
    fn leave(&mut self, request: &Heartbeat) -> Result<HeartbeatAnswer, ConsumerGroupError> {
        let id = match (&request.instance_id, self.members.contains_key(&request.member_id)) {
            (_, true) => request.member_id.clone(),
            (Some(instance), false) => match self.members.values().find(|m| m.instance_id.as_ref() == Some(instance)) {
                Some(m) => {
                    return Err(if m.id == request.member_id {
                        ConsumerGroupError::UnknownMemberId
                    } else {
                        ConsumerGroupError::FencedInstanceId
                    })
                }
                None => return Err(ConsumerGroupError::UnknownMemberId),
            },
            (None, false) => return Err(ConsumerGroupError::UnknownMemberId),
        };
        let static_leave = request.member_epoch == -2 && self.members[&id].instance_id.is_some();
        if static_leave {
            let m = self.members.get_mut(&id).expect("present");
            m.left_static = true;
        } else {
            self.remove_member(&id);
            self.drop_unused_resolutions();
        }
        Ok(HeartbeatAnswer {
            member_id: id,
            member_epoch: request.member_epoch,
            assignment: None,
        })
    }

    /// GROUP-CONSUMER-ASSIGNOR-1: the target assignment of the current group epoch.
    fn compute_target(&mut self, default: Assignor) {
        let assignor = self.assignor(default);
        let subscriptions: BTreeMap<String, Vec<String>> = self
            .members
            .values()
            .map(|m| (m.id.clone(), self.subscription_of(m).into_iter().collect()))
            .collect();
        self.target = match assignor {
            Assignor::Uniform => uniform(&subscriptions, &self.topics, &self.target),
            Assignor::Range => range(&subscriptions, &self.topics),
        };
        self.target_epoch = self.group_epoch;
    }

    /// Kafka's CurrentAssignmentBuilder: moves `member_id` towards its target, revoking first.
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now: Instant) {
        let member = &self.members[member_id];
        match member.state {
            MemberState::UnrevokedPartitions => {
                // GROUP-CONSUMER-REVOKE-1: released only once the member says it let go.
                let acknowledged = owned.is_some_and(|o| !intersects(o, &member.revoking));
                if !acknowledged {
                    return;
                }
                let revoking = std::mem::take(&mut self.members.get_mut(member_id).expect("present").revoking);
                self.release(member_id, &revoking);
                let m = self.members.get_mut(member_id).expect("present");
                m.revocation_deadline = None;
                m.state = MemberState::Stable;
            }
            MemberState::Stable if member.epoch == self.target_epoch => return,
            _ => {}
        }
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let member = &self.members[member_id];
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        for (topic, ps) in &member.assigned {
            for p in ps {
                let side = if target.get(topic).is_some_and(|t| t.contains(p)) {
                    &mut keep
                } else {
                    &mut revoke
                };
                side.entry(topic.clone()).or_default().insert(*p);
            }
        }
        let rebalance_timeout = member.rebalance_timeout;
        if !revoke.is_empty() {
            let m = self.members.get_mut(member_id).expect("present");
            m.assigned = keep;
            m.revoking = revoke;
            m.state = MemberState::UnrevokedPartitions;
            m.revocation_deadline = Some(now + rebalance_timeout);
            return;
        }
        let mut unreleased = false;
        for (topic, ps) in &target {
            for p in ps {
                let key = (topic.clone(), *p);
                match self.holders.get(&key) {
                    Some(h) if h != member_id => unreleased = true,
                    _ => {
                        self.holders.insert(key, member_id.to_string());
                        keep.entry(topic.clone()).or_default().insert(*p);
                    }
                }
            }
        }
        let target_epoch = self.target_epoch;
        let m = self.members.get_mut(member_id).expect("present");
        m.assigned = normalized(keep);
        if m.epoch != target_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = target_epoch;
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }

    /// GROUP-CONSUMER-TIMEOUT-1: removes members whose session lapsed, and members that did not
    /// revoke within their rebalance timeout. Returns the ids removed.
    pub fn expire(&mut self, now: Instant) -> Vec<String> {
        let lapsed: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now))
            .map(|m| m.id.clone())
            .collect();
        for id in &lapsed {
            self.remove_member(id);
        }
        if !lapsed.is_empty() {
            self.drop_unused_resolutions();
        }
        lapsed
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| std::iter::once(m.session_deadline).chain(m.revocation_deadline))
            .min()
    }

    /// Extends a member's session (a commit is a sign of life).
    pub fn touch(&mut self, member_id: &str, now: Instant, session_timeout: Duration) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.session_deadline = now + session_timeout;
        }
    }

    /// Lets every member go: the group is being forgotten (GROUP-COORDINATOR-3).
    pub fn dissolve(&mut self) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            self.remove_member(&id);
        }
        self.drop_unused_resolutions();
    }

    /// GROUP-CONSUMER-COMMIT-1: whether `member_id` at `epoch` may commit with OffsetCommit
    /// `version` (or, `fetch`, read) offsets, as Kafka's
    /// ConsumerGroup.validateOffsetCommit/validateOffsetFetch.
    pub fn validate_offsets(
        &self,
        member_id: &str,
        epoch: i32,
        fetch: bool,
        version: i16,
    ) -> Result<(), OffsetRefusal> {
        if fetch && epoch == -1 {
            return Ok(());
        }
        if !fetch && epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let Some(member) = self.members.get(member_id) else {
            return Err(OffsetRefusal::UnknownMemberId);
        };
        // A consumer-protocol member commits with OffsetCommit v9 or above, as Kafka requires.
        if !fetch && version < 9 {
            return Err(OffsetRefusal::UnsupportedVersion);
        }
        if epoch != member.epoch {
            return Err(OffsetRefusal::StaleMemberEpoch);
        }
        Ok(())
    }
}

/// Why an OffsetCommit or OffsetFetch of a consumer group is refused (GROUP-CONSUMER-COMMIT-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetRefusal {
    UnknownMemberId,
    StaleMemberEpoch,
    UnsupportedVersion,
}

/// Every partition of the topics some member subscribes to, in order.
fn partitions_of(subscriptions: &BTreeMap<String, Vec<String>>, topics: &BTreeMap<String, u32>) -> Vec<(String, i32)> {
    let wanted: BTreeSet<&String> = subscriptions.values().flatten().collect();
    wanted
        .into_iter()
        .filter_map(|t| topics.get(t).map(|n| (t, *n)))
        .flat_map(|(t, n)| (0..n as i32).map(move |p| (t.clone(), p)))
        .collect()
}

/// The `uniform` assignor: every partition to one subscribed member, counts as even as the
/// subscriptions allow, and sticky: a partition stays where it was while that keeps the balance.
pub fn uniform(
    subscriptions: &BTreeMap<String, Vec<String>>,
    topics: &BTreeMap<String, u32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> =
        subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let partitions = partitions_of(subscriptions, topics);
    if subscriptions.is_empty() || partitions.is_empty() {
        return result;
    }
    let subscribes = |m: &str, t: &str| subscriptions.get(m).is_some_and(|s| s.iter().any(|x| x == t));
    let members_with_topics = subscriptions.values().filter(|s| !s.is_empty()).count().max(1);
    let quota = partitions.len().div_ceil(members_with_topics);
    let mut counts: BTreeMap<&str, usize> = subscriptions.keys().map(|m| (m.as_str(), 0)).collect();
    let mut placed: HashMap<(String, i32), String> = HashMap::new();
    let valid: BTreeSet<(String, i32)> = partitions.iter().cloned().collect();
    // Sticky: previous placements that are still valid, up to the quota.
    for (member, assignment) in previous {
        if !subscriptions.contains_key(member) {
            continue;
        }
        for (topic, ps) in assignment {
            if !subscribes(member, topic) {
                continue;
            }
            for p in ps {
                let key = (topic.clone(), *p);
                let c = counts.get_mut(member.as_str()).expect("member");
                if *c < quota && valid.contains(&key) && !placed.contains_key(&key) {
                    *c += 1;
                    placed.insert(key, member.clone());
                }
            }
        }
    }
    // The rest, each to the least loaded member subscribed to its topic.
    for key in &partitions {
        if placed.contains_key(key) {
            continue;
        }
        let best = counts
            .iter()
            .filter(|(m, _)| subscribes(m, &key.0))
            .min_by_key(|(m, c)| (**c, **m))
            .map(|(m, _)| m.to_string());
        if let Some(m) = best {
            *counts.get_mut(m.as_str()).expect("member") += 1;
            placed.insert(key.clone(), m);
        }
    }
    // Balance: move from the most to the least loaded member while they differ by two or more
    // and the receiver subscribes to a topic the giver holds. Bounded by the partition count.
    let mut held_by: HashMap<String, BTreeSet<(String, i32)>> = HashMap::new();
    for (key, member) in &placed {
        held_by.entry(member.clone()).or_default().insert(key.clone());
    }
    for _ in 0..partitions.len() {
        let mut order: Vec<(&str, usize)> = counts.iter().map(|(m, c)| (*m, *c)).collect();
        order.sort_by_key(|(m, c)| (std::cmp::Reverse(*c), *m));
        let mut moved = false;
        'pairs: for (giver, gc) in &order {
            for (taker, tc) in order.iter().rev() {
                if gc < &(tc + 2) {
                    break;
                }
                // Only the giver's own partitions are searched.
                let candidate = held_by
                    .get(*giver)
                    .and_then(|held| held.iter().find(|k| subscribes(taker, &k.0)).cloned());
                if let Some(k) = candidate {
                    held_by.get_mut(*giver).expect("giver").remove(&k);
                    held_by.entry(taker.to_string()).or_default().insert(k.clone());
                    placed.insert(k, taker.to_string());
                    *counts.get_mut(giver).expect("member") -= 1;
                    *counts.get_mut(taker).expect("member") += 1;
                    moved = true;
                    break 'pairs;
                }
            }
        }
        if !moved {
            break;
        }
    }
    for ((topic, p), member) in placed {
        result.entry(member).or_default().entry(topic).or_default().insert(p);
    }
    result
}

/// The `range` assignor: per topic, its subscribers in member id order each take a contiguous
/// range, the first ones one more when the partitions do not divide evenly.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    topics: &BTreeMap<String, u32>,
) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> =
        subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    for (topic, n) in topics {
        let subscribers: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = *n as usize;
        let (each, extra) = (n / subscribers.len(), n % subscribers.len());
        let mut next = 0;
        for (i, member) in subscribers.iter().enumerate() {
            let take = each + usize::from(i < extra);
            if take > 0 {
                let set: BTreeSet<i32> = (next..next + take).map(|p| p as i32).collect();
                result.get_mut(*member).expect("member").insert(topic.clone(), set);
            }
            next += take;
        }
    }
    result
}

/// How many partitions an assignment names.
pub fn assignment_size(assignment: &Assignment) -> usize {
    count(assignment)
}

#[cfg(test)]
mod tests;
