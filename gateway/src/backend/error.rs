//! Errors a backend returns: Iggy's own, plus the ones the pinned SDK has no variant for.

use iggy_common::IggyError;
use thiserror::Error;

#[derive(Debug, Clone, Error)]
pub enum BackendError {
    /// An error the Iggy server or SDK returned, or the embedded model's equal of it.
    #[error("iggy error {code}: {0}", code = .0.as_code())]
    Iggy(IggyError),
    /// Server code 3024: the partition holds `partition.consumer_offsets_max` offset keys for this
    /// consumer kind already. The pinned SDK's error enum has no variant for it.
    #[error("iggy error 3024: too many consumer offsets (raise partition.consumer_offsets_max)")]
    TooManyConsumerOffsets,
    /// CLUSTER-FAILOVER-2: no Iggy primary answered within the failover timeout (every roster
    /// member refused, timed out or was not primary). Retriable: the client tries again.
    #[error("no Iggy primary answered within {waited_ms} ms: {reason}")]
    NoPrimary { waited_ms: u64, reason: String },
    /// CLUSTER-UNKNOWN-1: an append was sent and its connection broke or timed out before the
    /// answer: the server may have stored it or not. Never reported as success.
    #[error("append outcome unknown (the Iggy node failed before answering): {0}")]
    OutcomeUnknown(String),
}

impl BackendError {
    /// Whether the error says Iggy was unreachable or had no primary, rather than that it
    /// refused the request (CLUSTER-FAILOVER-2).
    pub fn is_unavailable(&self) -> bool {
        match self {
            BackendError::NoPrimary { .. } | BackendError::OutcomeUnknown(_) => true,
            BackendError::Iggy(e) => matches!(
                e,
                IggyError::Disconnected
                    | IggyError::NotConnected
                    | IggyError::StaleClient
                    | IggyError::CannotEstablishConnection
                    | IggyError::ClientShutdown
                    | IggyError::TransientNotAccepted
                    | IggyError::TransientNotCommitted
            ),
            BackendError::TooManyConsumerOffsets => false,
        }
    }
}

impl From<IggyError> for BackendError {
    fn from(e: IggyError) -> Self {
        BackendError::Iggy(e)
    }
}
