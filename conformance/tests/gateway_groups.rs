//! The cases that start their own gateways (`cases::gateway_cases`), on the embedded model:
//! every gateway a case starts shares one model, as gateways share one Iggy server.

use kafka_iggy_conformance::cases::gateway_cases;
use kafka_iggy_conformance::endpoint::shared_backend;

macro_rules! embedded_tests {
    ($($case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() -> anyhow::Result<()> {
                gateway_cases::$case(&shared_backend()).await
            }
        )+

        #[test]
        fn every_gateway_case_has_a_test() {
            let listed = [$(stringify!($case)),+];
            for name in gateway_cases::NAMES {
                assert!(listed.contains(name), "gateway case {name} has no test");
            }
        }
    };
}

embedded_tests!(
    member_that_stops_heartbeating_is_evicted_after_its_session_timeout,
    gateway_restart_members_rejoin_and_resume_without_loss,
    group_over_two_gateways_sees_one_coordinator_and_agrees_on_offsets,
    shutdown_answers_a_join_waiting_for_a_rebalance,
    group_moves_to_a_surviving_gateway_and_back,
    idempotent_retry_after_a_gateway_restart_is_answered_from_the_log,
    idempotent_producer_whose_answers_are_lost_stores_each_record_once,
);
