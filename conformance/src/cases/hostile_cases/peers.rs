//! Peer gateways under a client flood (issue 50, row 4). Two gateways probe each other to decide
//! which one coordinates each group (GROUP-COORDINATOR-2); a flood of live client connections
//! filling one gateway's connection table, from many addresses, must not make its peer count it
//! down and take its groups while it keeps them.

use super::launch::{free_addresses, Launched, Launcher};
use super::{Probes, Watchdog, LIVENESS};
use crate::cases::group_cases::support::{
    describe_group, find_coordinator, heartbeat, join_group, sync_group, Client, KEY_TYPE_GROUP, MEMBER_ID_REQUIRED,
    NONE, NOT_COORDINATOR, POLL_INTERVAL, WAIT,
};
use crate::cases::{api_versions_request, Outcome};
use anyhow::{bail, ensure, Context};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_wire_client::WireClient;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The flooded gateway's connection table: small, so that the flood fills it quickly.
const FLOOD_TABLE: usize = 200;
/// Connections the flood tries beyond the table before it gives up filling it.
const FLOOD_SPARE: usize = 64;
/// The loopback addresses the flood comes from (127.0.1.1 on), so that no per-address quota
/// stops it: the table fills from many clients, as a botnet's would.
const FLOOD_ADDRESSES: u8 = 100;
/// How often each flood connection speaks: well within the 10 s of silence after which a
/// connection may be shed for a newcomer (LIMIT-CONNECTIONS-SHED-1), so none is.
pub(super) const FLOOD_PING: Duration = Duration::from_secs(1);
/// The peers' probe period: short, so that the case sees many rounds in little time.
const PROBE_INTERVAL_MS: u64 = 200;
/// Groups whose coordinator the case watches.
const GROUPS: usize = 16;
/// Probe rounds the case lets pass under the flood: twice the failed probes that count a peer
/// down (GROUP-COORDINATOR-2, default 3), and one more.
const FLOODED_ROUNDS: u64 = 2 * kafka_iggy_gateway::config::DEFAULT_PEER_DOWN_AFTER_PROBES as u64 + 1;

/// The secret the case's gateways share (GROUP-COORDINATOR-7).
pub const PEER_SECRET: &str = "kig-hostile-peers-secret";

/// The flags of gateway `index` (node id `index + 1`) of a peered pair whose Kafka listeners
/// are `kafka` and peer channels `channels` (GROUP-COORDINATOR-6).
pub fn peer_flags(index: usize, kafka: &[SocketAddr], channels: &[SocketAddr]) -> Vec<String> {
    let peers: Vec<String> = kafka
        .iter()
        .zip(channels)
        .enumerate()
        .map(|(i, (a, c))| format!("{}={a}/{}", i + 1, c.port()))
        .collect();
    vec![
        "--instance-id".into(),
        (index + 1).to_string(),
        "--peers".into(),
        peers.join(","),
        "--peer-listen".into(),
        channels[index].to_string(),
        "--peer-secret".into(),
        PEER_SECRET.into(),
        "--peer-probe-interval-ms".into(),
        PROBE_INTERVAL_MS.to_string(),
    ]
}

