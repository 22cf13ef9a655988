//! The accept loop and the per-connection request loop, generic over the listener and stream
//! types so the same code runs over tokio sockets and turmoil's simulated ones.
//!
//! A connection answers its requests one at a time, in order (PROTO-ORDER-1), as a Kafka broker
//! does; clients pipeline across connections. So a connection's records are written in the
//! order its requests arrive (DELIVERY-ORDER-1). A connection has one request in flight, and
//! the gateway as a whole at most `max_connections` connections (LIMIT-CONNECTIONS-1), at most
//! `max_connections_per_address` from one address (LIMIT-CONNECTIONS-ADDRESS-1), making room
//! for a newcomer by closing the connection silent longest (LIMIT-CONNECTIONS-SHED-1), and
//! `max_inflight_request_bytes` of frames (LIMIT-INFLIGHT-1). Under SASL, a connection has
//! `authentication_timeout_ms` to authenticate (LIMIT-PREAUTH-DEADLINE-1) and sends frames of at
//! most `max_unauthenticated_frame_bytes` until it has (LIMIT-PREAUTH-FRAME-1). Shutdown stops accepting, lets
//! every connection finish the request it is in, then closes (PROTO-SHUTDOWN-1), within the
//! shutdown timeout (PROTO-SHUTDOWN-2).

use crate::backend::Backend;
use crate::connections::{AdmissionLimits, ConnectionTable, Registration, Shed};
use crate::gateway::Gateway;
use crate::metrics::metrics;
use crate::peer_channel::{PeerListener, Responder};
use crate::protocol::frame::{read_admitted_frame, FrameCap, FrameError, MAX_ADMISSION_CHUNK};
use crate::protocol::response_frame::write_response;
use crate::reply::Reply;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

/// A source of connections.
pub trait Listener: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send;

    /// Connects to `address` (host:port) on the network this listener serves: how the gateway
    /// probes its peers (GROUP-COORDINATOR-2). A listener of no network cannot: its peers never
    /// answer.
    fn dial(address: String) -> impl Future<Output = std::io::Result<Self::Stream>> + Send {
        let _ = address;
        async { Err(std::io::ErrorKind::Unsupported.into()) }
    }

    /// Binds `address` on this listener's network for the peer channel and serves `responder`
    /// there until `stop` (GROUP-COORDINATOR-6), where a stalled client-serving runtime cannot
    /// hold it; resolves once bound. A listener of no network has no peer channel.
    fn serve_peers(
        address: SocketAddr,
        responder: Arc<Responder>,
        stop: watch::Receiver<bool>,
    ) -> impl Future<Output = std::io::Result<PeerListener>> + Send {
        let _ = (address, responder, stop);
        async { Err(std::io::ErrorKind::Unsupported.into()) }
    }
}

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<(Self::Stream, SocketAddr)> {
        let (stream, peer) = tokio::net::TcpListener::accept(self).await?;
        stream.set_nodelay(true)?;
        Ok((stream, peer))
    }

    async fn dial(address: String) -> std::io::Result<Self::Stream> {
        let stream = tokio::net::TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// GROUP-COORDINATOR-6: on a thread and a runtime of their own, so that probes are answered
    /// however busy or blocked the runtime serving clients is. Bound here, on the caller's
    /// thread, so that a port in use fails the start.
    async fn serve_peers(
        address: SocketAddr,
        responder: Arc<Responder>,
        stop: watch::Receiver<bool>,
    ) -> std::io::Result<PeerListener> {
        let listener = std::net::TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let (done, closed) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("kig-peer-channel".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => {
                        runtime.block_on(async move {
                            match tokio::net::TcpListener::from_std(listener) {
                                Ok(listener) => responder.serve(listener, stop).await,
                                Err(e) => tracing::error!("peer channel: cannot serve {address}: {e}"),
                            }
                        });
                        // Every link closes with the runtime, before the close is reported.
                        drop(runtime);
                    }
                    Err(e) => tracing::error!("peer channel: no runtime for {address}: {e}"),
                }
                let _ = done.send(());
            })?;
        Ok(PeerListener::new(closed))
    }
}

/// Tells a running server to shut down.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Sender<bool>);

impl Default for Shutdown {
    fn default() -> Self {
        Self(watch::Sender::new(false))
    }
}

