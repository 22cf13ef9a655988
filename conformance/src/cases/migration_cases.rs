//! The migration read path: messages an Iggy client wrote beside the gateway, never through it,
//! read through the gateway as Kafka records (docs/spec/mapping.md, "Reading";
//! docs/spec/envelope.md). Each case writes through the endpoint's [`NativeHandle`], then reads
//! the partition twice, with a raw wire Fetch (v11) and with librdkafka, and holds every record
//! from both to what the spec says it must be: offset, key, value (null vs empty), headers in
//! order, and timestamp.
//!
//! The handle exists only when the suite runs the gateway itself (the embedded model, or the
//! real-Iggy tier's SDK client); against an outside endpoint every case here skips and says so.
//! Envelope payloads are written by hand from the table of ENV-LAYOUT-1, not with the gateway's
//! encoder, so that the cases check the spec rather than the code against itself.

use super::group_cases::support::{close, create_topic, WAIT};
use super::{Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::native::{NativeHandle, NEEDS_NATIVE};
use anyhow::{anyhow, ensure, Context as _};
use bytes::{BufMut, Bytes};
use iggy_common::{HeaderKey, HeaderKind, HeaderValue, IggyMessage};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use kig_core::batch::{decode_batches, encode_batch, BatchAttributes, BatchHeader, Record, RecordBatch, RecordHeader};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::Compression;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, Timestamp, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            map_read_native_1_iggy_written_messages_read_as_kafka_records,
            ["MAP-READ-NATIVE-1", "MAP-RESERVED-1", "MAP-TS-2"]
        ),
        case!(
            map_read_order_1_gateway_headers_decide_how_a_message_reads,
            ["MAP-READ-ORDER-1", "MAP-READ-NATIVE-1"]
        ),
        case!(
            env_mark_1_env_version_1_envelopes_are_marked_and_read_by_version,
            ["ENV-MARK-1", "ENV-VERSION-1", "ENV-LAYOUT-1", "MAP-READ-MALFORMED-1"]
        ),
        case!(
            map_read_malformed_1_undecodable_gateway_headers_are_served_natively,
            ["MAP-READ-MALFORMED-1", "MAP-READ-NATIVE-1", "ENV-LAYOUT-1"]
        ),
    ]
}

const FETCH_V: i16 = 11;
const PRODUCE_V: i16 = 9;
const NONE: i16 = 0;
/// Generous per-partition Fetch limit: every case wants all its records back.
const FETCH_ALL: i32 = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Native messages and what they must read as
// ---------------------------------------------------------------------------------------------

/// Two origin timestamps in µs, with digits below the millisecond that MAP-TS-1 truncates.
const ORIGIN_A_US: u64 = 1_700_000_000_123_999;
const ORIGIN_B_US: u64 = 1_700_000_000_124_000;

/// A user header as an Iggy client writes it: a string key and a value of any kind.
fn header(name: &str, value: HeaderValue) -> anyhow::Result<(HeaderKey, HeaderValue)> {
    Ok((HeaderKey::try_from(name)?, value))
}

fn raw(bytes: &[u8]) -> anyhow::Result<HeaderValue> {
    Ok(HeaderValue::from_raw(HeaderKind::Raw, bytes)?)
}

fn string(text: &str) -> anyhow::Result<HeaderValue> {
    Ok(HeaderValue::try_from(text)?)
}

/// A message as an Iggy producer builds it, with `origin_us` as its origin timestamp (0: none).
fn native_message(
    payload: &[u8],
    headers: Vec<(HeaderKey, HeaderValue)>,
    origin_us: u64,
) -> anyhow::Result<IggyMessage> {
    let headers: BTreeMap<HeaderKey, HeaderValue> = headers.into_iter().collect();
    let mut message = IggyMessage::builder()
        .payload(Bytes::copy_from_slice(payload))
        .maybe_user_headers((!headers.is_empty()).then_some(headers))
        .build()?;
    message.header.origin_timestamp = origin_us;
    Ok(message)
}

