//! Reclaims of a Kafka group's offsets from a stale member (CO-RECLAIM-1), ones interrupted
//! half-way by a backend that fails (CO-RECLAIM-2), and ones whose gateway dies half-way
//! (CO-RECLAIM-3).

use super::*;

#[tokio::test]
async fn co_reclaim_1_a_stale_member_is_cleared_and_offsets_survive() {
    let b = EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default());
    let t = two_partitions_of_five(&b).await;
    let restores = PendingRestores::default();
    let before = OffsetStore {
        backend: &b,
        client: 7,
        restores: &restores,
    };
    before.commit(&t, 0, "g", 3).await.unwrap();
    before.commit(&t, 1, "g", 4).await.unwrap();
    // Client 7's connection died with the server, but it stays listed as a member (DIFF-12).
    let after = OffsetStore {
        backend: &b,
        client: 8,
        restores: &restores,
    };
    // Client 8 joins as second member: Iggy gives it partition 1 only, so a commit on
    // partition 0 needs the reclaim.
    after.commit(&t, 0, "g", 5).await.unwrap();
    assert_eq!(
        after.fetch(&t, &[0, 1], "g").await.unwrap(),
        vec![5, 4],
        "partition 1's offset was kept"
    );
    // The stale member is gone: client 8 owns every partition now.
    b.store_consumer_offset("s", "t", 1, "kafka.cg.g", 8, 1).await.unwrap();
}

/// The embedded model, made to fail the first Iggy request after a chosen step of a reclaim,
/// once armed: the server restarts, or the request times out, or the gateway dies there.
struct InterruptedAfter {
    inner: EmbeddedBackend,
    step: Step,
    armed: AtomicBool,
    fail_next: AtomicBool,
}

/// The request after which the next one fails.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    /// A delete of this Iggy consumer group.
    DeleteOf(&'static str),
    /// A store into this Iggy consumer group.
    StoreInto(&'static str),
}

impl InterruptedAfter {
    fn new(step: Step) -> Self {
        Self {
            inner: EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()),
            step,
            armed: AtomicBool::new(false),
            fail_next: AtomicBool::new(false),
        }
    }

    fn interrupted(&self) -> Result<(), BackendError> {
        if self.fail_next.swap(false, SeqCst) {
            return Err(BackendError::Iggy(IggyError::Disconnected));
        }
        Ok(())
    }

    /// A request succeeded; `was_step` says whether it is the chosen step.
    fn done(&self, was_step: bool) {
        if was_step && self.armed.swap(false, SeqCst) {
            self.fail_next.store(true, SeqCst);
        }
    }
}

impl ConsumerOffsets for InterruptedAfter {
    async fn create_consumer_group(&self, s: &str, t: &str, g: &str) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.create_consumer_group(s, t, g).await
    }
    fn release_client(&self, client: ClientId) {
        self.inner.release_client(client)
    }
    async fn delete_consumer_group(&self, s: &str, t: &str, g: &str) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.delete_consumer_group(s, t, g).await?;
        self.done(matches!(self.step, Step::DeleteOf(group) if group == g));
        Ok(())
    }
    async fn list_consumer_groups(&self, s: &str, t: &str) -> Result<Vec<String>, BackendError> {
        self.interrupted()?;
        self.inner.list_consumer_groups(s, t).await
    }
    async fn join_consumer_group(&self, s: &str, t: &str, g: &str, c: ClientId) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.join_consumer_group(s, t, g, c).await
    }
    async fn leave_consumer_group(&self, s: &str, t: &str, g: &str, c: ClientId) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.leave_consumer_group(s, t, g, c).await
    }
    async fn store_consumer_offset(
        &self,
        s: &str,
        t: &str,
        p: u32,
        g: &str,
        c: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.store_consumer_offset(s, t, p, g, c, offset).await?;
        self.done(matches!(self.step, Step::StoreInto(group) if group == g));
        Ok(())
    }
    async fn get_consumer_offset(&self, s: &str, t: &str, p: u32, g: &str) -> Result<Option<u64>, BackendError> {
        self.interrupted()?;
        self.inner.get_consumer_offset(s, t, p, g).await
    }
    async fn delete_consumer_offset(&self, s: &str, t: &str, p: u32, g: &str, c: ClientId) -> Result<(), BackendError> {
        self.interrupted()?;
        self.inner.delete_consumer_offset(s, t, p, g, c).await
    }
}

