//! Scenario 8's what-if: a gateway that deduplicates idempotent producers' batches in memory by
//! (producer id, epoch, partition, base sequence), as the seed's design left open. It exists
//! only here: a proxy host in front of one reference gateway, restarted with it (so its memory
//! dies with the gateway process, as an in-memory table would), forwarding every request and
//! answering a Produce whose batch it has already seen acknowledged with that acknowledgement,
//! without writing again. The reference gateway keeps PID-IGNORE-1.
//!
//! Like a Kafka broker it remembers a batch only once it was appended and acknowledged, the
//! last [`REMEMBERED_BATCHES`] per producer and partition; a batch whose first attempt failed
//! or went unanswered is forwarded again. So it cannot acknowledge a record that was never
//! written; the sweep shows which duplicates it removes (a lost Produce response) and which it
//! cannot (a retry after a gateway restart, or after a lost gateway-to-Iggy response: the
//! gateway never acknowledged the first write, so nothing was remembered).

use crate::trace::Trace;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_wire_client::MAX_RESPONSE_FRAME;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

/// Batches remembered per (producer id, epoch, topic, partition): Kafka's five.
pub const REMEMBERED_BATCHES: usize = 5;

/// (producer id, epoch, topic, partition).
type Key = (i64, i16, String, i32);

/// What one proxy process remembers: per key, (base sequence, base offset) of acknowledged
/// batches, oldest first.
#[derive(Default)]
struct Memory {
    batches: BTreeMap<Key, VecDeque<(i32, i64)>>,
}

/// The idempotence facts of a single-partition Produce: key and base sequence.
fn idempotent_batch(request: &ProduceRequest) -> Option<(Key, i32)> {
    let [topic] = request.topic_data.as_slice() else {
        return None;
    };
    let [partition] = topic.partition_data.as_slice() else {
        return None;
    };
    let records = partition.records.as_ref()?;
    let batches = kig_core::batch::parse_batches(records).ok()?;
    let first = batches.first()?;
    let header = &first.header;
    (header.producer_id >= 0).then(|| {
        (
            (
                header.producer_id,
                header.producer_epoch,
                topic.name.0.to_string(),
                partition.index,
            ),
            header.base_sequence,
        )
    })
}

async fn read_frame(stream: &mut TcpStream) -> std::io::Result<Option<Bytes>> {
    let mut size = [0u8; 4];
    if stream.read_exact(&mut size).await.is_err() {
        return Ok(None);
    }
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > MAX_RESPONSE_FRAME {
        return Err(std::io::Error::other(format!("frame size {size}")));
    }
    let mut body = BytesMut::zeroed(size as usize);
    stream.read_exact(&mut body).await?;
    Ok(Some(body.freeze()))
}

async fn write_frame(stream: &mut TcpStream, frame: &[u8]) -> std::io::Result<()> {
    stream.write_all(&(frame.len() as i32).to_be_bytes()).await?;
    stream.write_all(frame).await
}

/// The answer to a remembered batch: success at its first acknowledgement's offset.
fn remembered_answer(correlation_id: i32, version: i16, request: &ProduceRequest, base_offset: i64) -> Bytes {
    let topic = &request.topic_data[0];
    let response = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(topic.name.clone())
        .with_partition_responses(vec![PartitionProduceResponse::default()
            .with_index(topic.partition_data[0].index)
            .with_error_code(0)
            .with_base_offset(base_offset)])]);
    let mut buf = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, ApiKey::Produce.response_header_version(version))
        .expect("a response header encodes");
    response.encode(&mut buf, version).expect("a Produce response encodes");
    buf.freeze()
}

/// The base offset an acknowledged single-partition Produce answer gives, if any.
fn acknowledged(version: i16, mut frame: Bytes) -> Option<i64> {
    ResponseHeader::decode(&mut frame, ApiKey::Produce.response_header_version(version)).ok()?;
    let response = ProduceResponse::decode(&mut frame, version).ok()?;
    let partition = response.responses.first()?.partition_responses.first()?;
    (partition.error_code == 0).then_some(partition.base_offset)
}

async fn proxy_connection(
    mut client: TcpStream,
    upstream: (String, u16),
    memory: Arc<Mutex<Memory>>,
    name: String,
    trace: Trace,
) -> std::io::Result<()> {
    let mut server = TcpStream::connect((upstream.0.as_str(), upstream.1)).await?;
    while let Some(frame) = read_frame(&mut client).await? {
        let mut peek = frame.clone();
        let produce = (|| {
            let key = i16::from_be_bytes([*peek.first()?, *peek.get(1)?]);
            let version = i16::from_be_bytes([*peek.get(2)?, *peek.get(3)?]);
            if key != ApiKey::Produce as i16 {
                return None;
            }
            let header = RequestHeader::decode(&mut peek, ApiKey::Produce.request_header_version(version)).ok()?;
            let request = ProduceRequest::decode(&mut peek, version).ok()?;
            let (batch_key, sequence) = idempotent_batch(&request)?;
            Some((header.correlation_id, version, request, batch_key, sequence))
        })();
        if let Some((correlation_id, version, request, key, sequence)) = &produce {
            let seen = memory
                .lock()
                .expect("memory lock")
                .batches
                .get(key)
                .and_then(|b| b.iter().find(|(s, _)| s == sequence).map(|(_, o)| *o));
            if let Some(base_offset) = seen {
                trace.event(
                    &name,
                    format!(
                        "batch of producer {} epoch {} partition {} sequence {sequence} already written at {base_offset}: answered without writing",
                        key.0, key.1, key.3
                    ),
                );
                write_frame(
                    &mut client,
                    &remembered_answer(*correlation_id, *version, request, base_offset),
                )
                .await?;
                continue;
            }
        }
        write_frame(&mut server, &frame).await?;
        let Some(answer) = read_frame(&mut server).await? else {
            return Ok(());
        };
        if let Some((_, version, _, key, sequence)) = produce {
            if let Some(base_offset) = acknowledged(version, answer.clone()) {
                let mut memory = memory.lock().expect("memory lock");
                let remembered = memory.batches.entry(key).or_default();
                remembered.push_back((sequence, base_offset));
                while remembered.len() > REMEMBERED_BATCHES {
                    remembered.pop_front();
                }
            }
        }
        write_frame(&mut client, &answer).await?;
    }
    Ok(())
}

/// Serves the proxy on `port`, forwarding to `upstream`, with a memory that lives as long as
/// this process.
pub async fn run_dedup(port: u16, upstream: (String, u16), name: String, trace: Trace) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    let memory = Arc::new(Mutex::new(Memory::default()));
    loop {
        let (stream, _) = listener.accept().await?;
        let (memory, upstream, name, trace) = (memory.clone(), upstream.clone(), name.clone(), trace.clone());
        tokio::spawn(async move {
            let _ = proxy_connection(stream, upstream, memory, name, trace).await;
        });
    }
}

/// Registers the proxy host `name` in front of `gateway`.
pub fn dedup_host(sim: &mut turmoil::Sim<'_>, name: &str, gateway: &str, port: u16, trace: Trace) {
    let host = name.to_string();
    let (name, gateway) = (name.to_string(), gateway.to_string());
    sim.host(host.as_str(), move || {
        run_dedup(port, (gateway.clone(), port), name.clone(), trace.clone())
    });
}
