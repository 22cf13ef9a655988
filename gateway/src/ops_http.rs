//! The operations listener (`--metrics-listen`): a small HTTP/1.1 server with `/metrics`
//! (Prometheus text format), `/healthz` (the process answers) and `/readyz` (the Kafka listener
//! accepts and the backend answers). See docs/operating.md.

use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::metrics::metrics;
use crate::server::Shutdown;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A backend that has not answered the readiness probe within this is not ready.
pub const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A probe's answer is reused for this long, so frequent `/readyz` polls do not load Iggy.
pub const READY_CACHE: Duration = Duration::from_secs(1);

/// The topic the readiness probe asks the backend about: any answer, found or not, shows that
/// the backend answers.
const PROBE_TOPIC: &str = "kafka-iggy-gateway-readiness-probe";

/// The Content-Type of the Prometheus text exposition format.
/// The most operations connections served at once; more are closed at accept. Scrapers and
/// probes need a handful, and each connection holds a descriptor the Kafka listener also needs.
pub const MAX_OPS_CONNECTIONS: usize = 32;

/// The longest one operations connection is kept, idle or not: a scrape or probe takes
/// milliseconds, and a client that sends nothing must not hold its slot for good.
pub const OPS_CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the listener asks of the gateway it reports on, without its backend type.
pub trait OpsSource: Send + Sync + 'static {
    /// Whether the Kafka listener still accepts connections (false once shutdown began).
    fn accepting(&self) -> bool;
    /// One cheap backend call: `Err` says why the backend did not answer.
    fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>>;
    /// Sets the gauges that are read from gateway state at each scrape.
    fn refresh_gauges(&self);
    /// The gauges read from the backend at each scrape (the compacted topics' messages).
    fn refresh_backend_gauges(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// What the backend knows of why it cannot reach a primary (CLUSTER-FAILOVER-2).
    fn backend_note(&self) -> Option<String> {
        None
    }
    /// Why the backend is unfit although it answers the probe (CLUSTER-SPLIT-1).
    fn backend_degraded(&self) -> Option<String> {
        None
    }
}

/// How long a scrape waits for the gauges read from the backend.
const BACKEND_GAUGES_WITHIN: Duration = Duration::from_secs(2);

/// A gateway and the shutdown of its Kafka listener, as an [`OpsSource`].
pub struct GatewayOps<B> {
    pub gateway: Arc<Gateway<B>>,
    pub shutdown: Shutdown,
}

impl<B: Backend> OpsSource for GatewayOps<B> {
    fn accepting(&self) -> bool {
        !self.shutdown.is_triggered()
    }

    fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let stream = self.gateway.config.topics.default_stream();
            match self.gateway.backend.get_topic(stream, PROBE_TOPIC).await {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn backend_note(&self) -> Option<String> {
        self.gateway.backend.unavailable_reason()
    }

    fn backend_degraded(&self) -> Option<String> {
        self.gateway.backend.degraded_reason()
    }

    fn refresh_backend_gauges(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (topics, messages) = self.gateway.compacted_topics.retained(&*self.gateway.backend).await;
            metrics().set_compacted(topics, messages);
        })
    }

    fn refresh_gauges(&self) {
        let groups = &self.gateway.groups;
        metrics().set_groups(groups.list().len(), groups.usage().0);
        metrics().set_producer_states(self.gateway.producer_states.total());
    }
}

/// A readiness answer and when it was found.
struct Cached {
    at: Instant,
    answer: Result<(), String>,
}

struct State {
    source: Arc<dyn OpsSource>,
    ready: Mutex<Option<Cached>>,
}

impl State {
    async fn readiness(&self) -> Result<(), String> {
        if !self.source.accepting() {
            return Err("shutting down: the Kafka listener no longer accepts".into());
        }
        if let Some(cached) = &*self.ready.lock().expect("not poisoned") {
            if cached.at.elapsed() < READY_CACHE {
                return cached.answer.clone();
            }
        }
        let answer = match tokio::time::timeout(READY_PROBE_TIMEOUT, self.source.probe_backend()).await {
            // CLUSTER-SPLIT-1: in a split the metadata probe answers while every append fails.
            Ok(Ok(())) => match self.source.backend_degraded() {
                Some(why) => Err(format!("the backend answers but cannot append: {why}")),
                None => Ok(()),
            },
            Ok(Err(e)) => Err(format!("the backend failed: {e}")),
            Err(_) => Err(format!("the backend did not answer within {READY_PROBE_TIMEOUT:?}")),
        };
        // CLUSTER-FAILOVER-2: while no Iggy primary answers, say why (each node's last answer).
        let answer = answer.map_err(|why| match self.source.backend_note() {
            Some(note) => format!("{why}; {note}"),
            None => why,
        });
        *self.ready.lock().expect("not poisoned") = Some(Cached {
            at: Instant::now(),
            answer: answer.clone(),
        });
        answer
    }

    async fn answer(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        }
        match request.uri().path() {
            "/metrics" => {
                self.source.refresh_gauges();
                // A slow backend leaves the compacted-topic gauges at their last values rather
                // than holding the scrape.
                let _ = tokio::time::timeout(BACKEND_GAUGES_WITHIN, self.source.refresh_backend_gauges()).await;
                let mut response = text(StatusCode::OK, metrics().encode());
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(METRICS_CONTENT_TYPE),
                );
                response
            }
            "/healthz" => text(StatusCode::OK, "ok\n".into()),
            "/readyz" => match self.readiness().await {
                Ok(()) => text(StatusCode::OK, "ready\n".into()),
                Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
            },
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: /metrics, /healthz and /readyz are served\n".into(),
            ),
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

