//! A TCP relay on loopback that copies bytes, both ways, on a thread of its own named `relay`:
//! the least work any process standing between a client and the Iggy server must do (receive
//! every byte of a poll's answer, send it on). The performance table puts the native SDK behind
//! it to bound what a gateway can reach on the machine (docs/performance-history.md, round 7).
//! With [`RelayWork::FormatChecks`] it also does, to every byte a client sends, what the two wire
//! formats demand of any process that turns a Kafka Produce into an Iggy send: the floor of a
//! gateway's 1 KiB produce (docs/performance.md, "Targets"). Benches only.

use bytes::BytesMut;
use iggy_binary_protocol::requests::messages::{RawMessage, SendMessagesEncoder};
use iggy_binary_protocol::{WireIdentifier, WirePartitioning};
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes each direction of a relayed connection copies per read: the gateway's own poll size
/// (1 MiB) would make no fewer system calls, since loopback hands over at most a socket buffer.
const RELAY_BUFFER_BYTES: usize = 256 * 1024;

/// The message [`RelayWork::FormatChecks`] cuts a client's bytes into: the record size whose
/// produce floor it measures.
const CHECKED_MESSAGE_BYTES: usize = 1024;

/// What a relay does to the bytes a client sends, besides sending them on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayWork {
    /// Nothing: the kernel's copy in and copy out, with their wake-ups.
    CopyOnly,
    /// What the formats demand of a translator, on every byte the client sends: Kafka's CRC32C
    /// (a broker checks each batch's), and the pinned SDK's encoding of every 1 KiB as an Iggy
    /// message (its copy into the send frame and the xxHash3 the server verifies at admission).
    /// The frame is thrown away and the client's bytes are sent on as they came, so what lies
    /// behind the relay sees them unchanged.
    FormatChecks,
}

/// A running relay; its thread ends when this is dropped.
pub struct Relay {
    pub address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Relay {
    /// Listens on an OS-chosen loopback port and relays each connection to `upstream`, on a
    /// single-threaded runtime of its own, so its CPU time is told apart from the client's.
    pub fn start(upstream: SocketAddr, work: RelayWork) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
        let thread = std::thread::Builder::new().name("relay".to_string()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                let accepting = async {
                    while let Ok((client, _)) = listener.accept().await {
                        tokio::spawn(relay_one(client, upstream, work));
                    }
                };
                tokio::select! {
                    _ = accepting => {}
                    _ = stopped => {}
                }
            });
        })?;
        Ok(Self {
            address,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

async fn relay_one(mut client: TcpStream, upstream: SocketAddr, work: RelayWork) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    match work {
        RelayWork::CopyOnly => {
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut client,
                &mut server,
                RELAY_BUFFER_BYTES,
                RELAY_BUFFER_BYTES,
            )
            .await;
        }
        RelayWork::FormatChecks => {
            let (mut client_read, mut client_write) = client.split();
            let (mut server_read, mut server_write) = server.split();
            let up = async {
                let _ = forward_checked(&mut client_read, &mut server_write).await;
                let _ = server_write.shutdown().await;
            };
            let down = async {
                let mut reader = tokio::io::BufReader::with_capacity(RELAY_BUFFER_BYTES, &mut server_read);
                let _ = tokio::io::copy_buf(&mut reader, &mut client_write).await;
                let _ = client_write.shutdown().await;
            };
            tokio::join!(up, down);
        }
    }
}

