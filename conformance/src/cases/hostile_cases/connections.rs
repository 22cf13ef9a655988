//! Hostile connection patterns: many idle connections, slow senders, unread pipelined answers
//! and connections that send only a frame length prefix.

use super::*;

// ---------------------------------------------------------------------------------------------
// Connections.

/// How many idle connections [`hostile_many_idle_connections`] opens.
pub(super) const IDLE_CONNECTIONS: usize = 1_500;

/// How long it holds them open once opened: the attack's duration, in which the watchdog runs
/// about twenty rounds.
pub(super) const IDLE_HOLD: Duration = Duration::from_secs(1);

/// 1,500 connections that never send a byte, opened after the watchdog's (stopping early, and
/// saying so only if none could be opened, when a connect fails): the endpoint may close those
/// beyond its limit. Once they are dropped, a new connection is answered.
pub async fn hostile_many_idle_connections(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let address = socket_address(&endpoint).await?;
            let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
            let mut stopped_opening = None;
            while idle.len() < IDLE_CONNECTIONS {
                match timeout(LIVENESS, TcpStream::connect(address)).await {
                    Ok(Ok(stream)) => idle.push(stream),
                    Ok(Err(e)) => {
                        stopped_opening = Some(format!("connect failed: {e}"));
                        break;
                    }
                    Err(_) => {
                        stopped_opening = Some(format!("connect took over {LIVENESS:?}"));
                        break;
                    }
                }
            }
            ensure!(
                !idle.is_empty(),
                "not one idle connection could be opened: {}",
                stopped_opening.unwrap_or_default()
            );
            tokio::time::sleep(IDLE_HOLD).await;
            let closed = idle
                .iter()
                .filter(|s| match s.try_read(&mut [0u8; 1]) {
                    Ok(0) => true,
                    Err(e) => closed_by_peer(&e),
                    Ok(_) => false,
                })
                .count();
            tracing::info!(
                opened = idle.len(),
                closed_by_endpoint = closed,
                stopped_opening = stopped_opening.as_deref().unwrap_or("no"),
                "hostile_many_idle_connections"
            );
            let opened = idle.len();
            drop(idle);
            new_connection_answers(
                &endpoint,
                &format!("{opened} idle connections ({closed} closed by the endpoint)"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How long a slow sender trickles.
pub(super) const TRICKLE_FOR: Duration = Duration::from_secs(3);

/// Two slow senders for [`TRICKLE_FOR`]: one trickles a whole ApiVersions request a byte at a
/// time and must then be answered (or closed); the other declares a frame of max_frame_size
/// bytes, trickles a few bytes of its body at a time, then goes silent and disconnects, its
/// frame never complete. Nothing else waits on either.
pub async fn hostile_slow_senders_trickle_frames(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let complete = async {
                let mut client = connect(&endpoint).await?;
                let request = request_frame(
                    ApiKey::ApiVersions,
                    API_VERSIONS_V,
                    5,
                    "kig-hostile",
                    &api_versions_request(),
                )?;
                let mut frame = (request.len() as i32).to_be_bytes().to_vec();
                frame.extend_from_slice(&request);
                let pace = TRICKLE_FOR / frame.len() as u32;
                for byte in &frame {
                    match client.send_bytes(std::slice::from_ref(byte)).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return Ok(()),
                        Err(e) => return Err(e).context("trickling an ApiVersions request"),
                    }
                    tokio::time::sleep(pace).await;
                }
                let what = "an ApiVersions request trickled a byte at a time";
                match timeout(LIVENESS, client.recv_frame()).await {
                    Err(_) => bail!("{what}: neither answered nor closed within {LIVENESS:?} of its last byte"),
                    Ok(Ok(None)) => Ok(()),
                    Ok(Ok(Some(answer))) => {
                        let answered: ApiVersionsResponse =
                            decoded(ApiKey::ApiVersions, API_VERSIONS_V, 5, answer, what)?;
                        ensure!(answered.error_code == NONE, "{what}: error {}", answered.error_code);
                        Ok(())
                    }
                    Ok(Err(e)) => Err(e).context(what),
                }
            };
            let abandoned = async {
                let mut client = connect(&endpoint).await?;
                let declared = i32::try_from(max_frame_size).context("max_frame_size does not fit a frame length")?;
                let started = Instant::now();
                // The length prefix, then four bytes of body every 100 ms.
                let mut chunk = declared.to_be_bytes();
                while started.elapsed() < TRICKLE_FOR {
                    match client.send_bytes(&chunk).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return Ok(()),
                        Err(e) => return Err(e).context("trickling a max_frame_size frame"),
                    }
                    chunk = [0; 4];
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                anyhow::Ok(())
            };
            tokio::try_join!(complete, abandoned)?;
            new_connection_answers(&endpoint, "the slow senders").await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How many requests [`hostile_pipelined_requests_whose_answers_are_not_read`] pipelines.
pub(super) const PIPELINED: usize = 1_000;

/// How long it leaves their answers unread: the attack's duration.
pub(super) const UNREAD_FOR: Duration = Duration::from_secs(2);

/// 1,000 Metadata requests pipelined on one connection, each naming 100 unknown 240-byte
/// topics (about 25 KB each way), on a socket whose receive buffer is 4 KB: the answers fill
/// the buffers and the endpoint's writes stall. They stay unread for [`UNREAD_FOR`]; then the
/// client reads, and every answer must come in request order, until all 1,000 are read or the
/// endpoint closes the connection (it may give up on a client that does not read).
pub async fn hostile_pipelined_requests_whose_answers_are_not_read(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let address = socket_address(&endpoint).await?;
            let socket = if address.is_ipv4() {
                tokio::net::TcpSocket::new_v4()?
            } else {
                tokio::net::TcpSocket::new_v6()?
            };
            socket.set_recv_buffer_size(4096)?;
            let stream = timeout(LIVENESS, socket.connect(address))
                .await
                .context("connecting the pipelining client")??;
            stream.set_nodelay(true)?;
            let (mut reader, mut writer) = stream.into_split();
            let topics: Vec<MetadataRequestTopic> = (0..100)
                .map(|i| MetadataRequestTopic::default().with_name(Some(topic_name(&format!("{i:0>240}")))))
                .collect();
            let request = MetadataRequest::default()
                .with_allow_auto_topic_creation(false)
                .with_topics(Some(topics));
            // The writer runs on its own: once the endpoint stops reading, its writes wait.
            let written = tokio::spawn(async move {
                for correlation_id in 1..=PIPELINED as i32 {
                    let frame = request_frame(ApiKey::Metadata, METADATA_V, correlation_id, "kig-hostile", &request)?;
                    let mut prefixed = BytesMut::with_capacity(frame.len() + 4);
                    prefixed.put_i32(frame.len() as i32);
                    prefixed.put_slice(&frame);
                    match writer.write_all(&prefixed).await {
                        Ok(()) => {}
                        Err(e) if closed_by_peer(&e) => return anyhow::Ok(None),
                        Err(e) => return Err(e).context("writing the pipelined requests"),
                    }
                }
                // Handed back open: the connection stays whole while the answers are read.
                anyhow::Ok(Some(writer))
            });
            tokio::time::sleep(UNREAD_FOR).await;
            let mut answered = 0;
            while answered < PIPELINED {
                let next = answered as i32 + 1;
                let what = format!("the answer to pipelined Metadata request {next} of {PIPELINED}");
                let frame = match timeout(LIVENESS, read_frame(&mut reader)).await {
                    Err(_) => bail!("{what}: neither answered nor closed within {LIVENESS:?}"),
                    Ok(Ok(Some(frame))) => frame,
                    Ok(Ok(None)) => break,
                    Ok(Err(e)) => return Err(e).context(what),
                };
                let _: MetadataResponse = decoded(ApiKey::Metadata, METADATA_V, next, frame, &what)
                    .context("PROTO-ORDER-1: answers must come in request order")?;
                answered += 1;
            }
            // Every answer read means every request was read, so the writer is done; a close
            // fails its next write.
            let writer = timeout(LIVENESS, written)
                .await
                .context("the pipelining writer was still blocked after the reads ended")?
                .context("the pipelining writer")??;
            drop(writer);
            tracing::info!(answered, "hostile_pipelined_requests_whose_answers_are_not_read");
            new_connection_answers(
                &endpoint,
                &format!("{PIPELINED} pipelined requests ({answered} answered)"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How many bytes of frames [`hostile_connections_that_send_only_a_max_frame_length_prefix`]
/// declares in all: more than a server would want to hold for connections that send nothing,
/// little enough for a Kafka broker's default heap.
pub(super) const DECLARED_IN_ALL: usize = 320 * 1024 * 1024;

/// How long it holds them: longer than [`LIVENESS`], so that a server which makes every other
/// request wait for them fails the watchdog.
pub(super) const PREFIXES_HELD_FOR: Duration = Duration::from_secs(12);

/// The value a well-behaved producer writes meanwhile, every [`PRODUCE_PERIOD`]: a batch as
/// large as a producer's default (librdkafka's `batch.size` is 1 MB), and larger than a small
/// request.
pub(super) const PRODUCED_WHILE_HELD: usize = 512 * 1024;

/// How often the well-behaved producer writes: from the start of the hold to its end, so that
/// its writes meet the prefixes however soon the endpoint reads them.
pub(super) const PRODUCE_PERIOD: Duration = Duration::from_secs(1);

/// Connections that each send the 4-byte length prefix of a max_frame_size frame and nothing
/// more, [`DECLARED_IN_ALL`] bytes declared over all of them, held for [`PREFIXES_HELD_FOR`]:
/// the cheapest slow-sender attack, 4 bytes per connection. The endpoint may close them or let
/// them wait; other clients' requests must not wait on them: neither the watchdog's nor a
/// well-behaved producer's [`PRODUCED_WHILE_HELD`]-byte records, one every [`PRODUCE_PERIOD`]
/// while the prefixes are held.
pub async fn hostile_connections_that_send_only_a_max_frame_length_prefix(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let connections = DECLARED_IN_ALL.div_ceil(max_frame_size);
    let declared = i32::try_from(max_frame_size).context("max_frame_size does not fit a frame length")?;
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut producer = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut producer, "kig-hostile-prefixes", 1).await?;
            let mut held = Vec::with_capacity(connections);
            for _ in 0..connections {
                let mut client = connect(&endpoint).await?;
                match client.send_bytes(&declared.to_be_bytes()).await {
                    Ok(()) => held.push(client),
                    Err(e) if closed_by_peer(&e) => {}
                    Err(e) => return Err(e).context("sending a length prefix"),
                }
            }
            let value = vec![b'v'; PRODUCED_WHILE_HELD];
            let holding = held.len();
            let produced = async {
                let hold_started = Instant::now();
                let mut period = tokio::time::interval(PRODUCE_PERIOD);
                let mut written = 0;
                while hold_started.elapsed() < PREFIXES_HELD_FOR {
                    period.tick().await;
                    written += 1;
                    let sent = hold_started.elapsed();
                    produce_ok(&mut producer, &topic, 0, &[&value]).await.with_context(|| {
                        format!(
                            "well-behaved Produce #{written} of a {PRODUCED_WHILE_HELD}-byte record, sent {:.1} s \
                             after {holding} connections began to hold {max_frame_size}-byte frame prefixes",
                            sent.as_secs_f64()
                        )
                    })?;
                }
                anyhow::Ok(())
            };
            let (produced, ()) = tokio::join!(produced, tokio::time::sleep(PREFIXES_HELD_FOR));
            produced?;
            drop(held);
            new_connection_answers(
                &endpoint,
                &format!("{connections} connections declaring {max_frame_size}-byte frames"),
            )
            .await
        })
        .await?;
    Ok(Outcome::Passed)
}
