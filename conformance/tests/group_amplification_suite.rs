//! The group amplification cases (`cases::group_amplification_cases`) against an in-process
//! gateway on the embedded backend, one test per case, with the suite's defaults: the limits
//! under test are the ones a real deployment keeps.

use kafka_iggy_conformance::cases::group_amplification_cases;
use kafka_iggy_conformance::cases::Outcome;
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};

async fn run_case(name: &str) {
    let gateway = LocalGateway::serve(shared_backend(), LocalOptions::default())
        .await
        .expect("gateway starts");
    let case = group_amplification_cases::cases()
        .into_iter()
        .find(|c| c.name.rsplit("::").next() == Some(name))
        .unwrap_or_else(|| panic!("no case {name}"));
    match (case.run)(gateway.endpoint.clone()).await {
        Ok(Outcome::Passed) => {}
        Ok(Outcome::Skipped(why)) => panic!("{name} skipped against the in-process gateway: {why}"),
        Err(e) => panic!("{name} [{}]: {e:#}", case.rules.join(", ")),
    }
    gateway.stop().await;
}

macro_rules! suite {
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
            for case in group_amplification_cases::cases() {
                let short = case.name.rsplit("::").next().unwrap_or(case.name);
                assert!(listed.contains(&short), "case {} has no test", case.name);
            }
        }
    };
}

suite!(
    group_join_subscribing_to_millions_of_empty_topic_names,
    group_one_client_joining_12000_groups_leaves_room_for_others,
);
