//! The old versions served through `protocol::legacy` (PROTO-LEGACY-1), answered through
//! `Gateway::handle_frame` on the embedded backend: the same entry limit and malformed-body
//! rule as every other version, and answers in the old layout.

use bytes::BytesMut;
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::protocol::legacy::list_offsets::{ListOffsetsV0Request, ListOffsetsV0Response};
use kafka_iggy_gateway::protocol::legacy::offset_commit::{OffsetCommitV0V1Request, OffsetCommitV0V1Response};
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::sync::Arc;

mod common;
use common::{answer, frame};

type EmbeddedGateway = Arc<Gateway<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

fn gateway() -> EmbeddedGateway {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7)
}

fn list_v0(partitions: i32) -> ListOffsetsV0Request {
    ListOffsetsV0Request {
        request: ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("missing")))
                .with_partitions(
                    (0..partitions)
                        .map(|i| {
                            ListOffsetsPartition::default()
                                .with_partition_index(i)
                                .with_timestamp(-1)
                        })
                        .collect(),
                )]),
        max_num_offsets: vec![1; partitions as usize],
    }
}

fn commit_v1(partitions: i32) -> OffsetCommitV0V1Request {
    OffsetCommitV0V1Request {
        request: OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("missing")))
                .with_partitions(
                    (0..partitions)
                        .map(|i| OffsetCommitRequestPartition::default().with_partition_index(i))
                        .collect(),
                )]),
        commit_timestamps: vec![-1; partitions as usize],
    }
}

#[tokio::test(start_paused = true)]
async fn proto_legacy_1_old_versions_answer_in_their_own_layout() {
    let gateway = gateway();
    let listed: ListOffsetsV0Response = answer(
        gateway.handle_frame(frame(ApiKey::ListOffsets, 0, &list_v0(2))).await,
        ApiKey::ListOffsets,
        0,
    );
    let codes: Vec<_> = listed.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.old_style_offsets.len()))
        .collect();
    assert_eq!(
        codes,
        [(3, 0), (3, 0)],
        "a missing topic: UNKNOWN_TOPIC_OR_PARTITION, no offsets"
    );
    for version in [0, 1] {
        let committed: OffsetCommitV0V1Response = answer(
            gateway
                .handle_frame(frame(ApiKey::OffsetCommit, version, &commit_v1(1)))
                .await,
            ApiKey::OffsetCommit,
            version,
        );
        assert_eq!(committed.0.topics[0].partitions[0].error_code, 3, "v{version}");
    }
}

#[tokio::test(start_paused = true)]
async fn proto_legacy_1_limit_entries_1_old_versions_are_held_to_the_entry_limit() {
    let gateway = gateway();
    // One topic and 10,000 partitions: 10,001 entries, one over the default limit.
    for (key, version, body) in [
        (ApiKey::ListOffsets, 0, frame(ApiKey::ListOffsets, 0, &list_v0(10_000))),
        (
            ApiKey::OffsetCommit,
            1,
            frame(ApiKey::OffsetCommit, 1, &commit_v1(10_000)),
        ),
    ] {
        let err = gateway.handle_frame(body).await.unwrap_err();
        assert!(
            matches!(
                err,
                RequestError::TooManyEntries {
                    entries: 10_001,
                    limit: 10_000,
                    ..
                }
            ),
            "{key:?} v{version}: {err}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn proto_legacy_1_proto_malformed_1_a_truncated_old_body_closes_the_connection() {
    let gateway = gateway();
    let whole = frame(ApiKey::OffsetCommit, 1, &commit_v1(1));
    let err = gateway.handle_frame(whole.slice(..whole.len() - 1)).await.unwrap_err();
    assert!(
        matches!(
            err,
            RequestError::Malformed {
                what: "request body",
                ..
            }
        ),
        "{err}"
    );
    // Produce v2 stays unserved: the legacy codec takes no record-format version.
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(2)
        .with_correlation_id(11);
    let mut produce_v2 = BytesMut::new();
    header.encode(&mut produce_v2, 1).unwrap();
    let err = gateway.handle_frame(produce_v2.freeze()).await.unwrap_err();
    assert!(
        matches!(err, RequestError::UnsupportedVersion { version: 2, .. }),
        "{err}"
    );
}
