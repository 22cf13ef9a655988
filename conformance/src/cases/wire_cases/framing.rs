//! Frame and request-shape cases: the frame size limit at and above it, malformed bodies,
//! unknown keys and versions outside the advertised ranges, each closing the connection.

use super::*;

// ---------------------------------------------------------------------------------------------
// Frames.

pub async fn frame_above_max_frame_size_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let oversized = i32::try_from(max + 1).context("max_frame_size + 1 does not fit a frame length")?;
    for (what, size) in [("max_frame_size + 1", oversized), ("0", 0), ("-1", -1)] {
        let mut client = connect(&endpoint).await?;
        // The size prefix alone: a server that waits for the body would never answer or close.
        client.send_bytes(&size.to_be_bytes()).await?;
        expect_closed(&mut client, &format!("a frame length of {what} ({size}) with no body")).await?;
        fresh_connection_answers(&endpoint, &format!("the frame length {what}")).await?;
    }
    Ok(Outcome::Passed)
}

pub async fn frame_of_exactly_max_frame_size_is_read(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let Some(max) = endpoint.max_frame_size else {
        return Ok(Outcome::Skipped(
            "the endpoint's max_frame_size is unknown (--max-frame-size)".into(),
        ));
    };
    let mut client = connect(&endpoint).await?;
    let topic = new_topic(&endpoint, &mut client, "kig-frame-exact", 1).await?;
    let timestamp = now_ms()?;
    // Grow one record's value until the whole request frame (without its size prefix) is
    // exactly max_frame_size bytes; varint widths make this converge in a few steps.
    let mut value_len = max.saturating_sub(1024);
    let mut exact = None;
    for _ in 0..8 {
        let value = vec![b'x'; value_len];
        let records = values_batch(timestamp, &[&value])?;
        let (correlation_id, frame) = client.encode_request(
            ApiKey::Produce,
            PRODUCE_V,
            &produce_request(&topic, vec![(0, records)], -1),
        )?;
        if frame.len() == max {
            exact = Some((correlation_id, frame));
            break;
        }
        value_len = (value_len as i64 + max as i64 - frame.len() as i64).max(1) as usize;
    }
    let (correlation_id, frame) =
        exact.with_context(|| format!("could not build a Produce frame of exactly {max} bytes"))?;
    client.send_frame(&frame).await?;
    let reply = client
        .recv_frame()
        .await?
        .context("the connection closed on a frame of exactly max_frame_size bytes")?;
    let response: ProduceResponse = Client::decode_response(ApiKey::Produce, PRODUCE_V, correlation_id, reply)?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .context("Produce answered no partition")?;
    expect_code(answer, NONE, "a Produce frame of exactly max_frame_size")?;
    ensure!(
        latest(&mut client, &topic, 0).await? == 1,
        "the record of the max_frame_size frame was not stored"
    );
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Malformed requests and unsupported versions.

pub async fn malformed_request_body_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let valid_body = {
        let records = values_batch(now_ms()?, &[b"never stored"])?;
        let mut body = BytesMut::new();
        produce_request("kig-malformed", vec![(0, records)], -1).encode(&mut body, PRODUCE_V)?;
        body.freeze()
    };
    let mut garbage = encode_request_header(ApiKey::Produce, PRODUCE_V, 41)?;
    // Four bytes with their continuation bits set: the transactional id's length never ends.
    garbage.put_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let mut truncated = encode_request_header(ApiKey::Produce, PRODUCE_V, 42)?;
    truncated.put_slice(&valid_body[..valid_body.len() / 2]);
    let mut fetch_garbage = encode_request_header(ApiKey::Fetch, FETCH_V, 45)?;
    fetch_garbage.put_slice(&[0xff; 3]);
    // Metadata v9, header v2: the client id declares 1000 bytes and 3 follow.
    let mut bad_header = BytesMut::new();
    bad_header.put_i16(ApiKey::Metadata as i16);
    bad_header.put_i16(METADATA_V);
    bad_header.put_i32(46);
    bad_header.put_i16(1000);
    bad_header.put_slice(b"abc");
    let variants: [(&str, Bytes); 5] = [
        ("a Fetch v11 header followed by 3 bytes of 0xff", fetch_garbage.freeze()),
        (
            "a Metadata v9 header whose client id runs past the frame",
            bad_header.freeze(),
        ),
        ("a Produce v9 header followed by garbage", garbage.freeze()),
        ("a Produce v9 body cut in half", truncated.freeze()),
        (
            "a 7-byte frame, shorter than key, version and correlation id",
            Bytes::from_static(&[0, 0, 0, 9, 0, 0, 0]),
        ),
    ];
    for (what, frame) in variants {
        let mut client = connect(&endpoint).await?;
        client.send_frame(&frame).await?;
        expect_closed(&mut client, what).await?;
        fresh_connection_answers(&endpoint, what).await?;
    }
    Ok(Outcome::Passed)
}

