//! Cases that start their own gateways rather than run against an endpoint: a lowered session
//! timeout, a restart on the same address, two gateways over one store, a shutdown during a
//! rebalance. Each gateway gets its backend from a [`BackendSource`], so the same cases run on
//! the embedded model (`tests/gateway_groups.rs`) and on a real Iggy server (the real-Iggy tier),
//! where every gateway has its own SDK connections, as separate gateway processes would.
//! No case sleeps to synchronise or asserts on timing: every wait ends on a condition and fails
//! after a bound.

use crate::cases::group_cases::support::*;
use crate::endpoint::{Endpoint, LocalGateway, LocalOptions};
use crate::runner::Report;
use anyhow::{ensure, Context as _};
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::Backend;
use rdkafka::Offset;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where each gateway a case starts gets its backend: a new handle on one shared store.
pub trait BackendSource: Send + Sync {
    type Backend: Backend;
    /// The backend for one more gateway over the store every earlier gateway used.
    fn backend_for_new_gateway(&self) -> impl Future<Output = anyhow::Result<Arc<Self::Backend>>> + Send;
}

/// A borrowed source serves as the source itself (the suite borrows the server it runs on).
impl<T: BackendSource> BackendSource for &T {
    type Backend = T::Backend;
    fn backend_for_new_gateway(&self) -> impl Future<Output = anyhow::Result<Arc<Self::Backend>>> + Send {
        (**self).backend_for_new_gateway()
    }
}

/// The embedded model is in-process: every gateway shares the one model (a restarted gateway
/// finds what the previous one stored, as it would in a real Iggy).
impl BackendSource for Arc<EmbeddedBackend> {
    type Backend = EmbeddedBackend;
    async fn backend_for_new_gateway(&self) -> anyhow::Result<Arc<EmbeddedBackend>> {
        Ok(self.clone())
    }
}

/// Declares the cases: `run` (every case whose name contains a filter, one line each) and
/// `NAMES` (for the test that each case has a test).
macro_rules! gateway_cases {
    ($($case:ident: [$($rule:literal),+ $(,)?]),+ $(,)?) => {
        /// Every case's name.
        pub const NAMES: &[&str] = &[$(stringify!($case)),+];

        /// Every case, for listing and for reporting it unrun.
        pub const CASES: &[crate::cases::ListedCase] = &[$(crate::cases::ListedCase { name: stringify!($case), rules: &[$($rule),+] }),+];

        /// The area these cases report under.
        pub const AREA: &str = "gateway";

        /// Runs every case `filter` selects, one line each.
        pub async fn run<S: BackendSource>(source: &S, filter: &crate::runner::Filter) -> Report {
            let mut report = Report::default();
            $(
                if filter.selects(stringify!($case)) {
                    let info = crate::runner::CaseInfo { area: AREA, name: stringify!($case), rules: &[$($rule),+], deviations: &[] };
                    report.run_case(info, async { $case(source).await.map(|()| crate::cases::Outcome::Passed) }).await;
                }
            )+
            report
        }
    };
}

gateway_cases!(
    member_that_stops_heartbeating_is_evicted_after_its_session_timeout: ["GROUP-TIMEOUT-1"],
    gateway_restart_members_rejoin_and_resume_without_loss: ["CO-ENCODE-1", "GROUP-COORDINATOR-1"],
    group_over_two_gateways_sees_one_coordinator_and_agrees_on_offsets: ["GROUP-COORDINATOR-1", "CO-MEMBER-1"],
    shutdown_answers_a_join_waiting_for_a_rebalance: ["PROTO-SHUTDOWN-1", "GROUP-TIMEOUT-1"],
    group_moves_to_a_surviving_gateway_and_back: ["GROUP-COORDINATOR-2", "GROUP-COORDINATOR-3", "CO-MEMBER-1"],
    idempotent_retry_after_a_gateway_restart_is_answered_from_the_log: ["PRODUCER-STATE-REBUILD-1", "PRODUCER-UNKNOWN-3", "DELIVERY-3"],
    idempotent_producer_whose_answers_are_lost_stores_each_record_once: ["DELIVERY-3", "PRODUCER-DUP-1"],
);

/// The probe period of the cases with peers that come and go: short, so a dead peer's groups
/// move within a second rather than the default three or four.
const CASE_PEER_PROBE_INTERVAL_MS: u64 = 200;

/// Free loopback addresses, all held at once while picking so they differ.
fn free_addresses(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    listeners.iter().map(|l| l.local_addr().expect("bound")).collect()
}

