//! Kafka committed offsets stored in Iggy (docs/spec/consumer-offsets.md).
//!
//! One Iggy consumer-group offset per Kafka (group, topic, partition), under the Iggy consumer
//! group `kafka.cg.<group>` on the Iggy topic the Kafka topic maps to (CO-KEY-1). The real
//! server only stores an offset for a member of that group that owns the partition, and never
//! above the partition's last offset (DIFF-1, DIFF-2), so:
//!
//! - the coordinator's one offsets client joins the group before it stores (CO-MEMBER-1);
//! - a Kafka commit C >= 1 is stored as C - 1, Iggy's own "last processed" convention, which is
//!   always at or below the last offset for a commit at or below the high watermark
//!   (CO-ENCODE-1);
//! - a commit of 0, which no stored value can express (and which an empty partition refuses
//!   outright), is a zero marker: an Iggy consumer group named `kafka.c0.<partition>.<group>` on
//!   the same topic (CO-ZERO-1). A marker wins over a stored key, so a crash between the two
//!   steps of a commit can only make a consumer re-read, never skip.
//!
//! A reclaim (CO-RECLAIM-1) deletes and recreates the group; the offsets it read stay in
//! [`PendingRestores`] until each is stored back (CO-RECLAIM-2).

use crate::auth::sessions::Session;
use crate::backend::{Backend, BackendError, ClientId};
use crate::config::IggyTarget;
use iggy_common::IggyError;
use std::collections::BTreeSet;

mod encoding;
pub use encoding::*;
mod reclaim;
mod restores;
pub use restores::PendingRestores;

/// Why a commit failed.
#[derive(Debug)]
pub enum CommitError {
    /// Negative offsets other than -1 (CO-DELETE-1), or a commit past the high watermark.
    OutOfRange,
    Backend(BackendError),
}

fn is_not_member(e: &BackendError) -> bool {
    matches!(
        e,
        BackendError::Iggy(
            IggyError::ResourceNotFound(_)
                | IggyError::ConsumerGroupNameNotFound(..)
                | IggyError::ConsumerGroupIdNotFound(..)
                | IggyError::ConsumerGroupMemberNotFound(..)
        )
    )
}

fn is_absent(e: &BackendError) -> bool {
    matches!(
        e,
        BackendError::Iggy(
            IggyError::ConsumerOffsetNotFound(_)
                | IggyError::ConsumerGroupNameNotFound(..)
                | IggyError::ConsumerGroupIdNotFound(..)
        )
    )
}

fn is_exists(e: &BackendError) -> bool {
    matches!(e, BackendError::Iggy(IggyError::ConsumerGroupNameAlreadyExists(..)))
}

/// (topic, group) offsets memberships remembered at most (LIMIT-OFFSET-HOLDERS-1): each is a
/// few hundred bytes, so the table stays under tens of MB whatever commits name.
pub const MAX_OFFSET_HOLDERS: usize = 65_536;

/// Which session's offsets client is the member of each offsets group (AUTHZ-OFFSETS-1).
///
/// Commits run in the committing principal's own session, so each session has its own offsets
/// client. Iggy splits a group's partitions among its members, so two members would each own
/// only some partitions and refuse the other's stores. Before a session's client joins, the
/// member of another session leaves. Callers hold the group's commit lock.
pub struct OffsetMembers<B> {
    holders: std::sync::Mutex<Holders<B>>,
    /// The offsets of reclaims not yet stored back (CO-RECLAIM-2).
    pub restores: PendingRestores,
}

/// The session holding each (topic, Kafka group)'s offsets membership.
type Holders<B> = std::collections::HashMap<(IggyTarget, String), std::sync::Weak<Session<B>>>;

impl<B> Default for OffsetMembers<B> {
    fn default() -> Self {
        Self {
            holders: std::sync::Mutex::new(std::collections::HashMap::new()),
            restores: PendingRestores::default(),
        }
    }
}

