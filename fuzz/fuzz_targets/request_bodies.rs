//! libFuzzer entry of the `request_bodies` target; the target itself is `kig_fuzz_harness::request_bodies`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::request_bodies::request_bodies(data));
