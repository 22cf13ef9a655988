//! AlterConfigs (ALTERCONFIGS-1, ALTERCONFIGS-3, ALTERCONFIGS-5): a topic's configs replaced
//! as a whole, of which the gateway honours `retention.ms` and `cleanup.policy` (TOPIC-COMPACT-1) and
//! takes the rest as TOPIC-CONFIG-2's table says. Also what
//! IncrementalAlterConfigs shares with it: the resource checks and the change of one topic.

use super::create_topics::retention_ms_expiry;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::topic_configs::{self, Checked, PolicyEdit};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::{HashMap, HashSet};

/// Kafka's resource types (ConfigResource.Type).
pub(crate) const RESOURCE_TOPIC: i8 = 2;

/// The topic config the handlers read themselves (TOPIC-CONFIG-2's first row).
pub(crate) const RETENTION_MS: &str = "retention.ms";

/// A refused resource: its code and a message naming why.
pub(crate) type Refusal = (i16, String);

/// What a request changes of a topic's expiry: `None` leaves it, `Some(None)` makes messages
/// never expire, `Some(Some(us))` expires them after `us` microseconds.
pub(crate) type ExpiryChange = Option<Option<u64>>;

/// What a request changes of a topic's configs: its retention ([`ExpiryChange`]: the configured
/// `retention.ms`, which is the expiry unless the topic is `compact` alone) and its policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ConfigChange {
    pub retention: ExpiryChange,
    pub policy: PolicyEdit,
}

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
/// TOPIC-COMPACT-2: the topic's recorded configs are read, changed and written back.
pub(crate) async fn alter_topic<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    name: &str,
    change: ConfigChange,
    validate_only: bool,
) -> Result<(), Refusal> {
    let (target, info) = super::resolve_topic(gateway, session, name)
        .await
        .map_err(|code| (code, format!("topic {name}")))?;
    if change == ConfigChange::default() {
        return Ok(());
    }
    let failed = |e: crate::backend::BackendError| {
        let code = error_map::backend_error(&e, &format!("altering the configs of topic {name}"));
        (code, e.to_string())
    };
    let backend = &*session.backend;
    let now = topic_configs::read(backend, &target.stream, &target.topic, info.message_expiry_us)
        .await
        .map_err(failed)?;
    let mut next = now;
    if let Some(retention) = change.retention {
        next.retention_us = retention;
    }
    next.policy = change.policy.applied_to(now.policy).map_err(invalid_config)?;
    if validate_only {
        return Ok(());
    }
    topic_configs::apply(backend, &target.stream, &target.topic, now, next)
        .await
        .map_err(failed)?;
    gateway
        .compacted_topics
        .note(&target.stream, &target.topic, next.policy);
    Ok(())
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
                // ALTERCONFIGS-5: the request is the topic's whole config; retention.ms and
                // cleanup.policy left out go back to their defaults, never expire and delete.
                let mut expiry = None;
                let mut policy = topic_configs::CleanupPolicy::Delete;
                let mut refused = None;
                for config in &resource.configs {
                    match config.name.as_str() {
                        RETENTION_MS => match retention_ms_expiry(config.value.as_deref()) {
                            Ok(value) => expiry = value,
                            Err(message) => refused = Some(invalid_config(message)),
                        },
                        other => match topic_configs::check(other, config.value.as_deref()) {
                            Ok(Checked::Policy(p)) => policy = p,
                            Ok(Checked::Ignored) => {}
                            Err(message) => refused = Some(invalid_config(message)),
                        },
                    }
                    if refused.is_some() {
                        break;
                    }
                }
                let change = ConfigChange {
                    retention: Some(expiry),
                    policy: PolicyEdit::Set(policy),
                };
                match refused {
                    Some(refusal) => Err(refusal),
                    None => alter_topic(gateway, session, name, change, request.validate_only).await,
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
