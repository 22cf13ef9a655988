//! The gateway's metrics listener after a run of conformance cases (docs/operating.md): every
//! Kafka API the cases sent shows a non-zero request counter in a scrape of `/metrics` over HTTP.
//!
//! Which APIs were sent is learned independently of the gateway: the cases talk to it through a
//! byte-forwarding proxy that reads each request frame's API key on the way.

use kafka_iggy_conformance::cases::{group_admin_cases, group_cases, wire_cases};
use kafka_iggy_conformance::endpoint::{Endpoint, LocalGateway};
use kafka_iggy_conformance::ops_scrape::{self, get};
use kafka_iggy_conformance::results::Status;
use kafka_iggy_conformance::runner::{self, Filter};
use kafka_iggy_gateway::ops_http::{serve_ops, GatewayOps};
use kafka_iggy_gateway::server::Shutdown;
use kafka_protocol::messages::ApiKey;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// API keys seen in request frames, as the proxy read them.
type Seen = Arc<Mutex<BTreeSet<i16>>>;

/// Forwards client connections to `target`, noting the API key of each request frame.
async fn proxy(listener: TcpListener, target: String, seen: Seen) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let target = target.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&target).await else {
                return;
            };
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let upstream = async move {
                loop {
                    let mut size = [0u8; 4];
                    if client_read.read_exact(&mut size).await.is_err() {
                        break;
                    }
                    let declared = i32::from_be_bytes(size);
                    // A frame the gateway refuses for its size (hostile input): pass the prefix
                    // on and stop reading frames, as the gateway closes the connection.
                    if !(0..=64 * 1024 * 1024).contains(&declared) {
                        let _ = server_write.write_all(&size).await;
                        break;
                    }
                    let mut body = vec![0u8; declared as usize];
                    if client_read.read_exact(&mut body).await.is_err() {
                        break;
                    }
                    if body.len() >= 2 {
                        seen.lock().unwrap().insert(i16::from_be_bytes([body[0], body[1]]));
                    }
                    if server_write.write_all(&size).await.is_err() || server_write.write_all(&body).await.is_err() {
                        break;
                    }
                }
                let _ = server_write.shutdown().await;
            };
            let downstream = async move {
                let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                let _ = client_write.shutdown().await;
            };
            tokio::join!(upstream, downstream);
        });
    }
}

/// The sum of `kafka_iggy_gateway_requests_total` over every version of `api`.
fn requests_of(scrape: &str, api: &str) -> f64 {
    ops_scrape::sum(scrape, "kafka_iggy_gateway_requests_total", &format!("api=\"{api}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_the_cases_sent_has_a_non_zero_request_counter_in_a_scrape() -> anyhow::Result<()> {
    let gateway = LocalGateway::start().await?;
    let ops_listener = TcpListener::bind("127.0.0.1:0").await?;
    let ops_addr = ops_listener.local_addr()?;
    let ops = tokio::spawn(serve_ops(
        ops_listener,
        Arc::new(GatewayOps {
            gateway: gateway.gateway.clone(),
            shutdown: Shutdown::default(),
        }),
    ));
    let seen: Seen = Arc::default();
    let proxy_listener = TcpListener::bind("127.0.0.1:0").await?;
    let proxy_addr = proxy_listener.local_addr()?;
    let proxy_task = tokio::spawn(proxy(proxy_listener, gateway.endpoint.bootstrap.clone(), seen.clone()));
    let endpoint = Endpoint {
        bootstrap: proxy_addr.to_string(),
        ..gateway.endpoint.clone()
    };
    let mut cases = wire_cases::cases();
    cases.extend(group_cases::cases());
    cases.extend(group_admin_cases::cases());
    // Outcomes are not this test's concern (the suites check them); the traffic is.
    let report = runner::run(&endpoint, &cases, &Filter::all()).await;
    assert!(!report.results.is_empty());

    let (status, scrape) = get(ops_addr, "/metrics").await?;
    assert_eq!(status, 200);
    let seen = seen.lock().unwrap().clone();
    let mut missing = Vec::new();
    let mut used = Vec::new();
    for key in &seen {
        let Ok(api) = ApiKey::try_from(*key) else {
            continue; // a hostile case's made-up key: counted under "unknown"
        };
        let name = format!("{api:?}");
        if requests_of(&scrape, &name) == 0.0 {
            missing.push(name.clone());
        }
        used.push(name);
    }
    assert!(
        used.len() >= 10,
        "the cases sent only {used:?} through the proxy: the proxy or the cases are broken"
    );
    assert!(
        missing.is_empty(),
        "APIs sent with no request counter: {missing:?}\n{scrape}"
    );
    // Group members talk to the coordinator Metadata and FindCoordinator name, the gateway
    // itself, past the proxy; the group cases cannot pass without these APIs.
    let group_cases_passed = report
        .results
        .iter()
        .filter(|r| r.area == "group" && r.status == Status::Passed)
        .count();
    assert!(group_cases_passed > 0, "no group case passed");
    for api in [
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "DescribeGroups",
        "ListGroups",
        "DeleteGroups",
    ] {
        assert!(
            requests_of(&scrape, api) > 0.0,
            "{api} has no request counter\n{scrape}"
        );
    }
    for name in [
        "kafka_iggy_gateway_request_duration_seconds_count{api=\"Produce\"}",
        "kafka_iggy_gateway_received_bytes_total",
        "kafka_iggy_gateway_sent_bytes_total",
    ] {
        let value = scrape
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        assert!(value.is_some_and(|v| v > 0.0), "{name}: {value:?}");
    }
    assert_eq!(get(ops_addr, "/healthz").await?.0, 200);
    assert_eq!(get(ops_addr, "/readyz").await?.0, 200);
    println!(
        "APIs used by {} cases, each counted: {}",
        report.results.len(),
        used.join(", ")
    );
    proxy_task.abort();
    ops.abort();
    gateway.stop().await;
    Ok(())
}
