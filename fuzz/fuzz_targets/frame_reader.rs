//! libFuzzer entry of the `frame_reader` target; the target itself is `kig_fuzz_harness::frame_reader`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::frame_reader::frame_reader(data));
