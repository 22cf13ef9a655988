//! Smoke test: the server core really runs under turmoil, and one seed always plays out the same.
//!
//! One gateway host and one client. The client creates a topic, produces a batch of three
//! records and fetches them back; then the link between client and gateway is partitioned and
//! no Produce completes: neither on a connection opened during the partition nor on one opened
//! just before it (each bounded by `tokio::time::timeout` inside the simulation, on simulated
//! time, so the outcome is deterministic); then the link is repaired and a second Produce and a
//! Fetch on a new connection see every record, offsets continuing where they stopped and
//! nothing of the partitioned attempts written. What the client observes becomes a trace of
//! strings; two runs of one seed must give the same trace.
//!
//! turmoil drops every segment on a partitioned link. A connect drops its SYN, and with it the
//! channel its SYN-ACK would come back on, so turmoil refuses the connect at once
//! (`ConnectionRefused`) instead of letting it hang; a request on an established connection is
//! dropped silently and its response never comes, so that one times out.

use bytes::Bytes;
use kafka_iggy_simulation::requests::{batch, create_topic, fetch, produce, Fetched};
use kafka_iggy_simulation::{connect, gateway_host, EPOCH_US, GATEWAY_HOST};
use kafka_wire_client::WireClient;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

const CLIENT_HOST: &str = "client";
const TOPIC: &str = "smoke";
/// CreateTime of the first batch's first record, in ms.
const FIRST_BATCH_MS: i64 = 1_700_000_000_000;
/// How long the client waits for a request while the link is partitioned (simulated time).
const PARTITIONED_WAIT: Duration = Duration::from_secs(5);
const SEEDS: std::ops::RangeInclusive<u64> = 1..=5;

/// How a request bounded by a timeout ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Attempt {
    #[default]
    NotMade,
    /// The connect failed (the error's kind and text).
    ConnectFailed(String),
    /// Connected, and the request failed.
    RequestFailed(String),
    /// Connected, but no answer within the timeout.
    TimedOut { connected: bool },
    /// Answered: (error code, base offset).
    Completed((i16, i64)),
}

/// Runs a Produce of one record whose value is `value` on `conn`, or on a new connection when `conn` is
/// `None`, for at most [`PARTITIONED_WAIT`] of simulated time.
async fn attempt_produce(conn: Option<&mut WireClient<turmoil::net::TcpStream>>, value: &'static str) -> Attempt {
    let connected = Rc::new(RefCell::new(conn.is_some()));
    let flag = connected.clone();
    let work = async move {
        let mut fresh;
        let conn = match conn {
            Some(conn) => conn,
            None => {
                fresh = connect()
                    .await
                    .map_err(|e| Attempt::ConnectFailed(format!("{:?}: {e}", e.kind())))?;
                *flag.borrow_mut() = true;
                &mut fresh
            }
        };
        produce(conn, TOPIC, batch(FIRST_BATCH_MS, &[(None::<&str>, value)]))
            .await
            .map_err(|e| Attempt::RequestFailed(format!("{e:#}")))
    };
    match tokio::time::timeout(PARTITIONED_WAIT, work).await {
        Err(_) => Attempt::TimedOut {
            connected: *connected.borrow(),
        },
        Ok(Err(failed)) => failed,
        Ok(Ok(answer)) => Attempt::Completed(answer),
    }
}

/// Everything the client saw in one run.
#[derive(Debug, Default)]
struct Observed {
    create_error: i16,
    first_produce: (i16, i64),
    first_fetch: Vec<Fetched>,
    first_high_watermark: i64,
    /// How a Produce on a connection opened during the partition ended.
    partitioned_fresh: Attempt,
    /// How a Produce sent during the partition on a connection opened before it ended.
    partitioned_open: Attempt,
    second_produce: (i16, i64),
    second_fetch: Vec<Fetched>,
    second_high_watermark: i64,
    /// Simulated time at each step, in µs since the client started.
    step_times_us: Vec<(String, u128)>,
}

