//! On whose authority each endpoint case expects what it expects under the kafka profile: a KIP,
//! a section of Kafka's protocol guide, or Kafka's own code by class and method. One entry per
//! case, keyed by its name; `Case::info` attaches it beside the rule IDs, so the JSON and JUnit
//! reports and docs/conformance-peers.md carry it, and a user whose broker fails a case reads why
//! Kafka answers so. A case with nothing of Kafka to hold an endpoint to (it skips under the kafka
//! profile, or reads what only the gateway's backend holds) says so, starting with
//! [`NO_KAFKA_COUNTERPART`]. `every_endpoint_case_names_its_authority` (tests below) fails on a
//! case without an entry.

/// How an entry of a case without a Kafka expectation begins.
pub const NO_KAFKA_COUNTERPART: &str = "no Kafka counterpart:";

/// Why the gateway-only cases have no authority: they skip under the kafka profile.
const GATEWAY_ONLY: &str = "no Kafka counterpart: gateway-only, skips under the kafka profile";
/// Why the migration cases have none: they read what a native Iggy client wrote.
const IGGY_ONLY: &str =
    "no Kafka counterpart: reads messages a native Iggy client wrote beside the gateway, which only \
     the gateway's backend holds; skips on any other endpoint";
/// The rule every version check of the wire rests on.
const CLOSES_ON_UNPARSABLE: &str = "Kafka closes the connection on a request it cannot parse, an unknown API key \
     or a version it does not serve (RequestContext.parseRequest throws InvalidRequestException; SocketServer's \
     Processor.processCompletedReceives closes the channel)";
const MAPPING_ROUND_TRIP: &str = "protocol guide, Record Batch and Record (key, value, headers, timestamp \
     delta and offset delta read back as produced); KIP-82 (record headers, repeated names and order kept); \
     KIP-110 (zstd)";
const COMMITTED_OFFSETS: &str = "protocol guide, OffsetCommit and OffsetFetch: a committed offset is the next \
     record to read, and a consumer (re)assigned a partition resumes there";
const KIP_848: &str = "KIP-848 (the consumer rebalance protocol: ConsumerGroupHeartbeat, member epochs, \
     server-side assignment; GroupMetadataManager.consumerGroupHeartbeat)";
const ROBUSTNESS: &str = "no one answer is Kafka's: any error code the API defines (protocol guide, Error \
     Codes), or closing the connection as Kafka does on a request it will not serve (SocketServer's \
     Processor.processCompletedReceives), passes; what is checked is that other clients stay answered";

