//! KIP-848 consumer-protocol members no client can abuse (issue 50): what a member brings is
//! bounded and counted, what a non-member sends changes nothing, a pattern's cost is bounded, the
//! answers built from members stay within `max_response_bytes`, and OffsetDelete spares what a
//! consumer-protocol group reads. Each test goes through `Gateway::handle_frame` on the embedded
//! backend, and each failed before its rule existed.

use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_protocol::messages::*;
use std::sync::Arc;

mod bounds_support;
use bounds_support::*;

// Kafka error codes.
const UNKNOWN_SERVER_ERROR: i16 = -1;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const GROUP_MAX_SIZE_REACHED: i16 = 81;

const HEARTBEAT_V: i16 = 1;
const DESCRIBE_V: i16 = 0;

/// A joining heartbeat (epoch 0) of `member` in `group`, subscribing to `topics`.
fn join(group: &str, member: &str, topics: Vec<String>) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.into_iter().map(|t| TopicName(s(&t))).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

async fn heartbeat(
    gateway: &EmbeddedGateway,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    ask(gateway, ApiKey::ConsumerGroupHeartbeat, HEARTBEAT_V, request)
        .await
        .1
}

/// `count` topic names of `len` bytes each, none of which exists.
fn names(prefix: &str, count: usize, len: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("{prefix}{i:0>w$}", w = len - prefix.len()))
        .collect()
}

async fn describe(gateway: &EmbeddedGateway, groups: &[&str]) -> (usize, ConsumerGroupDescribeResponse) {
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(groups.iter().map(|g| GroupId(s(g))).collect());
    ask(gateway, ApiKey::ConsumerGroupDescribe, DESCRIBE_V, &request).await
}

