//! DescribeGroups and ListGroups over the raw wire (docs/spec/groups.md, "Describing and listing
//! groups"): what each reports of a group in each state it passes through, of a group nobody
//! joined, and which groups a ListGroups states filter keeps.
//!
//! Members are wire clients that join with protocol type `consumer` and one protocol, `range`,
//! whose metadata and assignments are arbitrary bytes, so the cases need no topic and can compare
//! every byte the coordinator hands back. Session and rebalance timeouts are 10 s, above the
//! default group.min.session.timeout.ms of an outside gateway; no case waits on them. Every group
//! is asked of its coordinator (FindCoordinator), so the cases hold on several gateways too.

use super::group_cases::support::{
    await_described, coordinator_of, describe_group, find_coordinator, heartbeat, join_group, list_groups, sync_group,
    Client, DESCRIBE_GROUPS_V, KEY_TYPE_GROUP, LIST_GROUPS_V, MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS,
};
use super::{Case, Outcome};
use crate::case;
use crate::endpoint::Endpoint;
use crate::profile::Profile;
use anyhow::{bail, ensure, Context as _};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::net::IpAddr;
use tokio::net::TcpStream;

pub fn cases() -> Vec<Case> {
    vec![
        case!(
            describegroups_state_1_describegroups_members_1_a_group_through_its_states,
            ["DESCRIBEGROUPS-STATE-1", "DESCRIBEGROUPS-MEMBERS-1"],
            deviates: ["DESCRIBEGROUPS-MEMBERS-1"]
        ),
        case!(
            describegroups_unknown_1_a_group_nobody_joined_is_dead,
            ["DESCRIBEGROUPS-UNKNOWN-1", "DESCRIBEGROUPS-STATE-1", "DESCRIBEGROUPS-MEMBERS-1"],
            deviates: ["DESCRIBEGROUPS-MEMBERS-1"]
        ),
        case!(
            listgroups_coordinated_1_listgroups_states_filter_1_lists_by_state,
            ["LISTGROUPS-COORDINATED-1", "LISTGROUPS-STATES-FILTER-1"]
        ),
    ]
}

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 10_000;
/// The session timeout of a member id left pending on purpose: it must outlast the case.
const PENDING_SESSION_MS: i32 = 300_000;
const LEAVE_GROUP_V: i16 = 4;
/// The client id the wire client sends in every request header; DescribeGroups reports it.
const WIRE_CLIENT_ID: &str = "kig-wire";
/// DescribeGroups' authorized_operations when they were not computed (Kafka's default).
const OPERATIONS_NOT_PROVIDED: i32 = i32::MIN;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// Joins `group` as a new member: the KIP-394 round trip, then the join proper, which returns at
/// once when no other member has to rejoin. Returns (member id, generation, leader).
async fn join_new(client: &mut Client, group: &str, metadata: &[u8]) -> anyhow::Result<(String, i32, String)> {
    let first = join_group(client, group, "", SESSION_MS, REBALANCE_MS, metadata).await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "first JoinGroup of {group}: error {}, expected MEMBER_ID_REQUIRED ({MEMBER_ID_REQUIRED})",
        first.error_code
    );
    let id = first.member_id.as_str().to_string();
    let joined = join_group(client, group, &id, SESSION_MS, REBALANCE_MS, metadata).await?;
    ensure!(
        joined.error_code == NONE,
        "JoinGroup {group} as {id}: error {}",
        joined.error_code
    );
    Ok((id, joined.generation_id, joined.leader.as_str().to_string()))
}

/// LeaveGroup v4 of one member; returns the member's code.
async fn leave(client: &mut Client, group: &str, member: &str) -> anyhow::Result<i16> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_members(vec![MemberIdentity::default().with_member_id(s(member))]);
    let response: LeaveGroupResponse = client
        .request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &request)
        .await
        .with_context(|| format!("LeaveGroup {group} as {member}"))?;
    ensure!(
        response.error_code == NONE,
        "LeaveGroup {group}: error {}",
        response.error_code
    );
    match response.members.as_slice() {
        [m] => Ok(m.error_code),
        other => bail!("LeaveGroup {group} answered {} members for one", other.len()),
    }
}

