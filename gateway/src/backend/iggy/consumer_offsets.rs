//! The consumer-offsets port over Iggy consumer groups and consumer offsets, each through the
//! dedicated client of its `ClientId` (membership is tied to the connection).

use super::*;

impl ConsumerOffsets for IggyBackend {
    async fn create_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        if name(group).is_err() {
            return Err(IggyError::InvalidConsumerGroupName.into());
        }
        // Not retried: a lost answer would turn into ConsumerGroupNameAlreadyExists.
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.create_consumer_group(&s, &t, group).await })
            .await?;
        Ok(())
    }

    /// Shuts the client's dedicated connection down (in the background when a Tokio runtime is
    /// running; otherwise dropping it closes the socket): Iggy then drops its memberships.
    fn release_client(&self, client: ClientId) {
        let Some(conn) = self.inner.groups().remove(&client) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = conn.client().shutdown().await;
            });
        }
    }

    async fn delete_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        // Not retried: a lost answer would turn into ConsumerGroupNameNotFound.
        let conn = self.inner.any().clone();
        self.inner
            .once(&conn, |c| async move { c.delete_consumer_group(&s, &t, &g).await })
            .await?;
        Ok(())
    }

    async fn list_consumer_groups(&self, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
        let (s, t) = (name(stream)?, name(topic)?);
        let groups = self
            .inner
            .pooled(|c| {
                let (s, t) = (s.clone(), t.clone());
                async move { c.get_consumer_groups(&s, &t).await }
            })
            .await?;
        Ok(groups.into_iter().map(|g| g.name).collect())
    }

    /// Retried after a connection failure: a new connection holds no membership, so joining
    /// again is what is needed anyway.
    async fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, g) = (s.clone(), t.clone(), g.clone());
                async move { c.join_consumer_group(&s, &t, &g).await }
            })
            .await
    }

    /// Not retried after a connection failure: the reconnected client is no member (the failed
    /// connection's membership ended with it), so there is nothing left to leave; the error is
    /// reported.
    async fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .once(&conn, |c| async move { c.leave_consumer_group(&s, &t, &g).await })
            .await?;
        Ok(())
    }

    /// Through the client's own connection (membership: DIFF-1). After a reconnect the new
    /// connection is no member, so the retry answers ResourceNotFound and the caller joins again
    /// (CO-MEMBER-1).
    ///
    /// Iggy's TooManyConsumerOffsets (3024) cannot be recognised: the pinned SDK turns unknown
    /// codes into the generic `IggyError::Error` (DIFF-9), and the server built from the pinned
    /// sources has no such code or limit. Errors pass through as `BackendError::Iggy`.
    async fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move {
                    c.store_consumer_offset(&consumer, &s, &t, Some(partition), offset)
                        .await
                }
            })
            .await
    }

    /// Reading needs no membership: any pooled client.
    async fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> Result<Option<u64>, BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let info = self
            .inner
            .pooled(|c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move { c.get_consumer_offset(&consumer, &s, &t, Some(partition)).await }
            })
            .await?;
        Ok(info.map(|i| i.stored_offset))
    }

    /// Retried after a connection failure; a delete that did land the first time then answers
    /// ConsumerOffsetNotFound, which the caller counts as success (CO-DELETE-1).
    async fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let (s, t, g) = (name(stream)?, name(topic)?, name(group)?);
        let conn = self.inner.member(client)?;
        self.inner
            .retrying(&conn, |c| {
                let (s, t, consumer) = (s.clone(), t.clone(), Consumer::group(g.clone()));
                async move { c.delete_consumer_offset(&consumer, &s, &t, Some(partition)).await }
            })
            .await
    }
}
