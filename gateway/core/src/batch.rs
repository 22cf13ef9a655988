//! The Kafka record batch, magic 2: decode and encode, CRC32C, record varints.
//!
//! Decoding is split in two so the gateway can refuse a batch on its header alone (magic,
//! transactional or control flags) before it spends any decompression budget on the records.
//! Every length read from the input is checked against the bytes that are really there before
//! it is used, so no input panics or allocates without bound (BATCH-DECODE-1).
//!
//! ```
//! use bytes::Bytes;
//! use kig_core::batch::{decode_batches, RecordBatch};
//! use kig_core::budget::DecompressionBudget;
//!
//! // One uncompressed batch at base offset 0 holding a single record: key null, value "hi".
//! let bytes = Bytes::from_static(&[
//!     0, 0, 0, 0, 0, 0, 0, 0, // base offset
//!     0, 0, 0, 0x3a, // batch length: 58 bytes follow
//!     0xff, 0xff, 0xff, 0xff, // partition leader epoch -1
//!     2, // magic
//!     0x23, 0x3d, 0xad, 0x44, // CRC32C of everything after it
//!     0, 0, // attributes: no compression, CreateTime
//!     0, 0, 0, 0, // last offset delta
//!     0, 0, 0, 0, 0, 0, 0x03, 0xe8, // base timestamp 1000
//!     0, 0, 0, 0, 0, 0, 0x03, 0xe8, // max timestamp 1000
//!     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producer id -1
//!     0xff, 0xff, // producer epoch -1
//!     0xff, 0xff, 0xff, 0xff, // base sequence -1
//!     0, 0, 0, 1, // one record
//!     0x10, 0, 0, 0, 0x01, 0x04, b'h', b'i', 0, // length 8, then the record
//! ]);
//! let mut budget = DecompressionBudget::new(1 << 20);
//! let batches = decode_batches(&bytes, &mut budget).unwrap();
//! assert_eq!(batches[0].records[0].key, None);
//! assert_eq!(batches[0].records[0].value.as_deref(), Some(&b"hi"[..]));
//! assert_eq!(batches[0].header.base_timestamp, 1000);
//! ```

use crate::budget::DecompressionBudget;
use crate::compression::{self, Compression};
use crate::error::DecodeError;
use crate::varint::{read_varint, read_varlong, varint_len, varlong_len, write_varint, write_varlong};
use bytes::{BufMut, Bytes, BytesMut};

/// The only record batch format the gateway reads and writes.
pub const MAGIC_V2: i8 = 2;
/// Base offset and batch length, the part of a batch its length field does not count.
pub const LOG_OVERHEAD: usize = 12;
/// Fixed size of a magic-2 batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Where the CRC-covered part of a batch starts (the attributes field).
const CRC_START: usize = 21;
/// The smallest a record can be on the wire: length, attributes, timestamp delta, offset delta,
/// key length, value length and header count, one byte each. Bounds preallocation.
const MIN_RECORD_LEN: usize = 7;
/// The smallest a header can be: name length and value length, one byte each.
const MIN_HEADER_LEN: usize = 2;

/// Record-batch attribute bits (`attributes`, int16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BatchAttributes(pub i16);

/// Which clock a batch's timestamps come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl BatchAttributes {
    const TIMESTAMP_TYPE: i16 = 0x08;
    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;

    /// Attributes of a plain batch: the given codec, CreateTime, neither transactional nor control.
    pub fn plain(compression: Compression) -> Self {
        Self(i16::from(compression.id()))
    }

    pub fn compression(self) -> Result<Compression, DecodeError> {
        Compression::from_attributes(self.0)
    }

    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// The same attributes with the compression bits replaced.
    pub fn with_compression(self, compression: Compression) -> Self {
        Self((self.0 & !0x07) | i16::from(compression.id()))
    }
}

/// The fixed header of a magic-2 batch, without the length and CRC (derived on encode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub attributes: BatchAttributes,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// One record header: a name (never null on the wire) and a value that may be null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    pub name: Bytes,
    pub value: Option<Bytes>,
}