/// GROUP-TIMEOUT-1: a member that joins and syncs, then goes silent, is removed by the
/// coordinator's timer once its session lapses. Another member's JoinGroup waits for that
/// (the silent member would have to rejoin otherwise), so it completing at all, with the
/// newcomer leading alone, is the eviction; the rebalance timeout (60 s) is far beyond the
/// bound of the wait, so that cannot be what completes it.
pub async fn member_that_stops_heartbeating_is_evicted_after_its_session_timeout<S: BackendSource>(
    source: &S,
) -> anyhow::Result<()> {
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, LocalOptions::default()).await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    let group = &gateway.endpoint.unique_topic("evicted-after-session-timeout");

    // A: KIP-394 round trip, then a 1000 ms session, then silence.
    let mut a = Client::connect(&bootstrap).await?;
    let first = join_group(&mut a, group, "", 1000, 60_000, b"a").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED && !first.member_id.is_empty(),
        "first JoinGroup v{JOIN_GROUP_V} without a member id: error {}, member id {:?}; expected MEMBER_ID_REQUIRED ({MEMBER_ID_REQUIRED}) and an id",
        first.error_code,
        first.member_id.as_str()
    );
    let a_id = first.member_id.as_str().to_string();
    let joined = join_group(&mut a, group, &a_id, 1000, 60_000, b"a").await?;
    let a_members: Vec<&str> = joined.members.iter().map(|m| m.member_id.as_str()).collect();
    ensure!(
        joined.error_code == NONE
            && joined.member_id.as_str() == a_id
            && joined.leader.as_str() == a_id
            && a_members == [a_id.as_str()],
        "A's JoinGroup with its id: error {}, member {:?}, leader {:?}, members {a_members:?}",
        joined.error_code,
        joined.member_id.as_str(),
        joined.leader.as_str()
    );
    let a_generation = joined.generation_id;
    let synced = sync_group(&mut a, group, a_generation, &a_id, &[(&a_id, b"for-a")]).await?;
    ensure!(
        synced.error_code == NONE && synced.assignment.as_ref() == b"for-a",
        "A's SyncGroup: error {}, assignment {:?}",
        synced.error_code,
        synced.assignment
    );
    let beat = heartbeat(&mut a, group, a_generation, &a_id).await?;
    ensure!(beat == NONE, "A's heartbeat while it is a member: error {beat}");

    // B joins; A never answers the rebalance.
    let mut b = Client::connect(&bootstrap).await?;
    let first = join_group(&mut b, group, "", 30_000, 60_000, b"b").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED && !first.member_id.is_empty(),
        "B's first JoinGroup: error {}",
        first.error_code
    );
    let b_id = first.member_id.as_str().to_string();
    ensure!(b_id != a_id, "B was given A's member id {a_id}");
    let joined = tokio::time::timeout(WAIT, join_group(&mut b, group, &b_id, 30_000, 60_000, b"b"))
        .await
        .with_context(|| {
            format!("B's JoinGroup did not complete within {WAIT:?}: A (silent, 1000 ms session) was never evicted")
        })??;
    let b_members: Vec<&str> = joined.members.iter().map(|m| m.member_id.as_str()).collect();
    ensure!(
        joined.error_code == NONE
            && joined.leader.as_str() == b_id
            && b_members == [b_id.as_str()]
            && joined.generation_id > a_generation,
        "B's JoinGroup after A went silent: error {}, generation {} (A's was {a_generation}), leader {:?}, members {b_members:?}; expected B leading alone",
        joined.error_code,
        joined.generation_id,
        joined.leader.as_str()
    );
    let synced = sync_group(&mut b, group, joined.generation_id, &b_id, &[(&b_id, b"for-b")]).await?;
    ensure!(synced.error_code == NONE, "B's SyncGroup: error {}", synced.error_code);

    let described = describe_group(&mut b, group).await?;
    ensure!(
        described.group_state.as_str() == "Stable" && member_ids(&described) == [b_id.clone()],
        "DescribeGroups after the eviction: state {:?}, members {:?}; expected Stable with B only",
        described.group_state.as_str(),
        member_ids(&described)
    );
    let beat = heartbeat(&mut a, group, a_generation, &a_id).await?;
    ensure!(
        beat == UNKNOWN_MEMBER_ID,
        "the evicted member's heartbeat: error {beat}, expected UNKNOWN_MEMBER_ID ({UNKNOWN_MEMBER_ID})"
    );
    gateway.stop().await;
    Ok(())
}

