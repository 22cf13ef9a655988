//! One group's membership state machine: Empty, PreparingRebalance, CompletingRebalance,
//! Stable, as Kafka's classic protocol defines them. No I/O: callers pass the time, and waiting
//! members get their answers through oneshot channels.

use super::member_strings::names_bytes;
use super::GroupLimits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's name for the state, as DescribeGroups and ListGroups report it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// What JoinGroup asks.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a member without an id is given one and asked to rejoin (KIP-394).
    pub require_known_member_id: bool,
    /// Who asks: the principal, or the client's address without SASL (LIMIT-GROUP-OWNER-1).
    pub owner: Owner,
    /// The topics its subscription names, read once when it joins (GROUP-SUBSCRIPTION-1).
    pub topics: Vec<String>,
}

/// Whom group resources are counted against: `user:<name>` with SASL, `address:<ip>` without
/// (LIMIT-GROUP-OWNER-1).
pub type Owner = std::sync::Arc<str>;

/// What JoinGroup answers.
#[derive(Debug, Clone, Default)]
pub struct JoinOutcome {
    pub error_code: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only: every member's id, instance id and metadata.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinOutcome {
    pub fn error(error_code: i16, member_id: &str) -> Self {
        Self {
            error_code,
            generation: -1,
            member_id: member_id.to_string(),
            ..Self::default()
        }
    }
}

/// What SyncGroup answers.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    pub fn error(error_code: i16) -> Self {
        Self {
            error_code,
            ..Self::default()
        }
    }
}

/// One member named by LeaveGroup.
#[derive(Debug, Clone)]
pub struct MemberLeave {
    pub member_id: String,
    pub instance_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct DescribedGroup {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
    /// Every topic its members subscribe to (AUTHZ-GROUP-4).
    pub topics: Vec<String>,
}

struct Member {
    id: String,
    owner: Owner,
    /// Read from its subscription once, when it joined (GROUP-SUBSCRIPTION-1).
    topics: Vec<String>,
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    session_deadline: Instant,
    join_waiter: Option<oneshot::Sender<JoinOutcome>>,
    sync_waiter: Option<oneshot::Sender<SyncOutcome>>,
}

impl Member {
    /// What the member offered for `protocol`; empty when it offered nothing for it.
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, md)| md.clone())
            .unwrap_or_default()
    }
}

pub(super) struct Group {
    id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    /// In join order: the first member leads when the leader is gone.
    members: Vec<Member>,
    /// KIP-394 ids handed out: when each lapses if its member never rejoins, whom it counts
    /// against, and what its member subscribed to (a member-to-be is part of the group for
    /// AUTHZ-GROUP-4).
    pending: BTreeMap<String, (Instant, Owner, Vec<String>)>,
    /// Who created the group: it counts against that owner's groups (LIMIT-GROUP-OWNER-1).
    creator: Owner,
    /// Members and pending ids gained (+1) or lost (-1) per owner since the coordinator last
    /// took them: how it keeps per-owner totals without scanning groups.
    owner_changes: Vec<(Owner, isize)>,
    rebalance_deadline: Option<Instant>,
    /// How many members offer each protocol name, so protocol checks cost O(protocols of one
    /// request) under the coordinator's lock, not O(members x protocols^2).
    support: HashMap<String, usize>,
    /// Bytes held (LIMIT-GROUP-BYTES-1): protocol names, metadata and assignments, and every
    /// string members and pending ids brought (LIMIT-GROUP-MEMBER-BYTES-1).
    stored_bytes: usize,
    /// How many members and members-to-be subscribe to each topic, kept as they come and go so
    /// that the group's topics (AUTHZ-GROUP-4) cost O(topics) under the coordinator's lock, not
    /// O(members x topics) per joiner.
    topic_support: BTreeMap<String, usize>,
}

