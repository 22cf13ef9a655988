//! Consumer-group cases: subscribe()-based librdkafka consumers and committed offsets.
//!
//! Every case creates its own topics and groups (unique names) and runs against any Kafka
//! endpoint. Group membership goes through librdkafka's classic group protocol; what a
//! high-level client cannot express (standalone commits of special values, the offsets of a
//! whole group, over-long group ids, DeleteGroups) goes over the raw wire client, always to
//! the coordinator FindCoordinator names.
//!
//! Consumers (see [`support::GroupConsumer`]):
//!
//! - `session.timeout.ms=6000` (Kafka's default `group.min.session.timeout.ms`, so any broker
//!   accepts it) and `heartbeat.interval.ms=500`, so that a rebalance starts within half a
//!   second of a member joining; `max.poll.interval.ms=20000` bounds the rebalance timeout.
//! - `enable.auto.commit=false`: the cases commit explicitly and synchronously, then read the
//!   commit back, so nothing depends on when librdkafka would have committed.
//! - `auto.offset.reset` is always explicit: `earliest` where a lost commit must show up as a
//!   re-read, `latest` where it must show up as skipped records.
//! - `enable.partition.eof=true`: reaching the high watermark is an event, which is how a case
//!   knows without sleeping that no record precedes it.
//! - `partition.assignment.strategy=range`, an eager strategy: a rebalance revokes everything,
//!   so two members never own one partition at the same time in a settled generation.
//! - One thread per consumer polls it (100 ms poll period) and forwards records, partition
//!   ends and errors to the case; every wait is bounded by [`support::WAIT`] and fails the
//!   case when it runs out. Nothing sleeps to synchronise.

use super::{advertised_max, require_apis, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context as _};
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
use rdkafka::Offset;
use std::collections::{BTreeMap, BTreeSet};
use support::*;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            two_members_split_partitions_disjointly,
            ["GROUP-JOIN-1", "GROUP-SYNC-1"]
        ),
        case!(
            leaving_member_hands_over_at_committed_offsets,
            ["GROUP-LEAVE-1", "CO-ENCODE-1"]
        ),
        case!(restarted_consumer_resumes_at_committed_offsets, ["CO-ENCODE-1"]),
        // The commit of a caught-up consumer is the one the real server refuses verbatim (DIFF-2).
        case!(caught_up_commit_survives_a_consumer_restart, ["CO-ENCODE-1"]),
        case!(
            commit_of_zero_on_an_empty_partition_survives_records_arriving,
            ["CO-ZERO-1"]
        ),
        case!(
            offset_delete_removes_the_named_offsets_and_spares_subscribed_topics,
            ["OFFSETDELETE-1", "OFFSETDELETE-2"]
        ),
        case!(
            commit_of_minus_one_deletes_the_committed_offset,
            ["CO-DELETE-1", "CO-METADATA-1"],
            deviates: ["CO-DELETE-1", "CO-METADATA-1"]
        ),
        case!(
            offset_fetch_with_null_topics_lists_committed_partitions,
            ["CO-FETCH-ALL-1"]
        ),
        case!(
            group_id_longer_than_246_bytes_is_invalid,
            ["CO-GROUP-ID-1"],
            deviates: ["CO-GROUP-ID-1"]
        ),
        case!(describe_list_and_delete_groups, ["GROUP-DELETE-1"]),
        case!(
            member_commits_while_a_rebalance_is_prepared_not_while_it_completes,
            ["GROUP-COMMIT-1"]
        ),
        case!(
            find_coordinator_for_transactions_is_refused,
            ["GROUP-TXN-COORDINATOR-1"],
            deviates: ["GROUP-TXN-COORDINATOR-1"]
        ),
    ]
}

pub mod support;

mod committed_offsets;
pub use committed_offsets::*;

// ---------------------------------------------------------------------------------------------
// Membership
// ---------------------------------------------------------------------------------------------

