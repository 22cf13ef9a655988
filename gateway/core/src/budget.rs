//! The one decode budget a whole Produce request shares: decompressed bytes (BATCH-BUDGET-1)
//! and decoded records (LIMIT-RECORDS-1).
//!
//! `max_frame_size` bounds what a client sends, which is the *compressed* size; the budget bounds
//! what the gateway may expand it to, across every batch of every partition in the request. Bytes
//! alone are not enough: a few kilobytes of zstd expand to a million empty records, each of which
//! costs far more in memory decoded than its few bytes on the wire, so records are counted too.

use crate::error::{BudgetExceeded, RecordBudgetExceeded};

/// Records one request may decode when the caller sets no other limit (LIMIT-RECORDS-1).
pub const DEFAULT_MAX_RECORDS: usize = 500_000;

/// Bytes of decompressed output and records a request may still produce.
#[derive(Debug, Clone)]
pub struct DecompressionBudget {
    limit: usize,
    remaining: usize,
    record_limit: usize,
    records_remaining: usize,
}

impl DecompressionBudget {
    /// A budget of `limit_bytes` and [`DEFAULT_MAX_RECORDS`] records for one request.
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            limit: limit_bytes,
            remaining: limit_bytes,
            record_limit: DEFAULT_MAX_RECORDS,
            records_remaining: DEFAULT_MAX_RECORDS,
        }
    }

    /// The same budget with `limit_records` records instead of the default.
    pub fn with_record_limit(self, limit_records: usize) -> Self {
        Self {
            record_limit: limit_records,
            records_remaining: limit_records,
            ..self
        }
    }

    /// LIMIT-RECORDS-1: takes `count` records from the budget before any of them is decoded, or
    /// fails without taking anything.
    pub fn take_records(&mut self, count: usize) -> Result<(), RecordBudgetExceeded> {
        if count > self.records_remaining {
            return Err(RecordBudgetExceeded {
                requested: count,
                remaining: self.records_remaining,
                limit: self.record_limit,
            });
        }
        self.records_remaining -= count;
        Ok(())
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

    #[test]
    fn limit_records_1_take_records_refuses_past_the_limit_and_keeps_the_budget() {
        let mut budget = DecompressionBudget::new(10).with_record_limit(5);
        budget.take_records(3).unwrap();
        let err = budget.take_records(3).unwrap_err();
        assert_eq!((err.requested, err.remaining, err.limit), (3, 2, 5));
        budget.take_records(2).unwrap();
        assert!(budget.take_records(1).is_err());
    }
}
