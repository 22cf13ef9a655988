//! The envelope: the payload layout that stores a whole Kafka record (key, value, headers in
//! order) for the record shapes Iggy cannot hold natively (ENV-LAYOUT-1).
//!
//! All integers are little-endian:
//!
//! ```text
//! u8  flags          bit 0 key present, bit 1 value present
//! u32 key_len        0 when the key is absent
//! ..  key
//! u32 value_len      0 when the value is absent
//! ..  value
//! u32 header_count
//!     u32 name_len, name, u8 value_present, u32 value_len (0 when absent), value
//! ```
//!
//! ```
//! use bytes::Bytes;
//! use kig_core::envelope::decode_envelope;
//!
//! // Empty key (present, zero length), value "v", one header "h" with a null value.
//! let payload = Bytes::from_static(&[
//!     0b11, 0, 0, 0, 0, 1, 0, 0, 0, b'v', 1, 0, 0, 0, 1, 0, 0, 0, b'h', 0, 0, 0, 0, 0,
//! ]);
//! let record = decode_envelope(&payload).unwrap();
//! assert_eq!(record.key.as_deref(), Some(&b""[..]));
//! assert_eq!(record.value.as_deref(), Some(&b"v"[..]));
//! assert_eq!(record.headers[0].value, None);
//! ```

use crate::batch::{HeaderRef, RecordHeader};
use crate::error::DecodeError;
use bytes::{BufMut, Bytes, BytesMut};

/// The envelope format version this core writes and reads (ENV-VERSION-1).
pub const ENVELOPE_VERSION: u8 = 1;
/// Fixed bytes of an envelope: flags, key length, value length, header count.
pub const ENVELOPE_FIXED_LEN: usize = 13;
/// Fixed bytes per header: name length, value-present flag, value length.
pub const ENVELOPE_HEADER_FIXED_LEN: usize = 9;

const KEY_PRESENT: u8 = 0b01;
const VALUE_PRESENT: u8 = 0b10;

/// The parts of a Kafka record the envelope stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// The encoded size of an envelope of these parts, computed without encoding it.
pub fn envelope_len(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[RecordHeader]) -> usize {
    ENVELOPE_FIXED_LEN
        + key.map_or(0, <[u8]>::len)
        + value.map_or(0, <[u8]>::len)
        + headers
            .iter()
            .map(|h| ENVELOPE_HEADER_FIXED_LEN + h.name.len() + h.value.as_ref().map_or(0, Bytes::len))
            .sum::<usize>()
}

fn put_len(out: &mut BytesMut, len: usize) {
    // Lengths come from a decoded Kafka record, which bounds each part to i32::MAX.
    out.put_u32_le(u32::try_from(len).expect("envelope part longer than u32::MAX"));
}

/// Encodes the envelope payload (ENV-LAYOUT-1).
pub fn encode_envelope(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[RecordHeader]) -> Bytes {
    let mut out = BytesMut::with_capacity(envelope_len(key, value, headers));
    let flags = if key.is_some() { KEY_PRESENT } else { 0 } | if value.is_some() { VALUE_PRESENT } else { 0 };
    out.put_u8(flags);
    put_len(&mut out, key.map_or(0, <[u8]>::len));
    out.put_slice(key.unwrap_or_default());
    put_len(&mut out, value.map_or(0, <[u8]>::len));
    out.put_slice(value.unwrap_or_default());
    put_len(&mut out, headers.len());
    for header in headers {
        put_len(&mut out, header.name.len());
        out.put_slice(&header.name);
        out.put_u8(u8::from(header.value.is_some()));
        put_len(&mut out, header.value.as_ref().map_or(0, Bytes::len));
        out.put_slice(header.value.as_deref().unwrap_or_default());
    }
    out.freeze()
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn need(&self, what: &'static str, n: usize) -> Result<(), DecodeError> {
        let available = self.input.len() - self.pos;
        if n > available {
            return Err(DecodeError::Truncated {
                what,
                needed: n,
                available,
            });
        }
        Ok(())
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.need(what, 1)?;
        self.pos += 1;
        Ok(self.input[self.pos - 1])
    }

    fn u32(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        self.need(what, 4)?;
        let bytes: [u8; 4] = self.input[self.pos..self.pos + 4].try_into().expect("4 bytes");
        self.pos += 4;
        Ok(u32::from_le_bytes(bytes) as usize)
    }

    fn bytes(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        self.need(what, n)?;
        self.pos += n;
        Ok(&self.input[self.pos - n..self.pos])
    }

    /// A length-prefixed part whose presence is given separately; an absent part must have
    /// length 0 so that each envelope has exactly one encoding.
    fn part(&mut self, what: &'static str, present: bool) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.u32(what)?;
        if !present {
            if len != 0 {
                return Err(DecodeError::Invalid {
                    what,
                    value: len as i64,
                });
            }
            return Ok(None);
        }
        self.bytes(what, len).map(Some)
    }
}

/// An envelope's key and value, borrowed from its payload; its headers go to the caller's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnvelopeParts<'p> {
    pub key: Option<&'p [u8]>,
    pub value: Option<&'p [u8]>,
}

