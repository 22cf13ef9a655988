//! ConsumerGroupHeartbeat (API 68, KIP-848): the request's shape checked as Kafka checks it, the
//! group's patterns resolved against the topics listed when due (GROUP-CONSUMER-REGEX-1), the
//! subscription authorized as a JoinGroup's and rechecked under the coordinator's lock
//! (AUTHZ-GROUP-1, AUTHZ-GROUP-4), the partition counts of the group's topics looked up, then the
//! coordinator's consumer-protocol group decides (GROUP-CONSUMER-HEARTBEAT-1, docs/spec/groups.md).

use super::group_authz::{owner, PollPermissions, Verdict};
use super::join_group::valid_group_id;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::groups::consumer_protocol::{Assignment, Assignor, ConsumerGroupError, Heartbeat, HeartbeatAnswer};
use crate::groups::topic_id::topic_id;
use crate::groups::{member_strings, topic_regex, ConsumerAttempt, ConsumerLookups, Owner};
use crate::log_text::clip;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment as WireAssignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

fn refused(code: i16, message: impl Into<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.into())))
        .with_member_epoch(-1)
}

/// Rounds of authorization a heartbeat gets while the group keeps gaining topics, as JoinGroup's
/// (AUTHZ-GROUP-4); past them the member is asked to retry.
const AUTHORIZATION_ROUNDS: usize = 3;

