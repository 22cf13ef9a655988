//! Length-prefixed frames (PROTO-FRAME-1): an i32 big-endian size, then that many bytes. The size
//! is checked against `max_frame_size` before a byte of the body is read or allocated.

use bytes::{BufMut, Bytes, BytesMut};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds {} {max} ({})", .cap.setting, .cap.rule)]
    TooLarge { size: i64, max: usize, cap: FrameCap },
    #[error("frame size {0} is not positive")]
    NotPositive(i32),
    #[error("frame body not complete within {0:?}")]
    ReadTimeout(Duration),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The largest frame a connection may send now, and the setting and rule that say so: the
/// configured `max_frame_size` (LIMIT-FRAME-1), or, before SASL authentication, the lower
/// `max_unauthenticated_frame_bytes` (LIMIT-PREAUTH-FRAME-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameCap {
    pub max_bytes: usize,
    pub setting: &'static str,
    pub rule: &'static str,
}

impl FrameCap {
    /// `max_frame_size` (LIMIT-FRAME-1).
    pub fn max_frame_size(max_bytes: usize) -> FrameCap {
        FrameCap {
            max_bytes,
            setting: "max_frame_size",
            rule: "LIMIT-FRAME-1",
        }
    }
}

/// Reads the next frame. `Ok(None)` on a clean end of stream between frames. The caller bounds
/// the wait for the first byte (idle timeout); `read_timeout` bounds the rest of the frame.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_frame_size: usize,
    read_timeout: Duration,
) -> Result<Option<Bytes>, FrameError> {
    let cap = FrameCap::max_frame_size(max_frame_size);
    let admit = |_, _, _| async { Admitted::Chunk(()) };
    let frame = read_admitted_frame(reader, cap, read_timeout, MAX_ADMISSION_CHUNK, admit).await?;
    Ok(frame.map(|(body, _)| body))
}

/// The first chunk of a frame's body admitted and read (LIMIT-INFLIGHT-1): all a frame that
/// declares a large size and sends nothing holds.
pub const ADMISSION_CHUNK: usize = 64 * 1024;

/// The largest chunk admitted and read in one step (LIMIT-INFLIGHT-1), when the budget holds it.
pub const MAX_ADMISSION_CHUNK: usize = 1024 * 1024;

/// LIMIT-INFLIGHT-1: the next chunk of a frame of `size` bytes, `received` of them read: as many
/// bytes as the frame has delivered, at least [`ADMISSION_CHUNK`] and at most `most_bytes`, so a
/// frame holds room for at most one first chunk or twice what it sent, whichever is more. A read
/// ends at a chunk's end, and each read sends the client a window update that wakes it: at 64 KiB
/// that was 8 % of a 1 KiB produce's CPU (docs/performance-history.md, round 23).
fn next_admission_chunk(size: usize, received: usize, most_bytes: usize) -> usize {
    let grown = received.max(ADMISSION_CHUNK).min(most_bytes.max(1));
    (size - received).min(grown)
}

/// Each connection's read buffer, fixed at its start (PROTO-FRAME-2): a small request's size
/// prefix and body, and often the next request's, come in one socket read instead of three (the
/// prefix's first byte, the rest of it, the body). Reads this large or larger bypass it.
pub const READ_BUFFER_BYTES: usize = 4 * 1024;

/// What admission granted a frame (LIMIT-INFLIGHT-1), with the permit to hold while its request
/// is handled.
#[derive(Debug)]
pub enum Admitted<P> {
    /// Room for the chunk asked for.
    Chunk(P),
    /// Room for the rest of the frame, whatever its size: the budget's one overdraw, granted to a
    /// frame that already holds room and would otherwise wait for more while holding it.
    Rest(P),
}

