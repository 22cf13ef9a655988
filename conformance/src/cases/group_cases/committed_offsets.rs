//! Committed-offset cases: commits surviving consumer restarts, the zero marker, OffsetDelete,
//! commits of -1, OffsetFetch of a whole group and over-long group ids.

use super::*;

// ---------------------------------------------------------------------------------------------
// Committed offsets through librdkafka
// ---------------------------------------------------------------------------------------------

pub async fn restarted_consumer_resumes_at_committed_offsets(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-resume");
    let group = endpoint.unique_topic("group-resume-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 10).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    first.wait_until("offsets 0..6", |h| h.has_all(0, 0..6)).await?;
    first.commit(&[(0, 6)]).await?;
    first.close().await?;
    // earliest: a lost commit would start the new consumer at 0.
    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    let committed = second.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(6)),
        "the restarted consumer reads back the committed offset {committed:?}, not 6"
    );
    second.wait_until("offsets 6..10", |h| h.has_all(0, 6..10)).await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets.first() == Some(&6),
        "the restarted consumer started at {:?}, not at the committed offset 6; delivered {offsets:?}",
        offsets.first()
    );
    ensure!(
        second.history.distinct(0) == (6..10).collect::<BTreeSet<i64>>(),
        "the restarted consumer delivered {offsets:?}; only 6..10 expected"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

pub async fn caught_up_commit_survives_a_consumer_restart(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-caught-up");
    let group = endpoint.unique_topic("group-caught-up-g");
    create_topic(&endpoint, &topic, 1).await?;
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    first.wait_until("offsets 0..5", |h| h.has_all(0, 0..5)).await?;
    // 5 is the high watermark: the partition's last offset is 4, so Iggy would refuse to store
    // 5 verbatim (DIFF-2).
    first.commit(&[(0, 5)]).await?;
    first.close().await?;

    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "earliest")?;
    second.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    let committed = second.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(5)),
        "after committing the high watermark 5, a restarted consumer reads back {committed:?}"
    );
    // Caught up: the end of the partition comes before any record.
    second
        .wait_until("the end of partition 0 or a record", |h| {
            h.eofs(0) > 0 || h.records() > 0
        })
        .await?;
    ensure!(
        second.history.records() == 0,
        "the restarted consumer re-delivered {:?} although everything up to 5 was committed",
        second.history.offsets(0)
    );
    produce_at(&endpoint, &topic, 0, 5, 2).await?;
    second
        .wait_until("offsets 5 and 6, then the end of the partition again", |h| {
            h.has_all(0, 5..7) && h.eofs(0) >= 2
        })
        .await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets == [5, 6],
        "after 2 more records the restarted consumer delivered {offsets:?}, expected exactly [5, 6]"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

pub async fn commit_of_zero_on_an_empty_partition_survives_records_arriving(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-zero");
    let group = endpoint.unique_topic("group-zero-g");
    create_topic(&endpoint, &topic, 1).await?;
    let mut first = GroupConsumer::subscribe("first consumer", &endpoint.bootstrap, &group, &topic, "latest")?;
    first.wait_assignment("partition 0", |a| a.contains(&0)).await?;
    // 0 on an empty partition: Iggy refuses to store any offset there (DIFF-2).
    first.commit(&[(0, 0)]).await?;
    let committed = first.committed(&[0]).await?;
    ensure!(
        committed.get(&0) == Some(&Offset::Offset(0)),
        "after committing 0 on the empty partition, the consumer reads back {committed:?}"
    );
    first.close().await?;
    // Records arrive while no consumer runs.
    produce_at(&endpoint, &topic, 0, 0, 3).await?;
    // latest: without the commit of 0 the new consumer would start at 3 and see nothing.
    let mut second = GroupConsumer::subscribe("restarted consumer", &endpoint.bootstrap, &group, &topic, "latest")?;
    second.wait_until("offsets 0, 1 and 2", |h| h.has_all(0, 0..3)).await?;
    let offsets = second.history.offsets(0);
    ensure!(
        offsets.first() == Some(&0) && second.history.distinct(0) == BTreeSet::from([0, 1, 2]),
        "the consumer after a commit of 0 delivered {offsets:?}, expected 0, 1, 2 from 0"
    );
    second.close().await?;
    Ok(Outcome::Passed)
}

// ---------------------------------------------------------------------------------------------
// Committed offsets over the raw wire
// ---------------------------------------------------------------------------------------------

