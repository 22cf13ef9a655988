//! ApiVersions cases: the advertised ranges against the spec's table, v0 fallback for a version
//! the server does not know, and every served API answering at both ends of its range.

use super::*;

// ---------------------------------------------------------------------------------------------
// ApiVersions and headers.

pub async fn api_versions_lists_the_advertised_ranges(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = WireClient::connect(&endpoint.bootstrap).await?;
    let response: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 3, &api_versions_request()).await?;
    ensure!(response.error_code == 0, "error {}", response.error_code);
    let range = |key: ApiKey| {
        response
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    let within = |key, v| range(key).is_some_and(|(lo, hi)| (lo..=hi).contains(&v));
    ensure!(
        within(ApiKey::Produce, 3) && within(ApiKey::Fetch, 4),
        "librdkafka's MsgVer2 gate (Produce v3, Fetch v4) is not met: {response:?}"
    );
    ensure!(
        within(ApiKey::Produce, 0),
        "Produce must be advertised from v0 (KAFKA-18659)"
    );
    ensure!(
        within(ApiKey::InitProducerId, 0),
        "idempotence gate (InitProducerId v0) is not met"
    );
    // PROTO-APIVERSIONS-2 (a deviation): Kafka sends its features (KIP-584) in these tags.
    if !endpoint.profile.is_kafka() {
        ensure!(
            response.supported_features.is_empty() && response.finalized_features.is_empty(),
            "feature tags are sent"
        );
    }
    Ok(Outcome::Passed)
}

/// PROTO-VERSION-1's table, exactly.
pub(super) const SPEC_TABLE: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 0, 8),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 0, 7),
    (ApiKey::DeleteTopics, 0, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 0, 4),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterConfigs, 0, 2),
    // AUTH-SASL-HANDSHAKE-1: advertised whether SASL is on or not, as Kafka brokers do.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The consumer-group APIs ("the group APIs (added by issue 4)" in PROTO-VERSION-1).