impl Observed {
    /// The observations as lines, for comparing runs.
    fn trace(&self) -> Vec<String> {
        let mut lines = vec![
            format!("create error {}", self.create_error),
            format!(
                "produce 1: error {} base offset {}",
                self.first_produce.0, self.first_produce.1
            ),
            format!("fetch 1: high watermark {}", self.first_high_watermark),
        ];
        lines.extend(self.first_fetch.iter().map(|r| format!("fetch 1: {r:?}")));
        lines.push(format!(
            "partitioned: fresh connection {:?}, open connection {:?}",
            self.partitioned_fresh, self.partitioned_open
        ));
        lines.push(format!(
            "produce 2: error {} base offset {}",
            self.second_produce.0, self.second_produce.1
        ));
        lines.push(format!("fetch 2: high watermark {}", self.second_high_watermark));
        lines.extend(self.second_fetch.iter().map(|r| format!("fetch 2: {r:?}")));
        lines.extend(
            self.step_times_us
                .iter()
                .map(|(step, us)| format!("at {us} us: {step}")),
        );
        lines
    }
}

/// The client's whole scenario; fills `observed` as it goes.
async fn client(observed: Rc<RefCell<Observed>>) -> anyhow::Result<()> {
    let start = tokio::time::Instant::now();
    let step = |name: &str| {
        let at = start.elapsed().as_micros();
        observed.borrow_mut().step_times_us.push((name.to_string(), at));
    };

    // Round trip on a healthy link.
    let mut conn = connect().await?;
    step("connected");
    let create_error = create_topic(&mut conn, TOPIC).await?;
    observed.borrow_mut().create_error = create_error;
    let first = batch(FIRST_BATCH_MS, &[(Some("k0"), "v0"), (Some("k1"), "v1"), (None, "v2")]);
    let first_produce = produce(&mut conn, TOPIC, first).await?;
    observed.borrow_mut().first_produce = first_produce;
    step("produced batch 1");
    let (records, high_watermark) = fetch(&mut conn, TOPIC, 0, 100).await?;
    {
        let mut o = observed.borrow_mut();
        o.first_fetch = records;
        o.first_high_watermark = high_watermark;
    }
    step("fetched batch 1");
    drop(conn);
    let mut open = connect().await?;
    step("opened a connection before the partition");

    // Partitioned: no request completes, on a new connection or on an open one.
    turmoil::partition(CLIENT_HOST, GATEWAY_HOST);
    step("partitioned");
    let fresh = attempt_produce(None, "lost on a fresh connection").await;
    observed.borrow_mut().partitioned_fresh = fresh;
    step("fresh connection given up");
    let open_attempt = attempt_produce(Some(&mut open), "lost on an open connection").await;
    observed.borrow_mut().partitioned_open = open_attempt;
    step("open connection given up");
    turmoil::repair(CLIENT_HOST, GATEWAY_HOST);
    // Its request bytes are gone (turmoil does not retransmit): the connection is useless.
    drop(open);

    // Repaired: a new connection produces and reads everything back.
    let mut conn = connect().await?;
    step("reconnected");
    let second = batch(-1, &[(Some("k3"), "v3"), (Some("k4"), "v4"), (None, "v5")]);
    let second_produce = produce(&mut conn, TOPIC, second).await?;
    observed.borrow_mut().second_produce = second_produce;
    step("produced batch 2");
    let (records, high_watermark) = fetch(&mut conn, TOPIC, 0, 100).await?;
    {
        let mut o = observed.borrow_mut();
        o.second_fetch = records;
        o.second_high_watermark = high_watermark;
    }
    step("fetched everything");
    Ok(())
}

/// Runs the scenario under `seed` and returns what the client observed.
fn run(seed: u64) -> Observed {
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_micros(EPOCH_US))
        .simulation_duration(Duration::from_secs(60))
        .build();
    gateway_host(&mut sim, seed);
    let observed = Rc::new(RefCell::new(Observed::default()));
    let client_observed = observed.clone();
    sim.client(CLIENT_HOST, async move {
        client(client_observed).await?;
        Ok(())
    });
    if let Err(e) = sim.run() {
        panic!("seed {seed}: simulation failed: {e}");
    }
    Rc::try_unwrap(observed).expect("the simulation is gone").into_inner()
}

