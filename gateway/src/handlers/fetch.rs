//! Fetch: reads each partition from its explicit offset (OFFSET-IDENTITY-1), maps messages back
//! to Kafka records and builds one uncompressed batch per partition (FETCH-BATCH-1) within
//! the request's byte limits (FETCH-LIMIT-1), long-polling on the backend's append signal until
//! `min_bytes` arrive or `max_wait_ms` passes (FETCH-WAIT-1). A partition served short of its
//! end is read ahead for the consumer's next Fetch (FETCH-READAHEAD-1, `read_ahead.rs`).

use crate::auth::sessions::Session;
use crate::backend::{stored_bytes, watermarks_and_read, Backend, ReadLimits, Watermarks};
use crate::config::IggyTarget;
use crate::error_map;
use crate::gateway::Gateway;
use iggy_common::IggyMessage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kig_core::fetch_batch::FetchBatchBuilder;
use kig_core::mapping::{read_record, ReadForm, ReadScratch};
use std::collections::VecDeque;
use std::time::Duration;

/// The most messages one partition read asks the backend for.
pub const MAX_MESSAGES_PER_READ: u32 = 10_000;

#[derive(Debug, PartialEq, Eq)]
struct Slot {
    topic: usize,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    target: Result<IggyTarget, i16>,
}

/// One pass over every requested partition. Returns the response and its record bytes.
async fn read_pass<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: &FetchRequest,
    slots: &[Slot],
) -> (Vec<FetchableTopicResponse>, usize) {
    let mut topics: Vec<FetchableTopicResponse> = request
        .topics
        .iter()
        .map(|t| {
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
        })
        .collect();
    // LIMIT-FETCH-BYTES-1: as Kafka's fetch.max.bytes, whatever the client asks for.
    let request_max = usize::try_from(request.max_bytes)
        .unwrap_or(0)
        .min(gateway.config.limits.fetch_max_bytes);
    let mut total = 0usize;
    for slot in slots {
        let data = read_partition(gateway, session, slot, request_max.saturating_sub(total), total == 0).await;
        total += data.records.as_ref().map_or(0, |r| r.len());
        topics[slot.topic].partitions.push(data);
    }
    (topics, total)
}

fn partition_error(partition: i32, code: i16, marks: Option<Watermarks>) -> PartitionData {
    let (start, hw) = marks.map_or((-1, -1), |m| (m.log_start_offset as i64, m.high_watermark as i64));
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(code)
        .with_high_watermark(hw)
        .with_last_stable_offset(hw)
        .with_log_start_offset(start)
}

