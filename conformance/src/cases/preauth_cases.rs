//! Valid requests that amplify, before a client has proved anything (docs/spec/limits.md,
//! docs/spec/auth.md): connections that never speak, frames too large for a login, logins that
//! never finish, guesses sent in parallel, and the same login many times at once. Every case
//! starts its own gateway on a fresh embedded model, whose login count (and, where logins must
//! overlap, login delay) it reads, so they run in `tests/preauth_suite.rs` and not against an
//! outside endpoint. No case sleeps to synchronise; every wait is bounded, and what a case times
//! is a lower bound the gateway must wait at least, never how fast it is.

use crate::endpoint::{LocalGateway, LocalOptions};
use anyhow::{bail, ensure, Context};
use iggy_common::UserStatus;
use kafka_iggy_gateway::auth::settings::{Mechanism, SaslSettings};
use kafka_iggy_gateway::backend::embedded::{EmbeddedBackend, EmbeddedConfig};
use kafka_iggy_gateway::clock::SystemClock;
use kafka_iggy_gateway::limits::{LimitSettings, DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_wire_client::WireClient;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// The failure guard of every wait that should succeed.
const WAIT: Duration = Duration::from_secs(30);
/// How long a connection the gateway must close is given to stay open anyway: well below the
/// 30 s read timeout and the 600 s idle timeout that would close it without the rule.
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

macro_rules! preauth_cases {
    ($($case:ident: [$($rule:literal),+ $(,)?]),+ $(,)?) => {
        /// Every case's name.
        pub const NAMES: &[&str] = &[$(stringify!($case)),+];

        /// Every case, for the trace.
        pub const CASES: &[crate::cases::ListedCase] = &[$(crate::cases::ListedCase { name: stringify!($case), rules: &[$($rule),+] }),+];

        /// The area these cases report under.
        pub const AREA: &str = "preauth";
    };
}

preauth_cases!(
    connections_that_never_speak_make_room_for_a_client_that_does: ["LIMIT-CONNECTIONS-SHED-1", "LIMIT-CONNECTIONS-1"],
    a_frame_above_512_kib_before_authentication_is_refused: ["LIMIT-PREAUTH-FRAME-1"],
    a_connection_that_never_authenticates_is_closed_at_the_deadline: ["LIMIT-PREAUTH-DEADLINE-1"],
    parallel_guesses_from_one_address_wait_their_turn_before_iggy: ["AUTH-SASL-THROTTLE-1"],
    a_success_for_another_user_keeps_the_first_users_failures: ["AUTH-SASL-THROTTLE-1"],
    concurrent_logins_with_the_same_credentials_open_one_backend_session: ["AUTH-SASL-JOIN-1", "LIMIT-SESSIONS-1"],
);

/// A fresh model whose logins take `login_delay`, as a real server's round trip does.
fn model(login_delay: Duration) -> Arc<EmbeddedBackend> {
    Arc::new(EmbeddedBackend::new(
        Arc::new(SystemClock),
        EmbeddedConfig {
            login_delay,
            ..EmbeddedConfig::default()
        },
    ))
}

/// A gateway on `backend` with `limits`, SASL PLAIN on when `sasl` says so.
async fn gateway(
    backend: Arc<EmbeddedBackend>,
    limits: LimitSettings,
    sasl: bool,
) -> anyhow::Result<LocalGateway<EmbeddedBackend>> {
    LocalGateway::serve(
        backend,
        LocalOptions {
            limits,
            sasl: SaslSettings {
                mechanism: sasl.then_some(Mechanism::Plain),
                ..SaslSettings::default()
            },
            ..LocalOptions::default()
        },
    )
    .await
}

/// Whether an ApiVersions on `client` is answered within [`WAIT`].
async fn answers(client: &mut WireClient<TcpStream>) -> anyhow::Result<()> {
    let response: ApiVersionsResponse = timeout(
        WAIT,
        client.request(ApiKey::ApiVersions, 3, &super::api_versions_request()),
    )
    .await
    .context("ApiVersions not answered within 30 s")??;
    ensure!(response.error_code == 0, "ApiVersions answered {}", response.error_code);
    Ok(())
}

/// Whether the gateway closes `stream` within `within`, having sent nothing on it.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> anyhow::Result<bool> {
    let mut byte = [0u8; 1];
    match timeout(within, stream.read(&mut byte)).await {
        Err(_) => Ok(false),
        Ok(Ok(0)) => Ok(true),
        Ok(Ok(_)) => bail!("the gateway answered instead of closing"),
        Ok(Err(e)) if is_reset(&e) => Ok(true),
        Ok(Err(e)) => Err(e).context("reading for the close"),
    }
}