pub(crate) type HeaderList = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The timestamp a record must carry.
#[derive(Debug, Clone, Copy)]
enum WantTs {
    Exact(i64),
    /// The server's append time: a message without an origin timestamp (MAP-TS-2), read as
    /// the wall clock around the send on this same host.
    AppendedBetween(i64, i64),
}

/// What one record must read as, from either reader.
#[derive(Debug, Clone)]
struct Want {
    label: &'static str,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: HeaderList,
    timestamp: WantTs,
}

fn headers_of(pairs: &[(&[u8], Option<&[u8]>)]) -> HeaderList {
    pairs.iter().map(|(n, v)| (n.to_vec(), v.map(<[u8]>::to_vec))).collect()
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

/// Sends each message in its own send (origin timestamps of one send must lie close together,
/// DIFF-4, and some here have none) and returns the append-time bounds of each.
async fn write_all(native: &NativeHandle, topic: &str, messages: Vec<IggyMessage>) -> anyhow::Result<Vec<(i64, i64)>> {
    let mut bounds = Vec::with_capacity(messages.len());
    for message in messages {
        let before = now_ms()?;
        native.send(topic, 0, vec![message]).await?;
        bounds.push((before, now_ms()?));
    }
    Ok(bounds)
}

/// A fresh one-partition topic, created through the gateway, and the native handle.
async fn setup(endpoint: &Endpoint, prefix: &str) -> anyhow::Result<Option<(NativeHandle, String)>> {
    let Some(native) = endpoint.native.clone() else {
        return Ok(None);
    };
    let topic = endpoint.unique_topic(prefix);
    create_topic(endpoint, &topic, 1).await?;
    Ok(Some((native, topic)))
}

// ---------------------------------------------------------------------------------------------
// ENV-LAYOUT-1, by hand
// ---------------------------------------------------------------------------------------------

/// The envelope layout's fields written as the table says, flags included, so that a case can
/// also write layouts the decoder must refuse.
fn envelope_bytes(flags: u8, key: &[u8], value: &[u8], headers: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_u8(flags);
    out.put_u32_le(key.len() as u32);
    out.put_slice(key);
    out.put_u32_le(value.len() as u32);
    out.put_slice(value);
    out.put_u32_le(headers.len() as u32);
    for (name, value) in headers {
        out.put_u32_le(name.len() as u32);
        out.put_slice(name);
        match value {
            Some(v) => {
                out.put_u8(1);
                out.put_u32_le(v.len() as u32);
                out.put_slice(v);
            }
            None => {
                out.put_u8(0);
                out.put_u32_le(0);
            }
        }
    }
    out
}

/// The one valid envelope of a record.
fn envelope_of(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let flags = u8::from(key.is_some()) | (u8::from(value.is_some()) << 1);
    envelope_bytes(flags, key.unwrap_or_default(), value.unwrap_or_default(), headers)
}

// ---------------------------------------------------------------------------------------------
// Reading through the gateway
// ---------------------------------------------------------------------------------------------

/// A record as a reader returned it.
#[derive(Debug)]
pub(crate) struct Got {
    pub(crate) offset: i64,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) headers: HeaderList,
    pub(crate) timestamp_ms: i64,
}

fn show(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) => format!("{:?} ({b:02x?})", String::from_utf8_lossy(b)),
    }
}

fn show_headers(headers: &HeaderList) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(n, v)| format!("{}={}", String::from_utf8_lossy(n), show(v)))
        .collect();
    format!("[{}]", shown.join(", "))
}

