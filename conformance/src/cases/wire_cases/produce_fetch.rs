//! Produce and Fetch cases: every mapping case round trips, partitions, acks=0, pipelining,
//! long polls, the high watermark, max_bytes and invalid timestamps.

use super::*;

/// What Fetch must return for one produced record.
pub(super) struct Expected {
    pub(super) key: Option<Vec<u8>>,
    pub(super) value: Option<Vec<u8>>,
    pub(super) headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

pub(super) fn expected(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) -> Expected {
    Expected {
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_vec(), v.map(<[u8]>::to_vec)))
            .collect(),
    }
}

/// A record as Kafka serves it back: exactly as produced, headers in their order.
pub(super) fn expected_as_sent(sent: &Record) -> Expected {
    Expected {
        key: sent.key.as_ref().map(|k| k.to_vec()),
        value: sent.value.as_ref().map(|v| v.to_vec()),
        headers: sent
            .headers
            .iter()
            .map(|h| (h.name.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
            .collect(),
    }
}

/// Bytes for a failure message: `null`, or escaped and cut after 40 bytes.
pub(super) fn show(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.len() > 40 => format!("\"{}\"... ({} bytes)", b[..40].escape_ascii(), b.len()),
        Some(b) => format!("\"{}\"", b.escape_ascii()),
    }
}

pub(super) fn show_headers(headers: &[(Vec<u8>, Option<Vec<u8>>)]) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(n, v)| format!("{}={}", show(Some(n)), show(v.as_deref())))
        .collect();
    if shown.len() > 6 {
        format!("[{}, ... ({} headers)]", shown[..6].join(", "), shown.len())
    } else {
        format!("[{}]", shown.join(", "))
    }
}

pub(super) fn check_record(what: &str, got: &Record, want: &Expected) -> anyhow::Result<()> {
    let key = got.key.as_ref().map(|b| b.to_vec());
    ensure!(
        key == want.key,
        "{what}: key {}, expected {}",
        show(key.as_deref()),
        show(want.key.as_deref())
    );
    let value = got.value.as_ref().map(|b| b.to_vec());
    ensure!(
        value == want.value,
        "{what}: value {}, expected {}",
        show(value.as_deref()),
        show(want.value.as_deref())
    );
    let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = got
        .headers
        .iter()
        .map(|h| (h.name.to_vec(), h.value.as_ref().map(|v| v.to_vec())))
        .collect();
    ensure!(
        headers == want.headers,
        "{what}: headers {}, expected {}",
        show_headers(&headers),
        show_headers(&want.headers)
    );
    Ok(())
}

