//! Authentication and authorization (docs/spec/auth.md): librdkafka and the raw wire client
//! against gateways with SASL PLAIN on, whose users, permissions and tokens a [`Provisioner`]
//! makes on the embedded model or on a real Iggy server. Every case starts its own gateway, as
//! the gateway cases do, so it runs on both backends: `tests/auth_suite.rs` (model) and the
//! real-Iggy tier. No case sleeps to synchronise; every wait is bounded.

use crate::cases::group_cases::support::{commit_one, fetched as fetched_offsets, offset_fetch, Client};
use crate::endpoint::{LocalGateway, LocalOptions};
use crate::provision::Provisioner;
use crate::runner::Report;
use crate::tls_fixture::Pki;
use anyhow::{anyhow, bail, ensure, Context};
use iggy::prelude::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions};
use kafka_iggy_gateway::auth::settings::{Mechanism, SaslSettings};
use kafka_iggy_gateway::backend::Backend;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolSubscription, DeleteGroupsRequest, DeleteGroupsResponse, GroupId, JoinGroupRequest,
    JoinGroupResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_wire_client::WireClient;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The failure guard of every wait that should succeed.
const WAIT: Duration = Duration::from_secs(30);
/// How long a client that must be refused is given to get through anyway.
const REFUSED_WITHIN: Duration = Duration::from_secs(10);
/// The stream the gateway maps Kafka topics to by default.
const STREAM: &str = kafka_iggy_gateway::config::DEFAULT_STREAM;

/// What the cases run on: the backend gateways start on, and where users are made.
pub struct AuthWorld<B: Backend> {
    pub backend: Arc<B>,
    pub provisioner: Provisioner,
}

macro_rules! auth_cases {
    ($($case:ident: [$($rule:literal),+ $(,)?]),+ $(,)?) => {
        /// Every case's name.
        pub const NAMES: &[&str] = &[$(stringify!($case)),+];

        /// Every case, for listing and for reporting it unrun.
        pub const CASES: &[crate::cases::ListedCase] = &[$(crate::cases::ListedCase { name: stringify!($case), rules: &[$($rule),+] }),+];

        /// The area these cases report under.
        pub const AREA: &str = "auth";

        /// Runs every case `filter` selects, one line each.
        pub async fn run<B: Backend>(world: &AuthWorld<B>, filter: &crate::runner::Filter) -> Report {
            let mut report = Report::default();
            $(
                if filter.selects(stringify!($case)) {
                    let info = crate::runner::CaseInfo { area: AREA, name: stringify!($case), rules: &[$($rule),+], deviations: &[] };
                    report.run_case(info, async { $case(world).await.map(|()| crate::cases::Outcome::Passed) }).await;
                }
            )+
            report
        }
    };
}

auth_cases!(
    sasl_plain_right_password_is_served_and_a_wrong_one_refused: ["AUTH-SASL-PLAIN-1", "AUTH-SASL-FAIL-1"],
    sasl_personal_access_token_logs_in_as_its_user: ["AUTH-SASL-PAT-1"],
    unauthenticated_requests_are_refused: ["AUTH-SASL-GATE-1"],
    user_may_produce_to_one_topic_and_is_refused_on_another: ["AUTHZ-SESSION-1", "AUTHZ-MAP-1"],
    user_may_read_a_topic_it_may_not_write: ["AUTHZ-SESSION-1", "AUTHZ-MAP-1"],
    metadata_describes_only_what_the_user_may_read: ["AUTHZ-METADATA-1"],
    offsets_need_the_users_permission_on_the_topic: ["AUTHZ-OFFSETS-1", "AUTHZ-GROUP-1", "AUTHZ-GROUP-2"],
    permission_changes_reach_a_connected_client: ["AUTH-SESSION-1"],
    sasl_ssl_round_trip: ["AUTH-TLS-1", "AUTH-SASL-PLAIN-1"],
    librdkafka_re_authenticates_before_its_session_ends: ["AUTH-SASL-REAUTH-1", "AUTH-SESSION-1"],
    topic_admin_needs_manage_topics: ["AUTHZ-SESSION-1", "AUTHZ-MAP-1"],
);

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A name no other case of any run uses (a real server keeps users and topics between runs).
fn unique(prefix: &str) -> String {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{n}-{nanos:x}", std::process::id())
}

