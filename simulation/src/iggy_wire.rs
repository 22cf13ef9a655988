//! The sans-io codec of the simulated gateway-to-Iggy hop: every operation of the gateway's
//! backend port as a request frame, every outcome as a response frame. Bytes in, values out; no
//! socket here. The [`remote`](crate::remote) adapter writes requests and reads responses with
//! it, the [`iggy_host`](crate::iggy_host) the other way round.
//!
//! A frame is a 4-byte big-endian length and a body. Every length and count is checked against
//! the bytes that remain (and the frame against [`MAX_FRAME_BYTES`]) before anything is
//! allocated for it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use iggy_common::{Identifier, IggyError, IggyMessage, IggyMessageHeader};
use kafka_iggy_gateway::backend::{BackendError, TopicInfo, Watermarks};

/// The largest frame either side accepts: a Produce's sends are far below it in a simulation.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Bytes a message header takes on this wire.
const HEADER_BYTES: usize = 8 + 16 + 8 * 3 + 4 * 2 + 8;

/// Why a frame does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame of {0} bytes is above the {MAX_FRAME_BYTES}-byte limit")]
    FrameTooLarge(usize),
    #[error("frame ends early: {0}")]
    Truncated(&'static str),
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error("{0} bytes left after the frame's body")]
    TrailingBytes(usize),
}

/// One backend operation. `user` in [`Request`] says as whom it runs.
#[derive(Debug, PartialEq)]
pub enum Op {
    Login {
        username: String,
        secret: String,
        token: bool,
    },
    EnsureStream {
        stream: String,
    },
    ListTopics {
        stream: String,
    },
    GetTopic {
        stream: String,
        topic: String,
    },
    CreateTopic {
        stream: String,
        topic: String,
        partitions: u32,
        message_expiry_us: Option<u64>,
    },
    DeleteTopic {
        stream: String,
        topic: String,
    },
    AddPartitions {
        stream: String,
        topic: String,
        count: u32,
    },
    Append {
        stream: String,
        topic: String,
        partition: u32,
        messages: Vec<IggyMessage>,
    },
    Read {
        stream: String,
        topic: String,
        partition: u32,
        offset: u64,
        max_messages: u32,
        max_bytes: u64,
    },
    Watermarks {
        stream: String,
        topic: String,
        partition: u32,
    },
    OffsetForTimestamp {
        stream: String,
        topic: String,
        partition: u32,
        timestamp_us: u64,
    },
    CreateGroup {
        stream: String,
        topic: String,
        group: String,
    },
    DeleteGroup {
        stream: String,
        topic: String,
        group: String,
    },
    ListGroups {
        stream: String,
        topic: String,
    },
    JoinGroup {
        stream: String,
        topic: String,
        group: String,
        client: u64,
    },
    LeaveGroup {
        stream: String,
        topic: String,
        group: String,
        client: u64,
    },
    StoreOffset {
        stream: String,
        topic: String,
        partition: u32,
        group: String,
        client: u64,
        offset: u64,
    },
    GetOffset {
        stream: String,
        topic: String,
        partition: u32,
        group: String,
    },
    DeleteOffset {
        stream: String,
        topic: String,
        partition: u32,
        group: String,
        client: u64,
    },
    ReleaseClient {
        client: u64,
    },
    AppendGeneration,
}

impl Op {
    /// A short name for traces.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Login { .. } => "login",
            Op::EnsureStream { .. } => "ensure_stream",
            Op::ListTopics { .. } => "list_topics",
            Op::GetTopic { .. } => "get_topic",
            Op::CreateTopic { .. } => "create_topic",
            Op::DeleteTopic { .. } => "delete_topic",
            Op::AddPartitions { .. } => "add_partitions",
            Op::Append { .. } => "append",
            Op::Read { .. } => "read",
            Op::Watermarks { .. } => "watermarks",
            Op::OffsetForTimestamp { .. } => "offset_for_timestamp",
            Op::CreateGroup { .. } => "create_group",
            Op::DeleteGroup { .. } => "delete_group",
            Op::ListGroups { .. } => "list_groups",
            Op::JoinGroup { .. } => "join_group",
            Op::LeaveGroup { .. } => "leave_group",
            Op::StoreOffset { .. } => "store_offset",
            Op::GetOffset { .. } => "get_offset",
            Op::DeleteOffset { .. } => "delete_offset",
            Op::ReleaseClient { .. } => "release_client",
            Op::AppendGeneration => "append_generation",
        }
    }
}

