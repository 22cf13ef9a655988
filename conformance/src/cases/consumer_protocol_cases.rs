//! KIP-848 consumer group protocol cases (docs/spec/groups.md, GROUP-CONSUMER-*): librdkafka
//! consumers with `group.protocol=consumer`, whose partitions the coordinator assigns itself
//! through ConsumerGroupHeartbeat, and raw ConsumerGroupHeartbeat requests for what a client
//! does not show (epochs, fencing).
//!
//! Consumers are [`GroupConsumer`]s configured for the new protocol: no `session.timeout.ms`,
//! `heartbeat.interval.ms` or `partition.assignment.strategy` (librdkafka refuses them with
//! `group.protocol=consumer`: the coordinator decides), `group.remote.assignor=uniform`,
//! explicit synchronous commits, `enable.partition.eof`. Every wait ends when the state shows
//! up and fails after a bound; nothing sleeps to synchronise.

use super::group_cases::support::*;
use super::{require_apis, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use anyhow::{bail, ensure, Context as _};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            consumer_protocol_two_members_split_a_topic_and_read_everything,
            [
                "GROUP-CONSUMER-HEARTBEAT-1",
                "GROUP-CONSUMER-ASSIGNOR-1",
                "GROUP-CONSUMER-TOPIC-ID-1"
            ]
        ),
        case!(
            consumer_protocol_new_member_resumes_after_the_members_commits,
            ["GROUP-CONSUMER-COMMIT-1", "GROUP-CONSUMER-LEAVE-1"]
        ),
        case!(
            consumer_protocol_member_joining_and_leaving_while_producing_never_shares_a_partition,
            ["GROUP-CONSUMER-REVOKE-1", "GROUP-CONSUMER-LEAVE-1"]
        ),
        case!(
            consumer_protocol_member_is_fenced_after_its_session_lapses,
            ["GROUP-CONSUMER-EPOCH-1", "GROUP-CONSUMER-TIMEOUT-1"]
        ),
        case!(
            consumer_protocol_regex_subscription_is_assigned_the_matching_topics_only,
            ["GROUP-CONSUMER-REGEX-1"]
        ),
        case!(
            consumer_protocol_static_member_restarts_into_its_partitions,
            ["GROUP-CONSUMER-STATIC-1", "GROUP-CONSUMER-LEAVE-1"]
        ),
    ]
}

/// ConsumerGroupHeartbeat v1, what librdkafka 2.12 sends.
const HEARTBEAT_V: i16 = 1;
const DESCRIBE_V: i16 = 0;
const FENCED_MEMBER_EPOCH: i16 = 110;
/// Kafka's default `group.consumer.session.timeout.ms` (45 s), with room for the timer.
const SESSION_BOUND: Duration = Duration::from_secs(90);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn require_kip848(endpoint: &Endpoint) -> anyhow::Result<Option<Outcome>> {
    require_apis(endpoint, &[ApiKey::ConsumerGroupHeartbeat]).await
}

/// As [`require_kip848`], for a case that also reads the group back with ConsumerGroupDescribe
/// (librdkafka's mock cluster serves heartbeats but not that).
async fn require_kip848_and_describe(endpoint: &Endpoint) -> anyhow::Result<Option<Outcome>> {
    require_apis(
        endpoint,
        &[ApiKey::ConsumerGroupHeartbeat, ApiKey::ConsumerGroupDescribe],
    )
    .await
}

/// A librdkafka member of `group` with `group.protocol=consumer`, subscribed to `topic`.
fn member(endpoint: &Endpoint, name: &str, group: &str, topic: &str) -> anyhow::Result<GroupConsumer> {
    GroupConsumer::from_config(name, topic, &member_config(endpoint, group))
}

/// The settings of every librdkafka member of these cases.
fn member_config(endpoint: &Endpoint, group: &str) -> rdkafka::ClientConfig {
    let mut config = base_config(&endpoint.bootstrap);
    config
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("group.remote.assignor", "uniform")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        .set("check.crcs", "true");
    config
}

