//! Produce: decode every batch under the request's one decompression budget (BATCH-BUDGET-1),
//! map every record (docs/spec/mapping.md), and append each partition's records in the fewest
//! sends Iggy accepts (MAP-TS-SPLIT-1; the real Iggy backend may part each further,
//! APPEND-PARTS-1).
//!
//! A partition's data is decoded and mapped whole before anything is sent, so a bad record
//! rejects its partition and writes nothing (PRODUCE-ATOMIC-1). A batch with a producer id is
//! checked against that producer's state and written at most once (docs/spec/producer-ids.md,
//! [`crate::producer_state`]); one without (-1) is written as it comes.

use super::resolve_topic;
use crate::auth::sessions::Session;
use crate::backend::{Backend, TopicInfo};
use crate::config::IggyTarget;
use crate::error_map;
use crate::gateway::Gateway;
use crate::producer_state::{log_read, Owner, PartitionKey, Verdict};
use bytes::Bytes;
use iggy_common::IggyMessage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kig_core::batch::parse_batches;
use kig_core::budget::DecompressionBudget;
use kig_core::mapping::{record_to_message, KafkaRecord};
use kig_core::producer_tag::{increment_sequence, BatchIdentity};
use kig_core::timestamps::send_runs;
use std::net::IpAddr;

/// A partition's outcome: a Kafka error code and a message for the client, or the base offset.
type PartitionResult = Result<i64, (i16, String)>;

/// A partition's records mapped to Iggy messages, with the producer that sent them when it is
/// idempotent.
struct MappedPartition {
    messages: Vec<IggyMessage>,
    batch: Option<BatchIdentity>,
}

/// A partition's records mapped, or why they were refused.
type Mapped = Result<MappedPartition, (i16, String)>;

fn refused(code: ResponseError, message: impl Into<String>) -> (i16, String) {
    (code.code(), message.into())
}

/// Decodes and maps one partition's records blob. Nothing is written here. A refusal is this
/// partition's error code alone (ERR-MAP-2): the other partitions and the connection go on.
fn map_records(records: Option<&Bytes>, budget: &mut DecompressionBudget) -> Mapped {
    let records = records.ok_or_else(|| refused(ResponseError::CorruptMessage, "no records"))?;
    let batches = parse_batches(records).map_err(|e| (error_map::decode_error(&e), e.to_string()))?;
    let idempotent = batches.iter().find_map(|raw| BatchIdentity::of(&raw.header));
    if idempotent.is_some() && batches.len() > 1 {
        // PRODUCER-BATCH-1: Kafka takes one batch per partition (ProduceRequest.validateRecords).
        return Err(refused(
            ResponseError::InvalidRecord,
            "a partition's records from an idempotent producer must be one batch",
        ));
    }
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
        for (i, kafka) in KafkaRecord::all_from_batch(batch).enumerate() {
            let (mut message, _form) =
                record_to_message(kafka).map_err(|e| (error_map::map_error(&e), e.to_string()))?;
            if let Some(identity) = &idempotent {
                // PRODUCER-TAG-1: who wrote the record, in the id the mapping leaves at 0. The
                // record's sequence is the batch's base plus its place in the batch.
                message.header.id = identity.tag_of(i as i32).to_id();
            }
            messages.push(message);
        }
    }
    if messages.is_empty() {
        return Err(refused(ResponseError::CorruptMessage, "the records hold no record"));
    }
    if let Some(identity) = &idempotent {
        // PRODUCER-BATCH-1: Kafka's LogValidator requires the record count to match the offset
        // deltas, so the last sequence names the last record.
        let expected = increment_sequence(identity.first_sequence, messages.len() as i32 - 1);
        if expected != identity.last_sequence {
            return Err(refused(
                ResponseError::InvalidRecord,
                format!(
                    "the batch holds {} records but its last offset delta counts {}",
                    messages.len(),
                    u64::from(crate::producer_state::partition::sequence_distance(
                        identity.first_sequence,
                        identity.last_sequence
                    )) + 1
                ),
            ));
        }
    }
    Ok(MappedPartition {
        messages,
        batch: idempotent,
    })
}

