//! InitProducerId cases: transactional ids refused, producer ids carrying the gateway's instance
//! id, and the idempotent fields of Produce accepted and ignored.

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

pub async fn init_producer_id_and_idempotent_fields_are_ignored(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-idempotent", 1).await?;
    let pid = init_producer_id(
        &mut client,
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
    let t = now_ms()?;
    let idempotent = |producer_id: i64, producer_epoch: i16, base_sequence: i32| -> anyhow::Result<Bytes> {
        let spec = BatchSpec {
            producer_id,
            producer_epoch,
            base_sequence,
            ..BatchSpec::plain(Compression::None)
        };
        encode(&spec, &[(t, record(Some(b"k"), Some(b"idempotent"), &[]))])
    };
    let batch = idempotent(pid.producer_id.0, 0, 0)?;
    // The same batch twice (a retry), the second at Produce v3, then a sequence gap and an id
    // the gateway never handed out: all stored, with new offsets each time (DELIVERY-1).
    let sends: Vec<(&str, i16, Bytes)> = vec![
        ("the first send (sequence 0)", PRODUCE_V, batch.clone()),
        ("the same batch again at Produce v3 (a retry)", 3, batch),
        (
            "a sequence gap (sequence 100)",
            PRODUCE_V,
            idempotent(pid.producer_id.0, 0, 100)?,
        ),
        (
            "an unknown producer id and epoch",
            PRODUCE_V,
            idempotent(987_654_321, 5, 0)?,
        ),
    ];
    if endpoint.profile.is_kafka() {
        // DELIVERY-1 and PID-IGNORE-1 (deviations): Kafka recognises the retry and answers it
        // with the first send's offset without writing it again, and refuses the gap. (What
        // it does with an unknown producer id depends on the version; no rule to hold it to.)
        let expected = [(NONE, 0), (NONE, 0), (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)];
        for ((what, version, records), (code, offset)) in sends.into_iter().zip(expected) {
            let answer = produce_at(&mut client, version, &topic, 0, records)
                .await
                .with_context(|| what.to_string())?;
            expect_code(&answer, code, what)?;
            ensure!(
                code != NONE || answer.base_offset == offset,
                "{what} landed at {}, expected {offset}",
                answer.base_offset
            );
        }
        ensure!(
            latest(&mut client, &topic, 0).await? == 1,
            "the partition holds more than the first send: the retry or the gap was written"
        );
        return Ok(Outcome::Passed);
    }
    for (expected_offset, (what, version, records)) in sends.into_iter().enumerate() {
        let answer = produce_at(&mut client, version, &topic, 0, records)
            .await
            .with_context(|| what.to_string())?;
        ensure!(
            answer.error_code != OUT_OF_ORDER_SEQUENCE_NUMBER && answer.error_code != DUPLICATE_SEQUENCE_NUMBER,
            "PID-IGNORE-1: {what} answered {}",
            answer.error_code
        );
        expect_code(&answer, NONE, what)?;
        ensure!(
            answer.base_offset == expected_offset as i64,
            "{what} landed at {}, expected {expected_offset}",
            answer.base_offset
        );
    }
    ensure!(
        latest(&mut client, &topic, 0).await? == 4,
        "the partition does not hold all four sends, duplicate included"
    );
    Ok(Outcome::Passed)
}
