//! FindCoordinator: each group goes to one gateway, the same whichever gateway is asked
//! (GROUP-COORDINATOR-1); transaction coordinators are refused (GROUP-TXN-COORDINATOR-1).

use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn coordinator<B: Backend>(gateway: &Gateway<B>, key: &StrBytes, key_type: i8) -> Coordinator {
    let answer = Coordinator::default()
        .with_key(key.clone())
        .with_node_id(BrokerId(-1))
        .with_port(-1);
    match key_type {
        KEY_TYPE_GROUP => {
            let node = gateway.coordinator(key.as_str());
            answer
                .with_node_id(BrokerId(node.id))
                .with_host(StrBytes::from_string(node.host.clone()))
                .with_port(node.port)
        }
        // Same reasoning as PID-TXN-1: non-retriable, so a transactional producer stops.
        KEY_TYPE_TRANSACTION => answer
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "transactions are not supported by this gateway",
            ))),
        _ => answer.with_error_code(ResponseError::InvalidRequest.code()),
    }
}

pub fn handle<B: Backend>(
    gateway: &Gateway<B>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|k| coordinator(gateway, k, request.key_type))
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let c = coordinator(gateway, &request.key, request.key_type);
    FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_error_message(c.error_message)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port)
}
