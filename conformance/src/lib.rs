//! The conformance suite: cases that cite spec rule IDs, runnable against any Kafka endpoint.
//!
//! - [`endpoint`]: what a case runs against: a bootstrap address plus what is known of it.
//! - The raw Kafka wire client, for what a high-level client cannot express, is the
//!   `kafka-wire-client` crate (wire-client/), which the simulations share.
//! - [`cases`]: the cases, one file per area, each naming the rules it checks.
//! - [`profile`]: which behaviour a run expects, this spec or Kafka's own.
//! - [`native`]: the gateway's backend as a native Iggy client sees it, for the migration cases.
//! - [`runner`]: runs a selection of cases and prints one line per case and a closing count.
//! - [`suite`]: the whole suite over a target: an outside endpoint, or a gateway it runs itself.
//! - [`results`]: what a run found, case by case, as the JSON report holds it.
//! - [`compat`]: the compatibility tier, librdkafka's own tests against the gateway.
//! - [`report`]: the run as JUnit XML, JSON and a Markdown matrix.
//! - [`peers`]: the kafka profile against independent Kafka brokers, and their matrix.
//! - [`ops_scrape`]: a gateway's operations listener read from outside (`/metrics`, probes).
//! - [`iggy_cluster`]: a three-node Iggy cluster for the cluster tier, nodes killed and restarted.
//! - [`traceability`]: the spec's rules traced to cases, tests and code; the conformance matrix.

pub mod answer_loss_proxy;
pub mod authority;
pub mod bench;
pub mod cases;
pub mod compat;
pub mod cpu;
pub mod delay_proxy;
pub mod differential;
pub mod endpoint;
pub mod iggy_cluster;
pub mod latency;
pub mod native;
pub mod ops_scrape;
pub mod peers;
pub mod profile;
pub mod provision;
pub mod real_iggy;
pub mod relay;
pub mod report;
pub mod results;
pub mod runner;
pub mod stall_proxy;
pub mod suite;
pub mod tls_fixture;
pub mod traceability;