pub async fn produce_then_fetch_round_trips_every_mapping_case(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-mapping", 1).await?;
    let long_key = vec![b'k'; 300];
    let key_255 = vec![b'k'; 255];
    let name_247 = vec![b'a'; 247];
    let name_248 = vec![b'a'; 248];
    let value_256 = vec![b'v'; 256];
    let header_value = vec![b'b'; 250];
    // Descending names: 500 headers take 500 x (10 + 12 + 250) = 136,000 bytes of Iggy headers
    // (over 100,000: envelope, order kept); 360 take 97,920 (plain, sorted).
    let over_budget_names: Vec<Vec<u8>> = (0..500).rev().map(|i| format!("h{i:03}").into_bytes()).collect();
    let under_budget_names: Vec<Vec<u8>> = (0..360).rev().map(|i| format!("h{i:03}").into_bytes()).collect();
    let t0 = now_ms()?;
    type H<'a> = (&'a [u8], Option<&'a [u8]>);
    let plain_headers: [H; 3] = [(b"zeta", Some(b"z")), (b"alpha", Some(b"a")), (b"mid", Some(b"m"))];
    let env_order: [H; 2] = [(b"b", Some(b"2")), (b"a", Some(b"1"))];
    let null_header: [H; 2] = [(b"z", Some(b"1")), (b"n", None)];
    let over_budget: Vec<H> = over_budget_names
        .iter()
        .map(|n| (n.as_slice(), Some(header_value.as_slice())))
        .collect();
    let under_budget: Vec<H> = under_budget_names
        .iter()
        .map(|n| (n.as_slice(), Some(header_value.as_slice())))
        .collect();
    let mut under_budget_sorted = under_budget.clone();
    under_budget_sorted.sort();
    let long_names: [H; 2] = [(b"zz", Some(b"1")), (&name_247, Some(b"2"))];
    let long_names_sorted: [H; 2] = [(&name_247, Some(b"2")), (b"zz", Some(b"1"))];
    let too_long_name: [H; 2] = [(b"zz", Some(b"1")), (&name_248, Some(b"2"))];
    let not_utf8: [H; 2] = [(b"zz", Some(b"1")), (&[0xff, 0xfe], Some(b"2"))];
    let empty_value: [H; 2] = [(b"zz", Some(b"1")), (b"e", Some(b""))];
    let long_value: [H; 2] = [(b"zz", Some(b"1")), (b"l", Some(&value_256))];
    let reserved: [H; 2] = [(b"kafka.value", Some(b"null")), (b"kafka.key", Some(b"not the key"))];
    let reserved_sorted: [H; 2] = [(b"kafka.key", Some(b"not the key")), (b"kafka.value", Some(b"null"))];
    let repeated: [H; 3] = [(b"dup", Some(b"1")), (b"x", Some(b"x")), (b"dup", Some(b"2"))];
    // (what, sent, expected back)
    let cases: Vec<(&str, Record, Expected)> = vec![
        (
            "plain keyed record with unsorted headers (MAP-KEY-1, MAP-HEADER-1: sorted by name)",
            record(Some(b"key-0"), Some(b"value-0"), &plain_headers),
            expected(
                Some(b"key-0"),
                Some(b"value-0"),
                &[(b"alpha", Some(b"a")), (b"mid", Some(b"m")), (b"zeta", Some(b"z"))],
            ),
        ),
        (
            "tombstone (MAP-VALUE-1: null)",
            record(Some(b"key-1"), None, &[]),
            expected(Some(b"key-1"), None, &[]),
        ),
        (
            "empty value (MAP-VALUE-1: empty, not null)",
            record(Some(b"key-2"), Some(b""), &[(b"h", Some(b"1"))]),
            expected(Some(b"key-2"), Some(b""), &[(b"h", Some(b"1"))]),
        ),
        (
            "300-byte key (ENV-TRIGGER-KEY-LEN-1: envelope keeps header order)",
            record(Some(&long_key), Some(b"value-3"), &env_order),
            expected(Some(&long_key), Some(b"value-3"), &env_order),
        ),
        (
            "header with a null value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(Some(b"key-4"), Some(b"value-4"), &null_header),
            expected(Some(b"key-4"), Some(b"value-4"), &null_header),
        ),
        (
            "repeated header names (ENV-TRIGGER-REPEAT-1)",
            record(None, Some(b"value-5"), &repeated),
            expected(None, Some(b"value-5"), &repeated),
        ),
        (
            "empty key (ENV-TRIGGER-EMPTY-KEY-1: not null)",
            record(Some(b""), Some(b"value-6"), &[]),
            expected(Some(b""), Some(b"value-6"), &[]),
        ),
        (
            "the one-byte value 0x00 (MAP-VALUE-2: not a placeholder)",
            record(None, Some(&[0]), &[]),
            expected(None, Some(&[0]), &[]),
        ),
        (
            "null key and null value",
            record(None, None, &[]),
            expected(None, None, &[]),
        ),
        (
            "a 255-byte key (plain: MAP-KEY-1)",
            record(Some(&key_255), Some(b"value-9"), &[]),
            expected(Some(&key_255), Some(b"value-9"), &[]),
        ),
        (
            "a 247-byte header name (plain, sorted: LIMIT-HEADER-FIELD-1)",
            record(None, Some(b"value-10"), &long_names),
            expected(None, Some(b"value-10"), &long_names_sorted),
        ),
        (
            "a 248-byte header name (ENV-TRIGGER-NAME-LEN-1)",
            record(None, Some(b"value-11"), &too_long_name),
            expected(None, Some(b"value-11"), &too_long_name),
        ),
        (
            "a header name that is not UTF-8 (ENV-TRIGGER-NAME-1)",
            record(None, Some(b"value-12"), &not_utf8),
            expected(None, Some(b"value-12"), &not_utf8),
        ),
        (
            "an empty header value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(None, Some(b"value-13"), &empty_value),
            expected(None, Some(b"value-13"), &empty_value),
        ),
        (
            "a 256-byte header value (ENV-TRIGGER-HEADER-VALUE-1)",
            record(None, Some(b"value-14"), &long_value),
            expected(None, Some(b"value-14"), &long_value),
        ),
        (
            "headers over 100,000 bytes of Iggy headers (ENV-TRIGGER-BUDGET-1)",
            record(None, Some(b"value-15"), &over_budget),
            expected(None, Some(b"value-15"), &over_budget),
        ),
        (
            "headers just under 100,000 bytes of Iggy headers (plain, sorted)",
            record(None, Some(b"value-16"), &under_budget),
            expected(None, Some(b"value-16"), &under_budget_sorted),
        ),
        (
            "Kafka headers named kafka.key and kafka.value (MAP-RESERVED-1)",
            record(Some(b"key-17"), Some(b"value-17"), &reserved),
            expected(Some(b"key-17"), Some(b"value-17"), &reserved_sorted),
        ),
    ];
    let n = cases.len() as i64;
    let sent: Vec<(i64, Record)> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, r, _))| (t0 + i as i64, r.clone()))
        .collect();
    let base = produce_ok(
        &mut client,
        &topic,
        0,
        encode(&BatchSpec::plain(Compression::None), &sent)?,
    )
    .await?;
    ensure!(
        base == 0,
        "OFFSET-BASE-1: the first Produce to an empty partition answered base offset {base}, expected 0"
    );

    let data = fetch(&mut client, &topic, 0, 0).await?;
    ensure!(
        data.high_watermark == n,
        "Fetch high watermark {}, expected {n}",
        data.high_watermark
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(
        fetched.len() as i64 == n,
        "fetched {} records, produced {n}",
        fetched.len()
    );
    for (i, (f, (what, sent, want))) in fetched.iter().zip(&cases).enumerate() {
        ensure!(
            f.offset == i as i64,
            "OFFSET-IDENTITY-1: record {i} ({what}) fetched at offset {}",
            f.offset
        );
        // MAP-HEADER-1 (a deviation): from Kafka every record comes back as it was sent.
        let as_sent;
        let want = match endpoint.profile {
            Profile::Gateway => want,
            Profile::Kafka => {
                as_sent = expected_as_sent(sent);
                &as_sent
            }
        };
        ensure!(
            f.timestamp == t0 + i as i64,
            "MAP-TS-1: record {i} ({what}) timestamp {}, produced {}",
            f.timestamp,
            t0 + i as i64
        );
        check_record(&format!("record {i}, {what}"), &f.record, want)?;
    }

    // A second Produce continues where the first ended, and Fetch from there agrees.
    let base = produce_ok(&mut client, &topic, 0, values_batch(t0, &[b"second-0", b"second-1"])?).await?;
    ensure!(
        base == n,
        "OFFSET-BASE-1: the second Produce answered base offset {base}, expected {n}"
    );
    let data = fetch(&mut client, &topic, 0, n).await?;
    ensure!(
        data.high_watermark == n + 2,
        "Fetch high watermark {}, expected {}",
        data.high_watermark,
        n + 2
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    let offsets: Vec<i64> = fetched.iter().map(|f| f.offset).collect();
    ensure!(
        offsets == vec![n, n + 1],
        "OFFSET-IDENTITY-1: fetching from {n} returned offsets {offsets:?}"
    );
    check_record(
        "second batch, record 0",
        &fetched[0].record,
        &expected(None, Some(b"second-0"), &[]),
    )?;
    check_record(
        "second batch, record 1",
        &fetched[1].record,
        &expected(None, Some(b"second-1"), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn fetch_past_the_high_watermark_is_offset_out_of_range(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-fetch-range", 1).await?;
    // Empty partition: the HW is 0, so 1 is past it.
    let data = fetch(&mut client, &topic, 0, 1).await?;
    ensure!(
        data.error_code == OFFSET_OUT_OF_RANGE,
        "Fetch at 1 of an empty partition: error {}, expected 1",
        data.error_code
    );
    produce_ok(&mut client, &topic, 0, values_batch(now_ms()?, &[b"a", b"b"])?).await?;
    for offset in [3, 100, -1] {
        let data = fetch(&mut client, &topic, 0, offset).await?;
        ensure!(
            data.error_code == OFFSET_OUT_OF_RANGE,
            "Fetch at {offset} with HW 2: error {}, expected OFFSET_OUT_OF_RANGE (1)",
            data.error_code
        );
        if offset > 0 {
            ensure!(
                data.high_watermark == 2,
                "Fetch at {offset}: high watermark {}, expected 2",
                data.high_watermark
            );
        }
    }
    // At the HW: no error and no records, even without waiting.
    let data = fetch(&mut client, &topic, 0, 2).await?;
    ensure!(data.error_code == NONE, "Fetch at the HW: error {}", data.error_code);
    ensure!(
        data.high_watermark == 2,
        "Fetch at the HW: high watermark {}, expected 2",
        data.high_watermark
    );
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(fetched.is_empty(), "Fetch at the HW returned {} records", fetched.len());
    Ok(Outcome::Passed)
}

pub async fn fetch_returns_the_first_record_whole_above_max_bytes(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-fetch-limit", 1).await?;
    let big = vec![b'v'; 1000];
    let t = now_ms()?;
    // Three separate batches, so that "whole first batch" and "whole first record" agree.
    for _ in 0..3 {
        produce_ok(&mut client, &topic, 0, values_batch(t, &[&big])?).await?;
    }
    let data = fetch_with(&mut client, &topic, 0, 0, 0, 100).await?;
    let fetched = fetched_records(endpoint.profile, &data)?;
    ensure!(
        fetched.len() == 1,
        "Fetch with partition_max_bytes 100 below a 1000-byte record returned {} records, expected the first one only",
        fetched.len()
    );
    ensure!(
        fetched[0].offset == 0,
        "the record returned is at offset {}",
        fetched[0].offset
    );
    check_record(
        "the first record above the limit",
        &fetched[0].record,
        &expected(None, Some(&big), &[]),
    )?;
    // The request-wide max_bytes works the same way.
    let request = fetch_request(&topic, 0, 0, 0, FETCH_ALL).with_max_bytes(100);
    let response: FetchResponse = client.request(ApiKey::Fetch, FETCH_V, &request).await?;
    let fetched = fetched_records(endpoint.profile, &fetched_partition(response, &topic, 0)?)?;
    ensure!(
        fetched.len() == 1,
        "Fetch with max_bytes 100 returned {} records, expected the first one whole",
        fetched.len()
    );
    check_record(
        "the first record above max_bytes",
        &fetched[0].record,
        &expected(None, Some(&big), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn produce_to_a_named_partition_stays_there(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-partition", 3).await?;
    let t = now_ms()?;
    let base = produce_ok(&mut client, &topic, 2, values_batch(t, &[b"to partition 2"])?).await?;
    ensure!(base == 0, "the first record of partition 2 landed at {base}");
    for (partition, expected_hw) in [(0, 0), (1, 0), (2, 1)] {
        let hw = latest(&mut client, &topic, partition).await?;
        ensure!(
            hw == expected_hw,
            "partition {partition} holds {hw} records, expected {expected_hw}"
        );
    }
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 2, 0).await?)?;
    ensure!(
        fetched.len() == 1,
        "partition 2 fetched {} records, expected 1",
        fetched.len()
    );
    check_record(
        "the record of partition 2",
        &fetched[0].record,
        &expected(None, Some(b"to partition 2"), &[]),
    )?;
    for partition in [3, -1] {
        let answer = produce(&mut client, &topic, partition, values_batch(t, &[b"nowhere"])?).await?;
        expect_code(
            &answer,
            UNKNOWN_TOPIC_OR_PARTITION,
            &format!("Produce to partition {partition} of 3"),
        )?;
    }
    let data = fetch(&mut client, &topic, 3, 0).await?;
    ensure!(
        data.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "Fetch from partition 3 of 3: error {}, expected 3",
        data.error_code
    );
    let answer = list_offset(&mut client, &topic, 3, LATEST).await?;
    ensure!(
        answer.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "ListOffsets of partition 3 of 3: error {}, expected 3",
        answer.error_code
    );
    let missing = endpoint.unique_topic("kig-never-created");
    let answer = produce(&mut client, &missing, 0, values_batch(t, &[b"nowhere"])?).await?;
    expect_code(
        &answer,
        UNKNOWN_TOPIC_OR_PARTITION,
        "Produce to a topic that does not exist",
    )?;
    let data = fetch(&mut client, &missing, 0, 0).await?;
    ensure!(
        data.error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "Fetch from a topic that does not exist: error {}, expected 3",
        data.error_code
    );

    // ERR-MAP-2: one refused partition leaves the others of the request alone.
    let mut corrupt = BytesMut::from(&values_batch(t, &[b"corrupt"])?[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let request = produce_request(
        &topic,
        vec![
            (0, corrupt.freeze()),
            (1, values_batch(t, &[b"fine"])?),
            (7, values_batch(t, &[b"nowhere"])?),
        ],
        -1,
    );
    let answers = produce_all(&mut client, PRODUCE_V, &request).await?;
    let codes: Vec<(i32, i16)> = answers.iter().map(|a| (a.index, a.error_code)).collect();
    ensure!(
        codes == vec![(0, CORRUPT_MESSAGE), (1, NONE), (7, UNKNOWN_TOPIC_OR_PARTITION)],
        "a Produce to a corrupt, a good and a missing partition answered {codes:?}"
    );
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "the corrupt partition 0 stored something"
    );
    ensure!(
        latest(&mut client, &topic, 1).await? == 1,
        "the good partition 1 did not store its record"
    );
    Ok(Outcome::Passed)
}

pub async fn acks_zero_gets_no_response_and_order_is_kept(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-acks", 1).await?;
    let t = now_ms()?;
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"fire and forget"])?)], 0);
    client.send_only(ApiKey::Produce, PRODUCE_V, &request).await?;
    // The next frame must be ApiVersions' answer: `request` checks its correlation id.
    api_versions_answers(&mut client, "right after a Produce with acks 0")
        .await
        .context("PRODUCE-ACKS-1: the frame after an acks=0 Produce")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the acks=0 record was not written"
    );
    // A refused acks=0 Produce gets no answer either.
    let missing = endpoint.unique_topic("kig-acks-missing");
    let request = produce_request(&missing, vec![(0, values_batch(t, &[b"nowhere"])?)], 0);
    client.send_only(ApiKey::Produce, PRODUCE_V, &request).await?;
    api_versions_answers(&mut client, "right after a refused Produce with acks 0")
        .await
        .context("PRODUCE-ACKS-1: the frame after a refused acks=0 Produce")?;
    // acks 2 is refused and writes nothing.
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"acks two"])?)], 2);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, INVALID_REQUIRED_ACKS, "a Produce with acks 2")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the acks=2 Produce wrote a record"
    );
    // acks 1 is answered.
    let request = produce_request(&topic, vec![(0, values_batch(t, &[b"acks one"])?)], 1);
    let answer = produce_all(&mut client, PRODUCE_V, &request).await?.remove(0);
    expect_code(&answer, NONE, "a Produce with acks 1")?;
    ensure!(
        answer.base_offset == 1,
        "the acks=1 record landed at {}, expected 1",
        answer.base_offset
    );
    Ok(Outcome::Passed)
}