/// Holds what `reader` returned to `wants`: one record per message, at offsets 0, 1, ….
fn check(reader: &str, got: &[Got], wants: &[Want]) -> anyhow::Result<()> {
    ensure!(
        got.len() == wants.len(),
        "{reader}: {} records read for {} messages written: {got:?}",
        got.len(),
        wants.len()
    );
    for (i, (got, want)) in got.iter().zip(wants).enumerate() {
        let label = want.label;
        ensure!(
            got.offset == i as i64,
            "{reader}: message {i} ({label}) read at offset {}",
            got.offset
        );
        ensure!(
            got.key == want.key,
            "{reader}: message {i} ({label}): key {}, expected {}",
            show(&got.key),
            show(&want.key)
        );
        ensure!(
            got.value == want.value,
            "{reader}: message {i} ({label}): value {}, expected {}",
            show(&got.value),
            show(&want.value)
        );
        ensure!(
            got.headers == want.headers,
            "{reader}: message {i} ({label}): headers {}, expected {}",
            show_headers(&got.headers),
            show_headers(&want.headers)
        );
        match want.timestamp {
            WantTs::Exact(ms) => ensure!(
                got.timestamp_ms == ms,
                "{reader}: message {i} ({label}): timestamp {} ms, expected {ms} ms",
                got.timestamp_ms
            ),
            WantTs::AppendedBetween(low, high) => ensure!(
                (low..=high).contains(&got.timestamp_ms),
                "{reader}: message {i} ({label}) has no origin timestamp: read {} ms, expected the append time, between {low} and {high} ms",
                got.timestamp_ms
            ),
        }
    }
    Ok(())
}

/// Every record of partition 0 of `topic`, by one Fetch v11 from offset 0.
pub(crate) async fn wire_read(endpoint: &Endpoint, topic: &str) -> anyhow::Result<Vec<Got>> {
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(FETCH_ALL)])]);
    let response: FetchResponse = client.request(ApiKey::Fetch, FETCH_V, &request).await?;
    ensure!(response.error_code == NONE, "Fetch: error {}", response.error_code);
    let partition = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .context("Fetch answered no partition")?;
    ensure!(
        partition.error_code == NONE,
        "Fetch {topic}-0: error {}",
        partition.error_code
    );
    let Some(bytes) = &partition.records else {
        return Ok(Vec::new());
    };
    let mut budget = DecompressionBudget::new(kafka_wire_client::MAX_RESPONSE_FRAME);
    let batches = decode_batches(bytes, &mut budget).context("decoding the fetched batches")?;
    let mut out = Vec::new();
    for batch in batches {
        for r in &batch.records {
            out.push(Got {
                offset: batch.header.base_offset + i64::from(r.offset_delta),
                key: r.key.as_ref().map(|b| b.to_vec()),
                value: r.value.as_ref().map(|b| b.to_vec()),
                headers: r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
                    .collect(),
                timestamp_ms: batch.record_timestamp_ms(r),
            });
        }
    }
    Ok(out)
}

/// Exactly `n` records of partition 0 of `topic` from the beginning, by librdkafka: an assigned
/// consumer (no group membership, nothing committed) that reports the partition's end, so that
/// a record beyond the `n` fails the case and none is waited for by time.
async fn rdkafka_read(endpoint: &Endpoint, topic: &str, n: usize) -> anyhow::Result<Vec<Got>> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &endpoint.bootstrap)
        .set("client.id", "kafka-iggy-conformance-migration")
        .set("group.id", endpoint.unique_topic("migration-reader"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "error")
        .set("check.crcs", "true")
        .create()
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment).context("assigning the partition")?;
    let deadline = Instant::now() + WAIT;
    let mut out = Vec::with_capacity(n);
    let result = loop {
        let event = match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Err(_) => break Err(anyhow!("librdkafka: {} of {n} records within {WAIT:?}", out.len())),
            Ok(event) => event,
        };
        match event {
            Err(KafkaError::PartitionEOF(_)) if out.len() >= n => break Ok(()),
            Err(KafkaError::PartitionEOF(_)) => {}
            Err(e) => break Err(anyhow!("librdkafka consuming: {e}")),
            Ok(message) if out.len() >= n => {
                break Err(anyhow!(
                    "librdkafka: a record beyond the {n} expected, at offset {}",
                    message.offset()
                ))
            }
            Ok(message) => {
                let timestamp_ms = match message.timestamp() {
                    Timestamp::CreateTime(ms) => ms,
                    other => break Err(anyhow!("librdkafka: record timestamp {other:?}, not CreateTime")),
                };
                out.push(Got {
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec),
                    headers: message
                        .headers()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| (h.key.as_bytes().to_vec(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    timestamp_ms,
                });
            }
        }
    };
    close(consumer).await;
    result.map(|()| out)
}