/// One record header borrowed from the buffer it was read from: what the Fetch path encodes
/// from a stored message's own bytes, with no reference count or allocation per header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    pub name: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A record header's bytes, however it is held: lets one encoder write owned and borrowed
/// headers alike.
pub trait HeaderFields {
    fn name_bytes(&self) -> &[u8];
    fn value_bytes(&self) -> Option<&[u8]>;
}

impl HeaderFields for RecordHeader {
    fn name_bytes(&self) -> &[u8] {
        &self.name
    }

    fn value_bytes(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

impl HeaderFields for HeaderRef<'_> {
    fn name_bytes(&self) -> &[u8] {
        self.name
    }

    fn value_bytes(&self) -> Option<&[u8]> {
        self.value
    }
}

/// One record as it sits in a batch, with its deltas relative to the batch header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Unused by magic 2; kept so decode(encode(x)) is exact.
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// A decoded batch: its header and its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    pub header: BatchHeader,
    pub records: Vec<Record>,
}

impl RecordBatch {
    /// `records` as a producer without idempotence or transactions batches them: base offset 0,
    /// offset deltas renumbered 0, 1, 2, ..., no producer id, epoch or sequence (-1), CreateTime,
    /// and the max timestamp the base plus the largest timestamp delta.
    pub fn from_producer(compression: Compression, base_timestamp: i64, mut records: Vec<Record>) -> Self {
        for (i, record) in records.iter_mut().enumerate() {
            record.offset_delta = i as i32;
        }
        let max_delta = records.iter().map(|r| r.timestamp_delta).max().unwrap_or(0);
        let header = BatchHeader {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes: BatchAttributes::plain(compression),
            last_offset_delta: records.len() as i32 - 1,
            base_timestamp,
            max_timestamp: base_timestamp.wrapping_add(max_delta),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        };
        Self { header, records }
    }

    /// The absolute timestamp of `record` in milliseconds: the batch's max timestamp under
    /// LogAppendTime, otherwise base timestamp plus the record's delta.
    pub fn record_timestamp_ms(&self, record: &Record) -> i64 {
        match self.header.attributes.timestamp_type() {
            TimestampType::LogAppendTime => self.header.max_timestamp,
            TimestampType::CreateTime => self.header.base_timestamp.wrapping_add(record.timestamp_delta),
        }
    }
}

/// A batch whose header is parsed and whose records are not yet decoded.
#[derive(Debug, Clone)]
pub struct RawBatch {
    pub header: BatchHeader,
    /// Records as declared by the header.
    pub records_count: i32,
    /// The stored CRC32C.
    pub crc: u32,
    /// The whole batch, from base offset to its last byte.
    pub bytes: Bytes,
}

impl RawBatch {
    /// Checks the stored CRC32C against the bytes it covers (BATCH-CRC-1).
    pub fn verify_crc(&self) -> Result<(), DecodeError> {
        let computed = crc32c::crc32c(&self.bytes[CRC_START..]);
        if computed != self.crc {
            return Err(DecodeError::CrcMismatch {
                stored: self.crc,
                computed,
            });
        }
        Ok(())
    }

    /// Decodes the records, decompressing under `budget`. The CRC is checked first.
    pub fn decode_records(&self, budget: &mut DecompressionBudget) -> Result<Vec<Record>, DecodeError> {
        self.verify_crc()?;
        // LIMIT-RECORDS-1: charged from the declared count before decompressing or decoding.
        let declared = usize::try_from(self.records_count).map_err(|_| DecodeError::Invalid {
            what: "record count",
            value: i64::from(self.records_count),
        })?;
        budget.take_records(declared)?;
        let compression = self.header.attributes.compression()?;
        let section = self.bytes.slice(BATCH_HEADER_LEN..);
        let records = match compression {
            Compression::None => section,
            codec => Bytes::from(compression::decompress(codec, &section, budget)?),
        };
        decode_records(&records, self.records_count)
    }

    /// Decodes the whole batch.
    pub fn decode(&self, budget: &mut DecompressionBudget) -> Result<RecordBatch, DecodeError> {
        Ok(RecordBatch {
            header: self.header,
            records: self.decode_records(budget)?,
        })
    }
}

