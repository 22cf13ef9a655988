//! Resource limits a remote client can otherwise push without bound (docs/spec/limits.md): their
//! settings (flag, `IGGY_KAFKA_*` variable, or the `[limits]` table of the TOML file), their
//! defaults, and the pure checks the server and handlers call before they spend anything.

use anyhow::bail;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// Kafka's `socket.request.max.bytes` default, which this gateway also takes as the ceiling of
/// `max_frame_size` (LIMIT-FRAME-CEILING-1).
pub const MAX_FRAME_SIZE_CEILING: usize = 100 * 1024 * 1024;

/// Kafka's `fetch.max.bytes` broker default (55 MiB).
pub const DEFAULT_FETCH_MAX_BYTES: usize = 55 * 1024 * 1024;

/// Bytes read ahead of consumers' next Fetch at most, over every connection (LIMIT-READ-AHEAD-1):
/// 64 one-MiB partition reads, librdkafka's and the Java client's `max.partition.fetch.bytes`.
pub const DEFAULT_FETCH_READ_AHEAD_BYTES: usize = 64 * 1024 * 1024;

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a connection may send
/// before it has authenticated (LIMIT-PREAUTH-FRAME-1).
pub const DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES: usize = 512 * 1024;

/// How long a connection has to complete SASL authentication (LIMIT-PREAUTH-DEADLINE-1): the
/// Java client's `request.timeout.ms`, so no client gives up on its login later than this.
pub const DEFAULT_AUTHENTICATION_TIMEOUT_MS: u64 = 30_000;

/// How long a connection must have been silent to be closed for a newcomer when the connection
/// table is full (LIMIT-CONNECTIONS-SHED-1); one that never sent a request qualifies at once.
pub const DEFAULT_SHED_IDLE_AFTER_MS: u64 = 10_000;
/// Bytes one response other than Fetch's may take (LIMIT-RESPONSE-BYTES-1): above Fetch's own
/// 55 MiB `fetch.max.bytes`, so no answer a real client needs comes near it, and small enough that
/// a few connections asking at once stay within ordinary memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The longest error message the gateway puts in a response (LIMIT-BUILT-STRING-1).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 512;

/// The longest client id the gateway copies into a member id it builds (LIMIT-BUILT-STRING-1).
pub const MAX_CLIENT_ID_IN_MEMBER_ID_BYTES: usize = 128;

/// LIMIT-WORKERS-1: the async workers when `worker_threads` is unset, half of `cpus` and at
/// least one. An idle worker is woken to steal the task the Iggy SDK spawns for each send, and
/// on two CPUs those wake-ups cost more than the work shared (docs/decisions.md).
pub(crate) fn default_worker_threads(cpus: usize) -> usize {
    (cpus / 2).max(1)
}

