//! The gateway's backend port over the simulated network: [`RemoteBackend`] implements
//! [`Backend`] and [`ConsumerOffsets`] by sending each operation to the
//! [`iggy_host`](crate::iggy_host) as an [`iggy_wire`](crate::iggy_wire) request, so the
//! gateway-to-Iggy hop can lose, delay and partition like any other.
//!
//! Each call takes an idle connection (or opens one), sends one request and waits for its
//! response for at most the request timeout. A call that gets no answer (lost request, lost
//! response, partition, Iggy restart) closes its connection and fails with `Disconnected`, which
//! the gateway answers as a retriable Kafka error; the write it asked for may or may not have
//! happened, exactly as with the SDK.
//!
//! Given a roster of several Iggy nodes ([`RemoteBackend::with_roster`], the replicated
//! cluster), a call follows the primary instead: CLUSTER-FAILOVER-1 moves it to the next node
//! when its connection is refused or broken, it gets no answer, or the node says it is not
//! primary, within the failover timeout (CLUSTER-FAILOVER-2); CLUSTER-UNKNOWN-1 makes an append
//! that was sent and not answered an unknown outcome, never sent again here.
//!
//! Append notifications cannot cross processes, so a Fetch long-poll is woken by this gateway's
//! own appends or, for another gateway's, by the next tick of [`APPEND_POLL`].

use crate::iggy_host::{IGGY_HOST, IGGY_PORT};
use crate::iggy_wire::{decode_response, encode_request, take_frame, Op, Outcome, Request};
use crate::trace::Trace;
use bytes::BytesMut;
use iggy_common::{IggyError, IggyMessage};
use kafka_iggy_gateway::auth::credentials::{Credentials, Principal, SecretKind};
use kafka_iggy_gateway::backend::append_signal::AppendSignal;
use kafka_iggy_gateway::backend::{
    Backend, BackendError, ClientId, ConsumerOffsets, ReadLimits, TopicInfo, TopicSpec, Watermarks,
};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::TcpStream;

/// How often a waiting Fetch looks again for appends made through another gateway.
pub const APPEND_POLL: Duration = Duration::from_millis(50);

struct Connection {
    /// The roster entry it is connected to.
    host: usize,
    stream: TcpStream,
    buffer: BytesMut,
}

struct Shared {
    /// Which gateway this is, for the trace.
    name: String,
    /// The Iggy nodes, as `(host, port)`; one for the single Iggy host.
    roster: Vec<(String, u16)>,
    /// The roster entry calls go to first: the last node that served one.
    current: AtomicUsize,
    /// How long a call may spend failing over (CLUSTER-FAILOVER-2), with a roster.
    failover_timeout: Duration,
    request_timeout: Duration,
    idle: Mutex<Vec<Connection>>,
    next_request: AtomicU64,
    appends: AppendSignal,
    trace: Trace,
}

/// A gateway's Iggy client over the simulated network, as one Iggy user (the gateway's own
/// login, user 0, or a session's).
pub struct RemoteBackend {
    shared: Arc<Shared>,
    user: u32,
}

impl RemoteBackend {
    /// A client of the Iggy host for the gateway `name`, waiting `request_timeout` for each
    /// answer.
    pub fn new(name: &str, request_timeout: Duration, trace: Trace) -> Self {
        Self::with_roster(
            name,
            vec![(IGGY_HOST.to_string(), IGGY_PORT)],
            request_timeout,
            request_timeout,
            trace,
        )
    }

    /// A client of a cluster of Iggy nodes (CLUSTER-ROSTER-1), following its primary: each
    /// exchange waits at most `request_timeout`, a whole call with its failover at most
    /// `failover_timeout` (CLUSTER-FAILOVER-2).
    pub fn with_roster(
        name: &str,
        roster: Vec<(String, u16)>,
        request_timeout: Duration,
        failover_timeout: Duration,
        trace: Trace,
    ) -> Self {
        assert!(!roster.is_empty(), "a roster names at least one node");
        Self {
            shared: Arc::new(Shared {
                name: name.to_string(),
                roster,
                current: AtomicUsize::new(0),
                failover_timeout,
                request_timeout,
                idle: Mutex::new(Vec::new()),
                next_request: AtomicU64::new(1),
                appends: AppendSignal::default(),
                trace,
            }),
            user: 0,
        }
    }

