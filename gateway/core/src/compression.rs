//! Kafka record-batch compression codecs (gzip, snappy, lz4, zstd), decoded under the shared
//! per-request [`DecompressionBudget`].
//!
//! This module owns:
//!
//! - the codec id in the low three bits of the record-batch attributes (BATCH-COMPRESSION-1);
//! - decoding the records section of one batch with that codec, where every byte of output is
//!   charged to the one budget the whole Produce request shares (BATCH-BUDGET-1);
//! - refusing output past that budget *before* allocating it (BATCH-BUDGET-2): a few kilobytes on
//!   the wire must never become gigabytes in memory. Snappy blocks declare their length up front
//!   and are refused on the declaration; the streaming codecs (gzip, lz4, zstd) are read in
//!   chunks into an output buffer whose capacity never exceeds what the budget has left, and
//!   zstd's window (allocated in C, out of sight of the Rust allocator) is capped by the budget;
//! - compressing, for tests, benches and the raw wire client. The gateway itself never
//!   compresses a Fetch response.
//!
//! Wire formats, as Kafka clients write them:
//!
//! - gzip: one or more gzip members (RFC 1952);
//! - snappy: either one raw snappy block (librdkafka) or the xerial framing of the Java client:
//!   the 8-byte magic `\x82SNAPPY\0`, two big-endian `u32` (version, compatible version), then
//!   blocks of `[u32 BE compressed length][raw snappy block]`;
//! - lz4: the LZ4 frame format (one or more frames);
//! - zstd: one or more zstd frames.

use std::io::{self, Read, Write};

use crate::budget::DecompressionBudget;
use crate::error::DecodeError;

/// Bytes read from a streaming decoder at a time.
const CHUNK: usize = 64 * 1024;

/// The magic that starts a xerial-framed snappy stream (Java client).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, version and compatible version.
const XERIAL_HEADER_LEN: usize = 16;
/// What `org.xerial.snappy.SnappyOutputStream` writes as version and compatible version.
const XERIAL_VERSION: u32 = 1;
const XERIAL_COMPATIBLE_VERSION: u32 = 1;
/// The uncompressed block size of `SnappyOutputStream` as Kafka's Java client uses it.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// Smallest zstd window (`ZSTD_WINDOWLOG_ABSOLUTEMIN`).
/// A 2 MiB window is always allowed: it is what a streaming level-3 encoder (the Java client's)
/// declares even for a few KB, so a lower cap would refuse ordinary batches once the budget runs
/// low. It is the decoder's fixed working memory, like lz4's block buffers, not output.
const ZSTD_WINDOW_LOG_MIN: u32 = 21;
/// Largest zstd window this module decodes (zstd's own default limit without `--long`).
const ZSTD_WINDOW_LOG_MAX: u32 = 27;
/// `ZSTD_getErrorName(frameParameter_windowTooLarge)`, the error a frame whose window exceeds
/// the decoder's `window_log_max` ends in (pinned by a unit test).
const ZSTD_WINDOW_TOO_LARGE: &str = "Frame requires too much memory for decoding";

/// The legacy LZ4 frame magic; its blocks are 8 MiB and no Kafka client writes it.
const LZ4_LEGACY_MAGIC: [u8; 4] = 0x184C_2102_u32.to_le_bytes();
/// Magic, FLG, BD and header checksum: the shortest LZ4 frame header.
const LZ4_MIN_FRAME_HEADER: usize = 7;