/// Waits until the two consumers' deliveries, together, satisfy `done`.
async fn wait_both(
    a: &mut GroupConsumer,
    b: &mut GroupConsumer,
    what: &str,
    bound: Duration,
    done: impl Fn(&History, &History) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + bound;
    loop {
        if done(&a.history, &b.history) {
            return Ok(());
        }
        let alive = tokio::select! {
            alive = a.recv_one() => alive,
            alive = b.recv_one() => alive,
            _ = tokio::time::sleep_until(deadline) => {
                bail!("{what} did not happen within {bound:?}; {}; {}", a.report(), b.report())
            }
        };
        ensure!(alive, "a poll thread ended before {what}");
    }
}

fn covers(a: &History, b: &History, partitions: i32, range: std::ops::Range<i64>) -> bool {
    (0..partitions).all(|p| {
        let seen: BTreeSet<i64> = a.distinct(p).union(&b.distinct(p)).copied().collect();
        range.clone().all(|o| seen.contains(&o))
    })
}

/// How long a consumer-protocol rebalance may take: a few heartbeat intervals (Kafka's default
/// is 5 s) for a revocation and an assignment.
const REBALANCE_BOUND: Duration = Duration::from_secs(60);

/// GROUP-CONSUMER-HEARTBEAT-1, GROUP-CONSUMER-ASSIGNOR-1: two members split a 4-partition topic
/// into two disjoint non-empty shares covering it, and together read every record.
pub async fn consumer_protocol_two_members_split_a_topic_and_read_everything(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let topic = endpoint.unique_topic("cp-split");
    let group = endpoint.unique_topic("cp-split-g");
    create_topic(&endpoint, &topic, 4).await?;
    for p in 0..4 {
        produce_at(&endpoint, &topic, p, 0, 20).await?;
    }
    let all: BTreeSet<i32> = (0..4).collect();
    let mut a = member(&endpoint, "consumer A", &group, &topic)?;
    let mut b = member(&endpoint, "consumer B", &group, &topic)?;
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = Instant::now() + REBALANCE_BOUND;
    loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        ensure!(
            x.is_disjoint(&y),
            "partitions {:?} assigned to both members at once",
            x.intersection(&y)
        );
        let union: BTreeSet<i32> = x.union(&y).copied().collect();
        if !x.is_empty() && !y.is_empty() && union == all {
            break;
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "the two members never split {all:?} within {REBALANCE_BOUND:?}; last: A {x:?}, B {y:?}; {}; {}",
                a.report(), b.report()
            ),
        }
    }
    wait_both(
        &mut a,
        &mut b,
        "every record of the 4 partitions",
        REBALANCE_BOUND,
        |x, y| covers(x, y, 4, 0..20),
    )
    .await?;
    a.close().await?;
    b.close().await?;
    Ok(Outcome::Passed)
}

/// GROUP-CONSUMER-COMMIT-1: two members each commit what they read of their share (OffsetCommit
/// v9 with their member epochs), leave, and a new member resumes every partition at the commits.
pub async fn consumer_protocol_new_member_resumes_after_the_members_commits(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let topic = endpoint.unique_topic("cp-resume");
    let group = endpoint.unique_topic("cp-resume-g");
    create_topic(&endpoint, &topic, 4).await?;
    for p in 0..4 {
        produce_at(&endpoint, &topic, p, 0, 10).await?;
    }
    let mut a = member(&endpoint, "consumer A", &group, &topic)?;
    let mut b = member(&endpoint, "consumer B", &group, &topic)?;
    let all: BTreeSet<i32> = (0..4).collect();
    // Both settle with a non-empty share, then read their shares to the end.
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = Instant::now() + REBALANCE_BOUND;
    let (share_a, share_b) = loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        let union: BTreeSet<i32> = x.union(&y).copied().collect();
        if !x.is_empty() && !y.is_empty() && x.is_disjoint(&y) && union == all {
            break (x, y);
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "the two members never split the topic within {REBALANCE_BOUND:?}; {}; {}", a.report(), b.report()
            ),
        }
    };
    let (sa, sb) = (share_a.clone(), share_b.clone());
    wait_both(
        &mut a,
        &mut b,
        "offsets 0..6 of each share",
        REBALANCE_BOUND,
        move |x, y| sa.iter().all(|p| x.has_all(*p, 0..6)) && sb.iter().all(|p| y.has_all(*p, 0..6)),
    )
    .await?;
    let commits_a: Vec<(i32, i64)> = share_a.iter().map(|p| (*p, 6)).collect();
    let commits_b: Vec<(i32, i64)> = share_b.iter().map(|p| (*p, 6)).collect();
    a.commit(&commits_a).await?;
    b.commit(&commits_b).await?;
    a.close().await?;
    b.close().await?;
    // A new member alone: everything, from the commits.
    let mut c = member(&endpoint, "consumer C", &group, &topic)?;
    c.wait_assignment("all four partitions", |x| x.len() == 4).await?;
    c.wait_until("offsets 6..10 of every partition", |h| {
        (0..4).all(|p| h.has_all(p, 6..10))
    })
    .await?;
    for p in 0..4 {
        let first = c.history.offsets(p).first().copied();
        ensure!(
            first == Some(6),
            "consumer C's first record of partition {p} is at {first:?}, not at the committed 6"
        );
    }
    c.close().await?;
    Ok(Outcome::Passed)
}

