//! Hostile clients (issue 8): requests and connection patterns no cooperative Kafka client
//! sends, which any Kafka endpoint must survive (docs/spec/limits.md, "Limits against hostile
//! clients"). This file owns those cases and the [`Watchdog`] they run under.
//!
//! Each case runs one attack under a [`Watchdog`]: a well-behaved client on connections of its
//! own, opened before the attack, that sends ApiVersions and Metadata every [`WATCH_PERIOD`]
//! and, where the attack aims at the group coordinator, heartbeats as the one member of a group
//! of its own. A case passes when the endpoint answers each hostile request with a well-formed
//! response (checked where the Kafka protocol implies the answer) or closes that one
//! connection, and the watchdog is answered within [`LIVENESS`] on every request, throughout
//! the attack and once after it. LIVENESS is a liveness bound, not a performance assertion.
//!
//! The cases know nothing of the implementation and run against a Kafka broker too: a size the
//! [`Endpoint`] does not tell is taken as Kafka's default `message.max.bytes`, and every group
//! request goes to the coordinator FindCoordinator names. Every wait for the endpoint is a read
//! bounded by a timeout; the only pauses are the attacks' own pacing (a trickle, a stall of
//! unread answers, idle connections held open), never a synchronisation. Each case is bounded
//! in time (under 20 s on the in-process gateway, most well under; the long-poll Fetch waits
//! out the endpoint's own cap, at most [`LONG_POLL_GUARD`]) and in the client's memory (tens
//! of MB).