pub(super) const GROUP_APIS: &[ApiKey] = &[
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    // GROUP-CONSUMER-HEARTBEAT-1, GROUP-CONSUMER-DESCRIBE-1: KIP-848's consumer group protocol.
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

pub async fn api_versions_v0_matches_the_spec_table(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = gateway_only(
        &endpoint,
        "PROTO-VERSION-1's table is this gateway's own choice of APIs and versions",
    ) {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    // v0: the version every client can send first; answered with response header v0.
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    ensure!(
        response.error_code == NONE,
        "ApiVersions v0: error {}",
        response.error_code
    );
    let listed: Vec<(i16, i16, i16)> = response
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    for &(key, lo, hi) in SPEC_TABLE {
        let got: Vec<_> = listed.iter().filter(|l| l.0 == key as i16).collect();
        ensure!(
            got == vec![&(key as i16, lo, hi)],
            "{key:?} (key {}): ApiVersions v0 lists {got:?}, the spec table says {lo}..={hi}",
            key as i16
        );
    }
    // Anything beyond the table may only be the consumer-group APIs, which the spec leaves to
    // issue 4; never SASL, transactions or any other API.
    let extra: Vec<_> = listed
        .iter()
        .filter(|l| !SPEC_TABLE.iter().any(|s| s.0 as i16 == l.0) && !GROUP_APIS.iter().any(|g| *g as i16 == l.0))
        .collect();
    ensure!(
        extra.is_empty(),
        "ApiVersions v0 advertises APIs outside the spec table: (key, min, max) {extra:?}"
    );
    Ok(Outcome::Passed)
}

pub async fn api_versions_future_version_gets_v0_unsupported_version(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    // The endpoint's own ApiVersions range, from a v0 request every broker answers.
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    ensure!(
        advertised.error_code == NONE,
        "ApiVersions v0: error {}",
        advertised.error_code
    );
    let own = advertised
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .context("ApiVersions v0 does not list ApiVersions (key 18)")?;
    let (lo, hi) = (own.min_version, own.max_version);
    let mut versions = vec![hi + 1, 99, 127];
    versions.retain(|&v| v > hi);
    versions.dedup();
    for version in versions {
        let correlation_id = 7000 + i32::from(version);
        // A header v2 (what a flexible ApiVersions carries) and a v3-shaped body: two empty
        // compact strings and an empty tag section. The server must not need to parse either.
        let frame = raw_request(ApiKey::ApiVersions as i16, version, correlation_id, true, &[1, 1, 0]);
        client.send_frame(&frame).await?;
        let reply = client
            .recv_frame()
            .await?
            .with_context(|| format!("the connection closed instead of answering ApiVersions v{version}"))?;
        let not_v0 = || format!("ApiVersions v{version}: not a v0 body behind response header v0");
        let response: ApiVersionsResponse =
            Client::decode_response(ApiKey::ApiVersions, 0, correlation_id, reply).with_context(not_v0)?;
        ensure!(
            response.error_code == UNSUPPORTED_VERSION,
            "ApiVersions v{version}: error {}, expected UNSUPPORTED_VERSION (35)",
            response.error_code
        );
        let entries: Vec<&ApiVersion> = response.api_keys.iter().collect();
        ensure!(
            entries.len() == 1 && entries[0].api_key == ApiKey::ApiVersions as i16,
            "ApiVersions v{version}: expected the single entry for key 18, got {entries:?}"
        );
        ensure!(
            (entries[0].min_version, entries[0].max_version) == (lo, hi),
            "ApiVersions v{version}: lists ApiVersions {}..={}, but the endpoint advertises {lo}..={hi}",
            entries[0].min_version,
            entries[0].max_version
        );
    }
    // KIP-511: the client retries on the same connection at the highest version both speak.
    let retry = hi.min(ApiKey::ApiVersions.valid_versions().max);
    let response: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, retry, &api_versions_request())
        .await
        .with_context(|| format!("ApiVersions v{retry} on the same connection after the refusal"))?;
    ensure!(
        response.error_code == NONE,
        "ApiVersions v{retry} retry: error {}",
        response.error_code
    );
    Ok(Outcome::Passed)
}

/// Sends a harmless request for `key` at `version` and decodes its answer (header and body, no
/// bytes left over). `false` when the suite has no request to send for `key`.
pub(super) async fn harmless_request(client: &mut Client, key: ApiKey, version: i16) -> anyhow::Result<bool> {
    if legacy::decodes(key, version) {
        // PROTO-LEGACY-1: versions below kafka-protocol's range go through the legacy codec.
        return crate::cases::legacy_cases::harmless_legacy_request(client, key, version)
            .await
            .map(|()| true);
    }
    match key {
        ApiKey::Produce => {
            let request = ProduceRequest::default().with_acks(1).with_timeout_ms(1000);
            let _: ProduceResponse = client.request(key, version, &request).await?;
        }
        ApiKey::Fetch => {
            let _: FetchResponse = client.request(key, version, &FetchRequest::default()).await?;
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1));
            let _: ListOffsetsResponse = client.request(key, version, &request).await?;
        }
        ApiKey::Metadata => {
            // allow_auto_topic_creation exists from v4; before it the request cannot carry false.
            let request = MetadataRequest::default().with_allow_auto_topic_creation(version < 4);
            let _: MetadataResponse = client.request(key, version, &request).await?;
        }
        ApiKey::ApiVersions => {
            let _: ApiVersionsResponse = client.request(key, version, &api_versions_request()).await?;
        }
        ApiKey::CreateTopics => {
            let _: CreateTopicsResponse = client.request(key, version, &CreateTopicsRequest::default()).await?;
        }
        ApiKey::DeleteTopics => {
            let _: DeleteTopicsResponse = client.request(key, version, &DeleteTopicsRequest::default()).await?;
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            let _: InitProducerIdResponse = client.request(key, version, &request).await?;
        }
        ApiKey::DescribeConfigs => {
            let _: DescribeConfigsResponse = client.request(key, version, &DescribeConfigsRequest::default()).await?;
        }
        ApiKey::DescribeCluster => {
            let _: DescribeClusterResponse = client.request(key, version, &DescribeClusterRequest::default()).await?;
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = IncrementalAlterConfigsRequest::default().with_validate_only(true);
            let _: IncrementalAlterConfigsResponse = client.request(key, version, &request).await?;
        }
        ApiKey::AlterConfigs => {
            let request = AlterConfigsRequest::default().with_validate_only(true);
            let _: AlterConfigsResponse = client.request(key, version, &request).await?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

pub async fn every_served_api_answers_at_its_lowest_and_highest_version(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let mut client = connect(&endpoint).await?;
    let advertised: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, API_VERSIONS_V, &api_versions_request())
        .await?;
    ensure!(
        advertised.error_code == NONE,
        "ApiVersions: error {}",
        advertised.error_code
    );
    let mut exercised = 0;
    for entry in &advertised.api_keys {
        let Ok(key) = ApiKey::try_from(entry.api_key) else {
            continue;
        };
        // Produce v0-2 are advertised but not served (PROTO-VERSION-2); neither kafka-protocol
        // nor the gateway's legacy codec encodes them. Below kafka-protocol's range, the legacy
        // codec encodes the old versions the gateway serves (PROTO-LEGACY-1).
        let valid = key.valid_versions();
        let lowest = legacy::lowest_decodable(key);
        let (lo, hi) = (entry.min_version.max(lowest), entry.max_version.min(valid.max));
        if lo > hi {
            continue;
        }
        for version in [lo, hi] {
            // Header versions: the request header follows the body's flexibility and the
            // response header v0/v1 likewise (ApiVersions: always v0); decoding checks both.
            let sent = harmless_request(&mut client, key, version).await.with_context(|| {
                format!(
                    "{key:?} v{version} (advertised {}..={})",
                    entry.min_version, entry.max_version
                )
            })?;
            exercised += usize::from(sent);
        }
    }
    ensure!(exercised > 0, "no advertised API could be exercised");
    Ok(Outcome::Passed)
}
