//! OffsetCommit v0 and v1 (CO-LEGACY-COMMIT-1). The request decodes into the modern
//! `OffsetCommitRequest`: v0 carries no generation or member, so it becomes a standalone commit
//! (generation -1, empty member id); v1's per-partition commit timestamp is kept beside it.
//! Both responses are laid out as v2.
//!
//! ```
//! use kafka_iggy_gateway::protocol::legacy::offset_commit::OffsetCommitV0V1Request;
//! use kafka_protocol::protocol::Decodable;
//! // v0: group "g", topic "t", partition 0 at offset 5, null metadata.
//! let mut body = bytes::Bytes::from_static(&[
//!     0, 1, b'g', 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff,
//! ]);
//! let decoded = OffsetCommitV0V1Request::decode(&mut body, 0).unwrap();
//! assert_eq!(decoded.request.generation_id_or_member_epoch, -1);
//! assert_eq!(decoded.request.topics[0].partitions[0].committed_offset, 5);
//! ```

use super::wire::*;
use super::{kafka_codec, LaidOutAs};
use crate::protocol::entries::Entries;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::buf::ByteBuf;

/// OffsetCommit v0 and v1 responses: `[topics: name [partitions: partition_index error_code]]`,
/// which is v2's layout (v3 adds throttle_time_ms).
pub type OffsetCommitV0V1Response = LaidOutAs<OffsetCommitResponse, 2>;

/// An OffsetCommit v0 or v1 request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitV0V1Request {
    /// What the handler takes. For v0, generation -1 and an empty member id.
    pub request: OffsetCommitRequest,
    /// v1's commit_timestamp of each partition, in request order (topics, then partitions);
    /// empty for v0. Accepted and not used (CO-LEGACY-COMMIT-2).
    pub commit_timestamps: Vec<i64>,
}

impl OffsetCommitV0V1Request {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        if !(0..=1).contains(&version) {
            return Err(LegacyError::Version {
                api: "OffsetCommit",
                version,
            });
        }
        let group_id = read_string(buf, "group_id")?;
        let (generation, member_id) = if version == 1 {
            (read_i32(buf, "generation_id")?, read_string(buf, "member_id")?)
        } else {
            (-1, Default::default())
        };
        let mut commit_timestamps = Vec::new();
        let topics = read_array(buf, "topics", |buf| {
            let name = read_string(buf, "topic name")?;
            let partitions = read_array(buf, "partitions", |buf| {
                let partition_index = read_i32(buf, "partition_index")?;
                let committed_offset = read_i64(buf, "committed_offset")?;
                if version == 1 {
                    commit_timestamps.push(read_i64(buf, "commit_timestamp")?);
                }
                let committed_metadata = read_nullable_string(buf, "committed_metadata")?;
                Ok(OffsetCommitRequestPartition::default()
                    .with_partition_index(partition_index)
                    .with_committed_offset(committed_offset)
                    .with_committed_metadata(committed_metadata))
            })?;
            Ok(OffsetCommitRequestTopic::default()
                .with_name(TopicName(name))
                .with_partitions(partitions))
        })?;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(group_id))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(member_id)
            .with_topics(topics);
        Ok(Self {
            request,
            commit_timestamps,
        })
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        if !(0..=1).contains(&version) {
            return Err(LegacyError::Version {
                api: "OffsetCommit",
                version,
            });
        }
        let request = &self.request;
        write_string(out, "group_id", &request.group_id)?;
        if version == 1 {
            write_i32(out, request.generation_id_or_member_epoch);
            write_string(out, "member_id", &request.member_id)?;
        }
        let mut timestamps = self.commit_timestamps.iter();
        write_array(out, "topics", &request.topics, |out, topic| {
            write_string(out, "topic name", &topic.name)?;
            write_array(out, "partitions", &topic.partitions, |out, p| {
                write_i32(out, p.partition_index);
                write_i64(out, p.committed_offset);
                if version == 1 {
                    // A partition without a timestamp of its own commits "now" (-1).
                    write_i64(out, timestamps.next().copied().unwrap_or(-1));
                }
                write_nullable_string(out, "committed_metadata", p.committed_metadata.as_deref())
            })
        })
    }
}