/// A request: its id (echoed by the response), the Iggy user it runs as (0: the gateway's own
/// login), and the operation.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub id: u64,
    pub user: u32,
    pub op: Op,
}

/// What an operation returned.
#[derive(Debug)]
pub enum Outcome {
    Unit,
    Principal { user_id: u32, username: String },
    Topics(Vec<TopicInfo>),
    Topic(Option<TopicInfo>),
    Offset(Option<u64>),
    Messages(Vec<IggyMessage>),
    Watermarks(Watermarks),
    OffsetAndTimestamp(Option<(u64, u64)>),
    Names(Vec<String>),
    Generation(u64),
    Failed(BackendError),
}

/// A response to the request with the same id.
#[derive(Debug)]
pub struct Response {
    pub id: u64,
    pub outcome: Outcome,
}

/// Splits the first whole frame off `buffer`: `Ok(None)` until one is complete. The length is
/// checked before the body is waited for.
pub fn take_frame(buffer: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
    if buffer.len() < 4 {
        return Ok(None);
    }
    let length = u32::from_be_bytes(buffer[..4].try_into().expect("four bytes")) as usize;
    if length > MAX_FRAME_BYTES {
        return Err(WireError::FrameTooLarge(length));
    }
    if buffer.len() < 4 + length {
        buffer.reserve(4 + length - buffer.len());
        return Ok(None);
    }
    buffer.advance(4);
    Ok(Some(buffer.split_to(length).freeze()))
}

fn frame(body: BytesMut) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_u32(body.len() as u32);
    out.extend_from_slice(&body);
    out.freeze()
}

fn put_str(out: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.put_u16(s.len() as u16);
    out.put_slice(s);
}

fn put_opt_u64(out: &mut BytesMut, v: Option<u64>) {
    match v {
        Some(v) => {
            out.put_u8(1);
            out.put_u64(v);
        }
        None => out.put_u8(0),
    }
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_u32(b.len() as u32);
    out.put_slice(b);
}

fn put_messages(out: &mut BytesMut, messages: &[IggyMessage]) {
    out.put_u32(messages.len() as u32);
    for m in messages {
        let h = &m.header;
        out.put_u64(h.checksum);
        out.put_u128(h.id);
        out.put_u64(h.offset);
        out.put_u64(h.timestamp);
        out.put_u64(h.origin_timestamp);
        out.put_u32(h.user_headers_length);
        out.put_u32(h.payload_length);
        out.put_u64(h.reserved);
        put_bytes(out, &m.payload);
        match &m.user_headers {
            Some(headers) => {
                out.put_u8(1);
                put_bytes(out, headers);
            }
            None => out.put_u8(0),
        }
    }
}

fn put_topic(out: &mut BytesMut, t: &TopicInfo) {
    put_str(out, &t.name);
    out.put_u32(t.partitions);
    put_opt_u64(out, t.message_expiry_us);
}

/// A cursor over a frame body that checks every read against what remains.
struct Reader {
    body: Bytes,
}

