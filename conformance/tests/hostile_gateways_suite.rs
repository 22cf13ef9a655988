//! The hostile cases that start their own gateways (`cases::hostile_cases::OWN_GATEWAY_CASES`),
//! each on gateways served in this process on a fresh embedded model, one test per case, run
//! by name as the hostile bench runs them.

use kafka_iggy_conformance::cases::hostile_cases::{launch::InProcess, run_own_gateway_case, OWN_GATEWAY_CASES};
use kafka_iggy_conformance::cases::Outcome;

/// Runs case `name` on `launcher`; a skip fails here: the in-process launcher can do everything
/// a case asks.
async fn passed(name: &str, launcher: InProcess) -> anyhow::Result<()> {
    match run_own_gateway_case(name, &launcher).await? {
        Outcome::Passed => Ok(()),
        Outcome::Skipped(why) => anyhow::bail!("skipped in process, which can run every case: {why}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connection_flood_on_a_peer_moves_no_group() -> anyhow::Result<()> {
    passed(
        "hostile_connection_flood_on_a_peer_moves_no_group",
        InProcess::default(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connections_rotating_through_one_address_prefix() -> anyhow::Result<()> {
    passed(
        "hostile_connections_rotating_through_one_address_prefix",
        InProcess::default(),
    )
    .await
}

/// Logins take Iggy 25 ms here, as a real server's round trip does, so that guesses from many
/// addresses that did not take turns would overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guesses_at_one_username_from_many_addresses() -> anyhow::Result<()> {
    passed(
        "hostile_guesses_at_one_username_from_many_addresses",
        InProcess::new(std::time::Duration::from_millis(25)),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_one_user_with_many_tokens_leaves_sessions_for_others() -> anyhow::Result<()> {
    passed(
        "hostile_one_user_with_many_tokens_leaves_sessions_for_others",
        InProcess::default(),
    )
    .await
}

#[test]
fn every_own_gateway_case_has_a_test() {
    let listed = [
        "hostile_connection_flood_on_a_peer_moves_no_group",
        "hostile_connections_rotating_through_one_address_prefix",
        "hostile_guesses_at_one_username_from_many_addresses",
        "hostile_one_user_with_many_tokens_leaves_sessions_for_others",
    ];
    for case in OWN_GATEWAY_CASES {
        assert!(listed.contains(&case.name), "case {} has no test", case.name);
    }
}
