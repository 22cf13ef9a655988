//! Shared by the suite test files: run one named case against a fresh in-process gateway on
//! the embedded backend, and a macro that makes one test per case.

use kafka_iggy_conformance::cases::{self, Outcome};
use kafka_iggy_conformance::endpoint::LocalGateway;

pub async fn run_case(name: &str) {
    let gateway = LocalGateway::start().await.expect("gateway starts");
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
/// `cases::module_name` has one.
#[macro_export]
macro_rules! suite {
    ($module:ident; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                common::run_case(stringify!($name)).await;
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
