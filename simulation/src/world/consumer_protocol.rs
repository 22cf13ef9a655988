//! The world's consumer-protocol group members (KIP-848, `group.protocol=consumer`), as Kafka's
//! Java client and librdkafka run them: the coordinator assigns partitions in
//! ConsumerGroupHeartbeat answers, and the member reconciles towards them, revoking first.
//!
//! A member joins with epoch 0, its subscription, its rebalance timeout and no owned partitions,
//! then heartbeats with its member epoch at the interval the coordinator names. It reports its
//! owned partitions when they changed since it last reported them, and sends a full heartbeat
//! (rebalance timeout, topics, owned partitions) after any failed request, so a lost answer is
//! recovered as GROUP-CONSUMER-EPOCH-1 allows. Told to give partitions up, it commits what it read
//! of them, drops them and says so in its next heartbeat, sent at once. Given new partitions, it
//! reads their committed offsets (OffsetFetch v9 as a member) and fetches them. It commits with
//! OffsetCommit v9 carrying its member epoch; STALE_MEMBER_EPOCH makes it heartbeat for its current
//! epoch and commit again. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID (after a gateway restart, or
//! when the coordinator timed it out) makes it drop everything and join again with epoch 0 under
//! its member id. A failed connection is not a crash: the member reconnects and heartbeats again,
//! keeping its partitions, as the clients do.
//!
//! Churn, drawn from the member's own seeded RNG while the producers write: a member may crash
//! (the process ends: no leave, a new process with a new member id; the coordinator keeps the old
//! member's partitions until its session lapses, GROUP-CONSUMER-TIMEOUT-1) or close cleanly
//! (commit, leave with epoch -1, and start again as a new process). Members may also join late.
//!
//! Every answer that changes the member's epoch or partitions is recorded as an `Assigned` event
//! (the epoch as its generation), every fence as `Fenced`: the owned-twice check reads them.

use super::consumer::{connect, deliverable, tp, ConsumerSpec, SharedProgress};
use crate::history::{CommitOutcome, ConsumerEventKind, ConsumerIx, Recorder, StartFrom};
use crate::kafka::{
    consumer_group_heartbeat, fetch, find_coordinator, offset_commit_as_member, offset_fetch_as_member, MemberHeartbeat,
};
use crate::trace::Trace;
use kafka_iggy_gateway::groups::topic_id::topic_id;
use kafka_wire_client::WireClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;
use turmoil::net::TcpStream;

const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;
const STALE_MEMBER_EPOCH: i16 = 113;

/// The heartbeat interval a member uses until the coordinator names one (Kafka's default).
const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// The longest a member idles between checks of the run's progress and its own churn.
const IDLE_STEP_MS: u64 = 100;

/// How the consumer-protocol members come and go while the producers write.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemberChurn {
    /// The rebalance timeout members send (`max.poll.interval.ms`): how long the coordinator
    /// waits for a revocation before it removes the member.
    pub rebalance_timeout_ms: i32,
    /// Each member ends its process at most this many times while the producers write.
    pub max_restarts: u32,
    /// Each process of a member that may still end does so at a moment drawn uniformly from
    /// this many milliseconds after it started (nothing happens if the producers finish first).
    pub lifetime_ms: u64,
    /// The chance that an end is a crash (no leave); otherwise it is a clean close with a leave.
    pub crash_chance: f64,
    /// Every member but the first starts after a delay drawn uniformly below this.
    pub late_join_ms: u64,
}

/// One consumer-protocol member's place in the world.
pub struct MemberRun {
    pub index: ConsumerIx,
    pub name: String,
    pub spec: ConsumerSpec,
    pub churn: MemberChurn,
    pub topic: String,
    /// The gateway it bootstraps from.
    pub gateway: String,
    pub port: u16,
    pub group: String,
    pub seed: u64,
    pub progress: SharedProgress,
    pub recorder: Recorder,
    pub trace: Trace,
}

/// How one process of a member ended.
enum ProcessEnd {
    /// The run's goal is met.
    Done,
    /// The process died without a word to the coordinator.
    Crashed,
    /// It committed, left with epoch -1 and closed.
    Left,
}

