//! Topic configuration cases: DescribeConfigs' retention and fixed entries, AlterConfigs and
//! IncrementalAlterConfigs changing retention and refusing the rest.

use super::*;

pub async fn describe_configs_reports_retention_and_fixed_entries(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = crate::cases::require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DescribeConfigs]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let retained = endpoint.unique_topic("kig-describe-retained");
    let plain = endpoint.unique_topic("kig-describe-plain");
    let results = create_topics(
        &mut client,
        vec![
            with_config(creatable(&retained, 1), "retention.ms", Some("3600000")),
            creatable(&plain, 1),
        ],
        false,
    )
    .await?;
    ensure!(
        results.iter().all(|r| r.error_code == NONE),
        "creating the topics: {:?}",
        results.iter().map(|r| r.error_code).collect::<Vec<_>>()
    );
    let resource = |kind: i8, name: &str, keys: Option<Vec<&str>>| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(
                keys.map(|ks| ks.into_iter().map(|k| StrBytes::from_string(k.to_string())).collect()),
            )
    };
    let missing = endpoint.unique_topic("kig-describe-missing");
    let request = DescribeConfigsRequest::default().with_resources(vec![
        resource(2, &retained, None),
        resource(2, &plain, None),
        resource(2, &retained, Some(vec!["retention.ms"])),
        resource(2, &missing, None),
        resource(4, "0", None),
        resource(99, "what", None),
    ]);
    let response: DescribeConfigsResponse = client
        .request(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_V, &request)
        .await?;
    ensure!(
        response.results.len() == 6,
        "DescribeConfigs answered {} resources for 6",
        response.results.len()
    );
    let entries = |i: usize| -> Vec<(String, Option<String>, i8, bool)> {
        let mut e: Vec<_> = response.results[i]
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(|v| v.to_string()),
                    c.config_source,
                    c.read_only,
                )
            })
            .collect();
        e.sort();
        e
    };
    let fixed = |retention: &str, source: i8| {
        let mut e = vec![
            ("retention.ms".to_string(), Some(retention.to_string()), source, true),
            ("cleanup.policy".into(), Some("delete".into()), 5, true),
            ("compression.type".into(), Some("producer".into()), 5, true),
            ("max.message.bytes".into(), Some("64000000".into()), 5, true),
            ("message.timestamp.type".into(), Some("CreateTime".into()), 5, true),
            ("min.insync.replicas".into(), Some("1".into()), 5, true),
        ];
        e.sort();
        e
    };
    for i in 0..3 {
        ensure!(
            response.results[i].error_code == NONE,
            "DescribeConfigs resource {i}: error {}",
            response.results[i].error_code
        );
    }
    if endpoint.profile.is_kafka() {
        // DESCRIBECONFIGS-2 (a deviation): Kafka lists all of a topic's configs, alterable,
        // and its brokers' own for a broker resource; what holds everywhere is the retention
        // set at creation, as a topic override, and the answers for what does not exist.
        let retention = ("retention.ms".to_string(), Some("3600000".to_string()), 1, false);
        ensure!(
            entries(0).contains(&retention) && entries(2) == vec![retention.clone()],
            "topic with retention.ms 3600000: all {:?}, narrowed {:?}, expected {retention:?} in both",
            entries(0),
            entries(2)
        );
        ensure!(
            response.results[3].error_code == UNKNOWN_TOPIC_OR_PARTITION,
            "unknown topic: error {}",
            response.results[3].error_code
        );
        ensure!(
            response.results[5].error_code == INVALID_REQUEST,
            "resource type 99: error {}, expected INVALID_REQUEST (42)",
            response.results[5].error_code
        );
        return Ok(Outcome::Passed);
    }
    ensure!(
        entries(0) == fixed("3600000", 1),
        "topic with retention.ms 3600000: {:?}",
        entries(0)
    );
    ensure!(
        entries(1) == fixed("-1", 5),
        "topic without retention: {:?}",
        entries(1)
    );
    ensure!(
        entries(2) == vec![("retention.ms".to_string(), Some("3600000".to_string()), 1, true)],
        "narrowed to retention.ms: {:?}",
        entries(2)
    );
    ensure!(
        response.results[3].error_code == UNKNOWN_TOPIC_OR_PARTITION,
        "unknown topic: error {}",
        response.results[3].error_code
    );
    ensure!(
        response.results[4].error_code == NONE && response.results[4].configs.is_empty(),
        "broker resource: error {} with {} entries, expected 0 and none",
        response.results[4].error_code,
        response.results[4].configs.len()
    );
    ensure!(
        response.results[5].error_code == INVALID_REQUEST,
        "resource type 99: error {}, expected INVALID_REQUEST (42)",
        response.results[5].error_code
    );
    Ok(Outcome::Passed)
}