static AUTHORITIES: &[(&str, &str)] = &[
    // wire
    (
        "api_versions_lists_the_advertised_ranges",
        "KIP-35 (ApiVersions lists each API's served range); KIP-511 (v3 names the client software); \
         KAFKA-18659 (Produce advertised from v0); librdkafka's MsgVer2 feature needs Produce v3 and Fetch v4 \
         (rdkafka_feature.c)",
    ),
    ("api_versions_v0_matches_the_spec_table", GATEWAY_ONLY),
    (
        "api_versions_future_version_gets_v0_unsupported_version",
        "KIP-511: an ApiVersions above the broker's range is answered UNSUPPORTED_VERSION (35) in a v0 body \
         (RequestContext.parseRequest, ApiVersionsRequest.getErrorResponse)",
    ),
    (
        "every_served_api_answers_at_its_lowest_and_highest_version",
        "KIP-35 (an advertised range is the set of versions served; protocol guide, ApiVersions); KIP-482 \
         (flexible versions use request header v2 and response header v1, ApiKeys.requestHeaderVersion and \
         responseHeaderVersion)",
    ),
    (
        "init_producer_id_with_transactional_id_is_unsupported_version",
        "KIP-98: InitProducerId with a transactional id is served by the transaction coordinator \
         (TransactionCoordinator.handleInitProducerId)",
    ),
    ("producer_ids_carry_the_instance_id", GATEWAY_ONLY),
    (
        "frame_above_max_frame_size_closes_the_connection",
        "Kafka closes a connection whose frame size is above socket.request.max.bytes (NetworkReceive.readFrom \
         throws InvalidReceiveException; SocketServer's Processor closes the channel)",
    ),
    (
        "frame_of_exactly_max_frame_size_is_read",
        "NetworkReceive.readFrom refuses only a size above socket.request.max.bytes, so a frame of exactly that \
         size is read",
    ),
    (
        "decompression_bomb_is_message_too_large_and_connection_survives",
        GATEWAY_ONLY,
    ),
    ("decompression_budget_is_shared_by_the_whole_request", GATEWAY_ONLY),
    ("malformed_request_body_closes_the_connection", CLOSES_ON_UNPARSABLE),
    ("unknown_api_key_closes_the_connection", CLOSES_ON_UNPARSABLE),
    ("produce_v2_closes_the_connection", GATEWAY_ONLY),
    (
        "fetch_v3_closes_the_connection",
        "Kafka closes the connection on a version it does not serve (RequestContext.parseRequest, SocketServer's \
         Processor); the case runs only where Fetch v3 is not advertised, as from Kafka 4.0 (KIP-896)",
    ),
    (
        "version_above_the_advertised_range_closes_the_connection",
        CLOSES_ON_UNPARSABLE,
    ),
    (
        "produce_then_fetch_round_trips_every_mapping_case",
        "protocol guide, Record Batch and Record; KIP-82 (record headers); offsets assigned one per record from \
         the log end (LogValidator, UnifiedLog.append)",
    ),
    (
        "compressed_batches_round_trip_uncompressed",
        "protocol guide, Record Batch (attributes bits 0-2: none, gzip, snappy, lz4, zstd; KIP-110 for zstd); \
         Fetch returns whole batches from the fetch offset up to max_bytes (UnifiedLog.read via LogSegment.read)",
    ),
    (
        "fetch_past_the_high_watermark_is_offset_out_of_range",
        "a Fetch past the log end is OFFSET_OUT_OF_RANGE (1) (LocalLog.read throws OffsetOutOfRangeException, \
         ReplicaManager.readFromLog maps it)",
    ),
    (
        "fetch_returns_the_first_record_whole_above_max_bytes",
        "KIP-74: max_bytes and partition_max_bytes bound the answer, except that the first batch is returned \
         whole (LocalLog.read with minOneMessage)",
    ),
    (
        "list_offsets_earliest_latest_and_timestamps",
        "KIP-79: ListOffsets -2 is the log start, -1 the high watermark, a timestamp the first offset whose \
         timestamp is at or after it (UnifiedLog.fetchOffsetByTimestamp)",
    ),
    (
        "list_offsets_max_timestamp_after_a_fetch_of_one_byte_records",
        "KIP-734: ListOffsets -3 (MAX_TIMESTAMP, v7) answers the offset and timestamp of the record with the \
         largest timestamp, whatever was fetched before (UnifiedLog.fetchOffsetByTimestamp)",
    ),
    (
        "create_topics_rules",
        "KIP-4 (CreateTopics); a name outside [a-zA-Z0-9._-] or above 249 characters is INVALID_TOPIC_EXCEPTION \
         (17) (Topic.validate, called by ReplicationControlManager.createTopics); an existing name is \
         TOPIC_ALREADY_EXISTS (36); KIP-108 (validate_only creates nothing)",
    ),
    (
        "delete_topics_then_metadata_reports_unknown",
        "KIP-4 (DeleteTopics); KIP-516 (a topic id the cluster does not know is UNKNOWN_TOPIC_ID, 100); \
         KIP-320 (Metadata v7+ carries each partition's leader epoch, from PartitionRegistration.leaderEpoch)",
    ),
    (
        "describe_configs_reports_retention_and_fixed_entries",
        "KIP-133 (DescribeConfigs); KIP-226 (config sources); an unknown resource type is INVALID_REQUEST (42) \
         (ConfigHelper.describeConfigs)",
    ),
    (
        "describe_cluster_agrees_with_metadata",
        "KIP-700 (DescribeCluster answers the brokers, controller and cluster id that Metadata answers)",
    ),
    (
        "alter_configs_change_retention_and_refuse_the_rest",
        "KIP-133 (AlterConfigs), KIP-339 (IncrementalAlterConfigs); a resource named twice is INVALID_REQUEST \
         at every mention (ControllerApis.handleLegacyAlterConfigs, \"Duplicate resource.\")",
    ),
    (
        "corrupt_crc_is_corrupt_message_and_magic_1_is_unsupported",
        "a batch whose CRC does not match is CORRUPT_MESSAGE (2) (UnifiedLog.analyzeAndValidateRecords: \
         batch.isValid, CorruptRecordException); a magic-1 batch in Produce v3+ is INVALID_RECORD (87) \
         (ProduceRequest.validateRecords, Errors.forException in KafkaApis.handleProduceRequest); a Produce is \
         written whole or not at all per partition",
    ),
    (
        "produce_to_a_named_partition_stays_there",
        "a record produced to partition N is read from N; a partition the topic does not have is \
         UNKNOWN_TOPIC_OR_PARTITION (3) (ReplicaManager.appendToLocalLog, getPartitionOrException)",
    ),
    (
        "acks_zero_gets_no_response_and_order_is_kept",
        "Kafka sends no response to a Produce with acks=0 (KafkaApis.handleProduceRequest, \
         sendResponseCallback) and appends a connection's requests in order",
    ),
    (
        "pipelined_requests_are_answered_in_order",
        "protocol guide, Network: on one connection requests are processed, and answered, in the order sent \
         (SocketServer mutes a channel until its response is sent)",
    ),
    (
        "fetch_long_poll_returns_when_data_arrives",
        "a Fetch short of min_bytes waits up to max_wait_ms and completes when data arrives \
         (ReplicaManager.fetchMessages parks a DelayedFetch; DelayedFetch.tryComplete)",
    ),
    ("negative_timestamp_is_invalid_timestamp", GATEWAY_ONLY),
    (
        "idempotent_retry_is_answered_with_its_first_offset",
        "KIP-98 (idempotent producer: a retried batch is not written twice and is answered with its \
         first offset, ProducerStateEntry.findDuplicateBatch, UnifiedLog.analyzeAndValidateProducerState)",
    ),
    (
        "idempotent_sequence_gap_is_out_of_order",
        "KIP-98 (a sequence that does not follow is OUT_OF_ORDER_SEQUENCE_NUMBER, \
         ProducerAppendInfo.checkSequence)",
    ),
    (
        "idempotent_stale_epoch_is_invalid_producer_epoch",
        "KIP-98, KIP-588 (an older epoch is INVALID_PRODUCER_EPOCH in every Produce version, \
         ProducerAppendInfo.checkProducerEpoch; a newer epoch starts at sequence 0, checkSequence)",
    ),
    (
        "plain_retry_is_stored_again",
        "protocol guide, Produce: a batch without a producer id carries nothing to deduplicate by, \
         so a resend is appended again (UnifiedLog.analyzeAndValidateProducerState skips it)",
    ),
    (
        "huge_array_count_in_a_request_body_closes_the_connection",
        CLOSES_ON_UNPARSABLE,
    ),
    // rdkafka
    (
        "admin_client_creates_and_deletes_a_topic",
        "KIP-4 (CreateTopics, DeleteTopics): an existing name is TOPIC_ALREADY_EXISTS (36), a deleted topic \
         UNKNOWN_TOPIC_OR_PARTITION (3)",
    ),
    ("produce_and_consume_every_mapping_case_with_none", MAPPING_ROUND_TRIP),
    ("produce_and_consume_every_mapping_case_with_gzip", MAPPING_ROUND_TRIP),
    ("produce_and_consume_every_mapping_case_with_snappy", MAPPING_ROUND_TRIP),
    ("produce_and_consume_every_mapping_case_with_lz4", MAPPING_ROUND_TRIP),
    ("produce_and_consume_every_mapping_case_with_zstd", MAPPING_ROUND_TRIP),
    (
        "idempotent_producer_produces_and_reads_back",
        "KIP-98 (InitProducerId, then batches with producer id, epoch and sequences, written once each)",
    ),
    (
        "consumer_starting_at_latest_sees_only_new_records",
        "KIP-79: ListOffsets -1 (latest) is the high watermark (UnifiedLog.fetchOffsetByTimestamp)",
    ),
    (
        "fetch_watermarks_match_produced_count",
        "KIP-79 (ListOffsets -2 and -1); the log end moves one offset per record appended (LogValidator assigns \
         offsets record by record; UnifiedLog.append sets the log end to the last offset + 1)",
    ),
    (
        "rdkafka_metadata_for_all_topics",
        "protocol guide, Metadata (null topics: every topic; each partition's leader among the brokers \
         listed); KIP-4 (CreateTopics, DeleteTopics)",
    ),
    // group
    (
        "two_members_split_partitions_disjointly",
        "protocol guide, JoinGroup and SyncGroup (the leader's assignment is handed to each member); the range \
         assignor gives members disjoint partitions",
    ),
    (
        "leaving_member_hands_over_at_committed_offsets",
        "KIP-394 (MEMBER_ID_REQUIRED on JoinGroup v4+); a classic join completes once every known member has \
         rejoined (GroupMetadataManager.maybeCompleteJoinPhase, ClassicGroup.hasAllMembersJoined); the next \
         owner resumes at the committed offset (OffsetFetch)",
    ),
    ("restarted_consumer_resumes_at_committed_offsets", COMMITTED_OFFSETS),
    ("caught_up_commit_survives_a_consumer_restart", COMMITTED_OFFSETS),
    (
        "commit_of_zero_on_an_empty_partition_survives_records_arriving",
        COMMITTED_OFFSETS,
    ),
    (
        "offset_delete_removes_the_named_offsets_and_spares_subscribed_topics",
        "KIP-496 (OffsetDelete; a topic the group's members subscribe to is GROUP_SUBSCRIBED_TO_TOPIC, 86: \
         OffsetMetadataManager.deleteOffsets)",
    ),
    (
        "commit_of_minus_one_deletes_the_committed_offset",
        "KIP-320 (OffsetFetch answers the committed metadata and leader epoch: OffsetMetadataManager.fetchOffsets \
         returns OffsetAndMetadata's); with nothing committed, metadata \"\" and epoch -1 \
         (OffsetFetchResponse.NO_METADATA, RecordBatch.NO_PARTITION_LEADER_EPOCH)",
    ),
    (
        "offset_fetch_with_null_topics_lists_committed_partitions",
        "KIP-88 (OffsetFetch v2+ with null topics lists every partition the group committed: \
         GroupCoordinatorService.fetchAllOffsets)",
    ),
    (
        "group_id_longer_than_246_bytes_is_invalid",
        "Kafka sets no length limit on a group id below the protocol string's 32767 bytes: a 247-byte one commits \
         and joins like any other (KIP-394: a new member is asked for its member id)",
    ),
    (
        "describe_list_and_delete_groups",
        "KIP-229 (DeleteGroups); KIP-518 (ListGroups v4+ answers each group's state); protocol guide, \
         DescribeGroups",
    ),
    (
        "member_commits_while_a_rebalance_is_prepared_not_while_it_completes",
        "a current member's commit is taken while the group prepares a rebalance and refused \
         REBALANCE_IN_PROGRESS (27) between the join and the leader's SyncGroup (ClassicGroup.validateOffsetCommit; \
         GroupCoordinator.doCommitOffsets before it)",
    ),
    (
        "find_coordinator_for_transactions_is_refused",
        "KIP-98: FindCoordinator key type 1 names the transaction coordinator of a transactional id; a key type \
         Kafka does not define is INVALID_REQUEST (42) (KafkaApis.handleFindCoordinatorRequest, \
         CoordinatorType.forId)",
    ),
    // consumer_protocol
    (
        "consumer_protocol_two_members_split_a_topic_and_read_everything",
        KIP_848,
    ),
    (
        "consumer_protocol_new_member_resumes_after_the_members_commits",
        KIP_848,
    ),
    (
        "consumer_protocol_member_joining_and_leaving_while_producing_never_shares_a_partition",
        KIP_848,
    ),
    (
        "consumer_protocol_member_is_fenced_after_its_session_lapses",
        "KIP-848 (a member whose session lapses is removed: UNKNOWN_MEMBER_ID; an epoch ahead of the \
         coordinator's is FENCED_MEMBER_EPOCH; GroupMetadataManager.consumerGroupHeartbeat)",
    ),
    (
        "consumer_protocol_regex_subscription_is_assigned_the_matching_topics_only",
        "KIP-848 (SubscribedTopicRegex, resolved by the coordinator again as topics are created)",
    ),
    (
        "consumer_protocol_static_member_restarts_into_its_partitions",
        "KIP-848 (a static member leaves with epoch -2 and keeps its partitions for its instance id); KIP-345 \
         (static membership)",
    ),
    // hostile
    ("hostile_join_group_with_200000_protocols", ROBUSTNESS),
    (
        "hostile_join_group_with_a_32760_byte_client_id",
        "Kafka builds a member id as client.id-UUID (KIP-394 hands it back with MEMBER_ID_REQUIRED on v4+); \
         the answer must still carry it, or the connection close",
    ),
    (
        "hostile_produce_to_a_real_topic_and_a_32767_byte_unknown_one",
        ROBUSTNESS,
    ),
    (
        "hostile_retention_ms_beyond_what_iggy_counts_never_expires",
        "Kafka's retention.ms is a LONG of at least -1 (TopicConfig.RETENTION_MS_CONFIG, LogConfig's ConfigDef: \
         a value that is not a long is an InvalidConfigurationException, INVALID_CONFIG), and time retention \
         deletes a segment only once it is older than that (UnifiedLog.deleteRetentionMsBreachedSegments): \
         no record written is deleted; DescribeConfigs reports the value set",
    ),
    ("hostile_many_idle_connections", ROBUSTNESS),
    ("hostile_slow_senders_trickle_frames", ROBUSTNESS),
    (
        "hostile_connections_that_send_only_a_max_frame_length_prefix",
        ROBUSTNESS,
    ),
    (
        "hostile_pipelined_requests_whose_answers_are_not_read",
        "protocol guide, Network (answers in the order sent); otherwise no one answer is Kafka's",
    ),
    (
        "hostile_fetch_naming_one_partition_5000_times_waiting_i32_max",
        "Kafka's fetch data keeps one entry per partition (FetchRequest.fetchData builds a map keyed by \
         partition), so a partition is answered at most once",
    ),
    ("hostile_trailing_bytes_after_the_request_body", ROBUSTNESS),
    ("hostile_32767_byte_strings_in_every_echoed_field", ROBUSTNESS),
    ("hostile_zstd_batch_declaring_a_million_empty_records", ROBUSTNESS),
    ("hostile_near_max_frame_zstd_produces_on_two_connections", ROBUSTNESS),
    (
        "hostile_consumer_heartbeats_with_megabyte_ids_and_a_group_of_the_largest_members",
        "Kafka stores a member as one ConsumerGroupMemberMetadata record, which must fit max.message.bytes; past \
         it the append fails RECORD_TOO_LARGE and the heartbeat is answered an error \
         (CoordinatorOperationExceptionHelper.handleOperationException); group.consumer.max.size bounds the \
         group; ConsumerGroupDescribe answers every member",
    ),
    (
        "hostile_consumer_heartbeats_from_strangers_naming_patterns",
        "GroupMetadataManager.consumerGroupHeartbeat answers an unknown member id UNKNOWN_MEMBER_ID before it \
         updates the member's regular expressions (maybeUpdateRegularExpressions), so the group is unchanged",
    ),
    (
        "hostile_consumer_patterns_costly_to_match_against_many_topics",
        ROBUSTNESS,
    ),
    (
        "hostile_offset_delete_under_a_consumer_protocol_groups_feet",
        "OffsetDelete refuses GROUP_SUBSCRIBED_TO_TOPIC (86) for a topic the group is subscribed to \
         (GroupMetadataManager/OffsetMetadataManager.deleteOffsets, ConsumerGroup.isSubscribedToTopic)",
    ),
    // migration
    (
        "map_read_native_1_iggy_written_messages_read_as_kafka_records",
        IGGY_ONLY,
    ),
    ("map_read_order_1_gateway_headers_decide_how_a_message_reads", IGGY_ONLY),
    (
        "env_mark_1_env_version_1_envelopes_are_marked_and_read_by_version",
        IGGY_ONLY,
    ),
    (
        "map_read_malformed_1_undecodable_gateway_headers_are_served_natively",
        IGGY_ONLY,
    ),
    // group_admin
    (
        "describegroups_state_1_describegroups_members_1_a_group_through_its_states",
        "protocol guide, DescribeGroups; a classic group awaiting SyncGroup is CompletingRebalance with its \
         protocol chosen (GroupMetadataManager.completeClassicGroupJoin); a member's host is \
         \"/<client address>\" (ClientHost from RequestContext.clientAddress.toString()); a vacant group stays \
         Empty until the periodic cleanup (GroupCoordinatorShard.cleanupGroupMetadata)",
    ),
    (
        "describegroups_unknown_1_a_group_nobody_joined_is_dead",
        "DescribeGroups of an unknown group answers state Dead with error 0 (GroupMetadataManager.describeGroups \
         catches GroupIdNotFoundException, ClassicGroupState.DEAD)",
    ),
    (
        "listgroups_coordinated_1_listgroups_states_filter_1_lists_by_state",
        "KIP-518 (ListGroups v4+ answers each group's state and filters by state, case-insensitively)",
    ),
    // legacy
    (
        "legacy_offset_commit_v0_and_v1_share_one_store_with_every_offset_fetch_version",
        "protocol guide, OffsetCommit Request (Version: 0, 1) and OffsetFetch Request (Version: 0), served by \
         Kafka 3.9 and removed in 4.0 (KIP-896)",
    ),
    (
        "legacy_offset_commit_v1_checks_the_member_and_generation",
        "protocol guide, OffsetCommit Request (Version: 1): a commit of an unknown member is UNKNOWN_MEMBER_ID \
         (25), of a past generation ILLEGAL_GENERATION (22); served by Kafka 3.9, removed in 4.0 (KIP-896)",
    ),
    (
        "legacy_list_offsets_v0_answers_old_style_offsets",
        "ListOffsets v0 answers at most max_num_offsets offsets (UnifiedLog.legacyFetchOffsetsBefore); served \
         by Kafka 3.9, removed in 4.0 (KIP-896)",
    ),
    (
        "legacy_create_topics_v0_creates_and_v1_validates",
        "KIP-4 (CreateTopics v0: TOPIC_ALREADY_EXISTS, 36, for an existing name); KIP-108 (v1 validate_only \
         creates nothing, and v1 answers carry an error message); served by Kafka 3.9, removed in 4.0 (KIP-896)",
    ),
    (
        "legacy_delete_topics_v0_deletes_a_topic",
        "KIP-4 (DeleteTopics v0: a deleted topic is UNKNOWN_TOPIC_OR_PARTITION, 3); served by Kafka 3.9, removed \
         in 4.0 (KIP-896)",
    ),
    (
        "legacy_describe_configs_v0_says_which_values_are_defaults",
        "KIP-133 (DescribeConfigs v0: is_default per entry; null keys list every topic config, \
         ConfigHelper.describeConfigs); served by Kafka 3.9, removed in 4.0 (KIP-896)",
    ),
    // answer_bound
    (
        "answer_describe_groups_naming_one_400_kib_group_2500_times",
        "Kafka describes every mention of a group, each member with its metadata for the chosen protocol \
         (GroupMetadataManager.describeGroups, ClassicGroupMember.metadata)",
    ),
    (
        "answer_metadata_naming_one_100_partition_topic_4000_times",
        "Kafka answers the set of named topics, each once (KafkaApis.handleTopicMetadataRequest takes \
         metadataRequest.topics as a set)",
    ),
    (
        "answer_list_offsets_naming_one_partition_4000_times",
        "a partition named more than once in ListOffsets is INVALID_REQUEST (42) at each mention \
         (ListOffsetsRequest.duplicatePartitions, used by KafkaApis.handleListOffsetRequestV1AndAbove)",
    ),
    (
        "answer_offset_fetch_naming_one_partition_4000_times",
        "Kafka answers each mention of a partition in OffsetFetch (OffsetMetadataManager.fetchOffsets walks the \
         request's topics and partitions as sent)",
    ),
    (
        "answer_describe_configs_naming_one_topic_4000_times",
        "Kafka answers every mention of a resource in DescribeConfigs with the keys that mention asks for \
         (ConfigHelper.describeConfigs maps each resource of the request)",
    ),
    (
        "answer_delete_groups_naming_one_group_4000_times",
        "a group that does not exist is GROUP_ID_NOT_FOUND (69) (GroupMetadataManager.validateDeleteGroup); \
         whether a repeat is answered again is not established (DeleteGroupsResponse.json keys results by group \
         id in a collection that keeps duplicates), so once or once per mention passes",
    ),
    // group_amplification
    (
        "group_join_subscribing_to_millions_of_empty_topic_names",
        "protocol guide, JoinGroup and the consumer protocol's Subscription (ConsumerProtocolSubscription): each \
         name is within the protocol; any JoinGroup error or a closed connection passes",
    ),
    (
        "group_one_client_joining_12000_groups_leaves_room_for_others",
        "Kafka has no per-client limit on the groups one client joins (KIP-389's group.max.size bounds the members of \
         one group), so another client's join is not refused for them",
    ),
];