/// The compression codec of a record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec from the low 3 bits of record-batch attributes (0..=4); 5..=7 ->
    /// [`DecodeError::UnknownCodec`]. The other attribute bits are ignored here.
    pub fn from_attributes(attributes: i16) -> Result<Self, DecodeError> {
        // BATCH-COMPRESSION-1: the codec is attributes & 0x07; ids 5..=7 are not defined.
        let id = (attributes & 0x07) as u8;
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(DecodeError::UnknownCodec(other)),
        }
    }

    /// The codec id as it appears in the attributes (0..=4).
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The codec's name as Kafka spells it in `compression.type`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Decompresses `input` (the records section of one batch) under `budget`. On success the
/// produced length is taken from the budget. Never allocates more output than
/// `budget.remaining()`.
///
/// `Compression::None` is not decompression: the bytes are copied and the budget is *not*
/// charged, because uncompressed bytes are already bounded by `max_frame_size` (they arrived on
/// the wire); the budget exists to bound what compressed bytes expand to.
///
/// Errors: [`DecodeError::Budget`] when the output would exceed what the budget has left (the
/// budget is then left unchanged), [`DecodeError::Corrupt`] for a stream the codec rejects,
/// [`DecodeError::Truncated`] for a xerial snappy stream cut short.
pub fn decompress(codec: Compression, input: &[u8], budget: &mut DecompressionBudget) -> Result<Vec<u8>, DecodeError> {
    // BATCH-BUDGET-2: everything this call produces must fit in what is left now; the output
    // buffer's capacity never exceeds `limit`.
    let limit = budget.remaining();
    let mut out = Vec::new();
    match codec {
        // Not decompression: bounded by `max_frame_size` already, not charged.
        Compression::None => return Ok(input.to_vec()),
        // Every codec writes at least a header, even for no records.
        _ if input.is_empty() => return Err(corrupt(codec, "no compressed bytes")),
        Compression::Gzip => read_bounded(
            codec,
            &mut flate2::bufread::MultiGzDecoder::new(input),
            &mut out,
            limit,
            budget,
        )?,
        Compression::Snappy => {
            if input.starts_with(&XERIAL_MAGIC) {
                snappy_xerial(input, &mut out, limit, budget)?;
            } else {
                snappy_block(input, &mut out, limit, budget)?;
            }
        }
        Compression::Lz4 => lz4_frames(input, &mut out, limit, budget)?,
        Compression::Zstd => zstd_frames(input, &mut out, limit, budget)?,
    }
    // BATCH-BUDGET-1: the output is charged to the budget the whole request shares, so the next
    // batch (of any partition) sees only what is left.
    budget.take(out.len() as u64)?;
    Ok(out)
}

/// Compresses for tests, benches and the raw wire client (the gateway itself never compresses
/// Fetch). Snappy here writes a raw snappy block (what librdkafka writes); lz4 writes one frame
/// of independent 64 KiB blocks (what the Java client writes); zstd writes one frame at level 3.
///
/// # Panics
///
/// For snappy input larger than a raw snappy block can hold (about 4 GiB).
pub fn compress(codec: Compression, input: &[u8]) -> Vec<u8> {
    const VEC_WRITE: &str = "writing to a Vec cannot fail";
    match codec {
        Compression::None => input.to_vec(),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(input).expect(VEC_WRITE);
            encoder.finish().expect(VEC_WRITE)
        }
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(input)
            .expect("input larger than a raw snappy block can hold"),
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(input).expect(VEC_WRITE);
            encoder.finish().expect(VEC_WRITE)
        }
        Compression::Zstd => zstd::bulk::compress(input, zstd::DEFAULT_COMPRESSION_LEVEL).expect(VEC_WRITE),
    }
}

/// The xerial-framed snappy stream the Java client writes (for tests): the header, then the
/// input in 32 KiB blocks, each a length-prefixed raw snappy block.
pub fn compress_snappy_xerial(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + snap::raw::max_compress_len(input.len()));
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK_SIZE) {
        let compressed = encoder
            .compress_vec(block)
            .expect("a 32 KiB block is within snappy's limits");
        let len = u32::try_from(compressed.len()).expect("a compressed 32 KiB block fits a u32");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&compressed);
    }
    out
}

fn corrupt(codec: Compression, reason: impl std::fmt::Display) -> DecodeError {
    DecodeError::Corrupt {
        codec: codec.name(),
        reason: reason.to_string(),
    }
}

/// Makes room for `additional` more bytes in `out`, growing by doubling but never past `limit`.
/// The caller has checked `out.len() + additional <= limit`.
fn reserve_within(out: &mut Vec<u8>, additional: usize, limit: usize) {
    let needed = out.len() + additional;
    debug_assert!(needed <= limit);
    if needed > out.capacity() {
        // BATCH-BUDGET-2: new_cap = min(max(2 * cap, needed), limit), reserved exactly, so the
        // buffer is never larger than the budget left at the start of the call.
        let new_cap = out.capacity().saturating_mul(2).max(needed).min(limit);
        out.reserve_exact(new_cap - out.len());
    }
}

