//! A replicated Iggy log of three nodes, modelled for what matters to the gateway: one primary
//! per view, which acknowledges an append only once a quorum (itself and one follower) holds it;
//! followers that refuse client requests as not primary; and, when the primary stops answering,
//! an election among the survivors after a heartbeat timeout that keeps every append a quorum
//! acknowledged. An append the old primary took but did not get to a quorum may be kept (a
//! survivor of the new quorum held it) or lost; it was never acknowledged.
//!
//! What it simplifies about Iggy's Viewstamped Replication (docs/simulation.md, "replicated-iggy"):
//! - the quorum's log is one model ([`ReplicatedLog::disk`]): an append is applied to it when a
//!   quorum holds it, by the primary or by the winner of an election that found it at a survivor;
//!   a node's own log is not modelled apart from its one prepared, uncommitted append;
//! - appends are replicated one at a time (the primary prepares the next only after the last);
//! - every other operation (reads, topics, groups, offsets) runs at a primary on the quorum's
//!   model while the primary holds a lease (a follower answered it within [`LEASE`]), without a
//!   replication round of its own;
//! - elections are Raft-like votes (a node votes once per view, for the first candidate to ask),
//!   with a timeout staggered by node index rather than VR's round-robin primaries;
//! - a restarted node comes back as a follower on its persisted view (no recovery protocol).
//!
//! Nodes talk over the simulated network on [`PEER_PORT`], one TCP connection per exchange, so
//! the driver's crashes and partitions reach replication and elections as they reach clients.

use crate::iggy_host::IggyDisk;
use crate::trace::Trace;
use iggy_common::IggyMessage;
use kafka_iggy_gateway::backend::{Backend, BackendError};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use turmoil::net::{TcpListener, TcpStream};

/// Nodes in the cluster; a quorum is two of them.
pub(crate) const NODES: usize = 3;
/// The port nodes replicate and vote on.
pub(crate) const PEER_PORT: u16 = 8091;
/// How often a primary sends heartbeats.
const HEARTBEAT: Duration = Duration::from_millis(100);
/// A primary serves only while a follower answered it this recently.
const LEASE: Duration = Duration::from_millis(300);
/// A follower that heard no primary for this long (plus [`STAGGER`] per node index) stands for
/// election: the heartbeat timeout.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(500);
const STAGGER: Duration = Duration::from_millis(150);
/// How long one peer exchange may take.
const EXCHANGE: Duration = Duration::from_millis(100);
/// How long a primary waits for a quorum before answering "not committed yet".
const PREPARE_WAIT: Duration = Duration::from_millis(250);
const TICK: Duration = Duration::from_millis(25);

/// The host name of node `i`.
pub(crate) fn node_name(i: usize) -> String {
    format!("iggy-{i}")
}

/// An append as the primary prepares it.
#[derive(Debug)]
pub(crate) struct AppendOp {
    pub stream: String,
    pub topic: String,
    pub partition: u32,
    pub messages: Vec<IggyMessage>,
}

/// `(view, op)`: an append's place in the log as the primary of `view` numbered it.
type Slot = (u64, u64);

/// What one node keeps on its disk across a crash.
#[derive(Debug, Clone, Default)]
struct NodeDisk {
    view: u64,
    primary: usize,
    /// Whom it voted for (or followed) in `view`.
    voted: Option<usize>,
    /// The append it holds prepared and not yet known committed.
    pending: Option<Slot>,
}

#[derive(Default)]
struct LogState {
    /// Appends applied to the quorum's model.
    committed: u64,
    payloads: BTreeMap<Slot, AppendOp>,
    /// The answer of every applied append.
    applied: BTreeMap<Slot, Result<Option<u64>, BackendError>>,
    nodes: Vec<NodeDisk>,
}

/// What outlives every node: the quorum's model and each node's disk.
pub(crate) struct ReplicatedLog {
    pub disk: IggyDisk,
    state: Mutex<LogState>,
}

/// Runs a future of the model that never waits to its end.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the model's operation waited"),
    }
}

impl ReplicatedLog {
    pub fn new(disk: IggyDisk) -> Arc<Self> {
        Arc::new(Self {
            disk,
            state: Mutex::new(LogState {
                nodes: vec![NodeDisk::default(); NODES],
                ..LogState::default()
            }),
        })
    }

    /// The primary of the newest view any node holds: for the driver, which aims its faults at
    /// it (the nodes themselves never read another node's disk).
    pub fn primary(&self) -> usize {
        let s = self.state.lock().expect("log lock");
        s.nodes.iter().max_by_key(|n| n.view).map_or(0, |n| n.primary)
    }

