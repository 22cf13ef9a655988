//! OffsetCommit: membership and generation checked as Kafka does, then each offset stored in
//! Iggy per docs/spec/consumer-offsets.md. Metadata and leader epoch are dropped (CO-METADATA-1).

use super::group_authz::PollPermissions;
use super::join_group::valid_group_id;
use crate::auth::sessions::Session;
use crate::backend::{Backend, BackendError};
use crate::error_map;
use crate::gateway::Gateway;
use crate::groups::GroupState;
use crate::offset_store::{offsets_group, CommitError, OffsetStore};
use iggy_common::IggyError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

/// The code every partition gets when the request as a whole is refused, or `None`.
fn request_error<B: Backend>(gateway: &Gateway<B>, request: &OffsetCommitRequest, version: i16) -> Option<i16> {
    let group_id = request.group_id.0.as_str();
    if !valid_group_id(group_id) {
        return Some(ResponseError::InvalidGroupId.code());
    }
    if !gateway.is_coordinator(group_id) {
        return Some(ResponseError::NotCoordinator.code());
    }
    let member_id = request.member_id.as_str();
    let generation = request.generation_id_or_member_epoch;
    // GROUP-CONSUMER-COMMIT-1: a consumer-protocol group checks member epochs, as Kafka's
    // ConsumerGroup.validateOffsetCommit (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
    if let Some(checked) = gateway
        .groups
        .consumer_offsets_check(group_id, member_id, generation, false, version)
    {
        return checked.err().map(error_map::consumer_offsets_code);
    }
    match gateway.groups.member_generation(group_id) {
        // A standalone commit (no member, generation -1) is for a group without members; a
        // member's commit to a group this coordinator does not know is from another generation.
        None => (generation >= 0 || !member_id.is_empty()).then(|| ResponseError::IllegalGeneration.code()),
        Some((_, _, members)) if members.is_empty() => {
            (generation >= 0 || !member_id.is_empty()).then(|| ResponseError::UnknownMemberId.code())
        }
        Some((state, current, members)) => {
            if !members.iter().any(|m| m == member_id) {
                Some(ResponseError::UnknownMemberId.code())
            } else if generation != current {
                Some(ResponseError::IllegalGeneration.code())
            } else if state == GroupState::CompletingRebalance {
                // GROUP-COMMIT-1: as Kafka, a member may commit while a rebalance is prepared (what
                // it commits as it gives partitions up), but not between join and sync.
                Some(ResponseError::RebalanceInProgress.code())
            } else {
                None
            }
        }
    }
}

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &std::sync::Arc<Session<B>>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group_id = request.group_id.0.as_str();
    // One group's commits never interleave: a commit is two steps in Iggy (CO-ZERO-1).
    let lock = gateway.groups.commit_lock(group_id);
    let _serialised = lock.lock().await;
    let mut refused = request_error(gateway, &request, version);
    if refused.is_none() && !request.member_id.is_empty() {
        gateway.groups.touch(group_id, request.member_id.as_str());
    }
    // AUTHZ-GROUP-4: a commit from outside the group (no member id: an admin's reset, a
    // consumer that assigns its partitions itself) needs the group's permissions before
    // anything is remembered or stored for it; each topic it names then needs the user's own,
    // as every commit does (a refusal there is TOPIC_AUTHORIZATION_FAILED, as in Kafka, which
    // asks READ on the group first and on each topic after). A member's commit was authorized
    // when it joined.
    if refused.is_none() && request.member_id.is_empty() {
        refused = PollPermissions::new(gateway, session)
            .on_group(group_id)
            .await
            .refusal_code();
    }
    let store = OffsetStore {
        backend: session.backend.as_ref(),
        client: session.offsets_client,
        restores: &gateway.offset_members.restores,
    };
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let resolved = match refused {
            Some(code) => Err(code),
            None => super::resolve_topic(gateway, session, name).await,
        };
        if let Ok((target, _)) = &resolved {
            // AUTHZ-OFFSETS-1: the commit runs as the principal; its offsets client becomes the
            // member of the offsets group.
            gateway.offset_members.claim(target, group_id, session).await;
        }
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let index = p.partition_index;
            let code = match &resolved {
                Err(code) => *code,
                Ok((_, info)) if index < 0 || index as u32 >= info.partitions => {
                    ResponseError::UnknownTopicOrPartition.code()
                }
                Ok((target, _)) => match store.commit(target, index as u32, group_id, p.committed_offset).await {
                    Ok(()) => 0,
                    Err(CommitError::OutOfRange) => ResponseError::OffsetOutOfRange.code(),
                    Err(CommitError::Backend(BackendError::Iggy(IggyError::ResourceNotFound(reason)))) => {
                        // CO-MEMBER-1: even after joining, another Iggy client owns the partition in
                        // the offsets group: another gateway coordinates this group too.
                        tracing::error!(
                            "OffsetCommit {} {}-{index}: Iggy refused the store ({reason}); another client owns this partition of {}. Do all gateways share one peer list?",
                            crate::log_text::clip(group_id),
                            crate::log_text::clip(name),
                            crate::log_text::clip(&offsets_group(group_id))
                        );
                        ResponseError::NotCoordinator.code()
                    }
                    Err(CommitError::Backend(e)) => {
                        error_map::coordinator_backend_error(&e, &format!("OffsetCommit {group_id} {name}-{index}"))
                    }
                },
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}
