//! A response frame held as segments (FETCH-WRITE-1): built without copying the large byte
//! strings a response carries (a Fetch's record batches, already built in their own buffers),
//! and written with the size prefix in front, by vectored writes where the stream has them
//! (tokio hands at most 64 slices to one; TLS copies the plaintext into its own records anyway,
//! so there it saves one copy, not every copy).
//!
//! Encoding a Fetch response into one buffer copied every fetched byte once more, into a buffer
//! as large as the response (up to `fetch_max_bytes`), freshly allocated and page-faulted per
//! Fetch. Here the encoder's output goes into a small head buffer, and a byte string that is one
//! of the response's own (same address and length) is taken by reference instead: the frame is
//! the head's pieces and those strings, in order. The bytes on the wire are the same.

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use std::io::IoSlice;
use std::ops::Range;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Byte strings shorter than this are copied into the head: an extra segment costs more than
/// copying a few KiB (another iovec, or another write on a stream without vectored writes).
pub const BY_REFERENCE_MIN_BYTES: usize = 16 << 10;

/// A response frame's header and body (without the size prefix), as segments in order.
#[derive(Debug, Clone, Default)]
pub struct ResponseFrame {
    segments: Vec<Bytes>,
    len: usize,
}

impl ResponseFrame {
    /// The frame's length in bytes, without the size prefix.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn segments(&self) -> &[Bytes] {
        &self.segments
    }

    /// The frame in one piece, for readers that decode it (tests, tools): no copy when it is
    /// one segment.
    pub fn to_bytes(&self) -> Bytes {
        match self.segments.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut whole = BytesMut::with_capacity(self.len);
                many.iter().for_each(|s| whole.extend_from_slice(s));
                whole.freeze()
            }
        }
    }
}

impl From<Bytes> for ResponseFrame {
    fn from(body: Bytes) -> Self {
        let len = body.len();
        let segments = if body.is_empty() { Vec::new() } else { vec![body] };
        ResponseFrame { segments, len }
    }
}

/// Encodes the response header and `body` (FETCH-WRITE-1): each of `by_reference` at least
/// [`BY_REFERENCE_MIN_BYTES`] long that the encoder writes is taken as a segment of its own,
/// not copied; everything else goes into head buffers sized for what is copied.
pub fn encode_response_segments<T: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &T,
    version: i16,
    by_reference: &[Bytes],
) -> anyhow::Result<ResponseFrame> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let total = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut out = SegmentedBuf::new(total, by_reference);
    header.encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    Ok(out.finish())
}

/// Writes one frame: the size prefix, then the segments, as few writes as the stream allows.
pub async fn write_response<W: AsyncWrite + Unpin>(writer: &mut W, frame: &ResponseFrame) -> std::io::Result<()> {
    writer.write_all_buf(&mut FrameBuf::new(frame)).await?;
    writer.flush().await
}

/// The encoder's buffer: a head that takes copied bytes, and the segments before it.
struct SegmentedBuf<'a> {
    done: Vec<Bytes>,
    done_len: usize,
    head: BytesMut,
    /// The byte strings that may be taken by reference, sorted by address.
    by_reference: Vec<&'a Bytes>,
}

impl<'a> SegmentedBuf<'a> {
    fn new(total: usize, by_reference: &'a [Bytes]) -> Self {
        let mut by_reference: Vec<&Bytes> = by_reference
            .iter()
            .filter(|b| b.len() >= BY_REFERENCE_MIN_BYTES)
            .collect();
        by_reference.sort_by_key(|b| b.as_ptr() as usize);
        // One entry per address: of two strings that start at the same byte, the one kept is
        // referenced and the other, longer or shorter, does not match and is copied.
        by_reference.dedup_by_key(|b| b.as_ptr() as usize);
        let referenced: usize = by_reference.iter().map(|b| b.len()).sum();
        SegmentedBuf {
            done: Vec::with_capacity(2 * by_reference.len() + 1),
            done_len: 0,
            // What is copied: the response less the strings taken by reference, each counted
            // once (a string the response holds twice is referenced twice; the head is then
            // larger than it needs, never too small).
            head: BytesMut::with_capacity(total.saturating_sub(referenced)),
            by_reference,
        }
    }

