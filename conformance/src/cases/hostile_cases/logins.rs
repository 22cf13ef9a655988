//! Logins as an attacker makes them (issue 50, row 9): guesses at one username from many
//! addresses at once, and one user holding every backend session with many tokens
//! (AUTH-SASL-THROTTLE-2, LIMIT-SESSIONS-USER-1).

use super::launch::{free_addresses, Launched, Launcher, ROOT};
use super::{Probes, Watchdog, LIVENESS};
use crate::cases::group_cases::support::{POLL_INTERVAL, WAIT};
use crate::cases::Outcome;
use anyhow::{bail, ensure, Context};
use kafka_iggy_gateway::auth::credentials::Credentials;
use kafka_iggy_gateway::auth::throttle::FREE_SHARED_FAILURES;
use kafka_iggy_gateway::backend::Backend;
use kafka_protocol::messages::SaslAuthenticateResponse;
use kafka_wire_client::WireClient;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Guesses at one username, each from an address of its own: three past the username's free
/// failures, which wait 250 ms, 500 ms and 1 s in turn.
const GUESSES: u32 = FREE_SHARED_FAILURES + 3;
/// The rule counted each time a login waits before Iggy is asked.
const WAITED: &str = "AUTH-SASL-THROTTLE-1";

/// A connection from `source` to `target`, bounded by [`LIVENESS`].
async fn connect_from(source: Ipv4Addr, target: SocketAddr) -> anyhow::Result<WireClient<TcpStream>> {
    let socket = TcpSocket::new_v4()?;
    socket
        .bind(SocketAddr::new(IpAddr::V4(source), 0))
        .with_context(|| format!("binding {source}"))?;
    let stream = tokio::time::timeout(LIVENESS, socket.connect(target))
        .await
        .with_context(|| format!("connecting from {source}: not answered within {LIVENESS:?}"))??;
    Ok(WireClient::new(stream))
}

/// A SASL PLAIN login from `source` on a connection of its own, answered within the
/// authentication deadline's 30 s; the connection, kept open, and the answer.
async fn login_from(
    source: Ipv4Addr,
    target: SocketAddr,
    user: &str,
    secret: &str,
) -> anyhow::Result<(WireClient<TcpStream>, SaslAuthenticateResponse)> {
    let mut client = connect_from(source, target).await?;
    let answer = tokio::time::timeout(WAIT, client.sasl_plain(user, secret))
        .await
        .with_context(|| format!("a login of {user} from {source}: not answered within {WAIT:?}"))??;
    Ok((client, answer))
}

/// A wrong password for `user` from `source`, which must be refused.
async fn guess(source: Ipv4Addr, target: SocketAddr, user: String, n: u32) -> anyhow::Result<()> {
    let (_, answer) = login_from(source, target, &user, &format!("guess-{n}")).await?;
    ensure!(
        answer.error_code == SASL_AUTHENTICATION_FAILED,
        "guess {n} from {source} answered {}, not SASL_AUTHENTICATION_FAILED",
        answer.error_code
    );
    Ok(())
}

