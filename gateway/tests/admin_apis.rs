//! Frame-level tests, through `Gateway::handle_frame` on the embedded backend, of the admin APIs
//! the 4.x Admin client and the 3.9 tools call (docs/spec/admin.md): OffsetDelete,
//! DescribeCluster, AlterConfigs and IncrementalAlterConfigs.

use bytes::{Bytes, BytesMut};
use iggy_common::IggyMessage;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::sync::Arc;

mod common;
use common::{answer, frame};

type EmbeddedGateway = Arc<Gateway<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

const STREAM: &str = "kafka";
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_COORDINATOR: i16 = 16;
const INVALID_GROUP_ID: i16 = 24;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// (resource type, name, [(key, operation, value)]) of an IncrementalAlterConfigs resource.
type IncrementalResource<'a> = (i8, &'a str, &'a [(&'a str, i8, Option<&'a str>)]);
/// (resource type, name, [(key, value)]) of an AlterConfigs resource.
type LegacyResource<'a> = (i8, &'a str, &'a [(&'a str, Option<&'a str>)]);

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A gateway with `peers` (this one is instance 1 at 127.0.0.1:9092) and topics `orders` and
/// `audit`, two partitions of five records each.
async fn gateway_with_peers(peers: &[&str]) -> EmbeddedGateway {
    // Peers need a peer channel each and a secret (GROUP-COORDINATOR-6, GROUP-COORDINATOR-7);
    // this gateway never serves, so nothing listens there.
    let args = Args {
        instance_id: Some(1),
        peers: peers.iter().map(|p| format!("{p}/19192")).collect(),
        peer_listen: Some("127.0.0.1:19192".parse().unwrap()),
        peer_secret: Some(kafka_iggy_gateway::auth::credentials::Secret::new(
            "admin-apis-peer-secret",
        )),
        ..Args::default()
    };
    let config = Config::resolve(args, FileConfig::default()).expect("valid config");
    let g = kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 5);
    g.backend.ensure_stream(STREAM).await.unwrap();
    for topic in ["orders", "audit"] {
        let spec = TopicSpec {
            partitions: 2,
            message_expiry_us: None,
        };
        g.backend.create_topic(STREAM, topic, spec).await.unwrap();
        for p in 0..2 {
            let messages = (0..5)
                .map(|_| IggyMessage::builder().payload("x".into()).build().unwrap())
                .collect();
            g.backend.append(STREAM, topic, p, messages).await.unwrap();
        }
    }
    g
}

async fn gateway() -> EmbeddedGateway {
    gateway_with_peers(&[]).await
}

/// A standalone commit (no member) of `offset` on every partition of `topics`.
async fn commit(g: &EmbeddedGateway, group: &str, topics: &[&str], offset: i64) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(
                            (0..2)
                                .map(|p| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(offset)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let response: OffsetCommitResponse = answer(
        g.handle_frame(frame(ApiKey::OffsetCommit, 8, &request)).await,
        ApiKey::OffsetCommit,
        8,
    );
    for topic in &response.topics {
        for p in &topic.partitions {
            assert_eq!(p.error_code, 0, "commit {group} {:?}-{}", topic.name, p.partition_index);
        }
    }
}

/// The committed offsets of partitions 0 and 1 of `topic`.
async fn committed(g: &EmbeddedGateway, group: &str, topic: &str) -> Vec<i64> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partition_indexes(vec![0, 1])]));
    let response: OffsetFetchResponse = answer(
        g.handle_frame(frame(ApiKey::OffsetFetch, 7, &request)).await,
        ApiKey::OffsetFetch,
        7,
    );
    response.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            p.committed_offset
        })
        .collect()
}

fn offset_delete_request(group: &str, topics: &[(&str, &[i32])]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|(t, partitions)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|p| OffsetDeleteRequestPartition::default().with_partition_index(*p))
                                .collect(),
                        )
                })
                .collect(),
        )
}

async fn offset_delete(g: &EmbeddedGateway, group: &str, topics: &[(&str, &[i32])]) -> OffsetDeleteResponse {
    let request = offset_delete_request(group, topics);
    answer(
        g.handle_frame(frame(ApiKey::OffsetDelete, 0, &request)).await,
        ApiKey::OffsetDelete,
        0,
    )
}

/// Each topic's partition codes.
fn codes(response: &OffsetDeleteResponse) -> Vec<(String, Vec<i16>)> {
    response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions.iter().map(|p| p.error_code).collect(),
            )
        })
        .collect()
}

fn consumer_subscription(topics: &[&str]) -> Bytes {
    let subscription = ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| s(t)).collect());
    let mut metadata = BytesMut::new();
    metadata.extend_from_slice(&0i16.to_be_bytes());
    subscription.encode(&mut metadata, 0).unwrap();
    metadata.freeze()
}

