//! Hostile request bodies: oversized arrays and strings in JoinGroup, Produce, CreateTopics and
//! Fetch, trailing bytes, and zstd batches near the frame size limit.

use super::*;

// ---------------------------------------------------------------------------------------------
// The group coordinator.

/// A JoinGroup v0 offering 200,000 distinct protocols with empty metadata (about 1.6 MB):
/// selecting a protocol among them was quadratic under the coordinator's lock. The endpoint
/// may refuse it any way the protocol allows, or close the connection; the watchdog's own
/// group member keeps heartbeating throughout.
pub async fn hostile_join_group_with_200000_protocols(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-hostile-protocols");
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(
                    (0..200_000)
                        .map(|i| JoinGroupRequestProtocol::default().with_name(string(&format!("p{i}"))))
                        .collect(),
                );
            let frame = request_frame(ApiKey::JoinGroup, 0, 1, "kig-hostile", &request)?;
            let what = format!("a JoinGroup v0 of {} bytes offering 200,000 protocols", frame.len());
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            if let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                let _: JoinGroupResponse = decoded(ApiKey::JoinGroup, 0, 1, answer, &what)?;
            }
            new_connection_answers(&endpoint, &what).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// JoinGroup v0 and v5 from a client whose id is 32,760 bytes: a member id built from the
/// client id (Kafka's are `client.id-UUID`) must still be a string the response can carry.
/// Answered with a member id (v0 joins at once; v5 may first answer MEMBER_ID_REQUIRED with
/// it), or closed.
pub async fn hostile_join_group_with_a_32760_byte_client_id(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let client_id = "c".repeat(32_760);
            for version in [0, 5] {
                let group = endpoint.unique_topic("kig-hostile-client-id");
                let request = JoinGroupRequest::default()
                    .with_group_id(GroupId(string(&group)))
                    .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                    .with_rebalance_timeout_ms(if version >= 1 { MEMBER_SESSION_TIMEOUT_MS } else { -1 })
                    .with_protocol_type(StrBytes::from_static_str("consumer"))
                    .with_protocols(vec![JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_static_str("range"))
                        .with_metadata(Bytes::from_static(b"m"))]);
                let frame = request_frame(ApiKey::JoinGroup, version, 2, &client_id, &request)?;
                let what = format!("a JoinGroup v{version} from a client whose id is 32,760 bytes");
                let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
                let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? else {
                    continue;
                };
                let joined: JoinGroupResponse = decoded(ApiKey::JoinGroup, version, 2, answer, &what)?;
                if matches!(joined.error_code, NONE | MEMBER_ID_REQUIRED) {
                    ensure!(
                        !joined.member_id.is_empty(),
                        "{what}: error {} with an empty member id",
                        joined.error_code
                    );
                }
                if joined.error_code == NONE {
                    // A joined member would otherwise hold the group until its session lapses.
                    let leave = LeaveGroupRequest::default()
                        .with_group_id(GroupId(string(&group)))
                        .with_members(vec![MemberIdentity::default().with_member_id(joined.member_id.clone())]);
                    let _: LeaveGroupResponse = bounded(
                        &format!("LeaveGroup after {what}"),
                        client.request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &leave),
                    )
                    .await?;
                }
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Topics and records.