/// One optional setting per limit; unset ones take the default. The same struct is read from
/// the command line (flattened into `Args`) and from the TOML file's `[limits]` table.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Open client connections at most (LIMIT-CONNECTIONS-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Bytes of request frames above 64 KiB being read or handled at once, over every
    /// connection (LIMIT-INFLIGHT-1), beside one frame at a time that reads its rest beyond it;
    /// at least 64 KiB.
    #[arg(long, env = "IGGY_KAFKA_MAX_INFLIGHT_REQUEST_BYTES")]
    pub max_inflight_request_bytes: Option<usize>,
    /// Entries (topics, partitions, groups, members, protocols, configs) in one request
    /// (LIMIT-ENTRIES-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_REQUEST_ENTRIES")]
    pub max_request_entries: Option<usize>,
    /// Records one Produce request may decode, over all its batches (LIMIT-RECORDS-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_RECORDS_PER_REQUEST")]
    pub max_records_per_request: Option<usize>,
    /// Kafka's fetch.max.bytes: the cap on a Fetch's max_bytes (LIMIT-FETCH-BYTES-1).
    #[arg(long, env = "IGGY_KAFKA_FETCH_MAX_BYTES")]
    pub fetch_max_bytes: Option<usize>,
    /// The cap on a Fetch's max_wait_ms (LIMIT-FETCH-WAIT-1).
    #[arg(long, env = "IGGY_KAFKA_FETCH_MAX_WAIT_MS")]
    pub fetch_max_wait_ms: Option<u64>,
    /// Bytes of messages read ahead of consumers' next Fetch, over every connection
    /// (LIMIT-READ-AHEAD-1); 0 reads nothing ahead.
    #[arg(long, env = "IGGY_KAFKA_FETCH_READ_AHEAD_BYTES")]
    pub fetch_read_ahead_bytes: Option<usize>,
    /// Protocols (assignors) one JoinGroup may offer (LIMIT-JOIN-PROTOCOLS-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_JOIN_PROTOCOLS")]
    pub max_join_protocols: Option<usize>,
    /// The cap on a member's rebalance timeout (LIMIT-REBALANCE-TIMEOUT-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_REBALANCE_TIMEOUT_MS")]
    pub group_max_rebalance_timeout_ms: Option<u64>,
    /// How long a KIP-394 member id waits for its member to rejoin, at most
    /// (LIMIT-GROUP-PENDING-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_PENDING_MEMBER_TIMEOUT_MS")]
    pub group_pending_member_timeout_ms: Option<u64>,
    /// Protocol metadata of one JoinGroup, and one member's assignment (GROUP-LIMIT-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_METADATA_BYTES")]
    pub group_max_metadata_bytes: Option<usize>,
    /// Joined and pending members over every group (LIMIT-GROUP-MEMBERS-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_MEMBERS_TOTAL")]
    pub group_max_members_total: Option<usize>,
    /// Bytes of protocol metadata and assignments held over every group (LIMIT-GROUP-BYTES-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_STORED_BYTES")]
    pub group_max_stored_bytes: Option<usize>,
    /// Groups one principal (or, without SASL, one client address) may create and hold
    /// (LIMIT-GROUP-OWNER-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_GROUPS_PER_PRINCIPAL")]
    pub group_max_groups_per_principal: Option<usize>,
    /// Joined members and pending member ids one principal (or client address) may hold over
    /// every group (LIMIT-GROUP-OWNER-1).
    #[arg(long, env = "IGGY_KAFKA_GROUP_MAX_MEMBERS_PER_PRINCIPAL")]
    pub group_max_members_per_principal: Option<usize>,
    /// Produce requests decoded and mapped at once, off the async workers (LIMIT-BLOCKING-1);
    /// 0 decodes on the connection's task (what deterministic simulations need).
    #[arg(long, env = "IGGY_KAFKA_DECODE_THREADS")]
    pub decode_threads: Option<usize>,
    /// Async worker threads serving clients (LIMIT-WORKERS-1); default half the CPUs, at
    /// least 1.
    #[arg(long, env = "IGGY_KAFKA_WORKER_THREADS")]
    pub worker_threads: Option<usize>,
    /// How long a shutdown waits for in-flight requests before it stops anyway
    /// (PROTO-SHUTDOWN-2).
    #[arg(long, env = "IGGY_KAFKA_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// The largest frame accepted before SASL authentication (LIMIT-PREAUTH-FRAME-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_UNAUTHENTICATED_FRAME_BYTES")]
    pub max_unauthenticated_frame_bytes: Option<usize>,
    /// How long a connection has to complete SASL authentication (LIMIT-PREAUTH-DEADLINE-1).
    #[arg(long, env = "IGGY_KAFKA_AUTHENTICATION_TIMEOUT_MS")]
    pub authentication_timeout_ms: Option<u64>,
    /// Open connections from one client address at most (LIMIT-CONNECTIONS-ADDRESS-1);
    /// default `max_connections`.
    #[arg(long, env = "IGGY_KAFKA_MAX_CONNECTIONS_PER_ADDRESS")]
    pub max_connections_per_address: Option<usize>,
    /// Silence after which a connection may be closed to admit a new one when the table is
    /// full (LIMIT-CONNECTIONS-SHED-1).
    #[arg(long, env = "IGGY_KAFKA_SHED_IDLE_AFTER_MS")]
    pub shed_idle_after_ms: Option<u64>,
    /// Bytes one response other than Fetch's may take; past it the request is answered with an
    /// error instead (LIMIT-RESPONSE-BYTES-1).
    #[arg(long, env = "IGGY_KAFKA_MAX_RESPONSE_BYTES")]
    pub max_response_bytes: Option<usize>,
    /// Leading bits of an IPv4 client address that make one client for the per-address limits
    /// (LIMIT-ADDRESS-KEY-1); default 32, the whole address.
    #[arg(long, env = "IGGY_KAFKA_ADDRESS_PREFIX_V4")]
    pub address_prefix_v4: Option<u8>,
    /// Leading bits of an IPv6 client address that make one client for the per-address limits
    /// (LIMIT-ADDRESS-KEY-1); default 64, the prefix one host or site is given.
    #[arg(long, env = "IGGY_KAFKA_ADDRESS_PREFIX_V6")]
    pub address_prefix_v6: Option<u8>,
    /// Open connections from one address prefix at most (LIMIT-CONNECTIONS-PREFIX-1); default
    /// `max_connections`.
    #[arg(long, env = "IGGY_KAFKA_MAX_CONNECTIONS_PER_PREFIX")]
    pub max_connections_per_prefix: Option<usize>,
}

