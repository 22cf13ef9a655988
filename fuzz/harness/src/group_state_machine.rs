//! Target `group_state_machine`: the group coordinator (docs/spec/groups.md) driven by a random
//! sequence of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, commits and the passing of time,
//! from several principals with subscriptions of their own (LIMIT-GROUP-OWNER-1,
//! AUTHZ-GROUP-4).

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use kafka_iggy_gateway::clock::SharedRng;
use kafka_iggy_gateway::groups::{GroupCoordinator, GroupLimits, GroupState, JoinAttempt, JoinRequest, MemberLeave};
use kafka_protocol::error::ResponseError;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One more group id than `max_groups` allows, so the group limit is reachable.
const GROUPS: [&str; 4] = ["g0", "g1", "g2", "g3"];
const INSTANCES: [&str; 3] = ["i0", "i1", "i2"];
const PROTOCOLS: [&str; 3] = ["range", "roundrobin", "sticky"];
/// Principals and an address: whom groups and members count against.
const OWNERS: [&str; 3] = ["user:ann", "user:ben", "address:127.0.0.1"];
const TOPICS: [&str; 3] = ["t0", "t1", "t2"];
/// Operations per input: enough for several rebalances, few enough to stay fast.
const MAX_OPS: usize = 64;

fn limits() -> GroupLimits {
    GroupLimits {
        max_groups: 3,
        max_members_per_group: 3,
        max_metadata_bytes: 64,
        min_session_timeout: Duration::from_secs(1),
        max_session_timeout: Duration::from_secs(30),
        // Small enough that the fuzzer reaches each one: fewer protocols than PROTOCOLS, fewer
        // members in total than groups times members, a few members' worth of bytes.
        max_protocols: 2,
        max_rebalance_timeout: Duration::from_secs(10),
        pending_member_timeout: Duration::from_secs(5),
        max_members_total: 7,
        max_stored_bytes: 256,
        // Below the gateway-wide limits, so an owner meets its own first.
        max_groups_per_owner: 2,
        max_members_per_owner: 3,
        // The consumer protocol (KIP-848) is not driven here; Kafka's defaults.
        consumer_session_timeout: Duration::from_secs(45),
        consumer_heartbeat_interval: Duration::from_secs(5),
    }
}

/// Which member an operation speaks for: an index into the ids the coordinator handed out so
/// far, or (past their end) the empty id of a new member, or an id it never gave.
type MemberPick = u8;

#[derive(Debug, Arbitrary)]
enum Op {
    Join {
        group: u8,
        member: MemberPick,
        instance: Option<u8>,
        /// In quarter seconds, so both sides of the session timeout limits are reachable.
        session: u8,
        rebalance: u8,
        /// A bit per entry of `PROTOCOLS`.
        protocols: u8,
        other_type: bool,
        require_known_member_id: bool,
        metadata_len: u8,
        owner: u8,
        /// A bit per entry of `TOPICS`: what the joiner subscribes to.
        topics: u8,
        /// A bit per entry of `TOPICS`: what the joiner was authorized for, when the join goes
        /// through `join_authorized` (AUTHZ-GROUP-4).
        authorized: Option<u8>,
    },
    Sync {
        group: u8,
        member: MemberPick,
        instance: Option<u8>,
        stale_generation: bool,
        /// A bit per current member: who the leader gives an assignment.
        assign: u8,
        oversized: bool,
    },
    Heartbeat {
        group: u8,
        member: MemberPick,
        instance: Option<u8>,
        stale_generation: bool,
    },
    Leave {
        group: u8,
        member: MemberPick,
        instance: Option<u8>,
    },
    /// An offset commit from a member.
    Touch {
        group: u8,
        member: MemberPick,
    },
    /// Simulated time passes (tenths of a second); the timer task enforces deadlines.
    Idle {
        tenths: u16,
    },
    Expire,
    RemoveIfEmpty {
        group: u8,
    },
}

/// The state the driver keeps between operations.
struct Driver {
    coordinator: Arc<GroupCoordinator>,
    /// Every member id an answer named, in order: what `MemberPick` indexes.
    known: Arc<Mutex<Vec<String>>>,
    waiting: Vec<JoinHandle<()>>,
}

