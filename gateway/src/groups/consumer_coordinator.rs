//! The coordinator's side of KIP-848's consumer protocol (docs/spec/groups.md): a
//! ConsumerGroupHeartbeat held to the group limits and to the topics its member was authorized
//! for, and what ConsumerGroupDescribe, ListGroups and the offset APIs read of consumer-protocol
//! groups. The group state machine itself is [`super::consumer_protocol`]; the table, the
//! limits and the timers are the parent module's.

use super::consumer_protocol::{
    self, Assignor, ConsumerGroup, ConsumerGroupError, ConsumerSettings, Heartbeat, HeartbeatAnswer, OffsetRefusal,
    PatternPlan,
};
use super::{topic_regex, GroupCoordinator, Owner, Table};
use crate::log_text::clip;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// A consumer-protocol group's description (ConsumerGroupDescribe).
#[derive(Debug, Clone)]
pub struct ConsumerDescribed {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: &'static str,
    /// Each member with its target assignment.
    pub members: Vec<(consumer_protocol::ConsumerMember, consumer_protocol::Assignment)>,
}

/// What describing a consumer-protocol group within a response budget gave
/// (LIMIT-GROUP-ANSWER-BYTES-1).
#[derive(Debug)]
pub enum ConsumerDescription {
    /// No consumer-protocol group of that id is held here.
    NotHeld,
    /// Its description would take `bytes`, past what the budget had left; nothing was copied.
    TooLarge {
        bytes: usize,
        exceeded: crate::response_budget::Exceeded,
    },
    Described(ConsumerDescribed),
}

/// What [`GroupCoordinator::consumer_heartbeat_authorized`] concluded.
#[derive(Debug)]
pub enum ConsumerAttempt {
    /// The heartbeat's answer.
    Done(Result<HeartbeatAnswer, ConsumerGroupError>),
    /// The member would subscribe to, or join a group with, topics past what was authorized
    /// (the group gained topics while the permissions were asked): ask again for `topics`
    /// (AUTHZ-GROUP-4, GROUP-CONSUMER-SUBSCRIPTION-1). The heartbeat comes back unused.
    Recheck {
        heartbeat: Box<Heartbeat>,
        topics: Vec<String>,
    },
}

/// What a ConsumerGroupHeartbeat brings the coordinator besides the request itself.
#[derive(Debug, Default)]
pub struct ConsumerLookups {
    /// Partition counts of the topics looked up: `None` for a topic that does not exist.
    pub topics: BTreeMap<String, Option<u32>>,
    /// What each pattern handed out by `consumer_pattern_plan` matched, in the heartbeat's
    /// scope (GROUP-CONSUMER-REGEX-1, GROUP-CONSUMER-REGEX-SCOPE-1).
    pub resolutions: BTreeMap<String, BTreeSet<String>>,
}

impl GroupCoordinator {
    /// What ConsumerGroupHeartbeat tells members about their heartbeats.
    pub fn consumer_heartbeat_interval(&self) -> Duration {
        self.limits.consumer_heartbeat_interval
    }

    /// The bytes one member may bring (LIMIT-GROUP-MEMBER-BYTES-1): GROUP-LIMIT-1's bound on one
    /// member's metadata, as Kafka's member must fit one record of its offsets topic.
    pub fn max_member_bytes(&self) -> usize {
        self.limits.max_metadata_bytes
    }

    /// Whether `group_id` is a classic group held here (GROUP-CONSUMER-TYPE-1).
    pub fn is_classic(&self, group_id: &str) -> bool {
        self.lock().groups.get(group_id).is_some_and(|g| !g.is_vacant())
    }

    /// The topics `member_id` of consumer-protocol group `group_id` holds, assigned or being
    /// revoked: the only names its owned partitions, given by topic id, need mapping to
    /// (GROUP-CONSUMER-LOOKUPS-1). As many as the member holds, whatever the group's size.
    pub fn consumer_held_topics(&self, group_id: &str, member_id: &str) -> Vec<String> {
        let table = self.lock();
        let Some(member) = table.consumer.get(group_id).and_then(|g| g.member(member_id)) else {
            return Vec::new();
        };
        let held: BTreeSet<&String> = member.assigned.keys().chain(member.revoking.keys()).collect();
        held.into_iter().cloned().collect()
    }

