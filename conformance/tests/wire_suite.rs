//! The raw-wire cases against an in-process gateway on the embedded backend.
//!
//! Most cases run in this test process, like `suite!` does. A case that can take the whole
//! process down when the gateway misbehaves (an allocation failure aborts; it is not a panic a
//! test can catch) runs in a child copy of this test binary instead, so the other cases still
//! report and the failure names its cause.

mod common;

use std::process::Command;

/// Set in the child process to the name of the one isolated case it runs.
const CHILD_CASE: &str = "KIG_WIRE_SUITE_ISOLATED_CASE";

/// One in-process test per case, as `suite!` makes them, plus the list of their names.
macro_rules! in_process {
    ($($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                common::run_case(stringify!($name)).await;
            }
        )+

        const IN_PROCESS: &[&str] = &[$(stringify!($name)),+];
    };
}

/// One test per case that runs it in a child process, plus the list of their names.
macro_rules! isolated {
    ($($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_in_child(stringify!($name));
            }
        )+

        const ISOLATED: &[&str] = &[$(stringify!($name)),+];
    };
}

in_process!(
    api_versions_lists_the_advertised_ranges,
    api_versions_v0_matches_the_spec_table,
    api_versions_future_version_gets_v0_unsupported_version,
    every_served_api_answers_at_its_lowest_and_highest_version,
    init_producer_id_with_transactional_id_is_unsupported_version,
    producer_ids_carry_the_instance_id,
    frame_above_max_frame_size_closes_the_connection,
    frame_of_exactly_max_frame_size_is_read,
    decompression_bomb_is_message_too_large_and_connection_survives,
    decompression_budget_is_shared_by_the_whole_request,
    malformed_request_body_closes_the_connection,
    unknown_api_key_closes_the_connection,
    produce_v2_closes_the_connection,
    fetch_v3_closes_the_connection,
    version_above_the_advertised_range_closes_the_connection,
    compressed_batches_round_trip_uncompressed,
    produce_then_fetch_round_trips_every_mapping_case,
    fetch_past_the_high_watermark_is_offset_out_of_range,
    fetch_returns_the_first_record_whole_above_max_bytes,
    list_offsets_earliest_latest_and_timestamps,
    list_offsets_max_timestamp_after_a_fetch_of_one_byte_records,
    create_topics_rules,
    delete_topics_then_metadata_reports_unknown,
    describe_configs_reports_retention_and_fixed_entries,
    describe_cluster_agrees_with_metadata,
    alter_configs_change_retention_and_refuse_the_rest,
    corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported,
    produce_to_a_named_partition_stays_there,
    acks_zero_gets_no_response_and_order_is_kept,
    pipelined_requests_are_answered_in_order,
    fetch_long_poll_returns_when_data_arrives,
    negative_timestamp_is_invalid_timestamp,
    idempotent_retry_is_answered_with_its_first_offset,
    idempotent_sequence_gap_is_out_of_order,
    idempotent_stale_epoch_is_invalid_producer_epoch,
    plain_retry_is_stored_again,
);

isolated!(huge_array_count_in_a_request_body_closes_the_connection);

/// Runs the isolated case named by [`CHILD_CASE`]; in the parent process (variable unset) it
/// does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_case_runner() {
    if let Ok(name) = std::env::var(CHILD_CASE) {
        common::run_case(&name).await;
    }
}

/// Runs `name` through [`isolated_case_runner`] in a child copy of this test binary and fails
/// with the child's exit status and the tail of its output when it does not pass.
fn run_in_child(name: &str) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args(["isolated_case_runner", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_CASE, name)
        .output()
        .expect("the test binary runs as a child process");
    if output.status.success() {
        return;
    }
    let status = describe(&output.status);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Backtrace frames drown the cause; keep the lines that say what happened.
    let said: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.trim_start().starts_with("at ")
                && !l
                    .trim_start()
                    .split(':')
                    .next()
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    let tail = said[said.len().saturating_sub(15)..].join("\n");
    panic!("{name} failed in a child process ({status}); the gateway ran in that process:\n{tail}");
}

fn describe(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (_, Some(6)) => "killed by SIGABRT: the process aborted, e.g. on a failed allocation".into(),
        (_, Some(signal)) => format!("killed by signal {signal}"),
        (Some(code), _) => format!("exit code {code}"),
        _ => status.to_string(),
    }
}

#[test]
fn every_case_has_a_test() {
    for case in kafka_iggy_conformance::cases::wire_cases::cases() {
        let short = case.name.rsplit("::").next().unwrap_or(case.name);
        assert!(
            IN_PROCESS.contains(&short) || ISOLATED.contains(&short),
            "case {} has no test",
            case.name
        );
    }
    for name in ISOLATED {
        assert!(!IN_PROCESS.contains(name), "{name} runs both in process and isolated");
    }
}