/// A Produce v8 writing one record to a real topic, then one to an unknown topic whose name is
/// 32,767 bytes. An error message quoting that name does not fit a string: the response must
/// still come, acknowledging the written record, or the producer retries a stored write.
pub async fn hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-long-topic", 1).await?;
            let unknown = "t".repeat(KAFKA_STRING_MAX);
            let request = produce_request(vec![
                (&topic, vec![(0, values_batch(&[b"kept"])?)]),
                (unknown.as_str(), vec![(0, values_batch(&[b"nowhere"])?)]),
            ]);
            let what = "a Produce v8 to a real topic and an unknown 32,767-byte one";
            let produced: ProduceResponse = bounded(what, client.request(ApiKey::Produce, 8, &request))
                .await
                .context("the record written to the real topic was never acknowledged")?;
            let codes: BTreeMap<&str, Vec<i16>> = produced
                .responses
                .iter()
                .map(|t| {
                    (
                        t.name.0.as_str(),
                        t.partition_responses.iter().map(|p| p.error_code).collect(),
                    )
                })
                .collect();
            ensure!(
                codes.get(topic.as_str()) == Some(&vec![NONE]),
                "{what}: the real topic's partition answered {:?}, expected [0]",
                codes.get(topic.as_str())
            );
            let unknown_codes = codes
                .get(unknown.as_str())
                .with_context(|| format!("{what}: no answer for the unknown topic"))?;
            ensure!(
                unknown_codes.len() == 1 && unknown_codes[0] != NONE,
                "{what}: the unknown topic's partition answered {unknown_codes:?}, expected one error"
            );
            ensure!(
                latest(&mut client, &topic, 0).await? == 1,
                "{what}: the real topic does not hold exactly its one record"
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// `retention.ms` values Kafka accepts but whose microseconds, added to a segment's timestamp,
/// wrap the pinned Iggy's unchecked expiry check (which then deletes every sealed segment at
/// once): 18,446,744,073,709,551 set on a topic holding records by IncrementalAlterConfigs (the
/// report's probe), Long.MAX_VALUE by AlterConfigs, 18,446,744,073,709,552 at CreateTopics. Each
/// is accepted, the records written before stay readable from offset 0, and DescribeConfigs
/// reports never expire (-1; a broker reports the value set: LIMIT-CONFIG-VALUE-2's deviation).
/// A value above Long.MAX_VALUE is INVALID_CONFIG, as in Kafka.
pub async fn hostile_retention_ms_beyond_what_iggy_counts_never_expires(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = crate::cases::require_apis(
        &endpoint,
        &[
            ApiKey::IncrementalAlterConfigs,
            ApiKey::AlterConfigs,
            ApiKey::DescribeConfigs,
        ],
    )
    .await?
    {
        return Ok(skip);
    }
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-retention", 1).await?;
            let values: [&[u8]; 3] = [b"r0", b"r1", b"r2"];
            produce_ok(&mut client, &topic, 0, &values).await?;
            // What DescribeConfigs says of a retention no record outlives.
            let never = |set: &str| {
                if endpoint.profile.is_kafka() {
                    set.to_string()
                } else {
                    "-1".to_string()
                }
            };
            let reported = "18446744073709551";
            let code = incremental_set_retention(&mut client, &topic, reported).await?;
            ensure!(
                code == NONE,
                "IncrementalAlterConfigs SET retention.ms {reported}: error {code}, expected 0 (Kafka accepts it)"
            );
            let described = describe_retention_ms(&mut client, &topic).await?;
            ensure!(
                described.as_deref() == Some(never(reported).as_str()),
                "after SET retention.ms {reported}, DescribeConfigs reports {described:?}, expected {:?}",
                never(reported)
            );
            still_all_there(&mut client, &topic, &values, "after SET retention.ms 18446744073709551").await?;

            let long_max = i64::MAX.to_string();
            let code = alter_retention(&mut client, &topic, &long_max).await?;
            ensure!(
                code == NONE,
                "AlterConfigs retention.ms {long_max}: error {code}, expected 0 (Kafka accepts it)"
            );
            let described = describe_retention_ms(&mut client, &topic).await?;
            ensure!(
                described.as_deref() == Some(never(&long_max).as_str()),
                "after AlterConfigs retention.ms {long_max}, DescribeConfigs reports {described:?}, expected {:?}",
                never(&long_max)
            );
            still_all_there(&mut client, &topic, &values, "after AlterConfigs retention.ms Long.MAX_VALUE").await?;

            let above_long = "9223372036854775808";
            let code = incremental_set_retention(&mut client, &topic, above_long).await?;
            ensure!(
                code == INVALID_CONFIG,
                "IncrementalAlterConfigs SET retention.ms {above_long} (not a long): error {code}, expected INVALID_CONFIG ({INVALID_CONFIG})"
            );

            let created = endpoint.unique_topic("kig-hostile-retention-created");
            let request = CreateTopicsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic_name(&created))
                    .with_num_partitions(1)
                    .with_replication_factor(-1)
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_value(Some(StrBytes::from_static_str("18446744073709552")))])]);
            let what = "CreateTopics with retention.ms 18446744073709552";
            let response: CreateTopicsResponse =
                bounded(what, client.request(ApiKey::CreateTopics, CREATE_TOPICS_V, &request)).await?;
            let code = response.topics.first().map(|t| t.error_code);
            ensure!(
                code == Some(NONE),
                "{what}: answered {code:?}, expected 0 (Kafka accepts it)"
            );
            let one: [&[u8]; 1] = [b"still here"];
            produce_ok(&mut client, &created, 0, &one).await?;
            still_all_there(&mut client, &created, &one, what).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// IncrementalAlterConfigs v1 SET of `topic`'s `retention.ms`: the resource's code.
