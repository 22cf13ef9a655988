//! The cluster tier's fault cases (docs/spec/cluster.md): a gateway on the real SDK backend given
//! the roster of a three-node Iggy cluster ([`IggyCluster`]), while librdkafka clients produce and
//! consume through it, and a node is SIGKILLed. Each case starts its own cluster and gateway; the
//! gateway is never restarted. Each checks that every acknowledged record is read back (lost must
//! be 0), counts duplicates, and prints its figures: records acknowledged, lost, duplicated, and
//! the time from the kill to the next acknowledged record (the goal is under 10 s, the default
//! `iggy_failover_timeout_ms`); figures are printed, never asserted. Every wait ends on a
//! condition and fails after a bound.

mod support;

use crate::cases::gateway_cases::BackendSource;
use crate::cases::group_cases::support::{create_topic, produce, produce_at, Client, GroupConsumer, WAIT};
use crate::cases::Outcome;
use crate::endpoint::Endpoint;
use crate::iggy_cluster::IggyCluster;
use crate::real_iggy::{DEFAULT_STREAM, GATEWAY_POOL_SIZE};
use crate::runner::{CaseInfo, Filter, Report};
use anyhow::{anyhow, ensure, Context as _};
use kafka_iggy_gateway::backend::iggy::{IggyBackend, IggyTls};
use kafka_iggy_gateway::backend::Backend;
use rdkafka::Offset;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tokio::time::Instant;

mod gateway_kill;
mod restarts;
mod stalls;
use gateway_kill::*;
use restarts::*;
use stalls::*;

/// The area these cases report under.
pub const AREA: &str = "cluster";

/// The gateway's failover bound in these cases: the default (CLUSTER-FAILOVER-2).
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound on a wait that spans a failover: an election (about 5 s, DIFF-15), the gateway's
/// failover bound and a client's retry.
const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// Primary kills the repeated-kills case makes unless told otherwise (`cluster-tier --kills N`).
pub const DEFAULT_KILLS: usize = 10;

/// Every case, with its rules.
pub const CASES: &[crate::cases::ListedCase] = &[
    crate::cases::ListedCase {
        name: "primary_killed_during_an_idempotent_producer_stream_loses_no_acknowledged_record",
        rules: &[
            "CLUSTER-FAILOVER-1",
            "CLUSTER-FAILOVER-2",
            "CLUSTER-UNKNOWN-1",
            "CLUSTER-ROUTE-1",
            "PRODUCER-UNKNOWN-1",
            "DELIVERY-3",
        ],
    },
    crate::cases::ListedCase {
        name: "primary_killed_while_a_group_consumes_and_commits_resumes_from_its_commits",
        rules: &[
            "CLUSTER-FAILOVER-1",
            "CLUSTER-FAILOVER-2",
            "CLUSTER-FAILOVER-4",
            "CO-MEMBER-1",
        ],
    },
    crate::cases::ListedCase {
        name: "primary_killed_during_a_fetch_long_poll_answers_and_the_consumer_resumes",
        rules: &["CLUSTER-FAILOVER-1", "CLUSTER-FAILOVER-2", "FETCH-WAIT-1"],
    },
    crate::cases::ListedCase {
        name: "follower_killed_and_restarted_rejoins_without_loss",
        rules: &["CLUSTER-FAILOVER-1", "CLUSTER-ROUTE-1", "CLUSTER-UNKNOWN-1"],
    },
    crate::cases::ListedCase {
        name: "primary_killed_and_restarted_rejoins_as_a_follower_without_loss",
        rules: &["CLUSTER-FAILOVER-1", "CLUSTER-ROUTE-1", "CLUSTER-UNKNOWN-1"],
    },
    crate::cases::ListedCase {
        name: "whole_cluster_stopped_and_started_the_gateway_serves_again_and_says_what_the_nodes_lost",
        rules: &["CLUSTER-FAILOVER-1", "CLUSTER-FAILOVER-2", "CO-MEMBER-1"],
    },
    crate::cases::ListedCase {
        name: "gateway_process_killed_while_its_group_commits_resumes_on_the_survivor",
        rules: &["GROUP-COORDINATOR-2", "CO-MEMBER-1", "CLUSTER-ROSTER-1"],
    },
    crate::cases::ListedCase {
        name: "primary_stalled_behind_a_proxy_that_passes_logins_fails_over_within_the_bound",
        rules: &["CLUSTER-FAILOVER-3", "CLUSTER-FAILOVER-1", "CLUSTER-UNKNOWN-1"],
    },
    crate::cases::ListedCase {
        name: "primary_outside_the_roster_gets_no_login_unless_followed",
        rules: &["CLUSTER-ROSTER-2"],
    },
    crate::cases::ListedCase {
        name: "primary_killed_again_and_again_gives_the_failover_gap",
        rules: &[
            "CLUSTER-FAILOVER-1",
            "CLUSTER-FAILOVER-2",
            "CLUSTER-UNKNOWN-1",
            "PRODUCER-UNKNOWN-3",
            "DELIVERY-3",
        ],
    },
];

