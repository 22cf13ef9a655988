//! What the cluster tier's fault cases share: a cluster with a gateway on it, an idempotent
//! producer stream that records every acknowledgement, a reader and an audit of what was stored,
//! the gateway's `/readyz`, and gateway processes to SIGKILL. Every wait ends on a condition and
//! fails after a bound.

use super::{cluster_backend, FAILOVER_WAIT};
use crate::cases::group_cases::support::{close, Client, WAIT};
use crate::endpoint::{LocalGateway, LocalOptions};
use crate::iggy_cluster::IggyCluster;
use anyhow::{anyhow, bail, ensure, Context as _};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A cluster and one gateway on it.
pub struct World {
    pub gateway: LocalGateway<IggyBackend>,
    pub cluster: IggyCluster,
}

impl World {
    pub async fn start(binary: &Path) -> anyhow::Result<Self> {
        Self::on(IggyCluster::start(binary).await?).await
    }

    /// A cluster with a proxy in front of its primary ([`IggyCluster::start_fronted`]), and a
    /// gateway whose roster names the primary at the proxy.
    pub async fn start_fronted(binary: &Path) -> anyhow::Result<Self> {
        Self::on(IggyCluster::start_fronted(binary).await?).await
    }

    async fn on(cluster: IggyCluster) -> anyhow::Result<Self> {
        let backend = Arc::new(cluster_backend(&cluster).await?);
        let gateway = LocalGateway::serve(backend, LocalOptions::default()).await?;
        Ok(World { gateway, cluster })
    }

    pub fn bootstrap(&self) -> String {
        self.gateway.endpoint.bootstrap.clone()
    }

    /// SIGKILLs the current leader; returns its id and the instant of the kill.
    pub async fn kill_leader(&self) -> anyhow::Result<(u32, Instant)> {
        let leader = self.cluster.leader(WAIT).await?;
        let at = Instant::now();
        self.cluster.kill(leader)?;
        Ok((leader, at))
    }

    /// Serves the gateway's ops HTTP (`/readyz`, as `--metrics-listen` does in the gateway
    /// process) on a free loopback port.
    pub async fn ops(&self) -> anyhow::Result<Ops> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(kafka_iggy_gateway::ops_http::serve_ops(
            listener,
            Arc::new(kafka_iggy_gateway::ops_http::GatewayOps {
                gateway: self.gateway.gateway.clone(),
                shutdown: kafka_iggy_gateway::server::Shutdown::default(),
            }),
        ));
        Ok(Ops { addr, task })
    }

    /// Stops the gateway, then the cluster.
    pub async fn stop(self) {
        self.gateway.stop().await;
        drop(self.cluster);
    }
}

/// The gateway's ops HTTP listener, stopped on drop.
pub struct Ops {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Ops {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Ops {
    /// `/readyz`'s status code and body.
    pub async fn readyz(&self) -> anyhow::Result<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = String::new();
        tokio::time::timeout(WAIT, stream.read_to_string(&mut response))
            .await
            .context("/readyz did not answer")??;
        let status: u16 = response
            .get(9..12)
            .unwrap_or_default()
            .parse()
            .with_context(|| format!("/readyz answered {response:?}"))?;
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().trim().to_string();
        Ok((status, body))
    }

    /// Asks `/readyz` until it answers `want`, for at most `within`; returns the body and how
    /// long it took. Between two questions, the gateway's readiness cache lapses (it caches a
    /// probe's answer for `READY_CACHE`), which is no synchronisation: the wait ends on the answer.
    pub async fn wait_readyz(&self, want: u16, within: Duration) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let mut seen = Vec::new();
        loop {
            let (status, body) = self.readyz().await?;
            if status == want {
                return Ok((body, started.elapsed()));
            }
            seen.push(status);
            ensure!(
                started.elapsed() < within,
                "/readyz did not answer {want} within {within:?}: it answered {seen:?}, last {body:?}"
            );
            tokio::time::sleep(kafka_iggy_gateway::ops_http::READY_CACHE).await;
        }
    }
}

/// How long a producer stream waits after a failed send before the next record.
const SEND_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What a producer stream got back for one record.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub seq: u64,
    pub offset: i64,
    /// When the record was handed to the producer.
    pub sent: Instant,
    /// When its acknowledgement came back.
    pub at: Instant,
}