impl Backend for InterruptedAfter {
    fn kind(&self) -> &'static str {
        "interrupted-after"
    }
    async fn open_session(&self, credentials: &Credentials) -> Result<(Self, Principal), BackendError> {
        let (inner, principal) = self.inner.open_session(credentials).await?;
        let session = Self {
            inner,
            step: self.step,
            armed: AtomicBool::new(false),
            fail_next: AtomicBool::new(false),
        };
        Ok((session, principal))
    }
    async fn ensure_stream(&self, s: &str) -> Result<(), BackendError> {
        self.inner.ensure_stream(s).await
    }
    async fn list_topics(&self, s: &str) -> Result<Vec<TopicInfo>, BackendError> {
        self.inner.list_topics(s).await
    }
    async fn get_topic(&self, s: &str, t: &str) -> Result<Option<TopicInfo>, BackendError> {
        self.interrupted()?;
        self.inner.get_topic(s, t).await
    }
    async fn create_topic(&self, s: &str, t: &str, spec: TopicSpec) -> Result<(), BackendError> {
        self.inner.create_topic(s, t, spec).await
    }
    async fn delete_topic(&self, s: &str, t: &str) -> Result<(), BackendError> {
        self.inner.delete_topic(s, t).await
    }
    async fn add_partitions(&self, s: &str, t: &str, count: u32) -> Result<(), BackendError> {
        self.inner.add_partitions(s, t, count).await
    }
    async fn append(&self, s: &str, t: &str, p: u32, m: Vec<IggyMessage>) -> Result<Option<u64>, BackendError> {
        self.inner.append(s, t, p, m).await
    }
    async fn read(&self, s: &str, t: &str, p: u32, o: u64, l: ReadLimits) -> Result<Vec<IggyMessage>, BackendError> {
        self.inner.read(s, t, p, o, l).await
    }
    async fn watermarks(&self, s: &str, t: &str, p: u32) -> Result<Watermarks, BackendError> {
        self.inner.watermarks(s, t, p).await
    }
    async fn offset_for_timestamp(
        &self,
        s: &str,
        t: &str,
        p: u32,
        ts_us: u64,
    ) -> Result<Option<(u64, u64)>, BackendError> {
        self.inner.offset_for_timestamp(s, t, p, ts_us).await
    }
    fn append_generation(&self) -> u64 {
        self.inner.append_generation()
    }
    async fn wait_for_append(&self, seen: u64) {
        self.inner.wait_for_append(seen).await
    }
}

#[tokio::test]
async fn co_reclaim_2_an_interrupted_reclaim_keeps_the_offsets_it_read() {
    let b = InterruptedAfter::new(Step::DeleteOf("kafka.cg.g"));
    let t = two_partitions_of_five(&b).await;
    let restores = PendingRestores::default();
    let before = OffsetStore {
        backend: &b,
        client: 7,
        restores: &restores,
    };
    before.commit(&t, 0, "g", 3).await.unwrap();
    before.commit(&t, 1, "g", 4).await.unwrap();
    // Client 7 is the stale member of DIFF-12; client 8's commit reclaims, and the first
    // request after the delete fails.
    b.armed.store(true, SeqCst);
    let after = OffsetStore {
        backend: &b,
        client: 8,
        restores: &restores,
    };
    assert!(
        after.commit(&t, 0, "g", 5).await.is_err(),
        "the reclaim was interrupted"
    );
    assert!(!b.armed.load(SeqCst), "the group was deleted");
    assert_eq!(
        b.get_consumer_offset("s", "t", 1, "kafka.cg.g").await.unwrap(),
        None,
        "the server lost the offsets"
    );
    assert_eq!(
        after.fetch(&t, &[0, 1], "g").await.unwrap(),
        vec![3, 4],
        "a fetch answers the pending values, not 'no offset'"
    );
    // The next commit stores the pending values back first, then its own.
    after.commit(&t, 0, "g", 5).await.unwrap();
    assert_eq!(after.fetch(&t, &[0, 1], "g").await.unwrap(), vec![5, 4]);
    assert_eq!(
        b.get_consumer_offset("s", "t", 1, "kafka.cg.g").await.unwrap(),
        Some(3),
        "partition 1 is on the server again (4 stored as 3, CO-ENCODE-1)"
    );
    assert!(!restores.is_pending(&t, "kafka.cg.g"), "nothing left pending");
}

