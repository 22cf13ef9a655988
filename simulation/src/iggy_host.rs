//! The Iggy host of the simulated network: a server that answers [`iggy_wire`](crate::iggy_wire)
//! requests from the gateways' [`RemoteBackend`](crate::remote::RemoteBackend)s on the embedded
//! model.
//!
//! The model is the server's disk: it lives outside the host ([`IggyDisk`]), so a bounced host
//! starts again on the data its predecessor left, as iggy-server restarted on its data directory
//! does. What the process held is lost with it: logged-in sessions (a request naming a user no
//! longer logged in is `Unauthenticated`) and requests in flight. Consumer-group members are
//! kept across a restart, stale, with no connection behind them (DIFF-12, measured on the
//! pinned server); a connection that ends while the server runs drops the memberships of the
//! clients that joined on it, as the server does for a disconnected client.
//!
//! The host can lose the response to an append after the append is written ([`IggyFaults`]):
//! the gateway's request then times out although the records are stored.

use crate::history::{FaultKind, Hop, Recorder};
use crate::iggy_wire::{decode_request, encode_response, take_frame, Op, Outcome, Request, Response};
use crate::replica::{node_name, AppendOp, Node, Refusal, ReplicatedLog};
use crate::trace::Trace;
use bytes::BytesMut;
use iggy_common::IggyError;
use kafka_iggy_gateway::auth::credentials::Credentials;
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, BackendError, ConsumerOffsets, ReadLimits, TopicSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

/// The Iggy host's name in the simulated network.
pub const IGGY_HOST: &str = "iggy";
/// The port its server listens on.
pub const IGGY_PORT: u16 = 8090;

/// What outlives the Iggy process: the model (its data directory).
pub type IggyDisk = Arc<EmbeddedBackend>;

/// Faults the Iggy host injects itself, decided by the world's driver.
#[derive(Debug, Default)]
pub struct IggyFaults {
    /// Appends (numbered from 1 in the order the host applies them) whose response is never
    /// sent: the write is stored, the gateway hears nothing.
    lose_append_responses: Mutex<BTreeSet<u64>>,
    /// Appends applied so far.
    appends: Mutex<u64>,
}

impl IggyFaults {
    /// Loses the response to the `n`th append from now on (1: the next one).
    pub fn lose_response_of_append(&self, n: u64) {
        let done = *self.appends.lock().expect("faults lock");
        self.lose_append_responses.lock().expect("faults lock").insert(done + n);
    }

    /// Counts an applied append; whether its response is to be lost.
    fn applied_append(&self) -> (u64, bool) {
        let mut done = self.appends.lock().expect("faults lock");
        *done += 1;
        let lose = self.lose_append_responses.lock().expect("faults lock").remove(&done);
        (*done, lose)
    }
}

/// One Iggy process: the root view of the disk and the sessions logged in since it started.
struct Process {
    /// The host's name in the trace.
    name: String,
    root: IggyDisk,
    /// In a replicated cluster, this node's replication state: it serves clients only as
    /// primary, and replicates appends to a quorum before answering.
    replica: Option<Arc<Node>>,
    sessions: Mutex<BTreeMap<u32, Arc<EmbeddedBackend>>>,
    faults: Arc<IggyFaults>,
    recorder: Recorder,
    trace: Trace,
}

/// The Produce attempt that wrote `messages`: the producers' `attempt` header, `request/attempt`.
fn produce_attempt(messages: &[iggy_common::IggyMessage]) -> Option<(usize, u32)> {
    let (record, _) = kig_core::mapping::message_to_record(messages.first()?);
    let header = record
        .headers
        .iter()
        .find(|h| &h.name[..] == crate::history::ATTEMPT_HEADER.as_bytes())?;
    crate::history::parse_attempt_header(header.value.as_deref()?)
}

/// Serves the Iggy protocol on [`IGGY_PORT`] until the host is bounced or crashed.
pub async fn run_iggy(disk: IggyDisk, faults: Arc<IggyFaults>, recorder: Recorder, trace: Trace) -> turmoil::Result {
    trace.event(IGGY_HOST, "started on its data");
    let process = Arc::new(Process {
        name: IGGY_HOST.into(),
        root: disk,
        replica: None,
        sessions: Mutex::new(BTreeMap::new()),
        faults,
        recorder,
        trace,
    });
    serve_clients(process).await
}

