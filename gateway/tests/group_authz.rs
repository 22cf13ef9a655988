//! Group authorization by the group's topics (AUTHZ-GROUP-4), frame by frame through
//! `Gateway::handle` with SASL PLAIN on the embedded backend: what a principal who may not poll a
//! group's topics can no longer do to that group, however it words its requests; and the other
//! admin acts authorized by Iggy's permissions (OFFSETDELETE-3, ALTERCONFIGS-1).

use bytes::{Bytes, BytesMut};
use iggy_common::{Permissions, StreamPermissions, TopicPermissions, UserStatus};
use kafka_iggy_gateway::auth::connection::ConnectionAuth;
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::collections::BTreeMap;

mod sasl_support;
use sasl_support::*;

const STREAM: &str = "kafka";
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_ID_NOT_FOUND: i16 = 69;
const MEMBER_ID_REQUIRED: i16 = 79;

type Connection = ConnectionAuth<EmbeddedBackend>;

/// Alice may read `orders`, Carol `audit`, Bob nothing; each logged in on a connection.
struct World {
    g: EmbeddedGateway,
    alice: Connection,
    bob: Connection,
    carol: Connection,
}

async fn world() -> World {
    let g = gateway();
    g.backend.ensure_stream(STREAM).await.unwrap();
    let mut grants = BTreeMap::new();
    for topic in ["orders", "audit"] {
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        g.backend.create_topic(STREAM, topic, spec).await.unwrap();
        grants.insert(topic, g.backend.topic_ids(STREAM, topic).unwrap());
    }
    let read = |topic: &str| {
        let (stream_id, topic_id) = grants[topic];
        let stream = StreamPermissions {
            topics: Some(BTreeMap::from([(
                topic_id,
                TopicPermissions {
                    read_topic: true,
                    ..TopicPermissions::default()
                },
            )])),
            ..StreamPermissions::default()
        };
        Some(Permissions {
            streams: Some(BTreeMap::from([(stream_id, stream)])),
            ..Permissions::default()
        })
    };
    for (user, permissions) in [("alice", read("orders")), ("bob", None), ("carol", read("audit"))] {
        g.backend
            .create_user(user, &format!("{user}-pw"), UserStatus::Active, permissions)
            .unwrap();
    }
    let mut connections = Vec::new();
    for user in ["alice", "bob", "carol"] {
        let mut c = g.new_connection(peer());
        assert_eq!(login(&g, &mut c, user, &format!("{user}-pw")).await.0.error_code, 0);
        connections.push(c);
    }
    let carol = connections.pop().unwrap();
    let bob = connections.pop().unwrap();
    let alice = connections.pop().unwrap();
    World { g, alice, bob, carol }
}

/// Consumer-protocol metadata: a version-0 subscription to `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect());
    let mut metadata = BytesMut::new();
    metadata.extend_from_slice(&0i16.to_be_bytes());
    subscription.encode(&mut metadata, 0).unwrap();
    metadata.freeze()
}

fn join(group: &str, metadata: Bytes, instance: Option<&str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_group_instance_id(instance.map(|i| StrBytes::from_string(i.to_string())))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(metadata)])
}

async fn joined(
    g: &EmbeddedGateway,
    c: &mut Connection,
    version: i16,
    request: &JoinGroupRequest,
) -> JoinGroupResponse {
    answer(
        g.handle(frame(ApiKey::JoinGroup, version, request), c).await,
        ApiKey::JoinGroup,
        version,
    )
}

async fn members_of(w: &mut World, group: &str) -> usize {
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_string(group.into()))]);
    let described: DescribeGroupsResponse = answer(
        w.g.handle(frame(ApiKey::DescribeGroups, 5, &describe), &mut w.alice)
            .await,
        ApiKey::DescribeGroups,
        5,
    );
    assert_eq!(described.groups[0].error_code, 0);
    described.groups[0].members.len()
}

