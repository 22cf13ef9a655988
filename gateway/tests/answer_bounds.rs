//! Valid requests that amplify (issue 31): answers bounded by what the gateway will send, not by
//! what the request names. Each test pins one API's rule on repeated names (a name repeated in one
//! request is answered or refused as Kafka does, and never looked up or described twice) or
//! LIMIT-RESPONSE-BYTES-1 (an answer past `max_response_bytes` is an error, not an allocation),
//! through `Gateway::handle_frame` on the embedded backend. Every test here failed before its
//! rule existed.

use bytes::Bytes;
use kafka_iggy_gateway::protocol::legacy::list_offsets::{ListOffsetsV0Request, ListOffsetsV0Response};
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;

mod bounds_support;
use bounds_support::*;

// Kafka error codes.
const UNKNOWN_SERVER_ERROR: i16 = -1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const INVALID_REQUEST: i16 = 42;

/// The sizes: 200 KiB of metadata and of assignment, one group named 2,500 times.
const GROUP_BLOB_BYTES: usize = 200 * 1024;
const GROUP_MENTIONS: usize = 2_500;

async fn create_topic(gateway: &EmbeddedGateway, name: &str, partitions: i32) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(s(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let (_, response): (_, CreateTopicsResponse) = ask(gateway, ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(response.topics[0].error_code, 0, "creating {name}");
}

async fn topic_exists(gateway: &EmbeddedGateway, name: &str) -> bool {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(name))))
        ]))
        .with_allow_auto_topic_creation(false);
    let (_, response): (_, MetadataResponse) = ask(gateway, ApiKey::Metadata, 9, &request).await;
    response.topics[0].error_code == 0
}

/// Joins `group` as its one member (JoinGroup v0, protocol type `x`, a 300 s session) with
/// `blob_bytes` of metadata, and syncs as its leader with an assignment as large.
async fn stable_group(gateway: &EmbeddedGateway, group: &str, blob_bytes: usize) {
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(300_000)
        .with_protocol_type(s("x"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("p"))
            .with_metadata(Bytes::from(vec![7u8; blob_bytes]))]);
    let (_, joined): (_, JoinGroupResponse) = ask(gateway, ApiKey::JoinGroup, 0, &join).await;
    assert_eq!(joined.error_code, 0, "JoinGroup {group}");
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id)
            .with_assignment(Bytes::from(vec![8u8; blob_bytes]))]);
    let (_, synced): (_, SyncGroupResponse) = ask(gateway, ApiKey::SyncGroup, 0, &sync).await;
    assert_eq!(synced.error_code, 0, "SyncGroup {group}");
}

fn describe_groups(names: &[&str]) -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(names.iter().map(|n| GroupId(s(n))).collect())
}

#[tokio::test(start_paused = true)]
async fn limit_describegroups_duplicates_1_a_group_named_2500_times_is_described_once() {
    let gateway = gateway();
    stable_group(&gateway, "amplified", GROUP_BLOB_BYTES).await;
    let names = vec!["amplified"; GROUP_MENTIONS];
    let (frame_bytes, described): (_, DescribeGroupsResponse) =
        ask(&gateway, ApiKey::DescribeGroups, 0, &describe_groups(&names)).await;
    assert_eq!(described.groups.len(), 1, "the group is described once");
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.members.len(), 1);
    assert_eq!(group.members[0].member_metadata.len(), GROUP_BLOB_BYTES);
    assert_eq!(group.members[0].member_assignment.len(), GROUP_BLOB_BYTES);
    // The old answer was 2,500 copies of both blobs: about 1 GB.
    assert!(frame_bytes < 3 * GROUP_BLOB_BYTES, "{frame_bytes} bytes");
}

