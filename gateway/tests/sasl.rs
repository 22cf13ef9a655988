//! SASL PLAIN through `Gateway::handle` on the embedded backend, frame by frame: what a
//! connection may ask before and after authenticating (AUTH-SASL-*), and Iggy's permissions
//! deciding each request of the authenticated user (AUTHZ-*).

use bytes::{Bytes, BytesMut};
use iggy_common::{Permissions, StreamPermissions, TopicPermissions, UserStatus};
use kafka_iggy_gateway::auth::connection::ConnectionAuth;
use kafka_iggy_gateway::auth::settings::{Mechanism, SaslSettings};
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use kafka_iggy_gateway::clock::TokioClock;
use kafka_iggy_gateway::config::{Args, Config, FileConfig};
use kafka_iggy_gateway::protocol::request::RequestError;
use kafka_iggy_gateway::reply::Reply;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kig_core::batch::{encode_batch, Record, RecordBatch};
use kig_core::compression::Compression;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

mod sasl_support;
use sasl_support::*;

const STREAM: &str = "kafka";

async fn topic(g: &EmbeddedGateway, name: &str) -> (usize, usize) {
    g.backend.ensure_stream(STREAM).await.unwrap();
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    g.backend.create_topic(STREAM, name, spec).await.unwrap();
    g.backend.topic_ids(STREAM, name).unwrap()
}

/// Permissions on single topics of the stream.
fn on_topics(stream_id: usize, topics: &[(usize, TopicPermissions)]) -> Permissions {
    let stream = StreamPermissions {
        topics: Some(topics.iter().cloned().collect()),
        ..StreamPermissions::default()
    };
    Permissions {
        streams: Some(BTreeMap::from([(stream_id, stream)])),
        ..Permissions::default()
    }
}

fn read_and_write() -> TopicPermissions {
    TopicPermissions {
        read_topic: true,
        send_messages: true,
        ..TopicPermissions::default()
    }
}

fn read_only() -> TopicPermissions {
    TopicPermissions {
        read_topic: true,
        ..TopicPermissions::default()
    }
}

fn metadata(topics: &[&str]) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(t.to_string())))))
            .collect(),
    ))
}

