//! InitProducerId and idempotent Produce cases: transactional ids refused, producer ids carrying
//! the gateway's instance id, an idempotent producer's retry answered from its first write, a gap
//! and a stale epoch refused, and a plain producer's retry stored again.

use super::*;

// ---------------------------------------------------------------------------------------------
// InitProducerId.

pub async fn init_producer_id_with_transactional_id_is_unsupported_version(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
            endpoint.unique_topic("kig-txn"),
        ))))
        .with_transaction_timeout_ms(60_000);
    let response = init_producer_id(&mut client, &request).await?;
    // PID-TXN-1 (a deviation): Kafka hands transactional producers ids, from the transaction
    // coordinator (NOT_COORDINATOR from any other broker, a retriable wait while the
    // coordinator loads).
    let expected: &[i16] = match endpoint.profile {
        Profile::Gateway => &[UNSUPPORTED_VERSION],
        Profile::Kafka => &[
            NONE,
            NOT_COORDINATOR,
            COORDINATOR_NOT_AVAILABLE,
            COORDINATOR_LOAD_IN_PROGRESS,
        ],
    };
    ensure!(
        expected.contains(&response.error_code),
        "InitProducerId with a transactional id: error {}, expected one of {expected:?}",
        response.error_code
    );
    // The connection stays usable.
    api_versions_answers(&mut client, "after the refused InitProducerId").await?;
    Ok(Outcome::Passed)
}

pub async fn producer_ids_carry_the_instance_id(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PID-ALLOC-1 builds producer ids from this gateway's instance id",
    ) {
        return Ok(skip);
    }
    let Some(instance_id) = endpoint.instance_id else {
        return Ok(Outcome::Skipped(
            "the endpoint's instance id is unknown (--instance-id)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let plain = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    // v3+ may carry an existing producer id and epoch; the gateway ignores them.
    let with_old_id = plain
        .clone()
        .with_producer_id(ProducerId(12_345))
        .with_producer_epoch(7);
    let mut ids = Vec::new();
    for (what, request) in [("first", &plain), ("second, carrying id 12345 epoch 7", &with_old_id)] {
        let response = init_producer_id(&mut client, request).await?;
        ensure!(
            response.error_code == NONE,
            "InitProducerId ({what}): error {}",
            response.error_code
        );
        let id = response.producer_id.0;
        ensure!(
            id >= 0,
            "InitProducerId ({what}): producer id {id} is negative (bit 63 set)"
        );
        ensure!(
            id >> 47 == i64::from(instance_id),
            "InitProducerId ({what}): producer id {id:#x} holds instance {} in bits 47..=62, expected {instance_id}",
            id >> 47
        );
        ensure!(
            response.producer_epoch == 0,
            "InitProducerId ({what}): epoch {}, expected 0",
            response.producer_epoch
        );
        ids.push(id);
    }
    ensure!(
        ids[0] != ids[1],
        "two InitProducerId calls both got producer id {}",
        ids[0]
    );
    Ok(Outcome::Passed)
}

/// A producer id from InitProducerId, checked to start at epoch 0.
async fn new_producer_id(client: &mut Client) -> anyhow::Result<i64> {
    let pid = init_producer_id(
        client,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    )
    .await?;
    ensure!(pid.error_code == NONE, "InitProducerId: error {}", pid.error_code);
    ensure!(
        pid.producer_epoch == 0,
        "InitProducerId: epoch {}, expected 0",
        pid.producer_epoch
    );
    Ok(pid.producer_id.0)
}

/// A batch of `count` records from producer `producer_id` at `epoch`, from `base_sequence`
/// (-1s: a producer that is not idempotent).
fn batch_of(producer_id: i64, epoch: i16, base_sequence: i32, count: usize) -> anyhow::Result<Bytes> {
    let t = now_ms()?;
    let spec = BatchSpec {
        producer_id,
        producer_epoch: epoch,
        base_sequence,
        ..BatchSpec::plain(Compression::None)
    };
    let records: Vec<(i64, Record)> = (0..count)
        .map(|i| (t, record(Some(b"k"), Some(format!("record {i}").as_bytes()), &[])))
        .collect();
    encode(&spec, &records)
}

/// Sends each of `sends` (what, Produce version, records) to partition 0 of `topic` and checks
/// its error code and, when 0, its base offset.
async fn expect_answers(
    client: &mut Client,
    topic: &str,
    sends: Vec<(&str, i16, Bytes, i16, i64)>,
) -> anyhow::Result<()> {
    for (what, version, records, code, offset) in sends {
        let answer = produce_at(client, version, topic, 0, records)
            .await
            .with_context(|| what.to_string())?;
        expect_code(&answer, code, what)?;
        ensure!(
            code != NONE || answer.base_offset == offset,
            "{what} answered offset {}, expected {offset}",
            answer.base_offset
        );
    }
    Ok(())
}

pub async fn idempotent_retry_is_answered_with_its_first_offset(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-idempotent-retry", 1).await?;
    let pid = new_producer_id(&mut client).await?;
    let first = batch_of(pid, 0, 0, 3)?;
    // PRODUCER-DUP-1: the retry, at Produce v9 and again at v3, is answered with the first
    // send's offset and not written; a producer without an id in between shifts nothing.
    expect_answers(
        &mut client,
        &topic,
        vec![
            ("the first send (sequences 0..=2)", PRODUCE_V, first.clone(), NONE, 0),
            (
                "a batch of a producer without an id",
                PRODUCE_V,
                batch_of(-1, -1, -1, 1)?,
                NONE,
                3,
            ),
            ("the first batch again (a retry)", PRODUCE_V, first.clone(), NONE, 0),
            ("the first batch again at Produce v3", 3, first, NONE, 0),
            (
                "the next batch (sequence 3)",
                PRODUCE_V,
                batch_of(pid, 0, 3, 2)?,
                NONE,
                4,
            ),
        ],
    )
    .await?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 6,
        "the partition holds more than the 6 records sent once: a retry was written again"
    );
    Ok(Outcome::Passed)
}

pub async fn idempotent_sequence_gap_is_out_of_order(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-idempotent-gap", 1).await?;
    let pid = new_producer_id(&mut client).await?;
    // PRODUCER-SEQ-1: sequence 5 after 0..=1 leaves a gap; nothing of it is written.
    expect_answers(
        &mut client,
        &topic,
        vec![
            (
                "the first send (sequences 0..=1)",
                PRODUCE_V,
                batch_of(pid, 0, 0, 2)?,
                NONE,
                0,
            ),
            (
                "sequence 5 after 1 (a gap)",
                PRODUCE_V,
                batch_of(pid, 0, 5, 1)?,
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                -1,
            ),
            ("sequence 2, which follows", PRODUCE_V, batch_of(pid, 0, 2, 1)?, NONE, 2),
        ],
    )
    .await?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 3,
        "the partition holds more than the 3 records in sequence: the gap's batch was written"
    );
    Ok(Outcome::Passed)
}

