//! Cases driven by librdkafka (the `rdkafka` crate): what real clients do.
//!
//! Every case creates its own topics (unique names) through the admin client, so it runs
//! against any Kafka endpoint. Waits are bounded and fail the case when they run out; nothing
//! sleeps to synchronise.
//!
//! Configuration, chosen so that no case needs a group coordinator (the gateway had none when
//! these cases were written, and a case about records should not depend on one):
//!
//! - Consumers set a unique `group.id`: librdkafka refuses `assign()` without one ("Requires a
//!   consumer with group.id configured", `rd_kafka_assign0`), even though an assigned consumer
//!   never joins the group. With a `group.id` librdkafka looks for a coordinator only on
//!   brokers that advertise FindCoordinator; when none does, the group just waits for one,
//!   silently. Partitions assigned at an absolute or logical (BEGINNING, END) offset start
//!   fetching without a coordinator (`rd_kafka_assignment_serve_pending`); only a stored
//!   offset would need one (OffsetFetch). So: explicit start offsets,
//!   `enable.auto.commit=false`, `enable.auto.offset.store=false`, never commit.
//! - `enable.partition.eof=true`: the consumer reports reaching the high watermark. That is how
//!   a case knows, without sleeping, that an END start offset has been resolved, and that no
//!   record follows the ones it expects.
//! - `auto.offset.reset=error`: an out-of-range start or fetch offset fails the case instead of
//!   being silently reset.
//! - `check.crcs=true`: the consumer verifies the CRC32C of every batch Fetch builds.
//! - Metadata and watermark queries go through a consumer without `group.id` (librdkafka allows
//!   that for everything but assign/subscribe), so asking for a topic never auto-creates it
//!   (`allow.auto.create.topics` is false for consumers, true for producer-type clients such as
//!   the admin client). Those calls block, so they run on tokio's blocking pool.
//! - `debug` stays off and `log_level` is 5 (notices and above); producers keep what is logged
//!   to quote it when a delivery fails.
//! - The mapping cases' producers set `statistics.interval.ms`: librdkafka silently sends a
//!   batch uncompressed when it judges from ApiVersions that the broker lacks the codec (lz4
//!   needs FindCoordinator v0 advertised, zstd Produce v7 and Fetch v10), and the batch sizes
//!   in its statistics are how a case sees that the codec was really used.

use super::{require_apis, Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{anyhow, bail, ensure, Context as _};
use kafka_protocol::messages::ApiKey;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Message, Offset, Statistics, Timestamp, TopicPartitionList};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The rules the every-mapping-case round trip checks, the same for each codec.
const EVERY_MAPPING_CASE_RULES: &[&str] = &[
    "MAP-KEY-1",
    "MAP-VALUE-1",
    "MAP-VALUE-2",
    "MAP-HEADER-1",
    "ENV-TRIGGER-KEY-LEN-1",
    "ENV-TRIGGER-HEADER-VALUE-1",
    "ENV-TRIGGER-REPEAT-1",
    "BATCH-COMPRESSION-1",
    "FETCH-BATCH-1",
    "MAP-TS-1",
];

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            admin_client_creates_and_deletes_a_topic,
            ["TOPIC-EXISTS-1", "DELETETOPICS-1", "METADATA-2"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_none,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_gzip,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_snappy,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_lz4,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            produce_and_consume_every_mapping_case_with_zstd,
            EVERY_MAPPING_CASE_RULES,
            deviates: ["MAP-HEADER-1"]
        ),
        case!(
            idempotent_producer_produces_and_reads_back,
            ["PID-ALLOC-1", "DELIVERY-3"]
        ),
        case!(
            consumer_starting_at_latest_sees_only_new_records,
            ["LISTOFFSETS-LATEST-1"]
        ),
        case!(
            fetch_watermarks_match_produced_count,
            ["LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-LATEST-1"]
        ),
        case!(
            rdkafka_metadata_for_all_topics,
            ["LIMIT-TRAILING-BYTES-1", "METADATA-2"]
        ),
    ]
}

mod support;
use support::*;

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

/// CreateTopics with 3 partitions, Metadata lists them (each led by a listed broker, replicas
/// and ISR that broker alone), a second CreateTopics answers TOPIC_ALREADY_EXISTS, DeleteTopics
/// removes the topic from Metadata, and a second DeleteTopics answers UNKNOWN_TOPIC_OR_PARTITION.
/// librdkafka's metadata for all topics (a regex subscription's, an admin listing's) lists a
/// topic just created. Its request carries three bytes past the body, which closed the
/// connection until LIMIT-TRAILING-BYTES-1 ignored them as Kafka does.
pub async fn rdkafka_metadata_for_all_topics(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-all-topics");
    create_topic(&endpoint, &topic, 2).await?;
    let client = metadata_client(&endpoint)?;
    let listed = {
        let client = client.clone();
        blocking(move || client.fetch_metadata(None, WAIT).context("Metadata for all topics")).await?
    };
    ensure!(
        topic_state(&listed, &topic) == TopicState::Partitions(vec![0, 1]),
        "{topic} in the all-topics metadata: {:?}",
        topic_state(&listed, &topic)
    );
    close(client).await;
    Ok(Outcome::Passed)
}

