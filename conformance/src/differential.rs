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

/// What root does to users on one side: the embedded model's inherent admin methods, or the
/// SDK as root on a real server ([`IggyAdmin`]). Users are named, never numbered, so both sides
/// are driven alike.
pub trait Admin: Send + Sync {
    fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn update_permissions(
        &self,
        username: &str,
        permissions: Option<Permissions>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn update_user_status(
        &self,
        username: &str,
        status: UserStatus,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn delete_user(&self, username: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// A personal access token (never expiring) that the user makes for itself, logged in with
    /// its password.
    fn create_token(
        &self,
        username: &str,
        password: &str,
        name: &str,
    ) -> impl Future<Output = Result<String, BackendError>> + Send;

    /// The numeric stream and topic ids, which permissions name.
    fn topic_ids(&self, stream: &str, topic: &str)
        -> impl Future<Output = Result<(usize, usize), BackendError>> + Send;
}

/// The model's admin: its root view's inherent methods.
impl Admin for kafka_iggy_gateway::backend::embedded::EmbeddedBackend {
    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<(), BackendError> {
        self.create_user(username, password, status, permissions).map(|_| ())
    }

    async fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        self.update_permissions(username, permissions)
    }

    async fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        self.update_user_status(username, status)
    }

    async fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        self.delete_user(username)
    }

    async fn create_token(&self, username: &str, password: &str, name: &str) -> Result<String, BackendError> {
        let (user, _) = self.open_session(&Login::password(username, password)).await?;
        user.create_personal_access_token(name, None)
    }

    async fn topic_ids(&self, stream: &str, topic: &str) -> Result<(usize, usize), BackendError> {
        self.topic_ids(stream, topic)
            .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(format!("{stream}/{topic}")).into())
    }
}

/// A real server's admin: an SDK client logged in as root.
pub struct IggyAdmin {
    address: String,
    root: iggy::prelude::IggyClient,
}

async fn sdk_client(address: &str, username: &str, password: &str) -> Result<iggy::prelude::IggyClient, BackendError> {
    use iggy::prelude::{AutoLogin, Client, ClientWrapper, Credentials, IggyClient, TcpClient, TcpClientConfig};
    let config = TcpClientConfig {
        server_address: address.to_string(),
        auto_login: AutoLogin::Enabled(Credentials::UsernamePassword(
            username.to_string(),
            password.to_string().into(),
        )),
        ..TcpClientConfig::default()
    };
    let client = IggyClient::create(
        ClientWrapper::Tcp(TcpClient::create(std::sync::Arc::new(config))?),
        None,
        None,
    );
    match tokio::time::timeout(CALL_TIMEOUT, client.connect()).await {
        Ok(Ok(())) => Ok(client),
        Ok(Err(e)) => {
            let _ = client.shutdown().await;
            Err(e.into())
        }
        Err(_) => {
            let _ = client.shutdown().await;
            Err(iggy_common::IggyError::CannotEstablishConnection.into())
        }
    }
}

fn user_id(username: &str) -> Result<iggy_common::Identifier, BackendError> {
    Ok(iggy_common::Identifier::named(username)?)
}

impl IggyAdmin {
    /// Logs in to the server at `address` as root (`username`, `password`).
    pub async fn connect(address: &str, username: &str, password: &str) -> Result<Self, BackendError> {
        Ok(Self {
            address: address.to_string(),
            root: sdk_client(address, username, password).await?,
        })
    }

    pub async fn shutdown(self) {
        use iggy::prelude::Client;
        let _ = self.root.shutdown().await;
    }
}