/// GROUP-CONSUMER-REVOKE-1: while records keep arriving, B joins A's group and later leaves; the
/// members' assignments are never seen to overlap, and every record is read.
pub async fn consumer_protocol_member_joining_and_leaving_while_producing_never_shares_a_partition(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let topic = endpoint.unique_topic("cp-incremental");
    let group = endpoint.unique_topic("cp-incremental-g");
    create_topic(&endpoint, &topic, 4).await?;
    let mut a = member(&endpoint, "consumer A", &group, &topic)?;
    a.wait_assignment("all four partitions", |x| x.len() == 4).await?;
    let producer = {
        let endpoint = endpoint.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            for round in 0..3 {
                for p in 0..4 {
                    produce_at(&endpoint, &topic, p, round * 10, 10).await?;
                }
            }
            anyhow::Ok(())
        })
    };
    let mut b = member(&endpoint, "consumer B", &group, &topic)?;
    // Every assignment change of either member is checked for overlap until B has a share.
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = Instant::now() + REBALANCE_BOUND;
    loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        ensure!(
            x.is_disjoint(&y),
            "partitions {:?} assigned to A and B at once",
            x.intersection(&y)
        );
        if !y.is_empty() && x.len() + y.len() == 4 {
            break;
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "B never got a share within {REBALANCE_BOUND:?}; {}; {}", a.report(), b.report()
            ),
        }
    }
    producer.await.context("the producer task")??;
    wait_both(&mut a, &mut b, "every record produced", REBALANCE_BOUND, |x, y| {
        covers(x, y, 4, 0..30)
    })
    .await?;
    // B leaves (epoch -1 on close): A takes everything back.
    b.close().await?;
    a.wait_assignment("all four partitions again", |x| x.len() == 4).await?;
    for p in 0..4 {
        produce_at(&endpoint, &topic, p, 30, 5).await?;
    }
    a.wait_until("the records produced after B left", |h| {
        (0..4).all(|p| h.has_all(p, 30..35))
    })
    .await?;
    a.close().await?;
    Ok(Outcome::Passed)
}

async fn heartbeat(
    client: &mut Client,
    request: &ConsumerGroupHeartbeatRequest,
) -> anyhow::Result<ConsumerGroupHeartbeatResponse> {
    client
        .request(ApiKey::ConsumerGroupHeartbeat, HEARTBEAT_V, request)
        .await
        .context("ConsumerGroupHeartbeat")
}

/// A ConsumerGroupHeartbeat of `member_id` in `group` at `epoch`, every other field at its
/// default: rebalance timeout -1, subscription and owned partitions unchanged since the last.
fn beat(group: &str, member_id: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member_id))
        .with_member_epoch(epoch)
}

/// A member's first heartbeat: epoch 0, a 30 s rebalance timeout, owning nothing, subscribed to
/// `topics` by name.
fn joining_beat(group: &str, member_id: &str, topics: Vec<TopicName>) -> ConsumerGroupHeartbeatRequest {
    beat(group, member_id, 0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics))
        .with_topic_partitions(Some(Vec::<TopicPartitions>::new()))
}

