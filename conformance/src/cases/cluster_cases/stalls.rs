//! Nodes that do not refuse but stall, and nodes outside the roster (issue 50, rows 7 and 8): the
//! primary frozen behind a proxy that keeps taking connections and passes logins, and a cluster
//! whose primary the gateway's roster leaves out. Node 0, the primary, sits behind a
//! [`StallProxy`](crate::stall_proxy::StallProxy) and the cluster names it at the proxy's address
//! ([`IggyCluster::start_fronted`]).

use super::*;

/// CLUSTER-FAILOVER-3, CLUSTER-FAILOVER-1, CLUSTER-UNKNOWN-1: an idempotent producer streams
/// through the gateway; the proxy in front of the primary stalls (the connections it holds get no
/// further answer; a new one has its login answered, by another node, and then nothing) and the
/// primary is frozen (SIGSTOP), so the other two elect a new one. The gateway demotes the stalled
/// node, sweeps the others within its failover bound, and the stream goes on; every acknowledged
/// record reads back. Printed: the time from the stall to the next acknowledged record (the goal
/// is under the failover bound), the longest pause, and how many connections the proxy took.
pub(super) async fn primary_stalled_behind_a_proxy_that_passes_logins_fails_over_within_the_bound(
    binary: &Path,
) -> anyhow::Result<()> {
    let world = World::start_fronted(binary).await?;
    let front = world.cluster.front().context("the cluster was started fronted")?;
    let topic = world.gateway.endpoint.unique_topic("cluster-primary-stalled");
    create_topic(&world.gateway.endpoint, &topic, 1).await?;
    let mut stream = ProducerStream::start(&world.bootstrap(), &topic)?;
    stream.wait_acked_after(None, 30, WAIT).await?;
    let leader = world.cluster.leader(WAIT).await?;
    ensure!(leader == 0, "node {leader} is the primary, not node 0 behind the proxy");
    let login_node: std::net::SocketAddr = world.cluster.address(1).parse()?;
    let taken_before = front.connections();
    let stalled_at = Instant::now();
    front.stall(login_node);
    world.cluster.freeze(0)?;
    // When the other two name a new primary, asked directly (never through the proxy): the part
    // of the outage that is the cluster's, not the gateway's.
    let elected = async {
        let view = world
            .cluster
            .wait_view("another node is the primary", FAILOVER_WAIT, |v| {
                v.leader.is_some_and(|l| l != 0)
            })
            .await?;
        anyhow::Ok((view.leader.expect("waited for a leader"), stalled_at.elapsed()))
    };
    let (acked, elected) = tokio::join!(stream.wait_acked_after(Some(stalled_at), 30, FAILOVER_WAIT), elected);
    acked.context("after the proxy in front of node 0 (the primary) stalled and the node froze")?;
    let (new_leader, elected_after) = elected?;
    let next_ack = stream.first_ack_after(stalled_at);
    let pause = stream.longest_pause_after(stalled_at);
    let taken = front.connections() - taken_before;
    let (acks, sent, failures) = stream.stop().await?;
    let figures = audit(&world.bootstrap(), &topic, &acks).await?;
    println!(
        "cluster tier: primary (node 0) stalled behind its proxy and frozen during a producer stream: {sent} sent, {} acknowledged, {} failed, {} lost, {} duplicated; stall to next acknowledged record {} (goal < {FAILOVER_TIMEOUT:?}), longest pause {}; new primary node {new_leader} first seen named {} ms after the stall (the cluster asked about every 200 ms); the proxy took {taken} connections after the stall",
        figures.acknowledged,
        failures.len(),
        figures.lost.len(),
        figures.duplicated,
        millis(next_ack),
        millis(pause),
        elected_after.as_millis(),
    );
    figures.check()?;
    ensure!(new_leader != 0, "the frozen node 0 is still named leader");
    world.stop().await;
    Ok(())
}

/// CLUSTER-ROSTER-2: a gateway given every node but the primary (node 0, named by the cluster at
/// its proxy) does not dial the primary: connecting fails, naming it and the setting, and the
/// proxy takes no connection; with `iggy_follow_unlisted_leader` the gateway follows it there
/// and serves.
pub(super) async fn primary_outside_the_roster_gets_no_login_unless_followed(binary: &Path) -> anyhow::Result<()> {
    let cluster = IggyCluster::start_fronted(binary).await?;
    let front = cluster.front().context("the cluster was started fronted")?;
    ensure!(
        cluster.leader(WAIT).await? == 0,
        "node 0, behind the proxy, is not the primary"
    );
    let without_leader = format!("{},{}", cluster.client_address(1), cluster.client_address(2));
    let connect = |follow: bool| {
        IggyBackend::connect_roster(
            &without_leader,
            &cluster.username,
            &cluster.password,
            IggyTls::default(),
            GATEWAY_POOL_SIZE,
            FAILOVER_TIMEOUT,
            follow,
        )
    };
    let taken_before = front.connections();
    let refused = connect(false).await;
    let taken = front.connections() - taken_before;
    let reason = match &refused {
        Ok(_) => String::from("connected"),
        Err(e) => e.to_string(),
    };
    println!(
        "cluster tier: roster {without_leader} without the primary at {}: {reason}; the primary's proxy took {taken} connections",
        cluster.client_address(0)
    );
    ensure!(taken == 0, "the primary outside the roster was dialled {taken} times");
    ensure!(
        refused.is_err()
            && reason.contains(&cluster.client_address(0))
            && reason.contains("iggy_follow_unlisted_leader"),
        "a gateway whose roster leaves out the primary answered: {reason}"
    );
    let followed = connect(true)
        .await
        .context("with iggy_follow_unlisted_leader, following the primary")?;
    followed.ensure_stream(crate::real_iggy::DEFAULT_STREAM).await?;
    let taken = front.connections() - taken_before;
    println!("cluster tier: with iggy_follow_unlisted_leader the gateway followed the primary: its proxy took {taken} connections");
    ensure!(
        taken > 0,
        "with iggy_follow_unlisted_leader the primary was not dialled"
    );
    drop(followed);
    drop(cluster);
    Ok(())
}
