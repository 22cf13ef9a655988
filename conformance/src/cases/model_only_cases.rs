//! Cases that only an embedded model configured for them can reach, because the pinned real
//! server never takes the path they check on demand:
//!
//! - OFFSET-BASE-1's other path: Iggy stored a send but sent no confirmation of it, and Produce
//!   answers base offset -1. A real server confirms every send; the model withholds
//!   confirmations when built with `send_confirmations: false`.
//! - CO-LIMIT-1: an offset store refused for the per-partition key limit. The pinned server has
//!   no such limit (DIFF-13); the model has it, lowered here to one key with
//!   `consumer_offsets_max: 1`.
//!
//! For that reason these cases are not among [`super::all`] (which every endpoint runs):
//! `conformance/tests/model_only_suite.rs` starts, for each, the gateway it needs.

use super::group_cases::support::{close, commit_one, create_topic, fetch_one, produce_at, Client, NONE, WAIT};
use super::migration_cases::{kafka_record, produce_records, wire_read};
use super::Outcome;
use crate::endpoint::Endpoint;
use anyhow::{anyhow, ensure, Context as _};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

/// A record timestamp in ms, arbitrary but fixed.
const TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// Every case with the rules it checks, for the spec trace and the matrix.
pub const CASES: &[super::ListedCase] = &[
    super::ListedCase {
        name: "offset_base_1_an_unconfirmed_send_is_answered_minus_one",
        rules: &["OFFSET-BASE-1"],
    },
    super::ListedCase {
        name: "co_limit_1_an_offset_store_over_the_key_limit_is_unknown_server_error",
        rules: &["CO-LIMIT-1"],
    },
];

/// Against a gateway whose Iggy confirms no send: two Produce requests (wire, then librdkafka)
/// each succeed with base offset -1, whose records are all stored and read back at offsets
/// 0, 1, 2 in order.
pub async fn offset_base_1_an_unconfirmed_send_is_answered_minus_one(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("unconfirmed");
    create_topic(&endpoint, &topic, 1).await?;
    let records = vec![
        kafka_record(None, Some(b"first"), &[]),
        kafka_record(None, Some(b"second"), &[]),
    ];
    let base = produce_records(&endpoint, &topic, records, TIMESTAMP_MS).await?;
    ensure!(
        base == -1,
        "OFFSET-BASE-1: Produce of a send Iggy did not confirm answered base offset {base}, expected -1"
    );

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &endpoint.bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the producer")?;
    let delivered = producer
        .send(
            FutureRecord::<(), _>::to(&topic)
                .partition(0)
                .payload(b"third".as_slice()),
            WAIT,
        )
        .await
        .map_err(|(e, _)| anyhow!("librdkafka's Produce was refused: {e}"));
    close(producer).await;
    let delivery = delivered?;
    ensure!(
        delivery.offset == -1,
        "OFFSET-BASE-1: librdkafka's delivery report names offset {} for an unconfirmed send, expected -1 (unknown)",
        delivery.offset
    );

    let read = wire_read(&endpoint, &topic).await?;
    let got: Vec<(i64, Option<&[u8]>)> = read.iter().map(|r| (r.offset, r.value.as_deref())).collect();
    let want: Vec<(i64, Option<&[u8]>)> = vec![
        (0, Some(b"first".as_slice())),
        (1, Some(b"second".as_slice())),
        (2, Some(b"third".as_slice())),
    ];
    ensure!(
        got == want,
        "the unconfirmed sends read back as {got:?}, expected {want:?}"
    );
    Ok(Outcome::Passed)
}

/// Kafka's UNKNOWN_SERVER_ERROR.
const UNKNOWN_SERVER_ERROR: i16 = -1;

/// Against a gateway whose Iggy holds one consumer-offset key per partition: group A's commit
/// takes the partition's one key; group B's commit to the same partition is refused with
/// UNKNOWN_SERVER_ERROR and stores nothing; A commits again over its own key.
pub async fn co_limit_1_an_offset_store_over_the_key_limit_is_unknown_server_error(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("offset-keys");
    let (a, b) = (
        endpoint.unique_topic("offset-keys-a"),
        endpoint.unique_topic("offset-keys-b"),
    );
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    let mut client = Client::connect(&endpoint.bootstrap).await?;
    let code = commit_one(&mut client, &a, &topic, 0, 3).await?;
    ensure!(
        code == NONE,
        "group A's commit, the partition's first key: error {code}"
    );
    let code = commit_one(&mut client, &b, &topic, 0, 3).await?;
    ensure!(
        code == UNKNOWN_SERVER_ERROR,
        "CO-LIMIT-1: group B's commit over the key limit answered {code}, expected UNKNOWN_SERVER_ERROR ({UNKNOWN_SERVER_ERROR})"
    );
    let (offset, ..) = fetch_one(&mut client, &b, &topic, 0).await?;
    ensure!(offset == -1, "group B's refused commit left committed offset {offset}");
    let code = commit_one(&mut client, &a, &topic, 0, 4).await?;
    ensure!(code == NONE, "group A's second commit, over its own key: error {code}");
    let (offset, ..) = fetch_one(&mut client, &a, &topic, 0).await?;
    ensure!(offset == 4, "group A's committed offset is {offset}, expected 4");
    Ok(Outcome::Passed)
}
