//! The SASL PLAIN message (RFC 4616): `[authzid] NUL authcid NUL passwd`, parsed without I/O
//! (AUTH-SASL-PLAIN-1).

use super::credentials::Secret;
use super::credentials::{looks_like_token, Credentials, SecretKind};

/// RFC 4616's limit on each of the three fields.
pub const MAX_FIELD_BYTES: usize = 255;

/// Why a PLAIN message was refused. Never holds the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// The count stops at 4: any more is "too many".
    #[error("a SASL PLAIN message has three fields separated by NUL bytes; this one has {0} (counted to 4)")]
    Fields(usize),
    #[error("a SASL PLAIN field is at most {MAX_FIELD_BYTES} bytes")]
    FieldTooLong,
    #[error("a SASL PLAIN field is not UTF-8")]
    NotUtf8,
    #[error("the SASL PLAIN username is empty")]
    EmptyUsername,
    #[error("the SASL PLAIN password is empty")]
    EmptyPassword,
    #[error("authorization identity {authzid:?} differs from username {username:?}: acting for another user is not supported")]
    ProxyAuthorization { authzid: String, username: String },
}

fn utf8(field: &[u8]) -> Result<&str, PlainError> {
    std::str::from_utf8(field).map_err(|_| PlainError::NotUtf8)
}

/// Parses a PLAIN message. The password is taken as an Iggy personal access token when it has
/// a token's shape (AUTH-SASL-PAT-1); the caller falls back to a password login when Iggy does
/// not know it as a token.
///
/// ```
/// use kafka_iggy_gateway::auth::plain::parse;
/// use kafka_iggy_gateway::auth::credentials::SecretKind;
/// let c = parse(b"\0alice\0wonderland").unwrap();
/// assert_eq!(c.username, "alice");
/// assert_eq!(c.secret.expose(), "wonderland");
/// assert_eq!(c.kind, SecretKind::Password);
/// ```
pub fn parse(message: &[u8]) -> Result<Credentials, PlainError> {
    // At most four pieces: a frame of NUL bytes must not allocate one slice per byte.
    let fields: Vec<&[u8]> = message.splitn(4, |&b| b == 0).collect();
    let [authzid, username, password] = fields[..] else {
        return Err(PlainError::Fields(fields.len()));
    };
    if fields.iter().any(|f| f.len() > MAX_FIELD_BYTES) {
        return Err(PlainError::FieldTooLong);
    }
    let (authzid, username, password) = (utf8(authzid)?, utf8(username)?, utf8(password)?);
    if username.is_empty() {
        return Err(PlainError::EmptyUsername);
    }
    if password.is_empty() {
        return Err(PlainError::EmptyPassword);
    }
    if !authzid.is_empty() && authzid != username {
        return Err(PlainError::ProxyAuthorization {
            authzid: authzid.to_string(),
            username: username.to_string(),
        });
    }
    let kind = if looks_like_token(password) {
        SecretKind::PersonalAccessToken
    } else {
        SecretKind::Password
    };
    Ok(Credentials {
        username: username.to_string(),
        secret: Secret::new(password),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_sasl_plain_1_fields() {
        let c = parse(b"bob\0bob\0pw").unwrap();
        assert_eq!((c.username.as_str(), c.secret.expose()), ("bob", "pw"));
        assert_eq!(parse(b"bob\0pw"), Err(PlainError::Fields(2)));
        assert_eq!(parse(b"\0bob\0pw\0x"), Err(PlainError::Fields(4)));
        assert_eq!(
            parse(&[0u8; 100_000]),
            Err(PlainError::Fields(4)),
            "counted to 4, not to 100,001"
        );
        assert_eq!(parse(b"\0\0pw"), Err(PlainError::EmptyUsername));
        assert_eq!(parse(b"\0bob\0"), Err(PlainError::EmptyPassword));
        assert_eq!(parse(b"\0b\xffb\0pw"), Err(PlainError::NotUtf8));
        let long = [b"\0".as_slice(), &[b'a'; 256], b"\0pw"].concat();
        assert_eq!(parse(&long), Err(PlainError::FieldTooLong));
        assert!(matches!(
            parse(b"eve\0bob\0pw"),
            Err(PlainError::ProxyAuthorization { .. })
        ));
    }

    #[test]
    fn auth_sasl_pat_1_a_token_shaped_password_is_tried_as_a_token() {
        let token = format!("{}=", "Zz09".repeat(17).chars().take(67).collect::<String>());
        let message = format!("\0carol\0{token}");
        let c = parse(message.as_bytes()).unwrap();
        assert_eq!(c.kind, SecretKind::PersonalAccessToken);
        assert_eq!(parse(b"\0carol\0short").unwrap().kind, SecretKind::Password);
    }

    #[test]
    fn auth_sasl_secret_1_errors_never_hold_the_password() {
        for message in [&b"\0bob\0secret-pw\0"[..], b"eve\0bob\0secret-pw"] {
            let e = parse(message).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("secret-pw"));
        }
    }
}
