//! The old protocol versions Kafka 3.9 served and kafka-protocol 0.18 no longer decodes
//! (PROTO-LEGACY-1): OffsetCommit v0–v1, OffsetFetch v0, ListOffsets v0, CreateTopics v0–v1,
//! DeleteTopics v0, DescribeConfigs v0. Every request goes over the raw wire client, encoded by
//! the gateway crate's `protocol::legacy` codec on its client side (that codec's unit tests pin
//! it to the protocol guide's byte layouts); records are produced with a served Produce version.
//!
//! Where this spec decides what an old version means and Kafka 3.9 answered otherwise
//! (a v0 commit, which Kafka kept in ZooKeeper apart from the group; ListOffsets v0 with a
//! timestamp, which Kafka answered from segment files), the case checks the decision only under
//! the gateway profile.
//!
//! No librdkafka case: librdkafka picks the highest version both sides advertise and has no
//! setting that caps OffsetCommit, ListOffsets or the admin APIs below what the gateway serves
//! (`api.version.request=false` with `broker.version.fallback` below 0.10 would, but it also
//! drops Produce to v0–v2, which carry message format v0/v1 and stay unserved).

use super::group_cases::support::{
    coordinator_of, create_topic, fetched, join_group, offset_fetch, produce_at, sync_group, Client,
    MEMBER_ID_REQUIRED, NONE, UNKNOWN_MEMBER_ID,
};
use super::{require_versions, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use anyhow::{bail, ensure, Context};
use kafka_iggy_gateway::protocol::legacy::create_topics::{CreateTopicsV0V1Request, CreateTopicsV0V1Response};
use kafka_iggy_gateway::protocol::legacy::delete_topics::{DeleteTopicsV0Request, DeleteTopicsV0Response};
use kafka_iggy_gateway::protocol::legacy::describe_configs::{
    DescribeConfigsV0Request, DescribeConfigsV0Response, SOURCE_DEFAULT,
};
use kafka_iggy_gateway::protocol::legacy::list_offsets::{ListOffsetsV0Request, ListOffsetsV0Response};
use kafka_iggy_gateway::protocol::legacy::offset_commit::{OffsetCommitV0V1Request, OffsetCommitV0V1Response};
use kafka_iggy_gateway::protocol::legacy::offset_fetch::{OffsetFetchV0Request, OffsetFetchV0Response};
use kafka_iggy_gateway::protocol::legacy::LaidOutAs;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, GroupId, ListOffsetsRequest,
    OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const RESOURCE_TOPIC: i8 = 2;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            legacy_offset_commit_v0_and_v1_share_one_store_with_every_offset_fetch_version,
            ["CO-LEGACY-COMMIT-1", "CO-LEGACY-COMMIT-2", "PROTO-LEGACY-1"]
        ),
        case!(
            legacy_offset_commit_v1_checks_the_member_and_generation,
            ["CO-LEGACY-COMMIT-1", "PROTO-LEGACY-1"]
        ),
        case!(
            legacy_list_offsets_v0_answers_old_style_offsets,
            ["LISTOFFSETS-V0-1", "PROTO-LEGACY-1"]
        ),
        case!(
            legacy_create_topics_v0_creates_and_v1_validates,
            ["TOPIC-CREATE-LEGACY-1", "PROTO-LEGACY-1"]
        ),
        case!(legacy_delete_topics_v0_deletes_a_topic, ["PROTO-LEGACY-1"]),
        case!(
            legacy_describe_configs_v0_says_which_values_are_defaults,
            ["DESCRIBECONFIGS-V0-1", "PROTO-LEGACY-1"]
        ),
    ]
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

async fn connect(endpoint: &Endpoint) -> anyhow::Result<Client> {
    WireClient::connect(&endpoint.bootstrap).await
}

