//! The peer channel: how gateways probe one another (GROUP-COORDINATOR-2), apart from Kafka
//! clients.
//!
//! - GROUP-COORDINATOR-6: probes go to a listener of their own (`peer_listen`), with a
//!   connection table of its own, served on a thread and runtime of their own, so neither a
//!   flood of client connections filling `max_connections` nor a stall of the runtime serving
//!   clients makes them fail. Kafka keeps controller and inter-broker traffic off its client
//!   listeners the same way (`control.plane.listener.name`, KIP-291; `controller.listener.names`).
//! - GROUP-COORDINATOR-7: both ends prove they hold the peers' shared secret (`peer_secret`)
//!   before a probe is answered or believed: an HMAC-SHA256 challenge and answer over fresh
//!   nonces from both sides, then one tag per probe and per answer under a key of that
//!   connection, with probe numbers that only go up. Every message has a fixed size, so nothing
//!   a client sends sizes an allocation.
//! - GROUP-COORDINATOR-8: an answer says whether the runtime serving this gateway's clients has
//!   run lately; one that has not for `peer_stall_limit` counts as a failed probe, and the
//!   stalled gateway, once it runs again, lets its groups go and warms up as one that restarted.
//!
//! A prober keeps one connection (a [`Link`]) to each peer and probes over it each period; a
//! link that fails is replaced by a new connection in the next probe. The responder keeps one
//! authenticated link per peer (a newer one closes the older) and never closes one for a
//! newcomer; connections that have not authenticated are shed, oldest first, when the table is
//! full (LIMIT-CONNECTIONS-SHED-1's choice), and closed after [`HANDSHAKE_TIMEOUT`] anyway.

use crate::auth::credentials::Secret;
use crate::clock::SharedRng;
use crate::connections::{Activity, AdmissionLimits, ConnectionTable, Registration};
use crate::metrics::metrics;
use crate::server::Listener;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

type HmacSha256 = Hmac<Sha256>;

/// The first bytes the responder sends: this is a peer channel, of this version.
const MAGIC: [u8; 4] = *b"KIGP";
const VERSION: u8 = 1;
const NONCE_BYTES: usize = 32;
const TAG_BYTES: usize = 32;
/// Responder → prober: magic, version, the responder's node id, its nonce.
const HELLO_BYTES: usize = 4 + 1 + 4 + NONCE_BYTES;
/// Prober → responder: the prober's node id, its nonce, its tag over both nonces.
const AUTH_BYTES: usize = 4 + NONCE_BYTES + TAG_BYTES;
/// Responder → prober: the responder's tag over both nonces.
const ACCEPT_BYTES: usize = TAG_BYTES;
/// Prober → responder: the probe's number and its tag.
const PROBE_BYTES: usize = 8 + TAG_BYTES;
/// Responder → prober: the probe's number, whether its clients are served, for how long its
/// serving runtime has not been seen to run (ms), and the tag over them.
const ANSWER_BYTES: usize = 8 + 1 + 4 + TAG_BYTES;

/// The shortest `peer_secret` accepted: 128 bits, if each byte were random.
pub const MIN_SECRET_BYTES: usize = 16;
/// How long a connection to the peer listener has to authenticate, and a write may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Places in the peer listener's table beyond one per peer: room for peers reconnecting while
/// connections that never authenticate come and go.
const SPARE_PLACES: usize = 16;

/// Why a peer-channel exchange ended.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("not a gateway's peer channel (wrong magic or version)")]
    NotAPeerChannel,
    #[error("the peer channel at this address is node {found}'s, not node {expected}'s")]
    WrongNode { expected: i32, found: i32 },
    #[error("node {0} is not a configured peer")]
    UnknownPeer(i32),
    #[error("a tag does not verify: not the shared peer_secret")]
    BadTag,
    #[error("closed before accepting this gateway: a different peer_secret, or not listed as its peer")]
    Refused,
    #[error("probe {seq} after probe {last}: not a fresh probe")]
    Replay { seq: u64, last: u64 },
}

