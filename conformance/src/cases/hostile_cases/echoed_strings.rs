//! The case of 32,767-byte strings in every field an answer echoes back.

use super::*;

/// One request of [`hostile_32767_byte_strings_in_every_echoed_field`]: its frame and the check
/// of its decoded answer.
pub(super) struct LongStringRequest {
    pub(super) what: String,
    pub(super) frame: Bytes,
    pub(super) check: Box<dyn Fn(Bytes) -> anyhow::Result<()> + Send + Sync>,
}

/// The correlation id of every [`LongStringRequest`] (each goes on a connection of its own).
pub(super) const LONG_STRING_CORRELATION_ID: i32 = 77;

impl LongStringRequest {
    /// `body` sent as `key` at `version` behind a 32,767-byte client id; its answer must decode
    /// as `Resp` and pass `check`.
    pub(super) fn new<Req: Encodable, Resp: Decodable + 'static>(
        what: &str,
        key: ApiKey,
        version: i16,
        client_id: &str,
        body: &Req,
        check: impl Fn(&Resp) -> anyhow::Result<()> + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let what = format!("{what} ({key:?} v{version}, 32,767-byte client id)");
        let frame = request_frame(key, version, LONG_STRING_CORRELATION_ID, client_id, body)?;
        let context = what.clone();
        let check = Box::new(move |answer: Bytes| {
            let response: Resp = decoded(key, version, LONG_STRING_CORRELATION_ID, answer, &context)?;
            check(&response).with_context(|| context.clone())
        });
        Ok(Self { what, frame, check })
    }
}

