//! Tests of the real backend that need no server: failure classes, roster dialling, read
//! assembly and watermarks.

use super::*;
use crate::backend::roster::node_bound;

/// FETCH-READAHEAD-1: the read's own answer gives the high watermark, never below what it
/// found, and a read that found nothing gives none (a full `watermarks` call is needed).
#[test]
fn fetch_readahead_1_the_high_watermark_comes_from_the_polls_last_offset() {
    let kept = |offsets: &[u64]| -> Vec<IggyMessage> {
        offsets
            .iter()
            .map(|&o| {
                let mut m = msg(b"x");
                m.header.offset = o;
                m
            })
            .collect()
    };
    let marks = read_watermarks(3, 40, &kept(&[10, 11])).expect("found messages");
    assert_eq!((marks.log_start_offset, marks.high_watermark), (3, 41));
    let marks = read_watermarks(0, 0, &kept(&[0])).expect("found one message");
    assert_eq!(
        marks.high_watermark, 1,
        "one message at offset 0: last offset 0, watermark 1"
    );
    assert_eq!(read_watermarks(0, 0, &[]), None);
}

/// FETCH-READAHEAD-1: a log start is reported without asking again only while it is younger
/// than the read-ahead's own age limit.
#[tokio::test(start_paused = true)]
async fn fetch_readahead_1_a_remembered_log_start_is_used_only_while_fresh() {
    let starts = LogStarts::default();
    assert_eq!(starts.fresh("s", "t", 0), None);
    starts.remember("s", "t", 0, 7);
    assert_eq!(starts.fresh("s", "t", 0), Some(7));
    assert_eq!(starts.fresh("s", "t", 1), None, "another partition");
    tokio::time::advance(READ_AHEAD_LOG_START_MAX_AGE).await;
    assert_eq!(starts.fresh("s", "t", 0), None, "too old");
}
use bytes::Bytes;
use std::collections::BTreeMap;

fn msg(payload: &'static [u8]) -> IggyMessage {
    IggyMessage::builder()
        .payload(Bytes::from_static(payload))
        .build()
        .unwrap()
}

fn msg_with_header(payload: &'static [u8], value: &'static [u8]) -> IggyMessage {
    use iggy_common::{HeaderKey, HeaderKind, HeaderValue};
    let mut headers = BTreeMap::new();
    headers.insert(
        HeaderKey::try_from("h").unwrap(),
        HeaderValue::from_raw(HeaderKind::Raw, value).unwrap(),
    );
    IggyMessage::builder()
        .payload(Bytes::from_static(payload))
        .user_headers(headers)
        .build()
        .unwrap()
}

fn code(e: BackendError) -> u32 {
    match e {
        BackendError::Iggy(e) => e.as_code(),
        BackendError::TooManyConsumerOffsets => 3024,
        other => panic!("not an Iggy answer: {other}"),
    }
}

#[test]
fn high_watermark_tells_empty_from_one_message_by_count() {
    assert_eq!(high_watermark(0, 0), 0, "empty");
    assert_eq!(high_watermark(1, 0), 1, "one message at offset 0");
    assert_eq!(high_watermark(5, 4), 5);
    // Everything expired: the last offset still counts.
    assert_eq!(high_watermark(0, 9), 10);
}

/// Feeds `read` the polls a server holding `len` messages would answer, message `i` being
/// `message(i)` at offset `i`: the offsets kept and the counts asked for.
fn drive(mut read: ChunkedRead, len: u64, message: impl Fn(u64) -> IggyMessage) -> (Vec<u64>, Vec<u32>) {
    let mut asked = Vec::new();
    loop {
        let count = read.next_count();
        if count == 0 {
            break;
        }
        asked.push(count);
        let from = read.next_offset(0);
        let polled = (from..len.min(from + u64::from(count)))
            .map(|i| {
                let mut m = message(i);
                m.header.offset = i;
                m
            })
            .collect();
        read.take(polled, count);
    }
    (read.kept.iter().map(|m| m.header.offset).collect(), asked)
}

fn limits(max_messages: u32, max_bytes: u64) -> ReadLimits {
    ReadLimits {
        max_messages,
        max_bytes,
    }
}

#[test]
fn chunked_read_keeps_the_first_message_and_counts_payload_and_headers() {
    let four = |_| msg(b"aaaa");
    assert_eq!(
        drive(ChunkedRead::new(limits(10, 1), None), 3, four).0,
        [0],
        "the first message is always kept"
    );
    assert_eq!(drive(ChunkedRead::new(limits(10, 8), None), 3, four).0, [0, 1]);
    assert_eq!(drive(ChunkedRead::new(limits(10, 7), None), 3, four).0, [0]);
    assert_eq!(
        drive(ChunkedRead::new(limits(2, 1_000), None), 3, four).0,
        [0, 1],
        "the message limit"
    );
    assert_eq!(
        drive(ChunkedRead::new(limits(0, 1_000), None), 3, four),
        (vec![], vec![]),
        "nothing polled"
    );
    let with_headers = msg_with_header(b"aaaa", b"vv");
    let header_bytes = with_headers.user_headers.as_ref().map_or(0, |h| h.len()) as u64;
    assert!(header_bytes > 0);
    assert_eq!(stored_bytes(&with_headers), 4 + header_bytes);
    let headed_then_plain = |i| {
        if i == 0 {
            msg_with_header(b"aaaa", b"vv")
        } else {
            msg(b"bbbb")
        }
    };
    assert_eq!(
        drive(ChunkedRead::new(limits(10, 8), None), 2, headed_then_plain).0,
        [0],
        "headers count against the limit"
    );
}

