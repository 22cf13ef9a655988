//! A stored message's user headers, read straight from their wire bytes: the same entries, in
//! the same order, and the same errors as the Iggy SDK's `IggyMessage::user_headers_map`, but
//! borrowed from the message's own buffer into a list the caller reuses, instead of a `BTreeMap`
//! of copies (two allocations and two copies per header on every record a Fetch serves;
//! docs/performance-history.md, rounds 7 and 14).
//!
//! The SDK's reading, which this reproduces (the property test in mapping/tests.rs compares the
//! two on arbitrary bytes):
//! - the bytes are a sequence of (kind `u8`, length `u32` LE, bytes) fields, alternately a name
//!   and a value; a kind of 0, a length outside 1..=255, a field running past the end or an odd
//!   number of fields leaves the message with no headers at all;
//! - a kind outside 1..=15 (name first, then value), or a fixed-size kind whose length is wrong
//!   (name first, then value), is an error, the first in stored order;
//! - entries are ordered by (name kind, name bytes); of two with the same name, the later wins.

use iggy_common::{HeaderKind, IggyError};

/// Iggy's limit on one header field's length, checked by the SDK's structural validation.
const MAX_FIELD_BYTES: usize = 255;
/// A field's kind byte and little-endian `u32` length.
const FIELD_PREFIX_BYTES: usize = 5;

/// One user header of a stored message, borrowed from the message's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredHeader<'m> {
    pub name_kind: u8,
    pub name: &'m [u8],
    pub value_kind: u8,
    pub value: &'m [u8],
}

impl StoredHeader<'_> {
    /// A header the gateway writes: a string name, compared as the SDK compares names.
    pub fn is_named(&self, name: &str) -> bool {
        self.name_kind == HeaderKind::String.as_code() && self.name == name.as_bytes()
    }

    /// What the SDK's map orders and deduplicates headers by.
    fn map_key(&self) -> (u8, &[u8]) {
        (self.name_kind, self.name)
    }
}

/// One field's kind and where its bytes lie, or `None` when the bytes do not hold one whole.
fn field_at(raw: &[u8], at: usize) -> Option<(u8, std::ops::Range<usize>)> {
    let kind = *raw.get(at)?;
    let length_bytes: [u8; 4] = raw.get(at + 1..at + FIELD_PREFIX_BYTES)?.try_into().ok()?;
    let length = u32::from_le_bytes(length_bytes) as usize;
    if kind == 0 || length == 0 || length > MAX_FIELD_BYTES {
        return None;
    }
    let start = at + FIELD_PREFIX_BYTES;
    let end = start.checked_add(length).filter(|&end| end <= raw.len())?;
    Some((kind, start..end))
}

/// How many fields `raw` holds when it is whole fields and an even number of them (the SDK's
/// structural check); `None` otherwise (the SDK then reports no headers).
fn whole_field_count(raw: &[u8]) -> Option<usize> {
    let (mut at, mut count) = (0, 0usize);
    while at < raw.len() {
        let (_, range) = field_at(raw, at)?;
        at = range.end;
        count += 1;
    }
    count.is_multiple_of(2).then_some(count)
}

/// The kind's fixed length, `None` for variable-length kinds, or the SDK's error for a code it
/// does not know.
fn fixed_len(code: u8) -> Result<Option<usize>, IggyError> {
    Ok(match HeaderKind::from_code(code)? {
        HeaderKind::Raw | HeaderKind::String => None,
        HeaderKind::Bool | HeaderKind::Int8 | HeaderKind::Uint8 => Some(1),
        HeaderKind::Int16 | HeaderKind::Uint16 => Some(2),
        HeaderKind::Int32 | HeaderKind::Uint32 | HeaderKind::Float32 => Some(4),
        HeaderKind::Int64 | HeaderKind::Uint64 | HeaderKind::Float64 => Some(8),
        HeaderKind::Int128 | HeaderKind::Uint128 => Some(16),
    })
}

/// The user headers of a stored message into `headers` (cleared first), ordered and
/// deduplicated as the SDK's map would hold them (MAP-READ-NATIVE-1's stored order); none when
/// the bytes are not a sequence of whole name/value fields; the SDK's error for a kind or length
/// it refuses (MAP-READ-MALFORMED-1), with `headers` then left partly filled.
pub(crate) fn stored_headers<'m>(raw: &'m [u8], headers: &mut Vec<StoredHeader<'m>>) -> Result<(), IggyError> {
    headers.clear();
    let Some(field_count) = whole_field_count(raw) else {
        return Ok(());
    };
    headers.reserve(field_count / 2);
    let mut at = 0;
    while let Some((name_kind, name)) = field_at(raw, at) {
        let Some((value_kind, value)) = field_at(raw, name.end) else {
            break; // Not reached: the count above found whole pairs.
        };
        at = value.end;
        let (name_len, value_len) = (fixed_len(name_kind)?, fixed_len(value_kind)?);
        if name_len.is_some_and(|len| len != name.len()) {
            return Err(IggyError::InvalidHeaderKey);
        }
        if value_len.is_some_and(|len| len != value.len()) {
            return Err(IggyError::InvalidHeaderValue);
        }
        headers.push(StoredHeader {
            name_kind,
            name: &raw[name],
            value_kind,
            value: &raw[value],
        });
    }
    if !headers.windows(2).all(|w| w[0].map_key() < w[1].map_key()) {
        // Stable, so among equal names the stored order stays; of a run of equal names the
        // last is kept (swapped into the place of the first, which `dedup_by` keeps).
        headers.sort_by(|a, b| a.map_key().cmp(&b.map_key()));
        headers.dedup_by(|later, kept| {
            let same = later.map_key() == kept.map_key();
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
    }
    Ok(())
}