    /// One of the response's own strings, if `src` is it (same address and length).
    fn own(&self, src: &[u8]) -> Option<Bytes> {
        if src.len() < BY_REFERENCE_MIN_BYTES {
            return None;
        }
        let at = self
            .by_reference
            .binary_search_by_key(&(src.as_ptr() as usize), |b| b.as_ptr() as usize)
            .ok()?;
        let candidate = self.by_reference[at];
        (candidate.len() == src.len()).then(|| candidate.clone())
    }

    fn close_head(&mut self) {
        if !self.head.is_empty() {
            let piece = self.head.split().freeze();
            self.done_len += piece.len();
            self.done.push(piece);
        }
    }

    /// Makes the whole frame the head again: for a seek or range back into a finished segment,
    /// which the message encoders never make (only record batches patch what they wrote).
    fn flatten(&mut self) {
        if self.done.is_empty() {
            return;
        }
        let mut whole = BytesMut::with_capacity(self.done_len + self.head.len());
        self.done.drain(..).for_each(|s| whole.extend_from_slice(&s));
        whole.extend_from_slice(&self.head);
        self.head = whole;
        self.done_len = 0;
    }

    fn finish(mut self) -> ResponseFrame {
        self.close_head();
        ResponseFrame {
            len: self.done_len,
            segments: self.done,
        }
    }
}

// SAFETY: `remaining_mut`, `chunk_mut` and `advance_mut` hand on to the head, a `BytesMut`,
// whose own implementation upholds the contract, so a chunk and its advance always name the same
// memory; `put_slice`, safe code, either appends to the head or adds a segment after it.
unsafe impl BufMut for SegmentedBuf<'_> {
    fn remaining_mut(&self) -> usize {
        self.head.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of the head's chunk, as BufMut requires.
        unsafe { self.head.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.head.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.own(src) {
            Some(shared) => {
                self.close_head();
                self.done_len += shared.len();
                self.done.push(shared);
            }
            None => self.head.extend_from_slice(src),
        }
    }
}

impl ByteBufMut for SegmentedBuf<'_> {
    fn offset(&self) -> usize {
        self.done_len + self.head.len()
    }

    fn seek(&mut self, offset: usize) {
        if offset < self.done_len {
            self.flatten();
        }
        self.head.resize(offset - self.done_len, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        if r.is_empty() {
            return &mut [];
        }
        if r.start < self.done_len {
            self.flatten();
        }
        let base = self.done_len;
        &mut self.head[r.start - base..r.end - base]
    }
}

/// The size prefix and the segments as one `Buf`, so that `write_all_buf` can hand them to a
/// vectored write together.
struct FrameBuf<'a> {
    prefix: [u8; 4],
    prefix_written: usize,
    segments: &'a [Bytes],
    index: usize,
    offset: usize,
    remaining: usize,
}

impl<'a> FrameBuf<'a> {
    fn new(frame: &'a ResponseFrame) -> Self {
        FrameBuf {
            prefix: (frame.len as i32).to_be_bytes(),
            prefix_written: 0,
            segments: &frame.segments,
            index: 0,
            offset: 0,
            remaining: frame.len + 4,
        }
    }
}

