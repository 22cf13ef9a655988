//! Decompression bombs against `kig_core::compression::decompress` (BATCH-BUDGET-1,
//! BATCH-BUDGET-2), measured with a counting global allocator.
//!
//! Each bomb is a small input that expands to 64 MiB; the budget is 1 MiB. The test asserts the
//! budget error and that the peak of bytes allocated on the Rust heap during the call, above the
//! baseline before it, stays below budget + a fixed decoder overhead: far below the 64 MiB the
//! input expands to, so nothing was allocated past the budget.
//!
//! zstd allocates its window in C (`malloc`), which the Rust global allocator does not see. That
//! window is bounded by `window_log_max` (about twice the remaining budget); the tests with
//! hand-made frames declaring a 128 MiB window or a 4 GiB content size show the bound holds: the
//! frames are refused before zstd decodes (and allocates for) them.
//!
//! The allocator is process-wide and tests run on parallel threads, so every test holds
//! [`SERIAL`] for its whole body (input preparation included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use kig_core::budget::DecompressionBudget;
use kig_core::compression::{compress, compress_snappy_xerial, decompress, Compression};
use kig_core::error::{BudgetExceeded, DecodeError};

const MIB: usize = 1 << 20;
const BOMB_EXPANDS_TO: usize = 64 * MIB;
const BUDGET: usize = MIB;
/// What decoders may allocate besides the output (inflate state, lz4 block buffers, the
/// 64 KiB read chunk lives on the stack).
const DECODER_OVERHEAD: usize = 4 * MIB;

/// Counts live heap bytes and their peak.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::SeqCst) + bytes;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

fn shrank(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::SeqCst);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// updates counters besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; the caller upholds `realloc`'s contract for `new_size`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as if old and new blocks coexisted (they may, while bytes are copied):
            // the measured peak is an upper bound.
            grew(new_size);
            shrank(layout.size());
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

/// Only one test of this file runs at a time, so the counters see one test's allocations.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Resets the peak to the current live bytes and returns them (the baseline).
fn reset_peak() -> usize {
    let now = CURRENT.load(Ordering::SeqCst);
    PEAK.store(now, Ordering::SeqCst);
    now
}

/// Runs `f` and returns its result with the peak of heap bytes above the baseline during it.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let baseline = reset_peak();
    let result = f();
    let peak = PEAK.load(Ordering::SeqCst).saturating_sub(baseline);
    (result, peak)
}

fn budget_error(result: Result<Vec<u8>, DecodeError>) -> BudgetExceeded {
    match result {
        Err(DecodeError::Budget(exceeded)) => exceeded,
        Err(other) => panic!("expected a budget error, got {other:?}"),
        Ok(output) => panic!("expected a budget error, got {} bytes", output.len()),
    }
}

/// Decompresses `bomb` under a fresh 1 MiB budget, asserts the budget error and the bound on
/// the peak, and returns the peak.
fn assert_bomb_refused(name: &str, codec: Compression, bomb: &[u8]) -> usize {
    let mut budget = DecompressionBudget::new(BUDGET);
    let (result, peak) = measure(|| decompress(codec, bomb, &mut budget));
    let exceeded = budget_error(result);
    eprintln!(
        "{name}: {} input bytes expanding to {} MiB, budget {} MiB: peak heap during \
         decompress {peak} bytes ({:.2} MiB), requested {}",
        bomb.len(),
        BOMB_EXPANDS_TO / MIB,
        BUDGET / MIB,
        peak as f64 / MIB as f64,
        exceeded.requested,
    );
    assert!(exceeded.requested > BUDGET as u64, "{exceeded:?}");
    assert_eq!(exceeded.remaining, BUDGET);
    assert_eq!(budget.remaining(), BUDGET, "a refusal takes nothing");
    assert!(
        peak < BUDGET + DECODER_OVERHEAD,
        "{name}: peak {peak} bytes exceeds budget + decoder overhead"
    );
    peak
}

fn zeros_compressed(codec: Compression) -> Vec<u8> {
    compress(codec, &vec![0u8; BOMB_EXPANDS_TO])
}

#[test]
fn batch_budget_2_gzip_bomb_refused_without_allocating_past_budget() {
    let _serial = serial();
    let bomb = zeros_compressed(Compression::Gzip);
    assert_bomb_refused("gzip bomb", Compression::Gzip, &bomb);
}

#[test]
fn batch_budget_2_snappy_raw_bomb_refused_without_allocating_past_budget() {
    let _serial = serial();
    let bomb = zeros_compressed(Compression::Snappy);
    let peak = assert_bomb_refused("snappy raw bomb", Compression::Snappy, &bomb);
    // Refused on the declared length: nothing of the output is allocated.
    assert!(peak < 64 * 1024, "peak {peak}");
}

#[test]
fn batch_budget_2_snappy_xerial_bomb_refused_without_allocating_past_budget() {
    let _serial = serial();
    let bomb = compress_snappy_xerial(&vec![0u8; BOMB_EXPANDS_TO]);
    assert_bomb_refused("snappy xerial bomb", Compression::Snappy, &bomb);
}

#[test]
fn batch_budget_2_lz4_bomb_refused_without_allocating_past_budget() {
    let _serial = serial();
    let bomb = zeros_compressed(Compression::Lz4);
    assert_bomb_refused("lz4 bomb (64 KiB blocks)", Compression::Lz4, &bomb);
}

