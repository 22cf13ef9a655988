//! DescribeCluster (DESCRIBECLUSTER-1, DESCRIBECLUSTER-2): the cluster as Metadata describes it
//! (METADATA-2): every configured gateway as a broker, the same cluster id and controller, and
//! no authorized operations. What `Admin.describeCluster` and the 3.9 tools' broker listings ask.

use super::metadata::{controller_id, CLUSTER_ID};
use crate::backend::Backend;
use crate::gateway::Gateway;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

/// KIP-919's endpoint types: the brokers, or the KRaft controllers.
const ENDPOINT_BROKERS: i8 = 1;

/// Kafka's "authorized operations not computed" (KIP-430).
pub const OPERATIONS_NOT_PROVIDED: i32 = i32::MIN;

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let config = &gateway.config;
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_static_str(CLUSTER_ID))
        // DESCRIBECLUSTER-2: Iggy's permissions name no Kafka cluster operation, asked or not.
        .with_cluster_authorized_operations(OPERATIONS_NOT_PROVIDED);
    // DESCRIBECLUSTER-1: a gateway has no controllers to list, as a Kafka broker has none
    // (v0 cannot ask: its endpoint type reads as the default, brokers).
    if request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "endpoint type {} is not served: a gateway describes only its brokers (1)",
                request.endpoint_type
            ))))
            .with_controller_id(BrokerId(-1));
    }
    let brokers = config
        .peers
        .iter()
        .map(|n| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(n.id))
                .with_host(StrBytes::from_string(n.host.clone()))
                .with_port(n.port)
                .with_rack(None)
                // v2: no gateway is ever fenced; a dead peer stays listed, as in Metadata.
                .with_is_fenced(false)
        })
        .collect();
    response
        .with_controller_id(BrokerId(controller_id(config)))
        .with_brokers(brokers)
}
