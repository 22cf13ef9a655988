//! Valid requests that amplify (issue 31): one small request naming the same group, topic or
//! partition thousands of times, whose answer an endpoint must bound by what it will send, not
//! by what the request names (docs/spec/limits.md, LIMIT-RESPONSE-BYTES-1 and
//! the rules on repeated names). Each case runs its request under the hostile cases'
//! [`Watchdog`]: a well-behaved client must stay answered throughout and after.
//!
//! Where Kafka answers each mention again (DescribeGroups, OffsetFetch), the
//! case lists the gateway's rule under `deviates` and, under the kafka profile, checks Kafka's
//! answer instead, with few enough mentions that the client stays bounded in memory (the
//! DescribeGroups attack on a broker answers about 1 GB). Every wait is bounded by
//! [`LIVENESS`]; the client reads no answer above the wire client's 256 MiB frame cap.

use super::group_cases::support::{coordinator_of, WAIT};
use super::hostile_cases::{
    bounded, connect, decoded, new_topic, send_hostile, string, topic_name, Answer, Probes, Watchdog, LIVENESS,
};
use super::{Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context};
use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_wire_client::WireClient;
use tokio::net::TcpStream;
use tokio::time::timeout;

type Client = WireClient<TcpStream>;

// Versions the cases speak: the v0 for the group APIs, ordinary ones elsewhere.
const JOIN_GROUP_V: i16 = 0;
const SYNC_GROUP_V: i16 = 0;
const DESCRIBE_GROUPS_V: i16 = 0;
const LEAVE_GROUP_V: i16 = 0;
const METADATA_V: i16 = 9;
const LIST_OFFSETS_V: i16 = 7;
const OFFSET_FETCH_V: i16 = 7;
const DESCRIBE_CONFIGS_V: i16 = 1;
const DELETE_GROUPS_V: i16 = 2;

// Kafka error codes.
const NONE: i16 = 0;
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;

/// ConfigResource.Type.TOPIC.
const RESOURCE_TOPIC: i8 = 2;

/// The group: 200 KiB of protocol metadata and of assignment, named 2,500 times.
const GROUP_BLOB_BYTES: usize = 200 * 1024;
const GROUP_MENTIONS: usize = 2_500;
/// What the case sends a Kafka broker instead, which answers every mention in full.
const GROUP_MENTIONS_FOR_KAFKA: usize = 3;
/// Partitions of the topic the topic cases name, and how often they name it.
const TOPIC_PARTITIONS: i32 = 100;
const TOPIC_MENTIONS: usize = 4_000;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            answer_describe_groups_naming_one_400_kib_group_2500_times,
            ["LIMIT-DESCRIBEGROUPS-DUPLICATES-1", "LIMIT-RESPONSE-BYTES-1"],
            deviates: ["LIMIT-DESCRIBEGROUPS-DUPLICATES-1"]
        ),
        case!(
            answer_metadata_naming_one_100_partition_topic_4000_times,
            ["LIMIT-METADATA-DUPLICATES-1", "LIMIT-RESPONSE-BYTES-1"]
        ),
        case!(
            answer_list_offsets_naming_one_partition_4000_times,
            ["LIMIT-LISTOFFSETS-DUPLICATES-1"]
        ),
        case!(
            answer_offset_fetch_naming_one_partition_4000_times,
            ["LIMIT-OFFSETFETCH-DUPLICATES-1"],
            deviates: ["LIMIT-OFFSETFETCH-DUPLICATES-1"]
        ),
        case!(
            answer_describe_configs_naming_one_topic_4000_times,
            ["LIMIT-DESCRIBECONFIGS-DUPLICATES-1"]
        ),
        case!(
            answer_delete_groups_naming_one_group_4000_times,
            ["LIMIT-DELETEGROUPS-DUPLICATES-1"]
        ),
    ]
}

/// Sends `request` as one frame on `client` and returns the answer's frame size and body; a
/// closed connection fails the case (these requests are valid).
async fn exchange<Req: Encodable, Resp: Decodable>(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    request: &Req,
    what: &str,
) -> anyhow::Result<(usize, Resp)> {
    let (correlation_id, frame) = client.encode_request(key, version, request)?;
    match send_hostile(client, &frame, what, LIVENESS).await? {
        Answer::Closed => bail!("{what}: the endpoint closed the connection instead of answering a valid request"),
        Answer::Frame(answer) => {
            let bytes = answer.len();
            Ok((bytes, decoded(key, version, correlation_id, answer, what)?))
        }
    }
}