#[test]
fn batch_budget_2_lz4_bomb_with_4_mib_linked_blocks_costs_a_fixed_decoder_overhead() {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    use std::io::Write;
    let _serial = serial();
    let info = FrameInfo::new()
        .block_size(BlockSize::Max4MB)
        .block_mode(BlockMode::Linked);
    let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
    encoder.write_all(&vec![0u8; BOMB_EXPANDS_TO]).unwrap();
    let bomb = encoder.finish().unwrap();

    let mut budget = DecompressionBudget::new(BUDGET);
    let (result, peak) = measure(|| decompress(Compression::Lz4, &bomb, &mut budget));
    budget_error(result);
    eprintln!(
        "lz4 bomb (4 MiB linked blocks): {} input bytes expanding to {} MiB, budget {} MiB: \
         peak heap during decompress {peak} bytes ({:.2} MiB)",
        bomb.len(),
        BOMB_EXPANDS_TO / MIB,
        BUDGET / MIB,
        peak as f64 / MIB as f64,
    );
    // lz4_flex sizes its buffers from the declared block size: 4 MiB in, 2 * 4 MiB + 64 KiB
    // out. A fixed cost per frame, whatever the expansion; the output stays within the budget.
    assert!(peak < BUDGET + 13 * MIB, "peak {peak}");
}

#[test]
fn batch_budget_2_zstd_bomb_refused_without_allocating_past_budget() {
    let _serial = serial();
    let bomb = zeros_compressed(Compression::Zstd);
    // Rust heap only: the 2 MiB window (window log 21 for a 1 MiB budget) is allocated in C.
    assert_bomb_refused("zstd bomb", Compression::Zstd, &bomb);
}

/// A zstd frame of no content whose header declares a `window_log` window; zstd would allocate
/// it before decoding a byte.
fn zstd_frame_declaring_window_log(window_log: u32) -> Vec<u8> {
    let mut frame = 0xFD2F_B528_u32.to_le_bytes().to_vec();
    frame.push(0x00); // no content size, not single-segment, no checksum, no dictionary
    frame.push(((window_log - 10) << 3) as u8);
    frame.extend_from_slice(&[0x01, 0x00, 0x00]); // last block, raw, size 0
    frame
}

#[test]
fn batch_budget_2_zstd_frame_declaring_a_huge_window_refused_before_c_allocates_it() {
    let _serial = serial();
    // 128 MiB window in a 9-byte frame.
    let frame = zstd_frame_declaring_window_log(27);
    let mut budget = DecompressionBudget::new(BUDGET);
    let (result, window_peak) = measure(|| decompress(Compression::Zstd, &frame, &mut budget));
    budget_error(result);

    // 4 GiB single-segment content size: the window is the content size.
    let mut frame = 0xFD2F_B528_u32.to_le_bytes().to_vec();
    frame.push(0xA0); // 4-byte content size, single segment
    frame.extend_from_slice(&u32::MAX.to_le_bytes());
    frame.extend_from_slice(&[0x01, 0x00, 0x00]);
    let (result, content_peak) = measure(|| decompress(Compression::Zstd, &frame, &mut budget));
    budget_error(result);
    eprintln!(
        "zstd 9-byte frame declaring a 128 MiB window: refused, peak heap {window_peak} bytes; \
         12-byte frame declaring 4 GiB content: refused, peak heap {content_peak} bytes \
         (budget {} MiB)",
        BUDGET / MIB
    );
    assert_eq!(budget.remaining(), BUDGET);
    assert!(window_peak < 64 * 1024, "peak {window_peak}");
    assert!(content_peak < 64 * 1024, "peak {content_peak}");
}

#[test]
fn batch_budget_2_snappy_67_byte_block_declaring_4_gib_refused_with_tiny_peak() {
    let _serial = serial();
    // Varint 0xFFFF_FFFF, one literal byte, then twenty 64-byte copies at offset 1.
    let mut block = vec![0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00, b'a'];
    for _ in 0..20 {
        block.extend_from_slice(&[0xFE, 0x01, 0x00]);
    }
    assert_eq!(block.len(), 67);
    let mut budget = DecompressionBudget::new(BUDGET);
    let (result, peak) = measure(|| decompress(Compression::Snappy, &block, &mut budget));
    let exceeded = budget_error(result);
    eprintln!(
        "snappy 67-byte block declaring {} bytes, budget {} MiB: peak heap during decompress \
         {peak} bytes",
        exceeded.requested,
        BUDGET / MIB
    );
    assert_eq!(exceeded.requested, u64::from(u32::MAX));
    assert!(peak < 4096, "peak {peak}");
}

#[test]
fn batch_budget_1_shared_budget_refuses_the_second_call_when_the_first_used_most_of_it() {
    let _serial = serial();
    let first = compress(Compression::Gzip, &vec![7u8; 900 * 1024]);
    let second = compress(Compression::Lz4, &vec![9u8; 200 * 1024]);
    let mut budget = DecompressionBudget::new(BUDGET);

    let output = decompress(Compression::Gzip, &first, &mut budget).unwrap();
    assert_eq!(output.len(), 900 * 1024);
    let left = BUDGET - 900 * 1024;
    assert_eq!(budget.remaining(), left);

    let (result, peak) = measure(|| decompress(Compression::Lz4, &second, &mut budget));
    let exceeded = budget_error(result);
    eprintln!(
        "shared budget: second call refused with {left} bytes left, peak heap during it {peak} \
         bytes"
    );
    assert_eq!(exceeded.remaining, left);
    assert_eq!(exceeded.limit, BUDGET);
    assert!(exceeded.requested > left as u64);
    assert_eq!(budget.remaining(), left);
    // The second call allocated only up to what was left, plus decoder state.
    assert!(peak < left + DECODER_OVERHEAD, "peak {peak}");

    // What fits still fits.
    let small = compress(Compression::Zstd, &vec![1u8; left]);
    let output = decompress(Compression::Zstd, &small, &mut budget).unwrap();
    assert_eq!(output.len(), left);
    assert_eq!(budget.remaining(), 0);
}