/// Consumer-protocol metadata: a version-0 subscription to `topics`.
pub(super) fn consumer_subscription(topics: &[&str]) -> anyhow::Result<Vec<u8>> {
    use kafka_protocol::protocol::Encodable;
    let subscription = kafka_protocol::messages::ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| kafka_protocol::protocol::StrBytes::from_string(t.to_string()))
            .collect(),
    );
    let mut metadata = bytes::BytesMut::new();
    metadata.extend_from_slice(&0i16.to_be_bytes());
    subscription.encode(&mut metadata, 0)?;
    Ok(metadata.to_vec())
}

/// OffsetDelete v0 of partition 0 of each of `topics`: the top-level code and each topic's.
pub(super) async fn offset_delete(
    client: &mut Client,
    group: &str,
    topics: &[&str],
) -> anyhow::Result<(i16, Vec<i16>)> {
    use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    use kafka_protocol::messages::{GroupId, OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)])
                })
                .collect(),
        );
    let response: OffsetDeleteResponse = client
        .request(ApiKey::OffsetDelete, 0, &request)
        .await
        .with_context(|| format!("OffsetDelete {group}"))?;
    let codes = response
        .topics
        .iter()
        .map(|t| t.partitions.first().map_or(i16::MIN, |p| p.error_code))
        .collect();
    Ok((response.error_code, codes))
}

pub async fn offset_delete_removes_the_named_offsets_and_spares_subscribed_topics(
    endpoint: Endpoint,
) -> anyhow::Result<Outcome> {
    const GROUP_ID_NOT_FOUND: i16 = 69;
    const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    if let Some(skip) = require_apis(&endpoint, &[ApiKey::OffsetDelete]).await? {
        return Ok(skip);
    }
    let subscribed = endpoint.unique_topic("offset-delete-subscribed");
    let other = endpoint.unique_topic("offset-delete-other");
    let group = endpoint.unique_topic("offset-delete-g");
    for topic in [&subscribed, &other] {
        create_topic(&endpoint, topic, 1).await?;
        produce_at(&endpoint, topic, 0, 0, 5).await?;
    }
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    // OFFSETDELETE-1: a group with neither members nor offsets does not exist.
    let (code, _) = offset_delete(&mut client, &group, &[&other]).await?;
    ensure!(
        code == GROUP_ID_NOT_FOUND,
        "OffsetDelete of a group nobody used: error {code}, expected GROUP_ID_NOT_FOUND ({GROUP_ID_NOT_FOUND})"
    );
    for topic in [&subscribed, &other] {
        let code = commit_one(&mut client, &group, topic, 0, 3).await?;
        ensure!(code == NONE, "standalone commit of 3 on {topic}: error {code}");
    }
    // Without members every named offset goes.
    let (code, codes) = offset_delete(&mut client, &group, &[&other]).await?;
    ensure!(
        (code, codes.clone()) == (NONE, vec![NONE]),
        "OffsetDelete of an empty group: (error, per topic) ({code}, {codes:?}), expected (0, [0])"
    );
    let fetched = fetch_one(&mut client, &group, &other, 0).await?;
    ensure!(
        fetched.0 == -1,
        "OffsetFetch after OffsetDelete: offset {}, expected -1",
        fetched.0
    );
    let code = commit_one(&mut client, &group, &other, 0, 3).await?;
    ensure!(code == NONE, "second commit of 3 on {other}: error {code}");
    // OFFSETDELETE-2: a member subscribed to one topic keeps that topic's offsets.
    let metadata = consumer_subscription(&[&subscribed])?;
    let first = join_group(&mut client, &group, "", 10_000, 10_000, &metadata).await?;
    let member = if first.error_code == MEMBER_ID_REQUIRED {
        let id = first.member_id.as_str().to_string();
        let joined = join_group(&mut client, &group, &id, 10_000, 10_000, &metadata).await?;
        ensure!(
            joined.error_code == NONE,
            "JoinGroup as {id}: error {}",
            joined.error_code
        );
        (id, joined.generation_id)
    } else {
        ensure!(first.error_code == NONE, "JoinGroup: error {}", first.error_code);
        (first.member_id.as_str().to_string(), first.generation_id)
    };
    let synced = sync_group(&mut client, &group, member.1, &member.0, &[(&member.0, b"")]).await?;
    ensure!(synced.error_code == NONE, "SyncGroup: error {}", synced.error_code);
    let (code, codes) = offset_delete(&mut client, &group, &[&subscribed, &other]).await?;
    ensure!(
        (code, codes.clone()) == (NONE, vec![GROUP_SUBSCRIBED_TO_TOPIC, NONE]),
        "OffsetDelete with a member subscribed to {subscribed}: (error, per topic) ({code}, {codes:?}), \
         expected (0, [GROUP_SUBSCRIBED_TO_TOPIC ({GROUP_SUBSCRIBED_TO_TOPIC}), 0])"
    );
    let kept = fetch_one(&mut client, &group, &subscribed, 0).await?;
    let gone = fetch_one(&mut client, &group, &other, 0).await?;
    ensure!(
        (kept.0, gone.0) == (3, -1),
        "committed offsets after OffsetDelete: {subscribed} {}, {other} {}; expected 3 and -1",
        kept.0,
        gone.0
    );
    Ok(Outcome::Passed)
}

