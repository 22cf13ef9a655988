//! The producer-state rules of docs/spec/producer-ids.md, on the sans-io state and table.

use super::partition::{PartitionProducers, ProducerRefusal, ReadNeed, Verdict, RUNS_RETAINED};
use super::table::{PartitionKey, ProducerStates};
use super::{Owner, ProducerStateSettings};
use kig_core::producer_tag::{increment_sequence, BatchIdentity, ProducerTag};
use std::sync::Arc;

const PID: i64 = 7 << 47 | 1;

fn owner(name: &str) -> Owner {
    Arc::from(name)
}

fn batch(epoch: i16, first: i32, count: i32) -> BatchIdentity {
    BatchIdentity {
        producer_id: PID,
        producer_epoch: epoch,
        first_sequence: first,
        last_sequence: increment_sequence(first, count - 1),
    }
}

/// A partition whose log was read (empty) and holds `batches` of `PID` at epoch 0, each of
/// `count` records, written back to back from offset 0.
fn written(batches: i32, count: i32) -> PartitionProducers {
    let mut state = PartitionProducers::default();
    state.apply_read(std::iter::empty(), 0, &owner("log"), 0);
    for i in 0..batches {
        let b = batch(0, i * count, count);
        assert_eq!(state.check(&b), Verdict::Append);
        state.record(
            &b,
            b.first_sequence,
            b.last_sequence,
            (i * count) as u64,
            &owner("a"),
            0,
        );
    }
    state
}

#[test]
fn producer_seq_1_the_next_batch_is_written_and_a_gap_or_a_repeat_out_of_range_is_out_of_order() {
    let state = written(3, 10);
    assert_eq!(state.check(&batch(0, 30, 10)), Verdict::Append);
    let gap = state.check(&batch(0, 31, 10));
    assert!(
        matches!(
            gap,
            Verdict::Refuse(ProducerRefusal::OutOfOrder { expected_after: 29, .. })
        ),
        "{gap:?}"
    );
}

#[test]
fn producer_dup_1_a_retry_of_one_of_the_last_five_batches_is_answered_with_its_first_offset() {
    let state = written(RUNS_RETAINED as i32, 10);
    // Batches written back to back join one run; every one of them is still found.
    for i in 0..RUNS_RETAINED as i32 {
        assert_eq!(
            state.check(&batch(0, i * 10, 10)),
            Verdict::Duplicate {
                first_offset: (i * 10) as u64
            }
        );
    }
}

#[test]
fn producer_dup_1_runs_apart_keep_the_last_five_and_an_older_retry_is_out_of_order() {
    let mut state = PartitionProducers::default();
    state.apply_read(std::iter::empty(), 0, &owner("log"), 0);
    // Each batch lands 100 offsets after the one before (other producers between).
    for i in 0..(RUNS_RETAINED as i32 + 2) {
        let b = batch(0, i * 10, 10);
        state.record(&b, b.first_sequence, b.last_sequence, (i * 100) as u64, &owner("a"), 0);
    }
    assert_eq!(state.entry(PID).map(|e| e.runs().len()), Some(RUNS_RETAINED));
    assert_eq!(state.check(&batch(0, 60, 10)), Verdict::Duplicate { first_offset: 600 });
    assert_eq!(state.check(&batch(0, 20, 10)), Verdict::Duplicate { first_offset: 200 });
    assert!(matches!(
        state.check(&batch(0, 10, 10)),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { .. })
    ));
}

#[test]
fn producer_epoch_1_an_older_epoch_is_refused_and_a_newer_one_starts_at_zero() {
    let mut state = written(2, 5);
    let b = batch(1, 0, 5);
    assert_eq!(state.check(&b), Verdict::Append);
    assert!(matches!(
        state.check(&batch(1, 3, 5)),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { expected_after: -1, .. })
    ));
    state.record(&b, 0, 4, 100, &owner("a"), 0);
    assert!(matches!(
        state.check(&batch(0, 10, 5)),
        Verdict::Refuse(ProducerRefusal::StaleEpoch { current: 1, .. })
    ));
    // The old epoch's batches are gone with it: a retry of one is stale, not a duplicate.
    assert!(matches!(
        state.check(&batch(0, 0, 5)),
        Verdict::Refuse(ProducerRefusal::StaleEpoch { .. })
    ));
}

#[test]
fn producer_unknown_2_a_producer_with_no_state_starts_at_any_sequence() {
    let state = written(1, 5);
    let stranger = BatchIdentity {
        producer_id: PID + 1,
        ..batch(4, 12_345, 3)
    };
    assert_eq!(state.check(&stranger), Verdict::Append);
}

#[test]
fn producer_batch_1_a_negative_epoch_or_sequence_is_invalid() {
    let state = written(1, 5);
    assert!(matches!(
        state.check(&batch(-1, 0, 1)),
        Verdict::Refuse(ProducerRefusal::Invalid { .. })
    ));
    assert!(matches!(
        state.check(&batch(0, -5, 1)),
        Verdict::Refuse(ProducerRefusal::Invalid { .. })
    ));
}

