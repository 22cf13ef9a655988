//! Produce: decode every batch under the request's one decompression budget (BATCH-BUDGET-1),
//! map every record (docs/spec/mapping.md), and append each partition's records in the fewest
//! sends Iggy accepts (MAP-TS-SPLIT-1; the real Iggy backend may part each further,
//! APPEND-PARTS-1).
//!
//! A partition's data is decoded and mapped whole before anything is sent, so a bad record
//! rejects its partition and writes nothing (PRODUCE-ATOMIC-1). Producer id, epoch and sequence
//! are accepted and ignored (PID-IGNORE-1): this handler never answers 45 or 46.

use super::resolve_topic;
use crate::auth::sessions::Session;
use crate::backend::{Backend, TopicInfo};
use crate::config::IggyTarget;
use crate::error_map;
use crate::gateway::Gateway;
use bytes::Bytes;
use iggy_common::IggyMessage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kig_core::batch::parse_batches;
use kig_core::budget::DecompressionBudget;
use kig_core::mapping::{record_to_message, KafkaRecord};
use kig_core::timestamps::send_runs;

/// A partition's outcome: a Kafka error code and a message for the client, or the base offset.
type PartitionResult = Result<i64, (i16, String)>;

/// A partition's records mapped to Iggy messages, or why they were refused.
type Mapped = Result<Vec<IggyMessage>, (i16, String)>;

fn refused(code: ResponseError, message: impl Into<String>) -> (i16, String) {
    (code.code(), message.into())
}

/// Decodes and maps one partition's records blob. Nothing is written here. A refusal is this
/// partition's error code alone (ERR-MAP-2): the other partitions and the connection go on.
fn map_records(records: Option<&Bytes>, budget: &mut DecompressionBudget) -> Mapped {
    let records = records.ok_or_else(|| refused(ResponseError::CorruptMessage, "no records"))?;
    let batches = parse_batches(records).map_err(|e| (error_map::decode_error(&e), e.to_string()))?;
    let mut messages = Vec::new();
    for raw in &batches {
        let attributes = raw.header.attributes;
        if attributes.is_transactional() || attributes.is_control() {
            // PRODUCE-TXN-1: transactions are not supported; refuse before spending any budget.
            return Err(refused(
                ResponseError::InvalidRecord,
                "transactional and control batches are not supported",
            ));
        }
        let batch = raw
            .decode(budget)
            .map_err(|e| (error_map::decode_error(&e), e.to_string()))?;
        messages.reserve(batch.records.len());
        for kafka in KafkaRecord::all_from_batch(batch) {
            let (message, _form) = record_to_message(&kafka).map_err(|e| (error_map::map_error(&e), e.to_string()))?;
            messages.push(message);
        }
    }
    if messages.is_empty() {
        return Err(refused(ResponseError::CorruptMessage, "the records hold no record"));
    }
    Ok(messages)
}

/// Appends `messages` in consecutive sends; the base offset is the first send's confirmation.
async fn append<B: Backend>(
    session: &Session<B>,
    stream: &str,
    topic: &str,
    partition: u32,
    mut messages: Vec<IggyMessage>,
    context: &str,
) -> PartitionResult {
    let origins: Vec<u64> = messages.iter().map(|m| m.header.origin_timestamp).collect();
    let runs = send_runs(&origins);
    let mut base_offset = None;
    // Split from the back so each run is moved out without copying the messages.
    let mut sends: Vec<Vec<IggyMessage>> = runs.iter().rev().map(|run| messages.split_off(run.start)).collect();
    sends.reverse();
    // DELIVERY-ORDER-1: each send is awaited before the next, so the runs land in batch order.
    for (i, send) in sends.into_iter().enumerate() {
        match session.backend.append(stream, topic, partition, send).await {
            // OFFSET-BASE-1: the first send's confirmation, or -1 when the server sent none.
            Ok(confirmed) if i == 0 => base_offset = confirmed,
            Ok(_) => {}
            Err(e) => {
                if i > 0 {
                    tracing::warn!(
                        "{context}: send {} of a split batch failed after earlier sends were written (DELIVERY-1)",
                        i + 1
                    );
                }
                return Err((error_map::backend_error(&e, context), e.to_string()));
            }
        }
    }
    Ok(base_offset.map_or(-1, |o| o as i64))
}

/// One partition's part of the request, with what was resolved for its topic.
struct PartitionInput {
    index: i32,
    records: Option<Bytes>,
    /// The Iggy topic to append to, or why the partition is refused before decoding.
    target: Result<IggyTarget, (i16, String)>,
}