/// How the tier runs the fault cases.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Primary kills of `primary_killed_again_and_again_gives_the_failover_gap`.
    pub kills: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { kills: DEFAULT_KILLS }
    }
}

/// Runs every case `filter` selects, each on a cluster of its own from `binary`.
pub async fn run(binary: &Path, filter: &Filter, settings: Settings) -> Report {
    let mut report = Report::default();
    for case in CASES {
        if !filter.selects(case.name) {
            continue;
        }
        let info = CaseInfo {
            area: AREA,
            name: case.name,
            rules: case.rules,
            deviations: &[],
        };
        let body = async {
            match case.name {
                "primary_killed_during_an_idempotent_producer_stream_loses_no_acknowledged_record" => {
                    primary_killed_during_an_idempotent_producer_stream_loses_no_acknowledged_record(binary).await
                }
                "primary_killed_while_a_group_consumes_and_commits_resumes_from_its_commits" => {
                    primary_killed_while_a_group_consumes_and_commits_resumes_from_its_commits(binary).await
                }
                "primary_killed_during_a_fetch_long_poll_answers_and_the_consumer_resumes" => {
                    primary_killed_during_a_fetch_long_poll_answers_and_the_consumer_resumes(binary).await
                }
                "follower_killed_and_restarted_rejoins_without_loss" => {
                    follower_killed_and_restarted_rejoins_without_loss(binary).await
                }
                "primary_killed_and_restarted_rejoins_as_a_follower_without_loss" => {
                    primary_killed_and_restarted_rejoins_as_a_follower_without_loss(binary).await
                }
                "whole_cluster_stopped_and_started_the_gateway_serves_again_and_says_what_the_nodes_lost" => {
                    whole_cluster_stopped_and_started_the_gateway_serves_again_and_says_what_the_nodes_lost(binary)
                        .await
                }
                "gateway_process_killed_while_its_group_commits_resumes_on_the_survivor" => {
                    gateway_process_killed_while_its_group_commits_resumes_on_the_survivor(binary).await
                }
                "primary_stalled_behind_a_proxy_that_passes_logins_fails_over_within_the_bound" => {
                    primary_stalled_behind_a_proxy_that_passes_logins_fails_over_within_the_bound(binary).await
                }
                "primary_outside_the_roster_gets_no_login_unless_followed" => {
                    primary_outside_the_roster_gets_no_login_unless_followed(binary).await
                }
                "primary_killed_again_and_again_gives_the_failover_gap" => {
                    primary_killed_again_and_again_gives_the_failover_gap(binary, settings.kills).await
                }
                other => Err(anyhow!("no body for {other}")),
            }
            .map(|()| Outcome::Passed)
        };
        report.run_case(info, body).await;
    }
    report
}

/// A gateway's backend on the cluster: the roster, the default failover bound, the default
/// stream ensured, as a gateway process given `--iggy-address` with every node does.
pub async fn cluster_backend(cluster: &IggyCluster) -> anyhow::Result<IggyBackend> {
    let backend = IggyBackend::connect_cluster(
        &cluster.roster(),
        &cluster.username,
        &cluster.password,
        IggyTls::default(),
        GATEWAY_POOL_SIZE,
        FAILOVER_TIMEOUT,
    )
    .await
    .with_context(|| format!("connecting a gateway backend to the roster {}", cluster.roster()))?;
    backend.ensure_stream(DEFAULT_STREAM).await?;
    Ok(backend)
}

