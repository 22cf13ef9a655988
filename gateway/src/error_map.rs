//! The one table from backend and core errors to Kafka error codes (ERR-MAP-1). Wherever the
//! Kafka code says less than the Iggy error, the Iggy error is logged at error level here, so
//! the log names the real cause.

use crate::backend::BackendError;
use crate::metrics::metrics;
use iggy_common::IggyError;
use kafka_protocol::error::ResponseError;
use kig_core::error::DecodeError;
use kig_core::mapping::MapError;

/// A Kafka error code.
pub type KafkaCode = i16;

pub const NONE: KafkaCode = 0;

pub fn code(e: ResponseError) -> KafkaCode {
    e.code()
}

/// What a request acts on, which decides the Kafka code of an Iggy permission refusal
/// (AUTHZ-MAP-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Topic,
    Group,
    /// Streams and other gateway-wide resources.
    Cluster,
}

impl Resource {
    /// The Kafka code for "not permitted" on this resource.
    pub fn denied(self) -> KafkaCode {
        match self {
            Resource::Topic => ResponseError::TopicAuthorizationFailed.code(),
            Resource::Group => ResponseError::GroupAuthorizationFailed.code(),
            Resource::Cluster => ResponseError::ClusterAuthorizationFailed.code(),
        }
    }
}

/// Whether Iggy refused the request for the user's permissions.
pub fn is_denied(e: &BackendError) -> bool {
    matches!(e, BackendError::Iggy(IggyError::Unauthorized))
}

/// The Kafka code for a backend error, and whether it says everything the Iggy error says.
/// Pure: the model-vs-real test compares backends by what a Kafka client would be told.
/// A permission refusal is answered as one on a topic; see [`kafka_code_on`].
pub fn kafka_code(e: &BackendError) -> (KafkaCode, bool) {
    kafka_code_on(e, Resource::Topic)
}

/// [`kafka_code`] for a request on `resource`: AUTHZ-MAP-1 maps Iggy's Unauthorized to
/// TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED.
pub fn kafka_code_on(e: &BackendError, resource: Resource) -> (KafkaCode, bool) {
    if is_denied(e) {
        return (resource.denied(), true);
    }
    use ResponseError::*;
    // CLUSTER-FAILOVER-2: Iggy unreachable or without a primary is the retriable error a Kafka
    // client expects while its broker moves: NOT_LEADER_OR_FOLLOWER for topic requests
    // (Produce, Fetch, ...), COORDINATOR_NOT_AVAILABLE for the group coordinator's.
    if e.is_unavailable() {
        let kafka = match resource {
            Resource::Group => CoordinatorNotAvailable,
            Resource::Topic | Resource::Cluster => NotLeaderOrFollower,
        };
        return (kafka.code(), false);
    }
    let iggy = match e {
        // CO-LIMIT-1: no Kafka code fits; backend_error_on logs the server setting to raise.
        BackendError::TooManyConsumerOffsets => return (UnknownServerError.code(), false),
        BackendError::Iggy(iggy) => iggy,
        BackendError::NoPrimary { .. } | BackendError::OutcomeUnknown(_) => unreachable!("unavailable: answered above"),
    };
    let (kafka, exact) = match iggy {
        IggyError::StreamNameNotFound(_)
        | IggyError::StreamIdNotFound(_)
        | IggyError::TopicNameNotFound(..)
        | IggyError::TopicIdNotFound(..)
        | IggyError::PartitionNotFound(..)
        | IggyError::ResourceNotFound(_) => (UnknownTopicOrPartition, false),
        IggyError::TooBigMessagePayload | IggyError::TooBigUserHeaders => (MessageTooLarge, false),
        IggyError::InvalidMessagePayloadLength | IggyError::InvalidHeaderValue => (CorruptMessage, false),
        IggyError::InvalidMessageTimestampDelta(_) => (InvalidTimestamp, false),
        IggyError::TopicNameAlreadyExists(..) => (TopicAlreadyExists, true),
        IggyError::InvalidTopicName => (InvalidTopicException, false),
        IggyError::InvalidPartitionsCount | IggyError::TooManyPartitions => (InvalidPartitions, false),
        IggyError::InvalidOffset(_) => (OffsetOutOfRange, false),
        IggyError::Unauthenticated | IggyError::InvalidCredentials => (SaslAuthenticationFailed, false),
        // The client should refresh metadata and retry against a gateway that reaches Iggy.
        IggyError::Disconnected
        | IggyError::NotConnected
        | IggyError::StaleClient
        | IggyError::CannotEstablishConnection
        | IggyError::ClientShutdown => (NotLeaderOrFollower, false),
        _ => (UnknownServerError, false),
    };
    (kafka.code(), exact)
}

/// Maps a backend error; `context` names the operation for the log line.
pub fn backend_error(e: &BackendError, context: &str) -> KafkaCode {
    backend_error_on(e, Resource::Topic, context)
}

