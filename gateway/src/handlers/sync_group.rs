//! SyncGroup (GROUP-SYNC-1): the leader's assignments relayed to every member.

use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

pub async fn handle<B: Backend>(gateway: &Gateway<B>, request: SyncGroupRequest) -> SyncGroupResponse {
    let group_id = request.group_id.0.as_str();
    if !gateway.is_coordinator(group_id) {
        return SyncGroupResponse::default().with_error_code(ResponseError::NotCoordinator.code());
    }
    let assignments = request
        .assignments
        .into_iter()
        // LIMIT-GROUP-METADATA-1: copied out of the request frame, as JoinGroup's metadata is.
        .map(|a| {
            (
                a.member_id.as_str().to_string(),
                bytes::Bytes::copy_from_slice(&a.assignment),
            )
        })
        .collect();
    let outcome = gateway
        .groups
        .sync(
            group_id,
            request.generation_id,
            request.member_id.as_str(),
            request.group_instance_id.as_ref().map(|i| i.as_str()),
            assignments,
        )
        .await;
    SyncGroupResponse::default()
        .with_error_code(outcome.error_code)
        .with_protocol_type(outcome.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(outcome.protocol_name.map(StrBytes::from_string))
        .with_assignment(outcome.assignment)
}