#[test]
fn producer_dup_2_a_batch_written_in_part_gets_the_rest_written() {
    let mut state = written(1, 10);
    // Batch 10..=19 of which the first send, 10..=13, was written before the second failed.
    let b = batch(0, 10, 10);
    state.record(&b, 10, 13, 10, &owner("a"), 0);
    assert_eq!(
        state.check(&b),
        Verdict::Partial {
            written: 4,
            first_offset: 10
        }
    );
    state.record(&b, 14, 19, 14, &owner("a"), 0);
    assert_eq!(state.check(&b), Verdict::Duplicate { first_offset: 10 });
}

#[test]
fn producer_seq_1_sequences_run_on_past_i32_max() {
    let mut state = PartitionProducers::default();
    state.apply_read(std::iter::empty(), 0, &owner("log"), 0);
    let b = batch(0, i32::MAX - 2, 6);
    assert_eq!(b.last_sequence, 2);
    state.record(&b, b.first_sequence, b.last_sequence, 0, &owner("a"), 0);
    assert_eq!(state.check(&b), Verdict::Duplicate { first_offset: 0 });
    assert_eq!(state.check(&batch(0, 3, 1)), Verdict::Append);
    assert!(matches!(
        state.check(&batch(0, 4, 1)),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { .. })
    ));
}

/// The tags a log holds for `written(batches, count)`, at the same offsets, with a record of
/// another producer after each batch.
fn log_of(batches: i32, count: i32) -> (Vec<(u64, ProducerTag)>, u64) {
    let mut tags = Vec::new();
    let mut offset = 0;
    for i in 0..batches {
        for r in 0..count {
            tags.push((
                offset,
                ProducerTag {
                    producer_id: PID,
                    producer_epoch: 0,
                    sequence: i * count + r,
                },
            ));
            offset += 1;
        }
        tags.push((
            offset,
            ProducerTag {
                producer_id: PID + 1,
                producer_epoch: 0,
                sequence: i,
            },
        ));
        offset += 1;
    }
    (tags, offset)
}

#[test]
fn producer_state_rebuild_1_the_log_read_back_answers_as_the_state_that_wrote_it() {
    let (tags, end) = log_of(8, 4);
    let mut rebuilt = PartitionProducers::default();
    assert_eq!(rebuilt.read_need(), ReadNeed::Tail);
    let created = rebuilt.apply_read(tags, end, &owner("log"), 0);
    assert_eq!(created, 2);
    assert_eq!(rebuilt.read_need(), ReadNeed::Nothing);
    // Batch 7 (sequences 28..=31) sits at offsets 35..=38.
    assert_eq!(rebuilt.check(&batch(0, 28, 4)), Verdict::Duplicate { first_offset: 35 });
    assert_eq!(rebuilt.check(&batch(0, 32, 4)), Verdict::Append);
    assert!(matches!(
        rebuilt.check(&batch(0, 33, 4)),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { .. })
    ));
}

#[test]
fn producer_state_rebuild_1_a_second_copy_in_the_log_does_not_move_the_first() {
    let mut tags = log_of(2, 3).0;
    // The second batch (sequences 3..=5, offsets 4..=6) stored again at 8..=10.
    for (i, sequence) in (3..=5).enumerate() {
        tags.push((
            8 + i as u64,
            ProducerTag {
                producer_id: PID,
                producer_epoch: 0,
                sequence,
            },
        ));
    }
    let mut rebuilt = PartitionProducers::default();
    rebuilt.apply_read(tags, 11, &owner("log"), 0);
    assert_eq!(rebuilt.check(&batch(0, 3, 3)), Verdict::Duplicate { first_offset: 4 });
}

#[test]
fn producer_unknown_1_an_unknown_outcome_reads_the_log_from_where_the_state_ends() {
    let mut state = written(2, 5);
    assert_eq!(state.read_need(), ReadNeed::Nothing);
    state.outcome_unknown();
    assert_eq!(state.read_need(), ReadNeed::From(10));
    // The batch was stored (offsets 10..=14) before the node failed: found by the read.
    let tags = (10..15).map(|o| {
        (
            o,
            ProducerTag {
                producer_id: PID,
                producer_epoch: 0,
                sequence: o as i32,
            },
        )
    });
    state.apply_read(tags, 15, &owner("log"), 0);
    assert_eq!(state.check(&batch(0, 10, 5)), Verdict::Duplicate { first_offset: 10 });
}

#[test]
fn producer_expiry_1_a_producer_unseen_for_the_expiration_is_forgotten() {
    let mut state = written(1, 5);
    state.touch(PID, 1_000);
    assert!(state.expire(1_000).is_empty());
    assert_eq!(state.expire(1_001).len(), 1);
    assert_eq!(
        state.check(&batch(0, 40, 1)),
        Verdict::Append,
        "now unknown: any sequence"
    );
}

fn key(partition: u32) -> PartitionKey {
    PartitionKey {
        stream: Arc::from("s"),
        topic: Arc::from("t"),
        partition,
    }
}

