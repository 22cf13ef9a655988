//! A Kafka record becomes one Iggy message, and an Iggy message becomes one Kafka record
//! (docs/spec/mapping.md, docs/spec/envelope.md).
//!
//! The Iggy SDK's message type is built here, with the checks the SDK's builder makes (payload
//! 1..=64,000,000 bytes, header fields 1..=255 bytes, 100,000 bytes of headers) made first: the
//! envelope triggers compute them, so a record the builder would refuse is enveloped or refused
//! before anything is built, and the headers are written in the builder's wire form
//! (`header_writer`).

use crate::batch::{HeaderRef, RecordHeader};
use crate::envelope::{decode_envelope_into, encode_envelope, envelope_len, ENVELOPE_VERSION};
use bytes::Bytes;
use header_writer::{write_headers, OutgoingHeader};
use iggy_common::{IggyMessage, IggyMessageHeader, MAX_PAYLOAD_SIZE, MAX_USER_HEADERS_SIZE};
use stored_headers::{stored_headers, StoredHeader};
use thiserror::Error;

/// Every header name the gateway reserves starts with this (MAP-RESERVED-1).
pub const RESERVED_PREFIX: &str = "kafka.";
/// The Kafka record key (MAP-KEY-1).
pub const KEY_HEADER: &str = "kafka.key";
/// Marks a placeholder payload: `null` or `empty` (MAP-VALUE-1).
pub const VALUE_HEADER: &str = "kafka.value";
/// Marks an envelope payload; its value is the format version (ENV-MARK-1).
pub const ENVELOPE_HEADER: &str = "kafka.envelope";
/// Prefix of a Kafka record header's name (MAP-HEADER-1).
pub const HEADER_PREFIX: &str = "kafka.h.";
/// The payload stored for a null or empty value (MAP-VALUE-1).
pub const PLACEHOLDER_PAYLOAD: &[u8] = &[0x00];
/// Iggy's limit on one header name or value.
pub const MAX_HEADER_FIELD_LEN: usize = 255;
/// Iggy's wire form of one header: kind and length for the name, kind and length for the value.
pub const HEADER_WIRE_OVERHEAD: usize = 10;
/// Microseconds per Kafka millisecond.
const MICROS_PER_MILLI: i64 = 1_000;

/// A Kafka record with its absolute timestamp, as Produce receives it and Fetch emits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Milliseconds since the epoch; -1 for "no timestamp".
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

impl KafkaRecord {
    /// The record as Produce maps it: its absolute timestamp and its fields, from the batch.
    pub fn from_batch(batch: &crate::batch::RecordBatch, record: &crate::batch::Record) -> Self {
        KafkaRecord {
            timestamp_ms: batch.record_timestamp_ms(record),
            key: record.key.clone(),
            value: record.value.clone(),
            headers: record.headers.clone(),
        }
    }

    /// Every record of `batch` as Produce maps it, moved out of the batch rather than copied: a
    /// copy costs a reference count per key and value and an allocation per record with headers.
    pub fn all_from_batch(mut batch: crate::batch::RecordBatch) -> impl Iterator<Item = Self> {
        let records = std::mem::take(&mut batch.records);
        records.into_iter().map(move |record| KafkaRecord {
            timestamp_ms: batch.record_timestamp_ms(&record),
            key: record.key,
            value: record.value,
            headers: record.headers,
        })
    }
}

/// Why a record goes into the envelope. The first that holds, in this order, is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeTrigger {
    /// ENV-TRIGGER-EMPTY-KEY-1
    EmptyKey,
    /// ENV-TRIGGER-KEY-LEN-1
    KeyTooLong,
    /// ENV-TRIGGER-NAME-1: not UTF-8, so it cannot be an Iggy string key.
    HeaderNameNotUtf8,
    /// ENV-TRIGGER-NAME-LEN-1
    HeaderNameTooLong,
    /// ENV-TRIGGER-HEADER-VALUE-1
    HeaderValueNull,
    /// ENV-TRIGGER-HEADER-VALUE-1
    HeaderValueEmpty,
    /// ENV-TRIGGER-HEADER-VALUE-1
    HeaderValueTooLong,
    /// ENV-TRIGGER-REPEAT-1
    RepeatedHeaderName,
    /// ENV-TRIGGER-BUDGET-1
    HeaderBudget,
}

/// How a record is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredForm {
    /// Value as payload, key and headers as Iggy headers.
    Plain,
    /// Null or empty value: placeholder payload plus `kafka.value`.
    Placeholder,
    /// The whole record in the envelope payload.
    Envelope(EnvelopeTrigger),
}

