//! Frame-level tests, through `Gateway::handle_frame` on the embedded backend, of the topic
//! configs frameworks set at creation (docs/spec/topics.md, "Topic configs"): TOPIC-CONFIG-2's
//! table, compacted topics (TOPIC-COMPACT-1) and where their policy is kept (TOPIC-COMPACT-2).

use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, ConsumerOffsets};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

mod common;
use common::{answer, frame};

const STREAM: &str = "kafka";
const INVALID_CONFIG: i16 = 40;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn gateway() -> Arc<Gateway<EmbeddedBackend>> {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 9)
}

/// Creates `topic` with `configs`; returns its error code and message.
async fn create(g: &Gateway<EmbeddedBackend>, topic: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(s(topic)))
        .with_num_partitions(1)
        .with_replication_factor(-1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig::default().with_name(s(k)).with_value(Some(s(v))))
                .collect(),
        )]);
    let response: CreateTopicsResponse = answer(
        g.handle_frame(frame(ApiKey::CreateTopics, 7, &request)).await,
        ApiKey::CreateTopics,
        7,
    );
    let result = &response.topics[0];
    (
        result.error_code,
        result.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default(),
    )
}

/// `topic`'s described value and source of `key`.
async fn described(g: &Gateway<EmbeddedBackend>, topic: &str, key: &str) -> (String, i8) {
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(topic))
        .with_configuration_keys(Some(vec![s(key)]))]);
    let response: DescribeConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::DescribeConfigs, 4, &request)).await,
        ApiKey::DescribeConfigs,
        4,
    );
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "describing {topic}");
    let entry = &result.configs[0];
    (
        entry.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
        entry.config_source,
    )
}

async fn expiry(g: &Gateway<EmbeddedBackend>, topic: &str) -> Option<u64> {
    g.backend
        .get_topic(STREAM, topic)
        .await
        .unwrap()
        .expect("the topic exists")
        .message_expiry_us
}

/// One IncrementalAlterConfigs operation on `topic`; returns its error code.
async fn alter(g: &Gateway<EmbeddedBackend>, topic: &str, key: &str, op: i8, value: Option<&str>) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(topic))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s(key))
            .with_config_operation(op)
            .with_value(value.map(s))])]);
    let response: IncrementalAlterConfigsResponse = answer(
        g.handle_frame(frame(ApiKey::IncrementalAlterConfigs, 1, &request))
            .await,
        ApiKey::IncrementalAlterConfigs,
        1,
    );
    response.responses[0].error_code
}

#[tokio::test]
async fn topic_config_2_topic_compact_1_what_frameworks_set_at_creation() {
    let g = gateway();
    // Kafka Connect's internal topics, Schema Registry's _schemas, MirrorMaker 2's.
    assert_eq!(
        create(&g, "connect-configs", &[("cleanup.policy", "compact")]).await.0,
        0
    );
    // Kafka Streams: a repartition topic, a windowed changelog, a versioned changelog.
    let repartition = [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "52428800"),
        ("retention.ms", "-1"),
        ("message.timestamp.type", "CreateTime"),
    ];
    assert_eq!(create(&g, "app-repartition", &repartition).await.0, 0);
    let windowed = [
        ("cleanup.policy", "compact,delete"),
        ("retention.ms", "86400000"),
        ("message.timestamp.type", "CreateTime"),
    ];
    assert_eq!(create(&g, "app-windowed-changelog", &windowed).await.0, 0);
    let versioned = [("cleanup.policy", "compact"), ("min.compaction.lag.ms", "86400000")];
    assert_eq!(create(&g, "app-versioned-changelog", &versioned).await.0, 0);

    // TOPIC-COMPACT-1: compact alone never expires; compact,delete expires by retention.ms.
    assert_eq!(expiry(&g, "connect-configs").await, None);
    assert_eq!(expiry(&g, "app-windowed-changelog").await, Some(86_400_000_000));
    assert_eq!(expiry(&g, "app-repartition").await, None);
    // TOPIC-COMPACT-2: DescribeConfigs reports the policy as set.
    assert_eq!(
        described(&g, "connect-configs", "cleanup.policy").await,
        ("compact".into(), DYNAMIC_TOPIC_CONFIG)
    );
    assert_eq!(
        described(&g, "app-windowed-changelog", "cleanup.policy").await,
        ("compact,delete".into(), DYNAMIC_TOPIC_CONFIG)
    );
    assert_eq!(
        described(&g, "app-repartition", "cleanup.policy").await,
        ("delete".into(), DEFAULT_CONFIG)
    );

    // Refused values name their key, and nothing is created.
    for (topic, key, value) in [
        ("refused-size", "max.message.bytes", "2000000"),
        ("refused-append-time", "message.timestamp.type", "LogAppendTime"),
        ("refused-isr", "min.insync.replicas", "2"),
        ("refused-bytes", "retention.bytes", "1073741824"),
        ("refused-policy", "cleanup.policy", "none"),
        ("refused-unknown", "confluent.placement.constraints", "{}"),
    ] {
        let (code, message) = create(&g, topic, &[("cleanup.policy", "compact"), (key, value)]).await;
        assert_eq!(code, INVALID_CONFIG, "{key}={value}");
        assert!(message.contains(key), "{message}");
        assert!(g.backend.get_topic(STREAM, topic).await.unwrap().is_none(), "{topic}");
    }
}