/// A librdkafka producer (acks=all, idempotence on) sending records `0, 1, 2, …` to partition 0
/// of a topic, one at a time, until stopped or until librdkafka raises a fatal error; the payload
/// of record `n` is `n` (from `first`, so that two streams in turn on one topic send distinct
/// records). Dropped without [`ProducerStream::stop`] (a case that failed early), it stops too.
pub struct ProducerStream {
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
    acked: watch::Receiver<usize>,
    fatal: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<anyhow::Result<(u64, Vec<String>)>>,
}

impl Drop for ProducerStream {
    fn drop(&mut self) {
        // A stream left running would send on, for the rest of the tier, to a gateway whose
        // cluster is gone (a leaked stream whose producer had a fatal error once filled the
        // tier's memory with its failures, 18 GB in three minutes).
        self.stop.store(true, Ordering::Release);
    }
}

impl ProducerStream {
    pub fn start(bootstrap: &str, topic: &str) -> anyhow::Result<Self> {
        Self::start_from(bootstrap, topic, 0)
    }

    /// A stream whose first record is `first`.
    pub fn start_from(bootstrap: &str, topic: &str, first: u64) -> anyhow::Result<Self> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("client.id", "kafka-iggy-conformance-cluster")
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "0")
            .set("message.timeout.ms", FAILOVER_WAIT.as_millis().to_string())
            .create()
            .context("creating the producer")?;
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let fatal = Arc::new(Mutex::new(None));
        let (count, acked) = watch::channel(0usize);
        let task = tokio::spawn({
            let (stop, acks, fatal, topic) = (stop.clone(), acks.clone(), fatal.clone(), topic.to_string());
            async move {
                let mut seq = first;
                let mut failures = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    let payload = seq.to_string();
                    let sent_at = Instant::now();
                    let sent = producer
                        .send(
                            FutureRecord::<(), _>::to(&topic)
                                .partition(0)
                                .payload(payload.as_bytes()),
                            FAILOVER_WAIT,
                        )
                        .await;
                    match sent {
                        Ok(delivery) => {
                            let mut acks = acks.lock().unwrap_or_else(|e| e.into_inner());
                            acks.push(Ack {
                                seq,
                                offset: delivery.offset,
                                sent: sent_at,
                                at: Instant::now(),
                            });
                            count.send_replace(acks.len());
                        }
                        Err((e, _)) => {
                            failures.push(format!("record {seq}: {e}"));
                            // After a fatal error every send fails at once: the stream is over.
                            if let Some((code, why)) = producer.client().fatal_error() {
                                *fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{code:?}: {why}"));
                                seq += 1;
                                break;
                            }
                            // A send refused at once must not spin: an application retries after
                            // a pause, and the failures stay few enough to keep.
                            tokio::time::sleep(SEND_RETRY_PAUSE).await;
                        }
                    }
                    seq += 1;
                }
                close(producer).await;
                Ok((seq - first, failures))
            }
        });
        Ok(ProducerStream {
            stop,
            acks,
            acked,
            fatal,
            task,
        })
    }

    /// Waits until `n` records are acknowledged after `since` (all of them when `None`).
    pub async fn wait_acked_after(&mut self, since: Option<Instant>, n: usize, within: Duration) -> anyhow::Result<()> {
        let acks = self.acks.clone();
        let counted = move || {
            let acks = acks.lock().unwrap_or_else(|e| e.into_inner());
            acks.iter().filter(|a| since.is_none_or(|s| a.at > s)).count()
        };
        let waited = tokio::time::timeout(within, self.acked.wait_for(|_| counted() >= n))
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => bail!(
                "the producer stream ended before {n} acknowledgements ({})",
                self.fatal().unwrap_or_else(|| "no fatal error".into())
            ),
            Err(_) => bail!(
                "{} of {n} records acknowledged within {within:?}",
                (self.counted_after(since))
            ),
        }
    }

    fn counted_after(&self, since: Option<Instant>) -> usize {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.iter().filter(|a| since.is_none_or(|s| a.at > s)).count()
    }

    /// The time from `at` (a fault) to the next acknowledged record, taken as the acknowledgement
    /// of the first record sent after `at`: the record in flight at `at` may have been answered
    /// just before it (its acknowledgement then arrives a moment after `at` and shows nothing),
    /// and when it instead waited out the failover, the next record is acknowledged one round trip
    /// after it.
    pub fn first_ack_after(&self, at: Instant) -> Option<Duration> {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.iter().find(|a| a.sent > at).map(|a| a.at - at)
    }

    /// The longest pause between two acknowledgements, the later one after `at`: the outage the
    /// producer saw around a fault at `at`, however the record in flight fared.
    pub fn longest_pause_after(&self, at: Instant) -> Option<Duration> {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.windows(2)
            .filter(|w| w[1].at > at)
            .map(|w| w[1].at - w[0].at)
            .max()
    }

    /// The median time from handing a record to the producer to its acknowledgement, over the
    /// records acknowledged before `at`: the round trip when nothing fails.
    pub fn median_round_trip_before(&self, at: Instant) -> Option<Duration> {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        let mut trips: Vec<Duration> = acks.iter().filter(|a| a.at <= at).map(|a| a.at - a.sent).collect();
        trips.sort();
        trips.get(trips.len() / 2).copied()
    }

    /// How many records have been acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.counted_after(None)
    }

    /// The fatal error librdkafka raised, which ended the stream, if it did.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops the stream; returns the acknowledgements, the records sent and the failed sends.
    pub async fn stop(mut self) -> anyhow::Result<(Vec<Ack>, u64, Vec<String>)> {
        self.stop.store(true, Ordering::Release);
        let (sent, failures) = (&mut self.task).await.context("the producer stream")??;
        let acks = std::mem::take(&mut *self.acks.lock().unwrap_or_else(|e| e.into_inner()));
        Ok((acks, sent, failures))
    }
}

