//! Writes the seed inputs of every fuzz target into `fuzz/corpus/<target>/seed-*`, from real
//! request encodings, so the fuzzer starts inside every handler instead of at the frame header.
//! Ignored by default: run it once, fuzz, then `cargo fuzz cmin` replaces the seeds by the
//! minimised corpus (see fuzz/README.md).
//!
//! ```sh
//! cargo test -p kig-fuzz-harness --test seeds -- --ignored
//! ```

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::protocol::api::ADVERTISED;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kig_core::batch::{encode_batch, Record, RecordBatch, RecordHeader};
use kig_core::compression::Compression;
use kig_core::envelope::encode_envelope;
use kig_fuzz_harness::handle_frame::{join_frames, Outcome, Session};
use std::path::PathBuf;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

/// A batch of three records a producer would send: plain, null key and value, and one with an
/// empty key and a repeated header (both envelope triggers).
fn batch(codec: Compression) -> Bytes {
    let header = |n: &str, v: Option<&str>| RecordHeader {
        name: Bytes::copy_from_slice(n.as_bytes()),
        value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
    };
    let record = |delta, key: Option<&str>, value: Option<&str>, headers| Record {
        attributes: 0,
        timestamp_delta: delta,
        offset_delta: 0,
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers,
    };
    let records = vec![
        record(0, Some("k"), Some("value"), vec![header("trace", Some("abc"))]),
        record(1, None, None, vec![]),
        record(2, Some(""), Some("v"), vec![header("h", None), header("h", Some("x"))]),
    ];
    encode_batch(&RecordBatch::from_producer(codec, 1_700_000_000_000, records)).expect("known codec")
}

fn body<T: Encodable>(request: &T, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    request.encode(&mut out, version).expect("a seed request encodes");
    out.freeze()
}

/// One request as the gateway receives it: header then body, no size prefix.
fn frame<T: Encodable>(key: ApiKey, version: i16, correlation_id: i32, client_id: &str, request: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(s(client_id)));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .expect("a header encodes");
    out.extend_from_slice(&body(request, version));
    out.freeze()
}

/// A scripted client of one gateway session: records each frame it sends (the seed) and the
/// (key, version, body) of each request (seeds for the body and header targets).
struct Script {
    session: Session,
    client_id: String,
    frames: Vec<Bytes>,
    bodies: Vec<(ApiKey, i16, Bytes)>,
}

impl Script {
    fn new(client_id: &str) -> Self {
        Self {
            session: Session::new(),
            client_id: client_id.to_string(),
            frames: Vec::new(),
            bodies: Vec::new(),
        }
    }

    fn send<T: Encodable>(&mut self, key: ApiKey, version: i16, request: &T) -> Option<Bytes> {
        let correlation_id = self.frames.len() as i32 + 1;
        let frame = frame(key, version, correlation_id, &self.client_id, request);
        self.frames.push(frame.clone());
        self.bodies.push((key, version, body(request, version)));
        match self.session.send(&frame) {
            Outcome::Reply(mut reply) => {
                let header_version = if key == ApiKey::ApiVersions {
                    0
                } else {
                    key.response_header_version(version)
                };
                ResponseHeader::decode(&mut reply, header_version).expect("a response header");
                Some(reply)
            }
            Outcome::NoReply => None,
            other => panic!("{key:?} v{version} in a seed script: {other:?}"),
        }
    }

    fn idle(&mut self) {
        self.frames.push(Bytes::new());
    }

    fn input(&self) -> Vec<u8> {
        join_frames(self.frames.iter().map(|f| &f[..]))
    }
}