/// GROUP-CONSUMER-HEARTBEAT-1: Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, each
/// refusal INVALID_REQUEST with Kafka's message; a pattern too long or that does not compile
/// within bounds is INVALID_REGULAR_EXPRESSION (GROUP-CONSUMER-REGEX-1).
fn shape_error(request: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<(i16, String)> {
    let invalid = |m: &str| Some((ResponseError::InvalidRequest.code(), m.to_string()));
    let epoch = request.member_epoch;
    if request.group_id.0.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if version >= 1 && request.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    // LIMIT-GROUP-MEMBER-ID-1: refused before anything of the request is copied or kept.
    let ids = [
        ("MemberId", Some(request.member_id.as_str())),
        ("InstanceId", request.instance_id.as_deref()),
        ("RackId", request.rack_id.as_deref()),
    ];
    for (field, value) in ids {
        if let Err(refusal) = member_strings::check_id(field, value) {
            crate::metrics::metrics().limit_hit("LIMIT-GROUP-MEMBER-ID-1");
            tracing::error!(
                "ConsumerGroupHeartbeat for {}: {}",
                clip(request.group_id.0.as_str()),
                refusal.message()
            );
            return Some((error_map::member_refusal_code(&refusal), refusal.message()));
        }
    }
    if request.server_assignor.as_ref().is_some_and(|a| a.is_empty()) {
        return invalid("ServerAssignor can't be empty.");
    }
    if epoch == 0 {
        if request.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if !request.topic_partitions.as_ref().is_some_and(Vec::is_empty) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
            return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.");
        }
    } else if epoch == -2 {
        if request.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if epoch < -2 {
        return invalid(&format!(
            "MemberEpoch is {epoch}, but must be greater than or equal to -2."
        ));
    }
    // GROUP-CONSUMER-REGEX-1: bounded before anything else of it is done; it is compiled only
    // when its member did not hold it (GROUP-CONSUMER-REGEX-COST-1).
    if let Some(pattern) = request.subscribed_topic_regex.as_ref() {
        if pattern.len() > topic_regex::MAX_PATTERN_BYTES {
            let refusal = topic_regex::RegexRefusal::TooLong(pattern.len());
            return Some((error_map::regex_code(&refusal), refusal.message()));
        }
    }
    if let Some(name) = &request.server_assignor {
        if Assignor::parse(name.as_str()).is_none() {
            return Some((
                ResponseError::UnsupportedAssignor.code(),
                format!(
                    "ServerAssignor {} is not supported. Supported assignors: uniform, range.",
                    clip(name.as_str())
                ),
            ));
        }
    }
    None
}

/// LIMIT-GROUP-MEMBER-BYTES-1: the strings this heartbeat brings for its member (ids, the client
/// id of its header, subscribed names, pattern) within what one member may hold, `limit`, as
/// Kafka's member must fit one record of its offsets topic. Counted on the decoded request, before
/// any of it is copied.
fn member_size_error(request: &ConsumerGroupHeartbeatRequest, client_id: &str, limit: usize) -> Option<(i16, String)> {
    let optional = |v: &Option<StrBytes>| v.as_ref().map_or(0, |v| v.len());
    let names = request
        .subscribed_topic_names
        .as_ref()
        .map_or(0, |names| names.iter().map(|n| n.0.len()).sum());
    let len = request.member_id.len()
        + optional(&request.instance_id)
        + optional(&request.rack_id)
        + client_id.len()
        + names
        + optional(&request.subscribed_topic_regex);
    member_strings::check_total(len, limit)
        .err()
        .map(|refusal| (error_map::member_refusal_code(&refusal), refusal.message()))
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    peer: IpAddr,
    request: ConsumerGroupHeartbeatRequest,
    header: &RequestHeader,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = request.group_id.0.as_str().to_string();
    if let Some((code, message)) = shape_error(&request, version) {
        return refused(code, message);
    }
    let client_id = header.client_id.as_deref().unwrap_or_default();
    if let Some((code, message)) = member_size_error(&request, client_id, gateway.groups.max_member_bytes()) {
        tracing::error!("ConsumerGroupHeartbeat for {}: {message}", clip(&group_id));
        crate::metrics::metrics().limit_hit("LIMIT-GROUP-MEMBER-BYTES-1");
        return refused(code, message);
    }
    if !valid_group_id(&group_id) {
        return refused(ResponseError::InvalidGroupId.code(), "The group id is too long.");
    }
    // GROUP-COORDINATOR-1: the same routing as a classic group.
    if !gateway.is_coordinator(&group_id) {
        return refused(
            ResponseError::NotCoordinator.code(),
            "This gateway does not coordinate the group.",
        );
    }
    let member_id = if request.member_id.is_empty() {
        // v0: the coordinator names a joining member.
        uuid::Uuid::from_u64_pair(gateway_rng(gateway), gateway_rng(gateway)).to_string()
    } else {
        request.member_id.as_str().to_string()
    };
    let mut permissions = PollPermissions::new(gateway, session);
    let owner = owner(gateway, session, peer);
    // GROUP-CONSUMER-REGEX-SCOPE-1: patterns are resolved with the permissions of the principal
    // of the members naming them; without SASL every session lists the same topics.
    let pattern_scope: Owner = if permissions.checks() {
        owner.clone()
    } else {
        Owner::from("")
    };
    let requested_regex = request.subscribed_topic_regex.as_deref();
    let names: Option<Vec<&str>> = request
        .subscribed_topic_names
        .as_ref()
        .map(|names| names.iter().map(|n| n.0.as_str()).collect());
    // GROUP-CONSUMER-NONMEMBER-1: a heartbeat under an id no member holds is answered here, before
    // anything of it is copied, compiled, looked up or listed.
    let plan = match gateway.groups.consumer_pattern_plan(
        &group_id,
        &member_id,
        request.member_epoch,
        requested_regex,
        names.as_deref(),
        &pattern_scope,
    ) {
        Ok(plan) => plan,
        Err(e) => return refused(error_map::consumer_group_code(&e), group_refusal(gateway, &e)),
    };
    let mut lookups = ConsumerLookups::default();
    // GROUP-CONSUMER-LOOKUPS-1: the topics a heartbeat brings that the group does not name are
    // looked up with the caller's session, one by one, or in one listing when they are many;
    // the group's names, once due, are checked against one listing made with the gateway's own
    // account, as Kafka's coordinator reads its metadata image whoever heartbeats.
    // A listing that fails looks up nothing instead: the names wait for the group's next listing.
    if plan.look_up.len() > LOOKUPS_BEFORE_LISTING {
        if let Some(listed) = list_kafka_topics(gateway, session, &group_id).await {
            mark_listed(&mut lookups, &plan.look_up, &listed);
        }
    } else {
        look_up_one_by_one(gateway, session, &mut lookups, &plan.look_up).await;
    }
    if let Some(group_names) = &plan.list_names {
        if let Some(listed) = list_kafka_topics(gateway, &gateway.default_session, &group_id).await {
            mark_listed(&mut lookups, group_names, &listed);
        }
    }
    if plan.validate.is_some() || !plan.resolve.is_empty() {
        // GROUP-CONSUMER-REGEX-COST-1: one pattern job per owner at a time, off the async workers.
        let _slot = gateway.groups.regex_slot(&owner).await;
        if let Some(pattern) = plan.validate.clone() {
            let compiled = gateway
                .decode_pool
                .run(move || topic_regex::compile(&pattern).map(|_| ()))
                .await;
            if let Err(refusal) = compiled {
                return refused(error_map::regex_code(&refusal), refusal.message());
            }
        }
        if !plan.resolve.is_empty() {
            let refused_pattern = resolve_patterns(
                gateway,
                session,
                &mut permissions,
                &group_id,
                plan.resolve,
                plan.validate.as_deref(),
                &mut lookups,
            )
            .await;
            if let Err(refusal) = refused_pattern {
                return refused(error_map::regex_code(&refusal), refusal.message());
            }
        }
    }
    let subscribed: Option<Vec<String>> = names.map(|names| names.into_iter().map(str::to_string).collect());
    // Owned partitions name topics by id. GROUP-CONSUMER-LOOKUPS-1: only those of topics the
    // member holds (assigned, or being revoked, by pattern too) matter to the coordinator, which
    // checks them against what it holds; any other is kept under the empty name, which no
    // subscription names and no member holds, so it still counts as owned and not held.
    let held = match request.topic_partitions.as_deref() {
        Some(owned) if !owned.is_empty() => gateway.groups.consumer_held_topics(&group_id, &member_id),
        _ => Vec::new(),
    };
    let by_id: BTreeMap<uuid::Uuid, &String> = held.iter().map(|t| (topic_id(t), t)).collect();
    let owned: Option<Assignment> = request.topic_partitions.as_ref().map(|owned| {
        let mut assignment = Assignment::new();
        for t in owned {
            let name = by_id.get(&t.topic_id).map_or_else(String::new, |name| (*name).clone());
            assignment.entry(name).or_default().extend(t.partitions.iter().copied());
        }
        assignment
    });
    let heartbeat = Heartbeat {
        member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|i| i.as_str().to_string()),
        rack_id: request.rack_id.as_ref().map(|r| r.as_str().to_string()),
        rebalance_timeout: (request.rebalance_timeout_ms >= 0)
            .then(|| Duration::from_millis(request.rebalance_timeout_ms as u64)),
        subscribed_topics: subscribed,
        subscribed_regex: requested_regex.map(str::to_string),
        assignor: request
            .server_assignor
            .as_ref()
            .and_then(|a| Assignor::parse(a.as_str())),
        owned,
        client_id: client_id.to_string(),
        client_host: peer.to_string(),
        owner,
        pattern_scope,
        resolutions: BTreeMap::new(),
    };
    match heartbeat_authorized(gateway, &mut permissions, &group_id, heartbeat, lookups).await {
        Err(Refusal::Authorization(code)) => refused(code, "Not authorized for the group's topics."),
        Err(Refusal::Group(e)) => refused(error_map::consumer_group_code(&e), group_refusal(gateway, &e)),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(gateway.groups.consumer_heartbeat_interval().as_millis() as i32)
            .with_assignment(answer.assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic, partitions)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id(&topic))
                                .with_partitions(partitions.into_iter().collect())
                        })
                        .collect(),
                )
            })),
    }
}

