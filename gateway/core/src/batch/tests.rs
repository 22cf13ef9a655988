//! Batch codec tests: literal layouts, typed errors, and sectioned proptests.

use super::*;
use proptest::prelude::*;

fn header(attributes: BatchAttributes) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes,
        last_offset_delta: 0,
        base_timestamp: 1_000,
        max_timestamp: 1_000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    }
}

fn record(key: Option<&'static [u8]>, value: Option<&'static [u8]>) -> Record {
    Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: key.map(Bytes::from_static),
        value: value.map(Bytes::from_static),
        headers: vec![],
    }
}

fn budget() -> DecompressionBudget {
    DecompressionBudget::new(1 << 24)
}

/// LIMIT-BLOCKING-1: the gateway weighs a Produce by its headers before choosing where to map it.
#[test]
fn limit_blocking_1_declared_plain_records_counts_uncompressed_batches_only() {
    let plain = |n: usize| {
        let mut records = vec![record(None, Some(b"v")); n];
        for (i, r) in records.iter_mut().enumerate() {
            r.offset_delta = i as i32;
        }
        let mut h = header(BatchAttributes::plain(Compression::None));
        h.last_offset_delta = n as i32 - 1;
        encode_batch(&RecordBatch { header: h, records }).unwrap()
    };
    let two = [plain(2), plain(3)].concat();
    assert_eq!(declared_plain_records(&two), Some(5));
    assert_eq!(declared_plain_records(&[]), Some(0));
    // Cut short, or a compressed batch among them: not weighed, decoded off the workers.
    assert_eq!(declared_plain_records(&two[..two.len() - 1]), None);
    assert_eq!(declared_plain_records(&two[..30]), None);
    let gzip = encode_batch(&RecordBatch {
        header: header(BatchAttributes::plain(Compression::Gzip)),
        records: vec![record(None, Some(b"v"))],
    })
    .unwrap();
    assert_eq!(declared_plain_records(&[plain(1), gzip].concat()), None);
}

#[test]
fn batch_crc_1_encode_then_decode_verifies_crc() {
    let batch = RecordBatch {
        header: header(BatchAttributes::plain(Compression::None)),
        records: vec![record(None, Some(b"hi"))],
    };
    let bytes = encode_batch(&batch).unwrap();
    assert_eq!(decode_batches(&bytes, &mut budget()).unwrap(), vec![batch]);
}

#[test]
fn batch_crc_1_flipped_byte_is_a_crc_mismatch() {
    let batch = RecordBatch {
        header: header(BatchAttributes::plain(Compression::None)),
        records: vec![record(Some(b"k"), Some(b"value"))],
    };
    let mut bytes = encode_batch(&batch).unwrap().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let err = decode_batches(&Bytes::from(bytes), &mut budget()).unwrap_err();
    assert!(matches!(err, DecodeError::CrcMismatch { .. }), "{err:?}");
}

#[test]
fn batch_magic_1_magic_0_and_1_are_refused_by_type() {
    for magic in [0u8, 1] {
        let mut bytes = vec![0u8; 40];
        bytes[11] = 28; // a plausible length
        bytes[16] = magic;
        let err = parse_batch(&Bytes::from(bytes)).unwrap_err();
        assert_eq!(err, DecodeError::UnsupportedMagic(magic as i8));
    }
}

#[test]
fn batch_decode_1_declared_length_past_the_input_is_truncation() {
    let batch = RecordBatch {
        header: header(BatchAttributes::plain(Compression::None)),
        records: vec![record(None, Some(b"abc"))],
    };
    let bytes = encode_batch(&batch).unwrap();
    for cut in 0..bytes.len() {
        let err = decode_batches(&bytes.slice(..cut), &mut budget());
        assert!(cut == 0 || err.is_err(), "cut at {cut} decoded");
    }
}

#[test]
fn batch_decode_1_record_count_larger_than_records_is_an_error() {
    let batch = RecordBatch {
        header: header(BatchAttributes::plain(Compression::None)),
        records: vec![record(None, Some(b"abc"))],
    };
    let bytes = encode_batch(&batch).unwrap();
    let section = bytes.slice(BATCH_HEADER_LEN..);
    let patched = write_batch(&batch.header, 1_000, &section);
    let err = decode_batches(&patched, &mut budget()).unwrap_err();
    assert_eq!(
        err,
        DecodeError::RecordCountMismatch {
            declared: 1_000,
            actual: 1
        }
    );
}

#[test]
fn batch_decode_1_null_header_name_is_invalid() {
    // body: attributes, ts delta, offset delta, key null, value null, 1 header, name len -1.
    let body: &[u8] = &[0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01];
    let mut section = vec![(body.len() as u8) << 1];
    section.extend_from_slice(body);
    let err = decode_records(&Bytes::from(section), 1).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Invalid {
            what: "header name length",
            value: -1
        }
    );
}

#[test]
fn batch_attributes_flags_are_read_from_their_bits() {
    let a = BatchAttributes(0x08 | 0x10 | 0x20 | 4);
    assert_eq!(a.timestamp_type(), TimestampType::LogAppendTime);
    assert!(a.is_transactional());
    assert!(a.is_control());
    assert_eq!(a.compression().unwrap(), Compression::Zstd);
    assert_eq!(a.with_compression(Compression::None).0, 0x38);
}

