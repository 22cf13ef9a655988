//! Iggy users and personal access tokens as the embedded model keeps them (AUTHZ-MODEL-1).
//!
//! Owns the user table (id, username, password hash, status, permissions) and each user's
//! personal access tokens (name, token hash, expiry), and answers logins. Pure and
//! deterministic: no clock (callers pass `now_us`), no randomness (callers pass a token's 50
//! random bytes). Passwords and tokens are stored only as salted SHA-256 hashes (the model's
//! own scheme; Iggy uses Argon2 for passwords and hashes tokens too); `Debug` prints neither.
//!
//! Facts about Iggy server 0.9.0-edge.5 and SDK 0.11.0-edge.4 relied on (server paths under
//! `core/`):
//!
//! - Root is the first user, id 0, created with every global permission and no stream
//!   entries (`metadata/src/stm/user.rs` `ensure_root_user`; `Permissions::root()` is the same).
//!   Root cannot be deleted (`CannotDeleteUser`, 48) and its permissions cannot change
//!   (`CannotChangePermissions`, 49); its status can.
//! - User ids are slab keys: 0-based, a freed id is reused, lowest first (`stm/id_slab.rs`).
//!   There is no limit on the number of users (`UsersLimitReached` is never answered).
//! - Usernames are 3..=50 bytes, passwords 3..=100 bytes; the SDK checks both before sending
//!   (`InvalidUsername`, `InvalidPassword`), also on login. A taken username is
//!   `UserAlreadyExists` (46); an unknown user id is `ResourceNotFound` (20).
//! - ChangePassword checks the current password (`InvalidCredentials`, 42, on mismatch)
//!   (`server/src/users.rs`).
//! - Login with a password: unknown user, wrong password and inactive user all answer
//!   `InvalidCredentials` alike (`server/src/auth.rs`).
//! - Login with a token: unknown or expired (expiry ≤ now) is `InvalidPersonalAccessToken`
//!   (53); an inactive owner is evicted with `UserInactive`, which the SDK surfaces as
//!   `Unauthenticated` (40) (`server/src/auth.rs`, SDK `error/eviction.rs`). The SDK refuses a
//!   token that is empty or over 255 bytes with `InvalidFormat` before sending.
//! - A token is the standard base64 (with padding) of 50 random bytes: 68 characters
//!   (`PersonalAccessToken::mint_raw_and_hash`). At most `max_tokens_per_user` per user
//!   (default 100, `server/config.toml`), checked before the duplicate name:
//!   `PersonalAccessTokensLimitReached` (52), then `PersonalAccessTokenAlreadyExists` (51)
//!   (`server/src/pat.rs`, `stm/user.rs`). Over TCP the only name check is the wire one
//!   (1..=255 bytes, `InvalidFormat` from the SDK); HTTP's 3..=30 bound does not apply. Deleting
//!   an unknown token is `ResourceNotFound`. Deleting a user deletes its tokens.

use iggy_common::{IggyError, Permissions, UserId, UserStatus};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;

/// Root's id.
pub const ROOT_USER_ID: UserId = 0;
pub const MIN_USERNAME_LEN: usize = 3;
pub const MAX_USERNAME_LEN: usize = 50;
pub const MIN_PASSWORD_LEN: usize = 3;
pub const MAX_PASSWORD_LEN: usize = 100;
/// Wire bound on a token name, and on a raw token at login.
pub const MAX_WIRE_NAME_LEN: usize = 255;
/// `personal_access_token.max_tokens_per_user`'s default.
pub const DEFAULT_MAX_TOKENS_PER_USER: usize = 100;
/// Random bytes in a personal access token.
pub const TOKEN_RANDOM_BYTES: usize = 50;

const PASSWORD_SALT: &[u8] = b"kafka-iggy-gateway/embedded/password/v1\0";
const TOKEN_SALT: &[u8] = b"kafka-iggy-gateway/embedded/pat/v1\0";

type Hash = [u8; 32];