pub async fn admin_client_creates_and_deletes_a_topic(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DeleteTopics]).await? {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("rdkafka-admin");
    let admin = admin_client(&endpoint)?;
    let metadata_client = metadata_client(&endpoint)?;
    let new_topic = NewTopic::new(&topic, 3, TopicReplication::Fixed(1));

    let created = admin
        .create_topics([&new_topic], &admin_options())
        .await
        .context("CreateTopics")?;
    ensure!(
        created == [Ok(topic.clone())],
        "CreateTopics of a new topic: {created:?}"
    );

    let metadata = await_topic_state(
        &metadata_client,
        &topic,
        "3 partitions",
        |s| matches!(s, TopicState::Partitions(p) if sorted(p.clone()) == [0, 1, 2]),
    )
    .await?;
    let brokers: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    let listed = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| anyhow!("{topic} vanished from Metadata"))?;
    for p in listed.partitions() {
        ensure!(p.error().is_none(), "partition {} reports {:?}", p.id(), p.error());
        ensure!(
            brokers.contains(&p.leader()),
            "partition {} is led by {}, not one of the brokers {brokers:?}",
            p.id(),
            p.leader()
        );
        ensure!(
            p.replicas() == [p.leader()] && p.isr() == [p.leader()],
            "partition {}: replicas {:?} and ISR {:?}, expected the leader {} alone",
            p.id(),
            p.replicas(),
            p.isr(),
            p.leader()
        );
    }

    let again = admin
        .create_topics([&new_topic], &admin_options())
        .await
        .context("second CreateTopics")?;
    ensure!(
        again == [Err((topic.clone(), RDKafkaErrorCode::TopicAlreadyExists))],
        "CreateTopics of an existing topic: {again:?}, expected TopicAlreadyExists"
    );

    let deleted = admin
        .delete_topics(&[&topic], &admin_options())
        .await
        .context("DeleteTopics")?;
    ensure!(
        deleted == [Ok(topic.clone())],
        "DeleteTopics of an existing topic: {deleted:?}"
    );
    await_topic_state(&metadata_client, &topic, "the topic gone", |s| {
        matches!(
            s,
            TopicState::Absent | TopicState::Error(RDKafkaErrorCode::UnknownTopicOrPartition)
        )
    })
    .await?;

    let deleted_again = admin
        .delete_topics(&[&topic], &admin_options())
        .await
        .context("second DeleteTopics")?;
    ensure!(
        deleted_again == [Err((topic.clone(), RDKafkaErrorCode::UnknownTopicOrPartition))],
        "DeleteTopics of a deleted topic: {deleted_again:?}, expected UnknownTopicOrPartition"
    );

    close(metadata_client).await;
    close(admin).await;
    Ok(Outcome::Passed)
}

/// A record time far from now (2009-02-13T23:31:30.123Z), so that a wrong unit or a substituted
/// append time cannot pass.
const EXPLICIT_TIMESTAMP_MS: i64 = 1_234_567_890_123;

/// The length of the one large, compressible value among [`mapping_specs`].
const BIG_VALUE_LEN: usize = 4096;

