//! AlterConfigs (ALTERCONFIGS-1, ALTERCONFIGS-2, ALTERCONFIGS-3): a topic's configs replaced
//! as a whole, of which the gateway honours `retention.ms` alone (TOPIC-CONFIG-1). Also what
//! IncrementalAlterConfigs shares with it: the resource checks and the change of one topic.

use super::create_topics::{retention_ms_expiry, unsupported_config};
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet};

/// Kafka's resource types (ConfigResource.Type).
pub(crate) const RESOURCE_TOPIC: i8 = 2;

/// The one topic config the gateway honours (TOPIC-CONFIG-1).
pub(crate) const RETENTION_MS: &str = "retention.ms";

/// A refused resource: its code and a message naming why.
pub(crate) type Refusal = (i16, String);

/// What a request changes of a topic's expiry: `None` leaves it, `Some(None)` makes messages
/// never expire, `Some(Some(us))` expires them after `us` microseconds.
pub(crate) type ExpiryChange = Option<Option<u64>>;

pub(crate) fn invalid_config(message: String) -> Refusal {
    (ResponseError::InvalidConfig.code(), message)
}

pub(crate) fn invalid_request(message: String) -> Refusal {
    (ResponseError::InvalidRequest.code(), message)
}

/// ALTERCONFIGS-3: how often each (type, name) is named in the request; a resource named more
/// than once is refused at every mention, since which change was meant is unknown.
pub(crate) fn mentions<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> HashMap<(i8, &'a str), usize> {
    let mut named = HashMap::new();
    for key in resources {
        *named.entry(key).or_default() += 1;
    }
    named
}

/// ALTERCONFIGS-3: the checks every resource passes before its configs are read: a topic, named
/// once in the request, each config key named once.
pub(crate) fn check_resource<'a>(
    resource_type: i8,
    name: &str,
    mentions: usize,
    keys: impl Iterator<Item = &'a str>,
) -> Result<(), Refusal> {
    if resource_type != RESOURCE_TOPIC {
        return Err(invalid_request(format!(
            "resource type {resource_type} ({name:?}) cannot be altered through this gateway: only topics (2) can"
        )));
    }
    if mentions > 1 {
        return Err(invalid_request(format!("topic {name} is named more than once")));
    }
    let mut seen = HashSet::new();
    for key in keys {
        if !seen.insert(key) {
            return Err(invalid_request(format!(
                "config {key} of topic {name} is named more than once"
            )));
        }
    }
    Ok(())
}

/// ALTERCONFIGS-1: applies `change` to the topic `name` (nothing when `validate_only`), after
/// checking that the topic exists in the user's session. The change runs as the user, so Iggy's
/// manage-topic permission decides it (AUTHZ-MAP-1: TOPIC_AUTHORIZATION_FAILED otherwise).
pub(crate) async fn alter_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    change: ExpiryChange,
    validate_only: bool,
) -> Result<(), Refusal> {
    let (target, _) = super::resolve_topic(gateway, session, name)
        .await
        .map_err(|code| (code, format!("topic {name}")))?;
    let Some(expiry) = change else {
        return Ok(());
    };
    if validate_only {
        return Ok(());
    }
    session
        .backend
        .set_message_expiry(&target.stream, &target.topic, expiry)
        .await
        .map_err(|e| {
            let code = error_map::backend_error(&e, &format!("altering the configs of topic {name}"));
            (code, e.to_string())
        })
}

/// The result entry of one resource.
pub(crate) fn message_of(outcome: &Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (*code, Some(StrBytes::from_string(message.clone()))),
    }
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let named = mentions(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let name = resource.resource_name.as_str();
        let outcome = match check_resource(
            resource.resource_type,
            name,
            named[&(resource.resource_type, name)],
            resource.configs.iter().map(|c| c.name.as_str()),
        ) {
            Err(refusal) => Err(refusal),
            Ok(()) => {
                // ALTERCONFIGS-2: the request is the topic's whole config; retention.ms left out
                // goes back to its default, never expire.
                let mut expiry = None;
                let mut refused = None;
                for config in &resource.configs {
                    match config.name.as_str() {
                        RETENTION_MS => match retention_ms_expiry(config.value.as_deref()) {
                            Ok(value) => expiry = value,
                            Err(message) => refused = Some(invalid_config(message)),
                        },
                        other => refused = Some(invalid_config(unsupported_config(other))),
                    }
                    if refused.is_some() {
                        break;
                    }
                }
                match refused {
                    Some(refusal) => Err(refusal),
                    None => alter_topic(gateway, session, name, Some(expiry), request.validate_only).await,
                }
            }
        };
        let (code, message) = message_of(&outcome);
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}