/// The host DescribeGroups reports of a classic member connecting from `client_ip`.
/// DESCRIBEGROUPS-MEMBERS-1: the gateway reports none. Kafka reports the client address as Java
/// prints an InetAddress without a host name, "/" and the address (GroupMetadataManager takes
/// ClientHost from RequestContext.clientAddress.toString()); Java writes an IPv6 address as
/// eight hexadecimal groups, none elided (Inet6Address.getHostAddress).
fn member_host(profile: Profile, client_ip: IpAddr) -> String {
    match (profile, client_ip) {
        (Profile::Gateway, _) => String::new(),
        (Profile::Kafka, IpAddr::V4(ip)) => format!("/{ip}"),
        (Profile::Kafka, IpAddr::V6(ip)) => {
            let groups: Vec<String> = ip.segments().iter().map(|g| format!("{g:x}")).collect();
            format!("/{}", groups.join(":"))
        }
    }
}

/// The host DescribeGroups must report of this case's members: those of `endpoint`'s profile,
/// from the address a connection to it leaves from.
async fn expected_host(endpoint: &Endpoint) -> anyhow::Result<String> {
    let probe = TcpStream::connect(&endpoint.bootstrap)
        .await
        .with_context(|| format!("connecting to {}", endpoint.bootstrap))?;
    Ok(member_host(endpoint.profile, probe.local_addr()?.ip()))
}

/// Whether the coordinator forgets a group once it holds no member and no pending id, so that
/// DescribeGroups soon says Dead. DESCRIBEGROUPS-STATE-1: the gateway does. Kafka keeps an Empty
/// group until its periodic cleanup (GroupCoordinatorShard.cleanupGroupMetadata, every
/// offsets.retention.check.interval.ms, 10 minutes by default, then
/// GroupMetadataManager.maybeDeleteGroup), so under the kafka profile Empty is the answer.
fn forgets_a_vacant_group_at_once(profile: Profile) -> bool {
    !profile.is_kafka()
}

/// What DescribeGroups must say of a member: (member id, metadata, assignment).
type WantMember<'a> = (&'a str, &'a [u8], &'a [u8]);