/// Decodes an envelope payload, its headers into `headers` (cleared first), every part borrowed
/// from `payload`. Every length is checked against the bytes present before it is used, and the
/// header count against the bytes that could hold it before `headers` grows for it.
pub(crate) fn decode_envelope_into<'p>(
    payload: &'p [u8],
    headers: &mut Vec<HeaderRef<'p>>,
) -> Result<EnvelopeParts<'p>, DecodeError> {
    headers.clear();
    let mut r = Reader { input: payload, pos: 0 };
    let flags = r.u8("envelope flags")?;
    if flags & !(KEY_PRESENT | VALUE_PRESENT) != 0 {
        return Err(DecodeError::Invalid {
            what: "envelope flags",
            value: i64::from(flags),
        });
    }
    let key = r.part("envelope key", flags & KEY_PRESENT != 0)?;
    let value = r.part("envelope value", flags & VALUE_PRESENT != 0)?;
    let count = r.u32("envelope header count")?;
    let room = (payload.len() - r.pos) / ENVELOPE_HEADER_FIXED_LEN;
    if count > room {
        return Err(DecodeError::Truncated {
            what: "envelope headers",
            needed: count * ENVELOPE_HEADER_FIXED_LEN,
            available: payload.len() - r.pos,
        });
    }
    headers.reserve(count);
    for _ in 0..count {
        let name_len = r.u32("envelope header name")?;
        let name = r.bytes("envelope header name", name_len)?;
        let present = match r.u8("envelope header value flag")? {
            0 => false,
            1 => true,
            other => {
                return Err(DecodeError::Invalid {
                    what: "envelope header value flag",
                    value: i64::from(other),
                })
            }
        };
        let value = r.part("envelope header value", present)?;
        headers.push(HeaderRef { name, value });
    }
    if r.pos != payload.len() {
        return Err(DecodeError::TrailingBytes {
            trailing: payload.len() - r.pos,
        });
    }
    Ok(EnvelopeParts { key, value })
}

/// Decodes an envelope payload into owned parts, each a slice of `payload` (nothing copied).
pub fn decode_envelope(payload: &Bytes) -> Result<EnvelopeRecord, DecodeError> {
    let mut headers = Vec::new();
    let parts = decode_envelope_into(payload, &mut headers)?;
    let share = |part: &[u8]| payload.slice_ref(part);
    Ok(EnvelopeRecord {
        key: parts.key.map(share),
        value: parts.value.map(share),
        headers: headers
            .iter()
            .map(|h| RecordHeader {
                name: share(h.name),
                value: h.value.map(share),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn env_layout_1_literal_bytes_of_a_small_envelope() {
        let headers = vec![RecordHeader {
            name: Bytes::from_static(b"h"),
            value: Some(Bytes::from_static(b"xy")),
        }];
        let bytes = encode_envelope(Some(b"k"), None, &headers);
        let expected: &[u8] = &[
            0b01, 1, 0, 0, 0, b'k', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, b'h', 1, 2, 0, 0, 0, b'x', b'y',
        ];
        assert_eq!(&bytes[..], expected);
        assert_eq!(bytes.len(), envelope_len(Some(b"k"), None, &headers));
        assert_eq!(bytes.len(), ENVELOPE_FIXED_LEN + 1 + ENVELOPE_HEADER_FIXED_LEN + 1 + 2);
    }

    #[test]
    fn env_layout_1_absent_part_with_a_length_is_invalid() {
        let bytes = [0u8, 1, 0, 0, 0, b'k', 0, 0, 0, 0, 0, 0, 0, 0];
        let err = decode_envelope(&Bytes::copy_from_slice(&bytes)).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Invalid {
                what: "envelope key",
                value: 1
            }
        );
    }

    #[test]
    fn env_layout_1_huge_header_count_is_refused_before_allocating() {
        let bytes = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        let err = decode_envelope(&Bytes::copy_from_slice(&bytes)).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Truncated {
                what: "envelope headers",
                ..
            }
        ));
    }

    fn arb_header() -> impl Strategy<Value = RecordHeader> {
        (
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
        )
            .prop_map(|(n, v)| RecordHeader {
                name: n.into(),
                value: v.map(Bytes::from),
            })
    }

    proptest! {
        #[test]
        fn env_layout_1_decode_of_encode_is_identity(
            key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..600)),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..600)),
            headers in proptest::collection::vec(arb_header(), 0..6),
        ) {
            let bytes = encode_envelope(key.as_deref(), value.as_deref(), &headers);
            prop_assert_eq!(bytes.len(), envelope_len(key.as_deref(), value.as_deref(), &headers));
            let decoded = decode_envelope(&bytes).unwrap();
            prop_assert_eq!(decoded.key.as_deref(), key.as_deref());
            prop_assert_eq!(decoded.value.as_deref(), value.as_deref());
            prop_assert_eq!(decoded.headers, headers);
        }

        #[test]
        fn env_layout_1_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_envelope(&Bytes::from(bytes));
        }
    }
}
