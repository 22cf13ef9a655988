//! librdkafka's mock cluster as a peer: one case at a time, in this process, against a fresh
//! one-broker cluster. The mock has no CreateTopics, so cases make topics through its own
//! `create_topic` (the endpoint's topic creator), as conformance/tests/kafka_profile_suite.rs
//! does. The runner starts one `conformance-peers mock-case` process per case, so a case that
//! hangs is killed alone.

use crate::cases::{self, Outcome};
use crate::endpoint::{Endpoint, TopicCreator};
use crate::profile::Profile;
use crate::results::{RunResults, Status};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use std::sync::Arc;
use std::time::Instant;

/// The mock cluster, shared with the topic creator that cases call from the blocking pool.
struct SharedMock(MockCluster<'static, DefaultProducerContext>);

// SAFETY: every call on the handle (topic creation, destruction) is posted to the mock
// cluster's own op queue and served on its own thread (rd_kafka_op_req in rdkafka_mock.c), so
// the calling thread touches no shared state.
unsafe impl Send for SharedMock {}
unsafe impl Sync for SharedMock {}

/// Runs the endpoint case named `name` under the kafka profile against a fresh mock cluster.
pub async fn run_case(name: &str) -> anyhow::Result<RunResults> {
    let case = cases::all()
        .into_iter()
        .find(|c| c.name == name)
        .ok_or_else(|| anyhow::anyhow!("no endpoint case {name}"))?;
    let mock = Arc::new(SharedMock(MockCluster::new(1)?));
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
        ..Endpoint::at(bootstrap.clone())
    };
    let info = case.info();
    let started = Instant::now();
    let outcome = (case.run)(endpoint).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status, reason) = match outcome {
        Ok(Outcome::Passed) => (Status::Passed, None),
        Ok(Outcome::Skipped(why)) => (Status::Skipped, Some(why)),
        Err(e) => (Status::Failed, Some(format!("{e:#}"))),
    };
    drop(mock);
    Ok(RunResults {
        target: "mock".into(),
        endpoint: bootstrap,
        profile: Profile::Kafka.as_str().into(),
        cases: vec![info.result(status, duration_ms, reason)],
    })
}