fn password_hash(id: UserId, password: &str) -> Hash {
    let mut h = Sha256::new();
    h.update(PASSWORD_SALT);
    h.update(id.to_le_bytes());
    h.update(password.as_bytes());
    h.finalize().into()
}

fn token_hash(token: &str) -> Hash {
    let mut h = Sha256::new();
    h.update(TOKEN_SALT);
    h.update(token.as_bytes());
    h.finalize().into()
}

/// Compares without an early exit.
fn same_hash(a: &Hash, b: &Hash) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn check_username(username: &str) -> Result<(), IggyError> {
    if (MIN_USERNAME_LEN..=MAX_USERNAME_LEN).contains(&username.len()) {
        Ok(())
    } else {
        Err(IggyError::InvalidUsername)
    }
}

fn check_password(password: &str) -> Result<(), IggyError> {
    if (MIN_PASSWORD_LEN..=MAX_PASSWORD_LEN).contains(&password.len()) {
        Ok(())
    } else {
        Err(IggyError::InvalidPassword)
    }
}

fn check_wire_name(name: &str) -> Result<(), IggyError> {
    if name.is_empty() || name.len() > MAX_WIRE_NAME_LEN {
        Err(IggyError::InvalidFormat)
    } else {
        Ok(())
    }
}

fn user_not_found(id: UserId) -> IggyError {
    IggyError::ResourceNotFound(format!("user {id}"))
}

struct User {
    username: String,
    password_hash: Hash,
    status: UserStatus,
    permissions: Option<Permissions>,
    /// By name.
    tokens: BTreeMap<String, Token>,
}

struct Token {
    hash: Hash,
    expires_at_us: Option<u64>,
}

/// The model's users and their personal access tokens.
pub struct Users {
    users: BTreeMap<UserId, User>,
    /// Token hash -> (owner, token name).
    token_index: BTreeMap<Hash, (UserId, String)>,
    max_tokens_per_user: usize,
}

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct U<'a>(&'a User);
        impl fmt::Debug for U<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct("User")
                    .field("username", &self.0.username)
                    .field("status", &self.0.status)
                    .field("permissions", &self.0.permissions)
                    .field(
                        "tokens",
                        &self
                            .0
                            .tokens
                            .iter()
                            .map(|(n, t)| (n, t.expires_at_us))
                            .collect::<Vec<_>>(),
                    )
                    .finish_non_exhaustive()
            }
        }
        f.debug_struct("Users")
            .field(
                "users",
                &self.users.iter().map(|(id, u)| (id, U(u))).collect::<Vec<_>>(),
            )
            .field("max_tokens_per_user", &self.max_tokens_per_user)
            .finish_non_exhaustive()
    }
}

impl Users {
    /// The root user (id 0, every global permission), as Iggy creates it at first start.
    ///
    /// # Panics
    /// If `username` is not 3..=50 bytes (Iggy refuses to start then) or `password` not 3..=100.
    pub fn with_root(username: &str, password: &str) -> Users {
        assert!(
            check_username(username).is_ok(),
            "root username must be {MIN_USERNAME_LEN}..={MAX_USERNAME_LEN} bytes"
        );
        assert!(
            check_password(password).is_ok(),
            "root password must be {MIN_PASSWORD_LEN}..={MAX_PASSWORD_LEN} bytes"
        );
        let mut users = Users {
            users: BTreeMap::new(),
            token_index: BTreeMap::new(),
            max_tokens_per_user: DEFAULT_MAX_TOKENS_PER_USER,
        };
        let id = users
            .create_user(username, password, UserStatus::Active, Some(Permissions::root()))
            .expect("root fits an empty table");
        debug_assert_eq!(id, ROOT_USER_ID);
        users
    }

    /// Sets `personal_access_token.max_tokens_per_user` (Iggy refuses 0 at startup).
    pub fn set_max_tokens_per_user(&mut self, max: usize) {
        self.max_tokens_per_user = max.max(1);
    }

    /// The lowest free id, as Iggy's slab allocates.
    fn next_id(&self) -> UserId {
        let mut id = 0;
        for &used in self.users.keys() {
            if used != id {
                break;
            }
            id += 1;
        }
        id
    }