impl<B: Backend> OffsetMembers<B> {
    /// Makes `session` the holder of `group`'s offsets on `target`: the previous holder's
    /// client, when another session's and still alive, leaves the Iggy group first. A leave that
    /// fails is logged; the commit's own join and reclaim (CO-RECLAIM-1) still follow.
    /// Without SASL every commit runs in the one gateway session: nothing is handed over, but
    /// the membership is remembered, so the group's move to another gateway can leave it
    /// (GROUP-COORDINATOR-5).
    pub async fn claim(&self, target: &IggyTarget, group: &str, session: &std::sync::Arc<Session<B>>) {
        let key = (target.clone(), group.to_string());
        let previous = {
            let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
            // LIMIT-OFFSET-HOLDERS-1: entries of ended sessions go when the table is full, not on
            // every commit; if live ones still fill it, an eighth is forgotten at once, so the
            // scan is paid once per many new entries. A forgotten holder's partitions are
            // reclaimed by the next commit from another session instead (CO-RECLAIM-1).
            if !holders.contains_key(&key) && holders.len() >= MAX_OFFSET_HOLDERS {
                holders.retain(|_, held| held.strong_count() > 0);
                let keep = MAX_OFFSET_HOLDERS - MAX_OFFSET_HOLDERS / 8;
                if holders.len() > keep {
                    crate::metrics::metrics().limit_hit("LIMIT-OFFSET-HOLDERS-1");
                    let forgotten: Vec<_> = holders.keys().take(holders.len() - keep).cloned().collect();
                    for key in forgotten {
                        holders.remove(&key);
                    }
                }
            }
            holders
                .insert(key, std::sync::Arc::downgrade(session))
                .and_then(|held| held.upgrade())
        };
        let Some(previous) = previous.filter(|p| !std::sync::Arc::ptr_eq(p, session)) else {
            return;
        };
        if let Err(e) = Self::leave(target, group, &previous).await {
            tracing::warn!(
                "{} on {}/{}: the offsets client of {} did not leave before {} commits: {e}",
                offsets_group(group),
                target.stream,
                target.topic,
                previous.who(),
                session.who()
            );
        }
    }

    /// GROUP-COORDINATOR-5: forgets the memberships held for groups this gateway no longer
    /// coordinates and returns them, for the caller to make each leave under the group's
    /// commit lock.
    pub fn take_moved(
        &self,
        coordinates: impl Fn(&str) -> bool,
    ) -> Vec<(IggyTarget, String, std::sync::Arc<Session<B>>)> {
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        let mut moved = Vec::new();
        holders.retain(|(target, group), held| {
            if coordinates(group) {
                return true;
            }
            if let Some(session) = held.upgrade() {
                moved.push((target.clone(), group.clone(), session));
            }
            false
        });
        moved
    }

    /// Makes `session`'s offsets client leave `group`'s offsets group on `target`; not being a
    /// member (any more) is no failure.
    pub async fn leave(target: &IggyTarget, group: &str, session: &Session<B>) -> Result<(), BackendError> {
        let iggy_group = offsets_group(group);
        match session
            .backend
            .leave_consumer_group(&target.stream, &target.topic, &iggy_group, session.offsets_client)
            .await
        {
            Err(e) if is_not_member(&e) => Ok(()),
            other => other,
        }
    }
}

/// What [`OffsetStore::fetch`] read of one partition.
struct ReadOffset {
    /// The offsets group's value.
    stored: Option<u64>,
    /// The reclaim copy's value (CO-RECLAIM-3), which wins over the group's.
    copied: Option<u64>,
    /// Whether the zero marker exists (CO-ZERO-1).
    marker: bool,
}

/// Reads and writes committed offsets through one backend client.
pub struct OffsetStore<'a, B> {
    pub backend: &'a B,
    pub client: ClientId,
    /// Shared by every session of the gateway (CO-RECLAIM-2).
    pub restores: &'a PendingRestores,
}