/// Decodes and maps every partition in request order under the one budget. Pure CPU work: it
/// runs on the decode pool (LIMIT-BLOCKING-1).
fn map_partitions(
    inputs: Vec<Vec<PartitionInput>>,
    mut budget: DecompressionBudget,
) -> Vec<Vec<(PartitionInput, Mapped)>> {
    inputs
        .into_iter()
        .map(|partitions| {
            partitions
                .into_iter()
                .map(|input| {
                    let mapped = match &input.target {
                        Err(refusal) => Err(refusal.clone()),
                        Ok(_) => map_records(input.records.as_ref(), &mut budget),
                    };
                    (input, mapped)
                })
                .collect()
        })
        .collect()
}

/// The topic `kafka_topic` as a lookup finds it, for a Produce to `partitions` of it.
/// PRODUCE-RESOLVE-2: a lookup of the same session found it less than a second ago with every
/// one of those partitions, so it stands without a lookup; the append is checked by the backend
/// all the same. Anything a kept lookup would refuse (an unknown topic, a partition past its
/// count) is looked up afresh, so a refusal never rests on an old answer.
async fn look_up<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    kafka_topic: &str,
    partitions: &[(i32, Option<Bytes>)],
) -> Result<(IggyTarget, TopicInfo), i16> {
    let now_us = gateway.clock.now_us();
    if let Some(info) = session.known_topics.get(kafka_topic, now_us) {
        if partitions
            .iter()
            .all(|(index, _)| u32::try_from(*index).is_ok_and(|index| index < info.partitions))
        {
            return Ok((gateway.config.topics.resolve(kafka_topic), info));
        }
    }
    let (target, info) = resolve_topic(gateway, session, kafka_topic).await?;
    session.known_topics.remember(kafka_topic, &info, now_us);
    Ok((target, info))
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: ProduceRequest,
    _version: i16,
) -> Option<ProduceResponse> {
    let acks = request.acks;
    let request_refusal = if !(-1..=1).contains(&acks) {
        Some(refused(ResponseError::InvalidRequiredAcks, format!("acks {acks}")))
    } else if request.transactional_id.is_some() {
        Some(refused(
            ResponseError::InvalidRecord,
            "transactional produce is not supported",
        ))
    } else {
        None
    };
    // Every topic is looked up (backend calls) while every partition is decoded off the async
    // workers, on the topic mapping's own targets, so a Produce waits for the slower of the two
    // rather than both (PRODUCE-RESOLVE-1). The decode stands only when the lookup gives every
    // partition that same target; otherwise the partitions are decoded again as the lookup says,
    // skipping refused ones, exactly as if the lookup had come first.
    let mut names = Vec::with_capacity(request.topic_data.len());
    let mut partitions_data = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let data: Vec<(i32, Option<Bytes>)> = topic_data
            .partition_data
            .into_iter()
            .map(|data| (data.index, data.records))
            .collect();
        names.push(topic_data.name);
        partitions_data.push(data);
    }
    let inputs_with = |targets: &dyn Fn(usize, i32) -> Result<IggyTarget, (i16, String)>| -> Vec<Vec<PartitionInput>> {
        partitions_data
            .iter()
            .enumerate()
            .map(|(t, partitions)| {
                partitions
                    .iter()
                    .map(|(index, records)| PartitionInput {
                        index: *index,
                        records: records.clone(),
                        target: targets(t, *index),
                    })
                    .collect()
            })
            .collect()
    };
    let budget = || {
        DecompressionBudget::new(gateway.config.max_frame_size)
            .with_record_limit(gateway.config.limits.max_records_per_request)
    };
    let guessed = |t: usize, _index: i32| -> Result<IggyTarget, (i16, String)> {
        match &request_refusal {
            Some(refusal) => Err(refusal.clone()),
            None => Ok(gateway.config.topics.resolve(names[t].0.as_str())),
        }
    };
    let guessed_inputs = inputs_with(&guessed);
    let lookups = async {
        let mut resolved = Vec::with_capacity(names.len());
        for (name, partitions) in names.iter().zip(&partitions_data) {
            let kafka_topic = name.0.as_str();
            resolved.push(match &request_refusal {
                Some(refusal) => Err(refusal.clone()),
                None => look_up(gateway, session, kafka_topic, partitions)
                    .await
                    .map_err(|code| (code, format!("topic {kafka_topic}"))),
            });
        }
        resolved
    };
    let speculative_budget = budget();
    let (resolved, speculative) = tokio::join!(
        lookups,
        gateway
            .decode_pool
            .run(move || map_partitions(guessed_inputs, speculative_budget))
    );
    let target_of = |t: usize, index: i32| -> Result<IggyTarget, (i16, String)> {
        let kafka_topic = names[t].0.as_str();
        match &resolved[t] {
            Err(refusal) => Err(refusal.clone()),
            // MAP-PARTITION-1: the request's index is the Iggy partition, unchanged; one
            // outside the topic is refused for this partition alone.
            Ok((_, info)) if index < 0 || index as u32 >= info.partitions => Err(refused(
                ResponseError::UnknownTopicOrPartition,
                format!("partition {index} of {kafka_topic}"),
            )),
            Ok((target, _)) => Ok(target.clone()),
        }
    };
    let same_targets = speculative.iter().enumerate().all(|(t, partitions)| {
        partitions
            .iter()
            .all(|(input, _)| input.target == target_of(t, input.index))
    });
    let mapped = if same_targets {
        speculative
    } else {
        let inputs = inputs_with(&target_of);
        let budget = budget();
        gateway.decode_pool.run(move || map_partitions(inputs, budget)).await
    };
    let mut responses = Vec::with_capacity(names.len());
    for (name, partitions) in names.into_iter().zip(mapped) {
        let kafka_topic = name.0.as_str();
        let mut answers = Vec::with_capacity(partitions.len());
        for (input, messages) in partitions {
            let index = input.index;
            let result: PartitionResult = match (input.target, messages) {
                (Ok(target), Ok(messages)) => {
                    let context = format!("Produce to {kafka_topic}-{index}");
                    append(session, &target.stream, &target.topic, index as u32, messages, &context).await
                }
                (_, Err(refusal)) => Err(refusal),
                (Err(refusal), _) => Err(refusal),
            };
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            answers.push(match result {
                Ok(base_offset) => response.with_base_offset(base_offset),
                Err((code, message)) => {
                    tracing::warn!(
                        "Produce to {}-{index} refused with Kafka error {code}: {}",
                        crate::limits::truncate_utf8(kafka_topic, 256),
                        crate::limits::truncate_utf8(&message, 1024)
                    );
                    // LIMIT-BUILT-STRING-1: the message may quote a topic name of 32 KiB.
                    response
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_error_message(Some(StrBytes::from_string(crate::limits::error_message(message))))
                }
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(answers),
        );
    }
    // PRODUCE-ACKS-1: acks=0 gets no response at all.
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;
    use crate::handlers::test_support::gateway_with_topic;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::TopicName;
    use kig_core::batch::{encode_batch, Record, RecordBatch};
    use kig_core::compression::Compression;

    /// One batch of `count` records of `value_bytes` each.
    fn batch(count: usize, value_bytes: usize) -> Bytes {
        let records = (0..count)
            .map(|_| Record {
                attributes: 0,
                timestamp_delta: 0,
                offset_delta: 0,
                key: None,
                value: Some(Bytes::from(vec![b'v'; value_bytes])),
                headers: vec![],
            })
            .collect();
        encode_batch(&RecordBatch::from_producer(
            Compression::None,
            1_700_000_000_000,
            records,
        ))
        .expect("encoded")
    }

    fn topic(name: &'static str, records: Bytes) -> TopicProduceData {
        TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(name)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])
    }

    #[tokio::test]
    async fn produce_resolve_1_a_refused_topic_is_not_decoded_and_spends_none_of_the_budget() {
        // A budget of 60 records: the unknown topic's 40 and the known topic's 40 do not both
        // fit, so the known topic is accepted only if the unknown one's records were not counted.
        let file = FileConfig {
            limits: crate::limits::LimitSettings {
                max_records_per_request: Some(60),
                ..Default::default()
            },
            ..FileConfig::default()
        };
        let gateway = gateway_with_topic(file, "known").await;
        let session = gateway.default_session.clone();
        let mut corrupt = batch(40, 1024).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff; // the CRC no longer matches
        let request = ProduceRequest::default().with_acks(-1).with_topic_data(vec![
            topic("unknown", batch(40, 1024)),
            topic("unknown-and-corrupt", Bytes::from(corrupt)),
            topic("known", batch(40, 1024)),
        ]);
        let response = handle(&gateway, &session, request, 9).await.expect("acks=-1 answers");
        let codes: Vec<i16> = response
            .responses
            .iter()
            .map(|t| t.partition_responses[0].error_code)
            .collect();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(
            codes,
            vec![unknown, unknown, 0],
            "the lookup's refusal wins over the decode's"
        );
        assert_eq!(response.responses[2].partition_responses[0].base_offset, 0);
    }
}