/// CO-ENCODE-1, GROUP-COORDINATOR-1: the coordinator's state is in memory, the committed
/// offsets are in Iggy. A gateway restarted on the same address and backend knows no member:
/// the running consumer rejoins it, its commits go through the new gateway's offsets client,
/// and the group resumes at the committed offset.
pub async fn gateway_restart_members_rejoin_and_resume_without_loss<S: BackendSource>(
    source: &S,
) -> anyhow::Result<()> {
    let address = free_addresses(1)[0];
    let options = LocalOptions {
        listen: Some(address),
        ..LocalOptions::default()
    };
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, options.clone()).await?;
    let endpoint: Endpoint = gateway.endpoint.clone();
    let topic = endpoint.unique_topic("restart");
    let group = endpoint.unique_topic("restart-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 10).await?;

    let mut running = GroupConsumer::subscribe("running consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    running.wait_until("offsets 0..5", |h| h.has_all(0, 0..5)).await?;
    running.commit(&[(0, 5)]).await?;

    let assigned_before_restart = running.assignments_applied();
    gateway.stop().await;
    let seen_before_restart = running.history.0.len();
    // A new gateway process: its own connections to the same store.
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, options).await?;
    ensure!(
        gateway.endpoint.bootstrap == endpoint.bootstrap,
        "the restarted gateway listens on {}, not {}",
        gateway.endpoint.bootstrap,
        endpoint.bootstrap
    );

    let mut client = Client::connect(&endpoint.bootstrap).await?;
    let committed = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        committed.0 == 5,
        "OffsetFetch through the restarted gateway: {committed:?}, expected the committed 5"
    );
    // The new coordinator knows no member until the running consumer rejoins.
    let described = await_described(&mut client, &group, "the running consumer, rejoined", |g| {
        g.group_state.as_str() == "Stable" && g.members.len() == 1
    })
    .await?;
    // ...and, on its side, has applied the assignment of the new coordinator's generation.
    running
        .wait_reassigned(assigned_before_restart, "partition 0, after rejoining", |a| {
            a.contains(&0)
        })
        .await?;
    // A commit of the rejoined member goes through the new gateway's offsets client.
    running.commit(&[(0, 5)]).await?;
    let committed = running.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(5)),
        "the rejoined consumer (member {:?}) reads back {committed:?}, expected 5",
        member_ids(&described)
    );
    // No loss for the running consumer, and nothing below the committed offset once the
    // gateway restarted (a lost commit would reset it to the earliest offset).
    running.wait_until("offsets 0..10", |h| h.has_all(0, 0..10)).await?;
    let after: Vec<i64> = running.history.0[seen_before_restart..]
        .iter()
        .filter_map(|e| match e {
            Event::Record { offset, .. } => Some(*offset),
            Event::Eof(_) => None,
        })
        .collect();
    ensure!(
        after.iter().all(|o| *o >= 5),
        "after the restart the running consumer delivered {after:?}, below the committed offset 5"
    );
    running.close().await?;

    // A new member of the group starts at the committed offset: 5..10, no gap, nothing below 5.
    let mut next = GroupConsumer::subscribe("new consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    next.wait_until("offsets 5..10", |h| h.has_all(0, 5..10)).await?;
    let offsets = next.history.offsets(0);
    ensure!(
        offsets.first() == Some(&5) && next.history.distinct(0) == (5..10).collect::<BTreeSet<i64>>(),
        "after the restart the group's new member delivered {offsets:?}; expected 5..10 from 5"
    );
    next.close().await?;
    gateway.stop().await;
    Ok(())
}

