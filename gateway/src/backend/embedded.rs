//! The embedded backend: an in-process model of Iggy server 0.9.0-edge.5's semantics and
//! limits, so the gateway runs with no setup and simulations on it tell the truth about real
//! Iggy. It answers with the errors the real server answers (BACKEND-MODEL-1, checked against a
//! real server by the real-Iggy tier's differential; docs/spec/real-iggy-differs.md):
//!
//! - a send is validated whole before anything is stored: payload above
//!   64,000,000 bytes, headers above 100,000 wire bytes, origin timestamps spreading more than
//!   `u32::MAX` µs (`InvalidMessageTimestampDelta`);
//! - partitions are numbered from 0; a missing one is `ResourceNotFound`;
//! - consumer-group offsets: the storing client must be a member of the group and own the
//!   partition (Iggy splits partitions among members in contiguous ranges, join order), the
//!   offset must not pass the partition's last offset, at most 4096 keys per partition, and
//!   deleting an absent key is `ConsumerOffsetNotFound`;
//! - message expiry drops messages older than the topic's expiry (per message here; Iggy drops
//!   whole segments, so it may keep some longer).
//!
//! Deterministic for a given clock and call order: nothing here reads the time but the
//! injected clock, and nothing is random.

use super::append_signal::AppendSignal;
use super::permissions;
use super::users::Users;
use super::{Backend, BackendError, ClientId, ConsumerOffsets, ReadLimits, TopicInfo, TopicSpec, Watermarks};
use crate::auth::credentials::{Credentials, Principal, SecretKind};
use crate::clock::Clock;
use iggy_common::{
    Identifier, IggyError, IggyMessage, IggyMessageHeader, Permissions, UserId, UserStatus, MAX_PAYLOAD_SIZE,
    MAX_USER_HEADERS_SIZE,
};
use kig_core::timestamps::fits_one_send;
use message_log::MessageLog;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// `partition.consumer_offsets_max`'s default.
pub const DEFAULT_CONSUMER_OFFSETS_MAX: usize = 4096;
/// Iggy's limit on partitions per topic create call.
pub const MAX_PARTITIONS: u32 = 1000;
/// Iggy's limit on a stream, topic or group name.
pub const MAX_NAME_LEN: usize = 255;
/// The id Iggy gives its first stream, and a stream's first topic.
pub const FIRST_ID: usize = 0;

struct StoredMessage {
    header: IggyMessageHeader,
    payload: bytes::Bytes,
    user_headers: Option<bytes::Bytes>,
}

impl StoredMessage {
    fn to_message(&self) -> IggyMessage {
        IggyMessage {
            header: copy_header(&self.header),
            payload: self.payload.clone(),
            user_headers: self.user_headers.clone(),
        }
    }

    fn size(&self) -> u64 {
        (self.payload.len() + self.user_headers.as_ref().map_or(0, |h| h.len())) as u64
    }
}

/// `IggyMessageHeader` is not `Clone` in the pinned SDK.
fn copy_header(h: &IggyMessageHeader) -> IggyMessageHeader {
    IggyMessageHeader {
        checksum: h.checksum,
        id: h.id,
        offset: h.offset,
        timestamp: h.timestamp,
        origin_timestamp: h.origin_timestamp,
        user_headers_length: h.user_headers_length,
        payload_length: h.payload_length,
        reserved: h.reserved,
    }
}

#[derive(Default)]
struct Group {
    /// Members in join order.
    members: Vec<ClientId>,
}

impl Group {
    /// The partitions `client` owns: Iggy splits them among members in contiguous ranges, the
    /// first members taking one more when they do not divide evenly.
    fn owns(&self, client: ClientId, partition: u32, partitions: u32) -> bool {
        let Some(index) = self.members.iter().position(|&m| m == client) else {
            return false;
        };
        let n = self.members.len() as u32;
        let (base, extra) = (partitions / n, partitions % n);
        let i = index as u32;
        let start = i * base + i.min(extra);
        let len = base + u32::from(i < extra);
        (start..start + len).contains(&partition)
    }
}

#[derive(Default)]
struct Partition {
    /// EMBED-LOG-1: in segments, so that an append never copies the partition.
    messages: MessageLog<StoredMessage>,
    next_offset: u64,
    last_timestamp_us: u64,
    /// Consumer-group offsets by group name.
    group_offsets: BTreeMap<String, u64>,
}

