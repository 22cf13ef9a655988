//! The group coordinator: Kafka's classic group membership protocol, kept by the gateway itself
//! (docs/spec/groups.md). Iggy's consumer groups are not used for membership, only as the key of
//! committed offsets (`offset_store`).
//!
//! State lives in memory, per gateway; FindCoordinator sends each group to one gateway
//! (GROUP-COORDINATOR-1), so membership never splits. Session, rebalance and pending-member
//! deadlines are enforced by a timer task on tokio's clock, which turmoil drives in simulations
//! (GROUP-TIMEOUT-1), not lazily on the next request.

mod consumer_coordinator;
pub mod consumer_protocol;
pub mod member_strings;
mod regex_slots;
mod state;
pub mod subscription;
pub mod topic_id;
pub mod topic_regex;

pub use consumer_coordinator::{ConsumerAttempt, ConsumerDescribed, ConsumerDescription, ConsumerLookups};
pub use state::{
    DescribedGroup, DescribedMember, GroupState, JoinOutcome, JoinRequest, MemberLeave, Owner, SyncOutcome,
};

use crate::clock::SharedRng;
use crate::log_text::clip;
use consumer_protocol::ConsumerGroup;
use kafka_protocol::error::ResponseError;
use state::{join_bytes, protocol_bytes, Group, Usage};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

/// Limits of the coordinator (GROUP-LIMIT-1).
#[derive(Debug, Clone)]
pub struct GroupLimits {
    pub max_groups: usize,
    pub max_members_per_group: usize,
    /// All protocol metadata of one JoinGroup, and one member's assignment.
    pub max_metadata_bytes: usize,
    pub min_session_timeout: Duration,
    pub max_session_timeout: Duration,
    /// Protocols one JoinGroup may offer (LIMIT-JOIN-PROTOCOLS-1).
    pub max_protocols: usize,
    /// Longer rebalance timeouts are cut to this (LIMIT-REBALANCE-TIMEOUT-1).
    pub max_rebalance_timeout: Duration,
    /// A KIP-394 pending id lapses after min(session timeout, this) (LIMIT-GROUP-PENDING-1).
    pub pending_member_timeout: Duration,
    /// Joined and pending members over every group (LIMIT-GROUP-MEMBERS-1).
    pub max_members_total: usize,
    /// Metadata and assignment bytes held over every group (LIMIT-GROUP-BYTES-1).
    pub max_stored_bytes: usize,
    /// Groups one owner may have created and not yet seen forgotten (LIMIT-GROUP-OWNER-1).
    pub max_groups_per_owner: usize,
    /// Joined members and pending ids one owner may hold over every group
    /// (LIMIT-GROUP-OWNER-1).
    pub max_members_per_owner: usize,
    /// A consumer-protocol member's session: Kafka's group.consumer.session.timeout.ms
    /// (GROUP-CONSUMER-TIMEOUT-1).
    pub consumer_session_timeout: Duration,
    /// What ConsumerGroupHeartbeat tells members: Kafka's group.consumer.heartbeat.interval.ms.
    pub consumer_heartbeat_interval: Duration,
}

impl Default for GroupLimits {
    fn default() -> Self {
        let settings = crate::limits::GroupLimitSettings::default();
        Self {
            max_groups: 10_000,
            max_members_per_group: 1_000,
            max_metadata_bytes: settings.max_metadata_bytes,
            // Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms.
            min_session_timeout: Duration::from_millis(6_000),
            max_session_timeout: Duration::from_millis(1_800_000),
            max_protocols: settings.max_join_protocols,
            max_rebalance_timeout: settings.max_rebalance_timeout,
            pending_member_timeout: settings.pending_member_timeout,
            max_members_total: settings.max_members_total,
            max_stored_bytes: settings.max_stored_bytes,
            max_groups_per_owner: settings.max_groups_per_owner,
            max_members_per_owner: settings.max_members_per_owner,
            consumer_session_timeout: Duration::from_millis(45_000),
            consumer_heartbeat_interval: Duration::from_millis(5_000),
        }
    }
}