/// Why a record cannot be stored at all.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MapError {
    /// MAP-TS-4: Kafka allows -1 and non-negative timestamps only.
    #[error("record timestamp {0} ms is neither -1 nor a representable non-negative time")]
    InvalidTimestamp(i64),
    /// LIMIT-PAYLOAD-1: one record becomes one message, and Iggy caps a payload.
    #[error("stored payload of {len} bytes exceeds Iggy's {MAX_PAYLOAD_SIZE}-byte message limit")]
    PayloadTooLarge { len: usize },
}

fn wire_len(name_len: usize, value_len: usize) -> usize {
    HEADER_WIRE_OVERHEAD + name_len + value_len
}

/// The Kafka timestamp in ms as an origin timestamp in µs (MAP-TS-1, MAP-TS-2, MAP-TS-3).
pub fn origin_timestamp_us(timestamp_ms: i64) -> Result<u64, MapError> {
    match timestamp_ms {
        // MAP-TS-2: "no timestamp" is stored as 0, which Fetch reads as "use the server's".
        -1 => Ok(0),
        // MAP-TS-3: the epoch itself must not read as "no timestamp"; 1 µs truncates back to 0 ms.
        0 => Ok(1),
        ms if ms > 0 => ms
            .checked_mul(MICROS_PER_MILLI)
            .map(|us| us as u64)
            .ok_or(MapError::InvalidTimestamp(ms)),
        ms => Err(MapError::InvalidTimestamp(ms)),
    }
}

/// The stored form of `record`, checking the envelope triggers in a fixed order.
///
/// LIMIT-HEADER-FIELD-1: a record that would need a user header Iggy refuses (an empty or
/// over-255-byte name or value) is enveloped here, so no such header reaches Iggy.
pub fn classify(record: &KafkaRecord) -> StoredForm {
    use EnvelopeTrigger::*;
    let envelope = |trigger| StoredForm::Envelope(trigger);
    if let Some(k) = &record.key {
        if k.is_empty() {
            return envelope(EmptyKey);
        }
        if k.len() > MAX_HEADER_FIELD_LEN {
            return envelope(KeyTooLong);
        }
    }
    let placeholder = record.value.as_ref().is_none_or(Bytes::is_empty);
    let mut budget = record.key.as_ref().map_or(0, |k| wire_len(KEY_HEADER.len(), k.len()));
    if placeholder {
        let marker_len = if record.value.is_none() {
            b"null".len()
        } else {
            b"empty".len()
        };
        budget += wire_len(VALUE_HEADER.len(), marker_len);
    }
    for header in &record.headers {
        if std::str::from_utf8(&header.name).is_err() {
            return envelope(HeaderNameNotUtf8);
        }
        if HEADER_PREFIX.len() + header.name.len() > MAX_HEADER_FIELD_LEN {
            return envelope(HeaderNameTooLong);
        }
        match &header.value {
            None => return envelope(HeaderValueNull),
            Some(v) if v.is_empty() => return envelope(HeaderValueEmpty),
            Some(v) if v.len() > MAX_HEADER_FIELD_LEN => return envelope(HeaderValueTooLong),
            Some(v) => budget += wire_len(HEADER_PREFIX.len() + header.name.len(), v.len()),
        }
    }
    if has_repeated_name(&record.headers) {
        return envelope(RepeatedHeaderName);
    }
    if budget > MAX_USER_HEADERS_SIZE as usize {
        return envelope(HeaderBudget);
    }
    if placeholder {
        StoredForm::Placeholder
    } else {
        StoredForm::Plain
    }
}

fn has_repeated_name(headers: &[RecordHeader]) -> bool {
    // Quadratic for the common handful of headers, a sort beyond that.
    if headers.len() <= 8 {
        return headers
            .iter()
            .enumerate()
            .any(|(i, a)| headers[..i].iter().any(|b| a.name == b.name));
    }
    let mut names: Vec<&[u8]> = headers.iter().map(|h| &h.name[..]).collect();
    names.sort_unstable();
    names.windows(2).any(|w| w[0] == w[1])
}

