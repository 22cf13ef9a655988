use super::*;
use proptest::prelude::*;

fn settings() -> ConsumerSettings {
    ConsumerSettings {
        session_timeout: Duration::from_secs(45),
        max_members: 100,
        default_assignor: Assignor::Uniform,
    }
}

fn owner() -> Owner {
    "address:127.0.0.1".into()
}

fn hb(member: &str, epoch: i32, topics: Option<&[&str]>, owned: Option<Assignment>) -> Heartbeat {
    Heartbeat {
        member_id: member.to_string(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout: (epoch == 0).then(|| Duration::from_secs(60)),
        subscribed_topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
        subscribed_regex: None,
        assignor: None,
        owned,
        client_id: "c".into(),
        client_host: "h".into(),
        owner: owner(),
        pattern_scope: scope(),
        resolutions: BTreeMap::new(),
    }
}

/// Without SASL every member's patterns are resolved in one scope.
fn scope() -> Owner {
    "".into()
}

fn meta(topics: &[(&str, u32)]) -> BTreeMap<String, Option<u32>> {
    topics.iter().map(|(t, n)| (t.to_string(), Some(*n))).collect()
}

fn held(a: &Option<Assignment>) -> usize {
    a.as_ref().map_or(0, assignment_size)
}

#[test]
fn group_consumer_assignor_1_uniform_and_range_split_evenly() {
    let subs: BTreeMap<String, Vec<String>> = [("a", vec!["t"]), ("b", vec!["t"])]
        .into_iter()
        .map(|(m, t)| (m.to_string(), t.into_iter().map(String::from).collect()))
        .collect();
    let topics: BTreeMap<String, u32> = [("t".to_string(), 4)].into();
    for assignment in [uniform(&subs, &topics, &BTreeMap::new()), range(&subs, &topics)] {
        assert_eq!(assignment_size(&assignment["a"]), 2);
        assert_eq!(assignment_size(&assignment["b"]), 2);
    }
    assert_eq!(range(&subs, &topics)["a"]["t"], BTreeSet::from([0, 1]));
    assert_eq!(Assignor::parse("uniform"), Some(Assignor::Uniform));
    assert_eq!(Assignor::parse("cooperative-sticky"), None);
}

#[test]
fn group_consumer_revoke_1_a_partition_moves_only_after_its_revocation_is_acknowledged() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t", 4)]);
    let a = g
        .heartbeat(hb("a", 0, Some(&["t"]), Some(Assignment::new())), &m, &settings(), now)
        .unwrap();
    assert_eq!(held(&a.assignment), 4);
    assert_eq!(a.member_epoch, 1);
    // b joins: the target splits, but a still holds everything.
    let b = g
        .heartbeat(hb("b", 0, Some(&["t"]), Some(Assignment::new())), &m, &settings(), now)
        .unwrap();
    assert_eq!(held(&b.assignment), 0, "nothing is free yet");
    assert_eq!(b.member_epoch, 2);
    // a is told to keep two: it revokes the other two and stays at epoch 1.
    let a2 = g
        .heartbeat(hb("a", 1, None, a.assignment.clone()), &m, &settings(), now)
        .unwrap();
    assert_eq!(a2.member_epoch, 1);
    let kept = a2.assignment.clone().unwrap();
    assert_eq!(assignment_size(&kept), 2);
    assert_eq!(g.member("a").unwrap().state, MemberState::UnrevokedPartitions);
    // b still gets nothing while a has not acknowledged.
    let b2 = g.heartbeat(hb("b", 2, None, None), &m, &settings(), now).unwrap();
    assert_eq!(b2.assignment, None);
    // a acknowledges: epoch 2; then b gets the two partitions.
    let a3 = g
        .heartbeat(hb("a", 1, None, Some(kept.clone())), &m, &settings(), now)
        .unwrap();
    assert_eq!(a3.member_epoch, 2);
    let b3 = g
        .heartbeat(hb("b", 2, None, Some(Assignment::new())), &m, &settings(), now)
        .unwrap();
    assert_eq!(held(&b3.assignment), 2);
    assert_eq!(g.state_name(), "Stable");
}

