//! Group requests that are each valid and within every size limit, yet amplify (issue 31): a
//! subscription declaring millions of topics, and one client joining thousands of groups. Each
//! runs under the hostile cases' [`Watchdog`]: a well-behaved client on connections of its own
//! is answered throughout. The cases know nothing of the implementation; where one needs a
//! second client address it binds another loopback address and skips, saying why, when the
//! endpoint is not on loopback.

use super::group_cases::support::{coordinator_of, COORDINATOR_NOT_AVAILABLE, NONE, NOT_COORDINATOR};
use super::hostile_cases::{
    decoded, new_connection_answers, request_frame, send_hostile, string, Answer, Probes, Watchdog,
    ASSUMED_MAX_FRAME_SIZE, LIVENESS, MEMBER_SESSION_TIMEOUT_MS,
};
use super::{Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use anyhow::{ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{
    ApiKey, GroupId, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_wire_client::WireClient;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tokio::net::{TcpSocket, TcpStream};

/// Distinct groups the hungry client joins: past the 10,000 groups one gateway coordinates by
/// default, so that without a per-client quota nobody else could create one.
const HUNGRY_GROUPS: usize = 12_000;
/// The loopback address the hungry client connects from, so the endpoint sees a client other
/// than the well-behaved one (127.0.0.1).
const HUNGRY_ADDRESS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const JOIN_GROUP_V0: i16 = 0;
const LEAVE_GROUP_V: i16 = 3;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            group_join_subscribing_to_millions_of_empty_topic_names,
            ["GROUP-SUBSCRIPTION-1", "GROUP-LIMIT-1"]
        ),
        case!(
            group_one_client_joining_12000_groups_leaves_room_for_others,
            ["LIMIT-GROUP-OWNER-1", "GROUP-LIMIT-1"]
        ),
    ]
}

/// A consumer subscription (version 0) declaring `count` empty topic names, then no user data.
fn empty_names_subscription(count: usize) -> Bytes {
    let mut metadata = BytesMut::with_capacity(10 + 2 * count);
    metadata.put_i16(0);
    metadata.put_i32(i32::try_from(count).unwrap_or(i32::MAX));
    metadata.put_bytes(0, 2 * count);
    metadata.put_i32(-1);
    metadata.freeze()
}

fn join_v0(group: &str, metadata: Bytes) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(metadata)])
}

/// A JoinGroup v0 whose one consumer subscription declares as many empty topic names as the
/// endpoint's frame takes (4,192,248 in 8 MiB): each within the protocol, all together millions
/// of strings to decode. The endpoint may take it or refuse it with an error; a well-behaved
/// client keeps being answered, and so does a new connection.
pub async fn group_join_subscribing_to_millions_of_empty_topic_names(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let max_frame_size = endpoint.max_frame_size.unwrap_or(ASSUMED_MAX_FRAME_SIZE);
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let group = endpoint.unique_topic("kig-amplify-subscription");
            // Room for the header, the group id and the protocol's name.
            let names = max_frame_size.saturating_sub(1024) / 2;
            let request = join_v0(&group, empty_names_subscription(names));
            let frame = request_frame(ApiKey::JoinGroup, JOIN_GROUP_V0, 1, "kig-amplify", &request)?;
            let what = format!(
                "a JoinGroup v0 of {} bytes subscribing to {names} empty topic names",
                frame.len()
            );
            let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
            if let Answer::Frame(answer) = send_hostile(&mut client, &frame, &what, LIVENESS).await? {
                let joined: JoinGroupResponse = decoded(ApiKey::JoinGroup, JOIN_GROUP_V0, 1, answer, &what)?;
                if joined.error_code == NONE {
                    leave(&mut client, &group, joined.member_id.as_str()).await?;
                }
            }
            new_connection_answers(&endpoint, &what).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// One client, from an address of its own, joins 12,000 distinct groups as the only member of
/// each (JoinGroup v0, 30-minute sessions, never heartbeating); the endpoint may refuse some.
/// Then another client joins a group of its own: it must not be refused for the first one's
/// groups (Kafka has no per-coordinator group count; the gateway bounds each client instead).
/// The hungry client leaves every group it joined before the case ends.
pub async fn group_one_client_joining_12000_groups_leaves_room_for_others(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let target = tokio::net::lookup_host(&endpoint.bootstrap)
        .await?
        .next()
        .with_context(|| format!("{} resolves to no address", endpoint.bootstrap))?;
    if !target.ip().is_loopback() {
        return Ok(Outcome::Skipped(format!(
            "needs a second client address; {} is not on loopback, where one can be bound",
            endpoint.bootstrap
        )));
    }
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let prefix = endpoint.unique_topic("kig-amplify-groups");
            let mut hungry = WireClient::new(connect_from(HUNGRY_ADDRESS, target).await?);
            let mut joined = Vec::new();
            let mut refused = 0usize;
            for i in 0..HUNGRY_GROUPS {
                let group = format!("{prefix}-{i}");
                let mut request = join_v0(&group, Bytes::new());
                request.session_timeout_ms = 1_800_000;
                let answer: JoinGroupResponse = hungry
                    .request(ApiKey::JoinGroup, JOIN_GROUP_V0, &request)
                    .await
                    .with_context(|| format!("the hungry client's JoinGroup {group}"))?;
                match answer.error_code {
                    NONE => joined.push((group, answer.member_id.to_string())),
                    // Another coordinator's group, or one refused for whatever bound: counted.
                    _ => refused += 1,
                }
            }
            let victim_group = endpoint.unique_topic("kig-amplify-victim");
            let mut victim = coordinator_of(&endpoint.bootstrap, &victim_group).await?;
            let answer: JoinGroupResponse = victim
                .request(ApiKey::JoinGroup, JOIN_GROUP_V0, &join_v0(&victim_group, Bytes::new()))
                .await
                .context("the other client's JoinGroup")?;
            for (group, member) in &joined {
                // Groups coordinated elsewhere were refused NOT_COORDINATOR and not joined.
                leave(&mut hungry, group, member).await?;
            }
            ensure!(
                answer.error_code == NONE,
                "after one client joined {} groups ({refused} refused), another client's JoinGroup to a new group got error {}{}",
                joined.len(),
                answer.error_code,
                if answer.error_code == COORDINATOR_NOT_AVAILABLE {
                    " (COORDINATOR_NOT_AVAILABLE): one client exhausted a table every client shares"
                } else if answer.error_code == NOT_COORDINATOR {
                    " (NOT_COORDINATOR)"
                } else {
                    ""
                }
            );
            leave(&mut victim, &victim_group, answer.member_id.as_str()).await
        })
        .await?;
    Ok(Outcome::Passed)
}

/// A TCP connection to `target` from `source` (any port).
async fn connect_from(source: Ipv4Addr, target: SocketAddr) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket
        .bind(SocketAddr::new(IpAddr::V4(source), 0))
        .with_context(|| format!("binding {source}"))?;
    let stream = tokio::time::timeout(LIVENESS, socket.connect(target))
        .await
        .with_context(|| format!("connecting from {source} to {target}: not answered within {LIVENESS:?}"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// LeaveGroup v3 of one member; an unknown member (already gone) is fine.
async fn leave(client: &mut WireClient<TcpStream>, group: &str, member: &str) -> anyhow::Result<()> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(string(group)))
        .with_members(vec![MemberIdentity::default().with_member_id(string(member))]);
    let _: LeaveGroupResponse = client
        .request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &request)
        .await
        .with_context(|| format!("LeaveGroup {group}"))?;
    Ok(())
}