/// Reads the next frame as [`read_frame`] does, but admits its body as it arrives, in chunks of
/// `next_admission_chunk` (at most `most_admitted_bytes`, which the budget must hold)
/// (LIMIT-INFLIGHT-1): `admit(frame size, bytes received, chunk)` is asked before each chunk is
/// allocated or read, until it grants the rest of the frame, and what it returns (a permit) comes
/// back with the body, for the caller to hold while the request is handled. So a frame holds
/// room for what it really sent, not for what it declared. `read_timeout` bounds the rest of the
/// prefix, and then the time spent reading the body; time spent waiting for admission is not
/// counted.
pub async fn read_admitted_frame<R, P, F, Fut>(
    reader: &mut R,
    cap: FrameCap,
    read_timeout: Duration,
    most_admitted_bytes: usize,
    mut admit: F,
) -> Result<Option<(Bytes, Vec<P>)>, FrameError>
where
    R: AsyncRead + Unpin,
    F: FnMut(usize, usize, usize) -> Fut,
    Fut: Future<Output = Admitted<P>>,
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
        // LIMIT-FRAME-1, LIMIT-PREAUTH-FRAME-1: refused on the prefix alone, before any of the
        // body is read, allocated or admitted to the in-flight budget.
        if size as usize > cap.max_bytes {
            crate::metrics::metrics().limit_hit(cap.rule);
            return Err(FrameError::TooLarge {
                size: i64::from(size),
                max: cap.max_bytes,
                cap,
            });
        }
        Ok(size as usize)
    };
    let size = tokio::time::timeout(read_timeout, size)
        .await
        .map_err(|_| FrameError::ReadTimeout(read_timeout))??;
    let mut body = BytesMut::with_capacity(size.min(ADMISSION_CHUNK));
    let mut permits = Vec::new();
    let mut reading_left = read_timeout;
    let mut rest_admitted = false;
    while body.len() < size {
        let start = body.len();
        let chunk = next_admission_chunk(size, start, most_admitted_bytes);
        if !rest_admitted {
            match admit(size, start, chunk).await {
                Admitted::Chunk(permit) => permits.push(permit),
                Admitted::Rest(permit) => {
                    permits.push(permit);
                    rest_admitted = true;
                }
            }
        }
        // Doubling, as `BytesMut` grows: above 2 MiB the capacity can run ahead of what was
        // admitted, but no byte past what was read is ever touched. Growing by exactly each
        // 1 MiB chunk would copy the body at every chunk, quadratic in the frame's size.
        body.reserve(chunk);
        let began = tokio::time::Instant::now();
        tokio::time::timeout(reading_left, read_into_spare(reader, &mut body, start + chunk))
            .await
            .map_err(|_| FrameError::ReadTimeout(read_timeout))??;
        reading_left = reading_left.saturating_sub(began.elapsed());
    }
    Ok(Some((body.freeze(), permits)))
}

