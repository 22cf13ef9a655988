//! The vendored kafka-protocol (gateway/vendor/kafka-protocol) is the crates.io release 0.18.0 plus
//! exactly the recorded patch (gateway/vendor/kafka-protocol.patch), checked against the sha256
//! manifest of the published crate (gateway/vendor/kafka-protocol-0.18.0.sha256) with no network
//! and no registry; and the patch does what it is for: a declared count or length that the bytes
//! left cannot hold is a decode error, not an allocation that aborts the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use sha2::{Digest, Sha256};

const MARKER: &str = "kafka-iggy-harness patch";

// ---------------------------------------------------------------------------------------------
// The vendored tree against the published crate.

fn vendor_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vendor")
}

fn crate_dir() -> PathBuf {
    vendor_dir().join("kafka-protocol")
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The manifest, `sha256sum` lines ("<hex>  <path>") sorted by path, as path -> sha256.
fn manifest() -> BTreeMap<String, String> {
    let path = vendor_dir().join("kafka-protocol-0.18.0.sha256");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let (hash, file) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("manifest line {}: not `<sha256>  <path>`: {line:?}", n + 1));
        assert!(
            hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "manifest line {}: {hash:?} is not a lowercase sha256",
            n + 1
        );
        if let Some((last, _)) = files.last_key_value() {
            assert!(
                last.as_str() < file,
                "manifest line {}: {file} is out of order or repeated",
                n + 1
            );
        }
        files.insert(file.to_string(), hash.to_string());
    }
    assert!(!files.is_empty(), "the manifest lists no file");
    files
}

/// Every file under `dir`, as paths relative to it with `/` separators.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            // symlink_metadata: a symlink is neither followed nor mistaken for a published file.
            let kind = fs::symlink_metadata(&path).expect("file metadata").file_type();
            if kind.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                let parts: Vec<_> = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect();
                out.insert(parts.join("/"));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

fn vendored_file(path: &str) -> Vec<u8> {
    let full = crate_dir().join(path);
    fs::read(&full).unwrap_or_else(|e| panic!("reading vendored {}: {e}", full.display()))
}

/// One `@@ -old_start,old_len +new_start,new_len @@` hunk; lines keep their `\n` (or lack one
/// where the patch says "\ No newline at end of file").
struct Hunk {
    header: String,
    old_start: usize,
    old_len: usize,
    new_start: usize,
    new_len: usize,
    /// (' ' | '-' | '+', line)
    lines: Vec<(u8, Vec<u8>)>,
}

/// The hunks of one file the patch touches.
struct FilePatch {
    path: String,
    hunks: Vec<Hunk>,
}

/// "-12,3" or "+7" (a missing length means 1, as diff writes it).
fn parse_range(text: &str, sign: char, header: &str) -> (usize, usize) {
    let text = text
        .strip_prefix(sign)
        .unwrap_or_else(|| panic!("hunk header {header:?}: expected {sign}"));
    let (start, len) = text.split_once(',').unwrap_or((text, "1"));
    let number = |s: &str| {
        s.parse()
            .unwrap_or_else(|_| panic!("hunk header {header:?}: bad number {s:?}"))
    };
    (number(start), number(len))
}

/// Strips the leading `a/` or `b/` directory (as `patch -p1` would) from a `---`/`+++` path.
fn patch_path(line: &str, prefix: &str) -> String {
    let path = line[prefix.len()..].split('\t').next().unwrap_or_default();
    match path.split_once('/') {
        Some((_, rest)) if !rest.is_empty() => rest.to_string(),
        _ => panic!("patch header {line:?}: path has no leading directory to strip"),
    }
}

