//! Every conformance case, one file per area. A case is an async function of an [`Endpoint`]
//! that returns `Passed`, `Skipped(why)` or an error saying what did not conform.

use crate::endpoint::Endpoint;
use crate::runner::CaseInfo;
use anyhow::{ensure, Context as _};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use std::future::Future;
use std::pin::Pin;

pub mod answer_bound_cases;
pub mod auth_cases;
pub mod cluster_cases;
pub mod consumer_protocol_cases;
pub mod gateway_cases;
pub mod group_admin_cases;
pub mod group_amplification_cases;
pub mod group_cases;
pub mod hostile_cases;
pub mod legacy_cases;
pub mod migration_cases;
pub mod model_only_cases;
pub mod preauth_cases;
pub mod rdkafka_cases;
pub mod wire_cases;

/// What a case concluded.
#[derive(Debug)]
pub enum Outcome {
    Passed,
    /// Not run, and why: never counted as passed.
    Skipped(String),
}

pub type CaseFuture = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// One case: a stable name, the rule IDs it checks, the rules among them whose behaviour departs
/// from Kafka's, and its body.
pub struct Case {
    pub name: &'static str,
    /// The module that declares it (`…::cases::wire_cases`), which names its area.
    pub module: &'static str,
    pub rules: &'static [&'static str],
    /// The rule IDs (each listed in docs/spec/deviations.md) whose gateway behaviour this case's
    /// expectation depends on and which Kafka does not share. Under
    /// [`Profile::Kafka`](crate::profile::Profile::Kafka) the case expects Kafka's answer
    /// there instead, so a report can say which results rest on a deviation.
    pub deviations: &'static [&'static str],
    pub run: fn(Endpoint) -> CaseFuture,
}

impl Case {
    /// Its area: the case file's name without `_cases` (`wire`, `group`, …).
    pub fn area(&self) -> &'static str {
        area_of(self.module)
    }

    /// What the runner reports of it.
    pub fn info(&self) -> CaseInfo<'static> {
        CaseInfo {
            area: self.area(),
            name: self.name,
            rules: self.rules,
            deviations: self.deviations,
        }
    }
}

/// The area of the case file `module` (a `module_path!()`): `…::wire_cases` is `wire`.
pub fn area_of(module: &str) -> &str {
    let file = module.rsplit("::").next().unwrap_or(module);
    file.strip_suffix("_cases").unwrap_or(file)
}

/// A case that starts its own gateways (gateway and auth cases): listed and reported like the
/// others, run only where the suite holds a backend.
#[derive(Debug, Clone, Copy)]
pub struct ListedCase {
    pub name: &'static str,
    pub rules: &'static [&'static str],
}

/// Declares a `Case` from an `async fn(Endpoint) -> anyhow::Result<Outcome>` and its rule IDs:
/// a list of literals, or a `&'static [&'static str]` that several cases share; optionally
/// followed by `deviates: [..]`, the IDs of the deviations from Kafka its expectation depends on
/// (docs/spec/deviations.md).
#[macro_export]
macro_rules! case {
    ($f:path, [$($rule:literal),+ $(,)?], deviates: [$($dev:literal),+ $(,)?]) => {
        $crate::case!($f, &[$($rule),+], deviates: [$($dev),+])
    };
    ($f:path, $rules:expr, deviates: [$($dev:literal),+ $(,)?]) => {
        $crate::cases::Case {
            name: stringify!($f),
            module: module_path!(),
            rules: $rules,
            deviations: &[$($dev),+],
            run: |endpoint| Box::pin($f(endpoint)),
        }
    };
    ($f:path, [$($rule:literal),+ $(,)?]) => {
        $crate::case!($f, &[$($rule),+])
    };
    ($f:path, $rules:expr) => {
        $crate::cases::Case {
            name: stringify!($f),
            module: module_path!(),
            rules: $rules,
            deviations: &[],
            run: |endpoint| Box::pin($f(endpoint)),
        }
    };
}

/// Under the kafka profile, the skip of a case that checks only what has no Kafka counterpart
/// (`why` says what); `None` under the gateway profile, where the case runs.
pub fn gateway_only(endpoint: &Endpoint, why: &str) -> Option<Outcome> {
    endpoint
        .profile
        .is_kafka()
        .then(|| Outcome::Skipped(format!("gateway-only: {why}")))
}

/// The client software name every ApiVersions of the suite sends (KIP-511).
pub const SOFTWARE_NAME: &str = "kig-conformance";
/// The client software version it sends: this crate's.
pub const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// An ApiVersions request naming the suite's software and version. Kafka answers a v3+ request
/// whose name or version is empty or malformed with INVALID_REQUEST (42)
/// (ApiVersionsRequest.isValid against SOFTWARE_NAME_VERSION_PATTERN, checked by
/// KafkaApis.handleApiVersionsRequest), so every case sends both.
pub fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(SOFTWARE_NAME))
        .with_client_software_version(StrBytes::from_static_str(SOFTWARE_VERSION))
}

/// The reason a case skips when the endpoint does not advertise an API it needs; the mock
/// limitations of the kafka profile's suite match on it.
pub fn unadvertised(api: ApiKey) -> String {
    format!(
        "the endpoint does not advertise {api:?} (key {}) in ApiVersions",
        api as i16
    )
}