/// Reads the partition with both readers and holds each to `wants`.
async fn read_both(endpoint: &Endpoint, topic: &str, wants: &[Want]) -> anyhow::Result<()> {
    check("Fetch v11", &wire_read(endpoint, topic).await?, wants)?;
    check("librdkafka", &rdkafka_read(endpoint, topic, wants.len()).await?, wants)
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// Messages an Iggy producer wrote, none with a gateway header: one without headers, one with a
/// header of every Iggy kind and a payload that is not UTF-8, one whose payload is the single
/// byte 0x00 and that has no origin timestamp, one with a `kafka.`-prefixed name the gateway does
/// not reserve. Each reads as a record with a null key, the payload as value, every user header
/// under its own name holding its raw value bytes, in ascending name order, and the origin
/// timestamp truncated to ms, or the append time when there is none.
pub async fn map_read_native_1_iggy_written_messages_read_as_kafka_records(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let Some((native, topic)) = setup(&endpoint, "migration-native").await? else {
        return Ok(Outcome::Skipped(NEEDS_NATIVE.into()));
    };
    let not_utf8: &[u8] = &[0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28];
    // Every HeaderKind, each with the raw bytes a Kafka reader must see (little-endian for the
    // numbers, as Iggy stores them).
    let every_kind: Vec<(&str, HeaderValue, Vec<u8>)> = vec![
        (
            "kind-raw",
            raw(&[0xde, 0xad, 0xbe, 0xef])?,
            vec![0xde, 0xad, 0xbe, 0xef],
        ),
        ("kind-string", string("text/plain")?, b"text/plain".to_vec()),
        ("kind-bool", HeaderValue::from(true), vec![1]),
        ("kind-int8", HeaderValue::from(-5i8), (-5i8).to_le_bytes().to_vec()),
        (
            "kind-int16",
            HeaderValue::from(-300i16),
            (-300i16).to_le_bytes().to_vec(),
        ),
        (
            "kind-int32",
            HeaderValue::from(-70_000i32),
            (-70_000i32).to_le_bytes().to_vec(),
        ),
        (
            "kind-int64",
            HeaderValue::from(-5_000_000_000i64),
            (-5_000_000_000i64).to_le_bytes().to_vec(),
        ),
        (
            "kind-int128",
            HeaderValue::from(-(1i128 << 100)),
            (-(1i128 << 100)).to_le_bytes().to_vec(),
        ),
        ("kind-uint8", HeaderValue::from(200u8), vec![200]),
        (
            "kind-uint16",
            HeaderValue::from(60_000u16),
            60_000u16.to_le_bytes().to_vec(),
        ),
        (
            "kind-uint32",
            HeaderValue::from(4_000_000_000u32),
            4_000_000_000u32.to_le_bytes().to_vec(),
        ),
        (
            "kind-uint64",
            HeaderValue::from(u64::MAX - 1),
            (u64::MAX - 1).to_le_bytes().to_vec(),
        ),
        (
            "kind-uint128",
            HeaderValue::from(1u128 << 120),
            (1u128 << 120).to_le_bytes().to_vec(),
        ),
        ("kind-float32", HeaderValue::from(1.5f32), 1.5f32.to_le_bytes().to_vec()),
        (
            "kind-float64",
            HeaderValue::from(-2.25f64),
            (-2.25f64).to_le_bytes().to_vec(),
        ),
    ];
    let mut every_kind_headers = Vec::new();
    let mut every_kind_want: HeaderList = Vec::new();
    for (name, value, bytes) in every_kind {
        every_kind_headers.push(header(name, value)?);
        every_kind_want.push((name.as_bytes().to_vec(), Some(bytes)));
    }
    every_kind_want.sort();
    let messages = vec![
        native_message(b"plain text from an Iggy producer", vec![], ORIGIN_A_US)?,
        native_message(not_utf8, every_kind_headers, ORIGIN_B_US)?,
        native_message(&[0x00], vec![], 0)?,
        native_message(
            b"tagged",
            vec![
                header("trace-id", string("abc-123")?)?,
                header("kafka.future", raw(b"reserved")?)?,
                header("app", raw(&[0x01])?)?,
            ],
            ORIGIN_A_US,
        )?,
    ];
    let bounds = write_all(&native, &topic, messages).await?;
    let wants = vec![
        Want {
            label: "no headers",
            key: None,
            value: Some(b"plain text from an Iggy producer".to_vec()),
            headers: vec![],
            timestamp: WantTs::Exact((ORIGIN_A_US / 1000) as i64),
        },
        Want {
            label: "every header kind, payload not UTF-8",
            key: None,
            value: Some(not_utf8.to_vec()),
            headers: every_kind_want,
            timestamp: WantTs::Exact((ORIGIN_B_US / 1000) as i64),
        },
        Want {
            label: "payload 0x00 without a marker, no origin timestamp",
            key: None,
            value: Some(vec![0x00]),
            headers: vec![],
            timestamp: WantTs::AppendedBetween(bounds[2].0, bounds[2].1),
        },
        Want {
            label: "an unreserved kafka. name among ordinary headers",
            key: None,
            value: Some(b"tagged".to_vec()),
            headers: headers_of(&[
                (b"app", Some(&[0x01])),
                (b"kafka.future", Some(b"reserved")),
                (b"trace-id", Some(b"abc-123")),
            ]),
            timestamp: WantTs::Exact((ORIGIN_A_US / 1000) as i64),
        },
    ];
    read_both(&endpoint, &topic, &wants).await?;
    Ok(Outcome::Passed)
}

/// Messages an Iggy client wrote with gateway headers in combinations the gateway itself never
/// writes: `kafka.envelope` beside `kafka.key`, `kafka.h.*` and an application header (envelope
/// wins, the others are ignored); `kafka.value` beside `kafka.key`, `kafka.h.*` and an application
/// header (placeholder: key from its header, application header kept); `kafka.value` = `empty`
/// alone; `kafka.key` alone and `kafka.h.*` alone (plain); none (native).
pub async fn map_read_order_1_gateway_headers_decide_how_a_message_reads(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let Some((native, topic)) = setup(&endpoint, "migration-order").await? else {
        return Ok(Outcome::Skipped(NEEDS_NATIVE.into()));
    };
    let ts = WantTs::Exact((ORIGIN_A_US / 1000) as i64);
    let enveloped = envelope_of(
        Some(b"env-key"),
        Some(b"env-value"),
        &[(b"h1", Some(b"v1")), (b"h1", None), (b"", Some(b"unnamed"))],
    );
    let messages = vec![
        native_message(
            &enveloped,
            vec![
                header("kafka.envelope", raw(&[0x01])?)?,
                header("kafka.key", raw(b"header-key")?)?,
                header("kafka.h.x", raw(b"header-x")?)?,
                header("kafka.value", raw(b"null")?)?,
                header("app", raw(b"ignored")?)?,
            ],
            ORIGIN_A_US,
        )?,
        native_message(
            &[0x00],
            vec![
                header("kafka.value", raw(b"null")?)?,
                header("kafka.key", raw(b"k1")?)?,
                header("kafka.h.a", raw(b"1")?)?,
                header("app", string("x")?)?,
            ],
            ORIGIN_A_US,
        )?,
        native_message(&[0x00], vec![header("kafka.value", raw(b"empty")?)?], ORIGIN_A_US)?,
        native_message(b"v3", vec![header("kafka.key", raw(b"k3")?)?], ORIGIN_A_US)?,
        native_message(b"v4", vec![header("kafka.h.only", raw(b"h")?)?], ORIGIN_A_US)?,
        native_message(b"v5", vec![header("other", raw(b"o")?)?], ORIGIN_A_US)?,
    ];
    write_all(&native, &topic, messages).await?;
    let wants = vec![
        Want {
            label: "kafka.envelope beside every other gateway header",
            key: Some(b"env-key".to_vec()),
            value: Some(b"env-value".to_vec()),
            headers: headers_of(&[(b"h1", Some(b"v1")), (b"h1", None), (b"", Some(b"unnamed"))]),
            timestamp: ts,
        },
        Want {
            label: "kafka.value=null beside kafka.key, kafka.h.a and app",
            key: Some(b"k1".to_vec()),
            value: None,
            // In stored (ascending name) order: "app" before "kafka.h.a".
            headers: headers_of(&[(b"app", Some(b"x")), (b"a", Some(b"1"))]),
            timestamp: ts,
        },
        Want {
            label: "kafka.value=empty alone",
            key: None,
            value: Some(vec![]),
            headers: vec![],
            timestamp: ts,
        },
        Want {
            label: "kafka.key alone",
            key: Some(b"k3".to_vec()),
            value: Some(b"v3".to_vec()),
            headers: vec![],
            timestamp: ts,
        },
        Want {
            label: "kafka.h.only alone",
            key: None,
            value: Some(b"v4".to_vec()),
            headers: headers_of(&[(b"only", Some(b"h"))]),
            timestamp: ts,
        },
        Want {
            label: "no gateway header",
            key: None,
            value: Some(b"v5".to_vec()),
            headers: headers_of(&[(b"other", Some(b"o"))]),
            timestamp: ts,
        },
    ];
    read_both(&endpoint, &topic, &wants).await?;
    Ok(Outcome::Passed)
}

/// A wire Produce v9 of `records` to partition 0, acks -1, all at `timestamp`; requires error
/// NONE and returns the answer's base offset.
pub(crate) async fn produce_records(
    endpoint: &Endpoint,
    topic: &str,
    records: Vec<Record>,
    timestamp: i64,
) -> anyhow::Result<i64> {
    let n = records.len() as i32;
    let header = BatchHeader {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: BatchAttributes::plain(Compression::None),
        last_offset_delta: n - 1,
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
    let records = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record {
            offset_delta: i as i32,
            ..r
        })
        .collect();
    let batch = encode_batch(&RecordBatch { header, records })?;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    let response: ProduceResponse = client.request(ApiKey::Produce, PRODUCE_V, &request).await?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .context("Produce answered no partition")?;
    ensure!(
        answer.error_code == NONE,
        "Produce to {topic}-0: error {}",
        answer.error_code
    );
    Ok(answer.base_offset)
}

pub(crate) fn kafka_record(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Record {
    Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: headers
            .iter()
            .map(|(name, value)| RecordHeader {
                name: Bytes::copy_from_slice(name),
                value: value.map(Bytes::copy_from_slice),
            })
            .collect(),
    }
}

/// The write side: records the gateway must envelope (an empty key; a null header value and a
/// repeated name), read back natively, are marked with `kafka.envelope` = 0x01 as their only
/// user header and hold exactly the ENV-LAYOUT-1 bytes. The read side: envelopes an Iggy client
/// wrote with version 0x01 are decoded (one of them a tombstone with a key); with version 0x02,
/// or the two bytes 0x01 0x00, they are served natively, every user header under its stored name.
pub async fn env_mark_1_env_version_1_envelopes_are_marked_and_read_by_version(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let Some((native, topic)) = setup(&endpoint, "migration-envelope").await? else {
        return Ok(Outcome::Skipped(NEEDS_NATIVE.into()));
    };
    let produced_ms = (ORIGIN_A_US / 1000) as i64;
    let empty_key = kafka_record(Some(b""), Some(b"v"), &[(b"h", Some(b"x"))]);
    let null_and_repeat = kafka_record(
        Some(b"k"),
        None,
        &[(b"r", Some(b"1")), (b"n", None), (b"r", Some(b"2"))],
    );
    let base = produce_records(&endpoint, &topic, vec![empty_key, null_and_repeat], produced_ms).await?;
    ensure!(
        base == 0,
        "the first Produce to an empty partition answered base offset {base}"
    );
    let stored = native.read(&topic, 0, 0, 2).await?;
    ensure!(
        stored.len() == 2,
        "read {} stored messages natively, expected 2",
        stored.len()
    );
    let layouts = [
        envelope_of(Some(b""), Some(b"v"), &[(b"h", Some(b"x"))]),
        envelope_of(
            Some(b"k"),
            None,
            &[(b"r", Some(b"1")), (b"n", None), (b"r", Some(b"2"))],
        ),
    ];
    for (i, (message, layout)) in stored.iter().zip(&layouts).enumerate() {
        let headers = message.user_headers_map()?.unwrap_or_default();
        let shown: Vec<(String, HeaderKind, Vec<u8>)> = headers
            .iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k.as_bytes()).into_owned(),
                    v.kind(),
                    v.as_bytes().to_vec(),
                )
            })
            .collect();
        ensure!(
            shown == [("kafka.envelope".to_string(), HeaderKind::Raw, vec![0x01])],
            "ENV-MARK-1/ENV-VERSION-1: enveloped record {i} is stored with user headers {shown:?}, expected only kafka.envelope = Raw [0x01]"
        );
        ensure!(
            message.payload.as_ref() == layout.as_slice(),
            "ENV-LAYOUT-1: enveloped record {i} is stored as {:02x?}, expected {layout:02x?}",
            message.payload.as_ref()
        );
    }

    let layout = envelope_of(Some(b"tomb"), None, &[]);
    let later = envelope_of(Some(b"k2"), Some(b"v2"), &[(b"a", Some(b"b"))]);
    let messages = vec![
        native_message(&layout, vec![header("kafka.envelope", raw(&[0x01])?)?], ORIGIN_A_US)?,
        native_message(
            &later,
            vec![header("kafka.envelope", raw(&[0x02])?)?, header("app", raw(b"a")?)?],
            ORIGIN_B_US,
        )?,
        native_message(
            &later,
            vec![header("kafka.envelope", raw(&[0x01, 0x00])?)?],
            ORIGIN_B_US,
        )?,
    ];
    write_all(&native, &topic, messages).await?;
    let produced = WantTs::Exact(produced_ms);
    let wants = vec![
        Want {
            label: "produced with an empty key",
            key: Some(vec![]),
            value: Some(b"v".to_vec()),
            headers: headers_of(&[(b"h", Some(b"x"))]),
            timestamp: produced,
        },
        Want {
            label: "produced with a null header value and a repeated name",
            key: Some(b"k".to_vec()),
            value: None,
            headers: headers_of(&[(b"r", Some(b"1")), (b"n", None), (b"r", Some(b"2"))]),
            timestamp: produced,
        },
        Want {
            label: "native envelope, version 0x01, a tombstone",
            key: Some(b"tomb".to_vec()),
            value: None,
            headers: vec![],
            timestamp: WantTs::Exact((ORIGIN_A_US / 1000) as i64),
        },
        Want {
            label: "native envelope, version 0x02",
            key: None,
            value: Some(later.clone()),
            headers: headers_of(&[(b"app", Some(b"a")), (b"kafka.envelope", Some(&[0x02]))]),
            timestamp: WantTs::Exact((ORIGIN_B_US / 1000) as i64),
        },
        Want {
            label: "native envelope, version bytes 0x01 0x00",
            key: None,
            value: Some(later.clone()),
            headers: headers_of(&[(b"kafka.envelope", Some(&[0x01, 0x00]))]),
            timestamp: WantTs::Exact((ORIGIN_B_US / 1000) as i64),
        },
    ];
    read_both(&endpoint, &topic, &wants).await?;
    Ok(Outcome::Passed)
}