/// GROUP-CONSUMER-SUBSCRIPTION-1: the message of a refusal by the group; a limit's names the
/// bound and its rule, so that a member refused past one is told which, and how much it allows.
fn group_refusal<B>(gateway: &Gateway<B>, e: &ConsumerGroupError) -> String {
    let limits = &gateway.config.group_limits;
    match e {
        ConsumerGroupError::FencedMemberEpoch(m) => m.clone(),
        ConsumerGroupError::UnknownMemberId => "The member id is not a member of the group.".to_string(),
        // Kafka's words for GROUP_MAX_SIZE_REACHED.
        ConsumerGroupError::GroupMaxSizeReached => format!(
            "The consumer group has reached its maximum capacity of {} members (GROUP-LIMIT-1).",
            limits.max_members_per_group
        ),
        ConsumerGroupError::CoordinatorNotAvailable(rule) => {
            let bound = match *rule {
                "LIMIT-GROUP-MEMBERS-1" => format!("{} members in all", limits.max_members_total),
                "GROUP-LIMIT-1" => format!("{} groups", limits.max_groups),
                "LIMIT-GROUP-OWNER-1" => format!(
                    "{} groups created and {} members per principal",
                    limits.max_groups_per_owner, limits.max_members_per_owner
                ),
                "LIMIT-GROUP-BYTES-1" => format!("{} bytes of group state", limits.max_stored_bytes),
                _ => "its group limits".to_string(),
            };
            format!("This gateway holds as much as it may ({bound}, {rule}); retry later.")
        }
        other => format!("{other:?}"),
    }
}

