//! SASL's settings: flag, `IGGY_KAFKA_*` variable, or the TOML file's `[sasl]` table, and their
//! resolved form (docs/spec/auth.md).

use anyhow::bail;
use serde::Deserialize;

/// The SASL mechanisms the gateway offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// RFC 4616: a username and a password (or an Iggy personal access token), checked by
    /// logging in to Iggy. Use it over TLS: the password crosses the wire as is.
    Plain,
}

impl Mechanism {
    /// The name clients send in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
        }
    }
}

/// How long a session lives: the bound on how late a changed password or a deleted user takes
/// effect for a connected client (AUTH-SESSION-1), and the `session_lifetime_ms` told to
/// KIP-368 clients.
pub const DEFAULT_SESSION_LIFETIME_MS: u64 = 15 * 60 * 1000;
/// The shortest lifetime accepted: re-authentication every second would be a load of its own.
pub const MIN_SESSION_LIFETIME_MS: u64 = 1_000;
/// Backend sessions pooled at most (LIMIT-SESSIONS-1); each holds Iggy connections.
pub const DEFAULT_MAX_SESSIONS: usize = 1_024;
/// Backend sessions of one user at most (LIMIT-SESSIONS-USER-1): a session per credentials, and
/// a credentials' session may be replaced while connections still hold it, so 16 leaves room
/// for 8 passwords or tokens of one user in use at once; 64 users fill the default pool.
pub const DEFAULT_MAX_SESSIONS_PER_USER: usize = 16;

/// One optional setting each; the same struct is read from flags and from `[sasl]`.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaslSettings {
    /// Require SASL on the Kafka listener with this mechanism. Unset: no authentication, and
    /// every client acts as the configured Iggy account.
    #[arg(long = "sasl", env = "IGGY_KAFKA_SASL", value_enum)]
    pub mechanism: Option<Mechanism>,
    /// How long an authenticated session lasts before the client must re-authenticate
    /// (KIP-368), and how long a pooled backend session is reused (AUTH-SESSION-1).
    #[arg(long = "sasl-session-lifetime-ms", env = "IGGY_KAFKA_SASL_SESSION_LIFETIME_MS")]
    pub session_lifetime_ms: Option<u64>,
    /// Backend sessions (one per principal and credentials) pooled at most (LIMIT-SESSIONS-1).
    #[arg(long = "sasl-max-sessions", env = "IGGY_KAFKA_SASL_MAX_SESSIONS")]
    pub max_sessions: Option<usize>,
    /// Backend sessions of one user at most, over all its passwords and tokens
    /// (LIMIT-SESSIONS-USER-1; default 16, at most `max_sessions`).
    #[arg(long = "sasl-max-sessions-per-user", env = "IGGY_KAFKA_SASL_MAX_SESSIONS_PER_USER")]
    pub max_sessions_per_user: Option<usize>,
}

impl SaslSettings {
    /// Each setting from `self` where set, else from `file`.
    pub fn or(self, file: SaslSettings) -> SaslSettings {
        SaslSettings {
            mechanism: self.mechanism.or(file.mechanism),
            session_lifetime_ms: self.session_lifetime_ms.or(file.session_lifetime_ms),
            max_sessions: self.max_sessions.or(file.max_sessions),
            max_sessions_per_user: self.max_sessions_per_user.or(file.max_sessions_per_user),
        }
    }
}

/// The resolved SASL configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sasl {
    pub mechanism: Option<Mechanism>,
    pub session_lifetime_ms: u64,
    pub max_sessions: usize,
    /// LIMIT-SESSIONS-USER-1.
    pub max_sessions_per_user: usize,
}

impl Default for Sasl {
    fn default() -> Self {
        Self {
            mechanism: None,
            session_lifetime_ms: DEFAULT_SESSION_LIFETIME_MS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_user: DEFAULT_MAX_SESSIONS_PER_USER,
        }
    }
}

impl Sasl {
    pub fn resolve(settings: &SaslSettings) -> anyhow::Result<Sasl> {
        let defaults = Sasl::default();
        let session_lifetime_ms = settings.session_lifetime_ms.unwrap_or(defaults.session_lifetime_ms);
        if session_lifetime_ms < MIN_SESSION_LIFETIME_MS {
            bail!("sasl session_lifetime_ms must be at least {MIN_SESSION_LIFETIME_MS}, not {session_lifetime_ms}");
        }
        let max_sessions = settings.max_sessions.unwrap_or(defaults.max_sessions);
        if max_sessions == 0 {
            bail!("sasl max_sessions must be at least 1");
        }
        // Above max_sessions it would bound nothing: lowered to it.
        let max_sessions_per_user = settings
            .max_sessions_per_user
            .unwrap_or(defaults.max_sessions_per_user)
            .min(max_sessions);
        if max_sessions_per_user == 0 {
            bail!("sasl max_sessions_per_user must be at least 1");
        }
        Ok(Sasl {
            mechanism: settings.mechanism,
            session_lifetime_ms,
            max_sessions,
            max_sessions_per_user,
        })
    }

    pub fn enabled(&self) -> bool {
        self.mechanism.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_settings_resolve_with_defaults_and_bounds() {
        assert_eq!(Sasl::resolve(&SaslSettings::default()).unwrap(), Sasl::default());
        let s: SaslSettings = toml::from_str("mechanism = \"plain\"\nsession_lifetime_ms = 60000").unwrap();
        let resolved = Sasl::resolve(&s).unwrap();
        assert_eq!(resolved.mechanism, Some(Mechanism::Plain));
        assert_eq!(resolved.session_lifetime_ms, 60_000);
        assert!(Sasl::resolve(&SaslSettings {
            session_lifetime_ms: Some(10),
            ..SaslSettings::default()
        })
        .is_err());
        assert!(toml::from_str::<SaslSettings>("mechanism = \"scram\"").is_err());
    }

    #[test]
    fn limit_sessions_user_1_the_per_user_cap_is_a_setting_at_most_the_pool() {
        assert_eq!(Sasl::default().max_sessions_per_user, DEFAULT_MAX_SESSIONS_PER_USER);
        let s: SaslSettings = toml::from_str("max_sessions = 8\nmax_sessions_per_user = 3").unwrap();
        assert_eq!(Sasl::resolve(&s).unwrap().max_sessions_per_user, 3);
        let s: SaslSettings = toml::from_str("max_sessions = 8").unwrap();
        assert_eq!(
            Sasl::resolve(&s).unwrap().max_sessions_per_user,
            8,
            "lowered to the pool"
        );
        let zero = SaslSettings {
            max_sessions_per_user: Some(0),
            ..SaslSettings::default()
        };
        assert!(Sasl::resolve(&zero).is_err());
    }
}