impl Driver {
    fn group(&self, pick: u8) -> &'static str {
        GROUPS[usize::from(pick) % GROUPS.len()]
    }

    fn member(&self, pick: MemberPick) -> String {
        let known = self.known.lock().expect("known ids");
        match usize::from(pick) % (known.len() + 2) {
            i if i < known.len() => known[i].clone(),
            i if i == known.len() => String::new(),
            _ => "never-given".to_string(),
        }
    }

    fn generation(&self, group: &str, stale: bool) -> i32 {
        let current = self.coordinator.member_generation(group).map_or(0, |(_, g, _)| g);
        current - i32::from(stale)
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Join {
                group,
                member,
                instance,
                session,
                rebalance,
                protocols,
                other_type,
                require_known_member_id,
                metadata_len,
                owner,
                topics,
                authorized,
            } => {
                let pick = |bits: u8| -> Vec<String> {
                    TOPICS
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| bits & (1 << i) != 0)
                        .map(|(_, t)| t.to_string())
                        .collect()
                };
                let authorized: Option<BTreeSet<String>> = authorized.map(|bits| pick(bits).into_iter().collect());
                let protocols: Vec<(String, Bytes)> = PROTOCOLS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| protocols & (1 << i) != 0)
                    .map(|(_, p)| (p.to_string(), Bytes::from(vec![b'm'; usize::from(metadata_len)])))
                    .collect();
                let request = JoinRequest {
                    group_id: self.group(group).to_string(),
                    member_id: self.member(member),
                    instance_id: instance.map(|i| INSTANCES[usize::from(i) % INSTANCES.len()].to_string()),
                    client_id: "c".to_string(),
                    client_host: String::new(),
                    session_timeout: Duration::from_millis(250 * u64::from(session)),
                    rebalance_timeout: Duration::from_millis(250 * u64::from(rebalance)),
                    protocol_type: if other_type { "connect" } else { "consumer" }.to_string(),
                    protocols,
                    require_known_member_id,
                    owner: OWNERS[usize::from(owner) % OWNERS.len()].into(),
                    topics: pick(topics),
                };
                let (coordinator, known) = (self.coordinator.clone(), self.known.clone());
                self.waiting.push(tokio::spawn(async move {
                    let sent: Vec<String> = request.protocols.iter().map(|(n, _)| n.clone()).collect();
                    let outcome = match coordinator.join_authorized(request, authorized.as_ref()).await {
                        JoinAttempt::Done(outcome) => outcome,
                        JoinAttempt::Recheck { topics, .. } => {
                            let authorized = authorized.expect("only an authorized join is sent back");
                            assert!(
                                topics.iter().any(|t| !authorized.contains(t)),
                                "sent back for topics {topics:?} it was authorized for"
                            );
                            return;
                        }
                    };
                    if outcome.error_code == 0 {
                        assert!(outcome.generation >= 1, "a successful join has a generation");
                        assert!(!outcome.member_id.is_empty() && !outcome.leader.is_empty());
                        let protocol = outcome.protocol_name.as_deref().expect("a protocol is chosen");
                        assert!(sent.iter().any(|p| p == protocol), "{protocol} was not offered");
                        if outcome.member_id == outcome.leader {
                            assert!(outcome.members.iter().any(|m| m.0 == outcome.leader));
                            assert!(outcome.members.len() <= limits().max_members_per_group);
                        } else {
                            assert!(outcome.members.is_empty(), "only the leader gets the members");
                        }
                    }
                    if !outcome.member_id.is_empty() {
                        let mut known = known.lock().expect("known ids");
                        if !known.contains(&outcome.member_id) {
                            known.push(outcome.member_id);
                        }
                    }
                }));
            }
            Op::Sync {
                group,
                member,
                instance,
                stale_generation,
                assign,
                oversized,
            } => {
                let group = self.group(group);
                let generation = self.generation(group, stale_generation);
                let members = self.coordinator.member_generation(group).map_or(vec![], |(_, _, m)| m);
                let assignments = members
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| assign & (1 << (i % 8)) != 0)
                    .map(|(i, id)| (id, Bytes::from(vec![i as u8; if oversized { 65 } else { 1 }])))
                    .collect();
                let member = self.member(member);
                let instance = instance.map(|i| INSTANCES[usize::from(i) % INSTANCES.len()]);
                let coordinator = self.coordinator.clone();
                self.waiting.push(tokio::spawn(async move {
                    let outcome = coordinator
                        .sync(group, generation, &member, instance, assignments)
                        .await;
                    if outcome.error_code == 0 {
                        assert!(outcome.protocol_name.is_some(), "a synced member knows the protocol");
                    }
                }));
            }
            Op::Heartbeat {
                group,
                member,
                instance,
                stale_generation,
            } => {
                let group = self.group(group);
                let generation = self.generation(group, stale_generation);
                let instance = instance.map(|i| INSTANCES[usize::from(i) % INSTANCES.len()]);
                self.coordinator
                    .heartbeat(group, generation, &self.member(member), instance);
            }
            Op::Leave {
                group,
                member,
                instance,
            } => {
                let leave = MemberLeave {
                    member_id: self.member(member),
                    instance_id: instance.map(|i| INSTANCES[usize::from(i) % INSTANCES.len()].to_string()),
                };
                let codes = self.coordinator.leave(self.group(group), &[leave]);
                assert_eq!(codes.len(), 1, "one code per leaving member");
            }
            Op::Touch { group, member } => self.coordinator.touch(self.group(group), &self.member(member)),
            // Handled by the async driver loop: time only passes there.
            Op::Idle { .. } => {}
            Op::Expire => {
                self.coordinator.expire(Instant::now());
            }
            Op::RemoveIfEmpty { group } => {
                self.coordinator.remove_if_empty(self.group(group));
            }
        }
    }

    /// What holds between any two operations.
    fn check_invariants(&self) {
        let limits = limits();
        // LIMIT-GROUP-OWNER-1: no owner past its quotas, and the per-owner counts add up.
        let mut members = 0;
        for owner in OWNERS {
            let (groups, held) = self.coordinator.owner_usage(owner);
            assert!(groups <= limits.max_groups_per_owner, "{owner} created {groups} groups");
            assert!(held <= limits.max_members_per_owner, "{owner} holds {held} members");
            members += held;
        }
        assert_eq!(
            members,
            self.coordinator.usage().0,
            "per-owner members add up to the total"
        );
        let groups = self.coordinator.list();
        assert!(groups.len() <= limits.max_groups, "{} groups", groups.len());
        for (id, _, _) in groups {
            let Some(group) = self.coordinator.describe(&id) else {
                continue;
            };
            assert!(
                group.members.len() <= limits.max_members_per_group,
                "group {id} has {} members",
                group.members.len()
            );
            let ids: BTreeSet<&str> = group.members.iter().map(|m| m.member_id.as_str()).collect();
            assert_eq!(ids.len(), group.members.len(), "member ids are unique in {id}");
            let instances: Vec<&str> = group.members.iter().filter_map(|m| m.instance_id.as_deref()).collect();
            let unique: BTreeSet<&str> = instances.iter().copied().collect();
            assert_eq!(unique.len(), instances.len(), "one member per instance id in {id}");
            assert_eq!(
                group.state == GroupState::Empty,
                group.members.is_empty(),
                "group {id} is {:?} with {} members",
                group.state,
                group.members.len()
            );
        }
    }
}