/// A SASL PLAIN gateway over `world`'s backend; over TLS when `pki` is given.
async fn sasl_gateway<B: Backend>(world: &AuthWorld<B>, pki: Option<&Pki>) -> anyhow::Result<LocalGateway<B>> {
    sasl_gateway_with_lifetime(world, pki, None).await
}

async fn sasl_gateway_with_lifetime<B: Backend>(
    world: &AuthWorld<B>,
    pki: Option<&Pki>,
    session_lifetime_ms: Option<u64>,
) -> anyhow::Result<LocalGateway<B>> {
    LocalGateway::serve(
        world.backend.clone(),
        LocalOptions {
            sasl: SaslSettings {
                mechanism: Some(Mechanism::Plain),
                session_lifetime_ms,
                ..SaslSettings::default()
            },
            tls: pki.map(|p| p.server_settings(false)),
            tls_ca: pki.map(|p| p.ca.clone()),
            ..LocalOptions::default()
        },
    )
    .await
}

/// Permissions on single topics of the stream.
fn on_topics(stream_id: usize, topics: &[(usize, TopicPermissions)]) -> Permissions {
    let stream = StreamPermissions {
        topics: Some(topics.iter().cloned().collect()),
        ..StreamPermissions::default()
    };
    Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(stream_id, stream)])),
    }
}

fn read_write() -> TopicPermissions {
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

fn write_only() -> TopicPermissions {
    TopicPermissions {
        send_messages: true,
        ..TopicPermissions::default()
    }
}

/// A librdkafka client of `gateway` logging in as `user`.
fn sasl_config<B: Backend>(gateway: &LocalGateway<B>, user: &str, secret: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &gateway.endpoint.bootstrap)
        .set("client.id", "kafka-iggy-auth-cases")
        .set(
            "security.protocol",
            if gateway.tls_ca.is_some() {
                "SASL_SSL"
            } else {
                "SASL_PLAINTEXT"
            },
        )
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", user)
        .set("sasl.password", secret)
        .set("allow.auto.create.topics", "false");
    if let Some(ca) = &gateway.tls_ca {
        config.set("ssl.ca.location", ca.to_str().unwrap_or_default());
    }
    config
}

/// Runs a blocking librdkafka call off the runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(f).await.context("blocking task")?
}

/// The metadata of `topic` as `config`'s user sees it: its error, if any.
async fn topic_error(
    config: &ClientConfig,
    topic: &str,
    timeout: Duration,
) -> anyhow::Result<Option<RDKafkaErrorCode>> {
    let config = config.clone();
    let topic = topic.to_string();
    blocking(move || {
        let client: BaseConsumer = config.create().context("creating the metadata client")?;
        let metadata = client
            .fetch_metadata(Some(&topic), timeout)
            .context("fetching metadata")?;
        let listed = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| anyhow!("{topic} missing from the answer"))?;
        Ok(listed.error().map(Into::into))
    })
    .await
}

/// Produces one record; the delivery's error code, if any.
async fn produce_one(config: &ClientConfig, topic: &str, payload: &str) -> anyhow::Result<Option<RDKafkaErrorCode>> {
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the producer")?;
    let delivered = producer
        .send(FutureRecord::<str, str>::to(topic).payload(payload).partition(0), WAIT)
        .await;
    let result = match delivered {
        Ok(_) => None,
        Err((KafkaError::MessageProduction(code), _)) => Some(code),
        Err((e, _)) => bail!("delivery to {topic} failed otherwise: {e}"),
    };
    let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
    Ok(result)
}

/// Produces one record that must be refused TOPIC_AUTHORIZATION_FAILED (AUTHZ-MAP-1).
async fn refused_produce(config: &ClientConfig, topic: &str, what: &str) -> anyhow::Result<()> {
    let refused = produce_one(config, topic, "refused").await?;
    ensure!(
        refused == Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "produce to {what}: {refused:?}"
    );
    Ok(())
}