fn produce(topic: &str) -> ProduceRequest {
    let record = Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: vec![],
    };
    let batch = RecordBatch::from_producer(Compression::None, 1_700_000_000_000, vec![record]);
    let records = encode_batch(&batch).unwrap();
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn produce_code(response: &ProduceResponse) -> i16 {
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn auth_sasl_gate_1_nothing_but_api_versions_and_sasl_before_authentication() {
    let g = gateway();
    let mut c = g.new_connection(peer());
    let Ok(Reply::Frame(answered)) = g
        .handle(frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()), &mut c)
        .await
    else {
        panic!("ApiVersions is answered before authentication");
    };
    let mut bytes = answered.to_bytes();
    // ApiVersions answers with response header v0 whatever its version (PROTO-HEADER-1).
    ResponseHeader::decode(&mut bytes, 0).unwrap();
    let versions = ApiVersionsResponse::decode(&mut bytes, 3).unwrap();
    let advertised = |key: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(advertised(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(advertised(ApiKey::SaslAuthenticate), Some((0, 2)));
    let refused = g.handle(frame(ApiKey::Metadata, 12, &metadata(&[])), &mut c).await;
    assert!(matches!(refused, Err(RequestError::NotAuthenticated(_))), "{refused:?}");
    assert_eq!(handshake(&g, &mut c, 1).await.error_code, 0);
    let still = g.handle(frame(ApiKey::Produce, 9, &produce("t")), &mut c).await;
    assert!(
        matches!(still, Err(RequestError::NotAuthenticated(_))),
        "a handshake alone authenticates nothing"
    );
}

#[tokio::test]
async fn auth_sasl_plain_1_the_right_password_serves_the_user_and_a_wrong_one_is_refused_and_closed() {
    let g = gateway();
    let (s, t) = topic(&g, "orders").await;
    g.backend
        .create_user(
            "alice",
            "wonderland",
            UserStatus::Active,
            Some(on_topics(s, &[(t, read_and_write())])),
        )
        .unwrap();
    let mut c = g.new_connection(peer());
    let (ok, close) = login(&g, &mut c, "alice", "wonderland").await;
    assert_eq!((ok.error_code, close), (0, false));
    assert!(ok.session_lifetime_ms > 0, "KIP-368: v1+ is told the session lifetime");
    let response: ProduceResponse = answer(
        g.handle(frame(ApiKey::Produce, 9, &produce("orders")), &mut c).await,
        ApiKey::Produce,
        9,
    );
    assert_eq!(produce_code(&response), 0);

    let mut wrong = g.new_connection(peer());
    let (refused, close) = login(&g, &mut wrong, "alice", "not-it").await;
    assert_eq!(refused.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(close, "AUTH-SASL-FAIL-1: the connection closes after the answer");
    let message = refused.error_message.map(|m| m.to_string()).unwrap_or_default();
    assert!(message.contains("invalid username or password"), "{message}");
    let (unknown, _) = login(&g, &mut g.new_connection(peer()), "mallory", "x-password").await;
    assert_eq!(unknown.error_code, 58);
}

#[tokio::test]
async fn auth_sasl_handshake_1_v0_sends_the_plain_message_bare() {
    let g = gateway();
    topic(&g, "raw").await;
    g.backend
        .create_user("bob", "builder", UserStatus::Active, Some(Permissions::root()))
        .unwrap();
    let mut c = g.new_connection(peer());
    assert_eq!(handshake(&g, &mut c, 0).await.mechanisms.len(), 1);
    assert!(c.expects_raw_token());
    match g.handle(plain("bob", "builder"), &mut c).await.expect("authenticated") {
        Reply::Frame(b) => assert!(b.is_empty(), "an empty frame answers a good PLAIN message"),
        other => panic!("{other:?}"),
    }
    let response: MetadataResponse = answer(
        g.handle(frame(ApiKey::Metadata, 4, &metadata(&["raw"])), &mut c).await,
        ApiKey::Metadata,
        4,
    );
    assert_eq!(response.topics[0].error_code, 0);

    let mut bad = g.new_connection(peer());
    handshake(&g, &mut bad, 0).await;
    assert!(matches!(
        g.handle(plain("bob", "wrong"), &mut bad).await,
        Err(RequestError::NotAuthenticated(_))
    ));
}

#[tokio::test]
async fn auth_sasl_handshake_1_only_plain_is_offered_and_none_without_sasl() {
    let g = gateway();
    let mut c = g.new_connection(peer());
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512"));
    let response: SaslHandshakeResponse = answer(
        g.handle(frame(ApiKey::SaslHandshake, 1, &request), &mut c).await,
        ApiKey::SaslHandshake,
        1,
    );
    assert_eq!(response.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(response.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);

    let open = gateway_with(None, None);
    let mut c = open.new_connection(peer());
    let response = handshake_code(&open, &mut c).await;
    assert_eq!(response, 33, "SASL off: no mechanism");
    // Without SASL every request is served, as the configured account.
    let response: MetadataResponse = answer(
        open.handle(frame(ApiKey::Metadata, 12, &metadata(&[])), &mut c).await,
        ApiKey::Metadata,
        12,
    );
    assert!(response.topics.is_empty());
}

async fn handshake_code(g: &EmbeddedGateway, c: &mut ConnectionAuth<EmbeddedBackend>) -> i16 {
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let r: SaslHandshakeResponse = answer(
        g.handle(frame(ApiKey::SaslHandshake, 1, &request), c).await,
        ApiKey::SaslHandshake,
        1,
    );
    r.error_code
}

#[tokio::test]
async fn auth_sasl_fail_1_authenticate_without_handshake_is_an_illegal_state() {
    let g = gateway();
    let mut c = g.new_connection(peer());
    let request = SaslAuthenticateRequest::default().with_auth_bytes(plain("a", "b"));
    match g
        .handle(frame(ApiKey::SaslAuthenticate, 1, &request), &mut c)
        .await
        .unwrap()
    {
        Reply::FrameThenClose(b) => {
            let r: SaslAuthenticateResponse = decode(b, ApiKey::SaslAuthenticate, 1);
            assert_eq!(r.error_code, 34, "ILLEGAL_SASL_STATE");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn auth_sasl_reauth_1_re_authentication_keeps_the_user() {
    let g = gateway();
    g.backend
        .create_user("carol", "carol-pw", UserStatus::Active, None)
        .unwrap();
    g.backend
        .create_user("dave", "dave-pw", UserStatus::Active, None)
        .unwrap();
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "carol", "carol-pw").await.0.error_code, 0);
    assert_eq!(
        login(&g, &mut c, "carol", "carol-pw").await.0.error_code,
        0,
        "the same user re-authenticates"
    );
    let (other, close) = login(&g, &mut c, "dave", "dave-pw").await;
    assert_eq!((other.error_code, close), (58, true));
}

#[tokio::test(start_paused = true)]
async fn auth_sasl_reauth_1_an_expired_session_must_re_authenticate() {
    let g = gateway_with(Some(Mechanism::Plain), Some(60_000));
    g.backend
        .create_user("erin", "erin-pw", UserStatus::Active, None)
        .unwrap();
    let mut c = g.new_connection(peer());
    let (ok, _) = login(&g, &mut c, "erin", "erin-pw").await;
    assert_eq!(ok.session_lifetime_ms, 60_000);
    tokio::time::advance(std::time::Duration::from_millis(60_000)).await;
    assert!(matches!(
        g.handle(frame(ApiKey::Metadata, 12, &metadata(&[])), &mut c).await,
        Err(RequestError::NotAuthenticated(_))
    ));
    assert_eq!(login(&g, &mut c, "erin", "erin-pw").await.0.error_code, 0);
    let served: MetadataResponse = answer(
        g.handle(frame(ApiKey::Metadata, 12, &metadata(&[])), &mut c).await,
        ApiKey::Metadata,
        12,
    );
    assert!(served.topics.is_empty());
}

#[tokio::test]
async fn authz_session_1_each_request_runs_under_the_users_own_permissions() {
    let g = gateway();
    let (s, allowed) = topic(&g, "allowed").await;
    let (_, readable) = topic(&g, "readable").await;
    topic(&g, "hidden").await;
    let perms = on_topics(s, &[(allowed, read_and_write()), (readable, read_only())]);
    g.backend
        .create_user("frank", "frank-pw", UserStatus::Active, Some(perms))
        .unwrap();
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "frank", "frank-pw").await.0.error_code, 0);

    let produced = |topic: &'static str| produce(topic);
    let ok: ProduceResponse = answer(
        g.handle(frame(ApiKey::Produce, 9, &produced("allowed")), &mut c).await,
        ApiKey::Produce,
        9,
    );
    assert_eq!(produce_code(&ok), 0, "allowed to produce");
    let refused: ProduceResponse = answer(
        g.handle(frame(ApiKey::Produce, 9, &produced("readable")), &mut c).await,
        ApiKey::Produce,
        9,
    );
    assert_eq!(
        produce_code(&refused),
        29,
        "read but not write: TOPIC_AUTHORIZATION_FAILED"
    );
    let hidden: ProduceResponse = answer(
        g.handle(frame(ApiKey::Produce, 9, &produced("hidden")), &mut c).await,
        ApiKey::Produce,
        9,
    );
    assert_eq!(produce_code(&hidden), 29);

    let m: MetadataResponse = answer(
        g.handle(
            frame(ApiKey::Metadata, 12, &metadata(&["allowed", "readable", "hidden"])),
            &mut c,
        )
        .await,
        ApiKey::Metadata,
        12,
    );
    let codes: Vec<i16> = m.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![0, 0, 29],
        "AUTHZ-METADATA-1: a topic the user may not read is not described"
    );
    let all: MetadataResponse = answer(
        g.handle(frame(ApiKey::Metadata, 12, &MetadataRequest::default()), &mut c)
            .await,
        ApiKey::Metadata,
        12,
    );
    assert!(
        all.topics.is_empty(),
        "topic-level grants cannot list the stream (Iggy's GetTopics)"
    );
}

/// A JoinGroup v0 of a consumer subscribing to `topic`.
fn join(group: &str, topic: &str) -> JoinGroupRequest {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    let subscription =
        ConsumerProtocolSubscription::default().with_topics(vec![StrBytes::from_string(topic.to_string())]);
    let mut metadata = BytesMut::new();
    metadata.extend_from_slice(&0i16.to_be_bytes());
    subscription.encode(&mut metadata, 0).unwrap();
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(metadata.freeze())])
}

