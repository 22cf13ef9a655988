//! The request-level event log of one run: who did what at which simulated millisecond. Hosts
//! and clients append to it; `simulation run --trace` prints it. Off, appending costs a branch.

use std::sync::{Arc, Mutex};

/// One event: simulated ms since the start, where it happened, what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub at_ms: u64,
    pub source: String,
    pub what: String,
}

/// A shared, possibly disabled, event log.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    events: Option<Arc<Mutex<Vec<Event>>>>,
}

impl Trace {
    /// A log that records, or one that drops everything.
    pub fn new(enabled: bool) -> Self {
        Self {
            events: enabled.then(|| Arc::new(Mutex::new(Vec::new()))),
        }
    }

    /// Whether events are kept (callers skip formatting when not).
    pub fn enabled(&self) -> bool {
        self.events.is_some()
    }

    /// Appends an event at the current simulated time.
    pub fn event(&self, source: &str, what: impl Into<String>) {
        if let Some(events) = &self.events {
            events.lock().expect("trace lock").push(Event {
                at_ms: crate::sim_ms() as u64,
                source: source.to_string(),
                what: what.into(),
            });
        }
    }

    /// Appends an event at `at_ms`, for the driver, which runs outside any host.
    pub fn event_at(&self, at_ms: u64, source: &str, what: impl Into<String>) {
        if let Some(events) = &self.events {
            events.lock().expect("trace lock").push(Event {
                at_ms,
                source: source.to_string(),
                what: what.into(),
            });
        }
    }

    /// Everything recorded, in order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .as_ref()
            .map(|e| e.lock().expect("trace lock").clone())
            .unwrap_or_default()
    }
}
