//! A consumer in a Kafka group that commits as it goes and, after any failure, starts over
//! from the group's committed offset, as a crashed and restarted Kafka consumer does. It logs
//! its deliveries, every restart and every acknowledged commit for the
//! [`commit_checker`](crate::commit_checker).
//!
//! It commits as a standalone consumer (generation -1, no member id), which Kafka and the
//! gateway accept for a group with no members; the offsets then take the gateway's whole path
//! into Iggy (CO-ENCODE-1, CO-ZERO-1, CO-MEMBER-1), across gateway restarts.

use crate::checker::RecordId;
use crate::connect;
use crate::consumer::deliver;
use crate::producer::ProducerLog;
use crate::requests::fetch;
use kafka_wire_client::offsets::{commit_one, fetch_one};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How the consumer polls and commits.
#[derive(Debug, Clone)]
pub struct CommittingConsumerConfig {
    pub topic: String,
    pub group: String,
    /// A Fetch's max_wait_ms.
    pub max_wait_ms: i32,
    /// How long one step (connect, OffsetFetch, Fetch, OffsetCommit) may take before the
    /// consumer gives up and restarts.
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
}

/// One start of the consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// How many records were delivered before this start.
    pub after_deliveries: usize,
    /// The offset it started from: the committed offset, or 0 when nothing was committed.
    pub at: i64,
    /// The last commit acknowledged before this start.
    pub last_acked_commit: Option<i64>,
}

/// What the consumer did.
#[derive(Debug, Default, Clone)]
pub struct CommittingConsumerLog {
    /// (offset, record) in delivery order, redeliveries after a restart included.
    pub delivered: Vec<(i64, RecordId)>,
    pub resumes: Vec<Resume>,
    /// Commits the gateway acknowledged, in order.
    pub acked_commits: Vec<i64>,
    pub failures: Vec<String>,
}

/// Consumes into `log` until `producer` is done and everything is read and committed.
pub async fn run(
    config: CommittingConsumerConfig,
    producer: Rc<RefCell<ProducerLog>>,
    log: Rc<RefCell<CommittingConsumerLog>>,
) {
    let mut conn = None;
    // None: (re)start from the committed offset.
    let mut position: Option<i64> = None;
    loop {
        let producer_done = producer.borrow().done;
        let step = tokio::time::timeout(config.request_timeout, async {
            if conn.is_none() {
                conn = Some(connect().await.map_err(|e| format!("connect: {:?}", e.kind()))?);
            }
            let client = conn.as_mut().expect("connected above");
            let from = match position {
                Some(offset) => offset,
                None => {
                    let (committed, .., error) = fetch_one(client, &config.group, &config.topic, 0)
                        .await
                        .map_err(|e| format!("offset fetch: {e:#}"))?;
                    if error != 0 {
                        return Err(format!("offset fetch: error {error}"));
                    }
                    let at = committed.max(0);
                    let mut log = log.borrow_mut();
                    let resume = Resume {
                        after_deliveries: log.delivered.len(),
                        at,
                        last_acked_commit: log.acked_commits.last().copied(),
                    };
                    log.resumes.push(resume);
                    position = Some(at);
                    at
                }
            };
            let (records, high_watermark) = fetch(client, &config.topic, from, config.max_wait_ms)
                .await
                .map_err(|e| format!("fetch: {e:#}"))?;
            let next = deliver(&records, from, &mut log.borrow_mut().delivered);
            position = Some(next);
            if next > from {
                let code = commit_one(client, &config.group, &config.topic, 0, next)
                    .await
                    .map_err(|e| format!("commit {next}: {e:#}"))?;
                if code != 0 {
                    return Err(format!("commit {next}: error {code}"));
                }
                log.borrow_mut().acked_commits.push(next);
            }
            Ok(next >= high_watermark)
        })
        .await;
        match step {
            Ok(Ok(caught_up)) => {
                if producer_done && caught_up {
                    return;
                }
                continue;
            }
            Ok(Err(failure)) => log.borrow_mut().failures.push(failure),
            Err(_) => log
                .borrow_mut()
                .failures
                .push(format!("no answer within {:?}", config.request_timeout)),
        }
        // A crash: the next start reads the committed offset.
        conn = None;
        position = None;
        tokio::time::sleep(config.retry_backoff).await;
    }
}
