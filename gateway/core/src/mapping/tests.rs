//! Mapping tests: one per rule and per envelope trigger, then round-trip proptests.

use super::*;
use crate::envelope::{decode_envelope, EnvelopeRecord};
use iggy_common::{HeaderKey, HeaderKind, HeaderValue};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn key(name: &str) -> HeaderKey {
    HeaderKey::try_from(name).unwrap()
}

fn raw(value: &[u8]) -> Result<HeaderValue, iggy_common::IggyError> {
    HeaderValue::from_raw(HeaderKind::Raw, value)
}

fn header(name: &[u8], value: Option<&[u8]>) -> RecordHeader {
    RecordHeader {
        name: b(name),
        value: value.map(b),
    }
}

fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: Vec<RecordHeader>) -> KafkaRecord {
    KafkaRecord {
        timestamp_ms: 1_700_000_000_123,
        key: key.map(b),
        value: value.map(b),
        headers,
    }
}

fn stored_headers(m: &IggyMessage) -> BTreeMap<String, (HeaderKind, Vec<u8>)> {
    m.user_headers_map()
        .unwrap()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8(k.as_bytes().to_vec()).unwrap(),
                (v.kind(), v.as_bytes().to_vec()),
            )
        })
        .collect()
}

/// Simulates the server: an offset and a server timestamp on a mapped message.
fn stored(mut m: IggyMessage, server_timestamp_us: u64) -> IggyMessage {
    m.header.timestamp = server_timestamp_us;
    m
}

fn envelope_of(m: &IggyMessage) -> EnvelopeRecord {
    decode_envelope(&m.payload).unwrap()
}

#[test]
fn map_value_2_map_key_1_map_header_1_plain_record() {
    let r = record(Some(b"k1"), Some(b"value"), vec![header(b"trace", Some(b"abc"))]);
    let (m, form) = record_to_message(r).unwrap();
    assert_eq!(form, StoredForm::Plain);
    assert_eq!(&m.payload[..], b"value");
    let h = stored_headers(&m);
    assert_eq!(h["kafka.key"], (HeaderKind::Raw, b"k1".to_vec()));
    assert_eq!(h["kafka.h.trace"], (HeaderKind::Raw, b"abc".to_vec()));
    assert_eq!(h.len(), 2);
}

#[test]
fn map_key_1_null_key_writes_no_key_header() {
    let (m, _) = record_to_message(record(None, Some(b"v"), vec![])).unwrap();
    assert!(m.user_headers.is_none());
    let (back, form) = message_to_record(&stored(m, 5));
    assert_eq!(form, ReadForm::Native, "no kafka.* header at all reads as native");
    assert_eq!(back.key, None);
}

#[test]
fn map_ts_1_milliseconds_become_microseconds_and_back() {
    let (m, _) = record_to_message(record(None, Some(b"v"), vec![])).unwrap();
    assert_eq!(m.header.origin_timestamp, 1_700_000_000_123_000);
    assert_eq!(record_timestamp_ms(&m), 1_700_000_000_123);
}

#[test]
fn map_ts_1_microseconds_truncate_toward_zero() {
    let mut m = IggyMessage::builder().payload(b(b"x")).build().unwrap();
    m.header.origin_timestamp = 1_999;
    assert_eq!(record_timestamp_ms(&m), 1);
}

#[test]
fn map_ts_2_minus_one_is_stored_as_zero_and_read_as_server_time() {
    let mut r = record(Some(b"k"), Some(b"v"), vec![]);
    r.timestamp_ms = -1;
    let (m, _) = record_to_message(r).unwrap();
    assert_eq!(m.header.origin_timestamp, 0);
    let (back, _) = message_to_record(&stored(m, 42_000_999));
    assert_eq!(back.timestamp_ms, 42_000);
}

#[test]
fn map_ts_3_epoch_zero_survives_the_round_trip() {
    let mut r = record(Some(b"k"), Some(b"v"), vec![]);
    r.timestamp_ms = 0;
    let (m, _) = record_to_message(r).unwrap();
    assert_eq!(m.header.origin_timestamp, 1);
    let (back, _) = message_to_record(&stored(m, 99_000_000));
    assert_eq!(back.timestamp_ms, 0);
}

#[test]
fn map_ts_4_other_negative_timestamps_are_refused() {
    for ts in [-2, i64::MIN] {
        let mut r = record(None, Some(b"v"), vec![]);
        r.timestamp_ms = ts;
        assert_eq!(record_to_message(r).unwrap_err(), MapError::InvalidTimestamp(ts));
    }
    let mut r = record(None, Some(b"v"), vec![]);
    r.timestamp_ms = i64::MAX;
    assert!(matches!(record_to_message(r), Err(MapError::InvalidTimestamp(_))));
}

