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
use crate::gateway::{Gateway, Reply};
use crate::metrics::metrics;
use crate::protocol::frame::{read_admitted_frame, FrameCap, FrameError};
use crate::protocol::response_frame::write_response;
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
}

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<(Self::Stream, SocketAddr)> {
        let (stream, peer) = tokio::net::TcpListener::accept(self).await?;
        stream.set_nodelay(true)?;
        Ok((stream, peer))
    }

    async fn dial(address: String) -> std::io::Result<Self::Stream> {
        tokio::net::TcpStream::connect(address).await
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
/// (PROTO-SHUTDOWN-2).
pub async fn serve<B: Backend, L: Listener>(mut listener: L, gateway: Arc<Gateway<B>>, shutdown: Shutdown) {
    let mut stop = shutdown.subscribe();
    let timers = tokio::spawn({
        let gateway = gateway.clone();
        let stop = shutdown.subscribe();
        async move { gateway.groups.run_timers(stop).await }
    });
    let prober = gateway
        .peer_health
        .has_others()
        .then(|| tokio::spawn(probe_peers::<B, L>(gateway.clone(), shutdown.subscribe())));
    let limits = gateway.config.limits.clone();
    let table = ConnectionTable::new(AdmissionLimits {
        max_connections: limits.max_connections,
        max_connections_per_address: limits.max_connections_per_address.min(limits.max_connections),
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
                                    "refusing connections: {} open, max_connections {}, max_connections_per_address {}, none silent enough to close ({})",
                                    table.len(),
                                    limits.max_connections,
                                    limits.max_connections_per_address,
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
    // The offsets client's connection ends with the server: Iggy drops its memberships.
    gateway.backend.release_client(gateway.offsets_client);
}

/// Counts and logs a connection closed to make room (LIMIT-CONNECTIONS-SHED-1); at debug level,
/// since a flood of silent connections makes one per accept.
/// Probes the peer gateways every `peer_probe_interval` until shutdown (GROUP-COORDINATOR-2),
/// and when a peer's standing changes, lets go of the groups another gateway coordinates now
/// (GROUP-COORDINATOR-3).
async fn probe_peers<B: Backend, L: Listener>(gateway: Arc<Gateway<B>>, mut stop: watch::Receiver<bool>) {
    use crate::peers::{probe, ProbeKind};
    let config = gateway.config.clone();
    // A plaintext probe of a TLS listener learns only that it accepts connections.
    let kind = if config.tls.is_some() {
        ProbeKind::Connect
    } else {
        ProbeKind::ApiVersions
    };
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
        let others: Vec<_> = gateway.peer_health.others().cloned().collect();
        for (index, node) in others.iter().cloned().enumerate() {
            probes.spawn(async move { (index, probe(&L::dial, &node, kind, period).await) });
        }
        let mut answered = vec![false; others.len()];
        while let Some(joined) = probes.join_next().await {
            if let Ok((index, ok)) = joined {
                answered[index] = ok;
            }
        }
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
                tracing::warn!(
                    "peer gateway {} ({}:{}) did not answer {} probes in a row: its groups move to the next gateway up (GROUP-COORDINATOR-2)",
                    node.id,
                    node.host,
                    node.port,
                    config.peer_down_after_probes
                );
            }
        }
        let me = config.advertised.id;
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
    mut stream: S,
    peer: SocketAddr,
    gateway: Arc<Gateway<B>>,
    registration: Registration,
    mut stop: watch::Receiver<bool>,
) {
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
        let admit = |frame_size: usize, chunk: usize| gateway.admit_request_bytes(frame_size, chunk);
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
            read = tokio::time::timeout(config.idle_timeout, read_admitted_frame(&mut stream, cap, config.read_timeout, admit)) => match read {
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
mod tests {
    use super::*;
    use crate::clock::TokioClock;
    use crate::config::{Args, Config, FileConfig};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::mpsc;

    /// Connections handed over in memory: the same server code, no sockets.
    struct ChannelListener(mpsc::Receiver<(DuplexStream, SocketAddr)>);

    impl Listener for ChannelListener {
        type Stream = DuplexStream;
        async fn accept(&mut self) -> std::io::Result<(DuplexStream, SocketAddr)> {
            match self.0.recv().await {
                Some(accepted) => Ok(accepted),
                None => std::future::pending().await,
            }
        }
    }

    /// A stream that counts itself open until the server drops it: a descriptor.
    struct Descriptor {
        stream: DuplexStream,
        open: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Drop for Descriptor {
        fn drop(&mut self) {
            self.open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl AsyncRead for Descriptor {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Descriptor {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.stream).poll_flush(cx)
        }
        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
        }
    }

    /// A listener with `max_open` descriptors: while they are all held, accepting the waiting
    /// connection fails with EMFILE, as the kernel's does.
    struct DescriptorListener {
        incoming: mpsc::Receiver<(DuplexStream, SocketAddr)>,
        waiting: Option<(DuplexStream, SocketAddr)>,
        open: Arc<std::sync::atomic::AtomicUsize>,
        max_open: usize,
    }

    impl Listener for DescriptorListener {
        type Stream = Descriptor;
        async fn accept(&mut self) -> std::io::Result<(Descriptor, SocketAddr)> {
            if self.waiting.is_none() {
                match self.incoming.recv().await {
                    Some(accepted) => self.waiting = Some(accepted),
                    None => std::future::pending().await,
                }
            }
            if self.open.load(std::sync::atomic::Ordering::SeqCst) >= self.max_open {
                return Err(std::io::Error::from_raw_os_error(24)); // EMFILE
            }
            let (stream, peer) = self.waiting.take().expect("a connection waits");
            self.open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let open = self.open.clone();
            Ok((Descriptor { stream, open }, peer))
        }
    }

    /// A listener out of descriptors: every accept fails at once, as with EMFILE, and is counted.
    struct ExhaustedListener(Arc<std::sync::atomic::AtomicUsize>);

    impl Listener for ExhaustedListener {
        type Stream = DuplexStream;
        async fn accept(&mut self) -> std::io::Result<(DuplexStream, SocketAddr)> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(std::io::Error::from_raw_os_error(24)) // EMFILE
        }
    }

    type Incoming = mpsc::Sender<(DuplexStream, SocketAddr)>;

    fn start(idle_ms: u64, read_ms: u64) -> (Incoming, Shutdown, tokio::task::JoinHandle<()>) {
        start_with(FileConfig {
            idle_timeout_ms: Some(idle_ms),
            read_timeout_ms: Some(read_ms),
            ..FileConfig::default()
        })
    }

    fn start_with(file: FileConfig) -> (Incoming, Shutdown, tokio::task::JoinHandle<()>) {
        let config = Config::resolve(Args::default(), file).expect("valid config");
        let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
        let (tx, rx) = mpsc::channel(4);
        let shutdown = Shutdown::default();
        let task = tokio::spawn(serve(ChannelListener(rx), gateway, shutdown.clone()));
        (tx, shutdown, task)
    }

    async fn connect(tx: &Incoming) -> DuplexStream {
        connect_buffered(tx, 64 * 1024).await
    }

    /// A connection whose in-flight bytes, each way, are capped at `buffer_size`.
    async fn connect_buffered(tx: &Incoming, buffer_size: usize) -> DuplexStream {
        connect_from(tx, [127, 0, 0, 1], buffer_size).await
    }

    /// A connection from `address`.
    async fn connect_from(tx: &Incoming, address: [u8; 4], buffer_size: usize) -> DuplexStream {
        let (client, server) = tokio::io::duplex(buffer_size);
        let peer = SocketAddr::from((address, 1));
        tx.send((server, peer)).await.expect("server accepts");
        client
    }

    /// Whether the server closed `client`: a read ends at once instead of waiting.
    async fn closed<S: AsyncRead + Unpin>(client: &mut S) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_millis(1), client.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    /// An ApiVersions v0 request frame (header v1, no client id): its answer lists every API,
    /// far more than the 16 bytes the write-timeout test lets through.
    fn api_versions_v0_frame() -> Vec<u8> {
        let mut frame = 10i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&18i16.to_be_bytes()); // api key
        frame.extend_from_slice(&0i16.to_be_bytes()); // api version
        frame.extend_from_slice(&7i32.to_be_bytes()); // correlation id
        frame.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        frame
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_a_response_the_client_does_not_read_is_abandoned_at_the_write_timeout() {
        let (tx, shutdown, task) = start_with(FileConfig {
            idle_timeout_ms: Some(600_000),
            read_timeout_ms: Some(600_000),
            write_timeout_ms: Some(3_000),
            ..FileConfig::default()
        });
        let mut client = connect_buffered(&tx, 16).await;
        client.write_all(&api_versions_v0_frame()).await.unwrap();
        let started = tokio::time::Instant::now();
        // The client never reads, so the server's write stalls once 16 bytes are in flight.
        // Bytes the client keeps sending fill its own 16-byte direction; the write only fails
        // when the server gives the connection up and drops its end.
        let stalled = tokio::time::timeout(Duration::from_secs(3_600), client.write_all(&[0u8; 64]))
            .await
            .expect("the server still holds the stalled connection after an hour");
        assert!(
            stalled.is_err(),
            "the server read the client's bytes while its response stalled"
        );
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(3_000) && waited < Duration::from_millis(600_000),
            "the server gave up after {waited:?}, not at the 3 s write timeout"
        );
        // What did get through is a truncated response: fewer bytes than its length prefix.
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.unwrap();
        assert!(received.len() >= 4 && received.len() <= 16, "{} bytes", received.len());
        let declared = i32::from_be_bytes(received[..4].try_into().unwrap()) as usize;
        assert!(
            declared > received.len() - 4,
            "the whole response fit: {declared} bytes"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    /// Sends one ApiVersions v0 and reads its whole answer: the connection is being served.
    async fn served<S: AsyncRead + AsyncWrite + Unpin>(client: &mut S) -> bool {
        if client.write_all(&api_versions_v0_frame()).await.is_err() {
            return false;
        }
        let mut size = [0u8; 4];
        if client.read_exact(&mut size).await.is_err() {
            return false;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        client.read_exact(&mut body).await.is_ok()
    }

    fn with_limits(limits: crate::limits::LimitSettings) -> FileConfig {
        FileConfig {
            idle_timeout_ms: Some(600_000),
            read_timeout_ms: Some(5_000),
            limits,
            ..FileConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_1_connections_beyond_the_limit_are_closed_at_once() {
        let (tx, shutdown, task) = start_with(with_limits(crate::limits::LimitSettings {
            max_connections: Some(2),
            ..Default::default()
        }));
        let mut a = connect(&tx).await;
        let mut b = connect(&tx).await;
        assert!(served(&mut a).await && served(&mut b).await);
        let started = tokio::time::Instant::now();
        let mut c = connect(&tx).await;
        let mut byte = [0u8; 1];
        assert_eq!(c.read(&mut byte).await.unwrap(), 0, "the third connection is closed");
        assert_eq!(started.elapsed(), Duration::ZERO, "closed at once, not after a timeout");
        assert!(served(&mut a).await, "the open connections are still served");
        // A closed connection makes room for a new one.
        drop(b);
        let mut d = connect(&tx).await;
        assert!(served(&mut d).await, "a connection is accepted again below the limit");
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_accept_1_failed_accepts_back_off_and_log_once() {
        let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
        let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
        let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let shutdown = Shutdown::default();
        let task = tokio::spawn(serve(ExhaustedListener(attempts.clone()), gateway, shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let tried = attempts.load(std::sync::atomic::Ordering::SeqCst);
        // 10, 20, ... 640 ms, then once a second: 17 tries in 10 s. A loop without a pause
        // never lets paused time advance and makes millions.
        assert!((10..=20).contains(&tried), "{tried} accepts in 10 s");
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_inflight_1_a_frame_waits_for_room_in_the_budget() {
        let (tx, shutdown, task) = start_with(FileConfig {
            max_frame_size: Some(2 * crate::protocol::frame::ADMISSION_CHUNK),
            ..with_limits(crate::limits::LimitSettings {
                max_inflight_request_bytes: Some(crate::protocol::frame::ADMISSION_CHUNK),
                ..Default::default()
            })
        });
        // A declares a large frame, sends part of its first chunk and stalls: it holds that
        // chunk's room, the whole budget here.
        let large = crate::gateway::SMALL_FRAME_BYTES as i32 + 1;
        let mut a = connect(&tx).await;
        a.write_all(&large.to_be_bytes()).await.unwrap();
        a.write_all(&[0u8; 10]).await.unwrap();
        // B's small request needs no room in the budget: it is answered at once.
        let mut b = connect(&tx).await;
        let started = tokio::time::Instant::now();
        assert!(served(&mut b).await);
        assert_eq!(started.elapsed(), Duration::ZERO, "a small frame waited on the budget");
        // C's large frame waits until A's read timeout gives A's bytes back.
        let mut c = connect(&tx).await;
        c.write_all(&large.to_be_bytes()).await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(a.read(&mut byte).await.unwrap(), 0, "A was closed at its read timeout");
        let a_closed = started.elapsed();
        assert!(a_closed >= Duration::from_millis(5_000), "{a_closed:?}");
        // C now holds the budget and, sending nothing more, meets its own read timeout; had it
        // been admitted beside A, it would have been closed at the same moment as A.
        assert_eq!(c.read(&mut byte).await.unwrap(), 0);
        assert!(
            started.elapsed() >= a_closed + Duration::from_millis(5_000),
            "C was closed {:?} after the start, so its wait for room did not count",
            started.elapsed()
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_shutdown_2_shutdown_stops_busy_connections_at_the_timeout() {
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, FetchRequest, RequestHeader, TopicName};
        use kafka_protocol::protocol::{Encodable, StrBytes};
        fn frame<T: Encodable>(key: ApiKey, version: i16, body: &T) -> Vec<u8> {
            let header = RequestHeader::default()
                .with_request_api_key(key as i16)
                .with_request_api_version(version)
                .with_correlation_id(1);
            let mut out = bytes::BytesMut::new();
            header.encode(&mut out, key.request_header_version(version)).unwrap();
            body.encode(&mut out, version).unwrap();
            let mut framed = (out.len() as i32).to_be_bytes().to_vec();
            framed.extend_from_slice(&out);
            framed
        }
        let (tx, shutdown, task) = start_with(FileConfig {
            limits: crate::limits::LimitSettings {
                shutdown_timeout_ms: Some(2_000),
                fetch_max_wait_ms: Some(3_600_000),
                ..Default::default()
            },
            ..FileConfig::default()
        });
        let topic = TopicName(StrBytes::from_static_str("waits"));
        let mut client = connect(&tx).await;
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic.clone())
            .with_num_partitions(1)
            .with_replication_factor(1)]);
        client
            .write_all(&frame(ApiKey::CreateTopics, 4, &create))
            .await
            .unwrap();
        let mut size = [0u8; 4];
        client.read_exact(&mut size).await.unwrap();
        client
            .read_exact(&mut vec![0u8; i32::from_be_bytes(size) as usize])
            .await
            .unwrap();
        // A Fetch that waits an hour for a record that never comes.
        let fetch = FetchRequest::default()
            .with_max_wait_ms(i32::MAX)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(topic).with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(1 << 20),
            ])]);
        client.write_all(&frame(ApiKey::Fetch, 4, &fetch)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = tokio::time::Instant::now();
        shutdown.trigger();
        task.await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(2_000) && waited < Duration::from_secs(3_600),
            "serve ended {waited:?} after the shutdown began"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_idle_connection_is_closed_after_the_idle_timeout() {
        let (tx, shutdown, task) = start(5_000, 30_000);
        let mut client = connect(&tx).await;
        let started = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        // Paused time advances to the server's idle deadline; the read then sees the close.
        assert_eq!(client.read(&mut byte).await.unwrap(), 0);
        assert!(
            started.elapsed() >= Duration::from_millis(5_000),
            "closed before the idle timeout"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_a_started_frame_must_complete_within_the_read_timeout() {
        let (tx, shutdown, task) = start(600_000, 2_000);
        let mut client = connect(&tx).await;
        // Half a length prefix, then nothing: the read timeout, not the idle one, closes it.
        client.write_all(&[0, 0]).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(2_000) && waited < Duration::from_millis(600_000),
            "{waited:?}"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_shutdown_1_shutdown_closes_idle_connections_and_ends_serve() {
        let (tx, shutdown, task) = start(600_000, 30_000);
        let mut client = connect(&tx).await;
        tokio::task::yield_now().await;
        shutdown.trigger();
        task.await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0, "the connection is closed");
    }

    /// A gateway whose listener speaks TLS with the test PKI's server certificate.
    fn start_tls(pki: &crate::tls::test_pki::Pki, read_ms: u64) -> (Incoming, Shutdown, tokio::task::JoinHandle<()>) {
        start_with(FileConfig {
            idle_timeout_ms: Some(600_000),
            read_timeout_ms: Some(read_ms),
            tls: crate::tls::TlsSettings {
                tls_cert: Some(pki.server_cert.clone()),
                tls_key: Some(pki.server_key.clone()),
                tls_client_ca: None,
            },
            ..FileConfig::default()
        })
    }

    async fn tls_connect(
        pki: &crate::tls::test_pki::Pki,
        tx: &Incoming,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<DuplexStream>> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_file(&pki.ca).unwrap())
            .unwrap();
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, connect(tx).await)
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn auth_tls_1_requests_are_served_over_tls_and_plaintext_is_not() {
        let pki = crate::tls::test_pki::generate();
        let (tx, shutdown, task) = start_tls(&pki, 5_000);
        let mut tls = tls_connect(&pki, &tx).await.expect("handshake");
        assert!(served(&mut tls).await, "a request over TLS is answered");
        let mut plain = connect(&tx).await;
        plain.write_all(&api_versions_v0_frame()).await.unwrap();
        let mut received = Vec::new();
        plain.read_to_end(&mut received).await.unwrap();
        // At most a TLS alert record (content type 21), then the close; never a Kafka response.
        assert!(
            received.is_empty() || received[0] == 21,
            "a plaintext request got {received:?}"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn auth_tls_1_a_stalled_handshake_is_closed_at_the_read_timeout_and_stalls_no_one_else() {
        let pki = crate::tls::test_pki::generate();
        let (tx, shutdown, task) = start_tls(&pki, 2_000);
        // Connects and never sends its ClientHello.
        let mut stalled = connect(&tx).await;
        let started = tokio::time::Instant::now();
        let mut tls = tls_connect(&pki, &tx).await.expect("handshake");
        assert!(served(&mut tls).await, "another client is served meanwhile");
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "the other client waited on the stalled one"
        );
        let mut byte = [0u8; 1];
        assert_eq!(
            stalled.read(&mut byte).await.unwrap(),
            0,
            "the stalled client is closed"
        );
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(2_000) && waited < Duration::from_millis(600_000),
            "{waited:?}"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_shed_1_a_silent_connection_makes_room_for_a_new_client() {
        let (tx, shutdown, task) = start_with(with_limits(crate::limits::LimitSettings {
            max_connections: Some(2),
            ..Default::default()
        }));
        let mut talker = connect(&tx).await;
        assert!(served(&mut talker).await);
        // Connects and never sends a byte: it holds the second place.
        let mut silent = connect(&tx).await;
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        let mut newcomer = connect(&tx).await;
        assert!(served(&mut newcomer).await, "the newcomer is served");
        assert_eq!(started.elapsed(), Duration::ZERO, "at once, not after the idle timeout");
        assert!(closed(&mut silent).await, "the silent connection made room");
        assert!(served(&mut talker).await, "the talking connection stays");
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_shed_1_a_failed_accept_sheds_a_silent_connection() {
        let config = Config::resolve(Args::default(), with_limits(Default::default())).expect("valid config");
        let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
        let (tx, incoming) = mpsc::channel(4);
        let listener = DescriptorListener {
            incoming,
            waiting: None,
            open: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            max_open: 2,
        };
        let shutdown = Shutdown::default();
        let task = tokio::spawn(serve(listener, gateway, shutdown.clone()));
        let mut talker = connect(&tx).await;
        assert!(served(&mut talker).await);
        let mut silent = connect(&tx).await;
        tokio::task::yield_now().await;
        // Both descriptors are held: accepting the newcomer fails until one is freed.
        let started = tokio::time::Instant::now();
        let mut newcomer = connect(&tx).await;
        assert!(served(&mut newcomer).await, "the newcomer is served");
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "it waited {:?}, for the idle timeout",
            started.elapsed()
        );
        assert!(closed(&mut silent).await, "the silent connection gave its descriptor");
        assert!(served(&mut talker).await);
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_connections_address_1_one_address_holds_at_most_its_quota() {
        let (tx, shutdown, task) = start_with(with_limits(crate::limits::LimitSettings {
            max_connections: Some(10),
            max_connections_per_address: Some(2),
            ..Default::default()
        }));
        let mut a = connect_from(&tx, [10, 0, 0, 1], 64 * 1024).await;
        let mut b = connect_from(&tx, [10, 0, 0, 1], 64 * 1024).await;
        assert!(served(&mut a).await && served(&mut b).await);
        // Both talk: a third from the same address is refused though the table has room.
        let mut c = connect_from(&tx, [10, 0, 0, 1], 64 * 1024).await;
        assert!(closed(&mut c).await, "the third connection from one address is closed");
        let mut other = connect_from(&tx, [10, 0, 0, 2], 64 * 1024).await;
        assert!(served(&mut other).await, "another address is served");
        // Once a is silent past the shed threshold, a newcomer of its address replaces it.
        tokio::time::advance(Duration::from_millis(crate::limits::DEFAULT_SHED_IDLE_AFTER_MS)).await;
        assert!(served(&mut b).await);
        let mut d = connect_from(&tx, [10, 0, 0, 1], 64 * 1024).await;
        assert!(served(&mut d).await);
        assert!(closed(&mut a).await, "the silent one of its own address made room");
        assert!(
            served(&mut other).await,
            "the other address's connection was not touched"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    fn sasl_on(limits: crate::limits::LimitSettings) -> FileConfig {
        FileConfig {
            sasl: crate::auth::settings::SaslSettings {
                mechanism: Some(crate::auth::settings::Mechanism::Plain),
                ..Default::default()
            },
            ..with_limits(limits)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn limit_preauth_frame_1_a_large_frame_before_authentication_is_refused_from_its_prefix() {
        let (tx, shutdown, task) = start_with(sasl_on(Default::default()));
        let mut client = connect(&tx).await;
        assert!(
            served(&mut client).await,
            "ApiVersions is answered before authentication"
        );
        // Above 512 KiB, below max_frame_size: declared, a little of it sent.
        let declared = crate::limits::DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES as i32 + 1;
        client.write_all(&declared.to_be_bytes()).await.unwrap();
        client.write_all(&[0u8; 100]).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0, "closed without an answer");
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "refused from the prefix, not after the read timeout"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn limit_preauth_deadline_1_a_connection_that_does_not_authenticate_is_closed_at_the_deadline() {
        let (tx, shutdown, task) = start_with(sasl_on(crate::limits::LimitSettings {
            authentication_timeout_ms: Some(10_000),
            ..Default::default()
        }));
        let started = tokio::time::Instant::now();
        let mut client = connect(&tx).await;
        assert!(
            served(&mut client).await,
            "ApiVersions keeps nothing open past the deadline"
        );
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(10_000) && waited < Duration::from_millis(600_000),
            "closed after {waited:?}, not at the 10 s deadline"
        );
        // Without SASL there is no deadline: only the idle timeout closes a connection.
        let (tx, shutdown_open, task_open) = start_with(with_limits(crate::limits::LimitSettings {
            authentication_timeout_ms: Some(10_000),
            ..Default::default()
        }));
        let mut open = connect(&tx).await;
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(served(&mut open).await);
        shutdown.trigger();
        shutdown_open.trigger();
        task.await.unwrap();
        task_open.await.unwrap();
    }
}