/// Serves node `index` of a replicated cluster on `log`: clients on [`IGGY_PORT`], its peers on
/// [`PEER_PORT`](crate::replica::PEER_PORT).
pub(crate) async fn run_iggy_node(
    index: usize,
    log: Arc<ReplicatedLog>,
    first_start: bool,
    faults: Arc<IggyFaults>,
    recorder: Recorder,
    trace: Trace,
) -> turmoil::Result {
    let node = Node::start(index, log.clone(), first_start, trace.clone());
    let process = Arc::new(Process {
        name: node_name(index),
        root: log.disk.clone(),
        replica: Some(node.clone()),
        sessions: Mutex::new(BTreeMap::new()),
        faults,
        recorder,
        trace,
    });
    tokio::spawn(node.run_peer_side());
    serve_clients(process).await
}

/// Registers the [`NODES`](crate::replica::NODES) hosts of a replicated cluster on `log`.
pub(crate) fn iggy_cluster(
    sim: &mut turmoil::Sim<'_>,
    log: Arc<ReplicatedLog>,
    faults: Arc<IggyFaults>,
    recorder: Recorder,
    trace: Trace,
) {
    for index in 0..crate::replica::NODES {
        let starts = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (log, faults, recorder, trace) = (log.clone(), faults.clone(), recorder.clone(), trace.clone());
        sim.host(node_name(index).as_str(), move || {
            let first = starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
            run_iggy_node(
                index,
                log.clone(),
                first,
                faults.clone(),
                recorder.clone(),
                trace.clone(),
            )
        });
    }
}

async fn serve_clients(process: Arc<Process>) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", IGGY_PORT)).await?;
    loop {
        let (stream, peer) = listener.accept().await?;
        let process = process.clone();
        tokio::spawn(async move {
            let peer = turmoil::reverse_lookup(peer.ip()).unwrap_or_else(|| peer.ip().to_string());
            serve_connection(process, stream, peer).await;
        });
    }
}

/// Registers the Iggy host on `disk`.
pub fn iggy_host(
    sim: &mut turmoil::Sim<'_>,
    disk: IggyDisk,
    faults: Arc<IggyFaults>,
    recorder: Recorder,
    trace: Trace,
) {
    sim.host(IGGY_HOST, move || {
        run_iggy(disk.clone(), faults.clone(), recorder.clone(), trace.clone())
    });
}

async fn serve_connection(process: Arc<Process>, mut stream: TcpStream, peer: String) {
    let mut buffer = BytesMut::with_capacity(4096);
    let mut joined: BTreeSet<u64> = BTreeSet::new();
    loop {
        let body = loop {
            match take_frame(&mut buffer) {
                Ok(Some(body)) => break body,
                Ok(None) => {}
                Err(e) => {
                    process.trace.event(&process.name, format!("{peer}: closing: {e}"));
                    return release(&process, &joined, &peer);
                }
            }
            match stream.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return release(&process, &joined, &peer),
                Ok(_) => {}
            }
        };
        let request = match decode_request(body) {
            Ok(request) => request,
            Err(e) => {
                process.trace.event(&process.name, format!("{peer}: closing: {e}"));
                return release(&process, &joined, &peer);
            }
        };
        let joining = match &request.op {
            Op::JoinGroup { client, .. } => Some(*client),
            _ => None,
        };
        let produce = match &request.op {
            Op::Append { messages, .. } => Some(produce_attempt(messages)),
            _ => None,
        };
        let id = request.id;
        let outcome = execute(&process, request, &peer).await;
        // Only a join the server carried out ties the client to this connection: a node that
        // refused it as not primary holds no membership to drop when the connection ends.
        if let (Some(client), Outcome::Unit) = (joining, &outcome) {
            joined.insert(client);
        }
        if let (Some(produce), Outcome::Offset(_)) = (produce, &outcome) {
            let (n, lose) = process.faults.applied_append();
            if lose {
                process.recorder.fault_now(FaultKind::ResponseLost {
                    hop: Hop::GatewayIggy { gateway: peer.clone() },
                    produce,
                });
                process.trace.event(
                    &process.name,
                    format!("{peer}: append #{n} stored; its response is lost (fault)"),
                );
                continue;
            }
        }
        let frame = encode_response(&Response { id, outcome });
        if stream.write_all(&frame).await.is_err() {
            return release(&process, &joined, &peer);
        }
    }
}