    /// Applies the append at `slot` if it is the next one; the answer of `slot` if it is
    /// applied (now or before), `None` if another append took its place.
    fn apply(&self, slot: Slot) -> Option<Result<Option<u64>, BackendError>> {
        let mut s = self.state.lock().expect("log lock");
        if let Some(answer) = s.applied.get(&slot) {
            return Some(answer.clone());
        }
        if s.committed + 1 != slot.1 {
            return None;
        }
        let op = s.payloads.remove(&slot)?;
        let answer = ready(self.disk.append(&op.stream, &op.topic, op.partition, op.messages));
        s.committed = slot.1;
        s.applied.insert(slot, answer.clone());
        s.payloads.retain(|(_, n), _| *n > slot.1);
        Some(answer)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Follower,
    Candidate,
    Primary,
}

/// Peer messages: a tag and three numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Prepare { view: u64, from: usize, op: u64 },
    Heartbeat { view: u64, from: usize },
    Vote { view: u64, candidate: usize },
    Ok,
    Stale { view: u64 },
    Granted { pending: Option<Slot> },
    Refused,
}

const MSG_BYTES: usize = 25;

impl Msg {
    fn encode(self) -> [u8; MSG_BYTES] {
        let (tag, a, b, c) = match self {
            Msg::Prepare { view, from, op } => (1, view, from as u64, op),
            Msg::Heartbeat { view, from } => (2, view, from as u64, 0),
            Msg::Vote { view, candidate } => (3, view, candidate as u64, 0),
            Msg::Ok => (10, 0, 0, 0),
            Msg::Stale { view } => (11, view, 0, 0),
            Msg::Granted { pending: None } => (12, 0, 0, 0),
            Msg::Granted { pending: Some((v, n)) } => (13, v, n, 0),
            Msg::Refused => (14, 0, 0, 0),
        };
        let mut out = [0u8; MSG_BYTES];
        out[0] = tag;
        out[1..9].copy_from_slice(&a.to_be_bytes());
        out[9..17].copy_from_slice(&b.to_be_bytes());
        out[17..25].copy_from_slice(&c.to_be_bytes());
        out
    }

    fn decode(bytes: &[u8; MSG_BYTES]) -> Option<Self> {
        let n = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let (a, b, c) = (n(1), n(9), n(17));
        Some(match bytes[0] {
            1 => Msg::Prepare {
                view: a,
                from: b as usize,
                op: c,
            },
            2 => Msg::Heartbeat {
                view: a,
                from: b as usize,
            },
            3 => Msg::Vote {
                view: a,
                candidate: b as usize,
            },
            10 => Msg::Ok,
            11 => Msg::Stale { view: a },
            12 => Msg::Granted { pending: None },
            13 => Msg::Granted { pending: Some((a, b)) },
            14 => Msg::Refused,
            _ => return None,
        })
    }
}

/// One exchange with node `to`: `None` when it did not answer within [`EXCHANGE`].
async fn exchange(to: usize, msg: Msg) -> Option<Msg> {
    let talk = async {
        let mut stream = TcpStream::connect((node_name(to).as_str(), PEER_PORT)).await.ok()?;
        stream.write_all(&msg.encode()).await.ok()?;
        let mut answer = [0u8; MSG_BYTES];
        stream.read_exact(&mut answer).await.ok()?;
        Msg::decode(&answer)
    };
    tokio::time::timeout(EXCHANGE, talk).await.ok().flatten()
}

/// Sends `msg` to both other nodes at once; every answer, in node order.
async fn both(me: usize, msg: Msg) -> Vec<(usize, Option<Msg>)> {
    let others: Vec<usize> = (0..NODES).filter(|&j| j != me).collect();
    let (a, b) = tokio::join!(exchange(others[0], msg), exchange(others[1], msg));
    vec![(others[0], a), (others[1], b)]
}

/// What one node process holds: lost on a crash.
pub(crate) struct Node {
    index: usize,
    log: Arc<ReplicatedLog>,
    role: Mutex<Role>,
    last_heard: Mutex<Instant>,
    last_quorum: Mutex<Option<Instant>>,
    appending: tokio::sync::Mutex<()>,
    trace: Trace,
}

/// What a node answers a client's request with when it cannot serve it.
pub(crate) enum Refusal {
    /// Not the primary, or a primary without a lease: nothing was done.
    NotPrimary,
    /// The append was prepared but no quorum answered in time: it may still be applied.
    NotCommitted,
}

impl Node {
    /// Node `index` starting on its disk. The cluster starts with node 0 primary of view 0;
    /// every later start is a follower's.
    pub fn start(index: usize, log: Arc<ReplicatedLog>, first_start: bool, trace: Trace) -> Arc<Self> {
        let now = Instant::now();
        let role = if first_start && index == 0 {
            Role::Primary
        } else {
            Role::Follower
        };
        trace.event(&node_name(index), format!("started as {role:?}"));
        Arc::new(Self {
            index,
            log,
            role: Mutex::new(role),
            last_heard: Mutex::new(now),
            last_quorum: Mutex::new((role == Role::Primary).then_some(now)),
            appending: tokio::sync::Mutex::new(()),
            trace,
        })
    }

