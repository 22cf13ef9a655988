//! InitProducerId: producer ids unique across instances and restarts (PID-ALLOC-1, PID-ALLOC-2);
//! transactions refused (PID-TXN-1).

use crate::backend::Backend;
use crate::gateway::Gateway;
use crate::producer_id::AllocationRefusal;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

pub fn handle<B: Backend>(gateway: &Gateway<B>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if let Some(txn) = &request.transactional_id {
        // PID-TXN-1: 35 is fatal to a transactional producer; 42 would be abortable, 15 retried forever.
        tracing::warn!(
            "InitProducerId for transactional id {:?} refused: transactions are not supported",
            crate::log_text::clip(txn.0.as_str())
        );
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    match gateway.producer_ids.allocate(gateway.clock.now_us()) {
        // PID-ALLOC-1: epoch 0, always; Kafka gives a producer without a transactional id a new
        // id each time and ignores the id and epoch the request carries.
        Ok(id) => response.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(AllocationRefusal::Busy) => {
            // PID-ALLOC-2: retriable; both clients try InitProducerId again.
            tracing::warn!("InitProducerId: this second's 65,536 producer ids are spent; the client retries");
            response.with_error_code(ResponseError::CoordinatorLoadInProgress.code())
        }
        Err(AllocationRefusal::Exhausted) => {
            tracing::error!(
                "InitProducerId: instance {} has allocated all 2^47 producer ids",
                gateway.config.instance_id
            );
            response.with_error_code(ResponseError::UnknownServerError.code())
        }
    }
}
