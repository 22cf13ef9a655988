//! Target `frame_reader`: the connection's frame reader (PROTO-FRAME-1, LIMIT-FRAME-1) over a
//! hostile byte stream delivered in hostile chunk sizes.

use kafka_iggy_gateway::protocol::frame::{read_frame, FrameError};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};

/// Small, so the fuzzer reaches both sides of the limit with short inputs.
pub const MAX_FRAME_SIZE: usize = 64 * 1024;

/// A stream that hands out at most `chunk` bytes per read, as a slow socket does: the reader
/// must assemble a frame from any split of its bytes.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let n = self.chunk.min(self.data.len()).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

/// The first byte picks the chunk size (0 means unchunked), the rest is the stream. Frames are
/// read until a clean end or the first error, which closes a real connection.
pub fn frame_reader(data: &[u8]) {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = if chunk == 0 { usize::MAX } else { usize::from(chunk) };
    let mut reader = Chunked { data: stream, chunk };
    crate::runtime::paused().block_on(async {
        let mut consumed = 0;
        loop {
            match read_frame(&mut reader, MAX_FRAME_SIZE, Duration::from_secs(1)).await {
                Ok(Some(frame)) => {
                    assert!(
                        !frame.is_empty() && frame.len() <= MAX_FRAME_SIZE,
                        "frame of {}",
                        frame.len()
                    );
                    consumed += 4 + frame.len();
                    assert_eq!(
                        &stream[consumed - frame.len()..consumed],
                        &frame[..],
                        "a frame is the bytes after its prefix"
                    );
                }
                Ok(None) => {
                    assert_eq!(consumed, stream.len(), "a clean end only between frames");
                    return;
                }
                Err(FrameError::TooLarge { size, .. }) => {
                    assert!(size > MAX_FRAME_SIZE as i64);
                    return;
                }
                Err(_) => return,
            }
        }
    });
}
