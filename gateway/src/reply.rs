//! What answering a request produces: a [`Reply`] for the connection loop, and the type-erased
//! encoder through which the dispatch table and the legacy-version handler turn differently
//! typed response bodies into one response frame.

use crate::protocol::request::encode_response;
use crate::protocol::response_frame::ResponseFrame;
use bytes::Bytes;
use kafka_protocol::protocol::Encodable;

/// What a request gets back.
#[derive(Debug)]
pub enum Reply {
    /// A response frame body (header and body, without the size prefix).
    Frame(ResponseFrame),
    /// Nothing: Produce with acks=0.
    Nothing,
    /// A frame, after which the connection closes: a failed authentication
    /// (AUTH-SASL-FAIL-1).
    FrameThenClose(ResponseFrame),
}

/// Lets the dispatch table hand differently typed responses to one encoder.
pub(crate) trait ErasedEncodable {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> anyhow::Result<Bytes>;
    /// The body's encoded size, computed without encoding it.
    fn encoded_bytes(&self, version: i16) -> anyhow::Result<usize>;
}

impl<T: Encodable> ErasedEncodable for T {
    fn encode_frame(&self, correlation_id: i32, header_version: i16, version: i16) -> anyhow::Result<Bytes> {
        encode_response(correlation_id, header_version, self, version)
    }

    fn encoded_bytes(&self, version: i16) -> anyhow::Result<usize> {
        self.compute_size(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::JoinGroupResponse;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn proto_encode_1_a_response_that_does_not_encode_is_an_error() {
        // A member id past a Kafka string's 32,767 bytes: what a 32,760-byte client id made.
        let response = JoinGroupResponse::default().with_member_id(StrBytes::from_string("m".repeat(40_000)));
        let erased: &dyn ErasedEncodable = &response;
        assert!(erased.encode_frame(1, 0, 5).is_err());
        assert!(JoinGroupResponse::default().encode_frame(1, 0, 5).is_ok());
    }
}