/// Joins `group` as its one member (JoinGroup v0: no member id round trip).
async fn join(g: &EmbeddedGateway, group: &str, protocol_type: &str, metadata: Bytes) {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(metadata)]);
    let response: JoinGroupResponse = answer(
        g.handle_frame(frame(ApiKey::JoinGroup, 0, &request)).await,
        ApiKey::JoinGroup,
        0,
    );
    assert_eq!(response.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn offsetdelete_1_deletes_the_named_partitions_only() {
    let g = gateway().await;
    commit(&g, "g", &["orders", "audit"], 3).await;
    // A commit of 0 is a zero marker (CO-ZERO-1); it goes too.
    commit(&g, "g0", &["orders"], 0).await;
    let response = offset_delete(&g, "g", &[("orders", &[0]), ("audit", &[0, 1])]).await;
    assert_eq!(response.error_code, 0);
    assert_eq!(
        codes(&response),
        [("orders".to_string(), vec![0]), ("audit".to_string(), vec![0, 0])]
    );
    assert_eq!(committed(&g, "g", "orders").await, [-1, 3]);
    assert_eq!(committed(&g, "g", "audit").await, [-1, -1]);
    // Deleting again is no error: nothing stored (CO-DELETE-1).
    assert_eq!(codes(&offset_delete(&g, "g", &[("orders", &[0])]).await)[0].1, [0]);
    let response = offset_delete(&g, "g0", &[("orders", &[1])]).await;
    assert_eq!((response.error_code, codes(&response)[0].1.clone()), (0, vec![0]));
    assert_eq!(committed(&g, "g0", "orders").await, [0, -1]);
    // Unknown topics and partitions, per partition.
    let response = offset_delete(&g, "g", &[("nope", &[0]), ("orders", &[2, -1])]).await;
    assert_eq!(
        codes(&response),
        [
            ("nope".to_string(), vec![UNKNOWN_TOPIC_OR_PARTITION]),
            (
                "orders".to_string(),
                vec![UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION]
            )
        ]
    );
    assert_eq!(committed(&g, "g", "orders").await, [-1, 3]);
}

#[tokio::test(start_paused = true)]
async fn offsetdelete_1_refusals_of_the_whole_request() {
    let g = gateway().await;
    let response = offset_delete(&g, "", &[("orders", &[0])]).await;
    assert_eq!(response.error_code, INVALID_GROUP_ID);
    assert!(response.topics.is_empty());
    // Neither members nor offsets: the group does not exist.
    let response = offset_delete(&g, "nobody", &[("orders", &[0])]).await;
    assert_eq!(response.error_code, GROUP_ID_NOT_FOUND);
    // Offsets stored on one topic make the group exist for a request naming another.
    commit(&g, "stored", &["audit"], 2).await;
    let response = offset_delete(&g, "stored", &[("orders", &[0])]).await;
    assert_eq!((response.error_code, codes(&response)[0].1.clone()), (0, vec![0]));
    // On a gateway that does not coordinate the group.
    let peers = ["1=127.0.0.1:9092", "2=127.0.0.1:9093"];
    let g = gateway_with_peers(&peers).await;
    let other = (0..100)
        .map(|i| format!("group-{i}"))
        .find(|group| !g.is_coordinator(group))
        .expect("some group is the peer's");
    let response = offset_delete(&g, &other, &[("orders", &[0])]).await;
    assert_eq!(response.error_code, NOT_COORDINATOR);
}

#[tokio::test(start_paused = true)]
async fn offsetdelete_2_a_subscribed_topic_is_kept() {
    let g = gateway().await;
    commit(&g, "live", &["orders", "audit"], 4).await;
    join(&g, "live", "consumer", consumer_subscription(&["orders"])).await;
    let response = offset_delete(&g, "live", &[("orders", &[0, 1]), ("audit", &[1])]).await;
    assert_eq!(response.error_code, 0);
    assert_eq!(
        codes(&response),
        [
            (
                "orders".to_string(),
                vec![GROUP_SUBSCRIBED_TO_TOPIC, GROUP_SUBSCRIBED_TO_TOPIC]
            ),
            ("audit".to_string(), vec![0])
        ]
    );
    assert_eq!(committed(&g, "live", "orders").await, [4, 4]);
    assert_eq!(committed(&g, "live", "audit").await, [4, -1]);
}

#[tokio::test(start_paused = true)]
async fn offsetdelete_2_a_group_of_another_protocol_is_non_empty() {
    let g = gateway().await;
    commit(&g, "connect", &["orders"], 1).await;
    join(&g, "connect", "connect", Bytes::from_static(b"worker")).await;
    let response = offset_delete(&g, "connect", &[("orders", &[0])]).await;
    assert_eq!(response.error_code, NON_EMPTY_GROUP);
    assert_eq!(committed(&g, "connect", "orders").await, [1, 1]);
}

#[tokio::test]
async fn describecluster_1_describecluster_2_the_gateways_as_metadata_lists_them() {
    let g = gateway_with_peers(&["1=127.0.0.1:9092", "7=10.0.0.7:9094", "3=10.0.0.3:9093"]).await;
    let metadata: MetadataResponse = answer(
        g.handle_frame(frame(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        ))
        .await,
        ApiKey::Metadata,
        12,
    );
    for version in 0..=2 {
        for asked in [false, true] {
            let request = DescribeClusterRequest::default().with_include_cluster_authorized_operations(asked);
            let response: DescribeClusterResponse = answer(
                g.handle_frame(frame(ApiKey::DescribeCluster, version, &request)).await,
                ApiKey::DescribeCluster,
                version,
            );
            assert_eq!(response.error_code, 0, "v{version}");
            assert_eq!(Some(response.cluster_id.clone()), metadata.cluster_id);
            assert_eq!(response.controller_id, metadata.controller_id);
            assert_eq!(response.controller_id.0, 1, "the lowest node id");
            let brokers: Vec<(i32, String, i32, bool)> = response
                .brokers
                .iter()
                .map(|b| (b.broker_id.0, b.host.to_string(), b.port, b.is_fenced))
                .collect();
            let listed: Vec<(i32, String, i32, bool)> = metadata
                .brokers
                .iter()
                .map(|b| (b.node_id.0, b.host.to_string(), b.port, false))
                .collect();
            assert_eq!(brokers, listed, "v{version}");
            assert_eq!(brokers.len(), 3);
            // DESCRIBECLUSTER-2: asked or not.
            assert_eq!(response.cluster_authorized_operations, i32::MIN);
        }
    }
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    let response: DescribeClusterResponse = answer(
        g.handle_frame(frame(ApiKey::DescribeCluster, 1, &controllers)).await,
        ApiKey::DescribeCluster,
        1,
    );
    assert_eq!(response.error_code, UNSUPPORTED_ENDPOINT_TYPE);
    assert!(response.brokers.is_empty());
}

/// The topic's message expiry as the backend holds it.
async fn expiry(g: &EmbeddedGateway, topic: &str) -> Option<u64> {
    g.backend
        .get_topic(STREAM, topic)
        .await
        .unwrap()
        .unwrap()
        .message_expiry_us
}

fn incremental(resources: &[IncrementalResource], validate_only: bool) -> IncrementalAlterConfigsRequest {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(kind, name, configs)| {
                    AlterConfigsResource::default()
                        .with_resource_type(*kind)
                        .with_resource_name(s(name))
                        .with_configs(
                            configs
                                .iter()
                                .map(|(key, op, value)| {
                                    AlterableConfig::default()
                                        .with_name(s(key))
                                        .with_config_operation(*op)
                                        .with_value(value.map(s))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

async fn alter_incrementally(
    g: &EmbeddedGateway,
    request: &IncrementalAlterConfigsRequest,
) -> Vec<(i16, Option<String>)> {
    let response: IncrementalAlterConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::IncrementalAlterConfigs, 1, request)).await,
        ApiKey::IncrementalAlterConfigs,
        1,
    );
    response
        .responses
        .iter()
        .map(|r| (r.error_code, r.error_message.as_ref().map(|m| m.to_string())))
        .collect()
}

fn legacy(resources: &[LegacyResource], validate_only: bool) -> AlterConfigsRequest {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(kind, name, configs)| {
                    AlterConfigsResource::default()
                        .with_resource_type(*kind)
                        .with_resource_name(s(name))
                        .with_configs(
                            configs
                                .iter()
                                .map(|(key, value)| {
                                    AlterableConfig::default().with_name(s(key)).with_value(value.map(s))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

async fn alter(g: &EmbeddedGateway, version: i16, request: &AlterConfigsRequest) -> Vec<i16> {
    let response: AlterConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::AlterConfigs, version, request)).await,
        ApiKey::AlterConfigs,
        version,
    );
    response.responses.iter().map(|r| r.error_code).collect()
}

#[tokio::test]
async fn alterconfigs_1_retention_is_the_iggy_expiry_and_validate_only_changes_nothing() {
    let g = gateway().await;
    let set = incremental(&[(TOPIC, "orders", &[("retention.ms", 0, Some("60000"))])], true);
    assert_eq!(alter_incrementally(&g, &set).await, [(0, None)]);
    assert_eq!(expiry(&g, "orders").await, None, "validate_only");
    let set = incremental(&[(TOPIC, "orders", &[("retention.ms", 0, Some("60000"))])], false);
    assert_eq!(alter_incrementally(&g, &set).await, [(0, None)]);
    assert_eq!(expiry(&g, "orders").await, Some(60_000_000));
    // DescribeConfigs reports what was set.
    let describe = DescribeConfigsRequest::default().with_resources(vec![
        kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s("orders"))
            .with_configuration_keys(Some(vec![s("retention.ms")])),
    ]);
    let described: DescribeConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::DescribeConfigs, 4, &describe)).await,
        ApiKey::DescribeConfigs,
        4,
    );
    assert_eq!(
        described.results[0].configs[0].value.as_ref().map(|v| v.to_string()),
        Some("60000".to_string())
    );
    // DELETE: back to never expire.
    let delete = incremental(&[(TOPIC, "orders", &[("retention.ms", 1, None)])], false);
    assert_eq!(alter_incrementally(&g, &delete).await, [(0, None)]);
    assert_eq!(expiry(&g, "orders").await, None);
    // A topic that does not exist; the other resource is answered on its own.
    let request = incremental(
        &[
            (TOPIC, "nope", &[("retention.ms", 0, Some("1000"))]),
            (TOPIC, "audit", &[("retention.ms", 0, Some("1000"))]),
        ],
        false,
    );
    let answered = alter_incrementally(&g, &request).await;
    assert_eq!(answered[0].0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(answered[1], (0, None));
    assert_eq!(expiry(&g, "audit").await, Some(1_000_000));
    // AlterConfigs at every version.
    for version in 0..=2 {
        let ms = 2_000 + i64::from(version);
        let value = ms.to_string();
        let request = legacy(&[(TOPIC, "orders", &[("retention.ms", Some(value.as_str()))])], false);
        assert_eq!(alter(&g, version, &request).await, [0]);
        assert_eq!(expiry(&g, "orders").await, Some(ms as u64 * 1_000));
    }
}

#[tokio::test]
async fn alterconfigs_5_the_request_is_the_whole_config() {
    let g = gateway().await;
    let set = legacy(&[(TOPIC, "orders", &[("retention.ms", Some("5000"))])], false);
    assert_eq!(alter(&g, 2, &set).await, [0]);
    assert_eq!(expiry(&g, "orders").await, Some(5_000_000));
    // A key the gateway cannot honour refuses the resource, naming the key; nothing changes.
    let request = legacy(
        &[(
            TOPIC,
            "orders",
            &[("retention.ms", Some("9000")), ("max.message.bytes", Some("2000000"))],
        )],
        false,
    );
    let response: AlterConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::AlterConfigs, 2, &request)).await,
        ApiKey::AlterConfigs,
        2,
    );
    assert_eq!(response.responses[0].error_code, INVALID_CONFIG);
    let message = response.responses[0].error_message.as_ref().unwrap().to_string();
    assert!(message.contains("max.message.bytes"), "{message}");
    assert_eq!(expiry(&g, "orders").await, Some(5_000_000));
    // Left out: back to the default, never expire.
    assert_eq!(alter(&g, 2, &legacy(&[(TOPIC, "orders", &[])], false)).await, [0]);
    assert_eq!(expiry(&g, "orders").await, None);
}

#[tokio::test]
async fn alterconfigs_3_brokers_and_duplicates_are_invalid_requests() {
    let g = gateway().await;
    let request = incremental(
        &[
            (BROKER, "1", &[("log.retention.ms", 0, Some("1000"))]),
            (TOPIC, "orders", &[("retention.ms", 0, Some("1000"))]),
            (TOPIC, "orders", &[("retention.ms", 0, Some("2000"))]),
            (
                TOPIC,
                "audit",
                &[("retention.ms", 0, Some("1000")), ("retention.ms", 1, None)],
            ),
        ],
        false,
    );
    let answered = alter_incrementally(&g, &request).await;
    let codes: Vec<i16> = answered.iter().map(|a| a.0).collect();
    assert_eq!(codes, [INVALID_REQUEST; 4]);
    assert!(answered.iter().all(|a| a.1.is_some()), "each refusal says why");
    assert_eq!(expiry(&g, "orders").await, None);
    assert_eq!(expiry(&g, "audit").await, None);
    let request = legacy(&[(BROKER, "", &[("log.retention.ms", Some("1"))])], false);
    assert_eq!(alter(&g, 0, &request).await, [INVALID_REQUEST]);
}
