//! `make bench`: produce and fetch through the gateway on the embedded backend with librdkafka
//! and 1 KiB records, next to the same workload against librdkafka's built-in mock broker in the
//! same run. Prints figures; asserts nothing. Bounded: a fixed record count per run.

use kafka_iggy_conformance::bench::{print, run, RECORD_BYTES, ROUNDS, ROUND_RECORDS, TOPIC};
use kafka_iggy_conformance::endpoint::LocalGateway;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::mocking::MockCluster;

#[tokio::main]
async fn main() {
    // LIMIT-HEAP-1: this process hosts the gateway, so it runs with the gateway's malloc settings.
    println!("{}", kafka_iggy_gateway::heap_tuning::tune_heap().describe());
    println!("gateway bench: {ROUNDS} rounds of {ROUND_RECORDS} records of {RECORD_BYTES} B, one partition, librdkafka linger.ms=5");
    let gateway = LocalGateway::start().await.expect("gateway");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &gateway.endpoint.bootstrap)
        .create()
        .expect("admin");
    admin
        .create_topics(
            &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .expect("created");
    let through_gateway = run(&gateway.endpoint.bootstrap).await;
    print("gateway (embedded)", &through_gateway);
    gateway.stop().await;

    let mock = MockCluster::new(1).expect("mock cluster");
    mock.create_topic(TOPIC, 1, 1).expect("mock topic");
    let against_mock = run(&mock.bootstrap_servers()).await;
    print("librdkafka mock broker", &against_mock);
    println!(
        "ratio gateway/mock: produce {:.2}, fetch {:.2} (throughput; above 1 = gateway faster)",
        against_mock.produce_s / through_gateway.produce_s,
        against_mock.fetch_s / through_gateway.fetch_s
    );
}
