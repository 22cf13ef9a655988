//! The [`Watchdog`] every hostile case runs under: probe connections (and, for attacks on the
//! group coordinator, a group member heartbeating) answered within [`LIVENESS`] throughout.

use super::*;

// ---------------------------------------------------------------------------------------------
// The watchdog: a well-behaved client that must be answered while an attack runs.

/// Which requests the watchdog sends each period. ApiVersions always: it needs nothing but a
/// live request loop.
#[derive(Debug, Clone, Copy)]
pub struct Probes {
    /// A Metadata naming no topic: the request every client sends first and refreshes.
    pub metadata: bool,
    /// Heartbeats as the one member of a group of the watchdog's own, on a connection to its
    /// coordinator: what an attack on the group coordinator would starve.
    pub group_member: bool,
}

impl Probes {
    /// ApiVersions only: what the bench times.
    pub const API_VERSIONS: Probes = Probes {
        metadata: false,
        group_member: false,
    };
    /// ApiVersions and Metadata.
    pub const SERVING: Probes = Probes {
        metadata: true,
        group_member: false,
    };
    /// ApiVersions, Metadata and a group member's Heartbeat.
    pub const SERVING_AND_MEMBER: Probes = Probes {
        metadata: true,
        group_member: true,
    };
}

/// One of the watchdog's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    ApiVersions,
    Metadata,
    Heartbeat,
}

/// One answered watchdog request: when it was sent and how long its answer took.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub probe: Probe,
    pub sent: Instant,
    pub latency: Duration,
}

/// A well-behaved client on connections of its own, sending its [`Probes`] every
/// [`WATCH_PERIOD`] until stopped, and failing on the first request not answered within
/// [`LIVENESS`] (or answered with an error), naming it.
pub struct Watchdog {
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: JoinHandle<anyhow::Result<Vec<Sample>>>,
}

impl Watchdog {
    /// Connects, checks the endpoint answers every probe before any attack, and starts watching.
    pub async fn start(endpoint: &Endpoint, probes: Probes) -> anyhow::Result<Self> {
        let mut prober = Prober::connect(endpoint, probes)
            .await
            .context("the watchdog could not connect before the attack")?;
        prober.round("before the attack").await?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(prober.watch(stopped));
        Ok(Self { stop, task })
    }

    /// Runs `attack` under the watchdog. Fails with the watchdog's error as soon as a watchdog
    /// request goes unanswered (the attack is then dropped, closing its connections);
    /// otherwise, once the attack ends, the watchdog makes one more round and stops.
    pub async fn guard<T>(mut self, attack: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
        let mut attack = std::pin::pin!(attack);
        let attacked = tokio::select! {
            attacked = &mut attack => attacked,
            // The watch loop ends before it is told to only on a failure.
            watched = &mut self.task => {
                let error = match watched {
                    Ok(Err(e)) => e,
                    Ok(Ok(_)) => anyhow!("the watchdog stopped on its own"),
                    Err(e) => anyhow!("the watchdog task failed: {e}"),
                };
                return Err(error.context("a well-behaved client was not served during the attack"));
            }
        };
        let watched = self.stop().await;
        match (attacked, watched) {
            (Ok(value), Ok(_)) => Ok(value),
            (Err(attack), Ok(_)) => Err(attack),
            (Ok(_), Err(watch)) => Err(watch.context("a well-behaved client was not served after the attack")),
            (Err(attack), Err(watch)) => Err(attack.context(format!(
                "and a well-behaved client was not served after the attack: {watch:#}"
            ))),
        }
    }

    /// Stops watching after one more round; every answered request's sample.
    pub async fn stop(self) -> anyhow::Result<Vec<Sample>> {
        self.stop.send_replace(true);
        self.task.await.context("the watchdog task")?
    }
}

/// The watchdog's connections and what it has seen.
pub(super) struct Prober {
    pub(super) client: Client,
    pub(super) metadata: bool,
    pub(super) member: Option<Member>,
    pub(super) started: Instant,
    pub(super) rounds: u64,
    pub(super) samples: Vec<Sample>,
}

impl Prober {
    pub(super) async fn connect(endpoint: &Endpoint, probes: Probes) -> anyhow::Result<Self> {
        let client = Client::connect(&endpoint.bootstrap).await?;
        let member = if probes.group_member {
            Some(Member::join(endpoint).await?)
        } else {
            None
        };
        Ok(Self {
            client,
            metadata: probes.metadata,
            member,
            started: Instant::now(),
            rounds: 0,
            samples: Vec::new(),
        })
    }

