//! The API keys and versions the gateway advertises (PROTO-VERSION-1) and answers.

use kafka_protocol::messages::ApiKey;

/// One advertised API: its key and version range. `min_served` is the first version the gateway
/// really decodes (through kafka-protocol, or below its range through `protocol::legacy`);
/// versions from `min_advertised` below it are advertised only because clients gate features on
/// them (Produce v0-2: librdkafka, KAFKA-18659) and are refused when sent (PROTO-VERSION-2).
#[derive(Debug, Clone, Copy)]
pub struct Advertised {
    pub key: ApiKey,
    pub min_advertised: i16,
    pub min_served: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min_advertised: i16, min_served: i16, max: i16) -> Advertised {
    Advertised {
        key,
        min_advertised,
        min_served,
        max,
    }
}

/// Every API the gateway answers.
pub const ADVERTISED: &[Advertised] = &[
    api(ApiKey::Produce, 0, 3, 11),
    api(ApiKey::Fetch, 4, 4, 12),
    api(ApiKey::ListOffsets, 0, 0, 8),
    api(ApiKey::Metadata, 0, 0, 12),
    api(ApiKey::ApiVersions, 0, 0, 3),
    api(ApiKey::CreateTopics, 0, 0, 7),
    api(ApiKey::DeleteTopics, 0, 0, 6),
    // TOPIC-ADD-PARTITIONS-1.
    api(ApiKey::CreatePartitions, 0, 0, 3),
    api(ApiKey::InitProducerId, 0, 0, 4),
    api(ApiKey::DescribeConfigs, 0, 0, 4),
    api(ApiKey::FindCoordinator, 0, 0, 4),
    api(ApiKey::JoinGroup, 0, 0, 9),
    api(ApiKey::SyncGroup, 0, 0, 5),
    api(ApiKey::Heartbeat, 0, 0, 4),
    api(ApiKey::LeaveGroup, 0, 0, 5),
    // v9 checks a consumer-protocol member's epoch (GROUP-CONSUMER-COMMIT-1); librdkafka enables
    // KIP-848 only with OffsetCommit and OffsetFetch v9.
    api(ApiKey::OffsetCommit, 0, 0, 9),
    api(ApiKey::OffsetFetch, 0, 0, 9),
    api(ApiKey::DescribeGroups, 0, 0, 6),
    api(ApiKey::ListGroups, 0, 0, 5),
    api(ApiKey::DeleteGroups, 0, 0, 2),
    // GROUP-CONSUMER-HEARTBEAT-1: v0-1, what librdkafka 2.12 and the Java client 4.x send.
    api(ApiKey::ConsumerGroupHeartbeat, 0, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 0, 1),
    // OFFSETDELETE-1: v0 is the only version Kafka defines.
    api(ApiKey::OffsetDelete, 0, 0, 0),
    // DESCRIBECLUSTER-1: v2 (Kafka 4.0, KIP-1073) adds fenced brokers; no gateway is fenced.
    api(ApiKey::DescribeCluster, 0, 0, 2),
    // ALTERCONFIGS-1: what the 4.x Admin client and the 3.9 tools send.
    api(ApiKey::IncrementalAlterConfigs, 0, 0, 1),
    api(ApiKey::AlterConfigs, 0, 0, 2),
    // AUTH-SASL-HANDSHAKE-1: v0 (the PLAIN message follows bare) and v1 (SaslAuthenticate).
    api(ApiKey::SaslHandshake, 0, 0, 1),
    // v1 carries session_lifetime_ms (KIP-368).
    api(ApiKey::SaslAuthenticate, 0, 0, 2),
];

/// The advertised entry for `key`, if the gateway answers it.
pub fn advertised(key: ApiKey) -> Option<&'static Advertised> {
    ADVERTISED.iter().find(|a| a.key == key)
}

/// Whether the gateway decodes and answers `key` at `version`.
pub fn serves(key: ApiKey, version: i16) -> bool {
    advertised(key).is_some_and(|a| (a.min_served..=a.max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_version_1_librdkafka_feature_gates_are_inside_the_ranges() {
        let contains = |key, v| advertised(key).is_some_and(|a| (a.min_advertised..=a.max).contains(&v));
        assert!(contains(ApiKey::Produce, 3) && contains(ApiKey::Fetch, 4), "MsgVer2");
        assert!(
            contains(ApiKey::Produce, 0) && contains(ApiKey::Produce, 2),
            "KAFKA-18659"
        );
        assert!(contains(ApiKey::Produce, 7) && contains(ApiKey::Fetch, 10), "zstd");
        assert!(contains(ApiKey::InitProducerId, 0), "idempotence");
        // librdkafka enables lz4 only when FindCoordinator v0 is advertised; without it an lz4
        // producer silently sends uncompressed batches.
        assert!(contains(ApiKey::FindCoordinator, 0), "lz4");
        assert!(
            contains(ApiKey::FindCoordinator, 0)
                && contains(ApiKey::OffsetCommit, 2)
                && contains(ApiKey::OffsetFetch, 1),
            "groups"
        );
        for key in [
            ApiKey::JoinGroup,
            ApiKey::SyncGroup,
            ApiKey::Heartbeat,
            ApiKey::LeaveGroup,
        ] {
            assert!(contains(key, 0), "broker-balanced groups need {key:?} v0");
        }
    }

    #[test]
    fn proto_version_1_every_served_range_is_decodable_by_kafka_protocol() {
        // PROTO-LEGACY-1: below kafka-protocol's range, the gateway's own legacy codec decodes.
        for a in ADVERTISED {
            let valid = a.key.valid_versions();
            assert!(a.max <= valid.max, "{:?}", a.key);
            for version in a.min_served..valid.min {
                assert!(
                    crate::protocol::legacy::decodes(a.key, version),
                    "{:?} v{version}",
                    a.key
                );
            }
        }
    }

    #[test]
    fn proto_legacy_1_the_versions_kafka_3_9_served_are_served() {
        for (key, lowest) in [
            (ApiKey::OffsetCommit, 0),
            (ApiKey::OffsetFetch, 0),
            (ApiKey::ListOffsets, 0),
            (ApiKey::Metadata, 0),
            (ApiKey::CreateTopics, 0),
            (ApiKey::DeleteTopics, 0),
            (ApiKey::DescribeConfigs, 0),
            (ApiKey::FindCoordinator, 0),
            (ApiKey::JoinGroup, 0),
            (ApiKey::SyncGroup, 0),
            (ApiKey::Heartbeat, 0),
            (ApiKey::LeaveGroup, 0),
            (ApiKey::DescribeGroups, 0),
            (ApiKey::ListGroups, 0),
        ] {
            let a = advertised(key).expect("advertised");
            assert_eq!((a.min_advertised, a.min_served), (lowest, lowest), "{key:?}");
        }
    }

    #[test]
    fn proto_version_2_produce_v0_to_v2_are_advertised_but_not_served() {
        assert!(!serves(ApiKey::Produce, 2));
        assert!(serves(ApiKey::Produce, 3));
        assert!(!serves(ApiKey::Fetch, 13), "topic-id Fetch is not advertised");
    }
}