/// What a group holds that counts against the coordinator's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Usage {
    /// Joined members and pending KIP-394 ids (LIMIT-GROUP-MEMBERS-1).
    pub(super) members: usize,
    /// LIMIT-GROUP-BYTES-1
    pub(super) bytes: usize,
}

/// The bytes `protocols` hold: names and metadata.
pub(super) fn protocol_bytes(protocols: &[(String, Bytes)]) -> usize {
    protocols.iter().map(|(n, m)| n.len() + m.len()).sum()
}

/// LIMIT-GROUP-MEMBER-BYTES-1: the strings a member keeps besides its protocols and topics.
fn member_string_bytes(m: &Member) -> usize {
    m.id.len() + m.instance_id.as_ref().map_or(0, String::len) + m.client_id.len() + m.client_host.len()
}

/// What a JoinGroup may keep, at most (LIMIT-GROUP-BYTES-1, LIMIT-GROUP-MEMBER-BYTES-1): its
/// protocols, the strings of its member (a member id the coordinator builds included) and the
/// topics its subscription names.
pub(super) fn join_bytes(request: &JoinRequest) -> usize {
    // A new member's id is its client id, cut (LIMIT-BUILT-STRING-1), and 33 bytes more.
    let member_id = match request.member_id.len() {
        0 => {
            request
                .client_id
                .len()
                .min(crate::limits::MAX_CLIENT_ID_IN_MEMBER_ID_BYTES)
                + 33
        }
        given => given,
    };
    protocol_bytes(&request.protocols)
        + member_id
        + request.instance_id.as_ref().map_or(0, String::len)
        + request.client_id.len()
        + request.client_host.len()
        + names_bytes(&request.topics)
}

/// Counts one member's (or member-to-be's) subscription in or out of `support`, each topic once.
fn count_topics(support: &mut BTreeMap<String, usize>, topics: &[String], add: bool) {
    let mut seen = HashSet::with_capacity(topics.len());
    for topic in topics.iter().filter(|t| seen.insert(t.as_str())) {
        if add {
            *support.entry(topic.clone()).or_default() += 1;
        } else if let Some(count) = support.get_mut(topic) {
            *count -= 1;
            if *count == 0 {
                support.remove(topic);
            }
        }
    }
}