    fn user_mut(&mut self, id: UserId) -> Result<&mut User, IggyError> {
        self.users.get_mut(&id).ok_or_else(|| user_not_found(id))
    }

    /// CreateUser: `InvalidUsername`, `InvalidPassword`, `UserAlreadyExists`.
    pub fn create_user(
        &mut self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<UserId, IggyError> {
        check_username(username)?;
        check_password(password)?;
        if self.find(username).is_some() {
            return Err(IggyError::UserAlreadyExists);
        }
        let id = self.next_id();
        self.users.insert(
            id,
            User {
                username: username.to_owned(),
                password_hash: password_hash(id, password),
                status,
                permissions,
                tokens: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    /// UpdatePermissions: `ResourceNotFound`; root's are immutable (`CannotChangePermissions`).
    pub fn update_permissions(&mut self, id: UserId, permissions: Option<Permissions>) -> Result<(), IggyError> {
        let user = self.user_mut(id)?;
        if id == ROOT_USER_ID {
            return Err(IggyError::CannotChangePermissions(id));
        }
        user.permissions = permissions;
        Ok(())
    }

    /// UpdateUser's status: `ResourceNotFound`. Root may be deactivated too.
    pub fn update_status(&mut self, id: UserId, status: UserStatus) -> Result<(), IggyError> {
        self.user_mut(id)?.status = status;
        Ok(())
    }

    /// ChangePassword: `InvalidPassword` (either password's length), `ResourceNotFound`,
    /// `InvalidCredentials` (current password wrong).
    pub fn change_password(&mut self, id: UserId, current_password: &str, new_password: &str) -> Result<(), IggyError> {
        check_password(current_password)?;
        check_password(new_password)?;
        let user = self.user_mut(id)?;
        if !same_hash(&user.password_hash, &password_hash(id, current_password)) {
            return Err(IggyError::InvalidCredentials);
        }
        user.password_hash = password_hash(id, new_password);
        Ok(())
    }

    /// DeleteUser, with its tokens: `ResourceNotFound`; root is `CannotDeleteUser`.
    pub fn delete_user(&mut self, id: UserId) -> Result<(), IggyError> {
        if !self.users.contains_key(&id) {
            return Err(user_not_found(id));
        }
        if id == ROOT_USER_ID {
            return Err(IggyError::CannotDeleteUser(id));
        }
        self.users.remove(&id);
        self.token_index.retain(|_, (owner, _)| *owner != id);
        Ok(())
    }

    /// The user with this exact (case-sensitive) username.
    pub fn find(&self, username: &str) -> Option<UserId> {
        self.users
            .iter()
            .find(|(_, u)| u.username == username)
            .map(|(&id, _)| id)
    }

    pub fn username(&self, id: UserId) -> Option<&str> {
        self.users.get(&id).map(|u| u.username.as_str())
    }

    pub fn status(&self, id: UserId) -> Option<UserStatus> {
        self.users.get(&id).map(|u| u.status)
    }

    /// `None` both for an unknown user and for a user without permissions.
    pub fn permissions(&self, id: UserId) -> Option<&Permissions> {
        self.users.get(&id)?.permissions.as_ref()
    }

    /// CreatePersonalAccessToken for `user`; returns the raw token (base64 of `random`).
    /// Errors in the server's order: `InvalidFormat` (name empty or over 255 bytes),
    /// `ResourceNotFound` (no such user), `PersonalAccessTokensLimitReached`,
    /// `PersonalAccessTokenAlreadyExists`. `expires_at_us`: `None` never expires.
    pub fn create_personal_access_token(
        &mut self,
        user: UserId,
        name: &str,
        expires_at_us: Option<u64>,
        random: [u8; TOKEN_RANDOM_BYTES],
    ) -> Result<String, IggyError> {
        check_wire_name(name)?;
        let max = self.max_tokens_per_user;
        let owner = self.user_mut(user)?;
        if owner.tokens.len() >= max {
            return Err(IggyError::PersonalAccessTokensLimitReached(
                user,
                u32::try_from(max).unwrap_or(u32::MAX),
            ));
        }
        if owner.tokens.contains_key(name) {
            return Err(IggyError::PersonalAccessTokenAlreadyExists(name.to_owned(), user));
        }
        let raw = base64(&random);
        let hash = token_hash(&raw);
        owner.tokens.insert(name.to_owned(), Token { hash, expires_at_us });
        self.token_index.insert(hash, (user, name.to_owned()));
        Ok(raw)
    }

    /// DeletePersonalAccessToken: `InvalidFormat` (name), `ResourceNotFound`.
    pub fn delete_personal_access_token(&mut self, user: UserId, name: &str) -> Result<(), IggyError> {
        check_wire_name(name)?;
        let token = self
            .users
            .get_mut(&user)
            .and_then(|u| u.tokens.remove(name))
            .ok_or_else(|| IggyError::ResourceNotFound(format!("personal access token {name}")))?;
        if self
            .token_index
            .get(&token.hash)
            .is_some_and(|(owner, n)| *owner == user && n == name)
        {
            self.token_index.remove(&token.hash);
        }
        Ok(())
    }

    /// The user's token names and expiries, by name.
    pub fn personal_access_tokens(&self, user: UserId) -> Vec<(&str, Option<u64>)> {
        self.users
            .get(&user)
            .map(|u| u.tokens.iter().map(|(n, t)| (n.as_str(), t.expires_at_us)).collect())
            .unwrap_or_default()
    }

    /// LoginUser as the SDK's caller sees it: `InvalidUsername`/`InvalidPassword` (lengths,
    /// checked by the SDK), then `InvalidCredentials` for an unknown user, a wrong password or
    /// an inactive user alike.
    pub fn login_with_password(&self, username: &str, password: &str) -> Result<UserId, IggyError> {
        check_username(username)?;
        check_password(password)?;
        let id = self.find(username).ok_or(IggyError::InvalidCredentials)?;
        let user = &self.users[&id];
        if !same_hash(&user.password_hash, &password_hash(id, password)) || user.status != UserStatus::Active {
            return Err(IggyError::InvalidCredentials);
        }
        Ok(id)
    }

    /// LoginWithPersonalAccessToken as the SDK's caller sees it: `InvalidFormat` (empty or over
    /// 255 bytes), `InvalidPersonalAccessToken` (unknown, or expired: expiry ≤ `now_us`),
    /// `Unauthenticated` (owner inactive).
    pub fn login_with_token(&self, token: &str, now_us: u64) -> Result<UserId, IggyError> {
        check_wire_name(token)?;
        let (owner, name) = self
            .token_index
            .get(&token_hash(token))
            .ok_or(IggyError::InvalidPersonalAccessToken)?;
        let user = self.users.get(owner).ok_or(IggyError::InvalidPersonalAccessToken)?;
        let pat = user.tokens.get(name).ok_or(IggyError::InvalidPersonalAccessToken)?;
        if pat.expires_at_us.is_some_and(|at| at <= now_us) {
            return Err(IggyError::InvalidPersonalAccessToken);
        }
        if user.status != UserStatus::Active {
            return Err(IggyError::Unauthenticated);
        }
        Ok(*owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_common::GlobalPermissions;

    const ROOT: &str = "iggy";
    const ROOT_PW: &str = "iggy-secret";

    fn users() -> Users {
        Users::with_root(ROOT, ROOT_PW)
    }

    fn code(r: Result<impl fmt::Debug, IggyError>) -> u32 {
        r.expect_err("must fail").as_code()
    }

    fn reader() -> Permissions {
        Permissions {
            global: GlobalPermissions {
                read_streams: true,
                ..Default::default()
            },
            streams: None,
        }
    }

    #[test]
    fn authz_model_1_root_is_id_0_with_root_permissions() {
        let u = users();
        assert_eq!(u.find(ROOT), Some(0));
        assert_eq!(u.username(0), Some(ROOT));
        assert_eq!(u.permissions(0), Some(&Permissions::root()));
        assert!(u.permissions(0).unwrap().global.manage_users);
        assert_eq!(u.status(0), Some(UserStatus::Active));
        assert_eq!(u.login_with_password(ROOT, ROOT_PW), Ok(0));
    }

    #[test]
    fn authz_model_1_create_user_ids_start_after_root_and_reuse_lowest_free() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        let b = u.create_user("bob", "pw2", UserStatus::Active, Some(reader())).unwrap();
        let c = u.create_user("carol", "pw3", UserStatus::Active, None).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(u.permissions(b), Some(&reader()));
        assert_eq!(u.permissions(a), None);
        u.delete_user(b).unwrap();
        u.delete_user(a).unwrap();
        assert_eq!(u.create_user("dave", "pw4", UserStatus::Active, None), Ok(1));
        assert_eq!(u.create_user("erin", "pw5", UserStatus::Active, None), Ok(2));
    }

    #[test]
    fn authz_model_1_create_user_validates_name_and_password_lengths() {
        let mut u = users();
        assert_eq!(
            code(u.create_user("ab", "pw1", UserStatus::Active, None)),
            IggyError::InvalidUsername.as_code()
        );
        assert_eq!(
            code(u.create_user(&"a".repeat(51), "pw1", UserStatus::Active, None)),
            43
        );
        assert!(u.create_user(&"a".repeat(50), "pw1", UserStatus::Active, None).is_ok());
        assert!(u.create_user("abc", &"p".repeat(100), UserStatus::Active, None).is_ok());
        assert_eq!(
            code(u.create_user("abd", "pw", UserStatus::Active, None)),
            IggyError::InvalidPassword.as_code()
        );
        assert_eq!(
            code(u.create_user("abe", &"p".repeat(101), UserStatus::Active, None)),
            44
        );
    }

    #[test]
    fn authz_model_1_create_user_duplicate_name_is_user_already_exists() {
        let mut u = users();
        u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        assert_eq!(code(u.create_user("alice", "other", UserStatus::Inactive, None)), 46);
        assert_eq!(
            code(u.create_user(ROOT, "other", UserStatus::Active, None)),
            IggyError::UserAlreadyExists.as_code()
        );
        // Case-sensitive, as Iggy's index.
        assert!(u.create_user("Alice", "pw1", UserStatus::Active, None).is_ok());
    }

    #[test]
    fn authz_model_1_root_cannot_be_deleted() {
        let mut u = users();
        assert_eq!(
            code(u.delete_user(ROOT_USER_ID)),
            IggyError::CannotDeleteUser(0).as_code()
        );
        assert_eq!(u.find(ROOT), Some(0));
    }

    #[test]
    fn authz_model_1_unknown_user_is_resource_not_found() {
        let mut u = users();
        let nf = IggyError::ResourceNotFound(String::new()).as_code();
        assert_eq!(code(u.delete_user(9)), nf);
        assert_eq!(code(u.update_permissions(9, None)), nf);
        assert_eq!(code(u.update_status(9, UserStatus::Inactive)), nf);
        assert_eq!(code(u.change_password(9, "old", "new")), nf);
        assert_eq!(code(u.create_personal_access_token(9, "tok", None, [0; 50])), nf);
    }

    #[test]
    fn authz_model_1_root_permissions_are_immutable() {
        let mut u = users();
        assert_eq!(
            code(u.update_permissions(0, None)),
            IggyError::CannotChangePermissions(0).as_code()
        );
        assert_eq!(u.permissions(0), Some(&Permissions::root()));
    }

    #[test]
    fn authz_model_1_update_permissions_replaces_them() {
        let mut u = users();
        let a = u
            .create_user("alice", "pw1", UserStatus::Active, Some(Permissions::root()))
            .unwrap();
        u.update_permissions(a, Some(reader())).unwrap();
        assert_eq!(u.permissions(a), Some(&reader()));
        u.update_permissions(a, None).unwrap();
        assert_eq!(u.permissions(a), None);
    }

    #[test]
    fn authz_model_1_login_failures_are_all_invalid_credentials() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        let bad = IggyError::InvalidCredentials.as_code();
        assert_eq!(u.login_with_password("alice", "pw1"), Ok(a));
        assert_eq!(code(u.login_with_password("nobody", "pw1")), bad);
        assert_eq!(code(u.login_with_password("alice", "wrong")), bad);
        u.update_status(a, UserStatus::Inactive).unwrap();
        assert_eq!(code(u.login_with_password("alice", "pw1")), bad);
        u.update_status(a, UserStatus::Active).unwrap();
        assert_eq!(u.login_with_password("alice", "pw1"), Ok(a));
    }

    #[test]
    fn authz_model_1_login_length_checks_are_the_sdks() {
        let u = users();
        assert_eq!(
            code(u.login_with_password("ab", ROOT_PW)),
            IggyError::InvalidUsername.as_code()
        );
        assert_eq!(
            code(u.login_with_password(ROOT, "pw")),
            IggyError::InvalidPassword.as_code()
        );
    }

    #[test]
    fn authz_model_1_change_password_checks_the_current_one() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        assert_eq!(
            code(u.change_password(a, "wrong", "new-pw")),
            IggyError::InvalidCredentials.as_code()
        );
        assert_eq!(
            code(u.change_password(a, "pw1", "no")),
            IggyError::InvalidPassword.as_code()
        );
        u.change_password(a, "pw1", "new-pw").unwrap();
        assert_eq!(code(u.login_with_password("alice", "pw1")), 42);
        assert_eq!(u.login_with_password("alice", "new-pw"), Ok(a));
    }

    #[test]
    fn authz_model_1_token_is_base64_of_50_bytes() {
        let mut u = users();
        let t = u.create_personal_access_token(0, "tok", None, [0xff; 50]).unwrap();
        assert_eq!(t.len(), 68);
        assert_eq!(t, format!("{}//8=", "/".repeat(64)));
        let mut r = [0u8; 50];
        r[..6].copy_from_slice(b"foobar");
        let t = u.create_personal_access_token(0, "tok2", None, r).unwrap();
        assert_eq!(
            t,
            "Zm9vYmFyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        );
        assert_eq!(u.login_with_token(&t, 0), Ok(0));
    }

    #[test]
    fn authz_model_1_token_login_unknown_and_expired_are_invalid_token() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        let t = u.create_personal_access_token(a, "ci", Some(1_000), [7; 50]).unwrap();
        let invalid = IggyError::InvalidPersonalAccessToken.as_code();
        assert_eq!(u.login_with_token(&t, 999), Ok(a));
        assert_eq!(code(u.login_with_token(&t, 1_000)), invalid);
        assert_eq!(code(u.login_with_token(&t, 5_000)), invalid);
        assert_eq!(code(u.login_with_token("not-a-token", 0)), invalid);
        assert_eq!(code(u.login_with_token("", 0)), IggyError::InvalidFormat.as_code());
        assert_eq!(
            code(u.login_with_token(&"x".repeat(256), 0)),
            IggyError::InvalidFormat.as_code()
        );
    }

    #[test]
    fn authz_model_1_token_login_of_inactive_user_is_unauthenticated() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        let t = u.create_personal_access_token(a, "ci", None, [7; 50]).unwrap();
        u.update_status(a, UserStatus::Inactive).unwrap();
        assert_eq!(code(u.login_with_token(&t, 0)), IggyError::Unauthenticated.as_code());
        // An expired token of an inactive user is still reported as the token's fault.
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Inactive, None).unwrap();
        let t = u.create_personal_access_token(a, "ci", Some(10), [7; 50]).unwrap();
        assert_eq!(
            code(u.login_with_token(&t, 10)),
            IggyError::InvalidPersonalAccessToken.as_code()
        );
    }

    #[test]
    fn authz_model_1_token_duplicate_name_per_user() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        u.create_personal_access_token(a, "ci", None, [1; 50]).unwrap();
        assert_eq!(
            code(u.create_personal_access_token(a, "ci", None, [2; 50])),
            IggyError::PersonalAccessTokenAlreadyExists(String::new(), 0).as_code()
        );
        // Another user may use the same name.
        assert!(u.create_personal_access_token(0, "ci", None, [3; 50]).is_ok());
    }