/// One process's membership, as the client holds it.
struct Membership {
    member_id: String,
    /// 0 until the coordinator gave one.
    epoch: i32,
    /// The partitions it holds.
    owned: BTreeSet<i32>,
    /// Fetch positions of the owned partitions whose committed offset it has read.
    positions: BTreeMap<i32, i64>,
    /// Owned partitions whose committed offset it still has to read.
    unpositioned: BTreeSet<i32>,
    /// Positions read since their last commit.
    uncommitted: BTreeMap<i32, i64>,
    /// The owned partitions its last answered heartbeat reported.
    reported: Option<BTreeSet<i32>>,
    /// The next heartbeat is a full one (joining, or after a failed request).
    full: bool,
    next_heartbeat: Instant,
    heartbeat_interval: Duration,
    last_commit: Instant,
}

impl Membership {
    fn new(member_id: String) -> Self {
        Self {
            member_id,
            epoch: 0,
            owned: BTreeSet::new(),
            positions: BTreeMap::new(),
            unpositioned: BTreeSet::new(),
            uncommitted: BTreeMap::new(),
            reported: None,
            full: true,
            next_heartbeat: Instant::now(),
            heartbeat_interval: Duration::from_millis(DEFAULT_HEARTBEAT_INTERVAL_MS),
            last_commit: Instant::now(),
        }
    }

    /// Drops every partition and starts over at epoch 0 under the same member id, as a fenced
    /// member does.
    fn reset(&mut self) {
        let id = std::mem::take(&mut self.member_id);
        *self = Self::new(id);
    }
}

/// What a step that talks to the coordinator left the connection as.
enum Step {
    Ok,
    /// The connection failed or timed out: reconnect, heartbeat in full.
    Broken(String),
    /// The coordinator is elsewhere or not ready: find it again.
    Rediscover,
    /// The coordinator said the member is no longer one.
    Fenced(i16),
}

type Conn = WireClient<TcpStream>;

impl MemberRun {
    fn event(&self, what: impl Into<String>) {
        if self.trace.enabled() {
            self.trace.event(&self.name, what);
        }
    }

    fn producers_writing(&self) -> bool {
        self.progress.lock().expect("progress lock").producers_left > 0
    }

