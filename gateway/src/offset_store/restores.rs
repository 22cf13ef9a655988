//! What this gateway remembers of reclaims (CO-RECLAIM-2, CO-RECLAIM-3): the offsets a reclaim
//! read and has not stored back yet, and whether an offsets group has a reclaim copy in Iggy.

use crate::config::IggyTarget;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// The stored offsets (Iggy's values, CO-ENCODE-1) a reclaim read before deleting an offsets
/// group, per (stream, topic, Iggy group) and partition, kept until each is stored back
/// (CO-RECLAIM-2). A value is only ever replaced by the same partition's value read again, so
/// while a partition is listed here its value is the group's committed offset, whatever the
/// server holds.
#[derive(Default)]
pub struct PendingRestores {
    groups: std::sync::Mutex<HashMap<RestoreKey, Pending>>,
    /// Counts reclaims started, to stamp [`Pending::reclaim_started`].
    pub(super) reclaims_started: AtomicU64,
    /// [`Self::reclaims_started`] when entries were last forgotten (changed under the table's
    /// lock): the stamp of every group without an entry. It moves only when entries go, so
    /// another group's reclaim never changes the stamp of a group this gateway has no entry for.
    forgotten_at: AtomicU64,
    /// Held by whoever deletes, recreates or refills an offsets group, so a store-back never
    /// lands after a newer write or a DeleteGroups.
    pub(super) writing: tokio::sync::Mutex<()>,
}

/// One offsets group's pending values. The entry outlives its values, so a fetch can tell a
/// reclaim started under its read; entries with nothing to restore are forgotten when the table
/// is full (see [`PendingRestores::entry`]).
#[derive(Default)]
struct Pending {
    offsets: BTreeMap<u32, u64>,
    /// The count of reclaims started when this group's latest reclaim started; when none has
    /// since the entry was made, the stamp the group had without one
    /// ([`PendingRestores::forgotten_at`]). Forgetting the entry moves that stamp up to the
    /// count, so it cannot hide a reclaim from a fetch (see [`PendingRestores::snapshot`]).
    reclaim_started: u64,
    copy: CopySeen,
}

/// What this gateway last saw of a group's reclaim copy in Iggy (CO-RECLAIM-3). A copy left by
/// a gateway that died inside a reclaim must be stored back before this gateway writes the
/// group; an entry not seen yet is looked for once.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum CopySeen {
    #[default]
    NotLookedFor,
    Absent,
    Present,
}

/// (stream, topic, Iggy group).
type RestoreKey = (String, String, String);

fn restore_key(t: &IggyTarget, key: &str) -> RestoreKey {
    (t.stream.clone(), t.topic.clone(), key.to_string())
}

/// Groups remembered at most (LIMIT-OFFSET-HOLDERS-1): each entry is a few hundred bytes. When
/// full, entries with nothing to restore go; forgetting one costs one group listing on the
/// group's next commit.
const MAX_REMEMBERED_GROUPS: usize = super::MAX_OFFSET_HOLDERS;