fn is_reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe)
}

/// A SASL PLAIN login on a new connection: SaslAuthenticate's error code (0: logged in).
async fn login(bootstrap: &str, user: &str, password: &str) -> anyhow::Result<i16> {
    let mut client = WireClient::connect(bootstrap).await?;
    let answer = timeout(WAIT, client.sasl_plain(user, password))
        .await
        .context("SaslAuthenticate not answered within 30 s")??;
    Ok(answer.error_code)
}

/// A login with a wrong password, which must be refused.
async fn guess(bootstrap: String, user: &'static str) -> anyhow::Result<()> {
    let code = login(&bootstrap, user, "not-the-password").await?;
    ensure!(
        code == 58,
        "a wrong password answered {code}, not SASL_AUTHENTICATION_FAILED"
    );
    Ok(())
}

/// Connections the flood opens, against a table of [`FLOOD_MAX_CONNECTIONS`].
const FLOOD_CONNECTIONS: usize = 3_000;
const FLOOD_MAX_CONNECTIONS: usize = 1_000;

/// LIMIT-CONNECTIONS-SHED-1: 3,000 connections that never send a byte, against a table of
/// 1,000, cannot keep out a client that connects after them and speaks; nor is a client that
/// spoke before them closed to make room for them.
pub async fn connections_that_never_speak_make_room_for_a_client_that_does() -> anyhow::Result<()> {
    let gateway = gateway(
        model(Duration::ZERO),
        LimitSettings {
            max_connections: Some(FLOOD_MAX_CONNECTIONS),
            // Only connections that never spoke may be shed here, however long the flood takes.
            shed_idle_after_ms: Some(3_600_000),
            ..LimitSettings::default()
        },
        false,
    )
    .await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    let mut talker = WireClient::connect(&bootstrap).await?;
    answers(&mut talker).await.context("before the flood")?;
    let mut silent = Vec::with_capacity(FLOOD_CONNECTIONS);
    for _ in 0..FLOOD_CONNECTIONS {
        silent.push(
            timeout(WAIT, TcpStream::connect(&bootstrap))
                .await
                .context("connect")??,
        );
    }
    let mut newcomer = WireClient::connect(&bootstrap).await?;
    answers(&mut newcomer)
        .await
        .context("a client connecting after 3,000 silent connections is not served")?;
    answers(&mut talker)
        .await
        .context("the client that spoke before the flood was closed for it")?;
    // The gateway holds at most max_connections: of the silent ones, at least the excess was
    // closed (the talker and the newcomer hold two places).
    let mut closed = 0;
    for stream in &mut silent {
        if closed_within(stream, Duration::from_millis(1)).await? {
            closed += 1;
        }
    }
    let excess = FLOOD_CONNECTIONS + 2 - FLOOD_MAX_CONNECTIONS;
    ensure!(
        closed >= excess,
        "{closed} silent connections closed; at least {excess} must be, for {FLOOD_MAX_CONNECTIONS} places"
    );
    gateway.stop().await;
    Ok(())
}

/// LIMIT-PREAUTH-FRAME-1: before authentication a frame above 512 KiB is refused from its
/// prefix, though max_frame_size (4 MiB here) would take it.
pub async fn a_frame_above_512_kib_before_authentication_is_refused() -> anyhow::Result<()> {
    let gateway = gateway(model(Duration::ZERO), LimitSettings::default(), true).await?;
    let mut stream = TcpStream::connect(&gateway.endpoint.bootstrap).await?;
    let declared = DEFAULT_MAX_UNAUTHENTICATED_FRAME_BYTES as i32 + 1;
    let mut start = declared.to_be_bytes().to_vec();
    start.extend_from_slice(&[0u8; 1024]);
    tokio::io::AsyncWriteExt::write_all(&mut stream, &start).await?;
    ensure!(
        closed_within(&mut stream, CLOSED_WITHIN).await?,
        "a {declared}-byte frame before authentication was not refused within {CLOSED_WITHIN:?}"
    );
    // A frame within the bound is read and answered.
    let mut client = WireClient::connect(&gateway.endpoint.bootstrap).await?;
    answers(&mut client).await?;
    gateway.stop().await;
    Ok(())
}