/// Reads into `body`'s spare capacity until it holds `until` bytes, and not one byte past them.
/// Nothing is zeroed first: zeroing wrote every byte once more than the socket's copy does
/// (docs/performance-history.md, change 9).
async fn read_into_spare<R: AsyncRead + Unpin>(
    reader: &mut R,
    body: &mut BytesMut,
    until: usize,
) -> std::io::Result<()> {
    while body.len() < until {
        let missing = until - body.len();
        let mut window = (&mut *body).limit(missing);
        if reader.read_buf(&mut window).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
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

    /// A body of several admission chunks, written in uneven pieces, is read whole and exactly:
    /// reading into spare capacity must stop at the frame's end, leaving the next frame's bytes
    /// in the stream, and a body cut short is an error, not a shorter frame.
    #[tokio::test]
    async fn proto_frame_1_a_body_read_into_spare_capacity_stops_at_its_end() {
        let body: Vec<u8> = (0..3 * ADMISSION_CHUNK + 7).map(|i| (i % 251) as u8).collect();
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        wire.extend_from_slice(&1i32.to_be_bytes());
        wire.push(b'n');
        let (mut client, mut server) = tokio::io::duplex(1000);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in wire.chunks(4093) {
                client.write_all(piece).await.unwrap();
            }
            // Cut the third frame short: its prefix says 10 bytes, 3 follow.
            client.write_all(&10i32.to_be_bytes()).await.unwrap();
            client.write_all(b"abc").await.unwrap();
        });
        let mut admitted = Vec::new();
        let (first, _) = read_admitted_frame(
            &mut server,
            FrameCap::max_frame_size(1 << 20),
            Duration::from_secs(5),
            MAX_ADMISSION_CHUNK,
            |size, _, chunk| {
                admitted.push((size, chunk));
                async { Admitted::Chunk(()) }
            },
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(&first[..], &body[..]);
        let chunks: Vec<usize> = admitted.iter().map(|&(_, chunk)| chunk).collect();
        // The third chunk is as large as the two before it together, and takes the rest.
        assert_eq!(chunks, vec![ADMISSION_CHUNK, ADMISSION_CHUNK, ADMISSION_CHUNK + 7]);
        let second = read_frame(&mut server, 1 << 20, Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&second[..], b"n");
        writer.await.unwrap();
        let cut = read_frame(&mut server, 1 << 20, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(&cut, FrameError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof),
            "{cut}"
        );
    }

    /// LIMIT-INFLIGHT-1: once admission grants the rest of a frame (the overdraw), nothing more
    /// is asked of it, and the body is still read whole and exactly; the permits of every grant
    /// come back with it.
    #[tokio::test]
    async fn limit_inflight_1_a_frame_granted_its_rest_is_not_asked_again() {
        let body: Vec<u8> = (0..5 * ADMISSION_CHUNK + 3).map(|i| (i % 241) as u8).collect();
        let mut wire = (body.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&body);
        let mut asked = Vec::new();
        let (frame, permits) = read_admitted_frame(
            &mut &wire[..],
            FrameCap::max_frame_size(1 << 20),
            Duration::from_secs(5),
            MAX_ADMISSION_CHUNK,
            |_, received, chunk| {
                asked.push((received, chunk));
                let grant = if asked.len() == 2 {
                    Admitted::Rest(asked.len())
                } else {
                    Admitted::Chunk(asked.len())
                };
                async move { grant }
            },
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(&frame[..], &body[..]);
        assert_eq!(asked, vec![(0, ADMISSION_CHUNK), (ADMISSION_CHUNK, ADMISSION_CHUNK)]);
        assert_eq!(permits, vec![1, 2]);
    }

    /// LIMIT-INFLIGHT-1: each chunk is what the frame has already delivered, between one
    /// `ADMISSION_CHUNK` and the cap, so a frame never holds room for more than twice the bytes
    /// it sent (or one first chunk), and a budget smaller than the cap caps the chunks.
    #[test]
    fn limit_inflight_1_chunks_grow_with_what_the_frame_delivered_up_to_the_cap() {
        let chunks = |size: usize, most: usize| {
            let mut received = 0;
            let mut chunks = Vec::new();
            while received < size {
                let chunk = next_admission_chunk(size, received, most);
                assert!(chunk > 0, "no progress at {received} of {size}");
                assert!(
                    received + chunk <= (2 * received).max(ADMISSION_CHUNK),
                    "{chunk} admitted after {received} received"
                );
                assert!(chunk <= most.max(1));
                chunks.push(chunk);
                received += chunk;
            }
            chunks
        };
        const K: usize = 1024;
        assert_eq!(
            chunks(1_000_000, MAX_ADMISSION_CHUNK),
            vec![64 * K, 64 * K, 128 * K, 256 * K, 1_000_000 - 512 * K]
        );
        assert_eq!(
            chunks(3 * 1024 * K, MAX_ADMISSION_CHUNK),
            vec![64 * K, 64 * K, 128 * K, 256 * K, 512 * K, 1024 * K, 1024 * K]
        );
        assert_eq!(chunks(100, MAX_ADMISSION_CHUNK), vec![100]);
        assert_eq!(chunks(256 * K, 64 * K), vec![64 * K; 4]);
        assert_eq!(
            chunks(500 * K, 100 * K),
            vec![64 * K, 64 * K, 100 * K, 100 * K, 100 * K, 72 * K]
        );
    }
}
