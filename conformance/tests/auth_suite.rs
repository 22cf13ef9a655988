//! The authorization cases (`cases::auth_cases`) on the embedded model: users, permissions and
//! tokens made on the model the SASL gateways run on.

use kafka_iggy_conformance::cases::auth_cases::{self, AuthWorld};
use kafka_iggy_conformance::endpoint::shared_backend;
use kafka_iggy_conformance::provision::Provisioner;

macro_rules! embedded_tests {
    ($($case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() -> anyhow::Result<()> {
                let backend = shared_backend();
                let world = AuthWorld { backend: backend.clone(), provisioner: Provisioner::Embedded(backend) };
                auth_cases::$case(&world).await
            }
        )+

        #[test]
        fn every_auth_case_has_a_test() {
            let listed = [$(stringify!($case)),+];
            for name in auth_cases::NAMES {
                assert!(listed.contains(name), "auth case {name} has no test");
            }
        }
    };
}

embedded_tests!(
    sasl_plain_right_password_is_served_and_a_wrong_one_refused,
    sasl_personal_access_token_logs_in_as_its_user,
    unauthenticated_requests_are_refused,
    user_may_produce_to_one_topic_and_is_refused_on_another,
    user_may_read_a_topic_it_may_not_write,
    metadata_describes_only_what_the_user_may_read,
    offsets_need_the_users_permission_on_the_topic,
    permission_changes_reach_a_connected_client,
    sasl_ssl_round_trip,
    librdkafka_re_authenticates_before_its_session_ends,
    topic_admin_needs_manage_topics,
);
