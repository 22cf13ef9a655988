//! Topic administration cases: CreateTopics' rules, DeleteTopics then Metadata, and
//! DescribeCluster agreeing with Metadata.

use super::*;

// ---------------------------------------------------------------------------------------------
// Topics.

pub(super) fn with_config(topic: CreatableTopic, name: &str, value: Option<&str>) -> CreatableTopic {
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_value(value.map(|v| StrBytes::from_string(v.to_string())));
    let mut configs = topic.configs.clone();
    configs.push(config);
    topic.with_configs(configs)
}

pub async fn create_topics_rules(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = crate::cases::require_apis(&endpoint, &[ApiKey::CreateTopics]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let fresh = |p: &str| endpoint.unique_topic(p);
    // (what, topic, expected code), all refused: sent in one request.
    let long_name = "x".repeat(250);
    let mut refused: Vec<(&str, CreatableTopic, i16)> = vec![
        ("a name with a space", creatable("bad name", 1), INVALID_TOPIC_EXCEPTION),
        ("an empty name", creatable("", 1), INVALID_TOPIC_EXCEPTION),
        ("the name ..", creatable("..", 1), INVALID_TOPIC_EXCEPTION),
        ("the name .", creatable(".", 1), INVALID_TOPIC_EXCEPTION),
        ("a 250-byte name", creatable(&long_name, 1), INVALID_TOPIC_EXCEPTION),
        ("a name with /", creatable("a/b", 1), INVALID_TOPIC_EXCEPTION),
        (
            "0 partitions",
            creatable(&fresh("kig-zero-partitions"), 0),
            INVALID_PARTITIONS,
        ),
        (
            "-2 partitions",
            creatable(&fresh("kig-minus-two-partitions"), -2),
            INVALID_PARTITIONS,
        ),
        (
            "replication factor 0",
            creatable(&fresh("kig-rf-zero"), 1).with_replication_factor(0),
            INVALID_REPLICATION_FACTOR,
        ),
        (
            "replication factor -2",
            creatable(&fresh("kig-rf-minus-two"), 1).with_replication_factor(-2),
            INVALID_REPLICATION_FACTOR,
        ),
        (
            "a manual replica assignment",
            creatable(&fresh("kig-assignment"), -1).with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(0)])]),
            INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            "an unknown config",
            with_config(
                creatable(&fresh("kig-cfg-unknown"), 1),
                "max.message.bytes",
                Some("2000000"),
            ),
            INVALID_CONFIG,
        ),
        (
            "retention.ms 0",
            with_config(creatable(&fresh("kig-cfg-zero"), 1), "retention.ms", Some("0")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms -2",
            with_config(creatable(&fresh("kig-cfg-minus-two"), 1), "retention.ms", Some("-2")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms abc",
            with_config(creatable(&fresh("kig-cfg-abc"), 1), "retention.ms", Some("abc")),
            INVALID_CONFIG,
        ),
        (
            "retention.ms null",
            with_config(creatable(&fresh("kig-cfg-null"), 1), "retention.ms", None),
            INVALID_CONFIG,
        ),
    ];
    if endpoint.profile.is_kafka() {
        // TOPIC-CONFIG-2 and TOPIC-REPLICATION-1 (deviations): Kafka takes every config it
        // defines, retention.ms 0 included, and honours a manual replica assignment.
        refused.retain(|(what, _, _)| {
            !matches!(
                *what,
                "an unknown config" | "retention.ms 0" | "a manual replica assignment"
            )
        });
    }
    let names: Vec<String> = refused.iter().map(|(_, t, _)| t.name.0.to_string()).collect();
    let results = create_topics(&mut client, refused.iter().map(|(_, t, _)| t.clone()).collect(), false).await?;
    for ((what, _, code), result) in refused.iter().zip(&results) {
        ensure!(
            result.error_code == *code,
            "CreateTopics with {what}: error {}, expected {code}",
            result.error_code
        );
    }
    for ((_, _, refusal), name) in refused.iter().zip(&names).filter(|(_, n)| !n.is_empty()) {
        // METADATA-NAME-1: a name Kafka refuses is reported invalid rather than unknown.
        let absent = if *refusal == INVALID_TOPIC_EXCEPTION {
            INVALID_TOPIC_EXCEPTION
        } else {
            UNKNOWN_TOPIC_OR_PARTITION
        };
        let code = metadata_code(&mut client, name).await?;
        ensure!(
            code == absent,
            "refused topic {name:?}: Metadata answers {code}, expected {absent}"
        );
    }

    // Accepted: retention.ms, and -1 partitions taking the default.
    let mut longest = fresh("kig-longest-name-");
    longest.extend(std::iter::repeat_n('x', 249 - longest.len()));
    let retained = fresh("kig-retention");
    let defaulted = fresh("kig-default-partitions");
    let never = fresh("kig-retention-never");
    let results = create_topics(
        &mut client,
        vec![
            with_config(creatable(&retained, 2), "retention.ms", Some("3600000")),
            creatable(&defaulted, -1),
            with_config(creatable(&never, 1), "retention.ms", Some("-1")),
            creatable(&longest, 1),
        ],
        false,
    )
    .await?;
    for result in &results {
        ensure!(
            result.error_code == NONE,
            "CreateTopics {}: error {} ({:?})",
            result.name.0.as_str(),
            result.error_code,
            result.error_message
        );
    }
    let response = metadata(&mut client, Some(&[&retained, &defaulted, &never])).await?;
    let partitions = |name: &str| {
        response
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
            .map(|t| (t.error_code, t.partitions.len()))
    };
    ensure!(
        partitions(&retained) == Some((NONE, 2)),
        "topic created with 2 partitions: Metadata says {:?}",
        partitions(&retained)
    );
    // TOPIC-PARTITIONS-1: the default is `default_partitions`, 1 unless configured otherwise.
    ensure!(
        partitions(&defaulted) == Some((NONE, 1)),
        "topic created with -1 partitions: Metadata says {:?}, expected the default 1",
        partitions(&defaulted)
    );
    ensure!(
        results[1].num_partitions == 1,
        "CreateTopics with -1 partitions answered num_partitions {}",
        results[1].num_partitions
    );

    // TOPIC-EXISTS-1, also under validate_only.
    for validate_only in [false, true] {
        let result = create_topics(&mut client, vec![creatable(&retained, 1)], validate_only)
            .await?
            .remove(0);
        ensure!(
            result.error_code == TOPIC_ALREADY_EXISTS,
            "CreateTopics (validate_only {validate_only}) for an existing topic: error {}, expected 36",
            result.error_code
        );
    }

    // TOPIC-VALIDATE-ONLY-1: every check applies, nothing is created.
    let preview = fresh("kig-validate-only");
    let results = create_topics(
        &mut client,
        vec![
            creatable(&preview, 3),
            // A config the gateway refuses (TOPIC-CONFIG-2); for Kafka, a value no Kafka accepts.
            match endpoint.profile {
                Profile::Gateway => with_config(
                    creatable(&fresh("kig-validate-bad-config"), 1),
                    "max.message.bytes",
                    Some("2000000"),
                ),
                Profile::Kafka => with_config(
                    creatable(&fresh("kig-validate-bad-config"), 1),
                    "retention.ms",
                    Some("abc"),
                ),
            },
            creatable("bad name", 1),
        ],
        true,
    )
    .await?;
    let codes: Vec<i16> = results.iter().map(|r| r.error_code).collect();
    ensure!(
        codes == vec![NONE, INVALID_CONFIG, INVALID_TOPIC_EXCEPTION],
        "validate_only answered {codes:?}, expected [0, 40, 17]"
    );
    ensure!(
        metadata_code(&mut client, &preview).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "validate_only created topic {preview}"
    );
    // And it can still be created for real.
    create_topic(&mut client, &preview, 3)
        .await
        .context("creating the topic validate_only previewed")?;
    Ok(Outcome::Passed)
}