impl Reader {
    fn need(&self, n: usize, what: &'static str) -> Result<(), WireError> {
        if self.body.remaining() < n {
            return Err(WireError::Truncated(what));
        }
        Ok(())
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        self.need(1, what)?;
        Ok(self.body.get_u8())
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        self.need(2, what)?;
        Ok(self.body.get_u16())
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        self.need(4, what)?;
        Ok(self.body.get_u32())
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        self.need(8, what)?;
        Ok(self.body.get_u64())
    }
    fn u128(&mut self, what: &'static str) -> Result<u128, WireError> {
        self.need(16, what)?;
        Ok(self.body.get_u128())
    }
    fn str(&mut self, what: &'static str) -> Result<String, WireError> {
        let n = self.u16(what)? as usize;
        self.need(n, what)?;
        let raw = self.body.split_to(n);
        String::from_utf8(raw.to_vec()).map_err(|_| WireError::NotUtf8(what))
    }
    fn bytes(&mut self, what: &'static str) -> Result<Bytes, WireError> {
        let n = self.u32(what)? as usize;
        self.need(n, what)?;
        Ok(self.body.split_to(n))
    }
    fn opt_u64(&mut self, what: &'static str) -> Result<Option<u64>, WireError> {
        Ok(match self.u8(what)? {
            0 => None,
            _ => Some(self.u64(what)?),
        })
    }
    /// A count of items each at least `min_bytes` long: refused when the rest cannot hold them.
    fn count(&mut self, min_bytes: usize, what: &'static str) -> Result<usize, WireError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_bytes) > self.body.remaining() {
            return Err(WireError::Truncated(what));
        }
        Ok(n)
    }
    fn messages(&mut self) -> Result<Vec<IggyMessage>, WireError> {
        let n = self.count(HEADER_BYTES + 5, "messages")?;
        let mut messages = Vec::with_capacity(n);
        for _ in 0..n {
            let header = IggyMessageHeader {
                checksum: self.u64("checksum")?,
                id: self.u128("id")?,
                offset: self.u64("offset")?,
                timestamp: self.u64("timestamp")?,
                origin_timestamp: self.u64("origin timestamp")?,
                user_headers_length: self.u32("headers length")?,
                payload_length: self.u32("payload length")?,
                reserved: self.u64("reserved")?,
            };
            let payload = self.bytes("payload")?;
            let user_headers = match self.u8("headers flag")? {
                0 => None,
                _ => Some(self.bytes("user headers")?),
            };
            messages.push(IggyMessage {
                header,
                payload,
                user_headers,
            });
        }
        Ok(messages)
    }
    fn topic(&mut self) -> Result<TopicInfo, WireError> {
        Ok(TopicInfo {
            name: self.str("topic name")?,
            partitions: self.u32("partitions")?,
            message_expiry_us: self.opt_u64("expiry")?,
        })
    }
    fn end(self) -> Result<(), WireError> {
        match self.body.remaining() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }
}

/// Encodes a request as a frame.
pub fn encode_request(request: &Request) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u64(request.id);
    out.put_u32(request.user);
    let names = |out: &mut BytesMut, s: &str, t: &str| {
        put_str(out, s);
        put_str(out, t);
    };
    match &request.op {
        Op::Login {
            username,
            secret,
            token,
        } => {
            out.put_u8(0);
            put_str(&mut out, username);
            put_str(&mut out, secret);
            out.put_u8(u8::from(*token));
        }
        Op::EnsureStream { stream } => {
            out.put_u8(1);
            put_str(&mut out, stream);
        }
        Op::ListTopics { stream } => {
            out.put_u8(2);
            put_str(&mut out, stream);
        }
        Op::GetTopic { stream, topic } => {
            out.put_u8(3);
            names(&mut out, stream, topic);
        }
        Op::CreateTopic {
            stream,
            topic,
            partitions,
            message_expiry_us,
        } => {
            out.put_u8(4);
            names(&mut out, stream, topic);
            out.put_u32(*partitions);
            put_opt_u64(&mut out, *message_expiry_us);
        }
        Op::DeleteTopic { stream, topic } => {
            out.put_u8(5);
            names(&mut out, stream, topic);
        }
        Op::AddPartitions { stream, topic, count } => {
            out.put_u8(6);
            names(&mut out, stream, topic);
            out.put_u32(*count);
        }
        Op::Append {
            stream,
            topic,
            partition,
            messages,
        } => {
            out.put_u8(7);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            put_messages(&mut out, messages);
        }
        Op::Read {
            stream,
            topic,
            partition,
            offset,
            max_messages,
            max_bytes,
        } => {
            out.put_u8(8);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            out.put_u64(*offset);
            out.put_u32(*max_messages);
            out.put_u64(*max_bytes);
        }
        Op::Watermarks {
            stream,
            topic,
            partition,
        } => {
            out.put_u8(9);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
        }
        Op::OffsetForTimestamp {
            stream,
            topic,
            partition,
            timestamp_us,
        } => {
            out.put_u8(10);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            out.put_u64(*timestamp_us);
        }
        Op::CreateGroup { stream, topic, group } => {
            out.put_u8(11);
            names(&mut out, stream, topic);
            put_str(&mut out, group);
        }
        Op::DeleteGroup { stream, topic, group } => {
            out.put_u8(12);
            names(&mut out, stream, topic);
            put_str(&mut out, group);
        }
        Op::ListGroups { stream, topic } => {
            out.put_u8(13);
            names(&mut out, stream, topic);
        }
        Op::JoinGroup {
            stream,
            topic,
            group,
            client,
        } => {
            out.put_u8(14);
            names(&mut out, stream, topic);
            put_str(&mut out, group);
            out.put_u64(*client);
        }
        Op::LeaveGroup {
            stream,
            topic,
            group,
            client,
        } => {
            out.put_u8(15);
            names(&mut out, stream, topic);
            put_str(&mut out, group);
            out.put_u64(*client);
        }
        Op::StoreOffset {
            stream,
            topic,
            partition,
            group,
            client,
            offset,
        } => {
            out.put_u8(16);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            put_str(&mut out, group);
            out.put_u64(*client);
            out.put_u64(*offset);
        }
        Op::GetOffset {
            stream,
            topic,
            partition,
            group,
        } => {
            out.put_u8(17);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            put_str(&mut out, group);
        }
        Op::DeleteOffset {
            stream,
            topic,
            partition,
            group,
            client,
        } => {
            out.put_u8(18);
            names(&mut out, stream, topic);
            out.put_u32(*partition);
            put_str(&mut out, group);
            out.put_u64(*client);
        }
        Op::ReleaseClient { client } => {
            out.put_u8(19);
            out.put_u64(*client);
        }
        Op::AppendGeneration => out.put_u8(20),
    }
    frame(out)
}