/// Holds a described group to its state, protocol and members (in any order).
fn check_described(
    what: &str,
    host: &str,
    got: &DescribedGroup,
    state: &str,
    protocol_type: &str,
    protocol: &str,
    members: &[WantMember<'_>],
) -> anyhow::Result<()> {
    ensure!(
        got.error_code == NONE,
        "{what}: DescribeGroups error {}",
        got.error_code
    );
    ensure!(
        (
            got.group_state.as_str(),
            got.protocol_type.as_str(),
            got.protocol_data.as_str()
        ) == (state, protocol_type, protocol),
        "{what}: (state, protocol type, protocol) {:?}, expected {:?}",
        (
            got.group_state.as_str(),
            got.protocol_type.as_str(),
            got.protocol_data.as_str()
        ),
        (state, protocol_type, protocol)
    );
    ensure!(
        got.authorized_operations == OPERATIONS_NOT_PROVIDED,
        "{what}: authorized operations {}, expected {OPERATIONS_NOT_PROVIDED} (not computed)",
        got.authorized_operations
    );
    let mut seen: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for m in &got.members {
        ensure!(
            m.client_id.as_str() == WIRE_CLIENT_ID && m.client_host.as_str() == host && m.group_instance_id.is_none(),
            "{what}: member {} reported with client id {:?}, host {:?}, instance id {:?}; expected {WIRE_CLIENT_ID:?}, {host:?}, none",
            m.member_id.as_str(),
            m.client_id.as_str(),
            m.client_host.as_str(),
            m.group_instance_id
        );
        seen.push((
            m.member_id.as_str().to_string(),
            m.member_metadata.to_vec(),
            m.member_assignment.to_vec(),
        ));
    }
    seen.sort();
    let mut want: Vec<(String, Vec<u8>, Vec<u8>)> = members
        .iter()
        .map(|(id, md, a)| (id.to_string(), md.to_vec(), a.to_vec()))
        .collect();
    want.sort();
    ensure!(
        seen == want,
        "{what}: members (id, metadata, assignment) {seen:?}, expected {want:?}"
    );
    Ok(())
}

/// A group described at each step of its life: A joins alone (CompletingRebalance, A's metadata,
/// no assignment yet), A's SyncGroup (Stable, A's assignment), B joins (PreparingRebalance until
/// A rejoins), both join the next generation and sync (Stable, each member's own metadata and
/// assignment), both leave (Empty, no member, no protocol).
pub async fn describegroups_state_1_describegroups_members_1_a_group_through_its_states(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let group = endpoint.unique_topic("describe-states");
    let host = expected_host(&endpoint).await?;
    let mut a = coordinator_of(&endpoint.bootstrap, &group).await?;
    let mut observer = coordinator_of(&endpoint.bootstrap, &group).await?;

    let (a_id, generation, leader) = join_new(&mut a, &group, b"meta-a").await?;
    ensure!(leader == a_id, "A joined alone but the leader is {leader:?}");
    let got = describe_group(&mut observer, &group).await?;
    check_described(
        "A joined, no SyncGroup yet",
        &host,
        &got,
        "CompletingRebalance",
        "consumer",
        "range",
        &[(&a_id, b"meta-a", b"")],
    )?;

    let synced = sync_group(&mut a, &group, generation, &a_id, &[(&a_id, b"assign-a")]).await?;
    ensure!(synced.error_code == NONE, "A's SyncGroup: error {}", synced.error_code);
    let got = describe_group(&mut observer, &group).await?;
    check_described(
        "A synced",
        &host,
        &got,
        "Stable",
        "consumer",
        "range",
        &[(&a_id, b"meta-a", b"assign-a")],
    )?;

    // B's second JoinGroup waits until A rejoins, so it runs beside the case.
    let mut b = coordinator_of(&endpoint.bootstrap, &group).await?;
    let first = join_group(&mut b, &group, "", SESSION_MS, REBALANCE_MS, b"meta-b").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "B's first JoinGroup: error {}",
        first.error_code
    );
    let b_id = first.member_id.as_str().to_string();
    let b_join = {
        let (group, b_id) = (group.clone(), b_id.clone());
        tokio::spawn(async move {
            let joined = join_group(&mut b, &group, &b_id, SESSION_MS, REBALANCE_MS, b"meta-b").await;
            (b, joined)
        })
    };
    let got = await_described(&mut observer, &group, "B's join to start a rebalance", |g| {
        g.group_state.as_str() == "PreparingRebalance"
    })
    .await?;
    ensure!(
        got.protocol_type.as_str() == "consumer",
        "preparing a rebalance: protocol type {:?}",
        got.protocol_type.as_str()
    );
    let code = heartbeat(&mut a, &group, generation, &a_id).await?;
    ensure!(
        code == REBALANCE_IN_PROGRESS,
        "A's heartbeat while B joins: error {code}, expected REBALANCE_IN_PROGRESS"
    );
    let rejoined = join_group(&mut a, &group, &a_id, SESSION_MS, REBALANCE_MS, b"meta-a2").await?;
    ensure!(
        rejoined.error_code == NONE && rejoined.leader.as_str() == a_id,
        "A's rejoin: error {}, leader {:?}",
        rejoined.error_code,
        rejoined.leader.as_str()
    );
    let (mut b, b_joined) = b_join.await?;
    let b_joined = b_joined?;
    ensure!(
        b_joined.error_code == NONE,
        "B's JoinGroup: error {}",
        b_joined.error_code
    );
    let generation = rejoined.generation_id;
    let got = describe_group(&mut observer, &group).await?;
    // A completed join clears the last generation's assignments until the leader's SyncGroup.
    check_described(
        "A and B joined, no SyncGroup yet",
        &host,
        &got,
        "CompletingRebalance",
        "consumer",
        "range",
        &[(&a_id, b"meta-a2", b""), (&b_id, b"meta-b", b"")],
    )?;
    let synced = sync_group(
        &mut a,
        &group,
        generation,
        &a_id,
        &[(&a_id, b"assign-a2"), (&b_id, b"assign-b")],
    )
    .await?;
    ensure!(
        synced.error_code == NONE,
        "A's second SyncGroup: error {}",
        synced.error_code
    );
    let synced = sync_group(&mut b, &group, generation, &b_id, &[]).await?;
    ensure!(
        synced.error_code == NONE && synced.assignment.as_ref() == b"assign-b",
        "B's SyncGroup: error {}, assignment {:?}",
        synced.error_code,
        synced.assignment
    );
    let got = describe_group(&mut observer, &group).await?;
    check_described(
        "A and B synced",
        &host,
        &got,
        "Stable",
        "consumer",
        "range",
        &[(&a_id, b"meta-a2", b"assign-a2"), (&b_id, b"meta-b", b"assign-b")],
    )?;

    ensure!(leave(&mut b, &group, &b_id).await? == NONE, "B's LeaveGroup refused");
    ensure!(leave(&mut a, &group, &a_id).await? == NONE, "A's LeaveGroup refused");
    // The group is Empty until the coordinator forgets it, which it does as soon as it holds
    // no member and no pending id; from then on it is Dead.
    let got = describe_group(&mut observer, &group).await?;
    ensure!(
        got.error_code == NONE && matches!(got.group_state.as_str(), "Empty" | "Dead") && got.members.is_empty(),
        "after both left: error {}, state {:?}, {} members; expected 0, Empty or Dead, none",
        got.error_code,
        got.group_state.as_str(),
        got.members.len()
    );
    if forgets_a_vacant_group_at_once(endpoint.profile) {
        await_described(&mut observer, &group, "the vacant group to be forgotten", |g| {
            g.group_state.as_str() == "Dead"
        })
        .await?;
    }
    Ok(Outcome::Passed)
}

