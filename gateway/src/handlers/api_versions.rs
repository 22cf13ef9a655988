//! ApiVersions: the advertised table (PROTO-VERSION-1), and the KIP-511 answer to a version the
//! gateway does not know (PROTO-APIVERSIONS-1).

use crate::protocol::api::{advertised, ADVERTISED};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

fn table() -> Vec<ApiVersion> {
    // DELETERECORDS-1: DeleteRecords (21) is never in ADVERTISED; Iggy cannot move a partition's
    // head to an offset, so clients refuse `deleteRecords` themselves.
    ADVERTISED
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.min_advertised)
                .with_max_version(a.max)
        })
        .collect()
}

/// PROTO-APIVERSIONS-2: no supported or finalized features, so no v3 tagged fields that old
/// librdkafka cannot parse; the defaults below are the ones the encoder omits.
pub fn handle(_request: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(table())
}

/// The v0 body for an ApiVersions version the gateway does not serve: UNSUPPORTED_VERSION and
/// the ApiVersions range, so the client retries with a version inside it.
pub fn unsupported_version() -> ApiVersionsResponse {
    let own = advertised(ApiKey::ApiVersions).expect("ApiVersions is advertised");
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(vec![ApiVersion::default()
            .with_api_key(ApiKey::ApiVersions as i16)
            .with_min_version(own.min_advertised)
            .with_max_version(own.max)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn proto_apiversions_2_v3_answer_carries_no_feature_tags() {
        let response = handle(ApiVersionsRequest::default());
        let size = response.compute_size(3).unwrap();
        let mut buf = bytes::BytesMut::new();
        response.encode(&mut buf, 3).unwrap();
        assert_eq!(buf.len(), size);
        // error(2) + compact array of N entries (1 + N*(2+2+2+1)) + throttle(4) + tag count(1).
        let n = ADVERTISED.len();
        assert_eq!(
            size,
            2 + 1 + n * 7 + 4 + 1,
            "no tagged fields beyond an empty tag section"
        );
        assert_eq!(*buf.last().unwrap(), 0, "empty tagged-field section");
    }

    #[test]
    fn proto_apiversions_1_unsupported_version_lists_the_apiversions_range() {
        let r = unsupported_version();
        assert_eq!(r.error_code, 35);
        assert_eq!(r.api_keys.len(), 1);
        assert_eq!(r.api_keys[0].api_key, 18);
        assert_eq!((r.api_keys[0].min_version, r.api_keys[0].max_version), (0, 3));
    }
}
