//! A consumer that follows partition 0 from offset 0 with long-poll Fetches, reconnecting after
//! any failure, until the producer is done and it has caught up with the high watermark. It
//! logs every delivered record as (offset, record) for the [`checker`](crate::checker).

use crate::checker::RecordId;
use crate::connect;
use crate::producer::{record_id, ProducerLog};
use crate::requests::{fetch, Fetched};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How the consumer polls.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub topic: String,
    /// A Fetch's max_wait_ms.
    pub max_wait_ms: i32,
    /// How long one attempt (connect and Fetch) may take before it is abandoned.
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
}

/// What the consumer delivered.
#[derive(Debug, Default, Clone)]
pub struct ConsumerLog {
    /// (offset, record) in delivery order; a value that names no record is `RecordId::MAX`.
    pub delivered: Vec<(i64, RecordId)>,
    pub failures: Vec<String>,
}

/// Appends the fetched records at or past `from` to `delivered` as (offset, record) and returns
/// the next offset to fetch. Kafka clients skip what precedes their fetch offset in a returned
/// batch. A value that names no record is delivered as `RecordId::MAX`.
pub(crate) fn deliver(records: &[Fetched], from: i64, delivered: &mut Vec<(i64, RecordId)>) -> i64 {
    let mut next = from;
    for record in records.iter().filter(|r| r.offset >= from) {
        let id = record.value.as_deref().and_then(record_id).unwrap_or(RecordId::MAX);
        delivered.push((record.offset, id));
        next = record.offset + 1;
    }
    next
}

/// Follows the partition into `log` until `producer` is done and everything is read.
pub async fn run(config: ConsumerConfig, producer: Rc<RefCell<ProducerLog>>, log: Rc<RefCell<ConsumerLog>>) {
    let mut conn = None;
    let mut offset = 0i64;
    loop {
        let producer_done = producer.borrow().done;
        let outcome = tokio::time::timeout(config.request_timeout, async {
            if conn.is_none() {
                conn = Some(connect().await.map_err(|e| format!("connect: {:?}", e.kind()))?);
            }
            let client = conn.as_mut().expect("connected above");
            fetch(client, &config.topic, offset, config.max_wait_ms)
                .await
                .map_err(|e| format!("fetch: {e:#}"))
        })
        .await;
        match outcome {
            Ok(Ok((records, high_watermark))) => {
                offset = deliver(&records, offset, &mut log.borrow_mut().delivered);
                // Done once the producer had finished before this Fetch and it found nothing more.
                if producer_done && offset >= high_watermark {
                    return;
                }
                continue;
            }
            Ok(Err(e)) => {
                conn = None;
                log.borrow_mut()
                    .failures
                    .push(format!("{} ms: offset {offset}: {e}", crate::sim_ms()));
            }
            Err(_) => {
                conn = None;
                log.borrow_mut().failures.push(format!(
                    "offset {offset}: no answer within {:?}",
                    config.request_timeout
                ));
            }
        }
        tokio::time::sleep(config.retry_backoff).await;
    }
}
