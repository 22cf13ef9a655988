//! What a client proves itself with: a username and a secret that never prints. The secret is
//! either an Iggy password or an Iggy personal access token (AUTH-SASL-PAT-1).

use std::fmt;

/// A password or token. Its `Debug` and `Display` never show the value (AUTH-SASL-SECRET-1),
/// and its bytes are overwritten when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that hands it to Iggy.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret::new)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Best effort: the allocation is zeroed before it is freed. Copies the SDK makes are
        // its own (it keeps them in its own secret type).
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.iter_mut().for_each(|b| *b = 0);
        std::hint::black_box(&bytes);
    }
}

/// How the secret logs in to Iggy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretKind {
    Password,
    PersonalAccessToken,
}

/// A login: who, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub secret: Secret,
    pub kind: SecretKind,
}

impl Credentials {
    pub fn password(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            secret: Secret::new(password),
            kind: SecretKind::Password,
        }
    }

    pub fn token(username: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            secret: Secret::new(token),
            kind: SecretKind::PersonalAccessToken,
        }
    }
}

/// The number of random bytes in an Iggy personal access token; the token is their base64.
pub const TOKEN_RANDOM_BYTES: usize = 50;

/// Whether a SASL password has the shape of an Iggy personal access token: the base64 of 50
/// bytes, padded (68 characters) or not (67), in the standard or the URL-safe alphabet
/// (AUTH-SASL-PAT-1). Pure.
pub fn looks_like_token(secret: &str) -> bool {
    let unpadded = secret.trim_end_matches('=');
    let padding = secret.len() - unpadded.len();
    let encoded_len = TOKEN_RANDOM_BYTES.div_ceil(3) * 4;
    let unpadded_len = (TOKEN_RANDOM_BYTES * 4).div_ceil(3);
    let length_fits = (padding == 0 && unpadded.len() == unpadded_len)
        || (padding > 0 && secret.len() == encoded_len && unpadded.len() == unpadded_len);
    length_fits
        && unpadded
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'))
}

/// The principal a session acts as: an Iggy user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub user_id: u32,
    pub username: String,
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (Iggy user {})", self.username, self.user_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_sasl_secret_1_debug_never_shows_the_secret() {
        let c = Credentials::password("alice", "hunter2-very-secret");
        let shown = format!("{c:?} {c:#?} {}", c.secret);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"));
        assert_eq!(c.secret.expose(), "hunter2-very-secret");
    }

    #[test]
    fn auth_sasl_pat_1_token_shape() {
        // 50 bytes are 67 base64 characters and one `=` of padding.
        let padded = format!("{}=", "A".repeat(67));
        assert!(looks_like_token(&padded));
        assert!(!looks_like_token(&format!("{}==", "A".repeat(66))));
        assert!(looks_like_token(&"a-_9".repeat(17)[..67]));
        assert!(!looks_like_token("iggy"));
        assert!(!looks_like_token(&"A".repeat(68)), "68 characters need padding");
        assert!(!looks_like_token(&format!("{}!", "A".repeat(66))));
        assert!(!looks_like_token(&format!("{}=", "A".repeat(66))), "too short");
    }
}
