//! The gateway's Prometheus metrics (docs/operating.md): one process-wide set, recorded where the
//! request loop, the backend decorator, the error map and the limits already are, and encoded
//! in the text exposition format for the metrics listener.
//!
//! Process-wide rather than per [`crate::gateway::Gateway`]: a limit is enforced deep in code
//! that holds no gateway, and a process runs one gateway in production. Tests and simulations
//! that run several gateways in one process see their sums.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

/// Every metric name starts with this (and `_`).
pub const PREFIX: &str = "kafka_iggy_gateway";

/// Label of a request whose API key is no Kafka API, or whose version the gateway does not
/// serve: a client cannot grow the label set past the APIs and versions the gateway knows.
const UNKNOWN: &str = "unknown";

/// The label of a frame that is a bare SASL PLAIN token after SaslHandshake v0, not a request.
pub const RAW_SASL_TOKEN: &str = "SaslRawToken";

/// API keys and versions the per-request table holds slots for; Kafka's keys and versions stay
/// well below these.
const API_KEY_SLOTS: usize = 128;
const VERSION_SLOTS: usize = 32;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiVersionLabels {
    api: &'static str,
    version: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    api: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabels {
    rule: &'static str,
}

/// The metrics of one API: created on its first request, then reached without a lock.
struct ApiSlot {
    name: &'static str,
    latency: OnceLock<Histogram>,
    failures: OnceLock<Counter>,
    versions: [OnceLock<Counter>; VERSION_SLOTS],
    /// Versions the gateway does not serve, under one label.
    unknown_version: OnceLock<Counter>,
}

/// Every metric the gateway exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<ApiVersionLabels, Counter>,
    request_duration: Family<ApiLabels, Histogram>,
    request_failures: Family<ApiLabels, Counter>,
    api_slots: Vec<ApiSlot>,
    unknown_slot: ApiSlot,
    raw_sasl_slot: ApiSlot,
    errors: Family<CodeLabels, Counter>,
    received_bytes: Counter,
    sent_bytes: Counter,
    produced_records: Counter,
    fetched_records: Counter,
    open_connections: Gauge,
    groups: Gauge,
    group_members: Gauge,
    decompression_refusals: Counter,
    backend_duration: Family<OperationLabels, Histogram>,
    backend_errors: Family<OperationLabels, Counter>,
    limits_hit: Family<RuleLabels, Counter>,
    idempotent_duplicates: Counter,
    producer_log_reads: Counter,
    producer_log_read_messages: Counter,
    producer_log_read_bytes: Counter,
    producer_states: Gauge,
    compacted_topics: Gauge,
    compacted_topic_messages: Gauge,
    peer_probe_rounds: Counter,
}

/// Request and backend latencies from 100 µs to about 52 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// Version labels "0".."31" without formatting on the request path.
static VERSION_NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    (0..VERSION_SLOTS)
        .map(|v| &*Box::leak(v.to_string().into_boxed_str()))
        .collect()
});

