//! The peer channel on in-memory connections: the handshake both ways, refusals, replays, the
//! responder's table, stalls; and, on real sockets, a probe answered while the runtime that
//! started the channel is blocked.

use super::*;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

const SECRET: &str = "sixteen-bytes-at-least";

/// Connections handed over in memory, as the server's own tests do.
struct Pipe(mpsc::UnboundedReceiver<(DuplexStream, SocketAddr)>);

impl Listener for Pipe {
    type Stream = DuplexStream;
    async fn accept(&mut self) -> std::io::Result<(DuplexStream, SocketAddr)> {
        match self.0.recv().await {
            Some(accepted) => Ok(accepted),
            None => std::future::pending().await,
        }
    }
}

/// A responder for node `me` with peers `peers`, served on an in-memory listener; what dials
/// it, its pulse, and the stop that ends it.
struct Served {
    tx: mpsc::UnboundedSender<(DuplexStream, SocketAddr)>,
    pulse: Arc<ServingPulse>,
    stop: watch::Sender<bool>,
}

fn settings(me: i32, peers: &[i32], secret: &str) -> ResponderSettings {
    ResponderSettings {
        me,
        peers: peers.iter().copied().collect(),
        secret: Secret::new(secret),
        stall_limit: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
    }
}

fn serve(settings: ResponderSettings) -> Served {
    let (tx, rx) = mpsc::unbounded_channel();
    let pulse = Arc::new(ServingPulse::default());
    let responder = Arc::new(Responder::new(settings, SharedRng::seeded(1), pulse.clone()));
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(responder.serve(Pipe(rx), stopped));
    Served { tx, pulse, stop }
}

impl Served {
    /// A new connection to the responder, from `address`.
    fn connect_from(&self, address: [u8; 4]) -> DuplexStream {
        let (client, server) = tokio::io::duplex(4096);
        self.tx
            .send((server, SocketAddr::from((address, 40_000))))
            .expect("the responder listens");
        client
    }

    fn dial(&self) -> impl Fn(String) -> std::future::Ready<std::io::Result<DuplexStream>> + '_ {
        move |_address| std::future::ready(Ok(self.connect_from([10, 0, 0, 1])))
    }
}

fn prober(me: i32, secret: &str) -> ProbeSettings {
    ProbeSettings {
        me,
        secret: Secret::new(secret),
        rng: SharedRng::seeded(2),
    }
}