/// GROUP-CONSUMER-EPOCH-1, GROUP-CONSUMER-TIMEOUT-1: a member that stops heartbeating is removed
/// once its session lapses (it leaves ConsumerGroupDescribe), and its next heartbeat is
/// UNKNOWN_MEMBER_ID; an epoch ahead of the coordinator's is FENCED_MEMBER_EPOCH.
pub async fn consumer_protocol_member_is_fenced_after_its_session_lapses(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let topic = endpoint.unique_topic("cp-fenced");
    let group = endpoint.unique_topic("cp-fenced-g");
    create_topic(&endpoint, &topic, 2).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    let member_id = format!("{group}-member");
    let join = joining_beat(&group, &member_id, vec![TopicName(s(&topic))]);
    let joined = heartbeat(&mut client, &join).await?;
    ensure!(
        joined.error_code == NONE,
        "joining: error {} ({:?})",
        joined.error_code,
        joined.error_message
    );
    ensure!(
        joined.member_epoch > 0,
        "joining gave member epoch {}",
        joined.member_epoch
    );
    let ahead = beat(&group, &member_id, joined.member_epoch + 5);
    let fenced = heartbeat(&mut client, &ahead).await?;
    ensure!(
        fenced.error_code == FENCED_MEMBER_EPOCH,
        "an epoch ahead of the coordinator's: error {} ({:?}), not FENCED_MEMBER_EPOCH (110)",
        fenced.error_code,
        fenced.error_message
    );
    // Silence: the member must disappear once its session lapses.
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(&group))]);
    let deadline = Instant::now() + SESSION_BOUND;
    loop {
        let described: ConsumerGroupDescribeResponse = client
            .request(ApiKey::ConsumerGroupDescribe, DESCRIBE_V, &describe)
            .await
            .context("ConsumerGroupDescribe")?;
        let present = described
            .groups
            .iter()
            .any(|g| g.members.iter().any(|m| m.member_id.as_str() == member_id));
        if !present {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the silent member is still in the group after {SESSION_BOUND:?}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    let late = beat(&group, &member_id, joined.member_epoch);
    let answer = heartbeat(&mut client, &late).await?;
    ensure!(
        answer.error_code == UNKNOWN_MEMBER_ID,
        "the lapsed member's heartbeat: error {} ({:?}), not UNKNOWN_MEMBER_ID (25)",
        answer.error_code,
        answer.error_message
    );
    Ok(Outcome::Passed)
}

/// GROUP-CONSUMER-REGEX-1: a member subscribed by `SubscribedTopicRegex` `<prefix>-.*` is
/// assigned every partition of the two topics the pattern matches and none of a topic it does not
/// match, and also the partition of a matching topic created after it joined (the coordinator
/// resolves the pattern again). Spoken on the wire: a librdkafka 2.12 consumer subscribed by
/// pattern with `group.protocol=consumer` reads the right records from the gateway but was seen
/// never to return from its destroy (its broker thread never exits; docs/compat.md), which would
/// hang the suite.
pub async fn consumer_protocol_regex_subscription_is_assigned_the_matching_topics_only(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848(&endpoint).await? {
        return Ok(skipped);
    }
    let prefix = endpoint.unique_topic("cp-regex");
    let (first, second, later) = (format!("{prefix}-a"), format!("{prefix}-b"), format!("{prefix}-c"));
    let unmatched = endpoint.unique_topic("cp-regex-other");
    let group = endpoint.unique_topic("cp-regex-g");
    create_topic(&endpoint, &first, 2).await?;
    create_topic(&endpoint, &second, 1).await?;
    create_topic(&endpoint, &unmatched, 1).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    let pattern = format!("{prefix}-.*");
    let member_id = format!("{group}-member");
    let join = joining_beat(&group, &member_id, Vec::new()).with_subscribed_topic_regex(Some(s(&pattern)));
    let joined = heartbeat(&mut client, &join).await?;
    ensure!(
        joined.error_code == NONE,
        "joining with the pattern {pattern}: error {} ({:?})",
        joined.error_code,
        joined.error_message
    );
    let mut member = Member {
        epoch: joined.member_epoch,
        owned: BTreeSet::new(),
    };
    member.take(&joined);
    let ids = topic_ids(&mut client, &[&first, &second, &unmatched]).await?;
    let partitions_of = |ids: &std::collections::BTreeMap<String, Uuid>, topics: &[(&String, i32)]| {
        topics
            .iter()
            .flat_map(|(t, n)| (0..*n).map(move |p| (ids[*t], p)))
            .collect::<BTreeSet<(Uuid, i32)>>()
    };
    let wanted = partitions_of(&ids, &[(&first, 2), (&second, 1)]);
    member
        .heartbeat_until(&mut client, &group, &member_id, "the two matching topics", |owned| {
            owned == &wanted
        })
        .await?;
    ensure!(
        !member.owned.iter().any(|(id, _)| *id == ids[&unmatched]),
        "the unmatched topic {unmatched} was assigned"
    );
    // A topic the pattern matches, created while the member is in the group.
    create_topic(&endpoint, &later, 1).await?;
    let ids = topic_ids(&mut client, &[&first, &second, &later]).await?;
    let wanted = partitions_of(&ids, &[(&first, 2), (&second, 1), (&later, 1)]);
    member
        .heartbeat_until(&mut client, &group, &member_id, "the topic created later", |owned| {
            owned == &wanted
        })
        .await?;
    let leave = beat(&group, &member_id, -1);
    let left = heartbeat(&mut client, &leave).await?;
    ensure!(left.error_code == NONE, "leaving: error {}", left.error_code);
    Ok(Outcome::Passed)
}

/// A raw-wire consumer-protocol member: its epoch and the partitions it owns, by topic id.
struct Member {
    epoch: i32,
    owned: BTreeSet<(Uuid, i32)>,
}

impl Member {
    /// Takes the epoch and, when the answer carries one, the assignment of a heartbeat answer.
    fn take(&mut self, answer: &ConsumerGroupHeartbeatResponse) {
        self.epoch = answer.member_epoch;
        if let Some(assignment) = &answer.assignment {
            self.owned = assignment
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
                .collect();
        }
    }

    /// Heartbeats, reporting what it owns, until `done` holds of its assignment (bounded by
    /// REBALANCE_BOUND; the coordinator re-resolves a pattern at most every few seconds).
    async fn heartbeat_until(
        &mut self,
        client: &mut Client,
        group: &str,
        member_id: &str,
        what: &str,
        done: impl Fn(&BTreeSet<(Uuid, i32)>) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + REBALANCE_BOUND;
        while !done(&self.owned) {
            ensure!(
                Instant::now() < deadline,
                "{what}: not assigned within {REBALANCE_BOUND:?}; owned {:?}",
                self.owned
            );
            tokio::time::sleep(POLL_INTERVAL).await;
            let mut by_topic: std::collections::BTreeMap<Uuid, Vec<i32>> = Default::default();
            for (id, p) in &self.owned {
                by_topic.entry(*id).or_default().push(*p);
            }
            let owned = by_topic
                .into_iter()
                .map(|(id, partitions)| TopicPartitions::default().with_topic_id(id).with_partitions(partitions))
                .collect();
            let request = beat(group, member_id, self.epoch).with_topic_partitions(Some(owned));
            let answer = heartbeat(client, &request).await?;
            ensure!(
                answer.error_code == NONE,
                "{what}: heartbeat error {} ({:?})",
                answer.error_code,
                answer.error_message
            );
            self.take(&answer);
        }
        Ok(())
    }
}

/// The topic id Metadata v12 gives each of `topics` (GROUP-CONSUMER-TOPIC-ID-1).
async fn topic_ids(
    client: &mut Client,
    topics: &[&String],
) -> anyhow::Result<std::collections::BTreeMap<String, Uuid>> {
    let request = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))))
            .collect(),
    ));
    let answer: MetadataResponse = client
        .request(ApiKey::Metadata, 12, &request)
        .await
        .context("Metadata v12")?;
    let mut ids = std::collections::BTreeMap::new();
    for topic in answer.topics {
        let name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
        ensure!(
            topic.error_code == NONE,
            "Metadata of {name}: error {}",
            topic.error_code
        );
        ids.insert(name, topic.topic_id);
    }
    for t in topics {
        ensure!(ids.contains_key(t.as_str()), "Metadata did not answer {t}");
    }
    Ok(ids)
}

