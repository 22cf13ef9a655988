//! The record batch a Fetch answers with (FETCH-BATCH-1): uncompressed, magic 2, CreateTime,
//! producer id, epoch and base sequence -1, offset deltas from the Iggy offsets, and a freshly
//! computed CRC32C. Built one record at a time so the caller can stop at a byte limit.

use crate::batch::{
    encode_record_view_of_len, record_body_len, seal_batch, BatchAttributes, BatchHeader, HeaderFields, RecordView,
    BATCH_HEADER_LEN,
};
use crate::compression::Compression;
use crate::mapping::{KafkaRecord, RecordRef};
use crate::varint::varint_len;
use bytes::{BufMut, Bytes, BytesMut};

/// No producer, as Kafka writes for a non-idempotent batch.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
/// The gateway has no leader epochs; -1 tells clients not to validate against one.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// Accumulates records at increasing offsets into one batch, encoded in place: the header's
/// bytes are left at the front of the buffer and filled in by [`FetchBatchBuilder::finish`], so
/// the records are written once and never copied into a second buffer.
#[derive(Debug)]
pub struct FetchBatchBuilder {
    base: Option<(i64, i64)>,
    max_timestamp: i64,
    last_offset_delta: i32,
    count: i32,
    /// [`BATCH_HEADER_LEN`] bytes for the header, then the records.
    batch: BytesMut,
}

impl Default for FetchBatchBuilder {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl FetchBatchBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder whose buffer holds `records_bytes` of records before it grows. The caller bounds
    /// it (by the byte limit it will push within): this allocates what it is given.
    pub fn with_capacity(records_bytes: usize) -> Self {
        let mut batch = BytesMut::with_capacity(BATCH_HEADER_LEN + records_bytes);
        batch.put_bytes(0, BATCH_HEADER_LEN);
        Self {
            base: None,
            max_timestamp: 0,
            last_offset_delta: 0,
            count: 0,
            batch,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn records_count(&self) -> i32 {
        self.count
    }

    /// Bytes the batch takes if finished now (0 when empty: no batch is written).
    pub fn encoded_len(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.batch.len()
        }
    }

    /// Adds `record` at `offset` if the batch then stays within `limit_bytes`, or if it is the
    /// first record: the first record is always returned whole (KIP-74, FETCH-LIMIT-1).
    /// Returns whether it was added. Offsets must increase by less than 2^31 within a batch.
    pub fn push_within(&mut self, offset: u64, record: &KafkaRecord, limit_bytes: usize) -> bool {
        let (key, value) = (record.key.as_deref(), record.value.as_deref());
        self.push_fields_within(offset, record.timestamp_ms, key, value, &record.headers, limit_bytes)
    }

    /// [`push_within`](Self::push_within) for a record read borrowed from its stored message
    /// ([`crate::mapping::read_record`]): the Fetch path's, with nothing owned per record.
    pub fn push_read_within(&mut self, offset: u64, record: &RecordRef<'_, '_>, limit_bytes: usize) -> bool {
        let (key, value) = (record.key, record.value);
        self.push_fields_within(offset, record.timestamp_ms, key, value, record.headers, limit_bytes)
    }

    /// FETCH-LIMIT-1: the one place a record is measured against the limit and added.
    fn push_fields_within<H: HeaderFields>(
        &mut self,
        offset: u64,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[H],
        limit_bytes: usize,
    ) -> bool {
        let offset = offset as i64;
        let (base_offset, base_timestamp) = self.base.unwrap_or((offset, timestamp_ms));
        let view = RecordView {
            attributes: 0,
            timestamp_delta: timestamp_ms.wrapping_sub(base_timestamp),
            offset_delta: (offset - base_offset) as i32,
            key,
            value,
            headers,
        };
        let body_len = record_body_len(&view);
        let new_len = self.batch.len() + varint_len(body_len as i32) + body_len;
        if !self.is_empty() && new_len > limit_bytes {
            return false;
        }
        if self.base.is_none() {
            self.base = Some((offset, timestamp_ms));
            self.max_timestamp = timestamp_ms;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        self.last_offset_delta = view.offset_delta;
        self.count += 1;
        encode_record_view_of_len(&mut self.batch, &view, body_len);
        true
    }

    /// The finished batch, or `None` when no record was added.
    pub fn finish(mut self) -> Option<Bytes> {
        let (base_offset, base_timestamp) = self.base?;
        let header = BatchHeader {
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            attributes: BatchAttributes::plain(Compression::None),
            last_offset_delta: self.last_offset_delta,
            base_timestamp,
            max_timestamp: self.max_timestamp,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
        };
        seal_batch(&mut self.batch, &header, self.count);
        Some(self.batch.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{decode_batches, RecordHeader};
    use crate::budget::DecompressionBudget;

    fn rec(ts: i64, value: &'static [u8]) -> KafkaRecord {
        KafkaRecord {
            timestamp_ms: ts,
            key: None,
            value: Some(Bytes::from_static(value)),
            headers: vec![RecordHeader {
                name: Bytes::from_static(b"h"),
                value: Some(Bytes::from_static(b"v")),
            }],
        }
    }

    #[test]
    fn fetch_batch_1_fields_and_deltas() {
        let mut b = FetchBatchBuilder::new();
        assert!(b.push_within(40, &rec(2_000, b"a"), usize::MAX));
        assert!(b.push_within(41, &rec(1_500, b"b"), usize::MAX));
        assert!(b.push_within(43, &rec(2_500, b"c"), usize::MAX));
        let bytes = b.finish().unwrap();
        let batch = decode_batches(&bytes, &mut DecompressionBudget::new(0))
            .unwrap()
            .remove(0);
        let h = batch.header;
        assert_eq!((h.base_offset, h.last_offset_delta), (40, 3));
        assert_eq!((h.base_timestamp, h.max_timestamp), (2_000, 2_500));
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (-1, -1, -1));
        assert_eq!(h.attributes, BatchAttributes(0));
        let deltas: Vec<_> = batch
            .records
            .iter()
            .map(|r| (r.offset_delta, r.timestamp_delta))
            .collect();
        assert_eq!(deltas, vec![(0, 0), (1, -500), (3, 500)]);
    }

    #[test]
    fn fetch_limit_1_first_record_is_whole_even_above_the_limit() {
        let mut b = FetchBatchBuilder::new();
        assert!(b.push_within(0, &rec(1, b"0123456789"), 10));
        assert!(!b.push_within(1, &rec(1, b"x"), 10));
        assert_eq!(b.records_count(), 1);
        let len = b.encoded_len();
        assert_eq!(b.finish().unwrap().len(), len);
    }

    #[test]
    fn empty_builder_writes_no_batch() {
        assert!(FetchBatchBuilder::new().finish().is_none());
    }

    /// The batch encoded in place, whatever capacity it started with, is byte for byte what the
    /// batch codec writes for the same header and records.
    #[test]
    fn fetch_batch_1_the_batch_built_in_place_is_the_codecs_encoding() {
        let records = [rec(2_000, b"a"), rec(1_500, b"bb"), rec(2_500, b"ccc")];
        for capacity in [0, 7, 1 << 10] {
            let mut b = FetchBatchBuilder::with_capacity(capacity);
            for (i, r) in records.iter().enumerate() {
                assert!(b.push_within(10 + i as u64, r, usize::MAX));
            }
            let built = b.finish().unwrap();
            let decoded = decode_batches(&built, &mut DecompressionBudget::new(0))
                .unwrap()
                .remove(0);
            assert_eq!(
                crate::batch::encode_batch(&decoded).unwrap(),
                built,
                "capacity {capacity}"
            );
        }
    }
}
