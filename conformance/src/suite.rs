//! The whole suite over one target: the endpoint cases (`cases::all()`), and, where the suite
//! runs the gateway itself and so holds its backend, the cases that start their own gateways
//! (`gateway_cases`) and the authorization cases (`auth_cases`). What a target cannot run is
//! reported as skipped, with the reason, never left out.

use crate::cases::gateway_cases::BackendSource;
use crate::cases::{self, auth_cases, gateway_cases, ListedCase};
use crate::endpoint::{shared_backend, Endpoint, LocalGateway, LocalOptions};
use crate::native::{IggySdkNative, NativeBackend};
use crate::profile::Profile;
use crate::provision::Provisioner;
use crate::real_iggy::IggyServer;
use crate::results::RunResults;
use crate::runner::{self, CaseInfo, Filter, Report};
use kafka_iggy_gateway::backend::Backend;
use std::sync::Arc;

/// What the suite runs against.
pub enum Target<'a> {
    /// An endpoint someone else runs: only the endpoint cases can run.
    Outside(Endpoint),
    /// A gateway the suite starts in process on a fresh embedded backend.
    Embedded,
    /// A gateway the suite starts in process on a real Iggy server.
    Iggy(&'a IggyServer),
}

impl Target<'_> {
    /// The name the reports give it.
    pub fn name(&self) -> &'static str {
        match self {
            Target::Outside(_) => "bootstrap",
            Target::Embedded => "embedded",
            Target::Iggy(_) => "iggy",
        }
    }
}

/// Why the cases that start their own gateways did not run against an outside endpoint.
const NEEDS_IN_PROCESS: &str =
    "starts its own gateways, so it runs only when the suite runs the gateway (no --bootstrap, or --iggy ADDR)";
/// Why they do not run under the kafka profile.
const GATEWAY_ONLY: &str =
    "gateway-only: starts this project's gateway with settings of its own, so a Kafka profile has nothing to hold it to";

/// A listed case: what it is and whether it needs the suite to run the gateway.
pub struct Listing {
    pub info: CaseInfo<'static>,
    pub in_process_only: bool,
}

/// Every case of the suite, in run order, filtered by name.
pub fn list(filter: &Filter) -> Vec<Listing> {
    let endpoint_cases = cases::all().into_iter().map(|case| Listing {
        info: case.info(),
        in_process_only: false,
    });
    let own_gateways = own_gateway_cases().map(|(area, case)| Listing {
        info: listed_info(area, case),
        in_process_only: true,
    });
    endpoint_cases
        .chain(own_gateways)
        .filter(|l| filter.selects(l.info.name))
        .collect()
}

fn own_gateway_cases() -> impl Iterator<Item = (&'static str, &'static ListedCase)> {
    let gateway = gateway_cases::CASES.iter().map(|c| (gateway_cases::AREA, c));
    gateway.chain(auth_cases::CASES.iter().map(|c| (auth_cases::AREA, c)))
}

fn listed_info(area: &'static str, case: &'static ListedCase) -> CaseInfo<'static> {
    CaseInfo {
        area,
        name: case.name,
        rules: case.rules,
        deviations: &[],
    }
}

/// Runs the suite against `target` under `profile`.
pub async fn run(target: &Target<'_>, profile: Profile, filter: &Filter) -> anyhow::Result<RunResults> {
    let (report, endpoint) = match target {
        Target::Outside(endpoint) => {
            let endpoint = Endpoint {
                profile,
                ..endpoint.clone()
            };
            let mut report = runner::run(&endpoint, &cases::all(), filter).await;
            skip_own_gateway_cases(&mut report, filter, NEEDS_IN_PROCESS);
            (report, endpoint.bootstrap)
        }
        Target::Embedded => {
            let backend = shared_backend();
            let in_process = InProcess {
                native: backend.clone(),
                source: backend.clone(),
                provisioner: Provisioner::Embedded(backend.clone()),
                backend,
                description: "the embedded backend".into(),
            };
            in_process.run(profile, filter).await?
        }
        Target::Iggy(server) => {
            // The migration cases write and read beside the gateway through an SDK client of
            // their own, as a native Iggy application would.
            let native = IggySdkNative::connect(&server.address, &server.username, &server.password).await?;
            let in_process = InProcess {
                backend: Arc::new(server.gateway_backend().await?),
                native: Arc::new(native),
                // Every gateway the gateway cases start gets its own connections to the server.
                source: *server,
                provisioner: Provisioner::Iggy {
                    address: server.address.clone(),
                    username: server.username.clone(),
                    password: server.password.clone(),
                },
                description: server.how.clone(),
            };
            in_process.run(profile, filter).await?
        }
    };
    Ok(report.into_results(target.name(), &endpoint, profile.as_str()))
}

/// A gateway the suite runs itself, and what its cases need of the backend beneath it.
struct InProcess<B: Backend, S: BackendSource> {
    backend: Arc<B>,
    /// What the migration cases write through, as a native Iggy client.
    native: Arc<dyn NativeBackend>,
    /// Where the gateway cases get the backends of the gateways they start.
    source: S,
    /// Where the authorization cases make users.
    provisioner: Provisioner,
    /// What the gateway runs on, for the output.
    description: String,
}

impl<B: Backend, S: BackendSource> InProcess<B, S> {
    /// Every case: the endpoint cases against one gateway, then (under this spec's profile) the
    /// cases that start gateways of their own.
    async fn run(self, profile: Profile, filter: &Filter) -> anyhow::Result<(Report, String)> {
        let options = LocalOptions {
            native: Some(self.native),
            ..LocalOptions::default()
        };
        let gateway = LocalGateway::serve(self.backend.clone(), options).await?;
        println!(
            "conformance: started a gateway on {} on {}",
            self.description, gateway.endpoint.bootstrap
        );
        let endpoint = Endpoint {
            profile,
            ..gateway.endpoint.clone()
        };
        let mut report = runner::run(&endpoint, &cases::all(), filter).await;
        gateway.stop().await;
        if profile.is_kafka() {
            skip_own_gateway_cases(&mut report, filter, GATEWAY_ONLY);
        } else {
            report.extend(gateway_cases::run(&self.source, filter).await);
            let world = auth_cases::AuthWorld {
                backend: self.backend,
                provisioner: self.provisioner,
            };
            report.extend(auth_cases::run(&world, filter).await);
        }
        Ok((report, endpoint.bootstrap))
    }
}

fn skip_own_gateway_cases(report: &mut Report, filter: &Filter, why: &str) {
    for (area, case) in own_gateway_cases().filter(|(_, c)| filter.selects(c.name)) {
        report.skip(listed_info(area, case), why);
    }
}
