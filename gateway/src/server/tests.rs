//! Tests of the accept loop and its connections, on in-memory connections handed over by a
//! channel listener: timeouts, shutdown, connection and in-flight limits, shedding, TLS and the
//! pre-authentication limits.

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

/// Writes of a test stream go straight to the duplex stream it wraps (its `stream` field).
macro_rules! writes_through {
    ($wrapper:ty) => {
        impl AsyncWrite for $wrapper {
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
    };
}

writes_through!(Descriptor);

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
async fn connect_from(tx: &Incoming, address: impl Into<std::net::IpAddr>, buffer_size: usize) -> DuplexStream {
    let (client, server) = tokio::io::duplex(buffer_size);
    let peer = SocketAddr::from((address.into(), 1));
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

/// A connection's server end that counts the reads which brought bytes.
struct CountingStream {
    stream: DuplexStream,
    reads: Arc<std::sync::atomic::AtomicUsize>,
}

impl AsyncRead for CountingStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        polled
    }
}

writes_through!(CountingStream);

struct CountingListener {
    incoming: mpsc::Receiver<(DuplexStream, SocketAddr)>,
    reads: Arc<std::sync::atomic::AtomicUsize>,
}

impl Listener for CountingListener {
    type Stream = CountingStream;
    async fn accept(&mut self) -> std::io::Result<(CountingStream, SocketAddr)> {
        match self.incoming.recv().await {
            Some((stream, peer)) => Ok((
                CountingStream {
                    stream,
                    reads: self.reads.clone(),
                },
                peer,
            )),
            None => std::future::pending().await,
        }
    }
}