#[test]
fn map_value_1_tombstone_is_placeholder_with_null_marker() {
    let r = record(Some(b"k"), None, vec![header(b"h", Some(b"1"))]);
    let (m, form) = record_to_message(r.clone()).unwrap();
    assert_eq!(form, StoredForm::Placeholder);
    assert_eq!(&m.payload[..], PLACEHOLDER_PAYLOAD);
    assert_eq!(stored_headers(&m)["kafka.value"].1, b"null".to_vec());
    let (back, form) = message_to_record(&stored(m, 1));
    assert_eq!(form, ReadForm::Placeholder);
    assert_eq!(back, r);
}

#[test]
fn map_value_1_empty_value_is_placeholder_with_empty_marker() {
    let r = record(Some(b"k"), Some(b""), vec![]);
    let (m, form) = record_to_message(r.clone()).unwrap();
    assert_eq!(form, StoredForm::Placeholder);
    assert_eq!(&m.payload[..], PLACEHOLDER_PAYLOAD);
    assert_eq!(stored_headers(&m)["kafka.value"].1, b"empty".to_vec());
    let (back, _) = message_to_record(&stored(m, 1));
    assert_eq!(back.value, Some(Bytes::new()));
    assert_eq!(back, r);
}

#[test]
fn map_value_1_null_key_tombstone_still_round_trips() {
    let r = record(None, None, vec![]);
    let (m, form) = record_to_message(r.clone()).unwrap();
    assert_eq!(form, StoredForm::Placeholder);
    let (back, form) = message_to_record(&stored(m, 1));
    assert_eq!(form, ReadForm::Placeholder);
    assert_eq!(back, r);
}

#[test]
fn map_value_2_a_single_zero_byte_value_is_not_a_placeholder() {
    let r = record(None, Some(&[0]), vec![]);
    let (m, form) = record_to_message(r).unwrap();
    assert_eq!(form, StoredForm::Plain);
    let (back, _) = message_to_record(&stored(m, 1));
    assert_eq!(back.value.as_deref(), Some(&[0u8][..]));
}

fn assert_envelope(r: KafkaRecord, trigger: EnvelopeTrigger) {
    assert_eq!(classify(&r), StoredForm::Envelope(trigger));
    let (m, form) = record_to_message(r.clone()).unwrap();
    assert_eq!(form, StoredForm::Envelope(trigger));
    let h = stored_headers(&m);
    assert_eq!(h.len(), 1, "an envelope message carries only the marker");
    assert_eq!(h["kafka.envelope"], (HeaderKind::Raw, vec![ENVELOPE_VERSION]));
    let env = envelope_of(&m);
    assert_eq!(
        (env.key.clone(), env.value.clone(), env.headers.clone()),
        (r.key.clone(), r.value.clone(), r.headers.clone())
    );
    let (back, read) = message_to_record(&stored(m, 1));
    assert_eq!(read, ReadForm::Envelope);
    assert_eq!(
        back, r,
        "the envelope restores the record exactly, header order included"
    );
}

#[test]
fn env_trigger_empty_key_1() {
    assert_envelope(record(Some(b""), Some(b"v"), vec![]), EnvelopeTrigger::EmptyKey);
}

#[test]
fn env_trigger_key_len_1_key_of_256_bytes() {
    assert_envelope(record(Some(&[7; 256]), Some(b"v"), vec![]), EnvelopeTrigger::KeyTooLong);
    // 255 is still plain.
    assert_eq!(
        classify(&record(Some(&[7; 255]), Some(b"v"), vec![])),
        StoredForm::Plain
    );
}

#[test]
fn env_trigger_key_len_1_a_300_byte_key_tombstone() {
    assert_envelope(record(Some(&[1; 300]), None, vec![]), EnvelopeTrigger::KeyTooLong);
}

#[test]
fn env_trigger_name_len_1_prefixed_name_over_255() {
    let name = vec![b'n'; 255 - HEADER_PREFIX.len() + 1];
    assert_envelope(
        record(None, Some(b"v"), vec![header(&name, Some(b"x"))]),
        EnvelopeTrigger::HeaderNameTooLong,
    );
    let fits = vec![b'n'; 255 - HEADER_PREFIX.len()];
    assert_eq!(
        classify(&record(None, Some(b"v"), vec![header(&fits, Some(b"x"))])),
        StoredForm::Plain
    );
}