/// Waits, polling, until `gateway` has counted a login waiting ([`WAITED`]) more than `before`
/// times, while `guesses` are still being answered; fails if every guess was answered and none
/// waited (they read the username's count in parallel instead of taking turns), or after
/// [`WAIT`]. Answered guesses are taken off `guesses`, their errors returned.
async fn await_a_wait(
    gateway: &impl Launched,
    guesses: &mut JoinSet<anyhow::Result<()>>,
    before: u64,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let hits = gateway.limit_hits(WAITED).await? - before;
        if hits > 0 {
            return Ok(());
        }
        while let Some(done) = guesses.try_join_next() {
            done.context("a guess task")??;
        }
        if guesses.is_empty() {
            // A wait counted as the last guess was answered.
            let hits = gateway.limit_hits(WAITED).await? - before;
            ensure!(
                hits > 0,
                "all {GUESSES} guesses at one username from {GUESSES} addresses were answered and none waited ({WAITED} counted 0 times): they read the username's count at once instead of taking turns"
            );
            return Ok(());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{WAITED} counted 0 times after {WAIT:?} with guesses still unanswered"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Issue 50, row 9 (AUTH-SASL-THROTTLE-2): the user logs in from its address (127.0.0.1); then
/// 13 wrong passwords for it are sent at once, each from an address of its own (127.0.5.x).
/// They reach Iggy one at a time, each after waiting what the username's failures say: the
/// three past the ten free failures wait, whatever their address (counted as waits of
/// AUTH-SASL-THROTTLE-1), where guesses from as many addresses used to all ask Iggy at once.
/// While they wait, the user logs in from its own address without waiting and without
/// queueing behind them. Once they are answered, a login of the user from an address it never
/// used (127.0.6.1) is delayed, not refused. Iggy is asked once per guess. The well-behaved
/// client (ApiVersions, allowed before authentication) is served throughout.
pub async fn hostile_guesses_at_one_username_from_many_addresses<L: Launcher>(launcher: &L) -> anyhow::Result<Outcome> {
    let listen = free_addresses(1)?[0];
    let gateway = launcher
        .start(listen, vec!["--sasl".to_string(), "plain".to_string()])
        .await?;
    let target: SocketAddr = gateway.endpoint().bootstrap.parse()?;
    let (user, password) = ROOT;
    let home = Ipv4Addr::LOCALHOST;
    let (_, first) = login_from(home, target, user, password).await?;
    ensure!(
        first.error_code == 0,
        "the user's own login answered {}",
        first.error_code
    );
    let watchdog = Watchdog::start(gateway.endpoint(), Probes::API_VERSIONS).await?;
    watchdog
        .guard(async {
            let waits_before = gateway.limit_hits(WAITED).await?;
            let logins_before = gateway.iggy_logins().await?;
            let mut guesses = JoinSet::new();
            for n in 0..GUESSES {
                let source = Ipv4Addr::new(127, 0, 5, n as u8 + 1);
                guesses.spawn(guess(source, target, user.to_string(), n));
            }
            // The first guess past the free ones waits: the rest are still to be answered.
            await_a_wait(&gateway, &mut guesses, waits_before).await?;
            let (_, own) = login_from(home, target, user, password).await?;
            ensure!(
                own.error_code == 0,
                "the user's login from its own address during the attack answered {}",
                own.error_code
            );
            // Queued behind the guesses, it would come after the last of them, which waits
            // 250 ms, 500 ms and 1 s of the username's turn after the first wait was counted.
            while let Some(done) = guesses.try_join_next() {
                done.context("a guess task")??;
            }
            ensure!(
                !guesses.is_empty(),
                "all {GUESSES} guesses were answered before the user's login from its own address: it waited behind them"
            );
            while let Some(done) = guesses.join_next().await {
                done.context("a guess task")??;
            }
            let waits = gateway.limit_hits(WAITED).await? - waits_before;
            let expected = u64::from(GUESSES - FREE_SHARED_FAILURES);
            ensure!(
                waits == expected,
                "{waits} logins waited during the attack, expected {expected}: the {GUESSES} guesses past the username's {FREE_SHARED_FAILURES} free failures, not the user's own login (fewer: guesses from many addresses did not wait for one another)"
            );
            let asked = gateway.iggy_logins().await? - logins_before;
            ensure!(
                asked == u64::from(GUESSES),
                "Iggy was asked {asked} times for {GUESSES} guesses and a login with pooled credentials"
            );
            let (_, elsewhere) = login_from(Ipv4Addr::new(127, 0, 6, 1), target, user, password).await?;
            ensure!(
                elsewhere.error_code == 0,
                "after the attack, the user's login from a new address answered {}: it was locked out",
                elsewhere.error_code
            );
            Ok(())
        })
        .await?;
    gateway.stop().await;
    Ok(Outcome::Passed)
}

/// Sessions the case's gateway holds at most, and per user.
const MAX_SESSIONS: usize = 8;
const MAX_SESSIONS_PER_USER: usize = 4;
/// Tokens the hoarding user logs in with, one connection each.
const HOARDED: usize = 12;

/// Issue 50, row 9 (LIMIT-SESSIONS-USER-1): on a gateway holding 8 backend sessions, 4 per
/// user, one user logs in with 12 personal access tokens on 12 connections held open (each a
/// session of its own, AUTH-SASL-JOIN-1 pools by credentials). Four are served and eight
/// refused with SASL_AUTHENTICATION_FAILED saying the user has no room; another user then logs
/// in, where the first used to hold every session and leave it "no room for another session".
/// Needs the Iggy model to make the tokens, so it runs only in process.
pub async fn hostile_one_user_with_many_tokens_leaves_sessions_for_others<L: Launcher>(
    launcher: &L,
) -> anyhow::Result<Outcome> {
    let Some(model) = launcher.model() else {
        return Ok(Outcome::Skipped(
            "needs the Iggy model to make a user's tokens: the gateway runs in another process".into(),
        ));
    };
    let hoarder = format!("hoarder-{}", std::process::id());
    let other = format!("other-{}", std::process::id());
    model.create_user(&hoarder, "hoarder-password", iggy_common::UserStatus::Active, None)?;
    model.create_user(&other, "other-password", iggy_common::UserStatus::Active, None)?;
    let (as_hoarder, _) = model
        .open_session(&Credentials::password(&hoarder, "hoarder-password"))
        .await?;
    let tokens = (0..HOARDED)
        .map(|n| as_hoarder.create_personal_access_token(&format!("hoard-{n}"), None))
        .collect::<Result<Vec<_>, _>>()?;
    let listen = free_addresses(1)?[0];
    let flags = vec![
        "--sasl".to_string(),
        "plain".to_string(),
        "--sasl-max-sessions".to_string(),
        MAX_SESSIONS.to_string(),
        "--sasl-max-sessions-per-user".to_string(),
        MAX_SESSIONS_PER_USER.to_string(),
    ];
    let gateway = launcher.start(listen, flags).await?;
    let target: SocketAddr = gateway.endpoint().bootstrap.parse()?;
    let watchdog = Watchdog::start(gateway.endpoint(), Probes::API_VERSIONS).await?;
    watchdog
        .guard(async {
            let mut held = Vec::new();
            let mut refused = Vec::new();
            for (n, token) in tokens.iter().enumerate() {
                let (client, answer) = login_from(Ipv4Addr::LOCALHOST, target, &hoarder, token).await?;
                match answer.error_code {
                    0 => held.push(client),
                    SASL_AUTHENTICATION_FAILED => refused.push(answer.error_message.map(|m| m.to_string())),
                    code => bail!("the hoarder's login {n} answered {code}"),
                }
            }
            ensure!(
                held.len() == MAX_SESSIONS_PER_USER,
                "one user holds {} sessions with {HOARDED} tokens on a gateway allowing {MAX_SESSIONS_PER_USER} per user",
                held.len()
            );
            ensure!(
                refused
                    .iter()
                    .all(|m| m.as_deref().is_some_and(|m| m.contains("the user has no room"))),
                "the hoarder's refusals did not say the user has no room: {refused:?}"
            );
            let (_, answer) = login_from(Ipv4Addr::LOCALHOST, target, &other, "other-password").await?;
            ensure!(
                answer.error_code == 0,
                "another user's login answered {} ({:?}) while one user held {} sessions",
                answer.error_code,
                answer.error_message,
                held.len()
            );
            Ok(())
        })
        .await?;
    gateway.stop().await;
    Ok(Outcome::Passed)
}
