//! The simulated world of one run: an Iggy host on a model that outlives it, one or two
//! gateways reaching it over the network through [`RemoteBackend`], producers (plain ones
//! through one gateway, idempotent ones to each partition's leader among every gateway),
//! assigned and group consumers, a driver that injects the configured faults while the
//! producers send, a heal, the liveness phase in which the consumers read every acknowledged
//! record, and a final drain.
//! Everything is recorded into a [`History`]; one seed decides everything (PROTO-DETERMINISM-1):
//! turmoil's network, every client's think times, every fault.

pub mod consumer;
pub mod consumer_protocol;
pub mod producer;

use crate::history::{FaultKind, History, Hop, PartitionLog, Recorder, Stored, TopicPartition};
use crate::iggy_host::{iggy_cluster, iggy_host, IggyDisk, IggyFaults, IGGY_HOST, IGGY_PORT};
use crate::kafka::fetch;
use crate::remote::RemoteBackend;
use crate::replica::{node_name, ReplicatedLog, NODES};
use crate::trace::{Event, Trace};
use crate::{serve_on_host, SimClock, EPOCH_US, GATEWAY_PORT, PEER_PORT, PEER_SECRET};
use consumer::{ConsumerRun, ConsumerSpec, Progress, SharedProgress};
use consumer_protocol::{MemberChurn, MemberRun};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::backend::{Backend, ReadLimits};
use kafka_iggy_gateway::clock::SharedRng;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::limits::LimitSettings;
use kafka_iggy_gateway::server::Shutdown;
use kafka_wire_client::WireClient;
use producer::{ProducerRun, ProducerSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

/// The topic every run writes.
pub const TOPIC: &str = "events";
/// The consumer group of the group consumers.
pub const GROUP: &str = "readers";

/// Chances per simulated millisecond, while the producers send, of each fault.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultPlan {
    /// Each producer's link to its gateway breaks (partitioned, or held when `hold` is set) or,
    /// broken, heals.
    pub producer_link: f64,
    /// Each consumer's link to its gateway breaks (partitioned) or heals.
    pub consumer_link: f64,
    /// Broken client links may be held (requests delayed and delivered late) instead of
    /// partitioned.
    pub hold: bool,
    /// Each gateway restarts.
    pub gateway_restart: f64,
    /// Each gateway's link to Iggy is partitioned or, partitioned, heals.
    pub iggy_link: f64,
    /// Iggy restarts (data kept).
    pub iggy_restart: f64,
    /// Iggy is armed to lose the response of its next append (written, never answered).
    pub iggy_response_loss: f64,
    /// Replicated cluster: the primary crashes (one node fault at a time).
    pub primary_crash: f64,
    /// Replicated cluster: the primary is cut off from every other host (one node fault at a
    /// time).
    pub primary_isolation: f64,
    /// Replicated cluster: the node fault that is open ends (a crashed node restarts on its
    /// disk, an isolated one is reconnected).
    pub node_recovery: f64,
    /// The last gateway crashes, and stays down until it recovers with `gateway_recovery`
    /// (long enough for its peers to see it down and move its groups, GROUP-COORDINATOR-2).
    pub gateway_crash: f64,
    pub gateway_recovery: f64,
}

