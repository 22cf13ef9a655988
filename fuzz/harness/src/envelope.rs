//! Target `envelope`: the envelope payload a Fetch reads back from Iggy (ENV-LAYOUT-1), whose
//! bytes any Iggy client could have written.

use bytes::Bytes;
use kig_core::envelope::{decode_envelope, encode_envelope, envelope_len};

/// The input is one stored payload. When it decodes, encoding the record must give the same
/// bytes (each envelope has exactly one encoding) and decode back to the same record.
pub fn envelope(data: &[u8]) {
    let payload = Bytes::copy_from_slice(data);
    let Ok(record) = decode_envelope(&payload) else {
        return;
    };
    let encoded = encode_envelope(record.key.as_deref(), record.value.as_deref(), &record.headers);
    assert_eq!(
        envelope_len(record.key.as_deref(), record.value.as_deref(), &record.headers),
        encoded.len(),
        "envelope_len agrees with encode_envelope"
    );
    assert_eq!(encoded, payload, "an envelope has one encoding");
    let again = decode_envelope(&encoded).expect("an encoded envelope decodes");
    assert_eq!(again, record, "decode(encode(record)) != record");
}