/// DescribeGroups of three groups in one request, a live one between two that nobody joined:
/// each answered in request order, the unknown ones with no error, state `Dead`, no protocol and
/// no members.
pub async fn describegroups_unknown_1_a_group_nobody_joined_is_dead(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let live = endpoint.unique_topic("describe-live");
    let host = expected_host(&endpoint).await?;
    let mut member = coordinator_of(&endpoint.bootstrap, &live).await?;
    let (id, generation, _) = join_new(&mut member, &live, b"meta").await?;
    let synced = sync_group(&mut member, &live, generation, &id, &[(&id, b"assignment")]).await?;
    ensure!(synced.error_code == NONE, "SyncGroup: error {}", synced.error_code);
    // Only groups this gateway coordinates can be asked of it (GROUP-COORDINATOR-1): pick unknown
    // names that hash to the same gateway as the live group.
    let mut unknown = Vec::new();
    let coordinator = endpoint_of(&endpoint, &live).await?;
    while unknown.len() < 2 {
        let name = endpoint.unique_topic("describe-nobody");
        if endpoint_of(&endpoint, &name).await? == coordinator {
            unknown.push(name);
        }
    }
    let asked = [unknown[0].as_str(), live.as_str(), unknown[1].as_str()];
    let request = DescribeGroupsRequest::default().with_groups(asked.iter().map(|g| GroupId(s(g))).collect());
    let mut client = coordinator_of(&endpoint.bootstrap, &live).await?;
    let response: DescribeGroupsResponse = client
        .request(ApiKey::DescribeGroups, DESCRIBE_GROUPS_V, &request)
        .await?;
    let answered: Vec<&str> = response.groups.iter().map(|g| g.group_id.0.as_str()).collect();
    ensure!(answered == asked, "DescribeGroups of {asked:?} answered {answered:?}");
    for dead in [&response.groups[0], &response.groups[2]] {
        ensure!(
            dead.error_code == NONE
                && dead.group_state.as_str() == "Dead"
                && dead.protocol_type.as_str().is_empty()
                && dead.protocol_data.as_str().is_empty()
                && dead.members.is_empty(),
            "unknown group {}: error {}, state {:?}, protocol type {:?}, protocol {:?}, {} members; expected 0, Dead, empty, empty, none",
            dead.group_id.0.as_str(),
            dead.error_code,
            dead.group_state.as_str(),
            dead.protocol_type.as_str(),
            dead.protocol_data.as_str(),
            dead.members.len()
        );
    }
    check_described(
        "the live group between two unknown ones",
        &host,
        &response.groups[1],
        "Stable",
        "consumer",
        "range",
        &[(&id, b"meta", b"assignment")],
    )?;
    Ok(Outcome::Passed)
}

/// The node FindCoordinator names for `group`.
async fn endpoint_of(endpoint: &Endpoint, group: &str) -> anyhow::Result<i32> {
    let mut client = Client::connect(&endpoint.bootstrap).await?;
    let answer = find_coordinator(&mut client, group, KEY_TYPE_GROUP).await?;
    ensure!(
        answer.error_code == NONE,
        "FindCoordinator {group}: error {}",
        answer.error_code
    );
    Ok(answer.node_id.0)
}

/// ListGroups v4 with a states filter.
async fn list_filtered(client: &mut Client, states: &[&str]) -> anyhow::Result<Vec<ListedGroup>> {
    let request = ListGroupsRequest::default().with_states_filter(states.iter().map(|st| s(st)).collect());
    let response: ListGroupsResponse = client
        .request(ApiKey::ListGroups, LIST_GROUPS_V, &request)
        .await
        .with_context(|| format!("ListGroups filtered by {states:?}"))?;
    ensure!(
        response.error_code == NONE,
        "ListGroups {states:?}: error {}",
        response.error_code
    );
    Ok(response.groups)
}