struct Topic {
    /// Iggy's numeric id, which permissions name.
    id: usize,
    partitions: Vec<Partition>,
    message_expiry_us: Option<u64>,
    groups: BTreeMap<String, Group>,
}

struct Stream {
    /// Iggy's numeric id, which permissions name.
    id: usize,
    topics: BTreeMap<String, Topic>,
}

struct Model {
    streams: BTreeMap<String, Stream>,
    users: Users,
}

/// The id Iggy gives a new stream or topic: the lowest not in use, so a deleted one's id is
/// reused (measured: a topic created after a delete takes the freed id, and a grant on the old
/// topic's id then applies to it).
fn lowest_free_id(used: impl Iterator<Item = usize>) -> usize {
    let used: std::collections::BTreeSet<usize> = used.collect();
    (FIRST_ID..).find(|id| !used.contains(id)).expect("an unused id")
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap_or_default()
}

impl Model {
    /// The permissions `user` holds now. A deleted user's open sessions stay logged in on the
    /// real server, but hold no permission any more (measured: sends answer Unauthorized).
    fn permissions_of(&self, user: UserId) -> Result<Option<&Permissions>, IggyError> {
        Ok(self.users.permissions(user))
    }

    /// Runs an Iggy permission rule for `user` on the stream (and topic) by name; the names
    /// must exist (the real server answers "not found" before it checks permissions).
    fn authorize(
        &mut self,
        user: UserId,
        stream: &str,
        topic: Option<&str>,
        rule: impl FnOnce(Option<&Permissions>, usize, usize) -> Result<(), IggyError>,
    ) -> Result<(), IggyError> {
        let s = self.stream(stream)?;
        let stream_id = s.id;
        let topic_id = match topic {
            Some(t) => {
                s.topics
                    .get(t)
                    .ok_or_else(|| IggyError::TopicIdNotFound(named(t), named(stream)))?
                    .id
            }
            None => 0,
        };
        rule(self.permissions_of(user)?, stream_id, topic_id)
    }

    /// Streams and topics are addressed by name; the real server answers a missing one with the
    /// *Id* variants (2010, 1009), found by the model-vs-real test.
    fn stream(&mut self, stream: &str) -> Result<&mut Stream, IggyError> {
        self.streams
            .get_mut(stream)
            .ok_or_else(|| IggyError::StreamIdNotFound(named(stream)))
    }

    fn topic(&mut self, stream: &str, topic: &str) -> Result<&mut Topic, IggyError> {
        self.stream(stream)?
            .topics
            .get_mut(topic)
            .ok_or_else(|| IggyError::TopicIdNotFound(named(topic), named(stream)))
    }

    /// The partition, when `client` is a member of `group` that Iggy assigned it to (DIFF-1:
    /// anyone else is told the resource is not found).
    fn owned_partition(
        &mut self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<&mut Partition, IggyError> {
        let t = self.topic(stream, topic)?;
        let partitions = t.partitions.len() as u32;
        let owns = t
            .groups
            .get(group)
            .is_some_and(|g| g.owns(client, partition, partitions));
        let p = t
            .partitions
            .get_mut(partition as usize)
            .ok_or_else(|| IggyError::ResourceNotFound(format!("partition {partition} of {stream}/{topic}")))?;
        if !owns {
            return Err(IggyError::ResourceNotFound(format!(
                "consumer group {group} member {client} for partition {partition}"
            )));
        }
        Ok(p)
    }

    fn group(&mut self, stream: &str, topic: &str, group: &str) -> Result<&mut Group, IggyError> {
        self.topic(stream, topic)?
            .groups
            .get_mut(group)
            .ok_or_else(|| IggyError::ConsumerGroupIdNotFound(named(group), named(topic)))
    }

    /// The partition a send goes to: a missing one is ResourceNotFound on send (DIFF-8), while
    /// reads answer PartitionNotFound.
    fn partition(&mut self, stream: &str, topic: &str, partition: u32) -> Result<&mut Partition, IggyError> {
        self.topic(stream, topic)?
            .partitions
            .get_mut(partition as usize)
            .ok_or_else(|| IggyError::ResourceNotFound(format!("partition {partition} of {stream}/{topic}")))
    }
}

/// Configuration of the model.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub username: String,
    /// Never printed (AUTH-SASL-SECRET-1).
    pub password: crate::auth::credentials::Secret,
    pub consumer_offsets_max: usize,
    /// Whether a send answers with its confirmation (the base offset). Off, every send is stored
    /// and answered with none, as the SDK reports a committed send whose reply it could not read
    /// (`decode_send_confirmations`): the path of OFFSET-BASE-1 that a real server, which always
    /// confirms, does not take on demand.
    pub send_confirmations: bool,
    /// How long a login takes to check, as a real server's round trip does (zero by default):
    /// what lets tests see logins overlap (AUTH-SASL-THROTTLE-1, AUTH-SASL-JOIN-1).
    pub login_delay: std::time::Duration,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        Self {
            username: "iggy".into(),
            password: crate::auth::credentials::Secret::new("iggy"),
            consumer_offsets_max: DEFAULT_CONSUMER_OFFSETS_MAX,
            send_confirmations: true,
            login_delay: std::time::Duration::ZERO,
        }
    }
}