impl ApiSlot {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            latency: OnceLock::new(),
            failures: OnceLock::new(),
            versions: std::array::from_fn(|_| OnceLock::new()),
            unknown_version: OnceLock::new(),
        }
    }
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let requests = Family::<ApiVersionLabels, Counter>::default();
        registry.register(
            "requests",
            "Kafka requests answered or refused, by API and version",
            requests.clone(),
        );
        let request_duration = Family::<ApiLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register_with_unit(
            "request_duration",
            "Time from a request's last byte read until its response is ready to write, by API",
            Unit::Seconds,
            request_duration.clone(),
        );
        let request_failures = Family::<ApiLabels, Counter>::default();
        registry.register(
            "request_failures",
            "Requests that closed their connection instead of being answered (malformed, unsupported version, not authenticated), by API",
            request_failures.clone(),
        );
        let errors = Family::<CodeLabels, Counter>::default();
        registry.register(
            "errors",
            "Kafka error codes the error map gave backend and decode errors, by code name",
            errors.clone(),
        );
        let received_bytes = Counter::default();
        registry.register_with_unit(
            "received",
            "Bytes of request frames read, size prefixes included",
            Unit::Bytes,
            received_bytes.clone(),
        );
        let sent_bytes = Counter::default();
        registry.register_with_unit(
            "sent",
            "Bytes of response frames written, size prefixes included",
            Unit::Bytes,
            sent_bytes.clone(),
        );
        let produced_records = Counter::default();
        registry.register("produced_records", "Records appended to Iggy", produced_records.clone());
        let fetched_records = Counter::default();
        registry.register("fetched_records", "Records read from Iggy", fetched_records.clone());
        let open_connections = Gauge::default();
        registry.register(
            "open_connections",
            "Kafka client connections open now",
            open_connections.clone(),
        );
        let groups = Gauge::default();
        registry.register("groups", "Consumer groups this gateway coordinates", groups.clone());
        let group_members = Gauge::default();
        registry.register(
            "group_members",
            "Joined and pending members over every group this gateway coordinates",
            group_members.clone(),
        );
        let decompression_refusals = Counter::default();
        registry.register(
            "decompression_refusals",
            "Record batches refused because they decompress past the request's budget (BATCH-BUDGET-1)",
            decompression_refusals.clone(),
        );
        let backend_duration =
            Family::<OperationLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register_with_unit(
            "backend_call_duration",
            "Time of one backend (Iggy) call, by operation",
            Unit::Seconds,
            backend_duration.clone(),
        );
        let backend_errors = Family::<OperationLabels, Counter>::default();
        registry.register(
            "backend_errors",
            "Backend (Iggy) calls that failed, by operation",
            backend_errors.clone(),
        );
        let limits_hit = Family::<RuleLabels, Counter>::default();
        registry.register(
            "limits_hit",
            "Times a limit refused, closed, clamped or delayed something, by LIMIT-* rule ID (docs/spec/limits.md)",
            limits_hit.clone(),
        );
        let idempotent_duplicates = Counter::default();
        registry.register(
            "idempotent_duplicates",
            "Idempotent batches found already written and answered with their first offset, not written again (PRODUCER-DUP-1)",
            idempotent_duplicates.clone(),
        );
        let producer_log_reads = Counter::default();
        registry.register(
            "producer_log_reads",
            "Reads of a partition's log to bring its producer state up to date (PRODUCER-STATE-REBUILD-1, PRODUCER-UNKNOWN-1)",
            producer_log_reads.clone(),
        );
        let producer_log_read_messages = Counter::default();
        registry.register(
            "producer_log_read_messages",
            "Messages those reads went over",
            producer_log_read_messages.clone(),
        );
        let producer_log_read_bytes = Counter::default();
        registry.register_with_unit(
            "producer_log_read",
            "Payload and header bytes those reads went over",
            Unit::Bytes,
            producer_log_read_bytes.clone(),
        );
        let producer_states = Gauge::default();
        registry.register(
            "producer_states",
            "Producer entries (one per producer and partition) this gateway holds (LIMIT-PRODUCERS-1)",
            producer_states.clone(),
        );
        let compacted_topics = Gauge::default();
        registry.register(
            "compacted_topics",
            "Compacted topics this gateway created, altered or described since it started, that still exist (TOPIC-COMPACT-1)",
            compacted_topics.clone(),
        );
        let compacted_topic_messages = Gauge::default();
        registry.register(
            "compacted_topic_messages",
            "Messages those compacted topics hold: never compacted here, so it only grows but by retention or deletion (TOPIC-COMPACT-1)",
            compacted_topic_messages.clone(),
        );
        let peer_probe_rounds = Counter::default();
        registry.register(
            "peer_probe_rounds",
            "Rounds of probes of the peer gateways run (GROUP-COORDINATOR-2); a peer's standing changes are logged",
            peer_probe_rounds.clone(),
        );
        let api_slots = (0..API_KEY_SLOTS as i16)
            .map(|key| {
                let name = kafka_protocol::messages::ApiKey::try_from(key)
                    .map_or(UNKNOWN, |k| &*Box::leak(format!("{k:?}").into_boxed_str()));
                ApiSlot::new(name)
            })
            .collect();
        Self {
            registry,
            requests,
            request_duration,
            request_failures,
            api_slots,
            unknown_slot: ApiSlot::new(UNKNOWN),
            raw_sasl_slot: ApiSlot::new(RAW_SASL_TOKEN),
            errors,
            received_bytes,
            sent_bytes,
            produced_records,
            fetched_records,
            open_connections,
            groups,
            group_members,
            decompression_refusals,
            backend_duration,
            backend_errors,
            limits_hit,
            idempotent_duplicates,
            producer_log_reads,
            producer_log_read_messages,
            producer_log_read_bytes,
            producer_states,
            compacted_topics,
            compacted_topic_messages,
            peer_probe_rounds,
        }
    }

    /// The slot of a request frame's API: `None` for a raw SASL token.
    fn slot(&self, api: Option<i16>) -> &ApiSlot {
        match api {
            None => &self.raw_sasl_slot,
            Some(key) => usize::try_from(key)
                .ok()
                .and_then(|k| self.api_slots.get(k))
                .filter(|s| s.name != UNKNOWN)
                .unwrap_or(&self.unknown_slot),
        }
    }

    /// Records one request frame of `received_bytes` (size prefix included) that took
    /// `elapsed` to handle; `failed`: it closed the connection instead of being answered.
    pub fn record_request(&self, labels: &RequestLabels, received_bytes: usize, elapsed: Duration, failed: bool) {
        self.received_bytes.inc_by(received_bytes as u64);
        let slot = self.slot(labels.api);
        let version_slot = labels
            .version
            .and_then(|v| usize::try_from(v).ok())
            .filter(|v| *v < VERSION_SLOTS && slot.name != UNKNOWN);
        let counter = match version_slot {
            Some(v) => slot.versions[v].get_or_init(|| {
                self.requests.get_or_create_owned(&ApiVersionLabels {
                    api: slot.name,
                    version: VERSION_NAMES[v],
                })
            }),
            None => slot.unknown_version.get_or_init(|| {
                self.requests.get_or_create_owned(&ApiVersionLabels {
                    api: slot.name,
                    version: UNKNOWN,
                })
            }),
        };
        counter.inc();
        slot.latency
            .get_or_init(|| self.request_duration.get_or_create_owned(&ApiLabels { api: slot.name }))
            .observe(elapsed.as_secs_f64());
        if failed {
            slot.failures
                .get_or_init(|| self.request_failures.get_or_create_owned(&ApiLabels { api: slot.name }))
                .inc();
        }
    }

    pub fn add_sent_bytes(&self, bytes: usize) {
        self.sent_bytes.inc_by(bytes as u64);
    }

    pub fn add_produced_records(&self, records: usize) {
        self.produced_records.inc_by(records as u64);
    }

    pub fn add_fetched_records(&self, records: usize) {
        self.fetched_records.inc_by(records as u64);
    }

    /// One Kafka error code given out; `0` (NONE) is not an error and is not counted.
    pub fn record_error_code(&self, code: i16) {
        if code == 0 {
            return;
        }
        let name = kafka_protocol::error::ResponseError::try_from_code(code)
            .map_or_else(|| format!("code_{code}"), |e| format!("{e:?}"));
        self.errors.get_or_create(&CodeLabels { code: name }).inc();
    }

    pub fn record_decompression_refusal(&self) {
        self.decompression_refusals.inc();
    }

    /// One backend call of `operation` that took `elapsed`, and whether it failed.
    pub fn record_backend_call(&self, operation: &'static str, elapsed: Duration, failed: bool) {
        let labels = OperationLabels { operation };
        self.backend_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if failed {
            self.backend_errors.get_or_create(&labels).inc();
        }
    }

    /// A limit was hit: `rule` is its LIMIT-* rule ID.
    pub fn limit_hit(&self, rule: &'static str) {
        self.limits_hit.get_or_create(&RuleLabels { rule }).inc();
    }

    /// PRODUCER-DUP-1: an idempotent batch answered from the state, not written again.
    pub fn idempotent_duplicate(&self) {
        self.idempotent_duplicates.inc();
    }

    /// A read of a partition's log into its producer state, over `messages` stored messages
    /// holding `bytes` of payload and headers.
    pub fn producer_log_read(&self, messages: u64, bytes: u64) {
        self.producer_log_reads.inc();
        self.producer_log_read_messages.inc_by(messages);
        self.producer_log_read_bytes.inc_by(bytes);
    }

    /// The producer-state gauge, set at each scrape from the table's own count.
    pub fn set_producer_states(&self, entries: usize) {
        self.producer_states.set(entries as i64);
    }

    /// The compacted-topic gauges, set at each scrape from the backend's watermarks.
    pub fn set_compacted(&self, topics: u64, messages: u64) {
        self.compacted_topics.set(i64::try_from(topics).unwrap_or(i64::MAX));
        self.compacted_topic_messages
            .set(i64::try_from(messages).unwrap_or(i64::MAX));
    }

    /// One round of peer probes ran (GROUP-COORDINATOR-2).
    pub fn peer_probe_round(&self) {
        self.peer_probe_rounds.inc();
    }

    /// A connection opened; the returned guard counts it closed when dropped.
    pub fn connection_opened(&'static self) -> OpenConnection {
        self.open_connections.inc();
        OpenConnection(self)
    }

    /// The group gauges, set at each scrape from the coordinator's own counts.
    pub fn set_groups(&self, groups: usize, members: usize) {
        self.groups.set(groups as i64);
        self.group_members.set(members as i64);
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// What the request loop knows of a frame before handling it: read from the header's first
/// bytes, without decoding the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLabels {
    /// The raw API key; `None` for a bare SASL token, which has no header.
    pub api: Option<i16>,
    /// The version, when the gateway serves it for this API.
    pub version: Option<i16>,
    pub correlation_id: i32,
}