/// The one member of a new group on its coordinator: joined with JoinGroup v0 (protocol type
/// `x`, one protocol with [`GROUP_BLOB_BYTES`] of metadata, a 300 s session) and synced as its
/// leader with an assignment as large.
struct BigGroup {
    client: Client,
    group: String,
    member_id: String,
}

impl BigGroup {
    async fn form(endpoint: &Endpoint) -> anyhow::Result<Self> {
        let group = endpoint.unique_topic("kig-answer-group");
        let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(string(&group)))
            .with_session_timeout_ms(300_000)
            .with_protocol_type(string("x"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(string("p"))
                .with_metadata(Bytes::from(vec![b'm'; GROUP_BLOB_BYTES]))]);
        // A broker may hold the first join for group.initial.rebalance.delay.ms (3 s).
        let joined: JoinGroupResponse = timeout(WAIT, client.request(ApiKey::JoinGroup, JOIN_GROUP_V, &join))
            .await
            .context("JoinGroup v0: not answered")??;
        ensure!(
            joined.error_code == NONE,
            "JoinGroup v0 of {group}: error {}",
            joined.error_code
        );
        let member_id = joined.member_id.as_str().to_string();
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(string(&group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(string(&member_id))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(string(&member_id))
                .with_assignment(Bytes::from(vec![b'a'; GROUP_BLOB_BYTES]))]);
        let synced: SyncGroupResponse =
            bounded("SyncGroup v0", client.request(ApiKey::SyncGroup, SYNC_GROUP_V, &sync)).await?;
        ensure!(
            synced.error_code == NONE,
            "SyncGroup v0 of {group}: error {}",
            synced.error_code
        );
        Ok(Self {
            client,
            group,
            member_id,
        })
    }

    /// Leaves, so the group does not outlive the case by its 300 s session.
    async fn leave(mut self) -> anyhow::Result<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(string(&self.group)))
            .with_member_id(string(&self.member_id));
        let left: LeaveGroupResponse = bounded(
            "LeaveGroup",
            self.client.request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &request),
        )
        .await?;
        ensure!(
            left.error_code == NONE,
            "LeaveGroup of {}: error {}",
            self.group,
            left.error_code
        );
        Ok(())
    }
}

/// The attack: one DescribeGroups v0 naming a group with 400 KiB of member metadata and
/// assignment 2,500 times (a 25 KB request that built a 1 GB answer). The gateway describes the
/// group once, or answers repeats with an error and no members, so the answer stays within a few
/// copies of the group; a Kafka broker answers every mention in full, so under the kafka profile
/// the case names it three times and expects three full descriptions.
pub async fn answer_describe_groups_naming_one_400_kib_group_2500_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut group = BigGroup::form(&endpoint).await?;
            let kafka = endpoint.profile.is_kafka();
            let mentions = if kafka { GROUP_MENTIONS_FOR_KAFKA } else { GROUP_MENTIONS };
            let request =
                DescribeGroupsRequest::default().with_groups(vec![GroupId(string(&group.group)); mentions]);
            let what = format!("DescribeGroups v0 naming one group {mentions} times");
            let (frame_bytes, described): (_, DescribeGroupsResponse) = exchange(
                &mut group.client,
                ApiKey::DescribeGroups,
                DESCRIBE_GROUPS_V,
                &request,
                &what,
            )
            .await?;
            ensure!(
                described.groups.iter().all(|g| g.group_id.0.as_str() == group.group),
                "{what}: the answer names a group that was not asked for"
            );
            let full: Vec<_> = described
                .groups
                .iter()
                .filter(|g| g.error_code == NONE && !g.members.is_empty())
                .collect();
            for g in &full {
                let member = &g.members[0];
                ensure!(
                    member.member_metadata.len() == GROUP_BLOB_BYTES
                        && member.member_assignment.len() == GROUP_BLOB_BYTES,
                    "{what}: the member's metadata and assignment are {} and {} bytes, expected {GROUP_BLOB_BYTES} each",
                    member.member_metadata.len(),
                    member.member_assignment.len()
                );
            }
            if kafka {
                ensure!(
                    full.len() == mentions,
                    "{what}: {} full descriptions; Kafka describes every mention",
                    full.len()
                );
            } else {
                ensure!(
                    full.len() == 1,
                    "{what}: {} full descriptions; the gateway describes a group once",
                    full.len()
                );
                ensure!(
                    described.groups.iter().filter(|g| g.error_code == NONE).count() == 1,
                    "{what}: a repeat is answered without an error"
                );
                ensure!(
                    frame_bytes < 4 * GROUP_BLOB_BYTES,
                    "{what}: a {frame_bytes}-byte answer; one description is about {} bytes",
                    2 * GROUP_BLOB_BYTES
                );
            }
            group.leave().await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One Metadata v9 naming a 100-partition topic 4,000 times: Kafka takes the names as a set and