pub async fn pipelined_requests_are_answered_in_order(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-pipeline", 1).await?;
    // A Fetch long-poll at the HW of an empty partition (it finishes last, after its wait),
    // then Metadata and ApiVersions, which could be answered at once: all sent before reading.
    let fetch = fetch_request(&topic, 0, 0, 300, FETCH_ALL);
    let (fetch_id, fetch_frame) = client.encode_request(ApiKey::Fetch, FETCH_V, &fetch)?;
    let meta = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(&topic)))
        ]));
    let (meta_id, meta_frame) = client.encode_request(ApiKey::Metadata, METADATA_V, &meta)?;
    let (versions_id, versions_frame) =
        client.encode_request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())?;
    for frame in [&fetch_frame, &meta_frame, &versions_frame] {
        client.send_frame(frame).await?;
    }
    let mut replies = Vec::new();
    for what in ["first", "second", "third"] {
        replies.push(
            client
                .recv_frame()
                .await?
                .with_context(|| format!("the connection closed before the {what} answer"))?,
        );
    }
    let [first, second, third]: [Bytes; 3] = replies.try_into().expect("three replies");
    let fetched: FetchResponse = Client::decode_response(ApiKey::Fetch, FETCH_V, fetch_id, first)
        .context("PROTO-ORDER-1: the first answer is not the Fetch's")?;
    let data = fetched_partition(fetched, &topic, 0)?;
    ensure!(
        data.error_code == NONE,
        "the long-poll Fetch: error {}",
        data.error_code
    );
    let _: MetadataResponse = Client::decode_response(ApiKey::Metadata, METADATA_V, meta_id, second)
        .context("PROTO-ORDER-1: the second answer is not the Metadata's")?;
    let _: ApiVersionsResponse = Client::decode_response(ApiKey::ApiVersions, API_VERSIONS_V, versions_id, third)
        .context("PROTO-ORDER-1: the third answer is not the ApiVersions'")?;
    Ok(Outcome::Passed)
}