impl Admin for IggyAdmin {
    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        self.root.create_user(username, password, status, permissions).await?;
        Ok(())
    }

    async fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self.root.update_permissions(&user_id(username)?, permissions).await?)
    }

    async fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self
            .root
            .update_user(
                &user_id(username)?,
                None,
                Some(status),
                &iggy_common::UserUpdateOptions::default(),
            )
            .await?)
    }

    async fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self.root.delete_user(&user_id(username)?).await?)
    }

    async fn create_token(&self, username: &str, password: &str, name: &str) -> Result<String, BackendError> {
        use iggy::prelude::{Client, IggyExpiry, PersonalAccessTokenClient};
        let user = sdk_client(&self.address, username, password).await?;
        let raw = user.create_personal_access_token(name, IggyExpiry::NeverExpire).await;
        let _ = user.shutdown().await;
        Ok(raw?.token)
    }

    async fn topic_ids(&self, stream: &str, topic: &str) -> Result<(usize, usize), BackendError> {
        use iggy::prelude::TopicClient;
        let (s, t) = (
            iggy_common::Identifier::named(stream)?,
            iggy_common::Identifier::named(topic)?,
        );
        let details = self
            .root
            .get_topic(&s, &t)
            .await?
            .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(format!("{stream}/{topic}")))?;
        let stream_id = {
            use iggy::prelude::StreamClient;
            self.root
                .get_stream(&s)
                .await?
                .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(stream.to_string()))?
                .id
        };
        Ok((stream_id as usize, details.id as usize))
    }
}

/// What a caller of an authentication or authorization step observes: the value (rendered), or
/// the Iggy error code with the Kafka code a client would be told (ERR-MAP-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthSeen {
    Ok(String),
    Refused { iggy: u32, kafka: i16 },
    TimedOut,
}

fn iggy_code(e: &BackendError) -> u32 {
    match e {
        BackendError::Iggy(e) => e.as_code(),
        BackendError::TooManyConsumerOffsets => 3024,
        // CLUSTER-FAILOVER-2: the failover errors are the gateway's, not the server's answer;
        // compared as "Iggy unreachable".
        BackendError::NoPrimary { .. } | BackendError::OutcomeUnknown(_) => {
            iggy_common::IggyError::Disconnected.as_code()
        }
    }
}

/// Runs `call` within [`CALL_TIMEOUT`] and renders its value with `show`.
async fn observe<T>(call: impl Future<Output = Result<T, BackendError>>, show: impl FnOnce(T) -> String) -> AuthSeen {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(v)) => AuthSeen::Ok(show(v)),
        Ok(Err(e)) => AuthSeen::Refused {
            iggy: iggy_code(&e),
            kafka: error_code(&e),
        },
        Err(_) => AuthSeen::TimedOut,
    }
}

/// Like [`observe`], for setup steps that must succeed on a side.
async fn must<T>(side: &str, what: &str, call: impl Future<Output = Result<T, BackendError>>) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("setup on the {side}: {what}: {e}")),
        Err(_) => Err(format!(
            "setup on the {side}: {what}: no answer within {CALL_TIMEOUT:?}"
        )),
    }
}

/// A permission set drawn once and realized on each side with that side's numeric ids.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    /// No permissions at all (`None`).
    pub none: bool,
    /// manage_streams, read_streams, manage_topics, read_topics, poll_messages, send_messages.
    pub global: [bool; 6],
    /// On the test stream: manage_stream, read_stream, manage_topics, read_topics,
    /// poll_messages, send_messages; `None`: no entry.
    pub stream: Option<[bool; 6]>,
    /// Per topic slot (0, 1: the two topics; 2: the throwaway topic): manage_topic, read_topic,
    /// poll_messages, send_messages; `None`: no entry.
    pub topics: [Option<[bool; 4]>; 3],
    /// Full rights on another stream's id, which must grant nothing here.
    pub elsewhere: bool,
}

const GLOBAL_FLAGS: [&str; 6] = [
    "manage_streams",
    "read_streams",
    "manage_topics",
    "read_topics",
    "poll_messages",
    "send_messages",
];
const STREAM_FLAGS: [&str; 6] = [
    "manage_stream",
    "read_stream",
    "manage_topics",
    "read_topics",
    "poll_messages",
    "send_messages",
];
const TOPIC_FLAGS: [&str; 4] = ["manage_topic", "read_topic", "poll_messages", "send_messages"];