/// answers the topic once, with its 100 partitions, not 400,000 partition entries.
pub async fn answer_metadata_naming_one_100_partition_topic_4000_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-answer-metadata", TOPIC_PARTITIONS).await?;
            let entry = MetadataRequestTopic::default().with_name(Some(topic_name(&topic)));
            let request = MetadataRequest::default()
                .with_topics(Some(vec![entry; TOPIC_MENTIONS]))
                .with_allow_auto_topic_creation(false);
            let what = format!("Metadata v9 naming one topic {TOPIC_MENTIONS} times");
            let (frame_bytes, response): (_, MetadataResponse) =
                exchange(&mut client, ApiKey::Metadata, METADATA_V, &request, &what).await?;
            let entries: Vec<_> = response
                .topics
                .iter()
                .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
                .collect();
            ensure!(
                entries.len() == 1,
                "{what}: the topic is answered {} times; Kafka answers a set of names",
                entries.len()
            );
            ensure!(
                entries[0].error_code == NONE && entries[0].partitions.len() == TOPIC_PARTITIONS as usize,
                "{what}: error {} with {} partitions, expected {TOPIC_PARTITIONS}",
                entries[0].error_code,
                entries[0].partitions.len()
            );
            ensure!(frame_bytes < 64 * 1024, "{what}: a {frame_bytes}-byte answer");
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One ListOffsets v7 naming partition 0 of a topic in 4,000 topic entries: every mention is
/// INVALID_REQUEST, as Kafka answers a partition named twice, and nothing is looked up.
pub async fn answer_list_offsets_naming_one_partition_4000_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-answer-offsets", TOPIC_PARTITIONS).await?;
            let entry = ListOffsetsTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(-1)]);
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![entry; TOPIC_MENTIONS]);
            let what = format!("ListOffsets v7 naming one partition {TOPIC_MENTIONS} times");
            let (_, response): (_, ListOffsetsResponse) =
                exchange(&mut client, ApiKey::ListOffsets, LIST_OFFSETS_V, &request, &what).await?;
            let codes: Vec<i16> = response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .collect();
            ensure!(
                codes.len() == TOPIC_MENTIONS && codes.iter().all(|&c| c == INVALID_REQUEST),
                "{what}: {} answers, {} of them INVALID_REQUEST; Kafka answers each mention of a repeated partition INVALID_REQUEST",
                codes.len(),
                codes.iter().filter(|&&c| c == INVALID_REQUEST).count()
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One OffsetFetch v7 naming partition 0 of a topic in 4,000 topic entries, for a group with
/// nothing committed: the gateway answers the partition once; Kafka answers each mention, each
/// nothing committed (-1).
pub async fn answer_offset_fetch_naming_one_partition_4000_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-answer-fetch", TOPIC_PARTITIONS).await?;
            let group = endpoint.unique_topic("kig-answer-fetch-group");
            let mut coordinator = coordinator_of(&endpoint.bootstrap, &group).await?;
            let entry = OffsetFetchRequestTopic::default()
                .with_name(topic_name(&topic))
                .with_partition_indexes(vec![0]);
            let request = OffsetFetchRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_topics(Some(vec![entry; TOPIC_MENTIONS]));
            let what = format!("OffsetFetch v7 naming one partition {TOPIC_MENTIONS} times");
            let (_, response): (_, OffsetFetchResponse) =
                exchange(&mut coordinator, ApiKey::OffsetFetch, OFFSET_FETCH_V, &request, &what).await?;
            ensure!(response.error_code == NONE, "{what}: error {}", response.error_code);
            let answered: Vec<_> = response.topics.iter().flat_map(|t| &t.partitions).collect();
            ensure!(
                answered
                    .iter()
                    .all(|p| p.partition_index == 0 && p.error_code == NONE && p.committed_offset == -1),
                "{what}: an answer other than partition 0 with nothing committed"
            );
            let expected = if endpoint.profile.is_kafka() { TOPIC_MENTIONS } else { 1 };
            ensure!(
                answered.len() == expected,
                "{what}: the partition is answered {} times, expected {expected}",
                answered.len()
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One DescribeConfigs v1 naming a topic 4,000 times for one key: every mention is answered with
/// that key alone, as Kafka does (a client may name a resource twice for two sets of keys); the
/// answer is a few fixed entries per mention, and the gateway looks the topic up once.
pub async fn answer_describe_configs_naming_one_topic_4000_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-answer-configs", 1).await?;
            let resource = DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(string(&topic))
                .with_configuration_keys(Some(vec![string("retention.ms")]));
            let request = DescribeConfigsRequest::default().with_resources(vec![resource; TOPIC_MENTIONS]);
            let what = format!("DescribeConfigs v1 naming one topic {TOPIC_MENTIONS} times");
            let (_, response): (_, DescribeConfigsResponse) = exchange(
                &mut client,
                ApiKey::DescribeConfigs,
                DESCRIBE_CONFIGS_V,
                &request,
                &what,
            )
            .await?;
            ensure!(
                response.results.iter().all(|r| r.error_code == NONE
                    && r.resource_name.as_str() == topic
                    && r.configs.len() == 1
                    && r.configs[0].name.as_str() == "retention.ms"),
                "{what}: an answer with an error, for another resource, or with other configs than retention.ms"
            );
            ensure!(
                response.results.len() == TOPIC_MENTIONS,
                "{what}: the topic is answered {} times; Kafka answers every mention",
                response.results.len()
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Holds the codes of a DeleteGroups naming a group that never existed `mentions` times.
/// LIMIT-DELETEGROUPS-DUPLICATES-1: the gateway answers the distinct group once,
/// GROUP_ID_NOT_FOUND. Kafka's answer is not established: its results collection is keyed by
/// group id but keeps duplicates (DeleteGroupsResponse.json, mapKey on GroupId), so under the
/// kafka profile one answer per mention is accepted too, each GROUP_ID_NOT_FOUND.
fn check_delete_groups_codes(profile: Profile, mentions: usize, codes: &[i16]) -> anyhow::Result<()> {
    let all_not_found = codes.iter().all(|&c| c == GROUP_ID_NOT_FOUND);
    let once = codes.len() == 1;
    let per_mention = profile.is_kafka() && codes.len() == mentions;
    ensure!(
        all_not_found && (once || per_mention),
        "{} answers (the first {:?}); expected GROUP_ID_NOT_FOUND once{}",
        codes.len(),
        &codes[..codes.len().min(5)],
        if profile.is_kafka() { " or once per mention" } else { "" }
    );
    Ok(())
}

/// One DeleteGroups v2 naming a group that never existed 4,000 times: the group answered once,
/// GROUP_ID_NOT_FOUND, or under the kafka profile once per mention.
pub async fn answer_delete_groups_naming_one_group_4000_times(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-answer-deleted");
            let mut coordinator = coordinator_of(&endpoint.bootstrap, &group).await?;
            let request =
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(string(&group)); TOPIC_MENTIONS]);
            let what = format!("DeleteGroups v2 naming one group {TOPIC_MENTIONS} times");
            let (_, response): (_, DeleteGroupsResponse) =
                exchange(&mut coordinator, ApiKey::DeleteGroups, DELETE_GROUPS_V, &request, &what).await?;
            let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
            check_delete_groups_codes(endpoint.profile, TOPIC_MENTIONS, &codes).with_context(|| what.clone())
        })
        .await?;
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_groups_of_a_repeated_group_is_answered_once_or_under_kafka_once_per_mention() {
        let per_mention = vec![GROUP_ID_NOT_FOUND; 3];
        for profile in [Profile::Gateway, Profile::Kafka] {
            assert!(check_delete_groups_codes(profile, 3, &[GROUP_ID_NOT_FOUND]).is_ok());
            assert!(check_delete_groups_codes(profile, 3, &[NONE]).is_err());
            assert!(check_delete_groups_codes(profile, 3, &[GROUP_ID_NOT_FOUND; 2]).is_err());
            assert!(check_delete_groups_codes(profile, 3, &[]).is_err());
        }
        assert!(check_delete_groups_codes(Profile::Gateway, 3, &per_mention).is_err());
        assert!(check_delete_groups_codes(Profile::Kafka, 3, &per_mention).is_ok());
        assert!(check_delete_groups_codes(Profile::Kafka, 3, &[GROUP_ID_NOT_FOUND, NONE, GROUP_ID_NOT_FOUND]).is_err());
    }
}