/// Sends `messages` in consecutive sends, the fewest Iggy accepts (MAP-TS-SPLIT-1), and tells
/// `sent` of each one written: where it starts in `messages`, how many it holds, and its base
/// offset (`None` when the server sent no confirmation). Returns the first send's base offset,
/// or -1 when the server sent none (OFFSET-BASE-1).
async fn send_in_runs<B: Backend>(
    session: &Session<B>,
    stream: &str,
    topic: &str,
    partition: u32,
    messages: Vec<IggyMessage>,
    context: &str,
    mut sent: impl FnMut(usize, usize, Option<u64>),
) -> PartitionResult {
    let origins: Vec<u64> = messages.iter().map(|m| m.header.origin_timestamp).collect();
    let runs = send_runs(&origins);
    let mut base_offset = None;
    let sends = crate::backend::split_into_ranges(messages, &runs);
    // DELIVERY-ORDER-1: each send is awaited before the next, so the runs land in batch order.
    for (i, (send, run)) in sends.into_iter().zip(&runs).enumerate() {
        let count = send.len();
        match session.backend.append(stream, topic, partition, send).await {
            Ok(confirmed) => {
                if i == 0 {
                    base_offset = confirmed;
                }
                sent(run.start, count, confirmed);
            }
            Err(e) => {
                if i > 0 {
                    tracing::warn!(
                        "{context}: send {} of a split batch failed after earlier sends were written",
                        i + 1
                    );
                }
                return Err((error_map::backend_error(&e, context), e.to_string()));
            }
        }
    }
    Ok(base_offset.map_or(-1, |o| o as i64))
}

/// Appends a batch of a producer that is not idempotent (producer id -1): written as it comes
/// (PRODUCER-NONE-1). DELIVERY-2: acknowledged only once every send is written, so nothing
/// acknowledged is lost, and a retry is written again: at least once.
async fn append<B: Backend>(
    session: &Session<B>,
    stream: &str,
    topic: &str,
    partition: u32,
    messages: Vec<IggyMessage>,
    context: &str,
) -> PartitionResult {
    send_in_runs(session, stream, topic, partition, messages, context, |_, _, _| {}).await
}

