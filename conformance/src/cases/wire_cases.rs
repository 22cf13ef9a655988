//! Cases over the raw wire client: ApiVersions, InitProducerId, frames, malformed requests,
//! compression bombs, and what a high-level client cannot express.
//!
//! Every case creates its own topics (CreateTopics over the wire, unique names) and runs against
//! any Kafka endpoint; a case that needs a setting the [`Endpoint`] does not know skips and says
//! why. Produce is spoken at v9 (flexible) unless a case says otherwise, Fetch at v11, ListOffsets
//! at v7, CreateTopics at v5, Metadata at v9, DeleteTopics at v4 and InitProducerId at v4.
//!
//! No case sleeps or asserts on timing. Where the server is expected to close a connection, the
//! wait for the close is bounded by [`CLOSE_GUARD`] so that a server which keeps waiting for
//! bytes that never come fails the case instead of hanging it.

use super::{api_versions_request, gateway_only, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_iggy_gateway::protocol::legacy;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse, FetchRequest, FetchResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_wire_client::{encode_request_header, WireClient};
use kig_core::batch::{
    decode_batches, encode_batch, encode_record, write_batch, BatchAttributes, BatchHeader, Record, RecordBatch,
    RecordHeader,
};
use kig_core::budget::DecompressionBudget;
use kig_core::compression::{compress, compress_snappy_xerial, Compression};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;

type Client = WireClient<TcpStream>;

/// The longest a case waits for the server to close a connection it must close. The gateway
/// closes at once; this only turns "still waiting for bytes that never come" (the gateway's own
/// read timeout is 30 s) into a failure instead of a hang.
pub const CLOSE_GUARD: Duration = Duration::from_secs(20);

// Versions the cases speak.
const PRODUCE_V: i16 = 9;
const FETCH_V: i16 = 11;
const LIST_OFFSETS_V: i16 = 7;
const CREATE_TOPICS_V: i16 = 5;
const METADATA_V: i16 = 9;
const DELETE_TOPICS_V: i16 = 4;
const INIT_PRODUCER_ID_V: i16 = 4;
const API_VERSIONS_V: i16 = 3;
const DESCRIBE_CONFIGS_V: i16 = 4;

// Kafka error codes.
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INVALID_REQUIRED_ACKS: i16 = 21;
const INVALID_TIMESTAMP: i16 = 32;
const UNSUPPORTED_VERSION: i16 = 35;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_RECORD: i16 = 87;
const UNKNOWN_TOPIC_ID: i16 = 100;

// ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Generous per-partition Fetch limit for cases that want everything back.
const FETCH_ALL: i32 = 16 * 1024 * 1024;
const HOUR_MS: i64 = 3_600_000;

mod api_versions;
mod batches;
mod configs;
mod framing;
mod list_offsets;
mod produce_fetch;
mod producer_ids;
mod support;
mod topics;
pub use api_versions::*;
pub use batches::*;
pub use configs::*;
pub use framing::*;
pub use list_offsets::*;
pub use produce_fetch::*;
pub use producer_ids::*;
use support::*;
pub use topics::*;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            api_versions_lists_the_advertised_ranges,
            ["PROTO-VERSION-1", "PROTO-APIVERSIONS-2"],
            deviates: ["PROTO-APIVERSIONS-2"]
        ),
        case!(
            api_versions_v0_matches_the_spec_table,
            ["PROTO-VERSION-1", "PROTO-HEADER-1"]
        ),
        case!(
            api_versions_future_version_gets_v0_unsupported_version,
            ["PROTO-APIVERSIONS-1", "PROTO-HEADER-1"]
        ),
        case!(
            every_served_api_answers_at_its_lowest_and_highest_version,
            ["PROTO-HEADER-1", "PROTO-VERSION-1"]
        ),
        case!(
            init_producer_id_with_transactional_id_is_unsupported_version,
            ["PID-TXN-1"],
            deviates: ["PID-TXN-1"]
        ),
        case!(producer_ids_carry_the_instance_id, ["PID-ALLOC-1"]),
        case!(
            frame_above_max_frame_size_closes_the_connection,
            ["PROTO-FRAME-1", "LIMIT-FRAME-1"]
        ),
        case!(
            frame_of_exactly_max_frame_size_is_read,
            ["LIMIT-FRAME-1", "PROTO-FRAME-1"]
        ),
        case!(
            decompression_bomb_is_message_too_large_and_connection_survives,
            ["BATCH-BUDGET-1", "BATCH-BUDGET-2", "ERR-MAP-2"]
        ),
        case!(
            decompression_budget_is_shared_by_the_whole_request,
            ["BATCH-BUDGET-1", "BATCH-BUDGET-2"]
        ),
        case!(malformed_request_body_closes_the_connection, ["PROTO-MALFORMED-1"]),
        case!(unknown_api_key_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(produce_v2_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(fetch_v3_closes_the_connection, ["PROTO-VERSION-2"]),
        case!(
            version_above_the_advertised_range_closes_the_connection,
            ["PROTO-VERSION-2"]
        ),
        case!(
            produce_then_fetch_round_trips_every_mapping_case,
            [
                "OFFSET-IDENTITY-1",
                "OFFSET-BASE-1",
                "FETCH-BATCH-1",
                "MAP-KEY-1",
                "MAP-VALUE-1",
                "MAP-VALUE-2",
                "MAP-HEADER-1",
                "MAP-TS-1",
                "ENV-LAYOUT-1",
                "ENV-TRIGGER-EMPTY-KEY-1",
                "ENV-TRIGGER-KEY-LEN-1",
                "ENV-TRIGGER-HEADER-VALUE-1",
                "ENV-TRIGGER-REPEAT-1",
                "ENV-TRIGGER-NAME-1",
                "ENV-TRIGGER-NAME-LEN-1",
                "ENV-TRIGGER-BUDGET-1",
                "LIMIT-HEADER-FIELD-1",
                "MAP-RESERVED-1",
            ],
            deviates: ["MAP-HEADER-1", "FETCH-BATCH-1"]
        ),
        case!(
            compressed_batches_round_trip_uncompressed,
            ["BATCH-COMPRESSION-1", "FETCH-BATCH-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            fetch_past_the_high_watermark_is_offset_out_of_range,
            ["FETCH-RANGE-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            fetch_returns_the_first_record_whole_above_max_bytes,
            ["FETCH-LIMIT-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            list_offsets_earliest_latest_and_timestamps,
            [
                "LISTOFFSETS-EARLIEST-1",
                "LISTOFFSETS-LATEST-1",
                "LISTOFFSETS-TIMESTAMP-1"
            ],
            deviates: ["LISTOFFSETS-TIMESTAMP-1"]
        ),
        case!(
            list_offsets_max_timestamp_after_a_fetch_of_one_byte_records,
            ["LISTOFFSETS-TIMESTAMP-1"]
        ),
        case!(
            create_topics_rules,
            [
                "TOPIC-NAME-1",
                "METADATA-NAME-1",
                "TOPIC-PARTITIONS-1",
                "TOPIC-REPLICATION-1",
                "TOPIC-CONFIG-2",
                "TOPIC-EXISTS-1",
                "TOPIC-VALIDATE-ONLY-1",
            ],
            deviates: ["TOPIC-CONFIG-2", "TOPIC-REPLICATION-1"]
        ),
        case!(
            delete_topics_then_metadata_reports_unknown,
            ["DELETETOPICS-1", "METADATA-2"],
            deviates: ["METADATA-2"]
        ),
        case!(
            describe_configs_reports_retention_and_fixed_entries,
            ["DESCRIBECONFIGS-2", "TOPIC-CONFIG-2"],
            deviates: ["DESCRIBECONFIGS-2"]
        ),
        case!(
            describe_cluster_agrees_with_metadata,
            ["DESCRIBECLUSTER-1", "DESCRIBECLUSTER-2"]
        ),
        case!(
            alter_configs_change_retention_and_refuse_the_rest,
            ["ALTERCONFIGS-1", "ALTERCONFIGS-3", "ALTERCONFIGS-6", "TOPIC-CONFIG-2"],
            deviates: ["TOPIC-CONFIG-2"]
        ),
        case!(
            corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported,
            [
                "BATCH-CRC-1",
                "BATCH-MAGIC-1",
                "BATCH-DECODE-1",
                "PRODUCE-TXN-1",
                "PRODUCE-ATOMIC-1",
                "ERR-MAP-2"
            ],
            deviates: ["PRODUCE-TXN-1", "BATCH-MAGIC-1"]
        ),
        case!(
            produce_to_a_named_partition_stays_there,
            ["MAP-PARTITION-1", "ERR-MAP-2"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            acks_zero_gets_no_response_and_order_is_kept,
            ["PRODUCE-ACKS-1", "PROTO-ORDER-1"]
        ),
        case!(pipelined_requests_are_answered_in_order, ["PROTO-ORDER-1"]),
        case!(
            fetch_long_poll_returns_when_data_arrives,
            ["FETCH-WAIT-1"],
            deviates: ["FETCH-BATCH-1"]
        ),
        case!(
            negative_timestamp_is_invalid_timestamp,
            ["MAP-TS-4", "MAP-TS-SPLIT-1", "MAP-TS-2", "MAP-TS-3", "PRODUCE-ATOMIC-1"]
        ),
        case!(
            idempotent_retry_is_answered_with_its_first_offset,
            ["PRODUCER-DUP-1", "DELIVERY-3", "PID-ALLOC-1"]
        ),
        case!(idempotent_sequence_gap_is_out_of_order, ["PRODUCER-SEQ-1"]),
        case!(idempotent_stale_epoch_is_invalid_producer_epoch, ["PRODUCER-EPOCH-1"]),
        case!(plain_retry_is_stored_again, ["PRODUCER-NONE-1", "DELIVERY-2"]),
        // Last: a gateway that aborts on it takes every later case down with it.
        case!(
            huge_array_count_in_a_request_body_closes_the_connection,
            ["PROTO-MALFORMED-1"]
        ),
    ]
}