/// Messages whose gateway headers do not parse, each followed by nothing that could excuse a
/// stuck reader: an envelope cut short, one with trailing bytes, one with an undefined flag bit,
/// one with a present-byte of 2, one whose header count exceeds what its bytes could hold, and a
/// `kafka.value` marker that is neither `null` nor `empty`. Each is served as a native record
/// (null key, payload as value, every user header under its stored name), and the ordinary
/// message after them is read too.
pub async fn map_read_malformed_1_undecodable_gateway_headers_are_served_natively(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let Some((native, topic)) = setup(&endpoint, "migration-malformed").await? else {
        return Ok(Outcome::Skipped(NEEDS_NATIVE.into()));
    };
    let whole = envelope_of(Some(b"key"), Some(b"value"), &[(b"h", Some(b"v"))]);
    let cut_short = whole[..whole.len() - 3].to_vec();
    let mut trailing = whole.clone();
    trailing.push(0x00);
    let undefined_flag = envelope_bytes(0x04 | 0x02, b"", b"value", &[]);
    let mut bad_present = envelope_of(None, Some(b"value"), &[(b"h", Some(b"v"))]);
    // The header's value-present byte sits after flags, key_len, value_len + value, count,
    // name_len + name.
    let present_at = 1 + 4 + 4 + 5 + 4 + 4 + 1;
    ensure!(bad_present[present_at] == 1, "the hand layout moved");
    bad_present[present_at] = 2;
    let mut huge_count = envelope_of(None, Some(b"value"), &[]);
    let count_at = 1 + 4 + 4 + 5;
    huge_count[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let envelopes: [(&'static str, Vec<u8>); 5] = [
        ("an envelope cut short", cut_short),
        ("an envelope with a trailing byte", trailing),
        ("an envelope with flag bit 2 set", undefined_flag),
        ("an envelope header whose value-present byte is 2", bad_present),
        ("an envelope whose header count exceeds its bytes", huge_count),
    ];
    let mut messages = Vec::new();
    let mut wants = Vec::new();
    let ts = WantTs::Exact((ORIGIN_A_US / 1000) as i64);
    for (label, payload) in &envelopes {
        messages.push(native_message(
            payload,
            vec![header("kafka.envelope", raw(&[0x01])?)?],
            ORIGIN_A_US,
        )?);
        wants.push(Want {
            label,
            key: None,
            value: Some(payload.clone()),
            headers: headers_of(&[(b"kafka.envelope", Some(&[0x01]))]),
            timestamp: ts,
        });
    }
    messages.push(native_message(
        &[0x00],
        vec![header("kafka.value", raw(b"bogus")?)?, header("kafka.key", raw(b"k")?)?],
        ORIGIN_A_US,
    )?);
    wants.push(Want {
        label: "kafka.value neither null nor empty",
        key: None,
        value: Some(vec![0x00]),
        headers: headers_of(&[(b"kafka.key", Some(b"k")), (b"kafka.value", Some(b"bogus"))]),
        timestamp: ts,
    });
    messages.push(native_message(b"after", vec![], ORIGIN_A_US)?);
    wants.push(Want {
        label: "an ordinary message after the malformed ones",
        key: None,
        value: Some(b"after".to_vec()),
        headers: vec![],
        timestamp: ts,
    });
    write_all(&native, &topic, messages).await?;
    read_both(&endpoint, &topic, &wants).await?;
    Ok(Outcome::Passed)
}