/// [`backend_error`] for a request on `resource` (AUTHZ-MAP-1). A refusal is logged at debug:
/// it is Iggy's permission model doing its job, not a fault.
pub fn backend_error_on(e: &BackendError, resource: Resource, context: &str) -> KafkaCode {
    let (kafka, exact) = kafka_code_on(e, resource);
    // Contexts quote topic and group names the client chose.
    let context = crate::log_text::clip(context);
    if is_denied(e) {
        tracing::debug!("{context}: refused by Iggy's permissions (answered as Kafka error {kafka})");
    }
    if let BackendError::TooManyConsumerOffsets = e {
        tracing::error!(
            "{context}: {e}; the partition holds the most offset keys Iggy allows; raise the server's partition.consumer_offsets_max"
        );
    } else if !exact {
        tracing::error!("{context}: {e} (answered as Kafka error {kafka})");
    }
    metrics().record_error_code(kafka);
    kafka
}

/// [`backend_error`] for the group coordinator's requests (OffsetCommit, OffsetFetch): a
/// permission refusal is still answered as one on the topic (AUTHZ-MAP-1), but Iggy unreachable
/// or without a primary is COORDINATOR_NOT_AVAILABLE (CLUSTER-FAILOVER-2), the code Kafka's
/// group clients retry on after finding the coordinator again.
pub fn coordinator_backend_error(e: &BackendError, context: &str) -> KafkaCode {
    if e.is_unavailable() {
        return backend_error_on(e, Resource::Group, context);
    }
    backend_error(e, context)
}

/// Maps a record-batch decode error (BATCH-MAGIC-1, BATCH-CRC-1, BATCH-BUDGET-2,
/// LIMIT-RECORDS-1) to the code of ERR-MAP-2's table.
/// The Kafka code of a refused ConsumerGroupHeartbeat (GROUP-CONSUMER-HEARTBEAT-1), as Kafka's
/// group coordinator answers each case.
pub fn consumer_group_code(e: &crate::groups::consumer_protocol::ConsumerGroupError) -> KafkaCode {
    use crate::groups::consumer_protocol::ConsumerGroupError as E;
    code(match e {
        E::UnknownMemberId => ResponseError::UnknownMemberId,
        E::FencedMemberEpoch(_) => ResponseError::FencedMemberEpoch,
        E::FencedInstanceId => ResponseError::FencedInstanceId,
        E::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        E::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        E::NotConsumerGroup => ResponseError::GroupIdNotFound,
        E::NotCoordinator => ResponseError::NotCoordinator,
        E::CoordinatorNotAvailable(_) => ResponseError::CoordinatorNotAvailable,
    })
}

/// The Kafka code of a refused `SubscribedTopicRegex` (GROUP-CONSUMER-REGEX-1): too long or not
/// a pattern, INVALID_REGULAR_EXPRESSION either way, as Kafka answers one RE2/J refuses.
pub fn regex_code(_refusal: &crate::groups::topic_regex::RegexRefusal) -> KafkaCode {
    code(ResponseError::InvalidRegularExpression)
}

/// The Kafka code of a member whose strings are refused (LIMIT-GROUP-MEMBER-ID-1,
/// LIMIT-GROUP-MEMBER-BYTES-1): INVALID_REQUEST, the code Kafka's ConsumerGroupHeartbeat
/// validation gives an id it refuses.
pub fn member_refusal_code(_refusal: &crate::groups::member_strings::MemberRefusal) -> KafkaCode {
    code(ResponseError::InvalidRequest)
}

/// The Kafka code of a consumer-protocol member's refused OffsetCommit or OffsetFetch
/// (GROUP-CONSUMER-COMMIT-1).
pub fn consumer_offsets_code(e: crate::groups::consumer_protocol::OffsetRefusal) -> KafkaCode {
    use crate::groups::consumer_protocol::OffsetRefusal as R;
    code(match e {
        R::UnknownMemberId => ResponseError::UnknownMemberId,
        R::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        R::UnsupportedVersion => ResponseError::UnsupportedVersion,
    })
}

/// The Kafka code of an idempotent batch the producer state refuses, as Kafka's
/// ProducerAppendInfo and LogValidator answer it: a stale epoch INVALID_PRODUCER_EPOCH in every
/// Produce version (PRODUCER-EPOCH-1; never PRODUCER_FENCED, which Produce does not carry), a
/// sequence that does not follow OUT_OF_ORDER_SEQUENCE_NUMBER (PRODUCER-SEQ-1), a negative
/// epoch or sequence INVALID_RECORD (PRODUCER-BATCH-1).
pub fn producer_code(refusal: &crate::producer_state::ProducerRefusal) -> KafkaCode {
    use crate::producer_state::ProducerRefusal as R;
    code(match refusal {
        R::StaleEpoch { .. } => ResponseError::InvalidProducerEpoch,
        R::OutOfOrder { .. } => ResponseError::OutOfOrderSequenceNumber,
        // PRODUCER-UNKNOWN-3: retriable; the client keeps its sequences and sends again.
        R::LogBehind { .. } => ResponseError::NotLeaderOrFollower,
        R::Invalid { .. } => ResponseError::InvalidRecord,
    })
}