fn truncated(what: &'static str, needed: usize, available: usize) -> DecodeError {
    DecodeError::Truncated {
        what,
        needed,
        available,
    }
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

/// Parses the header of the batch at the start of `input` and returns it with the rest of the
/// input. Magic 0 and 1 are refused by their magic byte, before their layout is read.
pub fn parse_batch(input: &Bytes) -> Result<(RawBatch, Bytes), DecodeError> {
    if input.len() < LOG_OVERHEAD + 5 {
        return Err(truncated("record batch header", LOG_OVERHEAD + 5, input.len()));
    }
    let batch_length = be_i32(input, 8);
    let magic = input[16] as i8;
    if magic != MAGIC_V2 {
        return Err(DecodeError::UnsupportedMagic(magic));
    }
    let min_length = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
    if batch_length < min_length {
        return Err(DecodeError::Invalid {
            what: "batch length",
            value: i64::from(batch_length),
        });
    }
    let total = LOG_OVERHEAD + batch_length as usize;
    if input.len() < total {
        return Err(truncated("record batch", total, input.len()));
    }
    let b = &input[..total];
    let records_count = be_i32(b, 57);
    if records_count < 0 {
        return Err(DecodeError::Invalid {
            what: "record count",
            value: i64::from(records_count),
        });
    }
    let header = BatchHeader {
        base_offset: be_i64(b, 0),
        partition_leader_epoch: be_i32(b, 12),
        attributes: BatchAttributes(be_i16(b, 21)),
        last_offset_delta: be_i32(b, 23),
        base_timestamp: be_i64(b, 27),
        max_timestamp: be_i64(b, 35),
        producer_id: be_i64(b, 43),
        producer_epoch: be_i16(b, 51),
        base_sequence: be_i32(b, 53),
    };
    let raw = RawBatch {
        header,
        records_count,
        crc: u32::from_be_bytes(b[17..21].try_into().expect("4 bytes")),
        bytes: input.slice(..total),
    };
    Ok((raw, input.slice(total..)))
}

/// The records a blob's batches declare, when every batch is uncompressed: `None` when one is
/// compressed, or a header is cut short or invalid (decoding then says why). Reads the headers
/// alone, nothing is allocated: what the gateway weighs before deciding that a Produce is cheap
/// enough to map where it arrived (LIMIT-BLOCKING-1).
pub fn declared_plain_records(input: &[u8]) -> Option<u64> {
    let mut rest = input;
    let mut records = 0u64;
    while !rest.is_empty() {
        if rest.len() < BATCH_HEADER_LEN {
            return None;
        }
        let batch_length = usize::try_from(be_i32(rest, 8)).ok()?;
        if batch_length < BATCH_HEADER_LEN - LOG_OVERHEAD {
            return None;
        }
        if BatchAttributes(be_i16(rest, 21)).compression().ok()? != Compression::None {
            return None;
        }
        records += u64::try_from(be_i32(rest, 57)).ok()?;
        rest = rest.get(LOG_OVERHEAD + batch_length..)?;
    }
    Some(records)
}

/// Parses every batch header in a records blob (a Produce partition's `records`).
pub fn parse_batches(input: &Bytes) -> Result<Vec<RawBatch>, DecodeError> {
    let mut rest = input.clone();
    let mut batches = Vec::new();
    while !rest.is_empty() {
        let (batch, tail) = parse_batch(&rest)?;
        batches.push(batch);
        rest = tail;
    }
    Ok(batches)
}

/// Decodes every batch in a records blob under one shared budget.
pub fn decode_batches(input: &Bytes, budget: &mut DecompressionBudget) -> Result<Vec<RecordBatch>, DecodeError> {
    parse_batches(input)?.iter().map(|raw| raw.decode(budget)).collect()
}

/// Reads a nullable byte string at `pos` of a record that ends at `end` of `section`: a varint
/// length (-1 = null) and that many bytes, sliced from `section` itself. Slicing the record
/// first, then its fields from that slice, cost two more reference counts a record.
fn read_nullable(
    section: &Bytes,
    end: usize,
    pos: &mut usize,
    what: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    let len = read_varint(&section[..end], pos, what)?;
    if len == -1 {
        return Ok(None);
    }
    if len < -1 {
        return Err(DecodeError::Invalid {
            what,
            value: i64::from(len),
        });
    }
    let len = len as usize;
    let available = end - *pos;
    if len > available {
        return Err(truncated(what, len, available));
    }
    let bytes = section.slice(*pos..*pos + len);
    *pos += len;
    Ok(Some(bytes))
}

/// Decodes `count` records from an uncompressed records section; the section must hold exactly
/// those records.
pub fn decode_records(section: &Bytes, count: i32) -> Result<Vec<Record>, DecodeError> {
    let declared = count;
    let count = usize::try_from(count).map_err(|_| DecodeError::Invalid {
        what: "record count",
        value: i64::from(declared),
    })?;
    let mut records = Vec::with_capacity(count.min(section.len() / MIN_RECORD_LEN));
    let mut pos = 0;
    while records.len() < count {
        if pos == section.len() {
            return Err(DecodeError::RecordCountMismatch {
                declared,
                actual: records.len(),
            });
        }
        let len = read_varint(section, &mut pos, "record length")?;
        if len < 0 {
            return Err(DecodeError::Invalid {
                what: "record length",
                value: i64::from(len),
            });
        }
        let len = len as usize;
        let available = section.len() - pos;
        if len > available {
            return Err(truncated("record", len, available));
        }
        records.push(decode_record_body(section, pos, pos + len)?);
        pos += len;
    }
    if pos != section.len() {
        return Err(DecodeError::TrailingBytes {
            trailing: section.len() - pos,
        });
    }
    Ok(records)
}

/// Decodes the record in `section[start..end]`; its fields are slices of `section`.
fn decode_record_body(section: &Bytes, start: usize, end: usize) -> Result<Record, DecodeError> {
    let body = &section[..end];
    let mut pos = start;
    let Some(&attributes) = body.get(pos) else {
        return Err(truncated("record attributes", 1, 0));
    };
    pos += 1;
    let timestamp_delta = read_varlong(body, &mut pos, "timestamp delta")?;
    let offset_delta = read_varint(body, &mut pos, "offset delta")?;
    let key = read_nullable(section, end, &mut pos, "record key")?;
    let value = read_nullable(section, end, &mut pos, "record value")?;
    let header_count = read_varint(body, &mut pos, "header count")?;
    if header_count < 0 {
        return Err(DecodeError::Invalid {
            what: "header count",
            value: i64::from(header_count),
        });
    }
    let header_count = header_count as usize;
    let mut headers = Vec::with_capacity(header_count.min((end - pos) / MIN_HEADER_LEN));
    for _ in 0..header_count {
        let name = read_nullable(section, end, &mut pos, "header name")?.ok_or(DecodeError::Invalid {
            what: "header name length",
            value: -1,
        })?;
        let value = read_nullable(section, end, &mut pos, "header value")?;
        headers.push(RecordHeader { name, value });
    }
    if pos != end {
        return Err(DecodeError::TrailingBytes { trailing: end - pos });
    }
    Ok(Record {
        attributes: attributes as i8,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
    })
}

/// A record's fields, borrowed: what [`encode_record_view`] writes. The Fetch path encodes
/// records it maps from stored messages without first assembling an owned [`Record`]; its
/// headers are [`HeaderRef`]s into the stored message, a [`Record`]'s are its own.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a, H = RecordHeader> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [H],
}