impl Shutdown {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Whether shutdown began (the metrics listener's readiness reads it).
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Back-off after a failed accept (LIMIT-ACCEPT-1): doubles from the first to the last.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A run of refusals or failures that is logged once when it starts and once, with its count,
/// when it ends, rather than once per event.
#[derive(Default)]
struct Burst {
    count: u64,
}

impl Burst {
    /// Counts one event; true when it starts a burst (the caller logs it).
    fn hit(&mut self) -> bool {
        self.count += 1;
        self.count == 1
    }

    /// Ends the burst; the number of events in it, when there was one.
    fn end(&mut self) -> Option<u64> {
        (self.count > 0).then(|| std::mem::take(&mut self.count))
    }
}

/// Serves connections from `listener` until `shutdown` triggers, then waits for every
/// connection to finish its current request, for at most the shutdown timeout
/// (PROTO-SHUTDOWN-2). When it cannot start ([`try_serve`]), it logs why and returns.
pub async fn serve<B: Backend, L: Listener>(listener: L, gateway: Arc<Gateway<B>>, shutdown: Shutdown) {
    if let Err(e) = try_serve(listener, gateway, shutdown).await {
        tracing::error!("not serving: {e}");
    }
}

/// [`serve`], failing at once when the peer channel cannot be served (GROUP-COORDINATOR-6):
/// without it every peer counts this gateway down and takes its groups, which it would keep, so
/// it serves no client either.
pub async fn try_serve<B: Backend, L: Listener>(
    mut listener: L,
    gateway: Arc<Gateway<B>>,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    // GROUP-COORDINATOR-6: peers probe this gateway on a listener of their own; resolved
    // configuration holds a peer channel whenever there are peers.
    let peer_listener = match &gateway.config.peer_channel {
        Some(channel) if gateway.peer_health.has_others() => {
            let responder = Arc::new(Responder::new(
                channel.responder_settings(&gateway.config),
                gateway.peer_rng.clone(),
                gateway.peer_pulse.clone(),
            ));
            let served = L::serve_peers(channel.listen, responder, shutdown.subscribe()).await;
            Some(served.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot serve the peer channel on {} (GROUP-COORDINATOR-6): {e}",
                        channel.listen
                    ),
                )
            })?)
        }
        _ => None,
    };
    let mut stop = shutdown.subscribe();
    let timers = tokio::spawn({
        let gateway = gateway.clone();
        let stop = shutdown.subscribe();
        async move { gateway.groups.run_timers(stop).await }
    });
    let prober = gateway.peer_health.has_others().then(|| {
        tokio::spawn(pulse(gateway.clone(), shutdown.subscribe()));
        tokio::spawn(probe_peers::<B, L>(gateway.clone(), shutdown.subscribe()))
    });
    let limits = gateway.config.limits.clone();
    let table = ConnectionTable::new(AdmissionLimits {
        max_connections: limits.max_connections,
        max_connections_per_address: limits.max_connections_per_address.min(limits.max_connections),
        max_connections_per_prefix: limits.max_connections_per_prefix.min(limits.max_connections),
        prefixes: limits.address_prefixes,
        shed_idle_after_ms: u64::try_from(limits.shed_idle_after.as_millis()).unwrap_or(u64::MAX),
    });
    let mut connections = JoinSet::new();
    let mut refused = Burst::default();
    let mut failed = Burst::default();
    let mut backoff = ACCEPT_BACKOFF_FIRST;
    loop {
        tokio::select! {
            // Branches in written order, not tokio's own random order: a simulation seed must
            // decide every choice the server makes (PROTO-DETERMINISM-1).
            biased;
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff = ACCEPT_BACKOFF_FIRST;
                    if let Some(errors) = failed.end() {
                        tracing::warn!("accepting again after {errors} failed accepts");
                    }
                    while connections.try_join_next().is_some() {}
                    // LIMIT-CONNECTIONS-1, LIMIT-CONNECTIONS-ADDRESS-1: closed at once, so the
                    // client sees it and backs off, instead of waiting in the backlog; unless a
                    // silent connection can make room (LIMIT-CONNECTIONS-SHED-1).
                    let registration = match table.admit(peer.ip()) {
                        Ok((registration, shed)) => {
                            if let Some(shed) = shed {
                                log_shed(&shed, "to admit a new connection");
                            }
                            registration
                        }
                        Err(refusal) => {
                            metrics().limit_hit(refusal.rule());
                            if refused.hit() {
                                tracing::warn!(
                                    %peer,
                                    "refusing connections: {} open, max_connections {}, max_connections_per_address {}, max_connections_per_prefix {}, none silent enough to close ({})",
                                    table.len(),
                                    limits.max_connections,
                                    limits.max_connections_per_address,
                                    limits.max_connections_per_prefix,
                                    refusal.rule()
                                );
                            }
                            drop(stream);
                            continue;
                        }
                    };
                    if let Some(count) = refused.end() {
                        tracing::warn!("accepting connections again after refusing {count}");
                    }
                    tracing::debug!(%peer, "connection accepted");
                    // Every log line of the connection carries its peer as a field. Error level:
                    // the span is on whenever any line is, whatever RUST_LOG says.
                    let span = tracing::error_span!("connection", %peer);
                    connections.spawn(handshake_then_serve(stream, peer, gateway.clone(), registration, shutdown.subscribe()).instrument(span));
                }
                Err(e) => {
                    // LIMIT-ACCEPT-1: an accept that fails (EMFILE, ENFILE, ENOBUFS) fails again
                    // at once; without a pause the loop spins and floods the log.
                    metrics().limit_hit("LIMIT-ACCEPT-1");
                    if failed.hit() {
                        tracing::warn!("accept failed: {e}; backing off up to {ACCEPT_BACKOFF_MAX:?} between tries (LIMIT-ACCEPT-1)");
                    }
                    // LIMIT-CONNECTIONS-SHED-1: a silent connection's descriptor serves the one
                    // waiting; the pause below ends when it has closed.
                    if let Some(shed) = table.shed_for_descriptor() {
                        log_shed(&shed, &format!("to free a descriptor after a failed accept ({e})"));
                    }
                    tokio::select! {
                        biased;
                        _ = stopped(&mut stop) => break,
                        _ = tokio::time::sleep(backoff) => {}
                        // A closing connection frees the descriptor the accept needed.
                        Some(_) = connections.join_next(), if !connections.is_empty() => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // PROTO-SHUTDOWN-2: acknowledged work drains, but a connection stuck in a backend call does
    // not hold the process past the timeout.
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "shutdown: {} connections still busy after {:?}; closing them",
            connections.len(),
            limits.shutdown_timeout
        );
        connections.shutdown().await;
    }
    let _ = timers.await;
    if let Some(prober) = prober {
        let _ = prober.await;
    }
    // The port is free again once serve returns: a restarted gateway binds it at once.
    if let Some(peer_listener) = peer_listener {
        peer_listener.closed().await;
    }
    // The offsets client's connection ends with the server: Iggy drops its memberships.
    gateway.backend.release_client(gateway.offsets_client);
    Ok(())
}

