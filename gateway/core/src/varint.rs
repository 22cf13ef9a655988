//! Zigzag varints and varlongs of the Kafka record format (protobuf encoding), bounded so a
//! malformed input ends in an error, never a panic or an over-long read.

use crate::error::DecodeError;
use bytes::BufMut;

/// Reads an unsigned LEB128 value of at most `max_bytes` bytes from `input[*pos..]`.
fn read_unsigned(input: &[u8], pos: &mut usize, max_bytes: usize, what: &'static str) -> Result<u64, DecodeError> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let Some(&byte) = input.get(*pos) else {
            return Err(DecodeError::Truncated {
                what,
                needed: 1,
                available: 0,
            });
        };
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::VarintOverflow(what))
}

/// Reads a zigzag-encoded 32-bit varint.
pub fn read_varint(input: &[u8], pos: &mut usize, what: &'static str) -> Result<i32, DecodeError> {
    let raw = read_unsigned(input, pos, 5, what)?;
    if raw > u64::from(u32::MAX) {
        return Err(DecodeError::VarintOverflow(what));
    }
    let raw = raw as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag-encoded 64-bit varlong.
pub fn read_varlong(input: &[u8], pos: &mut usize, what: &'static str) -> Result<i64, DecodeError> {
    let raw = read_unsigned(input, pos, 10, what)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

fn write_unsigned(out: &mut impl BufMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Writes a zigzag-encoded 32-bit varint.
pub fn write_varint(out: &mut impl BufMut, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Writes a zigzag-encoded 64-bit varlong.
pub fn write_varlong(out: &mut impl BufMut, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Bytes `write_varint(value)` produces.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Bytes `write_varlong(value)` produces.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_literal_bytes() {
        // -1 is zigzag 1; 150 is zigzag 300 = 0xac 0x02.
        let mut pos = 0;
        assert_eq!(read_varint(&[0x01], &mut pos, "t").unwrap(), -1);
        pos = 0;
        assert_eq!(read_varint(&[0xac, 0x02], &mut pos, "t").unwrap(), 150);
        assert_eq!(pos, 2);
    }

    #[test]
    fn overlong_varint_is_an_error() {
        let mut pos = 0;
        let err = read_varint(&[0xff; 6], &mut pos, "len").unwrap_err();
        assert_eq!(err, DecodeError::VarintOverflow("len"));
    }

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<i32>()) {
            let mut buf = Vec::new();
            write_varint(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_len(v));
            let mut pos = 0;
            prop_assert_eq!(read_varint(&buf, &mut pos, "v").unwrap(), v);
            prop_assert_eq!(pos, buf.len());
        }

        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let mut buf = Vec::new();
            write_varlong(&mut buf, v);
            prop_assert_eq!(buf.len(), varlong_len(v));
            let mut pos = 0;
            prop_assert_eq!(read_varlong(&buf, &mut pos, "v").unwrap(), v);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let mut pos = 0;
            let _ = read_varlong(&bytes, &mut pos, "v");
            let mut pos = 0;
            let _ = read_varint(&bytes, &mut pos, "v");
        }
    }
}