/// Every record of partition 0 of `topic` from the beginning to its high watermark, as (offset,
/// payload), read by an assigned consumer through the gateway.
pub async fn read_all(bootstrap: &str, topic: &str) -> anyhow::Result<Vec<(i64, String)>> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", format!("{topic}-reader"))
            .set("enable.auto.commit", "false")
            .set("check.crcs", "true")
            .create()
            .context("creating the reader")?;
        let (_, high) = consumer
            .fetch_watermarks(&topic, 0, WAIT)
            .with_context(|| format!("the watermarks of {topic}-0"))?;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&topic, 0, Offset::Beginning)?;
        consumer.assign(&list)?;
        let deadline = std::time::Instant::now() + WAIT;
        let mut read = Vec::new();
        while read.last().map(|(o, _)| *o + 1).unwrap_or(0) < high {
            if std::time::Instant::now() >= deadline {
                bail!(
                    "read {} records of {topic}-0 up to its high watermark {high} within {WAIT:?}",
                    read.len()
                );
            }
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => read.push((
                    m.offset(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                )),
                Some(Err(e)) => tracing::debug!("reading {topic}-0: {e}"),
                None => {}
            }
        }
        Ok(read)
    })
    .await
    .context("the reader")?
}

/// Figures of one fault: printed (but lost must be 0, every acknowledged offset must hold its
/// record, and the idempotent producer's records must each be stored once).
pub struct Figures {
    pub acknowledged: usize,
    pub lost: Vec<u64>,
    pub duplicated: usize,
    /// Acknowledged records whose acknowledged offset holds another record: (record, offset,
    /// what the offset holds).
    pub misplaced: Vec<(u64, i64, String)>,
}

impl Figures {
    /// Fails when an acknowledged record is missing, its acknowledged offset holds another, or a
    /// record of the idempotent producer is stored more than once (DELIVERY-3, PRODUCER-UNKNOWN-1:
    /// its retries after an unknown outcome are answered from the new primary's log).
    pub fn check(&self) -> anyhow::Result<()> {
        ensure!(self.lost.is_empty(), "acknowledged records missing: {:?}", self.lost);
        ensure!(
            self.duplicated == 0,
            "{} records of the idempotent producer stored more than once",
            self.duplicated
        );
        ensure!(
            self.misplaced.is_empty(),
            "acknowledged offsets holding another record (record, offset, held): {:?}",
            self.misplaced
        );
        Ok(())
    }
}