#[test]
fn env_trigger_name_1_non_utf8_name() {
    assert_envelope(
        record(None, Some(b"v"), vec![header(&[0xff, 0xfe], Some(b"x"))]),
        EnvelopeTrigger::HeaderNameNotUtf8,
    );
}

#[test]
fn env_trigger_header_value_1_null_header_value() {
    assert_envelope(
        record(Some(b"k"), Some(b"v"), vec![header(b"h", None)]),
        EnvelopeTrigger::HeaderValueNull,
    );
}

#[test]
fn env_trigger_header_value_1_empty_header_value() {
    assert_envelope(
        record(Some(b"k"), Some(b"v"), vec![header(b"h", Some(b""))]),
        EnvelopeTrigger::HeaderValueEmpty,
    );
}

#[test]
fn env_trigger_header_value_1_header_value_over_255() {
    assert_envelope(
        record(None, Some(b"v"), vec![header(b"h", Some(&[3; 256]))]),
        EnvelopeTrigger::HeaderValueTooLong,
    );
}

#[test]
fn env_trigger_repeat_1_repeated_header_names_keep_their_order() {
    let headers = vec![
        header(b"b", Some(b"1")),
        header(b"a", Some(b"2")),
        header(b"b", Some(b"3")),
    ];
    assert_envelope(record(None, Some(b"v"), headers), EnvelopeTrigger::RepeatedHeaderName);
    let many: Vec<_> = (0..20u8).map(|i| header(&[b'a' + (i % 19)], Some(b"x"))).collect();
    assert_eq!(
        classify(&record(None, Some(b"v"), many)),
        StoredForm::Envelope(EnvelopeTrigger::RepeatedHeaderName)
    );
}

#[test]
fn env_trigger_budget_1_headers_over_100_kb_of_iggy_wire_form() {
    // Each header: 10 + (8 + 4) name + 255 value = 277 wire bytes; 361 of them = 99,997.
    let headers = |n: usize| -> Vec<RecordHeader> {
        (0..n)
            .map(|i| header(format!("{i:04}").as_bytes(), Some(&[9; 255])))
            .collect()
    };
    assert_eq!(classify(&record(None, Some(b"v"), headers(361))), StoredForm::Plain);
    let (m, _) = record_to_message(record(None, Some(b"v"), headers(361))).unwrap();
    assert_eq!(m.header.user_headers_length, 99_997, "our count is Iggy's wire count");
    assert_envelope(record(None, Some(b"v"), headers(362)), EnvelopeTrigger::HeaderBudget);
}

#[test]
fn env_trigger_budget_1_key_and_marker_count_toward_the_budget() {
    // 360 headers = 99,720 bytes; a 255-byte key adds 10 + 9 + 255 = 274: total 99,994 fits.
    let hs: Vec<_> = (0..360)
        .map(|i| header(format!("{i:04}").as_bytes(), Some(&[9; 255])))
        .collect();
    assert_eq!(
        classify(&record(Some(&[1; 255]), Some(b"v"), hs.clone())),
        StoredForm::Plain
    );
    // A tombstone adds kafka.value = null: 10 + 11 + 4 = 25 more, 100,019: envelope.
    assert_eq!(
        classify(&record(Some(&[1; 255]), None, hs)),
        StoredForm::Envelope(EnvelopeTrigger::HeaderBudget)
    );
}

#[test]
fn limit_payload_1_value_over_64_mb_is_refused() {
    let big = vec![0u8; MAX_PAYLOAD_SIZE as usize + 1];
    let err = record_to_message(record(None, Some(&big), vec![])).unwrap_err();
    assert_eq!(err, MapError::PayloadTooLarge { len: big.len() });
    let err = record_to_message(record(Some(b""), Some(&big), vec![])).unwrap_err();
    assert!(matches!(err, MapError::PayloadTooLarge { .. }));
}

#[test]
fn map_read_order_1_envelope_wins_over_other_kafka_headers() {
    let env = encode_envelope(Some(b"ek"), Some(b"ev"), &[]);
    let mut headers = BTreeMap::new();
    headers.insert(key(ENVELOPE_HEADER), raw(&[1]).unwrap());
    headers.insert(key(KEY_HEADER), raw(b"other").unwrap());
    headers.insert(key(VALUE_HEADER), raw(b"null").unwrap());
    let m = IggyMessage::builder()
        .payload(env)
        .user_headers(headers)
        .build()
        .unwrap();
    let (r, form) = message_to_record(&m);
    assert_eq!(form, ReadForm::Envelope);
    assert_eq!(r.key.as_deref(), Some(&b"ek"[..]));
}

