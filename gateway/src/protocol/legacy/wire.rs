//! The primitives of the classic (non-flexible) Kafka encoding that the old versions use:
//! big-endian integers, INT16-length strings, INT32-count arrays. Sans-io: reads from a
//! `ByteBuf`, writes into a `Vec<u8>`.

use bytes::{Buf, BufMut};
use kafka_protocol::protocol::buf::ByteBuf;
use kafka_protocol::protocol::StrBytes;

/// Why an old-version body does not decode or encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LegacyError {
    #[error("{what}: {needed} bytes needed, {left} left")]
    Short {
        what: &'static str,
        needed: usize,
        left: usize,
    },
    #[error("{what}: negative length {length}")]
    NegativeLength { what: &'static str, length: i32 },
    #[error("{what}: count {count} exceeds the {left} bytes left")]
    CountPastEnd {
        what: &'static str,
        count: i32,
        left: usize,
    },
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{what}: {length} bytes do not fit an INT16-length string")]
    StringTooLong { what: &'static str, length: usize },
    #[error("{what}: {count} elements do not fit an INT32 count")]
    ArrayTooLong { what: &'static str, count: usize },
    #[error("{what} is null where the old version has no null")]
    Null { what: &'static str },
    #[error("{api} v{version} is not an old version this codec handles")]
    Version { api: &'static str, version: i16 },
}

fn need<B: Buf>(buf: &B, what: &'static str, needed: usize) -> Result<(), LegacyError> {
    if buf.remaining() < needed {
        return Err(LegacyError::Short {
            what,
            needed,
            left: buf.remaining(),
        });
    }
    Ok(())
}

pub fn read_i8<B: Buf>(buf: &mut B, what: &'static str) -> Result<i8, LegacyError> {
    need(buf, what, 1)?;
    Ok(buf.get_i8())
}

pub fn read_bool<B: Buf>(buf: &mut B, what: &'static str) -> Result<bool, LegacyError> {
    Ok(read_i8(buf, what)? != 0)
}

pub fn read_i16<B: Buf>(buf: &mut B, what: &'static str) -> Result<i16, LegacyError> {
    need(buf, what, 2)?;
    Ok(buf.get_i16())
}

pub fn read_i32<B: Buf>(buf: &mut B, what: &'static str) -> Result<i32, LegacyError> {
    need(buf, what, 4)?;
    Ok(buf.get_i32())
}

pub fn read_i64<B: Buf>(buf: &mut B, what: &'static str) -> Result<i64, LegacyError> {
    need(buf, what, 8)?;
    Ok(buf.get_i64())
}

/// A NULLABLE_STRING: INT16 length, -1 for null.
pub fn read_nullable_string<B: ByteBuf>(buf: &mut B, what: &'static str) -> Result<Option<StrBytes>, LegacyError> {
    let length = read_i16(buf, what)?;
    if length == -1 {
        return Ok(None);
    }
    if length < 0 {
        return Err(LegacyError::NegativeLength {
            what,
            length: length.into(),
        });
    }
    need(buf, what, length as usize)?;
    let bytes = buf.get_bytes(length as usize);
    StrBytes::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LegacyError::NotUtf8 { what })
}

/// A STRING: as NULLABLE_STRING, without null.
pub fn read_string<B: ByteBuf>(buf: &mut B, what: &'static str) -> Result<StrBytes, LegacyError> {
    read_nullable_string(buf, what)?.ok_or(LegacyError::Null { what })
}

/// An ARRAY's INT32 count, -1 (null) as `None`. A count no remaining bytes could hold is refused
/// before anything is allocated for it: every element is at least one byte.
pub fn read_nullable_count<B: Buf>(buf: &mut B, what: &'static str) -> Result<Option<usize>, LegacyError> {
    let count = read_i32(buf, what)?;
    if count == -1 {
        return Ok(None);
    }
    if count < 0 {
        return Err(LegacyError::NegativeLength { what, length: count });
    }
    if count as usize > buf.remaining() {
        return Err(LegacyError::CountPastEnd {
            what,
            count,
            left: buf.remaining(),
        });
    }
    Ok(Some(count as usize))
}

/// A non-nullable ARRAY's count.
pub fn read_count<B: Buf>(buf: &mut B, what: &'static str) -> Result<usize, LegacyError> {
    read_nullable_count(buf, what)?.ok_or(LegacyError::Null { what })
}

/// A non-nullable ARRAY whose elements `element` reads.
pub fn read_array<B: ByteBuf, T>(
    buf: &mut B,
    what: &'static str,
    mut element: impl FnMut(&mut B) -> Result<T, LegacyError>,
) -> Result<Vec<T>, LegacyError> {
    let count = read_count(buf, what)?;
    (0..count).map(|_| element(buf)).collect()
}

pub fn write_i8(out: &mut Vec<u8>, value: i8) {
    out.put_i8(value);
}

pub fn write_bool(out: &mut Vec<u8>, value: bool) {
    out.put_i8(i8::from(value));
}

pub fn write_i16(out: &mut Vec<u8>, value: i16) {
    out.put_i16(value);
}

pub fn write_i32(out: &mut Vec<u8>, value: i32) {
    out.put_i32(value);
}

pub fn write_i64(out: &mut Vec<u8>, value: i64) {
    out.put_i64(value);
}

pub fn write_nullable_string(out: &mut Vec<u8>, what: &'static str, value: Option<&str>) -> Result<(), LegacyError> {
    let Some(value) = value else {
        out.put_i16(-1);
        return Ok(());
    };
    let length = i16::try_from(value.len()).map_err(|_| LegacyError::StringTooLong {
        what,
        length: value.len(),
    })?;
    out.put_i16(length);
    out.put_slice(value.as_bytes());
    Ok(())
}

pub fn write_string(out: &mut Vec<u8>, what: &'static str, value: &str) -> Result<(), LegacyError> {
    write_nullable_string(out, what, Some(value))
}

/// An ARRAY's INT32 count; `None` writes null.
pub fn write_nullable_count(out: &mut Vec<u8>, what: &'static str, count: Option<usize>) -> Result<(), LegacyError> {
    let Some(count) = count else {
        out.put_i32(-1);
        return Ok(());
    };
    let count = i32::try_from(count).map_err(|_| LegacyError::ArrayTooLong { what, count })?;
    out.put_i32(count);
    Ok(())
}

/// A non-nullable ARRAY whose elements `element` writes.
pub fn write_array<T>(
    out: &mut Vec<u8>,
    what: &'static str,
    items: &[T],
    mut element: impl FnMut(&mut Vec<u8>, &T) -> Result<(), LegacyError>,
) -> Result<(), LegacyError> {
    write_nullable_count(out, what, Some(items.len()))?;
    items.iter().try_for_each(|item| element(out, item))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn strings_arrays_and_their_nulls_read_back() {
        let mut out = Vec::new();
        write_string(&mut out, "s", "ab").unwrap();
        write_nullable_string(&mut out, "n", None).unwrap();
        write_nullable_count(&mut out, "a", None).unwrap();
        assert_eq!(out, [0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        let mut buf = Bytes::from(out);
        assert_eq!(read_string(&mut buf, "s").unwrap().as_str(), "ab");
        assert_eq!(read_nullable_string(&mut buf, "n").unwrap(), None);
        assert_eq!(read_nullable_count(&mut buf, "a").unwrap(), None);
    }

    #[test]
    fn a_count_past_the_end_is_refused_before_allocating() {
        let mut buf = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0]);
        assert!(matches!(
            read_count(&mut buf, "topics"),
            Err(LegacyError::CountPastEnd { count: i32::MAX, .. })
        ));
    }

    #[test]
    fn a_short_or_non_utf8_string_is_an_error() {
        let mut short = Bytes::from_static(&[0, 5, b'a']);
        assert!(matches!(
            read_string(&mut short, "name"),
            Err(LegacyError::Short { .. })
        ));
        let mut bad = Bytes::from_static(&[0, 1, 0xff]);
        assert_eq!(
            read_string(&mut bad, "name"),
            Err(LegacyError::NotUtf8 { what: "name" })
        );
        let mut null = Bytes::from_static(&[0xff, 0xff]);
        assert_eq!(read_string(&mut null, "name"), Err(LegacyError::Null { what: "name" }));
    }
}
