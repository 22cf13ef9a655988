//! DeleteTopics v0: the request is laid out as v1 (`[topic_names] timeout_ms`); the response is
//! `[responses: name error_code]`, v1's without throttle_time_ms.

use super::wire::*;
use super::{kafka_codec, LaidOutAs};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::buf::ByteBuf;

/// `[topic_names] timeout_ms`, as v1.
pub type DeleteTopicsV0Request = LaidOutAs<DeleteTopicsRequest, 1>;

/// A DeleteTopics v0 response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteTopicsV0Response(pub DeleteTopicsResponse);

fn only_v0(version: i16) -> Result<(), LegacyError> {
    if version == 0 {
        Ok(())
    } else {
        Err(LegacyError::Version {
            api: "DeleteTopics",
            version,
        })
    }
}

impl DeleteTopicsV0Response {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        only_v0(version)?;
        let responses = read_array(buf, "responses", |buf| {
            let name = read_string(buf, "topic name")?;
            let error_code = read_i16(buf, "error_code")?;
            Ok(DeletableTopicResult::default()
                .with_name(Some(TopicName(name)))
                .with_error_code(error_code))
        })?;
        Ok(Self(DeleteTopicsResponse::default().with_responses(responses)))
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        only_v0(version)?;
        write_array(out, "responses", &self.0.responses, |out, r| {
            // v0 names every topic it was asked about; only v6 deletes by id.
            let name = r.name.as_ref().ok_or(LegacyError::Null { what: "topic name" })?;
            write_string(out, "topic name", name)?;
            write_i16(out, r.error_code);
            Ok(())
        })
    }
}

kafka_codec!(DeleteTopicsV0Response);

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::protocol::{Decodable, Encodable};

    #[test]
    fn delete_topics_v0_request_and_response_from_the_guide_layout() {
        // DeleteTopics Request (Version: 0) => [topic_names] timeout_ms
        let request: &[u8] = &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0x03, 0xe8];
        let decoded = DeleteTopicsV0Request::decode(&mut Bytes::from_static(request), 0).unwrap();
        assert_eq!((decoded.0.topic_names[0].as_str(), decoded.0.timeout_ms), ("t", 1000));
        // DeleteTopics Response (Version: 0) => [responses: name error_code]
        let response = DeleteTopicsV0Response(DeleteTopicsResponse::default().with_responses(vec![
            DeletableTopicResult::default()
                .with_name(Some(TopicName("t".into())))
                .with_error_code(3),
        ]));
        let expected: &[u8] = &[0, 0, 0, 1, 0, 1, b't', 0, 3];
        let mut out = BytesMut::new();
        response.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], expected);
        assert_eq!(
            DeleteTopicsV0Response::decode(&mut Bytes::from_static(expected), 0).unwrap(),
            response
        );
        let nameless = DeleteTopicsV0Response(
            DeleteTopicsResponse::default().with_responses(vec![DeletableTopicResult::default().with_name(None)]),
        );
        assert!(nameless.encode(&mut BytesMut::new(), 0).is_err());
    }
}
