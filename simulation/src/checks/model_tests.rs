//! The checker against a model of a correct gateway: random histories in which requests are
//! written and acknowledged, written with the answer lost, lost before the write, or caught by
//! gateway and Iggy restarts, and in which a group's consumers poll, commit, crash and rebalance
//! as Kafka's do. The model stores a plain producer's retry again (DELIVERY-2, at least once)
//! and answers an idempotent producer's retry of a batch it stored with the first copy's offset
//! (DELIVERY-3, PRODUCER-DUP-1). No such history may fail (no false alarm), the allowed classes
//! must show up, and removing one acknowledged record from one must be caught.

use super::{check, Class};
use crate::history::{
    AttemptOutcome, CommitOutcome, ConsumerEventKind, ConsumerMode, FaultKind, History, Hop, PartitionLog, RecordValue,
    StartFrom, Stored, TopicPartition,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const GATEWAY: &str = "gw";
const GROUP: &str = "g";
const PARTITIONS: i32 = 2;

fn model(seed: u64) -> History {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut h = History::new("model", seed);
    h.add_gateway(GATEWAY);
    let partitions: Vec<TopicPartition> = (0..PARTITIONS).map(|p| TopicPartition::new("t", p)).collect();
    for p in &partitions {
        h.add_partition(p.clone());
    }
    let mut logs: Vec<Vec<RecordValue>> = vec![Vec::new(); partitions.len()];
    let mut now = 0u64;
    let producers: Vec<usize> = (0..2)
        .map(|i| h.add_producer(format!("producer{i}"), i == 1, 1))
        .collect();
    let mut next_seq = vec![0u64; producers.len()];
    for _ in 0..30 {
        let producer = rng.random_range(0..producers.len());
        let p = rng.random_range(0..partitions.len());
        let n = rng.random_range(1..=3u64);
        let values: Vec<RecordValue> = (0..n)
            .map(|i| RecordValue::new(producer, next_seq[producer] + i))
            .collect();
        next_seq[producer] += n;
        now += 100;
        let idempotent = h.producers[producer].idempotent;
        let request = h.produce_request(producer, now, partitions[p].clone(), values.clone(), None);
        // Where the model stored the batch first: an idempotent producer's retry is answered
        // from there and not written again.
        let mut stored_at: Option<i64> = None;
        for attempt_no in 1.. {
            now += 10;
            let attempt = h.produce_attempt(request, now, GATEWAY, attempt_no);
            let roll: u32 = if attempt_no >= 5 { 0 } else { rng.random_range(0..100) };
            let mut write = |logs: &mut Vec<Vec<RecordValue>>| match stored_at {
                Some(first) if idempotent => first,
                _ => {
                    let base = logs[p].len() as i64;
                    logs[p].extend(values.iter().copied());
                    stored_at.get_or_insert(base);
                    base
                }
            };
            let producer_hop = Hop::ClientGateway {
                client: format!("producer{producer}"),
                gateway: GATEWAY.into(),
            };
            let iggy_hop = Hop::GatewayIggy {
                gateway: GATEWAY.into(),
            };
            now += 10;
            let outcome = match roll {
                0..60 => AttemptOutcome::Acked {
                    base_offset: write(&mut logs),
                },
                60..72 => {
                    write(&mut logs);
                    h.fault_at(
                        FaultKind::ResponseLost {
                            hop: producer_hop,
                            produce: Some((request, attempt)),
                        },
                        now,
                    );
                    AttemptOutcome::TimedOut
                }
                72..82 => {
                    write(&mut logs);
                    h.fault_at(
                        FaultKind::ResponseLost {
                            hop: iggy_hop,
                            produce: None,
                        },
                        now,
                    );
                    AttemptOutcome::Error { code: 7 }
                }
                82..90 => {
                    h.fault_at(
                        FaultKind::RequestLost {
                            hop: producer_hop,
                            produce: Some((request, attempt)),
                        },
                        now,
                    );
                    AttemptOutcome::TimedOut
                }
                90..96 => {
                    if rng.random_bool(0.5) {
                        write(&mut logs);
                    }
                    h.fault_at(
                        FaultKind::GatewayRestart {
                            gateway: GATEWAY.into(),
                        },
                        now,
                    );
                    AttemptOutcome::ConnectionLost
                }
                _ => {
                    write(&mut logs);
                    h.fault_at(FaultKind::IggyRestart, now);
                    AttemptOutcome::ConnectionLost
                }
            };
            now += 10;
            h.produce_outcome(request, attempt, now, outcome);
            if matches!(outcome, AttemptOutcome::Acked { .. }) {
                break;
            }
        }
    }

    // Two group consumers; the committed store is what OffsetFetch answers.
    let consumers: Vec<usize> = (0..2)
        .map(|i| {
            h.add_consumer(
                format!("consumer{i}"),
                ConsumerMode::Group { group: GROUP.into() },
                GATEWAY,
            )
        })
        .collect();
    let mut store: Vec<Option<i64>> = vec![None; partitions.len()];
    let mut session = vec![0u32; consumers.len()];
    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); consumers.len()];
    let mut position: Vec<Vec<i64>> = vec![vec![0; partitions.len()]; consumers.len()];
    let mut generation = 0;
    let rebalance = |h: &mut History,
                     now: u64,
                     generation: &mut i32,
                     session: &[u32],
                     owned: &mut Vec<Vec<usize>>,
                     position: &mut Vec<Vec<i64>>,
                     store: &[Option<i64>],
                     split: usize| {
        *generation += 1;
        for (c, owns) in owned.iter_mut().enumerate() {
            *owns = (0..partitions.len())
                .filter(|p| (p + split + c).is_multiple_of(2))
                .collect();
            let assigned = owns.iter().map(|p| partitions[*p].clone()).collect();
            h.consumer_event(
                c,
                session[c],
                now,
                ConsumerEventKind::Assigned {
                    generation: Some(*generation),
                    member_id: Some(format!("m{c}")),
                    partitions: assigned,
                },
            );
            for p in owns.iter() {
                let (offset, from) = match store[*p] {
                    Some(offset) => (offset, StartFrom::Committed),
                    None => (0, StartFrom::Earliest),
                };
                position[c][*p] = offset;
                h.consumer_event(
                    c,
                    session[c],
                    now + 1,
                    ConsumerEventKind::Positioned {
                        partition: partitions[*p].clone(),
                        offset,
                        from,
                    },
                );
            }
        }
    };
    for c in &consumers {
        now += 10;
        session[*c] = h.start_session(*c, now);
    }
    now += 10;
    rebalance(
        &mut h,
        now,
        &mut generation,
        &session,
        &mut owned,
        &mut position,
        &store,
        0,
    );
    for _ in 0..60 {
        now += 50;
        let c = rng.random_range(0..consumers.len());
        match rng.random_range(0..10) {
            0..5 => {
                for p in owned[c].clone() {
                    let from = position[c][p];
                    let to = (from + rng.random_range(0..4)).min(logs[p].len() as i64);
                    if to > from {
                        let records = (from..to).map(|o| Stored::record(o, logs[p][o as usize])).collect();
                        h.consumer_event(
                            c,
                            session[c],
                            now,
                            ConsumerEventKind::Polled {
                                partition: partitions[p].clone(),
                                records,
                            },
                        );
                        position[c][p] = to;
                    }
                }
            }
            5..8 => {
                for p in owned[c].clone() {
                    let (acked, lands) = match rng.random_range(0..10) {
                        0..7 => (true, true),
                        7..9 => (false, true),
                        _ => (false, false),
                    };
                    if lands {
                        store[p] = Some(position[c][p]);
                    }
                    h.consumer_event(
                        c,
                        session[c],
                        now + 5,
                        ConsumerEventKind::Committed {
                            group: GROUP.into(),
                            partition: partitions[p].clone(),
                            offset: position[c][p],
                            generation: Some(generation),
                            sent_us: now,
                            outcome: if acked {
                                CommitOutcome::Acked
                            } else {
                                CommitOutcome::TimedOut
                            },
                        },
                    );
                }
            }
            8 => {
                h.consumer_event(c, session[c], now, ConsumerEventKind::SessionEnded { clean: false });
                session[c] = h.start_session(c, now + 1);
                rebalance(
                    &mut h,
                    now + 2,
                    &mut generation,
                    &session,
                    &mut owned,
                    &mut position,
                    &store,
                    rng.random_range(0..2),
                );
            }
            _ => {
                rebalance(
                    &mut h,
                    now,
                    &mut generation,
                    &session,
                    &mut owned,
                    &mut position,
                    &store,
                    rng.random_range(0..2),
                );
            }
        }
    }
    now += 100;
    h.healed(now);
    for (p, partition) in partitions.iter().enumerate() {
        let records: Vec<Stored> = logs[p]
            .iter()
            .enumerate()
            .map(|(o, v)| Stored::record(o as i64, *v))
            .collect();
        h.backend_holds(PartitionLog {
            partition: partition.clone(),
            records: records.clone(),
        });
        h.drained(PartitionLog {
            partition: partition.clone(),
            records,
        });
    }
    h
}