    fn done(&self) -> bool {
        let progress = self.progress.lock().expect("progress lock");
        let delivered = progress.group_delivered.get(&self.group).cloned().unwrap_or_default();
        progress.producers_left == 0 && progress.covers(&delivered)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.spec.request_timeout_ms)
    }

    /// Runs the member's processes until the liveness goal is met.
    pub async fn run(self) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        if self.churn.late_join_ms > 0 && self.index > 0 {
            let delay = rng.random_range(0..self.churn.late_join_ms);
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let mut restarts_left = self.churn.max_restarts;
        loop {
            let session = self.recorder.start_session(self.index);
            // The client makes its member id up (v1), one per process, as Kafka's clients do.
            let member_id = format!("{}-process-{session}", self.name);
            let end = (restarts_left > 0 && self.churn.lifetime_ms > 0).then(|| {
                let after = rng.random_range(0..self.churn.lifetime_ms);
                let crash = rng.random_bool(self.churn.crash_chance);
                (Instant::now() + Duration::from_millis(after), crash)
            });
            match self.process(session, member_id, end).await {
                ProcessEnd::Done => {
                    self.recorder.end_session(self.index, session, true);
                    return;
                }
                ProcessEnd::Crashed => {
                    self.event("crashed (no leave)");
                    self.recorder.end_session(self.index, session, false);
                }
                ProcessEnd::Left => {
                    self.event("closed after leaving");
                    self.recorder.end_session(self.index, session, true);
                }
            }
            restarts_left -= 1;
            tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
        }
    }

    /// Finds the group's coordinator through the bootstrap gateway and connects to it.
    async fn connect_coordinator(&self) -> anyhow::Result<Conn> {
        let mut boot = connect(&self.gateway, self.port).await?;
        let (code, node, host, _port) = find_coordinator(&mut boot, &self.group).await?;
        anyhow::ensure!(code == NONE, "FindCoordinator answered {code}");
        self.event(format!("FindCoordinator: node {node} at {host}"));
        Ok(connect(&host, self.port).await?)
    }

    fn record_assignment(&self, session: u32, m: &Membership) {
        self.event(format!(
            "epoch {} as {}: partitions {:?}",
            m.epoch, m.member_id, m.owned
        ));
        self.recorder.assigned(
            self.index,
            session,
            Some(m.epoch),
            Some(m.member_id.clone()),
            m.owned.iter().map(|p| tp(&self.topic, *p)).collect(),
        );
    }

    fn record_fence(&self, session: u32, m: &mut Membership, code: i16) {
        self.event(format!(
            "fenced at epoch {} (error {code}): dropping {:?}, joining again",
            m.epoch, m.owned
        ));
        self.recorder.consumer_event(
            self.index,
            session,
            ConsumerEventKind::Fenced {
                member_id: m.member_id.clone(),
                epoch: m.epoch,
                code,
            },
        );
        m.reset();
    }

    /// One process: join, then heartbeat, fetch and commit until the goal, a crash or a close.
    async fn process(&self, session: u32, member_id: String, end: Option<(Instant, bool)>) -> ProcessEnd {
        let mut m = Membership::new(member_id);
        let mut conn: Option<Conn> = None;
        loop {
            if self.done() {
                if let Some(c) = conn.as_mut() {
                    self.close(session, &mut m, c).await;
                }
                return ProcessEnd::Done;
            }
            if let Some((at, crash)) = end {
                if Instant::now() >= at && self.producers_writing() {
                    if crash {
                        return ProcessEnd::Crashed;
                    }
                    if let Some(c) = conn.as_mut() {
                        self.close(session, &mut m, c).await;
                    }
                    return ProcessEnd::Left;
                }
            }
            if conn.is_none() {
                match tokio::time::timeout(self.timeout(), self.connect_coordinator()).await {
                    Ok(Ok(c)) => conn = Some(c),
                    Ok(Err(e)) => {
                        self.event(format!("no coordinator: {e:#}"));
                        tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                        continue;
                    }
                    Err(_) => {
                        self.event("no coordinator: timed out");
                        continue;
                    }
                }
            }
            let c = conn.as_mut().expect("connected above");
            let mut step = Step::Ok;
            if Instant::now() >= m.next_heartbeat {
                step = self.heartbeat(session, &mut m, c).await;
            }
            if matches!(step, Step::Ok) && !m.unpositioned.is_empty() {
                step = self.position(session, &mut m, c).await;
            }
            if matches!(step, Step::Ok) && !m.positions.is_empty() {
                step = self.fetch_and_commit(session, &mut m, c).await;
            } else if matches!(step, Step::Ok) && Instant::now() < m.next_heartbeat {
                let idle = m
                    .next_heartbeat
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(IDLE_STEP_MS));
                tokio::time::sleep(idle).await;
            }
            match step {
                Step::Ok => {}
                Step::Fenced(code) => {
                    self.record_fence(session, &mut m, code);
                }
                Step::Broken(why) => {
                    self.event(format!("connection lost: {why}; heartbeating again in full"));
                    conn = None;
                    m.full = true;
                    m.next_heartbeat = Instant::now();
                    tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                }
                Step::Rediscover => {
                    conn = None;
                    m.full = true;
                    m.next_heartbeat = Instant::now();
                    tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                }
            }
        }
    }

    /// One heartbeat and what its answer asks: revoke, take new partitions, or start over.
    async fn heartbeat(&self, session: u32, m: &mut Membership, c: &mut Conn) -> Step {
        let full = m.full || m.epoch == 0;
        let report = full || m.reported.as_ref() != Some(&m.owned);
        let owned: Vec<i32> = m.owned.iter().copied().collect();
        let topics = [self.topic.clone()];
        let beat = MemberHeartbeat {
            group: &self.group,
            member_id: &m.member_id,
            member_epoch: m.epoch,
            rebalance_timeout_ms: full.then_some(self.churn.rebalance_timeout_ms),
            subscribed_topics: full.then_some(&topics[..]),
            owned: report.then_some((topic_id(&self.topic), &owned[..])),
        };
        let answer = match tokio::time::timeout(self.timeout(), consumer_group_heartbeat(c, &beat)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Step::Broken(format!("heartbeat: {e:#}")),
            Err(_) => return Step::Broken("heartbeat: no answer".into()),
        };
        match answer.error_code {
            NONE => {}
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => return Step::Fenced(answer.error_code),
            NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => {
                self.event(format!("heartbeat: error {} (coordinator)", answer.error_code));
                return Step::Rediscover;
            }
            code => {
                self.event(format!("heartbeat: error {code}"));
                m.next_heartbeat = Instant::now() + Duration::from_millis(self.spec.retry_backoff_ms);
                return Step::Ok;
            }
        }
        m.full = false;
        if report {
            m.reported = Some(m.owned.clone());
        }
        if answer.heartbeat_interval_ms > 0 {
            m.heartbeat_interval = Duration::from_millis(answer.heartbeat_interval_ms as u64);
        }
        m.next_heartbeat = Instant::now() + m.heartbeat_interval;
        let target: Option<BTreeSet<i32>> = answer.assignment.map(|a| {
            let ours = topic_id(&self.topic);
            a.topic_partitions
                .iter()
                .filter(|t| t.topic_id == ours)
                .flat_map(|t| t.partitions.iter().copied())
                .collect()
        });
        let epoch_changed = answer.member_epoch != m.epoch;
        let Some(target) = target.filter(|t| *t != m.owned) else {
            if epoch_changed {
                m.epoch = answer.member_epoch;
                self.record_assignment(session, m);
            }
            return Step::Ok;
        };
        // Revocation first: commit what was read of the partitions given up, then drop them
        // (auto-commit on revocation, as the clients do).
        let revoked: Vec<i32> = m.owned.difference(&target).copied().collect();
        let mut step = Step::Ok;
        if !revoked.is_empty() {
            let commits: Vec<(i32, i64)> = revoked
                .iter()
                .filter_map(|p| m.uncommitted.get(p).map(|o| (*p, *o)))
                .collect();
            if !commits.is_empty() {
                step = self.commit(session, m, c, &commits).await;
            }
            for p in &revoked {
                m.owned.remove(p);
                m.positions.remove(p);
                m.unpositioned.remove(p);
                m.uncommitted.remove(p);
            }
        }
        if let Step::Fenced(_) = step {
            return step;
        }
        let added: Vec<i32> = target.difference(&m.owned).copied().collect();
        m.owned.extend(added.iter().copied());
        m.unpositioned.extend(added.iter().copied());
        m.epoch = answer.member_epoch;
        self.record_assignment(session, m);
        // Acknowledge at once, as the clients do once they reconciled.
        m.next_heartbeat = Instant::now();
        step
    }

    /// Reads the committed offsets of the partitions it was given.
    async fn position(&self, session: u32, m: &mut Membership, c: &mut Conn) -> Step {
        let wanted: Vec<i32> = m.unpositioned.iter().copied().collect();
        let answer = tokio::time::timeout(
            self.timeout(),
            offset_fetch_as_member(c, &self.group, m.epoch, &m.member_id, &self.topic, &wanted),
        )
        .await;
        let (code, committed) = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Step::Broken(format!("OffsetFetch: {e:#}")),
            Err(_) => return Step::Broken("OffsetFetch: no answer".into()),
        };
        match code {
            NONE => {}
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => return Step::Fenced(code),
            STALE_MEMBER_EPOCH => {
                // Refresh the epoch with a heartbeat, then read again.
                m.next_heartbeat = Instant::now();
                return Step::Ok;
            }
            NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => return Step::Rediscover,
            code => {
                self.event(format!("OffsetFetch: error {code}"));
                tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                return Step::Ok;
            }
        }
        let mut retry = false;
        for p in wanted {
            let (offset, from) = match committed.iter().find(|(q, ..)| *q == p) {
                Some((_, o, NONE)) if *o >= 0 => (*o, StartFrom::Committed),
                Some((_, _, code)) if *code != NONE => {
                    self.event(format!("OffsetFetch of partition {p}: error {code}"));
                    retry = true;
                    continue;
                }
                _ => (0, StartFrom::Earliest),
            };
            m.unpositioned.remove(&p);
            m.positions.insert(p, offset);
            self.recorder
                .positioned(self.index, session, tp(&self.topic, p), offset, from);
        }
        if retry {
            tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
        }
        Step::Ok
    }

    /// One Fetch of the positioned partitions, then a commit when one is due.
    async fn fetch_and_commit(&self, session: u32, m: &mut Membership, c: &mut Conn) -> Step {
        let request: Vec<(i32, i64)> = m.positions.iter().map(|(p, o)| (*p, *o)).collect();
        let until_heartbeat = m.next_heartbeat.saturating_duration_since(Instant::now()).as_millis() as i32;
        let wait = self.spec.max_wait_ms.min(until_heartbeat.max(0));
        let answer = match tokio::time::timeout(self.timeout(), fetch(c, &self.topic, &request, wait)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Step::Broken(format!("Fetch: {e:#}")),
            Err(_) => return Step::Broken("Fetch: no answer".into()),
        };
        for part in answer {
            if part.error_code != NONE {
                continue;
            }
            let Some(from) = m.positions.get(&part.partition).copied() else {
                continue;
            };
            let (records, next) = deliverable(&part.records, from);
            if records.is_empty() {
                continue;
            }
            self.recorder
                .polled(self.index, session, tp(&self.topic, part.partition), records);
            m.positions.insert(part.partition, next);
            m.uncommitted.insert(part.partition, next);
            let mut progress = self.progress.lock().expect("progress lock");
            let slot = progress
                .group_delivered
                .entry(self.group.clone())
                .or_default()
                .entry(part.partition)
                .or_insert(0);
            *slot = (*slot).max(next);
        }
        let due = m.last_commit.elapsed() >= Duration::from_millis(self.spec.commit_interval_ms);
        if m.uncommitted.is_empty() || !due {
            return Step::Ok;
        }
        m.last_commit = Instant::now();
        let commits: Vec<(i32, i64)> = m.uncommitted.iter().map(|(p, o)| (*p, *o)).collect();
        self.commit(session, m, c, &commits).await
    }

    /// OffsetCommit v9 at the member's epoch; what it acknowledged leaves `uncommitted`. A stale
    /// epoch asks for a heartbeat and leaves the offsets to commit again.
    async fn commit(&self, session: u32, m: &mut Membership, c: &mut Conn, commits: &[(i32, i64)]) -> Step {
        let sent_us = crate::history::sim_now_us();
        let answer = tokio::time::timeout(
            self.timeout(),
            offset_commit_as_member(c, &self.group, m.epoch, &m.member_id, &self.topic, commits),
        )
        .await;
        let mut worst = NONE;
        for (p, offset) in commits {
            let outcome = match &answer {
                Ok(Ok(codes)) => match codes.iter().find(|(q, _)| q == p) {
                    Some((_, NONE)) => CommitOutcome::Acked,
                    Some((_, code)) => CommitOutcome::Error { code: *code },
                    None => CommitOutcome::Error { code: -1 },
                },
                Ok(Err(_)) => CommitOutcome::ConnectionLost,
                Err(_) => CommitOutcome::TimedOut,
            };
            match outcome {
                CommitOutcome::Acked if m.uncommitted.get(p) == Some(offset) => {
                    m.uncommitted.remove(p);
                }
                CommitOutcome::Error { code } if worst == NONE => worst = code,
                _ => {}
            }
            self.recorder.committed(
                self.index,
                session,
                &self.group,
                tp(&self.topic, *p),
                *offset,
                Some(m.epoch),
                sent_us,
                outcome,
            );
        }
        match answer {
            Ok(Err(e)) => return Step::Broken(format!("OffsetCommit: {e:#}")),
            Err(_) => return Step::Broken("OffsetCommit: no answer".into()),
            Ok(Ok(_)) => {}
        }
        match worst {
            NONE => Step::Ok,
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => Step::Fenced(worst),
            STALE_MEMBER_EPOCH => {
                self.event("OffsetCommit: stale member epoch; heartbeating, then committing again");
                m.next_heartbeat = Instant::now();
                Step::Ok
            }
            NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => Step::Rediscover,
            code => {
                self.event(format!("OffsetCommit: error {code}"));
                Step::Ok
            }
        }
    }

    /// A clean close: commit what was read, drop every partition, leave with epoch -1. Best
    /// effort, one try each, as a client closing does.
    async fn close(&self, session: u32, m: &mut Membership, c: &mut Conn) {
        if m.epoch > 0 && !m.uncommitted.is_empty() {
            let commits: Vec<(i32, i64)> = m.uncommitted.iter().map(|(p, o)| (*p, *o)).collect();
            if let Step::Fenced(code) = self.commit(session, m, c, &commits).await {
                self.record_fence(session, m, code);
            }
        }
        if m.epoch == 0 {
            return;
        }
        let beat = MemberHeartbeat {
            group: &self.group,
            member_id: &m.member_id,
            member_epoch: -1,
            rebalance_timeout_ms: None,
            subscribed_topics: None,
            owned: None,
        };
        let left = tokio::time::timeout(self.timeout(), consumer_group_heartbeat(c, &beat)).await;
        // The partitions are dropped as the leave is sent; recorded once its answer is in, so
        // the record holds them no shorter than the client did, and a leave answered "not a
        // member" says the coordinator had let the member go before.
        match left {
            Ok(Ok(answer)) if matches!(answer.error_code, UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH) => {
                self.record_fence(session, m, answer.error_code);
            }
            answer => {
                self.event(match answer {
                    Ok(Ok(answer)) => format!("left (error {})", answer.error_code),
                    _ => "leave unanswered".into(),
                });
                m.owned.clear();
                m.positions.clear();
                m.unpositioned.clear();
                self.record_assignment(session, m);
            }
        }
    }
}
