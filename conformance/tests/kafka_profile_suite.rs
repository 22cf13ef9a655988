//! The client-level cases (librdkafka's and the consumer-group cases) under the `kafka` profile
//! against librdkafka's in-process mock cluster: a Kafka implementation nobody here wrote. Every
//! expectation that is not a declared deviation (docs/spec/deviations.md) is checked against it.
//!
//! One test per case, each with a fresh mock cluster. A case either passes, or ends as
//! [`MOCK_LIMITATIONS`] says it must: skipped because the mock does not implement an API the
//! case needs, or failed where the mock is known to answer differently from Kafka. The list is
//! checked both ways: an unlisted skip or failure fails the test, and so does a listed
//! limitation that no longer shows (the list must stay true).

use kafka_iggy_conformance::cases::{self, unadvertised, Outcome};
use kafka_iggy_conformance::endpoint::{Endpoint, TopicCreator};
use kafka_iggy_conformance::profile::Profile;
use kafka_protocol::messages::ApiKey;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use std::sync::Arc;

/// How a case meets a limitation of the mock cluster.
enum Limitation {
    /// The mock does not implement the API, so it leaves it out of ApiVersions and the case
    /// skips with [`unadvertised`] for it.
    Unserved(ApiKey),
    /// The mock answers differently from Kafka; the case fails with a message containing this.
    Differs(&'static str),
}

/// A case the mock cannot serve as Kafka would, and the librdkafka source fact behind it
/// (librdkafka 2.12.1, `src/rdkafka_mock*.c`, as vendored by rdkafka-sys 4.10.0).
struct MockLimitation {
    case: &'static str,
    limitation: Limitation,
    fact: &'static str,
}

/// Every known limitation of the mock cluster, the one place they are listed.
const MOCK_LIMITATIONS: &[MockLimitation] = &[
    MockLimitation {
        case: "admin_client_creates_and_deletes_a_topic",
        limitation: Limitation::Unserved(ApiKey::CreateTopics),
        fact: "rdkafka_mock_handlers.c: rd_kafka_mock_api_handlers[] has no CreateTopics (19) or \
               DeleteTopics (20) entry, so the mock's ApiVersions omits them (its handler lists \
               only keys with a callback) and an unserved request closes the connection \
               (rdkafka_mock.c, \"unsupported ...Request\"); topics are made with \
               rd_kafka_mock_topic_create",
    },
    MockLimitation {
        case: "describe_list_and_delete_groups",
        limitation: Limitation::Unserved(ApiKey::ListGroups),
        fact: "rdkafka_mock_handlers.c: rd_kafka_mock_api_handlers[] has no ListGroups (16), \
               DescribeGroups (15) or DeleteGroups (42) entry",
    },
    MockLimitation {
        case: "offset_delete_removes_the_named_offsets_and_spares_subscribed_topics",
        limitation: Limitation::Unserved(ApiKey::OffsetDelete),
        fact: "rdkafka_mock_handlers.c: rd_kafka_mock_api_handlers[] has no OffsetDelete (47) \
               entry",
    },
    MockLimitation {
        case: "commit_of_minus_one_deletes_the_committed_offset",
        limitation: Limitation::Differs(
            "OffsetFetch before any commit: (offset, leader epoch, metadata, error) (-1, 0, None, 0)",
        ),
        fact: "rdkafka_mock_handlers.c, rd_kafka_mock_handle_OffsetFetch: for a partition with \
               nothing committed it writes metadata NULL and, as CommittedLeaderEpoch, the \
               partition's current leader epoch (mpart->leader_epoch); Kafka answers metadata \
               \"\" and leader epoch -1 (OffsetFetchResponse.NO_METADATA, no committed epoch)",
    },
    MockLimitation {
        case: "offset_fetch_with_null_topics_lists_committed_partitions",
        limitation: Limitation::Differs("Array length is negative (-1)"),
        fact: "rdkafka_mock_handlers.c, rd_kafka_mock_handle_OffsetFetch: a null topic list (v2+, \
               'every committed partition') is echoed back as a topic count of -1, which the \
               response schema does not allow; Kafka lists every partition the group committed",
    },
    MockLimitation {
        case: "group_id_longer_than_246_bytes_is_invalid",
        limitation: Limitation::Differs("JoinGroup with a 247-byte group id: error 0, expected 79"),
        fact: "rdkafka_mock_cgrp.c, rd_kafka_mock_cgrp_classic_member_add: a JoinGroup without a \
               member id is given a generated one and joins at once; Kafka (KIP-394, JoinGroup \
               v4+) answers MEMBER_ID_REQUIRED (79) with the id to rejoin with",
    },
    MockLimitation {
        case: "member_commits_while_a_rebalance_is_prepared_not_while_it_completes",
        limitation: Limitation::Differs("A's first JoinGroup: error 0, expected MEMBER_ID_REQUIRED (79)"),
        fact: "rdkafka_mock_cgrp.c, rd_kafka_mock_cgrp_classic_member_add: no KIP-394 \
               MEMBER_ID_REQUIRED round trip (see group_id_longer_than_246_bytes_is_invalid)",
    },
    MockLimitation {
        case: "leaving_member_hands_over_at_committed_offsets",
        limitation: Limitation::Differs("consumer B: no assignment with a partition within"),
        fact: "rdkafka_mock_cgrp.c: rd_kafka_mock_cgrp_classic_rebalance arms the join phase for \
               the group's session timeout less 1 s (consumer A's 45 s here), and only \
               rd_kafka_mock_cgrp_classic_fsm_timeout ends it, even once every member has \
               rejoined; Kafka completes the join as soon as all known members have rejoined. \
               Consumer B's JoinGroup times out first (librdkafka: max.poll.interval.ms + 3 s)",
    },
    MockLimitation {
        case: "find_coordinator_for_transactions_is_refused",
        limitation: Limitation::Differs("FindCoordinator with key type 7: error 0, expected INVALID_REQUEST (42)"),
        fact: "rdkafka_mock_handlers.c, rd_kafka_mock_handle_FindCoordinator passes any KeyType to \
               rd_kafka_mock_cluster_get_coord (rdkafka_mock.c), which hashes the key to a broker \
               whatever the type; Kafka refuses a key type it does not define with \
               INVALID_REQUEST (42). The transaction-coordinator part before it is checked",
    },
];

fn limitation_of(case: &str) -> Option<&'static MockLimitation> {
    MOCK_LIMITATIONS.iter().find(|l| l.case == case)
}

