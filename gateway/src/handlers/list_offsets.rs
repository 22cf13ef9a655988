//! ListOffsets (LISTOFFSETS-EARLIEST-1, LISTOFFSETS-LATEST-1, LISTOFFSETS-TIMESTAMP-1). A
//! partition named more than once is INVALID_REQUEST at each mention, as in Kafka, and each topic
//! is looked up once however often it is named (LIMIT-LISTOFFSETS-DUPLICATES-1).

use crate::auth::sessions::Session;
use crate::backend::{Backend, ReadLimits};
use crate::error_map;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kig_core::mapping::record_timestamp_ms;
use std::collections::HashMap;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
/// KIP-405: the earliest offset on local storage; Iggy has no tiers, so it is the earliest.
pub const EARLIEST_LOCAL: i64 = -4;

/// (offset, timestamp) answering `timestamp` for one partition, or a Kafka error code.
async fn lookup<B: Backend>(
    session: &Session<B>,
    stream: &str,
    topic: &str,
    partition: u32,
    timestamp: i64,
) -> Result<(i64, i64), i16> {
    let context = || format!("ListOffsets {stream}/{topic}-{partition}");
    let backend = &session.backend;
    let marks = backend
        .watermarks(stream, topic, partition)
        .await
        .map_err(|e| error_map::backend_error(&e, &context()))?;
    match timestamp {
        EARLIEST | EARLIEST_LOCAL => Ok((marks.log_start_offset as i64, -1)),
        LATEST => Ok((marks.high_watermark as i64, -1)),
        MAX_TIMESTAMP => {
            if marks.high_watermark == marks.log_start_offset {
                return Ok((-1, -1));
            }
            let last = marks.high_watermark - 1;
            let limits = ReadLimits {
                max_messages: 1,
                max_bytes: u64::MAX,
            };
            let messages = backend
                .read(stream, topic, partition, last, limits)
                .await
                .map_err(|e| error_map::backend_error(&e, &context()))?;
            Ok(messages
                .first()
                .map_or((-1, -1), |m| (m.header.offset as i64, record_timestamp_ms(m))))
        }
        ts if ts >= 0 => {
            // LISTOFFSETS-TIMESTAMP-1: Iggy indexes its own (append) timestamps.
            let found = backend
                .offset_for_timestamp(stream, topic, partition, (ts as u64).saturating_mul(1_000))
                .await
                .map_err(|e| error_map::backend_error(&e, &context()))?;
            Ok(found.map_or((-1, -1), |(offset, server_us)| {
                (offset as i64, (server_us / 1_000) as i64)
            }))
        }
        _ => Err(ResponseError::InvalidRequest.code()),
    }
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: ListOffsetsRequest,
    _version: i16,
) -> ListOffsetsResponse {
    // LIMIT-LISTOFFSETS-DUPLICATES-1: Kafka's ListOffsetsRequest.duplicatePartitions.
    let mut mentions = HashMap::<(&str, i32), usize>::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            *mentions.entry((topic.name.0.as_str(), p.partition_index)).or_default() += 1;
        }
    }
    let mut resolved_topics = HashMap::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let response = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_leader_epoch(-1);
            let result = if mentions[&(name, p.partition_index)] > 1 {
                Err(ResponseError::InvalidRequest.code())
            } else {
                if !resolved_topics.contains_key(name) {
                    let resolved = super::resolve_topic(gateway, session, name).await;
                    resolved_topics.insert(name, resolved);
                }
                match &resolved_topics[name] {
                    Err(code) => Err(*code),
                    Ok((_, info)) if p.partition_index < 0 || p.partition_index as u32 >= info.partitions => {
                        Err(ResponseError::UnknownTopicOrPartition.code())
                    }
                    Ok((target, _)) => {
                        lookup(
                            session,
                            &target.stream,
                            &target.topic,
                            p.partition_index as u32,
                            p.timestamp,
                        )
                        .await
                    }
                }
            };
            partitions.push(match result {
                Ok((offset, timestamp)) => response.with_offset(offset).with_timestamp(timestamp),
                Err(code) => response.with_error_code(code).with_offset(-1).with_timestamp(-1),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}