/// Commits 3 and 4 on partitions 0 and 1 as client 7, which then goes stale (DIFF-12), and arms
/// `b`: client 8's next commit reclaims the group and fails after `b`'s step.
async fn reclaim_interrupted_at(b: &InterruptedAfter) -> IggyTarget {
    let t = two_partitions_of_five(b).await;
    let before = PendingRestores::default();
    let first = OffsetStore {
        backend: b,
        client: 7,
        restores: &before,
    };
    first.commit(&t, 0, "g", 3).await.unwrap();
    first.commit(&t, 1, "g", 4).await.unwrap();
    b.armed.store(true, SeqCst);
    let dying = OffsetStore {
        backend: b,
        client: 8,
        restores: &before,
    };
    assert!(
        dying.commit(&t, 0, "g", 5).await.is_err(),
        "the reclaim was interrupted"
    );
    assert!(!b.armed.load(SeqCst), "the step was reached");
    t
}

async fn listed(b: &InterruptedAfter) -> Vec<String> {
    let mut names = b.inner.list_consumer_groups("s", "t").await.unwrap();
    names.sort();
    names
}

/// Pins seed 22 of the consumer-protocol simulation: the gateway died between the delete of
/// the offsets group and the store-back, and its successor answered "no offset" for partitions
/// with acknowledged commits.
#[tokio::test]
async fn co_reclaim_3_a_gateway_dying_after_the_delete_loses_no_commit() {
    let b = InterruptedAfter::new(Step::DeleteOf("kafka.cg.g"));
    let t = reclaim_interrupted_at(&b).await;
    assert_eq!(
        listed(&b).await,
        vec!["kafka.cr.g"],
        "only the reclaim copy holds the offsets"
    );
    // The gateway died: its successor has nothing in memory.
    let successor = PendingRestores::default();
    let next = OffsetStore {
        backend: &b,
        client: 9,
        restores: &successor,
    };
    assert_eq!(
        next.fetch(&t, &[0, 1], "g").await.unwrap(),
        vec![3, 4],
        "answered from the copy"
    );
    next.commit(&t, 0, "g", 5).await.unwrap();
    assert_eq!(next.fetch(&t, &[0, 1], "g").await.unwrap(), vec![5, 4]);
    assert_eq!(
        listed(&b).await,
        vec!["kafka.cg.g"],
        "the copy is gone once stored back"
    );
    assert_eq!(
        b.inner.get_consumer_offset("s", "t", 1, "kafka.cg.g").await.unwrap(),
        Some(3)
    );
}

#[tokio::test]
async fn co_reclaim_3_a_copy_cut_short_is_written_whole_before_the_group_is_deleted() {
    let b = InterruptedAfter::new(Step::StoreInto("kafka.cr.g"));
    let t = reclaim_interrupted_at(&b).await;
    assert_eq!(
        listed(&b).await,
        vec!["kafka.cg.g", "kafka.cr.g"],
        "the group was not deleted"
    );
    assert_eq!(
        b.inner.get_consumer_offset("s", "t", 1, "kafka.cr.g").await.unwrap(),
        None,
        "the copy misses partition 1"
    );
    let successor = PendingRestores::default();
    let next = OffsetStore {
        backend: &b,
        client: 9,
        restores: &successor,
    };
    assert_eq!(next.fetch(&t, &[0, 1], "g").await.unwrap(), vec![3, 4]);
    // Clients 7 and 8 stay members of the group, so this commit reclaims it again, from the
    // copy and the group together.
    next.commit(&t, 1, "g", 2).await.unwrap();
    assert_eq!(next.fetch(&t, &[0, 1], "g").await.unwrap(), vec![3, 2]);
    assert_eq!(listed(&b).await, vec!["kafka.cg.g"]);
}

#[tokio::test]
async fn co_reclaim_3_delete_groups_deletes_a_reclaim_copy_too() {
    let b = InterruptedAfter::new(Step::DeleteOf("kafka.cg.g"));
    let t = reclaim_interrupted_at(&b).await;
    let successor = PendingRestores::default();
    let next = OffsetStore {
        backend: &b,
        client: 9,
        restores: &successor,
    };
    assert!(
        next.holds_group(&t, "g").await.unwrap(),
        "the copy holds the group's offsets"
    );
    assert_eq!(next.delete_group(&t, "g").await.unwrap(), 1);
    assert!(listed(&b).await.is_empty());
    assert_eq!(next.fetch(&t, &[0, 1], "g").await.unwrap(), vec![-1, -1]);
}