#[tokio::test(start_paused = true)]
async fn authz_group_4_a_joiner_declaring_nothing_or_garbage_needs_the_groups_topics() {
    let mut w = world().await;
    let alice_joins = join("g1", subscription(&["orders"]), None);
    assert_eq!(joined(&w.g, &mut w.alice, 0, &alice_joins).await.error_code, 0);
    // Before, an empty subscription or metadata that did not decode named no topic, and so
    // joined any group: the joiner could become leader and read every member's metadata.
    for metadata in [subscription(&[]), Bytes::from_static(&[1, 2, 3])] {
        let sneaky = join("g1", metadata, None);
        let refused = joined(&w.g, &mut w.bob, 0, &sneaky).await;
        assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    }
    assert_eq!(members_of(&mut w, "g1").await, 1);
    // Carol's own topic is hers to read, but the group's is not.
    let refused = joined(&w.g, &mut w.carol, 0, &join("g1", subscription(&["audit"]), None)).await;
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
}

#[tokio::test(start_paused = true)]
async fn authz_group_4_a_static_member_is_not_taken_over_nor_removed_by_its_instance_id() {
    let mut w = world().await;
    let alice_joins = join("g-static", subscription(&["orders"]), Some("instance-1"));
    assert_eq!(joined(&w.g, &mut w.alice, 5, &alice_joins).await.error_code, 0);
    // Before, this replaced Alice (fenced, fatal to a Java consumer) and made Bob the leader.
    let takeover = join("g-static", subscription(&[]), Some("instance-1"));
    let refused = joined(&w.g, &mut w.bob, 5, &takeover).await;
    assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
    // Before, LeaveGroup v3 with an empty member id and her instance id removed her.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g-static")))
        .with_members(vec![MemberIdentity::default()
            .with_member_id(StrBytes::from_static_str(""))
            .with_group_instance_id(Some(StrBytes::from_static_str("instance-1")))]);
    let left: LeaveGroupResponse = answer(
        w.g.handle(frame(ApiKey::LeaveGroup, 3, &leave), &mut w.bob).await,
        ApiKey::LeaveGroup,
        3,
    );
    assert_eq!(left.error_code, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(members_of(&mut w, "g-static").await, 1, "Alice is still a member");
    // Her own leave by instance id still works.
    let left: LeaveGroupResponse = answer(
        w.g.handle(frame(ApiKey::LeaveGroup, 3, &leave), &mut w.alice).await,
        ApiKey::LeaveGroup,
        3,
    );
    assert_eq!((left.error_code, left.members[0].error_code), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn authz_group_4_delete_groups_checks_before_it_forgets_anything() {
    let mut w = world().await;
    // A KIP-394 join: the group holds Alice's pending id and nothing else.
    let first = joined(
        &w.g,
        &mut w.alice,
        4,
        &join("g-pending", subscription(&["orders"]), None),
    )
    .await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let delete =
        DeleteGroupsRequest::default().with_groups_names(vec![GroupId(StrBytes::from_static_str("g-pending"))]);
    let deleted: DeleteGroupsResponse = answer(
        w.g.handle(frame(ApiKey::DeleteGroups, 1, &delete), &mut w.bob).await,
        ApiKey::DeleteGroups,
        1,
    );
    // Before, the group's state was dropped first, and Alice's rejoin failed.
    assert_eq!(deleted.results[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let rejoin = join("g-pending", subscription(&["orders"]), None).with_member_id(first.member_id.clone());
    assert_eq!(joined(&w.g, &mut w.alice, 4, &rejoin).await.error_code, 0);
}

#[tokio::test(start_paused = true)]
async fn authz_group_4_a_commit_from_outside_the_group_needs_the_groups_topics() {
    let mut w = world().await;
    // A KIP-394 join: the group has no member yet, so it takes commits from outside it.
    let first = joined(
        &w.g,
        &mut w.alice,
        4,
        &join("g-commit", subscription(&["orders"]), None),
    )
    .await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    // Carol may poll `audit`, so Iggy would store her offset there: the group is not hers.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g-commit")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("audit")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    let committed: OffsetCommitResponse = answer(
        w.g.handle(frame(ApiKey::OffsetCommit, 5, &commit), &mut w.carol).await,
        ApiKey::OffsetCommit,
        5,
    );
    assert_eq!(committed.topics[0].partitions[0].error_code, GROUP_AUTHORIZATION_FAILED);
}

fn offset_delete(group: &str, topics: &[&str]) -> OffsetDeleteRequest {
    use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)])
                })
                .collect(),
        )
}

