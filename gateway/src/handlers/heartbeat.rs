//! Heartbeat (GROUP-HEARTBEAT-1): extends the member's session; REBALANCE_IN_PROGRESS makes it
//! rejoin.

use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = request.group_id.0.as_str();
    let code = if !gateway.is_coordinator(group_id) {
        ResponseError::NotCoordinator.code()
    } else {
        gateway.groups.heartbeat(
            group_id,
            request.generation_id,
            request.member_id.as_str(),
            request.group_instance_id.as_ref().map(|i| i.as_str()),
        )
    };
    HeartbeatResponse::default().with_error_code(code)
}