impl PendingRestores {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RestoreKey, Pending>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The group's entry, made room for when the table is full.
    fn entry<'g>(&self, groups: &'g mut HashMap<RestoreKey, Pending>, key: RestoreKey) -> &'g mut Pending {
        if !groups.contains_key(&key) && groups.len() >= MAX_REMEMBERED_GROUPS {
            groups.retain(|_, p| !p.offsets.is_empty() || p.copy == CopySeen::Present);
            let started = self.reclaims_started.load(Ordering::SeqCst);
            self.forgotten_at.store(started, Ordering::SeqCst);
        }
        groups.entry(key).or_insert_with(|| Pending {
            reclaim_started: self.forgotten_at.load(Ordering::SeqCst),
            ..Pending::default()
        })
    }

    /// The pending values and the group's reclaim stamp. A group with no entry (never seen, or
    /// forgotten) answers [`Self::forgotten_at`]: at least any stamp a forgotten entry had, so a
    /// reclaim of the group that started between two snapshots always changes its stamp, while
    /// other groups' reclaims leave it as it was.
    pub(super) fn snapshot(&self, t: &IggyTarget, key: &str) -> (BTreeMap<u32, u64>, u64) {
        let groups = self.lock();
        match groups.get(&restore_key(t, key)) {
            Some(p) => (p.offsets.clone(), p.reclaim_started),
            None => (BTreeMap::new(), self.forgotten_at.load(Ordering::SeqCst)),
        }
    }

    pub(super) fn is_pending(&self, t: &IggyTarget, key: &str) -> bool {
        self.lock()
            .get(&restore_key(t, key))
            .is_some_and(|p| !p.offsets.is_empty())
    }

    /// Whether a write of the group must first store something back: values pending here, or a
    /// reclaim copy seen in Iggy (CO-RECLAIM-3). `None`: nobody has looked for a copy yet.
    pub(super) fn needs_restore(&self, t: &IggyTarget, key: &str) -> Option<bool> {
        let groups = self.lock();
        let p = groups.get(&restore_key(t, key))?;
        match p.copy {
            _ if !p.offsets.is_empty() => Some(true),
            CopySeen::NotLookedFor => None,
            CopySeen::Absent => Some(false),
            CopySeen::Present => Some(true),
        }
    }

    /// A listing of the topic's groups showed whether the group has a reclaim copy.
    pub(super) fn copy_seen(&self, t: &IggyTarget, key: &str, present: bool) {
        let mut groups = self.lock();
        self.entry(&mut groups, restore_key(t, key)).copy = if present { CopySeen::Present } else { CopySeen::Absent };
    }

    /// A reclaim starts: from now on `saved` are the group's values until stored back.
    pub(super) fn start_reclaim(&self, t: &IggyTarget, key: &str, saved: BTreeMap<u32, u64>) {
        // Counted under the lock, so a snapshot sees the new count and the new stamp together.
        let mut groups = self.lock();
        let stamp = self.reclaims_started.fetch_add(1, Ordering::SeqCst) + 1;
        let pending = self.entry(&mut groups, restore_key(t, key));
        pending.offsets = saved;
        pending.reclaim_started = stamp;
    }

    /// Partition `partition`'s value is on the server now.
    pub(super) fn stored(&self, t: &IggyTarget, key: &str, partition: u32) {
        if let Some(pending) = self.lock().get_mut(&restore_key(t, key)) {
            pending.offsets.remove(&partition);
        }
    }

    /// Nothing is left to restore: no value pending here and no reclaim copy in Iggy.
    pub(super) fn clear(&self, t: &IggyTarget, key: &str) {
        let mut groups = self.lock();
        let pending = self.entry(&mut groups, restore_key(t, key));
        pending.offsets.clear();
        pending.copy = CopySeen::Absent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> IggyTarget {
        IggyTarget {
            stream: "s".into(),
            topic: "t".into(),
        }
    }

    #[test]
    fn co_reclaim_3_a_group_not_looked_at_needs_a_look_for_its_copy() {
        let restores = PendingRestores::default();
        let t = target();
        assert_eq!(restores.needs_restore(&t, "kafka.cg.g"), None);
        restores.copy_seen(&t, "kafka.cg.g", false);
        assert_eq!(restores.needs_restore(&t, "kafka.cg.g"), Some(false));
        restores.copy_seen(&t, "kafka.cg.g", true);
        assert_eq!(restores.needs_restore(&t, "kafka.cg.g"), Some(true));
        restores.clear(&t, "kafka.cg.g");
        assert_eq!(restores.needs_restore(&t, "kafka.cg.g"), Some(false));
        restores.start_reclaim(&t, "kafka.cg.g", BTreeMap::from([(0, 4)]));
        assert_eq!(
            restores.needs_restore(&t, "kafka.cg.g"),
            Some(true),
            "a value is pending"
        );
    }

    /// Fills the table past its bound with groups that have nothing to restore, so every such
    /// entry, `key`'s among them, is forgotten.
    fn forget_idle_entries(restores: &PendingRestores, t: &IggyTarget) {
        for i in 0..=MAX_REMEMBERED_GROUPS {
            restores.copy_seen(t, &format!("kafka.cg.other{i}"), false);
        }
    }

    /// A fetch compares the stamps before and after its read: a reclaim that started, ended and
    /// then had its entry forgotten under the read must still change the stamp, or the fetch
    /// would answer a read the reclaim's delete cut short.
    #[test]
    fn co_reclaim_2_a_reclaim_under_a_read_changes_the_stamp_though_its_entry_is_forgotten() {
        let t = target();
        for seen_before in [false, true] {
            let restores = PendingRestores::default();
            restores.start_reclaim(&t, "kafka.cg.earlier", BTreeMap::from([(0, 1)]));
            if seen_before {
                restores.copy_seen(&t, "kafka.cg.g", false);
            }
            let (_, before) = restores.snapshot(&t, "kafka.cg.g");
            restores.start_reclaim(&t, "kafka.cg.g", BTreeMap::from([(0, 3)]));
            restores.stored(&t, "kafka.cg.g", 0);
            restores.clear(&t, "kafka.cg.g");
            forget_idle_entries(&restores, &t);
            assert!(
                !restores.lock().contains_key(&restore_key(&t, "kafka.cg.g")),
                "forgotten"
            );
            let (_, after) = restores.snapshot(&t, "kafka.cg.g");
            assert_ne!(before, after, "seen before the read: {seen_before}");
        }
    }

    /// c40588b's stamps: a group without an entry answered the live count of reclaims started,
    /// so any group's reclaim under an unseen group's read made that fetch read again, eight
    /// times at most and then an error, as after a gateway restart, when no group has an entry
    /// and reclaims are most frequent.
    #[test]
    fn co_reclaim_2_another_groups_reclaim_leaves_an_unseen_groups_stamp_as_it_was() {
        let restores = PendingRestores::default();
        let t = target();
        let (_, before) = restores.snapshot(&t, "kafka.cg.unseen");
        restores.start_reclaim(&t, "kafka.cg.other", BTreeMap::from([(0, 3)]));
        restores.stored(&t, "kafka.cg.other", 0);
        restores.clear(&t, "kafka.cg.other");
        assert_eq!(restores.snapshot(&t, "kafka.cg.unseen").1, before);
        restores.copy_seen(&t, "kafka.cg.unseen", false);
        assert_eq!(
            restores.snapshot(&t, "kafka.cg.unseen").1,
            before,
            "an entry made without a reclaim keeps the stamp"
        );
    }

    #[test]
    fn co_reclaim_2_forgetting_an_idle_entry_alone_leaves_the_stamp_as_it_was() {
        let restores = PendingRestores::default();
        let t = target();
        restores.start_reclaim(&t, "kafka.cg.g", BTreeMap::from([(0, 3)]));
        restores.clear(&t, "kafka.cg.g");
        let (_, before) = restores.snapshot(&t, "kafka.cg.g");
        forget_idle_entries(&restores, &t);
        assert_eq!(
            restores.snapshot(&t, "kafka.cg.g").1,
            before,
            "no reclaim started: no repeat"
        );
    }

    #[test]
    fn co_reclaim_3_the_groups_remembered_are_bounded_and_keep_what_must_be_restored() {
        let restores = PendingRestores::default();
        let t = target();
        restores.start_reclaim(&t, "kafka.cg.pending", BTreeMap::from([(1, 9)]));
        restores.copy_seen(&t, "kafka.cg.copied", true);
        for i in 0..MAX_REMEMBERED_GROUPS + 10 {
            restores.copy_seen(&t, &format!("kafka.cg.g{i}"), false);
        }
        assert!(restores.lock().len() <= MAX_REMEMBERED_GROUPS);
        assert_eq!(restores.snapshot(&t, "kafka.cg.pending").0, BTreeMap::from([(1, 9)]));
        assert_eq!(restores.needs_restore(&t, "kafka.cg.copied"), Some(true));
    }
}
