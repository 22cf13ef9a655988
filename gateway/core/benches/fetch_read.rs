//! `make bench`: the Fetch read path alone (map stored Iggy messages back to Kafka records,
//! then build the response batch), in the manner of criterion: a warm-up, then many timed
//! samples, reported as the median with the spread, per record size, and compared with the
//! previous run's medians (kept in target/bench/fetch_read.txt) so a regression shows as a
//! change per commit. Prints figures; asserts nothing.

use bytes::Bytes;
use iggy_common::IggyMessage;
use kig_core::batch::{encode_batch, Record, RecordBatch, RecordHeader};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use kig_core::fetch_batch::FetchBatchBuilder;
use kig_core::mapping::{read_record, record_to_message, KafkaRecord, ReadScratch};
use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const WARM_UP: Duration = Duration::from_millis(300);
const SAMPLES: usize = 40;
const SAMPLE: Duration = Duration::from_millis(25);
/// A Fetch answers about one partition's max bytes (librdkafka's default: 1 MiB) at a time.
const FETCH_BYTES: usize = 1 << 20;

/// Stored messages as the produce path writes them for records of `value_bytes` with a key and
/// one header, at consecutive offsets, enough to fill one Fetch.
fn stored(value_bytes: usize) -> Vec<IggyMessage> {
    let count = (FETCH_BYTES / value_bytes).clamp(1, 10_000);
    let records = (0..count)
        .map(|i| Record {
            attributes: 0,
            timestamp_delta: i as i64,
            offset_delta: i as i32,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'v'; value_bytes])),
            headers: vec![RecordHeader {
                name: Bytes::from_static(b"trace"),
                value: Some(Bytes::from_static(b"00-4bf92f3577b34da6-00f067aa0ba902b7-01")),
            }],
        })
        .collect();
    let batch = RecordBatch::from_producer(Compression::None, 1_764_000_000_000, records);
    let bytes = encode_batch(&batch).expect("encodes");
    let mut budget = DecompressionBudget::new(64 << 20);
    let decoded = kig_core::batch::decode_batches(&bytes, &mut budget)
        .expect("decodes")
        .remove(0);
    decoded
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut m = record_to_message(KafkaRecord::from_batch(&decoded, r)).expect("maps").0;
            m.header.offset = i as u64;
            m
        })
        .collect()
}

/// What one Fetch of a partition does with the messages it read.
fn read_path(messages: &[IggyMessage]) -> Option<Bytes> {
    let mut builder = FetchBatchBuilder::with_capacity(FETCH_BYTES);
    let mut scratch = ReadScratch::default();
    for m in messages {
        let (record, _form) = read_record(m, &mut scratch);
        if !builder.push_read_within(m.header.offset, &record, FETCH_BYTES) {
            break;
        }
    }
    builder.finish()
}

/// Nanoseconds per call of `f`: one per sample, sorted.
fn samples(mut f: impl FnMut()) -> Vec<f64> {
    let start = Instant::now();
    while start.elapsed() < WARM_UP {
        f();
    }
    let mut out = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let mut n = 0u32;
        while start.elapsed() < SAMPLE {
            f();
            n += 1;
        }
        out.push(start.elapsed().as_nanos() as f64 / f64::from(n));
    }
    out.sort_by(f64::total_cmp);
    out
}

/// `bench/fetch_read.txt` in the target directory this bench was built in (the parent of cargo's
/// `CARGO_TARGET_TMPDIR`), so `CARGO_TARGET_DIR` is followed.
fn baseline_path() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(&tmp).join("bench/fetch_read.txt")
}

/// The previous run's medians: `name ns_per_record` lines.
fn previous() -> HashMap<String, f64> {
    std::fs::read_to_string(baseline_path())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, ns) = l.rsplit_once(' ')?;
            Some((name.to_string(), ns.parse().ok()?))
        })
        .collect()
}

fn main() {
    println!(
        "fetch read path (map back + batch build), {SAMPLES} samples of {SAMPLE:?} after {WARM_UP:?} warm-up, one {FETCH_BYTES} B Fetch per call"
    );
    let before = previous();
    let mut now = Vec::new();
    for value_bytes in [100usize, 1024, 64 * 1024] {
        let messages = stored(value_bytes);
        let records = messages.len() as f64;
        let s = samples(|| {
            black_box(read_path(black_box(&messages)));
        });
        let (low, median, high) = (s[SAMPLES / 20], s[SAMPLES / 2], s[SAMPLES - 1 - SAMPLES / 20]);
        let per_record = median / records;
        let name = format!("read_path/{value_bytes}B");
        let change = before.get(&name).map_or(String::from("(no previous run)"), |b| {
            format!("change {:+.1}% vs previous", 100.0 * (per_record - b) / b)
        });
        println!(
            "{name:<18} {:>6} records: median {:>9.1} µs [{:.1} .. {:.1}]  {per_record:>7.1} ns/record  {:>8.0} MB/s  {change}",
            messages.len(),
            median / 1e3,
            low / 1e3,
            high / 1e3,
            records * value_bytes as f64 / median * 1e3,
        );
        now.push(format!("{name} {per_record:.3}"));
    }
    let path = baseline_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&path, now.join("\n") + "\n");
}
