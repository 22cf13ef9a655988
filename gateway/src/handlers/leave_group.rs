//! LeaveGroup (GROUP-LEAVE-1): one member up to v2, a batch of members from v3.

use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::groups::MemberLeave;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
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
