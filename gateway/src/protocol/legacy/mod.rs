//! The request and response versions Kafka 3.9 still served and kafka-protocol 0.18 (which
//! follows Kafka 4.0 and KIP-896) no longer decodes (PROTO-LEGACY-1). Each old request decodes
//! into the modern request struct its handler already takes, and each modern response encodes
//! at the old version, so handlers stay version-blind. Both directions exist on both sides:
//! the gateway decodes requests and encodes responses, a client (the conformance suite's raw
//! wire client) encodes requests and decodes responses, through the same `Encodable` and
//! `Decodable` traits kafka-protocol's own types implement.

pub mod create_topics;
pub mod delete_topics;
pub mod describe_configs;
pub mod list_offsets;
pub mod offset_commit;
pub mod offset_fetch;
pub mod wire;

use crate::protocol::entries::Entries;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable};

/// The old versions this layer decodes, per API: everything Kafka 3.9 served below
/// kafka-protocol 0.18's first version of the same API.
pub const LEGACY_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ListOffsets, 0, 0),
    (ApiKey::CreateTopics, 0, 1),
    (ApiKey::DeleteTopics, 0, 0),
    (ApiKey::DescribeConfigs, 0, 0),
    (ApiKey::OffsetCommit, 0, 1),
    (ApiKey::OffsetFetch, 0, 0),
];

/// Whether `key` at `version` is one this layer decodes rather than kafka-protocol.
pub fn decodes(key: ApiKey, version: i16) -> bool {
    LEGACY_VERSIONS
        .iter()
        .any(|&(k, lo, hi)| k == key && (lo..=hi).contains(&version))
}

/// The lowest version of `key` that this layer or kafka-protocol decodes.
pub fn lowest_decodable(key: ApiKey) -> i16 {
    LEGACY_VERSIONS
        .iter()
        .find(|l| l.0 == key)
        .map_or(key.valid_versions().min, |l| l.1)
}

/// A message whose old version is laid out byte for byte as version `V` of its modern struct:
/// OffsetFetch v0 as v1, DeleteTopics v0 requests as v1, OffsetCommit v0–v1 responses as v2.
/// Whatever version it is asked to encode or decode at, it uses `V`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaidOutAs<T, const V: i16>(pub T);

impl<T: Encodable, const V: i16> Encodable for LaidOutAs<T, V> {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        self.0.encode(buf, V)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        self.0.compute_size(V)
    }
}

impl<T: Decodable, const V: i16> Decodable for LaidOutAs<T, V> {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        T::decode(buf, V).map(Self)
    }
}

impl<T: Entries, const V: i16> Entries for LaidOutAs<T, V> {
    fn entries(&self) -> usize {
        self.0.entries()
    }
}

/// Implements kafka-protocol's `Encodable` and `Decodable` for a type with inherent
/// `read(buf, version) -> Result<Self, LegacyError>` and `write(&self, out, version)` methods.
macro_rules! kafka_codec {
    ($($t:ty),+ $(,)?) => {
        $(
            impl kafka_protocol::protocol::Encodable for $t {
                fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
                    &self,
                    buf: &mut B,
                    version: i16,
                ) -> anyhow::Result<()> {
                    let mut out = Vec::new();
                    self.write(&mut out, version)?;
                    bytes::BufMut::put_slice(buf, &out);
                    Ok(())
                }

                fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
                    let mut out = Vec::new();
                    self.write(&mut out, version)?;
                    Ok(out.len())
                }
            }

            impl kafka_protocol::protocol::Decodable for $t {
                fn decode<B: kafka_protocol::protocol::buf::ByteBuf>(
                    buf: &mut B,
                    version: i16,
                ) -> anyhow::Result<Self> {
                    Ok(Self::read(buf, version)?)
                }
            }
        )+
    };
}
pub(crate) use kafka_codec;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_legacy_1_every_legacy_version_is_below_kafka_protocols_range() {
        for &(key, lo, hi) in LEGACY_VERSIONS {
            assert!(lo <= hi && hi + 1 == key.valid_versions().min, "{key:?}");
            assert_eq!(lowest_decodable(key), lo);
        }
        assert_eq!(lowest_decodable(ApiKey::Produce), 3, "record-format versions stay out");
        assert!(decodes(ApiKey::OffsetCommit, 1) && !decodes(ApiKey::OffsetCommit, 2));
    }
}
