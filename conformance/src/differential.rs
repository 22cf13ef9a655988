//! Model vs real: random sequences of backend operations applied to the embedded model and to a
//! real Iggy server must be observed the same way: offsets, errors, stored payloads and headers,
//! whether timestamps are set, consumer offsets. Failures shrink (proptest) to the shortest
//! sequence that still differs. Each difference is fixed in the model or recorded in
//! docs/spec/real-iggy-differs.md with a case that shows it.
//!
//! [`run_auth`] does the same for authentication and authorization: logins (passwords and
//! personal access tokens), then users with random permission sets acting through their own
//! sessions, before and after root changes their permissions, deactivates and deletes them.
//!
//! Every run is seeded (`KIG_DIFF_SEED`, else from the clock) and says its seed when it fails;
//! every call has a timeout ([`CALL_TIMEOUT`]). `KIG_DIFF_TRACE=1` prints every compared step of
//! the auth differential to stderr.

use bytes::Bytes;
use iggy_common::{IggyMessage, IggyMessageHeader};
use kafka_iggy_gateway::backend::{Backend, BackendError, ClientId, ReadLimits, TopicSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod admin;
mod auth;
pub use admin::*;
pub use auth::*;

/// The longest any one backend call of the differential may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// The run's seed: `KIG_DIFF_SEED` when set, else from the clock.
pub fn seed_from_env() -> u64 {
    std::env::var("KIG_DIFF_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                ^ u64::from(std::process::id()).rotate_left(32)
        })
}

const TOPICS: u8 = 2;
const GROUPS: u8 = 2;
const CLIENTS: u64 = 2;

/// One backend operation; indexes name topics, groups and clients of the current stream.
#[derive(Debug, Clone)]
pub enum Op {
    CreateTopic {
        topic: u8,
        partitions: u32,
    },
    DeleteTopic {
        topic: u8,
    },
    Append {
        topic: u8,
        partition: u32,
        messages: Vec<Msg>,
    },
    Read {
        topic: u8,
        partition: u32,
        offset: u64,
        count: u32,
    },
    Watermarks {
        topic: u8,
        partition: u32,
    },
    CreateGroup {
        topic: u8,
        group: u8,
    },
    JoinGroup {
        topic: u8,
        group: u8,
        client: u64,
    },
    Store {
        topic: u8,
        partition: u32,
        group: u8,
        client: u64,
        offset: u64,
    },
    Get {
        topic: u8,
        partition: u32,
        group: u8,
    },
    DeleteOffset {
        topic: u8,
        partition: u32,
        group: u8,
        client: u64,
    },
}

/// A message as sent; shapes Iggy refuses are included on purpose.
#[derive(Debug, Clone)]
pub struct Msg {
    pub payload: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub origin_timestamp_us: u64,
}

fn arb_msg() -> impl Strategy<Value = Msg> {
    (
        prop_oneof![4 => proptest::collection::vec(any::<u8>(), 1..32), 1 => Just(vec![])],
        proptest::collection::vec(
            (
                prop_oneof![4 => "[a-z]{1,8}", 1 => Just(String::new()), 1 => "[a-z]{256}"],
                prop_oneof![4 => proptest::collection::vec(any::<u8>(), 1..16), 1 => Just(vec![]), 1 => Just(vec![7; 256])],
            ),
            0..3,
        ),
        prop_oneof![3 => Just(1_764_000_000_000_000u64), 1 => Just(0u64), 1 => Just(1_764_000_000_000_000u64 - 7_200_000_000)],
    )
        .prop_map(|(payload, headers, origin_timestamp_us)| Msg {
            payload,
            headers,
            origin_timestamp_us,
        })
}

pub fn arb_op() -> impl Strategy<Value = Op> {
    let topic = 0..TOPICS;
    let partition = 0u32..3;
    let group = 0..GROUPS;
    let client = 0..CLIENTS;
    prop_oneof![
        2 => (topic.clone(), 1u32..3).prop_map(|(topic, partitions)| Op::CreateTopic { topic, partitions }),
        1 => topic.clone().prop_map(|topic| Op::DeleteTopic { topic }),
        4 => (topic.clone(), partition.clone(), proptest::collection::vec(arb_msg(), 1..4))
            .prop_map(|(topic, partition, messages)| Op::Append { topic, partition, messages }),
        2 => (topic.clone(), partition.clone(), 0u64..6, 1u32..4)
            .prop_map(|(topic, partition, offset, count)| Op::Read { topic, partition, offset, count }),
        1 => (topic.clone(), partition.clone()).prop_map(|(topic, partition)| Op::Watermarks { topic, partition }),
        1 => (topic.clone(), group.clone()).prop_map(|(topic, group)| Op::CreateGroup { topic, group }),
        1 => (topic.clone(), group.clone(), client.clone()).prop_map(|(topic, group, client)| Op::JoinGroup { topic, group, client }),
        2 => (topic.clone(), partition.clone(), group.clone(), client.clone(), 0u64..5)
            .prop_map(|(topic, partition, group, client, offset)| Op::Store { topic, partition, group, client, offset }),
        1 => (topic.clone(), partition.clone(), group.clone()).prop_map(|(topic, partition, group)| Op::Get { topic, partition, group }),
        1 => (topic, partition, group, client)
            .prop_map(|(topic, partition, group, client)| Op::DeleteOffset { topic, partition, group, client }),
    ]
}