#[test]
fn map_read_native_1_iggy_written_message() {
    let mut headers = BTreeMap::new();
    headers.insert(
        HeaderKey::try_from("content-type").unwrap(),
        HeaderValue::try_from("text/plain").unwrap(),
    );
    headers.insert(HeaderKey::try_from("count").unwrap(), HeaderValue::from(7u32));
    let mut m = IggyMessage::builder()
        .payload(b(b"hello"))
        .user_headers(headers)
        .build()
        .unwrap();
    m.header.origin_timestamp = 0;
    m.header.timestamp = 1_234_567;
    let (r, form) = message_to_record(&m);
    assert_eq!(form, ReadForm::Native);
    assert_eq!(r.key, None);
    assert_eq!(r.value.as_deref(), Some(&b"hello"[..]));
    assert_eq!(r.timestamp_ms, 1_234, "origin 0 falls back to the server timestamp");
    assert_eq!(
        r.headers,
        vec![
            header(b"content-type", Some(b"text/plain")),
            header(b"count", Some(&7u32.to_le_bytes()))
        ]
    );
}

#[test]
fn map_read_native_1_origin_timestamp_wins_when_set() {
    let mut m = IggyMessage::builder().payload(b(b"x")).build().unwrap();
    m.header.origin_timestamp = 5_000_999;
    m.header.timestamp = 9_000_000;
    assert_eq!(message_to_record(&m).0.timestamp_ms, 5_000);
}

#[test]
fn map_read_malformed_1_unknown_envelope_version_is_served_natively() {
    let mut headers = BTreeMap::new();
    headers.insert(key(ENVELOPE_HEADER), raw(&[2]).unwrap());
    let m = IggyMessage::builder()
        .payload(b(b"opaque"))
        .user_headers(headers)
        .build()
        .unwrap();
    let (r, form) = message_to_record(&m);
    assert!(matches!(form, ReadForm::Malformed(_)));
    assert_eq!(r.value.as_deref(), Some(&b"opaque"[..]));
    assert_eq!(r.headers, vec![header(b"kafka.envelope", Some(&[2]))]);
}

#[test]
fn map_read_malformed_1_truncated_envelope_and_unknown_marker() {
    let mut headers = BTreeMap::new();
    headers.insert(key(ENVELOPE_HEADER), raw(&[1]).unwrap());
    let m = IggyMessage::builder()
        .payload(b(&[3, 0, 0]))
        .user_headers(headers)
        .build()
        .unwrap();
    assert!(matches!(message_to_record(&m).1, ReadForm::Malformed(_)));
    let mut headers = BTreeMap::new();
    headers.insert(key(VALUE_HEADER), raw(b"gone").unwrap());
    let m = IggyMessage::builder()
        .payload(b(&[0]))
        .user_headers(headers)
        .build()
        .unwrap();
    assert!(matches!(message_to_record(&m).1, ReadForm::Malformed(_)));
}

#[test]
fn map_header_1_plain_headers_come_back_sorted_by_name() {
    let r = record(
        None,
        Some(b"v"),
        vec![header(b"zeta", Some(b"1")), header(b"alpha", Some(b"2"))],
    );
    let (m, _) = record_to_message(r).unwrap();
    let (back, _) = message_to_record(&stored(m, 1));
    assert_eq!(
        back.headers,
        vec![header(b"alpha", Some(b"2")), header(b"zeta", Some(b"1"))]
    );
}

// --- proptest: the round trip ----------------------------------------------------------------

fn arb_field(max: usize) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 1..24),
        1 => proptest::collection::vec(any::<u8>(), 0..max),
    ]
    .prop_map(Bytes::from)
}

fn arb_name() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => "[a-z.\\-]{0,12}".prop_map(|s| Bytes::from(s.into_bytes())),
        1 => proptest::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from),
    ]
}

fn arb_kafka_record() -> impl Strategy<Value = KafkaRecord> {
    (
        prop_oneof![Just(-1i64), Just(0i64), 0i64..4_000_000_000_000],
        proptest::option::of(arb_field(300)),
        proptest::option::of(arb_field(600)),
        proptest::collection::vec((arb_name(), proptest::option::of(arb_field(300))), 0..5),
    )
        .prop_map(|(timestamp_ms, key, value, headers)| KafkaRecord {
            timestamp_ms,
            key,
            value,
            headers: headers
                .into_iter()
                .map(|(name, value)| RecordHeader { name, value })
                .collect(),
        })
}

