//! Raw OffsetCommit and OffsetFetch requests over a [`WireClient`]: the commits and reads of
//! committed offsets that the group cases and the simulated committing consumer both send.

use crate::WireClient;
use anyhow::{bail, ensure, Context as _};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use tokio::io::{AsyncRead, AsyncWrite};

// Versions the requests speak.
pub const OFFSET_COMMIT_V: i16 = 8;
pub const OFFSET_FETCH_V: i16 = 5;

/// The metadata and leader epoch every raw commit sends; the gateway must not return them
/// (CO-METADATA-1), Kafka returns both. The epoch is that of a new topic's partitions on a
/// Kafka cluster whose leader never changed, as a client committing what it read would
/// send: a broker may check it against the partition's (librdkafka's mock cluster does).
pub const COMMIT_METADATA: &str = "kig-conformance-metadata";
pub const COMMIT_LEADER_EPOCH: i32 = 0;

/// Kafka's error code for success.
const NONE: i16 = 0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// OffsetCommit v8 with the given generation and member (-1 and "" commit standalone);
/// returns (topic, partition, error code) for every partition answered.
pub async fn offset_commit<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> anyhow::Result<Vec<(String, i32, i16)>> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for &(topic, partition, offset) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(COMMIT_LEADER_EPOCH)
            .with_committed_metadata(Some(s(COMMIT_METADATA)));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(topics);
    let response: OffsetCommitResponse = client
        .request(ApiKey::OffsetCommit, OFFSET_COMMIT_V, &request)
        .await
        .with_context(|| format!("OffsetCommit for group {group}"))?;
    Ok(response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.as_str().to_string(), p.partition_index, p.error_code))
        })
        .collect())
}

/// A standalone commit (generation -1, no member) of one offset; returns its error code.
pub async fn commit_one<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> anyhow::Result<i16> {
    let answers = offset_commit(client, group, -1, "", &[(topic, partition, offset)]).await?;
    match answers.as_slice() {
        [(t, p, code)] if t == topic && *p == partition => Ok(*code),
        other => bail!("OffsetCommit of {topic}-{partition} for {group} answered {other:?}"),
    }
}

/// OffsetFetch v5: `None` asks for every committed partition of the group.
pub async fn offset_fetch<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    topics: Option<&[(&str, &[i32])]>,
) -> anyhow::Result<OffsetFetchResponse> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(topics.map(|ts| {
            ts.iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.to_vec())
                })
                .collect()
        }));
    client
        .request(ApiKey::OffsetFetch, OFFSET_FETCH_V, &request)
        .await
        .with_context(|| format!("OffsetFetch for group {group}"))
}

/// One partition of an OffsetFetch answer: (offset, leader epoch, metadata, error code).
pub type FetchedOffset = (i64, i32, Option<String>, i16);

/// The committed offset of one partition, with the whole answer checked for errors.
pub async fn fetch_one<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut WireClient<S>,
    group: &str,
    topic: &str,
    partition: i32,
) -> anyhow::Result<FetchedOffset> {
    let response = offset_fetch(client, group, Some(&[(topic, &[partition])])).await?;
    ensure!(
        response.error_code == NONE,
        "OffsetFetch for {group}: error {}",
        response.error_code
    );
    let all = fetched(&response);
    match all.get(&(topic.to_string(), partition)) {
        Some(found) if all.len() == 1 => Ok(found.clone()),
        _ => bail!("OffsetFetch of {topic}-{partition} for {group} answered {all:?}"),
    }
}

/// Every partition of an OffsetFetch answer, by (topic, partition).
pub fn fetched(response: &OffsetFetchResponse) -> BTreeMap<(String, i32), FetchedOffset> {
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    (t.name.0.as_str().to_string(), p.partition_index),
                    (
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata.as_ref().map(|m| m.as_str().to_string()),
                        p.error_code,
                    ),
                )
            })
        })
        .collect()
}
