//! libFuzzer entry of the `handle_frame` target; the target itself is `kig_fuzz_harness::handle_frame`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::handle_frame::handle_frame(data));