#[test]
fn delivery_2_delivery_3_a_correct_history_never_fails_and_shows_the_allowed_classes() {
    let mut seen = std::collections::BTreeSet::new();
    let mut idempotent_retries = 0;
    for seed in 0..300 {
        let h = model(seed);
        // The idempotent producer's requests acknowledged on a retry: none may leave a second copy.
        idempotent_retries += h
            .produces
            .iter()
            .filter(|r| h.producers[r.producer].idempotent && r.attempts.len() > 1)
            .filter(|r| r.acked().is_some_and(|(a, _)| a.attempt > 1))
            .count();
        let verdict = check(&h);
        assert!(!verdict.fails(), "seed {seed}: {}", super::render::report(&h, &verdict));
        seen.extend(verdict.classes());
        // Every failed attempt in the model has a fault behind it, and the cause must name it.
        for duplicate in verdict.of(Class::Duplicate) {
            let cause = duplicate.duplicate.as_ref().expect("a duplicate carries its cause");
            assert!(!cause.failed.is_empty(), "seed {seed}: {duplicate:?}");
            assert!(
                cause
                    .failed
                    .iter()
                    .all(|a| a.fault.is_some() && a.why != super::cause::Why::NoFault),
                "seed {seed}: {duplicate:#?}"
            );
        }
    }
    for class in [Class::Duplicate, Class::Redelivery] {
        assert!(seen.contains(&class), "the model never produced {class}: {seen:?}");
    }
    assert!(idempotent_retries > 0, "the model never retried an idempotent batch");
}

#[test]
fn delivery_2_removing_one_acknowledged_record_from_a_correct_history_is_caught() {
    for seed in 0..100 {
        let mut h = model(seed);
        let Some((request, _)) = h.produces.iter().find_map(|r| r.acked().map(|a| (r.clone(), a.1))) else {
            continue;
        };
        let value = request.values[0];
        for log in h.backend.iter_mut().chain(h.drain.iter_mut()) {
            log.records.retain(|r| r.value != Some(value));
        }
        let verdict = check(&h);
        assert!(verdict.fails(), "seed {seed}");
        assert!(verdict.count(Class::LostWrite) == 1, "seed {seed}: {verdict:#?}");
    }
}