/// A strict reader of `diff -ruN` output: every line must be a `diff` command line, a file header,
/// a hunk header, or a hunk line, and each hunk must hold exactly the lines its header counts.
fn read_patch() -> Vec<FilePatch> {
    let path = vendor_dir().join("kafka-protocol.patch");
    let text = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut lines = text.split_inclusive(|&b| b == b'\n').peekable();
    let mut files: Vec<FilePatch> = Vec::new();
    while let Some(raw) = lines.next() {
        let line = String::from_utf8_lossy(raw);
        let line = line.trim_end_matches('\n');
        if line.starts_with("diff ") {
            continue;
        }
        if line.starts_with("--- ") {
            let old = patch_path(line, "--- ");
            let next = lines
                .next()
                .map(|l| String::from_utf8_lossy(l).trim_end_matches('\n').to_string());
            let next = next.unwrap_or_else(|| panic!("patch: {line:?} is not followed by a +++ line"));
            assert!(
                next.starts_with("+++ "),
                "patch: {line:?} is followed by {next:?}, not +++"
            );
            let new = patch_path(&next, "+++ ");
            assert_eq!(old, new, "patch: a file header names two different files");
            files.push(FilePatch {
                path: new,
                hunks: Vec::new(),
            });
            continue;
        }
        let Some(ranges) = line.strip_prefix("@@ ").and_then(|l| l.split(" @@").next()) else {
            panic!("patch: unexpected line {line:?}");
        };
        let file = files
            .last_mut()
            .unwrap_or_else(|| panic!("patch: hunk {line:?} before any file header"));
        let (old, new) = ranges
            .split_once(' ')
            .unwrap_or_else(|| panic!("hunk header {line:?}: expected two ranges"));
        let (old_start, old_len) = parse_range(old, '-', line);
        let (new_start, new_len) = parse_range(new, '+', line);
        let mut hunk = Hunk {
            header: line.to_string(),
            old_start,
            old_len,
            new_start,
            new_len,
            lines: Vec::new(),
        };
        let (mut old_seen, mut new_seen) = (0, 0);
        while old_seen < old_len || new_seen < new_len {
            let raw = lines
                .next()
                .unwrap_or_else(|| panic!("{}: hunk {line:?} ends early", file.path));
            let (&kind, body) = raw
                .split_first()
                .unwrap_or_else(|| panic!("{}: empty line in hunk {line:?}", file.path));
            match kind {
                b' ' => (old_seen, new_seen) = (old_seen + 1, new_seen + 1),
                b'-' => old_seen += 1,
                b'+' => new_seen += 1,
                _ => panic!(
                    "{}: hunk {line:?} holds a line starting with {:?}",
                    file.path, kind as char
                ),
            }
            let mut body = body.to_vec();
            if lines
                .peek()
                .is_some_and(|l| l.starts_with(b"\\ No newline at end of file"))
            {
                lines.next();
                assert_eq!(
                    body.pop(),
                    Some(b'\n'),
                    "{}: hunk {line:?}: misplaced no-newline mark",
                    file.path
                );
            }
            hunk.lines.push((kind, body));
        }
        assert!(
            old_seen == old_len && new_seen == new_len,
            "{}: hunk {line:?} holds {old_seen} old and {new_seen} new lines",
            file.path
        );
        file.hunks.push(hunk);
    }
    assert!(!files.is_empty(), "the patch touches no file");
    files
}

/// The published file behind `patched`: each hunk's new side must sit exactly at its stated
/// position and is replaced by its old side (no fuzz, no offset). The error names file and hunk.
fn reverse_apply(file: &FilePatch, patched: &[u8]) -> Result<Vec<u8>, String> {
    let current: Vec<&[u8]> = patched.split_inclusive(|&b| b == b'\n').collect();
    let mut published: Vec<u8> = Vec::with_capacity(patched.len());
    let mut published_lines = 0;
    let mut cursor = 0;
    for (n, hunk) in file.hunks.iter().enumerate() {
        let what = format!("{} hunk {} ({})", file.path, n + 1, hunk.header);
        // diff numbers an empty side by the line before it, a non-empty one by its first line.
        let new_at = if hunk.new_len == 0 {
            hunk.new_start
        } else {
            hunk.new_start - 1
        };
        let old_at = if hunk.old_len == 0 {
            hunk.old_start
        } else {
            hunk.old_start - 1
        };
        if new_at < cursor {
            return Err(format!("{what}: overlaps the hunk before it"));
        }
        if new_at + hunk.new_len > current.len() {
            return Err(format!("{what}: runs past the end of the vendored file"));
        }
        for line in &current[cursor..new_at] {
            published.extend_from_slice(line);
            published_lines += 1;
        }
        if published_lines != old_at {
            return Err(format!(
                "{what}: the old side starts at line {}, not {}",
                published_lines + 1,
                old_at + 1
            ));
        }
        let new_side = hunk
            .lines
            .iter()
            .filter(|(kind, _)| *kind != b'-')
            .map(|(_, l)| l.as_slice());
        for (offset, (expected, actual)) in new_side.zip(&current[new_at..]).enumerate() {
            if expected != *actual {
                return Err(format!(
                    "{what}: vendored line {} is {:?}, the patch expects {:?}",
                    new_at + offset + 1,
                    String::from_utf8_lossy(actual),
                    String::from_utf8_lossy(expected)
                ));
            }
        }
        for (_, line) in hunk.lines.iter().filter(|(kind, _)| *kind != b'+') {
            published.extend_from_slice(line);
            published_lines += 1;
        }
        cursor = new_at + hunk.new_len;
    }
    for line in &current[cursor..] {
        published.extend_from_slice(line);
    }
    Ok(published)
}