#[tokio::test]
async fn topic_compact_1_alterconfigs_6_a_compact_topic_keeps_its_retention_without_applying_it() {
    let g = gateway();
    let topic = "changelog";
    let configs = [("cleanup.policy", "compact"), ("retention.ms", "3600000")];
    assert_eq!(create(&g, topic, &configs).await.0, 0);
    assert_eq!(expiry(&g, topic).await, None);
    assert_eq!(
        described(&g, topic, "retention.ms").await,
        ("3600000".into(), DYNAMIC_TOPIC_CONFIG)
    );
    // SET delete: the kept retention applies.
    assert_eq!(alter(&g, topic, "cleanup.policy", 0, Some("delete")).await, 0);
    assert_eq!(expiry(&g, topic).await, Some(3_600_000_000));
    assert_eq!(
        described(&g, topic, "cleanup.policy").await,
        ("delete".into(), DEFAULT_CONFIG)
    );
    // APPEND compact: compact,delete, retention still applies.
    assert_eq!(alter(&g, topic, "cleanup.policy", 2, Some("compact")).await, 0);
    assert_eq!(expiry(&g, topic).await, Some(3_600_000_000));
    assert_eq!(
        described(&g, topic, "cleanup.policy").await,
        ("compact,delete".into(), DYNAMIC_TOPIC_CONFIG)
    );
    // SUBTRACT delete: compact alone, records no longer expire, the retention is still reported.
    assert_eq!(alter(&g, topic, "cleanup.policy", 3, Some("delete")).await, 0);
    assert_eq!(expiry(&g, topic).await, None);
    assert_eq!(
        described(&g, topic, "retention.ms").await,
        ("3600000".into(), DYNAMIC_TOPIC_CONFIG)
    );
    // SET retention.ms on it: reported, not applied.
    assert_eq!(alter(&g, topic, "retention.ms", 0, Some("7200000")).await, 0);
    assert_eq!(expiry(&g, topic).await, None);
    assert_eq!(
        described(&g, topic, "retention.ms").await,
        ("7200000".into(), DYNAMIC_TOPIC_CONFIG)
    );
    // SUBTRACT of the last item is refused and changes nothing.
    assert_eq!(
        alter(&g, topic, "cleanup.policy", 3, Some("compact")).await,
        INVALID_CONFIG
    );
    assert_eq!(described(&g, topic, "cleanup.policy").await.0, "compact");
    // DELETE: back to delete, and the retention applies again.
    assert_eq!(alter(&g, topic, "cleanup.policy", 1, None).await, 0);
    assert_eq!(expiry(&g, topic).await, Some(7_200_000_000));
    // The markers are Iggy consumer groups of the topic, and no Kafka group.
    let groups = g.backend.list_consumer_groups(STREAM, topic).await.unwrap();
    assert!(groups.is_empty(), "{groups:?}");
}

#[tokio::test]
async fn alterconfigs_5_the_whole_config_sets_the_policy_and_leaving_it_out_resets_it() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let g = gateway();
    assert_eq!(create(&g, "status", &[]).await.0, 0);
    let whole = |configs: &[(&str, &str)]| {
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("status"))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| AlterableConfig::default().with_name(s(k)).with_value(Some(s(v))))
                    .collect(),
            )])
    };
    let send = |request: AlterConfigsRequest| {
        let g = g.clone();
        async move {
            let response: AlterConfigsResponse = answer(
                g.handle_frame(frame(ApiKey::AlterConfigs, 2, &request)).await,
                ApiKey::AlterConfigs,
                2,
            );
            response.responses[0].error_code
        }
    };
    let compact = whole(&[("cleanup.policy", "compact"), ("segment.bytes", "1048576")]);
    assert_eq!(send(compact).await, 0);
    assert_eq!(described(&g, "status", "cleanup.policy").await.0, "compact");
    let groups = g.backend.list_consumer_groups(STREAM, "status").await.unwrap();
    assert_eq!(groups, ["kafka.tc.cleanup.policy=compact"]);
    assert_eq!(send(whole(&[("retention.ms", "60000")])).await, 0);
    assert_eq!(described(&g, "status", "cleanup.policy").await.0, "delete");
    assert_eq!(expiry(&g, "status").await, Some(60_000_000));
}

/// CONNECT-INTERNAL-1: the three internal topics as a Kafka Connect 4.3 worker creates them
/// (`TopicAdmin.createOrFindTopics`: the broker's partitions and replication where told -1, and
/// `cleanup.policy=compact`), then checks them (`verifyTopicCleanupPolicyOnlyCompact`: every
/// config described, the policy exactly `compact`, or the worker stops); a second worker's
/// creation finds them.
#[tokio::test]
async fn connect_internal_1_internal_topics_are_created_and_described_as_a_worker_checks_them() {
    let g = gateway();
    for topic in ["cluster-configs", "cluster-offsets", "cluster-status"] {
        assert_eq!(
            create(&g, topic, &[("cleanup.policy", "compact")]).await,
            (0, String::new()),
            "{topic}"
        );
        let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(None)]);
        let response: DescribeConfigsResponse = answer(
            g.handle_frame(frame(ApiKey::DescribeConfigs, 4, &request)).await,
            ApiKey::DescribeConfigs,
            4,
        );
        let policies: Vec<String> = response.results[0]
            .configs
            .iter()
            .filter(|c| c.name.as_str() == "cleanup.policy")
            .map(|c| c.value.as_ref().map(|v| v.to_string()).unwrap_or_default())
            .collect();
        assert_eq!(policies, ["compact"], "{topic}: one entry, exactly compact");
        // A compacted topic's records stay (TOPIC-COMPACT-1): the worker rereads them all at start.
        assert_eq!(expiry(&g, topic).await, None, "{topic}");
        // Another worker of the cluster starting finds the topic.
        assert_eq!(
            create(&g, topic, &[("cleanup.policy", "compact")]).await.0,
            36,
            "{topic}: TOPIC_ALREADY_EXISTS"
        );
    }
}
