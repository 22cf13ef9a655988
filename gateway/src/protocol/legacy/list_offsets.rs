//! ListOffsets v0 (LISTOFFSETS-V0-1). The request decodes into the modern `ListOffsetsRequest`
//! with each partition's `max_num_offsets` kept beside it; the modern response, which answers one
//! offset per partition, becomes v0's `old_style_offsets` list through
//! [`ListOffsetsV0Request::respond`].
//!
//! ```
//! use kafka_iggy_gateway::protocol::legacy::list_offsets::ListOffsetsV0Request;
//! use kafka_protocol::protocol::Decodable;
//! // replica -1, topic "t", partition 0, timestamp -2 (earliest), at most 1 offset.
//! let mut body = bytes::Bytes::from_static(&[
//!     0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1,
//!     0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 1,
//! ]);
//! let decoded = ListOffsetsV0Request::decode(&mut body, 0).unwrap();
//! assert_eq!(decoded.request.topics[0].partitions[0].timestamp, -2);
//! assert_eq!(decoded.max_num_offsets, [1]);
//! ```

use super::kafka_codec;
use super::wire::*;
use crate::protocol::entries::Entries;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::buf::ByteBuf;

/// v0's timestamps: the newest offset, the oldest offset; any other negative value matches nothing.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

fn only_v0(version: i16) -> Result<(), LegacyError> {
    if version == 0 {
        Ok(())
    } else {
        Err(LegacyError::Version {
            api: "ListOffsets",
            version,
        })
    }
}

/// A ListOffsets v0 request:
/// `replica_id [topics: name [partitions: partition_index timestamp max_num_offsets]]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOffsetsV0Request {
    /// What the handler takes.
    pub request: ListOffsetsRequest,
    /// Each partition's max_num_offsets, in request order (topics, then partitions).
    pub max_num_offsets: Vec<i32>,
}

/// One partition of a v0 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOffsetsV0Partition {
    pub partition_index: i32,
    pub error_code: i16,
    pub old_style_offsets: Vec<i64>,
}

/// One topic of a v0 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOffsetsV0Topic {
    pub name: TopicName,
    pub partitions: Vec<ListOffsetsV0Partition>,
}

/// A ListOffsets v0 response:
/// `[topics: name [partitions: partition_index error_code [old_style_offsets]]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOffsetsV0Response {
    pub topics: Vec<ListOffsetsV0Topic>,
}

impl ListOffsetsV0Request {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        only_v0(version)?;
        let replica_id = read_i32(buf, "replica_id")?;
        let mut max_num_offsets = Vec::new();
        let topics = read_array(buf, "topics", |buf| {
            let name = read_string(buf, "topic name")?;
            let partitions = read_array(buf, "partitions", |buf| {
                let partition_index = read_i32(buf, "partition_index")?;
                let timestamp = read_i64(buf, "timestamp")?;
                max_num_offsets.push(read_i32(buf, "max_num_offsets")?);
                Ok(ListOffsetsPartition::default()
                    .with_partition_index(partition_index)
                    .with_timestamp(timestamp))
            })?;
            Ok(ListOffsetsTopic::default()
                .with_name(TopicName(name))
                .with_partitions(partitions))
        })?;
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(topics);
        Ok(Self {
            request,
            max_num_offsets,
        })
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        only_v0(version)?;
        write_i32(out, self.request.replica_id.0);
        let mut max = self.max_num_offsets.iter();
        write_array(out, "topics", &self.request.topics, |out, topic| {
            write_string(out, "topic name", &topic.name)?;
            write_array(out, "partitions", &topic.partitions, |out, p| {
                write_i32(out, p.partition_index);
                write_i64(out, p.timestamp);
                write_i32(out, max.next().copied().unwrap_or(1));
                Ok(())
            })
        })
    }

    /// The v0 answer to this request from the modern answer, which holds one partition per
    /// requested partition in request order (LISTOFFSETS-V0-1): the one offset found, as a list
    /// of at most `max_num_offsets`; no offset for an error, a timestamp no record is at or
    /// after, or a negative timestamp other than -1 and -2.
    pub fn respond(&self, response: ListOffsetsResponse) -> ListOffsetsV0Response {
        let asked = self.request.topics.iter().flat_map(|t| &t.partitions);
        let mut asked = asked.zip(&self.max_num_offsets);
        let topics = response
            .topics
            .into_iter()
            .map(|topic| ListOffsetsV0Topic {
                name: topic.name,
                partitions: topic
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let (timestamp, max) = asked.next().map_or((LATEST, 1), |(a, m)| (a.timestamp, *m));
                        let answers = p.error_code == 0 && p.offset >= 0 && (timestamp >= EARLIEST) && max > 0;
                        ListOffsetsV0Partition {
                            partition_index: p.partition_index,
                            error_code: p.error_code,
                            old_style_offsets: if answers { vec![p.offset] } else { vec![] },
                        }
                    })
                    .collect(),
            })
            .collect();
        ListOffsetsV0Response { topics }
    }
}

