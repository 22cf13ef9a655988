//! TLS on the gateway's Kafka listener (docs/spec/auth.md, "TLS"), through librdkafka built with
//! OpenSSL, against an in-process gateway on the embedded backend with a generated PKI.

use anyhow::{ensure, Context};
use kafka_iggy_conformance::endpoint::{shared_backend, LocalGateway, LocalOptions};
use kafka_iggy_conformance::tls_fixture::Pki;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The failure guard of every wait that should succeed.
const WAIT: Duration = Duration::from_secs(30);
/// How long a client that should get no service is given to get some anyway.
const REFUSED_WITHIN: Duration = Duration::from_secs(5);

async fn tls_gateway(pki: &Pki, require_client_certificates: bool) -> LocalGateway {
    LocalGateway::serve(
        shared_backend(),
        LocalOptions {
            tls: Some(pki.server_settings(require_client_certificates)),
            tls_ca: Some(pki.ca.clone()),
            ..LocalOptions::default()
        },
    )
    .await
    .expect("the TLS gateway starts")
}

/// A client of `gateway` over SSL trusting its CA, presenting `pki`'s client certificate when
/// `with_certificate`.
fn ssl_config(gateway: &LocalGateway, pki: &Pki, with_certificate: bool) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &gateway.endpoint.bootstrap)
        .set("client.id", "kafka-iggy-tls-suite")
        .set("security.protocol", "SSL")
        .set(
            "ssl.ca.location",
            gateway
                .tls_ca
                .as_ref()
                .expect("a TLS gateway names its CA")
                .to_str()
                .unwrap(),
        );
    if with_certificate {
        config
            .set("ssl.certificate.location", pki.client_cert.to_str().unwrap())
            .set("ssl.key.location", pki.client_key.to_str().unwrap());
    }
    config
}

/// Fetches the metadata of one (unknown) topic on a blocking thread: Ok with the broker count.
/// One topic, not all: the gateway refuses librdkafka's all-topics Metadata v12 in plaintext
/// too, which would make every refusal below pass for the wrong reason.
async fn metadata(config: ClientConfig, timeout: Duration) -> anyhow::Result<usize> {
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = config.create().context("creating the client")?;
        let metadata = consumer
            .fetch_metadata(Some("tls-suite-probe"), timeout)
            .context("fetching metadata")?;
        Ok(metadata.brokers().len())
    })
    .await?
}

async fn create_topic(config: &ClientConfig, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = config.create().context("creating the admin client")?;
    let options = AdminOptions::new()
        .request_timeout(Some(WAIT))
        .operation_timeout(Some(WAIT));
    let results = admin
        .create_topics(&[NewTopic::new(topic, 1, TopicReplication::Fixed(1))], &options)
        .await?;
    ensure!(results == [Ok(topic.to_string())], "CreateTopics {topic}: {results:?}");
    Ok(())
}

/// Produces ten records to a new topic and consumes them back, all over SSL.
async fn produce_and_consume_ten(gateway: &LocalGateway, config: &ClientConfig) -> anyhow::Result<()> {
    let topic = gateway.endpoint.unique_topic("tls");
    create_topic(config, &topic).await?;
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the producer")?;
    for i in 0..10 {
        let payload = format!("record-{i}");
        let key = format!("key-{i}");
        producer
            .send(FutureRecord::to(&topic).payload(&payload).key(&key).partition(0), WAIT)
            .await
            .map_err(|(e, _)| anyhow::anyhow!("delivery of record {i}: {e}"))?;
    }
    let consumer: StreamConsumer = config
        .clone()
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut payloads = Vec::new();
    while payloads.len() < 10 {
        let message = tokio::time::timeout(WAIT, consumer.recv())
            .await
            .with_context(|| format!("only {} of 10 records within {WAIT:?}", payloads.len()))??;
        payloads.push(String::from_utf8(message.payload().unwrap_or_default().to_vec())?);
    }
    let expected: Vec<String> = (0..10).map(|i| format!("record-{i}")).collect();
    ensure!(payloads == expected, "consumed {payloads:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_tls_1_rdkafka_produces_and_consumes_ten_records_over_ssl() {
    let pki = Pki::generate().unwrap();
    let gateway = tls_gateway(&pki, false).await;
    produce_and_consume_ten(&gateway, &ssl_config(&gateway, &pki, false))
        .await
        .unwrap();
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_tls_1_a_plaintext_client_gets_no_service_from_the_tls_listener() {
    let pki = Pki::generate().unwrap();
    let gateway = tls_gateway(&pki, false).await;
    // librdkafka speaking plaintext: served by a plaintext gateway, not by the TLS one.
    let plain_gateway = LocalGateway::start().await.unwrap();
    let mut plaintext = ClientConfig::new();
    plaintext.set("bootstrap.servers", &plain_gateway.endpoint.bootstrap);
    assert_eq!(metadata(plaintext.clone(), WAIT).await.unwrap(), 1);
    plain_gateway.stop().await;
    plaintext.set("bootstrap.servers", &gateway.endpoint.bootstrap);
    let result = metadata(plaintext, REFUSED_WITHIN).await;
    assert!(result.is_err(), "a plaintext client got metadata: {result:?}");
    // A raw ApiVersions v0: the connection closes with at most a TLS alert, never a response.
    let mut stream = tokio::net::TcpStream::connect(&gateway.endpoint.bootstrap)
        .await
        .unwrap();
    let mut frame = 10i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    frame.extend_from_slice(&0i16.to_be_bytes()); // v0
    frame.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    stream.write_all(&frame).await.unwrap();
    let mut received = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut received))
        .await
        .expect("the gateway closes the plaintext connection")
        .ok();
    assert!(
        received.is_empty() || received[0] == 21,
        "a plaintext ApiVersions got {received:?}, not at most a TLS alert"
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_tls_2_with_a_client_ca_a_client_certificate_is_required() {
    let pki = Pki::generate().unwrap();
    let gateway = tls_gateway(&pki, true).await;
    let with = ssl_config(&gateway, &pki, true);
    assert_eq!(metadata(with.clone(), WAIT).await.unwrap(), 1);
    produce_and_consume_ten(&gateway, &with).await.unwrap();
    let without = metadata(ssl_config(&gateway, &pki, false), REFUSED_WITHIN).await;
    assert!(
        without.is_err(),
        "a client without a certificate got metadata: {without:?}"
    );
    // A certificate from another CA is refused too.
    let other = Pki::generate().unwrap();
    let foreign = ssl_config(&gateway, &pki, false)
        .set("ssl.certificate.location", other.client_cert.to_str().unwrap())
        .set("ssl.key.location", other.client_key.to_str().unwrap())
        .clone();
    let foreign = metadata(foreign, REFUSED_WITHIN).await;
    assert!(
        foreign.is_err(),
        "a client with another CA's certificate got metadata: {foreign:?}"
    );
    gateway.stop().await;
}
