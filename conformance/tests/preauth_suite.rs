//! The pre-authentication cases (`cases::preauth_cases`): each starts its own gateway on a
//! fresh embedded model, one test per case.

use kafka_iggy_conformance::cases::preauth_cases;

macro_rules! preauth_suite {
    ($($case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() -> anyhow::Result<()> {
                preauth_cases::$case().await
            }
        )+

        #[test]
        fn every_preauth_case_has_a_test() {
            let listed = [$(stringify!($case)),+];
            for name in preauth_cases::NAMES {
                assert!(listed.contains(name), "preauth case {name} has no test");
            }
        }
    };
}

preauth_suite!(
    connections_that_never_speak_make_room_for_a_client_that_does,
    a_frame_above_512_kib_before_authentication_is_refused,
    a_connection_that_never_authenticates_is_closed_at_the_deadline,
    parallel_guesses_from_one_address_wait_their_turn_before_iggy,
    a_success_for_another_user_keeps_the_first_users_failures,
    concurrent_logins_with_the_same_credentials_open_one_backend_session,
);