fn flags<const N: usize>(rng: &mut SplitMix, percent: u64) -> [bool; N] {
    std::array::from_fn(|_| rng.chance(percent))
}

fn names<const N: usize>(set: &[bool; N], names: &[&str; N]) -> String {
    let on: Vec<&str> = set.iter().zip(names).filter(|(b, _)| **b).map(|(_, n)| *n).collect();
    on.join(",")
}

impl Grant {
    pub fn draw(rng: &mut SplitMix) -> Grant {
        if rng.chance(8) {
            return Grant {
                none: true,
                ..Grant::default()
            };
        }
        Grant {
            none: false,
            global: flags(rng, 4),
            stream: rng.chance(50).then(|| flags(rng, 15)),
            topics: std::array::from_fn(|_| rng.chance(60).then(|| flags(rng, 30))),
            elsewhere: rng.chance(15),
        }
    }

    /// As Iggy permissions, for a stream id and the ids of the three topic slots.
    pub fn realize(&self, stream: usize, topics: [usize; 3]) -> Option<Permissions> {
        if self.none {
            return None;
        }
        let g = self.global;
        let global = GlobalPermissions {
            manage_streams: g[0],
            read_streams: g[1],
            manage_topics: g[2],
            read_topics: g[3],
            poll_messages: g[4],
            send_messages: g[5],
            ..GlobalPermissions::default()
        };
        let mut streams = BTreeMap::new();
        let topic_map: BTreeMap<usize, TopicPermissions> = self
            .topics
            .iter()
            .zip(topics)
            .filter_map(|(t, id)| {
                t.map(|t| {
                    (
                        id,
                        TopicPermissions {
                            manage_topic: t[0],
                            read_topic: t[1],
                            poll_messages: t[2],
                            send_messages: t[3],
                        },
                    )
                })
            })
            .collect();
        if self.stream.is_some() || !topic_map.is_empty() {
            let s = self.stream.unwrap_or_default();
            streams.insert(
                stream,
                StreamPermissions {
                    manage_stream: s[0],
                    read_stream: s[1],
                    manage_topics: s[2],
                    read_topics: s[3],
                    poll_messages: s[4],
                    send_messages: s[5],
                    topics: (!topic_map.is_empty()).then_some(topic_map),
                },
            );
        }
        if self.elsewhere {
            streams.insert(
                stream + 1_000,
                StreamPermissions {
                    manage_stream: true,
                    read_stream: true,
                    manage_topics: true,
                    read_topics: true,
                    poll_messages: true,
                    send_messages: true,
                    topics: None,
                },
            );
        }
        Some(Permissions {
            global,
            streams: (!streams.is_empty()).then_some(streams),
        })
    }

    /// A short description: `global{..} stream{..} t0{..} t1{..} x{..} elsewhere`.
    pub fn describe(&self) -> String {
        if self.none {
            return "none".into();
        }
        let mut parts = Vec::new();
        if self.global.contains(&true) {
            parts.push(format!("global{{{}}}", names(&self.global, &GLOBAL_FLAGS)));
        }
        if let Some(s) = &self.stream {
            parts.push(format!("stream{{{}}}", names(s, &STREAM_FLAGS)));
        }
        for (slot, t) in ["t0", "t1", "x"].iter().zip(&self.topics) {
            if let Some(t) = t {
                parts.push(format!("{slot}{{{}}}", names(t, &TOPIC_FLAGS)));
            }
        }
        if self.elsewhere {
            parts.push("elsewhere{all}".into());
        }
        if parts.is_empty() {
            return "empty".into();
        }
        parts.join(" ")
    }
}

/// The outcome of [`run_auth`] when both sides agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthReport {
    /// Steps compared.
    pub checks: usize,
    pub users: u32,
}

/// Collects the differences of one run.
struct Compare {
    seed: u64,
    checks: usize,
    diffs: Vec<String>,
}

impl Compare {
    fn check(&mut self, context: &str, step: &str, model: AuthSeen, real: AuthSeen) -> bool {
        self.checks += 1;
        if model != real {
            self.diffs
                .push(format!("{context}: {step}: model {model:?}, real {real:?}"));
            return false;
        }
        true
    }
}

