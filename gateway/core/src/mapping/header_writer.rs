//! A mapped record's user headers, written straight into the Iggy SDK's wire form: the bytes the
//! SDK's `IggyMessage` builder makes of the same `BTreeMap<HeaderKey, HeaderValue>`, in one buffer
//! sized up front. The builder's way costs a copy of every name and value, a map node per header
//! and a serialisation afterwards, on every record a Produce maps (docs/performance-history.md, round 12).
//!
//! The SDK's form, which this reproduces (the property test in mapping/tests.rs compares the two
//! on arbitrary records):
//! - per entry: the name's kind `u8`, its length `u32` LE and its bytes, then the same for the
//!   value;
//! - entries in map order, (name kind, name bytes); every name written here is a string, so that
//!   is the order of the names' bytes.

use bytes::{BufMut, Bytes, BytesMut};
use iggy_common::HeaderKind;

/// A field's kind byte and little-endian `u32` length.
const FIELD_PREFIX_BYTES: usize = 5;

/// One header to write: a string name, `prefix` followed by `suffix`, and a raw value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutgoingHeader<'a> {
    pub prefix: &'static str,
    pub suffix: &'a [u8],
    pub value: &'a [u8],
}

impl OutgoingHeader<'_> {
    fn name(&self) -> impl Iterator<Item = &u8> {
        self.prefix.as_bytes().iter().chain(self.suffix)
    }

    fn name_len(&self) -> usize {
        self.prefix.len() + self.suffix.len()
    }

    /// Bytes of this entry on the wire.
    pub fn wire_len(&self) -> usize {
        2 * FIELD_PREFIX_BYTES + self.name_len() + self.value.len()
    }
}

/// `headers` in the SDK's wire form, in the order of its sorted map (MAP-HEADER-1). The caller has checked what the SDK's builder would (names
/// unique, every name and value 1..=255 bytes, the whole within Iggy's header budget): classify()
/// does, before a record is mapped.
pub(crate) fn write_headers(headers: &mut [OutgoingHeader<'_>]) -> Bytes {
    headers.sort_unstable_by(|a, b| a.name().cmp(b.name()));
    let mut wire = BytesMut::with_capacity(headers.iter().map(OutgoingHeader::wire_len).sum());
    for header in headers.iter() {
        wire.put_u8(HeaderKind::String.as_code());
        wire.put_u32_le(header.name_len() as u32);
        wire.put_slice(header.prefix.as_bytes());
        wire.put_slice(header.suffix);
        wire.put_u8(HeaderKind::Raw.as_code());
        wire.put_u32_le(header.value.len() as u32);
        wire.put_slice(header.value);
    }
    wire.freeze()
}