/// Serves the operations endpoints on `listener` until the task is dropped. A connection that
/// fails is logged at debug level; the listener keeps serving.
pub async fn serve_ops(listener: tokio::net::TcpListener, source: Arc<dyn OpsSource>) {
    let state = Arc::new(State {
        source,
        ready: Mutex::new(None),
    });
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_OPS_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors: the Kafka listener's back-off covers the real traffic;
                // here a short pause keeps the loop from spinning.
                tracing::warn!("metrics listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "metrics listener: {MAX_OPS_CONNECTIONS} connections open; closing this one");
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(state.answer(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            match tokio::time::timeout(OPS_CONNECTION_LIFETIME, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(%peer, "metrics listener: connection failed: {e}"),
                Err(_) => {
                    tracing::debug!(%peer, "metrics listener: connection closed after {OPS_CONNECTION_LIFETIME:?}")
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A source whose backend answers as a flag says, counting probes.
    struct Switch {
        up: AtomicBool,
        probes: AtomicUsize,
    }

    impl OpsSource for Switch {
        fn accepting(&self) -> bool {
            true
        }
        fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>> {
            self.probes.fetch_add(1, Ordering::SeqCst);
            let up = self.up.load(Ordering::SeqCst);
            Box::pin(async move {
                if up {
                    Ok(())
                } else {
                    Err("down".into())
                }
            })
        }
        fn refresh_gauges(&self) {}
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response[9..12].parse().unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
        (status, body)
    }

    #[tokio::test]
    async fn the_listener_serves_metrics_health_and_readiness_and_nothing_else() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let switch = Arc::new(Switch {
            up: AtomicBool::new(true),
            probes: AtomicUsize::new(0),
        });
        let task = tokio::spawn(serve_ops(listener, switch.clone()));
        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/nowhere").await.0, 404);
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains("\nkafka_iggy_gateway_received_bytes_total "), "{body}");
        assert_eq!(get(addr, "/readyz").await.0, 200);
        task.abort();
    }

    /// Past MAX_OPS_CONNECTIONS idle connections, the next one is closed at accept, unanswered,
    /// while those already open are still served.
    #[tokio::test]
    async fn connections_past_the_bound_are_closed_unanswered() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let switch = Arc::new(Switch {
            up: AtomicBool::new(true),
            probes: AtomicUsize::new(0),
        });
        let task = tokio::spawn(serve_ops(listener, switch));
        let mut held = Vec::new();
        for _ in 0..MAX_OPS_CONNECTIONS {
            held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        let mut refused = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut answer = Vec::new();
        // Closed without a byte: EOF, or a reset if the close raced our request.
        let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        let _ = refused.read_to_end(&mut answer).await;
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
        let first = &mut held[0];
        first
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        first.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_is_lost_when_the_backend_fails_and_regained_when_it_answers() {
        let switch = Arc::new(Switch {
            up: AtomicBool::new(false),
            probes: AtomicUsize::new(0),
        });
        let state = State {
            source: switch.clone(),
            ready: Mutex::new(None),
        };
        assert!(state.readiness().await.unwrap_err().contains("down"));
        switch.up.store(true, Ordering::SeqCst);
        // Cached against std's clock, not tokio's: expire it by hand.
        state.ready.lock().unwrap().take();
        assert_eq!(state.readiness().await, Ok(()));
        assert_eq!(switch.probes.load(Ordering::SeqCst), 2);
    }

    /// A backend that never answers makes the gateway unready at the probe timeout.
    struct Stuck;

    impl OpsSource for Stuck {
        fn accepting(&self) -> bool {
            true
        }
        fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(std::future::pending())
        }
        fn refresh_gauges(&self) {}
    }

    /// A cluster with no primary: the probe hangs in the failover and the backend knows why.
    struct NoPrimary;

    impl OpsSource for NoPrimary {
        fn accepting(&self) -> bool {
            true
        }
        fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(std::future::pending())
        }
        fn refresh_gauges(&self) {}
        fn backend_note(&self) -> Option<String> {
            Some("no Iggy primary: 127.0.0.1:18090: cannot establish connection".into())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cluster_failover_2_readiness_names_why_no_primary_answers() {
        let state = State {
            source: Arc::new(NoPrimary),
            ready: Mutex::new(None),
        };
        let why = state.readiness().await.unwrap_err();
        assert!(
            why.contains("did not answer") && why.contains("no Iggy primary: 127.0.0.1:18090"),
            "{why}"
        );
    }

    /// A cluster whose metadata answers while its appends do not: a suspected split.
    struct Split;

    impl OpsSource for Split {
        fn accepting(&self) -> bool {
            true
        }
        fn probe_backend(&self) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async { Ok(()) })
        }
        fn refresh_gauges(&self) {}
        fn backend_degraded(&self) -> Option<String> {
            Some("appends have had no answer for 21 s while 127.0.0.1:18091 answers as the metadata leader".into())
        }
    }

    /// Found by review of the compose docs: the split was only named when the probe failed, and
    /// in a split the metadata probe succeeds, so `/readyz` stayed ready through it.
    #[tokio::test(start_paused = true)]
    async fn cluster_split_1_readiness_is_lost_while_a_split_is_suspected_though_the_probe_answers() {
        let state = State {
            source: Arc::new(Split),
            ready: Mutex::new(None),
        };
        let why = state.readiness().await.unwrap_err();
        assert!(
            why.contains("cannot append") && why.contains("metadata leader"),
            "{why}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_backend_that_does_not_answer_is_not_ready_at_the_probe_timeout() {
        let state = State {
            source: Arc::new(Stuck),
            ready: Mutex::new(None),
        };
        let why = state.readiness().await.unwrap_err();
        assert!(why.contains("did not answer"), "{why}");
    }
}