/// Maps one Kafka record to the Iggy message that stores it, and says which form it took. The
/// record is taken, not borrowed: its value becomes the payload as it is, where a copy of it cost
/// a reference count up and one down for every record Produce maps.
pub fn record_to_message(record: KafkaRecord) -> Result<(IggyMessage, StoredForm), MapError> {
    let origin_timestamp = origin_timestamp_us(record.timestamp_ms)?;
    let form = classify(&record);
    let (payload, user_headers) = match form {
        StoredForm::Envelope(_) => {
            let len = envelope_len(record.key.as_deref(), record.value.as_deref(), &record.headers);
            if len > MAX_PAYLOAD_SIZE as usize {
                return Err(MapError::PayloadTooLarge { len });
            }
            // ENV-MARK-1
            let marker = write_headers(&mut [OutgoingHeader {
                prefix: ENVELOPE_HEADER,
                suffix: &[],
                value: &[ENVELOPE_VERSION],
            }]);
            let payload = encode_envelope(record.key.as_deref(), record.value.as_deref(), &record.headers);
            (payload, Some(marker))
        }
        StoredForm::Plain | StoredForm::Placeholder => {
            // Sized exactly, so a record without key, headers or placeholder (the common
            // unkeyed record) allocates no list at all.
            let entries =
                usize::from(record.key.is_some()) + record.headers.len() + usize::from(form == StoredForm::Placeholder);
            let mut headers = Vec::with_capacity(entries);
            if let Some(k) = &record.key {
                // MAP-KEY-1
                headers.push(OutgoingHeader {
                    prefix: KEY_HEADER,
                    suffix: &[],
                    value: k,
                });
            }
            for header in &record.headers {
                // MAP-HEADER-1: classify() proved the name is UTF-8, short enough and unique.
                headers.push(OutgoingHeader {
                    prefix: HEADER_PREFIX,
                    suffix: &header.name,
                    value: header.value.as_deref().expect("classified as non-null"),
                });
            }
            let payload = match record.value {
                // MAP-VALUE-2: the value is the payload, byte for byte.
                Some(v) if !v.is_empty() => {
                    if v.len() > MAX_PAYLOAD_SIZE as usize {
                        return Err(MapError::PayloadTooLarge { len: v.len() });
                    }
                    v
                }
                // MAP-VALUE-1
                value => {
                    let marker: &[u8] = if value.is_none() { b"null" } else { b"empty" };
                    headers.push(OutgoingHeader {
                        prefix: VALUE_HEADER,
                        suffix: &[],
                        value: marker,
                    });
                    Bytes::from_static(PLACEHOLDER_PAYLOAD)
                }
            };
            (payload, (!headers.is_empty()).then(|| write_headers(&mut headers)))
        }
    };
    // Built here rather than by the SDK's builder, which reads the clock for an origin
    // timestamp this would overwrite and serialises headers through a map of copies; classify()
    // and the payload checks above are the builder's checks, made before anything is built.
    let header = IggyMessageHeader {
        checksum: 0,
        id: 0,
        offset: 0,
        timestamp: 0,
        origin_timestamp,
        user_headers_length: user_headers.as_ref().map_or(0, |h| h.len() as u32),
        payload_length: payload.len() as u32,
        reserved: 0,
    };
    let message = IggyMessage {
        header,
        payload,
        user_headers,
    };
    Ok((message, form))
}

/// How a stored message was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadForm {
    Envelope,
    Placeholder,
    Plain,
    /// No `kafka.*` header: written by an Iggy client (MAP-READ-NATIVE-1).
    Native,
    /// `kafka.*` headers that do not parse; served as a native message (MAP-READ-MALFORMED-1).
    Malformed(String),
}

/// The Kafka timestamp of a stored message: origin timestamp, or the server's when the origin
/// is 0, in ms truncated toward zero (MAP-TS-1, MAP-TS-2).
pub fn record_timestamp_ms(message: &IggyMessage) -> i64 {
    let us = match message.header.origin_timestamp {
        0 => message.header.timestamp,
        origin => origin,
    };
    (us / MICROS_PER_MILLI as u64) as i64
}

/// What [`read_record`] reuses from one stored message to the next, so that reading a Fetch's
/// messages allocates nothing per record once these lists have grown to the most headers one
/// message has (a malformed message's reason aside): the message's stored headers and the
/// record's headers, both borrowed from the messages.
#[derive(Debug, Default)]
pub struct ReadScratch<'m> {
    stored: Vec<StoredHeader<'m>>,
    headers: Vec<HeaderRef<'m>>,
}

/// A stored message's Kafka record as Fetch serves it, borrowed: key, value and header bytes
/// from the message's own buffers (an `empty` placeholder's value is a static empty slice), the
/// list of headers from a [`ReadScratch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'m, 's> {
    /// Milliseconds since the epoch.
    pub timestamp_ms: i64,
    pub key: Option<&'m [u8]>,
    pub value: Option<&'m [u8]>,
    pub headers: &'s [HeaderRef<'m>],
}

/// MAP-READ-NATIVE-1: every stored header, in stored order, as a record header.
fn native_headers<'m>(stored: &[StoredHeader<'m>], headers: &mut Vec<HeaderRef<'m>>) {
    headers.clear();
    headers.extend(stored.iter().map(|h| HeaderRef {
        name: h.name,
        value: Some(h.value),
    }));
}