use super::group_cases::support::{
    coordinator_of, heartbeat, join_group, sync_group, MEMBER_ID_REQUIRED, POLL_INTERVAL, WAIT,
};
use super::{api_versions_request, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use anyhow::{anyhow, bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsRequest,
    CreateTopicsResponse, DeleteGroupsRequest, DeleteGroupsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, DescribeGroupsRequest, DescribeGroupsResponse, FetchRequest,
    FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, ProduceRequest,
    ProduceResponse, RequestHeader, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_wire_client::WireClient;
use kig_core::batch::{
    decode_batches, encode_batch, encode_record, write_batch, BatchAttributes, BatchHeader, Record, RecordBatch,
};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::{compress, Compression};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant, MissedTickBehavior};

type Client = WireClient<TcpStream>;

/// How long a well-behaved request may go unanswered during or after an attack before the
/// case fails: a liveness bound, generous on purpose.
pub const LIVENESS: Duration = Duration::from_secs(10);
/// How often the watchdog sends its requests while an attack runs.
pub const WATCH_PERIOD: Duration = Duration::from_millis(50);
/// The longest a case waits for a Fetch that asked to wait i32::MAX ms: past any endpoint's
/// sensible cap (the gateway's default is 30 s), short of hanging the suite.
pub const LONG_POLL_GUARD: Duration = Duration::from_secs(35);
/// What a case assumes of an endpoint that does not tell its max_frame_size: Kafka's default
/// `message.max.bytes`, so that a request sized by it is an ordinary one for a broker.
pub(crate) const ASSUMED_MAX_FRAME_SIZE: usize = 1024 * 1024;
/// The longest Kafka string with an INT16 length: every non-flexible string field's ceiling.
const KAFKA_STRING_MAX: usize = i16::MAX as usize;

/// The settings the in-process suite (tests/hostile_suite.rs) and the bench (benches/hostile.rs)
/// run the gateway with, so that the connection limit is met by
/// [`hostile_many_idle_connections`] and the long-poll cap ends
/// [`hostile_fetch_naming_one_partition_5000_times_waiting_i32_max`] in about a second. The
/// cases themselves never read them.
pub const SUITE_MAX_CONNECTIONS: usize = 1_000;
pub const SUITE_FETCH_MAX_WAIT_MS: u64 = 1_000;

// Versions the cases speak where the attack does not choose one.
const API_VERSIONS_V: i16 = 3;
const METADATA_V: i16 = 9;
const CREATE_TOPICS_V: i16 = 5;
const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 11;
const LIST_OFFSETS_V: i16 = 7;
const LEAVE_GROUP_V: i16 = 3;

// Kafka error codes.
const NONE: i16 = 0;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_CONFIG: i16 = 40;

/// ListOffsets' special timestamp for the high watermark.
const LATEST: i64 = -1;

mod address_keys;
mod connections;
mod consumer_protocol;
mod echoed_strings;
pub mod launch;
mod logins;
mod peers;
mod requests;
mod support;
mod watchdog;
pub use address_keys::*;
pub use connections::*;
pub use consumer_protocol::*;
pub use echoed_strings::*;
pub use logins::*;
pub use peers::*;
pub use requests::*;
pub(crate) use support::*;
pub use watchdog::*;

/// The area of the hostile cases that start their own gateways ([`launch`]): two peered
/// gateways, or settings of their own. `tests/hostile_gateways_suite.rs` runs them in process
/// and the hostile bench on the release binary; they are listed for the trace, not run against
/// an endpoint.
pub const OWN_GATEWAY_AREA: &str = "hostile_gateways";

/// The hostile cases that start their own gateways, for the trace.
pub const OWN_GATEWAY_CASES: &[super::ListedCase] = &[
    super::ListedCase {
        name: "hostile_connection_flood_on_a_peer_moves_no_group",
        rules: &["GROUP-COORDINATOR-6", "GROUP-COORDINATOR-7", "GROUP-COORDINATOR-2"],
    },
    super::ListedCase {
        name: "hostile_connections_rotating_through_one_address_prefix",
        rules: &["LIMIT-CONNECTIONS-PREFIX-1", "LIMIT-ADDRESS-KEY-1"],
    },
    super::ListedCase {
        name: "hostile_guesses_at_one_username_from_many_addresses",
        rules: &["AUTH-SASL-THROTTLE-2", "AUTH-SASL-THROTTLE-1"],
    },
    super::ListedCase {
        name: "hostile_one_user_with_many_tokens_leaves_sessions_for_others",
        rules: &["LIMIT-SESSIONS-USER-1", "LIMIT-SESSIONS-1"],
    },
];

/// Runs the case of [`OWN_GATEWAY_CASES`] named `name` on gateways `launcher` starts.
pub async fn run_own_gateway_case<L: launch::Launcher>(name: &str, launcher: &L) -> anyhow::Result<Outcome> {
    match name {
        "hostile_connection_flood_on_a_peer_moves_no_group" => {
            hostile_connection_flood_on_a_peer_moves_no_group(launcher).await
        }
        "hostile_connections_rotating_through_one_address_prefix" => {
            hostile_connections_rotating_through_one_address_prefix(launcher).await
        }
        "hostile_guesses_at_one_username_from_many_addresses" => {
            hostile_guesses_at_one_username_from_many_addresses(launcher).await
        }
        "hostile_one_user_with_many_tokens_leaves_sessions_for_others" => {
            hostile_one_user_with_many_tokens_leaves_sessions_for_others(launcher).await
        }
        _ => bail!("no hostile case that starts its own gateways is named {name}"),
    }
}

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            hostile_join_group_with_200000_protocols,
            ["LIMIT-ENTRIES-1", "LIMIT-JOIN-PROTOCOLS-1", "LIMIT-BLOCKING-1"]
        ),
        case!(hostile_join_group_with_a_32760_byte_client_id, ["LIMIT-BUILT-STRING-1"]),
        case!(
            hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one,
            ["LIMIT-BUILT-STRING-1", "PROTO-ENCODE-1"]
        ),
        case!(
            hostile_retention_ms_beyond_what_iggy_counts_never_expires,
            ["LIMIT-CONFIG-VALUE-2", "TOPIC-CONFIG-2", "ALTERCONFIGS-6"],
            deviates: ["LIMIT-CONFIG-VALUE-2"]
        ),
        case!(hostile_many_idle_connections, ["LIMIT-CONNECTIONS-1", "LIMIT-ACCEPT-1"]),
        case!(
            hostile_slow_senders_trickle_frames,
            ["PROTO-TIMEOUT-1", "LIMIT-INFLIGHT-1"]
        ),
        case!(
            hostile_connections_that_send_only_a_max_frame_length_prefix,
            ["LIMIT-INFLIGHT-1", "PROTO-TIMEOUT-1"]
        ),
        case!(
            hostile_pipelined_requests_whose_answers_are_not_read,
            ["PROTO-TIMEOUT-1", "PROTO-ORDER-1"]
        ),
        case!(
            hostile_fetch_naming_one_partition_5000_times_waiting_i32_max,
            ["LIMIT-FETCH-DUPLICATES-1", "LIMIT-FETCH-WAIT-1", "LIMIT-ENTRIES-1"]
        ),
        case!(
            hostile_trailing_bytes_after_the_request_body,
            ["LIMIT-TRAILING-BYTES-1"]
        ),
        case!(
            hostile_32767_byte_strings_in_every_echoed_field,
            ["LIMIT-BUILT-STRING-1", "PROTO-ENCODE-1"]
        ),
        case!(
            hostile_zstd_batch_declaring_a_million_empty_records,
            ["LIMIT-RECORDS-1", "LIMIT-BLOCKING-1"]
        ),
        case!(
            hostile_near_max_frame_zstd_produces_on_two_connections,
            ["LIMIT-BLOCKING-1"]
        ),
        // Issue 50: KIP-848 consumer-protocol members (hostile_cases/consumer_protocol.rs).
        case!(
            hostile_consumer_heartbeats_with_megabyte_ids_and_a_group_of_the_largest_members,
            ["LIMIT-GROUP-MEMBER-ID-1", "LIMIT-GROUP-ANSWER-BYTES-1"]
        ),
        case!(
            hostile_consumer_heartbeats_from_strangers_naming_patterns,
            ["GROUP-CONSUMER-NONMEMBER-1"]
        ),
        case!(
            hostile_consumer_patterns_costly_to_match_against_many_topics,
            ["GROUP-CONSUMER-REGEX-COST-1", "LIMIT-BLOCKING-1"]
        ),
        case!(
            hostile_offset_delete_under_a_consumer_protocol_groups_feet,
            ["GROUP-CONSUMER-OFFSETDELETE-1", "OFFSETDELETE-2"]
        ),
    ]
}
