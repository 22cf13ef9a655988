//! Target `request_bodies`: every request body the gateway decodes, at every version it serves,
//! through the vendored kafka-protocol (below its range, the gateway's legacy codec), with an
//! encode-size and round-trip check.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::protocol::api::ADVERTISED;
use kafka_iggy_gateway::protocol::legacy;
use kafka_iggy_gateway::protocol::legacy::create_topics::CreateTopicsV0V1Request;
use kafka_iggy_gateway::protocol::legacy::delete_topics::DeleteTopicsV0Request;
use kafka_iggy_gateway::protocol::legacy::describe_configs::DescribeConfigsV0Request;
use kafka_iggy_gateway::protocol::legacy::list_offsets::ListOffsetsV0Request;
use kafka_iggy_gateway::protocol::legacy::offset_commit::OffsetCommitV0V1Request;
use kafka_iggy_gateway::protocol::legacy::offset_fetch::OffsetFetchV0Request;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use std::fmt::Debug;

/// The first two bytes pick an advertised API, the next two a version in its served range, the
/// rest is the body.
pub fn request_bodies(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let api = &ADVERTISED[usize::from(u16::from_be_bytes([data[0], data[1]])) % ADVERTISED.len()];
    let span = (api.max - api.min_served + 1) as u16;
    let version = api.min_served + (u16::from_be_bytes([data[2], data[3]]) % span) as i16;
    check_body(api.key, version, Bytes::copy_from_slice(&data[4..]));
}

/// Decodes `body` as the request type of `key` at `version`, as the gateway's `decode_body`
/// does; a body that decodes must re-encode to `compute_size` bytes and decode back to itself.
pub fn check_body(key: ApiKey, version: i16, body: Bytes) {
    if legacy::decodes(key, version) {
        // PROTO-LEGACY-1: below kafka-protocol's range the gateway's own codec decodes.
        match key {
            ApiKey::OffsetCommit => round_trip::<OffsetCommitV0V1Request>(body, version),
            ApiKey::OffsetFetch => round_trip::<OffsetFetchV0Request>(body, version),
            ApiKey::ListOffsets => round_trip::<ListOffsetsV0Request>(body, version),
            ApiKey::CreateTopics => round_trip::<CreateTopicsV0V1Request>(body, version),
            ApiKey::DeleteTopics => round_trip::<DeleteTopicsV0Request>(body, version),
            ApiKey::DescribeConfigs => round_trip::<DescribeConfigsV0Request>(body, version),
            other => panic!("{other:?} v{version} is decoded by the legacy codec but this target does not decode it"),
        }
        return;
    }
    match key {
        ApiKey::Produce => round_trip::<ProduceRequest>(body, version),
        ApiKey::Fetch => round_trip::<FetchRequest>(body, version),
        ApiKey::ListOffsets => round_trip::<ListOffsetsRequest>(body, version),
        ApiKey::Metadata => round_trip::<MetadataRequest>(body, version),
        ApiKey::ApiVersions => round_trip::<ApiVersionsRequest>(body, version),
        ApiKey::CreateTopics => round_trip::<CreateTopicsRequest>(body, version),
        ApiKey::DeleteTopics => round_trip::<DeleteTopicsRequest>(body, version),
        ApiKey::CreatePartitions => round_trip::<CreatePartitionsRequest>(body, version),
        ApiKey::InitProducerId => round_trip::<InitProducerIdRequest>(body, version),
        ApiKey::DescribeConfigs => round_trip::<DescribeConfigsRequest>(body, version),
        ApiKey::FindCoordinator => round_trip::<FindCoordinatorRequest>(body, version),
        ApiKey::JoinGroup => round_trip::<JoinGroupRequest>(body, version),
        ApiKey::SyncGroup => round_trip::<SyncGroupRequest>(body, version),
        ApiKey::Heartbeat => round_trip::<HeartbeatRequest>(body, version),
        ApiKey::LeaveGroup => round_trip::<LeaveGroupRequest>(body, version),
        ApiKey::OffsetCommit => round_trip::<OffsetCommitRequest>(body, version),
        ApiKey::OffsetFetch => round_trip::<OffsetFetchRequest>(body, version),
        ApiKey::DescribeGroups => round_trip::<DescribeGroupsRequest>(body, version),
        ApiKey::ListGroups => round_trip::<ListGroupsRequest>(body, version),
        ApiKey::DeleteGroups => round_trip::<DeleteGroupsRequest>(body, version),
        ApiKey::ConsumerGroupHeartbeat => round_trip::<ConsumerGroupHeartbeatRequest>(body, version),
        ApiKey::ConsumerGroupDescribe => round_trip::<ConsumerGroupDescribeRequest>(body, version),
        ApiKey::OffsetDelete => round_trip::<OffsetDeleteRequest>(body, version),
        ApiKey::DescribeCluster => round_trip::<DescribeClusterRequest>(body, version),
        ApiKey::IncrementalAlterConfigs => round_trip::<IncrementalAlterConfigsRequest>(body, version),
        ApiKey::AlterConfigs => round_trip::<AlterConfigsRequest>(body, version),
        ApiKey::SaslHandshake => round_trip::<SaslHandshakeRequest>(body, version),
        ApiKey::SaslAuthenticate => round_trip::<SaslAuthenticateRequest>(body, version),
        // ADVERTISED lists only the keys above; a new entry needs a line here.
        other => panic!("{other:?} is advertised but this target does not decode it"),
    }
}

fn round_trip<T: Decodable + Encodable + PartialEq + Debug>(mut body: Bytes, version: i16) {
    let Ok(decoded) = T::decode(&mut body, version) else {
        return;
    };
    let mut out = BytesMut::new();
    match (decoded.compute_size(version), decoded.encode(&mut out, version)) {
        (Ok(size), Ok(())) => {
            assert_eq!(size, out.len(), "compute_size disagrees with encode for {decoded:?}");
            let again = T::decode(&mut out.freeze(), version).expect("an encoded request decodes");
            assert_eq!(again, decoded, "decode(encode(x)) != x");
        }
        // A decoded value the encoder refuses at the same version (both agree): not reachable
        // from a client, since the gateway never re-encodes a request.
        (Err(_), Err(_)) => {}
        (size, encoded) => panic!("compute_size {size:?} but encode {encoded:?} for {decoded:?}"),
    }
}
