//! Hostile KIP-848 consumer-protocol clients (issue 50): ConsumerGroupHeartbeats carrying
//! megabyte ids, a group of the largest members described, strangers heartbeating patterns into
//! a group they are not in, patterns whose automata cannot be matched cheaply against many
//! topics, and OffsetDelete under a consumer-protocol group's feet. Each runs under the
//! [`Watchdog`]; the bench (benches/hostile.rs) records the good client's ApiVersions round trips
//! and the gateway's RSS while each runs. The cases skip an endpoint that does not serve the
//! consumer protocol.

use super::*;
use crate::cases::require_apis;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};

const HEARTBEAT_V: i16 = 1;
const DESCRIBE_V: i16 = 0;
const OFFSET_COMMIT_V9: i16 = 9;
const OFFSET_FETCH_V: i16 = 5;

/// The megabyte ids of the issue's probe: 80 heartbeats, each with an instance id and a rack id
/// of this size (or as large as the endpoint's frame takes, when smaller).
const HUGE_ID_BYTES: usize = 3_900_000;
const HUGE_ID_HEARTBEATS: usize = 80;
/// The longest `group.instance.id` a Kafka client sends (`JoinGroupRequest.validateGroupInstanceId`).
const KAFKA_ID_BYTES: usize = 249;
/// Members of the group described: the gateway's default members per group.
const LARGE_GROUP_MEMBERS: usize = 1_000;
/// Heartbeats from strangers, each naming a pattern of its own.
const STRANGER_HEARTBEATS: usize = 2_000;
/// Topics of random `a`/`b` names, and joiners whose patterns need a DFA state per window of them.
const BINARY_TOPICS: usize = 100;
const COSTLY_JOINERS_PER_CONNECTION: usize = 10;
const COSTLY_CONNECTIONS: usize = 4;

// Kafka error codes.
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

async fn require_kip848(endpoint: &Endpoint) -> anyhow::Result<Option<Outcome>> {
    require_apis(
        endpoint,
        &[ApiKey::ConsumerGroupHeartbeat, ApiKey::ConsumerGroupDescribe],
    )
    .await
}

/// A heartbeat that joins `group` (epoch 0) as `member`.
fn joining(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_member_id(string(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
        .with_subscribed_topic_names(Some(Vec::new()))
        .with_topic_partitions(Some(Vec::new()))
}

/// A heartbeat that leaves `group` (epoch -1) as `member`.
fn leaving(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_member_id(string(member))
        .with_member_epoch(-1)
        .with_rebalance_timeout_ms(-1)
}

async fn heartbeat(
    client: &mut Client,
    what: &str,
    request: &ConsumerGroupHeartbeatRequest,
) -> anyhow::Result<ConsumerGroupHeartbeatResponse> {
    bounded(
        what,
        client.request(ApiKey::ConsumerGroupHeartbeat, HEARTBEAT_V, request),
    )
    .await
}

async fn leave_all(client: &mut Client, group: &str, members: &[String]) -> anyhow::Result<()> {
    for member in members {
        // An error (already gone) is fine: the member is no longer held either way.
        heartbeat(
            client,
            &format!("the leave of {group}'s member"),
            &leaving(group, member),
        )
        .await?;
    }
    Ok(())
}

async fn describe(client: &mut Client, group: &str) -> anyhow::Result<ConsumerGroupDescribeResponse> {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(string(group))]);
    bounded(
        &format!("ConsumerGroupDescribe of {group}"),
        client.request(ApiKey::ConsumerGroupDescribe, DESCRIBE_V, &request),
    )
    .await
}

/// `name` as a pattern that matches it alone (topic names hold letters, digits, `-`, `_`, `.`).
fn literal(name: &str) -> String {
    name.replace('.', r"\.")
}