pub async fn two_members_split_partitions_disjointly(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-split");
    let group = endpoint.unique_topic("group-split-g");
    create_topic(&endpoint, &topic, 4).await?;
    let all: BTreeSet<i32> = (0..4).collect();
    let a = GroupConsumer::subscribe("consumer A", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let b = GroupConsumer::subscribe("consumer B", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let (mut wa, mut wb) = (a.assignment_watch(), b.assignment_watch());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (x, y) = (wa.borrow_and_update().clone(), wb.borrow_and_update().clone());
        let union: BTreeSet<i32> = x.union(&y).copied().collect();
        if !x.is_empty() && !y.is_empty() && x.is_disjoint(&y) && union == all {
            break;
        }
        tokio::select! {
            changed = wa.changed() => changed.context("consumer A's poll thread ended")?,
            changed = wb.changed() => changed.context("consumer B's poll thread ended")?,
            _ = tokio::time::sleep_until(deadline) => bail!(
                "the two members never split {all:?} into two non-empty disjoint assignments within {WAIT:?}; last: A {x:?}, B {y:?}"
            ),
        }
    }
    a.close().await?;
    b.close().await?;
    Ok(Outcome::Passed)
}

/// Longer than [`WAIT`], within Kafka's default `group.max.session.timeout.ms` (30 min).
const A_SESSION_TIMEOUT_MS: &str = "45000";

pub async fn leaving_member_hands_over_at_committed_offsets(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-handover");
    let group = endpoint.unique_topic("group-handover-g");
    create_topic(&endpoint, &topic, 2).await?;
    for p in 0..2 {
        produce_at(&endpoint, &topic, p, 0, 10).await?;
    }
    // A alone owns both partitions; it reads at least 0..5 of each and commits 5. Its session
    // outlasts every wait of the case: only its LeaveGroup can hand its partitions over in time.
    let mut a = GroupConsumer::subscribe_with(
        "consumer A",
        &endpoint.bootstrap,
        &group,
        &topic,
        "earliest",
        &[
            ("session.timeout.ms", A_SESSION_TIMEOUT_MS),
            ("max.poll.interval.ms", A_SESSION_TIMEOUT_MS),
        ],
    )?;
    a.wait_until("offsets 0..5 of both partitions", |h| {
        h.has_all(0, 0..5) && h.has_all(1, 0..5)
    })
    .await?;
    a.commit(&[(0, 5), (1, 5)]).await?;
    let committed = a.committed(&[0, 1]).await?;
    ensure!(
        committed == BTreeMap::from([(0, Offset::Offset(5)), (1, Offset::Offset(5))]),
        "after committing 5 on both partitions, consumer A reads back {committed:?}"
    );
    // B joins: the group rebalances and B gets a share.
    let mut b = GroupConsumer::subscribe("consumer B", &endpoint.bootstrap, &group, &topic, "earliest")?;
    b.wait_assignment("a partition", |a| !a.is_empty()).await?;
    // A leaves (LeaveGroup on close): B takes everything over at the committed offsets.
    a.close().await?;
    b.wait_assignment("both partitions", |a| a.len() == 2).await?;
    b.wait_until("offsets 5..10 of both partitions", |h| {
        h.has_all(0, 5..10) && h.has_all(1, 5..10)
    })
    .await?;
    for p in 0..2 {
        let offsets = b.history.offsets(p);
        ensure!(
            offsets.first() == Some(&5),
            "consumer B's first record of partition {p} is at {:?}, not at the committed offset 5; delivered {offsets:?}",
            offsets.first()
        );
        let distinct = b.history.distinct(p);
        ensure!(
            distinct == (5..10).collect::<BTreeSet<i64>>(),
            "consumer B read offsets {distinct:?} of partition {p}: 10 - 5 records from 5 expected"
        );
    }
    b.close().await?;
    Ok(Outcome::Passed)
}

pub async fn describe_list_and_delete_groups(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let needed = [ApiKey::ListGroups, ApiKey::DescribeGroups, ApiKey::DeleteGroups];
    if let Some(skip) = require_apis(&endpoint, &needed).await? {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("group-admin");
    let group = endpoint.unique_topic("group-admin-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 3).await?;
    let mut consumer = GroupConsumer::subscribe("consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    consumer.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    consumer.commit(&[(0, 2)]).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;

    let listed = list_groups(&mut client).await?;
    let entry = listed
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .with_context(|| format!("ListGroups does not list {group} while a consumer is in it"))?;
    ensure!(
        entry.protocol_type.as_str() == "consumer" && entry.group_state.as_str() == "Stable",
        "ListGroups lists {group} with protocol type {:?} and state {:?}, expected consumer and Stable",
        entry.protocol_type.as_str(),
        entry.group_state.as_str()
    );
    let described = describe_group(&mut client, &group).await?;
    ensure!(
        described.error_code == NONE
            && described.group_state.as_str() == "Stable"
            && described.protocol_type.as_str() == "consumer"
            && described.protocol_data.as_str() == "range",
        "DescribeGroups {group}: error {}, state {:?}, protocol type {:?}, protocol {:?}; expected 0, Stable, consumer, range",
        described.error_code,
        described.group_state.as_str(),
        described.protocol_type.as_str(),
        described.protocol_data.as_str()
    );
    ensure!(
        described.members.len() == 1 && !described.members[0].member_assignment.is_empty(),
        "DescribeGroups {group}: members {:?} with assignment sizes {:?}; expected one member with an assignment",
        member_ids(&described),
        described
            .members
            .iter()
            .map(|m| m.member_assignment.len())
            .collect::<Vec<_>>()
    );

    let code = delete_group(&mut client, &group).await?;
    ensure!(
        code == NON_EMPTY_GROUP,
        "DeleteGroups of a group with a member: error {code}, expected NON_EMPTY_GROUP ({NON_EMPTY_GROUP})"
    );
    let kept = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        kept.0 == 2,
        "after a refused DeleteGroups the committed offset is {}, expected still 2",
        kept.0
    );

    consumer.close().await?;
    await_described(&mut client, &group, "no members", |g| g.members.is_empty()).await?;
    let code = delete_group(&mut client, &group).await?;
    ensure!(code == NONE, "DeleteGroups of an empty group: error {code}");
    let gone = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        gone.0 == -1 && gone.3 == NONE,
        "OffsetFetch after DeleteGroups: (offset, error) ({}, {}), expected (-1, 0)",
        gone.0,
        gone.3
    );
    let listed = list_groups(&mut client).await?;
    ensure!(
        !listed.iter().any(|g| g.group_id.0.as_str() == group),
        "ListGroups still lists {group} after DeleteGroups"
    );
    Ok(Outcome::Passed)
}

/// Kafka's classic coordinator takes a commit of a current member (right member id and
/// generation) while the group is preparing a rebalance: that is when clients commit what they
/// consumed before giving their partitions up (librdkafka's and the Java client's commit on
/// revocation). It refuses one while the join has completed but the leader's SyncGroup has not
/// (REBALANCE_IN_PROGRESS): the member has no assignment in the new generation yet.
/// (`ClassicGroup.validateOffsetCommit`; `GroupCoordinator.doCommitOffsets` before it.)
pub async fn member_commits_while_a_rebalance_is_prepared_not_while_it_completes(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-commit-rebalance");
    let group = endpoint.unique_topic("group-commit-rebalance-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    const SESSION_MS: i32 = 10_000;
    const REBALANCE_MS: i32 = 10_000;

    // A joins alone and syncs: Stable, generation g.
    let mut a = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut a, &group, "", SESSION_MS, REBALANCE_MS, b"a").await?;
    let a_id = match first.error_code {
        MEMBER_ID_REQUIRED => first.member_id.as_str().to_string(),
        code => bail!("A's first JoinGroup: error {code}, expected MEMBER_ID_REQUIRED ({MEMBER_ID_REQUIRED})"),
    };
    let joined = join_group(&mut a, &group, &a_id, SESSION_MS, REBALANCE_MS, b"a").await?;
    ensure!(
        joined.error_code == NONE && joined.leader.as_str() == a_id,
        "A's JoinGroup: error {}, leader {:?}",
        joined.error_code,
        joined.leader.as_str()
    );
    let generation = joined.generation_id;
    let synced = sync_group(&mut a, &group, generation, &a_id, &[(&a_id, b"all")]).await?;
    ensure!(synced.error_code == NONE, "A's SyncGroup: error {}", synced.error_code);
    let answers = offset_commit(&mut a, &group, generation, &a_id, &[(&topic, 0, 1)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "A's commit in a stable group: {answers:?}"
    );

    // B joins: the group prepares a rebalance, which A learns from its heartbeat.
    let mut b = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut b, &group, "", SESSION_MS, REBALANCE_MS, b"b").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "B's first JoinGroup: error {}",
        first.error_code
    );
    let b_id = first.member_id.as_str().to_string();
    let b_join = tokio::spawn({
        let (group, b_id) = (group.clone(), b_id.clone());
        async move {
            let joined = join_group(&mut b, &group, &b_id, SESSION_MS, REBALANCE_MS, b"b").await;
            (b, joined)
        }
    });
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match heartbeat(&mut a, &group, generation, &a_id).await? {
            REBALANCE_IN_PROGRESS => break,
            NONE if tokio::time::Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            code => bail!(
                "A's heartbeat after B joined: error {code}, expected REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS})"
            ),
        }
    }
    // A commits what it consumed before rejoining, still in generation g.
    let answers = offset_commit(&mut a, &group, generation, &a_id, &[(&topic, 0, 3)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "a commit of the current member and generation while the rebalance is being prepared: {answers:?}, expected NONE; \
         refusing it loses what a member commits as it gives its partitions up"
    );
    let fetched = fetch_one(&mut a, &group, &topic, 0).await?;
    ensure!(
        fetched.0 == 3,
        "after the commit during the rebalance the committed offset is {}",
        fetched.0
    );

    // A rejoins: the join completes (generation g + 1), nobody has synced yet.
    let rejoined = join_group(&mut a, &group, &a_id, SESSION_MS, REBALANCE_MS, b"a").await?;
    let (mut b, b_joined) = tokio::time::timeout(WAIT, b_join)
        .await
        .context("B's JoinGroup did not complete after A rejoined")?
        .context("B's join task")?;
    let b_joined = b_joined?;
    ensure!(
        rejoined.error_code == NONE && b_joined.error_code == NONE && rejoined.generation_id == b_joined.generation_id,
        "the rebalance: A error {} generation {}, B error {} generation {}",
        rejoined.error_code,
        rejoined.generation_id,
        b_joined.error_code,
        b_joined.generation_id
    );
    let next = rejoined.generation_id;
    let answers = offset_commit(&mut a, &group, next, &a_id, &[(&topic, 0, 4)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [REBALANCE_IN_PROGRESS],
        "a commit in the new generation before SyncGroup: {answers:?}, expected REBALANCE_IN_PROGRESS ({REBALANCE_IN_PROGRESS})"
    );
    let leader = rejoined.leader.as_str().to_string();
    let (leader_client, follower_client, follower_id) = if leader == a_id {
        (&mut a, &mut b, b_id.clone())
    } else {
        (&mut b, &mut a, a_id.clone())
    };
    let assignments: [(&str, &[u8]); 2] = [(&a_id, b"a"), (&b_id, b"b")];
    let synced = sync_group(leader_client, &group, next, &leader, &assignments).await?;
    ensure!(
        synced.error_code == NONE,
        "the leader's SyncGroup: error {}",
        synced.error_code
    );
    let synced = sync_group(follower_client, &group, next, &follower_id, &[]).await?;
    ensure!(
        synced.error_code == NONE,
        "the follower's SyncGroup: error {}",
        synced.error_code
    );
    let answers = offset_commit(&mut a, &group, next, &a_id, &[(&topic, 0, 4)]).await?;
    ensure!(
        answers.iter().map(|x| x.2).collect::<Vec<_>>() == [NONE],
        "a commit in the new generation once stable: {answers:?}"
    );
    let fetched = fetch_one(&mut a, &group, &topic, 0).await?;
    ensure!(fetched.0 == 4, "the committed offset is {}, expected 4", fetched.0);
    Ok(Outcome::Passed)
}

pub async fn find_coordinator_for_transactions_is_refused(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // GROUP-TXN-COORDINATOR-1 (a deviation): the gateway has no transaction coordinator; a
    // Kafka broker names one.
    let refused = !endpoint.profile.is_kafka();
    let txn_code = if refused { UNSUPPORTED_VERSION } else { NONE };
    let v4 = advertised_max(&endpoint, ApiKey::FindCoordinator)
        .await?
        .is_some_and(|max| max >= 4);
    let mut client = kafka_wire_client::WireClient::connect(&endpoint.bootstrap).await?;
    let key = endpoint.unique_topic("txn");
    let answer = find_coordinator(&mut client, &key, KEY_TYPE_TRANSACTION).await?;
    ensure!(
        answer.error_code == txn_code && (refused || answer.node_id.0 >= 0),
        "FindCoordinator v{FIND_COORDINATOR_V} for a transaction coordinator: error {}, node {}, expected error {txn_code}",
        answer.error_code,
        answer.node_id.0
    );
    // v4 batches keys; each is answered on its own. (A Kafka implementation may stop at v3.)
    if refused || v4 {
        let request = FindCoordinatorRequest::default()
            .with_key_type(KEY_TYPE_TRANSACTION)
            .with_coordinator_keys(vec![kafka_protocol::protocol::StrBytes::from_string(key.clone())]);
        let batched: FindCoordinatorResponse = client
            .request(ApiKey::FindCoordinator, 4, &request)
            .await
            .context("FindCoordinator v4")?;
        let codes: Vec<i16> = batched.coordinators.iter().map(|c| c.error_code).collect();
        ensure!(
            codes == [txn_code],
            "FindCoordinator v4 for a transaction coordinator: codes {codes:?}, expected [{txn_code}]"
        );
    }
    // A key type Kafka does not define is an invalid request.
    let unknown = find_coordinator(&mut client, &key, 7).await?;
    ensure!(
        unknown.error_code == INVALID_REQUEST,
        "FindCoordinator with key type 7: error {}, expected INVALID_REQUEST ({INVALID_REQUEST})",
        unknown.error_code
    );
    // The same connection still finds group coordinators.
    let group = find_coordinator(&mut client, &key, KEY_TYPE_GROUP).await?;
    if group.error_code != NONE || group.node_id.0 < 0 {
        bail!(
            "FindCoordinator for a group after the refusals: error {}, node {}",
            group.error_code,
            group.node_id.0
        );
    }
    Ok(Outcome::Passed)
}