/// The records of the mapping cases: every stored form, in one producer batch.
fn mapping_specs() -> Vec<Spec> {
    // Compressible, and large enough that librdkafka keeps the compressed batch (it sends a
    // batch uncompressed when compression would not make it smaller).
    let big_value: Vec<u8> = b"the quick brown fox jumps over the lazy dog; "
        .iter()
        .copied()
        .cycle()
        .take(BIG_VALUE_LEN)
        .collect();
    let long_key: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
    vec![
        // Plain: MAP-KEY-1, MAP-VALUE-2, MAP-HEADER-1 (headers come back sorted).
        Spec::new("plain, keyed, headers zeta then alpha")
            .key("key-plain")
            .value(big_value)
            .header("zeta", Some(b"last letter"))
            .header("alpha", Some(b"first letter")),
        // Placeholder, null value: MAP-VALUE-1, headers still sorted.
        Spec::new("tombstone")
            .key("key-tombstone")
            .header("zeta", Some(b"z"))
            .header("alpha", Some(b"a")),
        // Placeholder, empty value, null key: MAP-VALUE-1, MAP-KEY-1.
        Spec::new("empty value, null key").value(Vec::new()),
        // A single zero byte is a plain value, not a placeholder: MAP-VALUE-2.
        Spec::new("value of one zero byte").key("key-zero").value(vec![0u8]),
        // Envelope, key over 255 bytes: ENV-TRIGGER-KEY-LEN-1; headers keep their order.
        Spec::new("300-byte key")
            .key(long_key)
            .value("value-long-key")
            .header("zeta", Some(b"1"))
            .header("alpha", Some(b"2"))
            .envelope(),
        // Envelope, null header value: ENV-TRIGGER-HEADER-VALUE-1.
        Spec::new("null header value")
            .key("key-null-header")
            .value("value-null-header")
            .header("zeta", None)
            .header("alpha", Some(b"a"))
            .envelope(),
        // Envelope, repeated header name: ENV-TRIGGER-REPEAT-1.
        Spec::new("repeated header name")
            .key("key-repeat")
            .value("value-repeat")
            .header("dup", Some(b"first"))
            .header("alpha", Some(b"between"))
            .header("dup", Some(b"second"))
            .envelope(),
        // Explicit timestamp: MAP-TS-1, exact to the millisecond.
        Spec::new("explicit timestamp")
            .key("key-timestamp")
            .value("value-timestamp")
            .timestamp(EXPLICIT_TIMESTAMP_MS),
        // And a plain record after it, at the current time again.
        Spec::new("plain after the explicit timestamp")
            .key("key-last")
            .value("value-last")
            .header("h", Some(b"v")),
    ]
}

/// Produces [`mapping_specs`] in one batch compressed with `codec` to a new one-partition topic,
/// then reads them back from the beginning and checks every field.
async fn produce_and_consume_every_mapping_case(endpoint: Endpoint, codec: &str) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic(&format!("rdkafka-mapping-{codec}"));
    create_topic(&endpoint, &topic, 1).await?;
    let specs = mapping_specs();

    let producer = producer(
        &endpoint,
        &[
            ("compression.type", codec),
            // Every record is enqueued before any is sent; linger lets them share a batch.
            ("linger.ms", "100"),
            ("batch.num.messages", "1000"),
            // Statistics report the size of each batch as sent: see below.
            ("statistics.interval.ms", "100"),
        ],
    )?;
    let deliveries = produce_all(&producer, &topic, 0, &specs)
        .await
        .with_context(|| format!("producing with compression.type={codec}"))?;
    check_deliveries(&deliveries, 0, 0, &specs)?;
    // librdkafka quietly sends a batch uncompressed when it concludes from ApiVersions that the
    // broker lacks the codec (lz4 needs FindCoordinator v0 advertised, zstd Produce v7 and
    // Fetch v10), or when compressing does not make the batch smaller. Only the size of what it
    // sent tells: with the big value inside, an uncompressed batch is larger than that value,
    // and a compressed one much smaller.
    let sent = producer.events.batches_of(&topic).await?;
    if codec == "none" {
        ensure!(
            sent.max_bytes > BIG_VALUE_LEN as i64,
            "the uncompressed batch measured {} bytes, not more than the {BIG_VALUE_LEN}-byte \
             value it holds: the size check cannot tell compressed from uncompressed ({sent:?})",
            sent.max_bytes
        );
    } else {
        ensure!(
            sent.max_bytes < BIG_VALUE_LEN as i64,
            "librdkafka sent the records uncompressed ({} bytes for {} batch(es), more than the \
             {BIG_VALUE_LEN}-byte value alone) although compression.type={codec}, so decoding {codec} \
             (BATCH-COMPRESSION-1) was not exercised; librdkafka does this when the broker's \
             ApiVersions fail its gate for the codec (lz4: FindCoordinator v0; zstd: Produce v7 \
             and Fetch v10)",
            sent.max_bytes,
            sent.batches
        );
    }

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::Beginning)?;
    let received = consume_exactly(&consumer, specs.len())
        .await
        .with_context(|| format!("reading back what was produced with {codec}"))?;
    check_received(&received, &specs, &deliveries, 0, 0, endpoint.profile)
        .with_context(|| format!("compression.type={codec}"))?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

pub async fn produce_and_consume_every_mapping_case_with_none(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "none").await
}

pub async fn produce_and_consume_every_mapping_case_with_gzip(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "gzip").await
}

pub async fn produce_and_consume_every_mapping_case_with_snappy(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "snappy").await
}

pub async fn produce_and_consume_every_mapping_case_with_lz4(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "lz4").await
}