/// Every API once, in an order that keeps each meaningful: topic, produce, fetch, then a
/// one-member group through its whole life. `v` picks the version of each key.
fn full_session(client_id: &str, topic_name: &str, v: impl Fn(ApiKey) -> i16) -> Script {
    let topic = |_: &str| TopicName(s(topic_name));
    let mut c = Script::new(client_id);
    let key = ApiKey::ApiVersions;
    c.send(
        key,
        v(key),
        &ApiVersionsRequest::default()
            .with_client_software_name(s("fuzz"))
            .with_client_software_version(s("1")),
    );
    let key = ApiKey::CreateTopics;
    c.send(
        key,
        v(key),
        &CreateTopicsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic("t"))
                .with_num_partitions(2)
                .with_replication_factor(1)]),
    );
    let key = ApiKey::Metadata;
    c.send(
        key,
        v(key),
        &MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic("t")))])),
    );
    let key = ApiKey::Produce;
    for (acks, codec) in [
        (1, Compression::None),
        (-1, Compression::Gzip),
        (0, Compression::Snappy),
    ]
    .into_iter()
    .chain([(1, Compression::Lz4), (1, Compression::Zstd)])
    {
        let request = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic("t"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(codec)))])]);
        if v(key) >= 7 || codec != Compression::Zstd {
            c.send(key, v(key), &request);
        }
    }
    let key = ApiKey::Fetch;
    c.send(
        key,
        v(key),
        &FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(topic("t")).with_partitions(
                vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(1)
                    .with_partition_max_bytes(1 << 20)],
            )]),
    );
    let key = ApiKey::ListOffsets;
    c.send(
        key,
        v(key),
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default().with_name(topic("t")).with_partitions(
                vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                    ListOffsetsPartition::default()
                        .with_partition_index(1)
                        .with_timestamp(-2),
                ],
            )]),
    );
    let key = ApiKey::InitProducerId;
    c.send(
        key,
        v(key),
        &InitProducerIdRequest::default()
            .with_transaction_timeout_ms(1000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    let key = ApiKey::DescribeConfigs;
    c.send(
        key,
        v(key),
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))]),
    );
    let key = ApiKey::FindCoordinator;
    let find = if v(key) >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")])
    } else {
        FindCoordinatorRequest::default().with_key(s("g"))
    };
    c.send(key, v(key), &find);

    let key = ApiKey::JoinGroup;
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(group("g"))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(Bytes::from_static(b"\0\0\0\0\0\x01\0\x01t\0\0\0\0")),
                JoinGroupRequestProtocol::default().with_name(s("roundrobin")),
            ])
    };
    let mut reply = c.send(key, v(key), &join("")).expect("JoinGroup answers");
    let mut joined = JoinGroupResponse::decode(&mut reply, v(key)).expect("JoinGroup response");
    if joined.error_code == kafka_protocol::error::ResponseError::MemberIdRequired.code() {
        let mut reply = c
            .send(key, v(key), &join(joined.member_id.as_str()))
            .expect("JoinGroup answers");
        joined = JoinGroupResponse::decode(&mut reply, v(key)).expect("JoinGroup response");
    }
    assert_eq!(joined.error_code, 0, "the seed's member joins");
    let member = joined.member_id.clone();
    let generation = joined.generation_id;
    let key = ApiKey::SyncGroup;
    c.send(
        key,
        v(key),
        &SyncGroupRequest::default()
            .with_group_id(group("g"))
            .with_generation_id(generation)
            .with_member_id(member.clone())
            .with_protocol_type((v(key) >= 5).then(|| s("consumer")))
            .with_protocol_name((v(key) >= 5).then(|| s("range")))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(member.clone())
                .with_assignment(Bytes::from_static(
                    b"\0\0\0\0\0\x01\0\x01t\0\0\0\x01\0\0\0\0\0\0\0\0",
                ))]),
    );
    let key = ApiKey::Heartbeat;
    c.send(
        key,
        v(key),
        &HeartbeatRequest::default()
            .with_group_id(group("g"))
            .with_generation_id(generation)
            .with_member_id(member.clone()),
    );
    let key = ApiKey::OffsetCommit;
    c.send(
        key,
        v(key),
        &OffsetCommitRequest::default()
            .with_group_id(group("g"))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(member.clone())
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic("t"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(2)
                    .with_committed_metadata(Some(s("m")))])]),
    );
    let key = ApiKey::OffsetFetch;
    c.send(
        key,
        v(key),
        &OffsetFetchRequest::default()
            .with_group_id(group("g"))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic("t"))
                .with_partition_indexes(vec![0, 1])])),
    );
    let key = ApiKey::DescribeGroups;
    c.send(
        key,
        v(key),
        &DescribeGroupsRequest::default().with_groups(vec![group("g")]),
    );
    let key = ApiKey::ListGroups;
    c.send(key, v(key), &ListGroupsRequest::default());
    c.idle();
    let key = ApiKey::LeaveGroup;
    let leave = if v(key) >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(group("g"))
            .with_members(vec![MemberIdentity::default().with_member_id(member)])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(group("g"))
            .with_member_id(member)
    };
    c.send(key, v(key), &leave);
    let key = ApiKey::DeleteGroups;
    c.send(
        key,
        v(key),
        &DeleteGroupsRequest::default().with_groups_names(vec![group("g")]),
    );
    let key = ApiKey::DeleteTopics;
    let delete = if v(key) >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(topic("t")))
        ])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![topic("t")])
    };
    c.send(key, v(key), &delete.with_timeout_ms(1000));
    c
}