/// Everything a run is made of, apart from its seed.
#[derive(Debug, Clone, Serialize)]
pub struct WorldConfig {
    pub gateways: usize,
    pub partitions: i32,
    pub producers: Vec<ProducerSpec>,
    pub assigned_consumers: usize,
    pub group_consumers: usize,
    /// Members of the same group speaking the consumer protocol (KIP-848) instead of the classic
    /// one (`world/consumer_protocol.rs`); a group holds one kind (GROUP-CONSUMER-TYPE-1), so a
    /// scenario has these or classic group consumers, not both.
    pub protocol_members: usize,
    /// How the consumer-protocol members crash, close and join late.
    pub churn: MemberChurn,
    pub consumer: ConsumerSpec,
    pub faults: FaultPlan,
    /// Group consumers send their first JoinGroup to their bootstrap gateway, coordinator or
    /// not (scenario 7).
    pub join_bootstrap_first: bool,
    /// How long a gateway waits for Iggy's answer.
    pub iggy_request_timeout_ms: u64,
    /// 1: the single Iggy host; 3: a replicated cluster (`replica.rs`), which the gateways
    /// reach through a roster (CLUSTER-ROSTER-1).
    pub iggy_nodes: usize,
    /// With a cluster, how long a gateway's call may spend failing over (CLUSTER-FAILOVER-2).
    pub iggy_failover_timeout_ms: u64,
    /// Every segment's latency: fixed, see [`run_world`].
    pub latency_ms: u64,
    /// Faults stop once every producer has every record acknowledged, or at this simulated
    /// time when set, whichever comes first; the liveness phase follows. A limit bounds the
    /// fault phase of a world whose faults slow an idempotent producer down for longer than they
    /// come apart: with two gateways each restart leaves the restarted one's partitions without
    /// a leader for its warm-up (PRODUCER-LEADER-1, GROUP-COORDINATOR-4), so a restart every few
    /// seconds would keep its producer from ever finishing, and the faults from ever stopping.
    pub fault_phase_limit_ms: Option<u64>,
    /// The run fails its liveness if it has not finished by then.
    pub max_simulated_s: u64,
}

/// What one run left: its history, its event log (empty without `--trace`), how long it took in
/// simulated time, and whether it finished (every client done) within the limit.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub history: History,
    pub events: Vec<Event>,
    pub simulated_ms: u64,
    /// `None` when every client finished; otherwise why not (the liveness phase failed).
    pub unfinished: Option<String>,
}

/// A gateway's host name.
pub fn gateway_name(k: usize) -> String {
    format!("gateway-{k}")
}

/// Gateway `k` of `n`: listening on [`GATEWAY_PORT`], advertising its host, knowing its peers
/// (GROUP-COORDINATOR-1 routes each group to one of them).
fn gateway_config(k: usize, n: usize) -> Config {
    let args = Args {
        listen: Some(std::net::SocketAddr::from(([0, 0, 0, 0], GATEWAY_PORT))),
        advertised: Some(format!("{}:{GATEWAY_PORT}", gateway_name(k))),
        instance_id: Some(k as u16),
        // GROUP-COORDINATOR-6, GROUP-COORDINATOR-7: each peer's channel on its own port.
        peers: (0..n)
            .map(|i| format!("{i}={}:{GATEWAY_PORT}/{PEER_PORT}", gateway_name(i)))
            .collect(),
        peer_listen: Some(std::net::SocketAddr::from(([0, 0, 0, 0], PEER_PORT))),
        peer_secret: Some(kafka_iggy_gateway::auth::credentials::Secret::new(PEER_SECRET)),
        limits: LimitSettings {
            // Decoding on another OS thread would finish at a moment no seed decides
            // (PROTO-DETERMINISM-1).
            decode_threads: Some(0),
            ..LimitSettings::default()
        },
        ..Args::default()
    };
    Config::resolve(args, FileConfig::default()).expect("the simulation's configuration is valid")
}

/// How gateways reach Iggy: the host or the cluster's roster, and how long they wait.
#[derive(Clone)]
struct IggyReach {
    roster: Vec<(String, u16)>,
    request_timeout: Duration,
    failover_timeout: Duration,
}

