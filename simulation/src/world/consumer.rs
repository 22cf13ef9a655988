//! The world's consumers. An *assigned* consumer reads every partition from offset 0 with
//! long-poll Fetches and commits nothing. A *group* consumer subscribes as a Kafka consumer
//! does: it finds the coordinator (FindCoordinator), joins (JoinGroup, with KIP-394's second
//! join), the leader assigns partitions by range, everyone gets its share (SyncGroup), starts
//! from the group's committed offsets (OffsetFetch; earliest when none), fetches, commits after
//! every Fetch that delivered, heartbeats, and joins again when the coordinator says the group
//! rebalances or forgot it. A failed connection is a crash: a new session that joins again.
//!
//! Both stop once every producer is done and, for every partition, the records delivered (by
//! this consumer, or by the group) reach the partition's end: the liveness phase's goal.

use crate::history::{CommitOutcome, ConsumerIx, Recorder, StartFrom, Stored, TopicPartition};
use crate::kafka::{fetch, find_coordinator, heartbeat, join_group, offset_commit, offset_fetch, sync_group};
use crate::trace::Trace;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_wire_client::WireClient;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use turmoil::net::TcpStream;

const NONE: i16 = 0;
const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// How far the run has come, shared by the clients and the driver.
#[derive(Debug, Default)]
pub struct Progress {
    /// Producers still sending.
    pub producers_left: usize,
    /// Each partition's end (high watermark) on the backend, set by the driver once the
    /// producers are done.
    pub ends: Option<BTreeMap<i32, i64>>,
    /// Per group, per partition, the highest offset any member delivered, plus one.
    pub group_delivered: BTreeMap<String, BTreeMap<i32, i64>>,
    /// Consumers that reached the goal.
    pub consumers_done: usize,
}

impl Progress {
    /// Whether `delivered` covers every partition's end (false until the ends are known).
    pub(crate) fn covers(&self, delivered: &BTreeMap<i32, i64>) -> bool {
        self.ends.as_ref().is_some_and(|ends| {
            ends.iter()
                .all(|(p, end)| *end == 0 || delivered.get(p).is_some_and(|d| d >= end))
        })
    }
}

pub type SharedProgress = Arc<Mutex<Progress>>;

/// How a consumer polls and how patient it is.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConsumerSpec {
    pub max_wait_ms: i32,
    pub request_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: u64,
    /// A group consumer commits its positions at most this often (0: after every Fetch that
    /// delivered), as `auto.commit.interval.ms` does; what it read since is re-delivered after a
    /// rebalance or crash.
    pub commit_interval_ms: u64,
}

/// One consumer's place in the world.
pub struct ConsumerRun {
    pub index: ConsumerIx,
    pub name: String,
    pub spec: ConsumerSpec,
    pub topic: String,
    pub partitions: i32,
    /// The gateway it bootstraps from (and fetches from).
    pub gateway: String,
    pub port: u16,
    /// `None`: an assigned consumer.
    pub group: Option<String>,
    /// Its first JoinGroup goes to its bootstrap gateway without asking FindCoordinator, as a
    /// client with a stale coordinator would: what the wrong gateway answers is recorded.
    pub join_bootstrap_first: bool,
    pub progress: SharedProgress,
    pub recorder: Recorder,
    pub trace: Trace,
}

pub(crate) async fn connect(host: &str, port: u16) -> std::io::Result<WireClient<TcpStream>> {
    Ok(WireClient::new(TcpStream::connect((host, port)).await?))
}

pub(crate) fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

/// The records of a fetched partition at or past `from`, and the next position.
pub(crate) fn deliverable(records: &[crate::kafka::FetchedRecord], from: i64) -> (Vec<Stored>, i64) {
    let mut next = from;
    let stored = records
        .iter()
        .filter(|r| r.offset >= from)
        .map(|r| {
            next = r.offset + 1;
            Stored::from_bytes(r.offset, r.value.as_deref())
        })
        .collect();
    (stored, next)
}

/// The range assignor: each member (in member-id order) takes a contiguous run of partitions.
pub fn range_assign(members: &[String], partitions: i32) -> BTreeMap<String, Vec<i32>> {
    let mut sorted = members.to_vec();
    sorted.sort();
    let n = sorted.len().max(1) as i32;
    let (base, extra) = (partitions / n, partitions % n);
    let mut out = BTreeMap::new();
    let mut next = 0;
    for (i, m) in sorted.into_iter().enumerate() {
        let len = base + i32::from((i as i32) < extra);
        out.insert(m, (next..next + len).collect());
        next += len;
    }
    out
}

fn subscription(topic: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_string(topic.to_string())])
        .encode(&mut buf, 0)
        .expect("a subscription encodes");
    buf.freeze()
}

fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![AssignedTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions.to_vec())])
        .encode(&mut buf, 0)
        .expect("an assignment encodes");
    buf.freeze()
}

fn assigned_partitions(mut bytes: Bytes) -> anyhow::Result<Vec<i32>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    anyhow::ensure!(bytes.len() >= 2, "an assignment of {} bytes", bytes.len());
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    let _ = bytes.split_to(2);
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3))?;
    Ok(decoded
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect())
}

/// Why a group session's inner loop ended.
enum Rejoin {
    /// Join again with the same member id (rebalance, illegal generation).
    SameMember,
    /// The coordinator forgot the member: join as a new one.
    NewMember,
    /// The connection failed: a crash, a new session.
    Crash(String),
    /// Finished.
    Done,
}

impl ConsumerRun {
    fn event(&self, what: impl Into<String>) {
        if self.trace.enabled() {
            self.trace.event(&self.name, what);
        }
    }

    fn done(&self, delivered: &BTreeMap<i32, i64>) -> bool {
        let progress = self.progress.lock().expect("progress lock");
        progress.producers_left == 0 && progress.covers(delivered)
    }

    /// Runs the consumer until the liveness goal is met.
    pub async fn run(self) {
        match self.group.clone() {
            None => self.run_assigned().await,
            Some(group) => self.run_group(&group).await,
        }
    }

    async fn run_assigned(self) {
        let session = self.recorder.start_session(self.index);
        let all: Vec<i32> = (0..self.partitions).collect();
        self.recorder.assigned(
            self.index,
            session,
            None,
            None,
            all.iter().map(|p| tp(&self.topic, *p)).collect(),
        );
        let mut positions: BTreeMap<i32, i64> = all.iter().map(|p| (*p, 0)).collect();
        for p in &all {
            self.recorder
                .positioned(self.index, session, tp(&self.topic, *p), 0, StartFrom::Earliest);
        }
        let mut conn: Option<WireClient<TcpStream>> = None;
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        loop {
            if self.done(&positions) {
                self.recorder.end_session(self.index, session, true);
                return;
            }
            let request: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
            let step = tokio::time::timeout(timeout, async {
                if conn.is_none() {
                    conn = Some(connect(&self.gateway, self.port).await?);
                }
                let client = conn.as_mut().expect("connected above");
                fetch(client, &self.topic, &request, self.spec.max_wait_ms).await
            })
            .await;
            match step {
                Ok(Ok(answer)) => {
                    for part in answer {
                        if part.error_code != NONE {
                            continue;
                        }
                        let from = positions[&part.partition];
                        let (records, next) = deliverable(&part.records, from);
                        if !records.is_empty() {
                            self.recorder
                                .polled(self.index, session, tp(&self.topic, part.partition), records);
                            positions.insert(part.partition, next);
                        }
                    }
                    continue;
                }
                Ok(Err(e)) => self.event(format!("fetch failed: {e:#}")),
                Err(_) => self.event("fetch timed out"),
            }
            conn = None;
            tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
        }
    }

    /// Finds the group's coordinator through the bootstrap gateway: its host.
    async fn coordinator(&self, group: &str) -> anyhow::Result<String> {
        let mut boot = connect(&self.gateway, self.port).await?;
        let (code, node, host, _port) = find_coordinator(&mut boot, group).await?;
        anyhow::ensure!(code == NONE, "FindCoordinator answered {code}");
        self.event(format!("FindCoordinator: node {node} at {host}"));
        Ok(host)
    }

    async fn run_group(self, group: &str) {
        let mut member = String::new();
        let mut session = self.recorder.start_session(self.index);
        let mut ask_coordinator = !self.join_bootstrap_first;
        let timeout = Duration::from_millis(self.spec.request_timeout_ms);
        // JoinGroup waits for the rebalance: up to the rebalance timeout.
        let join_timeout = Duration::from_millis(self.spec.session_timeout_ms as u64 * 2);
        loop {
            let outcome = self
                .group_session(group, &mut member, session, &mut ask_coordinator, timeout, join_timeout)
                .await;
            match outcome {
                Rejoin::Done => {
                    self.recorder.end_session(self.index, session, true);
                    return;
                }
                Rejoin::SameMember => {}
                Rejoin::NewMember => member.clear(),
                Rejoin::Crash(why) => {
                    self.event(format!("crashed: {why}"));
                    self.recorder.end_session(self.index, session, false);
                    tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                    session = self.recorder.start_session(self.index);
                    ask_coordinator = true;
                }
            }
        }
    }