/// What every session on one model shares.
struct Shared {
    model: Mutex<Model>,
    clock: Arc<dyn Clock>,
    config: EmbeddedConfig,
    appends: AppendSignal,
    /// Feeds the randomness of personal access tokens, so the model stays deterministic.
    tokens_minted: std::sync::atomic::AtomicU64,
    /// Logins asked of the model, failed ones included.
    logins_attempted: std::sync::atomic::AtomicU64,
    /// Tests of FETCH-READAHEAD-2: when non-zero, every read is planned to end this many
    /// messages after it starts (the model itself reads in one step and plans nothing).
    #[cfg(test)]
    planned_read_messages: std::sync::atomic::AtomicU64,
}

/// The in-process Iggy model, as seen by one logged-in user: the root user for the backend
/// [`EmbeddedBackend::new`] returns, the session's user for one from
/// [`Backend::open_session`]. Every operation passes Iggy's permission rule for that user
/// (AUTHZ-MODEL-1).
pub struct EmbeddedBackend {
    shared: Arc<Shared>,
    user: UserId,
}

impl EmbeddedBackend {
    /// A fresh model whose root user has `config`'s credentials, seen as that root user.
    pub fn new(clock: Arc<dyn Clock>, config: EmbeddedConfig) -> Self {
        let users = Users::with_root(&config.username, config.password.expose());
        let root = users.find(&config.username).expect("the root user exists");
        Self {
            shared: Arc::new(Shared {
                model: Mutex::new(Model {
                    streams: BTreeMap::new(),
                    users,
                }),
                clock,
                config,
                appends: AppendSignal::default(),
                tokens_minted: std::sync::atomic::AtomicU64::new(0),
                logins_attempted: std::sync::atomic::AtomicU64::new(0),
                #[cfg(test)]
                planned_read_messages: std::sync::atomic::AtomicU64::new(0),
            }),
            user: root,
        }
    }

    /// Tests of FETCH-READAHEAD-2: plans every read to end `messages` after its start (0: none).
    #[cfg(test)]
    pub(crate) fn plan_reads_of(&self, messages: u64) {
        self.shared
            .planned_read_messages
            .store(messages, std::sync::atomic::Ordering::Relaxed);
    }

    /// The user this view acts as.
    pub fn user_id(&self) -> UserId {
        self.user
    }

    /// The numeric ids of a stream and topic, which permissions name (GetTopic's `id`s).
    pub fn topic_ids(&self, stream: &str, topic: &str) -> Option<(usize, usize)> {
        let model = self.lock();
        let s = model.streams.get(stream)?;
        Some((s.id, s.topics.get(topic)?.id))
    }

    /// Iggy's user-management rule: `manage_users` in the global permissions.
    fn manage_users(model: &Model, user: UserId) -> Result<(), IggyError> {
        match model.permissions_of(user)? {
            Some(p) if p.global.manage_users => Ok(()),
            _ => Err(IggyError::Unauthorized),
        }
    }

    /// The id of the user named `username`; ResourceNotFound, as the server answers, if none.
    fn user_named(model: &Model, username: &str) -> Result<UserId, IggyError> {
        model
            .users
            .find(username)
            .ok_or_else(|| IggyError::ResourceNotFound(username.to_string()))
    }

