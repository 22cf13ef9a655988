//! Reclaiming an offsets group from a stale member (CO-RECLAIM-1) without losing its offsets
//! to an Iggy failure (CO-RECLAIM-2) or to this gateway dying half-way (CO-RECLAIM-3).
//!
//! A reclaim deletes and recreates `kafka.cg.<G>`, so for a moment the group's offsets exist
//! nowhere on the server. They are first written to a reclaim copy, the Iggy consumer group
//! `kafka.cr.<G>` on the same topic, created fresh so no stale member owns its partitions; the
//! copy goes only once every value is back. While a copy exists its values are the group's
//! committed offsets: a fetch answers them, and the next write of the group, by any gateway,
//! stores them back first.

use super::{is_absent, is_exists, is_not_member, reclaim_copy_of, OffsetStore};
use crate::backend::{Backend, BackendError};
use crate::config::IggyTarget;
use std::collections::BTreeMap;

impl<B: Backend> OffsetStore<'_, B> {
    /// Each stored value of Iggy consumer group `group` on partitions `0..partitions`; a group
    /// that does not exist (any more) reads as nothing stored.
    async fn read_group(
        &self,
        t: &IggyTarget,
        group: &str,
        partitions: u32,
    ) -> Result<BTreeMap<u32, u64>, BackendError> {
        let mut values = BTreeMap::new();
        for p in 0..partitions {
            match self.backend.get_consumer_offset(&t.stream, &t.topic, p, group).await {
                Ok(Some(offset)) => {
                    values.insert(p, offset);
                }
                Ok(None) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(values)
    }

    async fn delete_if_present(&self, t: &IggyTarget, group: &str) -> Result<(), BackendError> {
        match self.backend.delete_consumer_group(&t.stream, &t.topic, group).await {
            Err(e) if !is_absent(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// CO-RECLAIM-3: whether a write of the group must store something back first. Looks for a
    /// reclaim copy once per group (one listing), then trusts what it saw: a copy appears only
    /// in a reclaim, which this gateway records itself, or after another gateway coordinated
    /// the group, whose members then fetch their offsets here and so list the groups again.
    pub(super) async fn needs_restore(&self, t: &IggyTarget, key: &str) -> Result<bool, BackendError> {
        if let Some(needed) = self.restores.needs_restore(t, key) {
            return Ok(needed);
        }
        let listed = self.backend.list_consumer_groups(&t.stream, &t.topic).await?;
        let present = listed.contains(&reclaim_copy_of(key));
        self.restores.copy_seen(t, key, present);
        Ok(present || self.restores.is_pending(t, key))
    }

    /// CO-RECLAIM-2, CO-RECLAIM-3: stores back what an interrupted reclaim left, in this
    /// gateway's memory or in a reclaim copy, before anything else writes the group, then drops
    /// the copy. Callers hold `restores.writing`.
    pub(super) async fn restore_pending(&self, t: &IggyTarget, key: &str) -> Result<(), BackendError> {
        let copy = reclaim_copy_of(key);
        let copied = if self
            .backend
            .list_consumer_groups(&t.stream, &t.topic)
            .await?
            .contains(&copy)
        {
            let Some(info) = self.backend.get_topic(&t.stream, &t.topic).await? else {
                self.restores.clear(t, key);
                return Ok(());
            };
            Some(self.read_group(t, &copy, info.partitions).await?)
        } else {
            None
        };
        let (mut pending, _) = self.restores.snapshot(t, key);
        pending.extend(copied.iter().flatten().map(|(p, offset)| (*p, *offset)));
        if !pending.is_empty() {
            tracing::warn!(
                "Iggy consumer group {key} on {}/{}: storing back the {} offsets an interrupted reclaim left{}",
                t.stream,
                t.topic,
                pending.len(),
                if copied.is_some() { " in its reclaim copy" } else { "" }
            );
        }
        for (p, offset) in pending {
            let store = || {
                self.backend
                    .store_consumer_offset(&t.stream, &t.topic, p, key, self.client, offset)
            };
            match self.joined(t, key, &store).await {
                Ok(()) => self.restores.stored(t, key, p),
                // Still a stale member in the way (the server restarted again): reclaim anew,
                // which keeps the pending values and the copy's.
                Err(e) if is_not_member(&e) => return self.reclaim(t, key).await,
                Err(e) => return Err(e),
            }
        }
        if copied.is_some() {
            self.delete_if_present(t, &copy).await?;
        }
        self.restores.clear(t, key);
        Ok(())
    }

    /// CO-RECLAIM-1: joined, yet another member owns the partition. After an Iggy restart the
    /// members of before stay listed with no connection behind them (DIFF-12) and keep their
    /// partitions for good; only recreating the group frees them. The group's offsets are read
    /// first (reading needs no membership) and stored back once this client is the only member.
    ///
    /// CO-RECLAIM-2: what was read stays pending here until stored back, so an Iggy restart or a
    /// failed request between the delete and the store-back loses nothing.
    ///
    /// CO-RECLAIM-3: before the delete, every value is in a reclaim copy, so this gateway dying
    /// anywhere inside the reclaim loses nothing either. A copy already there (left by an
    /// interrupted reclaim) wins over the group and this gateway's memory: the group may have
    /// lost values, and no commit lands while a copy exists. A copy that holds every value is
    /// kept as it is; one that misses some was cut short before its group was deleted, so the
    /// group still holds them and the copy is written again.
    ///
    /// Callers hold `restores.writing`.
    pub(super) async fn reclaim(&self, t: &IggyTarget, key: &str) -> Result<(), BackendError> {
        let (s, tp) = (&t.stream, &t.topic);
        let Some(info) = self.backend.get_topic(s, tp).await? else {
            self.restores.clear(t, key);
            return Ok(());
        };
        let copy = reclaim_copy_of(key);
        let listed = self.backend.list_consumer_groups(s, tp).await?;
        let mut saved = if listed.iter().any(|name| name == key) {
            self.read_group(t, key, info.partitions).await?
        } else {
            BTreeMap::new()
        };
        saved.extend(
            self.restores
                .snapshot(t, key)
                .0
                .into_iter()
                .filter(|(p, _)| *p < info.partitions),
        );
        let copied = if listed.contains(&copy) {
            Some(self.read_group(t, &copy, info.partitions).await?)
        } else {
            None
        };
        saved.extend(copied.iter().flatten().map(|(p, offset)| (*p, *offset)));
        tracing::warn!(
            "Iggy consumer group {key} on {s}/{tp}: another member owns partitions this gateway coordinates; recreating the group and storing its {} offsets back",
            saved.len()
        );
        // Before the delete: from here on a fetch answers from these values (see `fetch`).
        self.restores.start_reclaim(t, key, saved.clone());
        if !saved.is_empty() && copied.as_ref() != Some(&saved) {
            self.write_copy(t, &copy, copied.is_some(), &saved).await?;
        }
        self.delete_if_present(t, key).await?;
        self.ensure_member(t, key).await?;
        for (p, offset) in saved {
            self.backend
                .store_consumer_offset(s, tp, p, key, self.client, offset)
                .await?;
            self.restores.stored(t, key, p);
        }
        self.delete_if_present(t, &copy).await?;
        self.restores.clear(t, key);
        Ok(())
    }

    /// Writes `saved` into a fresh reclaim copy (CO-RECLAIM-3): a copy created now has this
    /// client as its only member, so every store lands.
    async fn write_copy(
        &self,
        t: &IggyTarget,
        copy: &str,
        exists: bool,
        saved: &BTreeMap<u32, u64>,
    ) -> Result<(), BackendError> {
        let (s, tp) = (&t.stream, &t.topic);
        if exists {
            self.delete_if_present(t, copy).await?;
        }
        match self.backend.create_consumer_group(s, tp, copy).await {
            Err(e) if !is_exists(&e) => return Err(e),
            _ => {}
        }
        self.backend.join_consumer_group(s, tp, copy, self.client).await?;
        for (p, offset) in saved {
            self.backend
                .store_consumer_offset(s, tp, *p, copy, self.client, *offset)
                .await?;
        }
        Ok(())
    }
}