/// The mock cluster, shared with the topic creator that cases call from tokio's blocking pool.
struct SharedMock(MockCluster<'static, DefaultProducerContext>);

// SAFETY: the handle is a pointer to librdkafka's mock cluster, whose every operation (topic
// creation here, destruction on drop) is a request on the cluster's own op queue
// (rd_kafka_op_req(mcluster->ops, ..) in rdkafka_mock.c), served by the mock's thread; no
// state is touched from the calling thread, so any thread may make the calls.
unsafe impl Send for SharedMock {}
unsafe impl Sync for SharedMock {}

/// Runs case `name` under the kafka profile against a fresh one-broker mock cluster and holds
/// its outcome to [`MOCK_LIMITATIONS`].
async fn run_against_mock(name: &str) {
    let mock = Arc::new(SharedMock(MockCluster::new(1).expect("the mock cluster starts")));
    let bootstrap = mock.0.bootstrap_servers();
    let creator = {
        let mock = mock.clone();
        TopicCreator::new(move |topic, partitions| {
            mock.0
                .create_topic(topic, partitions, 1)
                .map_err(|e| anyhow::anyhow!("the mock cluster's create_topic {topic}: {e}"))
        })
    };
    let endpoint = Endpoint {
        profile: Profile::Kafka,
        topic_creator: Some(creator),
        ..Endpoint::at(bootstrap)
    };
    let case = cases::all()
        .into_iter()
        .find(|c| c.name.rsplit("::").next() == Some(name))
        .unwrap_or_else(|| panic!("no case {name}"));
    let outcome = (case.run)(endpoint).await;
    let listed = limitation_of(name);
    match (outcome, listed.map(|l| &l.limitation)) {
        (Ok(Outcome::Passed), None) => {}
        (Ok(Outcome::Passed), Some(_)) => panic!(
            "{name} passed against the mock cluster, but MOCK_LIMITATIONS says it cannot ({}): \
             remove the stale entry",
            listed.map(|l| l.fact).unwrap_or_default()
        ),
        (Ok(Outcome::Skipped(why)), Some(Limitation::Unserved(api))) => assert_eq!(
            why,
            unadvertised(*api),
            "{name} skipped for another reason than the listed mock limitation"
        ),
        // A case with no Kafka counterpart says so under the kafka profile, whatever the endpoint.
        (Ok(Outcome::Skipped(why)), None) if why.starts_with("gateway-only: ") => {}
        (Ok(Outcome::Skipped(why)), _) => {
            panic!("{name} skipped against the mock cluster for a reason MOCK_LIMITATIONS does not list: {why}")
        }
        (Err(e), Some(Limitation::Differs(text))) => {
            let message = format!("{e:#}");
            assert!(
                message.contains(text),
                "{name} failed against the mock cluster, but not as MOCK_LIMITATIONS lists \
                 (expected {text:?}): {message}"
            );
        }
        (Err(e), _) => panic!(
            "{name} [{}; deviations {}] failed against the mock cluster under the kafka profile: {e:#}",
            case.rules.join(", "),
            case.deviations.join(", ")
        ),
    }
    // The cluster goes when the last handle does; the creator may still hold one.
    drop(mock);
}

/// `kafka_suite!(module; case_a, case_b)`: one test per case of `cases::module` against the
/// mock cluster, plus a test that every case of the module has one.
macro_rules! kafka_suite {
    ($module:ident; $($name:ident),+ $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::run_against_mock(stringify!($name)).await;
                }
            )+

            #[test]
            fn every_case_has_a_test() {
                let listed = [$(stringify!($name)),+];
                for case in kafka_iggy_conformance::cases::$module::cases() {
                    let short = case.name.rsplit("::").next().unwrap_or(case.name);
                    assert!(listed.contains(&short), "case {} has no test", case.name);
                }
            }
        }
    };
}