proptest! {
    /// Kafka record -> Iggy message -> Kafka record is the identity on what the spec preserves:
    /// key, value (null vs empty), header names and values, the timestamp in ms; headers come back
    /// sorted by name unless enveloped, and -1 reads as the server timestamp.
    #[test]
    fn map_round_trip_record_message_record(r in arb_kafka_record(), server_ms in 1i64..4_000_000_000_000) {
        let (m, form) = record_to_message(r.clone()).unwrap();
        let (back, read) = message_to_record(&stored(m, server_ms as u64 * 1000 + 7));
        prop_assert_eq!(&back.key, &r.key);
        prop_assert_eq!(&back.value, &r.value);
        let expected_ts = if r.timestamp_ms == -1 { server_ms } else { r.timestamp_ms };
        prop_assert_eq!(back.timestamp_ms, expected_ts);
        match form {
            StoredForm::Envelope(_) => {
                prop_assert_eq!(read, ReadForm::Envelope);
                prop_assert_eq!(&back.headers, &r.headers);
            }
            StoredForm::Plain | StoredForm::Placeholder => {
                let mut sorted = r.headers.clone();
                sorted.sort_by(|a, b| a.name.cmp(&b.name));
                prop_assert_eq!(&back.headers, &sorted);
                let native = r.key.is_none() && r.headers.is_empty() && form == StoredForm::Plain;
                prop_assert_eq!(read == ReadForm::Native, native);
            }
        }
    }

    /// Any Iggy message maps to a Kafka record without panicking, whatever its headers say.
    #[test]
    fn map_read_arbitrary_messages_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 1..64),
        entries in proptest::collection::vec(
            (prop_oneof![Just("kafka.envelope".to_string()), Just("kafka.value".to_string()),
                         Just("kafka.key".to_string()), "kafka\\.h\\.[a-z]{1,4}", "[a-z]{1,6}"],
             proptest::collection::vec(any::<u8>(), 1..16)),
            0..5),
        origin in any::<u64>(),
    ) {
        let headers: BTreeMap<_, _> = entries.into_iter()
            .map(|(k, v)| (HeaderKey::try_from(k.as_str()).unwrap(), HeaderValue::try_from(v).unwrap()))
            .collect();
        let mut m = IggyMessage::builder().payload(Bytes::from(payload)).user_headers(headers).build().unwrap();
        m.header.origin_timestamp = origin;
        let _ = message_to_record(&m);
    }
}

#[test]
fn env_mark_1_env_version_1_the_marker_is_the_only_header_and_holds_version_1() {
    let (m, form) = record_to_message(record(Some(b""), Some(b"v"), vec![header(b"h", None)])).unwrap();
    assert!(matches!(form, StoredForm::Envelope(_)));
    let h = stored_headers(&m);
    assert_eq!(h.keys().collect::<Vec<_>>(), vec!["kafka.envelope"]);
    assert_eq!(h["kafka.envelope"], (HeaderKind::Raw, vec![1]));
    assert_eq!(ENVELOPE_VERSION, 1);
}

/// The order in which triggers are evaluated ("Triggers" in docs/spec/envelope.md): with two
/// triggers in one record, the first in that order is the one reported. The stored envelope is
/// the same either way.
#[test]
fn env_trigger_order_the_first_trigger_in_spec_order_is_reported() {
    let long_name = vec![b'n'; 256];
    // 600 more headers of 200-byte values: about 128 KB of Iggy wire form, over the 100 KB budget.
    let over_budget = |mut headers: Vec<RecordHeader>| {
        headers.extend((0..600).map(|i| header(format!("x{i}").as_bytes(), Some(&[b'v'; 200]))));
        headers
    };
    let cases: Vec<(&str, KafkaRecord, EnvelopeTrigger)> = vec![
        (
            "empty key before a null header value",
            record(Some(b""), Some(b"v"), vec![header(b"h", None)]),
            EnvelopeTrigger::EmptyKey,
        ),
        (
            "long key before a non-UTF-8 name",
            record(Some(&[1; 300]), Some(b"v"), vec![header(&[0xff], Some(b"x"))]),
            EnvelopeTrigger::KeyTooLong,
        ),
        (
            "headers in record order: the first header's empty value before the second's bad name",
            record(
                Some(b"k"),
                Some(b"v"),
                vec![header(b"a", Some(b"")), header(&[0xff], Some(b"x"))],
            ),
            EnvelopeTrigger::HeaderValueEmpty,
        ),
        (
            "within a header, a non-UTF-8 name before its length",
            record(Some(b"k"), Some(b"v"), vec![header(&[0xff; 300], Some(b"x"))]),
            EnvelopeTrigger::HeaderNameNotUtf8,
        ),
        (
            "within a header, the name's length before a null value",
            record(Some(b"k"), Some(b"v"), vec![header(&long_name, None)]),
            EnvelopeTrigger::HeaderNameTooLong,
        ),
        (
            "a null value before the repeat of its name",
            record(
                Some(b"k"),
                Some(b"v"),
                vec![header(b"h", Some(b"x")), header(b"h", None)],
            ),
            EnvelopeTrigger::HeaderValueNull,
        ),
        (
            "a repeated name before the header budget",
            record(
                Some(b"k"),
                Some(b"v"),
                over_budget(vec![header(b"h", Some(b"1")), header(b"h", Some(b"2"))]),
            ),
            EnvelopeTrigger::RepeatedHeaderName,
        ),
        (
            "the same headers without the repeat: the budget alone",
            record(Some(b"k"), Some(b"v"), over_budget(vec![header(b"h", Some(b"1"))])),
            EnvelopeTrigger::HeaderBudget,
        ),
    ];
    for (what, r, trigger) in cases {
        assert_eq!(classify(&r), StoredForm::Envelope(trigger), "{what}");
        let (_, form) = record_to_message(r).unwrap();
        assert_eq!(form, StoredForm::Envelope(trigger), "{what}");
    }
}