/// GROUP-COORDINATOR-1, CO-MEMBER-1: two gateways over one Iggy agree on every group's
/// coordinator; a consumer bootstrapped on the other one is sent to it; offsets committed
/// through the coordinator read the same through either gateway; the other gateway refuses
/// commits and joins for the group with NOT_COORDINATOR.
pub async fn group_over_two_gateways_sees_one_coordinator_and_agrees_on_offsets<S: BackendSource>(
    source: &S,
) -> anyhow::Result<()> {
    // Two Kafka listeners, then their two peer channels.
    let addresses = free_addresses(4);
    let mut gateways = Vec::new();
    for index in 0..2 {
        gateways.push(peer_gateway(source, &addresses, index).await?);
    }
    let bootstraps: Vec<String> = gateways.iter().map(|g| g.endpoint.bootstrap.clone()).collect();
    let mut clients = Vec::new();
    for b in &bootstraps {
        clients.push(Client::connect(b).await?);
    }

    // Every group has one coordinator, whichever gateway is asked, at its advertised address.
    let mut by_node: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for n in 0..16 {
        let group = format!("two-gateways-{n}");
        let mut answers = Vec::new();
        for client in &mut clients {
            let a = find_coordinator(client, &group, KEY_TYPE_GROUP).await?;
            ensure!(a.error_code == NONE, "FindCoordinator {group}: error {}", a.error_code);
            answers.push((a.node_id.0, format!("{}:{}", a.host.as_str(), a.port)));
        }
        ensure!(
            answers[0] == answers[1],
            "FindCoordinator {group}: gateway 1 answers {:?}, gateway 2 answers {:?}",
            answers[0],
            answers[1]
        );
        let (node, address) = answers.swap_remove(0);
        ensure!(
            (1..=2).contains(&node) && address == bootstraps[node as usize - 1],
            "FindCoordinator {group}: node {node} at {address}; the gateways are 1={} and 2={}",
            bootstraps[0],
            bootstraps[1]
        );
        by_node.entry(node).or_default().push(group);
    }
    ensure!(by_node.len() == 2, "16 groups all went to one gateway: {by_node:?}");

    // A group coordinated by gateway 2, and a consumer that only knows gateway 1.
    let group = by_node[&2][0].clone();
    let endpoint_1 = gateways[0].endpoint.clone();
    let topic = endpoint_1.unique_topic("two-gateways");
    create_topic(&endpoint_1, &topic, 1).await?;
    produce_at(&endpoint_1, &topic, 0, 0, 6).await?;
    let mut consumer = GroupConsumer::subscribe("consumer", &bootstraps[0], &group, &topic, "earliest")?;
    consumer.wait_until("offsets 0..6", |h| h.has_all(0, 0..6)).await?;
    consumer.commit(&[(0, 4)]).await?;

    for (i, client) in clients.iter_mut().enumerate() {
        let fetched = fetch_one(client, &group, &topic, 0).await?;
        ensure!(
            fetched.0 == 4 && fetched.3 == NONE,
            "OffsetFetch through gateway {}: (offset, error) ({}, {}), expected (4, 0)",
            i + 1,
            fetched.0,
            fetched.3
        );
    }
    let described = describe_group(&mut clients[1], &group).await?;
    ensure!(
        described.group_state.as_str() == "Stable" && described.members.len() == 1,
        "DescribeGroups through the coordinator: state {:?}, members {:?}",
        described.group_state.as_str(),
        member_ids(&described)
    );

    // The other gateway refuses what only the coordinator may do.
    let answers = offset_commit(&mut clients[0], &group, -1, "", &[(&topic, 0, 2)]).await?;
    ensure!(
        answers.iter().map(|a| a.2).collect::<Vec<_>>() == [NOT_COORDINATOR],
        "a commit through the gateway that does not coordinate {group}: {answers:?}, expected NOT_COORDINATOR ({NOT_COORDINATOR})"
    );
    let joined = join_group(&mut clients[0], &group, "", 6000, 10_000, b"m").await?;
    ensure!(
        joined.error_code == NOT_COORDINATOR,
        "JoinGroup through the gateway that does not coordinate {group}: error {}, expected NOT_COORDINATOR ({NOT_COORDINATOR})",
        joined.error_code
    );
    let described = describe_group(&mut clients[0], &group).await?;
    ensure!(
        described.error_code == NOT_COORDINATOR,
        "DescribeGroups through the gateway that does not coordinate {group}: error {}",
        described.error_code
    );
    let fetched = fetch_one(&mut clients[0], &group, &topic, 0).await?;
    ensure!(fetched.0 == 4, "the refused commit changed the offset to {}", fetched.0);

    // And the coordinator keeps taking the member's commits.
    consumer.commit(&[(0, 6)]).await?;
    for (i, client) in clients.iter_mut().enumerate() {
        let fetched = fetch_one(client, &group, &topic, 0).await?;
        ensure!(
            fetched.0 == 6,
            "OffsetFetch through gateway {} after committing 6: {}",
            i + 1,
            fetched.0
        );
    }
    consumer.close().await?;
    for gateway in gateways {
        gateway.stop().await;
    }
    Ok(())
}

