//! The real-Iggy tier: every conformance case against a gateway on the SDK backend and a real
//! Iggy server (see `real_iggy::discover` for how one is reached). A binary rather than a test,
//! so that a skipped tier prints `SKIPPED` and the reason, never a passing test count. Exits
//! non-zero when a case fails, or when `IGGY_REQUIRED=1` and no server is reachable.

use kafka_iggy_conformance::cases::auth_cases::{self, AuthWorld};
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::native::IggySdkNative;
use kafka_iggy_conformance::provision::Provisioner;
use kafka_iggy_conformance::real_iggy::{discover, required, Discovery};
use kafka_iggy_conformance::{cases, differential, runner};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::clock::SystemClock;
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The gateway logs the Iggy error behind every Kafka code that says less (ERR-MAP-1).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error,rdkafka=off,iggy=off".into()),
        )
        .init();
    let mut server = match discover().await? {
        Discovery::Found(server) => server,
        Discovery::Skipped(why) => {
            println!("real-Iggy tier: SKIPPED ({why})");
            if required() {
                println!("real-Iggy tier: IGGY_REQUIRED=1, so the skip fails the run");
                std::process::exit(1);
            }
            return Ok(());
        }
    };
    println!("real-Iggy tier: running against {}", server.how);
    let backend = Arc::new(server.gateway_backend().await?);
    // The migration cases write and read beside the gateway through an SDK client of their own.
    let native = IggySdkNative::connect(&server.address, &server.username, &server.password).await?;
    let options = LocalOptions {
        native: Some(Arc::new(native)),
        ..LocalOptions::default()
    };
    let gateway = LocalGateway::serve(backend.clone(), options).await?;
    let filter = std::env::args().nth(1);
    let mut report = runner::run(&gateway.endpoint, &cases::all(), filter.as_deref()).await;
    gateway.stop().await;
    // The cases that start their own gateways, each with its own connections to the server.
    let gateway_report = cases::gateway_cases::run(&server, filter.as_deref()).await;
    report.passed += gateway_report.passed;
    report.failed.extend(gateway_report.failed);
    report.skipped.extend(gateway_report.skipped);
    // Authentication and authorization: users, permissions and tokens made on the server as root.
    let world = AuthWorld {
        backend: backend.clone(),
        provisioner: Provisioner::Iggy {
            address: server.address.clone(),
            username: server.username.clone(),
            password: server.password.clone(),
        },
    };
    let auth_report = auth_cases::run(&world, filter.as_deref()).await;
    report.passed += auth_report.passed;
    report.failed.extend(auth_report.failed);
    report.skipped.extend(auth_report.skipped);

    // AUTH-TLS-3: the SDK backend over TLS to a server with a certificate of a CA it is told.
    let iggy_tls = match iggy_over_tls(&server).await {
        Ok(true) => {
            println!("PASS gateway_backend_connects_to_iggy_over_tls [AUTH-TLS-3]");
            Some(true)
        }
        Ok(false) => {
            println!("SKIP gateway_backend_connects_to_iggy_over_tls: the server was not started by this run");
            None
        }
        Err(e) => {
            println!("FAIL gateway_backend_connects_to_iggy_over_tls [AUTH-TLS-3]: {e:#}");
            Some(false)
        }
    };

    // A server restart keeps committed offsets and lets the group commit again (CO-RECLAIM-1,
    // DIFF-12). Only a server this run started can be restarted.
    let restart = if server.restartable() {
        match restart_keeps_commits(&mut server, backend.clone()).await {
            Ok(()) => {
                println!("PASS iggy_restart_keeps_committed_offsets_and_commits_again [CO-RECLAIM-1]");
                Some(true)
            }
            Err(e) => {
                println!("FAIL iggy_restart_keeps_committed_offsets_and_commits_again [CO-RECLAIM-1]: {e:#}");
                Some(false)
            }
        }
    } else {
        println!("SKIP iggy_restart_keeps_committed_offsets_and_commits_again: the server was not started by this run");
        None
    };

    // Model vs real: the same random operation sequences on both backends.
    let cases: u32 = std::env::var("KIG_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let seed = differential::seed_from_env();
    println!("real-Iggy tier: model vs real: seed {seed} (KIG_DIFF_SEED repeats it)");
    let model = Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()));
    let handle = tokio::runtime::Handle::current();
    let real = backend.clone();
    let differential = tokio::task::spawn_blocking(move || {
        differential::run_seeded(&handle, model.as_ref(), real.as_ref(), cases, seed)
    })
    .await?;
    match &differential {
        Ok(()) => println!("real-Iggy tier: model vs real: {cases} random sequences observed the same"),
        Err(e) => println!("real-Iggy tier: model vs real differ: {e}"),
    }

    // Model vs real for logins and permissions: users with random permission sets, each
    // through its own session (AUTHZ-MODEL-1). Root acts through the SDK on the server.
    let users: u32 = std::env::var("KIG_DIFF_USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let model = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
    let auth = match differential::IggyAdmin::connect(&server.address, &server.username, &server.password).await {
        Ok(admin) => {
            let result = differential::run_auth(&model, &model, backend.as_ref(), &admin, users, seed).await;
            admin.shutdown().await;
            result
        }
        Err(e) => Err(format!("logging in as root for the auth differential: {e}")),
    };
    match &auth {
        Ok(r) => println!(
            "real-Iggy tier: model vs real, auth: logins and {} users with random permissions, {} steps observed the same",
            r.users, r.checks
        ),
        Err(e) => println!("real-Iggy tier: model vs real, auth, differ: {e}"),
    }
    let failed_diffs = usize::from(differential.is_err()) + usize::from(auth.is_err());
    println!(
        "real-Iggy tier: {} passed, {} failed, {} skipped",
        report.passed + 2 - failed_diffs + usize::from(restart == Some(true)) + usize::from(iggy_tls == Some(true)),
        report.failed.len() + failed_diffs + usize::from(restart == Some(false)) + usize::from(iggy_tls == Some(false)),
        report.skipped.len() + usize::from(restart.is_none()) + usize::from(iggy_tls.is_none())
    );
    let failed = !report.failed.is_empty()
        || !report.skipped.is_empty()
        || failed_diffs > 0
        || restart == Some(false)
        || iggy_tls == Some(false);
    // exit() runs no destructors: the server this run started is stopped first, or it outlives
    // the run (a failing run left iggy-server processes behind).
    drop(backend);
    drop(server);
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// Starts a TLS server from this run's binary with a generated PKI, and checks the gateway's SDK
/// backend works over TLS trusting the PKI's CA, names the server by the address's host, and
/// refuses a server it is not told to trust. `Ok(false)`: no binary to start one with.
async fn iggy_over_tls(server: &kafka_iggy_conformance::real_iggy::IggyServer) -> anyhow::Result<bool> {
    use kafka_iggy_gateway::backend::iggy::IggyTls;
    use kafka_iggy_gateway::backend::{Backend, TopicSpec};
    let pki = kafka_iggy_conformance::tls_fixture::Pki::generate()?;
    let Some(tls_server) = server.spawn_tls(&pki.server_cert, &pki.server_key)? else {
        return Ok(false);
    };
    let trusted = IggyTls {
        enabled: true,
        domain: String::new(),
        ca_file: Some(pki.ca.display().to_string()),
    };
    let backend = IggyBackend::connect_with_tls(
        &tls_server.address,
        &tls_server.username,
        &tls_server.password,
        trusted,
        1,
    )
    .await?;
    backend.ensure_stream("kig-tls").await?;
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    backend.create_topic("kig-tls", "t", spec).await?;
    anyhow::ensure!(
        backend.get_topic("kig-tls", "t").await?.is_some(),
        "the topic created over TLS is not there"
    );
    let untrusted = IggyTls {
        enabled: true,
        domain: String::new(),
        ca_file: None,
    };
    anyhow::ensure!(
        IggyBackend::connect_with_tls(
            &tls_server.address,
            &tls_server.username,
            &tls_server.password,
            untrusted,
            1
        )
        .await
        .is_err(),
        "a server whose CA the gateway is not told was trusted"
    );
    Ok(true)
}

/// Commits through a gateway on the real server, restarts the server, commits again.
async fn restart_keeps_commits(
    server: &mut kafka_iggy_conformance::real_iggy::IggyServer,
    backend: Arc<IggyBackend>,
) -> anyhow::Result<()> {
    use kafka_iggy_conformance::cases::group_cases::support::{commit_one, create_topic, fetch_one, produce};
    use kafka_iggy_conformance::wire::WireClient;
    let gateway = LocalGateway::serve(backend, LocalOptions::default()).await?;
    let endpoint = gateway.endpoint.clone();
    let topic = endpoint.unique_topic("restart");
    let group = endpoint.unique_topic("restart-group");
    create_topic(&endpoint, &topic, 2).await?;
    produce(&endpoint, &topic, 0, 5).await?;
    produce(&endpoint, &topic, 1, 5).await?;
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    anyhow::ensure!(
        commit_one(&mut client, &group, &topic, 0, 3).await? == 0,
        "commit before the restart"
    );
    anyhow::ensure!(
        commit_one(&mut client, &group, &topic, 1, 5).await? == 0,
        "commit before the restart"
    );
    server.restart()?;
    // The gateway's clients reconnect; the group's old member outlives the restart (DIFF-12).
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    // NOT_LEADER_OR_FOLLOWER (6) is retriable, as a Kafka client treats it: the gateway's
    // broken Iggy connections are replaced as the requests meet them.
    let mut codes = Vec::new();
    for _ in 0..5 {
        let code = commit_one(&mut client, &group, &topic, 0, 4).await?;
        codes.push(code);
        if code != 6 {
            break;
        }
    }
    anyhow::ensure!(codes.last() == Some(&0), "commits after the restart answered {codes:?}");
    let (p0, ..) = fetch_one(&mut client, &group, &topic, 0).await?;
    let (p1, ..) = fetch_one(&mut client, &group, &topic, 1).await?;
    anyhow::ensure!(
        (p0, p1) == (4, 5),
        "after the restart: partition 0 at {p0} (want 4), partition 1 at {p1} (want 5)"
    );
    gateway.stop().await;
    Ok(())
}