/// Sends a harmless request for `key` at the old `version` (one `protocol::legacy` decodes) and
/// decodes its answer: what `every_served_api_answers_at_its_lowest_and_highest_version` sends
/// below kafka-protocol's range.
pub async fn harmless_legacy_request(
    client: &mut WireClient<TcpStream>,
    key: ApiKey,
    version: i16,
) -> anyhow::Result<()> {
    match key {
        ApiKey::OffsetCommit => {
            let request = OffsetCommitV0V1Request {
                request: OffsetCommitRequest::default().with_group_id(GroupId(s("kig-legacy-harmless"))),
                commit_timestamps: vec![],
            };
            let _: OffsetCommitV0V1Response = client.request(key, version, &request).await?;
        }
        ApiKey::OffsetFetch => {
            let request: OffsetFetchV0Request = LaidOutAs(
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(s("kig-legacy-harmless")))
                    .with_topics(Some(vec![])),
            );
            let _: OffsetFetchV0Response = client.request(key, version, &request).await?;
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsV0Request {
                request: ListOffsetsRequest::default().with_replica_id(BrokerId(-1)),
                max_num_offsets: vec![],
            };
            let _: ListOffsetsV0Response = client.request(key, version, &request).await?;
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsV0V1Request(CreateTopicsRequest::default().with_timeout_ms(1_000));
            let _: CreateTopicsV0V1Response = client.request(key, version, &request).await?;
        }
        ApiKey::DeleteTopics => {
            let request: DeleteTopicsV0Request = LaidOutAs(DeleteTopicsRequest::default().with_timeout_ms(1_000));
            let _: DeleteTopicsV0Response = client.request(key, version, &request).await?;
        }
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsV0Request(DescribeConfigsRequest::default());
            let _: DescribeConfigsV0Response = client.request(key, version, &request).await?;
        }
        other => bail!("{other:?} v{version} has no old-version request in the suite"),
    }
    Ok(())
}

/// An OffsetCommit v0 (no generation, member or timestamp) or v1 request for one partition.
fn commit_request(
    group: &str,
    generation: i32,
    member: &str,
    t: &str,
    partition: i32,
    offset: i64,
) -> OffsetCommitV0V1Request {
    OffsetCommitV0V1Request {
        request: OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_metadata(Some(s("legacy")))])]),
        // One commit timestamp from 1970: if it set an expiry, the offset would be long gone.
        commit_timestamps: vec![1],
    }
}

/// Sends OffsetCommit v0 or v1 for one partition and returns its error code.
async fn commit(client: &mut Client, version: i16, request: &OffsetCommitV0V1Request) -> anyhow::Result<i16> {
    let response: OffsetCommitV0V1Response = client
        .request(ApiKey::OffsetCommit, version, request)
        .await
        .with_context(|| format!("OffsetCommit v{version}"))?;
    let partitions: Vec<_> = response.0.topics.iter().flat_map(|t| &t.partitions).collect();
    ensure!(
        partitions.len() == 1,
        "OffsetCommit v{version}: {} partitions answered for one",
        partitions.len()
    );
    Ok(partitions[0].error_code)
}

/// The (offset, error) OffsetFetch v0 answers for one partition.
async fn fetch_v0(client: &mut Client, group: &str, t: &str, partition: i32) -> anyhow::Result<(i64, i16)> {
    let request: OffsetFetchV0Request = LaidOutAs(
        OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic(t))
                .with_partition_indexes(vec![partition])])),
    );
    let response: OffsetFetchV0Response = client
        .request(ApiKey::OffsetFetch, 0, &request)
        .await
        .context("OffsetFetch v0")?;
    let partitions: Vec<_> = response.0.topics.iter().flat_map(|t| &t.partitions).collect();
    ensure!(
        partitions.len() == 1,
        "OffsetFetch v0: {} partitions answered for one",
        partitions.len()
    );
    Ok((partitions[0].committed_offset, partitions[0].error_code))
}