/// What one owner holds (LIMIT-GROUP-OWNER-1).
#[derive(Debug, Default)]
struct OwnerUsage {
    /// Groups it created that are still held.
    groups: usize,
    /// Joined members and pending ids over every group.
    members: usize,
    /// Joins refused for its quota since the last one admitted: logged when the run starts.
    refused: u64,
}

/// The coordinator's state under its one lock.
#[derive(Default)]
struct Table {
    groups: BTreeMap<String, Group>,
    /// Groups of KIP-848's consumer protocol (GROUP-CONSUMER-HEARTBEAT-1): one group id is in
    /// at most one of the two maps (GROUP-CONSUMER-TYPE-1).
    consumer: BTreeMap<String, ConsumerGroup>,
    owners: HashMap<Owner, OwnerUsage>,
}

impl Table {
    /// Applies the per-owner member changes `group` recorded (LIMIT-GROUP-OWNER-1).
    fn settle_owners(owners: &mut HashMap<Owner, OwnerUsage>, group: &mut Group) {
        for (owner, change) in group.take_owner_changes() {
            let usage = owners.entry(owner.clone()).or_default();
            usage.members = usage.members.saturating_add_signed(change);
            if usage.members == 0 && usage.groups == 0 {
                owners.remove(&owner);
            }
        }
    }

    /// Forgets a group: its creator's count drops, and its members' were settled already.
    fn forgotten(owners: &mut HashMap<Owner, OwnerUsage>, group: &Group) {
        Self::forgotten_creator(owners, group.creator());
    }

    fn forgotten_creator(owners: &mut HashMap<Owner, OwnerUsage>, creator: &Owner) {
        if let Some(usage) = owners.get_mut(creator) {
            usage.groups = usage.groups.saturating_sub(1);
            if usage.members == 0 && usage.groups == 0 {
                owners.remove(creator);
            }
        }
    }

    /// LIMIT-GROUP-OWNER-1 for consumer-protocol groups, as for classic ones.
    fn settle_consumer_owners(owners: &mut HashMap<Owner, OwnerUsage>, group: &mut ConsumerGroup) {
        for (owner, change) in group.take_owner_changes() {
            let usage = owners.entry(owner.clone()).or_default();
            usage.members = usage.members.saturating_add_signed(change);
            if usage.members == 0 && usage.groups == 0 {
                owners.remove(&owner);
            }
        }
    }
}

/// What a group's live members keep from OffsetDelete (OFFSETDELETE-2,
/// GROUP-CONSUMER-OFFSETDELETE-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetDeleteGuard {
    /// No member: every named partition may go.
    Empty,
    /// Members of a consumer group, of either protocol, subscribed to these topics.
    Subscribed(BTreeSet<String>),
    /// Members of another protocol type, whose subscriptions the coordinator cannot read.
    Opaque,
}

/// What [`GroupCoordinator::join_authorized`] concluded.
#[derive(Debug)]
pub enum JoinAttempt {
    /// The join's answer.
    Done(JoinOutcome),
    /// The group's topics grew past what was authorized while the permissions were asked: ask
    /// again for `topics` (AUTHZ-GROUP-4). The request comes back unused.
    Recheck {
        request: Box<JoinRequest>,
        topics: Vec<String>,
    },
}