    /// Logins asked of this model since it was made, failed ones included: how tests count
    /// the Iggy logins the gateway tried (AUTH-SASL-THROTTLE-1, AUTH-SASL-JOIN-1).
    pub fn logins_attempted(&self) -> u64 {
        self.shared.logins_attempted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Iggy's CreateUser, as this view's user.
    pub fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<UserId, BackendError> {
        let mut model = self.lock();
        Self::manage_users(&model, self.user)?;
        Ok(model.users.create_user(username, password, status, permissions)?)
    }

    /// Iggy's UpdatePermissions, as this view's user. Takes effect on the user's open sessions
    /// at once, as on the server.
    pub fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        let mut model = self.lock();
        Self::manage_users(&model, self.user)?;
        let id = Self::user_named(&model, username)?;
        Ok(model.users.update_permissions(id, permissions)?)
    }

    /// Iggy's UpdateUser status change, as this view's user.
    pub fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        let mut model = self.lock();
        Self::manage_users(&model, self.user)?;
        let id = Self::user_named(&model, username)?;
        Ok(model.users.update_status(id, status)?)
    }

    /// Iggy's DeleteUser, as this view's user.
    pub fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        let mut model = self.lock();
        Self::manage_users(&model, self.user)?;
        let id = Self::user_named(&model, username)?;
        Ok(model.users.delete_user(id)?)
    }

    /// Iggy's CreatePersonalAccessToken: a token for this view's own user. The model's tokens
    /// are derived from a counter, not an OS RNG, so runs repeat; they are not secrets.
    pub fn create_personal_access_token(&self, name: &str, expires_at_us: Option<u64>) -> Result<String, BackendError> {
        use sha2::{Digest, Sha256};
        let n = self
            .shared
            .tokens_minted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut random = [0u8; crate::auth::credentials::TOKEN_RANDOM_BYTES];
        for (i, chunk) in random.chunks_mut(32).enumerate() {
            let block = Sha256::new()
                .chain_update(n.to_be_bytes())
                .chain_update([i as u8])
                .finalize();
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        let mut model = self.lock();
        model.permissions_of(self.user)?;
        Ok(model
            .users
            .create_personal_access_token(self.user, name, expires_at_us, random)?)
    }

    fn lock(&self) -> MutexGuard<'_, Model> {
        self.shared.model.lock().expect("embedded model lock poisoned")
    }

    /// Drops messages older than the topic's expiry.
    fn expire(&self, topic: &mut Topic) {
        let Some(expiry) = topic.message_expiry_us else {
            return;
        };
        let now = self.shared.clock.now_us();
        for p in &mut topic.partitions {
            while p
                .messages
                .front()
                .is_some_and(|m| m.header.timestamp.saturating_add(expiry) < now)
            {
                p.messages.pop_front();
            }
        }
    }

    fn disconnect(&self, client: ClientId) {
        let mut model = self.lock();
        for stream in model.streams.values_mut() {
            for topic in stream.topics.values_mut() {
                for group in topic.groups.values_mut() {
                    group.members.retain(|&m| m != client);
                }
            }
        }
    }

    fn validate(messages: &[IggyMessage]) -> Result<(), IggyError> {
        if messages.is_empty() {
            return Err(IggyError::InvalidMessagesCount);
        }
        for m in messages {
            // DIFF-10: the server stores an empty payload; only the SDK's builder refuses one.
            if m.payload.len() > MAX_PAYLOAD_SIZE as usize {
                return Err(IggyError::TooBigMessagePayload);
            }
            if m.user_headers.as_ref().map_or(0, |h| h.len()) > MAX_USER_HEADERS_SIZE as usize {
                return Err(IggyError::TooBigUserHeaders);
            }
        }
        let origins: Vec<u64> = messages.iter().map(|m| m.header.origin_timestamp).collect();
        if !fits_one_send(&origins) {
            let min = origins.iter().copied().min().unwrap_or(0);
            let max = origins.iter().copied().max().unwrap_or(0);
            return Err(IggyError::InvalidMessageTimestampDelta(max - min));
        }
        Ok(())
    }
}

impl Backend for EmbeddedBackend {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn open_session(&self, credentials: &Credentials) -> Result<(Self, Principal), BackendError> {
        self.shared
            .logins_attempted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !self.shared.config.login_delay.is_zero() {
            tokio::time::sleep(self.shared.config.login_delay).await;
        }
        let model = self.lock();
        let secret = credentials.secret.expose();
        let user = match credentials.kind {
            SecretKind::Password => model.users.login_with_password(&credentials.username, secret)?,
            SecretKind::PersonalAccessToken => model.users.login_with_token(secret, self.shared.clock.now_us())?,
        };
        let username = model
            .users
            .username(user)
            .ok_or(IggyError::Unauthenticated)?
            .to_string();
        Ok((
            Self {
                shared: self.shared.clone(),
                user,
            },
            Principal {
                user_id: user,
                username,
            },
        ))
    }