    /// GROUP-CONSUMER-NONMEMBER-1, GROUP-CONSUMER-REGEX-COST-1, GROUP-CONSUMER-LOOKUPS-1: what a
    /// heartbeat of `member_id` at `epoch` in `group_id`, subscribing to `requested` and to the
    /// topic `names`, must do with patterns in `scope` and with topics before it is taken
    /// (`ConsumerGroup::pattern_plan`): a heartbeat under an id no member holds is
    /// UNKNOWN_MEMBER_ID here, before any pattern is compiled or topic listed. The topics are
    /// looked up or listed, and the patterns compiled and matched, outside the lock, by the caller.
    #[allow(clippy::too_many_arguments)]
    pub fn consumer_pattern_plan(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        requested: Option<&str>,
        names: Option<&[&str]>,
        scope: &Owner,
    ) -> Result<PatternPlan, ConsumerGroupError> {
        let now = Instant::now();
        let mut table = self.lock();
        // GROUP-CONSUMER-TYPE-1 first, as Kafka looks the group up before its member.
        if table.groups.get(group_id).is_some_and(|g| !g.is_vacant()) {
            return Err(ConsumerGroupError::NotConsumerGroup);
        }
        match table.consumer.get_mut(group_id) {
            Some(group) => group.pattern_plan(
                member_id,
                epoch,
                requested,
                names,
                scope,
                now,
                topic_regex::REFRESH_INTERVAL,
                topic_regex::MAX_PATTERNS_PER_HEARTBEAT,
            ),
            None if epoch > 0 => Err(ConsumerGroupError::UnknownMemberId),
            None if epoch < 0 => Ok(PatternPlan::default()),
            None => {
                // The group's first member: every name it brings is new to the group.
                let requested: Option<String> = requested.filter(|r| !r.is_empty()).map(str::to_string);
                let look_up: BTreeSet<&str> = names
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .filter(|n| !n.is_empty())
                    .collect();
                Ok(PatternPlan {
                    validate: requested.clone(),
                    resolve: requested.into_iter().collect(),
                    look_up: look_up.into_iter().map(str::to_string).collect(),
                    list_names: None,
                })
            }
        }
    }

    /// The topics a member of `group_id` heartbeating `request` subscribes to once the heartbeat
    /// is applied, and, when it joins, every topic of the group: what it must be authorized for
    /// (AUTHZ-GROUP-4). Read under the coordinator's lock.
    fn consumer_topics_needed(group: Option<&ConsumerGroup>, request: &Heartbeat) -> BTreeSet<String> {
        let mut needed: BTreeSet<String> = request.subscribed_topics.iter().flatten().cloned().collect();
        let member = group.and_then(|g| g.member(&request.member_id));
        let pattern = match &request.subscribed_regex {
            Some(r) => Some(r.as_str()).filter(|r| !r.is_empty()),
            None => member.and_then(|m| m.subscribed_regex.as_deref()),
        };
        if let Some(pattern) = pattern {
            match request.resolutions.get(pattern) {
                Some(matched) => needed.extend(matched.iter().cloned()),
                None => {
                    if let Some(resolved) = group.and_then(|g| g.resolution(&request.pattern_scope, pattern)) {
                        needed.extend(resolved.topics.iter().cloned());
                    }
                }
            }
        }
        let joining = request.member_epoch == 0 && member.is_none();
        if let (true, Some(group)) = (joining, group) {
            needed.extend(group.topics());
        }
        needed
    }

