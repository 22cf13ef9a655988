//! libFuzzer entry of the `record_batches` target; the target itself is `kig_fuzz_harness::record_batches`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::record_batches::record_batches(data));