/// Every group this gateway coordinates.
pub struct GroupCoordinator {
    table: Mutex<Table>,
    limits: GroupLimits,
    rng: SharedRng,
    /// Wakes the timer task when a deadline may have moved earlier.
    deadlines_changed: Notify,
    /// Set once the gateway shuts down: no group is coordinated here any more.
    stopped: std::sync::atomic::AtomicBool,
    /// Serialises the commits of one group, whose two-step stores must not interleave (CO-ZERO-1).
    commit_locks: Mutex<BTreeMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Joined and pending members over every group (LIMIT-GROUP-MEMBERS-1); changed only under
    /// the `groups` lock, read without it.
    members_total: AtomicUsize,
    /// Metadata and assignment bytes over every group (LIMIT-GROUP-BYTES-1); likewise.
    bytes_total: AtomicUsize,
    /// One pattern job per owner at a time (GROUP-CONSUMER-REGEX-COST-1).
    regex_slots: regex_slots::RegexSlots,
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl GroupCoordinator {
    pub fn new(limits: GroupLimits, rng: SharedRng) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            limits,
            rng,
            deadlines_changed: Notify::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
            commit_locks: Mutex::new(BTreeMap::new()),
            members_total: AtomicUsize::new(0),
            bytes_total: AtomicUsize::new(0),
            regex_slots: regex_slots::RegexSlots::default(),
        }
    }

    /// What every group holds together (LIMIT-GROUP-MEMBERS-1, LIMIT-GROUP-BYTES-1).
    pub fn usage(&self) -> (usize, usize) {
        (
            self.members_total.load(Ordering::Relaxed),
            self.bytes_total.load(Ordering::Relaxed),
        )
    }

    /// (groups created, members and pending ids) held by `owner` (LIMIT-GROUP-OWNER-1).
    pub fn owner_usage(&self, owner: &str) -> (usize, usize) {
        self.lock()
            .owners
            .get(owner)
            .map_or((0, 0), |usage| (usage.groups, usage.members))
    }

    /// Moves the totals from `before` to `after`; called with the `groups` lock held. Adds
    /// first, so a concurrent reader never sees a total below zero.
    fn retally(&self, before: Usage, after: Usage) {
        self.members_total.fetch_add(after.members, Ordering::Relaxed);
        self.members_total.fetch_sub(before.members, Ordering::Relaxed);
        self.bytes_total.fetch_add(after.bytes, Ordering::Relaxed);
        self.bytes_total.fetch_sub(before.bytes, Ordering::Relaxed);
    }

    /// Runs `change` on `group` and keeps the totals, gateway-wide and per owner, in step with
    /// it.
    fn tracked<R>(
        &self,
        owners: &mut HashMap<Owner, OwnerUsage>,
        group: &mut Group,
        change: impl FnOnce(&mut Group) -> R,
    ) -> R {
        let before = group.usage();
        let result = change(group);
        self.retally(before, group.usage());
        Table::settle_owners(owners, group);
        result
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Stops coordinating (PROTO-SHUTDOWN-1): every parked JoinGroup and SyncGroup is answered
    /// NOT_COORDINATOR, as Kafka does when a coordinator moves, so shutdown can drain them; later
    /// group requests get the same answer at once.
    pub fn stop(&self) {
        self.stopped.store(true, std::sync::atomic::Ordering::Release);
        for group in self.lock().groups.values_mut() {
            group.abandon(code(ResponseError::NotCoordinator));
        }
    }

    /// GROUP-CONSUMER-REGEX-COST-1: waits for `owner`'s one pattern job at a time.
    pub async fn regex_slot(&self, owner: &Owner) -> tokio::sync::OwnedSemaphorePermit {
        self.regex_slots.acquire(owner).await
    }

    /// The lock that serialises one group's commits.
    pub fn commit_lock(&self, group_id: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.commit_locks.lock().expect("commit locks poisoned");
        // Bounded: locks nobody holds are dropped once many groups have committed.
        if locks.len() >= 1024 {
            locks.retain(|_, lock| std::sync::Arc::strong_count(lock) > 1);
        }
        locks.entry(group_id.to_string()).or_default().clone()
    }

    /// A commit from a current member counts as a sign of life, as in Kafka.
    pub fn touch(&self, group_id: &str, member_id: &str) {
        // Changes no usage: only a deadline.
        let mut table = self.lock();
        if let Some(group) = table.groups.get_mut(group_id) {
            group.touch(member_id, Instant::now());
        } else if let Some(group) = table.consumer.get_mut(group_id) {
            group.touch(member_id, Instant::now(), self.limits.consumer_session_timeout);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().expect("group lock poisoned")
    }

    fn new_member_id(&self, client_id: &str) -> String {
        // LIMIT-BUILT-STRING-1: the client id is the client's to choose; the member id must
        // still encode as a Kafka string.
        let client_id = crate::limits::truncate_utf8(client_id, crate::limits::MAX_CLIENT_ID_IN_MEMBER_ID_BYTES);
        format!("{client_id}-{:016x}{:016x}", self.rng.next_u64(), self.rng.next_u64())
    }

    /// JoinGroup. Returns at once for errors and KIP-394's MEMBER_ID_REQUIRED, otherwise when the
    /// rebalance completes (all members rejoined, or the rebalance timeout removed the rest).
    /// Nothing is authorized: the gateway without SASL, and the fuzz target, call this.
    pub async fn join(&self, request: JoinRequest) -> JoinOutcome {
        match self.join_authorized(request, None).await {
            JoinAttempt::Done(outcome) => outcome,
            JoinAttempt::Recheck { .. } => unreachable!("nothing to recheck without an authorized set"),
        }
    }

    /// The limits a JoinGroup is held to before anything of it is decoded or stored: session
    /// timeout, protocols, metadata bytes (GROUP-LIMIT-1, LIMIT-JOIN-PROTOCOLS-1); a rebalance
    /// timeout above the cap is lowered (LIMIT-REBALANCE-TIMEOUT-1). The JoinGroup handler calls
    /// it before it reads a subscription (GROUP-SUBSCRIPTION-1).
    pub fn admit(&self, request: &mut JoinRequest) -> Result<(), i16> {
        let limits = &self.limits;
        if !(limits.min_session_timeout..=limits.max_session_timeout).contains(&request.session_timeout) {
            return Err(code(ResponseError::InvalidSessionTimeout));
        }
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return Err(code(ResponseError::InconsistentGroupProtocol));
        }
        // LIMIT-GROUP-MEMBER-ID-1: a static member's id, as a consumer-protocol member's.
        if let Err(refusal) = member_strings::check_id("GroupInstanceId", request.instance_id.as_deref()) {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-MEMBER-ID-1");
            tracing::error!("JoinGroup for {}: {}", clip(&request.group_id), refusal.message());
            return Err(crate::error_map::member_refusal_code(&refusal));
        }
        // LIMIT-JOIN-PROTOCOLS-1
        if request.protocols.len() > limits.max_protocols {
            crate::metrics::metrics().limit_hit("LIMIT-JOIN-PROTOCOLS-1");
            tracing::error!(
                "JoinGroup for {}: {} protocols offered, at most {} accepted (LIMIT-JOIN-PROTOCOLS-1)",
                clip(&request.group_id),
                request.protocols.len(),
                limits.max_protocols
            );
            return Err(code(ResponseError::InvalidRequest));
        }
        let metadata_bytes = protocol_bytes(&request.protocols);
        if metadata_bytes > limits.max_metadata_bytes {
            tracing::error!(
                "JoinGroup for {}: protocol metadata above {} bytes refused",
                clip(&request.group_id),
                limits.max_metadata_bytes
            );
            return Err(code(ResponseError::InvalidRequest));
        }
        // LIMIT-REBALANCE-TIMEOUT-1: a member may hold a rebalance open only so long.
        if request.rebalance_timeout > limits.max_rebalance_timeout {
            crate::metrics::metrics().limit_hit("LIMIT-REBALANCE-TIMEOUT-1");
            request.rebalance_timeout = limits.max_rebalance_timeout;
        }
        Ok(())
    }

    /// The topics a joiner must be authorized for besides its own (AUTHZ-GROUP-4): every topic
    /// the group's members subscribe to, or none when `member_id` is a current member's (it was
    /// authorized when it joined) or the group is unknown.
    pub fn topics_for_joiner(&self, group_id: &str, member_id: &str) -> Vec<String> {
        match self.lock().groups.get(group_id) {
            Some(group) if !group.is_member(member_id) => group.topics().map(str::to_string).collect(),
            _ => Vec::new(),
        }
    }

    /// Every topic the members of `group_id` subscribe to; `None` for a group not held here
    /// (AUTHZ-GROUP-4).
    pub fn topics(&self, group_id: &str) -> Option<Vec<String>> {
        let table = self.lock();
        match table.groups.get(group_id) {
            Some(g) => Some(g.topics().map(str::to_string).collect()),
            None => table.consumer.get(group_id).map(|g| g.topics().into_iter().collect()),
        }
    }

    /// JoinGroup by a joiner whose permissions were asked for `authorized` (AUTHZ-GROUP-4), or
    /// by anyone when it is `None`. A joiner who is not yet a member joins only when
    /// `authorized` covers every topic of the group, checked under the coordinator's lock, so a
    /// member who joined meanwhile with a new topic cannot be slipped past.
    pub async fn join_authorized(
        &self,
        mut request: JoinRequest,
        authorized: Option<&BTreeSet<String>>,
    ) -> JoinAttempt {
        if self.is_stopped() {
            return JoinAttempt::Done(JoinOutcome::error(
                code(ResponseError::NotCoordinator),
                &request.member_id,
            ));
        }
        if let Err(error_code) = self.admit(&mut request) {
            return JoinAttempt::Done(JoinOutcome::error(error_code, &request.member_id));
        }
        let limits = &self.limits;
        let metadata_bytes = join_bytes(&request);
        let (members_total, bytes_total) = self.usage();
        // LIMIT-GROUP-MEMBERS-1: only a join without a member id adds a member or a pending id.
        if request.member_id.is_empty() && members_total >= limits.max_members_total {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-MEMBERS-1");
            tracing::error!(
                "JoinGroup for {}: this gateway holds {members_total} members and pending ids already (LIMIT-GROUP-MEMBERS-1)",
                clip(&request.group_id)
            );
            return JoinAttempt::Done(JoinOutcome::error(
                code(ResponseError::CoordinatorNotAvailable),
                &request.member_id,
            ));
        }
        // LIMIT-GROUP-BYTES-1
        if bytes_total.saturating_add(metadata_bytes) > limits.max_stored_bytes {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-BYTES-1");
            tracing::error!(
                "JoinGroup for {}: groups hold {bytes_total} bytes of metadata and assignments, at most {} (LIMIT-GROUP-BYTES-1)",
                clip(&request.group_id),
                limits.max_stored_bytes
            );
            return JoinAttempt::Done(JoinOutcome::error(
                code(ResponseError::CoordinatorNotAvailable),
                &request.member_id,
            ));
        }
        let receiver = {
            let mut table = self.lock();
            let Table {
                groups,
                owners,
                consumer,
            } = &mut *table;
            // GROUP-CONSUMER-TYPE-1: a group id held by the consumer protocol is not joined
            // by the classic one, as Kafka without online migration answers.
            if consumer.get(&request.group_id).is_some_and(|g| !g.is_empty()) {
                return JoinAttempt::Done(JoinOutcome::error(
                    code(ResponseError::InconsistentGroupProtocol),
                    &request.member_id,
                ));
            }
            let existing = groups.get(&request.group_id);
            if let (Some(group), Some(authorized)) = (existing, authorized) {
                if !group.is_member(&request.member_id) && !group.topics().all(|t| authorized.contains(t)) {
                    let topics = group.topics().map(str::to_string).collect();
                    return JoinAttempt::Recheck {
                        request: Box::new(request),
                        topics,
                    };
                }
            }
            if existing.is_none() && groups.len() >= limits.max_groups {
                tracing::error!(
                    "JoinGroup for {}: this gateway coordinates {} groups already",
                    clip(&request.group_id),
                    groups.len()
                );
                return JoinAttempt::Done(JoinOutcome::error(
                    code(ResponseError::CoordinatorNotAvailable),
                    &request.member_id,
                ));
            }
            if let Some(refusal) = self.owner_quota(owners, &request, existing.is_none()) {
                return JoinAttempt::Done(refusal);
            }
            let group = groups.entry(request.group_id.clone()).or_insert_with(|| {
                owners.entry(request.owner.clone()).or_default().groups += 1;
                Group::new(request.group_id.clone(), request.owner.clone())
            });
            let new_id = self.new_member_id(&request.client_id);
            let joined = self.tracked(owners, group, |g| g.join(request, new_id, limits, Instant::now()));
            // Also on MEMBER_ID_REQUIRED: the pending id's deadline must be scheduled; and a
            // join that failed on a group it created leaves it vacant, for the timer to forget.
            self.deadlines_changed.notify_one();
            match joined {
                Ok(receiver) => receiver,
                Err(outcome) => return JoinAttempt::Done(*outcome),
            }
        };
        JoinAttempt::Done(
            receiver
                .await
                .unwrap_or_else(|_| JoinOutcome::error(code(ResponseError::UnknownMemberId), "")),
        )
    }

    /// LIMIT-GROUP-OWNER-1: a join that would create a group, or add a member or pending id, past
    /// its owner's quota is refused COORDINATOR_NOT_AVAILABLE; the refusals are logged once when
    /// a run of them starts. Rejoining members and pending ids add nothing and pass.
    fn owner_quota(
        &self,
        owners: &mut HashMap<Owner, OwnerUsage>,
        request: &JoinRequest,
        creates_group: bool,
    ) -> Option<JoinOutcome> {
        let usage = owners.get_mut(&request.owner)?;
        let adds_member = request.member_id.is_empty();
        let over = if creates_group && usage.groups >= self.limits.max_groups_per_owner {
            Some(("groups", usage.groups, self.limits.max_groups_per_owner))
        } else if (adds_member || creates_group) && usage.members >= self.limits.max_members_per_owner {
            Some((
                "members and pending ids",
                usage.members,
                self.limits.max_members_per_owner,
            ))
        } else {
            None
        };
        let Some((what, held, limit)) = over else {
            if let Some(count) = (usage.refused > 0).then(|| std::mem::take(&mut usage.refused)) {
                tracing::info!(
                    "JoinGroup: {} is admitted again after {count} joins refused for its quota (LIMIT-GROUP-OWNER-1)",
                    clip(&request.owner)
                );
            }
            return None;
        };
        crate::metrics::metrics().limit_hit("LIMIT-GROUP-OWNER-1");
        usage.refused += 1;
        if usage.refused == 1 {
            tracing::warn!(
                "JoinGroup for {}: {} holds {held} {what}, its quota is {limit}; refusing its joins that add more until it holds fewer (LIMIT-GROUP-OWNER-1)",
                clip(&request.group_id),
                clip(&request.owner)
            );
        }
        Some(JoinOutcome::error(
            code(ResponseError::CoordinatorNotAvailable),
            &request.member_id,
        ))
    }

    /// SyncGroup: the leader's assignments are relayed to every member.
    pub async fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        assignments: Vec<(String, bytes::Bytes)>,
    ) -> SyncOutcome {
        if assignments
            .iter()
            .any(|(_, a)| a.len() > self.limits.max_metadata_bytes)
        {
            tracing::error!(
                "SyncGroup for {}: an assignment above {} bytes refused",
                clip(group_id),
                self.limits.max_metadata_bytes
            );
            return SyncOutcome::error(code(ResponseError::InvalidRequest));
        }
        // LIMIT-GROUP-BYTES-1
        let assigned: usize = assignments.iter().map(|(_, a)| a.len()).sum();
        let (_, bytes_total) = self.usage();
        if bytes_total.saturating_add(assigned) > self.limits.max_stored_bytes {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-BYTES-1");
            tracing::error!(
                "SyncGroup for {}: groups hold {bytes_total} bytes of metadata and assignments, at most {} (LIMIT-GROUP-BYTES-1)",
                clip(group_id),
                self.limits.max_stored_bytes
            );
            return SyncOutcome::error(code(ResponseError::CoordinatorNotAvailable));
        }
        if self.is_stopped() {
            return SyncOutcome::error(code(ResponseError::NotCoordinator));
        }
        let receiver: oneshot::Receiver<SyncOutcome> = {
            let mut table = self.lock();
            let Table { groups, owners, .. } = &mut *table;
            let Some(group) = groups.get_mut(group_id) else {
                return SyncOutcome::error(code(ResponseError::UnknownMemberId));
            };
            match self.tracked(owners, group, |g| {
                g.sync(generation, member_id, instance_id, assignments)
            }) {
                Ok(receiver) => receiver,
                Err(outcome) => return outcome,
            }
        };
        receiver
            .await
            .unwrap_or_else(|_| SyncOutcome::error(code(ResponseError::RebalanceInProgress)))
    }

    /// Heartbeat: extends the member's session; REBALANCE_IN_PROGRESS tells it to rejoin.
    pub fn heartbeat(&self, group_id: &str, generation: i32, member_id: &str, instance_id: Option<&str>) -> i16 {
        match self.lock().groups.get_mut(group_id) {
            None => code(ResponseError::UnknownMemberId),
            Some(group) => group.heartbeat(generation, member_id, instance_id, Instant::now()),
        }
    }

    /// LeaveGroup for each member; returns a code per member.
    pub fn leave(&self, group_id: &str, members: &[MemberLeave]) -> Vec<i16> {
        let codes = {
            let mut table = self.lock();
            let Table { groups, owners, .. } = &mut *table;
            match groups.get_mut(group_id) {
                None => vec![code(ResponseError::UnknownMemberId); members.len()],
                Some(group) => self.tracked(owners, group, |g| {
                    members.iter().map(|m| g.leave(m, Instant::now())).collect()
                }),
            }
        };
        self.deadlines_changed.notify_one();
        codes
    }

    /// A group's state for DescribeGroups; `None` when this gateway knows no such group.
    pub fn describe(&self, group_id: &str) -> Option<DescribedGroup> {
        self.lock().groups.get(group_id).map(Group::describe)
    }

    /// The encoded bytes `describe(group_id)` would answer with, at most, counted without copying
    /// a member (LIMIT-RESPONSE-BYTES-1); `None` when this gateway knows no such group.
    pub fn described_bytes(&self, group_id: &str) -> Option<usize> {
        self.lock().groups.get(group_id).map(Group::described_bytes)
    }

    /// (group id, protocol type, state) of every group this gateway holds: those it coordinates
    /// (LISTGROUPS-COORDINATED-1), never groups known by stored offsets alone.
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        self.lock()
            .groups
            .values()
            .map(|g| {
                (
                    g.id().to_string(),
                    g.protocol_type().unwrap_or_default().to_string(),
                    g.state(),
                )
            })
            .collect()
    }

    /// What the live members of `group_id` keep from OffsetDelete; `None` when no group of that
    /// id is held here (OFFSETDELETE-2, GROUP-CONSUMER-OFFSETDELETE-1). Nothing of a member is
    /// copied but the topics.
    pub fn offset_delete_guard(&self, group_id: &str) -> Option<OffsetDeleteGuard> {
        let table = self.lock();
        if let Some(group) = table.groups.get(group_id) {
            return Some(if group.member_ids().is_empty() {
                OffsetDeleteGuard::Empty
            } else if group.protocol_type() == Some("consumer") {
                OffsetDeleteGuard::Subscribed(group.topics().map(str::to_string).collect())
            } else {
                OffsetDeleteGuard::Opaque
            });
        }
        // GROUP-CONSUMER-OFFSETDELETE-1: a consumer-protocol group keeps every topic its members
        // subscribe to, by name or matched by their patterns, as Kafka's
        // `ConsumerGroup.isSubscribedToTopic`.
        table.consumer.get(group_id).map(|group| match group.is_empty() {
            true => OffsetDeleteGuard::Empty,
            false => OffsetDeleteGuard::Subscribed(group.topics()),
        })
    }

    /// Whether the group has members right now; OffsetCommit and DeleteGroups ask.
    pub fn member_generation(&self, group_id: &str) -> Option<(GroupState, i32, Vec<String>)> {
        self.lock()
            .groups
            .get(group_id)
            .map(|g| (g.state(), g.generation(), g.member_ids()))
    }

    /// Forgets every group `keep` refuses: their coordinator is another gateway now
    /// (GROUP-COORDINATOR-3). Parked JoinGroup and SyncGroup requests are answered
    /// NOT_COORDINATOR, as at shutdown, and every member and pending id goes with its group, so
    /// that the group starts afresh if it ever comes back. Returns the groups forgotten.
    pub fn relinquish(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut table = self.lock();
        let Table {
            groups,
            owners,
            consumer,
        } = &mut *table;
        let mut leaving: Vec<String> = groups.keys().filter(|id| !keep(id)).cloned().collect();
        let consumer_leaving: Vec<String> = consumer.keys().filter(|id| !keep(id)).cloned().collect();
        for id in &consumer_leaving {
            if let Some(mut group) = consumer.remove(id) {
                self.consumer_tracked(owners, &mut group, ConsumerGroup::dissolve);
                Table::forgotten_creator(owners, group.creator());
            }
        }
        for id in &leaving {
            if let Some(mut group) = groups.remove(id) {
                self.tracked(owners, &mut group, |g| g.dissolve(code(ResponseError::NotCoordinator)));
                self.retally(group.usage(), Usage::default());
                Table::forgotten(owners, &group);
            }
        }
        leaving.extend(consumer_leaving);
        leaving
    }

    /// Forgets an empty group; returns false when it has members.
    pub fn remove_if_empty(&self, group_id: &str) -> bool {
        let mut table = self.lock();
        let Table {
            groups,
            owners,
            consumer,
        } = &mut *table;
        if consumer.get(group_id).is_some_and(|g| !g.is_empty()) {
            return false;
        }
        consumer.remove(group_id);
        match groups.get(group_id) {
            Some(g) if !g.member_ids().is_empty() => false,
            _ => {
                if let Some(mut group) = groups.remove(group_id) {
                    // Pending ids go with it.
                    self.tracked(owners, &mut group, Group::clear_pending);
                    self.retally(group.usage(), Usage::default());
                    Table::forgotten(owners, &group);
                }
                true
            }
        }
    }

    /// Enforces every deadline that has passed and forgets groups left with nobody (their
    /// offsets stay in Iggy, so nothing is lost); returns the next deadline.
    pub fn expire(&self, now: Instant) -> Option<Instant> {
        let mut table = self.lock();
        let Table {
            groups,
            owners,
            consumer,
        } = &mut *table;
        for group in consumer.values_mut() {
            for id in self.consumer_tracked(owners, group, |g| g.expire(now)) {
                tracing::info!(
                    "consumer group {}: member {} removed: no heartbeat within its session, or no revocation within its rebalance timeout (GROUP-CONSUMER-TIMEOUT-1)",
                    clip(group.id()),
                    clip(&id)
                );
            }
        }
        consumer.retain(|_, g| {
            if g.is_empty() {
                Table::forgotten_creator(owners, g.creator());
            }
            !g.is_empty()
        });
        let consumer_next = consumer.values().filter_map(ConsumerGroup::next_deadline).min();
        for group in groups.values_mut() {
            self.tracked(owners, group, |g| g.expire(now));
        }
        // A vacant group holds no usage: nothing to take from the totals, but its creator's count.
        groups.retain(|_, g| {
            let vacant = g.is_vacant();
            if vacant {
                Table::forgotten(owners, g);
            }
            !vacant
        });
        groups
            .values()
            .filter_map(Group::next_deadline)
            .chain(consumer_next)
            .min()
    }

    /// Runs `change` on a consumer-protocol group, keeping the totals in step, as `tracked`.
    fn consumer_tracked<R>(
        &self,
        owners: &mut HashMap<Owner, OwnerUsage>,
        group: &mut ConsumerGroup,
        change: impl FnOnce(&mut ConsumerGroup) -> R,
    ) -> R {
        let usage = |g: &ConsumerGroup| {
            let (members, bytes) = g.usage();
            Usage { members, bytes }
        };
        let before = usage(group);
        let result = change(group);
        self.retally(before, usage(group));
        Table::settle_consumer_owners(owners, group);
        result
    }

    /// The timer task: sleeps until the next deadline or until one may have moved earlier.
    pub async fn run_timers(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let next = self.expire(Instant::now());
            let sleep = async {
                match next {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // Branches in written order, not tokio's own random order: a simulation seed must
                // decide every choice the server makes (PROTO-DETERMINISM-1).
                biased;
                _ = stop.wait_for(|s| *s) => {
                    self.stop();
                    return;
                }
                _ = sleep => {}
                _ = self.deadlines_changed.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
