//! libFuzzer entry of the `envelope` target; the target itself is `kig_fuzz_harness::envelope`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::envelope::envelope(data));