/// Records one new producer `pid` on `partition` for `owner` at `now_ms`, making room first.
fn add(states: &ProducerStates, partition: u32, pid: i64, who: &Owner, now_ms: u64) {
    let slot = states.slot(&key(partition));
    let b = BatchIdentity {
        producer_id: pid,
        ..batch(0, 0, 1)
    };
    if slot.state().is_new(pid) {
        states.make_room(who, now_ms);
    }
    if slot.state().record(&b, 0, 0, 0, who, now_ms) {
        states.created(who, 1);
    }
}

#[test]
fn limit_producers_1_a_principal_at_its_cap_loses_its_own_oldest_entries_not_others() {
    let states = ProducerStates::new(ProducerStateSettings {
        max_producers: 1_000,
        max_producers_per_principal: 16,
        ..ProducerStateSettings::default()
    });
    let (alice, mallory) = (owner("user:alice"), owner("user:mallory"));
    add(&states, 0, 1, &alice, 0);
    for pid in 0..16 {
        add(&states, 1, 100 + pid, &mallory, 10 + pid as u64);
    }
    assert_eq!(states.owned_by("user:mallory"), 16);
    add(&states, 1, 200, &mallory, 100);
    // An eighth of the cap (2) went to make room, the two seen longest ago.
    assert_eq!(states.owned_by("user:mallory"), 15);
    let slot = states.slot(&key(1));
    assert!(slot.state().entry(100).is_none() && slot.state().entry(101).is_none());
    assert!(slot.state().entry(102).is_some());
    assert_eq!(states.owned_by("user:alice"), 1, "another principal keeps its entry");
    assert_eq!(states.total(), 16);
}

#[test]
fn limit_producers_1_a_full_gateway_drops_expired_entries_then_the_oldest() {
    let states = ProducerStates::new(ProducerStateSettings {
        max_producers: 8,
        max_producers_per_principal: 8,
        producer_id_expiration_ms: 1_000,
        ..ProducerStateSettings::default()
    });
    let who = owner("address:10.0.0.1");
    for pid in 0..8 {
        add(&states, pid as u32, pid, &who, pid as u64 * 100);
    }
    assert_eq!(states.total(), 8);
    // At 1,250 ms the entries seen at 0, 100 and 200 ms have expired.
    add(&states, 9, 99, &owner("address:10.0.0.2"), 1_250);
    assert_eq!(states.total(), 6);
    assert!(states.slot(&key(0)).state().entry(0).is_none());
}

#[test]
fn producer_leader_1_a_moved_partition_forgets_its_state_and_reads_the_log_again() {
    let states = ProducerStates::new(ProducerStateSettings::default());
    add(&states, 0, 1, &owner("a"), 0);
    add(&states, 1, 1, &owner("a"), 0);
    states.forget_where(|k| k.partition == 0);
    assert_eq!(states.slot(&key(0)).state().read_need(), ReadNeed::Tail);
    assert!(states.slot(&key(1)).state().entry(1).is_some());
    assert_eq!(states.total(), 1);
}

/// Sequences `0..count` of `PID`, epoch 0, at offsets `0..count`.
fn tags_up_to(count: i32) -> Vec<(u64, ProducerTag)> {
    (0..count)
        .map(|sequence| {
            (
                sequence as u64,
                ProducerTag {
                    producer_id: PID,
                    producer_epoch: 0,
                    sequence,
                },
            )
        })
        .collect()
}

#[test]
fn producer_unknown_3_a_gap_against_a_log_read_lately_is_retried_and_read_again() {
    // A new Iggy primary serves the log without sequence 21, acknowledged by the old one.
    let mut state = PartitionProducers::default();
    state.apply_read(tags_up_to(21), 21, &owner("log"), 1_000);
    let next = batch(0, 22, 1);
    assert!(matches!(
        state.check_at(&next, 2_000, 30_000),
        Verdict::Refuse(ProducerRefusal::LogBehind { expected_after: 20, .. })
    ));
    assert_eq!(state.read_need(), ReadNeed::From(21), "read again before the retry");
    // The retry's read finds 21: the batch follows.
    state.apply_read(tags_up_to(22).split_off(21), 22, &owner("log"), 3_000);
    assert_eq!(state.check_at(&next, 3_000, 30_000), Verdict::Append);
}

#[test]
fn producer_unknown_3_a_gap_is_out_of_order_once_settled_or_past_the_window() {
    let mut read_long_ago = PartitionProducers::default();
    read_long_ago.apply_read(tags_up_to(21), 21, &owner("log"), 1_000);
    assert!(matches!(
        read_long_ago.check_at(&batch(0, 22, 1), 31_000, 30_000),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { .. })
    ));
    // An append stored right where the read ended shows the read was whole.
    let mut settled = PartitionProducers::default();
    settled.apply_read(tags_up_to(21), 21, &owner("log"), 1_000);
    let b = batch(0, 21, 1);
    assert_eq!(settled.check_at(&b, 1_000, 30_000), Verdict::Append);
    settled.record(&b, 21, 21, 21, &owner("a"), 1_000);
    assert!(matches!(
        settled.check_at(&batch(0, 23, 1), 1_000, 30_000),
        Verdict::Refuse(ProducerRefusal::OutOfOrder { .. })
    ));
}