/// The names a run uses.
struct Names {
    stream: String,
    topics: [String; 2],
    groups: [String; 2],
    tag: String,
}

const TOPIC_NAMES: [&str; 2] = ["t0", "t1"];

fn show_topics(topics: Vec<kafka_iggy_gateway::backend::TopicInfo>) -> String {
    let mut names: Vec<String> = topics
        .into_iter()
        .map(|t| format!("{}/{}", t.name, t.partitions))
        .collect();
    names.sort();
    names.join(" ")
}

fn auth_message(n: u8) -> IggyMessage {
    message(&Msg {
        payload: vec![n; 3],
        headers: vec![],
        origin_timestamp_us: 1_764_000_000_000_000,
    })
}

/// One side's observations, in order: the step, and what it answered.
type Steps = Vec<(String, AuthSeen)>;

fn compare_steps(cmp: &mut Compare, context: &str, model: Steps, real: Steps) {
    if model.len() != real.len() {
        cmp.diffs.push(format!(
            "{context}: the sides took different paths: model {} steps, real {} steps",
            model.len(),
            real.len()
        ));
    }
    let trace = std::env::var_os("KIG_DIFF_TRACE").is_some();
    for ((step, m), (real_step, r)) in model.into_iter().zip(real) {
        debug_assert_eq!(step, real_step);
        if trace {
            eprintln!("{context}: {step}: model {m:?}, real {r:?}");
        }
        cmp.check(context, &step, m, r);
    }
}

/// Root's setup on one side: the stream, its two topics (one partition, two messages each) and a
/// consumer group on each; returns the stream's and the topics' numeric ids.
async fn auth_setup<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
) -> Result<(usize, [usize; 2]), String> {
    let st = &names.stream;
    must(side, "ensure_stream", b.ensure_stream(st)).await?;
    let mut ids = [0; 2];
    let mut stream_id = 0;
    for (k, t) in names.topics.iter().enumerate() {
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        must(side, "create_topic", b.create_topic(st, t, spec)).await?;
        must(
            side,
            "append",
            b.append(st, t, 0, vec![auth_message(1), auth_message(2)]),
        )
        .await?;
        must(
            side,
            "create_consumer_group",
            b.create_consumer_group(st, t, &names.groups[k]),
        )
        .await?;
        (stream_id, ids[k]) = must(side, "topic_ids", admin.topic_ids(st, t)).await?;
    }
    Ok((stream_id, ids))
}

async fn login<B: Backend>(b: &B, credentials: Login) -> AuthSeen {
    observe(b.open_session(&credentials), |(_, principal)| principal.username).await
}

