//! The compatibility tier: librdkafka's own integration tests (the broker tests of its 0000–0199
//! series) run against a gateway, one test number at a time, each under a time limit.
//!
//! - [`build`]: librdkafka and its `test-runner`, built from the `rdkafka-sys` crate's sources.
//! - [`catalog`]: the runner's test table and the selection a run covers.
//! - [`not_applicable`]: the tests that do not apply to the gateway, with their reasons.
//! - [`run`]: one runner invocation with a time limit.
//! - [`outcome`]: reading each test's result from the runner's output.
//! - [`tier`]: the loop over the selected tests.
//! - [`report`]: the Markdown and JUnit reports and the totals.
//! - [`work_dir`]: the work directory and the gateways' log, for this tier and the Java tier.

pub mod build;
pub mod catalog;
pub mod not_applicable;
pub mod outcome;
pub mod report;
pub mod run;
pub mod tier;
pub mod work_dir;
