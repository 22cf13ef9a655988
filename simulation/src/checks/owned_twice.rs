//! A partition owned by two members at once (violation, GROUP-CONSUMER-REVOKE-1,
//! GROUP-CONSUMER-EPOCH-1): in a consumer-protocol group, two members held one partition over an
//! overlapping stretch of time, each by its own record of the coordinator's answers.
//!
//! A member holds a partition from the `Assigned` event (an answer, at a member epoch) that gave
//! it, until the `Assigned` event that no longer names it (it dropped it on a revocation or a
//! clean close), a `Fenced` event, or the end of its session (a crash ends the process and what
//! it held); a partition still held at the end of the run is held to the end. The members record
//! those events no earlier than they act on them: a member drops a revoked partition before it
//! says so to the coordinator, and takes a new one only once an answer gave it, so a coordinator
//! that keeps GROUP-CONSUMER-REVOKE-1 can never show an overlap.
//!
//! Two overlaps are explained instead, and reported as `stale-owner` (allowed): the member that
//! held the partition first learned, at its next answer, that it was no longer a member
//! (FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: its session or revocation had timed out), or a
//! gateway restarted or crashed between the answer that gave the first member the partition and
//! the one that gave it to the second (the coordinator's group state is in its memory, so the new
//! process knew nothing of the first). Either way the coordinator had let the first member go, and
//! the client keeps what it held until an answer tells it, as Kafka's clients do; its commits are
//! refused meanwhile (GROUP-CONSUMER-COMMIT-1). Kafka's coordinator reloads its groups after a
//! failover, so there only the first case arises.

use super::index::{secs, Index};
use super::{Anomaly, Class};
use crate::history::{ConsumerEventKind, ConsumerMode, FaultKind, History, TopicPartition};
use std::collections::BTreeMap;

/// How a holding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// An answer took it away (or the member closed): it dropped the partition.
    Released,
    /// The coordinator told it it was no longer a member.
    Fenced,
    /// The member's process ended (a crash, or a close after its goal).
    SessionEnded,
    /// Still held when the run ended.
    Open,
}

/// One member holding one partition over `[from_us, to_us)`.
#[derive(Debug, Clone)]
struct Holding<'h> {
    consumer: usize,
    session: u32,
    member_id: &'h str,
    epoch: i32,
    group: &'h str,
    partition: &'h TopicPartition,
    from_us: u64,
    to_us: u64,
    end: End,
}

/// What a (consumer, session) holds now: partition → (since, member id, epoch).
type Held<'h> = BTreeMap<&'h TopicPartition, (u64, &'h str, i32)>;

/// The group of a consumer-protocol member; `None` for any other consumer.
fn group_of(history: &History, consumer: usize) -> Option<&str> {
    match history.consumers.get(consumer).map(|c| &c.mode) {
        Some(ConsumerMode::ConsumerProtocol { group }) => Some(group.as_str()),
        _ => None,
    }
}

fn close<'h>(
    out: &mut Vec<Holding<'h>>,
    key: (usize, u32),
    group: &'h str,
    partition: &'h TopicPartition,
    since: (u64, &'h str, i32),
    to_us: u64,
    end: End,
) {
    out.push(Holding {
        consumer: key.0,
        session: key.1,
        member_id: since.1,
        epoch: since.2,
        group,
        partition,
        from_us: since.0,
        to_us,
        end,
    });
}

fn holdings(history: &History) -> Vec<Holding<'_>> {
    let mut held: BTreeMap<(usize, u32), Held<'_>> = BTreeMap::new();
    let mut out = Vec::new();
    for event in &history.consumer_events {
        let Some(group) = group_of(history, event.consumer) else {
            continue;
        };
        let key = (event.consumer, event.session);
        let now = held.entry(key).or_default();
        match &event.kind {
            ConsumerEventKind::Assigned {
                generation,
                member_id,
                partitions,
            } => {
                let member = member_id.as_deref().unwrap_or("");
                let gone: Vec<&TopicPartition> = now
                    .iter()
                    .filter(|(p, (_, id, _))| !partitions.contains(p) || *id != member)
                    .map(|(p, _)| *p)
                    .collect();
                for p in gone {
                    let since = now.remove(p).expect("held");
                    close(&mut out, key, group, p, since, event.at_us, End::Released);
                }
                for p in partitions {
                    now.entry(p).or_insert((event.at_us, member, generation.unwrap_or(-1)));
                }
            }
            ConsumerEventKind::Fenced { .. } | ConsumerEventKind::SessionEnded { .. } => {
                let end = if matches!(event.kind, ConsumerEventKind::Fenced { .. }) {
                    End::Fenced
                } else {
                    End::SessionEnded
                };
                for (p, since) in std::mem::take(now) {
                    close(&mut out, key, group, p, since, event.at_us, end);
                }
            }
            _ => {}
        }
    }
    for (key, now) in held {
        let Some(group) = group_of(history, key.0) else {
            continue;
        };
        for (p, since) in now {
            close(&mut out, key, group, p, since, u64::MAX, End::Open);
        }
    }
    out
}

