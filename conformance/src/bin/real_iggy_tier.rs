//! The real-Iggy tier: the whole conformance suite against a gateway on the SDK backend and a
//! real Iggy server (see `real_iggy::discover` for how one is reached), then what only a real
//! server can show: the backend over TLS, a server restart (through which the gateway's `/readyz`
//! goes unready and ready again), and the model-vs-real differentials.
//! A binary rather than a test, so that a skipped tier prints `SKIPPED` and the reason, never a
//! passing test count. Exits non-zero when a case fails, or when `IGGY_REQUIRED=1` and no server
//! is reachable.

use anyhow::Context;
use clap::Parser;
use kafka_iggy_conformance::profile::Profile;
use kafka_iggy_conformance::real_iggy::{discover, required, Discovery};
use kafka_iggy_conformance::report::{self, ReportPaths};
use kafka_iggy_conformance::results::Status;
use kafka_iggy_conformance::runner::{CaseInfo, Filter, Report};
use kafka_iggy_conformance::suite::{self, Target};
use kafka_iggy_conformance::{cases::Outcome, differential, endpoint::LocalGateway, endpoint::LocalOptions};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::clock::SystemClock;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "real-iggy-tier",
    about = "The conformance suite and differentials against a real Iggy server"
)]
struct Cli {
    /// Run only the cases whose name contains TEXT.
    filter: Option<String>,
    #[command(flatten)]
    reports: ReportPaths,
}