/// Reads `count` records from the start of partition 0 without a group.
async fn consume(config: &ClientConfig, topic: &str, count: usize) -> anyhow::Result<Vec<String>> {
    let consumer: StreamConsumer = config
        .clone()
        .set("group.id", unique("kig-auth-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut payloads = Vec::new();
    while payloads.len() < count {
        let message = tokio::time::timeout(WAIT, consumer.recv())
            .await
            .with_context(|| format!("only {} of {count} records of {topic} within {WAIT:?}", payloads.len()))??;
        payloads.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string());
    }
    let _ = tokio::task::spawn_blocking(move || drop(consumer)).await;
    Ok(payloads)
}

/// A raw wire client authenticated as `user` with SaslHandshake v1 and SaslAuthenticate v2.
async fn wire_login<B: Backend>(gateway: &LocalGateway<B>, user: &str, secret: &str) -> anyhow::Result<Client> {
    let mut client = WireClient::connect(&gateway.endpoint.bootstrap).await?;
    let auth = client.sasl_plain(user, secret).await?;
    ensure!(
        auth.error_code == 0,
        "SaslAuthenticate as {user} answered {}",
        auth.error_code
    );
    Ok(client)
}

/// A user named `prefix-...` with `permissions`; its name and password.
async fn user<B: Backend>(
    world: &AuthWorld<B>,
    prefix: &str,
    permissions: Permissions,
) -> anyhow::Result<(String, String)> {
    // Iggy usernames are 3 to 50 characters.
    let name: String = unique(prefix).chars().take(50).collect();
    let password = format!("pw-{}", unique("s"));
    world.provisioner.user(&name, &password, permissions).await?;
    Ok((name, password))
}

/// AUTH-SASL-PLAIN-1, AUTH-SASL-FAIL-1
pub async fn sasl_plain_right_password_is_served_and_a_wrong_one_refused<B: Backend>(
    world: &AuthWorld<B>,
) -> anyhow::Result<()> {
    let topic = unique("kig-auth-plain");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (name, password) = user(world, "alice", on_topics(s, &[(t, read_write())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let right = sasl_config(&gateway, &name, &password);
    ensure!(
        produce_one(&right, &topic, "hello").await?.is_none(),
        "the right password produces"
    );
    ensure!(consume(&right, &topic, 1).await? == ["hello"], "and reads back");
    let wrong = sasl_config(&gateway, &name, "not-the-password");
    match topic_error(&wrong, &topic, REFUSED_WITHIN).await {
        Err(_) => {}
        Ok(e) => bail!("a wrong password was served metadata ({e:?})"),
    }
    // The raw exchange says why: SASL_AUTHENTICATION_FAILED, then the connection closes.
    let mut client = WireClient::connect(&gateway.endpoint.bootstrap).await?;
    let refused = client.sasl_plain(&name, "wrong-password").await?;
    ensure!(
        refused.error_code == 58,
        "a wrong password answered {}",
        refused.error_code
    );
    ensure!(
        client.closed_by_server().await?,
        "the connection stays open after a failed login"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-PAT-1
pub async fn sasl_personal_access_token_logs_in_as_its_user<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let topic = unique("kig-auth-pat");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (name, password) = user(world, "patty", on_topics(s, &[(t, read_write())])).await?;
    let token = world.provisioner.token(&name, &password, "kafka").await?;
    let gateway = sasl_gateway(world, None).await?;
    let with_token = sasl_config(&gateway, &name, &token);
    ensure!(
        produce_one(&with_token, &topic, "by-token").await?.is_none(),
        "a token produces"
    );
    // A token names its own user: presented under another name it is refused.
    let (other, _) = user(world, "notpatty", Permissions::default()).await?;
    ensure!(
        topic_error(&sasl_config(&gateway, &other, &token), &topic, REFUSED_WITHIN)
            .await
            .is_err(),
        "a token was accepted for another user"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-GATE-1
pub async fn unauthenticated_requests_are_refused<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let gateway = sasl_gateway(world, None).await?;
    let mut client = WireClient::connect(&gateway.endpoint.bootstrap).await?;
    let (_, frame) = client.encode_request(ApiKey::Metadata, 12, &MetadataRequest::default())?;
    client.send_frame(&frame).await?;
    ensure!(
        tokio::time::timeout(WAIT, client.closed_by_server()).await??,
        "a Metadata request before authentication was answered"
    );
    // librdkafka without SASL gets no metadata from a SASL listener.
    let mut plain = ClientConfig::new();
    plain.set("bootstrap.servers", &gateway.endpoint.bootstrap);
    ensure!(
        topic_error(&plain, "kig-auth-gate", REFUSED_WITHIN).await.is_err(),
        "a client without SASL was served metadata"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTHZ-SESSION-1, AUTHZ-MAP-1: the user's own Iggy permissions decide each produce.
pub async fn user_may_produce_to_one_topic_and_is_refused_on_another<B: Backend>(
    world: &AuthWorld<B>,
) -> anyhow::Result<()> {
    let allowed = unique("kig-auth-allowed");
    let other = unique("kig-auth-other");
    let (s, a) = world.provisioner.topic(STREAM, &allowed).await?;
    let (_, o) = world.provisioner.topic(STREAM, &other).await?;
    let (name, password) = user(world, "bob", on_topics(s, &[(a, read_write()), (o, read_only())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let config = sasl_config(&gateway, &name, &password);
    ensure!(
        produce_one(&config, &allowed, "ok").await?.is_none(),
        "produce to the allowed topic"
    );
    refused_produce(&config, &other, "a topic the user may not write").await?;
    gateway.stop().await;
    Ok(())
}

/// AUTHZ-SESSION-1: read permission without write: consuming works, producing is refused.
pub async fn user_may_read_a_topic_it_may_not_write<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let topic = unique("kig-auth-readonly");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (writer, writer_pw) = user(world, "writer", on_topics(s, &[(t, read_write())])).await?;
    let (reader, reader_pw) = user(world, "reader", on_topics(s, &[(t, read_only())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let writes = sasl_config(&gateway, &writer, &writer_pw);
    let reads = sasl_config(&gateway, &reader, &reader_pw);
    ensure!(
        produce_one(&writes, &topic, "r1").await?.is_none(),
        "the writer produces"
    );
    ensure!(consume(&reads, &topic, 1).await? == ["r1"], "the reader reads");
    refused_produce(&reads, &topic, "a topic the reader may only read").await?;
    gateway.stop().await;
    Ok(())
}

/// AUTHZ-METADATA-1
pub async fn metadata_describes_only_what_the_user_may_read<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let seen = unique("kig-auth-seen");
    let hidden = unique("kig-auth-hidden");
    let (s, t) = world.provisioner.topic(STREAM, &seen).await?;
    world.provisioner.topic(STREAM, &hidden).await?;
    let (name, password) = user(world, "carol", on_topics(s, &[(t, read_only())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let config = sasl_config(&gateway, &name, &password);
    ensure!(
        topic_error(&config, &seen, WAIT).await?.is_none(),
        "{seen} is described"
    );
    let refused = topic_error(&config, &hidden, WAIT).await?;
    ensure!(
        refused == Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "{hidden}: {refused:?}"
    );
    // Listing every topic: topic-level grants do not list the stream (Iggy's GetTopics).
    let mut client = wire_login(&gateway, &name, &password).await?;
    let all: MetadataResponse = client
        .request(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
        .await?;
    let names: Vec<String> = all
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    ensure!(!names.contains(&hidden), "the hidden topic is listed: {names:?}");
    gateway.stop().await;
    Ok(())
}

/// A JoinGroup v5 subscribing to `topic` with the consumer protocol.
fn join_request(group: &str, topic: &str) -> anyhow::Result<JoinGroupRequest> {
    let subscription =
        ConsumerProtocolSubscription::default().with_topics(vec![StrBytes::from_string(topic.to_string())]);
    let mut metadata = bytes::BytesMut::new();
    metadata.extend_from_slice(&1i16.to_be_bytes());
    subscription.encode(&mut metadata, 1)?;
    Ok(JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(StrBytes::from_static_str(""))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(metadata.freeze())]))
}

/// AUTHZ-OFFSETS-1, AUTHZ-GROUP-1: committing, reading offsets and joining a group need the
/// user's own permission on the topic; a user with it may.
pub async fn offsets_need_the_users_permission_on_the_topic<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let topic = unique("kig-auth-offsets");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (writer, writer_pw) = user(world, "dave", on_topics(s, &[(t, write_only())])).await?;
    let (reader, reader_pw) = user(world, "erin", on_topics(s, &[(t, read_only())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let group = unique("kig-auth-group");
    // A record to commit past.
    let (producer, producer_pw) = user(world, "frank", on_topics(s, &[(t, read_write())])).await?;
    ensure!(
        produce_one(&sasl_config(&gateway, &producer, &producer_pw), &topic, "x")
            .await?
            .is_none(),
        "the producer produces"
    );

    let mut denied = wire_login(&gateway, &writer, &writer_pw).await?;
    let code = commit_one(&mut denied, &group, &topic, 0, 1).await?;
    ensure!(code == 29, "a commit without poll permission answered {code}");
    let fetched = offset_fetch(&mut denied, &group, Some(&[(topic.as_str(), &[0])])).await?;
    let codes: Vec<i16> = fetched_offsets(&fetched).values().map(|f| f.3).collect();
    ensure!(
        codes == [29],
        "an offset read without poll permission answered {codes:?}"
    );
    let join: JoinGroupResponse = denied
        .request(ApiKey::JoinGroup, 5, &join_request(&group, &topic)?)
        .await?;
    ensure!(
        join.error_code == 30,
        "joining a group on a topic the user may not poll answered {}",
        join.error_code
    );

    let mut allowed = wire_login(&gateway, &reader, &reader_pw).await?;
    let code = commit_one(&mut allowed, &group, &topic, 0, 1).await?;
    ensure!(code == 0, "a commit with poll permission answered {code}");
    let fetched = offset_fetch(&mut allowed, &group, Some(&[(topic.as_str(), &[0])])).await?;
    let offsets: Vec<(i64, i16)> = fetched_offsets(&fetched).values().map(|f| (f.0, f.3)).collect();
    ensure!(offsets == [(1, 0)], "the committed offset reads back as {offsets:?}");
    // AUTHZ-GROUP-2: a user who cannot list the topic deletes none of the group's offsets there.
    let deleted: DeleteGroupsResponse = denied
        .request(
            ApiKey::DeleteGroups,
            2,
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(StrBytes::from_string(group.clone()))]),
        )
        .await?;
    ensure!(deleted.results.len() == 1, "DeleteGroups answered {deleted:?}");
    let kept = offset_fetch(&mut allowed, &group, Some(&[(topic.as_str(), &[0])])).await?;
    let kept: Vec<i64> = fetched_offsets(&kept).values().map(|f| f.0).collect();
    ensure!(
        kept == [1],
        "after another user's DeleteGroups the offset reads {kept:?}"
    );
    let join: JoinGroupResponse = allowed
        .request(ApiKey::JoinGroup, 5, &join_request(&unique("kig-auth-join"), &topic)?)
        .await?;
    // v4+ first answers MEMBER_ID_REQUIRED (79): the join itself was let through.
    ensure!(join.error_code == 79, "a permitted join answered {}", join.error_code);
    gateway.stop().await;
    Ok(())
}

/// AUTH-SESSION-1: Iggy checks permissions on every request, so a change reaches a client that
/// stays connected at once, without re-authenticating.
pub async fn permission_changes_reach_a_connected_client<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let topic = unique("kig-auth-change");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (name, password) = user(world, "grace", on_topics(s, &[(t, read_only())])).await?;
    let gateway = sasl_gateway(world, None).await?;
    let mut client = wire_login(&gateway, &name, &password).await?;
    let metadata = |topic: &str| {
        MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))
        ]))
    };
    let before: MetadataResponse = client.request(ApiKey::Metadata, 12, &metadata(&topic)).await?;
    ensure!(before.topics[0].error_code == 0, "described before the change");
    world.provisioner.permissions(&name, Permissions::default()).await?;
    let after: MetadataResponse = client.request(ApiKey::Metadata, 12, &metadata(&topic)).await?;
    ensure!(
        after.topics[0].error_code == 29,
        "after the grant was withdrawn the same connection is answered {}",
        after.topics[0].error_code
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-TLS-1 with AUTH-SASL-PLAIN-1: librdkafka with security.protocol=SASL_SSL produces and
/// consumes as its user.
pub async fn sasl_ssl_round_trip<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    let pki = Pki::generate()?;
    let topic = unique("kig-auth-sasl-ssl");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (name, password) = user(world, "heidi", on_topics(s, &[(t, read_write())])).await?;
    let gateway = sasl_gateway(world, Some(&pki)).await?;
    let config = sasl_config(&gateway, &name, &password);
    for i in 0..3 {
        ensure!(
            produce_one(&config, &topic, &format!("tls-{i}")).await?.is_none(),
            "SASL_SSL produce {i}"
        );
    }
    let read = consume(&config, &topic, 3).await?;
    ensure!(read == ["tls-0", "tls-1", "tls-2"], "SASL_SSL consumed {read:?}");
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-REAUTH-1: with a 3 s session, librdkafka (KIP-368) re-authenticates on its open
/// connection before the session ends, and a producer sending throughout loses nothing. The
/// producer sends until the gateway has counted a re-authentication, bounded by [`WAIT`].
pub async fn librdkafka_re_authenticates_before_its_session_ends<B: Backend>(
    world: &AuthWorld<B>,
) -> anyhow::Result<()> {
    let topic = unique("kig-auth-reauth");
    let (s, t) = world.provisioner.topic(STREAM, &topic).await?;
    let (name, password) = user(world, "ivan", on_topics(s, &[(t, read_write())])).await?;
    let gateway = sasl_gateway_with_lifetime(world, None, Some(3_000)).await?;
    let config = sasl_config(&gateway, &name, &password);
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", WAIT.as_millis().to_string())
        .create()
        .context("creating the producer")?;
    let reauthenticated = || gateway.gateway.reauthentications.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    let mut sent = 0usize;
    // Paces the load, it does not synchronise: the loop ends on the counter, or fails at WAIT.
    let mut pace = tokio::time::interval(Duration::from_millis(100));
    while reauthenticated() == 0 {
        ensure!(
            started.elapsed() < WAIT,
            "no re-authentication within {WAIT:?} of a 3 s session ({sent} records sent)"
        );
        pace.tick().await;
        producer
            .send(FutureRecord::<str, str>::to(&topic).payload("r").partition(0), WAIT)
            .await
            .map_err(|(e, _)| anyhow!("delivery {sent} failed: {e}"))?;
        sent += 1;
    }
    // And after it, the same producer is still served.
    producer
        .send(FutureRecord::<str, str>::to(&topic).payload("after").partition(0), WAIT)
        .await
        .map_err(|(e, _)| anyhow!("delivery after the re-authentication failed: {e}"))?;
    let _ = tokio::task::spawn_blocking(move || drop(producer)).await;
    gateway.stop().await;
    Ok(())
}

/// AUTHZ-SESSION-1, AUTHZ-MAP-1: the admin client creates a topic with `manage_topics` on the
/// stream (no `read_stream`), and is refused TOPIC_AUTHORIZATION_FAILED without it.
pub async fn topic_admin_needs_manage_topics<B: Backend>(world: &AuthWorld<B>) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let anchor = unique("kig-auth-admin-anchor");
    let (s, _) = world.provisioner.topic(STREAM, &anchor).await?;
    let manages = Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(
            s,
            StreamPermissions {
                manage_topics: true,
                ..StreamPermissions::default()
            },
        )])),
    };
    let (admin_name, admin_pw) = user(world, "admin", manages).await?;
    let (plain_name, plain_pw) = user(world, "plain", Permissions::default()).await?;
    let gateway = sasl_gateway(world, None).await?;
    let options = AdminOptions::new()
        .request_timeout(Some(WAIT))
        .operation_timeout(Some(WAIT));
    let created_topic = unique("kig-auth-created");
    let admin: AdminClient<DefaultClientContext> = sasl_config(&gateway, &admin_name, &admin_pw).create()?;
    let created = admin
        .create_topics(
            [&NewTopic::new(&created_topic, 1, TopicReplication::Fixed(1))],
            &options,
        )
        .await?;
    ensure!(created == [Ok(created_topic.clone())], "manage_topics: {created:?}");
    let denied_topic = unique("kig-auth-denied");
    let plain: AdminClient<DefaultClientContext> = sasl_config(&gateway, &plain_name, &plain_pw).create()?;
    let refused = plain
        .create_topics([&NewTopic::new(&denied_topic, 1, TopicReplication::Fixed(1))], &options)
        .await?;
    ensure!(
        refused == [Err((denied_topic.clone(), RDKafkaErrorCode::TopicAuthorizationFailed))],
        "without manage_topics: {refused:?}"
    );
    let _ = tokio::task::spawn_blocking(move || drop((admin, plain))).await;
    gateway.stop().await;
    Ok(())
}
