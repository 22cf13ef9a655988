//! The coordinator's state machine on paused tokio time: deadlines fire from the timer task,
//! not on the next request.

use super::consumer_protocol::ConsumerGroupError;
use super::*;
use bytes::Bytes;
use std::sync::Arc;

fn coordinator() -> Arc<GroupCoordinator> {
    Arc::new(GroupCoordinator::new(GroupLimits::default(), SharedRng::seeded(1)))
}

fn join_request(member_id: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        owner: "address:127.0.0.1".into(),
        topics: Vec::new(),
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
    use crate::peers::hashed_index as coordinator_index;
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

#[tokio::test(start_paused = true)]
async fn limit_join_protocols_1_too_many_protocols_are_refused() {
    let c = coordinator();
    let mut many = join_request("", None);
    many.protocols = (0..65).map(|i| (format!("p{i}"), Bytes::new())).collect();
    assert_eq!(c.join(many).await.error_code, ResponseError::InvalidRequest.code());
    let mut at_limit = join_request("", None);
    at_limit.protocols = (0..64).map(|i| (format!("p{i}"), Bytes::new())).collect();
    assert_eq!(
        c.join(at_limit).await.error_code,
        ResponseError::MemberIdRequired.code()
    );
}

#[tokio::test(start_paused = true)]
async fn limit_rebalance_timeout_1_a_rebalance_ends_by_the_cap() {
    let c = coordinator();
    let stop = tokio::sync::watch::channel(false);
    let timers = tokio::spawn({
        let c = c.clone();
        let rx = stop.0.subscribe();
        async move { c.run_timers(rx).await }
    });
    // The first member asks for 24 days, then stops responding (it heartbeats no more).
    let mut first = join_request("", None);
    first.rebalance_timeout = Duration::from_millis(i32::MAX as u64);
    first.session_timeout = Duration::from_secs(1_800);
    let pending = c.join(first.clone()).await;
    first.member_id = pending.member_id;
    assert_eq!(c.join(first).await.error_code, 0);
    // A second member's join starts a rebalance the first never rejoins.
    let started = Instant::now();
    let second = join_new(&c).await;
    assert_eq!(second.error_code, 0, "the rebalance completed without the first member");
    let waited = started.elapsed();
    assert!(
        waited <= GroupLimits::default().max_rebalance_timeout,
        "the rebalance was held open for {waited:?}"
    );
    stop.0.send_replace(true);
    timers.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn limit_group_pending_1_pending_ids_are_bounded_and_lapse_soon() {
    let limits = GroupLimits {
        max_members_per_group: 3,
        ..GroupLimits::default()
    };
    let c = Arc::new(GroupCoordinator::new(limits.clone(), SharedRng::seeded(5)));
    let mut long_session = join_request("", None);
    long_session.session_timeout = Duration::from_secs(1_800);
    for _ in 0..3 {
        assert_eq!(
            c.join(long_session.clone()).await.error_code,
            ResponseError::MemberIdRequired.code()
        );
    }
    assert_eq!(c.usage().0, 3, "three pending ids");
    assert_eq!(
        c.join(long_session.clone()).await.error_code,
        ResponseError::GroupMaxSizeReached.code(),
        "pending ids count against the group's size"
    );
    // They lapse after the pending timeout, not the 30-minute session the client chose.
    let now = Instant::now();
    c.expire(now + limits.pending_member_timeout - Duration::from_millis(1));
    assert_eq!(c.usage().0, 3);
    c.expire(now + limits.pending_member_timeout);
    assert_eq!(c.usage().0, 0);
    assert_eq!(
        c.join(long_session).await.error_code,
        ResponseError::MemberIdRequired.code()
    );
}

#[tokio::test(start_paused = true)]
async fn limit_group_members_1_and_limit_group_bytes_1_totals_over_all_groups() {
    let limits = GroupLimits {
        max_members_total: 2,
        max_stored_bytes: 200,
        ..GroupLimits::default()
    };
    let c = Arc::new(GroupCoordinator::new(limits, SharedRng::seeded(9)));
    let in_group = |g: &str, metadata: usize| {
        let mut r = join_request("", None);
        r.group_id = g.into();
        r.protocols = vec![("range".into(), Bytes::from(vec![7u8; metadata]))];
        r
    };
    // Two members in two groups, each with 5 + 40 bytes of protocol, a 34-byte member id and a
    // 1-byte client id (LIMIT-GROUP-MEMBER-BYTES-1): 2 x 80 = 160 bytes held.
    let mut held = Vec::new();
    for g in ["g1", "g2"] {
        let mut r = in_group(g, 40);
        r.member_id = c.join(r.clone()).await.member_id;
        let joined = c.join(r).await;
        assert_eq!(joined.error_code, 0);
        assert_eq!(joined.member_id.len(), 34);
        held.push((g, joined.member_id));
    }
    assert_eq!(c.usage(), (2, 160));
    // A third member anywhere is refused, whatever its group holds.
    assert_eq!(
        c.join(in_group("g3", 1)).await.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    // An assignment that would take the bytes past 200 is refused; one that fits is kept.
    let (g, member) = &held[0];
    let too_big = c
        .sync(g, 1, member, None, vec![(member.clone(), Bytes::from(vec![0u8; 41]))])
        .await;
    assert_eq!(too_big.error_code, ResponseError::CoordinatorNotAvailable.code());
    let fits = c
        .sync(g, 1, member, None, vec![(member.clone(), Bytes::from(vec![0u8; 40]))])
        .await;
    assert_eq!(fits.error_code, 0);
    assert_eq!(c.usage(), (2, 200));
    // Leaving gives everything back, exactly.
    for (g, member) in &held {
        let left = c.leave(
            g,
            &[MemberLeave {
                member_id: member.clone(),
                instance_id: None,
            }],
        );
        assert_eq!(left, vec![0]);
    }
    assert_eq!(c.usage(), (0, 0));
    c.expire(Instant::now());
    assert_eq!(c.usage(), (0, 0));
}

fn owned_join(owner: &str, group: &str) -> JoinRequest {
    JoinRequest {
        owner: owner.into(),
        group_id: group.into(),
        require_known_member_id: false,
        ..join_request("", None)
    }
}

#[tokio::test(start_paused = true)]
async fn limit_group_owner_1_one_owner_cannot_take_the_groups_of_everyone() {
    let limits = GroupLimits {
        max_groups: 6,
        max_groups_per_owner: 3,
        ..GroupLimits::default()
    };
    let c = Arc::new(GroupCoordinator::new(limits, SharedRng::seeded(3)));
    let mut held = Vec::new();
    for i in 0..5 {
        let joined = c.join(owned_join("address:10.0.0.1", &format!("a{i}"))).await;
        held.push(joined);
    }
    let codes: Vec<i16> = held.iter().map(|j| j.error_code).collect();
    let refused = ResponseError::CoordinatorNotAvailable.code();
    assert_eq!(
        codes,
        [0, 0, 0, refused, refused],
        "the owner's fourth group is refused"
    );
    // Another owner still creates groups: the gateway holds 3 of its 6.
    for i in 0..3 {
        assert_eq!(
            c.join(owned_join("address:10.0.0.2", &format!("b{i}")))
                .await
                .error_code,
            0
        );
    }
    // A group the owner created and left is forgotten, and its quota is free again.
    assert_eq!(
        c.leave(
            "a0",
            &[MemberLeave {
                member_id: held[0].member_id.clone(),
                instance_id: None
            }]
        ),
        [0]
    );
    c.expire(Instant::now());
    assert_eq!(c.join(owned_join("address:10.0.0.1", "a9")).await.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn limit_group_owner_1_members_and_pending_ids_count_per_owner() {
    let limits = GroupLimits {
        max_members_per_owner: 4,
        ..GroupLimits::default()
    };
    let c = Arc::new(GroupCoordinator::new(limits.clone(), SharedRng::seeded(4)));
    // KIP-394 pending ids, the cheapest thing to make, count against their owner.
    let mut pending = owned_join("user:mallory", "g");
    pending.require_known_member_id = true;
    let mut codes = Vec::new();
    for _ in 0..6 {
        codes.push(c.join(pending.clone()).await.error_code);
    }
    let (required, refused) = (
        ResponseError::MemberIdRequired.code(),
        ResponseError::CoordinatorNotAvailable.code(),
    );
    assert_eq!(codes, [required, required, required, required, refused, refused]);
    // Another principal joins the same group.
    let mut alice = owned_join("user:alice", "g");
    alice.require_known_member_id = true;
    let first = c.join(alice.clone()).await;
    assert_eq!(first.error_code, required);
    alice.member_id = first.member_id;
    let joined = c.join(alice).await;
    assert_eq!(joined.error_code, 0, "alice is not refused for mallory's quota");
    // Mallory's pending ids lapse and its quota frees.
    c.expire(Instant::now() + limits.pending_member_timeout);
    assert_eq!(c.join(pending).await.error_code, required);
}

/// The group's topics are counted as members and members-to-be come and go, not rebuilt per
/// joiner; this pins that the count follows every way one arrives or leaves.
#[tokio::test(start_paused = true)]
async fn authz_group_4_group_topics_follow_members_and_pending_ids() {
    let limits = GroupLimits {
        pending_member_timeout: Duration::from_secs(5),
        ..GroupLimits::default()
    };
    let c = Arc::new(GroupCoordinator::new(limits.clone(), SharedRng::seeded(5)));
    let topics = |c: &GroupCoordinator| c.topics("g").unwrap_or_default();
    let subscribing = |member_id: &str, topics: &[&str]| JoinRequest {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        ..join_request(member_id, None)
    };
    let first = c.join(subscribing("", &["a", "b"])).await;
    let second = c.join(subscribing("", &["b", "c"])).await;
    assert_eq!(topics(&c), ["a", "b", "c"], "pending ids' subscriptions count");
    // The first joins for real with another subscription, naming a topic twice.
    let joined = c.join(subscribing(&first.member_id, &["a", "a"])).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(topics(&c), ["a", "b", "c"], "b is still the second pending id's");
    // The second pending id lapses; the member's session (10 s) does not.
    c.expire(Instant::now() + limits.pending_member_timeout);
    assert_eq!(topics(&c), ["a"]);
    assert!(
        c.topics_for_joiner("g", &joined.member_id).is_empty(),
        "a member was authorized"
    );
    assert_eq!(c.topics_for_joiner("g", &second.member_id), ["a"]);
    let leave = MemberLeave {
        member_id: joined.member_id.clone(),
        instance_id: None,
    };
    assert_eq!(c.leave("g", &[leave]), [0]);
    assert_eq!(topics(&c), Vec::<String>::new(), "nobody subscribes to anything");
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_3_relinquished_groups_answer_parked_joins_and_free_their_usage() {
    let c = coordinator();
    let first = c.join(owned_join("address:10.0.0.1", "moving")).await;
    assert_eq!(first.error_code, 0);
    assert_eq!(c.join(owned_join("address:10.0.0.1", "staying")).await.error_code, 0);
    // A second member's join parks until the first rejoins: the rebalance is under way.
    let parked = tokio::spawn({
        let c = c.clone();
        async move { c.join(owned_join("address:10.0.0.2", "moving")).await }
    });
    for _ in 0..100 {
        if c.usage().0 == 3 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(c.usage().0, 3, "the second member of `moving` is in");
    let handed = c.relinquish(|group| group != "moving");
    assert_eq!(handed, ["moving"]);
    let answer = parked.await.expect("the parked join returns");
    assert_eq!(answer.error_code, ResponseError::NotCoordinator.code());
    assert_eq!(c.usage().0, 1, "only `staying`'s member is left");
    assert_eq!(c.owner_usage("address:10.0.0.2"), (0, 0));
    assert_eq!(
        c.owner_usage("address:10.0.0.1"),
        (1, 1),
        "its group `staying` and one member"
    );
    assert!(c.describe("moving").is_none());
    assert!(c.describe("staying").is_some());
}

fn consumer_heartbeat(member: &str, epoch: i32) -> consumer_protocol::Heartbeat {
    consumer_protocol::Heartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout: Some(Duration::from_secs(30)),
        subscribed_topics: Some(vec!["t".into()]),
        subscribed_regex: None,
        assignor: None,
        owned: Some(Default::default()),
        client_id: "c".into(),
        client_host: String::new(),
        owner: "address:127.0.0.1".into(),
        pattern_scope: "".into(),
        resolutions: BTreeMap::new(),
    }
}

fn one_topic() -> BTreeMap<String, Option<u32>> {
    BTreeMap::from([("t".to_string(), Some(2))])
}

#[tokio::test(start_paused = true)]
async fn group_consumer_type_1_a_group_id_serves_one_protocol_at_a_time() {
    let c = coordinator();
    // A classic group with a member: the consumer protocol is refused GROUP_ID_NOT_FOUND.
    let classic = join_new(&c).await;
    assert_eq!(classic.error_code, 0);
    assert_eq!(
        c.consumer_heartbeat("g", consumer_heartbeat("m", 0), &one_topic()),
        Err(ConsumerGroupError::NotConsumerGroup)
    );
    assert_eq!(
        crate::error_map::consumer_group_code(&ConsumerGroupError::NotConsumerGroup),
        ResponseError::GroupIdNotFound.code()
    );
    // Before its member is looked up (GROUP-CONSUMER-NONMEMBER-1), as Kafka looks the group up first.
    assert_eq!(
        c.consumer_pattern_plan("g", "m", 3, None, None, &"".into()),
        Err(ConsumerGroupError::NotConsumerGroup)
    );
    // A consumer-protocol group with a member: JoinGroup is INCONSISTENT_GROUP_PROTOCOL.
    let answer = c
        .consumer_heartbeat("h", consumer_heartbeat("m", 0), &one_topic())
        .unwrap();
    assert_eq!(answer.member_epoch, 1);
    let mut join = join_request("", None);
    join.group_id = "h".into();
    assert_eq!(
        c.join(join).await.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
}

#[tokio::test(start_paused = true)]
async fn group_consumer_describe_1_consumer_groups_are_described_and_listed() {
    let c = coordinator();
    c.consumer_heartbeat("h", consumer_heartbeat("m", 0), &one_topic())
        .unwrap();
    let described = c.consumer_describe("h").expect("held");
    assert_eq!(
        (described.state, described.group_epoch, described.assignor),
        ("Stable", 1, "uniform")
    );
    assert_eq!(described.members.len(), 1);
    assert_eq!(c.consumer_list(), vec![("h".to_string(), "Stable")]);
    assert_eq!(c.topics("h"), Some(vec!["t".to_string()]));
    // The last member leaving forgets the group.
    c.consumer_heartbeat("h", consumer_heartbeat("m", -1), &one_topic())
        .unwrap();
    assert!(c.consumer_describe("h").is_none());
    assert_eq!(c.usage(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn group_consumer_subscription_1_members_are_bounded_like_classic_ones() {
    let limits = GroupLimits {
        max_members_per_group: 1,
        ..GroupLimits::default()
    };
    let c = GroupCoordinator::new(limits, SharedRng::seeded(3));
    c.consumer_heartbeat("h", consumer_heartbeat("a", 0), &one_topic())
        .unwrap();
    assert_eq!(
        c.consumer_heartbeat("h", consumer_heartbeat("b", 0), &one_topic()),
        Err(ConsumerGroupError::GroupMaxSizeReached)
    );
    assert_eq!(c.owner_usage("address:127.0.0.1"), (1, 1));
    // Member id, client id, topic, and the group's index of it (LIMIT-GROUP-MEMBER-BYTES-1,
    // GROUP-CONSUMER-LOOKUPS-1).
    assert_eq!(c.usage(), (1, 4));
}

#[tokio::test(start_paused = true)]
async fn group_consumer_timeout_1_the_timer_removes_a_silent_member() {
    let c = coordinator();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let timers = tokio::spawn({
        let c = c.clone();
        async move { c.run_timers(stop_rx).await }
    });
    c.consumer_heartbeat("h", consumer_heartbeat("m", 0), &one_topic())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(44)).await;
    assert!(c.consumer_describe("h").is_some(), "within its session");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        c.consumer_describe("h").is_none(),
        "the lapsed member's group is forgotten"
    );
    assert_eq!(
        c.consumer_heartbeat("h", consumer_heartbeat("m", 1), &one_topic()),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    stop_tx.send_replace(true);
    timers.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn group_consumer_subscription_1_authz_group_4_a_joiner_is_rechecked_under_the_lock() {
    let c = coordinator();
    let lookups = || ConsumerLookups {
        topics: one_topic(),
        resolutions: BTreeMap::new(),
    };
    // A member of group h subscribes to t.
    c.consumer_heartbeat("h", consumer_heartbeat("a", 0), &one_topic())
        .unwrap();
    // A joiner authorized for its own topic only (the group's topics were read before a joined):
    // sent back with every topic it needs, nothing changed.
    let mut joiner = consumer_heartbeat("b", 0);
    joiner.subscribed_topics = Some(vec!["u".into()]);
    let authorized = BTreeSet::from(["u".to_string()]);
    let back = match c.consumer_heartbeat_authorized("h", joiner, lookups(), Some(&authorized)) {
        ConsumerAttempt::Recheck { heartbeat, topics } => {
            assert_eq!(topics, ["t", "u"]);
            heartbeat
        }
        ConsumerAttempt::Done(answer) => panic!("joined past its authorization: {answer:?}"),
    };
    assert_eq!(c.consumer_describe("h").unwrap().members.len(), 1, "b was not added");
    // Authorized for both, it joins.
    let both = BTreeSet::from(["t".to_string(), "u".to_string()]);
    match c.consumer_heartbeat_authorized("h", *back, lookups(), Some(&both)) {
        ConsumerAttempt::Done(answer) => assert_eq!(answer.unwrap().member_epoch, 2),
        ConsumerAttempt::Recheck { topics, .. } => panic!("rechecked again for {topics:?}"),
    }
    // A member changing its subscription needs its new topics only, not the group's.
    let mut change = consumer_heartbeat("a", 1);
    change.subscribed_topics = Some(vec!["v".into()]);
    change.owned = None;
    change.rebalance_timeout = None;
    let only_v = BTreeSet::from(["v".to_string()]);
    assert!(matches!(
        c.consumer_heartbeat_authorized("h", change, lookups(), Some(&only_v)),
        ConsumerAttempt::Done(Ok(_))
    ));
    // A pattern resolved to a topic past what was authorized is sent back too.
    let mut by_pattern = consumer_heartbeat("a", 0);
    by_pattern.subscribed_topics = Some(Vec::new());
    by_pattern.subscribed_regex = Some("w.*".into());
    let resolved = ConsumerLookups {
        topics: BTreeMap::from([("w1".to_string(), Some(1))]),
        resolutions: BTreeMap::from([("w.*".to_string(), BTreeSet::from(["w1".to_string()]))]),
    };
    let nothing = BTreeSet::new();
    assert!(matches!(
        c.consumer_heartbeat_authorized("fresh", by_pattern, resolved, Some(&nothing)),
        ConsumerAttempt::Recheck { topics, .. } if topics == ["w1"]
    ));
}

#[tokio::test(start_paused = true)]
async fn limit_group_member_bytes_1_every_string_a_consumer_member_brings_is_counted() {
    let c = coordinator();
    let mut join = consumer_heartbeat("m", 0);
    join.instance_id = Some("i".repeat(100));
    join.rack_id = Some("r".repeat(50));
    join.client_id = "c".repeat(1_000);
    join.client_host = "10.0.0.1".into();
    c.consumer_heartbeat("h", join, &one_topic()).unwrap();
    // Member id, instance id, rack id, client id, client host, the subscribed topic and the
    // group's index of it (GROUP-CONSUMER-LOOKUPS-1).
    assert_eq!(c.usage(), (1, 1 + 100 + 50 + 1_000 + 8 + 1 + 1));
    let mut rack = consumer_heartbeat("m", 1);
    rack.rack_id = Some("r".repeat(10));
    (rack.owned, rack.subscribed_topics, rack.rebalance_timeout) = (None, None, None);
    c.consumer_heartbeat("h", rack, &one_topic()).unwrap();
    assert_eq!(
        c.usage(),
        (1, 1 + 100 + 10 + 1_000 + 8 + 1 + 1),
        "a new rack id replaces the old"
    );
    c.consumer_heartbeat("h", consumer_heartbeat("m", -1), &one_topic())
        .unwrap();
    assert_eq!(c.usage(), (0, 0), "given back exactly when it leaves");
}

#[tokio::test(start_paused = true)]
async fn limit_group_member_bytes_1_a_member_growing_its_subscription_is_held_to_the_total() {
    let limits = GroupLimits {
        max_stored_bytes: 100,
        ..GroupLimits::default()
    };
    let c = GroupCoordinator::new(limits, SharedRng::seeded(5));
    c.consumer_heartbeat("h", consumer_heartbeat("m", 0), &one_topic())
        .unwrap();
    // Member id, client id, the topic and the group's index of it.
    assert_eq!(c.usage(), (1, 4));
    let resubscribe = |name: String| {
        let mut change = consumer_heartbeat("m", 1);
        change.subscribed_topics = Some(vec![name]);
        (change.owned, change.rebalance_timeout) = (None, None);
        change
    };
    assert_eq!(
        c.consumer_heartbeat("h", resubscribe("x".repeat(200)), &one_topic()),
        Err(ConsumerGroupError::CoordinatorNotAvailable("LIMIT-GROUP-BYTES-1")),
        "a member, not only a joiner, is held to LIMIT-GROUP-BYTES-1"
    );
    assert_eq!(c.usage(), (1, 4), "nothing of the refused heartbeat was kept");
    assert!(c
        .consumer_heartbeat("h", resubscribe("y".repeat(30)), &one_topic())
        .is_ok());
    // The new name twice, the member's and the index's; the old one gone from both.
    assert_eq!(c.usage(), (1, 62));
}

#[tokio::test(start_paused = true)]
async fn limit_group_member_bytes_1_classic_members_and_pending_ids_count_their_strings() {
    let c = coordinator();
    let mut request = join_request("", None);
    request.topics = vec!["orders".into()];
    request.client_id = "c".repeat(100);
    let first = c.join(request.clone()).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    // A pending id holds its id and the topics its subscription names.
    assert_eq!(c.usage(), (1, first.member_id.len() + 6));
    request.member_id = first.member_id.clone();
    let joined = c.join(request).await;
    assert_eq!(joined.error_code, 0);
    // Protocols ("range" with "m", "roundrobin"), member id, client id, topics.
    let protocols = 5 + 1 + 10;
    assert_eq!(c.usage(), (1, protocols + joined.member_id.len() + 100 + 6));
    let leave = MemberLeave {
        member_id: joined.member_id,
        instance_id: None,
    };
    assert_eq!(c.leave("g", &[leave]), [0]);
    assert_eq!(c.usage(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn limit_group_member_id_1_a_classic_instance_id_past_249_bytes_is_refused() {
    let c = coordinator();
    let long = "i".repeat(member_strings::MAX_ID_BYTES + 1);
    let refused = c.join(join_request("", Some(&long))).await;
    assert_eq!(refused.error_code, ResponseError::InvalidRequest.code());
    assert!(c.describe("g").is_none(), "nothing was kept");
    let at_bound = "i".repeat(member_strings::MAX_ID_BYTES);
    assert_eq!(c.join(join_request("", Some(&at_bound))).await.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn group_consumer_nonmember_1_a_non_members_heartbeat_changes_nothing() {
    let c = coordinator();
    let resolved = |pairs: &[(&str, &[&str])]| ConsumerLookups {
        topics: one_topic(),
        resolutions: pairs
            .iter()
            .map(|(p, ts)| (p.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect(),
    };
    let mut member = consumer_heartbeat("a", 0);
    member.subscribed_topics = Some(Vec::new());
    member.subscribed_regex = Some("t.*".into());
    assert!(matches!(
        c.consumer_heartbeat_authorized("h", member, resolved(&[("t.*", &["t"])]), None),
        ConsumerAttempt::Done(Ok(_))
    ));
    let held = c.usage();
    // A heartbeat under an id the group does not know, bringing resolutions: one of a pattern of
    // its own, one that would empty the member's.
    let mut stranger = consumer_heartbeat("x", 5);
    stranger.subscribed_regex = Some("u.*".into());
    assert!(matches!(
        c.consumer_heartbeat_authorized("h", stranger, resolved(&[("u.*", &["u1", "u2"]), ("t.*", &[])]), None),
        ConsumerAttempt::Done(Err(ConsumerGroupError::UnknownMemberId))
    ));
    assert_eq!(c.usage(), held, "nothing of it is kept");
    assert_eq!(
        c.topics("h"),
        Some(vec!["t".to_string()]),
        "the member's pattern still matches t"
    );
    assert_eq!(c.consumer_describe("h").unwrap().group_epoch, 1, "no new group epoch");
}

/// A Kafka Connect worker's join: protocol type `connect`, the protocols `sessioned`, `compatible`
/// and `default` (or fewer, for an older worker), each with metadata that is no consumer
/// subscription.
fn connect_join(member_id: &str, protocols: &[&'static str], metadata: &'static [u8]) -> JoinRequest {
    JoinRequest {
        group_id: "connect-cluster".into(),
        member_id: member_id.into(),
        protocol_type: "connect".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from_static(metadata)))
            .collect(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(60),
        ..join_request(member_id, None)
    }
}

/// CONNECT-GROUP-1: two Connect workers, one of them older (no `sessioned`), form one group: the
/// protocol both offer that they prefer is chosen, the leader gets both workers' metadata as they
/// sent it, and each worker gets the assignment the leader wrote for it, byte for byte.
#[tokio::test(start_paused = true)]
async fn connect_group_1_workers_agree_on_a_protocol_and_their_bytes_are_relayed() {
    let c = coordinator();
    let all = ["sessioned", "compatible", "default"];
    // The first worker alone: its first choice.
    let first = c.join(connect_join("", &all, b"worker-a url and config offset")).await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let a = c
        .join(connect_join(&first.member_id, &all, b"worker-a url and config offset"))
        .await;
    assert_eq!(a.error_code, 0);
    assert_eq!(a.protocol_type.as_deref(), Some("connect"));
    assert_eq!(a.protocol_name.as_deref(), Some("sessioned"));
    c.sync(
        "connect-cluster",
        a.generation,
        &a.member_id,
        None,
        vec![(a.member_id.clone(), Bytes::from_static(b"A: everything"))],
    )
    .await;
    // An older worker, without `sessioned`, joins: both rejoin and `compatible` is chosen.
    let b_id = c
        .join(connect_join("", &["compatible", "default"], b"worker-b"))
        .await
        .member_id;
    let b_join = tokio::spawn({
        let c = c.clone();
        let b_id = b_id.clone();
        async move {
            c.join(connect_join(&b_id, &["compatible", "default"], b"worker-b"))
                .await
        }
    });
    tokio::task::yield_now().await;
    let a2 = c
        .join(connect_join(&a.member_id, &all, b"worker-a url and config offset"))
        .await;
    let b2 = b_join.await.unwrap();
    assert_eq!((a2.error_code, b2.error_code), (0, 0));
    assert_eq!(a2.protocol_name.as_deref(), Some("compatible"));
    assert_eq!(b2.protocol_name.as_deref(), Some("compatible"));
    let leader = if a2.leader == a2.member_id { &a2 } else { &b2 };
    let mut seen: Vec<(String, Bytes)> = leader
        .members
        .iter()
        .map(|(id, _, m)| (id.clone(), m.clone()))
        .collect();
    seen.sort();
    let mut sent = vec![
        (
            a.member_id.clone(),
            Bytes::from_static(b"worker-a url and config offset"),
        ),
        (b_id.clone(), Bytes::from_static(b"worker-b")),
    ];
    sent.sort();
    assert_eq!(seen, sent, "the leader reads every worker's metadata as sent");
    // The leader's assignments (incremental cooperative: a revocation for one, a new task for
    // the other) reach each worker unread.
    let assignments = vec![
        (a.member_id.clone(), Bytes::from_static(b"A: revoke task 1")),
        (b_id.clone(), Bytes::from_static(b"B: nothing yet")),
    ];
    let follower = if leader.member_id == a.member_id {
        b_id.clone()
    } else {
        a.member_id.clone()
    };
    let follower_sync = tokio::spawn({
        let c = c.clone();
        let generation = a2.generation;
        async move { c.sync("connect-cluster", generation, &follower, None, vec![]).await }
    });
    tokio::task::yield_now().await;
    let leader_sync = c
        .sync(
            "connect-cluster",
            a2.generation,
            &leader.member_id,
            None,
            assignments.clone(),
        )
        .await;
    let follower_sync = follower_sync.await.unwrap();
    let got = |id: &str| {
        if id == leader.member_id {
            leader_sync.assignment.clone()
        } else {
            follower_sync.assignment.clone()
        }
    };
    assert_eq!(got(&a.member_id), Bytes::from_static(b"A: revoke task 1"));
    assert_eq!(got(&b_id), Bytes::from_static(b"B: nothing yet"));
    assert_eq!(leader_sync.protocol_type.as_deref(), Some("connect"));
}