pub async fn commit_of_minus_one_deletes_the_committed_offset(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-delete-offset");
    let group = endpoint.unique_topic("group-delete-offset-g");
    create_topic(&endpoint, &topic, 1).await?;
    // Records up to offset 4, so that a commit of 3 is within the partition on any server.
    produce_at(&endpoint, &topic, 0, 0, 5).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;

    let before = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        before == (-1, -1, Some(String::new()), NONE),
        "OffsetFetch before any commit: (offset, leader epoch, metadata, error) {before:?}, expected (-1, -1, \"\", 0)"
    );
    let code = commit_one(&mut client, &group, &topic, 0, 3).await?;
    ensure!(code == NONE, "standalone commit of 3: error {code}");
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    // CO-METADATA-1 (a deviation): the gateway keeps the offset alone; Kafka keeps the
    // commit's leader epoch and metadata too.
    let expected = match endpoint.profile {
        Profile::Gateway => (3, -1, Some(String::new()), NONE),
        Profile::Kafka => (3, COMMIT_LEADER_EPOCH, Some(COMMIT_METADATA.to_string()), NONE),
    };
    ensure!(
        fetched == expected,
        "OffsetFetch after committing 3 with metadata {COMMIT_METADATA:?} and leader epoch {COMMIT_LEADER_EPOCH}: \
         (offset, leader epoch, metadata, error) {fetched:?}, expected {expected:?} (CO-METADATA-1)"
    );
    let code = commit_one(&mut client, &group, &topic, 0, -1).await?;
    ensure!(code == NONE, "commit of -1: error {code}, expected 0");
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    if endpoint.profile.is_kafka() {
        // Kafka stores -1 as it stores any offset, with the commit's epoch and metadata, and -1
        // reads as nothing committed. What it does with other negative offsets is no rule of
        // its; refusing them is CO-DELETE-1's.
        ensure!(
            fetched.0 == -1 && fetched.3 == NONE,
            "OffsetFetch after committing -1: (offset, error) ({}, {}), expected (-1, 0)",
            fetched.0,
            fetched.3
        );
        return Ok(Outcome::Passed);
    }
    // CO-DELETE-1 (a deviation): the gateway deletes the offset instead of storing -1.
    ensure!(
        fetched == (-1, -1, Some(String::new()), NONE),
        "OffsetFetch after committing -1: {fetched:?}, expected nothing committed (-1, -1, \"\", 0)"
    );
    // Deleting what is not there is not an error either.
    let code = commit_one(&mut client, &group, &topic, 0, -1).await?;
    ensure!(code == NONE, "second commit of -1: error {code}, expected 0");
    let code = commit_one(&mut client, &group, &topic, 0, -2).await?;
    ensure!(
        code == OFFSET_OUT_OF_RANGE,
        "commit of -2: error {code}, expected OFFSET_OUT_OF_RANGE ({OFFSET_OUT_OF_RANGE})"
    );
    let fetched = fetch_one(&mut client, &group, &topic, 0).await?;
    ensure!(
        fetched.0 == -1,
        "OffsetFetch after a refused commit of -2: offset {}, expected still -1",
        fetched.0
    );
    Ok(Outcome::Passed)
}