/// The login cases on one side: passwords right and wrong, unknown and inactive users, personal
/// access tokens valid, garbage, of a deactivated and of a deleted user.
async fn login_steps<B: Backend, A: Admin>(side: &str, b: &B, admin: &A, names: &Names) -> Result<Steps, String> {
    let tag = &names.tag;
    let (active, inactive, gone) = (
        format!("kig{tag}-active"),
        format!("kig{tag}-inactive"),
        format!("kig{tag}-gone"),
    );
    let pw = "pw-login";
    for (user, status) in [
        (&active, UserStatus::Active),
        (&inactive, UserStatus::Inactive),
        (&gone, UserStatus::Active),
    ] {
        must(side, "create_user", admin.create_user(user, pw, status, None)).await?;
    }
    let token = must(side, "create_token", admin.create_token(&active, pw, "tok")).await?;
    let gone_token = must(side, "create_token", admin.create_token(&gone, pw, "tok")).await?;
    let mut steps = Steps::new();
    let mut step = |name: &str, seen: AuthSeen| steps.push((name.to_string(), seen));
    step("password, right", login(b, Login::password(&active, pw)).await);
    step("password, wrong", login(b, Login::password(&active, "wrong-pw")).await);
    step(
        "password, unknown user",
        login(b, Login::password(format!("kig{tag}-nobody"), pw)).await,
    );
    step(
        "password, user created inactive",
        login(b, Login::password(&inactive, pw)).await,
    );
    step(
        "password, username in upper case",
        login(b, Login::password(active.to_uppercase(), pw)).await,
    );
    step(
        "password, username of 2 bytes",
        login(b, Login::password("ab", pw)).await,
    );
    step("token, valid", login(b, Login::token(&active, &token)).await);
    step(
        "token, valid, another username given",
        login(b, Login::token(&inactive, &token)).await,
    );
    step(
        "token, garbage of a token's shape",
        login(b, Login::token(&active, format!("{}=", "Q".repeat(67)))).await,
    );
    step("token, garbage", login(b, Login::token(&active, "not-a-token")).await);
    step("token, empty", login(b, Login::token(&active, "")).await);
    step(
        "root: deactivate the user",
        observe(admin.update_user_status(&active, UserStatus::Inactive), |_| {
            String::new()
        })
        .await,
    );
    step(
        "password, user deactivated",
        login(b, Login::password(&active, pw)).await,
    );
    step("token, user deactivated", login(b, Login::token(&active, &token)).await);
    step(
        "root: reactivate the user",
        observe(admin.update_user_status(&active, UserStatus::Active), |_| String::new()).await,
    );
    step(
        "password, user reactivated",
        login(b, Login::password(&active, pw)).await,
    );
    step("token, user reactivated", login(b, Login::token(&active, &token)).await);
    step(
        "root: delete a user with a token",
        observe(admin.delete_user(&gone), |_| String::new()).await,
    );
    step("token, user deleted", login(b, Login::token(&gone, &gone_token)).await);
    step("password, user deleted", login(b, Login::password(&gone, pw)).await);
    Ok(steps)
}

/// One user of the authorization part: who, and the two permission sets it holds in turn.
#[derive(Debug, Clone)]
struct UserPlan {
    index: u32,
    name: String,
    password: String,
    grants: [Grant; 2],
}