async fn read_partition<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    slot: &Slot,
    response_room: usize,
    first_in_response: bool,
) -> PartitionData {
    let target = match &slot.target {
        Ok(target) => target,
        Err(code) => return partition_error(slot.partition, *code, None),
    };
    let context = || format!("Fetch from {}/{}-{}", target.stream, target.topic, slot.partition);
    let partition = slot.partition as u32;
    let limit = slot.max_bytes.min(response_room);
    // Nothing would be served: no read, only the watermarks (FETCH-LIMIT-1, FETCH-RANGE-1).
    let skip_read = slot.offset < 0 || (limit == 0 && !first_in_response);
    let limits = ReadLimits {
        max_messages: MAX_MESSAGES_PER_READ,
        max_bytes: limit as u64,
    };
    let (stream, topic) = (&target.stream, &target.topic);
    // FETCH-READAHEAD-1: the previous Fetch may have started this very read.
    let ahead = if skip_read {
        None
    } else {
        gateway
            .read_ahead
            .take(session, stream, topic, partition, slot.offset as u64)
            .await
    };
    let (marks, read) = match ahead {
        Some(held) => (Ok(held.marks), Ok(held.messages)),
        None if skip_read => (
            session.backend.watermarks(stream, topic, partition).await,
            Ok(VecDeque::new()),
        ),
        None => {
            let (marks, read) =
                watermarks_and_read(&*session.backend, stream, topic, partition, slot.offset as u64, limits).await;
            (marks, read.map(VecDeque::from))
        }
    };
    let mut marks = match marks {
        Ok(marks) => marks,
        Err(e) => return partition_error(slot.partition, error_map::backend_error(&e, &context()), None),
    };
    if let Ok(messages) = &read {
        // An append that landed between the two answers: the read saw it, so the watermark the
        // response reports covers it (a record is never served above the high watermark).
        if let Some(last) = messages.back() {
            marks.high_watermark = marks.high_watermark.max(last.header.offset + 1);
        }
    }
    // FETCH-RANGE-1
    if slot.offset < marks.log_start_offset as i64 || slot.offset > marks.high_watermark as i64 {
        return partition_error(slot.partition, ResponseError::OffsetOutOfRange.code(), Some(marks));
    }
    let data = partition_error(slot.partition, 0, Some(marks)).with_aborted_transactions(Some(vec![]));
    if slot.offset == marks.high_watermark as i64 || skip_read {
        return data;
    }
    let mut messages = match read {
        Ok(messages) => messages,
        Err(e) => return partition_error(slot.partition, error_map::backend_error(&e, &context()), Some(marks)),
    };
    // FETCH-READAHEAD-1: the partition holds more than this read found, so the consumer's next
    // Fetch will ask for it; read on from the end of this read now, while this response is
    // built and sent.
    let read_end = messages.back().map_or(slot.offset as u64, |m| m.header.offset + 1);
    let most_bytes = gateway.config.limits.fetch_max_bytes;
    let asked = slot.max_bytes.min(most_bytes);
    let read_ahead = |max_bytes: usize| {
        let ahead_limits = ReadLimits {
            max_bytes: max_bytes as u64,
            ..limits
        };
        gateway.read_ahead.begin_followed(
            session,
            stream,
            topic,
            partition,
            read_end,
            ahead_limits,
            marks.high_watermark,
        )
    };
    // What was read, as a batch takes it: the batch's room (up to the limit, so it is written
    // without regrowing), and beyond the limit what will be left unserved (FETCH-READAHEAD-4).
    let stored: usize = messages.iter().map(batch_bytes).sum();
    let mut pending = read_ahead_bytes(asked, stored.saturating_sub(limit), most_bytes)
        .filter(|_| read_end < marks.high_watermark)
        .and_then(read_ahead);
    if pending.as_ref().is_some_and(|p| !p.is_done()) {
        // FETCH-READAHEAD-1: the Iggy SDK writes a request from a task of its own, which waits
        // in this worker's LIFO slot until this task yields; yield once so the poll goes out
        // now, not after the response is built and written.
        tokio::task::yield_now().await;
    }
    let mut builder = FetchBatchBuilder::with_capacity(stored.min(limit));
    let mut served = 0;
    let mut scratch = ReadScratch::default();
    for message in &messages {
        let (record, form) = read_record(message, &mut scratch);
        if let ReadForm::Malformed(reason) = &form {
            // MAP-READ-MALFORMED-1
            tracing::warn!(
                "{}: offset {} served as a native message: {reason}",
                context(),
                message.header.offset
            );
        }
        if !builder.push_read_within(message.header.offset, &record, limit) {
            break;
        }
        served += 1;
    }
    // KIP-74: only the response's first batch may exceed the limits.
    let fits = first_in_response || builder.encoded_len() <= limit;
    if !fits {
        served = 0;
    }
    // FETCH-READAHEAD-1: what was read but not served is held with a read from its end (begun
    // only now if the read had reached the end), so what is held starts at the offset the
    // consumer asks for next.
    let next = messages.get(served).map_or(read_end, |m| m.header.offset);
    let mut hold_without_read = false;
    if pending.is_none() && served < messages.len() {
        match read_ahead_bytes(asked, messages.range(served..).map(batch_bytes).sum(), most_bytes) {
            Some(max_bytes) => pending = read_ahead(max_bytes),
            None => hold_without_read = true,
        }
    }
    if pending.is_some() || hold_without_read {
        // What was served goes from the front; the rest is not moved.
        messages.drain(..served);
        match pending {
            Some(pending) => gateway.read_ahead.keep(pending, next, messages),
            None => gateway
                .read_ahead
                .keep_without_read(session, stream, topic, partition, next, messages, marks),
        }
    }
    match builder.finish().filter(|_| fits) {
        Some(batch) => data.with_records(Some(batch)),
        None => data,
    }
}