impl RequestLabels {
    /// `raw_token`: the connection expects a bare SASL PLAIN token (after SaslHandshake v0).
    pub fn peek(frame: &[u8], raw_token: bool) -> Self {
        let field = |at: usize| frame.get(at..at + 2).map(|b| i16::from_be_bytes([b[0], b[1]]));
        let correlation_id = frame
            .get(4..8)
            .map_or(-1, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if raw_token {
            return Self {
                api: None,
                version: None,
                correlation_id: -1,
            };
        }
        let api = field(0).unwrap_or(-1);
        let version = field(2).filter(|v| {
            kafka_protocol::messages::ApiKey::try_from(api)
                .is_ok_and(|key| crate::protocol::api::serves(key, *v) || crate::protocol::legacy::decodes(key, *v))
        });
        Self {
            api: Some(api),
            version,
            correlation_id,
        }
    }

    /// The API's name as the metrics label it ("Produce", "unknown", "SaslRawToken").
    pub fn api_name(&self) -> &'static str {
        metrics().slot(self.api).name
    }
}

/// Counts an open connection until dropped.
pub struct OpenConnection(&'static Metrics);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.dec();
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 8 bytes of a request header: API key, version, correlation id.
    fn header(key: i16, version: i16, correlation_id: i32) -> Vec<u8> {
        let mut frame = key.to_be_bytes().to_vec();
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&correlation_id.to_be_bytes());
        frame
    }

    #[test]
    fn labels_name_served_apis_and_versions_and_fold_everything_else_into_unknown() {
        let produce = RequestLabels::peek(&header(0, 9, 42), false);
        assert_eq!(produce.api_name(), "Produce");
        assert_eq!(produce.version, Some(9));
        assert_eq!(produce.correlation_id, 42);
        let unserved_version = RequestLabels::peek(&header(0, 999, 1), false);
        assert_eq!(unserved_version.api_name(), "Produce");
        assert_eq!(unserved_version.version, None, "a version the gateway does not serve");
        let made_up = RequestLabels::peek(&header(4_000, 0, 1), false);
        assert_eq!(made_up.api_name(), UNKNOWN);
        let negative = RequestLabels::peek(&header(-5, 0, 1), false);
        assert_eq!(negative.api_name(), UNKNOWN);
        let short = RequestLabels::peek(&[0], false);
        assert_eq!(
            (short.api_name(), short.version, short.correlation_id),
            (UNKNOWN, None, -1)
        );
        let token = RequestLabels::peek(b"\0alice\0secret", true);
        assert_eq!(token.api_name(), RAW_SASL_TOKEN);
        assert_eq!(token.correlation_id, -1, "a bare token carries no correlation id");
    }

    #[test]
    fn a_request_with_an_unserved_version_is_counted_under_version_unknown() {
        let m = metrics();
        let labels = RequestLabels::peek(&header(3, 999, 1), false); // Metadata v999
        m.record_request(&labels, 12, Duration::from_millis(2), true);
        let scrape = m.encode();
        assert!(
            scrape.contains("kafka_iggy_gateway_requests_total{api=\"Metadata\",version=\"unknown\"}"),
            "{scrape}"
        );
        assert!(scrape.contains("kafka_iggy_gateway_request_failures_total{api=\"Metadata\"}"));
        assert!(!scrape.contains("version=\"999\""));
    }
}
