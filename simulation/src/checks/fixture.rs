//! Hand-built histories for the checks' unit tests: a clean run every test starts from and
//! plants one anomaly in.

use crate::history::{
    AttemptOutcome, CommitOutcome, ConsumerEventKind, ConsumerMode, History, PartitionLog, RecordValue, StartFrom,
    Stored, TopicPartition,
};

pub const PRODUCER: usize = 0;
pub const CONSUMER: usize = 0;
pub const GATEWAY: &str = "gateway";
pub const GROUP: &str = "g";

pub fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

pub fn value(seq: u64) -> RecordValue {
    RecordValue::new(PRODUCER, seq)
}

/// The partition holding `seqs` at offsets 0, 1, 2, ...
pub fn log_of(seqs: &[u64]) -> Vec<Stored> {
    seqs.iter()
        .enumerate()
        .map(|(offset, seq)| Stored::record(offset as i64, value(*seq)))
        .collect()
}

/// Sets both the backend's and the drain's contents of [`tp`].
pub fn set_log(h: &mut History, records: Vec<Stored>) {
    h.backend = vec![PartitionLog {
        partition: tp(),
        records: records.clone(),
    }];
    h.drain = vec![PartitionLog {
        partition: tp(),
        records,
    }];
}

/// One plain producer sends three requests of two records each (seqs 0..=5), one at a time,
/// each acknowledged on its first attempt at offsets 0, 2, 4. The partition holds exactly them
/// and the drain reads them. Consumer `c` in group `g` starts from earliest, polls 0..=2 and
/// 3..=5, committing 3 and 6 (acknowledged), and a restart resumes at the committed 6.
pub fn clean() -> History {
    let mut h = History::new("fixture", 1);
    h.add_gateway(GATEWAY);
    h.add_partition(tp());
    let p = h.add_producer("producer", false, 1);
    for i in 0..3u64 {
        let t = 1_000 * (i + 1);
        let r = h.produce_request(p, t, tp(), vec![value(2 * i), value(2 * i + 1)], None);
        h.produce_attempt(r, t, GATEWAY, 1);
        h.produce_outcome(
            r,
            1,
            t + 100,
            AttemptOutcome::Acked {
                base_offset: 2 * i as i64,
            },
        );
    }
    let c = h.add_consumer("consumer", ConsumerMode::Group { group: GROUP.into() }, GATEWAY);
    let s = h.start_session(c, 100);
    assigned(&mut h, s, 200, 1);
    positioned(&mut h, s, 300, 0, StartFrom::Earliest);
    polled(&mut h, s, 3_500, &[(0, 0), (1, 1), (2, 2)]);
    commit(&mut h, s, 3_600, 3, CommitOutcome::Acked);
    polled(&mut h, s, 7_000, &[(3, 3), (4, 4), (5, 5)]);
    commit(&mut h, s, 7_100, 6, CommitOutcome::Acked);
    h.consumer_event(c, s, 7_200, ConsumerEventKind::SessionEnded { clean: false });
    let s = h.start_session(c, 8_000);
    assigned(&mut h, s, 8_100, 2);
    positioned(&mut h, s, 8_200, 6, StartFrom::Committed);
    h.healed(9_000);
    set_log(&mut h, log_of(&[0, 1, 2, 3, 4, 5]));
    h
}

pub fn assigned(h: &mut History, session: u32, at_us: u64, generation: i32) {
    h.consumer_event(
        CONSUMER,
        session,
        at_us,
        ConsumerEventKind::Assigned {
            generation: Some(generation),
            member_id: Some("m".into()),
            partitions: vec![tp()],
        },
    );
}

pub fn positioned(h: &mut History, session: u32, at_us: u64, offset: i64, from: StartFrom) {
    h.consumer_event(
        CONSUMER,
        session,
        at_us,
        ConsumerEventKind::Positioned {
            partition: tp(),
            offset,
            from,
        },
    );
}

/// A poll of (offset, seq) records.
pub fn polled(h: &mut History, session: u32, at_us: u64, records: &[(i64, u64)]) {
    let records = records.iter().map(|(o, s)| Stored::record(*o, value(*s))).collect();
    h.consumer_event(
        CONSUMER,
        session,
        at_us,
        ConsumerEventKind::Polled {
            partition: tp(),
            records,
        },
    );
}

pub fn commit(h: &mut History, session: u32, at_us: u64, offset: i64, outcome: CommitOutcome) {
    h.consumer_event(
        CONSUMER,
        session,
        at_us,
        ConsumerEventKind::Committed {
            group: GROUP.into(),
            partition: tp(),
            offset,
            generation: None,
            sent_us: at_us.saturating_sub(50),
            outcome,
        },
    );
}
