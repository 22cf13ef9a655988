//! The bytes one response may take (LIMIT-RESPONSE-BYTES-1): a running estimate a handler charges
//! as it adds entries, before it copies or allocates them, so an answer past `max_response_bytes`
//! is refused with an error instead of being built. The estimates are upper bounds of the encoded
//! size (every string and array counted with its longest length prefix), so a response the budget
//! admits never encodes larger than the budget says.

/// The longest length prefix of a Kafka string, bytes or array: a compact varint of a `u32`.
pub const LENGTH_PREFIX_BYTES: usize = 5;

/// What a string (or bytes field) of `len` bytes takes on the wire, at most.
pub const fn string_bytes(len: usize) -> usize {
    LENGTH_PREFIX_BYTES + len
}

/// A response's byte budget and what has been charged to it.
#[derive(Debug, Clone)]
pub struct ResponseBudget {
    limit_bytes: usize,
    charged_bytes: usize,
    /// Whether a charge has been refused: a handler answering many entries stops reading for
    /// the ones after it.
    refused: bool,
}

/// A charge the budget refused: nothing of it was charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    /// The budget's limit.
    pub limit_bytes: usize,
    /// What had been charged before, plus the refused charge.
    pub wanted_bytes: usize,
}

impl ResponseBudget {
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            limit_bytes,
            charged_bytes: 0,
            refused: false,
        }
    }

    /// Charges `bytes`, or refuses them (charging nothing) when they would take the total past
    /// the limit.
    pub fn charge(&mut self, bytes: usize) -> Result<(), Exceeded> {
        let wanted_bytes = self.charged_bytes.saturating_add(bytes);
        if wanted_bytes > self.limit_bytes {
            self.refused = true;
            return Err(Exceeded {
                limit_bytes: self.limit_bytes,
                wanted_bytes,
            });
        }
        self.charged_bytes = wanted_bytes;
        Ok(())
    }

    /// Whether `bytes` could ever be charged, even to an empty budget: an entry that cannot is
    /// refused for good, one that can only for this response.
    pub fn fits_alone(&self, bytes: usize) -> bool {
        bytes <= self.limit_bytes
    }

    /// Whether any charge has been refused so far.
    pub fn has_refused(&self) -> bool {
        self.refused
    }

    pub fn charged_bytes(&self) -> usize {
        self.charged_bytes
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }
}

impl Exceeded {
    /// Counts the refusal and logs it once, naming the API and what was asked
    /// (LIMIT-RESPONSE-BYTES-1).
    pub fn log(&self, api: &str, what: &str) {
        crate::metrics::metrics().limit_hit("LIMIT-RESPONSE-BYTES-1");
        tracing::error!(
            "{api}: {what} would take the response to {} bytes, above max_response_bytes {} (LIMIT-RESPONSE-BYTES-1); answered with an error instead",
            self.wanted_bytes,
            self.limit_bytes
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_response_bytes_1_a_refused_charge_charges_nothing() {
        let mut budget = ResponseBudget::new(100);
        assert_eq!(budget.charge(60), Ok(()));
        assert_eq!(
            budget.charge(41),
            Err(Exceeded {
                limit_bytes: 100,
                wanted_bytes: 101
            })
        );
        assert_eq!(budget.charged_bytes(), 60);
        assert_eq!(budget.charge(40), Ok(()));
        assert!(budget.charge(usize::MAX).is_err(), "saturates, never wraps");
        assert!(budget.fits_alone(100) && !budget.fits_alone(101));
    }
}