pub async fn offset_fetch_with_null_topics_lists_committed_partitions(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let first = endpoint.unique_topic("group-fetch-all-a");
    let second = endpoint.unique_topic("group-fetch-all-b");
    let untouched = endpoint.unique_topic("group-fetch-all-c");
    let group = endpoint.unique_topic("group-fetch-all-g");
    create_topic(&endpoint, &first, 2).await?;
    create_topic(&endpoint, &second, 2).await?;
    create_topic(&endpoint, &untouched, 1).await?;
    produce_at(&endpoint, &first, 1, 0, 3).await?;
    produce_at(&endpoint, &second, 0, 0, 2).await?;
    produce_at(&endpoint, &untouched, 0, 0, 1).await?;
    let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
    // first-0 is empty: its commit of 0 is a zero marker on the gateway (CO-ZERO-1).
    let answers = offset_commit(
        &mut client,
        &group,
        -1,
        "",
        &[(&first, 0, 0), (&first, 1, 2), (&second, 0, 1)],
    )
    .await?;
    ensure!(
        answers.len() == 3 && answers.iter().all(|(_, _, code)| *code == NONE),
        "standalone commits on two topics answered {answers:?}"
    );
    let response = offset_fetch(&mut client, &group, None).await?;
    ensure!(
        response.error_code == NONE,
        "OffsetFetch with null topics: error {}",
        response.error_code
    );
    let listed: BTreeMap<(String, i32), i64> = fetched(&response)
        .into_iter()
        .map(|(key, (offset, _, _, code))| {
            ensure!(code == NONE, "OffsetFetch listed {key:?} with error {code}");
            Ok((key, offset))
        })
        .collect::<anyhow::Result<_>>()?;
    let expected = BTreeMap::from([
        ((first.clone(), 0), 0),
        ((first.clone(), 1), 2),
        ((second.clone(), 0), 1),
    ]);
    ensure!(
        listed == expected,
        "OffsetFetch with null topics listed {listed:?}; expected exactly the committed partitions {expected:?} \
         ({second}-1 and {untouched} have nothing committed)"
    );
    Ok(Outcome::Passed)
}

pub async fn group_id_longer_than_246_bytes_is_invalid(endpoint: Endpoint) -> anyhow::Result<Outcome> {
    let topic = endpoint.unique_topic("group-long-id");
    create_topic(&endpoint, &topic, 2).await?;
    produce_at(&endpoint, &topic, 0, 0, 2).await?;
    let unique = endpoint.unique_topic("g");
    let pad = |len: usize| format!("{unique}{}", "x".repeat(len - unique.len()));
    let (longest, too_long) = (pad(246), pad(247));
    ensure!(longest.len() == 246 && too_long.len() == 247, "group id lengths");

    // 246 bytes is the longest that works, for a commit of 0 (a marker named after the id on the
    // gateway) as for any other.
    let mut client = coordinator_of(&endpoint.bootstrap, &longest).await?;
    let answers = offset_commit(&mut client, &longest, -1, "", &[(&topic, 0, 2), (&topic, 1, 0)]).await?;
    ensure!(
        answers.len() == 2 && answers.iter().all(|a| a.2 == NONE),
        "standalone OffsetCommit with a 246-byte group id answered {answers:?}"
    );
    let response = offset_fetch(&mut client, &longest, Some(&[(&topic, &[0, 1])])).await?;
    let got: Vec<(i64, i16)> = fetched(&response).values().map(|f| (f.0, f.3)).collect();
    ensure!(
        response.error_code == NONE && got == [(2, NONE), (0, NONE)],
        "OffsetFetch with a 246-byte group id: error {}, (offset, error) {got:?}, expected [(2, 0), (0, 0)]",
        response.error_code
    );
    // CO-GROUP-ID-1 (a deviation): Kafka sets no length limit on a group id below the
    // protocol's 32767 bytes, and takes a 247-byte one like any other: the commit is stored
    // and a new member is asked for its member id.
    let (commit_code, join_code) = match endpoint.profile {
        Profile::Gateway => (INVALID_GROUP_ID, INVALID_GROUP_ID),
        Profile::Kafka => (NONE, MEMBER_ID_REQUIRED),
    };
    let mut client = coordinator_of(&endpoint.bootstrap, &too_long).await?;
    let answers = offset_commit(&mut client, &too_long, -1, "", &[(&topic, 0, 1)]).await?;
    ensure!(
        answers.iter().map(|a| a.2).collect::<Vec<_>>() == [commit_code],
        "OffsetCommit with a 247-byte group id answered {answers:?}, expected error {commit_code}"
    );
    let joined = join_group(&mut client, &too_long, "", 10_000, 10_000, b"m").await?;
    ensure!(
        joined.error_code == join_code,
        "JoinGroup with a 247-byte group id: error {}, expected {join_code}",
        joined.error_code
    );

    Ok(Outcome::Passed)
}