    /// Sends every probe once, each bounded by [`LIVENESS`].
    async fn round(&mut self, phase: &str) -> anyhow::Result<()> {
        self.rounds += 1;
        let (round, started) = (self.rounds, self.started);
        let name = |probe: Probe, sent: Instant| {
            format!(
                "watchdog {probe:?} #{round} {phase}, sent {:.2} s after the watchdog started",
                (sent - started).as_secs_f64()
            )
        };
        let client = &mut self.client;
        let sent = Instant::now();
        let answer = bounded(&name(Probe::ApiVersions, sent), api_versions(client)).await?;
        ensure!(
            answer.error_code == NONE,
            "{}: error {}",
            name(Probe::ApiVersions, sent),
            answer.error_code
        );
        self.samples.push(Sample {
            probe: Probe::ApiVersions,
            sent,
            latency: sent.elapsed(),
        });
        if self.metadata {
            let sent = Instant::now();
            let request = MetadataRequest::default().with_allow_auto_topic_creation(false);
            let _: MetadataResponse = bounded(
                &name(Probe::Metadata, sent),
                client.request(ApiKey::Metadata, METADATA_V, &request),
            )
            .await?;
            self.samples.push(Sample {
                probe: Probe::Metadata,
                sent,
                latency: sent.elapsed(),
            });
        }
        if let Some(member) = &mut self.member {
            let sent = Instant::now();
            let what = name(Probe::Heartbeat, sent);
            let code = bounded(&what, member.heartbeat()).await?;
            ensure!(
                code == NONE,
                "{what}: error {code}; the member of {} lost its place in the group",
                member.group
            );
            self.samples.push(Sample {
                probe: Probe::Heartbeat,
                sent,
                latency: sent.elapsed(),
            });
        }
        Ok(())
    }

    /// Sends a round every [`WATCH_PERIOD`] until `stop`, then one more, then leaves the group.
    async fn watch(mut self, mut stop: watch::Receiver<bool>) -> anyhow::Result<Vec<Sample>> {
        let mut period = tokio::time::interval(WATCH_PERIOD);
        // A round slower than the period delays the next one rather than bunching them.
        period.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                _ = period.tick() => {}
            }
            self.round("during the attack").await?;
        }
        self.round("after the attack").await?;
        if let Some(member) = &mut self.member {
            bounded("the watchdog member's LeaveGroup after the attack", member.leave()).await?;
        }
        Ok(self.samples)
    }
}

/// The watchdog's group member: joined and synced before the attack, heartbeating during it.
pub(super) struct Member {
    pub(super) client: Client,
    pub(super) group: String,
    pub(super) id: String,
    pub(super) generation: i32,
}

/// Kafka's default group.min.session.timeout.ms is 6 s; 10 s is above it and far above
/// [`WATCH_PERIOD`], so the member never lapses while it is answered.
pub(crate) const MEMBER_SESSION_TIMEOUT_MS: i32 = 10_000;

impl Member {
    pub(super) async fn join(endpoint: &Endpoint) -> anyhow::Result<Self> {
        let group = endpoint.unique_topic("kig-hostile-watchdog");
        let mut client = coordinator_of(&endpoint.bootstrap, &group).await?;
        // KIP-394: the first JoinGroup may only hand out the member id to join with.
        let session = MEMBER_SESSION_TIMEOUT_MS;
        let first = timeout(WAIT, join_group(&mut client, &group, "", session, session, b"watchdog"))
            .await
            .context("the watchdog member's first JoinGroup")??;
        let joined = match first.error_code {
            NONE => first,
            MEMBER_ID_REQUIRED => {
                let id = first.member_id.as_str().to_string();
                timeout(
                    WAIT,
                    join_group(&mut client, &group, &id, session, session, b"watchdog"),
                )
                .await
                .context("the watchdog member's JoinGroup with its member id")??
            }
            code => bail!("the watchdog member's JoinGroup of {group}: error {code}"),
        };
        ensure!(
            joined.error_code == NONE,
            "the watchdog member's JoinGroup of {group}: error {}",
            joined.error_code
        );
        let id = joined.member_id.as_str().to_string();
        let synced = timeout(
            WAIT,
            sync_group(&mut client, &group, joined.generation_id, &id, &[(&id, b"")]),
        )
        .await
        .context("the watchdog member's SyncGroup")??;
        ensure!(
            synced.error_code == NONE,
            "the watchdog member's SyncGroup of {group}: error {}",
            synced.error_code
        );
        Ok(Self {
            client,
            group,
            id,
            generation: joined.generation_id,
        })
    }

    async fn heartbeat(&mut self) -> anyhow::Result<i16> {
        heartbeat(&mut self.client, &self.group, self.generation, &self.id).await
    }

    async fn leave(&mut self) -> anyhow::Result<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(string(&self.group)))
            .with_members(vec![MemberIdentity::default().with_member_id(string(&self.id))]);
        let left: LeaveGroupResponse = self.client.request(ApiKey::LeaveGroup, LEAVE_GROUP_V, &request).await?;
        ensure!(
            left.error_code == NONE,
            "LeaveGroup of {}: error {}",
            self.group,
            left.error_code
        );
        Ok(())
    }
}