/// The offset the modern OffsetFetch (support's version) answers for one partition.
async fn fetch_modern(client: &mut Client, group: &str, t: &str, partition: i32) -> anyhow::Result<i64> {
    let response = offset_fetch(client, group, Some(&[(t, &[partition])])).await?;
    let (offset, _, _, code) = *fetched(&response)
        .get(&(t.to_string(), partition))
        .with_context(|| format!("modern OffsetFetch did not answer {t}-{partition}"))?;
    ensure!(code == NONE, "modern OffsetFetch {t}-{partition}: error {code}");
    Ok(offset)
}

pub async fn legacy_offset_commit_v0_and_v1_share_one_store_with_every_offset_fetch_version(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let t = endpoint.unique_topic("legacy-commit");
    let group = endpoint.unique_topic("legacy-commit-g");
    create_topic(&endpoint, &t, 1).await?;
    produce_at(&endpoint, &t, 0, 0, 5).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;

    let code = commit(&mut client, 0, &commit_request(&group, -1, "", &t, 0, 2)).await?;
    ensure!(code == NONE, "OffsetCommit v0 of offset 2: error {code}");
    let (offset, code) = fetch_v0(&mut client, &group, &t, 0).await?;
    ensure!(
        (offset, code) == (2, NONE),
        "OffsetFetch v0 after the v0 commit: offset {offset}, error {code}"
    );
    let modern = fetch_modern(&mut client, &group, &t, 0).await?;
    ensure!(
        modern == 2,
        "the modern OffsetFetch after a v0 commit answered {modern}, expected 2 (one store)"
    );

    // A standalone v1 commit (generation -1, no member), its commit timestamp from 1970.
    let code = commit(&mut client, 1, &commit_request(&group, -1, "", &t, 0, 4)).await?;
    ensure!(code == NONE, "standalone OffsetCommit v1 of offset 4: error {code}");
    let (offset, code) = fetch_v0(&mut client, &group, &t, 0).await?;
    ensure!(
        (offset, code) == (4, NONE),
        "OffsetFetch v0 after the v1 commit: offset {offset}, error {code} (a 1970 commit timestamp must not expire it)"
    );
    let modern = fetch_modern(&mut client, &group, &t, 0).await?;
    ensure!(
        modern == 4,
        "the modern OffsetFetch after a v1 commit answered {modern}, expected 4"
    );

    let code = commit(&mut client, 0, &commit_request(&group, -1, "", &t, 7, 1)).await?;
    ensure!(
        code == UNKNOWN_TOPIC_OR_PARTITION,
        "OffsetCommit v0 to partition 7 of a one-partition topic: error {code}, expected UNKNOWN_TOPIC_OR_PARTITION"
    );
    Ok(Outcome::Passed)
}

pub async fn legacy_offset_commit_v1_checks_the_member_and_generation(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let t = endpoint.unique_topic("legacy-member");
    let group = endpoint.unique_topic("legacy-member-g");
    create_topic(&endpoint, &t, 1).await?;
    produce_at(&endpoint, &t, 0, 0, 3).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut client, &group, "", 10_000, 10_000, b"m").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "first JoinGroup: error {}",
        first.error_code
    );
    let member = first.member_id.as_str().to_string();
    let joined = join_group(&mut client, &group, &member, 10_000, 10_000, b"m").await?;
    ensure!(joined.error_code == NONE, "JoinGroup: error {}", joined.error_code);
    let generation = joined.generation_id;
    let synced = sync_group(&mut client, &group, generation, &member, &[(&member, b"all")]).await?;
    ensure!(synced.error_code == NONE, "SyncGroup: error {}", synced.error_code);

    // What sarama 1.22 sends at Version = V2_1_0_0: OffsetCommit v1 from a member.
    let code = commit(&mut client, 1, &commit_request(&group, generation, &member, &t, 0, 3)).await?;
    ensure!(code == NONE, "the member's OffsetCommit v1: error {code}");
    let (offset, code) = fetch_v0(&mut client, &group, &t, 0).await?;
    ensure!(
        (offset, code) == (3, NONE),
        "OffsetFetch v0 after the member's commit: offset {offset}, error {code}"
    );

    let code = commit(
        &mut client,
        1,
        &commit_request(&group, generation + 1, &member, &t, 0, 1),
    )
    .await?;
    ensure!(
        code == ILLEGAL_GENERATION,
        "OffsetCommit v1 for generation {} of a group at {generation}: error {code}, expected ILLEGAL_GENERATION",
        generation + 1
    );
    if !endpoint.profile.is_kafka() {
        // CO-LEGACY-COMMIT-1: a v0 commit is a standalone commit here, which a group with members
        // refuses; Kafka 3.9 wrote it to ZooKeeper, outside the group.
        let code = commit(&mut client, 0, &commit_request(&group, -1, "", &t, 0, 1)).await?;
        ensure!(
            code == UNKNOWN_MEMBER_ID,
            "OffsetCommit v0 to a group with a member: error {code}, expected UNKNOWN_MEMBER_ID"
        );
    }
    let (offset, _) = fetch_v0(&mut client, &group, &t, 0).await?;
    ensure!(offset == 3, "refused commits changed the committed offset to {offset}");
    Ok(Outcome::Passed)
}