/// A connection ended while the server runs: its clients leave their groups.
fn release(process: &Process, joined: &BTreeSet<u64>, peer: &str) {
    for client in joined {
        process.root.release_client(*client);
    }
    if !joined.is_empty() {
        process.trace.event(
            &process.name,
            format!("{peer}: connection ended; {} client(s) left their groups", joined.len()),
        );
    }
}

async fn execute(process: &Process, request: Request, peer: &str) -> Outcome {
    let session = if request.user == 0 {
        process.root.clone()
    } else {
        match process.sessions.lock().expect("sessions lock").get(&request.user) {
            Some(session) => session.clone(),
            None => {
                return Outcome::Failed(iggy_common::IggyError::Unauthenticated.into());
            }
        }
    };
    let group_write = process.trace.enabled().then(|| group_write(&request.op)).flatten();
    let outcome = match &process.replica {
        None => run_op(process, &session, request.op).await,
        Some(node) => on_replica(process, node, &session, request.op).await,
    };
    match (&outcome, group_write) {
        (Outcome::Failed(e), _) => process
            .trace
            .event(&process.name, format!("{peer}: request {} failed: {e}", request.id)),
        (_, Some(what)) => process
            .trace
            .event(&process.name, format!("{peer}: request {}: {what}", request.id)),
        _ => {}
    }
    outcome
}

/// A consumer-group write in words, for the trace: a gateway's offsets group and its reclaim
/// (CO-MEMBER-1, CO-RECLAIM-1) show as these steps.
fn group_write(op: &Op) -> Option<String> {
    Some(match op {
        Op::CreateGroup { group, .. } => format!("created group {group}"),
        Op::DeleteGroup { group, .. } => format!("deleted group {group}"),
        Op::JoinGroup { group, client, .. } => format!("client {client} joined {group}"),
        Op::LeaveGroup { group, client, .. } => format!("client {client} left {group}"),
        Op::StoreOffset {
            group,
            partition,
            client,
            offset,
            ..
        } => format!("client {client} stored offset {offset} of partition {partition} in {group}"),
        Op::DeleteOffset {
            group,
            partition,
            client,
            ..
        } => format!("client {client} deleted the offset of partition {partition} in {group}"),
        _ => return None,
    })
}

/// A request at a node of a replicated cluster: refused as not primary unless this node is the
/// primary holding its lease; an append goes through [`Node::append`] (a quorum before the
/// answer, "not committed yet" when none answered in time).
async fn on_replica(process: &Process, node: &Node, session: &EmbeddedBackend, op: Op) -> Outcome {
    let not_primary = || Outcome::Failed(IggyError::TransientNotAccepted.into());
    match op {
        Op::Append {
            stream,
            topic,
            partition,
            messages,
        } => {
            let append = AppendOp {
                stream,
                topic,
                partition,
                messages,
            };
            match node.append(append).await {
                Ok(answer) => answer.map_or_else(Outcome::Failed, Outcome::Offset),
                Err(Refusal::NotPrimary) => not_primary(),
                Err(Refusal::NotCommitted) => Outcome::Failed(IggyError::TransientNotCommitted.into()),
            }
        }
        op if node.serving() => run_op(process, session, op).await,
        _ => not_primary(),
    }
}

fn unit(r: Result<(), BackendError>) -> Outcome {
    r.map_or_else(Outcome::Failed, |()| Outcome::Unit)
}

