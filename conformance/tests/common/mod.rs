//! Shared by the suite test files: run one named case against a fresh in-process gateway on
//! the embedded backend, and a macro that makes one test per case.

#![allow(dead_code)] // each test binary uses the part it needs

use kafka_iggy_conformance::cases::hostile_cases::{SUITE_FETCH_MAX_WAIT_MS, SUITE_MAX_CONNECTIONS};
use kafka_iggy_conformance::cases::{self, Outcome};
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};
use kafka_iggy_gateway::limits::LimitSettings;

/// Runs the case against a gateway with the suite's defaults.
pub async fn run_case(name: &str) {
    let gateway = LocalGateway::start().await.expect("gateway starts");
    run_on(gateway, name).await;
}

/// The suite's defaults plus two lowered limits, so that attacks meet them quickly:
/// `max_connections` below the 1,500 idle connections one hostile case opens (the limit is then
/// really exercised), and `fetch_max_wait_ms` of a second (a Fetch asking to wait i32::MAX ms
/// is answered in about a second, not the default 30 s).
pub fn hostile_options() -> LocalOptions {
    LocalOptions {
        limits: LimitSettings {
            max_connections: Some(SUITE_MAX_CONNECTIONS),
            fetch_max_wait_ms: Some(SUITE_FETCH_MAX_WAIT_MS),
            ..LimitSettings::default()
        },
        ..LocalOptions::default()
    }
}

/// Runs the case against a gateway with the hostile suites' settings ([`hostile_options`]).
pub async fn run_hostile_case(name: &str) {
    let gateway = LocalGateway::serve(shared_backend(), hostile_options())
        .await
        .expect("gateway starts");
    run_on(gateway, name).await;
}

async fn run_on(gateway: LocalGateway, name: &str) {
    let case = cases::all()
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

/// `suite!(module_name; case_a, case_b)`: one test per case, plus a test that every case of
/// `cases::module_name` has one. `suite!(hostile module_name; ...)` runs them with
/// [`hostile_options`].
#[macro_export]
macro_rules! suite {
    (hostile $module:ident; $($name:ident),+ $(,)?) => {
        $crate::suite!(@tests run_hostile_case, $module; $($name),+);
    };
    ($module:ident; $($name:ident),+ $(,)?) => {
        $crate::suite!(@tests run_case, $module; $($name),+);
    };
    (@tests $runner:ident, $module:ident; $($name:ident),+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                common::$runner(stringify!($name)).await;
            }
        )+

        #[test]
        fn every_case_has_a_test() {
            let listed = [$(stringify!($name)),+];
            for case in kafka_iggy_conformance::cases::$module::cases() {
                let short = case.name.rsplit("::").next().unwrap_or(case.name);
                assert!(listed.contains(&short), "case {} has no test", case.name);
            }
        }
    };
}