/// Reads `reader` to its end into `out`, which may hold at most `limit` bytes.
fn read_bounded<R: Read>(
    codec: Compression,
    reader: &mut R,
    out: &mut Vec<u8>,
    limit: usize,
    budget: &DecompressionBudget,
) -> Result<(), DecodeError> {
    let mut chunk = [0u8; CHUNK];
    loop {
        let room = limit - out.len();
        // BATCH-BUDGET-2: ask for at most one byte more than fits. Getting that byte proves the
        // stream expands past the budget, without buffering any of the excess.
        let want = CHUNK.min(room.saturating_add(1));
        let n = match reader.read(&mut chunk[..want]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(stream_error(codec, err, limit, budget)),
        };
        if n > room {
            // BATCH-BUDGET-2: at least `out.len() + n` (> remaining) bytes were asked for.
            return Err(DecodeError::Budget(budget.exceeded(out.len() as u64 + n as u64)));
        }
        reserve_within(out, n, limit);
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Maps an error of a streaming decoder to a typed error.
fn stream_error(codec: Compression, err: io::Error, limit: usize, budget: &DecompressionBudget) -> DecodeError {
    if codec == Compression::Zstd && err.to_string().contains(ZSTD_WINDOW_TOO_LARGE) {
        let (_, budget_bound) = zstd_window_log_max(limit);
        if budget_bound {
            // BATCH-BUDGET-2: the frame's window alone exceeds what the budget allows zstd to
            // allocate; refused before zstd allocated it. More than `limit` bytes were asked.
            return DecodeError::Budget(budget.exceeded(limit as u64 + 1));
        }
        return corrupt(
            codec,
            format_args!("frame window exceeds 2^{ZSTD_WINDOW_LOG_MAX} bytes, the most decoded"),
        );
    }
    corrupt(codec, err)
}

/// One raw snappy block, appended to `out`.
fn snappy_block(
    block: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
    budget: &DecompressionBudget,
) -> Result<(), DecodeError> {
    if block.is_empty() {
        return Err(corrupt(Compression::Snappy, "empty snappy block"));
    }
    let declared = snap::raw::decompress_len(block).map_err(|err| corrupt(Compression::Snappy, err))?;
    let room = limit - out.len();
    if declared > room {
        // BATCH-BUDGET-2: the block declares its decompressed length up front; refuse it before
        // allocating anything (a 67-byte block may declare 4 GiB).
        return Err(DecodeError::Budget(budget.exceeded(out.len() as u64 + declared as u64)));
    }
    reserve_within(out, declared, limit);
    let start = out.len();
    out.resize(start + declared, 0);
    match snap::raw::Decoder::new().decompress(block, &mut out[start..]) {
        Ok(written) if written == declared => Ok(()),
        Ok(written) => {
            out.truncate(start);
            Err(corrupt(
                Compression::Snappy,
                format_args!("block declares {declared} bytes but holds {written}"),
            ))
        }
        Err(err) => {
            out.truncate(start);
            Err(corrupt(Compression::Snappy, err))
        }
    }
}

/// The xerial framing of the Java client: header, then length-prefixed raw snappy blocks.
fn snappy_xerial(
    input: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
    budget: &DecompressionBudget,
) -> Result<(), DecodeError> {
    if input.len() < XERIAL_HEADER_LEN {
        return Err(DecodeError::Truncated {
            what: "xerial snappy header",
            needed: XERIAL_HEADER_LEN - input.len(),
            available: input.len(),
        });
    }
    // Bytes 8..16 are the version and the compatible version. Like the Java client and
    // librdkafka, any value is accepted: the block layout has never changed.
    let mut pos = XERIAL_HEADER_LEN;
    while pos < input.len() {
        let left = input.len() - pos;
        let Some(len_bytes) = input.get(pos..pos + 4) else {
            return Err(DecodeError::Truncated {
                what: "xerial snappy block length",
                needed: 4 - left,
                available: left,
            });
        };
        let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let len = len as usize;
        pos += 4;
        let left = input.len() - pos;
        // BATCH-COMPRESSION-1: a block's compressed length is bounded by the input left.
        if len > left {
            return Err(DecodeError::Truncated {
                what: "xerial snappy block",
                needed: len - left,
                available: left,
            });
        }
        snappy_block(&input[pos..pos + len], out, limit, budget)?;
        pos += len;
    }
    Ok(())
}

/// One or more LZ4 frames. Each frame gets a fresh decoder: `lz4_flex`'s decoder sizes its
/// buffers per frame and debug-asserts their capacity, so reusing it across frames of different
/// block sizes could panic; a fresh decoder per frame also frees the previous frame's buffers.
///
/// The decoder allocates fixed buffers from the frame's declared block size (64 KiB to 4 MiB:
/// at most about 4 MiB of input plus 8 MiB + 64 KiB of output in linked mode), independent of
/// how far the frame expands; the output it produces is bounded by the budget.
fn lz4_frames(input: &[u8], out: &mut Vec<u8>, limit: usize, budget: &DecompressionBudget) -> Result<(), DecodeError> {
    let mut rest = input;
    while !rest.is_empty() {
        if rest.len() < LZ4_MIN_FRAME_HEADER {
            return Err(corrupt(Compression::Lz4, "truncated frame header"));
        }
        if rest.starts_with(&LZ4_LEGACY_MAGIC) {
            // BATCH-COMPRESSION-1: Kafka's lz4 is the LZ4 frame format; the legacy format (8 MiB
            // blocks) is refused, as the Java broker does.
            return Err(corrupt(Compression::Lz4, "legacy lz4 frame format"));
        }
        let mut decoder = lz4_flex::frame::FrameDecoder::new(rest);
        // The decoder reports end of stream at the end of each frame.
        read_bounded(Compression::Lz4, &mut decoder, out, limit, budget)?;
        let after = decoder.into_inner();
        if after.len() >= rest.len() {
            return Err(corrupt(Compression::Lz4, "frame consumed no input"));
        }
        rest = after;
    }
    Ok(())
}

/// The `window_log_max` for zstd given what the budget has left, and whether the budget (rather
/// than the clamp to [21, 27]) set it: the largest power of two not above twice `remaining`.
fn zstd_window_log_max(remaining: usize) -> (u32, bool) {
    let twice = remaining.saturating_mul(2).max(1);
    let log = usize::BITS - 1 - twice.leading_zeros();
    (
        log.clamp(ZSTD_WINDOW_LOG_MIN, ZSTD_WINDOW_LOG_MAX),
        log <= ZSTD_WINDOW_LOG_MAX,
    )
}

/// One or more zstd frames.
///
/// The window cap applies to the window a frame *declares*, not to its output: a frame written
/// by a streaming encoder without a pledged size (level 3 declares a 2 MiB window, even for a
/// few kilobytes of records) is refused once less than 1 MiB of the budget is left.
fn zstd_frames(input: &[u8], out: &mut Vec<u8>, limit: usize, budget: &DecompressionBudget) -> Result<(), DecodeError> {
    // `with_buffer`: the input slice is already a `BufRead`, no extra copy buffer.
    let mut decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(|err| corrupt(Compression::Zstd, err))?;
    // BATCH-BUDGET-2: zstd allocates its window in C, out of sight of the output bound; cap it
    // at about twice the remaining budget so a frame declaring a huge window (or a huge
    // single-segment content size) is refused before zstd allocates it.
    let (window_log_max, _) = zstd_window_log_max(limit);
    decoder
        .window_log_max(window_log_max)
        .map_err(|err| corrupt(Compression::Zstd, err))?;
    read_bounded(Compression::Zstd, &mut decoder, out, limit, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BudgetExceeded;
    use proptest::prelude::*;

    const STREAMING: [Compression; 3] = [Compression::Gzip, Compression::Lz4, Compression::Zstd];
    const COMPRESSED: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Half repetitive, half pseudo-random, so every codec has both kinds of input.
    fn sample(len: usize) -> Vec<u8> {
        let mut state: u32 = 0x9E37_79B9;
        (0..len)
            .map(|i| {
                if (i / 4096) % 2 == 0 {
                    (i % 251) as u8
                } else {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 24) as u8
                }
            })
            .collect()
    }

    fn budget_error(result: Result<Vec<u8>, DecodeError>) -> BudgetExceeded {
        match result {
            Err(DecodeError::Budget(exceeded)) => exceeded,
            other => panic!("expected a budget error, got {other:?}"),
        }
    }

    /// A zstd frame with no content and the given window log (not single-segment), ending in an
    /// empty raw last block.
    fn zstd_frame_with_window_log(window_log: u32) -> Vec<u8> {
        let mut frame = 0xFD2F_B528_u32.to_le_bytes().to_vec();
        frame.push(0x00); // no content size, not single-segment, no checksum, no dictionary
        frame.push(((window_log - 10) << 3) as u8); // exponent, mantissa 0
        frame.extend_from_slice(&[0x01, 0x00, 0x00]); // last block, raw, size 0
        frame
    }

    #[test]
    fn batch_compression_1_round_trip_every_codec_several_sizes() {
        for codec in Compression::ALL {
            for len in [0, 1, 100, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 300_000] {
                let input = sample(len);
                let compressed = compress(codec, &input);
                let mut budget = DecompressionBudget::new(1 << 20);
                let output = decompress(codec, &compressed, &mut budget)
                    .unwrap_or_else(|err| panic!("{} of {len} bytes: {err}", codec.name()));
                assert_eq!(output, input, "{} of {len} bytes", codec.name());
            }
        }
    }

    #[test]
    fn batch_compression_1_snappy_xerial_round_trip() {
        for len in [0, 1, 100, XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE + 1, 300_000] {
            let input = sample(len);
            let framed = compress_snappy_xerial(&input);
            assert!(framed.starts_with(&XERIAL_MAGIC));
            let mut budget = DecompressionBudget::new(1 << 20);
            let output = decompress(Compression::Snappy, &framed, &mut budget).unwrap();
            assert_eq!(output, input, "xerial of {len} bytes");
            assert_eq!(budget.remaining(), (1 << 20) - len);
        }
    }

    #[test]
    fn batch_compression_1_from_attributes_uses_the_low_three_bits() {
        let expected = [
            Ok(Compression::None),
            Ok(Compression::Gzip),
            Ok(Compression::Snappy),
            Ok(Compression::Lz4),
            Ok(Compression::Zstd),
            Err(DecodeError::UnknownCodec(5)),
            Err(DecodeError::UnknownCodec(6)),
            Err(DecodeError::UnknownCodec(7)),
        ];
        for (id, expected) in expected.into_iter().enumerate() {
            let id = id as i16;
            assert_eq!(Compression::from_attributes(id), expected);
            // Timestamp type, transactional and control bits do not change the codec.
            assert_eq!(Compression::from_attributes(id | 0x0038), expected);
            assert_eq!(Compression::from_attributes(id | i16::MIN), expected);
        }
    }

    #[test]
    fn batch_compression_1_id_and_name_agree_with_from_attributes() {
        let names = ["none", "gzip", "snappy", "lz4", "zstd"];
        for (i, codec) in Compression::ALL.into_iter().enumerate() {
            assert_eq!(codec.id() as usize, i);
            assert_eq!(codec.name(), names[i]);
            assert_eq!(Compression::from_attributes(codec.id() as i16), Ok(codec));
        }
    }

    #[test]
    fn batch_compression_1_empty_input_is_corrupt_for_compressed_codecs() {
        for codec in COMPRESSED {
            let mut budget = DecompressionBudget::new(1024);
            let err = decompress(codec, &[], &mut budget).unwrap_err();
            assert!(matches!(err, DecodeError::Corrupt { .. }), "{err:?}");
        }
        let mut budget = DecompressionBudget::new(1024);
        assert_eq!(decompress(Compression::None, &[], &mut budget), Ok(Vec::new()));
    }

    #[test]
    fn batch_compression_1_corrupt_streams_are_corrupt_errors() {
        let input = sample(10_000);
        for codec in COMPRESSED {
            let mut compressed = compress(codec, &input);
            // Cut the stream short and flip bytes in its middle.
            compressed.truncate(compressed.len() / 2);
            let mid = compressed.len() / 2;
            for byte in &mut compressed[mid..mid + 8] {
                *byte ^= 0xA5;
            }
            let mut budget = DecompressionBudget::new(1 << 20);
            let err = decompress(codec, &compressed, &mut budget).unwrap_err();
            assert!(
                matches!(err, DecodeError::Corrupt { codec: name, .. } if name == codec.name()),
                "{}: {err:?}",
                codec.name()
            );
            assert_eq!(budget.remaining(), 1 << 20, "a failure takes nothing");
        }
    }

    #[test]
    fn batch_compression_1_xerial_block_longer_than_input_is_truncated() {
        let mut framed = compress_snappy_xerial(&sample(1000));
        framed.truncate(framed.len() - 3);
        let mut budget = DecompressionBudget::new(1 << 20);
        let err = decompress(Compression::Snappy, &framed, &mut budget).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Truncated {
                    what: "xerial snappy block",
                    needed: 3,
                    ..
                }
            ),
            "{err:?}"
        );

        // A length prefix claiming 4 GiB is bounded by the input, not allocated.
        let mut framed = compress_snappy_xerial(&[]);
        framed.extend_from_slice(&u32::MAX.to_be_bytes());
        framed.extend_from_slice(&[0; 10]);
        let err = decompress(Compression::Snappy, &framed, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err:?}");

        // A header or a length prefix cut short.
        let err = decompress(Compression::Snappy, &XERIAL_MAGIC, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err:?}");
        let mut framed = compress_snappy_xerial(&[]);
        framed.extend_from_slice(&[0, 0]);
        let err = decompress(Compression::Snappy, &framed, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err:?}");
    }

    #[test]
    fn batch_compression_1_concatenated_gzip_members_lz4_and_zstd_frames_decode() {
        let first = sample(70_000);
        let second = sample(5_000);
        let mut whole = first.clone();
        whole.extend_from_slice(&second);
        for codec in STREAMING {
            let mut stream = compress(codec, &first);
            stream.extend_from_slice(&compress(codec, &second));
            let mut budget = DecompressionBudget::new(1 << 20);
            let output = decompress(codec, &stream, &mut budget).unwrap();
            assert_eq!(output, whole, "{}", codec.name());
        }
    }

    #[test]
    fn batch_compression_1_lz4_frames_of_different_block_sizes_decode_without_panic() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let frame = |size, mode, data: &[u8]| {
            let info = FrameInfo::new().block_size(size).block_mode(mode);
            let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(data).unwrap();
            encoder.finish().unwrap()
        };
        let data = sample(200_000);
        let mut stream = frame(BlockSize::Max4MB, BlockMode::Linked, &data);
        stream.extend(frame(BlockSize::Max64KB, BlockMode::Linked, &data));
        stream.extend(frame(BlockSize::Max256KB, BlockMode::Independent, &data));
        stream.extend(frame(BlockSize::Max64KB, BlockMode::Independent, &data));
        let mut budget = DecompressionBudget::new(1 << 20);
        let output = decompress(Compression::Lz4, &stream, &mut budget).unwrap();
        assert_eq!(output.len(), 4 * data.len());
        assert!(output.chunks(data.len()).all(|part| part == data));
    }

    #[test]
    fn batch_compression_1_lz4_legacy_frame_and_trailing_bytes_are_corrupt() {
        let mut legacy = LZ4_LEGACY_MAGIC.to_vec();
        legacy.extend_from_slice(&[0; 16]);
        let mut budget = DecompressionBudget::new(1 << 20);
        let err = decompress(Compression::Lz4, &legacy, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Corrupt { .. }), "{err:?}");

        let mut stream = compress(Compression::Lz4, b"records");
        stream.extend_from_slice(&[0x04, 0x22, 0x4D]);
        let err = decompress(Compression::Lz4, &stream, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Corrupt { .. }), "{err:?}");
    }

    #[test]
    fn batch_budget_1_charges_exactly_the_output_length() {
        for codec in COMPRESSED {
            for len in [0, 1, 1000, 100_000] {
                let input = sample(len);
                let compressed = compress(codec, &input);
                let mut budget = DecompressionBudget::new(1 << 20);
                let output = decompress(codec, &compressed, &mut budget).unwrap();
                assert_eq!(output.len(), len);
                assert_eq!(budget.remaining(), (1 << 20) - len, "{}", codec.name());
                assert_eq!(budget.limit(), 1 << 20);
            }
        }
    }

    #[test]
    fn batch_budget_1_second_call_with_the_same_budget_sees_less() {
        let input = sample(600);
        for codec in COMPRESSED {
            let compressed = compress(codec, &input);
            let mut budget = DecompressionBudget::new(1000);
            decompress(codec, &compressed, &mut budget).unwrap();
            assert_eq!(budget.remaining(), 400);
            let exceeded = budget_error(decompress(codec, &compressed, &mut budget));
            assert_eq!(exceeded.remaining, 400, "{}", codec.name());
            assert_eq!(exceeded.limit, 1000);
            assert!(exceeded.requested > 400, "{exceeded:?}");
            assert_eq!(budget.remaining(), 400, "a refusal takes nothing");
        }
    }

    #[test]
    fn batch_budget_1_none_is_copied_without_charging_the_budget() {
        let input = sample(5000);
        let mut budget = DecompressionBudget::new(10);
        assert_eq!(decompress(Compression::None, &input, &mut budget), Ok(input));
        assert_eq!(budget.remaining(), 10);
    }

    #[test]
    fn batch_budget_2_output_of_exactly_the_budget_is_accepted_one_more_byte_is_refused() {
        for len in [1, 1000, CHUNK, 3 * CHUNK + 7] {
            let input = sample(len);
            for codec in COMPRESSED {
                let compressed = compress(codec, &input);
                let mut budget = DecompressionBudget::new(len);
                let output = decompress(codec, &compressed, &mut budget).unwrap();
                assert_eq!(output.len(), len);
                assert!(output.capacity() <= len, "{}", codec.name());
                assert_eq!(budget.remaining(), 0);

                let mut budget = DecompressionBudget::new(len - 1);
                let exceeded = budget_error(decompress(codec, &compressed, &mut budget));
                assert!(exceeded.requested >= len as u64, "{exceeded:?}");
                assert_eq!(exceeded.remaining, len - 1);
                assert_eq!(budget.remaining(), len - 1);
            }
        }
    }

    #[test]
    fn batch_budget_2_snappy_declared_length_refused_before_allocating() {
        // Varint 0xFFFF_FFFF (4 GiB - 1), then one literal and copies: a tiny block whose
        // header promises 4 GiB.
        let mut block = vec![0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, b'a'];
        for _ in 0..20 {
            block.extend_from_slice(&[0xFE, 0x01, 0x00]); // copy 64 bytes at offset 1
        }
        assert_eq!(block.len(), 67);
        let mut budget = DecompressionBudget::new(1 << 20);
        let exceeded = budget_error(decompress(Compression::Snappy, &block, &mut budget));
        assert_eq!(exceeded.requested, u64::from(u32::MAX));
        assert_eq!(exceeded.remaining, 1 << 20);
        assert_eq!(budget.remaining(), 1 << 20);

        // The same block inside xerial framing.
        let mut framed = compress_snappy_xerial(&[]);
        framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
        framed.extend_from_slice(&block);
        let exceeded = budget_error(decompress(Compression::Snappy, &framed, &mut budget));
        assert_eq!(exceeded.requested, u64::from(u32::MAX));
    }

    #[test]
    fn batch_budget_2_streaming_codecs_refuse_output_past_the_budget() {
        let input = vec![0u8; 4 << 20];
        for codec in STREAMING {
            let compressed = compress(codec, &input);
            let mut budget = DecompressionBudget::new(100_000);
            let exceeded = budget_error(decompress(codec, &compressed, &mut budget));
            assert!(exceeded.requested > 100_000, "{exceeded:?}");
            assert_eq!(exceeded.remaining, 100_000);
            assert_eq!(budget.remaining(), 100_000);
        }
    }

    #[test]
    fn batch_budget_2_zstd_window_log_max_tracks_twice_the_remaining_budget() {
        assert_eq!(zstd_window_log_max(0), (21, true));
        assert_eq!(zstd_window_log_max(511), (21, true));
        assert_eq!(zstd_window_log_max(1 << 20), (21, true));
        assert_eq!(zstd_window_log_max(1 << 22), (23, true));
        assert_eq!(zstd_window_log_max(1 << 26), (27, true));
        assert_eq!(zstd_window_log_max(1 << 27), (27, false));
        assert_eq!(zstd_window_log_max(usize::MAX), (27, false));
    }

    #[test]
    fn batch_budget_2_zstd_frame_window_larger_than_twice_the_budget_is_refused() {
        let frame = zstd_frame_with_window_log(23);
        // 16 MiB left: window log up to 25, the 8 MiB window is fine.
        let mut budget = DecompressionBudget::new(16 << 20);
        assert_eq!(decompress(Compression::Zstd, &frame, &mut budget), Ok(Vec::new()));
        // 1 MiB left: window log up to 21, the 8 MiB window is refused as a budget error (this
        // also pins zstd's error text the mapping relies on).
        let mut budget = DecompressionBudget::new(1 << 20);
        let exceeded = budget_error(decompress(Compression::Zstd, &frame, &mut budget));
        assert_eq!(exceeded.remaining, 1 << 20);
        assert!(exceeded.requested > 1 << 20);
        // A window past the absolute cap is corrupt whatever the budget.
        let frame = zstd_frame_with_window_log(28);
        let mut budget = DecompressionBudget::new(1 << 30);
        let err = decompress(Compression::Zstd, &frame, &mut budget).unwrap_err();
        assert!(matches!(err, DecodeError::Corrupt { .. }), "{err:?}");
    }

    proptest! {
        #[test]
        fn round_trip_every_codec(input in proptest::collection::vec(any::<u8>(), 0..=64 * 1024)) {
            // BATCH-COMPRESSION-1
            for codec in Compression::ALL {
                let mut budget = DecompressionBudget::new(64 * 1024);
                let output = decompress(codec, &compress(codec, &input), &mut budget);
                prop_assert_eq!(output.as_ref(), Ok(&input), "{}", codec.name());
            }
            let mut budget = DecompressionBudget::new(64 * 1024);
            let output = decompress(Compression::Snappy, &compress_snappy_xerial(&input), &mut budget);
            prop_assert_eq!(output.as_ref(), Ok(&input), "xerial");
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            input in proptest::collection::vec(any::<u8>(), 0..4096),
            prefix in 0usize..6,
        ) {
            // BATCH-BUDGET-2: arbitrary input ends in Ok or an error within a small budget.
            // A valid magic in front gets the bytes past each codec's first check.
            let prefixes: [&[u8]; 6] = [
                &[],
                &[0x1F, 0x8B, 0x08, 0x00],
                &XERIAL_MAGIC,
                &[0x04, 0x22, 0x4D, 0x18],
                &[0x28, 0xB5, 0x2F, 0xFD],
                &[0xFF, 0xFF, 0xFF, 0xFF, 0x0F],
            ];
            let mut bytes = prefixes[prefix].to_vec();
            bytes.extend_from_slice(&input);
            for codec in Compression::ALL {
                let mut budget = DecompressionBudget::new(4096);
                if let Ok(output) = decompress(codec, &bytes, &mut budget) {
                    if codec != Compression::None {
                        prop_assert!(output.len() <= 4096);
                        prop_assert!(output.capacity() <= 4096);
                        prop_assert_eq!(budget.remaining(), 4096 - output.len());
                    }
                }
            }
        }

        #[test]
        fn damaged_streams_never_panic(
            input in proptest::collection::vec(any::<u8>(), 0..8192),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            // BATCH-BUDGET-2: a valid stream with flipped bytes or cut short never panics and
            // never produces more than the budget.
            let mut streams: Vec<Vec<u8>> =
                COMPRESSED.iter().map(|&codec| compress(codec, &input)).collect();
            streams.push(compress_snappy_xerial(&input));
            for (i, mut stream) in streams.into_iter().enumerate() {
                let codec = COMPRESSED.get(i).copied().unwrap_or(Compression::Snappy);
                for (at, mask) in &flips {
                    let at = at.index(stream.len());
                    stream[at] ^= mask;
                }
                for bytes in [&stream[..], &stream[..cut.index(stream.len() + 1)]] {
                    let mut budget = DecompressionBudget::new(4096);
                    if let Ok(output) = decompress(codec, bytes, &mut budget) {
                        prop_assert!(output.capacity() <= 4096);
                    }
                }
            }
        }
    }
}