/// The area the tier's own checks report under.
const AREA: &str = "real_iggy";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
    let filter = &Filter {
        any_of: cli.filter.into_iter().collect(),
    };
    let mut results = suite::run(&Target::Iggy(&server), Profile::Gateway, filter).await?;
    let mut tier = Report::default();
    let backend = Arc::new(server.gateway_backend().await?);

    // AUTH-TLS-3: the SDK backend over TLS to a server with a certificate of a CA it is told.
    let info = CaseInfo {
        area: AREA,
        name: "gateway_backend_connects_to_iggy_over_tls",
        rules: &["AUTH-TLS-3"],
        deviations: &[],
    };
    if filter.selects(info.name) {
        tier.run_case(info, async {
            Ok(match iggy_over_tls(&server).await? {
                true => Outcome::Passed,
                false => Outcome::Skipped("the server was not started by this run".into()),
            })
        })
        .await;
    }

    // A server restart keeps committed offsets and lets the group commit again (CO-RECLAIM-1,
    // fact DIFF-12); the gateway's /readyz answers 503 while the server is down and 200 once it
    // is back (docs/operating.md). Only a server this run started can be restarted.
    let info = CaseInfo {
        area: AREA,
        name: "iggy_restart_keeps_committed_offsets_and_commits_again",
        rules: &["CO-RECLAIM-1"],
        deviations: &[],
    };
    if filter.selects(info.name) {
        if server.restartable() {
            let restart = restart_keeps_commits(&mut server, backend.clone());
            tier.run_case(info, async { restart.await.map(|()| Outcome::Passed) })
                .await;
        } else {
            tier.skip(info, "the server was not started by this run");
        }
    }

    // APPEND-PARTS-1, FETCH-ALIGN-1: an append over the server's disk read chunk goes in
    // contiguous parts, and a read ends where a part ended.
    let info = CaseInfo {
        area: AREA,
        name: "an_append_over_a_chunk_lands_in_contiguous_parts_and_a_read_ends_on_one",
        rules: &["APPEND-PARTS-1", "FETCH-ALIGN-1"],
        deviations: &[],
    };
    if filter.selects(info.name) {
        let backend = backend.clone();
        tier.run_case(info, async move {
            appends_in_parts(backend.as_ref()).await.map(|()| Outcome::Passed)
        })
        .await;
    }

    // Model vs real: the same random operation sequences on both backends.
    let cases: u32 = std::env::var("KIG_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let seed = differential::seed_from_env();
    let info = CaseInfo {
        area: AREA,
        name: "model_and_real_server_observe_the_same_random_sequences",
        rules: &["BACKEND-MODEL-1"],
        deviations: &[],
    };
    if filter.selects(info.name) {
        println!("real-Iggy tier: model vs real: seed {seed} (KIG_DIFF_SEED repeats it), {cases} sequences");
        let model = Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()));
        let handle = tokio::runtime::Handle::current();
        let real = backend.clone();
        let differential = tokio::task::spawn_blocking(move || {
            differential::run_seeded(&handle, model.as_ref(), real.as_ref(), cases, seed)
        });
        tier.run_case(info, async {
            match differential.await? {
                Ok(()) => Ok(Outcome::Passed),
                Err(e) => Err(anyhow::anyhow!("model and real server differ (seed {seed}): {e}")),
            }
        })
        .await;
    }

    // Model vs real for logins and permissions: users with random permission sets, each
    // through its own session (AUTHZ-MODEL-1). Root acts through the SDK on the server.
    let users: u32 = std::env::var("KIG_DIFF_USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let info = CaseInfo {
        area: AREA,
        name: "model_and_real_server_authorize_random_users_alike",
        rules: &["AUTHZ-MODEL-1"],
        deviations: &[],
    };
    if filter.selects(info.name) {
        let model = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
        let server = &server;
        let real = backend.clone();
        tier.run_case(info, async move {
            let admin = differential::IggyAdmin::connect(&server.address, &server.username, &server.password)
                .await
                .map_err(|e| anyhow::anyhow!("logging in as root for the auth differential: {e}"))?;
            let result = differential::run_auth(&model, &model, real.as_ref(), &admin, users, seed).await;
            admin.shutdown().await;
            let r = result.map_err(|e| anyhow::anyhow!("model and real server differ (seed {seed}): {e}"))?;
            println!(
                "real-Iggy tier: model vs real, auth: logins and {} users with random permissions, {} steps observed the same",
                r.users, r.checks
            );
            Ok(Outcome::Passed)
        })
        .await;
    }

    results.cases.extend(tier.results);
    println!("{}", results.totals_line("real-Iggy tier"));
    report::write(&results, &cli.reports)?;
    // Against a real server every case can run: a skip here is a gap, and fails the tier.
    let failed = results.count(Status::Failed) > 0
        || results
            .cases
            .iter()
            .any(|c| c.status == Status::Skipped && !tier_may_skip(&c.name));
    // exit() runs no destructors: the server this run started is stopped first, or it outlives
    // the run (a failing run left iggy-server processes behind).
    drop(backend);
    drop(server);
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// 2,000 messages of 1 KiB in one append (about 2.2 MB stored, so three parts of 667, 667 and
/// 666), then 10 more: the second append's base offset is 2,000, every offset reads back in order
/// with its payload, and a 1 MiB read from 0 stops at the first part's end, 667 messages, where
/// an unaligned read keeps about 1,000.
async fn appends_in_parts(backend: &IggyBackend) -> anyhow::Result<()> {
    use iggy::prelude::IggyMessage;
    use kafka_iggy_gateway::backend::iggy_layout::append_parts;
    use kafka_iggy_gateway::backend::{stored_bytes, Backend, ReadLimits, TopicSpec};
    let stream = "kig-real-tier";
    let topic = format!("append-parts-{}", std::process::id());
    backend.ensure_stream(stream).await?;
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    backend.create_topic(stream, &topic, spec).await?;
    let message = |i: u64, len: usize| -> anyhow::Result<IggyMessage> {
        let mut payload = vec![(i % 251) as u8; len];
        payload[..8].copy_from_slice(&i.to_be_bytes());
        Ok(IggyMessage::builder().payload(payload.into()).build()?)
    };
    let large: Vec<IggyMessage> = (0..2_000).map(|i| message(i, 1_024)).collect::<anyhow::Result<_>>()?;
    let sizes: Vec<u64> = large.iter().map(stored_bytes).collect();
    let parts = append_parts(&sizes);
    anyhow::ensure!(parts.len() == 3, "2,000 messages of 1 KiB split into {parts:?}");
    let first_end = parts[0].end as u64;
    let base = backend.append(stream, &topic, 0, large).await?;
    anyhow::ensure!(base == Some(0), "the parted append's base offset is {base:?}, not 0");
    let small: Vec<IggyMessage> = (2_000..2_010).map(|i| message(i, 100)).collect::<anyhow::Result<_>>()?;
    let base = backend.append(stream, &topic, 0, small).await?;
    anyhow::ensure!(
        base == Some(2_000),
        "the next append's base offset is {base:?}, not 2000"
    );
    let limits = ReadLimits {
        max_messages: 10_000,
        max_bytes: 1 << 20,
    };
    let first = backend.read(stream, &topic, 0, 0, limits).await?;
    anyhow::ensure!(
        first.len() as u64 == first_end,
        "a 1 MiB read from 0 kept {} messages, not the first part's {first_end}",
        first.len()
    );
    let mut next = 0u64;
    while next < 2_010 {
        let read = backend.read(stream, &topic, 0, next, limits).await?;
        anyhow::ensure!(!read.is_empty(), "the read from {next} came back empty");
        for m in read {
            anyhow::ensure!(
                m.header.offset == next,
                "offset {} where {next} was due",
                m.header.offset
            );
            anyhow::ensure!(
                m.payload.len() >= 8 && m.payload[..8] == next.to_be_bytes(),
                "offset {next} holds another message's payload"
            );
            next += 1;
        }
    }
    backend.delete_topic(stream, &topic).await?;
    println!(
        "real-Iggy tier: an append of 2,000 messages went in parts {parts:?}; a 1 MiB read from 0 kept {first_end}"
    );
    Ok(())
}

