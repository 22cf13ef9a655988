//! The paths the table's rows measure: the native SDK (direct and relayed), the gateway on a real
//! Iggy server (in the bench's process, and as its release binary) and on its embedded backend,
//! and the tansu peer broker when its binary is found.

use super::*;
use kafka_iggy_conformance::bench::start_release_gateway;
use kafka_iggy_conformance::peers::process::{free_port, PeerProcess};
use kafka_iggy_conformance::peers::tansu::Tansu as TansuPeer;
use kafka_iggy_conformance::peers::ProcessPeer;

/// The pinned SDK on the same server: sends of `batch` messages, then polls of `batch` by offset.
pub(super) async fn native(server: &IggyServer, address: &str, args: &Args, topic: &str) -> anyhow::Result<Figures> {
    let client = server.sdk_client_at(address).await?;
    let stream = Identifier::named(NATIVE_STREAM)?;
    let topic_id = Identifier::named(topic)?;
    let _ = client.create_stream(NATIVE_STREAM).await;
    client
        .create_topic(
            &stream,
            topic,
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..Default::default()
            },
        )
        .await?;
    let value = Bytes::from(vec![b'x'; args.record_bytes]);
    let pids: Vec<u32> = server.pid().into_iter().collect();
    // Opened before the clock runs; the poll goes through it after the produce.
    let second_client = if args.native_poll_second_connection {
        Some(server.sdk_client_at(address).await?)
    } else {
        None
    };
    let workload = NativeWorkload {
        stream: &stream,
        topic: &topic_id,
        records: args.records,
        batch: args.native_batch,
        rate_per_s: args.rate,
        watch_pids: &pids,
    };
    let mut figures = run_native(&client, second_client.as_ref(), &workload, |i| {
        native_message(args.native_mapped, i, &value)
    })
    .await?;
    if args.rate.is_none() {
        // The cold reader: a client connected now, polling from the first message, as the
        // librdkafka rows' consumer created after the produce. Its login (a password hash on
        // the server) is left off the clock, which only favours the native row.
        let cold = server.sdk_client_at(address).await?;
        let start = Instant::now();
        poll_all(&cold, &stream, &topic_id, args.records, args.native_batch).await?;
        figures.cold_fetch_s = Some(start.elapsed().as_secs_f64());
    }
    Ok(figures)
}

/// The native row's `i`th message: plain, or with `mapped` the one the gateway stores for the
/// librdkafka rows' `i`th record (keyed by its index, MAP-KEY-1).
pub(super) fn native_message(mapped: bool, i: usize, value: &Bytes) -> anyhow::Result<IggyMessage> {
    if !mapped {
        return Ok(IggyMessage::builder().payload(value.clone()).build()?);
    }
    let record = kig_core::mapping::KafkaRecord {
        timestamp_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis() as i64,
        key: Some(Bytes::from(i.to_string())),
        value: Some(value.clone()),
        headers: Vec::new(),
    };
    let (message, _) = kig_core::mapping::record_to_message(record)?;
    Ok(message)
}

/// The first socket address `address` (`host:port`) resolves to: what a proxy or relay in front
/// of the Iggy server connects to.
pub(super) async fn socket_address(address: &str) -> anyhow::Result<std::net::SocketAddr> {
    tokio::net::lookup_host(address)
        .await?
        .next()
        .with_context(|| format!("{address} resolves to no address"))
}

/// The native row's workload with its SDK client behind a [`Relay`] of its own.
pub(super) async fn native_relayed(
    server: &IggyServer,
    address: &str,
    args: &Args,
    topic: &str,
) -> anyhow::Result<Figures> {
    let relay = Relay::start(socket_address(address).await?, RelayWork::CopyOnly)?;
    let figures = native(server, &relay.address.to_string(), args, topic).await;
    drop(relay);
    figures
}

/// The in-process gateway's options: the defaults, with the read-ahead budget asked for.
pub(super) fn gateway_options(read_ahead_bytes: Option<usize>) -> LocalOptions {
    let mut options = LocalOptions::default();
    options.limits.fetch_read_ahead_bytes = read_ahead_bytes;
    options
}