async fn run_op(process: &Process, b: &EmbeddedBackend, op: Op) -> Outcome {
    match op {
        Op::Login {
            username,
            secret,
            token,
        } => {
            let credentials = if token {
                Credentials::token(username, secret)
            } else {
                Credentials::password(username, secret)
            };
            match process.root.open_session(&credentials).await {
                Ok((session, principal)) => {
                    process
                        .sessions
                        .lock()
                        .expect("sessions lock")
                        .insert(principal.user_id, Arc::new(session));
                    Outcome::Principal {
                        user_id: principal.user_id,
                        username: principal.username,
                    }
                }
                Err(e) => Outcome::Failed(e),
            }
        }
        Op::EnsureStream { stream } => unit(b.ensure_stream(&stream).await),
        Op::ListTopics { stream } => b
            .list_topics(&stream)
            .await
            .map_or_else(Outcome::Failed, Outcome::Topics),
        Op::GetTopic { stream, topic } => b
            .get_topic(&stream, &topic)
            .await
            .map_or_else(Outcome::Failed, Outcome::Topic),
        Op::CreateTopic {
            stream,
            topic,
            partitions,
            message_expiry_us,
        } => unit(
            b.create_topic(
                &stream,
                &topic,
                TopicSpec {
                    partitions,
                    message_expiry_us,
                },
            )
            .await,
        ),
        Op::DeleteTopic { stream, topic } => unit(b.delete_topic(&stream, &topic).await),
        Op::AddPartitions { stream, topic, count } => unit(b.add_partitions(&stream, &topic, count).await),
        Op::Append {
            stream,
            topic,
            partition,
            messages,
        } => b
            .append(&stream, &topic, partition, messages)
            .await
            .map_or_else(Outcome::Failed, Outcome::Offset),
        Op::Read {
            stream,
            topic,
            partition,
            offset,
            max_messages,
            max_bytes,
        } => b
            .read(
                &stream,
                &topic,
                partition,
                offset,
                ReadLimits {
                    max_messages,
                    max_bytes,
                },
            )
            .await
            .map_or_else(Outcome::Failed, Outcome::Messages),
        Op::Watermarks {
            stream,
            topic,
            partition,
        } => b
            .watermarks(&stream, &topic, partition)
            .await
            .map_or_else(Outcome::Failed, Outcome::Watermarks),
        Op::OffsetForTimestamp {
            stream,
            topic,
            partition,
            timestamp_us,
        } => b
            .offset_for_timestamp(&stream, &topic, partition, timestamp_us)
            .await
            .map_or_else(Outcome::Failed, Outcome::OffsetAndTimestamp),
        Op::CreateGroup { stream, topic, group } => unit(b.create_consumer_group(&stream, &topic, &group).await),
        Op::DeleteGroup { stream, topic, group } => unit(b.delete_consumer_group(&stream, &topic, &group).await),
        Op::ListGroups { stream, topic } => b
            .list_consumer_groups(&stream, &topic)
            .await
            .map_or_else(Outcome::Failed, Outcome::Names),
        Op::JoinGroup {
            stream,
            topic,
            group,
            client,
        } => unit(b.join_consumer_group(&stream, &topic, &group, client).await),
        Op::LeaveGroup {
            stream,
            topic,
            group,
            client,
        } => unit(b.leave_consumer_group(&stream, &topic, &group, client).await),
        Op::StoreOffset {
            stream,
            topic,
            partition,
            group,
            client,
            offset,
        } => unit(
            b.store_consumer_offset(&stream, &topic, partition, &group, client, offset)
                .await,
        ),
        Op::GetOffset {
            stream,
            topic,
            partition,
            group,
        } => b
            .get_consumer_offset(&stream, &topic, partition, &group)
            .await
            .map_or_else(Outcome::Failed, Outcome::Offset),
        Op::DeleteOffset {
            stream,
            topic,
            partition,
            group,
            client,
        } => unit(
            b.delete_consumer_offset(&stream, &topic, partition, &group, client)
                .await,
        ),
        Op::ReleaseClient { client } => {
            b.release_client(client);
            Outcome::Unit
        }
        Op::AppendGeneration => Outcome::Generation(b.append_generation()),
    }
}