/// Appends an idempotent producer's batch at most once (docs/spec/producer-ids.md): the
/// partition's producer state is brought up to date from the log when it is not
/// (PRODUCER-STATE-REBUILD-1, PRODUCER-UNKNOWN-1), the batch checked against it (PRODUCER-SEQ-1,
/// PRODUCER-EPOCH-1), a batch already written answered with its first offset (PRODUCER-DUP-1),
/// the rest of one written in part written (PRODUCER-DUP-2), and what was written recorded.
/// DELIVERY-3: together, each record of an idempotent producer is stored once in its partition.
#[allow(clippy::too_many_arguments)]
async fn append_idempotent<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    owner: &Owner,
    kafka_topic: &str,
    target: &IggyTarget,
    partition: u32,
    batch: BatchIdentity,
    mut messages: Vec<IggyMessage>,
    context: &str,
) -> PartitionResult {
    // PRODUCER-LEADER-1: one gateway writes a partition's idempotent batches, so the state
    // that checks them is whole; the others send the producer to it.
    let leader = gateway.partition_leader(kafka_topic, partition as i32);
    if leader.id != gateway.config.advertised.id {
        return Err((
            ResponseError::NotLeaderOrFollower.code(),
            format!(
                "gateway {} leads this partition for idempotent producers (PRODUCER-LEADER-1)",
                leader.id
            ),
        ));
    }
    let states = &gateway.producer_states;
    states.expire_when_due(gateway.now_ms());
    let key = PartitionKey {
        stream: target.stream.as_str().into(),
        topic: target.topic.as_str().into(),
        partition,
    };
    let slot = states.slot(&key);
    // PRODUCER-SEQ-1: one idempotent append to a partition at a time in this gateway, from its
    // check to its record, so two attempts of one batch cannot both pass the check.
    let _turn = slot.appends.lock().await;
    let now_ms = gateway.now_ms();
    let forgotten = slot.state().under_generation(gateway.peer_health.generation());
    states.removed_entries(&forgotten);
    log_read::bring_up_to_date(&*gateway.backend, &key, &slot, states, now_ms)
        .await
        .map_err(|e| {
            (
                error_map::backend_error(&e, context),
                format!("reading the partition's log for its producer state: {e}"),
            )
        })?;
    let verdict = slot.state().check_at(&batch, now_ms, states.settings.log_settle_ms);
    let (skip, answered_offset) = match verdict {
        Verdict::Append => (0, None),
        Verdict::Duplicate { first_offset } => {
            slot.state().touch(batch.producer_id, now_ms);
            crate::metrics::metrics().idempotent_duplicate();
            tracing::debug!(
                "{context}: producer {} epoch {} sequences {}..={} already written from offset {first_offset}; answered, not written again (PRODUCER-DUP-1)",
                batch.producer_id,
                batch.producer_epoch,
                batch.first_sequence,
                batch.last_sequence
            );
            return Ok(first_offset as i64);
        }
        Verdict::Partial { written, first_offset } => (written as usize, Some(first_offset)),
        Verdict::Refuse(refusal) => return Err((error_map::producer_code(&refusal), refusal.to_string())),
    };
    if slot.state().is_new(batch.producer_id) {
        states.make_room(owner, now_ms);
    }
    // Drained, not split off: with nothing written before (skip 0) the vector is kept as it is.
    messages.drain(..skip);
    let rest = messages;
    let first_sequence = increment_sequence(batch.first_sequence, skip as i32);
    let result = send_in_runs(
        session,
        &target.stream,
        &target.topic,
        partition,
        rest,
        context,
        |start, count, base| {
            let mut state = slot.state();
            match base {
                Some(base) => {
                    let first = increment_sequence(first_sequence, start as i32);
                    let last = increment_sequence(first, count as i32 - 1);
                    if state.record(&batch, first, last, base, owner, now_ms) {
                        states.created(owner, 1);
                    }
                }
                // Stored, at an offset the server did not tell: read back before the next check.
                None => state.outcome_unknown(),
            }
        },
    )
    .await;
    match result {
        Ok(first_base) => Ok(answered_offset.map_or(first_base, |o| o as i64)),
        Err(refusal) => {
            // PRODUCER-UNKNOWN-1: whether it was stored is read from the log before the next
            // check; the retry is then answered or written as the log says.
            slot.state().outcome_unknown();
            Err(refusal)
        }
    }
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

/// LIMIT-BLOCKING-1: a Produce at most this big, in record bytes and in records its batch
/// headers declare, all uncompressed, is mapped on the connection's task: a CRC over at most
/// 64 KiB and at most 64 records, microseconds, where a blocking thread's hand-off costs two
/// thread wake-ups. Anything compressed, larger or unreadable goes to the decode pool.
const CHEAP_PRODUCE_BYTES: usize = 64 << 10;
const CHEAP_PRODUCE_RECORDS: u64 = 64;

fn cheap_to_map(partitions_data: &[Vec<(i32, Option<Bytes>)>]) -> bool {
    let mut bytes = 0usize;
    let mut records = 0u64;
    for (_, data) in partitions_data.iter().flatten() {
        let Some(data) = data else { continue };
        bytes += data.len();
        let Some(declared) = kig_core::batch::declared_plain_records(data) else {
            return false;
        };
        records += declared;
        if bytes > CHEAP_PRODUCE_BYTES || records > CHEAP_PRODUCE_RECORDS {
            return false;
        }
    }
    true
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
    peer: IpAddr,
    request: ProduceRequest,
    _version: i16,
) -> Option<ProduceResponse> {
    // LIMIT-PRODUCERS-1: whom a new producer entry counts against.
    let owner: Owner = super::group_authz::owner(gateway, session, peer);
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
    let cheap = cheap_to_map(&partitions_data);
    let (resolved, speculative) = tokio::join!(
        lookups,
        gateway
            .decode_pool
            .run_unless_cheap(cheap, move || map_partitions(guessed_inputs, speculative_budget))
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
        gateway
            .decode_pool
            .run_unless_cheap(cheap, move || map_partitions(inputs, budget))
            .await
    };
    let mut responses = Vec::with_capacity(names.len());
    for (name, partitions) in names.into_iter().zip(mapped) {
        let kafka_topic = name.0.as_str();
        let mut answers = Vec::with_capacity(partitions.len());
        for (input, messages) in partitions {
            let index = input.index;
            let result: PartitionResult = match (input.target, messages) {
                (Ok(target), Ok(mapped)) => {
                    let context = format!("Produce to {kafka_topic}-{index}");
                    match mapped.batch {
                        None => {
                            append(
                                session,
                                &target.stream,
                                &target.topic,
                                index as u32,
                                mapped.messages,
                                &context,
                            )
                            .await
                        }
                        Some(batch) => {
                            append_idempotent(
                                gateway,
                                session,
                                &owner,
                                kafka_topic,
                                &target,
                                index as u32,
                                batch,
                                mapped.messages,
                                &context,
                            )
                            .await
                        }
                    }
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
    use std::sync::Arc;

    const LOCALHOST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

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

    /// One batch of `count` one-byte records from producer `pid` at `epoch`, from `sequence`.
    fn idempotent_batch(pid: i64, epoch: i16, sequence: i32, count: usize) -> Bytes {
        let mut batch = RecordBatch::from_producer(
            Compression::None,
            1_700_000_000_000,
            (0..count)
                .map(|i| Record {
                    attributes: 0,
                    timestamp_delta: 0,
                    offset_delta: 0,
                    key: None,
                    value: Some(Bytes::from(vec![b'a' + (i % 26) as u8])),
                    headers: vec![],
                })
                .collect(),
        );
        batch.header.producer_id = pid;
        batch.header.producer_epoch = epoch;
        batch.header.base_sequence = sequence;
        encode_batch(&batch).expect("encoded")
    }

    /// Produces `records` to partition 0 of "t" and returns the partition's error code and base
    /// offset.
    async fn produce<B: Backend>(gateway: &Gateway<B>, records: Bytes) -> (i16, i64) {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![topic("t", records)]);
        let response = handle(gateway, &gateway.default_session, LOCALHOST, request, 9)
            .await
            .expect("acks=-1 answers");
        let partition = &response.responses[0].partition_responses[0];
        (partition.error_code, partition.base_offset)
    }

    /// The ids of every message stored in partition 0 of "t".
    async fn stored_ids<B: Backend>(gateway: &Gateway<B>) -> Vec<u128> {
        let target = gateway.config.topics.resolve("t");
        let limits = crate::backend::ReadLimits {
            max_messages: 10_000,
            max_bytes: u64::MAX,
        };
        gateway
            .backend
            .read(&target.stream, &target.topic, 0, 0, limits)
            .await
            .expect("read")
            .iter()
            .map(|m| m.header.id)
            .collect()
    }

    const PID: i64 = (3 << 47) | 77;

    #[tokio::test]
    async fn producer_dup_1_a_retried_batch_is_answered_with_its_first_offset_and_written_once() {
        let gateway = gateway_with_topic(FileConfig::default(), "t").await;
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 0, 3)).await, (0, 0));
        assert_eq!(produce(&gateway, batch(2, 8)).await, (0, 3), "a producer without an id");
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 3, 2)).await, (0, 5));
        // Both batches again, as a producer retries after losing the answers.
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 0, 3)).await, (0, 0));
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 3, 2)).await, (0, 5));
        let ids = stored_ids(&gateway).await;
        assert_eq!(ids.len(), 7, "written once each");
        // PRODUCER-TAG-1: each record's id names its producer, epoch and sequence; the
        // producer without an id leaves the id at 0.
        let tags: Vec<Option<i32>> = ids
            .iter()
            .map(|id| kig_core::producer_tag::ProducerTag::from_id(*id).map(|t| t.sequence))
            .collect();
        assert_eq!(tags, vec![Some(0), Some(1), Some(2), None, None, Some(3), Some(4)]);
    }

    #[tokio::test]
    async fn producer_seq_1_producer_epoch_1_a_gap_and_a_stale_epoch_are_refused_and_write_nothing() {
        let gateway = gateway_with_topic(FileConfig::default(), "t").await;
        assert_eq!(produce(&gateway, idempotent_batch(PID, 2, 0, 3)).await, (0, 0));
        let gap = produce(&gateway, idempotent_batch(PID, 2, 4, 1)).await;
        assert_eq!(gap.0, ResponseError::OutOfOrderSequenceNumber.code());
        let stale = produce(&gateway, idempotent_batch(PID, 1, 3, 1)).await;
        assert_eq!(stale.0, ResponseError::InvalidProducerEpoch.code());
        let new_epoch_not_at_zero = produce(&gateway, idempotent_batch(PID, 3, 3, 1)).await;
        assert_eq!(new_epoch_not_at_zero.0, ResponseError::OutOfOrderSequenceNumber.code());
        assert_eq!(produce(&gateway, idempotent_batch(PID, 3, 0, 1)).await, (0, 3));
        assert_eq!(stored_ids(&gateway).await.len(), 4);
    }

    #[tokio::test]
    async fn producer_batch_1_two_batches_of_an_idempotent_producer_in_one_partition_are_refused() {
        let gateway = gateway_with_topic(FileConfig::default(), "t").await;
        let mut two = idempotent_batch(PID, 0, 0, 1).to_vec();
        two.extend_from_slice(&idempotent_batch(PID, 0, 1, 1));
        let (code, _) = produce(&gateway, Bytes::from(two)).await;
        assert_eq!(code, ResponseError::InvalidRecord.code());
        assert!(stored_ids(&gateway).await.is_empty());
    }

    #[tokio::test]
    async fn producer_state_rebuild_1_a_retry_after_a_gateway_restart_is_answered_from_the_log() {
        let first = gateway_with_topic(FileConfig::default(), "t").await;
        assert_eq!(produce(&first, idempotent_batch(PID, 0, 0, 4)).await, (0, 0));
        assert_eq!(produce(&first, idempotent_batch(PID, 0, 4, 4)).await, (0, 4));
        // A new gateway process on the same Iggy: no state in memory.
        let restarted = Gateway::new(
            first.config.clone(),
            first.backend.clone(),
            first.clock.clone(),
            crate::clock::SharedRng::seeded(2),
        );
        assert_eq!(produce(&restarted, idempotent_batch(PID, 0, 4, 4)).await, (0, 4));
        // PRODUCER-UNKNOWN-3: a gap against the log just read back may be the log lagging.
        let gap = produce(&restarted, idempotent_batch(PID, 0, 9, 1)).await;
        assert_eq!(gap.0, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(produce(&restarted, idempotent_batch(PID, 0, 8, 1)).await, (0, 8));
        // Stored where the read ended: the state is whole, and a gap is out of order.
        let gap = produce(&restarted, idempotent_batch(PID, 0, 10, 1)).await;
        assert_eq!(gap.0, ResponseError::OutOfOrderSequenceNumber.code());
        assert_eq!(stored_ids(&restarted).await.len(), 9);
    }

    #[tokio::test]
    async fn producer_unknown_1_a_batch_stored_without_an_answer_is_found_by_the_retry() {
        // Sends stored and answered with no confirmation: the offset is unknown to the gateway.
        let config =
            crate::config::Config::resolve(crate::config::Args::default(), FileConfig::default()).expect("config");
        let backend = crate::backend::embedded::EmbeddedBackend::new(
            Arc::new(crate::clock::TokioClock::new(0)),
            crate::backend::embedded::EmbeddedConfig {
                send_confirmations: false,
                ..Default::default()
            },
        );
        let target = config.topics.resolve("t");
        backend.ensure_stream(&target.stream).await.expect("stream");
        let spec = crate::backend::TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        backend
            .create_topic(&target.stream, &target.topic, spec)
            .await
            .expect("topic");
        let gateway = Gateway::new(
            Arc::new(config),
            Arc::new(backend),
            Arc::new(crate::clock::TokioClock::new(0)),
            crate::clock::SharedRng::seeded(1),
        );
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 0, 2)).await, (0, -1));
        assert_eq!(produce(&gateway, batch(3, 4)).await.0, 0);
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 0, 2)).await, (0, 0));
        assert_eq!(produce(&gateway, idempotent_batch(PID, 0, 2, 1)).await, (0, -1));
        assert_eq!(stored_ids(&gateway).await.len(), 6);
    }

    #[tokio::test]
    async fn producer_leader_1_an_idempotent_batch_at_a_gateway_not_leading_its_partition_is_not_leader() {
        // Two gateways; this one (node 0) is still in its warm-up, so it leads nothing yet.
        let file = FileConfig {
            instance_id: Some(0),
            peers: vec!["1=127.0.0.1:1/2".into()],
            peer_listen: Some("127.0.0.1:0".parse().expect("an address")),
            peer_secret: Some(crate::auth::credentials::Secret::new("0123456789abcdef")),
            ..FileConfig::default()
        };
        let gateway = gateway_with_topic(file, "t").await;
        assert!(!gateway.leads_partition("t", 0));
        let (code, _) = produce(&gateway, idempotent_batch(PID, 0, 0, 1)).await;
        assert_eq!(code, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(
            produce(&gateway, batch(1, 4)).await,
            (0, 0),
            "a producer without an id is written"
        );
        assert_eq!(stored_ids(&gateway).await, vec![0]);
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
        let response = handle(&gateway, &session, LOCALHOST, request, 9)
            .await
            .expect("acks=-1 answers");
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