/// AUTHZ-GROUP-1 and AUTHZ-GROUP-3: joining needs poll permission on the subscribed topics, and
/// DescribeGroups and ListGroups show a group only to a user who could join it.
#[tokio::test(start_paused = true)]
async fn authz_group_3_groups_are_visible_only_to_who_may_join_them() {
    let g = gateway();
    let (s, t) = topic(&g, "orders").await;
    g.backend
        .create_user(
            "alice",
            "alice-pw",
            UserStatus::Active,
            Some(on_topics(s, &[(t, read_only())])),
        )
        .unwrap();
    g.backend
        .create_user("bob", "bob-pw", UserStatus::Active, None)
        .unwrap();
    let mut alice = g.new_connection(peer());
    let mut bob = g.new_connection(peer());
    assert_eq!(login(&g, &mut alice, "alice", "alice-pw").await.0.error_code, 0);
    assert_eq!(login(&g, &mut bob, "bob", "bob-pw").await.0.error_code, 0);

    let refused: JoinGroupResponse = answer(
        g.handle(frame(ApiKey::JoinGroup, 0, &join("g1", "orders")), &mut bob)
            .await,
        ApiKey::JoinGroup,
        0,
    );
    assert_eq!(refused.error_code, 30, "AUTHZ-GROUP-1: GROUP_AUTHORIZATION_FAILED");
    let joined: JoinGroupResponse = answer(
        g.handle(frame(ApiKey::JoinGroup, 0, &join("g1", "orders")), &mut alice)
            .await,
        ApiKey::JoinGroup,
        0,
    );
    assert_eq!(joined.error_code, 0);

    let list = ListGroupsRequest::default();
    let seen: ListGroupsResponse = answer(
        g.handle(frame(ApiKey::ListGroups, 4, &list), &mut alice).await,
        ApiKey::ListGroups,
        4,
    );
    assert_eq!(seen.groups.len(), 1);
    let unseen: ListGroupsResponse = answer(
        g.handle(frame(ApiKey::ListGroups, 4, &list), &mut bob).await,
        ApiKey::ListGroups,
        4,
    );
    assert!(unseen.groups.is_empty(), "{unseen:?}");
    let describe = DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("g1"))]);
    let described: DescribeGroupsResponse = answer(
        g.handle(frame(ApiKey::DescribeGroups, 5, &describe), &mut alice).await,
        ApiKey::DescribeGroups,
        5,
    );
    assert_eq!(
        (described.groups[0].error_code, described.groups[0].members.len()),
        (0, 1)
    );
    let hidden: DescribeGroupsResponse = answer(
        g.handle(frame(ApiKey::DescribeGroups, 5, &describe), &mut bob).await,
        ApiKey::DescribeGroups,
        5,
    );
    assert_eq!((hidden.groups[0].error_code, hidden.groups[0].members.len()), (30, 0));
}