    async fn ensure_stream(&self, stream: &str) -> Result<(), BackendError> {
        if stream.is_empty() || stream.len() > MAX_NAME_LEN {
            return Err(IggyError::InvalidStreamName.into());
        }
        let mut model = self.lock();
        if model.streams.contains_key(stream) {
            return Ok(model.authorize(self.user, stream, None, |p, s, _| permissions::get_stream(p, s))?);
        }
        permissions::create_stream(model.permissions_of(self.user)?)?;
        let id = lowest_free_id(model.streams.values().map(|s| s.id));
        model.streams.insert(
            stream.to_string(),
            Stream {
                id,
                topics: BTreeMap::new(),
            },
        );
        Ok(())
    }

    async fn list_topics(&self, stream: &str) -> Result<Vec<TopicInfo>, BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, None, |p, s, _| permissions::get_topics(p, s))?;
        let stream = model.stream(stream)?;
        Ok(stream
            .topics
            .iter()
            .map(|(name, t)| TopicInfo {
                name: name.clone(),
                partitions: t.partitions.len() as u32,
                message_expiry_us: t.message_expiry_us,
            })
            .collect())
    }

    async fn get_topic(&self, stream: &str, topic: &str) -> Result<Option<TopicInfo>, BackendError> {
        let mut model = self.lock();
        if model.topic(stream, topic).is_err() {
            return Ok(None);
        }
        model.authorize(self.user, stream, Some(topic), permissions::get_topic)?;
        Ok(model.topic(stream, topic).ok().map(|t| TopicInfo {
            name: topic.to_string(),
            partitions: t.partitions.len() as u32,
            message_expiry_us: t.message_expiry_us,
        }))
    }

    async fn create_topic(&self, stream: &str, topic: &str, spec: TopicSpec) -> Result<(), BackendError> {
        if topic.is_empty() || topic.len() > MAX_NAME_LEN {
            return Err(IggyError::InvalidTopicName.into());
        }
        if spec.partitions == 0 || spec.partitions > MAX_PARTITIONS {
            return Err(IggyError::InvalidPartitionsCount.into());
        }
        let mut model = self.lock();
        model.authorize(self.user, stream, None, |p, s, _| permissions::create_topic(p, s))?;
        let s = model.stream(stream)?;
        if s.topics.contains_key(topic) {
            return Err(IggyError::TopicNameAlreadyExists(topic.to_string(), named(stream)).into());
        }
        let id = lowest_free_id(s.topics.values().map(|t| t.id));
        s.topics.insert(
            topic.to_string(),
            Topic {
                id,
                partitions: (0..spec.partitions).map(|_| Partition::default()).collect(),
                message_expiry_us: spec.message_expiry_us,
                groups: BTreeMap::new(),
            },
        );
        Ok(())
    }

    async fn delete_topic(&self, stream: &str, topic: &str) -> Result<(), BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::manage_topic)?;
        let s = model.stream(stream)?;
        s.topics
            .remove(topic)
            .map(|_| ())
            .ok_or_else(|| IggyError::TopicIdNotFound(named(topic), named(stream)).into())
    }

    async fn add_partitions(&self, stream: &str, topic: &str, count: u32) -> Result<(), BackendError> {
        // TOPIC-ADD-PARTITIONS-1: Iggy takes 1..=1000 new partitions per call (TooManyPartitions
        // otherwise), appended after the last one.
        if count == 0 || count > MAX_PARTITIONS {
            return Err(IggyError::TooManyPartitions.into());
        }
        let mut model = self.lock();
        model.topic(stream, topic)?;
        model.authorize(self.user, stream, Some(topic), permissions::manage_topic)?;
        let t = model.topic(stream, topic)?;
        t.partitions.extend((0..count).map(|_| Partition::default()));
        Ok(())
    }

    async fn set_message_expiry(
        &self,
        stream: &str,
        topic: &str,
        message_expiry_us: Option<u64>,
    ) -> Result<(), BackendError> {
        // ALTERCONFIGS-1: Iggy's UpdateTopic, not found before permission, manage_topic to change.
        let mut model = self.lock();
        model.topic(stream, topic)?;
        model.authorize(self.user, stream, Some(topic), permissions::manage_topic)?;
        model.topic(stream, topic)?.message_expiry_us = message_expiry_us;
        Ok(())
    }

    async fn append(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> Result<Option<u64>, BackendError> {
        Self::validate(&messages)?;
        let now = self.shared.clock.now_us();
        let base = {
            let mut model = self.lock();
            model.partition(stream, topic, partition)?;
            model.authorize(self.user, stream, Some(topic), permissions::append_messages)?;
            let p = model.partition(stream, topic, partition)?;
            let base = p.next_offset;
            // Iggy's server timestamps never go backwards within a partition.
            let timestamp = now.max(p.last_timestamp_us);
            p.last_timestamp_us = timestamp;
            for m in messages {
                let mut header = m.header;
                header.offset = p.next_offset;
                header.timestamp = timestamp;
                p.next_offset += 1;
                p.messages.push_back(StoredMessage {
                    header,
                    payload: m.payload,
                    user_headers: m.user_headers,
                });
            }
            base
        };
        self.shared.appends.bump();
        // OFFSET-BASE-1: stored either way; only the confirmation may be missing.
        Ok(self.shared.config.send_confirmations.then_some(base))
    }

    #[cfg(test)]
    fn planned_read_end(
        &self,
        _stream: &str,
        _topic: &str,
        _partition: u32,
        offset: u64,
        _limits: ReadLimits,
    ) -> Option<u64> {
        let messages = self
            .shared
            .planned_read_messages
            .load(std::sync::atomic::Ordering::Relaxed);
        (messages > 0).then_some(offset + messages)
    }

    async fn read(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        limits: ReadLimits,
    ) -> Result<Vec<IggyMessage>, BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::poll_messages)?;
        let t = model.topic(stream, topic)?;
        self.expire(t);
        let p = t
            .partitions
            .get(partition as usize)
            .ok_or_else(|| IggyError::PartitionNotFound(partition as usize, named(topic), named(stream)))?;
        let first = p.messages.front().map_or(p.next_offset, |m| m.header.offset);
        let start = offset.saturating_sub(first) as usize;
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for m in p.messages.iter_from(start).take(limits.max_messages as usize) {
            if !out.is_empty() && bytes + m.size() > limits.max_bytes {
                break;
            }
            bytes += m.size();
            out.push(m.to_message());
        }
        Ok(out)
    }

    async fn watermarks(&self, stream: &str, topic: &str, partition: u32) -> Result<Watermarks, BackendError> {
        let mut model = self.lock();
        // The SDK backend reads watermarks from the topic's details (GetTopic).
        model.authorize(self.user, stream, Some(topic), permissions::get_topic)?;
        let t = model.topic(stream, topic)?;
        self.expire(t);
        let p = t
            .partitions
            .get(partition as usize)
            .ok_or_else(|| IggyError::ResourceNotFound(format!("partition {partition} of {stream}/{topic}")))?;
        Ok(Watermarks {
            log_start_offset: p.messages.front().map_or(p.next_offset, |m| m.header.offset),
            high_watermark: p.next_offset,
        })
    }

    async fn offset_for_timestamp(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        timestamp_us: u64,
    ) -> Result<Option<(u64, u64)>, BackendError> {
        let mut model = self.lock();
        // The SDK backend polls by timestamp.
        model.authorize(self.user, stream, Some(topic), permissions::poll_messages)?;
        let t = model.topic(stream, topic)?;
        self.expire(t);
        let p = t
            .partitions
            .get(partition as usize)
            .ok_or_else(|| IggyError::PartitionNotFound(partition as usize, named(topic), named(stream)))?;
        // Server timestamps are non-decreasing per partition, so the first match is a binary search.
        let index = p.messages.partition_point(|m| m.header.timestamp < timestamp_us);
        Ok(p.messages.get(index).map(|m| (m.header.offset, m.header.timestamp)))
    }

    fn append_generation(&self) -> u64 {
        self.shared.appends.generation()
    }

    async fn wait_for_append(&self, seen: u64) {
        self.shared.appends.changed_from(seen).await;
    }
}