#[test]
fn chunked_read_polls_about_what_the_byte_limit_holds() {
    static KIB: [u8; 1024] = [7; 1024];
    let kib = |_| msg(&KIB);
    // 1 KiB messages, a 100 KiB limit: 64 first, then what the rest holds, not 10,000.
    let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 100 * 1024), None), 5_000, kib);
    assert_eq!(
        kept,
        (0..100).collect::<Vec<u64>>(),
        "consecutive offsets from the first"
    );
    assert_eq!(asked, [64, 37], "the second poll asks for the 36 that fit, plus one");
    // A short poll is the partition's end: no further poll.
    let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 1 << 20), None), 10, kib);
    assert_eq!((kept.len(), asked), (10, vec![64]));
}

/// Found by the real-Iggy tier's differential (seed 1796137915538088092): a read of three
/// messages from 0, after an append of two, was ended at that append's end and gave two
/// where the model gave three. Only a poll the bytes cut short may end on a part.
#[test]
fn fetch_align_1_a_read_its_count_limit_ends_is_never_aligned() {
    let read = ChunkedRead::new(limits(3, 1 << 20), Some(100));
    assert_eq!(read.next_count(), 3);
    assert!(!read.may_align(3), "the count limit ends this read");
    let read = ChunkedRead::new(limits(10_000, 1 << 20), Some(1024));
    let count = read.next_count();
    assert!(count < 10_000 && read.may_align(count), "the bytes end this one");
}

/// Found by the real-Iggy tier's differential (seed 1796418050052960613): after reads of
/// messages of a byte or none left a remembered size of 1 byte, a read bounded by count alone (`u64::MAX`
/// bytes, as ListOffsets' MAX_TIMESTAMP asks) overflowed working out how many fit: a panic in a
/// debug build, and in release a count of 0, so a read that polled nothing.
#[test]
fn chunked_read_bounded_by_count_alone_asks_its_count_whatever_the_remembered_size() {
    for remembered in [None, Some(0), Some(1), Some(1024)] {
        let read = ChunkedRead::new(limits(1, u64::MAX), remembered);
        assert_eq!(read.next_count(), 1, "remembered size {remembered:?}");
        let read = ChunkedRead::new(limits(10_000, u64::MAX), remembered);
        let expected = if remembered.is_none() {
            FIRST_POLL_MESSAGES
        } else {
            10_000
        };
        assert_eq!(read.next_count(), expected, "remembered size {remembered:?}");
    }
    let one_byte = |_| msg(b"a");
    let (kept, _) = drive(ChunkedRead::new(limits(3, u64::MAX), None), 5, one_byte);
    assert_eq!(kept, [0, 1, 2]);
    let (kept, _) = drive(ChunkedRead::new(limits(1, u64::MAX), Some(1)), 5, one_byte);
    assert_eq!(kept, [0]);
}

#[test]
fn chunked_read_with_a_known_size_fills_the_limit_in_one_poll() {
    static KIB: [u8; 1024] = [7; 1024];
    let kib = |_| msg(&KIB);
    let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 100 * 1024), Some(1024)), 5_000, kib);
    assert_eq!(kept.len(), 100);
    assert_eq!(asked, [101], "what the limit holds at the remembered size, plus one");
    // A remembered size far below the real one costs bytes, never a wrong answer.
    let (kept, asked) = drive(ChunkedRead::new(limits(10_000, 10 * 1024), Some(100)), 5_000, kib);
    assert_eq!((kept.len(), asked), (10, vec![103]));
}

#[test]
fn expiry_round_trips_and_none_means_never() {
    assert_eq!(expiry_to_iggy(None), IggyExpiry::NeverExpire);
    assert_eq!(expiry_from_iggy(expiry_to_iggy(None)), None);
    assert_eq!(expiry_from_iggy(expiry_to_iggy(Some(60_000_000))), Some(60_000_000));
    assert_eq!(expiry_from_iggy(IggyExpiry::ServerDefault), None);
    // 0 on the wire would mean "server default".
    assert_eq!(u64::from(expiry_to_iggy(Some(0))), 1);
}

#[test]
fn a_partition_always_appends_through_the_same_client() {
    for pool in 1..6 {
        for p in 0..20 {
            let a = append_slot("s", "t", p, pool);
            assert!(a < pool);
            assert_eq!(a, append_slot("s", "t", p, pool));
        }
    }
    assert_eq!(append_slot("s", "t", 3, 0), 0);
}

#[test]
fn only_connection_failures_reconnect() {
    assert!(is_connection_error(&IggyError::Disconnected));
    assert!(is_connection_error(&IggyError::NotConnected));
    assert!(!is_connection_error(&IggyError::ResourceNotFound("x".into())));
    assert!(!is_connection_error(&IggyError::InvalidOffset(1)));
}

/// CLUSTER-UNKNOWN-1: which failures leave a request unsent (safe to send anywhere), which
/// leave its outcome unknown, and which are the server's answer.
#[test]
fn cluster_unknown_1_a_broken_connection_after_sending_is_an_unknown_outcome() {
    for e in [
        IggyError::NotConnected,
        IggyError::CannotEstablishConnection,
        IggyError::TransientNotAccepted,
        IggyError::Unauthenticated,
    ] {
        assert_eq!(classify(&e), Failure::NotSent, "{e}");
    }
    for e in [
        IggyError::Disconnected,
        IggyError::EmptyResponse,
        IggyError::TcpError,
        IggyError::TransientNotCommitted,
    ] {
        assert_eq!(classify(&e), Failure::Unknown, "{e}");
    }
    for e in [IggyError::ResourceNotFound("x".into()), IggyError::InvalidCredentials] {
        assert_eq!(classify(&e), Failure::Refused, "{e}");
    }
    // What an append then reports: never success, and a retriable Kafka error.
    let unknown = BackendError::OutcomeUnknown(IggyError::Disconnected.to_string());
    assert!(unknown.is_unavailable());
    assert_eq!(crate::error_map::kafka_code(&unknown).0, 6);
}

