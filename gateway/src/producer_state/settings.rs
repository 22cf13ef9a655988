//! The producer-state settings: flags, `IGGY_KAFKA_*` variables or the TOML file's
//! `[producers]` table, their defaults (docs/spec/producer-ids.md) and their checks.

use anyhow::bail;
use serde::Deserialize;

/// One optional setting each; unset ones take the default. Read from the command line
/// (flattened into `Args`) and from the `[producers]` table.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducerArgs {
    /// Producer entries (one per idempotent producer and partition) the gateway holds at most
    /// (LIMIT-PRODUCERS-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_PRODUCER_STATES")]
    pub max_producer_states: Option<usize>,
    /// Producer entries one principal (or client address without SASL) may create
    /// (LIMIT-PRODUCERS-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_PRODUCER_STATES_PER_PRINCIPAL")]
    pub max_producer_states_per_principal: Option<usize>,
    /// Kafka's producer.id.expiration.ms: a producer unseen this long is forgotten
    /// (PRODUCER-EXPIRY-1).
    #[arg(long, env = "IGGY_KAFKA_PRODUCER_ID_EXPIRATION_MS")]
    pub producer_id_expiration_ms: Option<u64>,
    /// Messages of a partition's tail read back to rebuild its producer state
    /// (PRODUCER-STATE-REBUILD-1).
    #[arg(long, env = "IGGY_KAFKA_PRODUCER_STATE_READ_MESSAGES")]
    pub producer_state_read_messages: Option<u64>,
    /// Payload and header bytes of a partition's tail read back at most
    /// (PRODUCER-STATE-REBUILD-1).
    #[arg(long, env = "IGGY_KAFKA_PRODUCER_STATE_READ_BYTES")]
    pub producer_state_read_bytes: Option<u64>,
}

impl ProducerArgs {
    /// Each setting from `self` where set, else from `file`.
    pub fn or(self, file: ProducerArgs) -> ProducerArgs {
        ProducerArgs {
            max_producer_states: self.max_producer_states.or(file.max_producer_states),
            max_producer_states_per_principal: self
                .max_producer_states_per_principal
                .or(file.max_producer_states_per_principal),
            producer_id_expiration_ms: self.producer_id_expiration_ms.or(file.producer_id_expiration_ms),
            producer_state_read_messages: self.producer_state_read_messages.or(file.producer_state_read_messages),
            producer_state_read_bytes: self.producer_state_read_bytes.or(file.producer_state_read_bytes),
        }
    }
}

/// The producer-state settings in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateSettings {
    /// LIMIT-PRODUCERS-1: producer entries (one per producer and partition) in all.
    pub max_producers: usize,
    /// LIMIT-PRODUCERS-1: entries one principal (or client address without SASL) may create.
    pub max_producers_per_principal: usize,
    /// PRODUCER-EXPIRY-1: Kafka's `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: u64,
    /// PRODUCER-STATE-REBUILD-1: how far back the log's tail is read, in messages and in bytes.
    pub rebuild_window_messages: u64,
    pub rebuild_window_bytes: u64,
    /// PRODUCER-UNKNOWN-3: how long after a log read a gap is taken for the log lagging.
    pub log_settle_ms: u64,
}

impl Default for ProducerStateSettings {
    fn default() -> Self {
        Self {
            // About 150 bytes an entry: 150 MB at most.
            max_producers: 1_000_000,
            // A tenth of the whole: one principal or address cannot fill the table.
            max_producers_per_principal: 100_000,
            // Kafka's default: one day.
            producer_id_expiration_ms: 86_400_000,
            // Enough for every batch producers had in flight when a gateway stopped, at a cost
            // paid once per partition after a start (docs/spec/producer-ids.md).
            rebuild_window_messages: 100_000,
            rebuild_window_bytes: 8 * 1024 * 1024,
            // Three default failover bounds (CLUSTER-FAILOVER-2): a new primary's reads caught
            // up within one in the cluster tier; a real gap is refused for good after this.
            log_settle_ms: 30_000,
        }
    }
}

impl ProducerStateSettings {
    pub fn resolve(args: &ProducerArgs) -> anyhow::Result<Self> {
        let d = Self::default();
        let settings = Self {
            max_producers: args.max_producer_states.unwrap_or(d.max_producers),
            max_producers_per_principal: args
                .max_producer_states_per_principal
                .unwrap_or(d.max_producers_per_principal),
            producer_id_expiration_ms: args.producer_id_expiration_ms.unwrap_or(d.producer_id_expiration_ms),
            rebuild_window_messages: args.producer_state_read_messages.unwrap_or(d.rebuild_window_messages),
            rebuild_window_bytes: args.producer_state_read_bytes.unwrap_or(d.rebuild_window_bytes),
            log_settle_ms: d.log_settle_ms,
        };
        for (name, value) in [
            ("max_producer_states", settings.max_producers as u64),
            (
                "max_producer_states_per_principal",
                settings.max_producers_per_principal as u64,
            ),
            ("producer_id_expiration_ms", settings.producer_id_expiration_ms),
        ] {
            if value == 0 {
                bail!("{name} must be at least 1");
            }
        }
        Ok(settings)
    }
}
