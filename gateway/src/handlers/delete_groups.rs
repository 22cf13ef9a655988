//! DeleteGroups (GROUP-DELETE-1): an empty group is forgotten and everything it stored in Iggy
//! (its offsets key and zero markers on every mapped topic) is deleted. A group named more than
//! once is deleted and answered once, as Kafka does (LIMIT-DELETEGROUPS-DUPLICATES-1).

use super::group_authz::PollPermissions;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::config::IggyTarget;
use crate::error_map;
use crate::gateway::Gateway;
use crate::offset_store::OffsetStore;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

/// Every Iggy topic a Kafka topic maps to.
pub(crate) async fn mapped_topics<B: Backend>(gateway: &Gateway<B>, session: &Session<B>) -> Vec<(String, IggyTarget)> {
    let mut out = Vec::new();
    for stream in gateway.config.topics.streams() {
        let Ok(topics) = session.backend.list_topics(&stream).await else {
            continue;
        };
        for info in topics {
            let target = IggyTarget {
                stream: stream.clone(),
                topic: info.name,
            };
            if let Some(kafka) = gateway.config.topics.reverse(&target) {
                out.push((kafka, target));
            }
        }
    }
    out
}

async fn delete_one<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    permissions: &mut PollPermissions<'_, B>,
    group_id: &str,
) -> i16 {
    if !gateway.is_coordinator(group_id) {
        return ResponseError::NotCoordinator.code();
    }
    // AUTHZ-GROUP-4: authorized on the group's topics before anything of it is forgotten.
    if let Some(code) = permissions.on_group(group_id).await.refusal_code() {
        return code;
    }
    let known = gateway.groups.describe(group_id).is_some();
    if !gateway.groups.remove_if_empty(group_id) {
        return ResponseError::NonEmptyGroup.code();
    }
    let mut deleted = 0;
    let store = OffsetStore {
        backend: session.backend.as_ref(),
        client: session.offsets_client,
        restores: &gateway.offset_members.restores,
    };
    for (kafka, target) in mapped_topics(gateway, session).await {
        match store.delete_group(&target, group_id).await {
            Ok(n) => deleted += n,
            // AUTHZ-GROUP-2: deleting needs the principal's Iggy permission on every topic holding
            // the group's offsets that it can list.
            Err(e) => {
                return error_map::backend_error_on(
                    &e,
                    error_map::Resource::Group,
                    &format!("DeleteGroups {group_id} on topic {kafka}"),
                )
            }
        }
    }
    // Kafka: a group with neither members nor offsets does not exist.
    if known || deleted > 0 {
        0
    } else {
        ResponseError::GroupIdNotFound.code()
    }
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut permissions = PollPermissions::new(gateway, session);
    let mut results = Vec::with_capacity(request.groups_names.len());
    // LIMIT-DELETEGROUPS-DUPLICATES-1: Kafka's KafkaApis takes `groupsNames.distinct`.
    let mut named = std::collections::HashSet::with_capacity(request.groups_names.len());
    for group_id in request.groups_names {
        if !named.insert(group_id.0.clone()) {
            continue;
        }
        let code = delete_one(gateway, session, &mut permissions, group_id.0.as_str()).await;
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