/// The authority of the case named `case`, if it has an entry.
pub fn of(case: &str) -> Option<&'static str> {
    AUTHORITIES.iter().find(|(name, _)| *name == case).map(|(_, a)| *a)
}

/// Whether `authority` holds an endpoint to something Kafka does.
pub fn has_kafka_counterpart(authority: &str) -> bool {
    !authority.starts_with(NO_KAFKA_COUNTERPART)
}

/// Every entry, for the tests that hold the table to the suite.
pub fn entries() -> &'static [(&'static str, &'static str)] {
    AUTHORITIES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::{self, Outcome};
    use crate::endpoint::Endpoint;
    use crate::profile::Profile;

    /// Whether `text` cites something a reader can look up: a KIP, a protocol-guide section, or a
    /// Java `Class.method`.
    fn cites(text: &str) -> bool {
        let class_method = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
            .any(|word| {
                word.split_once('.').is_some_and(|(class, method)| {
                    class.starts_with(|c: char| c.is_ascii_uppercase())
                        && method.starts_with(|c: char| c.is_ascii_lowercase())
                })
            });
        text.contains("KIP-") || text.contains("protocol guide") || class_method
    }

    #[test]
    fn every_endpoint_case_names_its_authority() {
        let missing: Vec<&str> = cases::all()
            .iter()
            .map(|c| c.name)
            .filter(|name| of(name).is_none())
            .collect();
        assert!(missing.is_empty(), "cases without an authority: {missing:?}");
        let all = cases::all();
        let unknown: Vec<&str> = entries()
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !all.iter().any(|c| c.name == *name))
            .collect();
        assert!(unknown.is_empty(), "authorities of no case: {unknown:?}");
        for (i, (name, _)) in entries().iter().enumerate() {
            assert!(
                !entries()[..i].iter().any(|(other, _)| other == name),
                "{name} has two entries"
            );
        }
    }

    #[test]
    fn every_kafka_authority_cites_a_kip_the_protocol_guide_or_kafka_code() {
        for (name, authority) in entries().iter().filter(|(_, a)| has_kafka_counterpart(a)) {
            assert!(cites(authority), "{name}'s authority cites nothing: {authority}");
        }
        assert!(cites("KIP-1") && cites("UnifiedLog.read") && !cites("Kafka does so. Really."));
    }

    /// A case said to have no Kafka counterpart must skip under the kafka profile before it
    /// touches the endpoint: nothing listens at the address it is given.
    #[tokio::test]
    async fn a_case_without_a_kafka_counterpart_skips_under_the_kafka_profile() {
        let endpoint = Endpoint {
            profile: Profile::Kafka,
            ..Endpoint::at("127.0.0.1:9")
        };
        for case in cases::all() {
            let Some(authority) = of(case.name).filter(|a| !has_kafka_counterpart(a)) else {
                continue;
            };
            match (case.run)(endpoint.clone()).await {
                Ok(Outcome::Skipped(_)) => {}
                other => panic!("{} ({authority}) did not skip: {other:?}", case.name),
            }
        }
    }
}