    fn name(&self) -> String {
        node_name(self.index)
    }

    fn role(&self) -> Role {
        *self.role.lock().expect("role lock")
    }

    /// Whether this node may answer a client: the primary of its view, holding a lease.
    pub fn serving(&self) -> bool {
        self.role() == Role::Primary
            && self
                .last_quorum
                .lock()
                .expect("lease lock")
                .is_some_and(|at| at.elapsed() <= LEASE)
    }

    fn step_down(&self, view: u64) {
        let mut s = self.log.state.lock().expect("log lock");
        let disk = &mut s.nodes[self.index];
        if view > disk.view {
            disk.view = view;
            disk.voted = None;
        }
        drop(s);
        let was = std::mem::replace(&mut *self.role.lock().expect("role lock"), Role::Follower);
        *self.last_heard.lock().expect("heard lock") = Instant::now();
        if was != Role::Follower {
            self.trace
                .event(&self.name(), format!("steps down: view {view} is newer"));
        }
    }

    /// A client's append at the primary: prepared, sent to both followers, applied once one of
    /// them holds it, and answered with its offset; or refused.
    pub async fn append(&self, op: AppendOp) -> Result<Result<Option<u64>, BackendError>, Refusal> {
        let _one_at_a_time = self.appending.lock().await;
        if !self.serving() {
            return Err(Refusal::NotPrimary);
        }
        let slot = {
            let mut s = self.log.state.lock().expect("log lock");
            let view = s.nodes[self.index].view;
            let slot = (view, s.committed + 1);
            s.payloads.insert(slot, op);
            s.nodes[self.index].pending = Some(slot);
            slot
        };
        let prepare = Msg::Prepare {
            view: slot.0,
            from: self.index,
            op: slot.1,
        };
        let others: Vec<usize> = (0..NODES).filter(|&j| j != self.index).collect();
        let held = tokio::time::timeout(PREPARE_WAIT, async {
            let mut a = std::pin::pin!(exchange(others[0], prepare));
            let mut b = std::pin::pin!(exchange(others[1], prepare));
            let (mut a_done, mut b_done) = (false, false);
            let mut newer = None;
            loop {
                let answer = tokio::select! {
                    biased;
                    r = &mut a, if !a_done => { a_done = true; r }
                    r = &mut b, if !b_done => { b_done = true; r }
                    else => return (false, newer),
                };
                match answer {
                    Some(Msg::Ok) => return (true, newer),
                    Some(Msg::Stale { view }) => newer = Some(view),
                    _ => {}
                }
            }
        })
        .await
        .unwrap_or((false, None));
        if let (_, Some(view)) = held {
            self.step_down(view);
        }
        if held.0 {
            *self.last_quorum.lock().expect("lease lock") = Some(Instant::now());
        }
        // Acknowledged only if the quorum's model holds exactly this append: applied now, or
        // already by an election that found it at a survivor.
        let answer = if held.0 {
            self.log.apply(slot)
        } else {
            self.log.state.lock().expect("log lock").applied.get(&slot).cloned()
        };
        match answer {
            Some(answer) => {
                let mut s = self.log.state.lock().expect("log lock");
                if s.nodes[self.index].pending == Some(slot) {
                    s.nodes[self.index].pending = None;
                }
                Ok(answer)
            }
            None => {
                self.trace.event(
                    &self.name(),
                    format!("append {slot:?} not held by a quorum in time: not committed yet"),
                );
                Err(Refusal::NotCommitted)
            }
        }
    }

    /// Answers one peer message.
    fn on_message(&self, msg: Msg) -> Msg {
        let now = Instant::now();
        let mut s = self.log.state.lock().expect("log lock");
        let committed = s.committed;
        let disk = &mut s.nodes[self.index];
        match msg {
            Msg::Prepare { view, from, .. } | Msg::Heartbeat { view, from } => {
                if view < disk.view {
                    return Msg::Stale { view: disk.view };
                }
                if view > disk.view || disk.primary != from {
                    self.trace
                        .event(&node_name(self.index), format!("follows iggy-{from} in view {view}"));
                }
                disk.view = view;
                disk.primary = from;
                disk.voted = Some(from);
                // Its log is the new primary's now: an older view's uncommitted append goes.
                if disk.pending.is_some_and(|(v, n)| v < view || n <= committed) {
                    disk.pending = None;
                }
                if let Msg::Prepare { op, .. } = msg {
                    disk.pending = Some((view, op));
                }
                drop(s);
                *self.role.lock().expect("role lock") = Role::Follower;
                *self.last_heard.lock().expect("heard lock") = now;
                Msg::Ok
            }
            Msg::Vote { view, candidate } => {
                let grant = view > disk.view || (view == disk.view && disk.voted.is_none_or(|v| v == candidate));
                if !grant {
                    return Msg::Refused;
                }
                disk.view = view;
                disk.primary = candidate;
                disk.voted = Some(candidate);
                let pending = disk.pending.filter(|(_, n)| *n > committed);
                drop(s);
                *self.role.lock().expect("role lock") = Role::Follower;
                *self.last_heard.lock().expect("heard lock") = now;
                Msg::Granted { pending }
            }
            _ => Msg::Refused,
        }
    }

