//! A producer that retries as a Kafka client without idempotence does: one request in flight,
//! a request timeout, a new connection after any failure, and the same batch again until it is
//! acknowledged. It logs every attempt and acknowledgement for the [`checker`](crate::checker).
//!
//! Records are numbered 0, 1, 2, ... in send order; a record's value is its number in decimal,
//! so whatever the log holds says which record it is.

use crate::checker::RecordId;
use crate::connect;
use crate::requests::{batch, produce};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// What the producer sends and how patiently.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub topic: String,
    pub records: u64,
    pub records_per_batch: u64,
    /// How long one attempt (connect and Produce) may take before it is abandoned.
    pub request_timeout: Duration,
    /// The pause before an attempt after a failed one.
    pub retry_backoff: Duration,
    /// Attempts per batch before the producer gives up on it (and the run reports it).
    pub max_attempts: u32,
    /// Before each batch the producer pauses for up to this long, drawn from an RNG seeded with
    /// `seed`: varied interleavings that one seed always repeats.
    pub max_think_time: Duration,
    pub seed: u64,
}

/// What the producer did.
#[derive(Debug, Default, Clone)]
pub struct ProducerLog {
    /// Records in first-send order.
    pub sent: Vec<RecordId>,
    /// Attempts per record (its batch's attempts).
    pub attempts: BTreeMap<RecordId, u32>,
    /// Acknowledged records and their offsets (base offset + position in the batch).
    pub acked: Vec<(RecordId, i64)>,
    /// Why attempts failed, in order: timeouts, refused connects, error codes.
    pub failures: Vec<String>,
    /// Batches given up after `max_attempts`.
    pub abandoned: Vec<RecordId>,
    /// Set once every batch is acknowledged or abandoned.
    pub done: bool,
}

/// The value a record carries.
pub fn record_value(id: RecordId) -> String {
    id.to_string()
}

/// The record a value names, if it names one.
pub fn record_id(value: &[u8]) -> Option<RecordId> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Produces every batch, logging into `log`. Ends when all are acknowledged or abandoned.
pub async fn run(config: ProducerConfig, log: Rc<RefCell<ProducerLog>>) {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut conn = None;
    let mut next: RecordId = 0;
    while next < config.records {
        let ids: Vec<RecordId> = (next..(next + config.records_per_batch).min(config.records)).collect();
        let values: Vec<String> = ids.iter().map(|id| record_value(*id)).collect();
        let records: Vec<(Option<&str>, &str)> = values.iter().map(|v| (None, v.as_str())).collect();
        let body = batch(-1, &records);
        let think_us = rng.random_range(0..=config.max_think_time.as_micros() as u64);
        tokio::time::sleep(Duration::from_micros(think_us)).await;
        log.borrow_mut().sent.extend(&ids);
        let mut attempt = 0;
        loop {
            attempt += 1;
            {
                let mut log = log.borrow_mut();
                for id in &ids {
                    log.attempts.insert(*id, attempt);
                }
            }
            let outcome = tokio::time::timeout(config.request_timeout, async {
                if conn.is_none() {
                    conn = Some(connect().await.map_err(|e| format!("connect: {:?}", e.kind()))?);
                }
                let client = conn.as_mut().expect("connected above");
                produce(client, &config.topic, body.clone())
                    .await
                    .map_err(|e| format!("produce: {e:#}"))
            })
            .await;
            let failure = match outcome {
                Ok(Ok((0, base_offset))) => {
                    let mut log = log.borrow_mut();
                    log.acked
                        .extend(ids.iter().enumerate().map(|(i, id)| (*id, base_offset + i as i64)));
                    break;
                }
                // A Kafka error code keeps the connection; the batch is retried on it.
                Ok(Ok((code, _))) => format!("error code {code}"),
                Ok(Err(e)) => {
                    conn = None;
                    e
                }
                Err(_) => {
                    // The request may still arrive and be written: the retry can duplicate it.
                    conn = None;
                    format!("no answer within {:?}", config.request_timeout)
                }
            };
            let (first, last) = (ids[0], ids[ids.len() - 1]);
            log.borrow_mut().failures.push(format!(
                "{} ms: records {first}..={last}: attempt {attempt}: {failure}",
                crate::sim_ms()
            ));
            if attempt >= config.max_attempts {
                log.borrow_mut().abandoned.extend(&ids);
                break;
            }
            tokio::time::sleep(config.retry_backoff).await;
        }
        next += ids.len() as u64;
    }
    log.borrow_mut().done = true;
}
