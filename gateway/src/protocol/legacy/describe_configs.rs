//! DescribeConfigs v0 (DESCRIBECONFIGS-V0-1). The request is v1's without `include_synonyms`;
//! the response has no synonyms and, in place of v1's `config_source`, a bool `is_default`.

use super::kafka_codec;
use super::wire::*;
use crate::protocol::entries::Entries;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::buf::ByteBuf;

/// v1's config_source for a value nobody set: what v0's `is_default` says.
pub const SOURCE_DEFAULT: i8 = 5;
/// v1's config_source when it is unknown: what a v0 `is_default` false decodes to.
pub const SOURCE_UNKNOWN: i8 = 0;

fn only_v0(version: i16) -> Result<(), LegacyError> {
    if version == 0 {
        Ok(())
    } else {
        Err(LegacyError::Version {
            api: "DescribeConfigs",
            version,
        })
    }
}

/// A DescribeConfigs v0 request: `[resources: resource_type resource_name [configuration_keys]]`,
/// the keys null for all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsV0Request(pub DescribeConfigsRequest);

/// A DescribeConfigs v0 response: `throttle_time_ms [results: error_code error_message
/// resource_type resource_name [configs: name value read_only is_default is_sensitive]]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsV0Response(pub DescribeConfigsResponse);

impl DescribeConfigsV0Request {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        only_v0(version)?;
        let resources = read_array(buf, "resources", |buf| {
            let resource_type = read_i8(buf, "resource_type")?;
            let resource_name = read_string(buf, "resource_name")?;
            let keys = match read_nullable_count(buf, "configuration_keys")? {
                None => None,
                Some(count) => Some(
                    (0..count)
                        .map(|_| read_string(buf, "configuration key"))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            Ok(DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configuration_keys(keys))
        })?;
        Ok(Self(DescribeConfigsRequest::default().with_resources(resources)))
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        only_v0(version)?;
        write_array(out, "resources", &self.0.resources, |out, r| {
            write_i8(out, r.resource_type);
            write_string(out, "resource_name", &r.resource_name)?;
            let keys = r.configuration_keys.as_deref();
            write_nullable_count(out, "configuration_keys", keys.map(<[_]>::len))?;
            keys.unwrap_or_default()
                .iter()
                .try_for_each(|k| write_string(out, "configuration key", k))
        })
    }
}

impl DescribeConfigsV0Response {
    fn read<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self, LegacyError> {
        only_v0(version)?;
        let throttle_time_ms = read_i32(buf, "throttle_time_ms")?;
        let results = read_array(buf, "results", |buf| {
            let error_code = read_i16(buf, "error_code")?;
            let error_message = read_nullable_string(buf, "error_message")?;
            let resource_type = read_i8(buf, "resource_type")?;
            let resource_name = read_string(buf, "resource_name")?;
            let configs = read_array(buf, "configs", |buf| {
                let name = read_string(buf, "config name")?;
                let value = read_nullable_string(buf, "config value")?;
                let read_only = read_bool(buf, "read_only")?;
                let is_default = read_bool(buf, "is_default")?;
                let is_sensitive = read_bool(buf, "is_sensitive")?;
                Ok(DescribeConfigsResourceResult::default()
                    .with_name(name)
                    .with_value(value)
                    .with_read_only(read_only)
                    .with_config_source(if is_default { SOURCE_DEFAULT } else { SOURCE_UNKNOWN })
                    .with_is_sensitive(is_sensitive))
            })?;
            Ok(DescribeConfigsResult::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configs(configs))
        })?;
        Ok(Self(
            DescribeConfigsResponse::default()
                .with_throttle_time_ms(throttle_time_ms)
                .with_results(results),
        ))
    }

    fn write(&self, out: &mut Vec<u8>, version: i16) -> Result<(), LegacyError> {
        only_v0(version)?;
        write_i32(out, self.0.throttle_time_ms);
        write_array(out, "results", &self.0.results, |out, r| {
            write_i16(out, r.error_code);
            write_nullable_string(out, "error_message", r.error_message.as_deref())?;
            write_i8(out, r.resource_type);
            write_string(out, "resource_name", &r.resource_name)?;
            write_array(out, "configs", &r.configs, |out, c| {
                write_string(out, "config name", &c.name)?;
                write_nullable_string(out, "config value", c.value.as_deref())?;
                write_bool(out, c.read_only);
                // DESCRIBECONFIGS-V0-1: default exactly when v1 would say DEFAULT_CONFIG.
                write_bool(out, c.config_source == SOURCE_DEFAULT);
                write_bool(out, c.is_sensitive);
                Ok(())
            })
        })
    }
}

kafka_codec!(DescribeConfigsV0Request, DescribeConfigsV0Response);

impl Entries for DescribeConfigsV0Request {
    fn entries(&self) -> usize {
        self.0.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::protocol::{Decodable, Encodable};

    #[test]
    fn describeconfigs_v0_1_request_from_the_guide_layout() {
        // DescribeConfigs Request (Version: 0) => [resources: resource_type resource_name [config_names]]
        let body: &[u8] = &[
            0, 0, 0, 2, 2, 0, 1, b't', 0xff, 0xff, 0xff, 0xff, 4, 0, 1, b'1', 0, 0, 0, 1, 0, 1, b'k',
        ];
        let decoded = DescribeConfigsV0Request::decode(&mut Bytes::from_static(body), 0).unwrap();
        let r = &decoded.0.resources;
        assert_eq!(
            (
                r[0].resource_type,
                r[0].resource_name.as_str(),
                r[0].configuration_keys.as_ref()
            ),
            (2, "t", None)
        );
        assert_eq!(r[1].configuration_keys.as_ref().unwrap()[0].as_str(), "k");
        let mut out = BytesMut::new();
        decoded.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], body);
    }

    #[test]
    fn describeconfigs_v0_1_is_default_is_the_default_config_source() {
        let config = |source| {
            DescribeConfigsResourceResult::default()
                .with_name("n".into())
                .with_value(Some("v".into()))
                .with_read_only(true)
                .with_config_source(source)
        };
        let response = DescribeConfigsV0Response(DescribeConfigsResponse::default().with_results(vec![
            DescribeConfigsResult::default()
                .with_error_message(None)
                .with_resource_type(2)
                .with_resource_name("t".into())
                .with_configs(vec![config(SOURCE_DEFAULT), config(1)]),
        ]));
        let expected: &[u8] = &[
            0, 0, 0, 0, // throttle_time_ms
            0, 0, 0, 1, 0, 0, 0xff, 0xff, 2, 0, 1, b't', // results: error, null message, type, name
            0, 0, 0, 2, // configs
            0, 1, b'n', 0, 1, b'v', 1, 1, 0, // read_only, is_default, not sensitive
            0, 1, b'n', 0, 1, b'v', 1, 0, 0, // a dynamic topic value is not default
        ];
        let mut out = BytesMut::new();
        response.encode(&mut out, 0).unwrap();
        assert_eq!(&out[..], expected);
        let back = DescribeConfigsV0Response::decode(&mut Bytes::from_static(expected), 0).unwrap();
        let sources: Vec<_> = back.0.results[0].configs.iter().map(|c| c.config_source).collect();
        assert_eq!(sources, [SOURCE_DEFAULT, SOURCE_UNKNOWN]);
    }
}