/// Sends on what `from` reads, after [`RelayWork::FormatChecks`]'s work on each read.
async fn forward_checked(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let (stream, topic) = (WireIdentifier::numeric(1), WireIdentifier::numeric(1));
    let partitioning = WirePartitioning::PartitionId(0);
    // Reads of at most 256 KiB cost less here than of 1 MiB, a gateway's largest admission chunk
    // (0.68 against 0.86 µs a 1 KiB record, docs/performance-history.md, round 25), most likely
    // because the read, the checksum and the frame then stay within the core's cache.
    let mut read = vec![0u8; RELAY_BUFFER_BYTES];
    // One frame buffer reused, where the SDK allocates one a send: the least this work costs, with
    // no page ever faulted in twice.
    let mut frame = BytesMut::new();
    loop {
        let n = from.read(&mut read).await?;
        if n == 0 {
            return Ok(());
        }
        let bytes = &read[..n];
        std::hint::black_box(crc32c::crc32c(bytes));
        // A list of messages a send, as the SDK makes it.
        let messages: Vec<RawMessage<'_>> = bytes
            .chunks(CHECKED_MESSAGE_BYTES)
            .map(|payload| RawMessage {
                id: 1,
                origin_timestamp: 0,
                headers: None,
                payload,
            })
            .collect();
        let size = SendMessagesEncoder::encoded_size(&stream, &topic, &partitioning, &messages);
        frame.clear();
        frame.reserve(size);
        SendMessagesEncoder::encode(&mut frame, &stream, &topic, &partitioning, &messages)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        std::hint::black_box(&frame);
        to.write_all(bytes).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes sent through the relay reach the upstream whole and in order, and its answer comes
    /// back the same way, whatever work the relay does on them: more than one relay buffer each
    /// way, so the copy loops go round.
    #[tokio::test]
    async fn a_relayed_connection_carries_both_directions_unchanged() {
        for work in [RelayWork::CopyOnly, RelayWork::FormatChecks] {
            let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let upstream_address = upstream.local_addr().unwrap();
            let sent: Vec<u8> = (0..3 * RELAY_BUFFER_BYTES + 17).map(|i| (i % 251) as u8).collect();
            let answer: Vec<u8> = sent.iter().rev().copied().collect();
            let server = tokio::spawn({
                let (sent, answer) = (sent.clone(), answer.clone());
                async move {
                    let (mut socket, _) = upstream.accept().await.unwrap();
                    let mut received = vec![0u8; sent.len()];
                    socket.read_exact(&mut received).await.unwrap();
                    socket.write_all(&answer).await.unwrap();
                    received
                }
            });
            let relay = Relay::start(upstream_address, work).unwrap();
            let mut client = TcpStream::connect(relay.address).await.unwrap();
            client.write_all(&sent).await.unwrap();
            let mut answered = vec![0u8; answer.len()];
            client.read_exact(&mut answered).await.unwrap();
            assert_eq!(server.await.unwrap(), sent, "what the upstream received, {work:?}");
            assert_eq!(answered, answer, "what the client got back, {work:?}");
        }
    }
    /// A client that ends its side before the answer still gets it: the relay passes the end on
    /// to the upstream, which answers only once it has read everything, and then passes the
    /// upstream's end back, in both modes.
    #[tokio::test]
    async fn a_client_that_ends_its_side_first_still_gets_the_answer() {
        for work in [RelayWork::CopyOnly, RelayWork::FormatChecks] {
            let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let upstream_address = upstream.local_addr().unwrap();
            let sent: Vec<u8> = (0..RELAY_BUFFER_BYTES + 5).map(|i| (i % 241) as u8).collect();
            let server = tokio::spawn(async move {
                let (mut socket, _) = upstream.accept().await.unwrap();
                let mut received = Vec::new();
                socket.read_to_end(&mut received).await.unwrap();
                socket.write_all(&(received.len() as u64).to_be_bytes()).await.unwrap();
                received
            });
            let relay = Relay::start(upstream_address, work).unwrap();
            let mut client = TcpStream::connect(relay.address).await.unwrap();
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            let mut answered = Vec::new();
            client.read_to_end(&mut answered).await.unwrap();
            assert_eq!(server.await.unwrap(), sent, "what the upstream received, {work:?}");
            assert_eq!(answered, (sent.len() as u64).to_be_bytes(), "the answer, {work:?}");
        }
    }
}