pub async fn fetch_long_poll_returns_when_data_arrives(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut poller = connect(&endpoint).await?;
    let mut producer = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut producer, "kig-long-poll", 1).await?;
    // A Fetch that ran out its wait returns no records and no error.
    let data = fetch_with(&mut poller, &topic, 0, 0, 50, FETCH_ALL).await?;
    ensure!(
        data.error_code == NONE && fetched_records(endpoint.profile, &data)?.is_empty(),
        "a Fetch at the HW of an empty partition returned something"
    );
    // Long-poll: sent first, answered when the Produce on the other connection lands.
    let request = fetch_request(&topic, 0, 0, 30_000, FETCH_ALL);
    let (correlation_id, frame) = poller.encode_request(ApiKey::Fetch, FETCH_V, &request)?;
    poller.send_frame(&frame).await?;
    produce_ok(&mut producer, &topic, 0, values_batch(now_ms()?, &[b"wake up"])?).await?;
    let reply = poller
        .recv_frame()
        .await?
        .context("the connection closed instead of answering the long-poll Fetch")?;
    let response: FetchResponse = Client::decode_response(ApiKey::Fetch, FETCH_V, correlation_id, reply)?;
    let fetched = fetched_records(endpoint.profile, &fetched_partition(response, &topic, 0)?)?;
    ensure!(
        fetched.len() == 1,
        "the long-poll Fetch returned {} records, expected the one produced",
        fetched.len()
    );
    check_record(
        "the long-polled record",
        &fetched[0].record,
        &expected(None, Some(b"wake up"), &[]),
    )?;
    Ok(Outcome::Passed)
}