/// A free loopback port nothing listens on.
fn refused_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn target(roster: &str) -> Target {
    Target {
        roster: Arc::new(Mutex::new(RosterState::new(parse_roster(roster).unwrap()))),
        appends_stalled: Arc::default(),
        credentials: GatewayCredentials::password("iggy", "iggy"),
        tls: IggyTls::default(),
        failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
        demotions: Arc::default(),
    }
}

/// What a [`FakeNode`] answers. It speaks just enough of the pinned server's binary protocol
/// (VSR framing, iggy_binary_protocol 0.11.0-edge.4) for the SDK: pings always; the rest as
/// set here, and what it does not answer it reads and leaves unanswered, as a node that
/// stalls does.
#[derive(Clone, Default)]
struct Script {
    /// Takes every login (a Register).
    logins: bool,
    /// Answers every login with this error instead.
    login_error: Option<IggyError>,
    /// Logins answered with `login_error`, over all its connections.
    logins_refused: Arc<AtomicUsize>,
    /// Answers a login only this long after it came: a node slow under load.
    login_delay: Option<Duration>,
    /// Logins left unanswered before it answers them, over all its connections: logins sent
    /// during an election (DIFF-18).
    lost_logins: Arc<AtomicUsize>,
    /// Its cluster metadata: `None` unanswered; `Some(None)` a cluster of one node (no leader to
    /// follow); `Some(Some(address))` a cluster of two whose healthy leader is `address`
    /// ([`ITSELF`]: this node).
    metadata: Option<Option<String>>,
    /// Answers every other request with an empty success.
    calls: bool,
    /// Answers every other request with this error instead: a node mid-election.
    call_error: Option<IggyError>,
}

impl Script {
    /// A healthy node of a cluster of one: takes every login and answers every call.
    fn healthy() -> Self {
        Self {
            logins: true,
            metadata: Some(None),
            calls: true,
            ..Self::default()
        }
    }
}

/// In a [`Script`]'s metadata, the fake node's own address.
const ITSELF: &str = "itself";