pub async fn delete_topics_then_metadata_reports_unknown(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = crate::cases::require_apis(&endpoint, &[ApiKey::CreateTopics, ApiKey::DeleteTopics]).await? {
        return Ok(skip);
    }
    let mut client = connect(&endpoint).await?;
    let topic = endpoint.unique_topic("kig-delete");
    ensure!(
        metadata_code(&mut client, &topic).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "Metadata for a topic never created did not answer UNKNOWN_TOPIC_OR_PARTITION (3)"
    );
    create_topic(&mut client, &topic, 3).await?;
    let response = metadata(&mut client, Some(&[&topic])).await?;
    let brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
    ensure!(!brokers.is_empty(), "Metadata lists no broker");
    ensure!(
        brokers.contains(&response.controller_id.0),
        "controller {} is not a listed broker {brokers:?}",
        response.controller_id.0
    );
    let lowest = *brokers.iter().min().expect("non-empty");
    ensure!(
        response.controller_id.0 == lowest,
        "controller {} is not the lowest node id {lowest}",
        response.controller_id.0
    );
    if let Some(instance_id) = endpoint.instance_id {
        ensure!(
            brokers.contains(&i32::from(instance_id)),
            "the answering gateway (node {instance_id}) is not among the brokers {brokers:?}"
        );
    }
    ensure!(
        response.topics.len() == 1,
        "Metadata answered {} topics for one",
        response.topics.len()
    );
    let described = &response.topics[0];
    ensure!(
        described.error_code == NONE,
        "Metadata for {topic}: error {}",
        described.error_code
    );
    let mut indexes: Vec<i32> = described.partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort_unstable();
    ensure!(
        indexes == vec![0, 1, 2],
        "Metadata lists partitions {indexes:?}, expected [0, 1, 2]"
    );
    for p in &described.partitions {
        let leader = p.leader_id.0;
        ensure!(
            p.error_code == NONE,
            "partition {}: error {}",
            p.partition_index,
            p.error_code
        );
        ensure!(
            brokers.contains(&leader),
            "partition {} is led by {leader}, not a listed broker {brokers:?}",
            p.partition_index
        );
        if let Some(instance_id) = endpoint.instance_id {
            ensure!(
                leader == i32::from(instance_id),
                "partition {} is led by {leader}, not by the answering node {instance_id}",
                p.partition_index
            );
        }
        // METADATA-2 (a deviation): Kafka's leader epochs start at 0.
        let epoch_ok = match endpoint.profile {
            Profile::Gateway => p.leader_epoch == -1,
            Profile::Kafka => p.leader_epoch >= 0,
        };
        ensure!(
            epoch_ok,
            "partition {}: leader epoch {}, expected {}",
            p.partition_index,
            p.leader_epoch,
            if endpoint.profile.is_kafka() { "0 or more" } else { "-1" }
        );
        let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
        let isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
        ensure!(
            replicas == vec![leader] && isr == vec![leader],
            "partition {}: replicas {replicas:?}, ISR {isr:?}, expected the leader alone",
            p.partition_index
        );
    }
    ensure!(
        listed(&metadata(&mut client, None).await?, &topic),
        "Metadata for all topics does not list {topic}"
    );
    // v0 asks for every topic with an empty list.
    let all_v0: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            0,
            &MetadataRequest::default().with_topics(Some(vec![])),
        )
        .await?;
    ensure!(
        listed(&all_v0, &topic),
        "Metadata v0 with an empty topic list does not list {topic}"
    );
    // Topics named only by id: the gateway assigns no ids.
    let by_id = topic_by_id()?;
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![by_id.clone()]));
    let response: MetadataResponse = client.request(ApiKey::Metadata, 12, &request).await?;
    ensure!(
        response.topics.len() == 1 && response.topics[0].error_code == UNKNOWN_TOPIC_ID,
        "Metadata v12 for a topic named only by id: {:?}, expected UNKNOWN_TOPIC_ID (100)",
        response.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
    );
    let request = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default()
            .with_name(None)
            .with_topic_id(by_id.topic_id)])
        .with_timeout_ms(30_000);
    let response: DeleteTopicsResponse = client.request(ApiKey::DeleteTopics, 6, &request).await?;
    ensure!(
        response.responses.len() == 1 && response.responses[0].error_code == UNKNOWN_TOPIC_ID,
        "DeleteTopics v6 by id: {:?}, expected UNKNOWN_TOPIC_ID (100)",
        response.responses.iter().map(|t| t.error_code).collect::<Vec<_>>()
    );

    ensure!(
        delete_topic(&mut client, &topic).await? == NONE,
        "DeleteTopics of an existing topic failed"
    );
    ensure!(
        metadata_code(&mut client, &topic).await? == UNKNOWN_TOPIC_OR_PARTITION,
        "Metadata after DeleteTopics did not answer UNKNOWN_TOPIC_OR_PARTITION (3)"
    );
    ensure!(
        !listed(&metadata(&mut client, None).await?, &topic),
        "Metadata for all topics still lists the deleted {topic}"
    );
    let again = delete_topic(&mut client, &topic).await?;
    ensure!(
        again == UNKNOWN_TOPIC_OR_PARTITION,
        "deleting {topic} again: error {again}, expected 3"
    );
    // The name is free again.
    create_topic(&mut client, &topic, 1)
        .await
        .context("re-creating a deleted topic")?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// DescribeCluster and the config alterations (docs/spec/admin.md).