/// Three groups on one coordinator: one Stable, one CompletingRebalance (joined, not synced),
/// one Empty (a member id handed out and not yet used). ListGroups without a filter lists each with protocol type and
/// state; a filter keeps exactly the groups whose state it names, matched case-insensitively,
/// and a filter naming no state lists none of them.
pub async fn listgroups_coordinated_1_listgroups_states_filter_1_lists_by_state(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let stable = endpoint.unique_topic("list-stable");
    let coordinator = endpoint_of(&endpoint, &stable).await?;
    // The other two must share the first one's coordinator, to be listed by the same gateway.
    let mut names = Vec::new();
    while names.len() < 2 {
        let name = endpoint.unique_topic("list-group");
        if endpoint_of(&endpoint, &name).await? == coordinator {
            names.push(name);
        }
    }
    let (completing, empty) = (names[0].clone(), names[1].clone());

    let mut s1 = coordinator_of(&endpoint.bootstrap, &stable).await?;
    let (id, generation, _) = join_new(&mut s1, &stable, b"m").await?;
    let synced = sync_group(&mut s1, &stable, generation, &id, &[(&id, b"a")]).await?;
    ensure!(
        synced.error_code == NONE,
        "SyncGroup {stable}: error {}",
        synced.error_code
    );
    let mut c1 = coordinator_of(&endpoint.bootstrap, &completing).await?;
    join_new(&mut c1, &completing, b"m").await?;
    // A group whose only member id is still pending (KIP-394) is Empty and is kept until that
    // id lapses, after a session timeout far longer than the case.
    let mut e1 = coordinator_of(&endpoint.bootstrap, &empty).await?;
    let first = join_group(&mut e1, &empty, "", PENDING_SESSION_MS, REBALANCE_MS, b"m").await?;
    ensure!(
        first.error_code == MEMBER_ID_REQUIRED,
        "first JoinGroup of {empty}: error {}",
        first.error_code
    );

    let mine = [stable.as_str(), completing.as_str(), empty.as_str()];
    let mut client = coordinator_of(&endpoint.bootstrap, &stable).await?;
    let ours = |listed: Vec<ListedGroup>| -> Vec<(String, String, String)> {
        let mut v: Vec<(String, String, String)> = listed
            .into_iter()
            .filter(|g| mine.contains(&g.group_id.0.as_str()))
            .map(|g| {
                (
                    g.group_id.0.as_str().to_string(),
                    g.protocol_type.as_str().to_string(),
                    g.group_state.as_str().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    };
    // A group no member has joined yet has no protocol type.
    let entry = |g: &str, state: &str| {
        let protocol_type = if state == "Empty" { "" } else { "consumer" };
        (g.to_string(), protocol_type.to_string(), state.to_string())
    };
    let sorted = |mut v: Vec<(String, String, String)>| {
        v.sort();
        v
    };

    let all = ours(list_groups(&mut client).await?);
    let want = sorted(vec![
        entry(&stable, "Stable"),
        entry(&completing, "CompletingRebalance"),
        entry(&empty, "Empty"),
    ]);
    ensure!(
        all == want,
        "ListGroups without a filter lists {all:?}, expected {want:?}"
    );

    let got = ours(list_filtered(&mut client, &["stable"]).await?);
    let want = vec![entry(&stable, "Stable")];
    ensure!(
        got == want,
        "ListGroups filtered by [\"stable\"] lists {got:?}, expected {want:?}"
    );

    let got = ours(list_filtered(&mut client, &["EMPTY", "CompletingRebalance"]).await?);
    let want = sorted(vec![entry(&completing, "CompletingRebalance"), entry(&empty, "Empty")]);
    ensure!(
        got == want,
        "ListGroups filtered by [\"EMPTY\", \"CompletingRebalance\"] lists {got:?}, expected {want:?}"
    );

    let got = ours(list_filtered(&mut client, &["NoSuchState"]).await?);
    ensure!(
        got.is_empty(),
        "ListGroups filtered by [\"NoSuchState\"] lists {got:?}, expected none of them"
    );
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn a_member_host_is_empty_on_the_gateway_and_java_s_address_text_on_kafka() {
        let v4 = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(member_host(Profile::Gateway, v4), "");
        assert_eq!(member_host(Profile::Gateway, v6), "");
        assert_eq!(member_host(Profile::Kafka, v4), "/127.0.0.1");
        assert_eq!(member_host(Profile::Kafka, v6), "/0:0:0:0:0:0:0:1");
    }

    #[test]
    fn only_the_gateway_forgets_a_vacant_group_at_once() {
        assert!(forgets_a_vacant_group_at_once(Profile::Gateway));
        assert!(!forgets_a_vacant_group_at_once(Profile::Kafka));
    }
}