fn create_topics(topic: &str) -> CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
        .with_num_partitions(1)
        .with_replication_factor(1)])
}

/// AUTHZ-MAP-1 on CreateTopics: manage_topics on the stream creates (without the read_stream a
/// stream lookup would need), no grant is TOPIC_AUTHORIZATION_FAILED, and a topic mapped to a
/// stream that does not exist, which the user may not create, is CLUSTER_AUTHORIZATION_FAILED.
#[tokio::test]
async fn authz_map_1_create_topics_as_the_user() {
    use kafka_iggy_gateway::config::IggyTarget;
    let file = FileConfig {
        topics: BTreeMap::from([(
            "elsewhere".to_string(),
            IggyTarget {
                stream: "other-stream".into(),
                topic: "elsewhere".into(),
            },
        )]),
        ..FileConfig::default()
    };
    let args = Args {
        sasl: SaslSettings {
            mechanism: Some(Mechanism::Plain),
            ..SaslSettings::default()
        },
        ..Args::default()
    };
    let config = Config::resolve(args, file).unwrap();
    let g = kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7);
    let (s, _) = topic(&g, "existing").await;
    let admin = Permissions {
        streams: Some(BTreeMap::from([(
            s,
            StreamPermissions {
                manage_topics: true,
                ..StreamPermissions::default()
            },
        )])),
        ..Permissions::default()
    };
    g.backend
        .create_user("admin", "admin-pw", UserStatus::Active, Some(admin))
        .unwrap();
    g.backend
        .create_user("nobody", "nobody-pw", UserStatus::Active, None)
        .unwrap();
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "admin", "admin-pw").await.0.error_code, 0);
    let created: CreateTopicsResponse = answer(
        g.handle(frame(ApiKey::CreateTopics, 5, &create_topics("fresh")), &mut c)
            .await,
        ApiKey::CreateTopics,
        5,
    );
    assert_eq!(
        created.topics[0].error_code, 0,
        "manage_topics creates without read_stream"
    );
    let cluster: CreateTopicsResponse = answer(
        g.handle(frame(ApiKey::CreateTopics, 5, &create_topics("elsewhere")), &mut c)
            .await,
        ApiKey::CreateTopics,
        5,
    );
    assert_eq!(cluster.topics[0].error_code, 31, "a stream the user may not create");
    let mut n = g.new_connection(peer());
    assert_eq!(login(&g, &mut n, "nobody", "nobody-pw").await.0.error_code, 0);
    let refused: CreateTopicsResponse = answer(
        g.handle(frame(ApiKey::CreateTopics, 5, &create_topics("denied")), &mut n)
            .await,
        ApiKey::CreateTopics,
        5,
    );
    assert_eq!(refused.topics[0].error_code, 29);
}