/// Maps a stored Iggy message to the Kafka record Fetch serves (MAP-READ-ORDER-1): envelope
/// first, then placeholder, then plain, then native. The record borrows from `message` and from
/// `scratch`, which the next call reuses.
pub fn read_record<'m, 's>(
    message: &'m IggyMessage,
    scratch: &'s mut ReadScratch<'m>,
) -> (RecordRef<'m, 's>, ReadForm) {
    let ReadScratch { stored, headers } = scratch;
    headers.clear();
    let timestamp_ms = record_timestamp_ms(message);
    let payload: &'m [u8] = &message.payload;
    let native = |headers: &'s [HeaderRef<'m>]| RecordRef {
        timestamp_ms,
        key: None,
        value: Some(payload),
        headers,
    };
    match message.user_headers.as_deref() {
        None => stored.clear(),
        Some(raw) => {
            if let Err(e) = stored_headers(raw, stored) {
                stored.clear();
                return (
                    native(headers),
                    ReadForm::Malformed(format!("user headers do not parse: {e}")),
                );
            }
        }
    }
    let find = |name: &str| stored.iter().find(|h| h.is_named(name));

    if let Some(version) = find(ENVELOPE_HEADER) {
        if version.value != [ENVELOPE_VERSION] {
            let reason = format!("unknown envelope version {:?}", version.value);
            native_headers(stored, headers);
            return (native(headers), ReadForm::Malformed(reason));
        }
        return match decode_envelope_into(payload, headers) {
            Ok(envelope) => (
                RecordRef {
                    timestamp_ms,
                    key: envelope.key,
                    value: envelope.value,
                    headers,
                },
                ReadForm::Envelope,
            ),
            Err(e) => {
                native_headers(stored, headers);
                (
                    native(headers),
                    ReadForm::Malformed(format!("envelope does not decode: {e}")),
                )
            }
        };
    }

    let mut key = None;
    let mut value = Some(payload);
    let mut form = ReadForm::Native;
    for header in stored.iter() {
        // Names are matched by their bytes here, whatever their kind; the lookups above and
        // below match string-kind names only, as the SDK's map lookups did.
        let name = header.name;
        if name == KEY_HEADER.as_bytes() {
            key = Some(header.value);
            form = ReadForm::Plain;
        } else if let Some(kafka_name) = name.strip_prefix(HEADER_PREFIX.as_bytes()) {
            headers.push(HeaderRef {
                name: kafka_name,
                value: Some(header.value),
            });
            form = ReadForm::Plain;
        } else if name != VALUE_HEADER.as_bytes() {
            // Headers outside the Kafka mapping are kept under their own names (MAP-READ-NATIVE-1).
            headers.push(HeaderRef {
                name,
                value: Some(header.value),
            });
        }
    }
    if let Some(marker) = find(VALUE_HEADER) {
        value = match marker.value {
            b"null" => None,
            b"empty" => Some(&[][..]),
            other => {
                let reason = format!("unknown kafka.value marker {other:?}");
                native_headers(stored, headers);
                return (native(headers), ReadForm::Malformed(reason));
            }
        };
        form = ReadForm::Placeholder;
    }
    if form == ReadForm::Native {
        // An Iggy-written message keeps every header, in stored order, and a null key.
        native_headers(stored, headers);
        return (native(headers), ReadForm::Native);
    }
    (
        RecordRef {
            timestamp_ms,
            key,
            value,
            headers,
        },
        form,
    )
}

/// [`read_record`]'s record, owned: each part a slice of the message's buffers (nothing copied).
pub fn message_to_record(message: &IggyMessage) -> (KafkaRecord, ReadForm) {
    let mut scratch = ReadScratch::default();
    let (record, form) = read_record(message, &mut scratch);
    let share = |part: &[u8]| share_part(message, part);
    let owned = KafkaRecord {
        timestamp_ms: record.timestamp_ms,
        key: record.key.map(share),
        value: record.value.map(share),
        headers: record
            .headers
            .iter()
            .map(|h| RecordHeader {
                name: share(h.name),
                value: h.value.map(share),
            })
            .collect(),
    };
    (owned, form)
}

/// `part`, a slice of the message's payload or of its user headers (as every non-empty part
/// [`read_record`] returns is), as a `Bytes` sharing that buffer; an empty part is `Bytes::new()`.
fn share_part(message: &IggyMessage, part: &[u8]) -> Bytes {
    if part.is_empty() {
        return Bytes::new();
    }
    let in_payload = message.payload.as_ptr_range().contains(&part.as_ptr());
    match &message.user_headers {
        Some(headers) if !in_payload => headers.slice_ref(part),
        _ => message.payload.slice_ref(part),
    }
}

mod header_writer;
mod stored_headers;

#[cfg(test)]
mod tests;