// ---- Reading stored headers without the SDK's map (MAP-READ-NATIVE-1, MAP-READ-MALFORMED-1) ----

/// One header field on the wire: a kind (the mapping's two, or any code), bytes from a small
/// alphabet (so names repeat) or any, and now and then a length that lies.
fn arb_wire_field() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![6 => Just(1u8), 6 => Just(2u8), 1 => Just(0u8), 4 => 0u8..=16, 1 => any::<u8>()];
    let bytes = prop_oneof![
        prop::collection::vec(b'a'..=b'c', 0..3),
        prop::collection::vec(any::<u8>(), 0..20),
        prop::collection::vec(any::<u8>(), 250..260),
    ];
    let length_lie = prop::option::weighted(0.05, any::<u32>());
    (kind, bytes, length_lie).prop_map(|(kind, bytes, lie)| {
        let mut field = vec![kind];
        field.extend(lie.unwrap_or(bytes.len() as u32).to_le_bytes());
        field.extend(bytes);
        field
    })
}

fn arb_wire_headers() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(arb_wire_field(), 0..8).prop_map(|fields| fields.concat()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Each entry as (name kind, name, value kind, value), whoever read it.
type HeaderEntry = (u8, Vec<u8>, u8, Vec<u8>);

fn sdk_entries(m: &IggyMessage) -> Result<Vec<HeaderEntry>, String> {
    m.user_headers_map()
        .map(|map| {
            map.unwrap_or_default()
                .iter()
                .map(|(k, v)| {
                    (
                        k.kind().as_code(),
                        k.as_bytes().to_vec(),
                        v.kind().as_code(),
                        v.as_bytes().to_vec(),
                    )
                })
                .collect()
        })
        .map_err(|e| e.to_string())
}

fn our_entries(raw: &Bytes) -> Result<Vec<HeaderEntry>, String> {
    let mut headers = Vec::new();
    super::stored_headers::stored_headers(raw, &mut headers)
        .map(|()| {
            headers
                .iter()
                .map(|h| (h.name_kind, h.name.to_vec(), h.value_kind, h.value.to_vec()))
                .collect()
        })
        .map_err(|e| e.to_string())
}

fn with_raw_headers(raw: &[u8]) -> IggyMessage {
    let mut m = IggyMessage::builder().payload(b(b"p")).build().unwrap();
    m.header.user_headers_length = raw.len() as u32;
    m.user_headers = Some(b(raw));
    m
}

proptest! {
    /// The gateway's own reading of stored header bytes gives what the SDK's map gives, entry
    /// for entry and in the same order, or the same error, on any bytes at all.
    #[test]
    fn map_read_native_1_stored_headers_read_as_the_sdk_reads_them(raw in arb_wire_headers()) {
        let message = with_raw_headers(&raw);
        prop_assert_eq!(our_entries(&b(&raw)), sdk_entries(&message));
    }
}

/// The cases the property test must not miss, named: repeated names (the later wins, as in the
/// SDK's map), names out of order, a wrong fixed-size length, an unknown kind, a structural fault.
#[test]
fn map_read_malformed_1_stored_header_edge_cases_read_as_the_sdk_reads_them() {
    let field = |kind: u8, bytes: &[u8]| {
        let mut f = vec![kind];
        f.extend((bytes.len() as u32).to_le_bytes());
        f.extend(bytes);
        f
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "repeated name",
            [field(2, b"h"), field(1, b"1"), field(2, b"h"), field(1, b"2")].concat(),
        ),
        (
            "out of order",
            [field(2, b"z"), field(1, b"1"), field(2, b"a"), field(1, b"2")].concat(),
        ),
        (
            "kinds order before names",
            [field(2, b"a"), field(1, b"1"), field(1, b"b"), field(1, b"2")].concat(),
        ),
        ("wrong fixed length", [field(2, b"n"), field(6, b"123")].concat()),
        ("unknown value kind", [field(2, b"n"), field(99, b"x")].concat()),
        (
            "unknown name kind before a bad value",
            [field(42, b"n"), field(6, b"1")].concat(),
        ),
        ("odd field count", field(2, b"n")),
        ("empty field", [field(2, b"n"), field(1, b"")].concat()),
        ("reserved kind 0", [field(2, b"n"), field(0, b"v")].concat()),
        ("truncated", [field(2, b"n"), field(1, b"v")[..4].to_vec()].concat()),
        ("no bytes", Vec::new()),
    ];
    for (what, raw) in cases {
        assert_eq!(our_entries(&b(&raw)), sdk_entries(&with_raw_headers(&raw)), "{what}");
    }
    let repeated = [field(2, b"h"), field(1, b"1"), field(2, b"h"), field(1, b"2")].concat();
    assert_eq!(
        our_entries(&b(&repeated)).unwrap(),
        vec![(2, b"h".to_vec(), 1, b"2".to_vec())],
        "the later of two equal names"
    );
}

