//! OffsetFetch v0 (CO-LEGACY-COMMIT-1): request and response are laid out as v1. Kafka read v0
//! from ZooKeeper and v1 from its offsets topic; here both read the one store.

use super::LaidOutAs;
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

/// `group_id [topics: name [partition_indexes]]`, as v1.
pub type OffsetFetchV0Request = LaidOutAs<OffsetFetchRequest, 1>;

/// `[topics: name [partitions: partition_index committed_offset metadata error_code]]`, as v1.
pub type OffsetFetchV0Response = LaidOutAs<OffsetFetchResponse, 1>;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Decodable, Encodable};

    #[test]
    fn co_legacy_commit_1_offset_fetch_v0_request_from_the_guide_layout() {
        // OffsetFetch Request (Version: 0) => group_id [topics: name [partition_indexes]]
        let body: &[u8] = &[0, 1, b'g', 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1];
        let decoded = OffsetFetchV0Request::decode(&mut Bytes::from_static(body), 0).unwrap();
        let topics = decoded.0.topics.as_ref().unwrap();
        assert_eq!(decoded.0.group_id.as_str(), "g");
        assert_eq!(
            (topics[0].name.as_str(), &topics[0].partition_indexes[..]),
            ("t", &[0, 1][..])
        );
        let mut out = BytesMut::new();
        decoded.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], body);
    }

    #[test]
    fn co_legacy_commit_1_offset_fetch_v0_response_from_the_guide_layout() {
        // [topics: name [partitions: partition_index committed_offset metadata error_code]]
        let response = OffsetFetchV0Response::default();
        let response = LaidOutAs(response.0.with_topics(vec![OffsetFetchResponseTopic::default()
            .with_name(TopicName("t".into()))
            .with_partitions(vec![OffsetFetchResponsePartition::default()
                .with_partition_index(0)
                .with_committed_offset(9)
                .with_metadata(Some("".into()))])]));
        let expected: &[u8] = &[
            0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0,
        ];
        let mut out = BytesMut::new();
        response.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], expected);
        assert_eq!(
            OffsetFetchV0Response::decode(&mut Bytes::from_static(expected), 0).unwrap(),
            response
        );
    }
}
