//! A Kafka-aware TCP proxy on loopback that loses chosen Produce answers: it relays request and
//! response frames both ways and, for the Produce requests whose ordinals (counted from 1 over
//! every connection, in the order the proxy reads them) it was told to lose, swallows the answer
//! and closes that connection, as a network that fails after the broker wrote would. The
//! producer then retries on a new connection what it never heard back about: what an idempotent
//! producer's guarantee is made for (DELIVERY-3).

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The Produce API key.
const PRODUCE: i16 = 0;
/// The largest frame relayed; a larger size prefix ends the connection (no Kafka client sends
/// one to a gateway whose frames are smaller).
const MAX_FRAME_BYTES: usize = 128 * 1024 * 1024;

/// A running proxy; it stops when dropped.
pub struct AnswerLossProxy {
    pub address: SocketAddr,
    lost: Arc<AtomicUsize>,
    produces: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for AnswerLossProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    upstream: SocketAddr,
    lose: BTreeSet<usize>,
    lost: Arc<AtomicUsize>,
    produces: Arc<AtomicUsize>,
}

impl AnswerLossProxy {
    /// Listens on an OS-chosen loopback port and relays each connection to `upstream`, losing
    /// the answers of the Produce requests numbered in `lose`.
    pub async fn start(upstream: SocketAddr, lose: BTreeSet<usize>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let lost = Arc::new(AtomicUsize::new(0));
        let produces = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            upstream,
            lose,
            lost: lost.clone(),
            produces: produces.clone(),
        });
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, shared.clone()));
            }
        });
        Ok(Self {
            address,
            lost,
            produces,
            task,
        })
    }

    /// Produce answers lost so far.
    pub fn answers_lost(&self) -> usize {
        self.lost.load(Ordering::SeqCst)
    }

    /// Produce requests relayed so far.
    pub fn produce_requests(&self) -> usize {
        self.produces.load(Ordering::SeqCst)
    }
}

/// One frame: its size prefix and body, or `None` at the end of the stream.
async fn read_frame(from: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let mut prefix = [0u8; 4];
    from.read_exact(&mut prefix).await.ok()?;
    let size = usize::try_from(i32::from_be_bytes(prefix)).ok()?;
    if size > MAX_FRAME_BYTES {
        return None;
    }
    let mut frame = vec![0u8; 4 + size];
    frame[..4].copy_from_slice(&prefix);
    from.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

async fn relay(client: TcpStream, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    // Correlation ids of this connection's requests whose answers are to be lost.
    let doomed: Mutex<HashSet<i32>> = Mutex::new(HashSet::new());
    let requests = async {
        while let Some(frame) = read_frame(&mut client_in).await {
            if frame.len() >= 12 {
                let key = i16::from_be_bytes([frame[4], frame[5]]);
                let correlation_id = i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
                if key == PRODUCE {
                    let ordinal = shared.produces.fetch_add(1, Ordering::SeqCst) + 1;
                    if shared.lose.contains(&ordinal) {
                        doomed.lock().expect("doomed lock").insert(correlation_id);
                    }
                }
            }
            if server_out.write_all(&frame).await.is_err() {
                return;
            }
        }
    };
    let answers = async {
        while let Some(frame) = read_frame(&mut server_in).await {
            if frame.len() >= 8 {
                let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                if doomed.lock().expect("doomed lock").remove(&correlation_id) {
                    shared.lost.fetch_add(1, Ordering::SeqCst);
                    // The answer is swallowed and the connection ends with it.
                    return;
                }
            }
            if write_to(&mut client_out, &frame).await.is_err() {
                return;
            }
        }
    };
    // Either direction ending ends the connection: both halves are dropped.
    tokio::select! {
        _ = requests => {}
        _ = answers => {}
    }
}

async fn write_to(to: &mut OwnedWriteHalf, frame: &[u8]) -> std::io::Result<()> {
    to.write_all(frame).await
}