#[test]
fn group_consumer_epoch_1_fenced_and_unknown_members_as_kafka() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t", 2)]);
    g.heartbeat(hb("a", 0, Some(&["t"]), Some(Assignment::new())), &m, &settings(), now)
        .unwrap();
    assert!(matches!(
        g.heartbeat(hb("a", 7, None, None), &m, &settings(), now),
        Err(ConsumerGroupError::FencedMemberEpoch(_))
    ));
    assert_eq!(
        g.heartbeat(hb("zz", 1, None, None), &m, &settings(), now),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    // GROUP-CONSUMER-TIMEOUT-1: a lapsed session removes the member; it is unknown after.
    assert_eq!(g.expire(now + Duration::from_secs(46)), vec!["a".to_string()]);
    assert_eq!(
        g.heartbeat(hb("a", 1, None, None), &m, &settings(), now),
        Err(ConsumerGroupError::UnknownMemberId)
    );
    assert!(g.is_empty());
}

#[test]
fn group_consumer_static_1_an_instance_rejoins_with_its_partitions() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t", 2)]);
    let mut join = hb("a", 0, Some(&["t"]), Some(Assignment::new()));
    join.instance_id = Some("i".into());
    let a = g.heartbeat(join.clone(), &m, &settings(), now).unwrap();
    // A second live member with the same instance id is refused.
    let mut other = join.clone();
    other.member_id = "a2".into();
    assert_eq!(
        g.heartbeat(other.clone(), &m, &settings(), now),
        Err(ConsumerGroupError::UnreleasedInstanceId)
    );
    // GROUP-CONSUMER-LEAVE-1: -2 keeps it, with its partitions.
    let mut leave = hb("a", -2, None, None);
    leave.instance_id = Some("i".into());
    assert_eq!(g.heartbeat(leave, &m, &settings(), now).unwrap().member_epoch, -2);
    let back = g.heartbeat(other, &m, &settings(), now).unwrap();
    assert_eq!(back.member_epoch, a.member_epoch);
    assert_eq!(back.assignment, a.assignment);
    assert!(g.member("a").is_none());
}

#[test]
fn group_consumer_commit_1_member_epochs_are_checked() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    assert_eq!(g.validate_offsets("", -1, false, 9), Ok(()));
    let now = Instant::now();
    g.heartbeat(
        hb("a", 0, Some(&["t"]), Some(Assignment::new())),
        &meta(&[("t", 1)]),
        &settings(),
        now,
    )
    .unwrap();
    assert_eq!(g.validate_offsets("a", 1, false, 9), Ok(()));
    assert_eq!(
        g.validate_offsets("a", 0, false, 9),
        Err(OffsetRefusal::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_offsets("a", 1, false, 8),
        Err(OffsetRefusal::UnsupportedVersion)
    );
    assert_eq!(
        g.validate_offsets("", -1, false, 9),
        Err(OffsetRefusal::UnknownMemberId)
    );
    assert_eq!(g.validate_offsets("", -1, true, 9), Ok(()));
    assert_eq!(g.validate_offsets("b", 1, true, 9), Err(OffsetRefusal::UnknownMemberId));
}

/// One step of the model.
#[derive(Debug, Clone)]
enum Step {
    Join { client: usize, topics: u8, instance: bool },
    Heartbeat { client: usize, report_owned: bool },
    Subscribe { client: usize, topics: u8 },
    Leave { client: usize },
    Tick { secs: u64 },
    Grow { topic: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (0..5usize, 1..4u8, any::<bool>()).prop_map(|(client, topics, instance)| Step::Join {
            client,
            topics,
            instance
        }),
        4 => (0..5usize, any::<bool>()).prop_map(|(client, report_owned)| Step::Heartbeat { client, report_owned }),
        1 => (0..5usize, 1..4u8).prop_map(|(client, topics)| Step::Subscribe { client, topics }),
        1 => (0..5usize).prop_map(|client| Step::Leave { client }),
        1 => (0..30u64).prop_map(|secs| Step::Tick { secs }),
        1 => (0..2usize).prop_map(|topic| Step::Grow { topic }),
    ]
}

/// A client as the model sees it: what it holds is what the last answer gave it.
#[derive(Debug, Clone, Default)]
struct Client {
    member_id: Option<String>,
    instance: Option<String>,
    epoch: i32,
    holds: Assignment,
    incarnation: usize,
}