/// ListOffsets v0 for one partition: its error and old_style_offsets.
async fn list_v0(
    client: &mut Client,
    t: &str,
    partition: i32,
    timestamp: i64,
    max_num_offsets: i32,
) -> anyhow::Result<(i16, Vec<i64>)> {
    let request = ListOffsetsV0Request {
        request: ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default().with_name(topic(t)).with_partitions(
                vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp)],
            )]),
        max_num_offsets: vec![max_num_offsets],
    };
    let response: ListOffsetsV0Response = client
        .request(ApiKey::ListOffsets, 0, &request)
        .await
        .with_context(|| format!("ListOffsets v0 {t}-{partition} at {timestamp}"))?;
    let partitions: Vec<_> = response.topics.iter().flat_map(|t| &t.partitions).collect();
    ensure!(
        partitions.len() == 1,
        "ListOffsets v0: {} partitions answered for one",
        partitions.len()
    );
    ensure!(
        partitions[0].partition_index == partition,
        "ListOffsets v0 answered partition {}",
        partitions[0].partition_index
    );
    Ok((partitions[0].error_code, partitions[0].old_style_offsets.clone()))
}

pub async fn legacy_list_offsets_v0_answers_old_style_offsets(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let t = endpoint.unique_topic("legacy-list-offsets");
    create_topic(&endpoint, &t, 1).await?;
    produce_at(&endpoint, &t, 0, 0, 3).await?;
    let mut client = connect(&endpoint).await?;
    for (timestamp, max, expected, what) in [
        (-1, 1, vec![3], "latest"),
        (-2, 1, vec![0], "earliest"),
        (-1, 0, vec![], "latest, max_num_offsets 0"),
    ] {
        let answer = list_v0(&mut client, &t, 0, timestamp, max).await?;
        ensure!(
            answer == (NONE, expected.clone()),
            "ListOffsets v0 {what}: {answer:?}, expected ({NONE}, {expected:?})"
        );
    }
    let (code, offsets) = list_v0(&mut client, &t, 1, -1, 1).await?;
    ensure!(
        code == UNKNOWN_TOPIC_OR_PARTITION && offsets.is_empty(),
        "ListOffsets v0 for partition 1 of a one-partition topic: error {code}, offsets {offsets:?}"
    );
    if !endpoint.profile.is_kafka() {
        // LISTOFFSETS-V0-1: a timestamp answers the first record at or after it, at most once.
        let answer = list_v0(&mut client, &t, 0, -1, 5).await?;
        ensure!(
            answer == (NONE, vec![3]),
            "ListOffsets v0 latest with max 5: {answer:?}, expected one offset, 3"
        );
        let answer = list_v0(&mut client, &t, 0, 0, 1).await?;
        ensure!(
            answer == (NONE, vec![0]),
            "ListOffsets v0 at timestamp 0: {answer:?}, expected [0]"
        );
        let tomorrow = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64 + 86_400_000;
        let answer = list_v0(&mut client, &t, 0, tomorrow, 1).await?;
        ensure!(
            answer == (NONE, vec![]),
            "ListOffsets v0 at a timestamp after every record: {answer:?}, expected []"
        );
        let answer = list_v0(&mut client, &t, 0, -3, 1).await?;
        ensure!(
            answer == (NONE, vec![]),
            "ListOffsets v0 at timestamp -3 (no meaning in v0): {answer:?}, expected []"
        );
    }
    Ok(Outcome::Passed)
}