    async fn call(&self, op: Op) -> Result<Outcome, BackendError> {
        if self.shared.roster.len() > 1 {
            return self.call_cluster(op).await;
        }
        let shared = &self.shared;
        let id = shared.next_request.fetch_add(1, Ordering::Relaxed);
        let name = op.name();
        let frame = encode_request(&Request {
            id,
            user: self.user,
            op,
        });
        let idle = shared.idle.lock().expect("pool lock").pop();
        let exchange = async {
            let mut conn = match idle {
                Some(conn) => conn,
                None => Connection {
                    host: 0,
                    stream: TcpStream::connect(shared.roster[0].clone()).await?,
                    buffer: BytesMut::with_capacity(4096),
                },
            };
            conn.stream.write_all(&frame).await?;
            loop {
                if let Some(body) = take_frame(&mut conn.buffer).map_err(std::io::Error::other)? {
                    let response = decode_response(body).map_err(std::io::Error::other)?;
                    if response.id != id {
                        return Err(std::io::Error::other(format!(
                            "response {} to request {id}",
                            response.id
                        )));
                    }
                    return Ok((conn, response.outcome));
                }
                if conn.stream.read_buf(&mut conn.buffer).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        };
        match tokio::time::timeout(shared.request_timeout, exchange).await {
            Ok(Ok((conn, outcome))) => {
                shared.idle.lock().expect("pool lock").push(conn);
                match outcome {
                    Outcome::Failed(e) => Err(e),
                    outcome => Ok(outcome),
                }
            }
            failed => {
                // The SDK has one connection and reconnects it once; idle connections opened
                // before the failure are as dead as this one (an Iggy restart ends them all), so
                // they go too rather than failing one request each.
                shared.idle.lock().expect("pool lock").clear();
                let why = match failed {
                    Ok(Err(e)) => format!("{e}"),
                    _ => format!("no answer within {:?}", shared.request_timeout),
                };
                if shared.trace.enabled() {
                    shared
                        .trace
                        .event(&shared.name, format!("iggy request {id} ({name}) failed: {why}"));
                }
                Err(IggyError::Disconnected.into())
            }
        }
    }
}

/// How one exchange with one node of a roster ended.
enum Exchange {
    Answered(Connection, Outcome),
    /// Nothing reached a node that could apply it: no connection, or "not primary".
    NotSent(String),
    /// Sent, and the connection broke or no answer came in time, or the node could not commit it
    /// yet: it may or may not be applied.
    Unknown(String),
}

impl RemoteBackend {
    /// One exchange with roster entry `host`, on an idle connection to it or a new one.
    async fn exchange(&self, host: usize, id: u64, frame: &bytes::Bytes, wait: Duration) -> Exchange {
        let shared = &self.shared;
        let idle = {
            let mut idle = shared.idle.lock().expect("pool lock");
            let position = idle.iter().position(|c| c.host == host);
            position.map(|i| idle.swap_remove(i))
        };
        let mut conn = match idle {
            Some(conn) => conn,
            None => match tokio::time::timeout(wait, TcpStream::connect(shared.roster[host].clone())).await {
                Ok(Ok(stream)) => Connection {
                    host,
                    stream,
                    buffer: BytesMut::with_capacity(4096),
                },
                Ok(Err(e)) => return Exchange::NotSent(format!("connect: {e}")),
                Err(_) => return Exchange::NotSent(format!("connect: no answer within {wait:?}")),
            },
        };
        let talk = async {
            conn.stream.write_all(frame).await?;
            loop {
                if let Some(body) = take_frame(&mut conn.buffer).map_err(std::io::Error::other)? {
                    let response = decode_response(body).map_err(std::io::Error::other)?;
                    if response.id != id {
                        return Err(std::io::Error::other(format!(
                            "response {} to request {id}",
                            response.id
                        )));
                    }
                    return Ok(response.outcome);
                }
                if conn.stream.read_buf(&mut conn.buffer).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        };
        match tokio::time::timeout(wait, talk).await {
            Ok(Ok(Outcome::Failed(BackendError::Iggy(IggyError::TransientNotAccepted)))) => {
                shared.idle.lock().expect("pool lock").push(conn);
                Exchange::NotSent("not primary".into())
            }
            Ok(Ok(Outcome::Failed(BackendError::Iggy(IggyError::TransientNotCommitted)))) => {
                shared.idle.lock().expect("pool lock").push(conn);
                Exchange::Unknown("not committed yet".into())
            }
            Ok(Ok(outcome)) => Exchange::Answered(conn, outcome),
            Ok(Err(e)) => Exchange::Unknown(format!("{e}")),
            Err(_) => Exchange::Unknown(format!("no answer within {wait:?}")),
        }
    }

    /// A call through the roster (CLUSTER-FAILOVER-1/2, CLUSTER-UNKNOWN-1): to the node that
    /// last served, then each next one, until one answers as primary or the failover timeout
    /// ends. A call that is not safe to repeat (an append, a create or delete) and was sent
    /// without an answer is an unknown outcome at once and is not sent again.
    async fn call_cluster(&self, op: Op) -> Result<Outcome, BackendError> {
        let shared = &self.shared;
        let id = shared.next_request.fetch_add(1, Ordering::Relaxed);
        let name = op.name();
        let repeatable = !matches!(
            op,
            Op::Append { .. }
                | Op::CreateTopic { .. }
                | Op::DeleteTopic { .. }
                | Op::AddPartitions { .. }
                | Op::CreateGroup { .. }
                | Op::DeleteGroup { .. }
        );
        let frame = encode_request(&Request {
            id,
            user: self.user,
            op,
        });
        let started = tokio::time::Instant::now();
        let deadline = started + shared.failover_timeout;
        let nodes = shared.roster.len();
        let mut tried = 0;
        let mut reasons: Vec<String> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                // CLUSTER-FAILOVER-2: bounded, then a retriable error naming why.
                return Err(BackendError::NoPrimary {
                    waited_ms: started.elapsed().as_millis() as u64,
                    reason: reasons.join("; "),
                });
            }
            let host = shared.current.load(Ordering::Relaxed);
            let why = match self.exchange(host, id, &frame, shared.request_timeout.min(left)).await {
                Exchange::Answered(conn, outcome) => {
                    shared.idle.lock().expect("pool lock").push(conn);
                    return match outcome {
                        Outcome::Failed(e) => Err(e),
                        outcome => Ok(outcome),
                    };
                }
                Exchange::NotSent(why) => why,
                Exchange::Unknown(why) if !repeatable => {
                    // CLUSTER-UNKNOWN-1: the node may have stored it; never success, never
                    // sent again here. The next call starts at the next node.
                    self.move_on(host, id, name, &why);
                    return Err(BackendError::OutcomeUnknown(format!(
                        "{}: {why}",
                        shared.roster[host].0
                    )));
                }
                Exchange::Unknown(why) => why,
            };
            // CLUSTER-FAILOVER-1: the next node of the roster; after a whole round, a pause.
            self.move_on(host, id, name, &why);
            reasons.push(format!("{}: {why}", shared.roster[host].0));
            if reasons.len() > nodes {
                reasons.remove(0);
            }
            tried += 1;
            if tried % nodes == 0 {
                tokio::time::sleep(ROUND_PAUSE.min(left)).await;
            }
        }
    }