/// Reading a request's length and then its body took three reads of the connection (the length's
/// first byte, the rest of it, the body); through the connection's read buffer, two small requests
/// sent together come in one.
#[tokio::test]
async fn proto_frame_2_two_small_requests_sent_together_are_read_in_one_read() {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
    let (tx, rx) = mpsc::channel(4);
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let shutdown = Shutdown::default();
    let listener = CountingListener {
        incoming: rx,
        reads: reads.clone(),
    };
    let task = tokio::spawn(serve(listener, gateway, shutdown.clone()));
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let mut two = api_versions_v0_frame();
    two.extend(api_versions_v0_frame());
    // Both requests wait in the connection before the server reads anything.
    client.write_all(&two).await.unwrap();
    tx.send((server, SocketAddr::from(([127, 0, 0, 1], 1)))).await.unwrap();
    for _ in 0..2 {
        let mut size = [0u8; 4];
        client.read_exact(&mut size).await.unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        client.read_exact(&mut body).await.unwrap();
        assert_eq!(
            &body[..4],
            &7i32.to_be_bytes(),
            "an answer to the request (its correlation id)"
        );
    }
    assert_eq!(
        reads.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "reads of the connection that brought bytes, for two requests"
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

/// `future` polled once.
fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    std::pin::Pin::new(future).poll(&mut context)
}

/// LIMIT-INFLIGHT-1, the regression: two frames that each held half the budget and asked for
/// more waited on each other until their idle timeout. A frame that holds room now takes the one
/// overdraw and reads its rest; a second waits for it to be answered, and a frame holding nothing
/// waits for the budget as before.
#[tokio::test(start_paused = true)]
async fn limit_inflight_1_frames_holding_room_and_waiting_for_more_do_not_wait_on_each_other() {
    use crate::protocol::frame::{Admitted, ADMISSION_CHUNK};
    let chunk = ADMISSION_CHUNK;
    let config = Config::resolve(
        Args::default(),
        with_limits(crate::limits::LimitSettings {
            max_inflight_request_bytes: Some(2 * chunk),
            ..Default::default()
        }),
    )
    .expect("valid config");
    let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
    let frame = 3 * chunk;
    let a_first = gateway.admit_request_bytes(frame, 0, chunk).await;
    let b_first = gateway.admit_request_bytes(frame, 0, chunk).await;
    assert!(matches!(
        (&a_first, &b_first),
        (Admitted::Chunk(Some(_)), Admitted::Chunk(Some(_)))
    ));
    let std::task::Poll::Ready(a_rest) = poll_once(&mut Box::pin(gateway.admit_request_bytes(frame, chunk, chunk)))
    else {
        panic!("A, holding room, waited for more");
    };
    assert!(matches!(a_rest, Admitted::Rest(Some(_))), "{a_rest:?}");
    let mut b_more = Box::pin(gateway.admit_request_bytes(frame, chunk, chunk));
    assert!(poll_once(&mut b_more).is_pending(), "B overdrew beside A");
    // A's request answered: its room and the overdraw come back, and B takes room first.
    drop((a_first, a_rest));
    let b_more = b_more.await;
    assert!(matches!(b_more, Admitted::Chunk(Some(_))), "{b_more:?}");
    // The budget is B's now, the overdraw free: a frame holding nothing still waits.
    let mut c_first = Box::pin(gateway.admit_request_bytes(frame, 0, chunk));
    assert!(poll_once(&mut c_first).is_pending(), "a frame holding nothing overdrew");
    drop((b_first, b_more));
    assert!(matches!(c_first.await, Admitted::Chunk(Some(_))));
}

/// LIMIT-INFLIGHT-1, the regression: frames each larger than the whole budget (set below
/// `max_frame_size`) used to take all of it and wait for more until their idle timeout closed
/// them. Both are answered now, one after the other.
#[tokio::test(start_paused = true)]
async fn limit_inflight_1_frames_larger_than_the_budget_are_answered() {
    let chunk = crate::protocol::frame::ADMISSION_CHUNK;
    let (tx, shutdown, task) = start_with(FileConfig {
        max_frame_size: Some(8 * chunk),
        ..with_limits(crate::limits::LimitSettings {
            max_inflight_request_bytes: Some(2 * chunk),
            ..Default::default()
        })
    });
    // An ApiVersions request with five chunks of trailing bytes, which the gateway ignores
    // (LIMIT-TRAILING-BYTES-1).
    let mut padded = api_versions_v0_frame();
    padded.resize(padded.len() + 5 * chunk, 0);
    let size = padded.len() as i32 - 4;
    padded[..4].copy_from_slice(&size.to_be_bytes());
    let mut answered = Vec::new();
    for _ in 0..2 {
        let mut client = connect(&tx).await;
        let frame = padded.clone();
        answered.push(tokio::spawn(async move {
            client.write_all(&frame).await?;
            let mut size = [0u8; 4];
            client.read_exact(&mut size).await?;
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            client.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(body[..4] == 7i32.to_be_bytes())
        }));
    }
    for client in answered {
        assert!(client.await.unwrap().expect("answered, not closed"));
    }
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
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
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

#[tokio::test(start_paused = true)]
async fn limit_connections_prefix_1_limit_address_key_1_one_ipv6_64_holds_at_most_its_quota() {
    let (tx, shutdown, task) = start_with(with_limits(crate::limits::LimitSettings {
        max_connections: Some(10),
        max_connections_per_address: Some(2),
        max_connections_per_prefix: Some(3),
        ..Default::default()
    }));
    // A client rotating through its /64: every connection from an address of its own.
    let of_64 = |host: u16| [0x2001, 0xdb8, 0, 7, 0, 0, 0, host];
    let mut held = Vec::new();
    for host in 1..=3 {
        let mut c = connect_from(&tx, of_64(host), 64 * 1024).await;
        assert!(served(&mut c).await);
        held.push(c);
    }
    let mut fourth = connect_from(&tx, of_64(4), 64 * 1024).await;
    assert!(
        closed(&mut fourth).await,
        "a fourth address of the /64 is closed though each address holds one connection"
    );
    let mut other_64 = connect_from(&tx, [0x2001, 0xdb8, 0, 8, 0, 0, 0, 1], 64 * 1024).await;
    assert!(served(&mut other_64).await, "another /64 is another client");
    let mut v4 = connect_from(&tx, [10, 0, 0, 1], 64 * 1024).await;
    assert!(served(&mut v4).await, "IPv4 clients are keyed by their whole address");
    for c in &mut held {
        assert!(served(c).await, "the /64's first connections were not touched");
    }
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
