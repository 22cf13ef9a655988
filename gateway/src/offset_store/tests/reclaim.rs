//! Reclaims of a Kafka group's offsets from a stale member (CO-RECLAIM-1), and one interrupted
//! half-way by a backend that fails after its delete (CO-RECLAIM-2).

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

/// The embedded model, made to fail the first Iggy request after a delete of `kafka.cg.g`:
/// the server restarts, or the request times out, inside a reclaim.
struct InterruptedAfterDelete {
    inner: EmbeddedBackend,
    armed: AtomicBool,
    fail_next: AtomicBool,
}

impl InterruptedAfterDelete {
    fn interrupted(&self) -> Result<(), BackendError> {
        if self.fail_next.swap(false, SeqCst) {
            return Err(BackendError::Iggy(IggyError::Disconnected));
        }
        Ok(())
    }
}

impl ConsumerOffsets for InterruptedAfterDelete {
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
        if g == "kafka.cg.g" && self.armed.swap(false, SeqCst) {
            self.fail_next.store(true, SeqCst);
        }
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
        self.inner.store_consumer_offset(s, t, p, g, c, offset).await
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

impl Backend for InterruptedAfterDelete {
    fn kind(&self) -> &'static str {
        "interrupted-after-delete"
    }
    async fn open_session(&self, credentials: &Credentials) -> Result<(Self, Principal), BackendError> {
        let (inner, principal) = self.inner.open_session(credentials).await?;
        let session = Self {
            inner,
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
    let b = InterruptedAfterDelete {
        inner: EmbeddedBackend::new(Arc::new(SystemClock), EmbeddedConfig::default()),
        armed: AtomicBool::new(false),
        fail_next: AtomicBool::new(false),
    };
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