#[test]
fn log_append_time_uses_the_max_timestamp() {
    let mut h = header(BatchAttributes(0x08));
    h.max_timestamp = 77;
    let batch = RecordBatch {
        header: h,
        records: vec![record(None, Some(b"x"))],
    };
    assert_eq!(batch.record_timestamp_ms(&batch.records[0]), 77);
}

// --- proptest: round trips -------------------------------------------------------------------

pub(crate) fn arb_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

pub(crate) fn arb_record() -> impl Strategy<Value = Record> {
    (
        any::<i8>(),
        any::<i64>(),
        any::<i32>(),
        proptest::option::of(arb_bytes(64)),
        proptest::option::of(arb_bytes(256)),
        proptest::collection::vec(
            (arb_bytes(16), proptest::option::of(arb_bytes(32))).prop_map(|(name, value)| RecordHeader { name, value }),
            0..4,
        ),
    )
        .prop_map(
            |(attributes, timestamp_delta, offset_delta, key, value, headers)| Record {
                attributes,
                timestamp_delta,
                offset_delta,
                key,
                value,
                headers,
            },
        )
}

fn arb_batch() -> impl Strategy<Value = RecordBatch> {
    (
        any::<[i64; 4]>(),
        any::<[i32; 3]>(),
        any::<i16>(),
        prop::sample::select(Compression::ALL.to_vec()),
        any::<u8>(),
        proptest::collection::vec(arb_record(), 0..6),
    )
        .prop_map(|(longs, ints, epoch, codec, flags, records)| RecordBatch {
            header: BatchHeader {
                base_offset: longs[0],
                partition_leader_epoch: ints[0],
                attributes: BatchAttributes((i16::from(flags) & 0x78) | i16::from(codec.id())),
                last_offset_delta: ints[1],
                base_timestamp: longs[1],
                max_timestamp: longs[2],
                producer_id: longs[3],
                producer_epoch: epoch,
                base_sequence: ints[2],
            },
            records,
        })
}

proptest! {
    #[test]
    fn batch_round_trip_decode_of_encode_is_identity(batch in arb_batch()) {
        let bytes = encode_batch(&batch).unwrap();
        let decoded = decode_batches(&bytes, &mut budget()).unwrap();
        prop_assert_eq!(decoded, vec![batch]);
    }

    #[test]
    fn batch_round_trip_several_batches_in_one_blob(a in arb_batch(), b in arb_batch()) {
        let mut blob = BytesMut::new();
        blob.put_slice(&encode_batch(&a).unwrap());
        blob.put_slice(&encode_batch(&b).unwrap());
        let decoded = decode_batches(&blob.freeze(), &mut budget()).unwrap();
        prop_assert_eq!(decoded, vec![a, b]);
    }

    #[test]
    fn encoded_record_len_matches_the_bytes(record in arb_record()) {
        let mut out = BytesMut::new();
        encode_record(&mut out, &record);
        prop_assert_eq!(out.len(), encoded_record_len(&record));
    }
}

// --- proptest: hostile input -----------------------------------------------------------------

proptest! {
    #[test]
    fn batch_decode_1_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_batches(&Bytes::from(bytes), &mut DecompressionBudget::new(1 << 16));
    }

    #[test]
    fn batch_decode_1_arbitrary_records_section_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        count in any::<i32>(),
    ) {
        let _ = decode_records(&Bytes::from(bytes), count);
    }

    #[test]
    fn batch_decode_1_corrupted_valid_batch_never_panics(
        batch in arb_batch(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = encode_batch(&batch).unwrap().to_vec();
        for (index, byte) in flips {
            let i = index.index(bytes.len());
            bytes[i] ^= byte;
        }
        let _ = decode_batches(&Bytes::from(bytes), &mut DecompressionBudget::new(1 << 16));
    }
}

#[test]
fn limit_records_1_declared_count_is_charged_before_decoding() {
    let batch = RecordBatch {
        header: header(BatchAttributes::plain(Compression::None)),
        records: vec![
            record(None, Some(b"a")),
            record(None, Some(b"b")),
            record(None, Some(b"c")),
        ],
    };
    let bytes = encode_batch(&batch).unwrap();
    let mut two = DecompressionBudget::new(1 << 20).with_record_limit(2);
    let err = decode_batches(&bytes, &mut two).unwrap_err();
    assert!(matches!(err, DecodeError::RecordBudget(_)), "{err}");
    // A declared count far above the limit is refused from the header alone, however few
    // bytes the section holds.
    let section = bytes.slice(BATCH_HEADER_LEN..);
    let patched = write_batch(&batch.header, i32::MAX, &section);
    let err = decode_batches(&patched, &mut budget()).unwrap_err();
    assert!(matches!(err, DecodeError::RecordBudget(_)), "{err}");
    let mut three = DecompressionBudget::new(1 << 20).with_record_limit(3);
    assert_eq!(decode_batches(&bytes, &mut three).unwrap()[0].records.len(), 3);
}