/// A SASL PLAIN gateway whose model takes `login_delay` to check each login, as a real server's
/// round trip does, so that logins can overlap.
fn gateway_with_login_delay(login_delay: std::time::Duration) -> EmbeddedGateway {
    use kafka_iggy_gateway::backend::embedded::EmbeddedConfig;
    use kafka_iggy_gateway::clock::SharedRng;
    let args = Args {
        sasl: SaslSettings {
            mechanism: Some(Mechanism::Plain),
            ..SaslSettings::default()
        },
        ..Args::default()
    };
    let config = Config::resolve(args, FileConfig::default()).expect("valid config");
    let clock = Arc::new(TokioClock::new(0));
    let backend = EmbeddedBackend::new(
        clock.clone(),
        EmbeddedConfig {
            username: config.iggy_username.clone(),
            password: config.iggy_password.clone(),
            login_delay,
            ..EmbeddedConfig::default()
        },
    );
    Arc::new(kafka_iggy_gateway::gateway::Gateway::new(
        Arc::new(config),
        Arc::new(backend),
        clock,
        SharedRng::seeded(7),
    ))
}

/// A wrong-password login on a connection of its own from `peer()`; true when it was refused.
async fn guess(g: EmbeddedGateway, user: &'static str) -> bool {
    let mut c = g.new_connection(peer());
    let (response, close) = login(&g, &mut c, user, "wrong").await;
    response.error_code != 0 && close
}

#[tokio::test(start_paused = true)]
async fn auth_sasl_throttle_1_parallel_guesses_from_one_address_wait_their_turn_before_iggy() {
    let g = gateway_with_login_delay(std::time::Duration::from_millis(20));
    g.backend
        .create_user("ann", "secret", UserStatus::Active, None)
        .unwrap();
    for _ in 0..3 {
        assert!(guess(g.clone(), "ann").await);
    }
    assert_eq!(g.backend.logins_attempted(), 3, "Iggy is asked once per guess");
    let started = tokio::time::Instant::now();
    let parallel: Vec<_> = (0..3).map(|_| tokio::spawn(guess(g.clone(), "ann"))).collect();
    // The fourth guess waits 250 ms before Iggy is asked; the others wait behind it.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(g.backend.logins_attempted(), 3, "a guess reached Iggy before its wait");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        g.backend.logins_attempted(),
        4,
        "the fifth guess did not wait its turn and its own 500 ms"
    );
    for attempt in parallel {
        assert!(attempt.await.unwrap());
    }
    assert_eq!(g.backend.logins_attempted(), 6);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(250 + 500 + 1_000),
        "{:?}",
        started.elapsed()
    );
}

/// A login with the wrong password `password` from `address`; true when it was refused.
async fn guess_from(g: EmbeddedGateway, user: &'static str, password: String, address: IpAddr) -> bool {
    let mut c = g.new_connection(address);
    let (response, close) = login(&g, &mut c, user, &password).await;
    response.error_code != 0 && close
}