/// Waits until `gateway` has run `rounds` probe rounds since it started.
async fn await_rounds(gateway: &impl Launched, rounds: u64, what: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ran = gateway.probe_rounds().await?;
        if ran >= rounds {
            return Ok(());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{what}: {ran} probe rounds after {WAIT:?}, expected {rounds}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The coordinator `client`'s gateway names for each of `groups`.
async fn coordinators(client: &mut Client, groups: &[String]) -> anyhow::Result<BTreeMap<String, i32>> {
    let mut named = BTreeMap::new();
    for group in groups {
        let answer = find_coordinator(client, group, KEY_TYPE_GROUP).await?;
        ensure!(
            answer.error_code == NONE,
            "FindCoordinator {group}: error {}",
            answer.error_code
        );
        named.insert(group.clone(), answer.node_id.0);
    }
    Ok(named)
}

/// A member of `group`, joined and synced on `client` (its coordinator): its id and generation.
async fn join_member(client: &mut Client, group: &str) -> anyhow::Result<(String, i32)> {
    let session = super::MEMBER_SESSION_TIMEOUT_MS;
    let first = join_group(client, group, "", session, session, b"peer-flood").await?;
    let joined = if first.error_code == MEMBER_ID_REQUIRED {
        join_group(client, group, first.member_id.as_str(), session, session, b"peer-flood").await?
    } else {
        first
    };
    ensure!(
        joined.error_code == NONE,
        "JoinGroup {group}: error {}",
        joined.error_code
    );
    let id = joined.member_id.as_str().to_string();
    let synced = sync_group(client, group, joined.generation_id, &id, &[(&id, b"")]).await?;
    ensure!(
        synced.error_code == NONE,
        "SyncGroup {group}: error {}",
        synced.error_code
    );
    Ok((id, joined.generation_id))
}

/// A connection from `source` to `target`, answered once: `None` when the gateway closed it
/// instead (its table full).
pub(super) async fn speak_from(source: Ipv4Addr, target: SocketAddr) -> anyhow::Result<Option<Client>> {
    let socket = TcpSocket::new_v4()?;
    socket
        .bind(SocketAddr::new(IpAddr::V4(source), 0))
        .with_context(|| format!("binding {source}"))?;
    let stream = match tokio::time::timeout(LIVENESS, socket.connect(target)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(_)) => return Ok(None),
        Err(_) => bail!("connecting from {source} to {target}: not answered within {LIVENESS:?}"),
    };
    let mut client = WireClient::new(stream);
    let answer = tokio::time::timeout(
        LIVENESS,
        client.request::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 3, &api_versions_request()),
    )
    .await
    .with_context(|| format!("an ApiVersions from {source}: neither answered nor closed within {LIVENESS:?}"))?;
    Ok(answer.ok().map(|_| client))
}

/// The flood's source address number `n`, from 127.0.1.1 on, over [`FLOOD_ADDRESSES`].
fn flood_source(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1, (n % usize::from(FLOOD_ADDRESSES)) as u8 + 1)
}

/// Live connections filling a connection table: each speaks every [`FLOOD_PING`] until stopped.
struct Flood {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    held: usize,
    refused: usize,
}

impl Flood {
    /// Opens connections to `target` until it refuses some or `FLOOD_TABLE + FLOOD_SPARE`
    /// are tried.
    async fn fill(target: SocketAddr) -> anyhow::Result<Self> {
        let (stop, stopped) = watch::channel(false);
        let mut flood = Flood {
            stop,
            tasks: JoinSet::new(),
            held: 0,
            refused: 0,
        };
        for n in 0..FLOOD_TABLE + FLOOD_SPARE {
            match speak_from(flood_source(n), target).await? {
                Some(client) => {
                    flood.held += 1;
                    flood.tasks.spawn(keep_speaking(client, stopped.clone()));
                }
                None => {
                    flood.refused += 1;
                    // A few refusals in a row: the table is full.
                    if flood.refused >= 4 {
                        break;
                    }
                }
            }
        }
        Ok(flood)
    }

