//! OffsetFetch: committed offsets read from Iggy by any gateway (reading needs no membership);
//! nothing committed is -1, metadata "" and leader epoch -1 (CO-METADATA-1); a null topic list
//! enumerates every mapped topic and answers with Kafka names (CO-FETCH-ALL-1). A group, topic or
//! partition named more than once is answered once, and the mapped topics are listed at most once
//! per request (LIMIT-OFFSETFETCH-DUPLICATES-1); the answer fits `max_response_bytes`
//! (LIMIT-RESPONSE-BYTES-1).

use super::delete_groups::mapped_topics;
use super::join_group::valid_group_id;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::offset_store::OffsetStore;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet};

/// One partition entry's encoded bytes at most: index, offset, leader epoch, empty metadata,
/// error, tagged fields.
const PARTITION_ENTRY_BYTES: usize = 4 + 8 + 4 + crate::response_budget::LENGTH_PREFIX_BYTES + 2 + 1;
/// One topic entry's bytes beyond its name and partitions: partition array length, tagged fields.
const TOPIC_ENTRY_BYTES: usize = crate::response_budget::LENGTH_PREFIX_BYTES + 1;

/// Each requested topic once, in the order first named, with each of its partitions once
/// (LIMIT-OFFSETFETCH-DUPLICATES-1).
fn distinct_topics(topics: Vec<OffsetFetchRequestTopic>) -> Vec<(TopicName, Option<Vec<i32>>)> {
    let mut order: Vec<(TopicName, Option<Vec<i32>>)> = Vec::new();
    let mut index_of = HashMap::<StrBytes, usize>::new();
    let mut seen = HashSet::<(usize, i32)>::new();
    for topic in topics {
        let slot = *index_of.entry(topic.name.0.clone()).or_insert_with(|| {
            order.push((topic.name.clone(), Some(Vec::new())));
            order.len() - 1
        });
        for index in topic.partition_indexes {
            if seen.insert((slot, index)) {
                if let Some(partitions) = &mut order[slot].1 {
                    partitions.push(index);
                }
            }
        }
    }
    order
}

/// Each requested group (v8+) once, in the order first named, with the topics of all its mentions;
/// a mention naming no topics makes the group a listing of every committed topic
/// (LIMIT-OFFSETFETCH-DUPLICATES-1). The first mention's member id and epoch are the ones checked.
fn distinct_groups(groups: Vec<OffsetFetchRequestGroup>) -> Vec<OffsetFetchRequestGroup> {
    let mut order: Vec<OffsetFetchRequestGroup> = Vec::new();
    let mut index_of = HashMap::<StrBytes, usize>::new();
    for group in groups {
        let Some(&slot) = index_of.get(&group.group_id.0) else {
            index_of.insert(group.group_id.0.clone(), order.len());
            order.push(group);
            continue;
        };
        match (&mut order[slot].topics, group.topics) {
            (Some(kept), Some(more)) => kept.extend(more),
            (kept, _) => *kept = None,
        }
    }
    order
}