/// Each gateway a case starts gets its own connections to the cluster, through the roster.
impl BackendSource for IggyCluster {
    type Backend = IggyBackend;
    async fn backend_for_new_gateway(&self) -> anyhow::Result<Arc<IggyBackend>> {
        Ok(Arc::new(cluster_backend(self).await?))
    }
}

/// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-2, CLUSTER-UNKNOWN-1, CLUSTER-ROUTE-1: an idempotent
/// producer (acks=all) streams through the gateway; the metadata primary is SIGKILLed; the
/// gateway moves to the survivors' new primary within its failover bound, the producer's
/// retried records are stored once (PRODUCER-UNKNOWN-1), and every acknowledged record reads back.
async fn primary_killed_during_an_idempotent_producer_stream_loses_no_acknowledged_record(
    binary: &Path,
) -> anyhow::Result<()> {
    let world = World::start(binary).await?;
    let topic = world.gateway.endpoint.unique_topic("cluster-primary-killed");
    create_topic(&world.gateway.endpoint, &topic, 1).await?;
    let mut stream = ProducerStream::start(&world.bootstrap(), &topic)?;
    stream.wait_acked_after(None, 30, WAIT).await?;
    let (leader, killed_at) = world.kill_leader().await?;
    stream
        .wait_acked_after(Some(killed_at), 30, FAILOVER_WAIT)
        .await
        .with_context(|| format!("after node {leader} (the primary) was killed"))?;
    let next_ack = stream.first_ack_after(killed_at);
    let new_leader = world.cluster.leader(WAIT).await?;
    let (acks, sent, failures) = stream.stop().await?;
    let figures = audit(&world.bootstrap(), &topic, &acks).await?;
    println!(
        "cluster tier: primary (node {leader}) killed during a producer stream: {sent} sent, {} acknowledged, {} failed, {} lost, {} duplicated; kill to next acknowledged record {} (goal < {FAILOVER_TIMEOUT:?}); new primary node {new_leader}",
        figures.acknowledged,
        failures.len(),
        figures.lost.len(),
        figures.duplicated,
        millis(next_ack)
    );
    figures.check()?;
    ensure!(new_leader != leader, "the killed node {leader} is still named leader");
    world.stop().await;
    Ok(())
}

/// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-2, CO-MEMBER-1: a group member consumes two partitions
/// and commits; the primary is SIGKILLed; the member goes on consuming and commits again through
/// the new primary (the gateway's offsets client joins the Iggy group again on its new
/// connection), and a new member of the group resumes from those commits.
async fn primary_killed_while_a_group_consumes_and_commits_resumes_from_its_commits(
    binary: &Path,
) -> anyhow::Result<()> {
    let world = World::start(binary).await?;
    let endpoint = &world.gateway.endpoint;
    let topic = endpoint.unique_topic("cluster-group-primary-killed");
    let group = endpoint.unique_topic("cluster-group");
    create_topic(endpoint, &topic, 2).await?;
    for p in 0..2 {
        produce(endpoint, &topic, p, 20).await?;
    }
    let mut first = GroupConsumer::subscribe("first", &endpoint.bootstrap, &group, &topic, "earliest")?;
    first
        .wait_until("records 0..20 of both partitions", |h| {
            h.has_all(0, 0..20) && h.has_all(1, 0..20)
        })
        .await?;
    first.commit(&[(0, 20), (1, 20)]).await?;

    let (leader, killed_at) = world.kill_leader().await?;
    // One record first, to time the failover as a producer sees it; then the rest.
    let mut produced = produce(endpoint, &topic, 0, 1).await?;
    let next_ack = killed_at.elapsed();
    produced.extend(produce(endpoint, &topic, 0, 19).await?);
    let produced_1 = produce(endpoint, &topic, 1, 20).await?;
    ensure!(
        produced == (20..40).collect::<Vec<_>>() && produced_1 == (20..40).collect::<Vec<_>>(),
        "records produced after the kill got offsets {produced:?} and {produced_1:?}, not 20..40"
    );
    first
        .wait_until("records 20..40 of both partitions after the kill", |h| {
            h.has_all(0, 20..40) && h.has_all(1, 20..40)
        })
        .await
        .with_context(|| format!("after node {leader} (the primary) was killed"))?;
    // The member's commit meets the failover as a client does: a retriable error
    // (COORDINATOR_NOT_AVAILABLE, CLUSTER-FAILOVER-2), then success; bounded.
    let deadline = Instant::now() + FAILOVER_WAIT;
    let mut refusals = Vec::new();
    loop {
        match first.commit(&[(0, 40), (1, 40)]).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => refusals.push(e.to_string()),
            Err(e) => return Err(e.context(format!("commits refused before: {refusals:?}"))),
        }
    }
    let committed = first.committed(&[0, 1]).await?;
    ensure!(
        committed.values().all(|o| *o == Offset::Offset(40)),
        "committed after the kill: {committed:?}, not 40 on both partitions"
    );
    let redelivered_first: usize = (0..2)
        .map(|p| first.history.offsets(p).len() - first.history.distinct(p).len())
        .sum();
    first.close().await?;

    for p in 0..2 {
        produce(endpoint, &topic, p, 10).await?;
    }
    let mut second = GroupConsumer::subscribe("second", &endpoint.bootstrap, &group, &topic, "earliest")?;
    second
        .wait_until("records 40..50 of both partitions", |h| {
            h.has_all(0, 40..50) && h.has_all(1, 40..50)
        })
        .await?;
    let below: BTreeSet<i64> = (0..2)
        .flat_map(|p| second.history.offsets(p))
        .filter(|o| *o < 40)
        .collect();
    let redelivered: usize = redelivered_first + below.len();
    println!(
        "cluster tier: primary (node {leader}) killed while a group consumed and committed: 100 acknowledged, 0 lost (every offset 0..50 of both partitions read), {redelivered} delivered twice; kill to next acknowledged record {} ms; {} commit(s) refused before one was taken; the new member resumed at offset 40 on both partitions",
        next_ack.as_millis(),
        refusals.len()
    );
    ensure!(
        below.is_empty(),
        "the new member did not resume from the commits: it was delivered offsets {below:?} below 40"
    );
    second.close().await?;
    world.stop().await;
    Ok(())
}

/// CLUSTER-FAILOVER-1, CLUSTER-ROUTE-1, CLUSTER-UNKNOWN-1: a follower is SIGKILLed during a
/// producer stream (the primary still has a majority: the stream goes on), then restarted on its
/// data; the cluster names it healthy again and the stream goes on; every acknowledged record
/// reads back. Killing the primary after that (so that the majority holds the restarted node) is
/// DIFF-16, shown with `KIG_CLUSTER_REPRODUCE_DIFF16=1`.
async fn follower_killed_and_restarted_rejoins_without_loss(binary: &Path) -> anyhow::Result<()> {
    let world = World::start(binary).await?;
    let topic = world.gateway.endpoint.unique_topic("cluster-follower-killed");
    create_topic(&world.gateway.endpoint, &topic, 1).await?;
    let mut stream = ProducerStream::start(&world.bootstrap(), &topic)?;
    stream.wait_acked_after(None, 20, WAIT).await?;
    let leader = world.cluster.leader(WAIT).await?;
    let follower = world
        .cluster
        .running()
        .into_iter()
        .find(|id| *id != leader)
        .ok_or_else(|| anyhow!("no follower"))?;
    let killed_at = Instant::now();
    world.cluster.kill(follower)?;
    stream
        .wait_acked_after(Some(killed_at), 20, FAILOVER_WAIT)
        .await
        .with_context(|| format!("after node {follower} (a follower) was killed"))?;
    let after_follower = stream.first_ack_after(killed_at);
    let restarted_at = Instant::now();
    world
        .cluster
        .restart(follower)
        .await
        .with_context(|| format!("restarting node {follower}"))?;
    let rejoined_in = restarted_at.elapsed();
    stream
        .wait_acked_after(Some(Instant::now()), 20, FAILOVER_WAIT)
        .await
        .with_context(|| format!("after node {follower} was restarted"))?;
    // DIFF-16: a primary killed after a follower's restart can leave the partition plane's
    // primary on another node than the metadata primary, and every send is refused; only
    // KIG_CLUSTER_REPRODUCE_DIFF16=1 goes on to show it.
    let mut after_primary = None;
    let mut leader = world.cluster.leader(WAIT).await?;
    if std::env::var("KIG_CLUSTER_REPRODUCE_DIFF16").as_deref() == Ok("1") {
        let (killed, primary_killed_at) = world.kill_leader().await?;
        leader = killed;
        stream
            .wait_acked_after(Some(primary_killed_at), 20, FAILOVER_WAIT)
            .await
            .with_context(|| {
                format!("after node {leader} (the primary) was killed, node {follower} restarted (DIFF-16)")
            })?;
        after_primary = stream.first_ack_after(primary_killed_at);
    }
    let (acks, sent, failures) = stream.stop().await?;
    let figures = audit(&world.bootstrap(), &topic, &acks).await?;
    println!(
        "cluster tier: follower (node {follower}) killed, then restarted (healthy again after {} ms), primary node {leader}: {sent} sent, {} acknowledged, {} failed, {} lost, {} duplicated; kill of the follower to next acknowledged record {}, kill of the primary after the restart (only with KIG_CLUSTER_REPRODUCE_DIFF16=1) to next acknowledged record {}",
        rejoined_in.as_millis(),
        figures.acknowledged,
        failures.len(),
        figures.lost.len(),
        figures.duplicated,
        millis(after_follower),
        millis(after_primary)
    );
    figures.check()?;
    world.stop().await;
    Ok(())
}