/// Decodes a request frame's body.
pub fn decode_request(body: Bytes) -> Result<Request, WireError> {
    let mut r = Reader { body };
    let id = r.u64("request id")?;
    let user = r.u32("user")?;
    let tag = r.u8("op")?;
    let op = match tag {
        0 => Op::Login {
            username: r.str("username")?,
            secret: r.str("secret")?,
            token: r.u8("secret kind")? != 0,
        },
        1 => Op::EnsureStream {
            stream: r.str("stream")?,
        },
        2 => Op::ListTopics {
            stream: r.str("stream")?,
        },
        3 => Op::GetTopic {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
        },
        4 => Op::CreateTopic {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partitions: r.u32("partitions")?,
            message_expiry_us: r.opt_u64("expiry")?,
        },
        5 => Op::DeleteTopic {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
        },
        6 => Op::AddPartitions {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            count: r.u32("count")?,
        },
        7 => Op::Append {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            messages: r.messages()?,
        },
        8 => Op::Read {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            offset: r.u64("offset")?,
            max_messages: r.u32("max messages")?,
            max_bytes: r.u64("max bytes")?,
        },
        9 => Op::Watermarks {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
        },
        10 => Op::OffsetForTimestamp {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            timestamp_us: r.u64("timestamp")?,
        },
        11 => Op::CreateGroup {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            group: r.str("group")?,
        },
        12 => Op::DeleteGroup {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            group: r.str("group")?,
        },
        13 => Op::ListGroups {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
        },
        14 => Op::JoinGroup {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            group: r.str("group")?,
            client: r.u64("client")?,
        },
        15 => Op::LeaveGroup {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            group: r.str("group")?,
            client: r.u64("client")?,
        },
        16 => Op::StoreOffset {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            group: r.str("group")?,
            client: r.u64("client")?,
            offset: r.u64("offset")?,
        },
        17 => Op::GetOffset {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            group: r.str("group")?,
        },
        18 => Op::DeleteOffset {
            stream: r.str("stream")?,
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            group: r.str("group")?,
            client: r.u64("client")?,
        },
        19 => Op::ReleaseClient {
            client: r.u64("client")?,
        },
        20 => Op::AppendGeneration,
        tag => return Err(WireError::UnknownTag { what: "op", tag }),
    };
    r.end()?;
    Ok(Request { id, user, op })
}

/// Unit errors the model answers, carried by their code.
const UNIT_ERRORS: &[IggyError] = &[
    IggyError::Error,
    IggyError::InvalidCommand,
    IggyError::InvalidFormat,
    IggyError::Disconnected,
    IggyError::CannotEstablishConnection,
    IggyError::StaleClient,
    IggyError::Unauthenticated,
    IggyError::Unauthorized,
    IggyError::InvalidCredentials,
    IggyError::InvalidUsername,
    IggyError::InvalidPassword,
    IggyError::UserAlreadyExists,
    IggyError::InvalidPersonalAccessToken,
    IggyError::NotConnected,
    IggyError::ClientShutdown,
    IggyError::InvalidStreamName,
    IggyError::InvalidTopicName,
    IggyError::TooManyPartitions,
    IggyError::InvalidPartitionsCount,
    IggyError::InvalidMessagesCount,
    IggyError::TooBigUserHeaders,
    IggyError::TooBigMessagePayload,
    IggyError::InvalidConsumerGroupName,
    // A replicated cluster's "not primary" and "not committed yet" (CLUSTER-FAILOVER-1,
    // CLUSTER-UNKNOWN-1).
    IggyError::TransientNotAccepted,
    IggyError::TransientNotCommitted,
];