    #[test]
    fn authz_model_1_token_limit_is_checked_before_duplicate_name() {
        let mut u = users();
        u.set_max_tokens_per_user(2);
        u.create_personal_access_token(0, "one", None, [1; 50]).unwrap();
        u.create_personal_access_token(0, "two", None, [2; 50]).unwrap();
        let limit = IggyError::PersonalAccessTokensLimitReached(0, 0).as_code();
        assert_eq!(code(u.create_personal_access_token(0, "three", None, [3; 50])), limit);
        assert_eq!(code(u.create_personal_access_token(0, "one", None, [3; 50])), limit);
        u.delete_personal_access_token(0, "one").unwrap();
        assert!(u.create_personal_access_token(0, "three", None, [3; 50]).is_ok());
    }

    #[test]
    fn authz_model_1_default_token_limit_is_100() {
        let mut u = users();
        for i in 0..100u8 {
            let mut r = [0u8; 50];
            r[0] = i;
            u.create_personal_access_token(0, &format!("t{i}"), None, r).unwrap();
        }
        assert_eq!(code(u.create_personal_access_token(0, "t100", None, [0xee; 50])), 52);
    }

    #[test]
    fn authz_model_1_token_name_is_only_wire_bounded() {
        let mut u = users();
        assert_eq!(
            code(u.create_personal_access_token(0, "", None, [1; 50])),
            IggyError::InvalidFormat.as_code()
        );
        assert_eq!(
            code(u.create_personal_access_token(0, &"n".repeat(256), None, [1; 50])),
            IggyError::InvalidFormat.as_code()
        );
        assert!(u.create_personal_access_token(0, "x", None, [1; 50]).is_ok());
        assert!(u
            .create_personal_access_token(0, &"n".repeat(255), None, [2; 50])
            .is_ok());
    }

