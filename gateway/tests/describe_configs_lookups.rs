//! LIMIT-DESCRIBECONFIGS-DUPLICATES-1 counted at the backend: a DescribeConfigs naming one topic
//! thousands of times answers every mention, as Kafka does, and looks the topic up once. The
//! only test in its binary, because it reads the process-wide backend-call counters (`Metered`),
//! which another test running beside it would move.

use kafka_iggy_gateway::clock::{SharedRng, TokioClock};
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::handlers::describe_configs;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

mod lookups_support;
use lookups_support::{metered_backend_with_topic, topic_lookups};

const MENTIONS: usize = 3_000;

fn topic_resource(name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
    DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(name.to_string()))
        .with_configuration_keys(keys.map(|keys| keys.iter().map(|k| StrBytes::from_string(k.to_string())).collect()))
}

#[tokio::test]
async fn limit_describeconfigs_duplicates_1_a_topic_named_3000_times_is_looked_up_once() {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    let clock = Arc::new(TokioClock::new(0));
    let backend = metered_backend_with_topic(&config, clock.clone(), "configured", 1).await;
    let gateway = Gateway::new(Arc::new(config), Arc::new(backend), clock, SharedRng::seeded(1));
    let session = gateway.default_session.clone();

    let mut resources = vec![topic_resource("configured", None); MENTIONS - 1];
    resources.push(topic_resource("configured", Some(&["retention.ms"])));
    let lookups_before = topic_lookups();
    let response = describe_configs::handle(
        &gateway,
        &session,
        DescribeConfigsRequest::default().with_resources(resources),
    )
    .await;
    assert_eq!(topic_lookups() - lookups_before, 1, "one lookup for the one topic");

    // As Kafka: every mention answered, each with the keys it asked for.
    assert_eq!(response.results.len(), MENTIONS);
    assert!(response.results.iter().all(|r| r.error_code == 0));
    assert_eq!(response.results[0].configs.len(), 6);
    let last: Vec<&str> = response.results[MENTIONS - 1]
        .configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(last, ["retention.ms"]);
}