    /// Stands for election in the next view; primary if one other node votes for it.
    async fn elect(&self) {
        let view = {
            let mut s = self.log.state.lock().expect("log lock");
            let disk = &mut s.nodes[self.index];
            disk.view += 1;
            disk.voted = Some(self.index);
            disk.view
        };
        *self.role.lock().expect("role lock") = Role::Candidate;
        *self.last_heard.lock().expect("heard lock") = Instant::now();
        self.trace
            .event(&self.name(), format!("heard no primary: stands in view {view}"));
        let answers = both(
            self.index,
            Msg::Vote {
                view,
                candidate: self.index,
            },
        )
        .await;
        let mut pendings = Vec::new();
        let mut granted = false;
        for (_, answer) in answers {
            if let Some(Msg::Granted { pending }) = answer {
                granted = true;
                pendings.extend(pending);
            }
        }
        let mut s = self.log.state.lock().expect("log lock");
        if !granted || s.nodes[self.index].view != view || self.role() != Role::Candidate {
            return;
        }
        pendings.extend(s.nodes[self.index].pending);
        s.nodes[self.index].primary = self.index;
        s.nodes[self.index].pending = None;
        // VR keeps the log of the newest view in the quorum: the append a survivor holds
        // prepared from the newest view is kept, if it is the next one.
        let next = s.committed + 1;
        let keep = pendings.into_iter().filter(|(_, n)| *n == next).max();
        drop(s);
        let kept = keep.and_then(|slot| self.log.apply(slot).map(|_| slot));
        *self.role.lock().expect("role lock") = Role::Primary;
        *self.last_quorum.lock().expect("lease lock") = Some(Instant::now());
        self.trace.event(
            &self.name(),
            format!("primary of view {view}; kept the prepared append: {kept:?}"),
        );
    }

    /// Heartbeats as primary, elections as follower, until the process ends.
    async fn tick(self: Arc<Self>) {
        let timeout = HEARTBEAT_TIMEOUT + STAGGER * self.index as u32;
        let mut last_beat: Option<Instant> = None;
        loop {
            tokio::time::sleep(TICK).await;
            match self.role() {
                Role::Primary => {
                    if last_beat.is_some_and(|at| at.elapsed() < HEARTBEAT) {
                        continue;
                    }
                    last_beat = Some(Instant::now());
                    let view = self.log.state.lock().expect("log lock").nodes[self.index].view;
                    let sent = Instant::now();
                    let answers = both(self.index, Msg::Heartbeat { view, from: self.index }).await;
                    for (_, answer) in answers {
                        match answer {
                            Some(Msg::Ok) => *self.last_quorum.lock().expect("lease lock") = Some(sent),
                            Some(Msg::Stale { view }) => self.step_down(view),
                            _ => {}
                        }
                    }
                }
                Role::Follower | Role::Candidate => {
                    if self.last_heard.lock().expect("heard lock").elapsed() > timeout {
                        self.elect().await;
                    }
                }
            }
        }
    }

    /// Serves peer messages and runs the node's timers.
    pub async fn run_peer_side(self: Arc<Self>) {
        let listener = match TcpListener::bind(("0.0.0.0", PEER_PORT)).await {
            Ok(listener) => listener,
            Err(e) => return self.trace.event(&self.name(), format!("peer port: {e}")),
        };
        tokio::spawn(self.clone().tick());
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let node = self.clone();
            tokio::spawn(async move {
                let mut bytes = [0u8; MSG_BYTES];
                if stream.read_exact(&mut bytes).await.is_err() {
                    return;
                }
                let Some(msg) = Msg::decode(&bytes) else { return };
                let answer = node.on_message(msg);
                let _ = stream.write_all(&answer.encode()).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_messages_round_trip() {
        for msg in [
            Msg::Prepare {
                view: 3,
                from: 1,
                op: 9,
            },
            Msg::Heartbeat { view: 2, from: 0 },
            Msg::Vote { view: 4, candidate: 2 },
            Msg::Ok,
            Msg::Stale { view: 7 },
            Msg::Granted { pending: None },
            Msg::Granted { pending: Some((1, 5)) },
            Msg::Refused,
        ] {
            assert_eq!(Msg::decode(&msg.encode()), Some(msg));
        }
    }
}
