//! LeaveGroup (GROUP-LEAVE-1): one member up to v2, a batch of members from v3. A member named
//! by its member id proves it is one; a static member named by its instance id alone may be
//! removed only by a principal authorized for the group (AUTHZ-GROUP-4).

use super::group_authz::PollPermissions;
use crate::auth::sessions::Session;
use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::groups::MemberLeave;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

pub async fn handle<B: Backend>(
    gateway: &Gateway<B>,
    session: &Session<B>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group_id = request.group_id.0.as_str();
    if !gateway.is_coordinator(group_id) {
        return LeaveGroupResponse::default().with_error_code(ResponseError::NotCoordinator.code());
    }
    if version < 3 {
        let leave = MemberLeave {
            member_id: request.member_id.as_str().to_string(),
            instance_id: None,
        };
        let code = gateway.groups.leave(group_id, &[leave])[0];
        return LeaveGroupResponse::default().with_error_code(code);
    }
    // AUTHZ-GROUP-4: an instance id is no secret (it is in a client's configuration and in
    // DescribeGroups); removing a static member by it alone needs the group's permissions.
    if request.members.iter().any(|m| m.member_id.is_empty()) {
        let verdict = PollPermissions::new(gateway, session).on_group(group_id).await;
        if let Some(code) = verdict.refusal_code() {
            return LeaveGroupResponse::default().with_error_code(code);
        }
    }
    let leaves: Vec<MemberLeave> = request
        .members
        .iter()
        .map(|m| MemberLeave {
            member_id: m.member_id.as_str().to_string(),
            instance_id: m.group_instance_id.as_ref().map(|i| i.as_str().to_string()),
        })
        .collect();
    let codes = gateway.groups.leave(group_id, &leaves);
    let members = request
        .members
        .into_iter()
        .zip(codes)
        .map(|(m, code)| {
            MemberResponse::default()
                .with_member_id(m.member_id)
                .with_group_instance_id(m.group_instance_id)
                .with_error_code(code)
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}