/// A record's encoding beyond its stored payload and headers (length, attributes, deltas, key
/// and value lengths), about; sizes the batch buffer and what a read leaves unserved.
const RECORD_OVERHEAD_BYTES: usize = 16;

/// About what `message` takes in a Fetch's batch.
fn batch_bytes(message: &IggyMessage) -> usize {
    RECORD_OVERHEAD_BYTES + stored_bytes(message) as usize
}

/// The least a read made ahead asks for (FETCH-READAHEAD-4), so that a consumer asking a few
/// records a Fetch is served many Fetches from one read instead of a read a Fetch.
pub(crate) const READ_AHEAD_MIN_BYTES: usize = 16 * 1024;

/// FETCH-READAHEAD-4: the byte limit of the read made ahead of a Fetch that asked for `asked`
/// bytes of the partition and leaves `unserved_bytes` of what it read unserved (held for the
/// next Fetch): `None` when those cover what the next Fetch asks, so no read is made; otherwise
/// what the next Fetch can serve beyond them, and at least [`READ_AHEAD_MIN_BYTES`] (up to
/// `most_bytes`, the gateway's `fetch_max_bytes`). Without the deduction a Fetch that served a
/// little less than it read (a batch takes a few more bytes a record than Iggy stores) added a
/// whole limit to what was held every time: what was held grew up to the budget, every Fetch
/// moved all of it, and a consumer catching up in small steps spent its Fetch's CPU copying
/// (issue 53).
fn read_ahead_bytes(asked: usize, unserved_bytes: usize, most_bytes: usize) -> Option<usize> {
    (unserved_bytes < asked).then(|| (asked - unserved_bytes).max(READ_AHEAD_MIN_BYTES.min(most_bytes)))
}

/// The partitions a Fetch names, each once (LIMIT-FETCH-DUPLICATES-1: a partition named twice
/// is read and answered once, as Kafka's fetch map keeps one entry per partition), with the
/// target `target_of` gives its topic.
fn slots_of(request: &FetchRequest, mut target_of: impl FnMut(usize, i32) -> Result<IggyTarget, i16>) -> Vec<Slot> {
    let mut slots = Vec::new();
    let mut named = std::collections::HashSet::new();
    for (i, topic) in request.topics.iter().enumerate() {
        for p in &topic.partitions {
            if !named.insert((topic.topic.0.as_str(), p.partition)) {
                continue;
            }
            slots.push(Slot {
                topic: i,
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                target: target_of(i, p.partition),
            });
        }
    }
    slots
}

/// The slots with each topic looked up on the backend: a missing topic or partition is the
/// slot's error code.
async fn resolved_slots<B: Backend>(gateway: &Gateway<B>, session: &Session<B>, request: &FetchRequest) -> Vec<Slot> {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        topics.push(
            match super::resolve_topic(gateway, session, topic.topic.0.as_str()).await {
                Ok((target, info)) => Ok((target, info.partitions)),
                Err(code) => Err(code),
            },
        );
    }
    slots_of(request, |i, partition| match &topics[i] {
        Ok((_, count)) if partition < 0 || partition as u32 >= *count => {
            Err(ResponseError::UnknownTopicOrPartition.code())
        }
        Ok((target, _)) => Ok(target.clone()),
        Err(code) => Err(*code),
    })
}