impl PeerError {
    /// Whether the other end failed to authenticate (GROUP-COORDINATOR-7), rather than the
    /// network failing: counted, so that an operator sees a client posing as a peer.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            PeerError::NotAPeerChannel | PeerError::UnknownPeer(_) | PeerError::BadTag | PeerError::Replay { .. }
        )
    }
}

/// HMAC-SHA256 of `parts` under `key`, after `label`: every part has a fixed size, so the
/// concatenation is unambiguous, and the label keeps a tag of one kind from passing as another.
fn tag(key: &[u8], label: &str, parts: &[&[u8]]) -> [u8; TAG_BYTES] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(label.as_bytes());
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Whether `claimed` is the tag of `parts` under `key`, compared in constant time.
fn verifies(key: &[u8], label: &str, parts: &[&[u8]], claimed: &[u8]) -> bool {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(label.as_bytes());
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(claimed).is_ok()
}

/// What both ends of one connection authenticate: who answers, who probes, and both nonces.
struct Transcript([u8; 8 + 2 * NONCE_BYTES]);

impl Transcript {
    fn new(responder: i32, prober: i32, responder_nonce: &[u8], prober_nonce: &[u8]) -> Self {
        let mut t = [0u8; 8 + 2 * NONCE_BYTES];
        t[..4].copy_from_slice(&responder.to_be_bytes());
        t[4..8].copy_from_slice(&prober.to_be_bytes());
        t[8..8 + NONCE_BYTES].copy_from_slice(responder_nonce);
        t[8 + NONCE_BYTES..].copy_from_slice(prober_nonce);
        Self(t)
    }

    fn prober_tag(&self, secret: &Secret) -> [u8; TAG_BYTES] {
        tag(secret.expose().as_bytes(), "kig-peer/1 prober", &[&self.0])
    }

    fn responder_tag(&self, secret: &Secret) -> [u8; TAG_BYTES] {
        tag(secret.expose().as_bytes(), "kig-peer/1 responder", &[&self.0])
    }

    /// The key of this connection's probes and answers.
    fn session_key(&self, secret: &Secret) -> [u8; TAG_BYTES] {
        tag(secret.expose().as_bytes(), "kig-peer/1 session", &[&self.0])
    }
}

/// One answer's content, the part its tag covers.
fn answer_body(seq: u64, serving: bool, stalled_ms: u32) -> [u8; ANSWER_BYTES - TAG_BYTES] {
    let mut body = [0u8; ANSWER_BYTES - TAG_BYTES];
    body[..8].copy_from_slice(&seq.to_be_bytes());
    body[8] = u8::from(serving);
    body[9..].copy_from_slice(&stalled_ms.to_be_bytes());
    body
}

/// Reads exactly `N` bytes within `limit`.
async fn read_within<S: AsyncRead + Unpin, const N: usize>(
    stream: &mut S,
    limit: Duration,
) -> Result<[u8; N], PeerError> {
    let mut buf = [0u8; N];
    match tokio::time::timeout(limit, stream.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Ok(buf),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(PeerError::Timeout(limit)),
    }
}

/// Writes all of `bytes` within `limit`.
async fn write_within<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8], limit: Duration) -> Result<(), PeerError> {
    match tokio::time::timeout(limit, stream.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(PeerError::Timeout(limit)),
    }
}

// ---------------------------------------------------------------------------------------------
// The prober's side.

/// What a prober needs: who it is, the shared secret, and where its nonces come from.
#[derive(Clone)]
pub struct ProbeSettings {
    pub me: i32,
    pub secret: Secret,
    pub rng: SharedRng,
}

/// An authenticated connection to one peer, probed each period.
pub struct Link<S> {
    stream: S,
    key: [u8; TAG_BYTES],
    seq: u64,
}

