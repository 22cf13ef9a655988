//! A TCP proxy in front of one Iggy node that can be made to stall (CLUSTER-FAILOVER-3, the
//! cluster tier): while it passes, it copies bytes both ways; once stalled, it keeps taking
//! connections and keeps forwarding what clients send, but answers nothing more on the
//! connections it already holds, and on a connection opened after the stall it passes the login
//! (the first answer, from another node given at the stall: a node that still takes logins) and
//! then holds every answer. That is the node of issue 50, row 7: it accepts logins and then
//! stalls calls.
//!
//! It reads the server's answers as frames of the pinned binary protocol (a 256-byte header
//! whose `size` field counts the whole frame, `iggy_binary_protocol::consensus`), so it stops
//! between two answers, never inside one. Each direction's memory is one frame at a time.

use iggy_binary_protocol::consensus::{read_size_field, HEADER_SIZE};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The largest answer frame passed on: the server's own bus frame cap is far below it; a larger
/// `size` means the stream is not what this proxy understands, and the connection is dropped.
const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    /// Stalled; connections opened from now on go to this node for their login.
    Stall {
        login_upstream: SocketAddr,
    },
}

/// A running proxy; it stops when dropped (the connections it holds close with it).
pub struct StallProxy {
    pub address: SocketAddr,
    mode: watch::Sender<Mode>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StallProxy {
    /// Listens on `listen` and forwards each connection to `upstream` until [`StallProxy::stall`].
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let (mode, watching) = watch::channel(Mode::Pass);
        let connections = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let connections = connections.clone();
            async move {
                let mut relays = tokio::task::JoinSet::new();
                while let Ok((client, _)) = listener.accept().await {
                    // The relays that ended, so the set holds the open ones only.
                    while relays.try_join_next().is_some() {}
                    connections.fetch_add(1, Ordering::SeqCst);
                    let opened_in = *watching.borrow();
                    relays.spawn(relay(client, upstream, opened_in, watching.clone()));
                }
            }
        });
        Ok(Self {
            address,
            mode,
            connections,
            task,
        })
    }

    /// From now on: no further answer on the connections held, and connections opened later
    /// have their login answered by `login_upstream`, then nothing.
    pub fn stall(&self, login_upstream: SocketAddr) {
        self.mode.send_replace(Mode::Stall { login_upstream });
    }

    /// Connections taken so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, opened_in: Mode, mode: watch::Receiver<Mode>) {
    let target = match opened_in {
        Mode::Pass => upstream,
        Mode::Stall { login_upstream } => login_upstream,
    };
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Requests always go on: the node may apply them; only their answers are held.
    let requests = copy(client_read, server_write);
    let answers = answers(server_read, client_write, opened_in, mode);
    tokio::join!(requests, answers);
}

async fn copy(mut from: OwnedReadHalf, mut to: OwnedWriteHalf) {
    let _ = tokio::io::copy(&mut from, &mut to).await;
    let _ = to.shutdown().await;
}

/// Passes the server's answers frame by frame while the proxy passes; a connection opened
/// stalled passes its first answer (the login) only. A held connection stays open, unanswered.
async fn answers(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, opened_in: Mode, mode: watch::Receiver<Mode>) {
    let mut passed = 0usize;
    let mut header = [0u8; HEADER_SIZE];
    loop {
        if from.read_exact(&mut header).await.is_err() {
            break;
        }
        let size = read_size_field(&header).map_or(0, |s| s as usize);
        if !(HEADER_SIZE..=MAX_FRAME_BYTES).contains(&size) {
            break;
        }
        let mut frame = vec![0u8; size];
        frame[..HEADER_SIZE].copy_from_slice(&header);
        if from.read_exact(&mut frame[HEADER_SIZE..]).await.is_err() {
            break;
        }
        let pass = match opened_in {
            Mode::Pass => *mode.borrow() == Mode::Pass,
            Mode::Stall { .. } => passed == 0,
        };
        if !pass {
            // Held: the client waits for an answer that never comes, on a connection that
            // stays open as long as the proxy runs.
            std::future::pending::<()>().await;
        }
        if to.write_all(&frame).await.is_err() {
            break;
        }
        passed += 1;
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One answer frame of `body_len` bytes: a header whose `size` counts the whole frame.
    fn frame(tag: u8, body_len: usize) -> Vec<u8> {
        let mut frame = vec![tag; HEADER_SIZE + body_len];
        let size_at = std::mem::offset_of!(iggy_binary_protocol::consensus::GenericHeader, size);
        frame[size_at..size_at + 4].copy_from_slice(&((HEADER_SIZE + body_len) as u32).to_le_bytes());
        frame
    }

    /// An upstream that answers every byte it reads with one frame tagged by `tag`.
    async fn upstream(tag: u8) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut byte = [0u8; 1];
                    while socket.read_exact(&mut byte).await.is_ok() {
                        if socket.write_all(&frame(tag, 3)).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        address
    }

    /// The first frame's tag, or `None` when nothing came back within a bound far longer than
    /// a loopback round trip.
    async fn ask(client: &mut TcpStream) -> Option<u8> {
        client.write_all(b"?").await.unwrap();
        let mut answer = vec![0u8; HEADER_SIZE + 3];
        match tokio::time::timeout(std::time::Duration::from_secs(1), client.read_exact(&mut answer)).await {
            Ok(Ok(_)) => Some(answer[0]),
            _ => None,
        }
    }

    /// Passing, it answers; stalled, a held connection is answered no more, and a new one has
    /// its first request (the login) answered by the login node and no other.
    #[tokio::test]
    async fn a_stalled_proxy_passes_a_new_connections_login_and_then_nothing() {
        let (node, login_node) = (upstream(b'n').await, upstream(b'l').await);
        let proxy = StallProxy::start("127.0.0.1:0".parse().unwrap(), node).await.unwrap();
        let mut held = TcpStream::connect(proxy.address).await.unwrap();
        assert_eq!(ask(&mut held).await, Some(b'n'));
        proxy.stall(login_node);
        assert_eq!(ask(&mut held).await, None, "held connections get no answer");
        let mut late = TcpStream::connect(proxy.address).await.unwrap();
        assert_eq!(ask(&mut late).await, Some(b'l'), "the login passes");
        assert_eq!(ask(&mut late).await, None, "then nothing");
        assert_eq!(proxy.connections(), 2);
    }
}