fn bytes(s: &'static str) -> Option<Bytes> {
    Some(Bytes::from_static(s.as_bytes()))
}

fn check(seed: u64, o: &Observed) {
    assert_eq!(o.create_error, 0, "seed {seed}: CreateTopics");
    assert_eq!(
        o.first_produce,
        (0, 0),
        "seed {seed}: first Produce (error, base offset)"
    );
    let expected_first = [
        (0, FIRST_BATCH_MS, bytes("k0"), bytes("v0")),
        (1, FIRST_BATCH_MS + 10, bytes("k1"), bytes("v1")),
        (2, FIRST_BATCH_MS + 20, None, bytes("v2")),
    ]
    .map(|(offset, timestamp_ms, key, value)| Fetched {
        offset,
        timestamp_ms,
        key,
        value,
    });
    assert_eq!(o.first_fetch, expected_first, "seed {seed}: first Fetch");
    assert_eq!(o.first_high_watermark, 3, "seed {seed}");

    // A connect across the partition never gets its SYN-ACK: refused, never connected.
    assert!(
        matches!(&o.partitioned_fresh, Attempt::ConnectFailed(e) if e.starts_with("ConnectionRefused")),
        "seed {seed}: a fresh connection across a partition: {:?}",
        o.partitioned_fresh
    );
    // A request on a connection opened before the partition is never answered.
    assert_eq!(
        o.partitioned_open,
        Attempt::TimedOut { connected: true },
        "seed {seed}: a request on an open connection across a partition"
    );

    // Nothing of the partitioned attempts was written: offsets continue at 3.
    assert_eq!(
        o.second_produce,
        (0, 3),
        "seed {seed}: second Produce (error, base offset)"
    );
    assert_eq!(o.second_high_watermark, 6, "seed {seed}");
    let offsets: Vec<i64> = o.second_fetch.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4, 5], "seed {seed}: second Fetch offsets");
    assert_eq!(
        o.second_fetch[..3],
        expected_first,
        "seed {seed}: the first batch is unchanged"
    );
    let values: Vec<Option<Bytes>> = o.second_fetch[3..].iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        [bytes("v3"), bytes("v4"), bytes("v5")],
        "seed {seed}: second batch values"
    );
    let keys: Vec<Option<Bytes>> = o.second_fetch[3..].iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, [bytes("k3"), bytes("k4"), None], "seed {seed}: second batch keys");

    // The second batch had no timestamps: each reads back as the gateway's append time
    // (MAP-TS-2), on the simulated clock: after the 5 s partition, and one append, one time.
    let epoch_ms = (EPOCH_US / 1000) as i64;
    let append_ms = o.second_fetch[3].timestamp_ms;
    assert!(
        append_ms >= epoch_ms + PARTITIONED_WAIT.as_millis() as i64,
        "seed {seed}: append time {append_ms} ms is not after the partition"
    );
    assert!(
        append_ms < epoch_ms + 60_000,
        "seed {seed}: append time {append_ms} ms is past the simulation"
    );
    assert!(
        o.second_fetch[3..].iter().all(|r| r.timestamp_ms == append_ms),
        "seed {seed}: one send, one server timestamp: {:?}",
        o.second_fetch
    );
}

#[test]
fn smoke_produce_fetch_partition_repair_is_deterministic_per_seed() {
    let mut traces = Vec::new();
    for seed in SEEDS {
        let first = run(seed);
        check(seed, &first);
        let second = run(seed);
        assert_eq!(
            first.trace(),
            second.trace(),
            "seed {seed}: two runs of one seed differ"
        );
        println!("seed {seed}:\n  {}", first.trace().join("\n  "));
        traces.push(first.trace());
    }
    // The seed decides the simulated latencies, hence the times observed: not every seed
    // plays out alike.
    traces.dedup();
    assert!(traces.len() > 1, "every seed gave the same trace: {traces:#?}");
}
