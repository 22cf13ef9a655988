//! `make bench`, when a real Iggy server is reachable (see `real_iggy::discover`): produce and
//! fetch through the gateway with librdkafka, and the same data written and read with the native
//! Iggy SDK on the same server in the same run: records/s, MB/s, p50/p99 and the ratio
//! gateway/native. Prints figures; asserts nothing. Without a server it says it was skipped.

use bytes::Bytes;
use iggy::prelude::{
    Client, Consumer, Identifier, IggyClient, IggyMessage, MessageClient, Partitioning, PollingStrategy, StreamClient,
    TopicClient, TopicCreateOptions,
};
use kafka_iggy_conformance::bench::{print, run, Figures, RECORD_BYTES, ROUNDS, ROUND_RECORDS, TOPIC};
use kafka_iggy_conformance::endpoint::{LocalGateway, LocalOptions};
use kafka_iggy_conformance::real_iggy::{discover, Discovery};
use kafka_iggy_gateway::backend::iggy::IggyBackend;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use std::sync::Arc;
use std::time::Instant;

/// Messages per native send: about what librdkafka's linger.ms=5 batches hold here.
const NATIVE_BATCH: usize = 100;
const POLL_COUNT: u32 = 1_000;

async fn native(client: &IggyClient) -> anyhow::Result<Figures> {
    let stream = Identifier::named("kig-native-bench")?;
    let topic = Identifier::named(TOPIC)?;
    let _ = client.create_stream("kig-native-bench").await;
    let _ = client
        .create_topic(
            &stream,
            TOPIC,
            &TopicCreateOptions {
                partitions_count: Some(1),
                ..Default::default()
            },
        )
        .await;
    let value = Bytes::from(vec![b'x'; RECORD_BYTES]);
    let (mut produce_s, mut fetch_s) = (0.0, 0.0);
    let mut latencies = Vec::new();
    let consumer = Consumer::new(Identifier::named("kig-native-reader")?);
    let mut next = 0u64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..ROUND_RECORDS / NATIVE_BATCH {
            let mut batch: Vec<IggyMessage> = (0..NATIVE_BATCH)
                .map(|_| IggyMessage::builder().payload(value.clone()).build().expect("message"))
                .collect();
            let sent = Instant::now();
            client
                .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut batch)
                .await?;
            // Every message of a send is confirmed at once: each gets the send's latency.
            latencies.extend(std::iter::repeat_n(sent.elapsed(), NATIVE_BATCH));
        }
        produce_s += start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut seen = 0;
        while seen < ROUND_RECORDS {
            let polled = client
                .poll_messages(
                    &stream,
                    &topic,
                    Some(0),
                    &consumer,
                    &PollingStrategy::offset(next),
                    POLL_COUNT,
                    false,
                )
                .await?;
            seen += polled.messages.len();
            next += polled.messages.len() as u64;
        }
        fetch_s += start.elapsed().as_secs_f64();
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)].as_secs_f64() * 1e3;
    Ok(Figures {
        produce_s,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        fetch_s,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = match discover().await? {
        Discovery::Found(server) => server,
        Discovery::Skipped(why) => {
            println!("real-Iggy bench: SKIPPED ({why})");
            return Ok(());
        }
    };
    println!(
        "real-Iggy bench against {}: {ROUNDS} rounds of {ROUND_RECORDS} records of {RECORD_BYTES} B",
        server.how
    );
    let backend = IggyBackend::connect(&server.address, &server.username, &server.password, 8).await?;
    backend.ensure_stream("kafka").await?;
    backend
        .create_topic(
            "kafka",
            TOPIC,
            TopicSpec {
                partitions: 1,
                message_expiry_us: None,
            },
        )
        .await?;
    let gateway = LocalGateway::serve(Arc::new(backend), LocalOptions::default()).await?;
    let through_gateway = run(&gateway.endpoint.bootstrap).await;
    print("gateway (rdkafka)", &through_gateway);
    gateway.stop().await;

    let client = IggyClient::builder_from_connection_string(&format!(
        "iggy://{}:{}@{}",
        server.username, server.password, server.address
    ))?
    .build()?;
    client.connect().await?;
    let direct = native(&client).await?;
    print("native Iggy SDK", &direct);
    println!(
        "ratio gateway/native: produce {:.2}, fetch {:.2} (throughput; 1 = as fast as the SDK)",
        direct.produce_s / through_gateway.produce_s,
        direct.fetch_s / through_gateway.fetch_s
    );
    Ok(())
}