/// The mapped topics' Kafka names, listed from Iggy at most once per request however many groups
/// ask for every committed topic (LIMIT-OFFSETFETCH-DUPLICATES-1).
async fn listed_topics<'a, B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    listing: &'a mut Option<Vec<TopicName>>,
) -> &'a [TopicName] {
    if listing.is_none() {
        let names = mapped_topics(gateway, session)
            .await
            .into_iter()
            .map(|(kafka, _)| TopicName(StrBytes::from_string(kafka)))
            .collect();
        *listing = Some(names);
    }
    listing.as_deref().unwrap_or_default()
}

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
    let mut budget = gateway.response_budget();
    let mut listing = None;
    if version < 8 {
        return fetch_group(gateway, session, request, version, &mut budget, &mut listing).await;
    }
    // v8+ batch groups: each answered as one v7 request, under one response budget.
    let distinct = distinct_groups(request.groups);
    let mut groups = Vec::with_capacity(distinct.len());
    for group in distinct {
        // LIMIT-RESPONSE-BYTES-1: once the budget has refused an entry, the groups after it are
        // answered with the error alone (an echo of the request), and nothing more is read.
        if budget.has_refused() {
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id)
                    .with_error_code(ResponseError::UnknownServerError.code()),
            );
            continue;
        }
        let group_id = group.group_id.clone();
        // GROUP-CONSUMER-COMMIT-1: v9 names the member; a consumer-protocol member's epoch must
        // be current (an admin's -1 reads freely).
        let member_id = group.member_id.as_ref().map_or("", |m| m.as_str());
        let refusal = match gateway.groups.consumer_offsets_check(
            group_id.0.as_str(),
            member_id,
            group.member_epoch,
            true,
            version,
        ) {
            Some(Err(refusal)) if version >= 9 => Some(error_map::consumer_offsets_code(refusal)),
            _ => None,
        };
        let answer = match refusal {
            Some(code) => OffsetFetchResponse::default().with_error_code(code),
            None => {
                let single = OffsetFetchRequest::default()
                    .with_group_id(group.group_id)
                    .with_require_stable(request.require_stable)
                    .with_topics(group.topics.map(|topics| {
                        topics
                            .into_iter()
                            .map(|t| {
                                OffsetFetchRequestTopic::default()
                                    .with_name(t.name)
                                    .with_partition_indexes(t.partition_indexes)
                            })
                            .collect()
                    }));
                fetch_group(gateway, session, single, 7, &mut budget, &mut listing).await
            }
        };
        groups.push(
            OffsetFetchResponseGroup::default()
                .with_group_id(group_id)
                .with_error_code(answer.error_code)
                .with_topics(
                    answer
                        .topics
                        .into_iter()
                        .map(|t| {
                            OffsetFetchResponseTopics::default().with_name(t.name).with_partitions(
                                t.partitions
                                    .into_iter()
                                    .map(|p| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p.partition_index)
                                            .with_committed_offset(p.committed_offset)
                                            .with_committed_leader_epoch(p.committed_leader_epoch)
                                            .with_metadata(p.metadata)
                                            .with_error_code(p.error_code)
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                ),
        );
    }
    OffsetFetchResponse::default().with_groups(groups)
}

/// One group's offsets, as OffsetFetch v0-7 asks them.
async fn fetch_group<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: OffsetFetchRequest,
    version: i16,
    budget: &mut crate::response_budget::ResponseBudget,
    listing: &mut Option<Vec<TopicName>>,
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
        Some(topics) => distinct_topics(topics),
        None => listed_topics(gateway, session, listing)
            .await
            .iter()
            .map(|name| (name.clone(), None))
            .collect(),
    };
    let mut topics = Vec::with_capacity(wanted.len());
    // v0-1 have no top-level error: past the budget, what is left is answered with per-partition
    // errors, which only echo the request.
    let mut over_budget = false;
    for (name, indexes) in wanted {
        let kafka = name.0.as_str().to_string();
        if over_budget {
            let code = ResponseError::UnknownServerError.code();
            let partitions = indexes
                .unwrap_or_default()
                .into_iter()
                .map(|i| partition(i, -1, code))
                .collect();
            topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(partitions),
            );
            continue;
        }
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
                        let code = error_map::coordinator_backend_error(&e, &format!("OffsetFetch {group_id} {kafka}"));
                        indexes.iter().map(|&i| partition(i, -1, code)).collect()
                    }
                }
            }
        };
        if listed && partitions.is_empty() {
            continue;
        }
        // LIMIT-RESPONSE-BYTES-1: charged before the entry joins the answer; a listing's
        // partitions come from Iggy, not from the request.
        let bytes = TOPIC_ENTRY_BYTES
            + crate::response_budget::string_bytes(kafka.len())
            + partitions.len() * PARTITION_ENTRY_BYTES;
        if let Err(exceeded) = budget.charge(bytes) {
            exceeded.log(
                "OffsetFetch",
                &format!(
                    "group {} topic {}",
                    crate::log_text::clip(group_id),
                    crate::log_text::clip(&kafka)
                ),
            );
            if version >= 2 {
                return with_error(ResponseError::UnknownServerError.code());
            }
            over_budget = true;
            let code = ResponseError::UnknownServerError.code();
            let partitions = partitions
                .iter()
                .map(|p| partition(p.partition_index, -1, code))
                .collect();
            topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(partitions),
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_offsetfetch_duplicates_1_each_topic_and_partition_once() {
        let topic = |name: &str, partitions: Vec<i32>| {
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_string())))
                .with_partition_indexes(partitions)
        };
        let wanted = distinct_topics(vec![
            topic("a", vec![0, 1, 0]),
            topic("b", vec![2]),
            topic("a", vec![1, 3]),
        ]);
        let wanted: Vec<(&str, Vec<i32>)> = wanted
            .iter()
            .map(|(n, p)| (n.0.as_str(), p.clone().unwrap_or_default()))
            .collect();
        assert_eq!(wanted, vec![("a", vec![0, 1, 3]), ("b", vec![2])]);
    }
}
