//! The scenario catalogue: eleven worlds, each built to show one anomaly (or its absence), with
//! the seed committed to reproduce it and the explanation `simulation run` prints with it. Every
//! world runs plain producers (no producer id: at least once, DELIVERY-2) beside at least one
//! idempotent producer (exactly once per partition, DELIVERY-3), so every sweep sets the plain
//! producers' allowed duplicates against the idempotent ones' none.

use crate::checks::Class;
use crate::world::consumer::ConsumerSpec;
use crate::world::consumer_protocol::MemberChurn;
use crate::world::producer::ProducerSpec;
use crate::world::{FaultPlan, WorldConfig};

/// One entry of the catalogue.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What `simulation run` takes.
    pub name: &'static str,
    /// One line for `simulation list`.
    pub summary: &'static str,
    /// What the run shows and why, printed with its verdict.
    pub explanation: &'static str,
    /// A seed that reproduces the scenario's anomaly (found by a sweep, kept by a regression
    /// test).
    pub seed: u64,
    /// The anomaly class the committed seed shows, when the scenario is about one.
    pub shows: Option<Class>,
    /// Whether the committed seed shows an idempotent producer's retry answered with the copy an
    /// earlier attempt stored, not written again (PRODUCER-DUP-1).
    pub answers_retries: bool,
    pub config: WorldConfig,
}

fn plain_producer() -> ProducerSpec {
    ProducerSpec {
        idempotent: false,
        records: 120,
        records_per_batch: 6,
        max_in_flight: 1,
        request_timeout_ms: 1_000,
        retry_backoff_ms: 100,
        max_think_ms: 20,
    }
}

fn idempotent_producer() -> ProducerSpec {
    ProducerSpec {
        idempotent: true,
        ..plain_producer()
    }
}

/// An idempotent producer with librdkafka's most requests in flight under idempotence (5): its
/// retries resend a whole window, in sequence order (PRODUCER-SEQ-1).
fn idempotent_pipelined_producer() -> ProducerSpec {
    ProducerSpec {
        max_in_flight: 5,
        ..idempotent_producer()
    }
}

fn consumer() -> ConsumerSpec {
    ConsumerSpec {
        max_wait_ms: 300,
        request_timeout_ms: 1_500,
        retry_backoff_ms: 100,
        session_timeout_ms: 6_000,
        heartbeat_interval_ms: 500,
        commit_interval_ms: 0,
    }
}

fn base() -> WorldConfig {
    WorldConfig {
        gateways: 1,
        partitions: 2,
        producers: vec![plain_producer(), idempotent_producer()],
        assigned_consumers: 1,
        group_consumers: 0,
        protocol_members: 0,
        churn: MemberChurn::default(),
        consumer: consumer(),
        faults: FaultPlan::default(),
        join_bootstrap_first: false,
        iggy_request_timeout_ms: 400,
        iggy_nodes: 1,
        iggy_failover_timeout_ms: 900,
        latency_ms: 2,
        fault_phase_limit_ms: None,
        max_simulated_s: 30,
    }
}

