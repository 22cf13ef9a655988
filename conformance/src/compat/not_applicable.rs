//! The librdkafka tests that do not apply to the gateway, each with the reason and the spec rule
//! or decision that makes it so. This is the one place the list lives; docs/compat.md mirrors it.
//! An entry here is still run when another entry of its test number is, but its outcome is
//! reported as not applicable; a test number all of whose broker entries are here is not run.

/// One test that does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotApplicable {
    /// The runner's entry name, `0103_transactions`.
    pub test: &'static str,
    /// Why, in one sentence.
    pub reason: &'static str,
    /// The spec rule or decision behind it (docs/spec/*.md, docs/decisions.md).
    pub source: &'static str,
}

/// The list, in test order.
pub const LIST: &[NotApplicable] = &[
    NotApplicable {
        test: "0011_produce_batch",
        reason: "its per-record error subtests set the topic config max.message.bytes through \
                 IncrementalAlterConfigs, which the gateway does not advertise, and expect KIP-467 \
                 per-record errors for the records above it; its other subtests pass",
        source: "TOPIC-CONFIG-2, PROTO-VERSION-1",
    },
    NotApplicable {
        test: "0052_msg_timestamps",
        reason: "creates topics with message.timestamp.type=LogAppendTime and checks broker-assigned \
                 timestamps; the gateway refuses LogAppendTime and always answers CreateTime batches",
        source: "TOPIC-CONFIG-2, FETCH-BATCH-1",
    },
    NotApplicable {
        test: "0054_offset_time",
        reason: "looks offsets up by record (CreateTime) timestamps set in 2001; the gateway looks \
                 them up by Iggy's append time, a recorded deviation",
        source: "LISTOFFSETS-TIMESTAMP-1",
    },
    NotApplicable {
        test: "0077_compaction",
        reason: "expects the broker to have compacted overwritten values away; the gateway accepts \
                 cleanup.policy=compact but never compacts (every record stays at its offset)",
        source: "TOPIC-COMPACT-1; open question 6 (docs/spec/open-questions.md)",
    },
    NotApplicable {
        test: "0081_admin",
        reason: "exercises admin APIs the gateway does not advertise (AlterConfigs, \
                 IncrementalAlterConfigs, DeleteRecords, ACLs, ...)",
        source: "PROTO-VERSION-1",
    },
    NotApplicable {
        test: "0092_mixed_msgver",
        reason: "produces MessageSet v0/v1 (magic 0 and 1); the gateway stores only magic-2 batches",
        source: "BATCH-MAGIC-1, PROTO-VERSION-2",
    },
    NotApplicable {
        test: "0098_consumer_txn",
        reason: "transactions (and a Java helper producer); transactions are out of scope",
        source: "PID-TXN-1",
    },
    NotApplicable {
        test: "0099_commit_metadata",
        reason: "commits offset 42 with metadata on an empty partition and reads the metadata back; \
                 the gateway drops commit metadata and answers a commit above the high watermark \
                 OFFSET_OUT_OF_RANGE, both recorded deviations (an Iggy consumer offset holds one \
                 number, up to the partition's last offset)",
        source: "CO-METADATA-1, CO-ENCODE-1",
    },
    NotApplicable {
        test: "0103_transactions",
        reason: "transactional producer; transactions are out of scope",
        source: "PID-TXN-1, GROUP-TXN-COORDINATOR-1",
    },
    NotApplicable {
        test: "0107_topic_recreate",
        reason: "recreates a topic with fewer partitions while producing; librdkafka tells a \
                 recreated topic by its topic id, which the gateway does not assign, so messages \
                 queued for the removed partitions are never delivered",
        source: "PROTO-VERSION-1 (topic ids not assigned), METADATA-2",
    },
    NotApplicable {
        test: "0109_auto_create_topics",
        reason: "its consumer-side auto-creation subtests pass, but its last four create ACLs with \
                 kafka-acls.sh from a Kafka installation (KAFKA_PATH); the gateway has no ACLs",
        source: "AUTHZ-MAP-1",
    },
    NotApplicable {
        test: "0115_producer_auth",
        reason: "sets Kafka ACLs with kafka-acls.sh from a Kafka installation; the gateway has no ACLs, \
                 authorization is Iggy's permissions behind SASL",
        source: "AUTHZ-MAP-1",
    },
    NotApplicable {
        test: "0119_consumer_auth",
        reason: "sets Kafka ACLs with kafka-acls.sh from a Kafka installation; the gateway has no ACLs, \
                 authorization is Iggy's permissions behind SASL",
        source: "AUTHZ-MAP-1",
    },
    NotApplicable {
        test: "0129_fetch_aborted_msgs",
        reason: "produces and aborts a transaction to check aborted messages are skipped; transactions \
                 are out of scope",
        source: "PID-TXN-1",
    },
    NotApplicable {
        test: "0130_store_offsets",
        reason: "stores offsets with metadata and reads the metadata back; the gateway drops commit \
                 metadata, a recorded deviation",
        source: "CO-METADATA-1",
    },
    NotApplicable {
        test: "0140_commit_metadata",
        reason: "commits offset 10 with metadata on an empty partition and reads the metadata back; \
                 the gateway drops commit metadata and answers a commit above the high watermark \
                 OFFSET_OUT_OF_RANGE, both recorded deviations",
        source: "CO-METADATA-1, CO-ENCODE-1",
    },
];

/// The entry for `test`, when it does not apply.
pub fn lookup(test: &str) -> Option<&'static NotApplicable> {
    LIST.iter().find(|n| n.test == test)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_names_a_test_a_reason_and_a_source_once() {
        let mut names: Vec<_> = LIST.iter().map(|n| n.test).collect();
        let len = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), len, "a test is listed twice");
        for n in LIST {
            assert!(
                n.test.get(..4).is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit())),
                "{}",
                n.test
            );
            assert!(!n.reason.is_empty() && !n.source.is_empty(), "{}", n.test);
        }
    }
}