async fn incremental_set_retention(client: &mut Client, topic: &str, value: &str) -> anyhow::Result<i16> {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(string(topic))
        .with_configs(vec![AlterableConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_config_operation(0)
            .with_value(Some(string(value)))])]);
    let what = format!("IncrementalAlterConfigs SET retention.ms {value}");
    let response: IncrementalAlterConfigsResponse =
        bounded(&what, client.request(ApiKey::IncrementalAlterConfigs, 1, &request)).await?;
    response
        .responses
        .first()
        .map(|r| r.error_code)
        .with_context(|| format!("{what}: no resource answered"))
}

/// AlterConfigs v1 setting `topic`'s whole config to `retention.ms` = `value`: the code.
async fn alter_retention(client: &mut Client, topic: &str, value: &str) -> anyhow::Result<i16> {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let request = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(string(topic))
        .with_configs(vec![AlterableConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(string(value)))])]);
    let what = format!("AlterConfigs retention.ms {value}");
    let response: AlterConfigsResponse = bounded(&what, client.request(ApiKey::AlterConfigs, 1, &request)).await?;
    response
        .responses
        .first()
        .map(|r| r.error_code)
        .with_context(|| format!("{what}: no resource answered"))
}

/// `topic`'s `retention.ms` as DescribeConfigs v1 reports it.
async fn describe_retention_ms(client: &mut Client, topic: &str) -> anyhow::Result<Option<String>> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(string(topic))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    let what = format!("DescribeConfigs retention.ms of {topic}");
    let response: DescribeConfigsResponse =
        bounded(&what, client.request(ApiKey::DescribeConfigs, 1, &request)).await?;
    let result = response.results.first().with_context(|| format!("{what}: no result"))?;
    ensure!(result.error_code == NONE, "{what}: error {}", result.error_code);
    Ok(result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .and_then(|c| c.value.as_ref().map(|v| v.to_string())))
}

/// The records `values` written to partition 0 of `topic` read back from offset 0: a wrapped
/// expiry would have deleted them and moved the log start.
async fn still_all_there(client: &mut Client, topic: &str, values: &[&[u8]], after: &str) -> anyhow::Result<()> {
    let fetched: FetchResponse = bounded(
        &format!("Fetch {topic} from 0 {after}"),
        client.request(ApiKey::Fetch, FETCH_V, &fetch_request(topic, 0, 0, 1, 0)),
    )
    .await?;
    let got = fetched_values(&fetched, topic, 0)?;
    let want: Vec<Option<Bytes>> = values.iter().map(|v| Some(Bytes::copy_from_slice(v))).collect();
    ensure!(
        got == want,
        "{after}: {topic} from offset 0 reads {got:?}, expected {want:?}: the retention expired them"
    );
    Ok(())
}