/// A loopback listener speaking a [`Script`]; counts what reached it.
struct FakeNode {
    address: String,
    connections: Arc<AtomicUsize>,
    logins: Arc<AtomicUsize>,
    /// Requests it left unanswered.
    unanswered: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeNode {
    async fn start(mut script: Script) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        if let Some(Some(leader)) = &mut script.metadata {
            if leader == ITSELF {
                *leader = address.clone();
            }
        }
        let (connections, logins, unanswered) = (Arc::default(), Arc::default(), Arc::default());
        let task = tokio::spawn({
            let counters: [Arc<AtomicUsize>; 3] =
                [Arc::clone(&connections), Arc::clone(&logins), Arc::clone(&unanswered)];
            async move {
                let mut sessions = 0u64;
                while let Ok((socket, _)) = listener.accept().await {
                    counters[0].fetch_add(1, Ordering::SeqCst);
                    sessions += 1;
                    let (logins, unanswered) = (counters[1].clone(), counters[2].clone());
                    tokio::spawn(fake_connection(socket, script.clone(), logins, unanswered, sessions));
                }
            }
        });
        FakeNode {
            address,
            connections,
            logins,
            unanswered,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn logins(&self) -> usize {
        self.logins.load(Ordering::SeqCst)
    }

    fn unanswered(&self) -> usize {
        self.unanswered.load(Ordering::SeqCst)
    }
}

async fn fake_connection(
    mut socket: tokio::net::TcpStream,
    script: Script,
    logins: Arc<AtomicUsize>,
    unanswered: Arc<AtomicUsize>,
    session: u64,
) {
    use iggy_binary_protocol::codes::{GET_CLUSTER_METADATA_CODE, PING_CODE};
    use iggy_binary_protocol::consensus::{Command, Operation, ReplyHeader, RequestHeader, HEADER_SIZE};
    use iggy_binary_protocol::responses::system::get_cluster_metadata::{ClusterMetadataResponse, ClusterNodeResponse};
    use iggy_binary_protocol::responses::users::login_register::LoginRegisterResponse;
    use iggy_binary_protocol::{WireEncode, WireName};
    use std::mem::offset_of;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut header = [0u8; HEADER_SIZE];
    loop {
        if socket.read_exact(&mut header).await.is_err() {
            return;
        }
        let size_at = offset_of!(RequestHeader, size);
        let size = u32::from_le_bytes(header[size_at..size_at + 4].try_into().unwrap()) as usize;
        let mut payload = vec![0u8; size.saturating_sub(HEADER_SIZE)];
        if socket.read_exact(&mut payload).await.is_err() {
            return;
        }
        let operation = header[offset_of!(RequestHeader, operation)];
        let code_at = offset_of!(RequestHeader, reserved);
        let code = u32::from_le_bytes(header[code_at..code_at + 4].try_into().unwrap());
        let result_section = 0u32.to_le_bytes().to_vec();
        let mut status = 0u32;
        let body: Option<Vec<u8>> =
            if let (true, Some(e)) = (operation == Operation::Register as u8, &script.login_error) {
                script.logins_refused.fetch_add(1, Ordering::SeqCst);
                status = e.as_code();
                Some(Vec::new())
            } else if operation == Operation::Register as u8 {
                let lost = script
                    .lost_logins
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                (script.logins && !lost).then(|| {
                    logins.fetch_add(1, Ordering::SeqCst);
                    let mut body = result_section.clone();
                    body.extend_from_slice(
                        &LoginRegisterResponse {
                            user_id: 1,
                            session,
                            server_protocol_version: 1,
                            server_version: WireName::new("fake").unwrap(),
                        }
                        .to_bytes(),
                    );
                    body
                })
            } else if operation == Operation::NonReplicated as u8 && code == PING_CODE {
                Some(Vec::new())
            } else if operation == Operation::NonReplicated as u8 && code == GET_CLUSTER_METADATA_CODE {
                script.metadata.clone().map(|leader| {
                    let node = |name: &str, address: &str, role: iggy_common::ClusterNodeRole| {
                        let (ip, port) = address.rsplit_once(':').unwrap();
                        ClusterNodeResponse {
                            name: name.into(),
                            ip: ip.into(),
                            tcp_port: port.parse().unwrap(),
                            quic_port: 0,
                            http_port: 0,
                            websocket_port: 0,
                            role: role as u8,
                            status: iggy_common::ClusterNodeStatus::Healthy as u8,
                        }
                    };
                    let nodes = match leader {
                        None => vec![node("one", "127.0.0.1:1", iggy_common::ClusterNodeRole::Leader)],
                        Some(leader) => vec![
                            node("follower", "127.0.0.1:1", iggy_common::ClusterNodeRole::Follower),
                            node("leader", &leader, iggy_common::ClusterNodeRole::Leader),
                        ],
                    };
                    ClusterMetadataResponse {
                        name: "fake".into(),
                        nodes,
                    }
                    .to_bytes()
                    .to_vec()
                })
            } else if let Some(e) = &script.call_error {
                status = e.as_code();
                Some(Vec::new())
            } else {
                // A metadata operation answers a result section; the rest an empty body.
                let framed = operation >= Operation::CreateStream as u8 && operation < Operation::Register as u8 + 160;
                script.calls.then(|| if framed { result_section } else { Vec::new() })
            };
        let Some(body) = body else {
            unanswered.fetch_add(1, Ordering::SeqCst);
            continue;
        };
        if let (true, Some(delay)) = (operation == Operation::Register as u8, script.login_delay) {
            tokio::time::sleep(delay).await;
        }
        let mut reply = vec![0u8; HEADER_SIZE];
        reply[offset_of!(ReplyHeader, command)] = Command::Reply as u8;
        let size_at = offset_of!(ReplyHeader, size);
        reply[size_at..size_at + 4].copy_from_slice(&((HEADER_SIZE + body.len()) as u32).to_le_bytes());
        reply[offset_of!(ReplyHeader, operation)] = operation;
        let status_at = offset_of!(ReplyHeader, status);
        reply[status_at..status_at + 4].copy_from_slice(&status.to_le_bytes());
        reply.extend_from_slice(&body);
        if socket.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// A backend of one pooled client on `roster`, failing over within `failover`.
async fn backend_on(roster: &str, failover: Duration) -> Result<IggyBackend, BackendError> {
    IggyBackend::connect_cluster(roster, "iggy", "iggy", IggyTls::default(), 1, failover).await
}

/// A metadata call whose empty success a [`FakeNode`] answers.
async fn some_call(c: Arc<IggyClient>) -> Result<(), IggyError> {
    c.delete_stream(&Identifier::numeric(1)?).await
}

/// CLUSTER-FAILOVER-3, the report's case: a node takes the login and describes the cluster,
/// then stalls every call. The call is left to the next member within the same failover bound,
/// and the node is dialled last from then on.
#[tokio::test]
async fn cluster_failover_3_a_node_that_takes_logins_then_stalls_calls_is_left_for_the_next() {
    let stalls = FakeNode::start(Script {
        logins: true,
        metadata: Some(None),
        calls: false,
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let failover = Duration::from_secs(3);
    let b = backend_on(&format!("{},{}", stalls.address, answers.address), failover)
        .await
        .unwrap();
    assert_eq!(answers.logins(), 0, "the pool logged in at the first member");
    let started = Instant::now();
    let result = b.inner.pooled(some_call).await;
    println!(
        "a call stalled on {} answered by {} after {:?} (failover bound {failover:?})",
        stalls.address,
        answers.address,
        started.elapsed()
    );
    result.expect("answered by the next member");
    // A second call goes to the member that answered, without waiting on the stalled one.
    b.inner.pooled(some_call).await.expect("answered again");
    assert_eq!(answers.logins(), 1);
}

/// CLUSTER-FAILOVER-4: a node answering a well-formed call InvalidFormat (as one does until it
/// learns the cluster's new primary) is left for the next member within the failover bound;
/// the call was answered -1 to Kafka clients before.
#[tokio::test]
async fn cluster_failover_4_a_call_answered_invalid_format_moves_to_the_next_member() {
    let mid_election = FakeNode::start(Script {
        logins: true,
        metadata: Some(None),
        call_error: Some(IggyError::InvalidFormat),
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let b = backend_on(
        &format!("{},{}", mid_election.address, answers.address),
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    assert_eq!(answers.logins(), 0, "the pool logged in at the first member");
    b.inner.pooled(some_call).await.expect("answered by the next member");
    assert_eq!(answers.logins(), 1);
}

/// CLUSTER-FAILOVER-5: connections reconnecting together while the first member answers logins
/// InvalidFormat (a node mid-election) send it one login each, then one more between them,
/// rather than each its own second try: the cluster tier saw 37 logins a second from one
/// gateway's connections at a node with no primary to forward them to.
#[tokio::test]
async fn cluster_failover_5_connections_reconnecting_together_take_turns_at_a_node_failing_logins() {
    let refused = Arc::new(AtomicUsize::new(0));
    let mid_election = FakeNode::start(Script {
        login_error: Some(IggyError::InvalidFormat),
        logins_refused: refused.clone(),
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let roster = format!("{},{}", mid_election.address, answers.address);
    let b = backend_on(&roster, Duration::from_secs(3)).await.unwrap();
    // The pool's own connect met the node first and left it failing logins.
    let first = refused.load(Ordering::SeqCst);
    assert!(first >= 1, "the pool's connect tried the first member");
    const CONNECTIONS: usize = 8;
    let conns: Vec<Arc<Conn>> = (0..CONNECTIONS)
        .map(|_| Arc::new(Conn::new(b.inner.target.clone()).unwrap()))
        .collect();
    // Every reconnect starts at the first member: it answers, so it is not demoted.
    b.inner
        .target
        .roster()
        .on_answer(&mid_election.address, Answer::Connected, std::time::Instant::now());
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut reconnects = tokio::task::JoinSet::new();
    for conn in &conns {
        let conn = conn.clone();
        reconnects.spawn(async move { conn.reconnect(0, deadline, false).await });
    }
    while let Some(result) = reconnects.join_next().await {
        result.unwrap().expect("the second member took every connection");
    }
    let sent = refused.load(Ordering::SeqCst) - first;
    // Without the gate: two logins per connection (the try and its retry after ELECTION_POLL);
    // with it, one per LOGIN_GATE for all of them.
    assert!(
        sent <= CONNECTIONS / 2 + 1,
        "{sent} logins reached the node failing them from {CONNECTIONS} reconnects"
    );
    assert_eq!(answers.logins(), 1 + CONNECTIONS);
}

/// CLUSTER-FAILOVER-3: once one call found a node stalled, the other connections on it leave
/// it before their next call rather than each wait out the node bound there.
#[tokio::test]
async fn cluster_failover_3_every_connection_on_a_demoted_node_leaves_it() {
    let stalls = FakeNode::start(Script {
        logins: true,
        metadata: Some(None),
        calls: false,
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let roster = format!("{},{}", stalls.address, answers.address);
    let b = IggyBackend::connect_cluster(&roster, "iggy", "iggy", IggyTls::default(), 3, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(stalls.logins(), 3, "the whole pool on the first member");
    b.inner.pooled(some_call).await.expect("answered by the next member");
    assert_eq!(stalls.unanswered(), 1);
    for _ in 0..4 {
        b.inner.pooled(some_call).await.expect("answered");
    }
    assert_eq!(
        stalls.unanswered(),
        1,
        "another connection sent a call to the node already found stalled"
    );
    assert_eq!(answers.logins(), 3, "every connection moved");
}

/// CLUSTER-FAILOVER-3: a node slower than its bound (logins under load) is overtaken, not
/// abandoned: the next node's try starts beside it, and whichever reaches the leader first
/// serves. Seen in the cluster tier on a loaded machine: with tries cut at the bound, no login
/// took and every request answered "no primary".
#[tokio::test]
async fn cluster_failover_3_a_node_slower_than_its_bound_still_serves() {
    let failover = Duration::from_secs(3);
    let slow = FakeNode::start(Script {
        logins: true,
        login_delay: Some(node_bound(failover, 2) * 3 / 2),
        metadata: Some(None),
        calls: true,
        ..Script::default()
    })
    .await;
    let silent = FakeNode::start(Script::default()).await;
    let b = backend_on(&format!("{},{}", slow.address, silent.address), failover)
        .await
        .expect("the slow node serves");
    assert_eq!(silent.connections(), 1, "the next node was tried beside the slow one");
    b.inner.pooled(some_call).await.expect("answered");
}

/// CLUSTER-FAILOVER-3: a reconnect does not wait on a login that is never answered (one sent
/// during an election, DIFF-18): once every member's try is past its bound, another round
/// starts beside them, and a fresh login is answered. Seen in the cluster tier: the tries of the
/// first round, their logins lost, held the reconnect until the failover bound.
#[tokio::test]
async fn cluster_failover_3_a_login_lost_in_an_election_is_sent_again_within_the_bound() {
    let node = FakeNode::start(Script {
        logins: true,
        lost_logins: Arc::new(AtomicUsize::new(1)),
        metadata: Some(None),
        calls: true,
        ..Script::default()
    })
    .await;
    let failover = Duration::from_secs(3);
    let conn = Conn::new(Target {
        failover_timeout: failover,
        ..target(&node.address)
    })
    .unwrap();
    let started = Instant::now();
    let result = conn.reconnect(0, Instant::now() + failover, true).await;
    println!(
        "a login lost, then answered on a new connection: connected after {:?} (node bound {:?})",
        started.elapsed(),
        node_bound(failover, 1)
    );
    result.expect("the second login is answered");
    assert_eq!((node.connections(), node.logins()), (2, 1));
    assert_eq!(node.unanswered(), 1, "the lost login");
}

/// CLUSTER-FAILOVER-3: a node that answers a login with an error other than a refusal of the
/// credentials (InvalidFormat, seen during an election) fails that dial only: the sweep goes on
/// and the node is not demoted, since what a principal sends must not demote a node. A refusal
/// of the credentials ends the sweep.
#[tokio::test]
async fn cluster_failover_3_a_login_error_moves_the_dial_on_and_demotes_nothing() {
    let odd = FakeNode::start(Script {
        login_error: Some(IggyError::InvalidFormat),
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let roster = format!("{},{}", odd.address, answers.address);
    let b = backend_on(&roster, Duration::from_secs(3))
        .await
        .expect("the next member");
    assert_eq!(answers.logins(), 1);
    let first = b.inner.target.roster().candidates()[0].address.clone();
    assert_eq!(first, odd.address, "not demoted");
    let refuses = FakeNode::start(Script {
        login_error: Some(IggyError::InvalidCredentials),
        ..Script::default()
    })
    .await;
    let untouched = FakeNode::start(Script::default()).await;
    let result = backend_on(
        &format!("{},{}", refuses.address, untouched.address),
        Duration::from_secs(3),
    )
    .await;
    assert!(matches!(result, Err(BackendError::Iggy(IggyError::InvalidCredentials))));
    assert_eq!(
        untouched.connections(),
        0,
        "a refusal of the credentials ends the sweep"
    );
    // A token no node can take is refused before any node is dialled, as the SDK refuses it.
    let t = Target {
        credentials: GatewayCredentials {
            kind: SecretKind::PersonalAccessToken,
            ..GatewayCredentials::password("iggy", "t".repeat(256))
        },
        ..target(&untouched.address)
    };
    let conn = Conn::new(t).unwrap();
    let e = conn
        .reconnect(0, Instant::now() + Duration::from_secs(3), false)
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Iggy(IggyError::InvalidFormat)), "{e:?}");
    assert_eq!(untouched.connections(), 0);
}

/// CLUSTER-FAILOVER-3: a send that stalls is answered as an unknown outcome within the node
/// bound, and the next one goes to another member.
#[tokio::test]
async fn cluster_failover_3_a_stalled_send_is_unknown_and_the_next_goes_elsewhere() {
    let stalls = FakeNode::start(Script {
        logins: true,
        metadata: Some(None),
        calls: false,
        ..Script::default()
    })
    .await;
    let answers = FakeNode::start(Script::healthy()).await;
    let b = backend_on(
        &format!("{},{}", stalls.address, answers.address),
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    let conn = b.inner.pool[0].clone();
    let stalled = b.inner.once(&conn, some_call).await;
    assert!(matches!(stalled, Err(BackendError::OutcomeUnknown(_))), "{stalled:?}");
    b.inner.once(&conn, some_call).await.expect("sent to the next member");
    assert_eq!(answers.logins(), 1);
}

/// CLUSTER-FAILOVER-3: members that take the connection and never answer each end their own
/// try, not the sweep: every member is dialled within one failover bound.
#[tokio::test]
async fn cluster_failover_3_a_sweep_tries_every_member_each_within_its_bound() {
    let silent = [
        FakeNode::start(Script::default()).await,
        FakeNode::start(Script::default()).await,
    ];
    let refused = refused_address();
    let roster = format!("{},{},{refused}", silent[0].address, silent[1].address);
    let failover = Duration::from_secs(2);
    let started = Instant::now();
    let result = backend_on(&roster, failover).await;
    println!(
        "a sweep over two silent members and a refusing one took {:?}",
        started.elapsed()
    );
    let Err(BackendError::NoPrimary { reason, .. }) = result else {
        panic!("expected NoPrimary");
    };
    for node in &silent {
        assert_eq!(node.connections(), 1, "{} was dialled: {reason}", node.address);
        assert!(reason.contains(&node.address), "{reason}");
    }
    assert!(reason.contains(&refused), "{reason}");
}

/// CLUSTER-ROSTER-2: a member naming a leader outside the roster does not send the gateway's
/// credentials there; the connection is refused, naming it.
#[tokio::test]
async fn cluster_roster_2_a_leader_outside_the_roster_gets_no_login() {
    let stranger = FakeNode::start(Script::healthy()).await;
    let member = FakeNode::start(Script {
        logins: true,
        metadata: Some(Some(stranger.address.clone())),
        calls: true,
        ..Script::default()
    })
    .await;
    let result = backend_on(&member.address, Duration::from_secs(3)).await;
    assert_eq!(
        (stranger.connections(), stranger.logins()),
        (0, 0),
        "the unlisted leader was dialled"
    );
    let Err(BackendError::NoPrimary { reason, .. }) = result else {
        panic!("expected NoPrimary");
    };
    assert!(
        reason.contains(&stranger.address) && reason.contains("iggy_follow_unlisted_leader"),
        "{reason}"
    );
}

/// CLUSTER-ROSTER-2: with `iggy_follow_unlisted_leader`, the leader a member names is followed.
#[tokio::test]
async fn cluster_roster_2_an_unlisted_leader_is_followed_when_allowed() {
    let leader = FakeNode::start(Script {
        logins: true,
        metadata: Some(Some(ITSELF.into())),
        calls: true,
        ..Script::default()
    })
    .await;
    let member = FakeNode::start(Script {
        logins: true,
        metadata: Some(Some(leader.address.clone())),
        calls: true,
        ..Script::default()
    })
    .await;
    let b = IggyBackend::connect_roster(
        &member.address,
        "iggy",
        "iggy",
        IggyTls::default(),
        1,
        Duration::from_secs(3),
        true,
    )
    .await
    .unwrap();
    assert_eq!(leader.logins(), 1);
    b.inner.pooled(some_call).await.unwrap();
    assert_eq!(b.inner.target.roster().leader(), Some(leader.address.as_str()));
}

/// CLUSTER-ROSTER-2: the SDK never logs in by itself (its leader redirect follows a login it
/// made), and the TLS name comes from the roster or the configuration.
#[test]
fn cluster_roster_2_the_sdk_does_not_log_in_by_itself_and_tls_names_come_from_the_roster() {
    let mut t = target("iggy-0.example:8090");
    t.tls.enabled = true;
    let dial = Dial {
        address: "10.0.0.9:8090".into(),
        tls_host: "iggy-0.example".into(),
    };
    let config = t.tcp_config(&dial);
    assert!(matches!(config.auto_login, AutoLogin::Disabled));
    assert_eq!(config.tls_domain, "iggy-0.example");
    assert_eq!(config.server_address, "10.0.0.9:8090");
    t.tls.domain = "iggy.example".into();
    assert_eq!(
        t.tcp_config(&dial).tls_domain,
        "iggy.example",
        "the configured domain wins"
    );
}

/// CLUSTER-FAILOVER-1: a roster whose first member refuses connections dials the next one
/// (here a stub that accepts once and hangs up, so the login fails).
#[tokio::test]
async fn cluster_failover_1_a_refused_member_moves_the_dial_to_the_next() {
    let refused = refused_address();
    let stub = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stub_address = stub.local_addr().unwrap().to_string();
    let accepted = tokio::spawn(async move {
        let (socket, _) = stub.accept().await.unwrap();
        drop(socket);
    });
    let target = target(&format!("{refused},{stub_address}"));
    let conn = Conn::new(target.clone()).unwrap();
    let result = conn.reconnect(0, Instant::now() + Duration::from_secs(30), false).await;
    accepted
        .await
        .expect("the second member was dialled after the first refused");
    assert!(result.is_err(), "the stub speaks no Iggy");
    let roster = target.roster();
    assert_eq!(roster.leader(), None);
    assert!(roster.is_down(&refused));
}

/// CLUSTER-FAILOVER-2: with every member down, a reconnect that may sweep until its deadline
/// ends in NoPrimary, naming each member and why; a start-up sweep keeps the SDK's error.
#[tokio::test]
async fn cluster_failover_2_every_member_down_is_no_primary_naming_them() {
    let (a, b) = (refused_address(), refused_address());
    let conn = Conn::new(target(&format!("{a},{b}"))).unwrap();
    // A deadline shorter than the pause between sweeps: one sweep, then NoPrimary.
    let deadline = Instant::now() + SWEEP_PAUSE / 2;
    let Err(BackendError::NoPrimary { reason, .. }) = conn.reconnect(0, deadline, true).await else {
        panic!("expected NoPrimary");
    };
    assert!(reason.contains(&a) && reason.contains(&b), "{reason}");
    let e = conn
        .reconnect(0, Instant::now() + Duration::from_secs(30), false)
        .await
        .unwrap_err();
    assert_eq!(code(e), IggyError::CannotEstablishConnection.as_code());
    assert_eq!(
        crate::error_map::kafka_code(&BackendError::NoPrimary { waited_ms: 1, reason }).0,
        6
    );
}

/// Nothing listens on the port: connecting fails at once instead of retrying forever.
#[tokio::test]
async fn connect_to_nothing_fails_fast() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = std::time::Instant::now();
    let result = IggyBackend::connect(&format!("127.0.0.1:{port}"), "iggy", "iggy", 2).await;
    let Err(e) = result else {
        panic!("connected to a closed port");
    };
    assert_eq!(code(e), IggyError::CannotEstablishConnection.as_code());
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Against a running Iggy server (address in IGGY_TEST_ADDRESS, default 127.0.0.1:18090,
/// user and password iggy/iggy): `cargo test -p kafka-iggy-gateway backend::iggy -- --ignored`.
#[tokio::test]
#[ignore = "needs a running Iggy server"]
async fn smoke_against_a_real_server() {
    let address = std::env::var("IGGY_TEST_ADDRESS").unwrap_or_else(|_| "127.0.0.1:18090".into());
    let b = IggyBackend::connect(&address, "iggy", "iggy", 2).await.unwrap();
    assert_eq!(b.kind(), "iggy");
    assert_eq!(b.pool_size(), 2);
    let (_, root) = b
        .open_session(&GatewayCredentials::password("iggy", "iggy"))
        .await
        .unwrap();
    assert_eq!(root.username, "iggy");
    assert!(b
        .open_session(&GatewayCredentials::password("iggy", "not-the-password"))
        .await
        .is_err());

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let s = format!("kig-smoke-{nanos}");
    b.ensure_stream(&s).await.unwrap();
    b.ensure_stream(&s).await.unwrap();
    assert_eq!(b.get_topic(&s, "t").await.unwrap(), None);
    assert_eq!(b.get_topic("no-such-stream-kig", "t").await.unwrap(), None);
    let spec = TopicSpec {
        partitions: 3,
        message_expiry_us: None,
    };
    b.create_topic(&s, "t", spec).await.unwrap();
    let info = b.get_topic(&s, "t").await.unwrap().unwrap();
    assert_eq!(
        info,
        TopicInfo {
            name: "t".into(),
            partitions: 3,
            message_expiry_us: None
        }
    );
    b.create_topic(
        &s,
        "expiring",
        TopicSpec {
            partitions: 1,
            message_expiry_us: Some(3_600_000_000),
        },
    )
    .await
    .unwrap();
    let mut topics = b.list_topics(&s).await.unwrap();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(topics.len(), 2);
    assert_eq!(topics[0].message_expiry_us, Some(3_600_000_000));
    assert_eq!(topics[1], info);
    let again = b.create_topic(&s, "t", spec).await.unwrap_err();
    assert_eq!(
        code(again),
        IggyError::TopicNameAlreadyExists(String::new(), Identifier::default()).as_code()
    );

    // Empty partition.
    let empty = Watermarks {
        log_start_offset: 0,
        high_watermark: 0,
    };
    assert_eq!(b.watermarks(&s, "t", 0).await.unwrap(), empty);
    let limits = ReadLimits {
        max_messages: 10,
        max_bytes: 1 << 20,
    };
    assert!(b.read(&s, "t", 0, 0, limits).await.unwrap().is_empty());
    assert_eq!(b.offset_for_timestamp(&s, "t", 0, 0).await.unwrap(), None);
    let missing = b.watermarks(&s, "t", 7).await.unwrap_err();
    assert_eq!(code(missing), IggyError::ResourceNotFound(String::new()).as_code());
    let missing = b.append(&s, "t", 7, vec![msg(b"x")]).await.unwrap_err();
    assert_eq!(code(missing), IggyError::ResourceNotFound(String::new()).as_code());
    let missing = b.watermarks(&s, "nope", 0).await.unwrap_err();
    assert_eq!(
        code(missing),
        IggyError::TopicNameNotFound(String::new(), String::new()).as_code()
    );

    // One message, then three.
    let generation = b.append_generation();
    assert_eq!(b.append(&s, "t", 0, vec![msg(b"m0")]).await.unwrap(), Some(0));
    assert_ne!(b.append_generation(), generation);
    b.wait_for_append(generation).await;
    assert_eq!(
        b.watermarks(&s, "t", 0).await.unwrap(),
        Watermarks {
            log_start_offset: 0,
            high_watermark: 1
        }
    );
    let base = b
        .append(&s, "t", 0, vec![msg(b"m1"), msg_with_header(b"m2", b"v"), msg(b"m3")])
        .await
        .unwrap();
    assert_eq!(base, Some(1));
    assert_eq!(
        b.watermarks(&s, "t", 0).await.unwrap(),
        Watermarks {
            log_start_offset: 0,
            high_watermark: 4
        }
    );
    let all = b.read(&s, "t", 0, 0, limits).await.unwrap();
    let offsets: Vec<u64> = all.iter().map(|m| m.header.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3]);
    assert_eq!(all[2].payload, Bytes::from_static(b"m2"));
    let headers = all[2].user_headers_map().unwrap().unwrap();
    assert_eq!(headers.len(), 1);
    let from_two = b
        .read(
            &s,
            "t",
            0,
            2,
            ReadLimits {
                max_messages: 1,
                max_bytes: 1 << 20,
            },
        )
        .await
        .unwrap();
    assert_eq!(from_two.len(), 1);
    assert_eq!(from_two[0].header.offset, 2);
    let small = b
        .read(
            &s,
            "t",
            0,
            1,
            ReadLimits {
                max_messages: 10,
                max_bytes: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(small.len(), 1, "the first message is always returned");
    assert!(b.read(&s, "t", 0, 4, limits).await.unwrap().is_empty());
    assert!(b.read(&s, "t", 0, 100, limits).await.unwrap().is_empty());
    let none = ReadLimits {
        max_messages: 0,
        max_bytes: 1 << 20,
    };
    assert!(b.read(&s, "t", 0, 0, none).await.unwrap().is_empty());

    // Timestamps: server timestamps, first at or after.
    let (o, ts0) = b.offset_for_timestamp(&s, "t", 0, 0).await.unwrap().unwrap();
    assert_eq!((o, ts0), (0, all[0].header.timestamp));
    let ts3 = all[3].header.timestamp;
    let (o, ts) = b.offset_for_timestamp(&s, "t", 0, ts3).await.unwrap().unwrap();
    assert!(o <= 3 && ts >= ts3 && all[o as usize].header.timestamp == ts);
    assert_eq!(b.offset_for_timestamp(&s, "t", 0, ts3 + 1).await.unwrap(), None);

    // A waiting Fetch is woken by the interval even with no append of ours.
    let seen = b.append_generation();
    tokio::time::timeout(Duration::from_secs(2), b.wait_for_append(seen))
        .await
        .expect("woken within the wake interval");

    // Consumer offsets (DIFF-1..3).
    let g = "kafka.cg.smoke";
    b.create_consumer_group(&s, "t", g).await.unwrap();
    let dup = b.create_consumer_group(&s, "t", g).await.unwrap_err();
    assert_eq!(
        code(dup),
        IggyError::ConsumerGroupNameAlreadyExists(String::new(), Identifier::default()).as_code()
    );
    assert_eq!(b.list_consumer_groups(&s, "t").await.unwrap(), vec![g.to_string()]);
    let not_member = b.store_consumer_offset(&s, "t", 0, g, 1, 1).await.unwrap_err();
    assert_eq!(code(not_member), IggyError::ResourceNotFound(String::new()).as_code());
    b.join_consumer_group(&s, "t", g, 1).await.unwrap();
    b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap();
    assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(2));
    b.store_consumer_offset(&s, "t", 0, g, 1, 3).await.unwrap();
    b.store_consumer_offset(&s, "t", 0, g, 1, 1).await.unwrap();
    assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(1));
    let above = b.store_consumer_offset(&s, "t", 0, g, 1, 4).await.unwrap_err();
    assert_eq!(code(above), IggyError::InvalidOffset(0).as_code());
    let on_empty = b.store_consumer_offset(&s, "t", 1, g, 1, 0).await.unwrap_err();
    assert_eq!(code(on_empty), IggyError::InvalidOffset(0).as_code());
    assert_eq!(b.get_consumer_offset(&s, "t", 1, g).await.unwrap(), None);
    b.delete_consumer_offset(&s, "t", 0, g, 1).await.unwrap();
    assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), None);
    let absent = b.delete_consumer_offset(&s, "t", 0, g, 1).await.unwrap_err();
    assert_eq!(code(absent), IggyError::ConsumerOffsetNotFound(0).as_code());

    // After leaving and releasing, the same id is a new connection, no member.
    b.store_consumer_offset(&s, "t", 0, g, 1, 3).await.unwrap();
    b.leave_consumer_group(&s, "t", g, 1).await.unwrap();
    b.release_client(1);
    let rejoined = b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap_err();
    assert_eq!(code(rejoined), IggyError::ResourceNotFound(String::new()).as_code());
    b.join_consumer_group(&s, "t", g, 1).await.unwrap();
    b.store_consumer_offset(&s, "t", 0, g, 1, 2).await.unwrap();
    assert_eq!(b.get_consumer_offset(&s, "t", 0, g).await.unwrap(), Some(2));
    b.leave_consumer_group(&s, "t", g, 1).await.unwrap();
    b.release_client(1);

    b.delete_consumer_group(&s, "t", g).await.unwrap();
    assert!(b.list_consumer_groups(&s, "t").await.unwrap().is_empty());
    b.delete_topic(&s, "t").await.unwrap();
    b.delete_topic(&s, "expiring").await.unwrap();
    assert_eq!(b.get_topic(&s, "t").await.unwrap(), None);
}