/// GROUP-COORDINATOR-8: beats on the runtime serving clients, so that the peer channel's
/// responder, on a runtime of its own, can tell peers whether this one runs; and when the
/// responder has told them it stalled past `peer_stall_limit`, lets this gateway's groups go and
/// warms up again, as after a restart (GROUP-COORDINATOR-4), since its peers may hold them now.
async fn pulse<B: Backend>(gateway: Arc<Gateway<B>>, mut stop: watch::Receiver<bool>) {
    // Four beats a probe period: a probe a period after the last finds one.
    let period = (gateway.config.peer_probe_interval / 4).max(Duration::from_millis(1));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticker.tick() => {}
        }
        gateway.peer_pulse.beat();
        if gateway.peer_pulse.take_fence() {
            tracing::warn!(
                "this gateway runs again after its peers were told it had stalled: letting its groups go and warming up again (GROUP-COORDINATOR-8)"
            );
            gateway.peer_health.rewarm();
            let_go_of_groups_elsewhere(&gateway);
        }
    }
}

/// Probes the peer gateways every `peer_probe_interval` until shutdown, each over its peer
/// channel (GROUP-COORDINATOR-2, GROUP-COORDINATOR-6, GROUP-COORDINATOR-7), and when a peer's
/// standing changes, lets go of the groups another gateway coordinates now
/// (GROUP-COORDINATOR-3).
async fn probe_peers<B: Backend, L: Listener>(gateway: Arc<Gateway<B>>, mut stop: watch::Receiver<bool>) {
    use crate::peer_channel::{probe, Link, ProbeSettings};
    let config = gateway.config.clone();
    let Some(channel) = config.peer_channel.clone() else {
        return;
    };
    let settings = ProbeSettings {
        me: config.advertised.id,
        secret: channel.secret.clone(),
        rng: gateway.peer_rng.clone(),
    };
    let others: Vec<_> = gateway.peer_health.others().cloned().collect();
    let addresses: Vec<String> = others
        .iter()
        .map(|node| channel.addresses.get(&node.id).cloned().unwrap_or_default())
        .collect();
    // One link per peer, kept from round to round.
    let mut links: Vec<Option<Link<L::Stream>>> = others.iter().map(|_| None).collect();
    let mut last_failure: Vec<Option<String>> = vec![None; others.len()];
    let period = config.peer_probe_interval;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticker.tick() => {}
        }
        let mut probes = JoinSet::new();
        for (index, link) in links.iter_mut().enumerate() {
            let (link, settings) = (link.take(), settings.clone());
            let (node, address) = (others[index].id, addresses[index].clone());
            probes.spawn(async move {
                let dial = L::dial;
                let (link, outcome) = probe(&settings, link, &dial, node, &address, period).await;
                (index, link, outcome)
            });
        }
        let mut answered = vec![false; others.len()];
        while let Some(joined) = probes.join_next().await {
            if let Ok((index, link, outcome)) = joined {
                links[index] = link;
                answered[index] = outcome.answered();
                if let Some(why) = outcome.failure() {
                    tracing::debug!(
                        "peer gateway {} ({}): probe failed: {why}",
                        others[index].id,
                        addresses[index]
                    );
                    last_failure[index] = Some(why);
                }
            }
        }
        metrics().peer_probe_round();
        let changes = gateway.peer_health.record(&answered, config.peer_down_after_probes);
        if changes.is_empty() {
            continue;
        }
        for change in &changes {
            let node = &change.node;
            if change.up {
                tracing::warn!(
                    "peer gateway {} ({}:{}) answers again: its groups move back to it (GROUP-COORDINATOR-2)",
                    node.id,
                    node.host,
                    node.port
                );
            } else {
                let why = others
                    .iter()
                    .position(|n| n.id == node.id)
                    .and_then(|i| last_failure[i].clone())
                    .unwrap_or_default();
                tracing::warn!(
                    "peer gateway {} ({}:{}) did not answer {} probes in a row (last: {why}): its groups move to the next gateway up (GROUP-COORDINATOR-2)",
                    node.id,
                    node.host,
                    node.port,
                    config.peer_down_after_probes
                );
            }
        }
        let_go_of_groups_elsewhere(&gateway);
    }
}