/// The member epoch and assigned partitions ConsumerGroupDescribe reports for the member of
/// `group` with instance id `instance`, and the group epoch.
async fn described_instance(
    client: &mut Client,
    group: &str,
    instance: &str,
) -> anyhow::Result<Option<(i32, BTreeSet<i32>, i32)>> {
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let described: ConsumerGroupDescribeResponse = client
        .request(ApiKey::ConsumerGroupDescribe, DESCRIBE_V, &describe)
        .await
        .context("ConsumerGroupDescribe")?;
    let Some(g) = described.groups.first() else {
        bail!("ConsumerGroupDescribe answered no group");
    };
    ensure!(g.error_code == NONE, "ConsumerGroupDescribe: error {}", g.error_code);
    Ok(g.members
        .iter()
        .find(|m| m.instance_id.as_ref().is_some_and(|i| i.as_str() == instance))
        .map(|m| {
            let partitions = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.iter().copied())
                .collect();
            (m.member_epoch, partitions, g.group_epoch)
        }))
}

/// GROUP-CONSUMER-STATIC-1, GROUP-CONSUMER-LEAVE-1: a static member (`group.instance.id`) reads
/// and commits its share, and is closed (librdkafka leaves with epoch -2, keeping its
/// partitions); a new consumer with the same instance id gets the same partitions at the same
/// member epoch, the group epoch unchanged, resumes at the commits, and the other member is
/// never given another assignment.
pub async fn consumer_protocol_static_member_restarts_into_its_partitions(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skipped) = require_kip848_and_describe(&endpoint).await? {
        return Ok(skipped);
    }
    let topic = endpoint.unique_topic("cp-static");
    let group = endpoint.unique_topic("cp-static-g");
    let instance = format!("{group}-instance");
    create_topic(&endpoint, &topic, 4).await?;
    for p in 0..4 {
        produce_at(&endpoint, &topic, p, 0, 10).await?;
    }
    let static_member = |name: &str| {
        let mut config = member_config(&endpoint, &group);
        config.set("group.instance.id", &instance);
        GroupConsumer::from_config(name, &topic, &config)
    };
    let mut a = static_member("static consumer A")?;
    let mut b = member(&endpoint, "consumer B", &group, &topic)?;
    let all: BTreeSet<i32> = (0..4).collect();
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = Instant::now() + REBALANCE_BOUND;
    let (share_a, share_b) = loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        let union: BTreeSet<i32> = x.union(&y).copied().collect();
        if !x.is_empty() && !y.is_empty() && x.is_disjoint(&y) && union == all {
            break (x, y);
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "the two members never split the topic within {REBALANCE_BOUND:?}; {}; {}", a.report(), b.report()
            ),
        }
    };
    let sa = share_a.clone();
    a.wait_until("every record of A's share", move |h| {
        sa.iter().all(|p| h.has_all(*p, 0..10))
    })
    .await?;
    let commits: Vec<(i32, i64)> = share_a.iter().map(|p| (*p, 6)).collect();
    a.commit(&commits).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    let before = described_instance(&mut client, &group, &instance)
        .await?
        .context("the static member is not described")?;
    ensure!(
        before.1 == share_a,
        "ConsumerGroupDescribe gives the static member {:?}, librdkafka {share_a:?}",
        before.1
    );
    let b_assignments = b.assignments_applied();
    a.close().await?;
    // Left with -2: still a member, holding its partitions, until its instance comes back.
    let kept = described_instance(&mut client, &group, &instance)
        .await?
        .context("the static member left the group on close")?;
    ensure!(
        kept.1 == share_a && kept.2 == before.2,
        "after the static member closed: partitions {:?}, group epoch {} (before {:?}, {})",
        kept.1,
        kept.2,
        share_a,
        before.2
    );
    let mut a2 = static_member("static consumer A, restarted")?;
    let back = a2.wait_assignment("A's partitions back", |x| *x == share_a).await?;
    ensure!(back == share_a, "the restarted member got {back:?}, not {share_a:?}");
    let after = described_instance(&mut client, &group, &instance)
        .await?
        .context("the restarted static member is not described")?;
    ensure!(
        after.0 == before.0 && after.2 == before.2,
        "the restarted member is at member epoch {} and group epoch {}, not {} and {}",
        after.0,
        after.2,
        before.0,
        before.2
    );
    let sa = share_a.clone();
    a2.wait_until("offsets 6..10 of A's share", move |h| {
        sa.iter().all(|p| h.has_all(*p, 6..10))
    })
    .await?;
    for p in &share_a {
        let first = a2.history.offsets(*p).first().copied();
        ensure!(
            first == Some(6),
            "the restarted member's first record of partition {p} is at {first:?}, not at the committed 6"
        );
    }
    ensure!(
        b.assignment() == share_b && b.assignments_applied() == b_assignments,
        "the other member was rebalanced: assignment {:?} (was {share_b:?}), {} assignments applied (was {b_assignments})",
        b.assignment(),
        b.assignments_applied()
    );
    a2.close().await?;
    b.close().await?;
    Ok(Outcome::Passed)
}
