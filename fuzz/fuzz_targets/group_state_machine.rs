//! libFuzzer entry of the `group_state_machine` target; the target itself is `kig_fuzz_harness::group_state_machine`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kig_fuzz_harness::group_state_machine::group_state_machine(data));
