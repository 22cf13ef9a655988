//! How a Kafka group's committed offsets are named and encoded in Iggy: the consumer group that
//! holds them (CO-KEY-1), the zero marker (CO-ZERO-1), and the pure mapping between a Kafka
//! commit and what Iggy stores (CO-ENCODE-1, CO-DELETE-1).

use sha2::{Digest, Sha256};

/// Prefix of the Iggy consumer group holding a Kafka group's offsets (CO-KEY-1).
pub const GROUP_PREFIX: &str = "kafka.cg.";
/// Prefix of a zero marker (CO-ZERO-1).
pub const ZERO_MARKER_PREFIX: &str = "kafka.c0.";
/// Prefix of the Iggy consumer group holding a copy of a group's offsets during a reclaim
/// (CO-RECLAIM-3); as long as [`GROUP_PREFIX`], so every group id's copy fits an Iggy name.
pub const RECLAIM_COPY_PREFIX: &str = "kafka.cr.";
/// Iggy's limit on a name.
pub const MAX_IGGY_NAME_LEN: usize = 255;
/// The longest Kafka group id whose key fits an Iggy name (CO-GROUP-ID-1).
pub const MAX_GROUP_ID_LEN: usize = MAX_IGGY_NAME_LEN - GROUP_PREFIX.len();

/// What a Kafka commit becomes in Iggy (pure; CO-ENCODE-1, CO-ZERO-1, CO-DELETE-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredCommit {
    /// Store this value under the key and drop any zero marker.
    Offset(u64),
    /// Create the zero marker and drop the key.
    Zero,
    /// Drop both: the group has no committed offset for the partition.
    Absent,
}

/// The stored form of a Kafka committed offset, or `None` when Kafka's value is invalid.
pub fn stored_for_commit(committed: i64) -> Option<StoredCommit> {
    match committed {
        -1 => Some(StoredCommit::Absent),
        0 => Some(StoredCommit::Zero),
        c if c > 0 => Some(StoredCommit::Offset(c as u64 - 1)),
        _ => None,
    }
}

/// The Kafka committed offset from what Iggy holds; -1 when nothing is committed.
pub fn committed_from(stored: Option<u64>, zero_marker: bool) -> i64 {
    match (zero_marker, stored) {
        (true, _) => 0,
        (false, Some(s)) => s as i64 + 1,
        (false, None) => -1,
    }
}

/// The Iggy consumer group that holds a Kafka group's offsets.
pub fn offsets_group(group: &str) -> String {
    format!("{GROUP_PREFIX}{group}")
}

/// The reclaim copy (CO-RECLAIM-3) of the offsets group `key` (`kafka.cg.<group>`).
pub(super) fn reclaim_copy_of(key: &str) -> String {
    format!("{RECLAIM_COPY_PREFIX}{}", key.strip_prefix(GROUP_PREFIX).unwrap_or(key))
}

/// The zero marker's name; a group id too long to fit is replaced by 128 bits of its SHA-256.
pub fn zero_marker(group: &str, partition: u32) -> String {
    let name = format!("{ZERO_MARKER_PREFIX}{partition}.{group}");
    if name.len() <= MAX_IGGY_NAME_LEN {
        return name;
    }
    let digest = Sha256::digest(group.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{ZERO_MARKER_PREFIX}{partition}.~{hex}")
}

/// Whether the Iggy consumer group `name` holds offsets of the Kafka group `group`: its offsets
/// key (CO-KEY-1), its reclaim copy (CO-RECLAIM-3) or one of its zero markers (CO-ZERO-1).
pub(super) fn holds_group_offsets(name: &str, group: &str) -> bool {
    let is_marker = name
        .strip_prefix(ZERO_MARKER_PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(p, g)| {
            p.parse::<u32>()
                .is_ok_and(|p| zero_marker(group, p) == format!("{ZERO_MARKER_PREFIX}{p}.{g}"))
        });
    let key = offsets_group(group);
    name == key || name == reclaim_copy_of(&key) || is_marker
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn co_encode_1_co_zero_1_co_delete_1_commit_encoding() {
        assert_eq!(stored_for_commit(-1), Some(StoredCommit::Absent));
        assert_eq!(stored_for_commit(0), Some(StoredCommit::Zero));
        assert_eq!(stored_for_commit(1), Some(StoredCommit::Offset(0)));
        assert_eq!(stored_for_commit(-2), None);
        assert_eq!(committed_from(None, false), -1);
        assert_eq!(committed_from(None, true), 0);
        assert_eq!(committed_from(Some(4), true), 0, "a marker wins over a key");
    }

    #[test]
    fn co_reclaim_3_a_groups_reclaim_copy_is_deleted_with_its_offsets() {
        for held in ["kafka.cg.orders", "kafka.cr.orders", "kafka.c0.7.orders"] {
            assert!(holds_group_offsets(held, "orders"), "{held}");
        }
        for other in ["kafka.cg.orders2", "kafka.cr.order", "kafka.c0.7.orders2", "orders"] {
            assert!(!holds_group_offsets(other, "orders"), "{other}");
        }
    }

    #[test]
    fn co_zero_1_marker_names_fit_iggy_names() {
        assert_eq!(zero_marker("orders", 3), "kafka.c0.3.orders");
        let long = "g".repeat(MAX_GROUP_ID_LEN);
        let marker = zero_marker(&long, 4095);
        assert!(marker.len() <= MAX_IGGY_NAME_LEN);
        assert_ne!(marker, zero_marker(&"h".repeat(MAX_GROUP_ID_LEN), 4095));
        assert_eq!(offsets_group(&long).len(), MAX_IGGY_NAME_LEN);
        assert_eq!(reclaim_copy_of(&offsets_group(&long)).len(), MAX_IGGY_NAME_LEN);
    }

    proptest! {
        #[test]
        fn co_encode_1_every_valid_commit_round_trips(c in -1i64..i64::MAX) {
            let back = match stored_for_commit(c).unwrap() {
                StoredCommit::Offset(s) => committed_from(Some(s), false),
                StoredCommit::Zero => committed_from(None, true),
                StoredCommit::Absent => committed_from(None, false),
            };
            prop_assert_eq!(back, c);
        }
    }
}