impl LimitSettings {
    /// Each setting from `self` where set, else from `file`.
    pub fn or(self, file: LimitSettings) -> LimitSettings {
        LimitSettings {
            max_connections: self.max_connections.or(file.max_connections),
            max_inflight_request_bytes: self.max_inflight_request_bytes.or(file.max_inflight_request_bytes),
            max_request_entries: self.max_request_entries.or(file.max_request_entries),
            max_records_per_request: self.max_records_per_request.or(file.max_records_per_request),
            fetch_max_bytes: self.fetch_max_bytes.or(file.fetch_max_bytes),
            fetch_max_wait_ms: self.fetch_max_wait_ms.or(file.fetch_max_wait_ms),
            fetch_read_ahead_bytes: self.fetch_read_ahead_bytes.or(file.fetch_read_ahead_bytes),
            max_join_protocols: self.max_join_protocols.or(file.max_join_protocols),
            group_max_rebalance_timeout_ms: self
                .group_max_rebalance_timeout_ms
                .or(file.group_max_rebalance_timeout_ms),
            group_pending_member_timeout_ms: self
                .group_pending_member_timeout_ms
                .or(file.group_pending_member_timeout_ms),
            group_max_metadata_bytes: self.group_max_metadata_bytes.or(file.group_max_metadata_bytes),
            group_max_members_total: self.group_max_members_total.or(file.group_max_members_total),
            group_max_stored_bytes: self.group_max_stored_bytes.or(file.group_max_stored_bytes),
            group_max_groups_per_principal: self
                .group_max_groups_per_principal
                .or(file.group_max_groups_per_principal),
            group_max_members_per_principal: self
                .group_max_members_per_principal
                .or(file.group_max_members_per_principal),
            decode_threads: self.decode_threads.or(file.decode_threads),
            worker_threads: self.worker_threads.or(file.worker_threads),
            shutdown_timeout_ms: self.shutdown_timeout_ms.or(file.shutdown_timeout_ms),
            max_unauthenticated_frame_bytes: self
                .max_unauthenticated_frame_bytes
                .or(file.max_unauthenticated_frame_bytes),
            authentication_timeout_ms: self.authentication_timeout_ms.or(file.authentication_timeout_ms),
            max_connections_per_address: self.max_connections_per_address.or(file.max_connections_per_address),
            shed_idle_after_ms: self.shed_idle_after_ms.or(file.shed_idle_after_ms),
            max_response_bytes: self.max_response_bytes.or(file.max_response_bytes),
            address_prefix_v4: self.address_prefix_v4.or(file.address_prefix_v4),
            address_prefix_v6: self.address_prefix_v6.or(file.address_prefix_v6),
            max_connections_per_prefix: self.max_connections_per_prefix.or(file.max_connections_per_prefix),
        }
    }
}

/// The limits in force: every setting resolved to a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub max_inflight_request_bytes: usize,
    pub max_request_entries: usize,
    pub max_records_per_request: usize,
    pub fetch_max_bytes: usize,
    pub fetch_max_wait: Duration,
    pub fetch_read_ahead_bytes: usize,
    pub decode_threads: usize,
    pub worker_threads: usize,
    pub shutdown_timeout: Duration,
    pub max_unauthenticated_frame_bytes: usize,
    pub authentication_timeout: Duration,
    pub max_connections_per_address: usize,
    pub shed_idle_after: Duration,
    pub max_response_bytes: usize,
    /// LIMIT-ADDRESS-KEY-1.
    pub address_prefixes: AddressPrefixes,
    /// LIMIT-CONNECTIONS-PREFIX-1.
    pub max_connections_per_prefix: usize,
}

