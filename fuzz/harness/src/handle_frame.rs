//! Target `handle_frame`: a sequence of request frames answered end to end by one gateway on
//! the embedded backend, so state carries over (create a topic, produce, fetch, join, sync...).

use bytes::Bytes;
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::protocol::request::{peek_header, RequestError};
use kafka_iggy_gateway::reply::Reply;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Small, so the decompression budget (which equals it) is reachable from a short input.
pub const MAX_FRAME_SIZE: usize = 64 * 1024;
/// Simulated time one request may take before its connection is dropped. Long-polls and joins
/// legitimately wait as long as the client asks, so running out is not a failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// What an empty frame in the input stands for: this much simulated time with no request, so
/// sessions can lapse and the timer task can evict members.
const IDLE_STEP: Duration = Duration::from_secs(5);
/// A plausible wall clock (2023-11-14) for the embedded backend's timestamps.
const EPOCH_US: u64 = 1_700_000_000_000_000;

/// What one frame got.
#[derive(Debug)]
pub enum Outcome {
    Reply(Bytes),
    NoReply,
    /// The gateway closes the connection (malformed or unsupported request).
    Closed(RequestError),
    /// Still waiting after `REQUEST_TIMEOUT`; the client gives up and the request is dropped.
    TimedOut,
}

/// One gateway on the embedded backend with its group timer task, on paused time.
pub struct Session {
    runtime: Runtime,
    gateway: Arc<Gateway<EmbeddedBackend>>,
    stop: watch::Sender<bool>,
    timers: JoinHandle<()>,
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Session {
    /// A fresh gateway; the same seed every time, so member ids repeat and a seed input built
    /// from one session's answers (tests/seeds.rs) replays in the next.
    pub fn new() -> Self {
        let runtime = crate::runtime::paused();
        let config = Config::resolve(
            Args::default(),
            FileConfig {
                max_frame_size: Some(MAX_FRAME_SIZE),
                auto_create_topics: Some(true),
                ..FileConfig::default()
            },
        )
        .expect("valid config");
        let (gateway, stop, timers) = runtime.block_on(async {
            let gateway = kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(EPOCH_US)), 1);
            let (stop, stopped) = watch::channel(false);
            let timers = tokio::spawn({
                let gateway = gateway.clone();
                async move { gateway.groups.run_timers(stopped).await }
            });
            (gateway, stop, timers)
        });
        Self {
            runtime,
            gateway,
            stop,
            timers,
        }
    }

    /// Answers one request frame (without its size prefix).
    pub fn send(&self, frame: &[u8]) -> Outcome {
        let frame = Bytes::copy_from_slice(frame);
        let correlation_id = peek_header(&frame).ok().map(|(_, _, c)| c);
        // Timers are created inside the runtime: block_on enters it, a plain call would not.
        let answer = self
            .runtime
            .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, self.gateway.handle_frame(frame)).await });
        match answer {
            // A gateway without SASL answers SaslAuthenticate ILLEGAL_SASL_STATE and closes.
            Ok(Ok(Reply::Frame(frame) | Reply::FrameThenClose(frame))) => {
                let body = frame.to_bytes();
                // PROTO-HEADER-1: every response starts with the request's correlation id.
                let correlation_id = correlation_id.expect("a frame with a header");
                assert!(body.len() >= 4, "response of {} bytes", body.len());
                assert_eq!(body[..4], correlation_id.to_be_bytes(), "correlation id echoed");
                Outcome::Reply(body)
            }
            Ok(Ok(Reply::Nothing)) => Outcome::NoReply,
            Ok(Err(e)) => Outcome::Closed(e),
            Err(_) => Outcome::TimedOut,
        }
    }

    /// Lets simulated time pass with no request in flight.
    pub fn idle(&self, duration: Duration) {
        self.runtime.block_on(async { tokio::time::sleep(duration).await });
    }

    /// Shuts the group coordinator down as the server does; its timer task must end.
    pub fn finish(self) {
        let _ = self.stop.send(true);
        self.runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(3600), self.timers).await })
            .expect("the group timer task stops when told to")
            .expect("the group timer task does not panic");
    }
}

/// The input is a sequence of `u16` big-endian length + frame; the last frame takes whatever is
/// left. An empty frame stands for idle time (`IDLE_STEP`). Inside a frame, `RUN_ESCAPE` then a
/// `u16` count and a byte stand for that byte repeated (`expand_runs`).
pub fn handle_frame(data: &[u8]) {
    let session = Session::new();
    for frame in split_frames(data) {
        if frame.is_empty() {
            session.idle(IDLE_STEP);
        } else {
            session.send(&expand_runs(frame));
        }
    }
    session.finish();
}

/// Marks a run in a frame: `0xfe 0xfe`, a `u16` big-endian count, the byte to repeat.
pub const RUN_ESCAPE: [u8; 2] = [0xfe, 0xfe];

/// Expands the runs of a frame, up to `MAX_FRAME_SIZE` bytes (the server reads no larger frame).
/// Strings near the int16 length limit (32,767 bytes) are where size bugs live, and a fuzzer
/// cannot grow an input by 32 KB in one mutation; a 5-byte run it can.
pub fn expand_runs(frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len());
    let mut rest = frame;
    while !rest.is_empty() && out.len() < MAX_FRAME_SIZE {
        match rest {
            [0xfe, 0xfe, hi, lo, byte, tail @ ..] => {
                let count = usize::from(u16::from_be_bytes([*hi, *lo])).min(MAX_FRAME_SIZE - out.len());
                out.resize(out.len() + count, *byte);
                rest = tail;
            }
            [byte, tail @ ..] => {
                out.push(*byte);
                rest = tail;
            }
            [] => unreachable!("the loop stops on an empty rest"),
        }
    }
    out
}

/// Splits the input into frames; also how tests/seeds.rs's inputs are read back.
pub fn split_frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while data.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([data[0], data[1]])).min(data.len() - 2);
        frames.push(&data[2..2 + len]);
        data = &data[2 + len..];
    }
    frames
}

/// The inverse of `split_frames`, for seed inputs.
pub fn join_frames<'a>(frames: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        let len = u16::try_from(frame.len()).expect("a seed frame under 64 KiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(frame);
    }
    out
}