fn creatable(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic(name))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
}

/// CreateTopics v0 or v1 for one topic: its error code and (v1) message.
async fn create_old(
    client: &mut Client,
    version: i16,
    name: &str,
    validate_only: bool,
) -> anyhow::Result<(i16, Option<String>)> {
    let request = CreateTopicsV0V1Request(
        CreateTopicsRequest::default()
            .with_topics(vec![creatable(name, 2)])
            .with_timeout_ms(30_000)
            .with_validate_only(validate_only),
    );
    let response: CreateTopicsV0V1Response = client
        .request(ApiKey::CreateTopics, version, &request)
        .await
        .with_context(|| format!("CreateTopics v{version} {name}"))?;
    ensure!(
        response.0.topics.len() == 1,
        "CreateTopics v{version}: {} topics answered for one",
        response.0.topics.len()
    );
    let result = &response.0.topics[0];
    ensure!(
        result.name.as_str() == name,
        "CreateTopics v{version} answered {:?} for {name:?}",
        result.name.as_str()
    );
    Ok((result.error_code, result.error_message.as_ref().map(|m| m.to_string())))
}

/// DeleteTopics v0 for one topic: its error code.
async fn delete_old(client: &mut Client, name: &str) -> anyhow::Result<i16> {
    let request: DeleteTopicsV0Request = LaidOutAs(
        DeleteTopicsRequest::default()
            .with_topic_names(vec![topic(name)])
            .with_timeout_ms(30_000),
    );
    let response: DeleteTopicsV0Response = client
        .request(ApiKey::DeleteTopics, 0, &request)
        .await
        .with_context(|| format!("DeleteTopics v0 {name}"))?;
    ensure!(
        response.0.responses.len() == 1,
        "DeleteTopics v0: {} topics answered for one",
        response.0.responses.len()
    );
    let result = &response.0.responses[0];
    ensure!(
        result.name.as_ref().map(|n| n.as_str()) == Some(name),
        "DeleteTopics v0 answered {:?} for {name:?}",
        result.name
    );
    Ok(result.error_code)
}

