//! The strings a group member brings and the coordinator keeps: how long each id may be
//! (LIMIT-GROUP-MEMBER-ID-1) and how many bytes one member may bring at once
//! (LIMIT-GROUP-MEMBER-BYTES-1). Sans-io: the handlers call these on the decoded request, before
//! anything of it is copied; what the kept strings cost is counted where they are kept
//! (`state.rs`, `consumer_protocol.rs`).

/// The longest member id, group instance id or rack id accepted, in bytes: Kafka's clients refuse
/// a `group.instance.id` longer than this (`JoinGroupRequest.validateGroupInstanceId`,
/// `MAX_GROUP_INSTANCE_ID_LENGTH`), the member ids they generate are 22-character UUIDs, and
/// rack ids name an availability zone.
pub const MAX_ID_BYTES: usize = 249;

/// Why a member's strings are refused; `error_map::member_refusal_code` gives the Kafka code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberRefusal {
    /// `field` (Kafka's name for it) is `len` bytes, past [`MAX_ID_BYTES`].
    IdTooLong { field: &'static str, len: usize },
    /// The strings one request brings for its member take `len` bytes, past `limit`.
    TooLarge { len: usize, limit: usize },
}

impl MemberRefusal {
    /// The message the refusal carries to the client.
    pub fn message(&self) -> String {
        match self {
            Self::IdTooLong { field, len } => format!(
                "{field} is {len} bytes long; this gateway accepts at most {MAX_ID_BYTES} (LIMIT-GROUP-MEMBER-ID-1)."
            ),
            Self::TooLarge { len, limit } => format!(
                "The member's ids, client id and subscription take {len} bytes; this gateway keeps at most {limit} per member (LIMIT-GROUP-MEMBER-BYTES-1)."
            ),
        }
    }
}

/// LIMIT-GROUP-MEMBER-ID-1: `value`, when present, within [`MAX_ID_BYTES`].
pub fn check_id(field: &'static str, value: Option<&str>) -> Result<(), MemberRefusal> {
    match value {
        Some(v) if v.len() > MAX_ID_BYTES => Err(MemberRefusal::IdTooLong { field, len: v.len() }),
        _ => Ok(()),
    }
}

/// LIMIT-GROUP-MEMBER-BYTES-1: the bytes a request brings for one member, within `limit`.
pub fn check_total(len: usize, limit: usize) -> Result<(), MemberRefusal> {
    if len > limit {
        return Err(MemberRefusal::TooLarge { len, limit });
    }
    Ok(())
}

/// The bytes `names` hold.
pub fn names_bytes<S: AsRef<str>>(names: &[S]) -> usize {
    names.iter().map(|n| n.as_ref().len()).sum()
}