/// One IncrementalAlterConfigs v1 resource of `topic`: [(key, operation, value)].
pub(super) fn alter_resource(
    topic: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let s = |text: &str| StrBytes::from_string(text.to_string());
    AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(topic))
        .with_configs(
            configs
                .iter()
                .map(|(key, op, value)| {
                    AlterableConfig::default()
                        .with_name(s(key))
                        .with_config_operation(*op)
                        .with_value(value.map(s))
                })
                .collect(),
        )
}

/// Each resource's code.
pub(super) async fn alter_configs(
    client: &mut Client,
    resources: Vec<kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource>,
    validate_only: bool,
) -> anyhow::Result<Vec<i16>> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(validate_only);
    let response: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await
        .context("IncrementalAlterConfigs v1")?;
    Ok(response.responses.iter().map(|r| r.error_code).collect())
}

/// The topic's `retention.ms` as DescribeConfigs reports it.
pub(super) async fn retention_ms(client: &mut Client, topic: &str) -> anyhow::Result<Option<String>> {
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    let response: DescribeConfigsResponse = client
        .request(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_V, &request)
        .await?;
    let result = response.results.first().context("DescribeConfigs: no result")?;
    ensure!(
        result.error_code == NONE,
        "DescribeConfigs {topic}: error {}",
        result.error_code
    );
    Ok(result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .and_then(|c| c.value.as_ref().map(|v| v.to_string())))
}

pub async fn alter_configs_change_retention_and_refuse_the_rest(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) =
        crate::cases::require_apis(&endpoint, &[ApiKey::IncrementalAlterConfigs, ApiKey::DescribeConfigs]).await?
    {
        return Ok(skip);
    }
    let topic = endpoint.unique_topic("alter-configs");
    let mut client = connect(&endpoint).await?;
    create_topic(&mut client, &topic, 1).await?;
    // ALTERCONFIGS-1: validate_only changes nothing; SET changes what DescribeConfigs reports.
    let set = || alter_resource(&topic, &[("retention.ms", 0, Some("3600000"))]);
    let before = retention_ms(&mut client, &topic).await?;
    ensure!(
        alter_configs(&mut client, vec![set()], true).await? == [NONE],
        "validate_only SET refused"
    );
    ensure!(
        retention_ms(&mut client, &topic).await? == before,
        "validate_only changed retention.ms"
    );
    ensure!(
        alter_configs(&mut client, vec![set()], false).await? == [NONE],
        "SET retention.ms refused"
    );
    let after = retention_ms(&mut client, &topic).await?;
    ensure!(
        after.as_deref() == Some("3600000"),
        "retention.ms after SET 3600000: {after:?}"
    );
    // ALTERCONFIGS-6: retention.ms is not a list.
    let append = alter_resource(&topic, &[("retention.ms", 2, Some("1"))]);
    let codes = alter_configs(&mut client, vec![append], false).await?;
    ensure!(
        codes == [INVALID_CONFIG],
        "APPEND to retention.ms: {codes:?}, expected [INVALID_CONFIG (40)]"
    );
    // TOPIC-CONFIG-2 (a deviation): a config the gateway cannot honour is refused.
    let other = alter_resource(&topic, &[("max.message.bytes", 0, Some("2000000"))]);
    let codes = alter_configs(&mut client, vec![other], true).await?;
    let expected = match endpoint.profile {
        Profile::Gateway => INVALID_CONFIG,
        Profile::Kafka => NONE,
    };
    ensure!(
        codes == [expected],
        "SET max.message.bytes: {codes:?}, expected [{expected}]"
    );
    // ALTERCONFIGS-3: a topic named twice is refused at both mentions, and nothing changes.
    let twice = vec![
        alter_resource(&topic, &[("retention.ms", 0, Some("7200000"))]),
        alter_resource(&topic, &[("retention.ms", 0, Some("7200000"))]),
    ];
    let codes = alter_configs(&mut client, twice, false).await?;
    ensure!(
        codes == [INVALID_REQUEST, INVALID_REQUEST],
        "a topic named twice: {codes:?}, expected INVALID_REQUEST (42) twice"
    );
    let unchanged = retention_ms(&mut client, &topic).await?;
    ensure!(
        unchanged.as_deref() == Some("3600000"),
        "retention.ms after refused changes: {unchanged:?}"
    );
    // An unknown topic.
    let missing = alter_resource(
        &endpoint.unique_topic("alter-configs-missing"),
        &[("retention.ms", 0, Some("1000"))],
    );
    let codes = alter_configs(&mut client, vec![missing], false).await?;
    ensure!(
        codes == [UNKNOWN_TOPIC_OR_PARTITION],
        "an unknown topic: {codes:?}, expected [UNKNOWN_TOPIC_OR_PARTITION (3)]"
    );
    Ok(Outcome::Passed)
}