/// Why a heartbeat is refused after its shape was checked.
enum Refusal {
    /// The Kafka code of an authorization refusal (AUTHZ-GROUP-4).
    Authorization(i16),
    Group(ConsumerGroupError),
}

/// GROUP-CONSUMER-SUBSCRIPTION-1, AUTHZ-GROUP-1, AUTHZ-GROUP-4: a joiner needs poll on its topics
/// and the group's, a member changing its subscription on its new topics. What was authorized
/// goes with the heartbeat, and the coordinator sends it back, under its lock, when the group or
/// the member's patterns gained a topic meanwhile, as JoinGroup's `join_authorized` does.
async fn heartbeat_authorized<B: Backend>(
    gateway: &Gateway<B>,
    permissions: &mut PollPermissions<'_, B>,
    group_id: &str,
    mut heartbeat: Heartbeat,
    lookups: ConsumerLookups,
) -> Result<HeartbeatAnswer, Refusal> {
    if !permissions.checks() {
        return match gateway
            .groups
            .consumer_heartbeat_authorized(group_id, heartbeat, lookups, None)
        {
            ConsumerAttempt::Done(answer) => answer.map_err(Refusal::Group),
            ConsumerAttempt::Recheck { .. } => unreachable!("nothing to recheck without an authorized set"),
        };
    }
    let mut needed: BTreeSet<String> = heartbeat.subscribed_topics.iter().flatten().cloned().collect();
    if heartbeat.member_epoch == 0 {
        needed.extend(gateway.groups.topics(group_id).unwrap_or_default());
    }
    let pattern = heartbeat.subscribed_regex.as_deref().filter(|r| !r.is_empty());
    needed.extend(
        pattern
            .and_then(|p| lookups.resolutions.get(p))
            .into_iter()
            .flatten()
            .cloned(),
    );
    let mut lookups = Some(lookups);
    for _ in 0..AUTHORIZATION_ROUNDS {
        let topics: Vec<&str> = needed.iter().map(String::as_str).collect();
        if let Some(code) = permissions.verdict(group_id, &topics).await.refusal_code() {
            return Err(Refusal::Authorization(code));
        }
        let this_round = lookups.take().expect("one set of lookups per round");
        let kept = ConsumerLookups {
            topics: this_round.topics.clone(),
            resolutions: this_round.resolutions.clone(),
        };
        match gateway
            .groups
            .consumer_heartbeat_authorized(group_id, heartbeat, this_round, Some(&needed))
        {
            ConsumerAttempt::Done(answer) => return answer.map_err(Refusal::Group),
            ConsumerAttempt::Recheck {
                heartbeat: back,
                topics,
            } => {
                heartbeat = *back;
                needed.extend(topics);
                lookups = Some(kept);
            }
        }
    }
    tracing::warn!(
        "ConsumerGroupHeartbeat for {}: the group gained topics during {AUTHORIZATION_ROUNDS} rounds of authorization; asking the member to retry (AUTHZ-GROUP-4)",
        clip(group_id)
    );
    Err(Refusal::Authorization(ResponseError::CoordinatorNotAvailable.code()))
}

/// GROUP-CONSUMER-LOOKUPS-1: past this many names new to the group, a heartbeat lists the topics
/// once instead of looking each up: a joiner naming thousands of topics costs one listing per
/// stream, not thousands of backend calls.
const LOOKUPS_BEFORE_LISTING: usize = 32;

/// Every Kafka topic `session` may list, with its partition count, listed once per stream; `None`
/// (logged) when a listing failed, the group then keeping what it knew.
async fn list_kafka_topics<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    group_id: &str,
) -> Option<BTreeMap<String, u32>> {
    let config = &gateway.config;
    let mut listed: BTreeMap<String, u32> = BTreeMap::new();
    for stream in config.topics.streams() {
        match session.backend.list_topics(&stream).await {
            Ok(infos) => {
                for info in infos {
                    let target = crate::config::IggyTarget {
                        stream: stream.clone(),
                        topic: info.name,
                    };
                    if let Some(kafka) = config.topics.reverse(&target) {
                        listed.insert(kafka, info.partitions);
                    }
                }
            }
            Err(e) => {
                tracing::info!(
                    "consumer group {}: listing the topics of stream {}: {e}; the group keeps what it knew (GROUP-CONSUMER-LOOKUPS-1)",
                    clip(group_id),
                    clip(&stream)
                );
                return None;
            }
        }
    }
    Some(listed)
}