impl ListOffsetsV0Response {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        only_v0(version)?;
        let topics = read_array(buf, "topics", |buf| {
            let name = TopicName(read_string(buf, "topic name")?);
            let partitions = read_array(buf, "partitions", |buf| {
                Ok(ListOffsetsV0Partition {
                    partition_index: read_i32(buf, "partition_index")?,
                    error_code: read_i16(buf, "error_code")?,
                    old_style_offsets: read_array(buf, "old_style_offsets", |buf| read_i64(buf, "offset"))?,
                })
            })?;
            Ok(ListOffsetsV0Topic { name, partitions })
        })?;
        Ok(Self { topics })
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        only_v0(version)?;
        write_array(out, "topics", &self.topics, |out, topic| {
            write_string(out, "topic name", &topic.name)?;
            write_array(out, "partitions", &topic.partitions, |out, p| {
                write_i32(out, p.partition_index);
                write_i16(out, p.error_code);
                write_array(out, "old_style_offsets", &p.old_style_offsets, |out, o| {
                    write_i64(out, *o);
                    Ok(())
                })
            })
        })
    }
}

kafka_codec!(ListOffsetsV0Request, ListOffsetsV0Response);

impl Entries for ListOffsetsV0Request {
    fn entries(&self) -> usize {
        self.request.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    use kafka_protocol::protocol::{Decodable, Encodable};

    fn request(timestamps: &[(i64, i32)]) -> ListOffsetsV0Request {
        let partitions = (0..timestamps.len() as i32)
            .map(|i| {
                ListOffsetsPartition::default()
                    .with_partition_index(i)
                    .with_timestamp(timestamps[i as usize].0)
            })
            .collect();
        ListOffsetsV0Request {
            request: ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName("t".into()))
                .with_partitions(partitions)]),
            max_num_offsets: timestamps.iter().map(|t| t.1).collect(),
        }
    }

    fn modern(answers: &[(i16, i64)]) -> ListOffsetsResponse {
        let partitions = (0..answers.len() as i32)
            .map(|i| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(i)
                    .with_error_code(answers[i as usize].0)
                    .with_offset(answers[i as usize].1)
            })
            .collect();
        ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
            .with_name(TopicName("t".into()))
            .with_partitions(partitions)])
    }

    #[test]
    fn listoffsets_v0_1_each_partition_answers_at_most_one_offset() {
        let asked = request(&[(-1, 5), (-2, 1), (1_000, 1), (1_000, 1), (-1, 0), (-3, 1), (-1, 1)]);
        let answered = asked.respond(modern(&[(0, 10), (0, 2), (0, 7), (0, -1), (0, 10), (0, 9), (3, -1)]));
        let offsets: Vec<_> = answered.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.old_style_offsets.clone()))
            .collect();
        assert_eq!(
            offsets,
            [
                (0, vec![10]), // latest: the high watermark, once even when 5 are allowed
                (0, vec![2]),  // earliest
                (0, vec![7]),  // the first record at or after the timestamp
                (0, vec![]),   // no record at or after it
                (0, vec![]),   // max_num_offsets 0
                (0, vec![]),   // -3 means nothing in v0
                (3, vec![]),   // an error carries no offset
            ]
        );
    }

    #[test]
    fn listoffsets_v0_1_response_encodes_the_guide_layout() {
        // ListOffsets Response (Version: 0) => [topics: name [partitions: partition_index
        //   error_code [old_style_offsets]]]
        let response = request(&[(-1, 1)]).respond(modern(&[(0, 258)]));
        let expected: &[u8] = &[
            0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2,
        ];
        let mut out = BytesMut::new();
        response.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], expected);
        assert_eq!(
            ListOffsetsV0Response::decode(&mut Bytes::from_static(expected), 0).unwrap(),
            response
        );
        assert!(response.encode(&mut BytesMut::new(), 1).is_err());
    }

    #[test]
    fn listoffsets_v0_1_request_round_trips() {
        let asked = request(&[(-2, 3), (1_700_000_000_000, 1)]);
        let mut out = BytesMut::new();
        asked.encode(&mut out, 0).unwrap();
        assert_eq!(out.len(), 4 + 4 + 3 + 4 + 2 * 16);
        assert_eq!(ListOffsetsV0Request::decode(&mut out.freeze(), 0).unwrap(), asked);
    }
}