/// Whether any partition of a pass answered an error.
fn any_error(topics: &[FetchableTopicResponse]) -> bool {
    topics.iter().flat_map(|t| &t.partitions).any(|p| p.error_code != 0)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: FetchRequest,
    _version: i16,
) -> FetchResponse {
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    // LIMIT-FETCH-WAIT-1
    // LIMIT-FETCH-BYTES-1 cuts max_bytes in read_pass, once per pass of a long poll: counted
    // here, once per request.
    if usize::try_from(request.max_bytes).unwrap_or(0) > gateway.config.limits.fetch_max_bytes {
        crate::metrics::metrics().limit_hit("LIMIT-FETCH-BYTES-1");
    }
    let asked_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    if asked_wait > gateway.config.limits.fetch_max_wait {
        crate::metrics::metrics().limit_hit("LIMIT-FETCH-WAIT-1");
    }
    let wait = asked_wait.min(gateway.config.limits.fetch_max_wait);
    let deadline = tokio::time::Instant::now() + wait;
    // Take the generation before reading, so an append during the pass is not missed.
    let mut generation = gateway.backend.append_generation();
    // FETCH-RESOLVE-1: the first pass is read on the targets the topic mapping names, as if every
    // topic existed with the partitions asked for, and with no lookup: a pass that answered every
    // partition without an error has shown what the lookup would (each topic and partition exists
    // and this session may read it), so a Fetch costs one backend round trip, not two. Only a pass
    // with an error has its topics looked up; it stands when the lookup gives every slot the same
    // target, and is otherwise read again on the looked-up slots.
    let guessed = slots_of(&request, |i, partition| {
        if partition < 0 {
            return Err(ResponseError::UnknownTopicOrPartition.code());
        }
        Ok(gateway.config.topics.resolve(request.topics[i].topic.0.as_str()))
    });
    let guessed_pass = read_pass(gateway, session, &request, &guessed).await;
    let (slots, mut pass) = if any_error(&guessed_pass.0) {
        let slots = resolved_slots(gateway, session, &request).await;
        let pass = (slots == guessed).then_some(guessed_pass);
        (slots, pass)
    } else {
        (guessed, Some(guessed_pass))
    };
    loop {
        let (topics, bytes) = match pass.take() {
            Some(pass) => pass,
            None => read_pass(gateway, session, &request, &slots).await,
        };
        if bytes >= min_bytes || any_error(&topics) || tokio::time::Instant::now() >= deadline {
            return FetchResponse::default().with_responses(topics);
        }
        if tokio::time::timeout_at(deadline, gateway.backend.wait_for_append(generation))
            .await
            .is_err()
        {
            let (topics, _) = read_pass(gateway, session, &request, &slots).await;
            return FetchResponse::default().with_responses(topics);
        }
        generation = gateway.backend.append_generation();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;
    use crate::handlers::test_support::gateway_with_topic;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn fetch_readahead_4_a_read_ahead_asks_what_the_next_fetch_can_serve_beyond_what_is_held() {
        const MOST: usize = 50 << 20;
        const MIB: usize = 1 << 20;
        assert_eq!(
            read_ahead_bytes(MIB, 0, MOST),
            Some(MIB),
            "nothing held: the whole limit"
        );
        assert_eq!(read_ahead_bytes(MIB, 300_000, MOST), Some(MIB - 300_000));
        assert_eq!(
            read_ahead_bytes(MIB, MIB - 100, MOST),
            Some(READ_AHEAD_MIN_BYTES),
            "never less than the least read"
        );
        assert_eq!(
            read_ahead_bytes(MIB, MIB, MOST),
            None,
            "what is held covers the next Fetch"
        );
        assert_eq!(read_ahead_bytes(MIB, 5 * MIB, MOST), None);
        assert_eq!(
            read_ahead_bytes(600, 0, MOST),
            Some(READ_AHEAD_MIN_BYTES),
            "a small Fetch reads more ahead"
        );
        assert_eq!(read_ahead_bytes(600, 0, 1_000), Some(1_000), "up to fetch_max_bytes");
        assert_eq!(
            read_ahead_bytes(0, 0, MOST),
            None,
            "a limit of 0 reads nothing ahead (LIMIT-READ-AHEAD-1)"
        );
    }

    fn fetch(topics: &[(&'static str, i32)]) -> FetchRequest {
        FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_max_wait_ms(0)
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partition)| {
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_static_str(name)))
                            .with_partitions(vec![FetchPartition::default()
                                .with_partition(*partition)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(1 << 20)])
                    })
                    .collect(),
            )
    }

    #[tokio::test]
    async fn fetch_resolve_1_a_partition_the_lookup_refuses_answers_the_lookup_error() {
        let gateway = gateway_with_topic(FileConfig::default(), "known").await;
        let session = gateway.default_session.clone();
        let request = fetch(&[("known", 0), ("unknown", 0), ("known", 1)]);
        let response = handle(&gateway, &session, request, 12).await;
        let codes: Vec<(String, i32, i16)> = response
            .responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic.0.to_string(), p.partition_index, p.error_code))
            })
            .collect();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(
            codes,
            vec![
                ("known".to_string(), 0, 0),
                ("unknown".to_string(), 0, unknown),
                ("known".to_string(), 1, unknown),
            ]
        );
    }
}