const TOPICS: [&str; 2] = ["t0", "t1"];

fn subscription(bits: u8) -> Vec<String> {
    TOPICS
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, t)| t.to_string())
        .collect()
}

fn check(group: &ConsumerGroup, clients: &[Client]) -> Result<(), TestCaseError> {
    // The server's ledger: each partition held by one member, and the ledger is exactly that.
    let mut seen: HashMap<(String, i32), String> = HashMap::new();
    for m in group.members() {
        for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
            for p in ps {
                let previous = seen.insert((t.clone(), *p), m.id.clone());
                prop_assert!(previous.is_none(), "{t}-{p} held by {previous:?} and {}", m.id);
            }
        }
    }
    prop_assert_eq!(&seen, group.holders());
    // GROUP-CONSUMER-LOOKUPS-1: the names the group counts are exactly those its members name.
    let named: BTreeSet<String> = group.members().flat_map(|m| m.subscribed.iter().cloned()).collect();
    prop_assert_eq!(group.named_topics(), named);
    // Clients the group still counts hold only what the ledger gives them, so no two overlap.
    for c in clients {
        let Some(id) = &c.member_id else { continue };
        let Some(m) = group.member(id) else { continue };
        for (t, ps) in &c.holds {
            for p in ps {
                prop_assert_eq!(
                    seen.get(&(t.clone(), *p)),
                    Some(&m.id),
                    "client of {} holds {}-{}",
                    id,
                    t,
                    p
                );
            }
        }
    }
    Ok(())
}