/// Starts gateway `index` (node id `index + 1`) of `addresses` (the Kafka listeners, then as
/// many peer channels), each knowing all of them as peers, and returns once it coordinates its
/// own groups (GROUP-COORDINATOR-4).
async fn peer_gateway<S: BackendSource>(
    source: &S,
    addresses: &[SocketAddr],
    index: usize,
) -> anyhow::Result<LocalGateway<S::Backend>> {
    // GROUP-COORDINATOR-6: each gateway's peer channel apart from its Kafka listener.
    let (kafka, channels) = addresses.split_at(addresses.len() / 2);
    let peers = kafka
        .iter()
        .zip(channels)
        .enumerate()
        .map(|(i, (a, c))| format!("{}={a}/{}", i + 1, c.port()))
        .collect();
    let gateway = LocalGateway::serve(
        source.backend_for_new_gateway().await?,
        LocalOptions {
            listen: Some(kafka[index]),
            instance_id: Some(index as u16 + 1),
            peers,
            peer_probe_interval_ms: Some(CASE_PEER_PROBE_INTERVAL_MS),
            extra_args: vec![
                "--peer-listen".into(),
                channels[index].to_string(),
                "--peer-secret".into(),
                crate::cases::hostile_cases::PEER_SECRET.into(),
            ],
            ..LocalOptions::default()
        },
    )
    .await?;
    gateway.warmed_up().await?;
    Ok(gateway)
}