    #[test]
    fn authz_model_1_deleted_token_no_longer_logs_in() {
        let mut u = users();
        let t = u.create_personal_access_token(0, "ci", None, [9; 50]).unwrap();
        u.delete_personal_access_token(0, "ci").unwrap();
        assert_eq!(
            code(u.login_with_token(&t, 0)),
            IggyError::InvalidPersonalAccessToken.as_code()
        );
        assert_eq!(
            code(u.delete_personal_access_token(0, "ci")),
            IggyError::ResourceNotFound(String::new()).as_code()
        );
        assert!(u.personal_access_tokens(0).is_empty());
    }

    #[test]
    fn authz_model_1_deleting_a_user_deletes_its_tokens() {
        let mut u = users();
        let a = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        let t = u.create_personal_access_token(a, "ci", None, [4; 50]).unwrap();
        u.delete_user(a).unwrap();
        let again = u.create_user("alice", "pw1", UserStatus::Active, None).unwrap();
        assert_eq!(again, a);
        assert_eq!(
            code(u.login_with_token(&t, 0)),
            IggyError::InvalidPersonalAccessToken.as_code()
        );
        assert!(u.personal_access_tokens(again).is_empty());
    }

    #[test]
    fn authz_model_1_debug_never_prints_secrets() {
        let mut u = users();
        let t = u.create_personal_access_token(0, "ci", Some(5), [5; 50]).unwrap();
        let dbg = format!("{u:?}");
        assert!(dbg.contains(ROOT) && dbg.contains("ci"), "{dbg}");
        assert!(!dbg.contains(ROOT_PW), "{dbg}");
        assert!(!dbg.contains(&t), "{dbg}");
        assert!(!dbg.to_lowercase().contains("hash"), "{dbg}");
        let pw_hash = password_hash(0, ROOT_PW);
        let tok_hash = token_hash(&t);
        for h in [pw_hash, tok_hash] {
            assert!(!dbg.contains(&format!("{h:?}")), "{dbg}");
            assert!(!dbg.contains(&format!("{}, {}, {}", h[0], h[1], h[2])), "{dbg}");
        }
    }
}