/// Row 1 of issue 50: 80 ConsumerGroupHeartbeat v0 on one connection, each with a 3.9 MB
/// instance id and rack id (or as large as the frame takes); each must be refused (an error, or
/// the connection closed), as Kafka refuses a member whose record does not fit its offsets topic.
/// Then a group of 1,000 members, each with the longest ids a Kafka client sends (249 bytes) and a
/// 32,767-byte client id, is described: the answer must come, well-formed, with every member or
/// with an error and none. Every member leaves at the end.
pub async fn hostile_consumer_heartbeats_with_megabyte_ids_and_a_group_of_the_largest_members(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-hostile-huge-ids");
            let id_bytes = HUGE_ID_BYTES.min(max_frame_size.saturating_sub(4_096) / 2);
            let huge = string(&"i".repeat(id_bytes));
            let request = joining(&group, "")
                .with_instance_id(Some(huge.clone()))
                .with_rack_id(Some(huge));
            let frame = request_frame(ApiKey::ConsumerGroupHeartbeat, 0, 1, "kig-hostile", &request)?;
            let what = format!(
                "a ConsumerGroupHeartbeat v0 of {} bytes with a {id_bytes}-byte instance id and rack id",
                frame.len()
            );
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            let mut joined = Vec::new();
            for _ in 0..HUGE_ID_HEARTBEATS {
                match send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                    Answer::Frame(answer) => {
                        let answer: ConsumerGroupHeartbeatResponse =
                            decoded(ApiKey::ConsumerGroupHeartbeat, 0, 1, answer, &what)?;
                        if answer.error_code == NONE {
                            joined.extend(answer.member_id.map(|m| m.to_string()));
                        }
                    }
                    Answer::Closed => client = coordinator_of(&endpoint.bootstrap, &group).await?,
                }
            }
            leave_all(&mut client, &group, &joined).await?;
            ensure!(
                joined.is_empty(),
                "{} of {HUGE_ID_HEARTBEATS} members with {id_bytes}-byte ids joined: nothing bounds what one member keeps",
                joined.len()
            );

            // The largest members a Kafka client makes, as many as the group takes.
            let group = endpoint.unique_topic("kig-hostile-large-group");
            let client_id = "c".repeat(KAFKA_STRING_MAX);
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            let mut members = Vec::new();
            for i in 0..LARGE_GROUP_MEMBERS {
                let id = |tag: &str| format!("{tag}{i}-{}", "x".repeat(KAFKA_ID_BYTES - tag.len() - 6));
                let member = id("member");
                let request = joining(&group, &member)
                    .with_instance_id(Some(string(&id("instance"))))
                    .with_rack_id(Some(string(&id("rack"))));
                let frame = request_frame(ApiKey::ConsumerGroupHeartbeat, HEARTBEAT_V, 2, &client_id, &request)?;
                let what = format!("the join of member {i} of {group}");
                match send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                    Answer::Frame(answer) => {
                        let answer: ConsumerGroupHeartbeatResponse =
                            decoded(ApiKey::ConsumerGroupHeartbeat, HEARTBEAT_V, 2, answer, &what)?;
                        // A group past its size is refused: what the endpoint keeps is bounded.
                        if answer.error_code == NONE {
                            members.push(member);
                        }
                    }
                    Answer::Closed => client = coordinator_of(&endpoint.bootstrap, &group).await?,
                }
            }
            let described = describe(&mut client, &group).await?;
            let entry = described
                .groups
                .first()
                .context("ConsumerGroupDescribe answered no group")?;
            if entry.error_code == NONE {
                ensure!(
                    entry.members.len() == members.len(),
                    "ConsumerGroupDescribe listed {} members of the {} that joined",
                    entry.members.len(),
                    members.len()
                );
            } else {
                ensure!(
                    entry.members.is_empty(),
                    "ConsumerGroupDescribe answered error {} with {} members",
                    entry.error_code,
                    entry.members.len()
                );
            }
            leave_all(&mut client, &group, &members).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Row 2 of issue 50: a member subscribes to a topic by pattern; then 2,000 heartbeats under
