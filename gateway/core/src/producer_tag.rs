//! The producer tag: which idempotent producer wrote a stored record, carried in the 128-bit id
//! of the Iggy message header (PRODUCER-TAG-1), so producer state can be rebuilt from the log
//! the way Kafka rebuilds it from its own (PRODUCER-STATE-REBUILD-1).
//!
//! The payload and user headers stay exactly what the mapping writes (docs/spec/mapping.md);
//! only the id, which the mapping otherwise leaves at 0, changes. The id is part of every
//! stored message header, so a tag costs no stored byte.
//!
//! Layout of the id as a `u128`, most significant bits first:
//!
//! | bits | field |
//! |---|---|
//! | 112..=127 | [`TAG_MARKER`] |
//! | 96..=111 | producer epoch (`i16` as `u16`) |
//! | 32..=95 | producer id (`i64` as `u64`) |
//! | 0..=31 | the record's sequence number (`i32` as `u32`) |
//!
//! An id without the marker (0, or one an Iggy client chose) is not a tag.

/// The 16 bits that mark an id as a producer tag: "KP".
pub const TAG_MARKER: u16 = 0x4B50;

/// Kafka's "no producer id" (`RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;

/// What a tag says of one stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerTag {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub sequence: i32,
}

impl ProducerTag {
    /// The message id that carries this tag.
    pub fn to_id(self) -> u128 {
        (u128::from(TAG_MARKER) << 112)
            | (u128::from(self.producer_epoch as u16) << 96)
            | (u128::from(self.producer_id as u64) << 32)
            | u128::from(self.sequence as u32)
    }

    /// The tag an id carries, or `None` for an id without the marker.
    pub fn from_id(id: u128) -> Option<Self> {
        if (id >> 112) as u16 != TAG_MARKER {
            return None;
        }
        Some(Self {
            producer_epoch: (id >> 96) as u16 as i16,
            producer_id: (id >> 32) as u64 as i64,
            sequence: id as u32 as i32,
        })
    }
}

/// Kafka's sequence arithmetic (`DefaultRecordBatch.incrementSequence`): sequences run from 0
/// to `i32::MAX` and then start again at 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Whether `next` is the sequence that follows `last` (`ProducerAppendInfo.inSequence`).
pub fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// The producer fields of one record batch, as its header declares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    /// `first_sequence` plus the batch's last offset delta, wrapping as Kafka does.
    pub last_sequence: i32,
}

impl BatchIdentity {
    /// The identity of a batch with this header, or `None` for a batch without a producer id
    /// (-1: a producer that is not idempotent), whose records are not tagged.
    pub fn of(header: &crate::batch::BatchHeader) -> Option<Self> {
        if header.producer_id == NO_PRODUCER_ID {
            return None;
        }
        Some(Self {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            first_sequence: header.base_sequence,
            last_sequence: increment_sequence(header.base_sequence, header.last_offset_delta.max(0)),
        })
    }

    /// The tag of the record at `offset_delta` in the batch.
    pub fn tag_of(&self, offset_delta: i32) -> ProducerTag {
        ProducerTag {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            sequence: increment_sequence(self.first_sequence, offset_delta.max(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn producer_tag_1_round_trips_every_producer_epoch_and_sequence(
            producer_id in any::<i64>(),
            producer_epoch in any::<i16>(),
            sequence in any::<i32>(),
        ) {
            let tag = ProducerTag { producer_id, producer_epoch, sequence };
            prop_assert_eq!(ProducerTag::from_id(tag.to_id()), Some(tag));
        }

        #[test]
        fn producer_tag_1_an_id_without_the_marker_is_no_tag(id in any::<u128>()) {
            prop_assume!((id >> 112) as u16 != TAG_MARKER);
            prop_assert_eq!(ProducerTag::from_id(id), None);
        }
    }

    #[test]
    fn producer_tag_1_the_mappings_id_0_is_no_tag() {
        assert_eq!(ProducerTag::from_id(0), None);
    }

    #[test]
    fn producer_tag_1_sequences_wrap_at_i32_max_as_kafkas_do() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert!(in_sequence(4, 5));
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, i32::MIN));
        assert!(!in_sequence(4, 6));
        assert!(!in_sequence(4, 4));
    }

    #[test]
    fn producer_tag_1_a_batch_tags_each_record_by_its_offset_delta() {
        let header = crate::batch::BatchHeader {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes: crate::batch::BatchAttributes(0),
            last_offset_delta: 2,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: 42,
            producer_epoch: 3,
            base_sequence: i32::MAX - 1,
        };
        let identity = BatchIdentity::of(&header).expect("an idempotent batch");
        assert_eq!(identity.last_sequence, 0);
        assert_eq!(identity.tag_of(2).sequence, 0);
        assert_eq!(identity.tag_of(1).sequence, i32::MAX);
        let plain = crate::batch::BatchHeader {
            producer_id: -1,
            ..header
        };
        assert_eq!(BatchIdentity::of(&plain), None);
    }
}