/// 32,767-byte strings (the longest a non-flexible string holds) in every field a response
/// echoes or an error message may quote: topic names (Metadata, ListOffsets, OffsetCommit,
/// OffsetFetch, CreateTopics, DeleteTopics), group ids (FindCoordinator, DescribeGroups,
/// DeleteGroups, OffsetFetch, OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup) and
/// member ids, each behind a 32,767-byte client id, at the highest non-flexible version and
/// the first flexible one. Each is answered with a decodable response — echoing the name and
/// refusing it where Kafka does — or closed.
pub async fn hostile_32767_byte_strings_in_every_echoed_field(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let watchdog = Watchdog::start(&endpoint, Probes::SERVING_AND_MEMBER).await?;
    watchdog
        .guard(async {
            let mut client = connect(&endpoint).await?;
            let real_topic = new_topic(&endpoint, &mut client, "kig-hostile-strings", 1).await?;
            let real_group = endpoint.unique_topic("kig-hostile-strings");
            let long = |c: &str| c.repeat(KAFKA_STRING_MAX);
            let (topic, group, member, client_id) = (long("t"), long("g"), long("m"), long("c"));
            let mut requests = Vec::new();
            {
                for version in [8, 9] {
                    let request = MetadataRequest::default()
                        .with_allow_auto_topic_creation(false)
                        .with_topics(Some(vec![
                            MetadataRequestTopic::default().with_name(Some(topic_name(&topic)))
                        ]));
                    let echoed = topic.clone();
                    requests.push(LongStringRequest::new(
                        "Metadata of a 32,767-byte topic",
                        ApiKey::Metadata,
                        version,
                        &client_id,
                        &request,
                        move |r: &MetadataResponse| {
                            let answered: Vec<_> = r
                                .topics
                                .iter()
                                .map(|t| (t.name.as_ref().map(|n| n.0.len()), t.error_code))
                                .collect();
                            ensure!(
                                r.topics.len() == 1
                                    && r.topics[0].name.as_ref().map(|n| n.0.as_str()) == Some(echoed.as_str())
                                    && r.topics[0].error_code != NONE,
                                "expected the topic echoed with an error, got (name length, error) {answered:?}"
                            );
                            Ok(())
                        },
                    )?);
                }
            }
            for version in [5, 6] {
                let request = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(LATEST)])]);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "ListOffsets of a 32,767-byte topic",
                    ApiKey::ListOffsets,
                    version,
                    &client_id,
                    &request,
                    move |r: &ListOffsetsResponse| {
                        let answered: Vec<_> = r
                            .topics
                            .iter()
                            .map(|t| {
                                (
                                    t.name.0.len(),
                                    t.partitions.iter().map(|p| p.error_code).collect::<Vec<_>>(),
                                )
                            })
                            .collect();
                        ensure!(
                            r.topics.len() == 1
                                && r.topics[0].name.0.as_str() == echoed
                                && r.topics[0].partitions.len() == 1
                                && r.topics[0].partitions[0].error_code != NONE,
                            "expected the topic echoed with an error, got (name length, errors) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [4, 5] {
                let request =
                    CreateTopicsRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topics(vec![CreatableTopic::default()
                            .with_name(topic_name(&topic))
                            .with_num_partitions(1)
                            .with_replication_factor(-1)]);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "CreateTopics of a 32,767-byte topic",
                    ApiKey::CreateTopics,
                    version,
                    &client_id,
                    &request,
                    move |r: &CreateTopicsResponse| {
                        let answered: Vec<_> = r.topics.iter().map(|t| (t.name.0.len(), t.error_code)).collect();
                        ensure!(
                            r.topics.len() == 1
                                && r.topics[0].name.0.as_str() == echoed
                                && r.topics[0].error_code == INVALID_TOPIC_EXCEPTION,
                            "expected the topic echoed with INVALID_TOPIC_EXCEPTION ({INVALID_TOPIC_EXCEPTION}), \
                             got (name length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [3, 4] {
                let request = DeleteTopicsRequest::default()
                    .with_topic_names(vec![topic_name(&topic)])
                    .with_timeout_ms(30_000);
                let echoed = topic.clone();
                requests.push(LongStringRequest::new(
                    "DeleteTopics of a 32,767-byte topic",
                    ApiKey::DeleteTopics,
                    version,
                    &client_id,
                    &request,
                    move |r: &DeleteTopicsResponse| {
                        let answered: Vec<_> = r
                            .responses
                            .iter()
                            .map(|t| (t.name.as_ref().map(|n| n.0.len()), t.error_code))
                            .collect();
                        ensure!(
                            r.responses.len() == 1
                                && r.responses[0].name.as_ref().map(|n| n.0.as_str()) == Some(echoed.as_str())
                                && r.responses[0].error_code != NONE,
                            "expected the topic echoed with an error, got (name length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            // OffsetCommit and OffsetFetch: a long topic under a real group id, then a long
            // group id over the real topic; OffsetCommit also with a long member id.
            for version in [7, 8] {
                for (what, group_id, member_id, topic_id) in [
                    ("OffsetCommit of a 32,767-byte topic", &real_group, "", &topic),
                    ("OffsetCommit for a 32,767-byte group id", &group, "", &real_topic),
                    (
                        "OffsetCommit from a 32,767-byte member id",
                        &real_group,
                        member.as_str(),
                        &real_topic,
                    ),
                ] {
                    let request = OffsetCommitRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id_or_member_epoch(if member_id.is_empty() { -1 } else { 1 })
                        .with_member_id(string(member_id))
                        .with_topics(vec![OffsetCommitRequestTopic::default()
                            .with_name(topic_name(topic_id))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(0)])]);
                    requests.push(LongStringRequest::new(
                        what,
                        ApiKey::OffsetCommit,
                        version,
                        &client_id,
                        &request,
                        |_: &OffsetCommitResponse| Ok(()),
                    )?);
                }
            }
            for version in [5, 6] {
                for (what, group_id, topic_id) in [
                    ("OffsetFetch of a 32,767-byte topic", &real_group, &topic),
                    ("OffsetFetch for a 32,767-byte group id", &group, &real_topic),
                ] {
                    let request = OffsetFetchRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                            .with_name(topic_name(topic_id))
                            .with_partition_indexes(vec![0])]));
                    requests.push(LongStringRequest::new(
                        what,
                        ApiKey::OffsetFetch,
                        version,
                        &client_id,
                        &request,
                        |_: &OffsetFetchResponse| Ok(()),
                    )?);
                }
            }
            for version in [2, 3] {
                let request = FindCoordinatorRequest::default().with_key(string(&group));
                requests.push(LongStringRequest::new(
                    "FindCoordinator for a 32,767-byte group id",
                    ApiKey::FindCoordinator,
                    version,
                    &client_id,
                    &request,
                    |_: &FindCoordinatorResponse| Ok(()),
                )?);
            }
            for version in [4, 5] {
                let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(string(&group))]);
                let echoed = group.clone();
                requests.push(LongStringRequest::new(
                    "DescribeGroups of a 32,767-byte group id",
                    ApiKey::DescribeGroups,
                    version,
                    &client_id,
                    &request,
                    move |r: &DescribeGroupsResponse| {
                        let lengths: Vec<usize> = r.groups.iter().map(|g| g.group_id.0.len()).collect();
                        ensure!(
                            r.groups.len() == 1 && r.groups[0].group_id.0.as_str() == echoed,
                            "expected the group echoed, got group ids of lengths {lengths:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            for version in [1, 2] {
                let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(string(&group))]);
                let echoed = group.clone();
                requests.push(LongStringRequest::new(
                    "DeleteGroups of a 32,767-byte group id",
                    ApiKey::DeleteGroups,
                    version,
                    &client_id,
                    &request,
                    move |r: &DeleteGroupsResponse| {
                        let answered: Vec<_> = r.results.iter().map(|g| (g.group_id.0.len(), g.error_code)).collect();
                        ensure!(
                            r.results.len() == 1
                                && r.results[0].group_id.0.as_str() == echoed
                                && r.results[0].error_code != NONE,
                            "expected the group echoed with an error, got (group id length, error) {answered:?}"
                        );
                        Ok(())
                    },
                )?);
            }
            // The member's requests: a long group id with a plain member id, then a real group
            // id with a long member id.
            let members = [
                ("a 32,767-byte group id", &group, "kig-hostile-member"),
                ("a 32,767-byte member id", &real_group, member.as_str()),
            ];
            {
                for version in [5, 6] {
                    for (field, group_id, member_id) in members {
                        let request = JoinGroupRequest::default()
                            .with_group_id(GroupId(string(group_id)))
                            .with_session_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                            .with_rebalance_timeout_ms(MEMBER_SESSION_TIMEOUT_MS)
                            .with_member_id(string(member_id))
                            .with_protocol_type(StrBytes::from_static_str("consumer"))
                            .with_protocols(vec![JoinGroupRequestProtocol::default()
                                .with_name(StrBytes::from_static_str("range"))
                                .with_metadata(Bytes::from_static(b"m"))]);
                        requests.push(LongStringRequest::new(
                            &format!("JoinGroup with {field}"),
                            ApiKey::JoinGroup,
                            version,
                            &client_id,
                            &request,
                            |_: &JoinGroupResponse| Ok(()),
                        )?);
                    }
                }
            }
            for version in [3, 4] {
                for (field, group_id, member_id) in members {
                    let heartbeat = HeartbeatRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id(1)
                        .with_member_id(string(member_id));
                    requests.push(LongStringRequest::new(
                        &format!("Heartbeat with {field}"),
                        ApiKey::Heartbeat,
                        version,
                        &client_id,
                        &heartbeat,
                        |_: &HeartbeatResponse| Ok(()),
                    )?);
                    let leave = LeaveGroupRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_members(vec![MemberIdentity::default().with_member_id(string(member_id))]);
                    requests.push(LongStringRequest::new(
                        &format!("LeaveGroup with {field}"),
                        ApiKey::LeaveGroup,
                        version,
                        &client_id,
                        &leave,
                        |_: &LeaveGroupResponse| Ok(()),
                    )?);
                    let sync = SyncGroupRequest::default()
                        .with_group_id(GroupId(string(group_id)))
                        .with_generation_id(1)
                        .with_member_id(string(member_id))
                        .with_assignments(vec![SyncGroupRequestAssignment::default()
                            .with_member_id(string(member_id))
                            .with_assignment(Bytes::from_static(b"a"))]);
                    requests.push(LongStringRequest::new(
                        &format!("SyncGroup with {field}"),
                        ApiKey::SyncGroup,
                        version,
                        &client_id,
                        &sync,
                        |_: &SyncGroupResponse| Ok(()),
                    )?);
                }
            }
            for request in requests {
                // All to the bootstrap broker: one that does not coordinate a group answers
                // NOT_COORDINATOR, which is as much an answer as any here.
                let mut connection = connect(&endpoint).await?;
                if let Answer::Frame(answer) =
                    send_hostile(&mut connection, &request.frame, &request.what, LIVENESS).await?
                {
                    (request.check)(answer)?;
                }
            }
            new_connection_answers(&endpoint, "the 32,767-byte strings").await
        })
        .await?;
    Ok(Outcome::Passed)
}