/// The highest version of `api` the endpoint advertises in ApiVersions, `None` when it leaves
/// the API out.
pub async fn advertised_max(endpoint: &Endpoint, api: ApiKey) -> anyhow::Result<Option<i16>> {
    Ok(advertised(endpoint)
        .await?
        .api_keys
        .iter()
        .find(|k| k.api_key == api as i16)
        .map(|k| k.max_version))
}

/// The lowest version of `api` the endpoint advertises in ApiVersions, `None` when it leaves
/// the API out.
pub async fn advertised_min(endpoint: &Endpoint, api: ApiKey) -> anyhow::Result<Option<i16>> {
    Ok(advertised(endpoint)
        .await?
        .api_keys
        .iter()
        .find(|k| k.api_key == api as i16)
        .map(|k| k.min_version))
}

/// `Some(Skipped)` naming the first of `apis` that the endpoint's ApiVersions does not list: a
/// Kafka implementation may leave an API out (librdkafka's mock cluster has no CreateTopics
/// or DescribeGroups), and a case needing it has nothing to check there.
pub async fn require_apis(endpoint: &Endpoint, apis: &[ApiKey]) -> anyhow::Result<Option<Outcome>> {
    let response = advertised(endpoint).await?;
    Ok(apis
        .iter()
        .find(|api| !response.api_keys.iter().any(|k| k.api_key == **api as i16))
        .map(|api| Outcome::Skipped(unadvertised(*api))))
}

/// `Some(Skipped)` naming the first of `needs` (an API and the version a case sends) that the
/// endpoint does not serve: the API left out of ApiVersions (`unadvertised`), or the version
/// outside its range (Kafka 4.0 dropped the oldest versions, KIP-896).
pub async fn require_versions(endpoint: &Endpoint, needs: &[(ApiKey, i16)]) -> anyhow::Result<Option<Outcome>> {
    let response = advertised(endpoint).await?;
    Ok(first_unserved(&response.api_keys, needs).map(Outcome::Skipped))
}

/// Why the first of `needs` is not served by an endpoint advertising `keys`, if one is not.
pub fn first_unserved(keys: &[ApiVersion], needs: &[(ApiKey, i16)]) -> Option<String> {
    needs
        .iter()
        .find_map(|&(api, version)| match keys.iter().find(|k| k.api_key == api as i16) {
            None => Some(unadvertised(api)),
            Some(k) if !(k.min_version..=k.max_version).contains(&version) => Some(format!(
                "the endpoint advertises {api:?} (key {}) v{}-v{}, not v{version}",
                api as i16, k.min_version, k.max_version
            )),
            Some(_) => None,
        })
}

/// The endpoint's ApiVersions answer, checked for errors. v0, which every broker answers
/// (librdkafka's mock cluster stops at v2).
async fn advertised(endpoint: &Endpoint) -> anyhow::Result<ApiVersionsResponse> {
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await
        .context("ApiVersions v0")?;
    ensure!(
        response.error_code == 0,
        "ApiVersions v0: error {}",
        response.error_code
    );
    Ok(response)
}

/// Every case of the suite.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(wire_cases::cases());
    cases.extend(rdkafka_cases::cases());
    cases.extend(group_cases::cases());
    cases.extend(consumer_protocol_cases::cases());
    cases.extend(hostile_cases::cases());
    cases.extend(migration_cases::cases());
    cases.extend(group_admin_cases::cases());
    cases.extend(legacy_cases::cases());
    cases.extend(answer_bound_cases::cases());
    cases.extend(group_amplification_cases::cases());
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether Kafka accepts `text` as a client software name or version (KIP-511): a letter or
    /// digit at each end, letters, digits, '-' and '.' between.
    fn is_valid_software_text(text: &str) -> bool {
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        edge(text.chars().next())
            && edge(text.chars().last())
            && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    }

    #[test]
    fn the_suite_names_its_software_as_kafka_accepts() {
        let request = api_versions_request();
        assert!(is_valid_software_text(request.client_software_name.as_str()));
        assert!(is_valid_software_text(request.client_software_version.as_str()));
        for refused in ["", "-kig", "kig-", "kig conformance", "kig_conformance", "."] {
            assert!(!is_valid_software_text(refused), "{refused:?} was accepted");
        }
        for accepted in ["a", "kig-conformance", "0.1.0", "1.2.3-rc.1"] {
            assert!(is_valid_software_text(accepted), "{accepted:?} was refused");
        }
    }

    fn range(api: ApiKey, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(api as i16)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn a_version_outside_the_advertised_range_is_unserved() {
        let keys = [range(ApiKey::CreateTopics, 2, 7), range(ApiKey::DeleteTopics, 0, 6)];
        assert_eq!(first_unserved(&keys, &[(ApiKey::DeleteTopics, 0)]), None);
        let why = first_unserved(&keys, &[(ApiKey::DeleteTopics, 0), (ApiKey::CreateTopics, 0)]);
        assert!(why.is_some_and(|w| w.contains("CreateTopics") && w.contains("not v0")));
        assert_eq!(
            first_unserved(&keys, &[(ApiKey::DescribeConfigs, 0)]),
            Some(unadvertised(ApiKey::DescribeConfigs))
        );
    }
}