fn ident(s: &str) -> Identifier {
    Identifier::named(s).unwrap_or_default()
}

fn put_error(out: &mut BytesMut, e: &BackendError) {
    let iggy = match e {
        BackendError::TooManyConsumerOffsets => {
            out.put_u8(0);
            return;
        }
        BackendError::Iggy(iggy) => iggy,
        // CLUSTER-FAILOVER-2: only the real backend raises these; the simulated Iggy host runs
        // the embedded model, which never does. Sent as a lost connection if one ever appears.
        BackendError::NoPrimary { .. } | BackendError::OutcomeUnknown(_) => &IggyError::Disconnected,
    };
    match iggy {
        IggyError::ResourceNotFound(a) => {
            out.put_u8(1);
            put_str(out, a);
        }
        IggyError::StreamIdNotFound(a) => {
            out.put_u8(2);
            put_str(out, &a.to_string());
        }
        IggyError::StreamNameNotFound(a) => {
            out.put_u8(3);
            put_str(out, a);
        }
        IggyError::TopicIdNotFound(a, b) => {
            out.put_u8(4);
            put_str(out, &a.to_string());
            put_str(out, &b.to_string());
        }
        IggyError::TopicNameNotFound(a, b) => {
            out.put_u8(5);
            put_str(out, a);
            put_str(out, b);
        }
        IggyError::TopicNameAlreadyExists(a, b) => {
            out.put_u8(6);
            put_str(out, a);
            put_str(out, &b.to_string());
        }
        IggyError::PartitionNotFound(p, a, b) => {
            out.put_u8(7);
            out.put_u64(*p as u64);
            put_str(out, &a.to_string());
            put_str(out, &b.to_string());
        }
        IggyError::ConsumerOffsetNotFound(p) => {
            out.put_u8(8);
            out.put_u64(*p as u64);
        }
        IggyError::InvalidMessageTimestampDelta(d) => {
            out.put_u8(9);
            out.put_u64(*d);
        }
        IggyError::InvalidOffset(o) => {
            out.put_u8(10);
            out.put_u64(*o);
        }
        IggyError::ConsumerGroupIdNotFound(a, b) => {
            out.put_u8(11);
            put_str(out, &a.to_string());
            put_str(out, &b.to_string());
        }
        IggyError::ConsumerGroupNameNotFound(a, b) => {
            out.put_u8(12);
            put_str(out, a);
            put_str(out, &b.to_string());
        }
        IggyError::ConsumerGroupNameAlreadyExists(a, b) => {
            out.put_u8(13);
            put_str(out, a);
            put_str(out, &b.to_string());
        }
        IggyError::ConsumerGroupMemberNotFound(m, a, b) => {
            out.put_u8(14);
            out.put_u32(*m);
            put_str(out, &a.to_string());
            put_str(out, &b.to_string());
        }
        IggyError::StreamNameAlreadyExists(a) => {
            out.put_u8(15);
            put_str(out, a);
        }
        other => {
            // Anything else travels as its code; one the table lacks arrives as `Error`, which
            // the gateway answers as it would any unknown server error.
            out.put_u8(16);
            out.put_u32(other.as_code());
        }
    }
}

fn read_error(r: &mut Reader) -> Result<BackendError, WireError> {
    let tag = r.u8("error")?;
    let iggy = match tag {
        0 => return Ok(BackendError::TooManyConsumerOffsets),
        1 => IggyError::ResourceNotFound(r.str("error")?),
        2 => IggyError::StreamIdNotFound(ident(&r.str("error")?)),
        3 => IggyError::StreamNameNotFound(r.str("error")?),
        4 => IggyError::TopicIdNotFound(ident(&r.str("error")?), ident(&r.str("error")?)),
        5 => IggyError::TopicNameNotFound(r.str("error")?, r.str("error")?),
        6 => IggyError::TopicNameAlreadyExists(r.str("error")?, ident(&r.str("error")?)),
        7 => IggyError::PartitionNotFound(
            r.u64("error")? as usize,
            ident(&r.str("error")?),
            ident(&r.str("error")?),
        ),
        8 => IggyError::ConsumerOffsetNotFound(r.u64("error")? as usize),
        9 => IggyError::InvalidMessageTimestampDelta(r.u64("error")?),
        10 => IggyError::InvalidOffset(r.u64("error")?),
        11 => IggyError::ConsumerGroupIdNotFound(ident(&r.str("error")?), ident(&r.str("error")?)),
        12 => IggyError::ConsumerGroupNameNotFound(r.str("error")?, ident(&r.str("error")?)),
        13 => IggyError::ConsumerGroupNameAlreadyExists(r.str("error")?, ident(&r.str("error")?)),
        14 => IggyError::ConsumerGroupMemberNotFound(r.u32("error")?, ident(&r.str("error")?), ident(&r.str("error")?)),
        15 => IggyError::StreamNameAlreadyExists(r.str("error")?),
        16 => {
            let code = r.u32("error")?;
            UNIT_ERRORS
                .iter()
                .find(|e| e.as_code() == code)
                .cloned()
                .unwrap_or(IggyError::Error)
        }
        tag => return Err(WireError::UnknownTag { what: "error", tag }),
    };
    Ok(BackendError::Iggy(iggy))
}