/// The group coordinator's share of the settings, resolved (GroupLimits takes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLimitSettings {
    pub max_join_protocols: usize,
    pub max_metadata_bytes: usize,
    pub max_rebalance_timeout: Duration,
    pub pending_member_timeout: Duration,
    pub max_members_total: usize,
    pub max_stored_bytes: usize,
    pub max_groups_per_owner: usize,
    pub max_members_per_owner: usize,
}

impl Default for GroupLimitSettings {
    fn default() -> Self {
        Self {
            // Clients offer one to three assignors; 64 leaves room for any real one.
            max_join_protocols: 64,
            max_metadata_bytes: 1024 * 1024,
            // Kafka's max.poll.interval.ms default; a member that needs longer to rejoin is
            // removed from the rebalance and rejoins after it.
            max_rebalance_timeout: Duration::from_millis(300_000),
            // A KIP-394 member rejoins at once with the id it was given.
            pending_member_timeout: Duration::from_millis(30_000),
            max_members_total: 100_000,
            max_stored_bytes: 256 * 1024 * 1024,
            // A tenth of the gateway's 10,000 groups and 100,000 members: one principal or
            // address cannot fill the tables, and an application with a thousand consumer
            // groups, or ten thousand consumers under one user, still fits.
            max_groups_per_owner: 1_000,
            max_members_per_owner: 10_000,
        }
    }
}

impl Limits {
    /// Resolves `settings`, refusing values no gateway could work with.
    pub fn resolve(settings: &LimitSettings) -> anyhow::Result<(Limits, GroupLimitSettings)> {
        let group_defaults = GroupLimitSettings::default();
        let parallelism = std::thread::available_parallelism().map_or(2, |n| n.get());
        let max_connections = settings.max_connections.unwrap_or(4_096);
        let limits = Limits {
            max_connections,
            max_inflight_request_bytes: settings.max_inflight_request_bytes.unwrap_or(256 * 1024 * 1024),
            max_request_entries: settings.max_request_entries.unwrap_or(10_000),
            max_records_per_request: settings
                .max_records_per_request
                .unwrap_or(kig_core::budget::DEFAULT_MAX_RECORDS),
            fetch_max_bytes: settings.fetch_max_bytes.unwrap_or(DEFAULT_FETCH_MAX_BYTES),
            fetch_max_wait: Duration::from_millis(settings.fetch_max_wait_ms.unwrap_or(30_000)),
            fetch_read_ahead_bytes: settings
                .fetch_read_ahead_bytes
                .unwrap_or(DEFAULT_FETCH_READ_AHEAD_BYTES),
            decode_threads: settings.decode_threads.unwrap_or(parallelism),
            worker_threads: settings
                .worker_threads
                .unwrap_or_else(|| default_worker_threads(parallelism)),
            shutdown_timeout: Duration::from_millis(settings.shutdown_timeout_ms.unwrap_or(30_000)),
            max_unauthenticated_frame_bytes: settings
                .max_unauthenticated_frame_bytes
                .unwrap_or(DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES),
            authentication_timeout: Duration::from_millis(
                settings
                    .authentication_timeout_ms
                    .unwrap_or(DEFAULT_AUTHENTICATION_TIMEOUT_MS),
            ),
            // Clients behind one NAT share an address, so by default one address may use the
            // whole table; shedding (LIMIT-CONNECTIONS-SHED-1) keeps its silent ones from
            // holding it against others.
            max_connections_per_address: settings.max_connections_per_address.unwrap_or(max_connections),
            shed_idle_after: Duration::from_millis(settings.shed_idle_after_ms.unwrap_or(DEFAULT_SHED_IDLE_AFTER_MS)),
            max_response_bytes: settings.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            address_prefixes: AddressPrefixes {
                v4: settings.address_prefix_v4.unwrap_or(DEFAULT_ADDRESS_PREFIX_V4),
                v6: settings.address_prefix_v6.unwrap_or(DEFAULT_ADDRESS_PREFIX_V6),
            },
            // As per address: clients behind one prefix (a NAT pool, an office's /64) may use the
            // whole table unless the operator says otherwise; shedding keys on the prefix.
            max_connections_per_prefix: settings.max_connections_per_prefix.unwrap_or(max_connections),
        };
        let groups = GroupLimitSettings {
            max_join_protocols: settings.max_join_protocols.unwrap_or(group_defaults.max_join_protocols),
            max_metadata_bytes: settings
                .group_max_metadata_bytes
                .unwrap_or(group_defaults.max_metadata_bytes),
            max_rebalance_timeout: settings
                .group_max_rebalance_timeout_ms
                .map_or(group_defaults.max_rebalance_timeout, Duration::from_millis),
            pending_member_timeout: settings
                .group_pending_member_timeout_ms
                .map_or(group_defaults.pending_member_timeout, Duration::from_millis),
            max_members_total: settings
                .group_max_members_total
                .unwrap_or(group_defaults.max_members_total),
            max_stored_bytes: settings
                .group_max_stored_bytes
                .unwrap_or(group_defaults.max_stored_bytes),
            max_groups_per_owner: settings
                .group_max_groups_per_principal
                .unwrap_or(group_defaults.max_groups_per_owner),
            max_members_per_owner: settings
                .group_max_members_per_principal
                .unwrap_or(group_defaults.max_members_per_owner),
        };
        for (name, value) in [
            ("max_connections", limits.max_connections),
            ("max_connections_per_address", limits.max_connections_per_address),
            (
                "max_unauthenticated_frame_bytes",
                limits.max_unauthenticated_frame_bytes,
            ),
            ("max_request_entries", limits.max_request_entries),
            ("max_records_per_request", limits.max_records_per_request),
            ("fetch_max_bytes", limits.fetch_max_bytes),
            ("max_join_protocols", groups.max_join_protocols),
            ("group_max_members_total", groups.max_members_total),
            ("group_max_groups_per_principal", groups.max_groups_per_owner),
            ("group_max_members_per_principal", groups.max_members_per_owner),
            ("max_response_bytes", limits.max_response_bytes),
            ("max_connections_per_prefix", limits.max_connections_per_prefix),
            ("worker_threads", limits.worker_threads),
        ] {
            if value == 0 {
                bail!("{name} must be at least 1");
            }
        }
        // LIMIT-ADDRESS-KEY-1: a prefix of 0 bits would make every client one.
        let AddressPrefixes { v4, v6 } = limits.address_prefixes;
        if !(1..=32).contains(&v4) || !(1..=128).contains(&v6) {
            bail!("address_prefix_v4 must be 1..=32 and address_prefix_v6 1..=128, not {v4} and {v6}");
        }
        let chunk = crate::protocol::frame::ADMISSION_CHUNK;
        if limits.max_inflight_request_bytes < chunk {
            bail!(
                "max_inflight_request_bytes ({}) must be at least {chunk}, the first chunk a frame's body is admitted in, or no large frame could ever be read",
                limits.max_inflight_request_bytes
            );
        }
        Ok((limits, groups))
    }
}

