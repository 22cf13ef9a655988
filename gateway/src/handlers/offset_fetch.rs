//! OffsetFetch: committed offsets read from Iggy by any gateway (reading needs no membership);
//! nothing committed is -1, metadata "" and leader epoch -1 (CO-METADATA-1); a null topic list
//! enumerates every mapped topic and answers with Kafka names (CO-FETCH-ALL-1).

use super::delete_groups::mapped_topics;
use super::join_group::valid_group_id;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::offset_store::OffsetStore;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

fn partition(index: i32, offset: i64, code: i16) -> OffsetFetchResponsePartition {
    OffsetFetchResponsePartition::default()
        .with_partition_index(index)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(-1)
        .with_metadata(Some(StrBytes::default()))
        .with_error_code(code)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let group_id = request.group_id.0.as_str();
    let with_error = |code: i16| {
        let response = OffsetFetchResponse::default();
        if version >= 2 {
            response.with_error_code(code)
        } else {
            response
        }
    };
    if !valid_group_id(group_id) {
        return with_error(ResponseError::InvalidGroupId.code());
    }
    let store = OffsetStore {
        backend: session.backend.as_ref(),
        client: session.offsets_client,
        restores: &gateway.offset_members.restores,
    };
    let listed = request.topics.is_none();
    let wanted: Vec<(TopicName, Option<Vec<i32>>)> = match request.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.name, Some(t.partition_indexes)))
            .collect(),
        None => mapped_topics(gateway, session)
            .await
            .into_iter()
            .map(|(kafka, _)| (TopicName(StrBytes::from_string(kafka)), None))
            .collect(),
    };
    let mut topics = Vec::with_capacity(wanted.len());
    for (name, indexes) in wanted {
        let kafka = name.0.as_str().to_string();
        let partitions: Vec<OffsetFetchResponsePartition> = match super::resolve_topic(gateway, session, &kafka).await {
            // AUTHZ-OFFSETS-1: a topic the principal may not read answers its authorization error.
            Err(code) if code == ResponseError::TopicAuthorizationFailed.code() => indexes
                .unwrap_or_default()
                .into_iter()
                .map(|i| partition(i, -1, code))
                .collect(),
            // An unknown topic has nothing committed.
            Err(code) if code == ResponseError::UnknownTopicOrPartition.code() => indexes
                .unwrap_or_default()
                .into_iter()
                .map(|i| partition(i, -1, 0))
                .collect(),
            // CO-RECLAIM-2: a failed lookup (Iggy restarting, a timeout) is an error, never
            // "nothing committed", or the consumer would fall back to auto.offset.reset.
            Err(code) => indexes
                .unwrap_or_default()
                .into_iter()
                .map(|i| partition(i, -1, code))
                .collect(),
            Ok((target, info)) => {
                let indexes = indexes.unwrap_or_else(|| (0..info.partitions as i32).collect());
                let valid: Vec<u32> = indexes
                    .iter()
                    .filter(|&&i| i >= 0 && (i as u32) < info.partitions)
                    .map(|&i| i as u32)
                    .collect();
                match store.fetch(&target, &valid, group_id).await {
                    Ok(offsets) => {
                        let mut found = valid.iter().zip(offsets);
                        indexes
                            .iter()
                            .map(|&i| {
                                if i >= 0 && (i as u32) < info.partitions {
                                    let (_, offset) = found.next().expect("one offset per valid index");
                                    partition(i, offset, 0)
                                } else {
                                    partition(i, -1, ResponseError::UnknownTopicOrPartition.code())
                                }
                            })
                            // A listing reports committed partitions only, as Kafka does.
                            .filter(|p| !listed || p.committed_offset >= 0)
                            .collect()
                    }
                    Err(e) => {
                        let code = error_map::backend_error(&e, &format!("OffsetFetch {group_id} {kafka}"));
                        indexes.iter().map(|&i| partition(i, -1, code)).collect()
                    }
                }
            }
        };
        if listed && partitions.is_empty() {
            continue;
        }
        topics.push(
            OffsetFetchResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions),
        );
    }
    with_error(0).with_topics(topics)
}