#[tokio::test(start_paused = true)]
async fn limit_response_bytes_1_describegroups_past_the_budget_answers_an_error_and_no_members() {
    // Room for one group's 400 KiB of blobs, not two.
    let gateway = gateway_answering_at_most(3 * GROUP_BLOB_BYTES);
    stable_group(&gateway, "first", GROUP_BLOB_BYTES).await;
    stable_group(&gateway, "second", GROUP_BLOB_BYTES).await;
    let (frame_bytes, described): (_, DescribeGroupsResponse) = ask(
        &gateway,
        ApiKey::DescribeGroups,
        0,
        &describe_groups(&["first", "second"]),
    )
    .await;
    assert_eq!(described.groups.len(), 2);
    assert_eq!(
        (described.groups[0].error_code, described.groups[0].members.len()),
        (0, 1)
    );
    // The second fits an answer of its own: an error clients retry alone.
    assert_eq!(described.groups[1].group_id.0.as_str(), "second");
    assert_eq!(described.groups[1].error_code, COORDINATOR_LOAD_IN_PROGRESS);
    assert!(described.groups[1].members.is_empty());
    assert!(frame_bytes <= 3 * GROUP_BLOB_BYTES, "{frame_bytes} bytes");
    let (_, alone): (_, DescribeGroupsResponse) =
        ask(&gateway, ApiKey::DescribeGroups, 0, &describe_groups(&["second"])).await;
    assert_eq!((alone.groups[0].error_code, alone.groups[0].members.len()), (0, 1));

    // A group that never fits is an error no retry clears. (The leader's JoinGroup answer, with
    // the one member's metadata, still fits.)
    let small = gateway_answering_at_most(GROUP_BLOB_BYTES + 4_096);
    stable_group(&small, "too-large", GROUP_BLOB_BYTES).await;
    let (_, refused): (_, DescribeGroupsResponse) =
        ask(&small, ApiKey::DescribeGroups, 0, &describe_groups(&["too-large"])).await;
    assert_eq!(refused.groups[0].error_code, UNKNOWN_SERVER_ERROR);
    assert!(refused.groups[0].members.is_empty());
}

fn metadata_naming(topic: &str, mentions: usize) -> MetadataRequest {
    let entry = MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))));
    MetadataRequest::default()
        .with_topics(Some(vec![entry; mentions]))
        .with_allow_auto_topic_creation(false)
}

#[tokio::test(start_paused = true)]
async fn limit_metadata_duplicates_1_a_topic_named_5000_times_is_answered_once() {
    let gateway = gateway();
    create_topic(&gateway, "wide", 100).await;
    let (frame_bytes, response): (_, MetadataResponse) =
        ask(&gateway, ApiKey::Metadata, 9, &metadata_naming("wide", 5_000)).await;
    assert_eq!(response.topics.len(), 1, "Kafka answers a set of names");
    assert_eq!(response.topics[0].partitions.len(), 100);
    // The old answer held 500,000 partition entries.
    assert!(frame_bytes < 10_000, "{frame_bytes} bytes");
}

/// Ids were looked up one by one, each by listing every topic, and a repeated id was answered
/// at each mention: 5,000 mentions were 5,000 listings and 5,000 entries.
#[tokio::test(start_paused = true)]
async fn limit_metadata_duplicates_1_group_consumer_topic_id_1_a_topic_id_asked_5000_times_is_answered_once() {
    let gateway = gateway();
    create_topic(&gateway, "wide", 100).await;
    let id = kafka_iggy_gateway::groups::topic_id::topic_id("wide");
    let entry = MetadataRequestTopic::default().with_name(None).with_topic_id(id);
    let request = MetadataRequest::default()
        .with_topics(Some(vec![entry; 5_000]))
        .with_allow_auto_topic_creation(false);
    let (frame_bytes, response): (_, MetadataResponse) = ask(&gateway, ApiKey::Metadata, 12, &request).await;
    assert_eq!(response.topics.len(), 1, "ids too are taken as a set");
    let topic = &response.topics[0];
    assert_eq!(topic.name.as_ref().map(|n| n.0.as_str()), Some("wide"), "{topic:?}");
    assert_eq!((topic.error_code, topic.partitions.len()), (0, 100));
    assert!(frame_bytes < 10_000, "{frame_bytes} bytes");
}