pub async fn describe_cluster_agrees_with_metadata(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    if let Some(skip) = crate::cases::require_apis(&endpoint, &[ApiKey::DescribeCluster]).await? {
        return Ok(skip);
    }
    let max = crate::cases::advertised_max(&endpoint, ApiKey::DescribeCluster)
        .await?
        .unwrap_or(0)
        .min(ApiKey::DescribeCluster.valid_versions().max);
    let mut client = connect(&endpoint).await?;
    let metadata: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            METADATA_V,
            &MetadataRequest::default().with_topics(Some(vec![])),
        )
        .await?;
    let mut listed: Vec<(i32, String, i32)> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    listed.sort();
    for version in 0..=max {
        let response: DescribeClusterResponse = client
            .request(ApiKey::DescribeCluster, version, &DescribeClusterRequest::default())
            .await
            .with_context(|| format!("DescribeCluster v{version}"))?;
        ensure!(
            response.error_code == NONE,
            "DescribeCluster v{version}: error {}",
            response.error_code
        );
        ensure!(
            Some(&response.cluster_id) == metadata.cluster_id.as_ref(),
            "DescribeCluster v{version}: cluster id {:?}, Metadata says {:?}",
            response.cluster_id,
            metadata.cluster_id
        );
        ensure!(
            response.controller_id == metadata.controller_id,
            "DescribeCluster v{version}: controller {:?}, Metadata says {:?}",
            response.controller_id,
            metadata.controller_id
        );
        let mut brokers: Vec<(i32, String, i32)> = response
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
            .collect();
        brokers.sort();
        ensure!(
            brokers == listed,
            "DescribeCluster v{version}: brokers {brokers:?}, Metadata lists {listed:?}"
        );
        // DESCRIBECLUSTER-2: not asked, Kafka's "not provided".
        ensure!(
            response.cluster_authorized_operations == i32::MIN,
            "DescribeCluster v{version}: authorized operations {} when not asked, expected {}",
            response.cluster_authorized_operations,
            i32::MIN
        );
    }
    Ok(Outcome::Passed)
}