pub(super) async fn gateway_on_iggy(
    server: &IggyServer,
    address: &str,
    workload: &Workload,
    options: LocalOptions,
    native_topic: Option<&str>,
    batch: usize,
) -> anyhow::Result<(Figures, Option<MappedPoll>)> {
    let workload = &Workload {
        watch_pids: server.pid().into_iter().collect(),
        ..workload.clone()
    };
    let backend = IggyBackend::connect(address, &server.username, &server.password, 8).await?;
    backend.ensure_stream(GATEWAY_STREAM).await?;
    backend
        .create_topic(
            GATEWAY_STREAM,
            &workload.topic,
            TopicSpec {
                partitions: 1,
                message_expiry_us: None,
            },
        )
        .await?;
    // Metered as the gateway binary runs it, which also gives the `backend call` trace events.
    let gateway = LocalGateway::serve(Arc::new(Metered::new(backend)), options).await?;
    let figures = run_workload(&gateway.endpoint.bootstrap, workload).await;
    print_read_ahead("gateway on real Iggy", &gateway.gateway.read_ahead);
    gateway.stop().await;
    // The row stands without it: only the extra reading is lost.
    let mapped_poll = match mapped_poll(
        server,
        address,
        &workload.topic,
        native_topic,
        workload.records(),
        batch,
    )
    .await
    {
        Ok(poll) => Some(poll),
        Err(e) => {
            println!("gateway on real Iggy: its stored messages could not be read back: {e:#}");
            None
        }
    };
    Ok((figures, mapped_poll))
}

/// The gateway-on-Iggy workload through the binary as it ships ([`Row::GatewayIggyBinary`]); its
/// CPU is counted with the server's, by thread kind. A missing binary skips the row.
pub(super) async fn gateway_binary_on_iggy(
    server: &IggyServer,
    address: &str,
    workload: &Workload,
) -> anyhow::Result<Figures> {
    let log = std::env::temp_dir().join(format!("kig-table-gateway-{}.log", std::process::id()));
    // The default settings, the in-process row's too (a pool of 8 SDK clients); credentials in
    // the environment the gateway reads them from, not on its command line.
    let (gateway, gateway_address) = start_release_gateway(
        env!("CARGO_TARGET_TMPDIR"),
        &["--backend", "iggy", "--iggy-address", address],
        vec![
            ("IGGY_KAFKA_IGGY_USERNAME".to_owned(), server.username.clone()),
            ("IGGY_KAFKA_IGGY_PASSWORD".to_owned(), server.password.clone()),
        ],
        &log,
    )?;
    let workload = &Workload {
        watch_pids: server.pid().into_iter().chain([gateway.pid()]).collect(),
        ..workload.clone()
    };
    create_topic(&gateway_address, &workload.topic).await?;
    Ok(run_workload(&gateway_address, workload).await)
}

/// Reads the first `records` messages the gateway stored in `topic` back with the native row's
/// poll ([`MappedPoll`]). When the native row ran before (`native_topic`), its plain messages are
/// read the same way as a control. Each topic is read once through each of two clients opened one
/// after the other, which the server gives to different shards: a topic's partition lives on one
/// shard, and a read through the other is forwarded and dearer, so one client would compare
/// shard paths as much as messages. The order (mapped, plain, plain, mapped) also cancels a
/// steady drift in the server's cost over the run.
pub(super) async fn mapped_poll(
    server: &IggyServer,
    address: &str,
    topic: &str,
    native_topic: Option<&str>,
    records: usize,
    batch: usize,
) -> anyhow::Result<MappedPoll> {
    let first_client = server.sdk_client_at(address).await?;
    let second_client = server.sdk_client_at(address).await?;
    let pids: Vec<u32> = server.pid().into_iter().collect();
    let read_all = |client, stream, topic| timed_poll(client, &pids, stream, topic, records, batch);
    let figures = |reads: &[(f64, f64)]| {
        let polled = (records * reads.len()) as f64;
        PollFigures {
            records_per_s: polled / reads.iter().map(|r| r.0).sum::<f64>(),
            server_us_per_record: reads.iter().map(|r| r.1).sum::<f64>() / polled * 1e6,
        }
    };
    let mapped_first = read_all(&first_client, GATEWAY_STREAM, topic).await?;
    let Some(native_topic) = native_topic else {
        let mapped_second = read_all(&second_client, GATEWAY_STREAM, topic).await?;
        return Ok(MappedPoll {
            mapped: figures(&[mapped_first, mapped_second]),
            plain: None,
        });
    };
    let plain_first = read_all(&second_client, NATIVE_STREAM, native_topic).await?;
    let plain_second = read_all(&first_client, NATIVE_STREAM, native_topic).await?;
    let mapped_second = read_all(&second_client, GATEWAY_STREAM, topic).await?;
    Ok(MappedPoll {
        mapped: figures(&[mapped_first, mapped_second]),
        plain: Some(figures(&[plain_first, plain_second])),
    })
}