/// Lets go of every group another gateway coordinates now (GROUP-COORDINATOR-3), and of their
/// offsets groups (GROUP-COORDINATOR-5).
fn let_go_of_groups_elsewhere<B: Backend>(gateway: &Arc<Gateway<B>>) {
    let me = gateway.config.advertised.id;
    let handed = gateway
        .groups
        .relinquish(|group| gateway.peer_health.coordinator(group).id == me);
    if !handed.is_empty() {
        tracing::info!(
            "let go of {} groups another gateway coordinates now; their members look the coordinator up again (GROUP-COORDINATOR-3)",
            handed.len()
        );
    }
    // GROUP-COORDINATOR-5: off the probe loop, which a slow Iggy must not hold up.
    let moved = gateway.offset_members.take_moved(|group| gateway.is_coordinator(group));
    if !moved.is_empty() {
        tokio::spawn(leave_moved_offsets_groups(gateway.clone(), moved));
    }
}

/// GROUP-COORDINATOR-5: the offsets clients of this gateway leave the offsets groups of groups
/// another gateway coordinates now, each under the group's commit lock, so no commit of ours
/// rejoins behind the leave; a group that came back meanwhile is left alone.
async fn leave_moved_offsets_groups<B: Backend>(
    gateway: Arc<Gateway<B>>,
    moved: Vec<(
        crate::config::IggyTarget,
        String,
        Arc<crate::auth::sessions::Session<B>>,
    )>,
) {
    for (target, group, session) in moved {
        let lock = gateway.groups.commit_lock(&group);
        let _serialised = lock.lock().await;
        if gateway.is_coordinator(&group) {
            continue;
        }
        if let Err(e) = crate::offset_store::OffsetMembers::leave(&target, &group, &session).await {
            tracing::warn!(
                "{} on {}/{}: did not leave the offsets group of a group another gateway coordinates now; its first commit there reclaims the group (GROUP-COORDINATOR-5, CO-RECLAIM-1): {e}",
                crate::offset_store::offsets_group(&group),
                target.stream,
                target.topic
            );
        }
    }
}

