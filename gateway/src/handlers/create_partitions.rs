//! CreatePartitions (TOPIC-ADD-PARTITIONS-1): grows a topic to the requested partition count by
//! adding Iggy partitions after its last one. Partitions are never removed or reassigned.

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use iggy_common::MAX_PARTITIONS_COUNT;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut named = HashMap::<&str, usize>::new();
    for topic in &request.topics {
        *named.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        // As Kafka: a topic named twice in one request is refused both times, since which
        // count was meant is unknown.
        let repeated = named[name] > 1;
        let outcome = if repeated {
            Err((
                ResponseError::InvalidRequest.code(),
                format!("topic {name} is named more than once"),
            ))
        } else {
            grow(gateway, session, topic, request.validate_only).await
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// Checks one topic's request and, unless `validate_only`, adds the partitions.
async fn grow<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let name = topic.name.0.as_str();
    let context = format!("adding partitions to topic {name}");
    let (target, info) = super::resolve_topic(gateway, session, name)
        .await
        .map_err(|code| (code, format!("topic {name}")))?;
    // TOPIC-REPLICATION-1: replicas belong to the Iggy cluster; manual assignments are refused.
    if topic.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err((
            ResponseError::InvalidReplicaAssignment.code(),
            "replica assignments are not supported".to_string(),
        ));
    }
    let current = info.partitions;
    let requested = topic.count;
    if requested < 0 || (requested as u32) < current {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("topic {name} has {current} partitions, more than the requested {requested}"),
        ));
    }
    let requested = requested as u32;
    if requested == current {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("topic {name} already has {current} partitions"),
        ));
    }
    let added = requested - current;
    // Iggy adds at most this many partitions per call.
    if added > MAX_PARTITIONS_COUNT {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("adding {added} partitions at once; Iggy adds at most {MAX_PARTITIONS_COUNT}"),
        ));
    }
    if validate_only {
        return Ok(());
    }
    session
        .backend
        .add_partitions(&target.stream, &target.topic, added)
        .await
        .map_err(|e| (error_map::backend_error(&e, &context), e.to_string()))
}