#[tokio::test(start_paused = true)]
async fn limit_response_bytes_1_metadata_partitions_past_the_budget_answer_an_error() {
    // Room for the 10-partition topic, not the 1,000-partition one.
    let gateway = gateway_answering_at_most(4_000);
    create_topic(&gateway, "narrow", 10).await;
    create_topic(&gateway, "broad", 1_000).await;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s("narrow")))),
            MetadataRequestTopic::default().with_name(Some(TopicName(s("broad")))),
        ]))
        .with_allow_auto_topic_creation(false);
    let (frame_bytes, response): (_, MetadataResponse) = ask(&gateway, ApiKey::Metadata, 9, &request).await;
    assert_eq!(
        (response.topics[0].error_code, response.topics[0].partitions.len()),
        (0, 10)
    );
    assert_eq!(response.topics[1].error_code, UNKNOWN_SERVER_ERROR);
    assert!(response.topics[1].partitions.is_empty());
    assert!(frame_bytes <= 4_000, "{frame_bytes} bytes");
    // A listing is held to the same budget.
    let (_, listed): (_, MetadataResponse) = ask(
        &gateway,
        ApiKey::Metadata,
        9,
        &MetadataRequest::default().with_topics(None),
    )
    .await;
    let broad = listed
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "broad"));
    assert_eq!(
        broad.map(|t| (t.error_code, t.partitions.len())),
        Some((UNKNOWN_SERVER_ERROR, 0))
    );
}

fn list_offsets(topics: &[(&str, &[i32])]) -> ListOffsetsRequest {
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(
        topics
            .iter()
            .map(|(name, partitions)| {
                ListOffsetsTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|&p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_timestamp(-1)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

#[tokio::test(start_paused = true)]
async fn limit_listoffsets_duplicates_1_a_repeated_partition_is_invalid_request_at_each_mention() {
    let gateway = gateway();
    create_topic(&gateway, "offsets", 2).await;
    let request = list_offsets(&[("offsets", &[0, 1]), ("offsets", &[0]), ("offsets", &[0])]);
    let (_, response): (_, ListOffsetsResponse) = ask(&gateway, ApiKey::ListOffsets, 7, &request).await;
    let codes: Vec<Vec<(i32, i16)>> = response
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect())
        .collect();
    assert_eq!(
        codes,
        vec![
            vec![(0, INVALID_REQUEST), (1, 0)],
            vec![(0, INVALID_REQUEST)],
            vec![(0, INVALID_REQUEST)]
        ],
        "as Kafka's duplicatePartitions"
    );
    // v0, through the legacy decoder, keeps one answer per requested partition in order.
    let old = ListOffsetsV0Request {
        request,
        max_num_offsets: vec![1; 4],
    };
    let (_, old): (_, ListOffsetsV0Response) = ask(&gateway, ApiKey::ListOffsets, 0, &old).await;
    let codes: Vec<Vec<(i32, i16)>> = old
        .topics
        .iter()
        .map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)).collect())
        .collect();
    assert_eq!(
        codes,
        vec![
            vec![(0, INVALID_REQUEST), (1, 0)],
            vec![(0, INVALID_REQUEST)],
            vec![(0, INVALID_REQUEST)]
        ],
        "v0"
    );
}

fn offset_fetch(group: &str, topics: &[(&str, &[i32])]) -> OffsetFetchRequest {
    OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(Some(
            topics
                .iter()
                .map(|(name, partitions)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_partition_indexes(partitions.to_vec())
                })
                .collect(),
        ))
}