/// Every gated operation once through `session`, as one round of steps named `round: op`.
async fn round<B: Backend>(
    steps: &mut Steps,
    label: &str,
    s: &B,
    names: &Names,
    throwaway: &str,
    fresh: &str,
    clients: [ClientId; 2],
) {
    let st = names.stream.as_str();
    let ok = |_| String::new();
    let mut push = |op: String, seen: AuthSeen| steps.push((format!("{label}: {op}"), seen));
    push("list_topics".into(), observe(s.list_topics(st), show_topics).await);
    for (k, t) in names.topics.iter().enumerate() {
        push(
            format!("get_topic {t}"),
            observe(s.get_topic(st, t), |t| format!("{:?}", t.map(|t| t.partitions))).await,
        );
        push(
            format!("append {t}/0"),
            observe(s.append(st, t, 0, vec![auth_message(7 + k as u8)]), |o| {
                format!("{o:?}")
            })
            .await,
        );
        let limits = ReadLimits {
            max_messages: 100,
            max_bytes: u64::MAX,
        };
        push(
            format!("read {t}/0 from 0"),
            observe(s.read(st, t, 0, 0, limits), |ms| {
                format!("{:?}", ms.iter().map(|m| m.header.offset).collect::<Vec<_>>())
            })
            .await,
        );
        push(
            format!("watermarks {t}/0"),
            observe(s.watermarks(st, t, 0), |w| {
                format!("{}..{}", w.log_start_offset, w.high_watermark)
            })
            .await,
        );
    }
    push(
        "get_topic of a missing topic".into(),
        observe(s.get_topic(st, "missing"), |t| format!("{:?}", t.map(|t| t.partitions))).await,
    );
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    push(
        format!("create_topic n{fresh}"),
        observe(s.create_topic(st, &format!("n{fresh}"), spec), ok).await,
    );
    push(
        format!("delete_topic {throwaway}"),
        observe(s.delete_topic(st, throwaway), ok).await,
    );
    push(
        format!("create_consumer_group ug{fresh} on t0"),
        observe(s.create_consumer_group(st, &names.topics[0], &format!("ug{fresh}")), ok).await,
    );
    for (k, t) in names.topics.iter().enumerate() {
        let (g, c) = (&names.groups[k], clients[k]);
        let offset = |o: Option<u64>| format!("{o:?}");
        push(
            format!("get_consumer_offset {t}/0 {g}"),
            observe(s.get_consumer_offset(st, t, 0, g), offset).await,
        );
        // The membership the previous round kept (none before the first round): a member's
        // store under the permissions root has changed since it joined.
        push(
            format!("store_consumer_offset {t}/0 {g} 0, member since the previous round"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("leave_consumer_group {t} {g}, joined in the previous round"),
            observe(s.leave_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("store_consumer_offset {t}/0 {g} 0, not a member"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("delete_consumer_offset {t}/0 {g}, not a member"),
            observe(s.delete_consumer_offset(st, t, 0, g, c), ok).await,
        );
        push(
            format!("join_consumer_group {t} {g}"),
            observe(s.join_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("store_consumer_offset {t}/0 {g} 0"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("get_consumer_offset {t}/0 {g} after the store"),
            observe(s.get_consumer_offset(st, t, 0, g), offset).await,
        );
        push(
            format!("delete_consumer_offset {t}/0 {g}"),
            observe(s.delete_consumer_offset(st, t, 0, g, c), ok).await,
        );
        push(
            format!("leave_consumer_group {t} {g}"),
            observe(s.leave_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("join_consumer_group {t} {g}, kept for the next round"),
            observe(s.join_consumer_group(st, t, g, c), ok).await,
        );
    }
}

/// Root makes a throwaway topic for a user to delete; its id is a step (ids are compared).
async fn throwaway<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
    topic: &str,
    steps: &mut Steps,
) -> Result<usize, String> {
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    must(side, "create_topic", b.create_topic(&names.stream, topic, spec)).await?;
    let (_, id) = must(side, "topic_ids", admin.topic_ids(&names.stream, topic)).await?;
    steps.push((
        format!("root: id of the new topic {topic}"),
        AuthSeen::Ok(id.to_string()),
    ));
    Ok(id)
}

/// One user's life on one side: created with the first permission set, logged in, a round; its
/// permissions changed under the open session, a round; deactivated, a round; deleted, a round.
async fn user_steps<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
    ids: (usize, [usize; 2]),
    plan: &UserPlan,
    clients: [ClientId; 2],
) -> Result<Steps, String> {
    let i = plan.index;
    let mut steps = Steps::new();
    let x0 = format!("x{i}a");
    let x0_id = throwaway(side, b, admin, names, &x0, &mut steps).await?;
    let permissions = plan.grants[0].realize(ids.0, [ids.1[0], ids.1[1], x0_id]);
    steps.push((
        "root: create_user".into(),
        observe(
            admin.create_user(&plan.name, &plan.password, UserStatus::Active, permissions),
            |_| String::new(),
        )
        .await,
    ));
    let opened = tokio::time::timeout(
        CALL_TIMEOUT,
        b.open_session(&Login::password(&plan.name, &plan.password)),
    )
    .await;
    let session = match opened {
        Ok(Ok((session, principal))) => {
            steps.push(("open_session".into(), AuthSeen::Ok(principal.username)));
            session
        }
        Ok(Err(e)) => {
            steps.push((
                "open_session".into(),
                AuthSeen::Refused {
                    iggy: iggy_code(&e),
                    kafka: error_code(&e),
                },
            ));
            return Ok(steps);
        }
        Err(_) => {
            steps.push(("open_session".into(), AuthSeen::TimedOut));
            return Ok(steps);
        }
    };
    round(
        &mut steps,
        "first permissions",
        &session,
        names,
        &x0,
        &format!("{i}a"),
        clients,
    )
    .await;

    let x1 = format!("x{i}b");
    let x1_id = throwaway(side, b, admin, names, &x1, &mut steps).await?;
    let permissions = plan.grants[1].realize(ids.0, [ids.1[0], ids.1[1], x1_id]);
    steps.push((
        "root: update_permissions".into(),
        observe(admin.update_permissions(&plan.name, permissions), |_| String::new()).await,
    ));
    let label = "second permissions, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}b"), clients).await;

    steps.push((
        "root: deactivate".into(),
        observe(admin.update_user_status(&plan.name, UserStatus::Inactive), |_| {
            String::new()
        })
        .await,
    ));
    let label = "deactivated, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}c"), clients).await;

    steps.push((
        "root: delete_user".into(),
        observe(admin.delete_user(&plan.name), |_| String::new()).await,
    ));
    let label = "deleted, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}d"), clients).await;
    for c in clients {
        session.release_client(c);
    }
    Ok(steps)
}

