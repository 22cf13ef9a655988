//! Spec traceability: every rule of docs/spec traced to the conformance cases and tests that
//! check it and the code that implements it, and the conformance matrix built from that trace.
//!
//! - [`ids`]: what counts as a rule ID in text, and its snake-case form.
//! - [`spec`]: the spec's markdown read into rules (tests, code sites, retirement) and facts.
//! - [`sources`]: the IDs a Rust file cites and the functions it defines.
//! - [`cases`]: every case with its area and rule IDs.
//! - [`check`]: the findings where spec, code and tests no longer point at each other.
//! - [`matrix`]: renders docs/conformance.md from the spec, the cases and two result sets.
//! - [`repo`]: reads all of the above from a checkout.

pub mod cases;
pub mod check;
pub mod ids;
pub mod matrix;
pub mod repo;
pub mod sources;
pub mod spec;
