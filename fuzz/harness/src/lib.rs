//! The gateway's fuzz targets as plain functions over bytes.
//!
//! Each target takes any `&[u8]` and returns `()`. It panics only when the code under test has a
//! real bug: a panic a client can reach over the network, an allocation a request can blow up,
//! a wait that never ends, or a broken round-trip property. The same functions run under
//! libFuzzer (the cargo-fuzz crate in `fuzz/`, one `fuzz_target!` each) and under `cargo test`
//! (`tests/replay_corpora.rs` replays every committed corpus and regression input on stable).

pub mod envelope;
pub mod frame_reader;
pub mod group_state_machine;
pub mod handle_frame;
pub mod record_batches;
pub mod request_bodies;
pub mod request_header;
mod runtime;

/// A fuzz target: any bytes in, a panic only for a real bug.
pub type Target = fn(&[u8]);

/// Every target by the name its corpus directory, regression directory and fuzz binary carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame_reader", frame_reader::frame_reader),
    ("request_header", request_header::request_header),
    ("request_bodies", request_bodies::request_bodies),
    ("handle_frame", handle_frame::handle_frame),
    ("record_batches", record_batches::record_batches),
    ("envelope", envelope::envelope),
    ("group_state_machine", group_state_machine::group_state_machine),
];