/// Counts and logs a connection closed to make room (LIMIT-CONNECTIONS-SHED-1); at debug level,
/// since a flood of silent connections makes one per accept.
fn log_shed(shed: &Shed, why: &str) {
    metrics().limit_hit("LIMIT-CONNECTIONS-SHED-1");
    tracing::debug!(
        peer = %shed.address,
        "closing a connection silent for {:?}{} {why} (LIMIT-CONNECTIONS-SHED-1)",
        shed.silent_for,
        if shed.spoke { "" } else { " that never sent a request" }
    );
}

/// Runs the connection's request loop, over TLS when the listener has it: the handshake runs
/// here, in the connection's own task, so a client slow to finish it stalls no other accept.
async fn handshake_then_serve<B: Backend, S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    peer: SocketAddr,
    gateway: Arc<Gateway<B>>,
    registration: Registration,
    mut stop: watch::Receiver<bool>,
) {
    let Some(tls) = gateway.config.tls.clone() else {
        return connection(stream, peer, gateway, registration, stop).await;
    };
    // AUTH-TLS-1: bounded by the read timeout, like a started request frame; a client that
    // fails it (a plaintext client; under a client CA, a missing or untrusted client
    // certificate) is closed without a Kafka response.
    let read_timeout = gateway.config.read_timeout;
    let accepted = tokio::select! {
        biased;
        _ = stopped(&mut stop) => return,
        _ = registration.activity.shed() => return,
        accepted = tokio::time::timeout(read_timeout, tokio_rustls::TlsAcceptor::from(tls).accept(stream)) => accepted,
    };
    match accepted {
        Ok(Ok(stream)) => connection(stream, peer, gateway, registration, stop).await,
        Ok(Err(e)) => tracing::debug!("closing connection: TLS handshake failed: {e}"),
        Err(_) => tracing::debug!("closing connection: TLS handshake not done within {read_timeout:?}"),
    }
}

