//! The two-gateway case: a gateway process killed while its group commits, the group resuming
//! on the surviving gateway.

use super::*;

/// The probe period of the two gateway processes: short, so a dead peer's groups move within a
/// second rather than the default three or four (as the in-process two-gateway cases do).
pub(super) const PEER_PROBE_INTERVAL_MS: u64 = 200;

/// Waits until both gateways at `addresses` (node ids 1 and 2) have run their warm-up
/// (GROUP-COORDINATOR-4) and agree: a gateway coordinates its own groups only once warm, so a
/// group both name node 1 for and another both name node 2 for show both warm. Returns a group
/// both name node 2 for.
pub(super) async fn await_two_warm_gateways(
    addresses: &[std::net::SocketAddr],
    prefix: &str,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (mut on_1, mut on_2) = (None, None);
        for n in 0..32 {
            let group = format!("{prefix}-{n}");
            let first = coordinator_at(addresses[0], &group).await?;
            let second = coordinator_at(addresses[1], &group).await?;
            if first == second && first.0 == 0 {
                match first.1 {
                    1 => on_1 = Some(group),
                    2 => on_2 = Some(group),
                    _ => {}
                }
            }
            if on_1.is_some() && on_2.is_some() {
                break;
            }
        }
        if let (Some(_), Some(group)) = (on_1, on_2) {
            return Ok(group);
        }
        ensure!(
            Instant::now() < deadline,
            "the two gateway processes did not agree on coordinators of their own within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(PEER_PROBE_INTERVAL_MS)).await;
    }
}

/// GROUP-COORDINATOR-2, CO-MEMBER-1, CLUSTER-ROSTER-1: two `kafka-iggy-gateway` processes on the
/// cluster's roster, each other's peers; a librdkafka group member (bootstrapped with both) reads
/// and commits through the one coordinating its group; that process is SIGKILLed. The survivor
/// takes the group, the member rejoins there, resumes from its commit, reads every record produced
/// after the kill and commits; a new member resumes from that commit. The survivor is never
/// restarted.
pub(super) async fn gateway_process_killed_while_its_group_commits_resumes_on_the_survivor(
    binary: &Path,
) -> anyhow::Result<()> {
    let gateway_bin = gateway_binary()?;
    let cluster = IggyCluster::start(binary).await?;
    let logs = std::env::temp_dir().join(format!("kig-cluster-gateways-{}", std::process::id()));
    std::fs::create_dir_all(&logs)?;
    // Two Kafka listeners, then the gateways' peer channels (GROUP-COORDINATOR-6).
    let all = free_addresses(4)?;
    let (addresses, channels) = all.split_at(2);
    let mut survivor = GatewayProcess::start(
        &gateway_bin,
        &cluster,
        addresses,
        channels,
        0,
        PEER_PROBE_INTERVAL_MS,
        logs.join("gateway-1.log"),
    )
    .await?;
    let mut mortal = GatewayProcess::start(
        &gateway_bin,
        &cluster,
        addresses,
        channels,
        1,
        PEER_PROBE_INTERVAL_MS,
        logs.join("gateway-2.log"),
    )
    .await?;
    let prefix = format!("cluster-gateway-killed-{}", std::process::id());
    let group = await_two_warm_gateways(addresses, &prefix).await?;
    let on_survivor = Endpoint::at(addresses[0].to_string());
    let bootstrap = format!("{},{}", addresses[0], addresses[1]);
    let topic = on_survivor.unique_topic("cluster-gateway-killed");
    create_topic(&on_survivor, &topic, 1).await?;
    produce_at(&on_survivor, &topic, 0, 0, 12).await?;

    let mut member = GroupConsumer::subscribe("member", &bootstrap, &group, &topic, "earliest")?;
    member.wait_until("offsets 0..12", |h| h.has_all(0, 0..12)).await?;
    member.commit(&[(0, 12)]).await?;
    let assigned = member.assignments_applied();

    let killed_at = Instant::now();
    mortal.kill()?;
    let deadline = Instant::now() + FAILOVER_WAIT;
    loop {
        let answer = coordinator_at(addresses[0], &group).await?;
        if answer == (0, 1) {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the survivor still answers {answer:?} for the group's coordinator {FAILOVER_WAIT:?} after the kill"
        );
        tokio::time::sleep(Duration::from_millis(PEER_PROBE_INTERVAL_MS)).await;
    }
    let moved_in = killed_at.elapsed();
    let first = produce(&on_survivor, &topic, 0, 1).await?;
    let next_ack = killed_at.elapsed();
    let rest = produce(&on_survivor, &topic, 0, 9).await?;
    let produced: Vec<i64> = first.into_iter().chain(rest).collect();
    ensure!(
        produced == (12..22).collect::<Vec<_>>(),
        "records produced after the kill got offsets {produced:?}, not 12..22"
    );
    member
        .wait_reassigned(assigned, "the member rejoined on the survivor", |a| a.contains(&0))
        .await?;
    member
        .wait_until("offsets 12..22 after the kill", |h| h.has_all(0, 0..22))
        .await
        .context("the member after its coordinating gateway was killed")?;
    let deadline = Instant::now() + FAILOVER_WAIT;
    loop {
        match member.commit(&[(0, 22)]).await {
            Ok(()) => break,
            Err(_) if Instant::now() < deadline => {}
            Err(e) => return Err(e.context("committing through the survivor")),
        }
    }
    let committed = member.committed(&[0]).await?;
    let redelivered = member.history.offsets(0).len() - member.history.distinct(0).len();
    member.close().await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(22)),
        "committed through the survivor: {committed:?}, not 22"
    );

    produce_at(&on_survivor, &topic, 0, 22, 5).await?;
    let mut second = GroupConsumer::subscribe("second", &addresses[0].to_string(), &group, &topic, "earliest")?;
    second.wait_until("offsets 22..27", |h| h.has_all(0, 22..27)).await?;
    let below: BTreeSet<i64> = second.history.offsets(0).into_iter().filter(|o| *o < 22).collect();
    second.close().await?;
    let survivor_running = survivor.running();
    println!(
        "cluster tier: gateway process 2 (coordinating the group) SIGKILLed: the survivor coordinated the group {} ms after the kill; 27 acknowledged, 0 lost (every offset 0..27 read), 0 duplicated, {redelivered} delivered twice to the member (its commit before the kill: 12); kill to next acknowledged record {} ms; a new member resumed at 22; the survivor process was never restarted (running: {survivor_running})",
        moved_in.as_millis(),
        next_ack.as_millis()
    );
    ensure!(
        below.is_empty(),
        "the new member did not resume from the commit: it was delivered offsets {below:?} below 22"
    );
    ensure!(
        survivor_running,
        "the surviving gateway process exited; its log ends:\n{}",
        survivor.log_tail(20)
    );
    drop(survivor);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&logs);
    Ok(())
}