fn apply(c: &mut Client, answer: Result<HeartbeatAnswer, ConsumerGroupError>) {
    match answer {
        Ok(a) => {
            c.epoch = a.member_epoch;
            c.member_id = Some(a.member_id);
            if let Some(assignment) = a.assignment {
                c.holds = assignment;
            }
        }
        Err(_) => {
            // Fenced or unknown: it gives everything up and is out until it joins again.
            c.member_id = None;
            c.holds.clear();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// GROUP-CONSUMER-REVOKE-1: over any sequence of joins, leaves, heartbeats (with or without
    /// owned partitions), subscription changes, session lapses and partition growth, no partition
    /// is ever held by two members, and every member's client holds only what it was given; once
    /// everyone heartbeats, the group converges to its target with every partition assigned.
    #[test]
    fn group_consumer_revoke_1_no_partition_is_ever_owned_by_two_members(steps in proptest::collection::vec(step(), 1..80)) {
        let settings = settings();
        let mut group = ConsumerGroup::new("g".into(), owner());
        let mut clients = vec![Client::default(); 5];
        let mut partitions = [3u32, 2u32];
        let mut now = Instant::now();
        let metadata = |p: &[u32; 2]| -> BTreeMap<String, Option<u32>> {
            TOPICS.iter().zip(p).map(|(t, n)| (t.to_string(), Some(*n))).collect()
        };
        for s in steps {
            match s {
                Step::Join { client, topics, instance } => {
                    let c = &mut clients[client];
                    if c.member_id.is_some() { continue; }
                    c.incarnation += 1;
                    c.holds.clear();
                    if instance { c.instance = Some(format!("i{client}")); }
                    let mut h = hb(&format!("m{client}-{}", c.incarnation), 0, None, Some(Assignment::new()));
                    h.subscribed_topics = Some(subscription(topics));
                    h.instance_id = c.instance.clone();
                    let answer = group.heartbeat(h, &metadata(&partitions), &settings, now);
                    if answer.is_ok() { apply(c, answer); }
                }
                Step::Heartbeat { client, report_owned } => {
                    let c = &mut clients[client];
                    let Some(id) = c.member_id.clone() else { continue };
                    let owned = report_owned.then(|| c.holds.clone());
                    let answer = group.heartbeat(hb(&id, c.epoch, None, owned), &metadata(&partitions), &settings, now);
                    apply(c, answer);
                }
                Step::Subscribe { client, topics } => {
                    let c = &mut clients[client];
                    let Some(id) = c.member_id.clone() else { continue };
                    let mut h = hb(&id, c.epoch, None, Some(c.holds.clone()));
                    h.subscribed_topics = Some(subscription(topics));
                    let answer = group.heartbeat(h, &metadata(&partitions), &settings, now);
                    apply(c, answer);
                }
                Step::Leave { client } => {
                    let c = &mut clients[client];
                    let Some(id) = c.member_id.clone() else { continue };
                    let epoch = if c.instance.is_some() { -2 } else { -1 };
                    let mut h = hb(&id, epoch, None, None);
                    h.instance_id = c.instance.clone();
                    let _ = group.heartbeat(h, &metadata(&partitions), &settings, now);
                    c.member_id = None;
                    c.holds.clear();
                }
                Step::Tick { secs } => {
                    now += Duration::from_secs(secs);
                    group.expire(now);
                }
                Step::Grow { topic } => partitions[topic] += 1,
            }
            check(&group, &clients)?;
        }
        // Liveness: everyone still in heartbeats with what it holds until nothing changes.
        for _ in 0..12 {
            for i in 0..clients.len() {
                let c = &mut clients[i];
                let Some(id) = c.member_id.clone() else { continue };
                if group.member(&id).is_none_or(|m| m.left_static) { continue; }
                let answer = group.heartbeat(hb(&id, c.epoch, None, Some(c.holds.clone())), &metadata(&partitions), &settings, now);
                apply(c, answer);
                check(&group, &clients)?;
            }
        }
        if group.members().all(|m| !m.left_static) {
            let target = group.target_epoch();
            for m in group.members() {
                prop_assert_eq!(m.state, MemberState::Stable, "{} not stable", m.id);
                prop_assert_eq!(m.epoch, target);
            }
            let subscribed = group.topics();
            let expected: usize = TOPICS.iter().zip(partitions).filter(|(t, _)| subscribed.contains(**t)).map(|(_, n)| n as usize).sum();
            prop_assert_eq!(group.holders().len(), expected);
        }
    }
}

fn with_regex(mut h: Heartbeat, pattern: &str) -> Heartbeat {
    h.subscribed_regex = Some(pattern.to_string());
    h
}

fn resolution(pattern: &str, topics: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    BTreeMap::from([(pattern.to_string(), topics.iter().map(|t| t.to_string()).collect())])
}

fn resolved(mut h: Heartbeat, pattern: &str, topics: &[&str]) -> Heartbeat {
    h.resolutions = resolution(pattern, topics);
    h
}

const INTERVAL: Duration = Duration::from_secs(10);

fn plan(g: &mut ConsumerGroup, member: &str, epoch: i32, requested: Option<&str>, now: Instant) -> PatternPlan {
    g.pattern_plan(member, epoch, requested, None, &scope(), now, INTERVAL, 8)
        .expect("a member or a joiner")
}

#[test]
fn group_consumer_regex_1_a_subscription_is_the_union_of_names_and_matches() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("orders-eu", 2), ("orders-us", 2), ("audit", 1)]);
    // A new pattern is handed out to be checked and resolved; the caller lists the topics and
    // matches, and the heartbeat brings what matched.
    let first = plan(&mut g, "a", 0, Some("orders-.*"), now);
    assert_eq!(first.validate.as_deref(), Some("orders-.*"));
    assert_eq!(first.resolve, ["orders-.*"]);
    let join = with_regex(hb("a", 0, Some(&["audit"]), Some(Assignment::new())), "orders-.*");
    let a = g
        .heartbeat(
            resolved(join, "orders-.*", &["orders-eu", "orders-us"]),
            &m,
            &settings(),
            now,
        )
        .unwrap();
    assert_eq!(held(&a.assignment), 5, "both matched topics and the named one");
    assert_eq!(
        g.topics(),
        BTreeSet::from(["audit".to_string(), "orders-eu".to_string(), "orders-us".to_string()])
    );
    assert_eq!(g.named_topics(), BTreeSet::from(["audit".to_string()]));
    // The member's first heartbeat checks the group's names against a listing
    // (GROUP-CONSUMER-LOOKUPS-1); heartbeats within the interval list nothing; once it passes
    // the pattern is due again.
    assert_eq!(
        plan(&mut g, "a", 1, None, now).list_names,
        Some(vec!["audit".to_string()])
    );
    let soon = now + Duration::from_secs(9);
    assert_eq!(plan(&mut g, "a", 1, None, soon), PatternPlan::default());
    assert_eq!(plan(&mut g, "a", 1, Some("orders-.*"), soon), PatternPlan::default());
    let later = now + INTERVAL;
    assert_eq!(plan(&mut g, "a", 1, None, later).resolve, ["orders-.*"]);
    assert!(
        plan(&mut g, "a", 1, None, later).resolve.is_empty(),
        "handed out once: a concurrent heartbeat does not list again"
    );
    // A topic created since: the group epoch moves and the member is given its partition.
    let m2 = meta(&[("orders-eu", 2), ("orders-us", 2), ("orders-ap", 1), ("audit", 1)]);
    let refresh = hb("a", a.member_epoch, None, a.assignment.clone());
    let a2 = g
        .heartbeat(
            resolved(refresh, "orders-.*", &["orders-ap", "orders-eu", "orders-us"]),
            &m2,
            &settings(),
            later,
        )
        .unwrap();
    assert!(a2.member_epoch > a.member_epoch);
    assert_eq!(held(&a2.assignment), 6);
    // The same resolution again changes nothing.
    let same = hb("a", a2.member_epoch, None, a2.assignment.clone());
    let a3 = g
        .heartbeat(
            resolved(same, "orders-.*", &["orders-ap", "orders-eu", "orders-us"]),
            &m2,
            &settings(),
            later,
        )
        .unwrap();
    assert_eq!(a3.member_epoch, a2.member_epoch);
    // Dropping the pattern (an empty one, as librdkafka sends) keeps only the named topic, and
    // the resolution is forgotten with its bytes.
    let (_, bytes_with) = g.usage();
    g.heartbeat(
        with_regex(hb("a", a3.member_epoch, None, a3.assignment.clone()), ""),
        &m2,
        &settings(),
        later,
    )
    .unwrap();
    assert_eq!(g.topics(), BTreeSet::from(["audit".to_string()]));
    assert!(g.resolution(&scope(), "orders-.*").is_none());
    // The member's pattern (9 bytes), and its resolution: the pattern and three 9-byte topics.
    assert_eq!(g.usage().1, bytes_with - 9 - (9 + 3 * 9));
    assert_eq!(g.member("a").unwrap().subscribed_regex, None);
}

