//! DeleteTopics: deletes the Iggy topic each named Kafka topic maps to, keeping its stream
//! (DELETETOPICS-1). The gateway assigns no topic ids, so a topic named only by id is
//! UNKNOWN_TOPIC_ID. A topic named more than once is refused at each mention, as Kafka does
//! (LIMIT-DELETETOPICS-DUPLICATES-1).

use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DeleteTopicsRequest,
    _version: i16,
) -> DeleteTopicsResponse {
    // v0-5 name topics in `topic_names`, v6 in `topics` (by name or by id).
    let mut names: Vec<Option<TopicName>> = request.topic_names.into_iter().map(Some).collect();
    names.extend(request.topics.into_iter().map(|t| t.name));
    let mut named = std::collections::HashMap::<StrBytes, usize>::new();
    for name in names.iter().flatten() {
        *named.entry(name.0.clone()).or_default() += 1;
    }
    let mut responses = Vec::with_capacity(names.len());
    for name in names {
        let result = DeletableTopicResult::default().with_name(name.clone());
        let Some(name) = name else {
            responses.push(result.with_error_code(ResponseError::UnknownTopicId.code()));
            continue;
        };
        // LIMIT-DELETETOPICS-DUPLICATES-1: none of the mentions deletes anything.
        if named[&name.0] > 1 {
            responses.push(
                result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str("Duplicate topic name."))),
            );
            continue;
        }
        let kafka = name.0.as_str();
        let target = gateway.config.topics.resolve(kafka);
        let code = match session.backend.get_topic(&target.stream, &target.topic).await {
            Ok(None) => ResponseError::UnknownTopicOrPartition.code(),
            Ok(Some(_)) => match session.backend.delete_topic(&target.stream, &target.topic).await {
                Ok(()) => 0,
                Err(e) => error_map::backend_error(&e, &format!("deleting topic {kafka}")),
            },
            Err(e) => error_map::backend_error(&e, &format!("deleting topic {kafka}")),
        };
        responses.push(result.with_error_code(code));
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
