//! A TCP proxy on loopback that delays every byte by a fixed time in each direction, so a bench
//! can put the Iggy server a network hop away (`--iggy-delay-ms`) on a machine where the kernel
//! offers no `netem`. Order is kept; each chunk read is written once its delay has passed (tokio's
//! timer counts whole milliseconds, so the delay is too). Benches only: it copies every byte once
//! more in user space, which every row behind it pays alike.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Chunks in flight per direction at most; a reader past it waits (the proxy's memory bound).
const MAX_CHUNKS_IN_FLIGHT: usize = 1_024;
const CHUNK_BYTES: usize = 64 * 1024;

/// A running proxy; it stops when dropped.
pub struct DelayProxy {
    pub address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl DelayProxy {
    /// Listens on an OS-chosen loopback port and forwards each connection to `upstream`, with
    /// `one_way` added to every chunk in each direction.
    pub async fn start(upstream: SocketAddr, one_way: Duration) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        forward(client_read, server_write, one_way),
                        forward(server_read, client_write, one_way)
                    );
                });
            }
        });
        Ok(Self { address, task })
    }
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn forward(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(MAX_CHUNKS_IN_FLIGHT);
    let reader = async move {
        loop {
            let mut chunk = vec![0u8; CHUNK_BYTES];
            match from.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    chunk.truncate(n);
                    if tx.send((Instant::now() + delay, chunk)).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