impl ConsumerOffsets for EmbeddedBackend {
    async fn create_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        if group.is_empty() || group.len() > MAX_NAME_LEN {
            return Err(IggyError::InvalidConsumerGroupName.into());
        }
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::consumer_group)?;
        let t = model.topic(stream, topic)?;
        if t.groups.contains_key(group) {
            return Err(IggyError::ConsumerGroupNameAlreadyExists(group.to_string(), named(topic)).into());
        }
        t.groups.insert(group.to_string(), Group::default());
        Ok(())
    }

    fn release_client(&self, client: ClientId) {
        self.disconnect(client);
    }

    async fn delete_consumer_group(&self, stream: &str, topic: &str, group: &str) -> Result<(), BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::consumer_group)?;
        let t = model.topic(stream, topic)?;
        if t.groups.remove(group).is_none() {
            return Err(IggyError::ConsumerGroupIdNotFound(named(group), named(topic)).into());
        }
        for p in &mut t.partitions {
            p.group_offsets.remove(group);
        }
        Ok(())
    }

    async fn list_consumer_groups(&self, stream: &str, topic: &str) -> Result<Vec<String>, BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::consumer_group)?;
        Ok(model.topic(stream, topic)?.groups.keys().cloned().collect())
    }

    async fn join_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::consumer_group)?;
        let g = model.group(stream, topic, group)?;
        if !g.members.contains(&client) {
            g.members.push(client);
        }
        Ok(())
    }

    async fn leave_consumer_group(
        &self,
        stream: &str,
        topic: &str,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let mut model = self.lock();
        model.authorize(self.user, stream, Some(topic), permissions::consumer_group)?;
        let g = model.group(stream, topic, group)?;
        let before = g.members.len();
        g.members.retain(|&m| m != client);
        if g.members.len() == before {
            return Err(IggyError::ConsumerGroupMemberNotFound(client as u32, named(group), named(topic)).into());
        }
        Ok(())
    }

    async fn store_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
        offset: u64,
    ) -> Result<(), BackendError> {
        let max_keys = self.shared.config.consumer_offsets_max;
        let mut model = self.lock();
        // The real server checks membership (ResourceNotFound) before the poll rule.
        model.owned_partition(stream, topic, partition, group, client)?;
        model.authorize(self.user, stream, Some(topic), permissions::consumer_offset)?;
        let p = model.owned_partition(stream, topic, partition, group, client)?;
        // DIFF-2: nothing above the partition's last offset; nothing at all on an empty partition.
        if p.next_offset == 0 || offset > p.next_offset - 1 {
            return Err(IggyError::InvalidOffset(offset).into());
        }
        // LIMIT-OFFSET-KEYS-1: the server's per-partition key limit, which the gateway only reports.
        if !p.group_offsets.contains_key(group) && p.group_offsets.len() >= max_keys {
            return Err(BackendError::TooManyConsumerOffsets);
        }
        p.group_offsets.insert(group.to_string(), offset);
        Ok(())
    }

    async fn get_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
    ) -> Result<Option<u64>, BackendError> {
        let mut model = self.lock();
        // A missing topic, like a missing group, reads as "nothing stored" on the real server.
        if model.topic(stream, topic).is_err() {
            return Ok(None);
        }
        model.authorize(self.user, stream, Some(topic), permissions::consumer_offset)?;
        let t = model.topic(stream, topic)?;
        let has_group = t.groups.contains_key(group);
        let p = t
            .partitions
            .get(partition as usize)
            .ok_or_else(|| IggyError::PartitionNotFound(partition as usize, named(topic), named(stream)))?;
        // The real server answers "nothing stored" for a group that does not exist (the
        // partition is checked first).
        Ok(has_group.then(|| p.group_offsets.get(group).copied()).flatten())
    }

    async fn delete_consumer_offset(
        &self,
        stream: &str,
        topic: &str,
        partition: u32,
        group: &str,
        client: ClientId,
    ) -> Result<(), BackendError> {
        let mut model = self.lock();
        // Membership (ResourceNotFound) before the poll rule, as on the real server.
        model.owned_partition(stream, topic, partition, group, client)?;
        model.authorize(self.user, stream, Some(topic), permissions::consumer_offset)?;
        let p = model.owned_partition(stream, topic, partition, group, client)?;
        // DIFF-3
        p.group_offsets
            .remove(group)
            .map(|_| ())
            .ok_or_else(|| IggyError::ConsumerOffsetNotFound(partition as usize).into())
    }
}

mod message_log;
#[cfg(test)]
mod tests;