/// Long but legal strings (8 KiB, a quarter of the int16 limit) so the fuzzer also starts near
/// the size limits: a topic created, produced to and fetched, and a member with a long client id.
fn long_session() -> Script {
    let long = "x".repeat(8 * 1024);
    let mut c = full_session("fuzz", &long, max_version);
    c.frames.truncate(9);
    c.bodies.truncate(9);
    c.client_id = long;
    let key = ApiKey::JoinGroup;
    c.send(
        key,
        5,
        &JoinGroupRequest::default()
            .with_group_id(group("g"))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(s("range"))]),
    );
    c
}

fn max_version(key: ApiKey) -> i16 {
    ADVERTISED.iter().find(|a| a.key == key).expect("advertised").max
}

fn min_version(key: ApiKey) -> i16 {
    ADVERTISED.iter().find(|a| a.key == key).expect("advertised").min_served
}

/// The selector bytes `request_bodies` reads for `key` at `version`.
fn body_selector(key: ApiKey, version: i16) -> [u8; 4] {
    let index = ADVERTISED.iter().position(|a| a.key == key).expect("advertised") as u16;
    let offset = (version - min_version(key)) as u16;
    let [a, b] = index.to_be_bytes();
    let [c, d] = offset.to_be_bytes();
    [a, b, c, d]
}

/// A small deterministic generator for the byte-soup seeds of `group_state_machine`.
fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(format!("seed-{name}")), data).expect("seed written");
}

#[test]
#[ignore = "writes seed files into fuzz/corpus; run by hand"]
fn write_seeds() {
    for (name, script) in [
        ("max", full_session("fuzz", "t", max_version)),
        ("min", full_session("fuzz", "t", min_version)),
        ("long", long_session()),
    ] {
        let input = script.input();
        kig_fuzz_harness::handle_frame::handle_frame(&input);
        write("handle_frame", &format!("session-{name}"), &input);
        let mut stream = vec![0u8];
        for (i, f) in script.frames.iter().filter(|f| !f.is_empty()).enumerate() {
            write("request_header", &format!("{name}-{i:02}"), f);
            stream.extend_from_slice(&(f.len() as i32).to_be_bytes());
            stream.extend_from_slice(f);
        }
        write("frame_reader", &format!("{name}-whole"), &stream);
        stream[0] = 3;
        write("frame_reader", &format!("{name}-chunked"), &stream);
        for (i, (key, version, body)) in script.bodies.iter().enumerate() {
            let mut input = body_selector(*key, *version).to_vec();
            input.extend_from_slice(body);
            write("request_bodies", &format!("{name}-{i:02}"), &input);
        }
    }
    write("frame_reader", "oversized", &[0, 0, 1, 0, 1, 0]);

    // Fix the CRC (bit 0), keep each batch's codec (bits 1-3 = 7), budget 64 KiB (bits 4-6 = 6).
    let flags = 0x01 | (7 << 1) | (6 << 4);
    for codec in Compression::ALL {
        let mut input = vec![flags];
        input.extend_from_slice(&batch(codec));
        write("record_batches", codec.name(), &input);
    }
    let mut two = vec![flags];
    two.extend_from_slice(&batch(Compression::None));
    two.extend_from_slice(&batch(Compression::Gzip));
    write("record_batches", "two-batches", &two);

    let header = |n: &'static [u8], v: Option<&'static [u8]>| RecordHeader {
        name: Bytes::from_static(n),
        value: v.map(Bytes::from_static),
    };
    write("envelope", "empty", &encode_envelope(None, None, &[]));
    write(
        "envelope",
        "full",
        &encode_envelope(Some(b""), Some(b"v"), &[header(b"h", None), header(b"h", Some(b"x"))]),
    );

    for (i, len) in [32, 64, 128, 256, 512, 1024].into_iter().enumerate() {
        write(
            "group_state_machine",
            &format!("random-{i}"),
            &pseudo_random(i as u64 + 1, len),
        );
    }
}
