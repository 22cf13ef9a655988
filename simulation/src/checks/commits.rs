//! The group side shared by the commit checks: every time a group's consumer positioned itself
//! on a partition (other than by an explicit seek), what it should have found there: the last
//! commit acknowledged before the assignment or restart that led to it, the offsets the group had
//! committed by then, and how far the group had read.

use super::index::Index;
use crate::history::{CommitOutcome, ConsumerEvent, ConsumerEventKind, FaultId, FaultKind, StartFrom, TopicPartition};
use std::collections::{BTreeSet, HashMap};

/// What led to a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// The consumer (re)started: a new session.
    Restart,
    /// A rebalance gave it the partition (generation, when known).
    Rebalance(Option<i32>),
}

/// One start of a group's consumer on a partition.
pub(super) struct Start<'h> {
    pub event: &'h ConsumerEvent,
    pub group: &'h str,
    pub partition: &'h TopicPartition,
    pub offset: i64,
    pub from: StartFrom,
    pub trigger: Trigger,
    /// The last commit acknowledged before the trigger: (offset, when acknowledged).
    pub last_acked: Option<(i64, u64)>,
    /// Every offset the group had sent in a commit of the partition by the start, acknowledged
    /// or not (an unanswered commit may have landed).
    pub committed: BTreeSet<i64>,
    /// One past the highest offset the group's consumers delivered before the start.
    pub delivered_end: i64,
    /// Gateway and Iggy restarts between that acknowledgement and the start.
    pub restarts_between: Vec<FaultId>,
}

/// A commit as the checks see it: (offset, sent at, acknowledged at).
type CommitSeen = (i64, u64, Option<u64>);

pub(super) fn starts<'h>(index: &Index<'h>) -> Vec<Start<'h>> {
    let history = index.history;
    let group_of = |consumer: usize| history.consumers.get(consumer).and_then(|c| c.mode.group());
    // (group, partition) → commits so far: (offset, sent_us, acknowledged at).
    let mut commits: HashMap<(&str, &TopicPartition), Vec<CommitSeen>> = HashMap::new();
    let mut delivered: HashMap<(&str, &TopicPartition), i64> = HashMap::new();
    let mut trigger: HashMap<(usize, u32), (u64, Trigger)> = HashMap::new();
    // Every commit sent, whenever its outcome was recorded: one still in flight at a start (its
    // outcome recorded only when it timed out, after the start) may have landed before it.
    let mut sent: HashMap<(&str, &TopicPartition), Vec<(i64, u64)>> = HashMap::new();
    for event in &history.consumer_events {
        if let ConsumerEventKind::Committed {
            group,
            partition,
            offset,
            sent_us,
            ..
        } = &event.kind
        {
            sent.entry((group.as_str(), partition))
                .or_default()
                .push((*offset, *sent_us));
        }
    }
    let mut starts = Vec::new();
    for event in &history.consumer_events {
        let key = (event.consumer, event.session);
        match &event.kind {
            ConsumerEventKind::SessionStarted => {
                trigger.insert(key, (event.at_us, Trigger::Restart));
            }
            ConsumerEventKind::Assigned { generation, .. } => {
                trigger.insert(key, (event.at_us, Trigger::Rebalance(*generation)));
            }
            ConsumerEventKind::Committed {
                group,
                partition,
                offset,
                sent_us,
                outcome,
                ..
            } => {
                let acked = (*outcome == CommitOutcome::Acked).then_some(event.at_us);
                commits
                    .entry((group.as_str(), partition))
                    .or_default()
                    .push((*offset, *sent_us, acked));
            }
            ConsumerEventKind::Polled { partition, records } => {
                let (Some(group), Some(last)) = (group_of(event.consumer), records.iter().map(|r| r.offset).max())
                else {
                    continue;
                };
                let end = delivered.entry((group, partition)).or_default();
                *end = (*end).max(last + 1);
            }
            ConsumerEventKind::Positioned {
                partition,
                offset,
                from,
            } => {
                let Some(group) = group_of(event.consumer) else {
                    continue;
                };
                if *from == StartFrom::Seek {
                    continue;
                }
                let (boundary_us, why) = trigger.get(&key).copied().unwrap_or((event.at_us, Trigger::Restart));
                let of_partition = commits.get(&(group, partition)).map_or(&[][..], Vec::as_slice);
                let last_acked = of_partition
                    .iter()
                    .filter_map(|(offset, _, acked)| acked.filter(|at| *at < boundary_us).map(|at| (*offset, at)))
                    .max_by_key(|(_, at)| *at);
                let committed = sent
                    .get(&(group, partition))
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .filter(|(_, sent_us)| *sent_us < event.at_us)
                    .map(|(offset, _)| *offset)
                    .collect();
                let since = last_acked.map_or(0, |(_, at)| at);
                let restarts_between = history
                    .faults
                    .iter()
                    .filter(|f| matches!(f.kind, FaultKind::GatewayRestart { .. } | FaultKind::IggyRestart))
                    .filter(|f| f.start_us >= since && f.start_us <= event.at_us)
                    .map(|f| f.id)
                    .collect();
                starts.push(Start {
                    event,
                    group,
                    partition,
                    offset: *offset,
                    from: *from,
                    trigger: why,
                    last_acked,
                    committed,
                    delivered_end: delivered.get(&(group, partition)).copied().unwrap_or(0),
                    restarts_between,
                });
            }
            ConsumerEventKind::SessionEnded { .. } | ConsumerEventKind::Fenced { .. } => {}
        }
    }
    starts
}

impl Start<'_> {
    /// `after a restart` / `after the rebalance to generation 3`.
    pub fn trigger_text(&self) -> String {
        match self.trigger {
            Trigger::Restart => "after a restart".into(),
            Trigger::Rebalance(Some(generation)) => format!("after the rebalance to generation {generation}"),
            Trigger::Rebalance(None) => "after an assignment".into(),
        }
    }

    /// ` (gateway and Iggy restarts since: faults #1, #4)`
    pub fn restarts_text(&self, index: &Index<'_>) -> String {
        if self.restarts_between.is_empty() {
            return String::new();
        }
        let faults: Vec<String> = self
            .restarts_between
            .iter()
            .map(|id| match &index.history.faults[*id].kind {
                FaultKind::GatewayRestart { gateway } => format!("#{id} {gateway} restart"),
                _ => format!("#{id} iggy restart"),
            })
            .collect();
        format!("; restarts since that commit: {}", faults.join(", "))
    }
}