impl<B: Backend> OffsetStore<'_, B> {
    /// Creates `kafka.cg.<group>` when missing and joins it (CO-MEMBER-1).
    async fn ensure_member(&self, t: &IggyTarget, key: &str) -> Result<(), BackendError> {
        if let Err(e) = self.backend.create_consumer_group(&t.stream, &t.topic, key).await {
            if !is_exists(&e) {
                return Err(e);
            }
        }
        self.backend
            .join_consumer_group(&t.stream, &t.topic, key, self.client)
            .await
    }

    /// Runs a membership-bound operation, joining and retrying once when the server says this
    /// client is not (or no longer) a member owning the partition; when joining is not enough,
    /// reclaims the group (CO-RECLAIM-1) and retries once more.
    async fn as_member<F, Fut>(&self, t: &IggyTarget, key: &str, op: F) -> Result<(), BackendError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<(), BackendError>>,
    {
        match self.joined(t, key, &op).await {
            Err(e) if is_not_member(&e) => {
                {
                    let _writing = self.restores.writing.lock().await;
                    self.reclaim(t, key).await?;
                }
                op().await
            }
            other => other,
        }
    }

    /// Runs `op`, joining and retrying once when this client is not a member.
    async fn joined<F, Fut>(&self, t: &IggyTarget, key: &str, op: &F) -> Result<(), BackendError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<(), BackendError>>,
    {
        match op().await {
            Err(e) if is_not_member(&e) => {
                self.ensure_member(t, key).await?;
                op().await
            }
            other => other,
        }
    }

    /// Stores one Kafka commit.
    pub async fn commit(&self, t: &IggyTarget, partition: u32, group: &str, committed: i64) -> Result<(), CommitError> {
        let stored = stored_for_commit(committed).ok_or(CommitError::OutOfRange)?;
        let key = offsets_group(group);
        if self.needs_restore(t, &key).await.map_err(CommitError::Backend)? {
            // CO-RECLAIM-2, CO-RECLAIM-3: the pending values, here or in a reclaim copy, go back
            // first, so they never overwrite this commit; when they cannot, the commit fails
            // (retriable) and they stay pending.
            let _writing = self.restores.writing.lock().await;
            self.restore_pending(t, &key).await.map_err(CommitError::Backend)?;
        }
        let marker = zero_marker(group, partition);
        let (s, tp) = (&t.stream, &t.topic);
        let delete_key = || async {
            match self
                .backend
                .delete_consumer_offset(s, tp, partition, &key, self.client)
                .await
            {
                Err(e) if is_absent(&e) => Ok(()),
                other => other,
            }
        };
        let delete_marker = || async {
            match self.backend.delete_consumer_group(s, tp, &marker).await {
                Err(e) if is_absent(&e) => Ok(()),
                other => other,
            }
        };
        match stored {
            StoredCommit::Offset(value) => {
                let store = || {
                    self.backend
                        .store_consumer_offset(s, tp, partition, &key, self.client, value)
                };
                match self.as_member(t, &key, store).await {
                    Err(BackendError::Iggy(IggyError::InvalidOffset(_))) => return Err(CommitError::OutOfRange),
                    other => other.map_err(CommitError::Backend)?,
                }
                delete_marker().await.map_err(CommitError::Backend)
            }
            StoredCommit::Zero => {
                match self.backend.create_consumer_group(s, tp, &marker).await {
                    Err(e) if !is_exists(&e) => return Err(CommitError::Backend(e)),
                    _ => {}
                }
                self.as_member(t, &key, delete_key).await.map_err(CommitError::Backend)
            }
            StoredCommit::Absent => {
                self.as_member(t, &key, delete_key)
                    .await
                    .map_err(CommitError::Backend)?;
                delete_marker().await.map_err(CommitError::Backend)
            }
        }
    }

    /// The committed offsets of `partitions`, reading no more than one group list per topic.
    /// Reading needs no membership.
    ///
    /// CO-RECLAIM-2: a partition a reclaim has not stored back yet answers its pending value; a
    /// fetch does not store it back itself (it may run as a principal that may only read, and
    /// outside the group's commit lock). A reclaim that starts while the server is read could
    /// delete the group under the read, so the read is repeated; a retriable error answers when
    /// reclaims keep starting.
    pub async fn fetch(&self, t: &IggyTarget, partitions: &[u32], group: &str) -> Result<Vec<i64>, BackendError> {
        // Each repeat needs a whole reclaim of this group (a failed commit) under one read.
        const MAX_READS: usize = 8;
        let key = offsets_group(group);
        for _ in 0..MAX_READS {
            let (pending_before, started) = self.restores.snapshot(t, &key);
            let read = self.fetch_stored(t, partitions, group, &key).await?;
            let (mut pending, started_after) = self.restores.snapshot(t, &key);
            if started_after != started {
                continue;
            }
            // A value stored back during the read may have been missed by it.
            for (p, offset) in pending_before {
                pending.entry(p).or_insert(offset);
            }
            return Ok(partitions
                .iter()
                .zip(read)
                .map(|(p, read)| committed_from(read.copied.or(pending.get(p).copied()).or(read.stored), read.marker))
                .collect());
        }
        // No stored value fits; an error, never "nothing committed".
        Err(BackendError::Iggy(IggyError::TaskTimeout))
    }

    /// Each partition's stored value, its value in a reclaim copy (CO-RECLAIM-3), and whether
    /// its zero marker exists. The copy is read before the group: a reclaim stores every value
    /// back before it deletes the copy, so a value missing from a copy deleted under the read
    /// is in the group by the time the group is read.
    async fn fetch_stored(
        &self,
        t: &IggyTarget,
        partitions: &[u32],
        group: &str,
        key: &str,
    ) -> Result<Vec<ReadOffset>, BackendError> {
        let groups: BTreeSet<String> = self
            .backend
            .list_consumer_groups(&t.stream, &t.topic)
            .await?
            .into_iter()
            .collect();
        let copy = reclaim_copy_of(key);
        let has_copy = groups.contains(&copy);
        self.restores.copy_seen(t, key, has_copy);
        let mut out = Vec::with_capacity(partitions.len());
        for &p in partitions {
            let copied = if has_copy {
                self.backend.get_consumer_offset(&t.stream, &t.topic, p, &copy).await?
            } else {
                None
            };
            let stored = if groups.contains(key) {
                self.backend.get_consumer_offset(&t.stream, &t.topic, p, key).await?
            } else {
                None
            };
            out.push(ReadOffset {
                stored,
                copied,
                marker: groups.contains(&zero_marker(group, p)),
            });
        }
        Ok(out)
    }

    /// Deletes the group's committed offset of one partition (OffsetDelete, OFFSETDELETE-1): what
    /// a commit of -1 does (CO-DELETE-1), the key and the zero marker both gone; nothing stored
    /// is no error.
    pub async fn delete_partition(&self, t: &IggyTarget, partition: u32, group: &str) -> Result<(), BackendError> {
        match self.commit(t, partition, group, -1).await {
            Ok(()) => Ok(()),
            Err(CommitError::Backend(e)) => Err(e),
            Err(CommitError::OutOfRange) => unreachable!("-1 is the deletion commit (CO-DELETE-1)"),
        }
    }

    /// Whether the group has anything stored on one Iggy topic: its offsets key or a zero marker
    /// (OFFSETDELETE-1 asks whether a group no member holds exists), or offsets a reclaim has
    /// not stored back yet (CO-RECLAIM-2), here or in a reclaim copy (CO-RECLAIM-3).
    pub async fn holds_group(&self, t: &IggyTarget, group: &str) -> Result<bool, BackendError> {
        if self.restores.is_pending(t, &offsets_group(group)) {
            return Ok(true);
        }
        let groups = self.backend.list_consumer_groups(&t.stream, &t.topic).await?;
        Ok(groups.iter().any(|name| holds_group_offsets(name, group)))
    }

    /// Deletes everything a Kafka group stored on one Iggy topic (DeleteGroups, GROUP-DELETE-1):
    /// its Iggy consumer group and its zero markers; returns how many Iggy consumer groups it
    /// deleted.
    pub async fn delete_group(&self, t: &IggyTarget, group: &str) -> Result<usize, BackendError> {
        // CO-RECLAIM-2: no store-back may recreate the group after this delete; what is still
        // pending, here or in a reclaim copy (CO-RECLAIM-3), goes with the group.
        let _writing = self.restores.writing.lock().await;
        let mut deleted = 0;
        let groups = self.backend.list_consumer_groups(&t.stream, &t.topic).await?;
        let key = offsets_group(group);
        let pending = self.restores.is_pending(t, &key);
        for name in groups {
            if holds_group_offsets(&name, group) {
                match self.backend.delete_consumer_group(&t.stream, &t.topic, &name).await {
                    Ok(()) => deleted += 1,
                    Err(e) if !is_absent(&e) => return Err(e),
                    Err(_) => {}
                }
            }
        }
        // Its reclaim copy went with it (CO-RECLAIM-3).
        self.restores.clear(t, &key);
        if pending {
            // The group's offsets existed, even when the server had lost its Iggy group.
            deleted = deleted.max(1);
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::{Credentials, Principal};
    use crate::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
    use crate::backend::{ConsumerOffsets, ReadLimits, TopicInfo, TopicSpec, Watermarks};
    use crate::clock::SystemClock;
    use iggy_common::IggyMessage;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;

    mod reclaim;

    /// Topic `s`/`t` with two partitions of five records each, on `b`.
    async fn two_partitions_of_five(b: &impl Backend) -> IggyTarget {
        b.ensure_stream("s").await.unwrap();
        let spec = TopicSpec {
            partitions: 2,
            message_expiry_us: None,
        };
        b.create_topic("s", "t", spec).await.unwrap();
        for p in 0..2 {
            let messages = (0..5)
                .map(|_| IggyMessage::builder().payload("x".into()).build().unwrap())
                .collect();
            b.append("s", "t", p, messages).await.unwrap();
        }
        IggyTarget {
            stream: "s".into(),
            topic: "t".into(),
        }
    }

    #[tokio::test]
    async fn limit_offset_holders_1_the_memberships_remembered_are_bounded() {
        let session = Arc::new(Session {
            backend: Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default())),
            principal: Some(Principal {
                user_id: 1,
                username: "ann".into(),
            }),
            offsets_client: 1,
            opened_at_ms: 0,
            known_topics: Default::default(),
            slot: None,
        });
        let members = OffsetMembers::default();
        let target = IggyTarget {
            stream: "s".into(),
            topic: "t".into(),
        };
        // Commits naming ever new groups, each from a live session: before, every one stayed.
        for i in 0..MAX_OFFSET_HOLDERS + 100 {
            members.claim(&target, &format!("g{i}"), &session).await;
        }
        let held = members.holders.lock().unwrap().len();
        assert!(held <= MAX_OFFSET_HOLDERS, "{held} memberships remembered");
    }

    /// Pins seed 163 of the replicated-iggy-gateway-dies simulation: a gateway that let a group
    /// go stayed a member of its offsets group, so the next coordinator's first commit needed a
    /// reclaim, and a crash inside that reclaim lost the group's acknowledged commits.
    #[tokio::test]
    async fn group_coordinator_5_a_group_moved_away_leaves_its_offsets_group_so_the_next_coordinator_needs_no_reclaim()
    {
        let b = Arc::new(EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()));
        let t = two_partitions_of_five(b.as_ref()).await;
        let here = Arc::new(Session {
            backend: b.clone(),
            principal: None,
            offsets_client: 7,
            opened_at_ms: 0,
            known_topics: Default::default(),
            slot: None,
        });
        let members = OffsetMembers::default();
        let store = OffsetStore {
            backend: b.as_ref(),
            client: 7,
            restores: &members.restores,
        };
        for (partition, committed) in [(0, 3), (1, 4)] {
            members.claim(&t, "g", &here).await;
            store.commit(&t, partition, "g", committed).await.unwrap();
        }
        members.claim(&t, "h", &here).await;
        // "g" moves to another gateway; "h" stays here.
        let moved = members.take_moved(|group| group != "g");
        assert_eq!(moved.len(), 1, "only g's membership is taken");
        for (target, group, session) in moved {
            OffsetMembers::leave(&target, &group, &session).await.unwrap();
        }
        // The next coordinator: another gateway's offsets client on the same Iggy.
        let elsewhere = PendingRestores::default();
        let next = OffsetStore {
            backend: b.as_ref(),
            client: 8,
            restores: &elsewhere,
        };
        next.commit(&t, 0, "g", 5).await.unwrap();
        next.commit(&t, 1, "g", 2).await.unwrap();
        assert_eq!(
            elsewhere.reclaims_started.load(SeqCst),
            0,
            "the next coordinator had to reclaim the group"
        );
        assert_eq!(next.fetch(&t, &[0, 1], "g").await.unwrap(), vec![5, 2]);
        assert_eq!(members.take_moved(|_| false).len(), 1, "h is still held");
    }

    #[tokio::test]
    async fn co_key_1_a_commit_is_the_group_kind_offset_of_kafka_cg_group_on_the_mapped_partition() {
        let b = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
        b.ensure_stream("s").await.unwrap();
        let spec = TopicSpec {
            partitions: 3,
            message_expiry_us: None,
        };
        b.create_topic("s", "t", spec).await.unwrap();
        let messages = (0..4)
            .map(|_| IggyMessage::builder().payload("x".into()).build().unwrap())
            .collect();
        b.append("s", "t", 2, messages).await.unwrap();
        let t = IggyTarget {
            stream: "s".into(),
            topic: "t".into(),
        };
        OffsetStore {
            backend: &b,
            client: 1,
            restores: &PendingRestores::default(),
        }
        .commit(&t, 2, "orders", 3)
        .await
        .unwrap();
        assert!(b
            .list_consumer_groups("s", "t")
            .await
            .unwrap()
            .contains(&"kafka.cg.orders".to_string()));
        assert_eq!(
            b.get_consumer_offset("s", "t", 2, "kafka.cg.orders").await.unwrap(),
            Some(2)
        );
        assert_eq!(
            b.get_consumer_offset("s", "t", 0, "kafka.cg.orders").await.unwrap(),
            None,
            "partition unchanged"
        );
    }
}