#[tokio::test(start_paused = true)]
async fn limit_offsetfetch_duplicates_1_a_repeated_topic_and_partition_are_answered_once() {
    let gateway = gateway();
    create_topic(&gateway, "committed", 2).await;
    let mentions: Vec<(&str, &[i32])> = (0..3_000).map(|_| ("committed", &[0, 0][..])).collect();
    let mut topics = mentions;
    topics.push(("committed", &[1]));
    for version in [1, 7] {
        let (_, response): (_, OffsetFetchResponse) =
            ask(&gateway, ApiKey::OffsetFetch, version, &offset_fetch("g", &topics)).await;
        let answered: Vec<(&str, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.0.as_str(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        assert_eq!(answered, vec![("committed", vec![0, 1])], "v{version}");
    }
}

/// Topics and the partitions asked of each.
type AskedTopics<'a> = &'a [(&'a str, &'a [i32])];
/// A group and the topics asked of it (None: every committed topic).
type AskedGroup<'a> = (&'a str, Option<AskedTopics<'a>>);
/// A group as answered: its id and each topic's partitions.
type AnsweredGroup<'a> = (&'a str, Vec<(&'a str, Vec<i32>)>);

/// An OffsetFetch v8+ request of the given groups.
fn offset_fetch_groups(groups: &[AskedGroup<'_>]) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(
        groups
            .iter()
            .map(|(group, topics)| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s(group)))
                    .with_member_epoch(-1)
                    .with_topics(topics.map(|topics| {
                        topics
                            .iter()
                            .map(|(name, partitions)| {
                                OffsetFetchRequestTopics::default()
                                    .with_name(TopicName(s(name)))
                                    .with_partition_indexes(partitions.to_vec())
                            })
                            .collect()
                    }))
            })
            .collect(),
    )
}

#[tokio::test(start_paused = true)]
async fn limit_offsetfetch_duplicates_1_a_group_named_3000_times_in_v8_is_answered_once() {
    let gateway = gateway();
    create_topic(&gateway, "committed", 2).await;
    let first: &[(&str, &[i32])] = &[("committed", &[0])];
    let second: &[(&str, &[i32])] = &[("committed", &[1, 0])];
    let mut groups: Vec<AskedGroup<'_>> = vec![("g", Some(first)); 3_000];
    groups.push(("other", Some(first)));
    groups.push(("g", Some(second)));
    for version in [8, 9] {
        let (_, response): (_, OffsetFetchResponse) =
            ask(&gateway, ApiKey::OffsetFetch, version, &offset_fetch_groups(&groups)).await;
        let answered: Vec<AnsweredGroup<'_>> = response
            .groups
            .iter()
            .map(|g| {
                let topics = g
                    .topics
                    .iter()
                    .map(|t| {
                        (
                            t.name.0.as_str(),
                            t.partitions.iter().map(|p| p.partition_index).collect(),
                        )
                    })
                    .collect();
                (g.group_id.0.as_str(), topics)
            })
            .collect();
        assert_eq!(
            answered,
            vec![
                ("g", vec![("committed", vec![0, 1])]),
                ("other", vec![("committed", vec![0])])
            ],
            "v{version}: each group once, its mentions' partitions merged"
        );
        // A mention asking for every committed topic makes the group a listing (nothing is
        // committed here, so an empty one).
        let listing = [("g", Some(first)), ("g", None)];
        let (_, response): (_, OffsetFetchResponse) =
            ask(&gateway, ApiKey::OffsetFetch, version, &offset_fetch_groups(&listing)).await;
        assert_eq!(response.groups.len(), 1, "v{version}");
        assert!(
            response.groups[0].topics.is_empty(),
            "v{version}: a listing of nothing committed"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn limit_response_bytes_1_offsetfetch_v8_groups_after_the_budget_are_answered_without_reads() {
    let gateway = gateway_answering_at_most(1_000);
    create_topic(&gateway, "many", 200).await;
    create_topic(&gateway, "few", 1).await;
    let all: Vec<i32> = (0..200).collect();
    let many: &[(&str, &[i32])] = &[("many", &all)];
    let few: &[(&str, &[i32])] = &[("few", &[0])];
    let groups = [("big", Some(many)), ("small", Some(few))];
    let (_, response): (_, OffsetFetchResponse) =
        ask(&gateway, ApiKey::OffsetFetch, 8, &offset_fetch_groups(&groups)).await;
    let answered: Vec<(&str, i16, usize)> = response
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.error_code, g.topics.len()))
        .collect();
    assert_eq!(
        answered,
        vec![("big", UNKNOWN_SERVER_ERROR, 0), ("small", UNKNOWN_SERVER_ERROR, 0)],
        "a group after the refused one is answered with the error, though it alone would fit"
    );
}

#[tokio::test(start_paused = true)]
async fn limit_response_bytes_1_offsetfetch_past_the_budget_answers_a_top_level_error() {
    let gateway = gateway_answering_at_most(1_000);
    create_topic(&gateway, "many", 200).await;
    let all: Vec<i32> = (0..200).collect();
    let (_, response): (_, OffsetFetchResponse) =
        ask(&gateway, ApiKey::OffsetFetch, 5, &offset_fetch("g", &[("many", &all)])).await;
    assert_eq!(response.error_code, UNKNOWN_SERVER_ERROR);
    assert!(response.topics.is_empty());
}

#[tokio::test(start_paused = true)]
async fn limit_deletegroups_duplicates_1_a_group_named_3000_times_is_deleted_and_answered_once() {
    let gateway = gateway();
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("gone")); 3_000]);
    let (_, response): (_, DeleteGroupsResponse) = ask(&gateway, ApiKey::DeleteGroups, 2, &request).await;
    assert_eq!(response.results.len(), 1, "as Kafka's groupsNames.distinct");
    assert_eq!(response.results[0].group_id.0.as_str(), "gone");
}