/// member ids the group never gave, each with an epoch and a pattern of its own. Each must be
/// refused, and the group must be as it was: its epoch, the member's epoch and assignment.
pub async fn hostile_consumer_heartbeats_from_strangers_naming_patterns(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut admin = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut admin, "kig-hostile-strangers", 1).await?;
            let group = endpoint.unique_topic("kig-hostile-strangers-g");
            let member = format!("{group}-member");
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            let join = joining(&group, &member).with_subscribed_topic_regex(Some(string(&literal(&topic))));
            let joined = heartbeat(&mut client, "the member's join", &join).await?;
            ensure!(
                joined.error_code == NONE,
                "the member's join: error {}",
                joined.error_code
            );
            let assigned = joined
                .assignment
                .as_ref()
                .map(|a| a.topic_partitions.clone())
                .unwrap_or_default();
            ensure!(!assigned.is_empty(), "the member was assigned nothing of {topic}");
            let before = describe(&mut client, &group).await?;
            let group_epoch = before.groups.first().map(|g| g.group_epoch);
            for i in 0..STRANGER_HEARTBEATS {
                let stranger = ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(string(&group)))
                    .with_member_id(string(&format!("stranger-{i}")))
                    .with_member_epoch(1 + i as i32 % 5)
                    .with_rebalance_timeout_ms(-1)
                    .with_subscribed_topic_regex(Some(string(&format!("{}|stranger-{i}-.*", literal(&topic)))));
                let answer = heartbeat(&mut client, &format!("stranger {i}'s heartbeat"), &stranger).await?;
                ensure!(
                    answer.error_code != NONE,
                    "stranger {i}, whose member id the group never gave, was answered as a member"
                );
            }
            let after = describe(&mut client, &group).await?;
            ensure!(
                after.groups.first().map(|g| g.group_epoch) == group_epoch,
                "the group epoch moved from {group_epoch:?} to {:?} for heartbeats of no member",
                after.groups.first().map(|g| g.group_epoch)
            );
            let owned: Vec<TopicPartitions> = assigned
                .iter()
                .map(|t| {
                    TopicPartitions::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(t.partitions.clone())
                })
                .collect();
            let beat = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_member_id(string(&member))
                .with_member_epoch(joined.member_epoch)
                .with_rebalance_timeout_ms(-1)
                .with_topic_partitions(Some(owned));
            let still = heartbeat(&mut client, "the member's heartbeat after the strangers", &beat).await?;
            ensure!(
                (still.error_code, still.member_epoch) == (NONE, joined.member_epoch),
                "after the strangers the member was answered error {} at epoch {} (it held epoch {})",
                still.error_code,
                still.member_epoch,
                joined.member_epoch
            );
            leave_all(&mut client, &group, &[member]).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Topic names of `prefix` and 200 pseudo-random letters `a` and `b`.
fn binary_names(prefix: &str, count: usize) -> Vec<String> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
            let tail: String = (0..200)
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
                .collect();
            format!("{prefix}-{tail}")
        })
        .collect()
}

/// Row 3 of issue 50: 100 topics of random `a`/`b` names, and 40 joiners on 4 connections at once,
/// each with a pattern such as `<prefix>-.*a.{20}` that needs a DFA state per 21-letter window of
/// the names. Each must be answered (accepted, or refused as too costly); meanwhile the watchdog
/// is served, and an ordinary pattern's member of another group is assigned what it matches.
pub async fn hostile_consumer_patterns_costly_to_match_against_many_topics(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    let prefix = endpoint.unique_topic("kig-hostile-costly");
    let names = binary_names(&prefix, BINARY_TOPICS);
    let mut admin = connect(&endpoint).await?;
    let outcome = watchdog
        .guard(async {
            let request = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(
                names
                    .iter()
                    .map(|n| {
                        CreatableTopic::default()
                            .with_name(topic_name(n))
                            .with_num_partitions(1)
                            .with_replication_factor(-1)
                    })
                    .collect(),
            );
            let created: CreateTopicsResponse = bounded(
                "CreateTopics of the binary-named topics",
                admin.request(ApiKey::CreateTopics, CREATE_TOPICS_V, &request),
            )
            .await?;
            ensure!(
                created.topics.iter().all(|t| t.error_code == NONE),
                "creating the binary-named topics: {:?}",
                created.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
            );
            let group = endpoint.unique_topic("kig-hostile-costly-g");
            let costly = |n: usize| format!("{}-.*a.{{{}}}", literal(&prefix), 18 + n % 8);
            let mut attackers = Vec::new();
            for c in 0..COSTLY_CONNECTIONS {
                let (bootstrap, group) = (endpoint.bootstrap.clone(), group.clone());
                let patterns: Vec<String> = (0..COSTLY_JOINERS_PER_CONNECTION)
                    .map(|i| costly(c * COSTLY_JOINERS_PER_CONNECTION + i))
                    .collect();
                attackers.push(tokio::spawn(async move {
                    let mut client = coordinator_of(&bootstrap, &group).await?;
                    let mut joined = Vec::new();
                    for (i, pattern) in patterns.iter().enumerate() {
                        let member = format!("{group}-costly-{c}-{i}");
                        let join = joining(&group, &member).with_subscribed_topic_regex(Some(string(pattern)));
                        let answer = heartbeat(&mut client, &format!("the join with {pattern}"), &join).await?;
                        if answer.error_code == NONE {
                            joined.push(member);
                        }
                    }
                    leave_all(&mut client, &group, &joined).await?;
                    anyhow::Ok(joined.len())
                }));
            }
            // A well-behaved member of another group, meanwhile.
            let ordinary = endpoint.unique_topic("kig-hostile-ordinary-g");
            let member = format!("{ordinary}-member");
            let mut client = coordinator_of(&endpoint.bootstrap, &ordinary).await?;
            let join = joining(&ordinary, &member)
                .with_subscribed_topic_regex(Some(string(&format!("{}-a.*", literal(&prefix)))));
            let answer = heartbeat(&mut client, "the ordinary pattern's join", &join).await?;
            ensure!(answer.error_code == NONE, "the ordinary pattern's join: error {}", answer.error_code);
            let expected = names.iter().filter(|n| n[prefix.len() + 1..].starts_with('a')).count();
            let assigned: usize = answer
                .assignment
                .iter()
                .flat_map(|a| &a.topic_partitions)
                .map(|t| t.partitions.len())
                .sum();
            ensure!(
                assigned == expected,
                "the ordinary pattern's member was assigned {assigned} partitions, not the {expected} of the topics it matches"
            );
            leave_all(&mut client, &ordinary, &[member]).await?;
            for attacker in attackers {
                attacker.await.context("a costly joiner's task")??;
            }
            Ok(())
        })
        .await;
    // The topics go whatever happened, so later cases list as few as before.
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect());
    let _: DeleteTopicsResponse = bounded(
        "DeleteTopics of the binary-named topics",
        admin.request(ApiKey::DeleteTopics, 4, &request),
    )
    .await?;
    outcome?;
    Ok(Outcome::Passed)
}