#[test]
fn group_consumer_regex_1_members_naming_one_pattern_share_its_resolution() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("orders-eu", 2), ("orders-us", 2)]);
    let a = with_regex(hb("a", 0, Some(&[]), Some(Assignment::new())), "orders-.*");
    g.heartbeat(
        resolved(a, "orders-.*", &["orders-eu", "orders-us"]),
        &m,
        &settings(),
        now,
    )
    .unwrap();
    let second = plan(&mut g, "b", 0, Some("orders-.*"), now);
    assert!(
        second.resolve.is_empty(),
        "the second member's pattern was resolved already"
    );
    assert_eq!(
        second.validate.as_deref(),
        Some("orders-.*"),
        "but is new to that member"
    );
    g.heartbeat(
        with_regex(hb("b", 0, Some(&[]), Some(Assignment::new())), "orders-.*"),
        &m,
        &settings(),
        now,
    )
    .unwrap();
    let targets: usize = ["a", "b"].iter().map(|m| assignment_size(&g.target_of(m))).sum();
    assert_eq!(targets, 4);
    assert_eq!(assignment_size(&g.target_of("a")), 2);
}

#[test]
fn group_consumer_nonmember_1_a_non_member_is_handed_no_pattern_and_marks_nothing() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t1", 1)]);
    let a = with_regex(hb("a", 0, Some(&[]), Some(Assignment::new())), "t.*");
    g.heartbeat(resolved(a, "t.*", &["t1"]), &m, &settings(), now).unwrap();
    let later = now + INTERVAL;
    // Under an id nobody holds, with an epoch: refused, whatever pattern it names.
    for requested in [None, Some("t.*"), Some("u.*")] {
        assert_eq!(
            g.pattern_plan("stranger", 3, requested, None, &scope(), later, INTERVAL, 8),
            Err(ConsumerGroupError::UnknownMemberId)
        );
    }
    // A joiner resolves its own new pattern, and refreshes nothing of the group's.
    let joiner = plan(&mut g, "j", 0, Some("u.*"), later);
    assert_eq!(joiner.resolve, ["u.*"]);
    // The member's refresh is still due: nobody took it.
    assert_eq!(plan(&mut g, "a", 1, None, later).resolve, ["t.*"]);
    // A resolution of a pattern no member subscribes to is not kept, even from a member.
    let (_, bytes) = g.usage();
    let stray = resolved(hb("a", 1, None, None), "u.*", &["u1", "u2"]);
    g.heartbeat(stray, &m, &settings(), later).unwrap();
    assert_eq!(g.usage().1, bytes);
    assert!(g.resolution(&scope(), "u.*").is_none());
}

