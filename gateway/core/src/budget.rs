//! The one decompression budget a whole Produce request shares (BATCH-BUDGET-1).
//!
//! `max_frame_size` bounds what a client sends, which is the *compressed* size; the budget bounds
//! what the gateway may expand it to, across every batch of every partition in the request.

use crate::error::BudgetExceeded;

/// Bytes of decompressed output a request may still produce.
#[derive(Debug, Clone)]
pub struct DecompressionBudget {
    limit: usize,
    remaining: usize,
}

impl DecompressionBudget {
    /// A budget of `limit_bytes` for one request.
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            limit: limit_bytes,
            remaining: limit_bytes,
        }
    }

    /// Bytes still available.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// The budget's size when it was created.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `bytes` from the budget, or fails without taking anything.
    pub fn take(&mut self, bytes: u64) -> Result<(), BudgetExceeded> {
        if bytes > self.remaining as u64 {
            return Err(self.exceeded(bytes));
        }
        self.remaining -= bytes as usize;
        Ok(())
    }

    /// The error for a request of `requested` bytes, without changing the budget.
    pub fn exceeded(&self, requested: u64) -> BudgetExceeded {
        BudgetExceeded {
            requested,
            remaining: self.remaining,
            limit: self.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_refuses_more_than_remaining_and_keeps_the_budget() {
        let mut budget = DecompressionBudget::new(10);
        budget.take(4).unwrap();
        let err = budget.take(7).unwrap_err();
        assert_eq!(err.remaining, 6);
        assert_eq!(budget.remaining(), 6);
        budget.take(6).unwrap();
        assert_eq!(budget.remaining(), 0);
    }
}