/// Reads the topic back and counts the acknowledged records missing and the records stored more
/// than once.
pub async fn audit(bootstrap: &str, topic: &str, acks: &[Ack]) -> anyhow::Result<Figures> {
    let read = read_all(bootstrap, topic).await?;
    let mut stored: BTreeMap<u64, usize> = BTreeMap::new();
    for (offset, payload) in &read {
        let seq: u64 = payload
            .parse()
            .map_err(|_| anyhow!("offset {offset} holds {payload:?}, which no producer sent"))?;
        *stored.entry(seq).or_default() += 1;
    }
    let mut misplaced = Vec::new();
    for a in acks {
        if let Some((o, p)) = read.iter().find(|(o, _)| *o == a.offset) {
            if p != &a.seq.to_string() {
                misplaced.push((a.seq, *o, p.clone()));
            }
        }
    }
    let lost: Vec<u64> = acks.iter().map(|a| a.seq).filter(|s| !stored.contains_key(s)).collect();
    let duplicated = stored.values().map(|n| n - 1).sum();
    Ok(Figures {
        acknowledged: acks.len(),
        lost,
        duplicated,
        misplaced,
    })
}

pub fn millis(d: Option<Duration>) -> String {
    d.map(|d| format!("{} ms", d.as_millis()))
        .unwrap_or_else(|| "none".into())
}

/// Free loopback addresses, all held at once while picking so they differ.
pub fn free_addresses(n: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    Ok(listeners.iter().map(|l| l.local_addr()).collect::<Result<_, _>>()?)
}

/// The gateway binary the two-process case runs: `KIG_GATEWAY_BIN`, or `kafka-iggy-gateway`
/// beside the running tier's binary (both are built into the same target directory).
pub fn gateway_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("KIG_GATEWAY_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("the running binary's path")?;
    let beside = exe
        .parent()
        .map(|d| d.join("kafka-iggy-gateway"))
        .context("the running binary's directory")?;
    ensure!(
        beside.is_file(),
        "no gateway binary at {} (build it: cargo build -p kafka-iggy-gateway --bin kafka-iggy-gateway; or set KIG_GATEWAY_BIN)",
        beside.display()
    );
    Ok(beside)
}

/// A `kafka-iggy-gateway` process on the real backend, given the cluster's roster: a gateway as
/// an operator runs it, which the case can SIGKILL. Killed on drop.
pub struct GatewayProcess {
    pub addr: SocketAddr,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl GatewayProcess {
    /// Starts gateway `index` (node id `index + 1`) of `addresses`, each knowing all of them as
    /// peers probed every `probe_ms` on their peer channels `channels` (GROUP-COORDINATOR-6), on
    /// `cluster`'s roster; returns once it listens.
    pub async fn start(
        binary: &Path,
        cluster: &IggyCluster,
        addresses: &[SocketAddr],
        channels: &[SocketAddr],
        index: usize,
        probe_ms: u64,
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let peers: Vec<String> = addresses
            .iter()
            .zip(channels)
            .enumerate()
            .map(|(i, (a, c))| format!("{}={a}/{}", i + 1, c.port()))
            .collect();
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(binary)
            .arg("--backend")
            .arg("iggy")
            .arg("--iggy-address")
            .arg(cluster.roster())
            .arg("--iggy-username")
            .arg(&cluster.username)
            .arg("--iggy-password")
            .arg(&cluster.password)
            .arg("--listen")
            .arg(addresses[index].to_string())
            .arg("--instance-id")
            .arg((index + 1).to_string())
            .arg("--peers")
            .arg(peers.join(","))
            .arg("--peer-listen")
            .arg(channels[index].to_string())
            .env("IGGY_KAFKA_PEER_SECRET", crate::cases::hostile_cases::PEER_SECRET)
            .arg("--peer-probe-interval-ms")
            .arg(probe_ms.to_string())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut process = GatewayProcess {
            addr: addresses[index],
            log,
            child: Some(child),
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if tokio::net::TcpStream::connect(process.addr).await.is_ok() {
                return Ok(process);
            }
            if let Some(status) = process.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!(
                    "the gateway process exited with {status}; its log ends:\n{}",
                    process.log_tail(20)
                );
            }
            ensure!(
                Instant::now() < deadline,
                "the gateway process did not listen on {} within {WAIT:?}; its log ends:\n{}",
                process.addr,
                process.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("the gateway process is not running")?;
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// Whether the process is still running (it never restarts itself).
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// FindCoordinator for `group` asked of the gateway at `addr`: (error, node id).
pub async fn coordinator_at(addr: SocketAddr, group: &str) -> anyhow::Result<(i16, i32)> {
    let mut client = Client::connect(&addr.to_string()).await?;
    let answer = crate::cases::group_cases::support::find_coordinator(
        &mut client,
        group,
        crate::cases::group_cases::support::KEY_TYPE_GROUP,
    )
    .await?;
    Ok((answer.error_code, answer.node_id.0))
}
