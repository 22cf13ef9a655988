//! OffsetDelete (OFFSETDELETE-1, OFFSETDELETE-2, OFFSETDELETE-3): a group's committed offsets
//! of named partitions are deleted through the coordinator, as a commit of -1 deletes one
//! (CO-DELETE-1), except on topics the group's live members subscribe to, of either protocol
//! (GROUP-CONSUMER-OFFSETDELETE-1). What Kafka's
//! `kafka-consumer-groups --delete-offsets` and `Admin.deleteConsumerGroupOffsets` send.

use super::delete_groups::mapped_topics;
use super::group_authz::{PollPermissions, Verdict};
use super::join_group::valid_group_id;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::error_map;
use crate::gateway::Gateway;
use crate::groups::OffsetDeleteGuard;
use crate::offset_store::OffsetStore;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use std::sync::Arc;

fn answer(code: i16) -> OffsetDeleteResponse {
    OffsetDeleteResponse::default().with_error_code(code)
}

/// OFFSETDELETE-1: whether the group exists as the user can see it: members on this
/// coordinator, or offsets stored on a topic the request names or on one the user can list.
/// Topics the user may not read, or that do not exist, show nothing.
async fn group_exists<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    store: &OffsetStore<'_, B>,
    request: &OffsetDeleteRequest,
) -> Result<bool, i16> {
    let group_id = request.group_id.0.as_str();
    if gateway.groups.offset_delete_guard(group_id).is_some() {
        return Ok(true);
    }
    let named = request.topics.iter().map(|t| {
        let name = t.name.0.as_str();
        (name.to_string(), gateway.config.topics.resolve(name))
    });
    let named: Vec<_> = named.collect();
    for (kafka, target) in named.into_iter().chain(mapped_topics(gateway, session).await) {
        match store.holds_group(&target, group_id).await {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) if error_map::is_denied(&e) => {}
            Err(e) if error_map::kafka_code(&e).0 == ResponseError::UnknownTopicOrPartition.code() => {}
            Err(e) => {
                return Err(error_map::backend_error_on(
                    &e,
                    error_map::Resource::Group,
                    &format!("OffsetDelete {group_id}: listing its offsets on topic {kafka}"),
                ))
            }
        }
    }
    Ok(false)
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Arc<Session<B>>,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = request.group_id.0.as_str();
    // OFFSETDELETE-1: as Kafka, an empty group id names no group.
    if !valid_group_id(group_id) {
        return answer(ResponseError::InvalidGroupId.code());
    }
    if !gateway.is_coordinator(group_id) {
        return answer(ResponseError::NotCoordinator.code());
    }
    // OFFSETDELETE-3 (AUTHZ-GROUP-4): a group act, authorized by the group's topics before
    // anything of the group is read or deleted.
    let mut permissions = PollPermissions::new(gateway, session);
    if let Some(code) = permissions.on_group(group_id).await.refusal_code() {
        return answer(code);
    }
    // One group's offsets are written by one request at a time (CO-ZERO-1).
    let lock = gateway.groups.commit_lock(group_id);
    let _serialised = lock.lock().await;
    // OFFSETDELETE-2: live members keep their subscribed topics; a group of another protocol
    // type, whose subscriptions the coordinator cannot read, keeps everything while it has members.
    // GROUP-CONSUMER-OFFSETDELETE-1: so does a consumer-protocol group, its patterns' topics too.
    let guard = match gateway.groups.offset_delete_guard(group_id) {
        Some(OffsetDeleteGuard::Opaque) => return answer(ResponseError::NonEmptyGroup.code()),
        Some(guard) => guard,
        None => OffsetDeleteGuard::Empty,
    };
    let store = OffsetStore {
        backend: session.backend.as_ref(),
        client: session.offsets_client,
        restores: &gateway.offset_members.restores,
    };
    match group_exists(gateway, session, &store, &request).await {
        Ok(true) => {}
        Ok(false) => return answer(ResponseError::GroupIdNotFound.code()),
        Err(code) => return answer(code),
    }
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        // OFFSETDELETE-3: the topic must be one the user may read (its lookup, in the user's
        // session) and poll (the probe AUTHZ-GROUP-1 uses); TOPIC_AUTHORIZATION_FAILED otherwise.
        let mut resolved = super::resolve_topic(gateway, session, name).await;
        if resolved.is_ok() {
            match permissions.verdict(group_id, &[name]).await {
                Verdict::Allowed => {}
                Verdict::Denied(_) => resolved = Err(ResponseError::TopicAuthorizationFailed.code()),
                Verdict::Unknown(_) => resolved = Err(ResponseError::CoordinatorNotAvailable.code()),
            }
        }
        let subscribed = matches!(&guard, OffsetDeleteGuard::Subscribed(topics) if topics.contains(name));
        if let Ok((target, _)) = &resolved {
            if !subscribed {
                // AUTHZ-OFFSETS-1: deleting runs in the user's session, through its offsets client.
                gateway.offset_members.claim(target, group_id, session).await;
            }
        }
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let index = p.partition_index;
            let code = match &resolved {
                Err(code) => *code,
                Ok((_, info)) if index < 0 || index as u32 >= info.partitions => {
                    ResponseError::UnknownTopicOrPartition.code()
                }
                Ok(_) if subscribed => ResponseError::GroupSubscribedToTopic.code(),
                Ok((target, _)) => match store.delete_partition(target, index as u32, group_id).await {
                    Ok(()) => 0,
                    Err(e) => {
                        error_map::coordinator_backend_error(&e, &format!("OffsetDelete {group_id} {name}-{index}"))
                    }
                },
            };
            partitions.push(
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
