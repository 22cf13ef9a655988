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