/// LIMIT-PREAUTH-DEADLINE-1: a connection that asks ApiVersions and never authenticates is
/// closed at the authentication deadline (1 s here), not at the 600 s idle timeout.
pub async fn a_connection_that_never_authenticates_is_closed_at_the_deadline() -> anyhow::Result<()> {
    let gateway = gateway(
        model(Duration::ZERO),
        LimitSettings {
            authentication_timeout_ms: Some(1_000),
            ..LimitSettings::default()
        },
        true,
    )
    .await?;
    let mut client = WireClient::connect(&gateway.endpoint.bootstrap).await?;
    answers(&mut client).await?;
    let closed = timeout(CLOSED_WITHIN, client.closed_by_server()).await;
    ensure!(
        matches!(closed, Ok(Ok(true)) | Ok(Err(_))),
        "an unauthenticated connection was still open {CLOSED_WITHIN:?} after a 1 s deadline"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-THROTTLE-1: after four failures, three wrong passwords sent at once from one
/// address are not tried at once: each waits its turn and its own delay (500 ms, 1 s, 2 s)
/// before Iggy is asked, and Iggy is asked once per guess.
pub async fn parallel_guesses_from_one_address_wait_their_turn_before_iggy() -> anyhow::Result<()> {
    let backend = model(Duration::ZERO);
    backend.create_user("ann", "right-password", UserStatus::Active, None)?;
    let gateway = gateway(backend.clone(), LimitSettings::default(), true).await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    for _ in 0..4 {
        guess(bootstrap.clone(), "ann").await?;
    }
    ensure!(
        backend.logins_attempted() == 4,
        "{} logins for 4 guesses",
        backend.logins_attempted()
    );
    let started = Instant::now();
    let mut parallel = tokio::task::JoinSet::new();
    for _ in 0..3 {
        parallel.spawn(guess(bootstrap.clone(), "ann"));
    }
    let first = timeout(WAIT, parallel.join_next())
        .await
        .context("no guess answered within 30 s")?
        .context("no guess was started")?;
    first??;
    // The first answer came after its own login; the next guess still waits its 1 s.
    let at_first_answer = backend.logins_attempted();
    ensure!(
        at_first_answer == 5,
        "{at_first_answer} logins when the first of three parallel guesses was answered: they did not take turns"
    );
    while let Some(done) = timeout(WAIT, parallel.join_next())
        .await
        .context("guesses not answered")?
    {
        done??;
    }
    ensure!(
        backend.logins_attempted() == 7,
        "{} logins for 7 guesses",
        backend.logins_attempted()
    );
    let waited = started.elapsed();
    ensure!(
        waited >= Duration::from_millis(500 + 1_000 + 2_000),
        "three parallel guesses were all answered in {waited:?}; they wait 3.5 s in turn"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-THROTTLE-1: user B logging in from the address does not forgive the failures
/// counted against user A there: A's next guess still waits before Iggy is asked.
pub async fn a_success_for_another_user_keeps_the_first_users_failures() -> anyhow::Result<()> {
    let backend = model(Duration::ZERO);
    backend.create_user("ann", "right-password", UserStatus::Active, None)?;
    backend.create_user("ben", "right-password", UserStatus::Active, None)?;
    let gateway = gateway(backend.clone(), LimitSettings::default(), true).await?;
    let bootstrap = gateway.endpoint.bootstrap.clone();
    for _ in 0..4 {
        guess(bootstrap.clone(), "ann").await?;
    }
    let code = login(&bootstrap, "ben", "right-password").await?;
    ensure!(code == 0, "ben's right password answered {code}");
    let started = Instant::now();
    guess(bootstrap.clone(), "ann").await?;
    let waited = started.elapsed();
    ensure!(
        waited >= Duration::from_millis(500),
        "ann's fifth guess was answered in {waited:?}: ben's login forgave her four failures"
    );
    gateway.stop().await;
    Ok(())
}

/// AUTH-SASL-JOIN-1, LIMIT-SESSIONS-1: five clients logging in at once with the same
/// credentials share one backend session: Iggy is asked once, and one session is alive.
pub async fn concurrent_logins_with_the_same_credentials_open_one_backend_session() -> anyhow::Result<()> {
    let backend = model(Duration::from_millis(200));
    backend.create_user("cat", "right-password", UserStatus::Active, None)?;
    let gateway = gateway(backend.clone(), LimitSettings::default(), true).await?;
    let mut logins = tokio::task::JoinSet::new();
    for _ in 0..5 {
        let bootstrap = gateway.endpoint.bootstrap.clone();
        logins.spawn(async move { login(&bootstrap, "cat", "right-password").await });
    }
    while let Some(code) = timeout(WAIT, logins.join_next()).await.context("logins not answered")? {
        let code = code??;
        ensure!(code == 0, "a right password answered {code}");
    }
    ensure!(
        backend.logins_attempted() == 1,
        "five concurrent logins asked Iggy {} times",
        backend.logins_attempted()
    );
    let live = gateway.gateway.sessions.live();
    ensure!(live == 1, "{live} backend sessions alive for one principal");
    gateway.stop().await;
    Ok(())
}