/// Asks `client` for `group`'s coordinator until it names `node`.
async fn await_coordinator(client: &mut Client, group: &str, node: i32, what: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = find_coordinator(client, group, KEY_TYPE_GROUP).await?;
        if answer.error_code == NONE && answer.node_id.0 == node {
            return Ok(());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{what}: FindCoordinator {group} still answers node {} (error {}) after {WAIT:?}, expected node {node}",
            answer.node_id.0,
            answer.error_code
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// GROUP-COORDINATOR-2, GROUP-COORDINATOR-3, CO-MEMBER-1: a group's coordinating gateway dies;
/// the surviving gateway takes the group, the running consumer (bootstrapped with both) rejoins
/// there and goes on from its committed offset, and its commits land through the survivor. When
/// the dead gateway is back on its address, the group moves back: the survivor answers
/// NOT_COORDINATOR for it, and the consumer rejoins the returned gateway and commits there.
pub async fn group_moves_to_a_surviving_gateway_and_back<S: BackendSource>(source: &S) -> anyhow::Result<()> {
    // Two Kafka listeners, then their two peer channels.
    let addresses = free_addresses(4);
    let survivor = peer_gateway(source, &addresses, 0).await?;
    let mortal = peer_gateway(source, &addresses, 1).await?;
    let bootstrap = format!("{},{}", addresses[0], addresses[1]);
    let mut to_survivor = Client::connect(&survivor.endpoint.bootstrap).await?;
    // A group the second gateway (node 2) coordinates while both are up.
    let mut group = None;
    for n in 0..64 {
        let candidate = survivor.endpoint.unique_topic(&format!("moving-{n}"));
        let answer = find_coordinator(&mut to_survivor, &candidate, KEY_TYPE_GROUP).await?;
        if answer.error_code == NONE && answer.node_id.0 == 2 {
            group = Some(candidate);
            break;
        }
    }
    let group = group.context("none of 64 groups hashed to node 2")?;
    let endpoint = survivor.endpoint.clone();
    let topic = endpoint.unique_topic("moving");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 12).await?;

    let mut consumer = GroupConsumer::subscribe("consumer", &bootstrap, &group, &topic, "earliest")?;
    consumer.wait_until("offsets 0..4", |h| h.has_all(0, 0..4)).await?;
    consumer.commit(&[(0, 4)]).await?;
    let assigned = consumer.assignments_applied();

    // Node 2 dies: the survivor's probes find it gone and the group moves to node 1.
    mortal.stop().await;
    await_coordinator(&mut to_survivor, &group, 1, "after node 2 stopped").await?;
    await_described(
        &mut to_survivor,
        &group,
        "the consumer, rejoined on the survivor",
        |g| g.group_state.as_str() == "Stable" && g.members.len() == 1,
    )
    .await?;
    consumer
        .wait_reassigned(assigned, "partition 0, on the survivor", |a| a.contains(&0))
        .await?;
    consumer.commit(&[(0, 8)]).await?;
    let fetched = fetch_one(&mut to_survivor, &group, &topic, 0).await?;
    ensure!(
        fetched.0 == 8,
        "a commit of 8 through the survivor reads back {}",
        fetched.0
    );
    consumer.wait_until("offsets 0..12", |h| h.has_all(0, 0..12)).await?;
    let assigned = consumer.assignments_applied();

    // Node 2 returns on its address: the group moves back, and the survivor lets go of it.
    let returned = peer_gateway(source, &addresses, 1).await?;
    await_coordinator(&mut to_survivor, &group, 2, "after node 2 returned").await?;
    let described = describe_group(&mut to_survivor, &group).await?;
    ensure!(
        described.error_code == NOT_COORDINATOR,
        "DescribeGroups {group} through the survivor once node 2 is back: error {}, expected NOT_COORDINATOR ({NOT_COORDINATOR})",
        described.error_code
    );
    let mut to_returned = Client::connect(&returned.endpoint.bootstrap).await?;
    await_described(
        &mut to_returned,
        &group,
        "the consumer, rejoined on the returned gateway",
        |g| g.group_state.as_str() == "Stable" && g.members.len() == 1,
    )
    .await?;
    consumer
        .wait_reassigned(assigned, "partition 0, on the returned gateway", |a| a.contains(&0))
        .await?;
    consumer.commit(&[(0, 12)]).await?;
    for (name, client) in [("survivor", &mut to_survivor), ("returned gateway", &mut to_returned)] {
        let fetched = fetch_one(client, &group, &topic, 0).await?;
        ensure!(
            fetched.0 == 12,
            "OffsetFetch through the {name} after committing 12: {}",
            fetched.0
        );
    }
    consumer.close().await?;
    returned.stop().await;
    survivor.stop().await;
    Ok(())
}

/// PROTO-SHUTDOWN-1, GROUP-TIMEOUT-1: a graceful shutdown finishes the requests already read,
/// and a JoinGroup waiting for a rebalance is one of them. The other members' connections close
/// with the shutdown, so nobody will rejoin; only the coordinator can end the wait. Kafka
/// answers the requests of groups it stops coordinating with NOT_COORDINATOR, which sends the
/// clients to look the coordinator up again (COORDINATOR_NOT_AVAILABLE would do the same).
pub async fn shutdown_answers_a_join_waiting_for_a_rebalance<S: BackendSource>(source: &S) -> anyhow::Result<()> {
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, LocalOptions::default()).await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    let group = gateway.endpoint.unique_topic("shutdown-during-a-rebalance");
    let group = group.as_str();
    // A: a stable member with a session far longer than the test.
    let mut a = Client::connect(&bootstrap).await?;
    let first = join_group(&mut a, group, "", 60_000, 60_000, b"a").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "A's first JoinGroup: error {}",
        first.error_code
    );
    let a_id = first.member_id.as_str().to_string();
    let joined = join_group(&mut a, group, &a_id, 60_000, 60_000, b"a").await?;
    ensure!(joined.error_code == NONE, "A's JoinGroup: error {}", joined.error_code);
    let synced = sync_group(&mut a, group, joined.generation_id, &a_id, &[(&a_id, b"a")]).await?;
    ensure!(synced.error_code == NONE, "A's SyncGroup: error {}", synced.error_code);

    // B joins and waits for A to rejoin, which it never does.
    let mut b = Client::connect(&bootstrap).await?;
    let first = join_group(&mut b, group, "", 60_000, 60_000, b"b").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "B's first JoinGroup: error {}",
        first.error_code
    );
    let b_id = first.member_id.as_str().to_string();
    let b_group = group.to_string();
    let b_join = tokio::spawn(async move { join_group(&mut b, &b_group, &b_id, 60_000, 60_000, b"b").await });
    // B's JoinGroup is parked once the group prepares a rebalance, which A's heartbeat shows.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match heartbeat(&mut a, group, joined.generation_id, &a_id).await? {
            REBALANCE_IN_PROGRESS => break,
            NONE if tokio::time::Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            code => anyhow::bail!("A's heartbeat after B joined: error {code}"),
        }
    }

    tokio::time::timeout(WAIT, gateway.stop()).await.with_context(|| {
        format!(
            "the gateway's graceful shutdown did not finish within {WAIT:?} while a JoinGroup waited for a rebalance"
        )
    })?;
    let answered = tokio::time::timeout(WAIT, b_join)
        .await
        .context("B's parked JoinGroup got no answer after the shutdown")?
        .context("B's join task")?
        .context("B's parked JoinGroup: the connection closed without an answer")?;
    ensure!(
        [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE].contains(&answered.error_code),
        "B's JoinGroup parked at shutdown: error {}, expected NOT_COORDINATOR ({NOT_COORDINATOR}) or COORDINATOR_NOT_AVAILABLE ({COORDINATOR_NOT_AVAILABLE})",
        answered.error_code
    );
    Ok(())
}

