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
}

impl From<IggyError> for BackendError {
    fn from(e: IggyError) -> Self {
        BackendError::Iggy(e)
    }
}