impl Buf for FrameBuf<'_> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        if self.prefix_written < 4 {
            return &self.prefix[self.prefix_written..];
        }
        // The first unwritten bytes: never an empty chunk while bytes remain, which a writer
        // without vectored writes would take for a closed stream.
        self.segments[self.index.min(self.segments.len())..]
            .iter()
            .enumerate()
            .map(|(i, segment)| if i == 0 { &segment[self.offset..] } else { &segment[..] })
            .find(|rest| !rest.is_empty())
            .unwrap_or(&[])
    }

    fn chunks_vectored<'b>(&'b self, dst: &mut [IoSlice<'b>]) -> usize {
        let mut filled = 0;
        if self.prefix_written < 4 && filled < dst.len() {
            dst[filled] = IoSlice::new(&self.prefix[self.prefix_written..]);
            filled += 1;
        }
        for (i, segment) in self.segments.iter().enumerate().skip(self.index) {
            if filled == dst.len() {
                break;
            }
            let from = if i == self.index { self.offset } else { 0 };
            if segment.len() > from {
                dst[filled] = IoSlice::new(&segment[from..]);
                filled += 1;
            }
        }
        filled
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the frame");
        self.remaining -= cnt;
        let from_prefix = cnt.min(4 - self.prefix_written);
        self.prefix_written += from_prefix;
        cnt -= from_prefix;
        while cnt > 0 {
            let left = self.segments[self.index].len() - self.offset;
            if cnt < left {
                self.offset += cnt;
                return;
            }
            cnt -= left;
            self.index += 1;
            self.offset = 0;
        }
        // Past finished segments, so that `chunk` names the next non-empty one.
        while self.index < self.segments.len() && self.offset == self.segments[self.index].len() {
            self.index += 1;
            self.offset = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::request::encode_response;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{ApiKey, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn batch(len: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    /// A Fetch response over partitions whose records are `batches` (None: no records).
    fn fetch_response(batches: &[Option<Bytes>]) -> FetchResponse {
        let partitions = batches
            .iter()
            .enumerate()
            .map(|(i, records)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(1000 + i as i64)
                    .with_records(records.clone())
            })
            .collect();
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(partitions)])
    }

    fn mixed_batches() -> Vec<Option<Bytes>> {
        vec![
            Some(batch(BY_REFERENCE_MIN_BYTES + 3, 1)),
            None,
            Some(batch(100, 2)),
            Some(batch(1 << 20, 3)),
            Some(Bytes::new()),
            Some(batch(BY_REFERENCE_MIN_BYTES - 1, 4)),
        ]
    }

    #[test]
    fn fetch_write_1_a_fetch_response_in_segments_is_the_same_bytes_at_every_version() {
        let batches = mixed_batches();
        let response = fetch_response(&batches);
        let own: Vec<Bytes> = batches.iter().flatten().cloned().collect();
        // The versions the gateway serves (protocol::api).
        let (low, high) = (4, 12);
        for version in low..=high {
            let header_version = ApiKey::Fetch.response_header_version(version);
            let whole = encode_response(9, header_version, &response, version).expect("encodes");
            let frame = encode_response_segments(9, header_version, &response, version, &own).expect("encodes");
            assert_eq!(frame.len(), whole.len(), "v{version}");
            assert_eq!(frame.to_bytes(), whole, "v{version}");
        }
    }

    #[test]
    fn fetch_write_1_large_batches_are_referenced_and_small_ones_copied() {
        let batches = mixed_batches();
        let own: Vec<Bytes> = batches.iter().flatten().cloned().collect();
        let frame = encode_response_segments(9, 1, &fetch_response(&batches), 12, &own).expect("encodes");
        let referenced: Vec<usize> = frame
            .segments()
            .iter()
            .filter(|s| own.iter().any(|b| b.as_ptr() == s.as_ptr() && b.len() == s.len()))
            .map(Bytes::len)
            .collect();
        assert_eq!(referenced, vec![BY_REFERENCE_MIN_BYTES + 3, 1 << 20]);
        // Head pieces around them: before the first, between the two, after the second.
        assert_eq!(frame.segments().len(), 5);
    }

    #[test]
    fn fetch_write_1_equal_bytes_elsewhere_are_copied_not_mistaken_for_a_batch() {
        let batches = vec![Some(batch(1 << 16, 5))];
        let lookalike = vec![batch(1 << 16, 5)];
        let frame = encode_response_segments(1, 1, &fetch_response(&batches), 12, &lookalike).expect("encodes");
        assert_eq!(frame.segments().len(), 1, "copied into the head");
        assert_eq!(
            frame.to_bytes(),
            encode_response(1, 1, &fetch_response(&batches), 12).unwrap()
        );
    }

    #[test]
    fn fetch_write_1_a_seek_back_into_a_finished_segment_patches_the_right_bytes() {
        let big = batch(BY_REFERENCE_MIN_BYTES, 7);
        let own = [big.clone()];
        let mut out = SegmentedBuf::new(64, &own);
        out.put_slice(b"ab");
        let gap = out.put_gap(2);
        out.put_slice(&big);
        out.put_slice(b"yz");
        assert_eq!(out.done.len(), 2, "head piece, then the batch");
        out.gap_buf(gap).copy_from_slice(b"CD");
        let mut expected = b"abCD".to_vec();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"yz");
        assert_eq!(out.finish().to_bytes(), Bytes::from(expected));
    }

    #[tokio::test]
    async fn fetch_write_1_the_written_frame_is_the_prefix_then_every_segment() {
        let batches = mixed_batches();
        let own: Vec<Bytes> = batches.iter().flatten().cloned().collect();
        let frame = encode_response_segments(3, 1, &fetch_response(&batches), 12, &own).expect("encodes");
        // A duplex pipe smaller than the frame: the write goes out in many partial writes.
        let (mut writer, mut reader) = tokio::io::duplex(4096);
        let reading = tokio::spawn(async move {
            let mut all = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut all)
                .await
                .map(|_| all)
        });
        write_response(&mut writer, &frame).await.expect("written");
        drop(writer);
        let written = reading.await.expect("reader").expect("read");
        let mut expected = (frame.len() as i32).to_be_bytes().to_vec();
        expected.extend_from_slice(&frame.to_bytes());
        assert_eq!(written, expected);
    }

    #[test]
    fn fetch_write_1_a_batch_the_response_holds_twice_is_referenced_twice() {
        let big = batch(BY_REFERENCE_MIN_BYTES, 8);
        let batches = vec![Some(big.clone()), Some(big.clone())];
        let response = fetch_response(&batches);
        let frame = encode_response_segments(2, 1, &response, 12, std::slice::from_ref(&big)).expect("encodes");
        let referenced = frame.segments().iter().filter(|s| s.as_ptr() == big.as_ptr()).count();
        assert_eq!(referenced, 2);
        assert_eq!(frame.to_bytes(), encode_response(2, 1, &response, 12).unwrap());
    }

    /// A stream without vectored writes that takes at most 1,000 bytes a call: `write_all_buf`
    /// then walks the frame through `chunk` and `advance`, as over TLS or turmoil.
    struct Trickle(Vec<u8>);

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(1000);
            self.0.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn fetch_write_1_a_stream_without_vectored_writes_gets_the_same_frame() {
        let batches = mixed_batches();
        let own: Vec<Bytes> = batches.iter().flatten().cloned().collect();
        let frame = encode_response_segments(4, 1, &fetch_response(&batches), 12, &own).expect("encodes");
        let mut trickle = Trickle(Vec::new());
        assert!(!trickle.is_write_vectored());
        write_response(&mut trickle, &frame).await.expect("written");
        let mut expected = (frame.len() as i32).to_be_bytes().to_vec();
        expected.extend_from_slice(&frame.to_bytes());
        assert_eq!(trickle.0, expected);
    }

    #[test]
    fn fetch_write_1_chunks_vectored_resumes_inside_a_segment() {
        let segments = vec![
            Bytes::from_static(b"hello "),
            Bytes::new(),
            Bytes::from_static(b"world"),
        ];
        let frame = ResponseFrame { len: 11, segments };
        let mut buf = FrameBuf::new(&frame);
        assert_eq!(buf.remaining(), 15);
        buf.advance(6);
        let mut slices = [IoSlice::new(&[]); 8];
        let n = buf.chunks_vectored(&mut slices);
        let gathered: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(gathered, b"llo world");
        assert_eq!(buf.remaining(), 9);
        assert_eq!(buf.chunk(), b"llo ");
        buf.advance(4);
        assert_eq!(buf.chunk(), b"world", "the empty segment between is skipped");
        assert_eq!(buf.copy_to_bytes(5), Bytes::from_static(b"world"));
        assert_eq!(buf.remaining(), 0);
    }
}