/// A read message as observed: offset, payload, headers, origin timestamp set, server timestamp set.
pub type SeenMessage = (u64, Vec<u8>, BTreeMap<String, Vec<u8>>, bool, bool);

/// What an operation's caller can observe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Ok,
    /// The Kafka error code.
    Error(i16),
    Offset(Option<u64>),
    Messages(Vec<SeenMessage>),
    Marks(u64, u64),
    /// No answer within [`CALL_TIMEOUT`].
    TimedOut,
}

/// Errors are compared by the Kafka code a client would be told (ERR-MAP-1): the server and the
/// model may name one condition by different Iggy variants (a topic's name or id not found).
fn error_code(e: &BackendError) -> i16 {
    kafka_iggy_gateway::error_map::kafka_code(e).0
}

fn seen<T>(r: Result<T, BackendError>, f: impl FnOnce(T) -> Seen) -> Seen {
    match r {
        Ok(v) => f(v),
        Err(e) => Seen::Error(error_code(&e)),
    }
}

fn message(m: &Msg) -> IggyMessage {
    let headers: BTreeMap<_, _> = m
        .headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                iggy_common::HeaderKey::try_from(k.as_str()).ok()?,
                iggy_common::HeaderValue::from_raw(iggy_common::HeaderKind::Raw, v).ok()?,
            ))
        })
        .collect();
    // Shapes the SDK's builder refuses are built by hand, as a buggy caller would send them.
    let built = IggyMessage::builder()
        .payload(Bytes::from(m.payload.clone()))
        .maybe_user_headers((!headers.is_empty()).then_some(headers))
        .build();
    let mut msg = built.unwrap_or_else(|_| IggyMessage {
        header: IggyMessageHeader {
            payload_length: m.payload.len() as u32,
            ..IggyMessageHeader::default()
        },
        payload: Bytes::from(m.payload.clone()),
        user_headers: None,
    });
    msg.header.origin_timestamp = m.origin_timestamp_us;
    msg
}

/// Applies `op` in `stream` (created by the caller) and returns what was observed.
pub async fn apply<B: Backend>(b: &B, stream: &str, op: &Op, client_base: ClientId) -> Seen {
    let topic = |t: &u8| format!("t{t}");
    let group = |g: &u8| format!("g{g}");
    match op {
        Op::CreateTopic { topic: t, partitions } => seen(
            b.create_topic(
                stream,
                &topic(t),
                TopicSpec {
                    partitions: *partitions,
                    message_expiry_us: None,
                },
            )
            .await,
            |_| Seen::Ok,
        ),
        Op::DeleteTopic { topic: t } => seen(b.delete_topic(stream, &topic(t)).await, |_| Seen::Ok),
        Op::Append {
            topic: t,
            partition,
            messages,
        } => {
            let msgs = messages.iter().map(message).collect();
            seen(b.append(stream, &topic(t), *partition, msgs).await, Seen::Offset)
        }
        Op::Read {
            topic: t,
            partition,
            offset,
            count,
        } => {
            let limits = ReadLimits {
                max_messages: *count,
                max_bytes: u64::MAX,
            };
            seen(b.read(stream, &topic(t), *partition, *offset, limits).await, |ms| {
                Seen::Messages(
                    ms.iter()
                        .map(|m| {
                            let headers = m
                                .user_headers_map()
                                .ok()
                                .flatten()
                                .unwrap_or_default()
                                .into_iter()
                                .map(|(k, v)| {
                                    (
                                        String::from_utf8_lossy(k.as_bytes()).into_owned(),
                                        v.as_bytes().to_vec(),
                                    )
                                })
                                .collect();
                            (
                                m.header.offset,
                                m.payload.to_vec(),
                                headers,
                                m.header.origin_timestamp > 0,
                                m.header.timestamp > 0,
                            )
                        })
                        .collect(),
                )
            })
        }
        Op::Watermarks { topic: t, partition } => seen(b.watermarks(stream, &topic(t), *partition).await, |w| {
            Seen::Marks(w.log_start_offset, w.high_watermark)
        }),
        Op::CreateGroup { topic: t, group: g } => {
            seen(b.create_consumer_group(stream, &topic(t), &group(g)).await, |_| {
                Seen::Ok
            })
        }
        Op::JoinGroup {
            topic: t,
            group: g,
            client,
        } => seen(
            b.join_consumer_group(stream, &topic(t), &group(g), client_base + client)
                .await,
            |_| Seen::Ok,
        ),
        Op::Store {
            topic: t,
            partition,
            group: g,
            client,
            offset,
        } => seen(
            b.store_consumer_offset(stream, &topic(t), *partition, &group(g), client_base + client, *offset)
                .await,
            |_| Seen::Ok,
        ),
        Op::Get {
            topic: t,
            partition,
            group: g,
        } => seen(
            b.get_consumer_offset(stream, &topic(t), *partition, &group(g)).await,
            Seen::Offset,
        ),
        Op::DeleteOffset {
            topic: t,
            partition,
            group: g,
            client,
        } => seen(
            b.delete_consumer_offset(stream, &topic(t), *partition, &group(g), client_base + client)
                .await,
            |_| Seen::Ok,
        ),
    }
}