impl Record {
    pub fn view(&self) -> RecordView<'_> {
        RecordView {
            attributes: self.attributes,
            timestamp_delta: self.timestamp_delta,
            offset_delta: self.offset_delta,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
        }
    }
}

fn nullable_len(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
}

/// The record's encoded size without its length prefix.
pub(crate) fn record_body_len<H: HeaderFields>(record: &RecordView<'_, H>) -> usize {
    1 + varlong_len(record.timestamp_delta)
        + varint_len(record.offset_delta)
        + nullable_len(record.key)
        + nullable_len(record.value)
        + varint_len(record.headers.len() as i32)
        + record
            .headers
            .iter()
            .map(|h| varint_len(h.name_bytes().len() as i32) + h.name_bytes().len() + nullable_len(h.value_bytes()))
            .sum::<usize>()
}

fn write_nullable(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

/// Appends one record (length prefix included) to `out`.
pub fn encode_record(out: &mut BytesMut, record: &Record) {
    encode_record_view(out, &record.view());
}

/// Appends one record given by its borrowed fields (length prefix included) to `out`.
pub fn encode_record_view<H: HeaderFields>(out: &mut BytesMut, record: &RecordView<'_, H>) {
    encode_record_view_of_len(out, record, record_body_len(record));
}

/// [`encode_record_view`] for a caller that has just computed the record's
/// [`record_body_len`] (to check a limit) and need not compute it twice.
pub(crate) fn encode_record_view_of_len<H: HeaderFields>(
    out: &mut BytesMut,
    record: &RecordView<'_, H>,
    body_len: usize,
) {
    debug_assert_eq!(body_len, record_body_len(record));
    out.reserve(body_len + 5);
    write_varint(out, body_len as i32);
    out.put_i8(record.attributes);
    write_varlong(out, record.timestamp_delta);
    write_varint(out, record.offset_delta);
    write_nullable(out, record.key);
    write_nullable(out, record.value);
    write_varint(out, record.headers.len() as i32);
    for header in record.headers {
        write_varint(out, header.name_bytes().len() as i32);
        out.put_slice(header.name_bytes());
        write_nullable(out, header.value_bytes());
    }
}

/// The encoded size of `record`, length prefix included.
pub fn encoded_record_len(record: &Record) -> usize {
    encoded_record_view_len(&record.view())
}

/// The encoded size of a record given by its borrowed fields, length prefix included.
pub fn encoded_record_view_len<H: HeaderFields>(record: &RecordView<'_, H>) -> usize {
    let body = record_body_len(record);
    varint_len(body as i32) + body
}

/// Encodes `batch` as one magic-2 batch, compressing the records with the codec its attributes
/// name, and computes the batch length and CRC32C (BATCH-CRC-1).
pub fn encode_batch(batch: &RecordBatch) -> Result<Bytes, DecodeError> {
    let compression = batch.header.attributes.compression()?;
    let mut records = BytesMut::with_capacity(batch.records.iter().map(encoded_record_len).sum());
    for record in &batch.records {
        encode_record(&mut records, record);
    }
    let section: Bytes = match compression {
        Compression::None => records.freeze(),
        codec => Bytes::from(compression::compress(codec, &records)),
    };
    Ok(write_batch(&batch.header, batch.records.len() as i32, &section))
}

/// Frames an already-encoded records section with a batch header, length and CRC.
pub fn write_batch(header: &BatchHeader, records_count: i32, section: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + section.len());
    out.put_bytes(0, BATCH_HEADER_LEN);
    out.put_slice(section);
    seal_batch(&mut out, header, records_count);
    out.freeze()
}

/// Fills in the header of a batch whose first [`BATCH_HEADER_LEN`] bytes were left for it and
/// whose records section follows, then its length and CRC32C. Lets a batch be encoded in place,
/// records first, without copying the records section into a second buffer.
///
/// # Panics
/// If `batch` is shorter than [`BATCH_HEADER_LEN`].
pub fn seal_batch(batch: &mut [u8], header: &BatchHeader, records_count: i32) {
    let total = batch.len();
    let mut out = &mut batch[..BATCH_HEADER_LEN];
    out.put_i64(header.base_offset);
    out.put_i32((total - LOG_OVERHEAD) as i32);
    out.put_i32(header.partition_leader_epoch);
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // CRC, patched below once the covered bytes exist.
    out.put_i16(header.attributes.0);
    out.put_i32(header.last_offset_delta);
    out.put_i64(header.base_timestamp);
    out.put_i64(header.max_timestamp);
    out.put_i64(header.producer_id);
    out.put_i16(header.producer_epoch);
    out.put_i32(header.base_sequence);
    out.put_i32(records_count);
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests;