/// The longest wait the long-poll case's own Fetch asks for: the gateway's cap (LIMIT-FETCH-WAIT-1,
/// 30 s by default), three times the failover bound, so that an answer before it is the failover's
/// doing, not the wait's end.
const LONG_POLL_MAX_WAIT_MS: i32 = 30_000;

/// The Fetch version the long-poll case speaks (topic names, not ids).
const FETCH_V: i16 = 11;

/// A Fetch of partition 0 of `topic` from `offset`, waiting up to `max_wait_ms` for one byte.
fn long_poll(topic: &str, offset: i64, max_wait_ms: i32) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// What a Fetch answered for its one partition: the error code and whether records came.
fn long_poll_answer(response: &kafka_protocol::messages::FetchResponse) -> (i16, bool) {
    let partition = response.responses.first().and_then(|t| t.partitions.first());
    match partition {
        Some(p) => (
            if response.error_code != 0 {
                response.error_code
            } else {
                p.error_code
            },
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
        ),
        None => (response.error_code, false),
    }
}

/// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-2, FETCH-WAIT-1: consumers are blocked in Fetch
/// long-polls at the end of a partition when the primary is SIGKILLed: a librdkafka group member
/// (`fetch.wait.max.ms` 20 s) and a raw Fetch asking to wait 30 s. The raw Fetch gets an answer
/// (an error, or the records produced after the kill) well before its own wait ends, and the
/// member goes on to read every record produced after the kill and commits through the new
/// primary; every acknowledged record reads back.
async fn primary_killed_during_a_fetch_long_poll_answers_and_the_consumer_resumes(binary: &Path) -> anyhow::Result<()> {
    use kafka_protocol::messages::{ApiKey, FetchResponse};
    let world = World::start(binary).await?;
    let bootstrap = world.bootstrap();
    let topic = world.gateway.endpoint.unique_topic("cluster-long-poll");
    let group = world.gateway.endpoint.unique_topic("cluster-long-poll-group");
    create_topic(&world.gateway.endpoint, &topic, 1).await?;
    let mut before = ProducerStream::start(&bootstrap, &topic)?;
    before.wait_acked_after(None, 10, WAIT).await?;
    let (mut acks, _, _) = before.stop().await?;
    let end = acks.iter().map(|a| a.offset + 1).max().unwrap_or(0);

    let mut member = GroupConsumer::subscribe_with(
        "long-poller",
        &bootstrap,
        &group,
        &topic,
        "earliest",
        &[("fetch.wait.max.ms", "20000")],
    )?;
    member
        .wait_until("every record, then the end of the partition", |h| {
            h.has_all(0, 0..end) && h.eofs(0) > 0
        })
        .await?;
    member.commit(&[(0, end)]).await?;

    // The raw long poll at the end of the partition.
    let mut client = Client::connect(&bootstrap).await?;
    let request = long_poll(&topic, end, LONG_POLL_MAX_WAIT_MS);
    let sent_at = Instant::now();
    let mut poll = tokio::spawn(async move {
        let answer: anyhow::Result<FetchResponse> = client.request(ApiKey::Fetch, FETCH_V, &request).await;
        (answer, Instant::now())
    });
    // A check, not a synchronisation: a Fetch answered within a second, with nothing to read,
    // would be no long poll to interrupt, and the case fails.
    ensure!(
        tokio::time::timeout(Duration::from_secs(1), &mut poll).await.is_err(),
        "the Fetch at the end of the partition answered within a second instead of waiting"
    );
    let (leader, killed_at) = world.kill_leader().await?;
    // Records after the kill, from a stream that goes through the failover.
    let mut after = ProducerStream::start_from(&bootstrap, &topic, acks.len() as u64)?;
    let (answer, answered_at) = tokio::time::timeout(FAILOVER_WAIT, &mut poll)
        .await
        .map_err(|_| {
            anyhow!("the long-polling Fetch was not answered within {FAILOVER_WAIT:?} of the kill of node {leader} (the primary)")
        })?
        .context("the long-polling Fetch")?;
    let poll_answered = answered_at - killed_at;
    let answered = match answer {
        Ok(response) => match long_poll_answer(&response) {
            (0, true) => "records".to_string(),
            (0, false) => "no records".to_string(),
            (code, _) => format!("error {code}"),
        },
        Err(e) => format!("the connection failed: {e}"),
    };
    after
        .wait_acked_after(Some(killed_at), 20, FAILOVER_WAIT)
        .await
        .with_context(|| format!("after node {leader} (the primary) was killed"))?;
    let next_ack = after.first_ack_after(killed_at);
    let (after_acks, sent, failures) = after.stop().await?;
    acks.extend(after_acks);
    let high = acks.iter().map(|a| a.offset + 1).max().unwrap_or(0);
    member
        .wait_until("every record produced after the kill", |h| h.has_all(0, 0..high))
        .await
        .with_context(|| format!("the long-polling member after node {leader} (the primary) was killed"))?;
    let deadline = Instant::now() + FAILOVER_WAIT;
    let mut refusals = 0;
    loop {
        match member.commit(&[(0, high)]).await {
            Ok(()) => break,
            Err(_) if Instant::now() < deadline => refusals += 1,
            Err(e) => return Err(e.context(format!("{refusals} commits refused before"))),
        }
    }
    let committed = member.committed(&[0]).await?;
    let redelivered = member.history.offsets(0).len() - member.history.distinct(0).len();
    member.close().await?;
    let figures = audit(&bootstrap, &topic, &acks).await?;
    println!(
        "cluster tier: primary (node {leader}) killed during Fetch long-polls: the raw Fetch (max_wait {LONG_POLL_MAX_WAIT_MS} ms, sent {} ms before the kill) answered {answered} {} ms after the kill (failover bound {FAILOVER_TIMEOUT:?}); {} acknowledged ({sent} sent after the kill, {} failed), {} lost, {} duplicated, {redelivered} delivered twice to the member; kill to next acknowledged record {}; the member read every record and committed offset {high} after {refusals} refusal(s)",
        (killed_at - sent_at).as_millis(),
        poll_answered.as_millis(),
        figures.acknowledged,
        failures.len(),
        figures.lost.len(),
        figures.duplicated,
        millis(next_ack)
    );
    figures.check()?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(high)),
        "committed after the kill: {committed:?}, not {high}"
    );
    world.stop().await;
    Ok(())
}

/// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-2, CLUSTER-UNKNOWN-1: the failover gap over `kills`
/// primary kills, each under a librdkafka producer (acks=all, idempotence on): the time from the
/// SIGKILL of the primary to the next acknowledged record, each printed with min, median and max,
/// records lost (must be 0) and duplicated (must be 0: DELIVERY-3); no kill may stall the
/// producer (PRODUCER-UNKNOWN-3: a new primary's log read without the last acknowledged record
/// once made librdkafka's producer fail for good in 3 of 10 kills). Each kill is on a cluster of its own: after a killed
/// node's restart, a second primary kill on the same cluster stalls the partition plane (DIFF-16),
/// and without a restart two nodes of three are no majority.
async fn primary_killed_again_and_again_gives_the_failover_gap(binary: &Path, kills: usize) -> anyhow::Result<()> {
    ensure!(kills > 0, "--kills must be at least 1");
    let (mut gaps, mut pauses, mut stalls) = (Vec::new(), Vec::new(), Vec::new());
    let (mut acknowledged, mut lost, mut duplicated, mut failed) = (0, Vec::new(), 0, 0);
    for kill in 1..=kills {
        let world = World::start(binary).await?;
        let topic = world.gateway.endpoint.unique_topic("cluster-primary-kills");
        create_topic(&world.gateway.endpoint, &topic, 1).await?;
        let mut stream = ProducerStream::start(&world.bootstrap(), &topic)?;
        stream.wait_acked_after(None, 20, WAIT).await?;
        let (leader, killed_at) = world.kill_leader().await?;
        if let Err(e) = stream.wait_acked_after(Some(killed_at), 20, FAILOVER_WAIT).await {
            // Counted, and the series goes on on the next cluster; the case fails at the end.
            let (acks, _, failures) = stream.stop().await?;
            let figures = audit(&world.bootstrap(), &topic, &acks).await?;
            println!(
                "cluster tier: kill {kill} of {kills}: primary node {leader}: STALLED ({e}); {} acknowledged, {} failed, {} lost, {} duplicated",
                figures.acknowledged,
                failures.len(),
                figures.lost.len(),
                figures.duplicated
            );
            stalls.push(kill);
            acknowledged += figures.acknowledged;
            lost.extend(figures.lost);
            duplicated += figures.duplicated;
            failed += failures.len();
            world.stop().await;
            continue;
        }
        let gap = stream
            .first_ack_after(killed_at)
            .context("an acknowledgement after the kill, waited for")?;
        let pause = stream.longest_pause_after(killed_at).unwrap_or_default();
        let round_trip = stream.median_round_trip_before(killed_at).unwrap_or_default();
        let (acks, _, failures) = stream.stop().await?;
        let figures = audit(&world.bootstrap(), &topic, &acks).await?;
        println!(
            "cluster tier: kill {kill} of {kills}: primary node {leader}: gap {} ms (longest pause between acknowledgements {} ms; median round trip before the kill {} us); {} acknowledged, {} failed, {} lost, {} duplicated",
            gap.as_millis(),
            pause.as_millis(),
            round_trip.as_micros(),
            figures.acknowledged,
            failures.len(),
            figures.lost.len(),
            figures.duplicated
        );
        gaps.push(gap);
        pauses.push(pause);
        acknowledged += figures.acknowledged;
        lost.extend(figures.lost);
        duplicated += figures.duplicated;
        failed += failures.len();
        world.stop().await;
    }
    ensure!(
        !gaps.is_empty(),
        "no kill of {kills} was followed by an acknowledgement within {FAILOVER_WAIT:?}"
    );
    let (gap, pause) = (spread(&gaps), spread(&pauses));
    println!(
        "cluster tier: failover gap over {} of {kills} primary kills (stalled: {stalls:?}): min {} ms, median {} ms, max {} ms (each: {:?} ms); longest pause between acknowledgements: min {} ms, median {} ms, max {} ms (each: {:?} ms); {acknowledged} acknowledged, {failed} failed, {} lost, {duplicated} duplicated",
        gaps.len(),
        gap.0.as_millis(),
        gap.1.as_millis(),
        gap.2.as_millis(),
        gaps.iter().map(|g| g.as_millis()).collect::<Vec<_>>(),
        pause.0.as_millis(),
        pause.1.as_millis(),
        pause.2.as_millis(),
        pauses.iter().map(|g| g.as_millis()).collect::<Vec<_>>(),
        lost.len()
    );
    ensure!(lost.is_empty(), "acknowledged records missing: {lost:?}");
    // DELIVERY-3: the idempotent producer's retries after each kill are stored once.
    ensure!(
        duplicated == 0,
        "{duplicated} records of the idempotent producer stored more than once"
    );
    ensure!(
        stalls.is_empty(),
        "kills {stalls:?} of {kills} were followed by no 20 acknowledgements within {FAILOVER_WAIT:?}"
    );
    Ok(())
}

/// Min, median and max of `values` (not empty).
fn spread(values: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = values.to_vec();
    sorted.sort();
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    };
    (sorted[0], median, sorted[n - 1])
}