static RUN: AtomicU64 = AtomicU64::new(0);

/// Every sequence starts from topics with messages and a group holding a stored offset, so random
/// steps reach the interesting states (stores, reads of real data) instead of mostly hitting
/// missing topics, and every sequence exercises the membership and range rules at least once.
fn setup() -> Vec<Op> {
    let msg = |b: u8| Msg {
        payload: vec![b; 4],
        headers: vec![("h".into(), vec![b])],
        origin_timestamp_us: 1_764_000_000_000_000,
    };
    vec![
        Op::CreateTopic {
            topic: 0,
            partitions: 2,
        },
        Op::CreateTopic {
            topic: 1,
            partitions: 1,
        },
        Op::Append {
            topic: 0,
            partition: 0,
            messages: vec![msg(1), msg(2)],
        },
        Op::Append {
            topic: 0,
            partition: 1,
            messages: vec![msg(3)],
        },
        Op::CreateGroup { topic: 0, group: 0 },
        Op::JoinGroup {
            topic: 0,
            group: 0,
            client: 0,
        },
        Op::Store {
            topic: 0,
            partition: 0,
            group: 0,
            client: 0,
            offset: 1,
        },
    ]
}

/// [`apply`] within [`CALL_TIMEOUT`].
async fn apply_bounded<B: Backend>(b: &B, stream: &str, op: &Op, client_base: ClientId) -> Seen {
    tokio::time::timeout(CALL_TIMEOUT, apply(b, stream, op, client_base))
        .await
        .unwrap_or(Seen::TimedOut)
}

/// [`run_seeded`] with [`seed_from_env`].
pub fn run<M: Backend, R: Backend>(
    runtime: &tokio::runtime::Handle,
    model: &M,
    real: &R,
    cases: u32,
) -> Result<(), String> {
    run_seeded(runtime, model, real, cases, seed_from_env())
}

/// Runs `cases` random sequences, drawn from `seed`, against both backends; returns the seed,
/// the shrunk failing sequence and the first difference, if any. Blocks: call it from a blocking
/// thread (`spawn_blocking`).
pub fn run_seeded<M: Backend, R: Backend>(
    runtime: &tokio::runtime::Handle,
    model: &M,
    real: &R,
    cases: u32,
    seed: u64,
) -> Result<(), String> {
    let mut bytes = [0u8; 32];
    let mut rng = SplitMix(seed);
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rng = proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        rng,
    );
    let result = runner.run(&proptest::collection::vec(arb_op(), 1..24), |ops| {
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        let stream = format!("kig-diff-{}-{n}", std::process::id());
        // Fresh client ids per sequence, so memberships never carry over.
        let clients = 1_000 * (n + 1);
        {
            runtime.block_on(async {
                model
                    .ensure_stream(&stream)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                real.ensure_stream(&stream)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                for (i, op) in setup().iter().chain(ops.iter()).enumerate() {
                    let (a, b) = (
                        apply_bounded(model, &stream, op, clients).await,
                        apply_bounded(real, &stream, op, clients).await,
                    );
                    if a != b {
                        return Err(TestCaseError::fail(format!(
                            "step {i}, {op:?}: model {a:?}, real {b:?}"
                        )));
                    }
                }
                for c in 0..CLIENTS {
                    model.release_client(clients + c);
                    real.release_client(clients + c);
                }
                Ok(())
            })
        }
    });
    result.map_err(|e| format!("seed {seed} (KIG_DIFF_SEED={seed} repeats it): {e}"))
}

// ---------------------------------------------------------------------------------------------
// Authentication and authorization
// ---------------------------------------------------------------------------------------------

use iggy_common::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions, UserStatus};
use kafka_iggy_gateway::auth::credentials::Credentials as Login;

/// A small deterministic generator (SplitMix64), so a seed repeats a run exactly.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}
