//! Authentication of Kafka clients (SASL PLAIN, checked by logging in to Iggy) and the backend
//! sessions their requests run in, so that Iggy's own permissions authorize them
//! (docs/spec/auth.md).
//!
//! - [`credentials`]: what a client proves itself with, never printable.
//! - [`plain`]: the SASL PLAIN message, parsed without I/O.
//! - [`throttle`]: slowing down repeated failures from one address.
//! - [`turns`]: one holder per key at a time (an address's logins, one credentials' login).
//! - [`sessions`]: backend sessions per principal, pooled, joined and bounded.
//! - [`settings`]: the `[sasl]` settings.
//! - [`connection`]: one connection's authentication state and what it may ask.

pub mod connection;
pub mod credentials;
pub mod plain;
pub mod sessions;
pub mod settings;
pub mod throttle;
pub mod turns;