fn holder_text(history: &History, h: &Holding<'_>) -> String {
    let name = history.consumers.get(h.consumer).map_or("?", |c| c.name.as_str());
    format!(
        "{name} session {} (member {}, epoch {}, from {})",
        h.session,
        h.member_id,
        h.epoch,
        secs(h.from_us)
    )
}

fn end_text(h: &Holding<'_>) -> String {
    match h.end {
        End::Released => format!("it dropped it at {}", secs(h.to_us)),
        End::SessionEnded => format!("its process ended at {}", secs(h.to_us)),
        End::Open => "it held it to the end of the run".into(),
        End::Fenced => format!("it was fenced at {}", secs(h.to_us)),
    }
}

pub(super) fn check(index: &Index<'_>, out: &mut Vec<Anomaly>) {
    let history = index.history;
    let mut by_partition: BTreeMap<(&str, &TopicPartition), Vec<Holding<'_>>> = BTreeMap::new();
    for h in holdings(history) {
        by_partition.entry((h.group, h.partition)).or_default().push(h);
    }
    for ((group, partition), mut list) in by_partition {
        list.sort_by_key(|h| (h.from_us, h.consumer, h.session));
        for (i, first) in list.iter().enumerate() {
            for second in &list[i + 1..] {
                if second.from_us >= first.to_us {
                    continue;
                }
                if (first.consumer, first.session) == (second.consumer, second.session) {
                    continue;
                }
                let restart = history.faults.iter().find(|f| {
                    matches!(
                        f.kind,
                        FaultKind::GatewayRestart { .. } | FaultKind::GatewayCrash { .. }
                    ) && f.start_us >= first.from_us
                        && f.start_us <= second.from_us
                });
                let what = format!(
                    "{partition} of {group} held by {} and by {} at once, from {}",
                    holder_text(history, first),
                    holder_text(history, second),
                    secs(second.from_us)
                );
                let anomaly = if first.end == End::Fenced {
                    Anomaly::new(Class::StaleOwner, Some(partition), what).because(format!(
                        "the coordinator had let the first go before: {}",
                        end_text(first)
                    ))
                } else if let Some(fault) = restart {
                    let gateway = match &fault.kind {
                        FaultKind::GatewayRestart { gateway } | FaultKind::GatewayCrash { gateway } => gateway.as_str(),
                        _ => "?",
                    };
                    Anomaly::new(Class::StaleOwner, Some(partition), what).because(format!(
                        "{gateway} restarted at {} (fault #{}) and forgot the group; the first had not heard: {}",
                        secs(fault.start_us),
                        fault.id,
                        end_text(first)
                    ))
                } else {
                    Anomaly::new(Class::OwnedTwice, Some(partition), what).because(format!(
                        "the second was given it while the first still held it: {}",
                        end_text(first)
                    ))
                };
                out.push(anomaly);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::{log_of, set_log, tp};
    use super::super::{check, Class};
    use crate::history::{ConsumerEventKind, ConsumerMode, FaultKind, History, TopicPartition};

    /// Two consumer-protocol members; `a` holds partition 0 from epoch 1 at 100 µs; `b` is
    /// given it at epoch 2 at 200 µs. What ends `a`'s holding, and when, is the test's.
    fn handover(a_ends: impl FnOnce(&mut History, usize)) -> History {
        let mut h = History::new("owned-twice", 1);
        h.add_partition(tp());
        let mode = || ConsumerMode::ConsumerProtocol { group: "g".into() };
        let a = h.add_consumer("a", mode(), "gw");
        let b = h.add_consumer("b", mode(), "gw");
        let sa = h.start_session(a, 10);
        let sb = h.start_session(b, 20);
        let assign = |h: &mut History, c, s, at, epoch, partitions: Vec<TopicPartition>| {
            h.consumer_event(
                c,
                s,
                at,
                ConsumerEventKind::Assigned {
                    generation: Some(epoch),
                    member_id: Some(format!("m{c}")),
                    partitions,
                },
            );
        };
        assign(&mut h, a, sa, 100, 1, vec![tp()]);
        assign(&mut h, b, sb, 120, 2, vec![]);
        a_ends(&mut h, a);
        assign(&mut h, b, sb, 200, 2, vec![tp()]);
        h.consumer_events.sort_by_key(|e| e.at_us);
        h.healed(1_000);
        set_log(&mut h, log_of(&[]));
        h
    }

    fn owned_twice(h: &History) -> usize {
        check(h).count(Class::OwnedTwice)
    }

    #[test]
    fn group_consumer_revoke_1_a_partition_given_before_its_holder_dropped_it_is_owned_twice() {
        // `a` drops it (an answer without it) only at 300 µs, after `b` got it at 200.
        let h = handover(|h, a| {
            h.consumer_event(
                a,
                1,
                300,
                ConsumerEventKind::Assigned {
                    generation: Some(2),
                    member_id: Some(format!("m{a}")),
                    partitions: vec![],
                },
            )
        });
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::OwnedTwice], "{verdict:#?}");
        assert!(verdict.fails());
        assert_eq!(
            verdict.anomalies[0].what,
            "t-0 of g held by a session 1 (member m0, epoch 1, from 0.000 s) and by b session 1 (member m1, epoch 2, from 0.000 s) at once, from 0.000 s"
        );
        assert_eq!(
            verdict.anomalies[0].cause.as_deref(),
            Some("the second was given it while the first still held it: it dropped it at 0.000 s")
        );
        // Never dropped at all: held to the end of the run.
        assert_eq!(owned_twice(&handover(|_, _| {})), 1);
    }

    #[test]
    fn group_consumer_revoke_1_a_partition_dropped_before_it_is_given_again_is_not_owned_twice() {
        // Revoked and acknowledged at 150 µs, before `b` got it at 200.
        let h = handover(|h, a| {
            h.consumer_event(
                a,
                1,
                150,
                ConsumerEventKind::Assigned {
                    generation: Some(1),
                    member_id: Some(format!("m{a}")),
                    partitions: vec![],
                },
            )
        });
        assert_eq!(owned_twice(&h), 0, "{:#?}", check(&h));
        // The holder crashed at 150 µs: its process, and what it held, ended then.
        let crashed = handover(|h, a| h.consumer_event(a, 1, 150, ConsumerEventKind::SessionEnded { clean: false }));
        assert_eq!(owned_twice(&crashed), 0);
    }

    #[test]
    fn group_consumer_epoch_1_a_holder_fenced_afterwards_had_been_let_go_and_is_a_stale_owner() {
        // `a` learns only at 300 µs, after `b` got the partition, that the coordinator had
        // dropped it (a gateway restart, or a session that lapsed).
        let h = handover(|h, a| {
            h.consumer_event(
                a,
                1,
                300,
                ConsumerEventKind::Fenced {
                    member_id: format!("m{a}"),
                    epoch: 1,
                    code: 25,
                },
            )
        });
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::StaleOwner], "{verdict:#?}");
        assert!(!verdict.fails());
    }

    #[test]
    fn group_consumer_epoch_1_a_gateway_restart_between_the_two_answers_explains_the_overlap() {
        let mut h = handover(|_, _| {});
        h.fault_at(FaultKind::GatewayRestart { gateway: "gw".into() }, 150);
        let verdict = check(&h);
        assert_eq!(verdict.classes(), vec![Class::StaleOwner], "{verdict:#?}");
        assert_eq!(
            verdict.anomalies[0].cause.as_deref(),
            Some("gw restarted at 0.000 s (fault #0) and forgot the group; the first had not heard: it held it to the end of the run")
        );
        // A restart before the first holder got the partition explains nothing.
        let mut h = handover(|_, _| {});
        h.fault_at(FaultKind::GatewayRestart { gateway: "gw".into() }, 50);
        assert_eq!(owned_twice(&h), 1);
    }

    #[test]
    fn classic_group_members_are_not_checked_for_owned_twice() {
        let mut h = handover(|_, _| {});
        for c in &mut h.consumers {
            c.mode = ConsumerMode::Group { group: "g".into() };
        }
        assert_eq!(owned_twice(&h), 0);
    }
}