// ---- Writing headers without the SDK's builder (MAP-KEY-1, MAP-HEADER-1, MAP-VALUE-1, ENV-MARK-1) ----

/// The message the SDK's builder makes of what `record_to_message` chose to store for `record`
/// (its payload, and its headers as a map of the builder's own types), with the origin timestamp
/// the mapping sets: the mapping's output before it wrote headers itself.
fn built_by_the_sdk(record: &KafkaRecord, mapped: &IggyMessage, form: StoredForm) -> IggyMessage {
    let name = |n: &[u8]| key(std::str::from_utf8(n).unwrap());
    let raw = |v: &[u8]| raw(v).unwrap();
    let mut headers = BTreeMap::new();
    match form {
        StoredForm::Envelope(_) => {
            headers.insert(name(ENVELOPE_HEADER.as_bytes()), raw(&[ENVELOPE_VERSION]));
        }
        StoredForm::Plain | StoredForm::Placeholder => {
            if let Some(k) = &record.key {
                headers.insert(name(KEY_HEADER.as_bytes()), raw(k));
            }
            for h in &record.headers {
                let full = [HEADER_PREFIX.as_bytes(), &h.name].concat();
                headers.insert(name(&full), raw(h.value.as_deref().unwrap()));
            }
            match &record.value {
                None => drop(headers.insert(name(VALUE_HEADER.as_bytes()), raw(b"null"))),
                Some(v) if v.is_empty() => drop(headers.insert(name(VALUE_HEADER.as_bytes()), raw(b"empty"))),
                Some(_) => {}
            }
        }
    }
    let mut built = IggyMessage::builder()
        .payload(mapped.payload.clone())
        .maybe_user_headers((!headers.is_empty()).then_some(headers))
        .build()
        .unwrap();
    built.header.origin_timestamp = origin_timestamp_us(record.timestamp_ms).unwrap();
    built
}

/// Every header field of two messages, and their payload and header bytes.
fn message_parts(m: &IggyMessage) -> (Vec<u64>, u128, Vec<u32>, Bytes, Option<Bytes>) {
    let h = &m.header;
    (
        vec![h.checksum, h.offset, h.timestamp, h.origin_timestamp, h.reserved],
        h.id,
        vec![h.user_headers_length, h.payload_length],
        m.payload.clone(),
        m.user_headers.clone(),
    )
}

proptest! {
    /// The mapping writes the stored message the SDK's builder would have made of the same
    /// record, byte for byte: header fields, payload and user header bytes, in the builder's
    /// order, whatever the record's key, value and headers.
    #[test]
    fn map_header_1_headers_are_written_as_the_sdk_builder_writes_them(r in arb_kafka_record()) {
        let (mapped, form) = record_to_message(r.clone()).unwrap();
        prop_assert_eq!(message_parts(&mapped), message_parts(&built_by_the_sdk(&r, &mapped, form)));
    }
}

