//! Record batch cases: compressed batches round trip, decompression bombs against the
//! per-request budget, corrupt CRCs and old magic bytes.

use super::*;

// ---------------------------------------------------------------------------------------------
// Decompression budget.

pub async fn decompression_bomb_is_message_too_large_and_connection_survives(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "BATCH-BUDGET-2's decompression budget is this gateway's limit",
    ) {
        return Ok(skip);
    }
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-bomb", 1).await?;
    let zeros = vec![0u8; max + (1 << 20)];
    let timestamp = now_ms()?;
    for (stored, codec) in codecs().into_iter().enumerate() {
        let spec = BatchSpec::plain(codec);
        let bomb = encode(&spec, &[(timestamp, record(None, Some(&zeros), &[]))])?;
        ensure!(
            bomb.len() + 4096 < max,
            "the {} bomb is {} bytes compressed and does not fit max_frame_size {max}",
            codec.name(),
            bomb.len()
        );
        let answer = produce(&mut client, &topic, 0, bomb).await.with_context(|| {
            format!(
                "the {} bomb ({} bytes expanding to {} bytes)",
                codec.name(),
                zeros.len(),
                zeros.len()
            )
        })?;
        expect_code(
            &answer,
            MESSAGE_TOO_LARGE,
            &format!("a {} batch expanding past max_frame_size", codec.name()),
        )?;
        // The connection stays open and usable: another API, then a normal Produce.
        api_versions_answers(
            &mut client,
            &format!("on the connection that sent the {} bomb", codec.name()),
        )
        .await?;
        let small = encode(&spec, &[(timestamp, record(None, Some(b"after the bomb"), &[]))])?;
        let base = produce_ok(&mut client, &topic, 0, small)
            .await
            .with_context(|| format!("a small {} Produce after the bomb", codec.name()))?;
        ensure!(
            base == stored as i64,
            "the small {} Produce landed at offset {base}, expected {stored}: the bomb wrote something",
            codec.name()
        );
    }
    ensure!(
        latest(&mut client, &topic, 0).await? == 4,
        "the partition does not hold exactly the four small records"
    );
    Ok(Outcome::Passed)
}

pub async fn decompression_budget_is_shared_by_the_whole_request(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "BATCH-BUDGET-2's decompression budget is this gateway's limit",
    ) {
        return Ok(skip);
    }
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-budget", 2).await?;
    // Each batch alone expands to a little over half the budget: one fits, two do not.
    let half = vec![0u8; max / 2 + (256 << 10)];
    let timestamp = now_ms()?;
    let batch = encode(
        &BatchSpec::plain(Compression::Gzip),
        &[(timestamp, record(None, Some(&half), &[]))],
    )?;
    let answers = produce_all(
        &mut client,
        PRODUCE_V,
        &produce_request(&topic, vec![(0, batch.clone()), (1, batch.clone())], -1),
    )
    .await?;
    let codes: Vec<i16> = answers.iter().map(|a| a.error_code).collect();
    ensure!(
        codes.iter().filter(|&&c| c == MESSAGE_TOO_LARGE).count() == 1 && codes.contains(&NONE),
        "two partitions whose batches together expand past max_frame_size answered {codes:?}; \
         one budget for the whole request should refuse exactly one with MESSAGE_TOO_LARGE (10)"
    );
    let refused = answers
        .iter()
        .find(|a| a.error_code == MESSAGE_TOO_LARGE)
        .expect("one refused")
        .index;
    let accepted = 1 - refused;
    ensure!(
        latest(&mut client, &topic, refused).await? == 0,
        "the refused partition {refused} stored something"
    );
    ensure!(
        latest(&mut client, &topic, accepted).await? == 1,
        "the accepted partition {accepted} did not store its record"
    );
    // Alone, the refused partition's batch fits: the refusal came from the shared budget.
    produce_ok(&mut client, &topic, refused, batch)
        .await
        .context("the refused batch sent alone")?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Produce, Fetch, offsets.