/// Elapsed seconds and server CPU seconds of one read of the first `records` messages of
/// `stream`/`topic` through `client`.
pub(super) async fn timed_poll(
    client: &IggyClient,
    pids: &[u32],
    stream: &str,
    topic: &str,
    records: usize,
    batch: usize,
) -> anyhow::Result<(f64, f64)> {
    let mut cpu = PhaseCpu::default();
    let cpu_start = Processes::take(pids);
    let start = Instant::now();
    poll_all(
        client,
        &Identifier::named(stream)?,
        &Identifier::named(topic)?,
        records,
        batch,
    )
    .await?;
    let elapsed_s = start.elapsed().as_secs_f64();
    cpu.add_since(&cpu_start, pids);
    Ok((elapsed_s, cpu.others.total().as_secs_f64()))
}

pub(super) async fn create_topic(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await?;
    for result in results {
        result.map_err(|(topic, code)| anyhow::anyhow!("creating {topic}: {code}"))?;
    }
    Ok(())
}

pub(super) async fn gateway_embedded(workload: &Workload, options: LocalOptions) -> anyhow::Result<Figures> {
    let backend = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
    let gateway = LocalGateway::serve(Arc::new(Metered::new(backend)), options).await?;
    create_topic(&gateway.endpoint.bootstrap, &workload.topic).await?;
    let figures = run_workload(&gateway.endpoint.bootstrap, workload).await;
    print_read_ahead("gateway, embedded", &gateway.gateway.read_ahead);
    gateway.stop().await;
    Ok(figures)
}

/// How often Fetches were served from reads made ahead (FETCH-READAHEAD-1).
pub(super) fn print_read_ahead(label: &str, read_ahead: &kafka_iggy_gateway::read_ahead::ReadAhead) {
    let (started, served, unfinished) = read_ahead.counts();
    eprintln!("{label}: reads made ahead {started}, Fetches served from one {served} ({unfinished} still under way when asked)");
}

pub(super) fn find_tansu(args: &Args) -> Option<PathBuf> {
    if let Some(path) = &args.tansu_bin {
        return Some(path.clone());
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join("tansu")).find(|p| p.is_file())
}

/// A tansu broker with in-memory storage on a free loopback port, launched as the peers
/// matrix launches it.
pub(super) async fn tansu(binary: &Path, workload: &Workload) -> anyhow::Result<Figures> {
    let port = free_port()?;
    let data_dir = std::env::temp_dir();
    let launch = ProcessPeer::launch(&TansuPeer, binary, port, &data_dir)?;
    let log = std::env::temp_dir().join(format!("kig-table-tansu-{}.log", std::process::id()));
    let tansu = PeerProcess::start(&launch, port, &log).map_err(|why| anyhow::anyhow!("tansu: {why}"))?;
    let address = format!("127.0.0.1:{port}");
    let workload = &Workload {
        watch_pids: vec![tansu.pid()],
        ..workload.clone()
    };
    create_topic(&address, &workload.topic).await?;
    Ok(run_workload(&address, workload).await)
}
