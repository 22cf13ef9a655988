//! The coordinator's state machine on paused tokio time: deadlines fire from the timer task,
//! not on the next request.

use super::*;
use bytes::Bytes;
use std::sync::Arc;

fn coordinator() -> Arc<GroupCoordinator> {
    Arc::new(GroupCoordinator::new(GroupLimits::default(), SharedRng::seeded(1)))
}

fn join_request(member_id: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![
            ("range".into(), Bytes::from_static(b"m")),
            ("roundrobin".into(), Bytes::new()),
        ],
        require_known_member_id: true,
    }
}

/// KIP-394 then the real join: returns the outcome of the second JoinGroup.
async fn join_new(c: &GroupCoordinator) -> JoinOutcome {
    let first = c.join(join_request("", None)).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    c.join(join_request(&first.member_id, None)).await
}

#[tokio::test(start_paused = true)]
async fn group_join_1_member_id_required_then_generation_one_and_leader() {
    let c = coordinator();
    let joined = join_new(&c).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation, 1);
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1, "the leader gets the member list");
}

#[tokio::test(start_paused = true)]
async fn group_heartbeat_1_second_member_makes_the_first_rejoin_and_sync_relays_assignments() {
    let c = coordinator();
    let a = join_new(&c).await;
    let sync_a = c
        .sync(
            "g",
            1,
            &a.member_id,
            None,
            vec![(a.member_id.clone(), Bytes::from_static(b"A1"))],
        )
        .await;
    assert_eq!(sync_a.assignment, Bytes::from_static(b"A1"));
    let b_id = c.join(join_request("", None)).await.member_id;
    let b_join = tokio::spawn({
        let c = c.clone();
        let b_id = b_id.clone();
        async move { c.join(join_request(&b_id, None)).await }
    });
    tokio::task::yield_now().await;
    assert_eq!(
        c.heartbeat("g", 1, &a.member_id, None),
        ResponseError::RebalanceInProgress.code()
    );
    let a_join = c.join(join_request(&a.member_id, None)).await;
    let b_join = b_join.await.unwrap();
    assert_eq!((a_join.generation, b_join.generation), (2, 2));
    assert_eq!(a_join.leader, a.member_id, "the leader stays while it is a member");
    assert_eq!(a_join.members.len(), 2);
    assert!(b_join.members.is_empty());
    let follower = tokio::spawn({
        let c = c.clone();
        let b_id = b_id.clone();
        async move { c.sync("g", 2, &b_id, None, vec![]).await }
    });
    tokio::task::yield_now().await;
    let assignments = vec![
        (a.member_id.clone(), Bytes::from_static(b"A")),
        (b_id.clone(), Bytes::from_static(b"B")),
    ];
    assert_eq!(
        c.sync("g", 2, &a.member_id, None, assignments).await.assignment,
        Bytes::from_static(b"A")
    );
    assert_eq!(follower.await.unwrap().assignment, Bytes::from_static(b"B"));
    assert_eq!(
        c.heartbeat("g", 1, &b_id, None),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(c.heartbeat("g", 2, &b_id, None), 0);
}

#[tokio::test(start_paused = true)]
async fn group_timeout_1_silent_member_is_evicted_by_the_timer() {
    let c = coordinator();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let timers = tokio::spawn({
        let c = c.clone();
        async move { c.run_timers(stop_rx).await }
    });
    let a = join_new(&c).await;
    c.sync("g", 1, &a.member_id, None, vec![]).await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(c.describe("g").unwrap().members.len(), 1, "within its session");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Evicted without any request arriving, and the vacant group forgotten (its offsets live in
    // Iggy, so nothing is lost).
    assert!(c.describe("g").is_none());
    stop_tx.send_replace(true);
    timers.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn group_timeout_1_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let c = coordinator();
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn({
        let c = c.clone();
        async move { c.run_timers(stop_rx).await }
    });
    let a = join_new(&c).await;
    c.sync("g", 1, &a.member_id, None, vec![]).await;
    let b_id = c.join(join_request("", None)).await.member_id;
    let mut slow = join_request(&b_id, None);
    slow.session_timeout = Duration::from_secs(60);
    // A keeps heartbeating with a session of 10 s, but never rejoins.
    let b = c.join(slow);
    let heartbeats = async {
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            c.heartbeat("g", 1, &a.member_id, None);
        }
    };
    let b = tokio::select! { b = b => b, _ = heartbeats => unreachable!() };
    assert_eq!(b.generation, 2);
    assert_eq!(b.leader, b_id);
    assert_eq!(c.describe("g").unwrap().members.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn group_static_1_rejoin_by_instance_id_fences_the_old_member_id() {
    let c = coordinator();
    let first = c.join(join_request("", Some("i-1"))).await;
    assert_eq!(first.error_code, 0, "a static member needs no KIP-394 round trip");
    c.sync("g", 1, &first.member_id, Some("i-1"), vec![]).await;
    let second = c.join(join_request("", Some("i-1"))).await;
    assert_eq!(second.error_code, 0);
    assert_ne!(second.member_id, first.member_id);
    assert_eq!(
        c.heartbeat("g", second.generation, &first.member_id, Some("i-1")),
        ResponseError::FencedInstanceId.code()
    );
    assert_eq!(c.describe("g").unwrap().members.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn group_leave_1_last_member_leaving_empties_the_group() {
    let c = coordinator();
    let a = join_new(&c).await;
    let codes = c.leave(
        "g",
        &[
            MemberLeave {
                member_id: a.member_id.clone(),
                instance_id: None,
            },
            MemberLeave {
                member_id: "nobody".into(),
                instance_id: None,
            },
        ],
    );
    assert_eq!(codes, vec![0, ResponseError::UnknownMemberId.code()]);
    assert_eq!(c.describe("g").unwrap().state, GroupState::Empty);
    assert!(c.remove_if_empty("g"));
}

#[tokio::test(start_paused = true)]
async fn group_join_1_inconsistent_protocols_are_refused() {
    let c = coordinator();
    join_new(&c).await;
    let mut other = join_request("", None);
    other.protocols = vec![("sticky".into(), Bytes::new())];
    let id = c.join(other.clone()).await.member_id;
    other.member_id = id;
    assert_eq!(
        c.join(other).await.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
}

#[test]
fn group_coordinator_1_the_same_group_maps_to_the_same_node() {
    assert_eq!(coordinator_index("orders", 3), coordinator_index("orders", 3));
    let spread: std::collections::BTreeSet<_> = (0..64).map(|i| coordinator_index(&format!("g{i}"), 3)).collect();
    assert_eq!(spread.len(), 3, "groups spread over every node");
    assert_eq!(coordinator_index("anything", 1), 0);
}

#[tokio::test(start_paused = true)]
async fn proto_shutdown_1_stopping_answers_parked_joins_with_not_coordinator() {
    let c = coordinator();
    let a = join_new(&c).await;
    c.sync("g", 1, &a.member_id, None, vec![]).await;
    let b_id = c.join(join_request("", None)).await.member_id;
    let parked = tokio::spawn({
        let c = c.clone();
        async move { c.join(join_request(&b_id, None)).await }
    });
    tokio::task::yield_now().await;
    c.stop();
    assert_eq!(parked.await.unwrap().error_code, ResponseError::NotCoordinator.code());
    assert_eq!(
        c.join(join_request("", None)).await.error_code,
        ResponseError::NotCoordinator.code()
    );
}

#[tokio::test(start_paused = true)]
async fn group_limit_1_groups_members_and_metadata_are_bounded() {
    let limits = GroupLimits {
        max_groups: 1,
        max_members_per_group: 1,
        max_metadata_bytes: 64,
        ..GroupLimits::default()
    };
    let c = GroupCoordinator::new(limits, SharedRng::seeded(3));
    let a = c.join(join_request("", None)).await;
    assert_eq!(c.join(join_request(&a.member_id, None)).await.error_code, 0);
    // A second member of the group.
    let b = c.join(join_request("", None)).await;
    assert_eq!(
        c.join(join_request(&b.member_id, None)).await.error_code,
        ResponseError::GroupMaxSizeReached.code()
    );
    // A second group.
    let mut other = join_request("", None);
    other.group_id = "h".into();
    assert_eq!(
        c.join(other).await.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    // Metadata above the bound, and an assignment above it.
    let mut big = join_request("", None);
    big.protocols = vec![("range".into(), Bytes::from(vec![0u8; 65]))];
    assert_eq!(c.join(big).await.error_code, ResponseError::InvalidRequest.code());
    let sync = c
        .sync(
            "g",
            1,
            &a.member_id,
            None,
            vec![(a.member_id.clone(), Bytes::from(vec![0u8; 65]))],
        )
        .await;
    assert_eq!(sync.error_code, ResponseError::InvalidRequest.code());
}