kafka_suite!(
    rdkafka_cases;
    admin_client_creates_and_deletes_a_topic,
    produce_and_consume_every_mapping_case_with_none,
    produce_and_consume_every_mapping_case_with_gzip,
    produce_and_consume_every_mapping_case_with_snappy,
    produce_and_consume_every_mapping_case_with_lz4,
    produce_and_consume_every_mapping_case_with_zstd,
    idempotent_producer_produces_and_reads_back,
    consumer_starting_at_latest_sees_only_new_records,
    fetch_watermarks_match_produced_count,
    rdkafka_metadata_for_all_topics,
);

kafka_suite!(
    group_cases;
    two_members_split_partitions_disjointly,
    leaving_member_hands_over_at_committed_offsets,
    restarted_consumer_resumes_at_committed_offsets,
    caught_up_commit_survives_a_consumer_restart,
    commit_of_zero_on_an_empty_partition_survives_records_arriving,
    commit_of_minus_one_deletes_the_committed_offset,
    offset_fetch_with_null_topics_lists_committed_partitions,
    group_id_longer_than_246_bytes_is_invalid,
    describe_list_and_delete_groups,
    member_commits_while_a_rebalance_is_prepared_not_while_it_completes,
    find_coordinator_for_transactions_is_refused,
    offset_delete_removes_the_named_offsets_and_spares_subscribed_topics,
);

/// The raw-wire cases that librdkafka's mock cluster can answer as Kafka would. The others
/// are not run here: they exercise wire-level behaviour the mock does not reproduce (ApiVersions
/// v3, CRC checks, acks=0 silence, long-poll, timestamp lookups, duplicate detection, several
/// batches per Fetch), so against the mock they would test the mock; their Kafka expectations
/// are for a run against a real Kafka broker, which this suite does not start.
mod wire_cases_on_the_mock {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn produce_then_fetch_round_trips_every_mapping_case() {
        super::run_against_mock("produce_then_fetch_round_trips_every_mapping_case").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fetch_past_the_high_watermark_is_offset_out_of_range() {
        super::run_against_mock("fetch_past_the_high_watermark_is_offset_out_of_range").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fetch_returns_the_first_record_whole_above_max_bytes() {
        super::run_against_mock("fetch_returns_the_first_record_whole_above_max_bytes").await;
    }
}

/// Every limitation names a case of this suite, once.
#[test]
fn every_mock_limitation_names_one_case_of_the_suite() {
    let names: Vec<&str> = cases::rdkafka_cases::cases()
        .into_iter()
        .chain(cases::group_cases::cases())
        .chain(cases::wire_cases::cases())
        .map(|c| c.name.rsplit("::").next().unwrap_or(c.name))
        .collect();
    for (i, l) in MOCK_LIMITATIONS.iter().enumerate() {
        assert!(
            names.contains(&l.case),
            "MOCK_LIMITATIONS names {}, not a case of this suite",
            l.case
        );
        assert!(
            MOCK_LIMITATIONS[..i].iter().all(|m| m.case != l.case),
            "MOCK_LIMITATIONS lists {} twice",
            l.case
        );
        assert!(!l.fact.is_empty(), "{}: a limitation needs its source fact", l.case);
    }
}

/// The IDs that head an entry of docs/spec/deviations.md (`## RULE-ID — title`).
fn deviations_md_ids() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec/deviations.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|heading| heading.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Every ID a case declares under `deviates: [..]` has an entry in docs/spec/deviations.md,
/// and is a rule the spec defines (`### RULE-ID` in some docs/spec file).
#[test]
fn every_declared_deviation_is_listed_in_deviations_md() {
    let listed = deviations_md_ids();
    let spec_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/spec");
    let mut defined = Vec::new();
    for entry in std::fs::read_dir(spec_dir).expect("docs/spec") {
        let path = entry.expect("a docs/spec entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).expect("a spec file");
            defined.extend(
                text.lines()
                    .filter_map(|l| l.strip_prefix("### "))
                    .filter_map(|h| h.split_whitespace().next())
                    .map(str::to_string),
            );
        }
    }
    let mut declared = 0;
    for case in cases::all() {
        for id in case.deviations {
            declared += 1;
            assert!(
                listed.iter().any(|l| l == id),
                "{} declares the deviation {id}, which docs/spec/deviations.md does not list",
                case.name
            );
        }
    }
    assert!(
        declared > 0,
        "no case declares a deviation: the check would pass vacuously"
    );
    for id in &listed {
        assert!(
            defined.contains(id),
            "docs/spec/deviations.md lists {id}, which no docs/spec file defines as a rule"
        );
    }
}