/// Encodes a response as a frame.
pub fn encode_response(response: &Response) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u64(response.id);
    match &response.outcome {
        Outcome::Unit => out.put_u8(0),
        Outcome::Principal { user_id, username } => {
            out.put_u8(1);
            out.put_u32(*user_id);
            put_str(&mut out, username);
        }
        Outcome::Topics(topics) => {
            out.put_u8(2);
            out.put_u32(topics.len() as u32);
            for t in topics {
                put_topic(&mut out, t);
            }
        }
        Outcome::Topic(topic) => {
            out.put_u8(3);
            match topic {
                Some(t) => {
                    out.put_u8(1);
                    put_topic(&mut out, t);
                }
                None => out.put_u8(0),
            }
        }
        Outcome::Offset(offset) => {
            out.put_u8(4);
            put_opt_u64(&mut out, *offset);
        }
        Outcome::Messages(messages) => {
            out.put_u8(5);
            put_messages(&mut out, messages);
        }
        Outcome::Watermarks(w) => {
            out.put_u8(6);
            out.put_u64(w.log_start_offset);
            out.put_u64(w.high_watermark);
        }
        Outcome::OffsetAndTimestamp(found) => {
            out.put_u8(7);
            match found {
                Some((offset, timestamp)) => {
                    out.put_u8(1);
                    out.put_u64(*offset);
                    out.put_u64(*timestamp);
                }
                None => out.put_u8(0),
            }
        }
        Outcome::Names(names) => {
            out.put_u8(8);
            out.put_u32(names.len() as u32);
            for n in names {
                put_str(&mut out, n);
            }
        }
        Outcome::Generation(g) => {
            out.put_u8(9);
            out.put_u64(*g);
        }
        Outcome::Failed(e) => {
            out.put_u8(10);
            put_error(&mut out, e);
        }
    }
    frame(out)
}

/// Decodes a response frame's body.
pub fn decode_response(body: Bytes) -> Result<Response, WireError> {
    let mut r = Reader { body };
    let id = r.u64("response id")?;
    let outcome = match r.u8("outcome")? {
        0 => Outcome::Unit,
        1 => Outcome::Principal {
            user_id: r.u32("user id")?,
            username: r.str("username")?,
        },
        2 => {
            let n = r.count(2 + 4 + 1, "topics")?;
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                topics.push(r.topic()?);
            }
            Outcome::Topics(topics)
        }
        3 => Outcome::Topic(match r.u8("topic flag")? {
            0 => None,
            _ => Some(r.topic()?),
        }),
        4 => Outcome::Offset(r.opt_u64("offset")?),
        5 => Outcome::Messages(r.messages()?),
        6 => Outcome::Watermarks(Watermarks {
            log_start_offset: r.u64("log start")?,
            high_watermark: r.u64("high watermark")?,
        }),
        7 => Outcome::OffsetAndTimestamp(match r.u8("found flag")? {
            0 => None,
            _ => Some((r.u64("offset")?, r.u64("timestamp")?)),
        }),
        8 => {
            let n = r.count(2, "names")?;
            let mut names = Vec::with_capacity(n);
            for _ in 0..n {
                names.push(r.str("name")?);
            }
            Outcome::Names(names)
        }
        9 => Outcome::Generation(r.u64("generation")?),
        10 => Outcome::Failed(read_error(&mut r)?),
        tag => return Err(WireError::UnknownTag { what: "outcome", tag }),
    };
    r.end()?;
    Ok(Response { id, outcome })
}

#[cfg(test)]
mod tests;