/// The IPv4 prefix that makes one client by default: the whole address, as Kafka's
/// `max.connections.per.ip` counts.
pub const DEFAULT_ADDRESS_PREFIX_V4: u8 = 32;
/// The IPv6 prefix that makes one client by default: a /64, what a host or a site is handed
/// (RFC 4291's interface identifiers fill the rest, and privacy addresses rotate through it).
pub const DEFAULT_ADDRESS_PREFIX_V6: u8 = 64;

/// LIMIT-ADDRESS-KEY-1: how many leading bits of a client's address make it one client for the
/// limits that count per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPrefixes {
    pub v4: u8,
    pub v6: u8,
}

impl Default for AddressPrefixes {
    fn default() -> Self {
        Self {
            v4: DEFAULT_ADDRESS_PREFIX_V4,
            v6: DEFAULT_ADDRESS_PREFIX_V6,
        }
    }
}

impl AddressPrefixes {
    /// The client `address` counts as: its prefix, the rest zeroed. An IPv4 address mapped into
    /// IPv6 (a dual-stack listener's `::ffff:a.b.c.d`) is taken as the IPv4 address it is, or
    /// every IPv4 client would share one IPv6 prefix.
    pub fn key(&self, address: IpAddr) -> IpAddr {
        match address.to_canonical() {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.v4.min(32))).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.v6.min(128))).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }
}

/// Cuts `text` to at most `max_bytes` bytes on a character boundary, marking the cut, so a
/// string the gateway builds from client input always encodes (LIMIT-BUILT-STRING-1).
pub fn truncate_utf8(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    const MARK: &str = "…";
    let mut end = max_bytes.saturating_sub(MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &text[..end])
}

