//! The hostile-client cases (`cases::hostile_cases`) against an in-process gateway on the
//! embedded backend, one test per case.
//!
//! The gateway runs with the suite's defaults plus two lowered limits, so that the attacks meet
//! them quickly: `max_connections` below the 1,500 idle connections one case opens (the limit
//! is then really exercised), and `fetch_max_wait_ms` of a second (a Fetch asking to wait
//! i32::MAX ms is answered in about a second, not the default 30 s).

use kafka_iggy_conformance::cases::hostile_cases::{self, SUITE_FETCH_MAX_WAIT_MS, SUITE_MAX_CONNECTIONS};
use kafka_iggy_conformance::cases::Outcome;
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};
use kafka_iggy_gateway::limits::LimitSettings;

async fn run_case(name: &str) {
    let options = LocalOptions {
        limits: LimitSettings {
            max_connections: Some(SUITE_MAX_CONNECTIONS),
            fetch_max_wait_ms: Some(SUITE_FETCH_MAX_WAIT_MS),
            ..LimitSettings::default()
        },
        ..LocalOptions::default()
    };
    let gateway = LocalGateway::serve(shared_backend(), options)
        .await
        .expect("gateway starts");
    let case = hostile_cases::cases()
        .into_iter()
        .find(|c| c.name.rsplit("::").next() == Some(name))
        .unwrap_or_else(|| panic!("no case {name}"));
    match (case.run)(gateway.endpoint.clone()).await {
        Ok(Outcome::Passed) => {}
        Ok(Outcome::Skipped(why)) => {
            panic!("{name} skipped against the embedded gateway, which knows every setting: {why}")
        }
        Err(e) => panic!("{name} [{}]: {e:#}", case.rules.join(", ")),
    }
    gateway.stop().await;
}

/// One test per case, plus a test that every hostile case has one.
macro_rules! hostile_suite {
    ($($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                run_case(stringify!($name)).await;
            }
        )+

        #[test]
        fn every_case_has_a_test() {
            let listed = [$(stringify!($name)),+];
            for case in hostile_cases::cases() {
                let short = case.name.rsplit("::").next().unwrap_or(case.name);
                assert!(listed.contains(&short), "case {} has no test", case.name);
            }
        }
    };
}

hostile_suite!(
    hostile_join_group_with_200000_protocols,
    hostile_join_group_with_a_32760_byte_client_id,
    hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one,
    hostile_create_topic_with_retention_ms_whose_microseconds_overflow,
    hostile_many_idle_connections,
    hostile_slow_senders_trickle_frames,
    hostile_pipelined_requests_whose_answers_are_not_read,
    hostile_fetch_naming_one_partition_5000_times_waiting_i32_max,
    hostile_trailing_bytes_after_the_request_body,
    hostile_32767_byte_strings_in_every_echoed_field,
    hostile_zstd_batch_declaring_a_million_empty_records,
    hostile_near_max_frame_zstd_produces_on_two_connections,
    hostile_connections_that_send_only_a_max_frame_length_prefix,
);