/// Registers gateway `k`: each start is a new gateway process with a new Iggy client.
fn gateway_host(sim: &mut turmoil::Sim<'_>, k: usize, n: usize, seed: u64, iggy: IggyReach, trace: Trace) {
    let starts = Arc::new(AtomicU64::new(0));
    let name = gateway_name(k);
    sim.host(gateway_name(k).as_str(), move || {
        let start = starts.fetch_add(1, Ordering::Relaxed);
        let backend = if iggy.roster.len() == 1 {
            RemoteBackend::new(&name, iggy.request_timeout, trace.clone())
        } else {
            RemoteBackend::with_roster(
                &name,
                iggy.roster.clone(),
                iggy.request_timeout,
                iggy.failover_timeout,
                trace.clone(),
            )
        };
        let rng = SharedRng::seeded(
            seed.wrapping_add((k as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F))
                .wrapping_add(start.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        let gateway = Arc::new(Gateway::new(
            Arc::new(gateway_config(k, n)),
            Arc::new(backend),
            Arc::new(SimClock),
            rng,
        ));
        serve_on_host(gateway, Shutdown::default())
    });
}

/// Runs a future of the model that never waits (its operations take a lock and return) to its
/// end, outside any runtime: how the driver reads the disk between steps.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the model's operation waited"),
    }
}

fn stream_name() -> String {
    gateway_config(0, 1).topics.default_stream().to_string()
}

/// Each partition's high watermark on the disk (0 before the topic exists).
fn disk_ends(disk: &EmbeddedBackend, partitions: i32) -> BTreeMap<i32, i64> {
    let stream = stream_name();
    (0..partitions)
        .map(|p| {
            let end = ready(disk.watermarks(&stream, TOPIC, p as u32)).map_or(0, |w| w.high_watermark as i64);
            (p, end)
        })
        .collect()
}

/// A partition as the disk holds it.
fn disk_log(disk: &EmbeddedBackend, partition: i32) -> PartitionLog {
    let stream = stream_name();
    let mut records = Vec::new();
    loop {
        let limits = ReadLimits {
            max_messages: 1_000,
            max_bytes: u64::MAX,
        };
        let offset = records.len() as u64;
        let Ok(messages) = ready(disk.read(&stream, TOPIC, partition as u32, offset, limits)) else {
            break;
        };
        if messages.is_empty() {
            break;
        }
        for message in &messages {
            let (record, _) = kig_core::mapping::message_to_record(message);
            let written_by = record
                .headers
                .iter()
                .find(|h| &h.name[..] == crate::history::ATTEMPT_HEADER.as_bytes())
                .and_then(|h| crate::history::parse_attempt_header(h.value.as_deref()?));
            records
                .push(Stored::from_bytes(message.header.offset as i64, record.value.as_deref()).written_by(written_by));
        }
    }
    PartitionLog {
        partition: TopicPartition::new(TOPIC, partition),
        records,
    }
}

/// A client link the driver breaks and heals: a client's link to one gateway.
struct Link {
    client: String,
    gateway: String,
    chance: f64,
    may_hold: bool,
    /// The open fault and whether it is a hold.
    broken: Option<(usize, bool)>,
}