pub async fn legacy_create_topics_v0_creates_and_v1_validates(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = require_versions(
        &endpoint,
        &[
            (ApiKey::CreateTopics, 0),
            (ApiKey::CreateTopics, 1),
            (ApiKey::DeleteTopics, 0),
        ],
    )
    .await?
    {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let created = endpoint.unique_topic("legacy-create-v0");
    let (code, _) = create_old(&mut client, 0, &created, false).await?;
    ensure!(code == NONE, "CreateTopics v0: error {code}");
    let (code, _) = create_old(&mut client, 0, &created, false).await?;
    ensure!(
        code == TOPIC_ALREADY_EXISTS,
        "CreateTopics v0 of an existing topic: error {code}, expected TOPIC_ALREADY_EXISTS"
    );
    let (code, message) = create_old(&mut client, 1, &created, false).await?;
    ensure!(
        code == TOPIC_ALREADY_EXISTS && message.is_some(),
        "CreateTopics v1 of an existing topic: error {code}, message {message:?}; v1 carries the message"
    );

    let validated = endpoint.unique_topic("legacy-create-v1");
    let (code, _) = create_old(&mut client, 1, &validated, true).await?;
    ensure!(code == NONE, "CreateTopics v1 validate_only: error {code}");
    let code = delete_old(&mut client, &validated).await?;
    ensure!(
        code == UNKNOWN_TOPIC_OR_PARTITION,
        "after a validate_only CreateTopics v1 the topic exists (DeleteTopics v0 answered {code})"
    );
    let (code, _) = create_old(&mut client, 1, &validated, false).await?;
    ensure!(code == NONE, "CreateTopics v1: error {code}");
    for name in [&created, &validated] {
        let code = delete_old(&mut client, name).await?;
        ensure!(code == NONE, "DeleteTopics v0 of {name}: error {code}");
    }
    Ok(Outcome::Passed)
}

pub async fn legacy_delete_topics_v0_deletes_a_topic(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = require_versions(&endpoint, &[(ApiKey::DeleteTopics, 0)]).await? {
        return Ok(skip);
    }
    let t = endpoint.unique_topic("legacy-delete");
    create_topic(&endpoint, &t, 1).await?;
    let mut client = connect(&endpoint).await?;
    let code = delete_old(&mut client, &t).await?;
    ensure!(code == NONE, "DeleteTopics v0: error {code}");
    let code = delete_old(&mut client, &t).await?;
    ensure!(
        code == UNKNOWN_TOPIC_OR_PARTITION,
        "DeleteTopics v0 of a deleted topic: error {code}, expected UNKNOWN_TOPIC_OR_PARTITION"
    );
    Ok(Outcome::Passed)
}

pub async fn legacy_describe_configs_v0_says_which_values_are_defaults(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = require_versions(&endpoint, &[(ApiKey::DescribeConfigs, 0)]).await? {
        return Ok(skip);
    }
    let t = endpoint.unique_topic("legacy-describe");
    create_topic(&endpoint, &t, 1).await?;
    let mut client = connect(&endpoint).await?;
    let describe = |keys: Option<Vec<StrBytes>>, name: &str| {
        DescribeConfigsV0Request(DescribeConfigsRequest::default().with_resources(
            vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(s(name))
            .with_configuration_keys(keys)],
        ))
    };
    let response: DescribeConfigsV0Response = client
        .request(ApiKey::DescribeConfigs, 0, &describe(None, &t))
        .await
        .context("DescribeConfigs v0 of every key")?;
    let result = response
        .0
        .results
        .first()
        .context("DescribeConfigs v0 answered no resource")?;
    ensure!(
        result.error_code == NONE,
        "DescribeConfigs v0: error {}",
        result.error_code
    );
    let cleanup = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "cleanup.policy")
        .context("DescribeConfigs v0 lists no cleanup.policy")?;
    // The decoder turns is_default into config_source DEFAULT_CONFIG (5).
    ensure!(
        cleanup.config_source == SOURCE_DEFAULT && cleanup.value.as_deref() == Some("delete"),
        "cleanup.policy of a topic created without configs: value {:?}, is_default {}",
        cleanup.value,
        cleanup.config_source == SOURCE_DEFAULT
    );

    let response: DescribeConfigsV0Response = client
        .request(
            ApiKey::DescribeConfigs,
            0,
            &describe(Some(vec![s("cleanup.policy")]), &t),
        )
        .await
        .context("DescribeConfigs v0 of one key")?;
    let names: Vec<_> = response
        .0
        .results
        .iter()
        .flat_map(|r| &r.configs)
        .map(|c| c.name.to_string())
        .collect();
    ensure!(
        names == ["cleanup.policy"],
        "DescribeConfigs v0 for cleanup.policy listed {names:?}"
    );

    let missing = endpoint.unique_topic("legacy-describe-missing");
    let response: DescribeConfigsV0Response = client
        .request(ApiKey::DescribeConfigs, 0, &describe(None, &missing))
        .await
        .context("DescribeConfigs v0 of a missing topic")?;
    let code = response.0.results.first().map(|r| r.error_code);
    ensure!(
        code == Some(UNKNOWN_TOPIC_OR_PARTITION),
        "DescribeConfigs v0 of a missing topic: error {code:?}, expected UNKNOWN_TOPIC_OR_PARTITION"
    );
    Ok(Outcome::Passed)
}
