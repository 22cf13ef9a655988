//! The amplification cases (`cases::answer_bound_cases`, issue 31) against an in-process gateway
//! on the embedded backend, one test per case, with the hostile suite's settings.

use kafka_iggy_conformance::cases::answer_bound_cases;
use kafka_iggy_conformance::cases::hostile_cases::{SUITE_FETCH_MAX_WAIT_MS, SUITE_MAX_CONNECTIONS};
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
    let case = answer_bound_cases::cases()
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

/// One test per case, plus a test that every amplification case has one.
macro_rules! answer_bound_suite {
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
            for case in answer_bound_cases::cases() {
                let short = case.name.rsplit("::").next().unwrap_or(case.name);
                assert!(listed.contains(&short), "case {} has no test", case.name);
            }
        }
    };
}

answer_bound_suite!(
    answer_describe_groups_naming_one_400_kib_group_2500_times,
    answer_metadata_naming_one_100_partition_topic_4000_times,
    answer_list_offsets_naming_one_partition_4000_times,
    answer_offset_fetch_naming_one_partition_4000_times,
    answer_describe_configs_naming_one_topic_4000_times,
    answer_delete_groups_naming_one_group_4000_times,
);