/// The final drain: after the consumers are done, every partition read from offset 0 to its
/// end through gateway 0.
async fn drain(partitions: i32, progress: SharedProgress, recorder: Recorder, consumers: usize) -> turmoil::Result {
    loop {
        let ready = {
            let p = progress.lock().expect("progress lock");
            p.producers_left == 0 && p.consumers_done >= consumers && p.ends.is_some()
        };
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ends = progress.lock().expect("progress lock").ends.clone().unwrap_or_default();
    let mut conn: Option<WireClient<turmoil::net::TcpStream>> = None;
    for p in 0..partitions {
        let end = ends.get(&p).copied().unwrap_or(0);
        let mut records: Vec<Stored> = Vec::new();
        let mut position = 0;
        while position < end {
            let step = tokio::time::timeout(Duration::from_secs(2), async {
                if conn.is_none() {
                    let stream = turmoil::net::TcpStream::connect((gateway_name(0).as_str(), GATEWAY_PORT)).await?;
                    conn = Some(WireClient::new(stream));
                }
                fetch(conn.as_mut().expect("connected"), TOPIC, &[(p, position)], 100).await
            })
            .await;
            match step {
                Ok(Ok(answer)) => {
                    for part in answer.into_iter().filter(|a| a.error_code == 0) {
                        let from = position;
                        for r in part.records.into_iter().filter(|r| r.offset >= from) {
                            position = r.offset + 1;
                            records.push(Stored::from_bytes(r.offset, r.value.as_deref()));
                        }
                    }
                }
                _ => {
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        recorder.drained(PartitionLog {
            partition: TopicPartition::new(TOPIC, p),
            records,
        });
    }
    Ok(())
}

/// Runs `config` under `seed` as scenario `scenario`; `trace` keeps the request-level log.
pub fn run_world(scenario: &str, config: &WorldConfig, seed: u64, trace_on: bool) -> RunOutput {
    let latency = Duration::from_millis(config.latency_ms);
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_micros(EPOCH_US))
        .simulation_duration(Duration::from_secs(config.max_simulated_s))
        // A fixed latency: when a host is bounced, tokio drops its tasks in an order set by
        // process-wide task ids, and each dropped socket sends a segment. With random latencies
        // those segments would draw from the network's RNG in that order, so a seed replayed
        // alone would play out differently than inside a sweep. Seeded think times vary the
        // interleavings instead.
        .min_message_latency(latency)
        .max_message_latency(latency)
        .build();
    let trace = Trace::new(trace_on);
    let recorder = Recorder::new(scenario, seed);
    let disk: IggyDisk = Arc::new(EmbeddedBackend::new(Arc::new(SimClock), EmbeddedConfig::default()));
    let iggy_faults = Arc::new(IggyFaults::default());
    let cluster = (config.iggy_nodes > 1).then(|| ReplicatedLog::new(disk.clone()));
    let iggy = IggyReach {
        roster: match &cluster {
            None => vec![(IGGY_HOST.to_string(), IGGY_PORT)],
            Some(_) => (0..NODES).map(|i| (node_name(i), IGGY_PORT)).collect(),
        },
        request_timeout: Duration::from_millis(config.iggy_request_timeout_ms),
        failover_timeout: Duration::from_millis(config.iggy_failover_timeout_ms),
    };
    match &cluster {
        None => iggy_host(
            &mut sim,
            disk.clone(),
            iggy_faults.clone(),
            recorder.clone(),
            trace.clone(),
        ),
        Some(log) => iggy_cluster(
            &mut sim,
            log.clone(),
            iggy_faults.clone(),
            recorder.clone(),
            trace.clone(),
        ),
    }
    for k in 0..config.gateways {
        gateway_host(&mut sim, k, config.gateways, seed, iggy.clone(), trace.clone());
        recorder.add_gateway(gateway_name(k));
    }
    for p in 0..config.partitions {
        recorder.add_partition(TopicPartition::new(TOPIC, p));
    }
    let progress: SharedProgress = Arc::new(std::sync::Mutex::new(Progress {
        producers_left: config.producers.len(),
        ..Progress::default()
    }));
    let mut links = Vec::new();
    for (i, spec) in config.producers.iter().enumerate() {
        let k = i % config.gateways;
        let name = format!("producer-{i}");
        // A plain producer writes through the gateway it bootstraps from; an idempotent one
        // knows them all, from that one on, and follows each partition's leader
        // (PRODUCER-LEADER-1). The driver may break its link to each.
        let gateways: Vec<String> = if spec.idempotent {
            (0..config.gateways)
                .map(|step| gateway_name((k + step) % config.gateways))
                .collect()
        } else {
            vec![gateway_name(k)]
        };
        let index = recorder.add_producer(&name, spec.idempotent, spec.max_in_flight);
        let run = ProducerRun {
            index,
            spec: spec.clone(),
            topic: TOPIC.into(),
            partitions: config.partitions,
            gateways: gateways.clone(),
            port: GATEWAY_PORT,
            seed: seed ^ (0x51ED_0000 + i as u64),
            recorder: recorder.clone(),
            trace: trace.clone(),
        };
        let progress = progress.clone();
        sim.client(name.as_str(), async move {
            run.run().await;
            progress.lock().expect("progress lock").producers_left -= 1;
            Ok(())
        });
        for gateway in gateways {
            links.push(Link {
                client: name.clone(),
                gateway,
                chance: config.faults.producer_link,
                may_hold: config.faults.hold,
                broken: None,
            });
        }
    }
    let consumers = config.assigned_consumers + config.group_consumers;
    for j in 0..consumers {
        let grouped = j >= config.assigned_consumers;
        let k = j % config.gateways;
        let name = format!("consumer-{j}");
        let mode = if grouped {
            crate::history::ConsumerMode::Group { group: GROUP.into() }
        } else {
            crate::history::ConsumerMode::Assign { group: None }
        };
        let index = recorder.add_consumer(&name, mode, gateway_name(k));
        let run = ConsumerRun {
            index,
            name: name.clone(),
            spec: config.consumer.clone(),
            topic: TOPIC.into(),
            partitions: config.partitions,
            gateway: gateway_name(k),
            port: GATEWAY_PORT,
            group: grouped.then(|| GROUP.to_string()),
            join_bootstrap_first: config.join_bootstrap_first,
            progress: progress.clone(),
            recorder: recorder.clone(),
            trace: trace.clone(),
        };
        let progress = progress.clone();
        sim.client(name.as_str(), async move {
            run.run().await;
            progress.lock().expect("progress lock").consumers_done += 1;
            Ok(())
        });
        links.push(Link {
            client: name,
            gateway: gateway_name(k),
            chance: config.faults.consumer_link,
            may_hold: false,
            broken: None,
        });
    }
    for i in 0..config.protocol_members {
        let j = consumers + i;
        let k = j % config.gateways;
        let name = format!("consumer-{j}");
        let mode = crate::history::ConsumerMode::ConsumerProtocol { group: GROUP.into() };
        let index = recorder.add_consumer(&name, mode, gateway_name(k));
        let run = MemberRun {
            index,
            name: name.clone(),
            spec: config.consumer.clone(),
            churn: config.churn.clone(),
            topic: TOPIC.into(),
            gateway: gateway_name(k),
            port: GATEWAY_PORT,
            group: GROUP.into(),
            seed: seed ^ (0xC0_0000 + j as u64),
            progress: progress.clone(),
            recorder: recorder.clone(),
            trace: trace.clone(),
        };
        let progress = progress.clone();
        sim.client(name.as_str(), async move {
            run.run().await;
            progress.lock().expect("progress lock").consumers_done += 1;
            Ok(())
        });
        links.push(Link {
            client: name,
            gateway: gateway_name(k),
            chance: config.faults.consumer_link,
            may_hold: false,
            broken: None,
        });
    }
    let consumers = consumers + config.protocol_members;
    {
        let (progress, recorder) = (progress.clone(), recorder.clone());
        let partitions = config.partitions;
        sim.client("drain", drain(partitions, progress, recorder, consumers));
    }

    let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED_FA17);
    let mut iggy_links: Vec<Option<usize>> = vec![None; config.gateways];
    let mut nodes = NodeFaults::default();
    let mut gateway_down: Option<usize> = None;
    let mut healed = false;
    let mut unfinished = None;
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                unfinished = Some(format!("{e}"));
                break;
            }
        }
        let now_us = sim.elapsed().as_micros() as u64;
        let producers_left = progress.lock().expect("progress lock").producers_left;
        let past_limit = config.fault_phase_limit_ms.is_some_and(|limit| now_us >= limit * 1_000);
        if producers_left == 0 || past_limit {
            if !healed {
                healed = true;
                for link in &mut links {
                    if let Some((_, held)) = link.broken.take() {
                        if held {
                            sim.release(link.client.as_str(), link.gateway.as_str());
                        } else {
                            sim.repair(link.client.as_str(), link.gateway.as_str());
                        }
                    }
                }
                for (k, broken) in iggy_links.iter_mut().enumerate() {
                    if broken.take().is_some() {
                        sim.repair(gateway_name(k).as_str(), IGGY_HOST);
                    }
                }
                nodes.end(&mut sim, config.gateways, &recorder, &trace, now_us);
                if let Some(fault) = gateway_down.take() {
                    restart_gateway(&mut sim, config, fault, &recorder, &trace, now_us);
                }
                recorder.healed_at(now_us);
                let why = if producers_left == 0 {
                    "producers done"
                } else {
                    "fault phase at its limit"
                };
                trace_driver(&trace, now_us, &format!("{why}: network healed, faults stop"));
            }
            if producers_left == 0 {
                // Appends held back may still land after the heal: the ends follow the disk.
                progress.lock().expect("progress lock").ends = Some(disk_ends(&disk, config.partitions));
            }
            continue;
        }
        if recorder.lock().produces.is_empty() {
            // Nothing sent yet: the topic is being created on a calm network.
            continue;
        }
        let f = &config.faults;
        for link in &mut links {
            if link.chance == 0.0 || !rng.random_bool(link.chance) {
                continue;
            }
            let hop = Hop::ClientGateway {
                client: link.client.clone(),
                gateway: link.gateway.clone(),
            };
            match link.broken.take() {
                Some((fault, held)) => {
                    if held {
                        sim.release(link.client.as_str(), link.gateway.as_str());
                    } else {
                        sim.repair(link.client.as_str(), link.gateway.as_str());
                    }
                    recorder.fault_ended_at(fault, now_us);
                }
                None => {
                    let hold = link.may_hold && rng.random_bool(0.5);
                    let fault = if hold {
                        sim.hold(link.client.as_str(), link.gateway.as_str());
                        recorder.fault_started_at(FaultKind::Hold { hop }, now_us)
                    } else {
                        sim.partition(link.client.as_str(), link.gateway.as_str());
                        recorder.fault_started_at(FaultKind::Partition { hop }, now_us)
                    };
                    link.broken = Some((fault, hold));
                }
            }
        }
        for (k, iggy_link) in iggy_links.iter_mut().enumerate() {
            if f.gateway_restart > 0.0 && rng.random_bool(f.gateway_restart) {
                sim.bounce(gateway_name(k).as_str());
                recorder.fault_at(
                    FaultKind::GatewayRestart {
                        gateway: gateway_name(k),
                    },
                    now_us,
                );
                trace_driver(&trace, now_us, &format!("{} restarted", gateway_name(k)));
            }
            if f.iggy_link > 0.0 && rng.random_bool(f.iggy_link) {
                match iggy_link.take() {
                    Some(fault) => {
                        sim.repair(gateway_name(k).as_str(), IGGY_HOST);
                        recorder.fault_ended_at(fault, now_us);
                    }
                    None => {
                        sim.partition(gateway_name(k).as_str(), IGGY_HOST);
                        let hop = Hop::GatewayIggy {
                            gateway: gateway_name(k),
                        };
                        *iggy_link = Some(recorder.fault_started_at(FaultKind::Partition { hop }, now_us));
                    }
                }
            }
        }
        if f.iggy_restart > 0.0 && rng.random_bool(f.iggy_restart) {
            sim.bounce(IGGY_HOST);
            recorder.fault_at(FaultKind::IggyRestart, now_us);
            trace_driver(&trace, now_us, "iggy restarted on its data");
        }
        if f.iggy_response_loss > 0.0 && rng.random_bool(f.iggy_response_loss) {
            iggy_faults.lose_response_of_append(1);
        }
        if let Some(log) = &cluster {
            nodes.drive(&mut sim, &mut rng, f, log, config.gateways, &recorder, &trace, now_us);
        }
        let last = config.gateways - 1;
        match gateway_down {
            None if f.gateway_crash > 0.0 && rng.random_bool(f.gateway_crash) => {
                sim.crash(gateway_name(last).as_str());
                let kind = FaultKind::GatewayCrash {
                    gateway: gateway_name(last),
                };
                gateway_down = Some(recorder.fault_started_at(kind, now_us));
                trace_driver(&trace, now_us, &format!("{} crashed", gateway_name(last)));
            }
            Some(fault) if rng.random_bool(f.gateway_recovery) => {
                gateway_down = None;
                restart_gateway(&mut sim, config, fault, &recorder, &trace, now_us);
            }
            _ => {}
        }
    }
    let simulated_ms = sim.elapsed().as_millis() as u64;
    drop(sim);
    for p in 0..config.partitions {
        recorder.backend_holds(disk_log(&disk, p));
    }
    RunOutput {
        history: recorder.finish(),
        events: trace.events(),
        simulated_ms,
        unfinished,
    }
}

