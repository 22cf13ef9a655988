//! The conformance suite: cases that cite spec rule IDs, runnable against any Kafka endpoint.
//!
//! - [`endpoint`]: what a case runs against: a bootstrap address plus what is known of it.
//! - [`wire`]: a raw Kafka wire client on kafka-protocol's client side, for what a high-level
//!   client cannot express.
//! - [`cases`]: the cases, one file per area, each naming the rules it checks.
//! - [`profile`]: which behaviour a run expects, this spec or Kafka's own.
//! - [`runner`]: runs a selection of cases and prints one line per case and a closing count.
//! - [`results`]: what a run found, case by case, as the JSON report holds it.
//! - [`compat`]: the compatibility tier, librdkafka's own tests against the gateway.

pub mod bench;
pub mod cases;
pub mod compat;
pub mod differential;
pub mod endpoint;
pub mod profile;
pub mod provision;
pub mod real_iggy;
pub mod results;
pub mod runner;
pub mod tls_fixture;
pub mod wire;
