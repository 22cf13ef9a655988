//! The accept loop and the per-connection request loop, generic over the listener and stream
//! types so the same code runs over tokio sockets and turmoil's simulated ones.
//!
//! A connection answers its requests one at a time, in order (PROTO-ORDER-1), as a Kafka broker
//! does; clients pipeline across connections. Shutdown stops accepting, lets every connection
//! finish the request it is in, then closes (PROTO-SHUTDOWN-1).

use crate::backend::Backend;
use crate::gateway::{Gateway, Reply};
use crate::protocol::frame::{read_frame, write_frame, FrameError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A source of connections.
pub trait Listener: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = std::io::Result<(Self::Stream, SocketAddr)>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<(Self::Stream, SocketAddr)> {
        let (stream, peer) = tokio::net::TcpListener::accept(self).await?;
        stream.set_nodelay(true)?;
        Ok((stream, peer))
    }
}

/// Tells a running server to shut down.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Sender<bool>);

impl Default for Shutdown {
    fn default() -> Self {
        Self(watch::Sender::new(false))
    }
}

impl Shutdown {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Serves connections from `listener` until `shutdown` triggers, then waits for every
/// connection to finish its current request.
pub async fn serve<B: Backend, L: Listener>(mut listener: L, gateway: Arc<Gateway<B>>, shutdown: Shutdown) {
    let mut stop = shutdown.subscribe();
    let timers = tokio::spawn({
        let gateway = gateway.clone();
        let stop = shutdown.subscribe();
        async move { gateway.groups.run_timers(stop).await }
    });
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            // Branches in written order, not tokio's own random order: a simulation seed must
            // decide every choice the server makes (PROTO-DETERMINISM-1).
            biased;
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tracing::debug!(%peer, "connection accepted");
                    connections.spawn(connection(stream, peer, gateway.clone(), shutdown.subscribe()));
                }
                Err(e) => tracing::warn!("accept failed: {e}"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    let _ = timers.await;
    // The offsets client's connection ends with the server: Iggy drops its memberships.
    gateway.backend.release_client(gateway.offsets_client);
}

async fn connection<B: Backend, S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    peer: SocketAddr,
    gateway: Arc<Gateway<B>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = gateway.config.clone();
    loop {
        let frame = tokio::select! {
            // Branches in written order, not tokio's own random order: a simulation seed must
            // decide every choice the server makes (PROTO-DETERMINISM-1).
            biased;
            _ = stopped(&mut stop) => break,
            read = tokio::time::timeout(config.idle_timeout, read_frame(&mut stream, config.max_frame_size, config.read_timeout)) => match read {
                Err(_) => {
                    tracing::debug!(%peer, "closing idle connection after {:?}", config.idle_timeout);
                    break;
                }
                Ok(Ok(Some(frame))) => frame,
                Ok(Ok(None)) => break,
                Ok(Err(FrameError::Io(e))) => {
                    tracing::debug!(%peer, "connection read failed: {e}");
                    break;
                }
                Ok(Err(e)) => {
                    // PROTO-FRAME-1, PROTO-TIMEOUT-1
                    tracing::error!(%peer, "closing connection: {e}");
                    break;
                }
            },
        };
        match gateway.handle_frame(frame).await {
            Ok(Reply::Frame(body)) => {
                match tokio::time::timeout(config.write_timeout, write_frame(&mut stream, &body)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, "connection write failed: {e}");
                        break;
                    }
                    Err(_) => {
                        tracing::error!(%peer, "closing connection: response not written within {:?}", config.write_timeout);
                        break;
                    }
                }
            }
            Ok(Reply::Nothing) => {}
            Err(e) => {
                // PROTO-VERSION-2, PROTO-MALFORMED-1
                tracing::error!(%peer, "closing connection: {e}");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioClock;
    use crate::config::{Args, Config, FileConfig};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::mpsc;

    /// Connections handed over in memory: the same server code, no sockets.
    struct ChannelListener(mpsc::Receiver<DuplexStream>);

    impl Listener for ChannelListener {
        type Stream = DuplexStream;
        async fn accept(&mut self) -> std::io::Result<(DuplexStream, SocketAddr)> {
            match self.0.recv().await {
                Some(stream) => Ok((stream, "127.0.0.1:1".parse().expect("valid"))),
                None => std::future::pending().await,
            }
        }
    }

    fn start(idle_ms: u64, read_ms: u64) -> (mpsc::Sender<DuplexStream>, Shutdown, tokio::task::JoinHandle<()>) {
        start_with(FileConfig {
            idle_timeout_ms: Some(idle_ms),
            read_timeout_ms: Some(read_ms),
            ..FileConfig::default()
        })
    }

    fn start_with(file: FileConfig) -> (mpsc::Sender<DuplexStream>, Shutdown, tokio::task::JoinHandle<()>) {
        let config = Config::resolve(Args::default(), file).expect("valid config");
        let gateway = crate::embedded_gateway(config, Arc::new(TokioClock::new(0)), 1);
        let (tx, rx) = mpsc::channel(4);
        let shutdown = Shutdown::default();
        let task = tokio::spawn(serve(ChannelListener(rx), gateway, shutdown.clone()));
        (tx, shutdown, task)
    }

    async fn connect(tx: &mpsc::Sender<DuplexStream>) -> DuplexStream {
        connect_buffered(tx, 64 * 1024).await
    }

    /// A connection whose in-flight bytes, each way, are capped at `buffer_size`.
    async fn connect_buffered(tx: &mpsc::Sender<DuplexStream>, buffer_size: usize) -> DuplexStream {
        let (client, server) = tokio::io::duplex(buffer_size);
        tx.send(server).await.expect("server accepts");
        client
    }

    /// An ApiVersions v0 request frame (header v1, no client id): its answer lists every API,
    /// far more than the 16 bytes the write-timeout test lets through.
    fn api_versions_v0_frame() -> Vec<u8> {
        let mut frame = 10i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&18i16.to_be_bytes()); // api key
        frame.extend_from_slice(&0i16.to_be_bytes()); // api version
        frame.extend_from_slice(&7i32.to_be_bytes()); // correlation id
        frame.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        frame
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_a_response_the_client_does_not_read_is_abandoned_at_the_write_timeout() {
        let (tx, shutdown, task) = start_with(FileConfig {
            idle_timeout_ms: Some(600_000),
            read_timeout_ms: Some(600_000),
            write_timeout_ms: Some(3_000),
            ..FileConfig::default()
        });
        let mut client = connect_buffered(&tx, 16).await;
        client.write_all(&api_versions_v0_frame()).await.unwrap();
        let started = tokio::time::Instant::now();
        // The client never reads, so the server's write stalls once 16 bytes are in flight.
        // Bytes the client keeps sending fill its own 16-byte direction; the write only fails
        // when the server gives the connection up and drops its end.
        let stalled = tokio::time::timeout(Duration::from_secs(3_600), client.write_all(&[0u8; 64]))
            .await
            .expect("the server still holds the stalled connection after an hour");
        assert!(
            stalled.is_err(),
            "the server read the client's bytes while its response stalled"
        );
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(3_000) && waited < Duration::from_millis(600_000),
            "the server gave up after {waited:?}, not at the 3 s write timeout"
        );
        // What did get through is a truncated response: fewer bytes than its length prefix.
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.unwrap();
        assert!(received.len() >= 4 && received.len() <= 16, "{} bytes", received.len());
        let declared = i32::from_be_bytes(received[..4].try_into().unwrap()) as usize;
        assert!(
            declared > received.len() - 4,
            "the whole response fit: {declared} bytes"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_idle_connection_is_closed_after_the_idle_timeout() {
        let (tx, shutdown, task) = start(5_000, 30_000);
        let mut client = connect(&tx).await;
        let started = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        // Paused time advances to the server's idle deadline; the read then sees the close.
        assert_eq!(client.read(&mut byte).await.unwrap(), 0);
        assert!(
            started.elapsed() >= Duration::from_millis(5_000),
            "closed before the idle timeout"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_timeout_1_a_started_frame_must_complete_within_the_read_timeout() {
        let (tx, shutdown, task) = start(600_000, 2_000);
        let mut client = connect(&tx).await;
        // Half a length prefix, then nothing: the read timeout, not the idle one, closes it.
        client.write_all(&[0, 0]).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(2_000) && waited < Duration::from_millis(600_000),
            "{waited:?}"
        );
        shutdown.trigger();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn proto_shutdown_1_shutdown_closes_idle_connections_and_ends_serve() {
        let (tx, shutdown, task) = start(600_000, 30_000);
        let mut client = connect(&tx).await;
        tokio::task::yield_now().await;
        shutdown.trigger();
        task.await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 0, "the connection is closed");
    }
}
