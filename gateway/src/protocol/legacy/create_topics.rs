//! CreateTopics v0 and v1 (TOPIC-CREATE-LEGACY-1). v0's request is v1's without
//! `validate_only`, which it decodes as false; v1's is laid out as v2. Responses list
//! `name error_code`, v1 adding `error_message`; v2 added throttle_time_ms in front.

use super::kafka_codec;
use super::wire::*;
use crate::protocol::entries::Entries;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::buf::ByteBuf;

fn v0_or_v1(version: i16) -> Result<(), LegacyError> {
    if (0..=1).contains(&version) {
        Ok(())
    } else {
        Err(LegacyError::Version {
            api: "CreateTopics",
            version,
        })
    }
}

/// A CreateTopics v0 or v1 request: `[topics: name num_partitions replication_factor
/// [assignments: partition_index [broker_ids]] [configs: name value]] timeout_ms`, then
/// `validate_only` from v1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateTopicsV0V1Request(pub CreateTopicsRequest);

/// A CreateTopics v0 or v1 response: `[topics: name error_code]`, v1 `[topics: name error_code
/// error_message]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateTopicsV0V1Response(pub CreateTopicsResponse);

impl CreateTopicsV0V1Request {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        v0_or_v1(version)?;
        let topics = read_array(buf, "topics", |buf| {
            let name = read_string(buf, "topic name")?;
            let num_partitions = read_i32(buf, "num_partitions")?;
            let replication_factor = read_i16(buf, "replication_factor")?;
            let assignments = read_array(buf, "assignments", |buf| {
                let partition_index = read_i32(buf, "partition_index")?;
                let broker_ids = read_array(buf, "broker_ids", |buf| read_i32(buf, "broker_id").map(BrokerId))?;
                Ok(CreatableReplicaAssignment::default()
                    .with_partition_index(partition_index)
                    .with_broker_ids(broker_ids))
            })?;
            let configs = read_array(buf, "configs", |buf| {
                let name = read_string(buf, "config name")?;
                let value = read_nullable_string(buf, "config value")?;
                Ok(CreatableTopicConfig::default().with_name(name).with_value(value))
            })?;
            Ok(CreatableTopic::default()
                .with_name(TopicName(name))
                .with_num_partitions(num_partitions)
                .with_replication_factor(replication_factor)
                .with_assignments(assignments)
                .with_configs(configs))
        })?;
        let timeout_ms = read_i32(buf, "timeout_ms")?;
        // TOPIC-CREATE-LEGACY-1: v0 cannot ask for validation only; it always creates.
        let validate_only = version == 1 && read_bool(buf, "validate_only")?;
        Ok(Self(
            CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only),
        ))
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        v0_or_v1(version)?;
        write_array(out, "topics", &self.0.topics, |out, topic| {
            write_string(out, "topic name", &topic.name)?;
            write_i32(out, topic.num_partitions);
            write_i16(out, topic.replication_factor);
            write_array(out, "assignments", &topic.assignments, |out, a| {
                write_i32(out, a.partition_index);
                write_array(out, "broker_ids", &a.broker_ids, |out, b| {
                    write_i32(out, b.0);
                    Ok(())
                })
            })?;
            write_array(out, "configs", &topic.configs, |out, c| {
                write_string(out, "config name", &c.name)?;
                write_nullable_string(out, "config value", c.value.as_deref())
            })
        })?;
        write_i32(out, self.0.timeout_ms);
        if version == 1 {
            write_bool(out, self.0.validate_only);
        }
        Ok(())
    }
}

impl CreateTopicsV0V1Response {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        v0_or_v1(version)?;
        let topics = read_array(buf, "topics", |buf| {
            let name = read_string(buf, "topic name")?;
            let error_code = read_i16(buf, "error_code")?;
            let error_message = if version == 1 {
                read_nullable_string(buf, "error_message")?
            } else {
                None
            };
            Ok(CreatableTopicResult::default()
                .with_name(TopicName(name))
                .with_error_code(error_code)
                .with_error_message(error_message))
        })?;
        Ok(Self(CreateTopicsResponse::default().with_topics(topics)))
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        v0_or_v1(version)?;
        write_array(out, "topics", &self.0.topics, |out, topic| {
            write_string(out, "topic name", &topic.name)?;
            write_i16(out, topic.error_code);
            if version == 1 {
                write_nullable_string(out, "error_message", topic.error_message.as_deref())?;
            }
            Ok(())
        })
    }
}

kafka_codec!(CreateTopicsV0V1Request, CreateTopicsV0V1Response);

impl Entries for CreateTopicsV0V1Request {
    fn entries(&self) -> usize {
        self.0.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::protocol::{Decodable, Encodable};

    /// CreateTopics Request (Version: 0) => [topics] timeout_ms
    const V0: &[u8] = &[
        0, 0, 0, 1, // topics
        0, 1, b't', // name
        0, 0, 0, 3, // num_partitions
        0, 1, // replication_factor
        0, 0, 0, 1, // assignments
        0, 0, 0, 0, // partition_index
        0, 0, 0, 1, 0, 0, 0, 2, // broker_ids [2]
        0, 0, 0, 1, // configs
        0, 2, b'r', b'm', // name
        0xff, 0xff, // value: null
        0, 0, 0x75, 0x30, // timeout_ms 30000
    ];

    #[test]
    fn topic_create_legacy_1_v0_request_decodes_with_validate_only_false() {
        let decoded = CreateTopicsV0V1Request::decode(&mut Bytes::from_static(V0), 0)
            .unwrap()
            .0;
        let topic = &decoded.topics[0];
        assert_eq!(
            (topic.name.as_str(), topic.num_partitions, topic.replication_factor),
            ("t", 3, 1)
        );
        assert_eq!(topic.assignments[0].broker_ids, [BrokerId(2)]);
        assert_eq!(
            (topic.configs[0].name.as_str(), topic.configs[0].value.as_ref()),
            ("rm", None)
        );
        assert_eq!((decoded.timeout_ms, decoded.validate_only), (30_000, false));
        let mut out = BytesMut::new();
        CreateTopicsV0V1Request(decoded).encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], V0);
    }

    #[test]
    fn topic_create_legacy_1_v1_request_carries_validate_only() {
        let v1: Vec<u8> = [V0, &[1]].concat();
        let decoded = CreateTopicsV0V1Request::decode(&mut Bytes::from(v1.clone()), 1).unwrap();
        assert!(decoded.0.validate_only);
        // v1's request is v2's layout, which kafka-protocol decodes too.
        let modern = CreateTopicsRequest::decode(&mut Bytes::from(v1), 2).unwrap();
        assert_eq!(modern, decoded.0);
    }

    #[test]
    fn topic_create_legacy_1_responses_have_no_throttle_time_and_v0_no_message() {
        let response = CreateTopicsV0V1Response(CreateTopicsResponse::default().with_topics(vec![
            CreatableTopicResult::default()
                .with_name(TopicName("t".into()))
                .with_error_code(36)
                .with_error_message(Some("x".into())),
        ]));
        let v0: &[u8] = &[0, 0, 0, 1, 0, 1, b't', 0, 36];
        let v1: &[u8] = &[0, 0, 0, 1, 0, 1, b't', 0, 36, 0, 1, b'x'];
        for (version, expected) in [(0, v0), (1, v1)] {
            let mut out = BytesMut::new();
            response.encode(&mut out, version).unwrap();
            assert_eq!(&out[..], expected, "v{version}");
            let back = CreateTopicsV0V1Response::decode(&mut Bytes::from_static(expected), version).unwrap();
            assert_eq!(back.0.topics[0].error_code, 36);
        }
    }
}