/// Row 5 of issue 50: a consumer-protocol member reads one topic and commits on two; OffsetDelete
/// of both must keep the read topic's offset (GROUP_SUBSCRIBED_TO_TOPIC, as Kafka answers) and
/// delete the other's.
pub async fn hostile_offset_delete_under_a_consumer_protocol_groups_feet(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut admin = connect(&endpoint).await?;
            let read = new_topic(&endpoint, &mut admin, "kig-hostile-delete-read", 1).await?;
            let unread = new_topic(&endpoint, &mut admin, "kig-hostile-delete-unread", 1).await?;
            let group = endpoint.unique_topic("kig-hostile-delete-g");
            let member = format!("{group}-member");
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            let join = joining(&group, &member).with_subscribed_topic_names(Some(vec![topic_name(&read)]));
            let joined = heartbeat(&mut client, "the member's join", &join).await?;
            ensure!(joined.error_code == NONE, "the member's join: error {}", joined.error_code);
            let commit = OffsetCommitRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_generation_id_or_member_epoch(joined.member_epoch)
                .with_member_id(string(&member))
                .with_topics(
                    [&read, &unread]
                        .iter()
                        .map(|t| {
                            OffsetCommitRequestTopic::default()
                                .with_name(topic_name(t))
                                .with_partitions(vec![OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(0)])
                        })
                        .collect(),
                );
            let committed: OffsetCommitResponse = bounded(
                "the member's OffsetCommit v9",
                client.request(ApiKey::OffsetCommit, OFFSET_COMMIT_V9, &commit),
            )
            .await?;
            for t in &committed.topics {
                let code = t.partitions.first().map_or(i16::MIN, |p| p.error_code);
                ensure!(code == NONE, "the member's commit to {}: error {code}", t.name.0.as_str());
            }
            let delete = OffsetDeleteRequest::default().with_group_id(GroupId(string(&group))).with_topics(
                [&read, &unread]
                    .iter()
                    .map(|t| {
                        OffsetDeleteRequestTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)])
                    })
                    .collect(),
            );
            let deleted: OffsetDeleteResponse = bounded(
                "OffsetDelete of both topics",
                client.request(ApiKey::OffsetDelete, 0, &delete),
            )
            .await?;
            let codes: Vec<i16> = deleted
                .topics
                .iter()
                .map(|t| t.partitions.first().map_or(i16::MIN, |p| p.error_code))
                .collect();
            ensure!(
                (deleted.error_code, codes.as_slice()) == (NONE, &[GROUP_SUBSCRIBED_TO_TOPIC, NONE][..]),
                "OffsetDelete of the topic the group reads and of another answered {} and {codes:?}, not 0 and [{GROUP_SUBSCRIBED_TO_TOPIC}, 0]",
                deleted.error_code
            );
            let request = OffsetFetchRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name(&read))
                    .with_partition_indexes(vec![0])]));
            let fetched: OffsetFetchResponse = bounded(
                "OffsetFetch of the read topic",
                client.request(ApiKey::OffsetFetch, OFFSET_FETCH_V, &request),
            )
            .await?;
            let offset = fetched
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| p.committed_offset);
            ensure!(offset == Some(0), "the read topic's committed offset is {offset:?} after OffsetDelete");
            leave_all(&mut client, &group, &[member]).await
        })
        .await?;
    Ok(Outcome::Passed)
}
