//! Length-prefixed frames (PROTO-FRAME-1): an i32 big-endian size, then that many bytes. The size
//! is checked against `max_frame_size` before a byte of the body is read or allocated.

use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
    let frame = read_admitted_frame(reader, max_frame_size, read_timeout, |_| async {}).await?;
    Ok(frame.map(|(body, ())| body))
}

/// Reads the next frame as [`read_frame`] does, but asks `admit` for the frame's declared size
/// after the size is checked and before the body is allocated or read (LIMIT-INFLIGHT-1). What
/// `admit` returns (a permit) comes back with the body, for the caller to hold while the
/// request is handled. `read_timeout` bounds the rest of the prefix, and then the body from the
/// moment it is admitted: the wait for admission is bounded by the read timeouts of the frames
/// that hold the room, not by this one's.
pub async fn read_admitted_frame<R, P, F, Fut>(
    reader: &mut R,
    max_frame_size: usize,
    read_timeout: Duration,
    admit: F,
) -> Result<Option<(Bytes, P)>, FrameError>
where
    R: AsyncRead + Unpin,
    F: FnOnce(usize) -> Fut,
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
        if size as usize > max_frame_size {
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
    let permit = admit(size).await;
    let body = async {
        let mut body = BytesMut::zeroed(size);
        reader.read_exact(&mut body).await?;
        Ok::<_, FrameError>(body.freeze())
    };
    let body = tokio::time::timeout(read_timeout, body)
        .await
        .map_err(|_| FrameError::ReadTimeout(read_timeout))??;
    Ok(Some((body, permit)))
}

/// Writes one frame: the size prefix then the body.
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, body: &[u8]) -> std::io::Result<()> {
    writer.write_all(&(body.len() as i32).to_be_bytes()).await?;
    writer.write_all(body).await?;
    writer.flush().await
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
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").await.unwrap();
        write_frame(&mut buf, b"x").await.unwrap();
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