async fn connection<B: Backend, S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    peer: SocketAddr,
    gateway: Arc<Gateway<B>>,
    registration: Registration,
    mut stop: watch::Receiver<bool>,
) {
    // PROTO-FRAME-2: one socket read for a small request, not three.
    let mut stream = tokio::io::BufReader::with_capacity(crate::protocol::frame::READ_BUFFER_BYTES, stream);
    let config = gateway.config.clone();
    let mut auth = gateway.new_connection(peer.ip());
    let _open = metrics().connection_opened();
    let activity = registration.activity.clone();
    // LIMIT-PREAUTH-DEADLINE-1: counted from the start of the Kafka exchange (after TLS).
    let authenticate_by = tokio::time::Instant::now() + config.limits.authentication_timeout;
    let frame_cap = FrameCap::max_frame_size(config.max_frame_size);
    // LIMIT-PREAUTH-FRAME-1: Kafka's sasl.server.max.receive.size, until the client has
    // authenticated; a re-authenticating connection has, and keeps max_frame_size.
    let unauthenticated_cap = FrameCap {
        max_bytes: config.max_frame_size.min(config.limits.max_unauthenticated_frame_bytes),
        setting: "max_unauthenticated_frame_bytes",
        rule: "LIMIT-PREAUTH-FRAME-1",
    };
    loop {
        let unauthenticated = auth.is_unauthenticated();
        let cap = if unauthenticated {
            unauthenticated_cap
        } else {
            frame_cap
        };
        let deadline = async {
            if unauthenticated {
                tokio::time::sleep_until(authenticate_by).await
            } else {
                std::future::pending().await
            }
        };
        // LIMIT-INFLIGHT-1: a frame's bytes are admitted against the gateway-wide budget as they
        // arrive, before they are allocated; the permits are held until the response is written.
        let admit =
            |frame_size: usize, received: usize, chunk: usize| gateway.admit_request_bytes(frame_size, received, chunk);
        let most_admitted_bytes = MAX_ADMISSION_CHUNK.min(config.limits.max_inflight_request_bytes);
        let (frame, _permit) = tokio::select! {
            // Branches in written order, not tokio's own random order: a simulation seed must
            // decide every choice the server makes (PROTO-DETERMINISM-1).
            biased;
            _ = stopped(&mut stop) => break,
            _ = activity.shed() => break,
            _ = deadline => {
                not_authenticated_in_time(config.limits.authentication_timeout);
                break;
            }
            read = tokio::time::timeout(config.idle_timeout, read_admitted_frame(&mut stream, cap, config.read_timeout, most_admitted_bytes, admit)) => match read {
                Err(_) => {
                    tracing::debug!("closing idle connection after {:?}", config.idle_timeout);
                    break;
                }
                Ok(Ok(Some(frame))) => frame,
                Ok(Ok(None)) => break,
                Ok(Err(FrameError::Io(e))) => {
                    tracing::debug!("connection read failed: {e}");
                    break;
                }
                Ok(Err(e)) => {
                    // PROTO-FRAME-1, PROTO-TIMEOUT-1
                    tracing::error!("closing connection: {e}");
                    break;
                }
            },
        };
        // One instrumentation point for every API: labels from the header's first bytes, one
        // span per request so its log lines carry the API and correlation id as fields.
        let received = frame.len() + 4;
        let labels = crate::metrics::RequestLabels::peek(&frame, auth.expects_raw_token());
        let span = tracing::error_span!(
            "request",
            api = labels.api_name(),
            correlation_id = labels.correlation_id
        );
        let started = std::time::Instant::now();
        activity.request_started();
        // LIMIT-PREAUTH-DEADLINE-1: a login queued behind an address's earlier attempts
        // (AUTH-SASL-THROTTLE-1) waits no longer than the deadline.
        let handled = if unauthenticated {
            tokio::select! {
                biased;
                handled = gateway.handle(frame, &mut auth).instrument(span) => handled,
                _ = tokio::time::sleep_until(authenticate_by) => {
                    not_authenticated_in_time(config.limits.authentication_timeout);
                    break;
                }
            }
        } else {
            gateway.handle(frame, &mut auth).instrument(span).await
        };
        let handled_in = started.elapsed();
        metrics().record_request(&labels, received, handled_in, handled.is_err());
        // A timeline of requests to lay beside a client's (docs/operating.md, "Timelines").
        tracing::trace!(
            api = labels.api_name(),
            correlation_id = labels.correlation_id,
            handled_us = handled_in.as_micros() as u64,
            "request handled"
        );
        let (body, close) = match handled {
            Ok(Reply::Frame(body)) => (body, false),
            // AUTH-SASL-FAIL-1: the answer goes out, then the connection closes.
            Ok(Reply::FrameThenClose(body)) => (body, true),
            Ok(Reply::Nothing) => {
                activity.request_done();
                continue;
            }
            Err(e) => {
                // PROTO-VERSION-2, PROTO-MALFORMED-1, LIMIT-ENTRIES-1,
                // PROTO-ENCODE-1, AUTH-SASL-GATE-1
                tracing::error!("closing connection: {e}");
                break;
            }
        };
        match tokio::time::timeout(config.write_timeout, write_response(&mut stream, &body)).await {
            Ok(Ok(())) => {
                metrics().add_sent_bytes(body.len() + 4);
                activity.request_done();
            }
            Ok(Err(e)) => {
                tracing::debug!("connection write failed: {e}");
                break;
            }
            Err(_) => {
                tracing::error!(
                    "closing connection: response not written within {:?}",
                    config.write_timeout
                );
                break;
            }
        }
        if close {
            break;
        }
    }
}

/// Counts and logs a connection closed for not authenticating in time
/// (LIMIT-PREAUTH-DEADLINE-1); at debug level, as a flood makes one per connection.
fn not_authenticated_in_time(timeout: Duration) {
    metrics().limit_hit("LIMIT-PREAUTH-DEADLINE-1");
    tracing::debug!(
        "closing connection: SASL authentication not completed within {timeout:?} (LIMIT-PREAUTH-DEADLINE-1)"
    );
}

#[cfg(test)]
mod tests;