/// Every scenario, in the order.
pub fn catalogue() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "lost-produce-response",
            summary: "a Produce response lost on the way back; a plain producer's retry writes the batch again, an idempotent one's is answered",
            explanation: "A producer's link to the gateway breaks while a Produce is handled: the batch is written, the answer never arrives, the request times out and the producer sends the same batch again. For the plain producer (producer-0) the retry is written too, at new offsets: a duplicate, allowed by at-least-once (DELIVERY-2), attributed to the retry of the request whose response was lost. The idempotent producer (producer-1) sends the retry with the same producer id, epoch and sequence; the gateway finds them already stored and answers with the first copy's offset without writing (PRODUCER-DUP-1), so its records are stored once (DELIVERY-3).",
            seed: 19,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                faults: FaultPlan {
                    producer_link: 1.0 / 300.0,
                    consumer_link: 1.0 / 800.0,
                    hold: true,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "idempotent-retry",
            summary: "an idempotent producer's retries, after lost answers, a gateway restart or a lost Iggy answer, answered without a second copy",
            explanation: "An idempotent producer (producer-0, up to 5 requests in flight) and a plain one write through a gateway whose client links break or hold requests, which restarts now and then, and whose Iggy loses the answer to an append after storing it. Every such retry of the idempotent producer finds its batch stored: the gateway compares its producer id, epoch and sequences with the producer's last five batches in the partition (PRODUCER-DUP-1) and answers with the offset of the copy already there, writing nothing. After a restart the new gateway process has no state in memory, so it reads the partition's tail back and finds the batch's records by the producer tag every one carries in its Iggy message id (PRODUCER-TAG-1, PRODUCER-STATE-REBUILD-1); after a lost Iggy answer it reads the log from where its state ends before the next check (PRODUCER-UNKNOWN-1). A retry held on the way that arrives after the producer moved on is answered or refused as out of order, never written twice. The plain producer's retries of the same kind are stored again: allowed (DELIVERY-2, PRODUCER-NONE-1). This world is dedup-what-if's, whose proxy remembered acknowledged batches in memory and so removed only the duplicates of lost Produce responses; the gateway now removes all of them.",
            seed: 1,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                producers: vec![idempotent_pipelined_producer(), plain_producer()],
                faults: FaultPlan {
                    producer_link: 1.0 / 300.0,
                    hold: true,
                    gateway_restart: 1.0 / 3_000.0,
                    iggy_response_loss: 1.0 / 1_000.0,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "gateway-restart",
            summary: "the gateway restarts mid-stream: plain duplicates across the restart, idempotent retries answered from the log, nothing lost, commits survive",
            explanation: "The gateway process restarts while producers send and a group consumes and commits. Requests in flight die with it: their producers retry on the new process, so a plain producer's batches written just before the restart appear twice (allowed). The idempotent producer's retry reaches a process that never saw the first attempt; it reads the partition's tail back before checking the batch (PRODUCER-STATE-REBUILD-1), finds it stored and answers with its offset. Committed offsets live in Iggy (CO-ENCODE-1), so the group resumes where it committed; the new gateway's offsets client takes the group's Iggy membership over (CO-RECLAIM-1 when the old member lingers).",
            seed: 26,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                assigned_consumers: 0,
                group_consumers: 2,
                faults: FaultPlan {
                    gateway_restart: 1.0 / 400.0,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "iggy-response-lost",
            summary: "Iggy writes an append but its answer to the gateway is lost: retriable error, retry, a plain duplicate, an idempotent retry answered",
            explanation: "Iggy stores an append and its response never reaches the gateway. The gateway's Iggy request times out, so it answers the Produce with a retriable error (NOT_LEADER_OR_FOLLOWER for a lost connection) and the producer retries. A plain producer's batch is written a second time: a duplicate attributed to the lost Iggy response (allowed). For an idempotent producer's batch the gateway cannot tell whether it was stored, so before the next check of that partition it reads the log from where its producer state ends (PRODUCER-UNKNOWN-1), finds the batch, and answers the retry with its offset.",
            seed: 1,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                faults: FaultPlan {
                    iggy_response_loss: 1.0 / 400.0,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "iggy-restart",
            summary: "Iggy restarts with its data kept: groups re-established, no acknowledged record or commit lost",
            explanation: "The Iggy server restarts on its data: what it stored stays, its sessions and requests in flight are lost, and its consumer-group members of before stay listed with no connection (DIFF-12). The gateways' requests in flight fail (retriable), producers retry, the group's commits are stored again after the gateway reclaims the Iggy group (CO-RECLAIM-1). Nothing acknowledged is lost, and an idempotent producer's records are stored once.",
            seed: 91,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                assigned_consumers: 1,
                group_consumers: 2,
                faults: FaultPlan {
                    iggy_restart: 1.0 / 400.0,
                    iggy_link: 1.0 / 800.0,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "group-rebalance",
            summary: "rebalances with commits: re-delivery after a rebalance (allowed), no poll skip past a commit",
            explanation: "Three members share the topic's partitions. Their links to the gateway break, so members crash, rejoin and the group rebalances; a partition moves to a member that starts from the group's committed offset. Records delivered after the last commit are delivered again (allowed); a member never starts past the committed offset (a poll skip would not be).",
            seed: 1,
            shows: Some(Class::Redelivery),
            answers_retries: false,
            config: WorldConfig {
                partitions: 4,
                assigned_consumers: 0,
                group_consumers: 3,
                consumer: ConsumerSpec {
                    commit_interval_ms: 400,
                    ..consumer()
                },
                faults: FaultPlan {
                    consumer_link: 1.0 / 600.0,
                    ..FaultPlan::default()
                },
                ..base()
            },
        },
        Scenario {
            name: "two-gateways",
            summary: "two gateways, one group, one Iggy: coordinator routing, partition leaders, and clients at the wrong gateway",
            explanation: "Two gateways front one Iggy. Each group has one coordinator gateway (GROUP-COORDINATOR-1); members bootstrap from either, and each first sends JoinGroup to its bootstrap gateway: the wrong one answers NOT_COORDINATOR, the member asks FindCoordinator and moves. The plain producers write through their bootstrap gateways to every partition. The idempotent producer (producer-2, up to 5 requests in flight) knows both gateways and sends each batch to its partition's leader as Metadata names it (PRODUCER-LEADER-1); one gateway restarts now and then, and while it warms up (GROUP-COORDINATOR-4) its partitions have no leader, so the producer is told NOT_LEADER_OR_FOLLOWER, asks Metadata again, and waits. Its records are stored once whichever gateway it retries through.",
            seed: 50,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                gateways: 2,
                partitions: 3,
                producers: vec![plain_producer(), plain_producer(), idempotent_pipelined_producer()],
                assigned_consumers: 1,
                group_consumers: 2,
                join_bootstrap_first: true,
                faults: FaultPlan {
                    producer_link: 1.0 / 600.0,
                    gateway_restart: 1.0 / 3_000.0,
                    ..FaultPlan::default()
                },
                // A gateway restarts every 3 s on average and each restart leaves its partitions
                // without a leader for about 4 s: faults that never stop would starve the
                // idempotent producer.
                fault_phase_limit_ms: Some(10_000),
                ..base()
            },
        },
        Scenario {
            name: "replicated-iggy",
            summary: "three replicated Iggy nodes; the primary crashes or is isolated: failover, unknown outcomes retried, nothing acknowledged lost",
            explanation: "Three Iggy nodes hold one replicated log: the primary acknowledges an append once a follower holds it too (a quorum of 2 of 3); followers refuse requests as not primary. The primary crashes (restarting later) or is cut off from every host; after a heartbeat timeout the survivors elect a new primary that keeps every append a quorum held. The gateways take the three nodes as a roster (CLUSTER-ROSTER-1) and move to the next node on a refused or broken connection, no answer, or a not-primary answer (CLUSTER-FAILOVER-1), within the failover timeout (CLUSTER-FAILOVER-2). An append sent to a primary that failed before answering has an unknown outcome: the gateway answers NOT_LEADER_OR_FOLLOWER and never sends it again itself (CLUSTER-UNKNOWN-1); the producer retries. A plain producer's append the old primary got to a quorum then appears twice (allowed); an idempotent producer's retry is checked against the new primary's log, read from where the gateway's state ends (PRODUCER-UNKNOWN-1), and answered with the stored offset. An append the old primary did not get to a quorum may be lost, and was never acknowledged.",
            seed: 2,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: replicated(),
        },
        Scenario {
            name: "replicated-iggy-gateway-dies",
            summary: "the same cluster behind two gateways; the second gateway dies while a group runs on it and its groups and partitions move",
            explanation: "As replicated-iggy, with two gateways and a consumer group. Besides the primary's faults, the second gateway crashes and stays down for seconds: the first sees it down (GROUP-COORDINATOR-2) and takes its groups over, whose members find the new coordinator and resume from the group's commits in Iggy; it takes the dead gateway's partitions over for idempotent producers too (PRODUCER-LEADER-1), reading each one's tail back before its first idempotent batch there (PRODUCER-STATE-REBUILD-1), so the idempotent producer's retries through it are answered from what the dead gateway stored. Plain producers bound to the dead gateway wait for it to come back. Nothing acknowledged is lost; a plain producer's duplicates and re-deliveries are allowed.",
            seed: 136,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                gateways: 2,
                partitions: 3,
                producers: vec![plain_producer(), plain_producer(), idempotent_producer()],
                assigned_consumers: 1,
                group_consumers: 2,
                faults: FaultPlan {
                    gateway_crash: 1.0 / 1_500.0,
                    gateway_recovery: 1.0 / 4_000.0,
                    ..replicated().faults
                },
                // The second gateway is down about 4 s in every 5.5 s: a plain producer bound to
                // it, and the idempotent one while that gateway's partitions wait for a leader,
                // may take longer than any limit to finish while the faults go on.
                fault_phase_limit_ms: Some(30_000),
                max_simulated_s: 60,
                ..replicated()
            },
        },
        Scenario {
            name: "consumer-protocol",
            summary: "KIP-848 members join, crash and leave while producers write and the gateway restarts: no partition owned twice",
            explanation: "Three members of one group speak Kafka 4's consumer protocol (ConsumerGroupHeartbeat, member epochs, server-side `uniform` assignment), some joining late, each crashing (no leave: its partitions wait for its session to lapse) or closing cleanly (commit, leave with epoch -1) at most once while producers write. Every hop fails now and then: client links partitioned or held, the gateway restarts (the group's state is in its memory, so members are answered UNKNOWN_MEMBER_ID, drop everything and join again with epoch 0), the gateway's link to Iggy is cut, Iggy restarts and loses append answers. Members revoke before they are given more (GROUP-CONSUMER-REVOKE-1), commit with OffsetCommit v9 at their member epoch (GROUP-CONSUMER-COMMIT-1), and resume from the group's commits. The checker adds owned-twice: a partition held by two members at once, by the members' own record of the coordinator's answers. A plain producer's duplicates and re-deliveries are allowed; a lost record, an idempotent producer's duplicate, a lost commit or a partition owned twice is not.",
            seed: 1,
            shows: None,
            answers_retries: false,
            config: consumer_protocol(),
        },
        Scenario {
            name: "consumer-protocol-two-gateways",
            summary: "the same members behind two gateways: the group's coordinator found by FindCoordinator, either gateway restarting",
            explanation: "As consumer-protocol, with two gateways fronting one Iggy. The group has one coordinator gateway (GROUP-COORDINATOR-1), which members find through FindCoordinator from their bootstrap gateway; a restart of the coordinator loses the group's state (its members are fenced and join again), a restart of the other gateway only breaks connections. Plain producers write through their bootstrap gateways, the idempotent one to each partition's leader (PRODUCER-LEADER-1).",
            seed: 1,
            shows: Some(Class::Duplicate),
            answers_retries: true,
            config: WorldConfig {
                gateways: 2,
                producers: vec![plain_producer(), plain_producer(), idempotent_producer()],
                // Each gateway restarts every 2.5 s on average, leaving its partitions without a
                // leader for its warm-up: faults that never stop would starve the idempotent
                // producer.
                fault_phase_limit_ms: Some(20_000),
                ..consumer_protocol()
            },
        },
    ]
}