/// One batch of `count` records of idempotent producer `pid` at epoch 0 from `sequence`, Produced
/// (v9, acks -1) to partition 0 of `topic`: the answer's error code and base offset.
async fn produce_idempotent(
    client: &mut Client,
    topic: &str,
    pid: i64,
    sequence: i32,
    count: usize,
) -> anyhow::Result<(i16, i64)> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use kig_core::batch::{encode_batch, Record, RecordBatch};
    let records = (0..count)
        .map(|i| Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: i as i32,
            key: None,
            value: Some(bytes::Bytes::from(format!("{pid}-{}", sequence as usize + i))),
            headers: vec![],
        })
        .collect();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let mut batch = RecordBatch::from_producer(kig_core::compression::Compression::None, now_ms, records);
    batch.header.producer_id = pid;
    batch.header.producer_epoch = 0;
    batch.header.base_sequence = sequence;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(encode_batch(&batch)?))])]);
    let response: ProduceResponse = client.request(ApiKey::Produce, 9, &request).await?;
    let partition = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .context("a Produce answer without its partition")?;
    Ok((partition.error_code, partition.base_offset))
}

/// PRODUCER-STATE-REBUILD-1, DELIVERY-3: an idempotent producer whose answers were lost retries
/// on a restarted gateway, which has no producer state in memory: the retries are answered with
/// the offsets of the first writes, read back from the log, and nothing is stored twice; the
/// producer then goes on in sequence; a gap is retried while the state is only what was read
/// back (PRODUCER-UNKNOWN-3), then refused.
pub async fn idempotent_retry_after_a_gateway_restart_is_answered_from_the_log<S: BackendSource>(
    source: &S,
) -> anyhow::Result<()> {
    let address = free_addresses(1)[0];
    let options = LocalOptions {
        listen: Some(address),
        ..LocalOptions::default()
    };
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, options.clone()).await?;
    let endpoint: Endpoint = gateway.endpoint.clone();
    let topic = endpoint.unique_topic("idempotent-restart");
    create_topic(&endpoint, &topic, 1).await?;
    let pid = {
        use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse};
        let mut client = Client::connect(&endpoint.bootstrap).await?;
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000);
        let response: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 4, &request).await?;
        ensure!(
            response.error_code == 0,
            "InitProducerId: error {}",
            response.error_code
        );
        response.producer_id.0
    };
    let mut client = Client::connect(&endpoint.bootstrap).await?;
    let first = [(0, 4, 0), (4, 4, 4), (8, 2, 8)];
    for (sequence, count, offset) in first {
        let answer = produce_idempotent(&mut client, &topic, pid, sequence, count).await?;
        ensure!(
            answer == (0, offset),
            "sequence {sequence} before the restart: {answer:?}, expected (0, {offset})"
        );
    }
    gateway.stop().await;
    // A new gateway process over the same store: it must read the producer's state back.
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, options).await?;
    let mut client = Client::connect(&endpoint.bootstrap).await?;
    // The answers the producer lost: every one of its last batches, resent.
    for (sequence, count, offset) in first {
        let answer = produce_idempotent(&mut client, &topic, pid, sequence, count).await?;
        ensure!(
            answer == (0, offset),
            "the retry of sequence {sequence} after the restart: {answer:?}, expected (0, {offset}) without a write"
        );
    }
    // PRODUCER-UNKNOWN-3: against a state just read back, a gap may be the log lagging: retried.
    let gap = produce_idempotent(&mut client, &topic, pid, 11, 1).await?;
    ensure!(
        gap.0 == 6,
        "sequence 11 after 9 (a gap), the state just read back: {gap:?}, expected error 6"
    );
    let next = produce_idempotent(&mut client, &topic, pid, 10, 1).await?;
    ensure!(
        next == (0, 10),
        "sequence 10, which follows: {next:?}, expected (0, 10)"
    );
    // Stored where the read ended: the state is whole, and a gap is refused for good.
    let gap = produce_idempotent(&mut client, &topic, pid, 12, 1).await?;
    ensure!(gap.0 == 45, "sequence 12 after 10 (a gap): {gap:?}, expected error 45");
    let end = {
        use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 5, &request).await?;
        response.topics[0].partitions[0].offset
    };
    ensure!(
        end == 11,
        "the partition ends at {end}, expected 11: a retry was stored twice"
    );
    gateway.stop().await;
    Ok(())
}

/// Records the answer-losing case sends, and the Produce requests (by ordinal) whose answers the
/// proxy loses: four, as in issue 51's trial.
const LOST_ANSWERS_RECORDS: usize = 3_000;
const LOST_ANSWERS_AT: [usize; 4] = [5, 25, 60, 120];