#[tokio::test(start_paused = true)]
async fn auth_sasl_throttle_2_guesses_at_one_username_from_many_addresses_reach_iggy_one_at_a_time() {
    let g = gateway_with_login_delay(std::time::Duration::from_millis(100));
    g.backend
        .create_user("ann", "secret", UserStatus::Active, None)
        .unwrap();
    // Ann logged in from her address before the attack.
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "ann", "secret").await.0.error_code, 0);
    let before = g.backend.logins_attempted();
    // Twenty different passwords, each from an address of its own.
    let guesses: Vec<_> = (1..=20u8)
        .map(|i| {
            let address = IpAddr::from([10, 9, 0, i]);
            tokio::spawn(guess_from(g.clone(), "ann", format!("guess-{i}"), address))
        })
        .collect();
    // Each login takes Iggy 100 ms: one at a time, at most two have been asked by 150 ms.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let asked = g.backend.logins_attempted() - before;
    assert!(asked <= 2, "{asked} guesses from 20 addresses reached Iggy at once");
    // Ann, from the address she logged in from before, is not queued behind them.
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "ann", "secret").await.0.error_code, 0);
    assert!(
        guesses.iter().any(|guess| !guess.is_finished()),
        "ann's login waited for every guess"
    );
    for guess in guesses {
        assert!(guess.await.unwrap());
    }
    // Ann's second login took her pooled session (AUTH-SASL-JOIN-1): Iggy was asked per guess.
    assert_eq!(
        g.backend.logins_attempted(),
        before + 20,
        "Iggy is asked once per guess"
    );
}

#[tokio::test(start_paused = true)]
async fn auth_sasl_throttle_1_a_success_for_another_user_keeps_the_failures_against_the_first() {
    let g = gateway_with_login_delay(std::time::Duration::ZERO);
    g.backend
        .create_user("ann", "secret", UserStatus::Active, None)
        .unwrap();
    g.backend
        .create_user("ben", "secret", UserStatus::Active, None)
        .unwrap();
    for _ in 0..5 {
        assert!(guess(g.clone(), "ann").await);
    }
    let mut c = g.new_connection(peer());
    let started = tokio::time::Instant::now();
    assert_eq!(login(&g, &mut c, "ben", "secret").await.0.error_code, 0);
    assert_eq!(
        started.elapsed(),
        std::time::Duration::ZERO,
        "ben has no failures to wait for"
    );
    // Ann's sixth guess still waits 1 s before Iggy is asked.
    let before = g.backend.logins_attempted();
    let sixth = tokio::spawn(guess(g.clone(), "ann"));
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    assert_eq!(
        g.backend.logins_attempted(),
        before,
        "ben's login forgave ann's failures"
    );
    assert!(sixth.await.unwrap());
    assert!(started.elapsed() >= std::time::Duration::from_millis(1_000));
}

/// The count of AUTH-SASL-MECHANISM-1 in the process's metrics.
fn unknown_mechanisms_counted() -> u64 {
    let text = kafka_iggy_gateway::metrics::metrics().encode();
    text.lines()
        .find(|line| line.contains("limits_hit_total") && line.contains("AUTH-SASL-MECHANISM-1"))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn auth_sasl_mechanism_1_an_unknown_mechanism_is_answered_and_counted() {
    let g = gateway();
    let before = unknown_mechanisms_counted();
    let mut c = g.new_connection(peer());
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI"));
    let response: SaslHandshakeResponse = answer(
        g.handle(frame(ApiKey::SaslHandshake, 1, &request), &mut c).await,
        ApiKey::SaslHandshake,
        1,
    );
    assert_eq!(response.error_code, 33, "UNSUPPORTED_SASL_MECHANISM, as before");
    // Other tests of this binary may ask for unknown mechanisms too: at least this one counted.
    assert!(
        unknown_mechanisms_counted() > before,
        "the unknown mechanism was not counted"
    );
}

#[tokio::test(start_paused = true)]
async fn limit_sessions_1_a_connection_re_authenticates_at_full_capacity() {
    let args = Args {
        sasl: SaslSettings {
            mechanism: Some(Mechanism::Plain),
            session_lifetime_ms: Some(60_000),
            max_sessions: Some(1),
            ..SaslSettings::default()
        },
        ..Args::default()
    };
    let config = Config::resolve(args, FileConfig::default()).expect("valid config");
    let g = kafka_iggy_gateway::embedded_gateway(config, Arc::new(TokioClock::new(0)), 7);
    g.backend
        .create_user("fay", "fay-pw", UserStatus::Active, None)
        .unwrap();
    let mut c = g.new_connection(peer());
    assert_eq!(login(&g, &mut c, "fay", "fay-pw").await.0.error_code, 0);
    tokio::time::advance(std::time::Duration::from_millis(60_000)).await;
    // The one place is the expired session this connection holds: re-authenticating gives it
    // up for the new one instead of being refused for want of room.
    assert_eq!(login(&g, &mut c, "fay", "fay-pw").await.0.error_code, 0);
    assert_eq!(g.sessions.live(), 1);
}