#[test]
fn group_consumer_regex_cost_1_a_members_pattern_is_compiled_once_and_resolutions_are_rationed() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t1", 1)]);
    // Twelve members, each with a pattern of its own.
    for i in 0..12 {
        let member = format!("m{i}");
        let pattern = format!("t{i}.*");
        let join = with_regex(hb(&member, 0, Some(&[]), Some(Assignment::new())), &pattern);
        g.heartbeat(resolved(join, &pattern, &[]), &m, &settings(), now)
            .unwrap();
    }
    // A member resending the pattern it holds compiles nothing.
    let again = plan(&mut g, "m0", 1, Some("t0.*"), now);
    assert_eq!(again, PatternPlan::default());
    // Changing it compiles the new one.
    assert_eq!(plan(&mut g, "m0", 1, Some("x.*"), now).validate.as_deref(), Some("x.*"));
    // Once stale, a heartbeat refreshes at most 8 of them, the least recently resolved first;
    // the next heartbeat takes the rest.
    let later = now + INTERVAL;
    let first = plan(&mut g, "m0", 1, None, later);
    assert_eq!(first.resolve.len(), 8);
    let second = plan(&mut g, "m1", 1, None, later);
    assert_eq!(second.resolve.len(), 4);
    let all: BTreeSet<String> = first.resolve.into_iter().chain(second.resolve).collect();
    assert_eq!(all.len(), 12, "every pattern once");
}

#[test]
fn group_consumer_regex_scope_1_each_principal_keeps_its_own_resolution() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t1", 1), ("t2", 1)]);
    let (ann, ben): (Owner, Owner) = ("user:ann".into(), "user:ben".into());
    let member = |id: &str, scope: &Owner, topics: &[&str]| {
        let mut join = with_regex(hb(id, 0, Some(&[]), Some(Assignment::new())), "t.*");
        join.pattern_scope = scope.clone();
        resolved(join, "t.*", topics)
    };
    // Ann may poll both topics, Ben only t1: each sees what its own permissions matched.
    g.heartbeat(member("a", &ann, &["t1", "t2"]), &m, &settings(), now)
        .unwrap();
    g.heartbeat(member("b", &ben, &["t1"]), &m, &settings(), now).unwrap();
    let subscription = |g: &ConsumerGroup, id: &str| g.subscription_of(g.member(id).unwrap());
    assert_eq!(
        subscription(&g, "a"),
        BTreeSet::from(["t1".to_string(), "t2".to_string()])
    );
    assert_eq!(subscription(&g, "b"), BTreeSet::from(["t1".to_string()]));
    // Ben's refresh, whatever it finds, leaves Ann's as it was.
    let mut refresh = hb("b", g.member("b").unwrap().epoch, None, None);
    refresh.pattern_scope = ben.clone();
    g.heartbeat(resolved(refresh, "t.*", &[]), &m, &settings(), now)
        .unwrap();
    assert_eq!(
        subscription(&g, "a"),
        BTreeSet::from(["t1".to_string(), "t2".to_string()])
    );
    assert!(subscription(&g, "b").is_empty());
    // A scope's plan hands out its own patterns only.
    assert_eq!(
        g.pattern_plan("a", 1, Some("t.*"), None, &ann, now, INTERVAL, 8)
            .unwrap()
            .resolve,
        Vec::<String>::new()
    );
}