/// DELIVERY-3, PRODUCER-DUP-1: librdkafka with `enable.idempotence=true` and acks=all produces
/// 3,000 records to one partition through a proxy that swallows the answers to four Produce
/// requests and closes those connections; librdkafka retries what it did not hear back about on
/// a new connection, every record is acknowledged, and the partition holds each record once.
/// (The same run with idempotence off stores the retried batches twice.)
pub async fn idempotent_producer_whose_answers_are_lost_stores_each_record_once<S: BackendSource>(
    source: &S,
) -> anyhow::Result<()> {
    use crate::answer_loss_proxy::AnswerLossProxy;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use rdkafka::ClientConfig;
    use rdkafka::Message;
    let listen = free_addresses(1)[0];
    let proxy = AnswerLossProxy::start(listen, LOST_ANSWERS_AT.into_iter().collect()).await?;
    // Metadata names the proxy, so every connection of the client goes through it.
    let options = LocalOptions {
        listen: Some(listen),
        advertised: Some(proxy.address.to_string()),
        ..LocalOptions::default()
    };
    let gateway = LocalGateway::serve(source.backend_for_new_gateway().await?, options).await?;
    let topic = gateway.endpoint.unique_topic("idempotent-lost-answers");
    create_topic(&gateway.endpoint, &topic, 1).await?;
    let bootstrap = proxy.address.to_string();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("batch.num.messages", "10")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the idempotent producer")?;
    let mut deliveries = tokio::task::JoinSet::new();
    for i in 0..LOST_ANSWERS_RECORDS {
        let (producer, topic) = (producer.clone(), topic.clone());
        deliveries.spawn(async move {
            let payload = format!("record-{i}");
            producer
                .send(FutureRecord::<(), _>::to(&topic).partition(0).payload(&payload), WAIT)
                .await
                .map(|delivery| delivery.offset)
                .map_err(|(e, _)| anyhow::anyhow!("record {i}: {e}"))
        });
    }
    let mut offsets = Vec::with_capacity(LOST_ANSWERS_RECORDS);
    while let Some(delivered) = deliveries.join_next().await {
        offsets.push(delivered.context("a delivery task")??);
    }
    drop(producer);
    ensure!(
        proxy.answers_lost() == LOST_ANSWERS_AT.len(),
        "the proxy lost {} answers of {} Produce requests, expected {}: the case did not test retries",
        proxy.answers_lost(),
        proxy.produce_requests(),
        LOST_ANSWERS_AT.len()
    );
    let distinct: BTreeSet<i64> = offsets.iter().copied().collect();
    ensure!(
        distinct.len() == LOST_ANSWERS_RECORDS,
        "{} records acknowledged at {} distinct offsets",
        LOST_ANSWERS_RECORDS,
        distinct.len()
    );
    let (bootstrap, read_topic) = (gateway.endpoint.bootstrap.clone(), topic.clone());
    let stored: Vec<String> = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<String>> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", format!("{read_topic}-reader"))
            .set("enable.auto.commit", "false")
            .create()?;
        let (_, high) = consumer.fetch_watermarks(&read_topic, 0, WAIT)?;
        let mut list = rdkafka::TopicPartitionList::new();
        list.add_partition_offset(&read_topic, 0, Offset::Beginning)?;
        consumer.assign(&list)?;
        let deadline = std::time::Instant::now() + WAIT;
        let mut read = Vec::new();
        let mut next = 0;
        while next < high {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "read {} of {high} records within {WAIT:?}",
                read.len()
            );
            if let Some(Ok(m)) = consumer.poll(std::time::Duration::from_millis(200)) {
                next = m.offset() + 1;
                read.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            }
        }
        Ok(read)
    })
    .await??;
    let copies: BTreeMap<&str, usize> = stored.iter().fold(BTreeMap::new(), |mut m, v| {
        *m.entry(v.as_str()).or_default() += 1;
        m
    });
    let duplicated: Vec<&&str> = copies.iter().filter(|(_, n)| **n > 1).map(|(v, _)| v).collect();
    ensure!(
        duplicated.is_empty() && stored.len() == LOST_ANSWERS_RECORDS && copies.len() == LOST_ANSWERS_RECORDS,
        "the partition holds {} records, {} distinct, of {} sent; stored more than once: {:?}",
        stored.len(),
        copies.len(),
        LOST_ANSWERS_RECORDS,
        &duplicated[..duplicated.len().min(10)]
    );
    println!(
        "gateway: {LOST_ANSWERS_RECORDS} records through {} Produce requests, {} answers lost: {} stored, 0 duplicated",
        proxy.produce_requests(),
        proxy.answers_lost(),
        stored.len()
    );
    gateway.stop().await;
    Ok(())
}