/// Each protocol name once, in the order first offered.
fn unique_names(protocols: &[(String, Bytes)]) -> impl Iterator<Item = &String> {
    let mut seen = HashSet::new();
    protocols
        .iter()
        .map(|(n, _)| n)
        .filter(move |n| seen.insert(n.as_str()))
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl Group {
    pub(super) fn new(id: String, creator: Owner) -> Self {
        Self {
            id,
            creator,
            owner_changes: Vec::new(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: Vec::new(),
            pending: BTreeMap::new(),
            rebalance_deadline: None,
            support: HashMap::new(),
            stored_bytes: 0,
            topic_support: BTreeMap::new(),
        }
    }

    pub(super) fn usage(&self) -> Usage {
        Usage {
            members: self.members.len() + self.pending.len(),
            bytes: self.stored_bytes,
        }
    }

    /// Counts a member's protocols in or out of `support` and `stored_bytes`.
    fn account(&mut self, protocols: &[(String, Bytes)], add: bool) {
        for name in unique_names(protocols) {
            if add {
                *self.support.entry(name.clone()).or_default() += 1;
            } else if let Some(count) = self.support.get_mut(name) {
                *count -= 1;
                if *count == 0 {
                    self.support.remove(name);
                }
            }
        }
        let bytes = protocol_bytes(protocols);
        if add {
            self.stored_bytes += bytes;
        } else {
            self.stored_bytes -= bytes;
        }
    }

    /// Replaces a member's assignment, keeping `stored_bytes` exact.
    fn set_assignment(&mut self, index: usize, assignment: Bytes) {
        let old = std::mem::replace(&mut self.members[index].assignment, assignment);
        self.stored_bytes = self.stored_bytes - old.len() + self.members[index].assignment.len();
    }

    /// How many members other than `except` offer `name`.
    fn supporters(&self, name: &str, except: Option<&Member>) -> usize {
        let count = self.support.get(name).copied().unwrap_or(0);
        let own = except.is_some_and(|m| m.protocols.iter().any(|(n, _)| n == name));
        count - usize::from(own)
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn state(&self) -> GroupState {
        self.state
    }

    pub(super) fn generation(&self) -> i32 {
        self.generation
    }

    pub(super) fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// Who created the group (LIMIT-GROUP-OWNER-1).
    pub(super) fn creator(&self) -> &Owner {
        &self.creator
    }

    /// Members and pending ids gained or lost per owner since the last call.
    pub(super) fn take_owner_changes(&mut self) -> Vec<(Owner, isize)> {
        std::mem::take(&mut self.owner_changes)
    }

    /// Every topic the members and members-to-be subscribe to (AUTHZ-GROUP-4), each once, in
    /// name order.
    pub(super) fn topics(&self) -> impl Iterator<Item = &str> {
        self.topic_support.keys().map(String::as_str)
    }

    /// Whether `member_id` is a joined member's id: such a member was authorized when it joined.
    pub(super) fn is_member(&self, member_id: &str) -> bool {
        !member_id.is_empty() && self.members.iter().any(|m| m.id == member_id)
    }

    pub(super) fn member_ids(&self) -> Vec<String> {
        self.members.iter().map(|m| m.id.clone()).collect()
    }

    fn member(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    /// FENCED_INSTANCE_ID when `instance_id` belongs to another member id (GROUP-STATIC-1).
    fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        instance_id.is_some_and(|i| {
            self.members
                .iter()
                .any(|m| m.instance_id.as_deref() == Some(i) && m.id != member_id)
        })
    }

    /// Whether every member supports one protocol of `protocols`.
    fn supports(&self, protocols: &[(String, Bytes)]) -> bool {
        self.members.is_empty()
            || protocols
                .iter()
                .any(|(name, _)| self.supporters(name, None) == self.members.len())
    }

    pub(super) fn join(
        &mut self,
        request: JoinRequest,
        new_id: String,
        limits: &GroupLimits,
        now: Instant,
    ) -> Result<oneshot::Receiver<JoinOutcome>, Box<JoinOutcome>> {
        let err = |c: ResponseError, id: &str| Err(Box::new(JoinOutcome::error(code(c), id)));
        if let Some(t) = &self.protocol_type {
            if !self.members.is_empty() && *t != request.protocol_type {
                return err(ResponseError::InconsistentGroupProtocol, &request.member_id);
            }
        }
        let mut member_id = request.member_id.clone();
        // A member counts against whoever its pending id counted against: the quota was
        // checked when that id was handed out (LIMIT-GROUP-OWNER-1).
        let mut member_owner = request.owner.clone();
        if member_id.is_empty() {
            let static_member = request
                .instance_id
                .as_deref()
                .and_then(|i| self.members.iter().position(|m| m.instance_id.as_deref() == Some(i)));
            if let Some(index) = static_member {
                // GROUP-STATIC-1: a static member rejoining without its id takes a new one; the
                // old id is fenced from then on. It counts against whoever rejoined.
                let previous_owner = std::mem::replace(&mut self.members[index].owner, request.owner.clone());
                self.owner_changes.push((previous_owner, -1));
                self.owner_changes.push((request.owner.clone(), 1));
                let old = std::mem::replace(&mut self.members[index].id, new_id.clone());
                self.stored_bytes = self.stored_bytes - old.len() + new_id.len();
                if self.leader.as_deref() == Some(old.as_str()) {
                    self.leader = Some(new_id.clone());
                }
                member_id = new_id;
            } else if request.require_known_member_id && request.instance_id.is_none() {
                // LIMIT-GROUP-PENDING-1: pending ids count against the group's size, and lapse
                // soon, whatever session timeout the client chose.
                if self.members.len() + self.pending.len() >= limits.max_members_per_group {
                    return err(ResponseError::GroupMaxSizeReached, "");
                }
                // GROUP-JOIN-1 (KIP-394)
                let lapse = request.session_timeout.min(limits.pending_member_timeout);
                count_topics(&mut self.topic_support, &request.topics, true);
                self.stored_bytes += new_id.len() + names_bytes(&request.topics);
                self.pending.insert(
                    new_id.clone(),
                    (now + lapse, request.owner.clone(), request.topics.clone()),
                );
                self.owner_changes.push((request.owner.clone(), 1));
                return err(ResponseError::MemberIdRequired, &new_id);
            } else {
                member_id = new_id;
            }
        } else if self.fenced(&member_id, request.instance_id.as_deref()) {
            return err(ResponseError::FencedInstanceId, &member_id);
        } else if let Some((_, owner, topics)) = self.pending.remove(&member_id) {
            count_topics(&mut self.topic_support, &topics, false);
            self.stored_bytes -= member_id.len() + names_bytes(&topics);
            self.owner_changes.push((owner.clone(), -1));
            member_owner = owner;
        } else if !self.members.iter().any(|m| m.id == member_id) {
            return err(ResponseError::UnknownMemberId, &member_id);
        }
        if !self.members.iter().any(|m| m.id == member_id) {
            if !self.supports(&request.protocols) {
                return err(ResponseError::InconsistentGroupProtocol, &member_id);
            }
            if self.members.len() >= limits.max_members_per_group {
                return err(ResponseError::GroupMaxSizeReached, &member_id);
            }
            self.owner_changes.push((member_owner.clone(), 1));
            let member = Member {
                id: member_id.clone(),
                owner: member_owner,
                topics: Vec::new(),
                instance_id: request.instance_id.clone(),
                client_id: request.client_id.clone(),
                client_host: request.client_host.clone(),
                session_timeout: request.session_timeout,
                rebalance_timeout: request.rebalance_timeout,
                protocols: Vec::new(),
                assignment: Bytes::new(),
                session_deadline: now + request.session_timeout,
                join_waiter: None,
                sync_waiter: None,
            };
            self.stored_bytes += member_string_bytes(&member);
            self.members.push(member);
        } else {
            let me = self.members.iter().find(|m| m.id == member_id);
            let others = self.members.len() - 1;
            let others_ok = others == 0
                || request
                    .protocols
                    .iter()
                    .any(|(name, _)| self.supporters(name, me) == others);
            if !others_ok {
                return err(ResponseError::InconsistentGroupProtocol, &member_id);
            }
        }
        let index = self
            .members
            .iter()
            .position(|m| m.id == member_id)
            .expect("member present");
        let old = std::mem::take(&mut self.members[index].protocols);
        self.account(&old, false);
        self.account(&request.protocols, true);
        count_topics(&mut self.topic_support, &self.members[index].topics, false);
        count_topics(&mut self.topic_support, &request.topics, true);
        self.stored_bytes = self.stored_bytes - names_bytes(&self.members[index].topics) + names_bytes(&request.topics);
        let (tx, rx) = oneshot::channel();
        let member = &mut self.members[index];
        member.protocols = request.protocols;
        member.topics = request.topics;
        member.session_timeout = request.session_timeout;
        member.rebalance_timeout = request.rebalance_timeout;
        member.session_deadline = now + request.session_timeout;
        if let Some(previous) = member.join_waiter.replace(tx) {
            let _ = previous.send(JoinOutcome::error(code(ResponseError::UnknownMemberId), &member_id));
        }
        self.protocol_type = Some(request.protocol_type);
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now);
        }
        self.try_complete_join(now);
        Ok(rx)
    }

    /// Starts a rebalance: every member must rejoin within the longest rebalance timeout.
    fn prepare_rebalance(&mut self, now: Instant) {
        for m in &mut self.members {
            if let Some(waiter) = m.sync_waiter.take() {
                let _ = waiter.send(SyncOutcome::error(code(ResponseError::RebalanceInProgress)));
            }
        }
        let timeout = self
            .members
            .iter()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = Some(now + timeout);
    }

    /// Completes the join phase once every member has rejoined.
    fn try_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance || self.members.iter().any(|m| m.join_waiter.is_none()) {
            return;
        }
        self.rebalance_deadline = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            return;
        }
        self.protocol = Some(self.select_protocol());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.iter().any(|m| &m.id == l))
        {
            self.leader = Some(self.members[0].id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let protocol = self.protocol.clone().expect("selected");
        let leader = self.leader.clone().expect("chosen");
        let all: Vec<(String, Option<String>, Bytes)> = self
            .members
            .iter()
            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
            .collect();
        for index in 0..self.members.len() {
            self.set_assignment(index, Bytes::new());
        }
        for m in &mut self.members {
            m.session_deadline = now + m.session_timeout;
            let outcome = JoinOutcome {
                error_code: 0,
                generation: self.generation,
                protocol_type: self.protocol_type.clone(),
                protocol_name: Some(protocol.clone()),
                leader: leader.clone(),
                member_id: m.id.clone(),
                members: if m.id == leader { all.clone() } else { Vec::new() },
            };
            if let Some(waiter) = m.join_waiter.take() {
                let _ = waiter.send(outcome);
            }
        }
    }

    /// Each member votes for its most preferred protocol that every member supports. Linear in
    /// the members' protocols: it runs under the coordinator's lock.
    fn select_protocol(&self) -> String {
        let everyone = self.members.len();
        // In the first member's preference order, which breaks ties.
        let common: Vec<&String> = unique_names(&self.members[0].protocols)
            .filter(|n| self.supporters(n, None) == everyone)
            .collect();
        let rank: HashMap<&str, usize> = common.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let mut votes = vec![0usize; common.len()];
        for m in &self.members {
            if let Some(i) = m.protocols.iter().find_map(|(n, _)| rank.get(n.as_str())) {
                votes[*i] += 1;
            }
        }
        // Most votes; ties go to the first member's preference order.
        (0..common.len())
            .max_by_key(|&i| (votes[i], std::cmp::Reverse(i)))
            .map(|i| common[i].clone())
            .unwrap_or_default()
    }

    pub(super) fn sync(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<oneshot::Receiver<SyncOutcome>, SyncOutcome> {
        if self.fenced(member_id, instance_id) {
            return Err(SyncOutcome::error(code(ResponseError::FencedInstanceId)));
        }
        if !self.members.iter().any(|m| m.id == member_id) {
            return Err(SyncOutcome::error(code(ResponseError::UnknownMemberId)));
        }
        if generation != self.generation {
            return Err(SyncOutcome::error(code(ResponseError::IllegalGeneration)));
        }
        let answer = |g: &Group, assignment: Bytes| SyncOutcome {
            error_code: 0,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol.clone(),
            assignment,
        };
        match self.state {
            GroupState::Empty => Err(SyncOutcome::error(code(ResponseError::UnknownMemberId))),
            GroupState::PreparingRebalance => Err(SyncOutcome::error(code(ResponseError::RebalanceInProgress))),
            GroupState::Stable => {
                let assignment = self
                    .members
                    .iter()
                    .find(|m| m.id == member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                Err(answer(self, assignment))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                self.member(member_id).expect("present").sync_waiter = Some(tx);
                if self.leader.as_deref() == Some(member_id) {
                    // GROUP-SYNC-1: the leader's assignments go to every member.
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for index in 0..self.members.len() {
                        let assignment = given.remove(&self.members[index].id).unwrap_or_default();
                        self.set_assignment(index, assignment);
                    }
                    self.state = GroupState::Stable;
                    let replies: Vec<(oneshot::Sender<SyncOutcome>, Bytes)> = self
                        .members
                        .iter_mut()
                        .filter_map(|m| m.sync_waiter.take().map(|w| (w, m.assignment.clone())))
                        .collect();
                    for (waiter, assignment) in replies {
                        let _ = waiter.send(answer(self, assignment));
                    }
                }
                Ok(rx)
            }
        }
    }

    pub(super) fn heartbeat(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> i16 {
        if self.fenced(member_id, instance_id) {
            return code(ResponseError::FencedInstanceId);
        }
        let state = self.state;
        let current = self.generation;
        let Some(member) = self.member(member_id) else {
            return code(ResponseError::UnknownMemberId);
        };
        if generation != current {
            return code(ResponseError::IllegalGeneration);
        }
        member.session_deadline = now + member.session_timeout;
        match state {
            GroupState::PreparingRebalance => code(ResponseError::RebalanceInProgress),
            GroupState::Empty => code(ResponseError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => 0,
        }
    }

    fn remove_member(&mut self, index: usize, now: Instant) {
        self.set_assignment(index, Bytes::new());
        let member = self.members.remove(index);
        self.account(&member.protocols, false);
        count_topics(&mut self.topic_support, &member.topics, false);
        self.stored_bytes -= member_string_bytes(&member) + names_bytes(&member.topics);
        self.owner_changes.push((member.owner.clone(), -1));
        if let Some(w) = member.join_waiter {
            let _ = w.send(JoinOutcome::error(code(ResponseError::UnknownMemberId), &member.id));
        }
        if let Some(w) = member.sync_waiter {
            let _ = w.send(SyncOutcome::error(code(ResponseError::UnknownMemberId)));
        }
        if self.leader.as_deref() == Some(member.id.as_str()) {
            self.leader = None;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now),
            GroupState::PreparingRebalance | GroupState::Empty => {}
        }
        self.try_complete_join(now);
    }

    pub(super) fn leave(&mut self, leave: &MemberLeave, now: Instant) -> i16 {
        let index = match (&leave.instance_id, leave.member_id.is_empty()) {
            // A static member may leave by instance id alone.
            (Some(instance), true) => self
                .members
                .iter()
                .position(|m| m.instance_id.as_ref() == Some(instance)),
            (instance, _) => {
                if self.fenced(&leave.member_id, instance.as_deref()) {
                    return code(ResponseError::FencedInstanceId);
                }
                self.members.iter().position(|m| m.id == leave.member_id)
            }
        };
        match index {
            Some(index) => {
                self.remove_member(index, now);
                0
            }
            None => code(ResponseError::UnknownMemberId),
        }
    }

    /// Removes members whose session lapsed, lapsed pending ids, and, when the rebalance
    /// deadline passed, every member that did not rejoin (GROUP-TIMEOUT-1).
    pub(super) fn expire(&mut self, now: Instant) {
        let changes = &mut self.owner_changes;
        let topic_support = &mut self.topic_support;
        let stored_bytes = &mut self.stored_bytes;
        self.pending.retain(|id, (deadline, owner, topics)| {
            let keep = *deadline > now;
            if !keep {
                changes.push((owner.clone(), -1));
                count_topics(topic_support, topics, false);
                *stored_bytes -= id.len() + names_bytes(topics);
            }
            keep
        });
        let lapsed: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.session_deadline <= now && m.join_waiter.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in lapsed {
            // Re-check: a join completed by an earlier eviction restarts every session.
            if let Some(index) = self
                .members
                .iter()
                .position(|m| m.id == id && m.session_deadline <= now && m.join_waiter.is_none())
            {
                tracing::info!(
                    "group {}: member {} evicted: no heartbeat within its session timeout",
                    crate::log_text::clip(&self.id),
                    crate::log_text::clip(&id)
                );
                self.remove_member(index, now);
            }
        }
        if self.rebalance_deadline.is_some_and(|d| d <= now) {
            // Decide who is late before removing anyone: completing the join clears the waiters
            // of the members that did rejoin.
            let late: Vec<String> = self
                .members
                .iter()
                .filter(|m| m.join_waiter.is_none())
                .map(|m| m.id.clone())
                .collect();
            for id in late {
                if let Some(index) = self.members.iter().position(|m| m.id == id) {
                    tracing::info!(
                        "group {}: member {} removed: it did not rejoin within the rebalance timeout",
                        crate::log_text::clip(&self.id),
                        crate::log_text::clip(&id)
                    );
                    self.remove_member(index, now);
                }
            }
            self.try_complete_join(now);
        }
    }

    /// The earliest deadline this group waits on.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .iter()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.session_deadline);
        sessions
            .chain(self.pending.values().map(|(deadline, _, _)| *deadline))
            .chain(self.rebalance_deadline)
            .min()
    }

    /// Answers every parked join and sync with `error_code`.
    pub(super) fn abandon(&mut self, error_code: i16) {
        for m in &mut self.members {
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinOutcome::error(error_code, &m.id));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncOutcome::error(error_code));
            }
        }
    }

    /// Lets every member and pending id go, answering parked requests `error_code`: the group
    /// is being forgotten with people in it (GROUP-COORDINATOR-3).
    pub(super) fn dissolve(&mut self, error_code: i16) {
        self.abandon(error_code);
        self.clear_pending();
        for member in std::mem::take(&mut self.members) {
            self.account(&member.protocols, false);
            count_topics(&mut self.topic_support, &member.topics, false);
            self.owner_changes.push((member.owner, -1));
        }
        self.stored_bytes = 0;
        self.leader = None;
    }

    /// Extends a current member's session.
    pub(super) fn touch(&mut self, member_id: &str, now: Instant) {
        if let Some(m) = self.member(member_id) {
            m.session_deadline = now + m.session_timeout;
        }
    }

    /// Forgets every pending id: the group is being forgotten.
    pub(super) fn clear_pending(&mut self) {
        for (id, (_, owner, topics)) in std::mem::take(&mut self.pending) {
            count_topics(&mut self.topic_support, &topics, false);
            self.stored_bytes -= id.len() + names_bytes(&topics);
            self.owner_changes.push((owner, -1));
        }
    }

    /// No member and no pending id: nothing the coordinator needs to remember.
    pub(super) fn is_vacant(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty()
    }

    /// What [`Group::describe`] would put in a DescribeGroups answer, in encoded bytes at most
    /// (LIMIT-RESPONSE-BYTES-1): counted without copying anything.
    pub(super) fn described_bytes(&self) -> usize {
        use crate::response_budget::string_bytes;
        let protocol = self.protocol.as_deref().unwrap_or_default();
        let members: usize = self
            .members
            .iter()
            .map(|m| {
                let metadata = m.metadata_for(protocol).len();
                string_bytes(m.id.len())
                    + string_bytes(m.instance_id.as_ref().map_or(0, String::len))
                    + string_bytes(m.client_id.len())
                    + string_bytes(m.client_host.len())
                    + string_bytes(metadata)
                    + string_bytes(m.assignment.len())
                    + 1
            })
            .sum();
        let header = string_bytes(self.state.name().len())
            + string_bytes(self.protocol_type.as_ref().map_or(0, String::len))
            + string_bytes(protocol.len());
        header + members
    }

    /// DESCRIBEGROUPS-STATE-1, DESCRIBEGROUPS-MEMBERS-1: each member's metadata for the chosen
    /// protocol and its assignment of the current generation.
    pub(super) fn describe(&self) -> DescribedGroup {
        let protocol = self.protocol.clone().unwrap_or_default();
        DescribedGroup {
            topics: self.topics().map(str::to_string).collect(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: protocol.clone(),
            members: self
                .members
                .iter()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }
}