kafka_codec!(OffsetCommitV0V1Request);

impl Entries for OffsetCommitV0V1Request {
    fn entries(&self) -> usize {
        self.request.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    use kafka_protocol::protocol::{Decodable, Encodable};

    /// OffsetCommit Request (Version: 1) => group_id generation_id member_id [topics]
    ///   topics => name [partitions]
    ///     partitions => partition_index committed_offset commit_timestamp committed_metadata
    const V1: &[u8] = &[
        0, 2, b'g', b'1', // group_id
        0, 0, 0, 7, // generation_id
        0, 1, b'm', // member_id
        0, 0, 0, 1, // topics
        0, 1, b't', // name
        0, 0, 0, 1, // partitions
        0, 0, 0, 3, // partition_index
        0, 0, 0, 0, 0, 0, 0, 42, // committed_offset
        0, 0, 1, 0x8c, 0x82, 0xb5, 0xc6, 0x00, // commit_timestamp 1_703_000_000_000
        0, 2, b'm', b'd', // committed_metadata
    ];

    #[test]
    fn co_legacy_commit_1_v1_request_decodes_from_the_guide_layout_and_back() {
        let decoded = OffsetCommitV0V1Request::decode(&mut Bytes::from_static(V1), 1).unwrap();
        let r = &decoded.request;
        assert_eq!(
            (
                r.group_id.as_str(),
                r.generation_id_or_member_epoch,
                r.member_id.as_str()
            ),
            ("g1", 7, "m")
        );
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            (r.topics[0].name.as_str(), p.partition_index, p.committed_offset),
            ("t", 3, 42)
        );
        assert_eq!(p.committed_metadata.as_deref(), Some("md"));
        assert_eq!(decoded.commit_timestamps, [1_703_000_000_000]);
        let mut out = BytesMut::new();
        decoded.encode(&mut out, 1).unwrap();
        assert_eq!(&out[..], V1);
        assert_eq!(decoded.compute_size(1).unwrap(), V1.len());
    }

    #[test]
    fn co_legacy_commit_1_v0_request_is_a_standalone_commit() {
        // v0 is v1 without generation_id, member_id and commit_timestamp.
        let v0: Vec<u8> = [&V1[..4], &V1[11..34], &V1[42..]].concat();
        let decoded = OffsetCommitV0V1Request::decode(&mut Bytes::from(v0.clone()), 0).unwrap();
        assert_eq!(decoded.request.generation_id_or_member_epoch, -1);
        assert!(decoded.request.member_id.is_empty() && decoded.commit_timestamps.is_empty());
        assert_eq!(decoded.request.topics[0].partitions[0].committed_offset, 42);
        let mut out = BytesMut::new();
        decoded.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], &v0[..]);
    }

    #[test]
    fn a_truncated_request_and_an_unknown_version_are_errors() {
        assert!(OffsetCommitV0V1Request::decode(&mut Bytes::from_static(&V1[..V1.len() - 1]), 1).is_err());
        assert!(OffsetCommitV0V1Request::decode(&mut Bytes::from_static(V1), 2).is_err());
    }

    #[test]
    fn co_legacy_commit_1_responses_have_v2s_layout_without_throttle_time() {
        let response = LaidOutAs::<_, 2>(OffsetCommitResponse::default().with_topics(vec![
            OffsetCommitResponseTopic::default()
                .with_name(TopicName("t".into()))
                .with_partitions(vec![OffsetCommitResponsePartition::default()
                    .with_partition_index(3)
                    .with_error_code(25)]),
        ]));
        let expected: &[u8] = &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 3, 0, 25];
        for version in [0, 1] {
            let mut out = BytesMut::new();
            response.encode(&mut out, version).unwrap();
            assert_eq!(&out[..], expected, "v{version}");
            let back = OffsetCommitV0V1Response::decode(&mut Bytes::from_static(expected), version).unwrap();
            assert_eq!(back, response);
        }
    }
}