    async fn stop(mut self) {
        self.stop.send_replace(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Sends an ApiVersions every [`FLOOD_PING`] until `stop`, or until the gateway closes it.
pub(super) async fn keep_speaking(mut client: WireClient<TcpStream>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(FLOOD_PING) => {}
        }
        let answer: anyhow::Result<ApiVersionsResponse> =
            client.request(ApiKey::ApiVersions, 3, &api_versions_request()).await;
        if answer.is_err() {
            return;
        }
    }
}

/// Issue 50, row 4: two peered gateways; live connections from 100 addresses fill the second
/// one's connection table (200 places), so that it closes every newcomer at once. For seven
/// probe rounds of the first gateway under the flood (twice the three failed probes that count
/// a peer down, and one), no group moves: the first gateway names the same coordinator for
/// each of 16 groups as before, does not take the flooded gateway's group (DescribeGroups there
/// answers NOT_COORDINATOR), and the member the flooded gateway coordinates keeps its place.
/// A well-behaved client of the flooded gateway, connected before the flood, is served
/// throughout (the hostile watchdog).
pub async fn hostile_connection_flood_on_a_peer_moves_no_group<L: Launcher>(launcher: &L) -> anyhow::Result<Outcome> {
    let addresses = free_addresses(4)?;
    let (kafka, channels) = addresses.split_at(2);
    let other = launcher.start(kafka[0], peer_flags(0, kafka, channels)).await?;
    let mut flags = peer_flags(1, kafka, channels);
    flags.extend(["--max-connections".to_string(), FLOOD_TABLE.to_string()]);
    let flooded = launcher.start(kafka[1], flags).await?;
    let warm = u64::from(kafka_iggy_gateway::peers::WARM_UP_ROUNDS) + 1;
    await_rounds(&other, warm, "the first gateway warming up").await?;
    await_rounds(&flooded, warm, "the flooded gateway warming up").await?;

    let mut to_other = Client::connect(&other.endpoint().bootstrap).await?;
    let mut to_flooded = Client::connect(&flooded.endpoint().bootstrap).await?;
    let groups: Vec<String> = (0..GROUPS)
        .map(|n| other.endpoint().unique_topic(&format!("kig-peer-flood-{n}")))
        .collect();
    let before = coordinators(&mut to_other, &groups).await?;
    let seen_by_flooded = coordinators(&mut to_flooded, &groups).await?;
    ensure!(
        before == seen_by_flooded,
        "before the flood the gateways disagree on coordinators: {before:?} against {seen_by_flooded:?}"
    );
    let group = before
        .iter()
        .find(|(_, node)| **node == 2)
        .map(|(g, _)| g.clone())
        .with_context(|| format!("none of {GROUPS} groups is coordinated by the flooded gateway: {before:?}"))?;
    let (member, generation) = join_member(&mut to_flooded, &group).await?;

    let watchdog = Watchdog::start(flooded.endpoint(), Probes::SERVING).await?;
    let target: SocketAddr = flooded.endpoint().bootstrap.parse()?;
    watchdog
        .guard(async {
            let flood = Flood::fill(target).await?;
            ensure!(
                flood.refused > 0,
                "{} flood connections were all served: the table of {FLOOD_TABLE} never filled",
                flood.held
            );
            let start = other.probe_rounds().await?;
            let deadline = tokio::time::Instant::now() + WAIT;
            while other.probe_rounds().await? < start + FLOODED_ROUNDS {
                ensure!(
                    tokio::time::Instant::now() < deadline,
                    "the first gateway ran no {FLOODED_ROUNDS} probe rounds within {WAIT:?}"
                );
                let code = heartbeat(&mut to_flooded, &group, generation, &member).await?;
                ensure!(code == NONE, "the member's heartbeat under the flood: error {code}");
                tokio::time::sleep(POLL_INTERVAL).await;
            }
            let newcomer = speak_from(flood_source(FLOOD_TABLE + FLOOD_SPARE), target).await?;
            ensure!(
                newcomer.is_none(),
                "a new connection was served at the end: the flood no longer filled the table"
            );
            let after = coordinators(&mut to_other, &groups).await?;
            let moved: Vec<String> = before
                .iter()
                .filter(|(g, node)| after.get(*g) != Some(node))
                .map(|(g, node)| format!("{g}: node {node} -> node {:?}", after.get(g)))
                .collect();
            ensure!(
                moved.is_empty(),
                "{} of {GROUPS} groups moved while {} live connections ({} refused) filled the flooded gateway's table: {moved:?}",
                moved.len(),
                flood.held,
                flood.refused
            );
            let described = describe_group(&mut to_other, &group).await?;
            ensure!(
                described.error_code == NOT_COORDINATOR,
                "DescribeGroups {group} through the first gateway under the flood: error {}, expected NOT_COORDINATOR ({NOT_COORDINATOR}): it took the flooded gateway's group",
                described.error_code
            );
            let code = heartbeat(&mut to_flooded, &group, generation, &member).await?;
            ensure!(code == NONE, "the member's heartbeat after the flood: error {code}");
            flood.stop().await;
            Ok(())
        })
        .await?;
    flooded.stop().await;
    other.stop().await;
    Ok(Outcome::Passed)
}