/// The orders the property test must not miss, named: a header name sorting after `kafka.key`'s
/// place (`kafka.h.` sorts before it whatever follows), headers given out of order, a name that
/// is a prefix of another, and the key and value marker together.
#[test]
fn map_value_1_map_key_1_written_header_order_edge_cases() {
    let cases = [
        (
            "headers out of order",
            record(
                Some(b"k"),
                Some(b"v"),
                vec![header(b"z", Some(b"1")), header(b"a", Some(b"2"))],
            ),
        ),
        (
            "a name that prefixes another",
            record(
                None,
                Some(b"v"),
                vec![header(b"ab", Some(b"1")), header(b"a", Some(b"2"))],
            ),
        ),
        (
            "a name past kafka.key",
            record(Some(b"k"), None, vec![header(b"zzzz", Some(b"1"))]),
        ),
        ("key and empty-value marker", record(Some(b"k"), Some(b""), vec![])),
        ("tombstone without a key", record(None, None, vec![])),
        ("enveloped", record(Some(b""), Some(b"v"), vec![])),
    ];
    for (what, r) in cases {
        let (mapped, form) = record_to_message(r.clone()).unwrap();
        assert_eq!(
            message_parts(&mapped),
            message_parts(&built_by_the_sdk(&r, &mapped, form)),
            "{what}"
        );
    }
}

// ---- The Fetch path's borrowed reading (FETCH-BATCH-1) -----------------------------------------

/// A stored message of any shape a Fetch may meet: mapped from a Kafka record (plain,
/// placeholder or enveloped), or written by another Iggy client with arbitrary header bytes
/// (native, or `kafka.*` headers that do not parse).
fn arb_stored_message() -> impl Strategy<Value = IggyMessage> {
    let mapped = (arb_kafka_record(), 1u64..4_000_000_000_000_000)
        .prop_filter_map("refused by the mapping", |(r, server_us)| {
            record_to_message(r).ok().map(|(m, _)| stored(m, server_us))
        });
    let written = (
        proptest::collection::vec(any::<u8>(), 1..64),
        arb_wire_headers(),
        any::<u64>(),
    )
        .prop_map(|(payload, raw, origin)| {
            let mut m = with_raw_headers(&raw);
            m.payload = Bytes::from(payload);
            m.header.payload_length = m.payload.len() as u32;
            m.header.origin_timestamp = origin;
            if raw.is_empty() {
                m.user_headers = None;
            }
            m
        });
    prop_oneof![3 => mapped, 2 => written]
}

proptest! {
    /// The batch a Fetch builds from records read borrowed, one scratch reused over every
    /// message, is byte for byte the batch built from each message's owned record: the scratch
    /// carries nothing from one message to the next, and the borrowed and owned encodings agree.
    #[test]
    fn fetch_batch_1_records_read_borrowed_build_the_owned_records_batch(
        messages in proptest::collection::vec(arb_stored_message(), 1..8),
        limit_bytes in prop_oneof![Just(usize::MAX), 0usize..4_096],
    ) {
        let mut borrowed = crate::fetch_batch::FetchBatchBuilder::new();
        let mut owned = crate::fetch_batch::FetchBatchBuilder::new();
        let mut scratch = ReadScratch::default();
        for (offset, message) in messages.iter().enumerate() {
            let (record, form) = read_record(message, &mut scratch);
            let (owned_record, owned_form) = message_to_record(message);
            prop_assert_eq!(&form, &owned_form);
            let pushed = borrowed.push_read_within(offset as u64, &record, limit_bytes);
            prop_assert_eq!(pushed, owned.push_within(offset as u64, &owned_record, limit_bytes));
        }
        prop_assert_eq!(borrowed.finish(), owned.finish());
    }

    /// A record read borrowed holds the bytes of the record read afresh: reading other messages
    /// with the same scratch first changes nothing.
    #[test]
    fn map_read_order_1_a_reused_scratch_reads_as_a_fresh_one(
        before in proptest::collection::vec(arb_stored_message(), 0..4),
        message in arb_stored_message(),
    ) {
        let mut reused = ReadScratch::default();
        for m in &before {
            let _ = read_record(m, &mut reused);
        }
        let (again, again_form) = read_record(&message, &mut reused);
        let (again, again_form) = (again, again_form.clone());
        let mut fresh_scratch = ReadScratch::default();
        let (fresh, fresh_form) = read_record(&message, &mut fresh_scratch);
        prop_assert_eq!(again, fresh);
        prop_assert_eq!(again_form, fresh_form);
    }
}
