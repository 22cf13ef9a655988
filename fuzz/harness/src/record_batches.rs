//! Target `record_batches`: Produce's records blob through the core (BATCH-DECODE-1): batch
//! headers, CRC32C, every codec under one decompression budget, the record mapping to Iggy and
//! back, and the Fetch batch builder.

use bytes::{Bytes, BytesMut};
use kig_core::batch::{decode_batches, encode_batch, parse_batch, parse_batches, RecordBatch, BATCH_HEADER_LEN};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use kig_core::fetch_batch::FetchBatchBuilder;
use kig_core::mapping::{
    message_to_record, read_record, record_to_message, KafkaRecord, ReadForm, ReadScratch, StoredForm,
};

/// The first byte is a set of flags:
///
/// - bit 0: rewrite every batch's CRC32C to match, so the fuzzer gets past the checksum to the
///   codecs and the records;
/// - bits 1-3: when 0..=4, the codec written into every batch's attributes (5..=7: keep them);
/// - bits 4-6: the budget, 1 KiB << n, so both sides of BATCH-BUDGET-2 are reachable.
///
/// The rest is the records blob of one Produce partition.
pub fn record_batches(data: &[u8]) {
    let Some((&flags, blob)) = data.split_first() else {
        return;
    };
    let codec = Compression::ALL.get(usize::from((flags >> 1) & 0x07)).copied();
    let blob = rewrite(blob, codec, flags & 1 != 0);
    let limit = 1024usize << ((flags >> 4) & 0x07);

    for raw in parse_batches(&blob).unwrap_or_default() {
        let _ = raw.verify_crc();
        let mut budget = DecompressionBudget::new(limit);
        let _ = raw.decode(&mut budget);
        assert!(budget.remaining() <= limit);
    }

    let mut budget = DecompressionBudget::new(limit);
    let Ok(batches) = decode_batches(&blob, &mut budget) else {
        return;
    };
    assert!(budget.remaining() <= limit);
    for batch in &batches {
        batch_round_trip(batch);
        map_records(batch);
    }
}

/// Rewrites the attributes' codec bits and the CRC of each batch the blob holds, as far as its
/// headers parse; the bytes after the last parsable batch are kept as they are.
fn rewrite(blob: &[u8], codec: Option<Compression>, fix_crc: bool) -> Bytes {
    let mut out = BytesMut::from(blob);
    if codec.is_none() && !fix_crc {
        return out.freeze();
    }
    let mut start = 0;
    let mut rest = Bytes::copy_from_slice(blob);
    while let Ok((raw, tail)) = parse_batch(&rest) {
        let batch = &mut out[start..start + raw.bytes.len()];
        if let Some(codec) = codec {
            let attributes = raw.header.attributes.with_compression(codec);
            batch[21..23].copy_from_slice(&attributes.0.to_be_bytes());
        }
        if fix_crc {
            let crc = crc32c::crc32c(&batch[21..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        start += raw.bytes.len();
        rest = tail;
    }
    out.freeze()
}

/// decode(encode(batch)) is the batch (BATCH-CRC-1 on the way).
fn batch_round_trip(batch: &RecordBatch) {
    let encoded = encode_batch(batch).expect("a decoded batch's codec is known");
    let mut budget = DecompressionBudget::new(usize::MAX);
    let again = decode_batches(&encoded, &mut budget).expect("an encoded batch decodes");
    assert_eq!(again, vec![batch.clone()], "decode(encode(batch)) != batch");
    assert!(encoded.len() >= BATCH_HEADER_LEN);
}

/// Each record becomes an Iggy message and back with what the spec preserves (the round trip
/// of `map_round_trip_record_message_record` in gateway/core/src/mapping/tests.rs), then goes
/// into a Fetch batch that must decode to the records; the batch the Fetch path builds from the
/// same messages read borrowed, one scratch for all, must be the same bytes.
fn map_records(batch: &RecordBatch) {
    const SERVER_US: u64 = 1_700_000_000_000_007;
    let mut fetch = FetchBatchBuilder::new();
    let mut served = Vec::new();
    let mut messages = Vec::new();
    for (i, record) in batch.records.iter().enumerate() {
        let kafka = KafkaRecord::from_batch(batch, record);
        let Ok((mut message, form)) = record_to_message(kafka.clone()) else {
            continue;
        };
        message.header.timestamp = SERVER_US;
        message.header.offset = i as u64;
        let (back, read) = message_to_record(&message);
        messages.push(message);
        assert_eq!(back.key, kafka.key, "key survives the mapping");
        assert_eq!(back.value, kafka.value, "value survives the mapping");
        let expected_ts = if kafka.timestamp_ms == -1 {
            (SERVER_US / 1000) as i64
        } else {
            kafka.timestamp_ms
        };
        assert_eq!(back.timestamp_ms, expected_ts, "timestamp survives the mapping");
        match form {
            StoredForm::Envelope(_) => {
                assert_eq!(read, ReadForm::Envelope);
                assert_eq!(back.headers, kafka.headers, "enveloped headers keep their order");
            }
            StoredForm::Plain | StoredForm::Placeholder => {
                let mut sorted = kafka.headers.clone();
                sorted.sort_by(|a, b| a.name.cmp(&b.name));
                assert_eq!(back.headers, sorted, "plain headers come back sorted by name");
            }
        }
        if fetch.push_within(i as u64, &back, usize::MAX) {
            served.push(back);
        }
    }
    let mut fetch_path = FetchBatchBuilder::new();
    let mut scratch = ReadScratch::default();
    for message in &messages {
        let (record, _) = read_record(message, &mut scratch);
        fetch_path.push_read_within(message.header.offset, &record, usize::MAX);
    }
    let encoded = fetch.finish();
    assert_eq!(
        fetch_path.finish(),
        encoded,
        "records read borrowed build the same batch"
    );
    let Some(encoded) = encoded else {
        return;
    };
    let mut budget = DecompressionBudget::new(0);
    let fetched = decode_batches(&encoded, &mut budget).expect("a Fetch batch decodes");
    let records: Vec<KafkaRecord> = fetched
        .iter()
        .flat_map(|b| b.records.iter().map(move |r| KafkaRecord::from_batch(b, r)))
        .collect();
    assert_eq!(records, served, "the Fetch batch holds the records pushed into it");
}