/// An error message for a response, cut to [`MAX_ERROR_MESSAGE_BYTES`] (LIMIT-BUILT-STRING-1).
pub fn error_message(text: impl AsRef<str>) -> String {
    truncate_utf8(text.as_ref(), MAX_ERROR_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_built_string_1_truncation_keeps_utf8_and_the_bound() {
        let long = "é".repeat(40_000);
        let cut = error_message(&long);
        assert!(cut.len() <= MAX_ERROR_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert_eq!(error_message("short"), "short");
        assert_eq!(truncate_utf8("abcdef", 6), "abcdef");
        assert!(truncate_utf8("abcdefg", 6).len() <= 6);
    }

    #[test]
    fn limit_address_key_1_the_key_is_the_prefix_and_a_mapped_ipv4_is_ipv4() {
        let prefixes = AddressPrefixes::default();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(prefixes.key(ip("2001:db8:0:7:a:b:c:d")), ip("2001:db8:0:7::"));
        assert_eq!(
            prefixes.key(ip("2001:db8:0:7::1")),
            prefixes.key(ip("2001:db8:0:7:ffff::9")),
            "one /64, one client"
        );
        assert_ne!(prefixes.key(ip("2001:db8:0:7::1")), prefixes.key(ip("2001:db8:0:8::1")));
        assert_eq!(
            prefixes.key(ip("192.0.2.77")),
            ip("192.0.2.77"),
            "IPv4: the whole address"
        );
        assert_eq!(prefixes.key(ip("::ffff:192.0.2.77")), ip("192.0.2.77"));
        let wide = AddressPrefixes { v4: 24, v6: 48 };
        assert_eq!(wide.key(ip("192.0.2.77")), ip("192.0.2.0"));
        assert_eq!(wide.key(ip("2001:db8:1:7::1")), ip("2001:db8:1::"));
        assert_eq!(
            AddressPrefixes { v4: 32, v6: 128 }.key(ip("2001:db8::5")),
            ip("2001:db8::5")
        );
        for bad in [
            LimitSettings {
                address_prefix_v4: Some(0),
                ..LimitSettings::default()
            },
            LimitSettings {
                address_prefix_v6: Some(129),
                ..LimitSettings::default()
            },
        ] {
            let err = Limits::resolve(&bad).unwrap_err();
            assert!(err.to_string().contains("address_prefix"), "{err}");
        }
    }

    #[test]
    fn limit_inflight_1_budget_below_one_chunk_is_refused() {
        let settings = LimitSettings {
            max_inflight_request_bytes: Some(1024),
            ..LimitSettings::default()
        };
        let err = Limits::resolve(&settings).unwrap_err();
        assert!(err.to_string().contains("max_inflight_request_bytes"), "{err}");
    }

    #[test]
    fn limits_default_are_kept_by_a_real_deployment() {
        let (limits, groups) = Limits::resolve(&LimitSettings::default()).unwrap();
        assert_eq!(limits.fetch_max_bytes, 55 * 1024 * 1024);
        assert_eq!(limits.max_inflight_request_bytes, 256 * 1024 * 1024);
        assert_eq!(groups, GroupLimitSettings::default());
        for zero in [
            LimitSettings {
                max_connections: Some(0),
                ..LimitSettings::default()
            },
            LimitSettings {
                max_request_entries: Some(0),
                ..LimitSettings::default()
            },
        ] {
            assert!(Limits::resolve(&zero).is_err());
        }
    }

    #[test]
    fn limit_workers_1_half_the_cpus_and_at_least_one_unless_set() {
        let defaults: Vec<usize> = [1, 2, 3, 4, 16].into_iter().map(default_worker_threads).collect();
        assert_eq!(defaults, [1, 1, 1, 2, 8]);
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let (limits, _) = Limits::resolve(&LimitSettings::default()).unwrap();
        assert_eq!(limits.worker_threads, default_worker_threads(cpus));
        let set = LimitSettings {
            worker_threads: Some(3),
            ..LimitSettings::default()
        };
        assert_eq!(Limits::resolve(&set).unwrap().0.worker_threads, 3);
        let none = LimitSettings {
            worker_threads: Some(0),
            ..LimitSettings::default()
        };
        let err = Limits::resolve(&none).unwrap_err();
        assert!(err.to_string().contains("worker_threads"), "{err}");
    }
}
