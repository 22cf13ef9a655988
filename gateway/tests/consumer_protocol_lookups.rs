//! What one ConsumerGroupHeartbeat looks up at the backend (GROUP-CONSUMER-LOOKUPS-1): the topics
//! its own request names that the group does not name yet, not every topic of the group. Counted
//! at the backend, in a file of its own since the count is process-wide.

use bytes::{Bytes, BytesMut};
use kafka_iggy_gateway::clock::{SharedRng, TokioClock};
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::gateway::Gateway;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::sync::Arc;

mod lookups_support;
use lookups_support::{metered_backend_with_topic, topic_lookups};

type MeteredGateway =
    Gateway<kafka_iggy_gateway::backend::metered::Metered<kafka_iggy_gateway::backend::embedded::EmbeddedBackend>>;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

async fn heartbeat(
    gateway: &MeteredGateway,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ConsumerGroupHeartbeat as i16)
        .with_request_api_version(1)
        .with_correlation_id(1)
        .with_client_id(Some(s("kig-50")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, ApiKey::ConsumerGroupHeartbeat.request_header_version(1))
        .unwrap();
    request.encode(&mut out, 1).unwrap();
    let Reply::Frame(frame) = gateway.handle_frame(out.freeze()).await.expect("answered") else {
        panic!("no response");
    };
    let mut bytes: Bytes = frame.to_bytes();
    ResponseHeader::decode(&mut bytes, ApiKey::ConsumerGroupHeartbeat.response_header_version(1)).unwrap();
    ConsumerGroupHeartbeatResponse::decode(&mut bytes, 1).unwrap()
}

/// How many `list_topics` calls the backend has answered in this process.
fn topic_listings() -> u64 {
    let text = kafka_iggy_gateway::metrics::metrics().encode();
    let name = "kafka_iggy_gateway_backend_call_duration_seconds_count{operation=\"list_topics\"}";
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse::<u64>().expect("a count"))
}

/// Backend calls made so far: (topic lookups, topic listings).
fn calls() -> (u64, u64) {
    (topic_lookups(), topic_listings())
}

fn since(before: (u64, u64)) -> (u64, u64) {
    let now = calls();
    (now.0 - before.0, now.1 - before.1)
}

/// `member`'s join of group `g`: `orders` and `missing` names of its own that no topic holds.
fn join(member: &str, missing: usize) -> ConsumerGroupHeartbeatRequest {
    let mut names: Vec<TopicName> = (0..missing)
        .map(|i| TopicName(s(&format!("{member}-missing-{i}"))))
        .collect();
    names.push(TopicName(s("orders")));
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(names))
        .with_topic_partitions(Some(Vec::new()))
}

fn steady(member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
}

#[tokio::test(start_paused = true)]
async fn group_consumer_lookups_1_a_heartbeat_looks_up_what_it_brings_not_the_group() {
    let config = Config::resolve(Args::default(), FileConfig::default()).expect("valid config");
    let clock = Arc::new(TokioClock::new(0));
    let backend = metered_backend_with_topic(&config, clock.clone(), "orders", 4).await;
    let gateway = Gateway::new(Arc::new(config), Arc::new(backend), clock, SharedRng::seeded(50));
    let mut epochs = Vec::new();
    for i in 0..20 {
        let member = format!("m{i}");
        let before = calls();
        let joined = heartbeat(&gateway, &join(&member, 20)).await;
        assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
        // Its own 20 names, and `orders` by the first member only; nothing of the others' 400.
        let (looked_up, listed) = since(before);
        assert!(
            looked_up <= 21 && listed == 0,
            "member {i}'s join made {looked_up} lookups and {listed} listings"
        );
        epochs.push((member, joined.member_epoch));
    }
    // A joiner naming 500 names new to the group lists the topics once instead.
    let before = calls();
    let many = heartbeat(&gateway, &join("many", 500)).await;
    assert_eq!(many.error_code, 0, "{:?}", many.error_message);
    assert_eq!(since(before), (0, 1), "one listing of the one stream");
    epochs.push(("many".to_string(), many.member_epoch));
    // Steady heartbeats, and one naming its subscription again, look nothing up; the group's
    // 901 names are checked against one listing for the whole interval.
    let before = calls();
    for (member, epoch) in &mut epochs {
        let answer = heartbeat(&gateway, &steady(member, *epoch)).await;
        assert_eq!(answer.error_code, 0, "{member}: {:?}", answer.error_message);
        *epoch = answer.member_epoch;
    }
    let again = join("m0", 20)
        .with_member_epoch(epochs[0].1)
        .with_topic_partitions(None);
    heartbeat(&gateway, &again).await;
    assert_eq!(since(before), (0, 1), "one listing per interval, no lookups");
    // Once the interval has passed, one heartbeat lists again.
    tokio::time::advance(kafka_iggy_gateway::groups::topic_regex::REFRESH_INTERVAL).await;
    let before = calls();
    for (member, epoch) in &epochs {
        let answer = heartbeat(&gateway, &steady(member, *epoch)).await;
        assert_eq!(answer.error_code, 0, "{member}: {:?}", answer.error_message);
    }
    assert_eq!(since(before), (0, 1));
}
