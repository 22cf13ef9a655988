//! A client rotating through the addresses of its prefix (issue 50, row 9). An IPv6 host is
//! handed a /64 and may connect from any address in it, so limits counted per full address let
//! it open as many connections as it has addresses. The gateway counts them per address prefix
//! as well (LIMIT-ADDRESS-KEY-1, LIMIT-CONNECTIONS-PREFIX-1).
//!
//! Loopback offers a case 16 million IPv4 addresses but one IPv6 address, so the case keys IPv4
//! clients by a /24 (`address_prefix_v4`), the same keying the /64 default applies to IPv6; the
//! IPv6 default itself is tested in process (gateway/src/server/tests.rs).

use super::launch::{free_addresses, Launched, Launcher};
use super::peers::{keep_speaking, speak_from};
use super::{Probes, Watchdog};
use crate::cases::Outcome;
use anyhow::ensure;
use std::net::{Ipv4Addr, SocketAddr};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The prefix the case keys IPv4 clients by.
const PREFIX_BITS: u8 = 24;
/// Connections one prefix may hold.
const PER_PREFIX: usize = 16;
/// Addresses of one /24 the attacker rotates through, one connection from each.
const ROTATED: u8 = 64;
/// The gateway's table: room for every rotated connection, so that only the prefix limit stops
/// them.
const TABLE: usize = 200;

/// Address `host` of the attacker's /24 (127.0.3.0/24).
fn attacker(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 3, host)
}

/// Issue 50, row 9 (LIMIT-ADDRESS-KEY-1, LIMIT-CONNECTIONS-PREFIX-1): a client connects from 64
/// addresses of one /24, one connection each, every one speaking, against a gateway keying
/// IPv4 clients by /24 with 16 connections per prefix and a table of 200. The first 16 are
/// served and the other 48 closed at once, though no address holds more than one; a client of
/// another /24 is then served, and the well-behaved client (127.0.0.1) is served throughout.
pub async fn hostile_connections_rotating_through_one_address_prefix<L: Launcher>(
    launcher: &L,
) -> anyhow::Result<Outcome> {
    let listen = free_addresses(1)?[0];
    let flags = vec![
        "--address-prefix-v4".to_string(),
        PREFIX_BITS.to_string(),
        "--max-connections-per-prefix".to_string(),
        PER_PREFIX.to_string(),
        "--max-connections".to_string(),
        TABLE.to_string(),
    ];
    let gateway = launcher.start(listen, flags).await?;
    let target: SocketAddr = gateway.endpoint().bootstrap.parse()?;
    let watchdog = Watchdog::start(gateway.endpoint(), Probes::SERVING).await?;
    watchdog
        .guard(async {
            let (stop, stopped) = watch::channel(false);
            let mut speaking = JoinSet::new();
            let (mut held, mut refused) = (0, 0);
            for host in 1..=ROTATED {
                match speak_from(attacker(host), target).await? {
                    Some(client) => {
                        held += 1;
                        speaking.spawn(keep_speaking(client, stopped.clone()));
                    }
                    None => refused += 1,
                }
            }
            ensure!(
                held == PER_PREFIX,
                "{held} of {ROTATED} connections from one /{PREFIX_BITS}, one per address, were served ({refused} closed): expected {PER_PREFIX}, the prefix's quota"
            );
            let again = speak_from(attacker(ROTATED + 1), target).await?;
            ensure!(
                again.is_none(),
                "a new address of the full prefix was served"
            );
            let elsewhere = speak_from(Ipv4Addr::new(127, 0, 4, 1), target).await?;
            ensure!(
                elsewhere.is_some(),
                "a client of another /{PREFIX_BITS} was closed while one prefix held its quota"
            );
            stop.send_replace(true);
            while speaking.join_next().await.is_some() {}
            Ok(())
        })
        .await?;
    gateway.stop().await;
    Ok(Outcome::Passed)
}