pub async fn huge_array_count_in_a_request_body_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // Produce v3 (non-flexible): null transactional id, acks, timeout, then a topic array that
    // declares i32::MAX entries and holds none. A decoder that sizes an allocation from the
    // count asks for hundreds of gigabytes.
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i16(-1);
    body.put_i32(30_000);
    body.put_i32(i32::MAX);
    let frame = raw_request(ApiKey::Produce as i16, 3, 43, false, &body);
    let mut client = connect(&endpoint).await?;
    client.send_frame(&frame).await?;
    expect_closed(&mut client, "a Produce v3 whose topic array declares i32::MAX entries").await?;
    fresh_connection_answers(&endpoint, "a Produce declaring i32::MAX topics").await?;
    // The flexible form: a compact array count of u32::MAX - 1 entries.
    let mut body = BytesMut::new();
    body.put_u8(0); // null compact transactional id
    body.put_i16(-1);
    body.put_i32(30_000);
    body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // unsigned varint u32::MAX
    let frame = raw_request(ApiKey::Produce as i16, PRODUCE_V, 44, true, &body);
    let mut client = connect(&endpoint).await?;
    client.send_frame(&frame).await?;
    expect_closed(
        &mut client,
        "a Produce v9 whose topic array declares u32::MAX - 1 entries",
    )
    .await?;
    fresh_connection_answers(&endpoint, "a Produce declaring u32::MAX - 1 topics").await?;
    Ok(Outcome::Passed)
}

pub async fn unknown_api_key_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    client.send_frame(&raw_request(9999, 0, 51, false, &[])).await?;
    expect_closed(&mut client, "a request with API key 9999").await?;
    fresh_connection_answers(&endpoint, "API key 9999").await?;
    Ok(Outcome::Passed)
}

pub async fn produce_v2_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PROTO-VERSION-2 refuses the advertised Produce v0-v2, as Kafka 4.0 does and Kafka 3.x does not",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    // The advertisement includes Produce v2 (PROTO-VERSION-1) ...
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    let produce = advertised
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Produce as i16)
        .context("Produce is not advertised")?;
    ensure!(
        produce.min_version <= 2,
        "Produce v2 is not advertised ({}..={})",
        produce.min_version,
        produce.max_version
    );
    // ... but a v2 request (acks 1, timeout 1 s, no topics) closes the connection.
    let mut body = BytesMut::new();
    body.put_i16(1);
    body.put_i32(1000);
    body.put_i32(0);
    client
        .send_frame(&raw_request(ApiKey::Produce as i16, 2, 52, false, &body))
        .await?;
    expect_closed(&mut client, "a Produce v2 request").await?;
    fresh_connection_answers(&endpoint, "Produce v2").await?;
    Ok(Outcome::Passed)
}

pub async fn fetch_v3_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    // Fetch v3 is outside the gateway's range; Kafka before 4.0 serves it.
    if endpoint.profile.is_kafka()
        && crate::cases::advertised_min(&endpoint, ApiKey::Fetch)
            .await?
            .is_some_and(|min| min <= 3)
    {
        return Ok(Outcome::Skipped(
            "the endpoint advertises Fetch v3, which this case needs unadvertised".into(),
        ));
    }
    let mut client = connect(&endpoint).await?;
    // Fetch v3: replica id, max wait, min bytes, max bytes, no topics.
    let mut body = BytesMut::new();
    body.put_i32(-1);
    body.put_i32(0);
    body.put_i32(0);
    body.put_i32(1 << 20);
    body.put_i32(0);
    client
        .send_frame(&raw_request(ApiKey::Fetch as i16, 3, 53, false, &body))
        .await?;
    expect_closed(&mut client, "a Fetch v3 request").await?;
    fresh_connection_answers(&endpoint, "Fetch v3").await?;
    Ok(Outcome::Passed)
}

pub async fn version_above_the_advertised_range_closes_the_connection(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    let mut tried = 0;
    for key in [ApiKey::Metadata, ApiKey::Produce, ApiKey::Fetch] {
        let Some(entry) = advertised.api_keys.iter().find(|k| k.api_key == key as i16) else {
            continue;
        };
        let version = entry.max_version + 1;
        if version > key.valid_versions().max {
            continue;
        }
        let mut client = connect(&endpoint).await?;
        match key {
            ApiKey::Metadata => client.send_only(key, version, &MetadataRequest::default()).await?,
            ApiKey::Produce => {
                client
                    .send_only(
                        key,
                        version,
                        &ProduceRequest::default().with_acks(1).with_timeout_ms(1000),
                    )
                    .await?
            }
            _ => client.send_only(key, version, &FetchRequest::default()).await?,
        }
        expect_closed(
            &mut client,
            &format!("{key:?} v{version}, one above the advertised {}", entry.max_version),
        )
        .await?;
        fresh_connection_answers(&endpoint, &format!("{key:?} v{version}")).await?;
        tried += 1;
    }
    ensure!(
        tried > 0,
        "no API had a version above its advertised range that the client can encode"
    );
    Ok(Outcome::Passed)
}
