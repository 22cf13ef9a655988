//! A TCP relay on loopback that does nothing but copy bytes, both ways, on a thread of its own
//! named `relay`: the least work any process standing between a client and the Iggy server must
//! do (receive every byte of a poll's answer, send it on). The performance table puts the native
//! SDK behind it to bound what a gateway can reach on the machine (docs/performance-history.md, round 7).
//! Benches only.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};

/// Bytes each direction of a relayed connection copies per read: the gateway's own poll size
/// (1 MiB) would make no fewer system calls, since loopback hands over at most a socket buffer.
const RELAY_BUFFER_BYTES: usize = 256 * 1024;

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
    pub fn start(upstream: SocketAddr) -> std::io::Result<Self> {
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
                        tokio::spawn(relay_one(client, upstream));
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

async fn relay_one(mut client: TcpStream, upstream: SocketAddr) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut server, RELAY_BUFFER_BYTES, RELAY_BUFFER_BYTES)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes sent through the relay reach the upstream whole and in order, and its answer comes
    /// back the same way: more than one relay buffer each way, so the copy loops go round.
    #[tokio::test]
    async fn a_relayed_connection_carries_both_directions_unchanged() {
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
        let relay = Relay::start(upstream_address).unwrap();
        let mut client = TcpStream::connect(relay.address).await.unwrap();
        client.write_all(&sent).await.unwrap();
        let mut answered = vec![0u8; answer.len()];
        client.read_exact(&mut answered).await.unwrap();
        assert_eq!(server.await.unwrap(), sent, "what the upstream received");
        assert_eq!(answered, answer, "what the client got back");
    }
}