/// The input is the operation sequence, as `arbitrary` reads it.
pub fn group_state_machine(data: &[u8]) {
    let mut input = Unstructured::new(data);
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS {
        match Op::arbitrary(&mut input) {
            Ok(op) => ops.push(op),
            Err(_) => break,
        }
    }
    crate::runtime::paused().block_on(run(ops));
}

async fn run(ops: Vec<Op>) {
    let coordinator = Arc::new(GroupCoordinator::new(limits(), SharedRng::seeded(1)));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let timers = tokio::spawn({
        let coordinator = coordinator.clone();
        async move { coordinator.run_timers(stopped).await }
    });
    let mut driver = Driver {
        coordinator,
        known: Arc::default(),
        waiting: Vec::new(),
    };
    for op in ops {
        if let Op::Idle { tenths } = op {
            tokio::time::sleep(Duration::from_millis(100 * u64::from(tenths))).await;
        } else {
            driver.apply(op);
        }
        // Lets the spawned joins and syncs reach the coordinator before the next operation.
        tokio::task::yield_now().await;
        driver.check_invariants();
    }
    // PROTO-SHUTDOWN-1: stopping answers every parked JoinGroup and SyncGroup.
    stop.send(true).expect("the timer task listens");
    settle(timers, "the timer task").await;
    for waiting in driver.waiting {
        settle(waiting, "a JoinGroup or SyncGroup").await;
    }
    let late = driver.coordinator.join(JoinRequest {
        group_id: GROUPS[0].to_string(),
        member_id: String::new(),
        instance_id: None,
        client_id: "c".to_string(),
        client_host: String::new(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(10),
        protocol_type: "consumer".to_string(),
        protocols: vec![("range".to_string(), Bytes::new())],
        require_known_member_id: false,
        owner: OWNERS[0].into(),
        topics: Vec::new(),
    });
    let late = tokio::time::timeout(Duration::from_secs(3600), late)
        .await
        .expect("a join after stop answers at once");
    assert_eq!(late.error_code, ResponseError::NotCoordinator.code());
}

/// Waits for a task that must end now that the coordinator stopped, re-raising its panic.
async fn settle(task: JoinHandle<()>, what: &str) {
    // Time is paused: an hour here costs nothing unless the task really never ends.
    match tokio::time::timeout(Duration::from_secs(3600), task).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => std::panic::resume_unwind(e.into_panic()),
        Err(_) => panic!("{what} was never answered after the coordinator stopped"),
    }
}