#[test]
fn vendored_tree_holds_exactly_the_published_file_set() {
    let manifest: BTreeSet<String> = manifest().into_keys().collect();
    let vendored = files_under(&crate_dir());
    let missing: Vec<_> = manifest.difference(&vendored).collect();
    let extra: Vec<_> = vendored.difference(&manifest).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the vendored tree differs from the published file set: missing {missing:?}, extra {extra:?}"
    );
}

#[test]
fn files_the_patch_leaves_alone_match_the_published_sha256() {
    let patched: BTreeSet<String> = read_patch().into_iter().map(|f| f.path).collect();
    let mut checked = 0;
    for (path, expected) in manifest() {
        if patched.contains(&path) {
            continue;
        }
        let actual = sha256_hex(&vendored_file(&path));
        assert_eq!(
            actual, expected,
            "{path}: not the published file, and the patch does not touch it"
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} untouched files were checked");
}

#[test]
fn patched_files_match_the_published_sha256_once_the_patch_is_reversed() {
    let manifest = manifest();
    for file in read_patch() {
        let expected = manifest
            .get(&file.path)
            .unwrap_or_else(|| panic!("the patch touches {}, which the published crate lacks", file.path));
        let published = reverse_apply(&file, &vendored_file(&file.path)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            &sha256_hex(&published),
            expected,
            "{}: the vendored file with the patch reversed is not the published file",
            file.path
        );
    }
}

#[test]
fn every_patch_hunk_adds_a_line_with_the_kafka_iggy_harness_patch_marker() {
    for file in read_patch() {
        assert!(!file.hunks.is_empty(), "{}: a file header with no hunk", file.path);
        for (n, hunk) in file.hunks.iter().enumerate() {
            let marked = hunk
                .lines
                .iter()
                .any(|(kind, line)| *kind == b'+' && String::from_utf8_lossy(line).contains(MARKER));
            assert!(
                marked,
                "{} hunk {} ({}): no added line carries `{MARKER}`",
                file.path,
                n + 1,
                hunk.header
            );
        }
    }
}

#[test]
fn patch_reverser_refuses_edits_inside_hunks_and_sees_edits_outside_them() {
    // The checks above are only as strict as the reverser: a vendored file edited inside a hunk
    // must be refused, and one edited outside every hunk must not reverse to the published file.
    let file = read_patch().into_iter().next().expect("a patched file");
    let vendored = vendored_file(&file.path);
    let published = reverse_apply(&file, &vendored).expect("the recorded patch reverses");
    let lines: Vec<&[u8]> = vendored.split_inclusive(|&b| b == b'\n').collect();
    let in_a_hunk = |line: usize| {
        file.hunks
            .iter()
            .any(|h| (h.new_start.saturating_sub(1)..h.new_start - 1 + h.new_len).contains(&line))
    };
    let edited = |line: usize| {
        let mut lines: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
        lines[line].insert(0, b'x');
        lines.concat()
    };
    let inside = (0..lines.len()).find(|&l| in_a_hunk(l)).expect("a line inside a hunk");
    let outside = (0..lines.len())
        .find(|&l| !in_a_hunk(l))
        .expect("a line outside every hunk");

    let refused = reverse_apply(&file, &edited(inside));
    assert!(
        refused.is_err(),
        "{}: line {} edited inside a hunk was reversed",
        file.path,
        inside + 1
    );
    let reversed = reverse_apply(&file, &edited(outside)).expect("an edit outside every hunk reverses");
    assert_ne!(
        sha256_hex(&reversed),
        sha256_hex(&published),
        "{}: an edit outside the hunks was lost",
        file.path
    );
}

// ---------------------------------------------------------------------------------------------
// The patched decoders. Each hostile input must decode to an error without a large allocation:
// an allocation that fails aborts the process, and one the kernel grants lazily hides the bug,
// so the largest single allocation on the decoding thread is measured.

struct MeasuringAllocator;

thread_local! {
    // Const-initialized and without a destructor, so the allocator can use it without allocating.
    static LARGEST_ALLOCATION: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation(size: usize) {
    let _ = LARGEST_ALLOCATION.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call is forwarded to the system allocator unchanged; only sizes are noted.
unsafe impl GlobalAlloc for MeasuringAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: MeasuringAllocator = MeasuringAllocator;

/// The vendored decoders reserve at most this many elements up front (types.rs).
const MAX_PREALLOCATED_ELEMENTS: usize = 1024;

/// Runs `decode` and returns its result with the largest single allocation it made.
fn measured<T>(decode: impl FnOnce() -> T) -> (T, usize) {
    LARGEST_ALLOCATION.with(|largest| largest.set(0));
    let result = decode();
    (result, LARGEST_ALLOCATION.with(Cell::get))
}

/// Decodes `body` as `T` at `version`; it must fail, allocating at most `limit` bytes at once.
/// Returns the error with its causes.
fn assert_refused<T: Decodable + std::fmt::Debug>(what: &str, body: &[u8], version: i16, limit: usize) -> String {
    let mut buf = Bytes::copy_from_slice(body);
    let (result, largest) = measured(|| T::decode(&mut buf, version));
    assert!(
        largest <= limit,
        "{what}: allocated {largest} bytes at once (limit {limit})"
    );
    match result {
        Ok(decoded) => panic!("{what}: decoded to {decoded:?}"),
        Err(e) => format!("{e:#}"),
    }
}

/// 64 KiB: far above anything these small bodies need, far below a declared-count allocation.
const SMALL: usize = 64 * 1024;

/// An unsigned varint, as compact lengths are written.
fn put_compact_len(buf: &mut BytesMut, len: u32) {
    let mut n = len;
    while n >= 0x80 {
        buf.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    buf.put_u8(n as u8);
}

/// A zigzag varint, as record fields are written.
fn put_varint(buf: &mut BytesMut, n: i32) {
    put_compact_len(buf, ((n << 1) ^ (n >> 31)) as u32);
}

/// JoinGroup v5 (non-flexible) or v6 (flexible) up to, not including, the protocols array.
fn join_group_head(version: i16) -> BytesMut {
    let mut body = BytesMut::new();
    if version >= 6 {
        put_compact_len(&mut body, 2); // group_id "g"
        body.put_u8(b'g');
    } else {
        body.put_i16(1);
        body.put_u8(b'g');
    }
    body.put_i32(30_000); // session_timeout_ms
    body.put_i32(60_000); // rebalance_timeout_ms
    if version >= 6 {
        put_compact_len(&mut body, 1); // member_id ""
        put_compact_len(&mut body, 0); // group_instance_id null
        put_compact_len(&mut body, 9); // protocol_type "consumer"
    } else {
        body.put_i16(0);
        body.put_i16(-1);
        body.put_i16(8);
    }
    body.put_slice(b"consumer");
    body
}

#[test]
fn produce_v3_declaring_i32_max_topics_in_a_12_byte_body_is_a_decode_error() {
    // The body of conformance's huge_array_count_in_a_request_body_closes_the_connection.
    let mut body = BytesMut::new();
    body.put_i16(-1); // transactional_id null
    body.put_i16(-1); // acks
    body.put_i32(30_000); // timeout_ms
    body.put_i32(i32::MAX); // topic_data count, and no topic follows
    assert_eq!(body.len(), 12);
    let error = assert_refused::<ProduceRequest>("Produce v3, i32::MAX topics", &body, 3, SMALL);
    // Refused from the count, before decoding any element.
    assert!(
        error.contains("declares 2147483647 elements"),
        "Produce v3, i32::MAX topics: {error}"
    );
}

#[test]
fn produce_v9_declaring_u32_max_compact_topics_is_a_decode_error() {
    let mut body = BytesMut::new();
    put_compact_len(&mut body, 0); // transactional_id null
    body.put_i16(-1);
    body.put_i32(30_000);
    put_compact_len(&mut body, u32::MAX); // u32::MAX - 1 topics
    body.put_u8(0); // tagged fields
    assert_refused::<ProduceRequest>("Produce v9, u32::MAX - 1 topics", &body, 9, SMALL);
}

#[test]
fn join_group_declaring_i32_max_protocols_is_a_decode_error() {
    let mut body = join_group_head(5);
    body.put_i32(i32::MAX);
    assert_refused::<JoinGroupRequest>("JoinGroup v5, i32::MAX protocols", &body, 5, SMALL);

    let mut body = join_group_head(6);
    put_compact_len(&mut body, u32::MAX);
    body.put_u8(0);
    assert_refused::<JoinGroupRequest>("JoinGroup v6, u32::MAX - 1 protocols", &body, 6, SMALL);
}

#[test]
fn array_reservation_is_capped_when_the_count_fits_in_the_body() {
    // A count the body could hold (one byte per element) still reserves at most
    // MAX_PREALLOCATED_ELEMENTS elements: a protocol is ~100 bytes in memory and the first one
    // here is already malformed (a negative name length), so nothing beyond that is needed.
    let count = 1_000_000;
    let mut body = join_group_head(5);
    body.put_i32(count as i32);
    body.put_bytes(0xfe, count);
    assert!(
        MAX_PREALLOCATED_ELEMENTS < count,
        "the count must exceed the cap to test it"
    );
    let limit = MAX_PREALLOCATED_ELEMENTS * std::mem::size_of::<JoinGroupRequestProtocol>();
    assert_refused::<JoinGroupRequest>("JoinGroup v5, 10^6 protocols in 10^6 bytes", &body, 5, limit);
}

#[test]
fn valid_join_group_requests_still_decode_unchanged() {
    for version in [0, 5, 6, 9] {
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("group")))
            .with_session_timeout_ms(30_000)
            .with_member_id(StrBytes::from_static_str("member-1"))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(
                (0..3)
                    .map(|n| {
                        JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_string(format!("assignor-{n}")))
                            .with_metadata(Bytes::from(vec![n; 40]))
                    })
                    .collect(),
            );
        if version >= 1 {
            request.rebalance_timeout_ms = 60_000;
        }
        let mut encoded = BytesMut::new();
        request.encode(&mut encoded, version).expect("encodes");
        let mut encoded = encoded.freeze();
        let decoded = JoinGroupRequest::decode(&mut encoded, version).expect("decodes");
        assert_eq!(decoded, request, "JoinGroup v{version} round trip");
        assert!(encoded.is_empty(), "JoinGroup v{version}: {} bytes left", encoded.len());
    }
}

/// CRC-32C (Castagnoli), which record batches carry.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A v2 record batch holding one record with value "v" and one header ("k", "h"), declaring
/// `record_count` records and `header_count` headers.
fn record_batch(record_count: i32, header_count: i32) -> Bytes {
    let mut record = BytesMut::new();
    record.put_i8(0); // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, -1); // null key
    put_varint(&mut record, 1);
    record.put_u8(b'v');
    put_varint(&mut record, header_count);
    put_varint(&mut record, 1);
    record.put_u8(b'k');
    put_varint(&mut record, 1);
    record.put_u8(b'h');

    let mut after_crc = BytesMut::new();
    after_crc.put_i16(0); // attributes: no compression
    after_crc.put_i32(0); // last offset delta
    after_crc.put_i64(1_700_000_000_000); // first timestamp
    after_crc.put_i64(1_700_000_000_000); // max timestamp
    after_crc.put_i64(-1); // producer id
    after_crc.put_i16(-1); // producer epoch
    after_crc.put_i32(-1); // base sequence
    after_crc.put_i32(record_count);
    put_varint(&mut after_crc, record.len() as i32);
    after_crc.put_slice(&record);

    let mut batch = BytesMut::new();
    batch.put_i64(0); // base offset
    batch.put_i32((4 + 1 + 4 + after_crc.len()) as i32); // batch length
    batch.put_i32(0); // partition leader epoch
    batch.put_i8(2); // magic
    batch.put_u32(crc32c(&after_crc));
    batch.put_slice(&after_crc);
    batch.freeze()
}

#[test]
fn record_batch_counts_beyond_the_bytes_left_are_decode_errors() {
    // The batch builder itself is sound: with honest counts it decodes.
    let mut valid = record_batch(1, 1);
    let set = RecordBatchDecoder::decode(&mut valid).expect("the honest batch decodes");
    assert_eq!(set.records.len(), 1);
    assert_eq!(set.records[0].value.as_deref(), Some(&b"v"[..]));
    assert_eq!(set.records[0].headers.len(), 1);

    for (what, record_count, header_count) in [
        ("i32::MAX records", i32::MAX, 1),
        ("a record with i32::MAX headers", 1, i32::MAX),
    ] {
        let mut batch = record_batch(record_count, header_count);
        let (result, largest) = measured(|| RecordBatchDecoder::decode(&mut batch));
        assert!(result.is_err(), "a batch declaring {what} decoded");
        assert!(
            largest <= SMALL,
            "a batch declaring {what}: allocated {largest} bytes at once"
        );
    }
}