/// What a peer said of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Whether its client-serving runtime ran within its stall limit (GROUP-COORDINATOR-8).
    pub serving: bool,
    /// How long its serving runtime had not been seen to run, in ms.
    pub stalled_ms: u32,
}

/// What one probe found.
#[derive(Debug)]
pub enum ProbeOutcome {
    /// An authenticated answer from a peer that serves its clients.
    Serving,
    /// An authenticated answer from a peer whose serving runtime has stalled past its limit.
    Stalled {
        for_ms: u32,
    },
    Failed(PeerError),
}

impl ProbeOutcome {
    /// Whether the probe counts as answered (GROUP-COORDINATOR-2).
    pub fn answered(&self) -> bool {
        matches!(self, ProbeOutcome::Serving)
    }

    /// Why it does not, for the log.
    pub fn failure(&self) -> Option<String> {
        match self {
            ProbeOutcome::Serving => None,
            ProbeOutcome::Stalled { for_ms } => Some(format!(
                "its client-serving runtime has not run for {for_ms} ms (GROUP-COORDINATOR-8)"
            )),
            ProbeOutcome::Failed(e) => Some(e.to_string()),
        }
    }
}

/// GROUP-COORDINATOR-7, the prober's half of the handshake on a new connection to `node`.
async fn open_link<S: AsyncRead + AsyncWrite + Unpin>(
    settings: &ProbeSettings,
    mut stream: S,
    node: i32,
) -> Result<Link<S>, PeerError> {
    let hello: [u8; HELLO_BYTES] = read_within(&mut stream, HANDSHAKE_TIMEOUT).await?;
    if hello[..4] != MAGIC || hello[4] != VERSION {
        return Err(PeerError::NotAPeerChannel);
    }
    let responder = i32::from_be_bytes(hello[5..9].try_into().expect("4 bytes"));
    if responder != node {
        return Err(PeerError::WrongNode {
            expected: node,
            found: responder,
        });
    }
    let nonce: [u8; NONCE_BYTES] = settings.rng.bytes();
    let transcript = Transcript::new(responder, settings.me, &hello[9..], &nonce);
    let mut auth = [0u8; AUTH_BYTES];
    auth[..4].copy_from_slice(&settings.me.to_be_bytes());
    auth[4..4 + NONCE_BYTES].copy_from_slice(&nonce);
    auth[4 + NONCE_BYTES..].copy_from_slice(&transcript.prober_tag(&settings.secret));
    write_within(&mut stream, &auth, HANDSHAKE_TIMEOUT).await?;
    let accept: [u8; ACCEPT_BYTES] = match read_within(&mut stream, HANDSHAKE_TIMEOUT).await {
        Ok(accept) => accept,
        // The responder closes without a word on a tag it cannot verify.
        Err(PeerError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(PeerError::Refused),
        Err(e) => return Err(e),
    };
    if !verifies(
        settings.secret.expose().as_bytes(),
        "kig-peer/1 responder",
        &[&transcript.0],
        &accept,
    ) {
        return Err(PeerError::BadTag);
    }
    Ok(Link {
        stream,
        key: transcript.session_key(&settings.secret),
        seq: 0,
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin> Link<S> {
    /// Sends the next probe and reads its answer, both tagged under the link's key.
    async fn ask(&mut self) -> Result<Answer, PeerError> {
        self.seq += 1;
        let seq = self.seq.to_be_bytes();
        let mut probe = [0u8; PROBE_BYTES];
        probe[..8].copy_from_slice(&seq);
        probe[8..].copy_from_slice(&tag(&self.key, "kig-peer/1 probe", &[&seq]));
        self.stream.write_all(&probe).await?;
        let mut answer = [0u8; ANSWER_BYTES];
        self.stream.read_exact(&mut answer).await?;
        let (body, claimed) = answer.split_at(ANSWER_BYTES - TAG_BYTES);
        if !verifies(&self.key, "kig-peer/1 answer", &[body], claimed) {
            return Err(PeerError::BadTag);
        }
        let answered = u64::from_be_bytes(body[..8].try_into().expect("8 bytes"));
        if answered != self.seq {
            return Err(PeerError::Replay {
                seq: answered,
                last: self.seq,
            });
        }
        Ok(Answer {
            serving: body[8] == 1,
            stalled_ms: u32::from_be_bytes(body[9..13].try_into().expect("4 bytes")),
        })
    }
}

/// One probe of `node`, whose peer channel is at `address`, within `timeout`: over `link` when
/// there is one, else, or when it fails, over a new connection through `dial`. The link to keep
/// for the next probe, and what the probe found.
pub async fn probe<S, F, Fut>(
    settings: &ProbeSettings,
    link: Option<Link<S>>,
    dial: &F,
    node: i32,
    address: &str,
    timeout: Duration,
) -> (Option<Link<S>>, ProbeOutcome)
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn(String) -> Fut,
    Fut: Future<Output = std::io::Result<S>>,
{
    let attempt = async {
        if let Some(mut link) = link {
            // A link that broke since the last round (the peer restarted) is replaced at once.
            if let Ok(answer) = link.ask().await {
                return Ok((link, answer));
            }
        }
        let stream = dial(address.to_string()).await?;
        let mut link = open_link(settings, stream, node).await?;
        let answer = link.ask().await?;
        Ok::<_, PeerError>((link, answer))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok((link, answer))) if answer.serving => (Some(link), ProbeOutcome::Serving),
        Ok(Ok((link, answer))) => (
            Some(link),
            ProbeOutcome::Stalled {
                for_ms: answer.stalled_ms,
            },
        ),
        Ok(Err(e)) => (None, ProbeOutcome::Failed(e)),
        Err(_) => (None, ProbeOutcome::Failed(PeerError::Timeout(timeout))),
    }
}

// ---------------------------------------------------------------------------------------------
// The responder's side.

/// Whether the runtime serving clients runs (GROUP-COORDINATOR-8): it beats from a task on that
/// runtime; the responder, on a runtime of its own, watches the beats. When the responder has
/// told a peer that the serving runtime stalled, it raises the fence, which the serving runtime
/// finds when it runs again.
#[derive(Debug, Default)]
pub struct ServingPulse {
    beats: AtomicU64,
    fenced: AtomicBool,
}

impl ServingPulse {
    /// One beat of the serving runtime.
    pub fn beat(&self) {
        self.beats.fetch_add(1, Ordering::Release);
    }

    /// Whether the responder told a peer this gateway stalled since the last call.
    pub fn take_fence(&self) -> bool {
        self.fenced.swap(false, Ordering::AcqRel)
    }
}

/// The peer channel's settings a responder needs.
#[derive(Debug, Clone)]
pub struct ResponderSettings {
    pub me: i32,
    /// The other configured gateways' node ids: only they may probe.
    pub peers: BTreeSet<i32>,
    pub secret: Secret,
    /// GROUP-COORDINATOR-8: how long the serving runtime may go unseen.
    pub stall_limit: Duration,
    /// How long an authenticated link may go without a probe before it is closed.
    pub idle_timeout: Duration,
}

/// Answers the peers' probes on the peer listener.
pub struct Responder {
    settings: ResponderSettings,
    rng: SharedRng,
    pulse: Arc<ServingPulse>,
    table: Arc<ConnectionTable>,
    /// Each peer's authenticated link: a newer one closes the older.
    links: Mutex<HashMap<i32, Arc<Activity>>>,
    /// The serving runtime's beat count when the responder last saw it change, and when.
    seen: Mutex<Option<(u64, Instant)>>,
}

impl Responder {
    pub fn new(settings: ResponderSettings, rng: SharedRng, pulse: Arc<ServingPulse>) -> Self {
        let places = SPARE_PLACES + 2 * settings.peers.len();
        // LIMIT-CONNECTIONS-SHED-1's choice, on a table of its own: a newcomer sheds the
        // oldest connection that has not authenticated; an authenticated link is busy for good
        // and never shed for one.
        let table = ConnectionTable::new(AdmissionLimits {
            max_connections: places,
            max_connections_per_address: places,
            max_connections_per_prefix: places,
            prefixes: Default::default(),
            shed_idle_after_ms: u64::MAX,
        });
        Self {
            settings,
            rng,
            pulse,
            table,
            links: Mutex::new(HashMap::new()),
            seen: Mutex::new(None),
        }
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Activity>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// GROUP-COORDINATOR-8: whether the serving runtime ran within the stall limit, and for how
    /// long it has not been seen to; raises the fence when it did not.
    fn serving(&self) -> (bool, u32) {
        let beats = self.pulse.beats.load(Ordering::Acquire);
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let since = match *seen {
            Some((count, at)) if count == beats => at,
            _ => {
                *seen = Some((beats, now));
                now
            }
        };
        let stalled = now.saturating_duration_since(since);
        let serving = stalled < self.settings.stall_limit;
        if !serving && !self.pulse.fenced.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                "the runtime serving clients has not run for {stalled:?} (peer_stall_limit {:?}): telling the peers, which take this gateway's groups; it lets them go when it runs again (GROUP-COORDINATOR-8)",
                self.settings.stall_limit
            );
        }
        (serving, u32::try_from(stalled.as_millis()).unwrap_or(u32::MAX))
    }

    /// Serves the peer channel on `listener` until `stop`; every link closes with it.
    pub async fn serve<L: Listener>(self: Arc<Self>, mut listener: L, mut stop: watch::Receiver<bool>) {
        let mut links = JoinSet::new();
        let mut backoff = Duration::from_millis(10);
        loop {
            let accepted = tokio::select! {
                // Written order, as the client listener's: a simulation seed decides every
                // choice (PROTO-DETERMINISM-1).
                biased;
                _ = stop.wait_for(|s| *s) => break,
                accepted = listener.accept() => accepted,
                Some(_) = links.join_next(), if !links.is_empty() => continue,
            };
            match accepted {
                Ok((stream, peer)) => {
                    backoff = Duration::from_millis(10);
                    while links.try_join_next().is_some() {}
                    match self.table.admit(peer.ip()) {
                        Ok((registration, _shed)) => {
                            links.spawn(self.clone().connection(stream, peer, registration));
                        }
                        Err(_) => {
                            // Every place holds an authenticated link: only peers can do that.
                            metrics().limit_hit("GROUP-COORDINATOR-6");
                            tracing::debug!(%peer, "peer channel: every place holds a peer's link; closing the newcomer (GROUP-COORDINATOR-6)");
                        }
                    }
                }
                Err(e) => {
                    // As LIMIT-ACCEPT-1: a failed accept fails again at once.
                    tracing::debug!("peer channel: accept failed: {e}");
                    tokio::select! {
                        biased;
                        _ = stop.wait_for(|s| *s) => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
        links.shutdown().await;
    }

    /// One connection to the peer listener, until it closes, fails, or is shed or replaced.
    async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
        self: Arc<Self>,
        mut stream: S,
        peer: SocketAddr,
        registration: Registration,
    ) {
        let activity = registration.activity.clone();
        let ended = tokio::select! {
            biased;
            _ = activity.shed() => return,
            ended = self.converse(&mut stream, &activity) => ended,
        };
        self.links().retain(|_, link| !Arc::ptr_eq(link, &activity));
        if let Err(e) = ended {
            if e.is_refusal() {
                // GROUP-COORDINATOR-7: counted, logged at debug: a scan of the port would
                // otherwise write a line per connection.
                metrics().limit_hit("GROUP-COORDINATOR-7");
                tracing::debug!(%peer, "peer channel: refused a connection that did not authenticate as a peer: {e} (GROUP-COORDINATOR-7)");
            } else {
                tracing::debug!(%peer, "peer channel: connection ended: {e}");
            }
        }
    }

    /// GROUP-COORDINATOR-7, the responder's half, then the probes.
    async fn converse<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        activity: &Arc<Activity>,
    ) -> Result<(), PeerError> {
        let nonce: [u8; NONCE_BYTES] = self.rng.bytes();
        let mut hello = [0u8; HELLO_BYTES];
        hello[..4].copy_from_slice(&MAGIC);
        hello[4] = VERSION;
        hello[5..9].copy_from_slice(&self.settings.me.to_be_bytes());
        hello[9..].copy_from_slice(&nonce);
        write_within(stream, &hello, HANDSHAKE_TIMEOUT).await?;
        let auth: [u8; AUTH_BYTES] = read_within(stream, HANDSHAKE_TIMEOUT).await?;
        let prober = i32::from_be_bytes(auth[..4].try_into().expect("4 bytes"));
        if !self.settings.peers.contains(&prober) {
            return Err(PeerError::UnknownPeer(prober));
        }
        let transcript = Transcript::new(self.settings.me, prober, &nonce, &auth[4..4 + NONCE_BYTES]);
        if !verifies(
            self.settings.secret.expose().as_bytes(),
            "kig-peer/1 prober",
            &[&transcript.0],
            &auth[4 + NONCE_BYTES..],
        ) {
            return Err(PeerError::BadTag);
        }
        write_within(
            stream,
            &transcript.responder_tag(&self.settings.secret),
            HANDSHAKE_TIMEOUT,
        )
        .await?;
        // Authenticated: busy for good, so never shed for a newcomer; the peer's older link,
        // if any, goes.
        activity.request_started();
        if let Some(older) = self.links().insert(prober, activity.clone()) {
            older.close();
        }
        let key = transcript.session_key(&self.settings.secret);
        let mut last = 0u64;
        loop {
            let probe: [u8; PROBE_BYTES] = read_within(stream, self.settings.idle_timeout).await?;
            let (seq_bytes, claimed) = probe.split_at(8);
            if !verifies(&key, "kig-peer/1 probe", &[seq_bytes], claimed) {
                return Err(PeerError::BadTag);
            }
            let seq = u64::from_be_bytes(seq_bytes.try_into().expect("8 bytes"));
            if seq <= last {
                return Err(PeerError::Replay { seq, last });
            }
            last = seq;
            let (serving, stalled_ms) = self.serving();
            let body = answer_body(seq, serving, stalled_ms);
            let mut answer = [0u8; ANSWER_BYTES];
            answer[..body.len()].copy_from_slice(&body);
            answer[body.len()..].copy_from_slice(&tag(&key, "kig-peer/1 answer", &[&body]));
            write_within(stream, &answer, HANDSHAKE_TIMEOUT).await?;
        }
    }
}

/// The peer listener while it serves: resolves when it has closed, and every link with it.
pub struct PeerListener(oneshot::Receiver<()>);

impl PeerListener {
    /// A listener that will report its close on the other end of `done`.
    pub fn new(done: oneshot::Receiver<()>) -> Self {
        Self(done)
    }

    /// Waits until the listener and its links are closed.
    pub async fn closed(self) {
        let _ = self.0.await;
    }
}

/// Serves `responder` on `listener` as a task of the current runtime: for networks whose
/// sockets belong to one runtime (turmoil's simulated one). A real network gets a thread of
/// its own instead (`Listener for TcpListener`).
pub fn spawn_on_this_runtime<L: Listener>(
    listener: L,
    responder: Arc<Responder>,
    stop: watch::Receiver<bool>,
) -> PeerListener {
    let (done, closed) = oneshot::channel();
    tokio::spawn(async move {
        responder.serve(listener, stop).await;
        let _ = done.send(());
    });
    PeerListener::new(closed)
}

#[cfg(test)]
mod tests;