/// How many times this process counted LIMIT-GROUP-MEMBER-ID-1 in its metrics.
fn member_id_limit_hits() -> u64 {
    let text = kafka_iggy_gateway::metrics::metrics().encode();
    text.lines()
        .find(|line| line.contains("limits_hit_total") && line.contains("LIMIT-GROUP-MEMBER-ID-1"))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn limit_group_member_id_1_a_heartbeat_with_4_mb_ids_is_refused_and_keeps_nothing() {
    let gateway = gateway();
    // The probe: a v0 join with a ~3.9 MB instance id and rack id.
    let huge = s(&"i".repeat(3_900_000));
    let request = join("g", "", vec!["t".into()])
        .with_instance_id(Some(huge.clone()))
        .with_rack_id(Some(huge));
    let counted = member_id_limit_hits();
    let (frame_bytes, refused): (_, ConsumerGroupHeartbeatResponse) =
        ask(&gateway, ApiKey::ConsumerGroupHeartbeat, 0, &request).await;
    assert_eq!(refused.error_code, INVALID_REQUEST);
    // Logged and counted with the rule, as JoinGroup's instance id is (no other test of this
    // binary meets this limit, so the count moves by this refusal only).
    assert_eq!(member_id_limit_hits(), counted + 1);
    assert!(refused
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("MemberId") || m.contains("InstanceId")));
    assert!(
        frame_bytes < 1_024,
        "the refusal quotes nothing of the id: {frame_bytes} bytes"
    );
    let (_, described) = describe(&gateway, &["g"]).await;
    assert_eq!(described.groups[0].error_code, GROUP_ID_NOT_FOUND, "no member was kept");
    assert_eq!(gateway.groups.usage(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn limit_group_owner_1_group_limit_1_members_past_a_bound_are_told_which() {
    // Two members per group, three per principal (one client address here).
    let file = FileConfig {
        group_max_members: Some(2),
        limits: LimitSettings {
            group_max_members_per_principal: Some(3),
            ..LimitSettings::default()
        },
        ..FileConfig::default()
    };
    let config = Config::resolve(Args::default(), file).expect("valid config");
    let gateway = kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 50);
    for member in ["a", "b"] {
        assert_eq!(
            heartbeat(&gateway, &join("g", member, vec!["t".into()]))
                .await
                .error_code,
            0
        );
    }
    let third = heartbeat(&gateway, &join("g", "c", vec!["t".into()])).await;
    assert_eq!(third.error_code, GROUP_MAX_SIZE_REACHED);
    let message = third.error_message.as_deref().unwrap_or_default();
    assert!(message.contains("2 members"), "{message}");
    assert_eq!(
        heartbeat(&gateway, &join("h", "c", vec!["t".into()])).await.error_code,
        0
    );
    let fourth = heartbeat(&gateway, &join("h", "d", vec!["t".into()])).await;
    assert_eq!(fourth.error_code, COORDINATOR_NOT_AVAILABLE);
    let message = fourth.error_message.as_deref().unwrap_or_default();
    assert!(
        message.contains("3 members per principal") && message.contains("LIMIT-GROUP-OWNER-1"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn limit_group_answer_bytes_1_consumergroupdescribe_past_the_budget_answers_an_error_and_no_members() {
    // Room for one group of one member subscribing to 60 KB of names, not two.
    let gateway = gateway_answering_at_most(100 * 1024);
    for group in ["first", "second"] {
        let joined = heartbeat(&gateway, &join(group, "m", names("t", 60, 1_000))).await;
        assert_eq!(joined.error_code, 0, "{group}: {:?}", joined.error_message);
    }
    let (frame_bytes, described) = describe(&gateway, &["first", "second"]).await;
    assert_eq!(described.groups.len(), 2);
    assert_eq!(
        (described.groups[0].error_code, described.groups[0].members.len()),
        (0, 1)
    );
    // The second fits an answer of its own: an error clients retry alone.
    assert_eq!(described.groups[1].error_code, COORDINATOR_LOAD_IN_PROGRESS);
    assert!(described.groups[1].members.is_empty());
    assert!(frame_bytes <= 100 * 1024, "{frame_bytes} bytes");
    let (_, alone) = describe(&gateway, &["second"]).await;
    assert_eq!((alone.groups[0].error_code, alone.groups[0].members.len()), (0, 1));
    // A group that never fits is an error no retry clears.
    for member in ["a", "b"] {
        let joined = heartbeat(&gateway, &join("too-large", member, names("u", 60, 1_000))).await;
        assert_eq!(joined.error_code, 0);
    }
    let (_, refused) = describe(&gateway, &["too-large"]).await;
    assert_eq!(refused.groups[0].error_code, UNKNOWN_SERVER_ERROR);
    assert!(refused.groups[0].members.is_empty());
}

#[tokio::test(start_paused = true)]
async fn limit_group_answer_bytes_1_listgroups_past_the_budget_answers_a_top_level_error() {
    let gateway = gateway_answering_at_most(64 * 1024);
    // 400 groups with 240-byte ids: about 100 KB of listing.
    for i in 0..400 {
        let group = format!("{i:0>240}");
        let joined = heartbeat(&gateway, &join(&group, "m", vec!["t".into()])).await;
        assert_eq!(joined.error_code, 0);
    }
    let (frame_bytes, listed): (_, ListGroupsResponse) =
        ask(&gateway, ApiKey::ListGroups, 5, &ListGroupsRequest::default()).await;
    assert_eq!(listed.error_code, UNKNOWN_SERVER_ERROR);
    assert!(listed.groups.is_empty());
    assert!(frame_bytes < 1_024, "{frame_bytes} bytes");
    // Within the budget, the listing is whole.
    let roomy = gateway_answering_at_most(1024 * 1024);
    for i in 0..3 {
        heartbeat(&roomy, &join(&format!("g{i}"), "m", vec!["t".into()])).await;
    }
    let (_, listed): (_, ListGroupsResponse) = ask(&roomy, ApiKey::ListGroups, 5, &ListGroupsRequest::default()).await;
    assert_eq!((listed.error_code, listed.groups.len()), (0, 3));
}

const UNKNOWN_MEMBER_ID: i16 = 25;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
const INVALID_REGULAR_EXPRESSION: i16 = 128;

async fn create_topics(gateway: &EmbeddedGateway, names: &[String], partitions: i32) {
    let request = CreateTopicsRequest::default().with_topics(
        names
            .iter()
            .map(|name| {
                create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)
            })
            .collect(),
    );
    let (_, response): (_, CreateTopicsResponse) = ask(gateway, ApiKey::CreateTopics, 4, &request).await;
    for topic in response.topics {
        assert_eq!(topic.error_code, 0, "creating {}", topic.name.0.as_str());
    }
}

fn by_pattern(group: &str, member: &str, pattern: &str) -> ConsumerGroupHeartbeatRequest {
    join(group, member, Vec::new()).with_subscribed_topic_regex(Some(s(pattern)))
}

#[tokio::test(start_paused = true)]
async fn group_consumer_nonmember_1_a_non_members_patterns_are_neither_resolved_nor_kept() {
    let gateway = gateway();
    create_topics(&gateway, &["t1".to_string(), "u1".to_string()], 1).await;
    let joined = heartbeat(&gateway, &by_pattern("g", "member", "t.*")).await;
    assert_eq!(joined.error_code, 0);
    let held = gateway.groups.usage();
    let topics = gateway.groups.topics("g");
    assert_eq!(topics.as_deref(), Some(&["t1".to_string()][..]));
    // Someone who is no member heartbeats with patterns of its own, again and again.
    for i in 0..50 {
        let stranger = by_pattern("g", &format!("stranger-{i}"), &format!("u{i}|u.*")).with_member_epoch(1);
        let answer = heartbeat(&gateway, &stranger).await;
        assert_eq!(answer.error_code, UNKNOWN_MEMBER_ID);
    }
    assert_eq!(gateway.groups.usage(), held, "nothing of theirs is kept");
    assert_eq!(
        gateway.groups.topics("g"),
        topics,
        "the member's subscription is as it was"
    );
}

/// Topic names of 200 letters `a` and `b`, pseudo-random: against them a pattern like `.*a.{20}`
/// needs a DFA state per distinct 21-letter window.
fn binary_names(count: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..count)
        .map(|_| {
            (0..200)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state & 1 == 0 {
                        'a'
                    } else {
                        'b'
                    }
                })
                .collect()
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn group_consumer_regex_cost_1_a_pattern_too_costly_to_match_is_refused_and_an_ordinary_one_is_served() {
    let gateway = gateway();
    create_topics(&gateway, &binary_names(64), 1).await;
    create_topics(&gateway, &["orders-eu".to_string()], 1).await;
    let invalid = heartbeat(&gateway, &by_pattern("g", "m", "orders-(")).await;
    assert_eq!(invalid.error_code, INVALID_REGULAR_EXPRESSION);
    assert!(invalid
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("not a valid regular expression")));
    let costly = heartbeat(&gateway, &by_pattern("g", "m", ".*a.{20}")).await;
    assert_eq!(
        costly.error_code, INVALID_REGULAR_EXPRESSION,
        "{:?}",
        costly.error_message
    );
    assert!(
        costly.error_message.as_deref().is_some_and(|m| m.contains("costly")),
        "{:?}",
        costly.error_message
    );
    assert_eq!(gateway.groups.usage(), (0, 0), "the refused member was not kept");
    let ordinary = heartbeat(&gateway, &by_pattern("g", "m", "orders-.*")).await;
    assert_eq!(ordinary.error_code, 0);
    assert_eq!(
        gateway.groups.topics("g").as_deref(),
        Some(&["orders-eu".to_string()][..])
    );
}

#[tokio::test(start_paused = true)]
async fn group_consumer_offsetdelete_1_a_topic_a_consumer_protocol_group_reads_is_kept() {
    let gateway = gateway();
    create_topics(
        &gateway,
        &["read".to_string(), "unread".to_string(), "matched".to_string()],
        1,
    )
    .await;
    let joined = heartbeat(
        &gateway,
        &join("g", "m", vec!["read".into()]).with_subscribed_topic_regex(Some(s("match.*"))),
    )
    .await;
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1));
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s("m"))
        .with_generation_id_or_member_epoch(1)
        .with_topics(
            ["read", "unread", "matched"]
                .iter()
                .map(|t| {
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(vec![offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(0)])
                })
                .collect(),
        );
    let (_, committed): (_, OffsetCommitResponse) = ask(&gateway, ApiKey::OffsetCommit, 9, &commit).await;
    for topic in &committed.topics {
        assert_eq!(topic.partitions[0].error_code, 0, "commit to {}", topic.name.0.as_str());
    }
    let delete = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(
            ["read", "unread", "matched"]
                .iter()
                .map(|t| {
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])
                })
                .collect(),
        );
    let (_, deleted): (_, OffsetDeleteResponse) = ask(&gateway, ApiKey::OffsetDelete, 0, &delete).await;
    assert_eq!(deleted.error_code, 0);
    let codes: Vec<(&str, i16)> = deleted
        .topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.partitions[0].error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("read", GROUP_SUBSCRIBED_TO_TOPIC),
            ("unread", 0),
            ("matched", GROUP_SUBSCRIBED_TO_TOPIC)
        ],
        "a topic the group reads, by name or by pattern, keeps its offsets"
    );
}