    /// Leaves roster entry `host`: its idle connections go, the next calls start at the next.
    fn move_on(&self, host: usize, id: u64, name: &str, why: &str) {
        let shared = &self.shared;
        shared.idle.lock().expect("pool lock").retain(|c| c.host != host);
        let _ = shared.current.compare_exchange(
            host,
            (host + 1) % shared.roster.len(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if shared.trace.enabled() {
            shared.trace.event(
                &shared.name,
                format!(
                    "iggy request {id} ({name}) at {}: {why}; moving on",
                    shared.roster[host].0
                ),
            );
        }
    }
}

/// The pause after every node of a roster failed once in one call.
const ROUND_PAUSE: Duration = Duration::from_millis(50);

fn unexpected(outcome: Outcome) -> BackendError {
    BackendError::Iggy(IggyError::ResourceNotFound(format!(
        "unexpected answer from the Iggy host: {outcome:?}"
    )))
}

fn unit(outcome: Outcome) -> Result<(), BackendError> {
    match outcome {
        Outcome::Unit => Ok(()),
        other => Err(unexpected(other)),
    }
}

impl Backend for RemoteBackend {
    fn kind(&self) -> &'static str {
        "iggy"
    }

    async fn open_session(&self, credentials: &Credentials) -> Result<(Self, Principal), BackendError> {
        let op = Op::Login {
            username: credentials.username.clone(),
            secret: credentials.secret.expose().to_string(),
            token: matches!(credentials.kind, SecretKind::PersonalAccessToken),
        };
        match self.call(op).await? {
            Outcome::Principal { user_id, username } => Ok((
                Self {
                    shared: self.shared.clone(),
                    user: user_id,
                },
                Principal { user_id, username },
            )),
            other => Err(unexpected(other)),
        }
    }

    async fn ensure_stream(&self, stream: &str) -> Result<(), BackendError> {
        unit(self.call(Op::EnsureStream { stream: stream.into() }).await?)
    }

    async fn list_topics(&self, stream: &str) -> Result<Vec<TopicInfo>, BackendError> {
        match self.call(Op::ListTopics { stream: stream.into() }).await? {
            Outcome::Topics(topics) => Ok(topics),
            other => Err(unexpected(other)),
        }
    }

    async fn get_topic(&self, stream: &str, topic: &str) -> Result<Option<TopicInfo>, BackendError> {
        let op = Op::GetTopic {
            stream: stream.into(),
            topic: topic.into(),
        };
        match self.call(op).await? {
            Outcome::Topic(topic) => Ok(topic),
            other => Err(unexpected(other)),
        }
    }

    async fn create_topic(&self, stream: &str, topic: &str, spec: TopicSpec) -> Result<(), BackendError> {
        unit(
            self.call(Op::CreateTopic {
                stream: stream.into(),
                topic: topic.into(),
                partitions: spec.partitions,
                message_expiry_us: spec.message_expiry_us,
            })
            .await?,
        )
    }

    async fn delete_topic(&self, stream: &str, topic: &str) -> Result<(), BackendError> {
        unit(
            self.call(Op::DeleteTopic {
                stream: stream.into(),
                topic: topic.into(),
            })
            .await?,
        )
    }

    async fn add_partitions(&self, stream: &str, topic: &str, count: u32) -> Result<(), BackendError> {
        unit(
            self.call(Op::AddPartitions {
                stream: stream.into(),
                topic: topic.into(),
                count,
            })
            .await?,
        )
    }

    async fn append(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> Result<Option<u64>, BackendError> {
        let op = Op::Append {
            stream: stream.into(),
            topic: topic.into(),
            partition,
            messages,
        };
        match self.call(op).await? {
            Outcome::Offset(base) => {
                self.shared.appends.bump();
                Ok(base)
            }
            other => Err(unexpected(other)),
        }
    }

    async fn read(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Result<Vec<IggyMessage>, BackendError> {
        let op = Op::Read {
            stream: stream.into(),
            topic: topic.into(),
            partition,
            offset,
            max_messages: limits.max_messages,
            max_bytes: limits.max_bytes,
        };
        match self.call(op).await? {
            Outcome::Messages(messages) => Ok(messages),
            other => Err(unexpected(other)),
        }
    }

    async fn watermarks(&self, stream: &str, topic: &str, partition: u32) -> Result<Watermarks, BackendError> {
        let op = Op::Watermarks {
            stream: stream.into(),
            topic: topic.into(),
            partition,
        };
        match self.call(op).await? {
            Outcome::Watermarks(w) => Ok(w),
            other => Err(unexpected(other)),
        }
    }

    async fn offset_for_timestamp(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_us: u64,
    ) -> Result<Option<(u64, u64)>, BackendError> {
        let op = Op::OffsetForTimestamp {
            stream: stream.into(),
            topic: topic.into(),
            partition,
            timestamp_us,
        };
        match self.call(op).await? {
            Outcome::OffsetAndTimestamp(found) => Ok(found),
            other => Err(unexpected(other)),
        }
    }

    fn append_generation(&self) -> u64 {
        self.shared.appends.generation()
    }

    async fn wait_for_append(&self, seen: u64) {
        // Another gateway's appends are only seen by reading again: wake at the next poll tick.
        let _ = tokio::time::timeout(APPEND_POLL, self.shared.appends.changed_from(seen)).await;
    }
}

impl ConsumerOffsets for RemoteBackend {
    async fn create_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        unit(
            self.call(Op::CreateGroup {
                stream: stream.into(),
                topic: topic.into(),
                group: group.into(),
            })
            .await?,
        )
    }

    fn release_client(&self, client: ClientId) {
        // Called on shutdown, outside any request: best effort, as closing an SDK client is.
        if tokio::runtime::Handle::try_current().is_ok() {
            let backend = Self {
                shared: self.shared.clone(),
                user: self.user,
            };
            tokio::spawn(async move {
                let _ = backend.call(Op::ReleaseClient { client }).await;
            });
        }
    }

    async fn delete_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        unit(
            self.call(Op::DeleteGroup {
                stream: stream.into(),
                topic: topic.into(),
                group: group.into(),
            })
            .await?,
        )
    }

    async fn list_consumer_groups(&self, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
        let op = Op::ListGroups {
            stream: stream.into(),
            topic: topic.into(),
        };
        match self.call(op).await? {
            Outcome::Names(names) => Ok(names),
            other => Err(unexpected(other)),
        }
    }

    async fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        unit(
            self.call(Op::JoinGroup {
                stream: stream.into(),
                topic: topic.into(),
                group: group.into(),
                client,
            })
            .await?,
        )
    }

    async fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        unit(
            self.call(Op::LeaveGroup {
                stream: stream.into(),
                topic: topic.into(),
                group: group.into(),
                client,
            })
            .await?,
        )
    }

    async fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        unit(
            self.call(Op::StoreOffset {
                stream: stream.into(),
                topic: topic.into(),
                partition,
                group: group.into(),
                client,
                offset,
            })
            .await?,
        )
    }

    async fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> Result<Option<u64>, BackendError> {
        let op = Op::GetOffset {
            stream: stream.into(),
            topic: topic.into(),
            partition,
            group: group.into(),
        };
        match self.call(op).await? {
            Outcome::Offset(offset) => Ok(offset),
            other => Err(unexpected(other)),
        }
    }

    async fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        unit(
            self.call(Op::DeleteOffset {
                stream: stream.into(),
                topic: topic.into(),
                partition,
                group: group.into(),
                client,
            })
            .await?,
        )
    }
}