/// Each of `names` as `listed` has it: its partition count, or `None` when not listed.
fn mark_listed(lookups: &mut ConsumerLookups, names: &[String], listed: &BTreeMap<String, u32>) {
    for name in names {
        lookups.topics.insert(name.clone(), listed.get(name).copied());
    }
}

/// Each of `names` looked up at the backend; a lookup that fails leaves the name out, the group
/// keeping what it knew of it.
async fn look_up_one_by_one<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    lookups: &mut ConsumerLookups,
    names: &[String],
) {
    for name in names {
        match super::resolve_topic(gateway, session, name).await {
            Ok((_, info)) => {
                lookups.topics.insert(name.clone(), Some(info.partitions));
            }
            Err(code) if code == ResponseError::UnknownTopicOrPartition.code() => {
                lookups.topics.insert(name.clone(), None);
            }
            Err(_) => {}
        }
    }
}

/// GROUP-CONSUMER-REGEX-1: resolves `patterns` against the Kafka topics the session may list,
/// listed once for all of them (Iggy's GetTopics decides what the session sees, as Kafka filters
/// matches by DESCRIBE), keeping only the topics the session may poll when SASL is on. The
/// partition counts listed go with the matches, so the topics matched are not looked up again.
/// GROUP-CONSUMER-REGEX-COST-1: the patterns are compiled and matched on the decode pool; one the
/// lazy DFA gives up on keeps its last resolution, unless it is `new_pattern`, the one the
/// heartbeat brings its member, which is then refused.
async fn resolve_patterns<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    permissions: &mut PollPermissions<'_, B>,
    group_id: &str,
    patterns: Vec<String>,
    new_pattern: Option<&str>,
    lookups: &mut ConsumerLookups,
) -> Result<(), topic_regex::RegexRefusal> {
    // Resolved again at the next refresh when the listing fails; the last resolution stands.
    let Some(listed) = list_kafka_topics(gateway, session, group_id).await else {
        return Ok(());
    };
    let names: Vec<String> = listed.keys().cloned().collect();
    let outcomes = gateway
        .decode_pool
        .run(move || topic_regex::resolve(&patterns, &names))
        .await;
    for (pattern, outcome) in outcomes {
        let mut matched = match outcome {
            Ok(matched) => matched,
            Err(refusal) if new_pattern == Some(pattern.as_str()) => return Err(refusal),
            Err(refusal) => {
                tracing::info!(
                    "consumer group {}: pattern {} keeps its last resolution: {} (GROUP-CONSUMER-REGEX-COST-1)",
                    clip(group_id),
                    clip(&pattern),
                    refusal.message()
                );
                continue;
            }
        };
        if permissions.checks() {
            let mut allowed = BTreeSet::new();
            for topic in matched {
                if permissions.verdict(group_id, &[topic.as_str()]).await == Verdict::Allowed {
                    allowed.insert(topic);
                }
            }
            matched = allowed;
        }
        for topic in &matched {
            lookups.topics.insert(topic.clone(), listed.get(topic).copied());
        }
        lookups.resolutions.insert(pattern, matched);
    }
    Ok(())
}