/// A Fetch v11 naming one partition of a real topic 5,000 times, first where a record waits
/// (answered at once: each partition at most once, as Kafka's fetch map keeps one entry per
/// partition), then at the high watermark with max_wait_ms = i32::MAX (24 days): the endpoint
/// must answer within its own cap on the wait, or close; still waiting after
/// [`LONG_POLL_GUARD`] fails.
pub async fn hostile_fetch_naming_one_partition_5000_times_waiting_i32_max(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-fetch", 1).await?;
            let offset = produce_ok(&mut client, &topic, 0, &[b"once"]).await?;
            for (from, what, within) in [
                (
                    offset,
                    "a Fetch v11 naming a partition with a record 5,000 times",
                    LIVENESS,
                ),
                (
                    offset + 1,
                    "a Fetch v11 naming a partition 5,000 times at its high watermark, waiting i32::MAX ms",
                    LONG_POLL_GUARD,
                ),
            ] {
                let mut fetcher = connect(&endpoint).await?;
                let request = fetch_request(&topic, 0, from, 5_000, i32::MAX);
                let (correlation_id, frame) = fetcher.encode_request(ApiKey::Fetch, FETCH_V, &request)?;
                let Answer::Frame(answer) = send_hostile(&mut fetcher, &frame, what, within).await? else {
                    continue;
                };
                let fetched: FetchResponse = decoded(ApiKey::Fetch, FETCH_V, correlation_id, answer, what)?;
                let mentions = fetched
                    .responses
                    .iter()
                    .filter(|t| t.topic.0.as_str() == topic)
                    .flat_map(|t| &t.partitions)
                    .filter(|p| p.partition_index == 0)
                    .count();
                ensure!(
                    mentions <= 1,
                    "{what}: the answer holds partition 0 {mentions} times; Kafka answers a partition once"
                );
                if from == offset && mentions == 1 {
                    let values = fetched_values(&fetched, &topic, 0)?;
                    ensure!(
                        values.first() == Some(&Some(Bytes::from_static(b"once"))),
                        "{what}: fetched {values:?}, expected the record \"once\" first"
                    );
                }
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Requests whose body is followed by bytes no field accounts for: closed (the body was not
/// written by the version it claims) or answered with a well-formed response of that API.
pub async fn hostile_trailing_bytes_after_the_request_body(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-hostile-trailing");
            let metadata = MetadataRequest::default().with_allow_auto_topic_creation(false);
            let heartbeat = HeartbeatRequest::default()
                .with_group_id(GroupId(string(&group)))
                .with_generation_id(1)
                .with_member_id(StrBytes::from_static_str("nobody"));
            let variants = [
                (
                    ApiKey::ApiVersions,
                    API_VERSIONS_V,
                    request_frame(
                        ApiKey::ApiVersions,
                        API_VERSIONS_V,
                        3,
                        "kig-hostile",
                        &api_versions_request(),
                    )?,
                ),
                (
                    ApiKey::Metadata,
                    METADATA_V,
                    request_frame(ApiKey::Metadata, METADATA_V, 3, "kig-hostile", &metadata)?,
                ),
                (
                    ApiKey::Heartbeat,
                    3,
                    request_frame(ApiKey::Heartbeat, 3, 3, "kig-hostile", &heartbeat)?,
                ),
            ];
            for (key, version, exact) in variants {
                let mut frame = BytesMut::from(&exact[..]);
                frame.put_slice(&[0, 0, 0, 0, 0]);
                let what = format!("a {key:?} v{version} request followed by 5 bytes");
                let mut client = connect(&endpoint).await?;
                if let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                    match key {
                        ApiKey::ApiVersions => {
                            let _: ApiVersionsResponse = decoded(key, version, 3, answer, &what)?;
                        }
                        ApiKey::Metadata => {
                            let _: MetadataResponse = decoded(key, version, 3, answer, &what)?;
                        }
                        _ => {
                            let _: HeartbeatResponse = decoded(key, version, 3, answer, &what)?;
                        }
                    }
                }
                new_connection_answers(&endpoint, &what).await?;
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One zstd batch of a few KB declaring, and holding, 1,000,000 empty records (7 MB
/// decompressed): decoded, each costs far more than its bytes on the wire. Every record's
/// offset delta is 0, which keeps the batch a few KB (an endpoint may renumber such records or
/// refuse them; either answer passes). Refused for its partition with any error code (nothing
/// stored), or acknowledged (every record stored); never a silence.
pub async fn hostile_zstd_batch_declaring_a_million_empty_records(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const RECORDS: i32 = 1_000_000;
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-records", 1).await?;
            let mut section = BytesMut::new();
            let record = Record {
                attributes: 0,
                timestamp_delta: 0,
                offset_delta: 0,
                key: None,
                value: Some(Bytes::new()),
                headers: vec![],
            };
            for _ in 0..RECORDS {
                encode_record(&mut section, &record);
            }
            let timestamp = now_ms()?;
            let header = BatchHeader {
                base_offset: 0,
                partition_leader_epoch: -1,
                attributes: BatchAttributes::plain(Compression::Zstd),
                last_offset_delta: RECORDS - 1,
                base_timestamp: timestamp,
                max_timestamp: timestamp,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
            };
            let batch = write_batch(&header, RECORDS, &compress(Compression::Zstd, &section));
            let what = format!(
                "a Produce of one zstd batch of {} bytes holding {RECORDS} empty records ({} bytes decompressed)",
                batch.len(),
                section.len()
            );
            drop(section);
            let request = produce_request(vec![(topic.as_str(), vec![(0, batch)])]);
            let produced: ProduceResponse =
                bounded(&what, client.request(ApiKey::Produce, PRODUCE_V, &request)).await?;
            let code = produced
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .map(|p| p.error_code)
                .with_context(|| format!("{what}: no answer for the partition"))?;
            let stored = latest(&mut client, &topic, 0).await?;
            let expected = if code == NONE { i64::from(RECORDS) } else { 0 };
            ensure!(
                stored == expected,
                "{what}: answered error {code}, yet the partition holds {stored} records (expected {expected})"
            );
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// Produce requests of several zstd batches that together decompress to 90% of the endpoint's
/// max_frame_size, sent back to back on two connections for [`NEAR_MAX_FOR`]: decompressing
/// them must not stop the watchdog's ApiVersions, Metadata or its group member's Heartbeats.
/// The last record of each batch has the timestamp -2, which Kafka refuses (INVALID_TIMESTAMP)
/// only once the batch is decompressed and read to its end: the endpoint does all the work and
/// stores nothing, so the attack can last without filling it. Each request must be answered,
/// for every partition, with any code; a partition holds exactly the records of the batches
/// acknowledged for it.
pub async fn hostile_near_max_frame_zstd_produces_on_two_connections(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    const PARTITIONS: i32 = 4;
    const VALUE_BYTES: usize = 16 * 1024;
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let topic = new_topic(&endpoint, &mut client, "kig-hostile-near-max", PARTITIONS).await?;
            let records_per_batch = max_frame_size * 9 / 10 / PARTITIONS as usize / VALUE_BYTES;
            let base_timestamp = now_ms()?;
            let records: Vec<Record> = (0..records_per_batch)
                .map(|i| Record {
                    attributes: 0,
                    // The last record's timestamp is -2; the batch's max timestamp stays valid.
                    timestamp_delta: if i + 1 == records_per_batch { -(base_timestamp + 2) } else { 0 },
                    offset_delta: 0,
                    key: None,
                    value: Some(Bytes::from(letters(VALUE_BYTES, i as u64 + 1))),
                    headers: vec![],
                })
                .collect();
            let batch = encode_batch(&RecordBatch::from_producer(Compression::Zstd, base_timestamp, records))?;
            let request = produce_request(vec![(topic.as_str(), (0..PARTITIONS).map(|p| (p, batch.clone())).collect())]);
            let decompressed = records_per_batch * VALUE_BYTES * PARTITIONS as usize;
            let framed = batch.len() * PARTITIONS as usize;
            let deadline = Instant::now() + NEAR_MAX_FOR;
            // Each connection's acknowledgements, per partition.
            let sender = |connection: usize| {
                let (endpoint, request, topic) = (endpoint.clone(), request.clone(), topic.clone());
                async move {
                    let mut client = connect(&endpoint).await?;
                    let mut acknowledged = [0i64; PARTITIONS as usize];
                    let mut sent = 0;
                    while Instant::now() < deadline {
                        sent += 1;
                        let what = format!(
                            "Produce #{sent} on connection {connection} ({framed} bytes of {PARTITIONS} zstd batches, {decompressed} decompressed)"
                        );
                        let produced: ProduceResponse =
                            bounded(&what, client.request(ApiKey::Produce, PRODUCE_V, &request)).await?;
                        let answers: Vec<(i32, i16)> = produced
                            .responses
                            .iter()
                            .filter(|t| t.name.0.as_str() == topic)
                            .flat_map(|t| t.partition_responses.iter().map(|p| (p.index, p.error_code)))
                            .collect();
                        let mut indexes: Vec<i32> = answers.iter().map(|(index, _)| *index).collect();
                        indexes.sort();
                        ensure!(
                            indexes == (0..PARTITIONS).collect::<Vec<_>>(),
                            "{what}: answered partitions {indexes:?}, expected each of 0..{PARTITIONS} once"
                        );
                        for (index, code) in answers {
                            if code == NONE {
                                acknowledged[index as usize] += 1;
                            }
                        }
                    }
                    anyhow::Ok(acknowledged)
                }
            };
            let (first, second) = tokio::try_join!(sender(1), sender(2))?;
            for partition in 0..PARTITIONS {
                let batches = first[partition as usize] + second[partition as usize];
                let expected = batches * records_per_batch as i64;
                let stored = latest(&mut client, &topic, partition).await?;
                ensure!(
                    stored == expected,
                    "partition {partition} holds {stored} records; {batches} batches of {records_per_batch} were acknowledged"
                );
            }
            Ok(())
        })
        .await?;
    Ok(Outcome::Passed)
}

/// How long [`hostile_near_max_frame_zstd_produces_on_two_connections`] keeps sending.
pub(super) const NEAR_MAX_FOR: Duration = Duration::from_secs(2);
