//! Injected time and randomness: the server core reads neither the wall clock nor an OS RNG
//! directly, so a simulation seed decides both.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use std::sync::{Arc, Mutex};

/// Wall-clock time in microseconds since the Unix epoch, as Iggy stamps messages.
pub trait Clock: Send + Sync + 'static {
    fn now_us(&self) -> u64;
}

/// The machine's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock driven by tokio's time, which turmoil and paused-time tests control: a fixed epoch
/// plus the elapsed time of the runtime.
#[derive(Debug, Clone)]
pub struct TokioClock {
    epoch_us: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Must be created inside the runtime whose time it follows.
    pub fn new(epoch_us: u64) -> Self {
        Self {
            epoch_us,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_us(&self) -> u64 {
        self.epoch_us + self.start.elapsed().as_micros() as u64
    }
}

/// A seeded, shareable random source.
#[derive(Debug, Clone)]
pub struct SharedRng(Arc<Mutex<StdRng>>);

impl SharedRng {
    pub fn seeded(seed: u64) -> Self {
        Self(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }

    pub fn next_u64(&self) -> u64 {
        self.0.lock().expect("rng lock poisoned").next_u64()
    }

    /// A source of its own, seeded from a copy of this one's state mixed with `salt`, leaving
    /// this one where it was: a new user of randomness (the peer channel's nonces) gets values
    /// the seed decides without shifting what every other user of this source draws.
    pub fn fork(&self, salt: u64) -> SharedRng {
        let mut copy = self.0.lock().expect("rng lock poisoned").clone();
        SharedRng::seeded(copy.next_u64() ^ salt)
    }

    /// `N` bytes from this source.
    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut bytes = [0u8; N];
        self.0.lock().expect("rng lock poisoned").fill_bytes(&mut bytes);
        bytes
    }
}