/// The tier's own checks that need a server this run started; against `IGGY_ADDR` they skip.
fn tier_may_skip(name: &str) -> bool {
    matches!(
        name,
        "gateway_backend_connects_to_iggy_over_tls" | "iggy_restart_keeps_committed_offsets_and_commits_again"
    )
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

/// GETs `/readyz` on `addr` until it answers `want`, for at most [`READYZ_POLLS`] tries; the
/// answers seen, last one first, when it never does.
async fn await_readyz(addr: std::net::SocketAddr, want: u16) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut seen = Vec::new();
    for _ in 0..READYZ_POLLS {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let status: u16 = response.get(9..12).unwrap_or_default().parse()?;
        if status == want {
            return Ok(());
        }
        seen.push(status);
        // The gateway caches a probe's answer for READY_CACHE: ask again once it has lapsed.
        tokio::time::sleep(kafka_iggy_gateway::ops_http::READY_CACHE).await;
    }
    seen.reverse();
    anyhow::bail!("/readyz never answered {want}: {seen:?}")
}

/// Tries of [`await_readyz`]: each waits out the readiness cache, and a probe of a stopped
/// server may take the probe timeout, so this is well over 30 s.
const READYZ_POLLS: usize = 30;

/// Commits through a gateway on the real server, restarts the server, commits again. Across the
/// restart, the gateway's `/readyz` goes 503 while the server is down and 200 when it is back.
async fn restart_keeps_commits(
    server: &mut kafka_iggy_conformance::real_iggy::IggyServer,
    backend: Arc<IggyBackend>,
) -> anyhow::Result<()> {
    use kafka_iggy_conformance::cases::group_cases::support::{commit_one, create_topic, fetch_one, produce};
    use kafka_wire_client::WireClient;
    let gateway = LocalGateway::serve(backend, LocalOptions::default()).await?;
    let ops_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let ops_addr = ops_listener.local_addr()?;
    let ops = tokio::spawn(kafka_iggy_gateway::ops_http::serve_ops(
        ops_listener,
        Arc::new(kafka_iggy_gateway::ops_http::GatewayOps {
            gateway: gateway.gateway.clone(),
            shutdown: kafka_iggy_gateway::server::Shutdown::default(),
        }),
    ));
    await_readyz(ops_addr, 200).await.context("before the restart")?;
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
    server.stop()?;
    await_readyz(ops_addr, 503).await.context("with the server stopped")?;
    server.start_again()?;
    await_readyz(ops_addr, 200).await.context("after the server returned")?;
    println!("real-Iggy tier: /readyz answered 503 while the server was down, 200 once it was back");
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
    ops.abort();
    gateway.stop().await;
    Ok(())
}