#[test]
fn group_consumer_lookups_1_a_heartbeat_is_handed_its_new_names_and_the_groups_when_due() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let m = meta(&[("t1", 1), ("t2", 1)]);
    let names_plan = |g: &mut ConsumerGroup, member: &str, epoch: i32, names: &[&str], at: Instant| {
        g.pattern_plan(member, epoch, None, Some(names), &scope(), at, INTERVAL, 8)
            .unwrap()
    };
    // The first joiner looks up what it names, empty names aside.
    let first = names_plan(&mut g, "a", 0, &["t1", "t2", "", "t1"], now);
    assert_eq!(first.look_up, ["t1", "t2"]);
    assert_eq!(first.list_names, None, "a joiner lists nothing of the group's");
    g.heartbeat(
        hb("a", 0, Some(&["t1", "t2"]), Some(Assignment::new())),
        &m,
        &settings(),
        now,
    )
    .unwrap();
    // A second joiner naming the group's topics and one more looks up the new one only.
    assert_eq!(names_plan(&mut g, "b", 0, &["t2", "t3"], now).look_up, ["t3"]);
    g.heartbeat(
        hb("b", 0, Some(&["t2", "t3"]), Some(Assignment::new())),
        &m,
        &settings(),
        now,
    )
    .unwrap();
    assert_eq!(g.named_topics(), BTreeSet::from(["t1", "t2", "t3"].map(String::from)));
    // A member's first heartbeat lists the group's names; the next ones within the interval do not.
    assert_eq!(
        names_plan(&mut g, "a", 1, &[], now).list_names,
        Some(vec!["t1".to_string(), "t2".into(), "t3".into()])
    );
    assert_eq!(names_plan(&mut g, "b", 2, &["t2", "t3"], now), PatternPlan::default());
    let later = now + INTERVAL;
    assert!(names_plan(&mut g, "b", 2, &[], later).list_names.is_some());
    assert_eq!(
        names_plan(&mut g, "a", 1, &[], later).list_names,
        None,
        "one listing per interval"
    );
    // A name goes with the last member naming it: b drops t3, a leaves, b rejoins.
    g.heartbeat(hb("b", 2, Some(&["t2"]), None), &m, &settings(), later)
        .unwrap();
    assert_eq!(g.named_topics(), BTreeSet::from(["t1", "t2"].map(String::from)));
    g.heartbeat(hb("a", -1, None, None), &m, &settings(), later).unwrap();
    assert_eq!(g.named_topics(), BTreeSet::from(["t2".to_string()]));
    g.heartbeat(hb("b", 0, None, Some(Assignment::new())), &m, &settings(), later)
        .unwrap();
    assert_eq!(
        g.named_topics(),
        BTreeSet::from(["t2".to_string()]),
        "a rejoin keeps its names"
    );
    g.expire(later + Duration::from_secs(3_600));
    assert!(g.named_topics().is_empty());
}

#[test]
fn group_consumer_lookups_1_a_steady_heartbeat_keeps_the_topics_it_did_not_look_up() {
    let mut g = ConsumerGroup::new("g".into(), owner());
    let now = Instant::now();
    let a = g
        .heartbeat(
            hb("a", 0, Some(&["t1"]), Some(Assignment::new())),
            &meta(&[("t1", 2)]),
            &settings(),
            now,
        )
        .unwrap();
    assert_eq!(held(&a.assignment), 2);
    // Nothing looked up: the partitions stay as known, the epoch where it was.
    let again = g
        .heartbeat(
            hb("a", a.member_epoch, None, a.assignment.clone()),
            &BTreeMap::new(),
            &settings(),
            now,
        )
        .unwrap();
    assert_eq!((again.member_epoch, again.assignment), (a.member_epoch, None));
    assert_eq!(assignment_size(&g.member("a").unwrap().assigned), 2);
    // A listing that found a third partition: a new epoch with it.
    let grown = g
        .heartbeat(
            hb("a", a.member_epoch, None, a.assignment),
            &meta(&[("t1", 3)]),
            &settings(),
            now,
        )
        .unwrap();
    assert_eq!(grown.member_epoch, a.member_epoch + 1);
    assert_eq!(held(&grown.assignment), 3);
}