#[tokio::test(start_paused = true)]
async fn limit_createtopics_duplicates_1_a_topic_named_twice_is_invalid_request_and_not_created() {
    let gateway = gateway();
    let topic = CreatableTopic::default()
        .with_name(TopicName(s("twice")))
        .with_num_partitions(1)
        .with_replication_factor(1);
    let request = CreateTopicsRequest::default().with_topics(vec![topic.clone(), topic.with_num_partitions(3)]);
    for version in [2, 5] {
        let (_, response): (_, CreateTopicsResponse) = ask(&gateway, ApiKey::CreateTopics, version, &request).await;
        let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, [INVALID_REQUEST, INVALID_REQUEST], "v{version}");
    }
    assert!(!topic_exists(&gateway, "twice").await);
}

#[tokio::test(start_paused = true)]
async fn limit_deletetopics_duplicates_1_a_topic_named_twice_is_invalid_request_and_not_deleted() {
    let gateway = gateway();
    create_topic(&gateway, "kept", 1).await;
    let request = DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("kept")); 2]);
    for version in [1, 4] {
        let (_, response): (_, DeleteTopicsResponse) = ask(&gateway, ApiKey::DeleteTopics, version, &request).await;
        let codes: Vec<i16> = response.responses.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, [INVALID_REQUEST, INVALID_REQUEST], "v{version}");
    }
    assert!(topic_exists(&gateway, "kept").await);
    // A name not repeated is still answered as before.
    let once = DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("never"))]);
    let (_, response): (_, DeleteTopicsResponse) = ask(&gateway, ApiKey::DeleteTopics, 4, &once).await;
    assert_eq!(response.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
}

#[tokio::test(start_paused = true)]
async fn limit_response_bytes_1_the_dispatch_refuses_to_send_an_answer_above_the_bound() {
    // An ApiVersions answer lists every API: well above 100 bytes.
    let gateway = gateway_answering_at_most(100);
    let reply = gateway
        .handle_frame(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()))
        .await;
    match reply {
        Err(RequestError::ResponseTooLarge { key, bytes, limit, .. }) => {
            assert_eq!(key, ApiKey::ApiVersions);
            assert!(bytes > limit && limit == 100, "{bytes} > {limit}");
        }
        other => panic!("expected the answer refused, got {other:?}"),
    }
    // An answer within the bound is sent.
    let roomy = gateway_answering_at_most(64 * 1024);
    let (_, versions): (_, ApiVersionsResponse) =
        ask(&roomy, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
    assert_eq!(versions.error_code, 0);
}
