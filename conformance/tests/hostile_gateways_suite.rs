//! The hostile cases that start their own gateways (`cases::hostile_cases::OWN_GATEWAY_CASES`),
//! each on gateways served in this process on a fresh embedded model, one test per case.

use kafka_iggy_conformance::cases::hostile_cases::{self, launch::InProcess, OWN_GATEWAY_CASES};
use kafka_iggy_conformance::cases::Outcome;

/// A skip fails here: the in-process launcher can do everything a case asks.
fn passed(outcome: anyhow::Result<Outcome>) -> anyhow::Result<()> {
    match outcome? {
        Outcome::Passed => Ok(()),
        Outcome::Skipped(why) => anyhow::bail!("skipped in process, which can run every case: {why}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connection_flood_on_a_peer_moves_no_group() -> anyhow::Result<()> {
    passed(hostile_cases::hostile_connection_flood_on_a_peer_moves_no_group(&InProcess::default()).await)
}

#[test]
fn every_own_gateway_case_has_a_test() {
    let listed = ["hostile_connection_flood_on_a_peer_moves_no_group"];
    for case in OWN_GATEWAY_CASES {
        assert!(listed.contains(&case.name), "case {} has no test", case.name);
    }
}
