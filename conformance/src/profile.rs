//! Which behaviour a run expects: this project's spec, or Kafka's own.
//!
//! The spec departs from Kafka on purpose in a few places (sorted header order, rebuilt Fetch
//! batches, at-least-once despite idempotence, …). A case whose expectation is such a
//! deviation declares it, with the rule that makes it, and under [`Profile::Kafka`] expects what
//! a Kafka broker answers instead, so the suite can run against any Kafka implementation.

use std::fmt;
use std::str::FromStr;

/// The expectations a run holds an endpoint to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// This project's spec (docs/spec), deviations from Kafka included.
    #[default]
    Gateway,
    /// Kafka's own behaviour: every declared deviation expects Kafka's answer instead.
    Kafka,
}

impl Profile {
    pub fn is_kafka(self) -> bool {
        self == Profile::Kafka
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Gateway => "gateway",
            Profile::Kafka => "kafka",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gateway" => Ok(Profile::Gateway),
            "kafka" => Ok(Profile::Kafka),
            other => Err(format!("unknown profile {other:?}: expected gateway or kafka")),
        }
    }
}
