//! `make bench`: throughput of the sans-io core for 1 KiB records, uncompressed and per codec,
//! next to a plain memory copy of the same bytes as the limit. Prints figures; asserts nothing.

use bytes::Bytes;
use kig_core::batch::{decode_batches, encode_batch, Record, RecordBatch, RecordHeader};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use kig_core::fetch_batch::FetchBatchBuilder;
use kig_core::mapping::{read_record, record_to_message, KafkaRecord, ReadScratch};
use std::hint::black_box;
use std::time::{Duration, Instant};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 100;
const MEASURE: Duration = Duration::from_millis(700);

fn value(i: usize) -> Bytes {
    // Text-like, so the codecs see realistic redundancy rather than zeros or noise.
    let line = format!(
        "{{\"order\":{i},\"customer\":\"c-{}\",\"items\":[{}],\"note\":\"",
        i % 977,
        i % 13
    );
    let mut v = line.into_bytes();
    let mut x = i as u64 * 2_654_435_761;
    while v.len() < RECORD_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b"abcdefghijklmnopqrstuvwxyz0123456789 "[(x % 37) as usize]);
    }
    Bytes::from(v)
}

fn batch(codec: Compression) -> RecordBatch {
    let records = (0..RECORDS_PER_BATCH)
        .map(|i| Record {
            attributes: 0,
            timestamp_delta: i as i64,
            offset_delta: 0,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(value(i)),
            headers: vec![RecordHeader {
                name: Bytes::from_static(b"trace"),
                value: Some(Bytes::from_static(b"00-4bf92f3577b34da6-00f067aa0ba902b7-01")),
            }],
        })
        .collect();
    RecordBatch::from_producer(codec, 1_764_000_000_000, records)
}

/// Runs `f` repeatedly for about `MEASURE`; returns iterations per second.
fn per_second(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < MEASURE {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn report(name: &str, iterations_per_s: f64, payload_bytes: usize, baseline_per_s: Option<f64>) {
    let mb_s = iterations_per_s * payload_bytes as f64 / 1e6;
    let records_s = iterations_per_s * RECORDS_PER_BATCH as f64;
    let ratio = baseline_per_s.map_or(String::new(), |b| {
        format!("  ({:.1}% of memcpy)", 100.0 * iterations_per_s / b)
    });
    println!("{name:<34} {mb_s:>10.1} MB/s {records_s:>13.0} records/s{ratio}");
}

fn main() {
    let payload = RECORDS_PER_BATCH * RECORD_BYTES;
    println!(
        "kig-core bench: batches of {RECORDS_PER_BATCH} records of {RECORD_BYTES} B values (MB/s counts value bytes)"
    );
    let plain = encode_batch(&batch(Compression::None)).unwrap();
    let copy = per_second(|| {
        black_box(plain.to_vec());
    });
    report("memcpy of the encoded batch", copy, payload, None);
    let unencoded = batch(Compression::None);
    report(
        "encode batch (none)",
        per_second(|| drop(black_box(encode_batch(&unencoded).unwrap()))),
        payload,
        Some(copy),
    );
    for codec in Compression::ALL {
        let bytes = encode_batch(&batch(codec)).unwrap();
        let decode = per_second(|| {
            let mut budget = DecompressionBudget::new(8 << 20);
            black_box(decode_batches(&bytes, &mut budget).unwrap());
        });
        report(&format!("decode batch ({})", codec.name()), decode, payload, Some(copy));
        let decode_map = per_second(|| {
            let mut budget = DecompressionBudget::new(8 << 20);
            // As the Produce handler maps them: records moved out of their batch.
            for b in decode_batches(&bytes, &mut budget).unwrap() {
                for r in KafkaRecord::all_from_batch(b) {
                    black_box(record_to_message(r).unwrap());
                }
            }
        });
        report(
            &format!("decode + map ({})", codec.name()),
            decode_map,
            payload,
            Some(copy),
        );
    }
    let mut budget = DecompressionBudget::new(8 << 20);
    let decoded = decode_batches(&plain, &mut budget).unwrap().remove(0);
    let mut messages: Vec<_> = decoded
        .records
        .iter()
        .map(|r| record_to_message(KafkaRecord::from_batch(&decoded, r)).unwrap().0)
        .collect();
    for (i, m) in messages.iter_mut().enumerate() {
        m.header.offset = i as u64;
    }
    let fetch = per_second(|| {
        let mut builder = FetchBatchBuilder::new();
        let mut scratch = ReadScratch::default();
        for m in &messages {
            let (record, _) = read_record(m, &mut scratch);
            builder.push_read_within(m.header.offset, &record, usize::MAX);
        }
        black_box(builder.finish());
    });
    report("map back + fetch batch (read path)", fetch, payload, Some(copy));
}