pub async fn negative_timestamp_is_invalid_timestamp(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "MAP-TS-4 refuses times Iggy cannot store; a Kafka broker's answer depends on its \
         log.message.timestamp.*.max.ms settings",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-timestamps", 1).await?;
    let now = now_ms()?;
    let spec = BatchSpec::plain(Compression::None);
    // MAP-TS-4: -5 is no time; the whole partition's data is refused (a good record first).
    let bad = encode(
        &spec,
        &[
            (now, record(None, Some(b"fine"), &[])),
            (-5, record(None, Some(b"minus five"), &[])),
        ],
    )?;
    let answer = produce(&mut client, &topic, 0, bad).await?;
    expect_code(&answer, INVALID_TIMESTAMP, "a record with timestamp -5")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "PRODUCE-ATOMIC-1: the batch with a -5 timestamp wrote records"
    );

    // MAP-TS-4: a time whose microseconds overflow an i64 is refused too.
    let overflow = encode(&spec, &[(9_223_372_036_854_776, record(None, Some(b"too late"), &[]))])?;
    let answer = produce(&mut client, &topic, 0, overflow).await?;
    expect_code(&answer, INVALID_TIMESTAMP, "a record at 9,223,372,036,854,776 ms")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 0,
        "the overflowing timestamp wrote a record"
    );

    // MAP-TS-SPLIT-1: "none", now, three hours ago and the epoch in one batch: stored whole.
    let three_hours_ago = now - 3 * HOUR_MS;
    let mixed = encode(
        &spec,
        &[
            (-1, record(None, Some(b"no time"), &[])),
            (now, record(None, Some(b"now"), &[])),
            (three_hours_ago, record(None, Some(b"three hours ago"), &[])),
            (0, record(None, Some(b"epoch"), &[])),
        ],
    )?;
    let base = produce_ok(&mut client, &topic, 0, mixed).await?;
    ensure!(base == 0, "the mixed batch landed at {base}, expected 0");
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 0).await?)?;
    let values: Vec<Vec<u8>> = fetched
        .iter()
        .map(|f| f.record.value.as_ref().map_or(vec![], |v| v.to_vec()))
        .collect();
    ensure!(
        values
            == vec![
                b"no time".to_vec(),
                b"now".to_vec(),
                b"three hours ago".to_vec(),
                b"epoch".to_vec()
            ],
        "MAP-TS-SPLIT-1: the mixed batch came back as {:?}",
        values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
    );
    let offsets: Vec<i64> = fetched.iter().map(|f| f.offset).collect();
    ensure!(offsets == vec![0, 1, 2, 3], "the mixed batch's offsets are {offsets:?}");
    ensure!(
        fetched[0].timestamp > 0,
        "MAP-TS-2: the -1 record came back with timestamp {}, expected the append time",
        fetched[0].timestamp
    );
    ensure!(
        fetched[1].timestamp == now,
        "MAP-TS-1: timestamp {} came back as {}",
        now,
        fetched[1].timestamp
    );
    ensure!(
        fetched[2].timestamp == three_hours_ago,
        "MAP-TS-1: timestamp {three_hours_ago} came back as {}",
        fetched[2].timestamp
    );
    ensure!(
        fetched[3].timestamp == 0,
        "MAP-TS-3: timestamp 0 came back as {}",
        fetched[3].timestamp
    );

    // MAP-TS-4's bound itself: the largest time whose microseconds fit an i64 is accepted.
    let largest = 9_223_372_036_854_775;
    let last = encode(&spec, &[(largest, record(None, Some(b"the last ms"), &[]))])?;
    let base = produce_ok(&mut client, &topic, 0, last).await?;
    ensure!(base == 4, "the record at {largest} ms landed at {base}, expected 4");
    let fetched = fetched_records(endpoint.profile, &fetch(&mut client, &topic, 0, 4).await?)?;
    ensure!(
        fetched.len() == 1 && fetched[0].timestamp == largest,
        "the record at {largest} ms came back as {:?}",
        fetched.iter().map(|f| f.timestamp).collect::<Vec<_>>()
    );
    Ok(Outcome::Passed)
}