pub async fn idempotent_stale_epoch_is_invalid_producer_epoch(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-idempotent-epoch", 1).await?;
    let pid = new_producer_id(&mut client).await?;
    // PRODUCER-EPOCH-1: the epoch bumped by the producer itself (as librdkafka and the Java
    // client do after an error) starts at sequence 0; the old epoch is refused from then on.
    expect_answers(
        &mut client,
        &topic,
        vec![
            ("epoch 0, sequence 0", PRODUCE_V, batch_of(pid, 0, 0, 1)?, NONE, 0),
            (
                "epoch 1 not starting at sequence 0",
                PRODUCE_V,
                batch_of(pid, 1, 4, 1)?,
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                -1,
            ),
            ("epoch 1, sequence 0", PRODUCE_V, batch_of(pid, 1, 0, 1)?, NONE, 1),
            (
                "epoch 0 again, sequence 1",
                PRODUCE_V,
                batch_of(pid, 0, 1, 1)?,
                INVALID_PRODUCER_EPOCH,
                -1,
            ),
        ],
    )
    .await?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 2,
        "the partition holds more than the 2 records accepted"
    );
    Ok(Outcome::Passed)
}

pub async fn plain_retry_is_stored_again(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-plain-retry", 1).await?;
    let plain = batch_of(-1, -1, -1, 2)?;
    // PRODUCER-NONE-1, DELIVERY-2: a producer without an id gives nothing to recognise its
    // retry by; the same batch is stored again, at least once.
    expect_answers(
        &mut client,
        &topic,
        vec![
            ("the first send", PRODUCE_V, plain.clone(), NONE, 0),
            ("the same batch again", PRODUCE_V, plain, NONE, 2),
        ],
    )
    .await?;
    Ok(Outcome::Passed)
}