pub async fn compressed_batches_round_trip_uncompressed(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-codecs", 1).await?;
    let t = now_ms()?;
    let payload = b"compressible compressible compressible compressible".to_vec();
    let sent = |codec: &str| -> Vec<(i64, Record)> {
        (0..3)
            .map(|i| {
                let key = format!("{codec}-{i}");
                (
                    t + i,
                    record(
                        Some(key.as_bytes()),
                        Some(&payload),
                        &[(b"codec", Some(codec.as_bytes()))],
                    ),
                )
            })
            .collect()
    };
    let mut batches: Vec<(&str, Bytes)> = Vec::new();
    for codec in codecs() {
        batches.push((codec.name(), encode(&BatchSpec::plain(codec), &sent(codec.name()))?));
    }
    // The Java client's xerial-framed snappy, and a zstd section built outside encode_batch.
    for (name, codec, compressor) in [
        (
            "snappy-xerial",
            Compression::Snappy,
            compress_snappy_xerial as fn(&[u8]) -> Vec<u8>,
        ),
        ("zstd-direct", Compression::Zstd, |b: &[u8]| {
            compress(Compression::Zstd, b)
        }),
    ] {
        let records = sent(name);
        let timestamps: Vec<i64> = records.iter().map(|(t, _)| *t).collect();
        let header = batch_header(&BatchSpec::plain(codec), &timestamps);
        let mut section = BytesMut::new();
        for (i, (ts, r)) in records.iter().enumerate() {
            let r = Record {
                offset_delta: i as i32,
                timestamp_delta: ts - header.base_timestamp,
                ..r.clone()
            };
            encode_record(&mut section, &r);
        }
        batches.push((name, write_batch(&header, records.len() as i32, &compressor(&section))));
    }
    for (i, (name, batch)) in batches.iter().enumerate() {
        let base = produce_ok(&mut client, &topic, 0, batch.clone())
            .await
            .with_context(|| format!("a {name} batch"))?;
        ensure!(
            base == 3 * i as i64,
            "the {name} batch landed at {base}, expected {}",
            3 * i
        );
    }
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 0).await?)?;
    ensure!(
        fetched.len() == 3 * batches.len(),
        "fetched {} records, produced {}",
        fetched.len(),
        3 * batches.len()
    );
    for (f, (offset, (name, i))) in fetched.iter().zip(
        batches
            .iter()
            .flat_map(|(n, _)| (0..3).map(move |i| (*n, i)))
            .enumerate(),
    ) {
        ensure!(
            f.offset == offset as i64,
            "record {offset} fetched at offset {}",
            f.offset
        );
        ensure!(
            f.timestamp == t + i,
            "the {name} record {i} came back with timestamp {}",
            f.timestamp
        );
        let key = format!("{name}-{i}");
        check_record(
            &format!("{name} record {i}"),
            &f.record,
            &expected(
                Some(key.as_bytes()),
                Some(&payload),
                &[(b"codec", Some(name.as_bytes()))],
            ),
        )?;
    }
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Produce refusals.

/// What Produce v3+ answers for a magic-1 batch. BATCH-MAGIC-1: the gateway refuses the format
/// as unsupported (43). Kafka refuses any batch but magic 2 in Produce v3+ as an invalid record
/// (87): ProduceRequest.validateRecords throws InvalidRecordException, which
/// KafkaApis.handleProduceRequest answers through Errors.forException.
fn magic_1_answer(profile: Profile) -> i16 {
    match profile {
        Profile::Gateway => UNSUPPORTED_FOR_MESSAGE_FORMAT,
        Profile::Kafka => INVALID_RECORD,
    }
}