fn gateway_rng<B>(gateway: &Gateway<B>) -> u64 {
    gateway.rng.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{GroupId, TopicName};
    use member_strings::MAX_ID_BYTES;

    fn join() -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
            .with_topic_partitions(Some(Vec::new()))
    }

    #[test]
    fn group_consumer_heartbeat_1_request_shapes_are_checked_as_kafka_checks_them() {
        assert_eq!(shape_error(&join(), 1), None);
        let invalid = ResponseError::InvalidRequest.code();
        let code = |r: ConsumerGroupHeartbeatRequest, v| shape_error(&r, v).map(|(c, _)| c);
        assert_eq!(code(join().with_member_id(StrBytes::default()), 1), Some(invalid));
        assert_eq!(code(join().with_member_id(StrBytes::default()), 0), None);
        assert_eq!(code(join().with_rebalance_timeout_ms(-1), 1), Some(invalid));
        assert_eq!(code(join().with_topic_partitions(None), 1), Some(invalid));
        assert_eq!(code(join().with_subscribed_topic_names(None), 1), Some(invalid));
        assert_eq!(
            code(join().with_member_epoch(-2), 1),
            Some(invalid),
            "-2 needs an instance id"
        );
        assert_eq!(code(join().with_member_epoch(-3), 1), Some(invalid));
        assert_eq!(
            code(
                join().with_server_assignor(Some(StrBytes::from_static_str("sticky"))),
                1
            ),
            Some(ResponseError::UnsupportedAssignor.code())
        );
        assert_eq!(
            code(join().with_server_assignor(Some(StrBytes::from_static_str("range"))), 1),
            None
        );
    }

    #[test]
    fn limit_group_member_id_1_ids_past_249_bytes_are_invalid_request() {
        let long = StrBytes::from_string("x".repeat(MAX_ID_BYTES + 1));
        let at_bound = StrBytes::from_string("x".repeat(MAX_ID_BYTES));
        let invalid = ResponseError::InvalidRequest.code();
        let cases = [
            ("MemberId", join().with_member_id(long.clone())),
            ("InstanceId", join().with_instance_id(Some(long.clone()))),
            ("RackId", join().with_rack_id(Some(long.clone()))),
        ];
        for (field, request) in cases {
            let (code, message) = shape_error(&request, 1).unwrap_or_else(|| panic!("{field} accepted"));
            assert_eq!(code, invalid, "{field}");
            assert!(message.contains(field) && message.contains("249"), "{message}");
        }
        let within = join()
            .with_member_id(at_bound.clone())
            .with_instance_id(Some(at_bound.clone()))
            .with_rack_id(Some(at_bound));
        assert_eq!(shape_error(&within, 1), None);
    }

    #[test]
    fn limit_group_member_bytes_1_a_heartbeat_bringing_more_than_a_member_may_hold_is_refused() {
        let names = |count: usize, len: usize| -> Vec<TopicName> {
            (0..count)
                .map(|i| TopicName(StrBytes::from_string(format!("{i:0len$}"))))
                .collect()
        };
        let limit = 10_000;
        // 9 names of 1,000 bytes, an id, a client id: within.
        let fits = join().with_subscribed_topic_names(Some(names(9, 1_000)));
        assert_eq!(member_size_error(&fits, "client", limit), None);
        // The same with a long client id, or one more name: past it.
        let (code, message) = member_size_error(&fits, &"c".repeat(1_000), limit).expect("refused");
        assert_eq!(code, ResponseError::InvalidRequest.code());
        assert!(message.contains("10000"), "{message}");
        let more = join().with_subscribed_topic_names(Some(names(10, 1_000)));
        assert!(member_size_error(&more, "client", limit).is_some());
        let pattern = join()
            .with_subscribed_topic_names(Some(names(9, 1_000)))
            .with_subscribed_topic_regex(Some(StrBytes::from_string("p".repeat(1_000))));
        assert!(member_size_error(&pattern, "", limit).is_some(), "the pattern counts");
    }

    #[test]
    fn group_consumer_regex_1_patterns_are_accepted_within_bounds_and_refused_past_them() {
        let with = |pattern: &str| {
            join()
                .with_subscribed_topic_names(None)
                .with_subscribed_topic_regex(Some(StrBytes::from_string(pattern.to_string())))
        };
        assert_eq!(shape_error(&with("orders-.*"), 1), None);
        // librdkafka sends an empty pattern when it subscribes by name only.
        assert_eq!(
            shape_error(&join().with_subscribed_topic_regex(Some(StrBytes::default())), 1),
            None
        );
        // Compiled later, and only when its member did not hold it (GROUP-CONSUMER-REGEX-COST-1).
        assert_eq!(shape_error(&with("orders-("), 1), None);
        let invalid_regex = ResponseError::InvalidRegularExpression.code();
        let (code, message) = shape_error(&with(&"a".repeat(topic_regex::MAX_PATTERN_BYTES + 1)), 1).expect("refused");
        assert_eq!(code, invalid_regex);
        assert!(message.contains("1024"), "{message}");
    }
}