/// Model vs real for authentication and authorization: the login cases, then `users` users with
/// permission sets drawn from `seed`, each through its own session (see [`user_steps`]). Every
/// difference is listed, with the seed, the user's permission sets, the step and both answers.
/// `model_admin` and `real_admin` act as root on the same sides as `model` and `real`.
pub async fn run_auth<M: Backend, AM: Admin, R: Backend, AR: Admin>(
    model: &M,
    model_admin: &AM,
    real: &R,
    real_admin: &AR,
    users: u32,
    seed: u64,
) -> Result<AuthReport, String> {
    let n = RUN.fetch_add(1, Ordering::Relaxed);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Unique on a reused server: the process, the time and the run.
    let tag = format!("{}-{}-{n}", std::process::id(), secs % 1_000_000);
    let names = Names {
        stream: format!("kig-auth-{tag}"),
        topics: TOPIC_NAMES.map(String::from),
        groups: ["g0".to_string(), "g1".to_string()],
        tag: tag.clone(),
    };
    let fail = |e: String| format!("seed {seed}: {e}");
    let model_ids = auth_setup("model", model, model_admin, &names).await.map_err(fail)?;
    let real_ids = auth_setup("real server", real, real_admin, &names)
        .await
        .map_err(fail)?;
    let mut cmp = Compare {
        seed,
        checks: 0,
        diffs: Vec::new(),
    };
    cmp.check(
        "setup",
        "ids of the first two topics of a new stream",
        AuthSeen::Ok(format!("{:?}", model_ids.1)),
        AuthSeen::Ok(format!("{:?}", real_ids.1)),
    );
    let m = login_steps("model", model, model_admin, &names).await.map_err(fail)?;
    let r = login_steps("real server", real, real_admin, &names)
        .await
        .map_err(fail)?;
    compare_steps(&mut cmp, "logins", m, r);

    let mut rng = SplitMix(seed);
    for index in 0..users {
        let plan = UserPlan {
            index,
            name: format!("kig{tag}-u{index}"),
            password: format!("pw-{index}"),
            grants: [Grant::draw(&mut rng), Grant::draw(&mut rng)],
        };
        let clients = [
            1_000_000 + (n * 1_000 + u64::from(index)) * 2,
            1_000_001 + (n * 1_000 + u64::from(index)) * 2,
        ];
        let m = user_steps("model", model, model_admin, &names, model_ids, &plan, clients)
            .await
            .map_err(fail)?;
        let r = user_steps("real server", real, real_admin, &names, real_ids, &plan, clients)
            .await
            .map_err(fail)?;
        let context = format!(
            "user {} with [{}], then [{}]",
            plan.name,
            plan.grants[0].describe(),
            plan.grants[1].describe()
        );
        compare_steps(&mut cmp, &context, m, r);
    }
    if cmp.diffs.is_empty() {
        return Ok(AuthReport {
            checks: cmp.checks,
            users,
        });
    }
    Err(format!(
        "seed {} (KIG_DIFF_SEED={} repeats the draws): {} of {} steps differ:\n  {}",
        cmp.seed,
        cmp.seed,
        cmp.diffs.len(),
        cmp.checks,
        cmp.diffs.join("\n  ")
    ))
}