    /// One membership: join, sync, position, then fetch/commit/heartbeat until something asks
    /// for a rejoin.
    async fn group_session(
        &self,
        group: &str,
        member: &mut String,
        session: u32,
        ask_coordinator: &mut bool,
        timeout: Duration,
        join_timeout: Duration,
    ) -> Rejoin {
        macro_rules! within {
            ($limit:expr, $what:expr, $fut:expr) => {
                match tokio::time::timeout($limit, $fut).await {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => return Rejoin::Crash(format!("{}: {e:#}", $what)),
                    Err(_) => return Rejoin::Crash(format!("{}: no answer within {:?}", $what, $limit)),
                }
            };
        }
        if self.done(&self.group_delivered(group)) {
            return Rejoin::Done;
        }
        let host = if *ask_coordinator {
            within!(timeout, "FindCoordinator", self.coordinator(group))
        } else {
            self.gateway.clone()
        };
        let mut conn = within!(timeout, "connect", connect(&host, self.port));
        // KIP-394: the first join of a new member gets its id and joins again with it.
        let mut joined = None;
        for _ in 0..2 {
            let answer = within!(
                join_timeout,
                "JoinGroup",
                join_group(
                    &mut conn,
                    group,
                    member,
                    self.spec.session_timeout_ms,
                    subscription(&self.topic)
                )
            );
            match answer.error_code {
                MEMBER_ID_REQUIRED => *member = answer.member_id.to_string(),
                NONE => {
                    joined = Some(answer);
                    break;
                }
                NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS => {
                    self.event(format!(
                        "JoinGroup at {host}: error {} (not the coordinator)",
                        answer.error_code
                    ));
                    *ask_coordinator = true;
                    return Rejoin::SameMember;
                }
                UNKNOWN_MEMBER_ID => return Rejoin::NewMember,
                code => {
                    self.event(format!("JoinGroup: error {code}"));
                    tokio::time::sleep(Duration::from_millis(self.spec.retry_backoff_ms)).await;
                    return Rejoin::SameMember;
                }
            }
        }
        let Some(joined) = joined else {
            return Rejoin::SameMember;
        };
        *member = joined.member_id.to_string();
        let generation = joined.generation_id;
        let assignments = if joined.leader == joined.member_id {
            let ids: Vec<String> = joined.members.iter().map(|m| m.member_id.to_string()).collect();
            range_assign(&ids, self.partitions)
                .into_iter()
                .map(|(m, ps)| (m, assignment(&self.topic, &ps)))
                .collect()
        } else {
            Vec::new()
        };
        let synced = within!(
            timeout,
            "SyncGroup",
            sync_group(&mut conn, group, generation, member, assignments)
        );
        match synced.error_code {
            NONE => {}
            UNKNOWN_MEMBER_ID => return Rejoin::NewMember,
            NOT_COORDINATOR => {
                *ask_coordinator = true;
                return Rejoin::SameMember;
            }
            _ => return Rejoin::SameMember,
        }
        let mine = match assigned_partitions(synced.assignment.clone()) {
            Ok(mine) => mine,
            Err(e) => return Rejoin::Crash(format!("assignment: {e:#}")),
        };
        self.event(format!("generation {generation} as {member}: partitions {mine:?}"));
        self.recorder.assigned(
            self.index,
            session,
            Some(generation),
            Some(member.clone()),
            mine.iter().map(|p| tp(&self.topic, *p)).collect(),
        );
        let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
        if !mine.is_empty() {
            let (code, committed) = within!(
                timeout,
                "OffsetFetch",
                offset_fetch(&mut conn, group, &self.topic, &mine)
            );
            if code != NONE {
                return Rejoin::Crash(format!("OffsetFetch: error {code}"));
            }
            for p in &mine {
                let found = committed.iter().find(|(q, ..)| q == p);
                let (offset, from) = match found {
                    Some((_, o, NONE)) if *o >= 0 => (*o, StartFrom::Committed),
                    Some((_, _, code)) if *code != NONE => {
                        return Rejoin::Crash(format!("OffsetFetch of partition {p}: error {code}"))
                    }
                    _ => (0, StartFrom::Earliest),
                };
                positions.insert(*p, offset);
                self.recorder
                    .positioned(self.index, session, tp(&self.topic, *p), offset, from);
            }
        }
        let heartbeat_every = Duration::from_millis(self.spec.heartbeat_interval_ms);
        let commit_every = Duration::from_millis(self.spec.commit_interval_ms);
        let mut last_heartbeat = Instant::now();
        let mut last_commit = Instant::now();
        // Positions read since the last commit, by partition.
        let mut uncommitted: BTreeMap<i32, i64> = BTreeMap::new();
        loop {
            if self.done(&self.group_delivered(group)) {
                return Rejoin::Done;
            }
            if !positions.is_empty() {
                let request: Vec<(i32, i64)> = positions.iter().map(|(p, o)| (*p, *o)).collect();
                let wait = self.spec.max_wait_ms.min(self.spec.heartbeat_interval_ms as i32);
                let answer = within!(timeout, "Fetch", fetch(&mut conn, &self.topic, &request, wait));
                for part in answer {
                    if part.error_code != NONE {
                        continue;
                    }
                    let Some(from) = positions.get(&part.partition).copied() else {
                        continue;
                    };
                    let (records, next) = deliverable(&part.records, from);
                    if records.is_empty() {
                        continue;
                    }
                    self.recorder
                        .polled(self.index, session, tp(&self.topic, part.partition), records);
                    positions.insert(part.partition, next);
                    uncommitted.insert(part.partition, next);
                    let mut progress = self.progress.lock().expect("progress lock");
                    let slot = progress
                        .group_delivered
                        .entry(group.to_string())
                        .or_default()
                        .entry(part.partition)
                        .or_insert(0);
                    *slot = (*slot).max(next);
                }
                if !uncommitted.is_empty() && last_commit.elapsed() >= commit_every {
                    last_commit = Instant::now();
                    let commits: Vec<(i32, i64)> = std::mem::take(&mut uncommitted).into_iter().collect();
                    let sent_us = crate::history::sim_now_us();
                    let answer = tokio::time::timeout(
                        timeout,
                        offset_commit(&mut conn, group, generation, member, &self.topic, &commits),
                    )
                    .await;
                    let mut rejoin = None;
                    for (p, offset) in &commits {
                        let outcome = match &answer {
                            Ok(Ok(codes)) => match codes.iter().find(|(q, _)| q == p) {
                                Some((_, NONE)) => CommitOutcome::Acked,
                                Some((_, code)) => CommitOutcome::Error { code: *code },
                                None => CommitOutcome::Error { code: -1 },
                            },
                            Ok(Err(_)) => CommitOutcome::ConnectionLost,
                            Err(_) => CommitOutcome::TimedOut,
                        };
                        if let CommitOutcome::Error { code } = outcome {
                            rejoin = Some(code);
                        }
                        self.recorder.committed(
                            self.index,
                            session,
                            group,
                            tp(&self.topic, *p),
                            *offset,
                            Some(generation),
                            sent_us,
                            outcome,
                        );
                    }
                    match (answer, rejoin) {
                        (Ok(Err(e)), _) => return Rejoin::Crash(format!("OffsetCommit: {e:#}")),
                        (Err(_), _) => return Rejoin::Crash("OffsetCommit: no answer".into()),
                        (_, Some(UNKNOWN_MEMBER_ID)) => return Rejoin::NewMember,
                        (_, Some(code)) => {
                            self.event(format!("OffsetCommit: error {code}; joining again"));
                            if code == NOT_COORDINATOR {
                                *ask_coordinator = true;
                            }
                            return Rejoin::SameMember;
                        }
                        _ => {}
                    }
                }
            } else {
                tokio::time::sleep(heartbeat_every).await;
            }
            if last_heartbeat.elapsed() >= heartbeat_every {
                last_heartbeat = Instant::now();
                let code = within!(timeout, "Heartbeat", heartbeat(&mut conn, group, generation, member));
                match code {
                    NONE => {}
                    REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => {
                        self.event(format!("Heartbeat: error {code}; rebalancing"));
                        return Rejoin::SameMember;
                    }
                    UNKNOWN_MEMBER_ID => {
                        self.event("Heartbeat: unknown member; joining as a new one");
                        return Rejoin::NewMember;
                    }
                    NOT_COORDINATOR => {
                        *ask_coordinator = true;
                        return Rejoin::SameMember;
                    }
                    code => return Rejoin::Crash(format!("Heartbeat: error {code}")),
                }
            }
        }
    }

    fn group_delivered(&self, group: &str) -> BTreeMap<i32, i64> {
        self.progress
            .lock()
            .expect("progress lock")
            .group_delivered
            .get(group)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_assignor_splits_contiguously_in_member_order() {
        let members = vec!["b".to_string(), "a".to_string(), "c".to_string()];
        let got = range_assign(&members, 4);
        assert_eq!(got["a"], vec![0, 1]);
        assert_eq!(got["b"], vec![2]);
        assert_eq!(got["c"], vec![3]);
    }

    #[test]
    fn an_assignment_round_trips_through_the_consumer_protocol() {
        assert_eq!(assigned_partitions(assignment("t", &[1, 3])).unwrap(), vec![1, 3]);
        assert_eq!(assigned_partitions(Bytes::new()).unwrap(), Vec::<i32>::new());
    }
}
