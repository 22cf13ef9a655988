//! libFuzzer entry of the `request_header` target; the target itself is `kig_fuzz_harness::request_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::request_header::request_header(data));