    /// ConsumerGroupHeartbeat (GROUP-CONSUMER-HEARTBEAT-1) with nothing authorized: the gateway
    /// without SASL, and tests. `topics` holds the partition counts looked up.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        request: Heartbeat,
        topics: &BTreeMap<String, Option<u32>>,
    ) -> Result<HeartbeatAnswer, ConsumerGroupError> {
        let lookups = ConsumerLookups {
            topics: topics.clone(),
            resolutions: BTreeMap::new(),
        };
        match self.consumer_heartbeat_authorized(group_id, request, lookups, None) {
            ConsumerAttempt::Done(answer) => answer,
            ConsumerAttempt::Recheck { .. } => unreachable!("nothing to recheck without an authorized set"),
        }
    }

    /// ConsumerGroupHeartbeat by a member whose permissions were asked for `authorized`
    /// (AUTHZ-GROUP-4), or by anyone when it is `None`. Under the coordinator's lock, the topics
    /// the member will subscribe to, and a joiner every topic of the group, must be within
    /// `authorized`, as JoinGroup's `join_authorized` checks: a member that subscribed meanwhile
    /// to a new topic, or a pattern resolved meanwhile to one, cannot be slipped past.
    pub fn consumer_heartbeat_authorized(
        &self,
        group_id: &str,
        request: Heartbeat,
        lookups: ConsumerLookups,
        authorized: Option<&BTreeSet<String>>,
    ) -> ConsumerAttempt {
        use ConsumerAttempt::Done;
        let ConsumerLookups { topics, resolutions } = lookups;
        let mut request = request;
        request.resolutions.extend(resolutions);
        if self.is_stopped() {
            return Done(Err(ConsumerGroupError::NotCoordinator));
        }
        let limits = &self.limits;
        let settings = ConsumerSettings {
            session_timeout: limits.consumer_session_timeout,
            max_members: limits.max_members_per_group,
            default_assignor: Assignor::Uniform,
        };
        let joining = request.member_epoch == 0;
        let mut table = self.lock();
        let Table {
            groups,
            owners,
            consumer,
        } = &mut *table;
        // GROUP-CONSUMER-TYPE-1
        if groups.get(group_id).is_some_and(|g| !g.is_vacant()) {
            return Done(Err(ConsumerGroupError::NotConsumerGroup));
        }
        // GROUP-CONSUMER-NONMEMBER-1: an id no member holds, neither joining nor leaving, is
        // refused before anything it brings is counted, checked or kept.
        if request.member_epoch > 0
            && consumer
                .get(group_id)
                .is_none_or(|g| g.member(&request.member_id).is_none())
        {
            return Done(Err(ConsumerGroupError::UnknownMemberId));
        }
        // AUTHZ-GROUP-4, GROUP-CONSUMER-SUBSCRIPTION-1: what was authorized outside the lock must
        // still cover what the member subscribes to and, joining, the group's topics.
        if let Some(authorized) = authorized {
            let needed = Self::consumer_topics_needed(consumer.get(group_id), &request);
            if !needed.is_subset(authorized) {
                return ConsumerAttempt::Recheck {
                    heartbeat: Box::new(request),
                    topics: needed.into_iter().collect(),
                };
            }
        }
        let (members_total, bytes_total) = self.usage();
        // GROUP-CONSUMER-SUBSCRIPTION-1: limits before a member or group is added.
        if joining {
            // LIMIT-GROUP-MEMBERS-1
            if members_total >= limits.max_members_total {
                crate::metrics::metrics().limit_hit("LIMIT-GROUP-MEMBERS-1");
                tracing::error!(
                    "ConsumerGroupHeartbeat for {}: this gateway holds {members_total} members already (LIMIT-GROUP-MEMBERS-1)",
                    clip(group_id)
                );
                return Done(Err(ConsumerGroupError::CoordinatorNotAvailable(
                    "LIMIT-GROUP-MEMBERS-1",
                )));
            }
            let creates = !consumer.contains_key(group_id);
            if creates && groups.len() + consumer.len() >= limits.max_groups {
                return Done(Err(ConsumerGroupError::CoordinatorNotAvailable("GROUP-LIMIT-1")));
            }
            // LIMIT-GROUP-OWNER-1
            if let Some(usage) = owners.get(&request.owner) {
                if (creates && usage.groups >= limits.max_groups_per_owner)
                    || usage.members >= limits.max_members_per_owner
                {
                    crate::metrics::metrics().limit_hit("LIMIT-GROUP-OWNER-1");
                    return Done(Err(ConsumerGroupError::CoordinatorNotAvailable("LIMIT-GROUP-OWNER-1")));
                }
            }
        }
        // LIMIT-GROUP-BYTES-1, LIMIT-GROUP-MEMBER-BYTES-1: every string the heartbeat would keep, a
        // member's growth as a joiner's whole, and what its patterns matched (GROUP-CONSUMER-REGEX-1),
        // counted before anything is stored.
        let resolved_bytes: usize = request
            .resolutions
            .iter()
            .map(|(pattern, topics)| pattern.len() + topics.iter().map(String::len).sum::<usize>())
            .sum();
        let added = match consumer.get(group_id) {
            Some(group) => group.bytes_added(&request),
            None if request.member_epoch < 0 => 0,
            None => request.string_bytes() + request.new_name_bytes(None),
        } + resolved_bytes;
        if added > 0 && bytes_total.saturating_add(added) > limits.max_stored_bytes {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-BYTES-1");
            tracing::error!(
                "ConsumerGroupHeartbeat for {}: it would keep {added} bytes more, and groups hold {bytes_total} of at most {} (LIMIT-GROUP-BYTES-1)",
                clip(group_id),
                limits.max_stored_bytes
            );
            return Done(Err(ConsumerGroupError::CoordinatorNotAvailable("LIMIT-GROUP-BYTES-1")));
        }
        let group = match consumer.get_mut(group_id) {
            Some(group) => group,
            None if joining => {
                owners.entry(request.owner.clone()).or_default().groups += 1;
                consumer
                    .entry(group_id.to_string())
                    .or_insert_with(|| ConsumerGroup::new(group_id.to_string(), request.owner.clone()))
            }
            None => return Done(Err(ConsumerGroupError::UnknownMemberId)),
        };
        let now = Instant::now();
        let answer = self.consumer_tracked(owners, group, |g| g.heartbeat(request, &topics, &settings, now));
        if group.is_empty() {
            let group = consumer.remove(group_id).expect("present");
            Table::forgotten_creator(owners, group.creator());
        }
        self.deadlines_changed.notify_one();
        Done(answer)
    }

    /// A consumer-protocol group as ConsumerGroupDescribe reports it, whatever its size; `None`
    /// when not held here. For tests: answers go through [`Self::consumer_describe_within`]
    /// (LIMIT-GROUP-ANSWER-BYTES-1).
    #[cfg(test)]
    pub fn consumer_describe(&self, group_id: &str) -> Option<ConsumerDescribed> {
        let table = self.lock();
        let group = table.consumer.get(group_id)?;
        Some(ConsumerDescribed {
            state: group.state_name(),
            group_epoch: group.group_epoch(),
            assignment_epoch: group.target_epoch(),
            assignor: group.assignor(Assignor::Uniform).name(),
            members: group.members().map(|m| (m.clone(), group.target_of(&m.id))).collect(),
        })
    }

    /// LIMIT-GROUP-ANSWER-BYTES-1: a consumer-protocol group as ConsumerGroupDescribe reports
    /// it, its encoded size charged to `budget` under the coordinator's lock before any member is
    /// copied, so the copy is bounded by the budget and no member joining meanwhile escapes it.
    pub fn consumer_describe_within(
        &self,
        group_id: &str,
        budget: &mut crate::response_budget::ResponseBudget,
    ) -> ConsumerDescription {
        let table = self.lock();
        let Some(group) = table.consumer.get(group_id) else {
            return ConsumerDescription::NotHeld;
        };
        let bytes = group.described_bytes();
        if let Err(exceeded) = budget.charge(bytes) {
            return ConsumerDescription::TooLarge { bytes, exceeded };
        }
        ConsumerDescription::Described(ConsumerDescribed {
            state: group.state_name(),
            group_epoch: group.group_epoch(),
            assignment_epoch: group.target_epoch(),
            assignor: group.assignor(Assignor::Uniform).name(),
            members: group.members().map(|m| (m.clone(), group.target_of(&m.id))).collect(),
        })
    }

    /// Whether `group_id` is a consumer-protocol group held here; nothing of it is copied.
    pub fn is_consumer(&self, group_id: &str) -> bool {
        self.lock().consumer.contains_key(group_id)
    }

    /// (group id, state) of every consumer-protocol group held here (LISTGROUPS-COORDINATED-1).
    pub fn consumer_list(&self) -> Vec<(String, &'static str)> {
        self.lock()
            .consumer
            .values()
            .map(|g| (g.id().to_string(), g.state_name()))
            .collect()
    }

    /// GROUP-CONSUMER-COMMIT-1: `None` when `group_id` is no consumer-protocol group held here.
    pub fn consumer_offsets_check(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        fetch: bool,
        version: i16,
    ) -> Option<Result<(), OffsetRefusal>> {
        self.lock()
            .consumer
            .get(group_id)
            .map(|g| g.validate_offsets(member_id, epoch, fetch, version))
    }
}