pub fn decode_error(e: &DecodeError) -> KafkaCode {
    use ResponseError::*;
    let code = match e {
        DecodeError::UnsupportedMagic(_) => UnsupportedForMessageFormat.code(),
        DecodeError::Budget(_) => {
            // BATCH-BUDGET-2: counted here, where kig-core's refusal (sans-io) reaches the gateway.
            metrics().record_decompression_refusal();
            MessageTooLarge.code()
        }
        DecodeError::RecordBudget(_) => {
            // LIMIT-RECORDS-1: enforced in kig-core's decoder, counted where its refusal is mapped.
            metrics().limit_hit("LIMIT-RECORDS-1");
            MessageTooLarge.code()
        }
        _ => CorruptMessage.code(),
    };
    metrics().record_error_code(code);
    code
}

/// Maps a record-mapping error (MAP-TS-4, LIMIT-PAYLOAD-1) to the code of ERR-MAP-2's table.
pub fn map_error(e: &MapError) -> KafkaCode {
    use ResponseError::*;
    let code = match e {
        MapError::InvalidTimestamp(_) => InvalidTimestamp.code(),
        MapError::PayloadTooLarge { .. } => {
            // LIMIT-PAYLOAD-1: enforced in kig-core's mapping, counted where its refusal is mapped.
            metrics().limit_hit("LIMIT-PAYLOAD-1");
            MessageTooLarge.code()
        }
    };
    metrics().record_error_code(code);
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn err_map_1_table() {
        let cases: Vec<(BackendError, i16)> = vec![
            (IggyError::TopicNameNotFound("t".into(), "s".into()).into(), 3),
            (IggyError::ResourceNotFound("p".into()).into(), 3),
            (IggyError::TooBigMessagePayload.into(), 10),
            (IggyError::InvalidMessageTimestampDelta(1).into(), 32),
            (IggyError::InvalidOffset(4).into(), 1),
            (IggyError::Disconnected.into(), 6),
            (BackendError::TooManyConsumerOffsets, -1),
            (IggyError::Error.into(), -1),
        ];
        for (e, expected) in cases {
            assert_eq!(backend_error(&e, "test"), expected, "{e}");
        }
    }

    #[test]
    fn cluster_failover_2_no_primary_is_not_leader_for_topics_and_coordinator_not_available_for_groups() {
        let no_primary = BackendError::NoPrimary {
            waited_ms: 5000,
            reason: "every roster member refused".into(),
        };
        let unknown = BackendError::OutcomeUnknown("connection reset".into());
        for e in [&no_primary, &unknown, &IggyError::TransientNotAccepted.into()] {
            assert_eq!(backend_error(e, "Produce t-0"), 6, "{e}");
            assert_eq!(backend_error_on(e, Resource::Group, "DeleteGroups g"), 15, "{e}");
            assert_eq!(coordinator_backend_error(e, "OffsetCommit g t-0"), 15, "{e}");
        }
        // Refusals are not failovers: the coordinator's mapping leaves them alone.
        let denied: BackendError = IggyError::Unauthorized.into();
        assert_eq!(coordinator_backend_error(&denied, "OffsetCommit g t-0"), 29);
        let missing: BackendError = IggyError::ResourceNotFound("p".into()).into();
        assert_eq!(coordinator_backend_error(&missing, "OffsetFetch g t"), 3);
    }

    #[test]
    fn authz_map_1_a_permission_refusal_is_the_kafka_authorization_error_of_its_resource() {
        let denied: BackendError = IggyError::Unauthorized.into();
        assert_eq!(backend_error(&denied, "t"), 29);
        assert_eq!(backend_error_on(&denied, Resource::Topic, "t"), 29);
        assert_eq!(backend_error_on(&denied, Resource::Group, "g"), 30);
        assert_eq!(backend_error_on(&denied, Resource::Cluster, "s"), 31);
        assert_eq!(kafka_code(&denied), (29, true));
        let missing: BackendError = IggyError::ResourceNotFound("p".into()).into();
        assert_eq!(
            backend_error_on(&missing, Resource::Group, "g"),
            3,
            "only refusals change with the resource"
        );
    }

    #[test]
    fn co_limit_1_too_many_consumer_offsets_is_unknown_server_error() {
        // The model raises it at its 4096-key limit (limit_offset_keys_1_too_many_consumer_offsets).
        assert_eq!(
            backend_error(&BackendError::TooManyConsumerOffsets, "OffsetCommit g t-0"),
            -1
        );
        assert_eq!(kafka_code(&BackendError::TooManyConsumerOffsets), (-1, false));
    }

    #[test]
    fn batch_budget_2_and_batch_magic_1_codes() {
        let budget = DecodeError::Budget(kig_core::budget::DecompressionBudget::new(1).exceeded(2));
        assert_eq!(decode_error(&budget), 10);
        let records = DecodeError::RecordBudget(
            kig_core::budget::DecompressionBudget::new(1)
                .with_record_limit(1)
                .take_records(2)
                .unwrap_err(),
        );
        assert_eq!(decode_error(&records), 10, "LIMIT-RECORDS-1");
        assert_eq!(decode_error(&DecodeError::UnsupportedMagic(1)), 43);
        assert_eq!(decode_error(&DecodeError::CrcMismatch { stored: 1, computed: 2 }), 2);
    }
}
