//! Length-prefixed frames (PROTO-FRAME-1): an i32 big-endian size, then that many bytes. The size
//! is checked against `max_frame_size` before a byte of the body is read or allocated.

use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds max_frame_size {max}")]
    TooLarge { size: i64, max: usize },
    #[error("frame size {0} is not positive")]
    NotPositive(i32),
    #[error("frame body not complete within {0:?}")]
    ReadTimeout(Duration),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads the next frame. `Ok(None)` on a clean end of stream between frames. The caller bounds
/// the wait for the first byte (idle timeout); `read_timeout` bounds the rest of the frame.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_frame_size: usize,
    read_timeout: Duration,
) -> Result<Option<Bytes>, FrameError> {
    let frame = read_admitted_frame(reader, max_frame_size, read_timeout, |_, _| async {}).await?;
    Ok(frame.map(|(body, _)| body))
}

/// The most body bytes read, and admitted, in one step (LIMIT-INFLIGHT-1).
pub const ADMISSION_CHUNK: usize = 64 * 1024;

/// Reads the next frame as [`read_frame`] does, but admits its body as it arrives, at most
/// [`ADMISSION_CHUNK`] bytes at a time (LIMIT-INFLIGHT-1): `admit(frame size, chunk)` is asked
/// before each chunk is allocated or read, and what it returns (a permit) comes back with the
/// body, for the caller to hold while the request is handled. So a frame holds room for the
/// bytes it really sent, not for what it declared. `read_timeout` bounds the rest of the prefix,
/// and then the time spent reading the body; time spent waiting for admission is not counted,
/// since it is bounded by the frames that hold the room.
pub async fn read_admitted_frame<R, P, F, Fut>(
    reader: &mut R,
    max_frame_size: usize,
    read_timeout: Duration,
    mut admit: F,
) -> Result<Option<(Bytes, Vec<P>)>, FrameError>
where
    R: AsyncRead + Unpin,
    F: FnMut(usize, usize) -> Fut,
    Fut: Future<Output = P>,
{
    let mut size = [0u8; 4];
    if reader.read(&mut size[..1]).await? == 0 {
        return Ok(None);
    }
    let size = async {
        reader.read_exact(&mut size[1..]).await?;
        let size = i32::from_be_bytes(size);
        if size <= 0 {
            return Err(FrameError::NotPositive(size));
        }
        // LIMIT-FRAME-1: refused on the prefix alone, before any of the body is read or allocated.
        if size as usize > max_frame_size {
            crate::metrics::metrics().limit_hit("LIMIT-FRAME-1");
            return Err(FrameError::TooLarge {
                size: i64::from(size),
                max: max_frame_size,
            });
        }
        Ok(size as usize)
    };
    let size = tokio::time::timeout(read_timeout, size)
        .await
        .map_err(|_| FrameError::ReadTimeout(read_timeout))??;
    let mut body = BytesMut::with_capacity(size.min(ADMISSION_CHUNK));
    let mut permits = Vec::with_capacity(size.div_ceil(ADMISSION_CHUNK));
    let mut reading_left = read_timeout;
    while body.len() < size {
        let start = body.len();
        let chunk = (size - start).min(ADMISSION_CHUNK);
        permits.push(admit(size, chunk).await);
        body.resize(start + chunk, 0);
        let began = tokio::time::Instant::now();
        tokio::time::timeout(reading_left, reader.read_exact(&mut body[start..]))
            .await
            .map_err(|_| FrameError::ReadTimeout(read_timeout))??;
        reading_left = reading_left.saturating_sub(began.elapsed());
    }
    Ok(Some((body.freeze(), permits)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn proto_frame_1_oversized_frame_refused_from_its_prefix() {
        // Only the prefix exists: a reader that trusted it would wait for 9 MiB forever.
        let input = (9 * 1024 * 1024i32).to_be_bytes();
        let err = read_frame(&mut &input[..], 8 * 1024 * 1024, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    #[tokio::test]
    async fn proto_frame_1_non_positive_sizes_are_refused() {
        for size in [0i32, -1] {
            let input = size.to_be_bytes();
            let err = read_frame(&mut &input[..], 1024, Duration::from_secs(1))
                .await
                .unwrap_err();
            assert!(matches!(err, FrameError::NotPositive(_)));
        }
    }

    #[tokio::test]
    async fn frames_round_trip_and_end_cleanly() {
        use crate::protocol::response_frame::{write_response, ResponseFrame};
        let mut buf = Vec::new();
        write_response(&mut buf, &ResponseFrame::from(Bytes::from_static(b"hello")))
            .await
            .unwrap();
        write_response(&mut buf, &ResponseFrame::from(Bytes::from_static(b"x")))
            .await
            .unwrap();
        let mut r = &buf[..];
        assert_eq!(
            &read_frame(&mut r, 1024, Duration::from_secs(1)).await.unwrap().unwrap()[..],
            b"hello"
        );
        assert_eq!(
            &read_frame(&mut r, 1024, Duration::from_secs(1)).await.unwrap().unwrap()[..],
            b"x"
        );
        assert!(read_frame(&mut r, 1024, Duration::from_secs(1))
            .await
            .unwrap()
            .is_none());
    }
}