/// Starts the crashed last gateway again.
fn restart_gateway(
    sim: &mut turmoil::Sim<'_>,
    config: &WorldConfig,
    fault: usize,
    recorder: &Recorder,
    trace: &Trace,
    now_us: u64,
) {
    let name = gateway_name(config.gateways - 1);
    sim.bounce(name.as_str());
    recorder.fault_ended_at(fault, now_us);
    trace_driver(trace, now_us, &format!("{name} started again"));
}

/// The replicated cluster's node fault, one at a time, aimed at the primary: a crash (the node
/// restarts on its disk when it ends) or an isolation (every link of the node cut).
#[derive(Default)]
struct NodeFaults {
    open: Option<(usize, usize, bool)>,
}

impl NodeFaults {
    #[allow(clippy::too_many_arguments)]
    fn drive(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        rng: &mut StdRng,
        f: &FaultPlan,
        log: &ReplicatedLog,
        gateways: usize,
        recorder: &Recorder,
        trace: &Trace,
        now_us: u64,
    ) {
        if self.open.is_some() {
            if f.node_recovery > 0.0 && rng.random_bool(f.node_recovery) {
                self.end(sim, gateways, recorder, trace, now_us);
            }
            return;
        }
        let crash = f.primary_crash > 0.0 && rng.random_bool(f.primary_crash);
        let isolate = !crash && f.primary_isolation > 0.0 && rng.random_bool(f.primary_isolation);
        if !crash && !isolate {
            return;
        }
        let node = log.primary();
        let name = node_name(node);
        let fault = if crash {
            sim.crash(name.as_str());
            trace_driver(trace, now_us, &format!("{name} (primary) crashed"));
            recorder.fault_started_at(FaultKind::IggyNodeCrash { node: name }, now_us)
        } else {
            for other in others(node, gateways) {
                sim.partition(name.as_str(), other.as_str());
            }
            trace_driver(trace, now_us, &format!("{name} (primary) isolated"));
            recorder.fault_started_at(FaultKind::IggyNodeIsolated { node: name }, now_us)
        };
        self.open = Some((node, fault, crash));
    }

    fn end(&mut self, sim: &mut turmoil::Sim<'_>, gateways: usize, recorder: &Recorder, trace: &Trace, now_us: u64) {
        let Some((node, fault, crashed)) = self.open.take() else {
            return;
        };
        let name = node_name(node);
        if crashed {
            sim.bounce(name.as_str());
            trace_driver(trace, now_us, &format!("{name} restarted on its disk"));
        } else {
            for other in others(node, gateways) {
                sim.repair(name.as_str(), other.as_str());
            }
            trace_driver(trace, now_us, &format!("{name} reconnected"));
        }
        recorder.fault_ended_at(fault, now_us);
    }
}

/// Every host a node talks to: the other nodes and the gateways.
fn others(node: usize, gateways: usize) -> Vec<String> {
    (0..NODES)
        .filter(|&j| j != node)
        .map(node_name)
        .chain((0..gateways).map(gateway_name))
        .collect()
}

fn trace_driver(trace: &Trace, now_us: u64, what: &str) {
    if trace.enabled() {
        trace.event_at(now_us / 1000, "driver", what);
    }
}