pub async fn produce_and_consume_every_mapping_case_with_zstd(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    produce_and_consume_every_mapping_case(endpoint, "zstd").await
}

fn numbered_specs(prefix: &'static str, range: std::ops::Range<usize>) -> Vec<Spec> {
    range
        .map(|i| {
            Spec::new(prefix)
                .key(format!("{prefix}-key-{i}"))
                .value(format!("{prefix}-value-{i}"))
        })
        .collect()
}

/// An idempotent producer (InitProducerId, then batches with producer id, epoch and sequences)
/// delivers 100 records at offsets 0..100, and they read back in order.
pub async fn idempotent_producer_produces_and_reads_back(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const N: usize = 100;
    let topic = endpoint.unique_topic("rdkafka-idempotent");
    create_topic(&endpoint, &topic, 1).await?;
    let specs = numbered_specs("idempotent", 0..N);

    let producer = producer(&endpoint, &[("enable.idempotence", "true"), ("linger.ms", "5")])?;
    let deliveries = produce_all(&producer, &topic, 0, &specs)
        .await
        .context("producing with enable.idempotence=true")?;
    check_deliveries(&deliveries, 0, 0, &specs)?;
    if let Some((code, reason)) = producer.producer.client().fatal_error() {
        bail!("the idempotent producer raised a fatal error: {code:?}: {reason}");
    }

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::Beginning)?;
    let received = consume_exactly(&consumer, N).await?;
    check_received(&received, &specs, &deliveries, 0, 0, endpoint.profile)?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

/// A consumer assigned at END after 5 records resolves END to 5 (ListOffsets LATEST = HW): it
/// first reports the end of the partition, sees nothing of the first 5, and then reads exactly
/// the 3 records produced after that, at offsets 5, 6, 7.
pub async fn consumer_starting_at_latest_sees_only_new_records(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-latest");
    create_topic(&endpoint, &topic, 1).await?;
    let producer = producer(&endpoint, &[])?;

    let old = numbered_specs("old", 0..5);
    let old_deliveries = produce_all(&producer, &topic, 0, &old).await?;
    check_deliveries(&old_deliveries, 0, 0, &old)?;

    let consumer = assigned_consumer(&endpoint, &topic, 0, Offset::End)?;
    // The end-of-partition event means END was resolved and the fetcher sits at the HW: only
    // now are the new records produced, so they cannot have been counted into END.
    match next_event(&consumer, Instant::now() + WAIT)
        .await
        .context("waiting for the consumer at END to reach the end of the partition")?
    {
        Event::EndOfPartition => {}
        Event::Record(r) => bail!(
            "a consumer starting at END read an existing record: offset {} value {}",
            r.offset,
            show(&r.value)
        ),
    }

    let new = numbered_specs("new", 5..8);
    let new_deliveries = produce_all(&producer, &topic, 0, &new).await?;
    check_deliveries(&new_deliveries, 0, 5, &new)?;
    let received = consume_exactly(&consumer, new.len()).await?;
    check_received(&received, &new, &new_deliveries, 0, 5, endpoint.profile)?;

    close(consumer).await;
    close(producer.producer).await;
    Ok(Outcome::Passed)
}

/// Watermarks (ListOffsets EARLIEST and LATEST) of a partition as it fills: (0, 0) empty,
/// (0, 1) after one record, (0, 2) after two, (0, 7) after seven; the other partition of the
/// topic stays (0, 0).
pub async fn fetch_watermarks_match_produced_count(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("rdkafka-watermarks");
    create_topic(&endpoint, &topic, 2).await?;
    let client = metadata_client(&endpoint)?;
    let producer = producer(&endpoint, &[])?;

    let marks = fetch_watermarks(&client, &topic, 0).await?;
    ensure!(
        marks == (0, 0),
        "watermarks of an empty partition: {marks:?}, expected (0, 0)"
    );

    let specs = numbered_specs("watermark", 0..7);
    let mut produced = 0;
    for upto in [1, 2, 7] {
        let batch = &specs[produced..upto];
        let deliveries = produce_all(&producer, &topic, 0, batch).await?;
        check_deliveries(&deliveries, 0, produced as i64, batch)?;
        produced = upto;
        let marks = fetch_watermarks(&client, &topic, 0).await?;
        ensure!(
            marks == (0, produced as i64),
            "watermarks after {produced} records: {marks:?}, expected (0, {produced})"
        );
    }
    let other = fetch_watermarks(&client, &topic, 1).await?;
    ensure!(
        other == (0, 0),
        "watermarks of the partition nothing was produced to: {other:?}, expected (0, 0)"
    );

    close(producer.producer).await;
    close(client).await;
    Ok(Outcome::Passed)
}