const PERIOD: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn group_coordinator_7_peers_sharing_the_secret_probe_and_answer_over_one_link() {
    let served = serve(settings(2, &[1], SECRET));
    let me = prober(1, SECRET);
    let (link, outcome) = probe(&me, None, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(outcome.answered(), "{:?}", outcome.failure());
    // The next probes go over the same link.
    let mut link = link.expect("a link to keep");
    assert_eq!(
        link.ask().await.unwrap(),
        Answer {
            serving: true,
            stalled_ms: 0
        }
    );
    assert_eq!(link.seq, 2);
    let (link, outcome) = probe(&me, Some(link), &served.dial(), 2, "node-2", PERIOD).await;
    assert!(outcome.answered());
    assert_eq!(link.map(|l| l.seq), Some(3), "the link was kept, not replaced");
    served.stop.send_replace(true);
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_7_a_prober_without_the_secret_or_not_a_peer_is_refused() {
    let served = serve(settings(2, &[1], SECRET));
    let (link, outcome) = probe(
        &prober(1, "another-secret-of-16"),
        None,
        &served.dial(),
        2,
        "node-2",
        PERIOD,
    )
    .await;
    assert!(link.is_none());
    assert!(
        matches!(outcome, ProbeOutcome::Failed(PeerError::Refused)),
        "{outcome:?}"
    );
    // The right secret, but node 3 is not a configured peer of node 2.
    let (_, outcome) = probe(&prober(3, SECRET), None, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(
        matches!(outcome, ProbeOutcome::Failed(PeerError::Refused)),
        "{outcome:?}"
    );
    served.stop.send_replace(true);
}

/// A listener that speaks the first message of the channel and then `accept`: what a client
/// posing as a peer could send, without the secret.
async fn impostor(mut stream: DuplexStream, node: i32, accept: [u8; ACCEPT_BYTES]) {
    let mut hello = [0u8; HELLO_BYTES];
    hello[..4].copy_from_slice(&MAGIC);
    hello[4] = VERSION;
    hello[5..9].copy_from_slice(&node.to_be_bytes());
    stream.write_all(&hello).await.unwrap();
    let mut auth = [0u8; AUTH_BYTES];
    stream.read_exact(&mut auth).await.unwrap();
    stream.write_all(&accept).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_7_a_responder_without_the_secret_or_of_another_node_is_not_believed() {
    let me = prober(1, SECRET);
    let (ours, theirs) = tokio::io::duplex(4096);
    tokio::spawn(impostor(theirs, 2, [7; ACCEPT_BYTES]));
    let ours = std::sync::Mutex::new(Some(ours));
    let dial = |_: String| {
        std::future::ready(
            ours.lock()
                .unwrap()
                .take()
                .ok_or_else(|| std::io::Error::other("dialled twice")),
        )
    };
    let (link, outcome) = probe(&me, None, &dial, 2, "node-2", PERIOD).await;
    assert!(link.is_none());
    assert!(
        matches!(outcome, ProbeOutcome::Failed(PeerError::BadTag)),
        "{outcome:?}"
    );
    // A real peer channel, but of node 3 where node 2 was expected.
    let served = serve(settings(3, &[1], SECRET));
    let (_, outcome) = probe(&me, None, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(
        matches!(
            outcome,
            ProbeOutcome::Failed(PeerError::WrongNode { expected: 2, found: 3 })
        ),
        "{outcome:?}"
    );
    served.stop.send_replace(true);
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_7_a_replayed_or_forged_probe_closes_the_link() {
    let served = serve(settings(2, &[1], SECRET));
    let me = prober(1, SECRET);
    let mut link = open_link(&me, served.connect_from([10, 0, 0, 1]), 2).await.unwrap();
    link.ask().await.unwrap();
    // The same probe number again, correctly tagged: a replay.
    link.seq = 0;
    assert!(link.ask().await.is_err(), "a replayed probe was answered");
    let mut link = open_link(&me, served.connect_from([10, 0, 0, 1]), 2).await.unwrap();
    link.key = [0; TAG_BYTES];
    assert!(link.ask().await.is_err(), "a probe tagged without the key was answered");
    served.stop.send_replace(true);
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_6_connections_that_do_not_authenticate_are_shed_and_links_are_not() {
    let served = serve(settings(2, &[1, 3], SECRET));
    let me = prober(1, SECRET);
    let (link, outcome) = probe(&me, None, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(outcome.answered());
    // A flood of silent connections, many times the table.
    let places = SPARE_PLACES + 2 * 2;
    let mut silent: Vec<DuplexStream> = (0..5 * places)
        .map(|i| served.connect_from([10, 1, 0, i as u8]))
        .collect();
    // The authenticated link keeps working, and a new connection from another peer gets in.
    let (link, outcome) = probe(&me, link, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(outcome.answered(), "{:?}", outcome.failure());
    assert!(link.is_some_and(|l| l.seq == 2), "the link was replaced");
    let (_, outcome) = probe(&prober(3, SECRET), None, &served.dial(), 2, "node-2", PERIOD).await;
    assert!(outcome.answered(), "{:?}", outcome.failure());
    // The oldest silent connection was shed for the newcomers: closed now, long before the
    // handshake timeout would close it.
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(Duration::from_millis(1), silent[0].read_to_end(&mut seen)).await;
    assert!(matches!(closed, Ok(Ok(_))), "the oldest silent connection was not shed");
    served.stop.send_replace(true);
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_6_a_newer_link_of_a_peer_closes_the_older() {
    let served = serve(settings(2, &[1], SECRET));
    let me = prober(1, SECRET);
    let mut older = open_link(&me, served.connect_from([10, 0, 0, 1]), 2).await.unwrap();
    older.ask().await.unwrap();
    let mut newer = open_link(&me, served.connect_from([10, 0, 0, 1]), 2).await.unwrap();
    newer.ask().await.unwrap();
    assert!(older.ask().await.is_err(), "two links of one peer");
    newer.ask().await.unwrap();
    served.stop.send_replace(true);
}

#[tokio::test(start_paused = true)]
async fn group_coordinator_8_a_stalled_serving_runtime_is_told_and_fences_this_gateway() {
    let served = serve(settings(2, &[1], SECRET));
    let me = prober(1, SECRET);
    let mut link = open_link(&me, served.connect_from([10, 0, 0, 1]), 2).await.unwrap();
    assert!(link.ask().await.unwrap().serving);
    // Beats between probes: serving, however much time passes.
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(9)).await;
        served.pulse.beat();
        assert!(link.ask().await.unwrap().serving);
    }
    assert!(!served.pulse.take_fence());
    // No beat for the stall limit: the peer is told, and this gateway is fenced.
    tokio::time::advance(Duration::from_secs(10)).await;
    let answer = link.ask().await.unwrap();
    assert_eq!(
        answer,
        Answer {
            serving: false,
            stalled_ms: 10_000
        }
    );
    let (_, outcome) = probe(&me, Some(link), &served.dial(), 2, "node-2", PERIOD).await;
    assert!(
        matches!(outcome, ProbeOutcome::Stalled { for_ms: 10_000 }),
        "{outcome:?}"
    );
    assert!(!outcome.answered(), "a stalled peer counts as not answering");
    assert!(served.pulse.take_fence());
    assert!(!served.pulse.take_fence(), "the fence is taken once");
    served.stop.send_replace(true);
}

/// GROUP-COORDINATOR-6: the runtime that started the channel (the one that serves clients) is
/// blocked, its one worker held by a task that waits on a plain channel; a probe from another
/// runtime is answered all the same, and only then is the worker let go.
#[test]
fn group_coordinator_6_a_probe_is_answered_while_the_serving_runtime_is_blocked() {
    let serving = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let address = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap()
    };
    let pulse = Arc::new(ServingPulse::default());
    let responder = Arc::new(Responder::new(settings(2, &[1], SECRET), SharedRng::seeded(1), pulse));
    let (stop, stopped) = watch::channel(false);
    let listener = serving
        .block_on(<tokio::net::TcpListener as Listener>::serve_peers(
            address, responder, stopped,
        ))
        .expect("the peer listener binds");
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (started, is_blocked) = std::sync::mpsc::channel::<()>();
    serving.spawn(async move {
        started.send(()).unwrap();
        // Holds the serving runtime's only worker, as a request stuck in CPU work would.
        blocked.recv().unwrap();
    });
    is_blocked.recv().unwrap();
    let probing = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = probing.block_on(async {
        let dial = |a: String| tokio::net::TcpStream::connect(a);
        probe(
            &prober(1, SECRET),
            None,
            &dial,
            2,
            &address.to_string(),
            Duration::from_secs(10),
        )
        .await
        .1
    });
    release.send(()).unwrap();
    assert!(outcome.answered(), "{:?}", outcome.failure());
    stop.send_replace(true);
    serving.block_on(listener.closed());
}