async fn offsets_deleted(
    g: &EmbeddedGateway,
    c: &mut Connection,
    request: &OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    answer(
        g.handle(frame(ApiKey::OffsetDelete, 0, request), c).await,
        ApiKey::OffsetDelete,
        0,
    )
}

#[tokio::test(start_paused = true)]
async fn offsetdelete_3_authorized_by_the_groups_topics_and_each_named_topic() {
    let mut w = world().await;
    // Alice's live group on `orders`: Bob and Carol may not poll it, so they may not touch it.
    let alice_joins = join("g-live", subscription(&["orders"]), None);
    assert_eq!(joined(&w.g, &mut w.alice, 0, &alice_joins).await.error_code, 0);
    for c in [&mut w.bob, &mut w.carol] {
        let refused = offsets_deleted(&w.g, c, &offset_delete("g-live", &["audit"])).await;
        assert_eq!(refused.error_code, GROUP_AUTHORIZATION_FAILED);
        assert!(refused.topics.is_empty(), "nothing was read or deleted");
    }
    // A group without members: the group act needs nothing, each named topic the user's own
    // permission. Alice commits on `orders` from outside (a group with no members), Carol on
    // `audit`.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g-idle")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    let committed: OffsetCommitResponse = answer(
        w.g.handle(frame(ApiKey::OffsetCommit, 8, &commit), &mut w.alice).await,
        ApiKey::OffsetCommit,
        8,
    );
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    // Offsets Carol cannot see do not make the group exist for her.
    let unseen = offsets_deleted(&w.g, &mut w.carol, &offset_delete("g-idle", &["orders"])).await;
    assert_eq!(unseen.error_code, GROUP_ID_NOT_FOUND);
    let on_audit = commit.clone().with_topics(vec![commit.topics[0]
        .clone()
        .with_name(TopicName(StrBytes::from_static_str("audit")))]);
    let committed: OffsetCommitResponse = answer(
        w.g.handle(frame(ApiKey::OffsetCommit, 8, &on_audit), &mut w.carol)
            .await,
        ApiKey::OffsetCommit,
        8,
    );
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let answered = offsets_deleted(&w.g, &mut w.carol, &offset_delete("g-idle", &["orders", "audit"])).await;
    assert_eq!(answered.error_code, 0);
    let codes: Vec<i16> = answered.topics.iter().map(|t| t.partitions[0].error_code).collect();
    assert_eq!(codes, [TOPIC_AUTHORIZATION_FAILED, 0], "orders is not Carol's to read");
    let answered = offsets_deleted(&w.g, &mut w.alice, &offset_delete("g-idle", &["orders"])).await;
    assert_eq!(
        (answered.error_code, answered.topics[0].partitions[0].error_code),
        (0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn alterconfigs_1_the_change_needs_the_users_manage_permission() {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut w = world().await;
    let request = |validate_only: bool| {
        IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("orders"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("60000")))])])
    };
    // Alice may read `orders` but not manage it: Iggy refuses the change.
    let refused: IncrementalAlterConfigsResponse = answer(
        w.g.handle(frame(ApiKey::IncrementalAlterConfigs, 1, &request(false)), &mut w.alice)
            .await,
        ApiKey::IncrementalAlterConfigs,
        1,
    );
    assert_eq!(refused.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let topic = w.g.backend.get_topic(STREAM, "orders").await.unwrap().unwrap();
    assert_eq!(topic.message_expiry_us, None);
    // Bob may not even read it.
    let refused: IncrementalAlterConfigsResponse = answer(
        w.g.handle(frame(ApiKey::IncrementalAlterConfigs, 1, &request(true)), &mut w.bob)
            .await,
        ApiKey::IncrementalAlterConfigs,
        1,
    );
    assert_eq!(refused.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
}