pub async fn corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-corrupt", 1).await?;
    let t = now_ms()?;
    let good = values_batch(t, &[b"first", b"second"])?;

    let mut flipped = BytesMut::from(&good[..]);
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    let flipped = flipped.freeze();

    let mut magic_1 = BytesMut::from(&good[..]);
    magic_1[16] = 1;

    let transactional = encode(
        &BatchSpec {
            attributes: BatchAttributes(0x10),
            ..BatchSpec::plain(Compression::None)
        },
        &[(t, record(None, Some(b"txn"), &[]))],
    )?;
    let control = encode(
        &BatchSpec {
            attributes: BatchAttributes(0x20),
            ..BatchSpec::plain(Compression::None)
        },
        &[(t, record(None, Some(b"ctl"), &[]))],
    )?;

    // A batch declaring two records and holding one.
    let miscounted = {
        let r = Record {
            offset_delta: 0,
            ..record(None, Some(b"only"), &[])
        };
        let mut section = BytesMut::new();
        encode_record(&mut section, &r);
        let header = batch_header(&BatchSpec::plain(Compression::None), &[t, t]);
        write_batch(&header, 2, &section)
    };

    // A gzip batch whose records section is not gzip.
    let not_gzip = write_batch(
        &batch_header(&BatchSpec::plain(Compression::Gzip), &[t]),
        1,
        b"this is not a gzip stream",
    );

    let mut good_then_corrupt = BytesMut::from(&good[..]);
    good_then_corrupt.extend_from_slice(&flipped);

    let refusals: Vec<(&str, Bytes, i16)> = vec![
        ("a flipped byte in the records (BATCH-CRC-1)", flipped, CORRUPT_MESSAGE),
        (
            "magic byte 1 (BATCH-MAGIC-1)",
            magic_1.freeze(),
            magic_1_answer(endpoint.profile),
        ),
        ("a transactional batch (PRODUCE-TXN-1)", transactional, INVALID_RECORD),
        ("a control batch (PRODUCE-TXN-1)", control, INVALID_RECORD),
        (
            "a record count above the records present (BATCH-DECODE-1)",
            miscounted,
            CORRUPT_MESSAGE,
        ),
        (
            "a gzip batch holding no gzip stream (BATCH-COMPRESSION-1)",
            not_gzip,
            CORRUPT_MESSAGE,
        ),
        (
            "a good batch followed by a corrupt one (PRODUCE-ATOMIC-1)",
            good_then_corrupt.freeze(),
            CORRUPT_MESSAGE,
        ),
    ];
    for (what, records, code) in refusals {
        // PRODUCE-TXN-1 (a deviation): Kafka writes transactional batches, within a transaction.
        if endpoint.profile.is_kafka() && what.contains("PRODUCE-TXN-1") {
            continue;
        }
        let answer = produce(&mut client, &topic, 0, records)
            .await
            .with_context(|| what.to_string())?;
        expect_code(&answer, code, what)?;
        ensure!(
            latest(&mut client, &topic, 0).await? == 0,
            "PRODUCE-ATOMIC-1: {what} was refused but records were written"
        );
    }

    // Null records, empty records, and a batch holding no record (PRODUCE-ATOMIC-1, ERR-MAP-2).
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(None)])]);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, CORRUPT_MESSAGE, "a Produce with null records")?;
    let answer = produce(&mut client, &topic, 0, Bytes::new()).await?;
    expect_code(&answer, CORRUPT_MESSAGE, "a Produce with empty records")?;
    let empty_batch = write_batch(&batch_header(&BatchSpec::plain(Compression::None), &[t]), 0, &[]);
    let answer = produce(&mut client, &topic, 0, empty_batch).await?;
    expect_code(&answer, CORRUPT_MESSAGE, "a batch of zero records")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "an empty Produce wrote records"
    );

    // A transactional id on the request refuses every partition (PRODUCE-TXN-1, a deviation:
    // Kafka checks it against the producer's transaction instead).
    if !endpoint.profile.is_kafka() {
        let request = produce_request(&topic, vec![(0, good.clone())], -1)
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("kig-txn"))));
        let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
        expect_code(&answer, INVALID_RECORD, "a Produce carrying a transactional id")?;
        ensure!(
            latest(&mut client, &topic, 0).await? == 0,
            "a Produce carrying a transactional id wrote records"
        );
    }

    // The connection and the partition are fine: the good batch alone lands at 0.
    let base = produce_ok(&mut client, &topic, 0, good).await?;
    ensure!(
        base == 0,
        "the good batch landed at {base}, expected 0: a refused batch wrote something"
    );
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_1_is_unsupported_by_the_gateway_and_an_invalid_record_to_kafka() {
        assert_eq!(magic_1_answer(Profile::Gateway), 43);
        assert_eq!(magic_1_answer(Profile::Kafka), 87);
    }
}