/// `consumer-protocol`: three KIP-848 members, faults on every hop of one gateway.
fn consumer_protocol() -> WorldConfig {
    WorldConfig {
        partitions: 4,
        assigned_consumers: 0,
        protocol_members: 3,
        churn: MemberChurn {
            rebalance_timeout_ms: 10_000,
            max_restarts: 1,
            lifetime_ms: 6_000,
            crash_chance: 0.3,
            late_join_ms: 1_500,
        },
        consumer: ConsumerSpec {
            commit_interval_ms: 300,
            ..consumer()
        },
        faults: FaultPlan {
            producer_link: 1.0 / 800.0,
            consumer_link: 1.0 / 800.0,
            hold: true,
            gateway_restart: 1.0 / 2_500.0,
            iggy_link: 1.0 / 6_000.0,
            iggy_restart: 1.0 / 5_000.0,
            iggy_response_loss: 1.0 / 2_000.0,
            ..FaultPlan::default()
        },
        max_simulated_s: 120,
        ..base()
    }
}

/// The replicated cluster of `replicated-iggy`: three nodes, the primary's faults.
fn replicated() -> WorldConfig {
    WorldConfig {
        group_consumers: 1,
        iggy_nodes: 3,
        faults: FaultPlan {
            primary_crash: 1.0 / 800.0,
            primary_isolation: 1.0 / 1_200.0,
            node_recovery: 1.0 / 1_500.0,
            producer_link: 1.0 / 1_500.0,
            ..FaultPlan::default()
        },
        max_simulated_s: 60,
        ..base()
    }
}

/// The scenario called `name`.
pub fn find(name: &str) -> Option<Scenario> {
    catalogue().into_iter().find(|s| s.name == name)
}
