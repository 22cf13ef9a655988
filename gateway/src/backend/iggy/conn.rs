//! One SDK client and how it is dialled, classified and replaced: the roster's target, the
//! failure classes of CLUSTER-UNKNOWN-1, reconnection under the failover bound.

use super::*;

/// Where and as whom to connect; kept to open the per-`ClientId` clients later.
#[derive(Clone)]
pub(super) struct Target {
    /// CLUSTER-ROSTER-1: the cluster's members, and what the backend learned of them; shared by
    /// the root backend and every session opened from it.
    pub(super) roster: Arc<Mutex<RosterState>>,
    /// Whether the roster holds unanswered appends (CLUSTER-SPLIT-1), so that an answered
    /// append, every Produce's case, takes the roster's lock only to end a stall.
    pub(super) appends_stalled: Arc<AtomicBool>,
    pub(super) credentials: GatewayCredentials,
    pub(super) tls: IggyTls,
    /// CLUSTER-FAILOVER-2: the bound on a call, failover included; CLUSTER-FAILOVER-3 gives each
    /// node's answer its share of it.
    pub(super) failover_timeout: Duration,
    /// CLUSTER-FAILOVER-3: moves each time a node is found down, shared like the roster, so
    /// every connection still on that node leaves it before its next call instead of waiting
    /// out the node bound itself.
    pub(super) demotions: Arc<AtomicU64>,
}

/// TLS to the Iggy server (AUTH-TLS-3): off by default.
#[derive(Debug, Clone, Default)]
pub struct IggyTls {
    pub enabled: bool,
    /// The name the server's certificate must carry; empty: the host of the address.
    pub domain: String,
    /// A CA file to trust instead of the system's roots.
    pub ca_file: Option<String>,
}

impl Target {
    pub(super) fn roster(&self) -> MutexGuard<'_, RosterState> {
        self.roster.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// CLUSTER-FAILOVER-1, CLUSTER-FAILOVER-3: records that `node` refused, broke or did not
    /// answer in time, in an attempt that began at `since`.
    pub(super) fn demote(&self, node: &str, since: Instant) {
        self.roster().on_answer(node, Answer::Down, since.into_std());
        self.demotions.fetch_add(1, Ordering::AcqRel);
    }

    /// CLUSTER-FAILOVER-3: how long one node may take to answer a dial or one call.
    pub(super) fn node_bound(&self) -> Duration {
        node_bound(self.failover_timeout, self.roster().members().len())
    }

    /// The SDK's configuration for dialling `dial`. CLUSTER-ROSTER-2: no auto-login, so the SDK
    /// never logs in by itself, and so never follows the cluster's metadata to a node of its
    /// choosing with these credentials (its `leader_aware` redirect runs after an auto-login
    /// only); the gateway logs in after its own dial ([`Target::login`]). The TLS name is the
    /// configured domain, else the one the roster gives the dial, never an address a node
    /// named. No reconnection of the SDK's own: a client that fails is replaced
    /// (docs/decisions.md, "Iggy cluster: a roster around the SDK").
    pub(super) fn tcp_config(&self, dial: &Dial) -> TcpClientConfig {
        let domain = if self.tls.domain.is_empty() {
            dial.tls_host.clone()
        } else {
            self.tls.domain.clone()
        };
        TcpClientConfig {
            server_address: dial.address.clone(),
            auto_login: AutoLogin::Disabled,
            reconnection: TcpClientReconnectionConfig {
                enabled: false,
                max_retries: Some(0),
                interval: IggyDuration::from(Duration::from_secs(1)),
                // No cool-down before a reconnect: this module reconnects at most once per call.
                reestablish_after: IggyDuration::from(Duration::ZERO),
            },
            heartbeat_interval: IggyDuration::from(HEARTBEAT_INTERVAL),
            nodelay: true,
            tls_enabled: self.tls.enabled,
            tls_domain: domain,
            tls_ca_file: self.tls.ca_file.clone(),
            ..TcpClientConfig::default()
        }
    }

    /// An SDK client for `dial`, not connected (see [`Target::tcp_config`]).
    pub(super) fn client_for(&self, dial: &Dial) -> Result<IggyClient, IggyError> {
        let tcp = TcpClient::create(Arc::new(self.tcp_config(dial)))?;
        Ok(IggyClient::create(ClientWrapper::Tcp(tcp), None, None))
    }

    /// A client, not connected, for the first node the roster would dial.
    pub(super) fn client(&self) -> Result<IggyClient, IggyError> {
        let first = self.roster().candidates().into_iter().next();
        self.client_for(&first.unwrap_or_else(|| Dial::member("")))
    }

    /// The SDK's own refusal of credentials no node could take: a token the wire cannot carry
    /// (empty, or over 255 bytes) is InvalidFormat, which a node also answers during an election,
    /// so it is told apart before any node is dialled.
    pub(super) fn malformed_credentials(&self) -> Option<IggyError> {
        let carried = 1..=iggy_binary_protocol::MAX_WIRE_NAME_LENGTH;
        let token = self.credentials.secret.expose();
        (self.credentials.kind == SecretKind::PersonalAccessToken && !carried.contains(&token.len()))
            .then_some(IggyError::InvalidFormat)
    }

    /// Logs `client` in with the connection's credentials, through the transport's own login,
    /// which follows no redirect (CLUSTER-ROSTER-2).
    pub(super) async fn login(&self, client: &IggyClient) -> Result<(), IggyError> {
        let wrapper = client.client();
        let transport = wrapper.read().await;
        let secret = self.credentials.secret.expose();
        match self.credentials.kind {
            SecretKind::Password => transport.login_user(&self.credentials.username, secret).await?,
            SecretKind::PersonalAccessToken => transport.login_with_personal_access_token(secret).await?,
        };
        Ok(())
    }
}

impl Target {
    /// One node's try within a sweep, run as a task of its own (CLUSTER-FAILOVER-3): dial it,
    /// then go where its metadata says (CLUSTER-ROUTE-1, CLUSTER-ROSTER-2), within `until`.
    /// `began` is when the try began, the time a failure it finds is dated by.
    pub(super) async fn try_node(self, dial: Dial, began: Instant, until: Instant) -> Result<Tried, IggyError> {
        let mut dialled = self.dial(&dial, until).await?;
        if let Dialled::Failed(_) = dialled {
            // It answers: most likely an election is ending (logins then fail), so it is asked
            // once more after a pause rather than left for a whole sweep.
            let again = Instant::now() + ELECTION_POLL;
            if again < until {
                tokio::time::sleep_until(again).await;
                dialled = self.dial(&dial, until).await?;
            }
        }
        Ok(match dialled {
            Dialled::Up(client, leader) => {
                self.roster()
                    .on_answer(&dial.address, Answer::Connected, std::time::Instant::now());
                tracing::debug!("Iggy cluster metadata from {}: leader {leader:?}", dial.address);
                let route = self.route_or_watch(&dial, &client, leader, until).await;
                match route {
                    Route::Here => return Ok(Tried::Here(client)),
                    Route::To(next) => Tried::To(next),
                    Route::Later(leader) => Tried::Later(leader),
                    Route::Unlisted { address, first } => Tried::Unlisted { leader: address, first },
                }
                .retiring(client)
            }
            Dialled::Refused(e) => Tried::Refused(e),
            Dialled::Down(e) => {
                self.demote(&dial.address, began);
                Tried::Down(e)
            }
            Dialled::Failed(e) => Tried::Failed(e),
            Dialled::Held => Tried::Held,
            Dialled::Silent => {
                // Silent for as long as the sweep could wait: connections still on it leave it
                // too (an overtaken try only put it last, see `Conn::sweep`).
                self.demote(&dial.address, began);
                Tried::Silent
            }
        })
    }

    /// Dials one node: connects, logs in and reads the cluster's metadata, all within `until`
    /// (CLUSTER-FAILOVER-3: a node that takes the login and then stalls is as silent as one
    /// that never answers).
    async fn dial(&self, dial: &Dial, until: Instant) -> Result<Dialled, IggyError> {
        if let Some(e) = self.malformed_credentials() {
            return Ok(Dialled::Refused(e));
        }
        if !self.login_turn(&dial.address, until).await {
            return Ok(Dialled::Held);
        }
        let client = Arc::new(self.client_for(dial)?);
        let steps = async {
            // The connection's own configuration (TLS above all) is the same for every node.
            client.connect().await.map_err(|e| {
                if classify(&e) == Failure::Refused {
                    Dialled::Refused(e)
                } else {
                    Dialled::Down(e)
                }
            })?;
            // Only a refusal of the credentials is the same on every node. Anything else a node
            // answers a login with (seen during an election: InvalidFormat; an evicted session:
            // Disconnected) fails this dial only, and says nothing against the node: what a
            // principal sends must not demote a node for every connection.
            let login = self.login(&client).await;
            // Only the node's own state holds the gate (CLUSTER-FAILOVER-5): what one
            // principal's login is refused for must not slow another's.
            let mid_election = |e: &IggyError| answered_mid_election(e) || is_connection_error(e);
            if login.is_ok() || login.as_ref().is_err_and(mid_election) {
                self.roster()
                    .on_login(&dial.address, login.is_ok(), std::time::Instant::now());
            }
            login.map_err(|e| {
                if refuses_the_credentials(&e) {
                    Dialled::Refused(e)
                } else {
                    Dialled::Failed(e)
                }
            })?;
            Ok::<_, Dialled>(client.get_cluster_metadata().await)
        };
        let dialled = match tokio::time::timeout_at(until, steps).await {
            Ok(Ok(Ok(metadata))) => return Ok(Dialled::Up(client, leader_address(&metadata))),
            // A node that refuses to describe its cluster names no leader: stay on it.
            Ok(Ok(Err(e))) if classify(&e) == Failure::Refused => return Ok(Dialled::Up(client, None)),
            Ok(Ok(Err(e))) => Dialled::Down(e),
            Ok(Err(failed)) => failed,
            Err(_) => Dialled::Silent,
        };
        retire(client);
        Ok(dialled)
    }

    /// CLUSTER-FAILOVER-5: waits, within `until`, for this gateway's turn to send `node` a
    /// login; false when the turn would come too late (the node is then not demoted: it answers,
    /// only not logins yet).
    async fn login_turn(&self, node: &str, until: Instant) -> bool {
        loop {
            let open_at = match self.roster().claim_login(node, std::time::Instant::now()) {
                Ok(()) => return true,
                Err(open_at) => Instant::from_std(open_at),
            };
            if open_at >= until {
                return false;
            }
            tokio::time::sleep_until(open_at).await;
        }
    }

    /// CLUSTER-ROSTER-2: where `dial` sends the connection after it named `leader`. A leader not
    /// in the roster as written is looked for among the members' resolved addresses first.
    async fn route(&self, dial: &Dial, leader: Option<String>, until: Instant) -> Route {
        if let Some(named) = leader.as_deref().filter(|l| !self.roster().lists(l)) {
            let members = self.roster().members().to_vec();
            let mut resolved = Vec::with_capacity(members.len());
            for member in &members {
                resolved.push(
                    match tokio::time::timeout_at(until, tokio::net::lookup_host(member.as_str())).await {
                        Ok(Ok(addrs)) => addrs.collect(),
                        _ => Vec::new(),
                    },
                );
            }
            tracing::debug!(
                "Iggy leader {named} is not a roster member as written; the members resolve to {resolved:?}"
            );
            self.roster().on_resolved(resolved);
        }
        self.roster().on_metadata(dial, leader)
    }

    /// [`Target::route`], and while `dial`, a node that answers, names a leader that was found
    /// down, its metadata again every [`ELECTION_POLL`] until `until`: such a leader is most
    /// likely being replaced, and this node names the new one as soon as it is elected, which
    /// is sooner than a dial of the node found down would end (CLUSTER-FAILOVER-3).
    async fn route_or_watch(
        &self,
        dial: &Dial,
        client: &IggyClient,
        mut leader: Option<String>,
        until: Instant,
    ) -> Route {
        loop {
            let route = self.route(dial, leader, until).await;
            let next_ask = Instant::now() + ELECTION_POLL;
            if !matches!(route, Route::Later(_)) || next_ask >= until {
                return route;
            }
            tokio::time::sleep_until(next_ask).await;
            match tokio::time::timeout_at(until, client.get_cluster_metadata()).await {
                Ok(Ok(metadata)) => leader = leader_address(&metadata),
                _ => return route,
            }
        }
    }
}

/// A try of a sweep under way (CLUSTER-FAILOVER-3).
struct Pending {
    address: String,
    began: Instant,
    /// Whether the next candidate's try started beside it, its bound being up.
    overtaken: bool,
}

/// How one node's try within a sweep ended (CLUSTER-FAILOVER-3).
pub(super) enum Tried {
    /// Logged in on the leader (or on a node of a cluster naming none): install it.
    Here(Arc<IggyClient>),
    /// It names another node the leader, to try next.
    To(Dial),
    /// It names the leader that was found down, and named no other before `until`.
    Later(String),
    /// It names a leader that may not be dialled (CLUSTER-ROSTER-2).
    Unlisted { leader: String, first: bool },
    /// The connection's configuration or the credentials were refused: the same on every node.
    Refused(IggyError),
    /// The connection was refused or broke (the node is demoted).
    Down(IggyError),
    /// The login failed twice for another reason than the credentials.
    Failed(IggyError),
    /// No login was sent: the node fails logins and another connection's turn came first
    /// (CLUSTER-FAILOVER-5).
    Held,
    /// No answer within `until` (the node is demoted).
    Silent,
}

impl Tried {
    /// This outcome, `client` shut down: it stays with no connection.
    fn retiring(self, client: Arc<IggyClient>) -> Self {
        retire(client);
        self
    }
}

/// The order of one sweep's tries: the roster's candidates, each once, and once more when a node
/// that answers names it the leader after its try (it may have been elected since; a login sent
/// during an election goes unanswered).
struct Sweep {
    queue: std::collections::VecDeque<(Dial, bool)>,
    tried: Vec<String>,
}

impl Sweep {
    fn new(candidates: Vec<Dial>) -> Self {
        Sweep {
            queue: candidates.into_iter().map(|d| (d, false)).collect(),
            tried: Vec::new(),
        }
    }

    fn eligible(&self, dial: &Dial, named: bool) -> bool {
        let tries = self.tried.iter().filter(|t| **t == dial.address).count();
        tries <= usize::from(named)
    }

    fn has_next(&self) -> bool {
        self.queue.iter().any(|(d, named)| self.eligible(d, *named))
    }

    fn next(&mut self) -> Option<Dial> {
        while let Some((dial, named)) = self.queue.pop_front() {
            if self.eligible(&dial, named) {
                self.tried.push(dial.address.clone());
                return Some(dial);
            }
        }
        None
    }

    /// `dial`, named the leader by a node that answers, goes first.
    fn first(&mut self, dial: Dial) {
        self.queue.push_front((dial, true));
    }
}

/// How long a reconnect that found every roster member down waits before sweeping the roster
/// again, while the failover timeout allows: about the cluster's election time, so a sweep
/// does not spin while the survivors elect a primary.
pub(super) const SWEEP_PAUSE: Duration = Duration::from_millis(200);

/// How often a node that names as leader a node found down is asked again, while the cluster
/// elects another (CLUSTER-FAILOVER-3): the SDK's own pace for a leaderless cluster.
pub(super) const ELECTION_POLL: Duration = Duration::from_millis(250);

/// How a failed call left the request (CLUSTER-UNKNOWN-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// The server answered: the request was refused, nothing to do with a failover.
    Refused,
    /// The request never reached a primary that could apply it (no connection, a refused
    /// connection, a node that said it was not primary): safe to send again anywhere.
    NotSent,
    /// The request was sent and the connection broke or timed out before the answer, or the
    /// server said it could not commit it yet: the server may or may not apply it.
    Unknown,
}

/// CLUSTER-UNKNOWN-1: which of [`Failure`] an SDK error is.
pub(super) fn classify(e: &IggyError) -> Failure {
    match e {
        IggyError::NotConnected
        | IggyError::CannotEstablishConnection
        | IggyError::ClientShutdown
        | IggyError::Unauthenticated
        | IggyError::TransientNotAccepted => Failure::NotSent,
        IggyError::Disconnected
        | IggyError::EmptyResponse
        | IggyError::StaleClient
        | IggyError::TcpError
        | IggyError::TransientNotCommitted => Failure::Unknown,
        _ => Failure::Refused,
    }
}

/// One SDK client and its reconnection bookkeeping. The client is replaced, not reconnected,
/// when the backend moves to another node or gives up on a call that did not answer in time
/// (the SDK's own request task may still hold the old one's socket for up to 30 s).
pub(super) struct Conn {
    pub(super) client: std::sync::RwLock<Arc<IggyClient>>,
    /// The node the current client was dialled on, once it logged in there: the node a failed
    /// or stalled call demotes (CLUSTER-FAILOVER-3).
    pub(super) node: Mutex<Option<String>>,
    /// The demotions ([`Target::demotions`]) this connection has looked at.
    pub(super) demotions_seen: AtomicU64,
    pub(super) target: Target,
    /// Moves on every reconnect (or forced disconnect), so concurrent callers that saw the same
    /// failure reconnect only once.
    pub(super) epoch: AtomicU64,
    pub(super) reconnecting: tokio::sync::Mutex<()>,
}

impl Conn {
    pub(super) fn new(target: Target) -> Result<Self, IggyError> {
        Ok(Self {
            client: std::sync::RwLock::new(Arc::new(target.client()?)),
            node: Mutex::new(None),
            demotions_seen: AtomicU64::new(0),
            target,
            epoch: AtomicU64::new(0),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The current SDK client.
    pub(super) fn client(&self) -> Arc<IggyClient> {
        self.client.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `client`, logged in at `node` (or not connected: `None`), in place and shuts the
    /// old one down in the background.
    pub(super) fn install(&self, client: Arc<IggyClient>, node: Option<String>) {
        *self.node.lock().unwrap_or_else(|e| e.into_inner()) = node;
        let old = std::mem::replace(&mut *self.client.write().unwrap_or_else(|e| e.into_inner()), client);
        retire(old);
    }

    pub(super) async fn state(&self) -> ClientState {
        let client = self.client();
        let wrapper = client.client();
        let guard = wrapper.read().await;
        match &*guard {
            ClientWrapper::Tcp(tcp) => tcp.get_state().await,
            // Only TCP clients are built here.
            _ => ClientState::Authenticated,
        }
    }

    /// Reconnects the client unless it is logged in, within `deadline`; returns the epoch to
    /// pass to [`Conn::mark_broken`] if the following call fails.
    pub(super) async fn ensure_connected(&self, deadline: Instant) -> Result<u64, BackendError> {
        self.leave_a_demoted_node().await;
        let epoch = self.epoch.load(Ordering::Acquire);
        if self.state().await == ClientState::Authenticated {
            return Ok(epoch);
        }
        self.reconnect(epoch, deadline, true).await?;
        Ok(self.epoch.load(Ordering::Acquire))
    }

    /// CLUSTER-FAILOVER-3: when a node was found down since this connection last looked and it
    /// is the one this connection is on, the client is replaced, so the next call dials through
    /// the roster rather than stall where another call already stalled.
    async fn leave_a_demoted_node(&self) {
        let demotions = self.target.demotions.load(Ordering::Acquire);
        if self.demotions_seen.swap(demotions, Ordering::AcqRel) == demotions {
            return;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let node = self.node.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if node.is_some_and(|node| self.target.roster().is_down(&node)) {
            self.mark_broken(epoch, None).await;
        }
    }

    /// CLUSTER-FAILOVER-1: a new client, logged in, on the cluster's leader as the roster
    /// reaches it (CLUSTER-ROUTE-1, CLUSTER-ROSTER-2), unless another caller already
    /// reconnected since `seen`. Sweeps the roster once, or, with `until_deadline`, again after a
    /// pause while `deadline` allows; each node's answer goes to the roster. A login refusal
    /// ends it at once (it is the same on every node). After only one sweep in which every node
    /// refused or dropped the connection, the last SDK error is returned, so a gateway pointed at
    /// nothing fails at start with `CannotEstablishConnection`; otherwise
    /// [`BackendError::NoPrimary`] (CLUSTER-FAILOVER-2).
    pub(super) async fn reconnect(
        &self,
        seen: u64,
        deadline: Instant,
        until_deadline: bool,
    ) -> Result<(), BackendError> {
        let started = Instant::now();
        let no_primary = |reason: String| BackendError::NoPrimary {
            waited_ms: started.elapsed().as_millis() as u64,
            reason,
        };
        let Ok(_guard) = tokio::time::timeout_at(deadline, self.reconnecting.lock()).await else {
            return Err(no_primary("another reconnect of this client is still under way".into()));
        };
        let result = self.sweep(seen, deadline, until_deadline, &no_primary).await;
        match &result {
            // A login refusal says nothing about the cluster.
            Err(e) if e.is_unavailable() => self.target.roster().on_unavailable(format!("no Iggy primary: {e}")),
            _ => {}
        }
        result
    }

    /// [`Conn::reconnect`]'s sweeps over the roster, under its lock. CLUSTER-FAILOVER-3: every
    /// candidate is tried, in the roster's order, each try a task of its own. A try still under
    /// way when its node bound is up is overtaken, not abandoned: the next candidate's try
    /// starts beside it and the slow node is put last for later sweeps, so a node that stalls
    /// costs one bound while a node that is only slow (logins on a loaded host) can still win.
    /// A try that ends without a connection lets the next start at once. The first try that
    /// reaches the leader is installed; the others finish in the background by the deadline,
    /// and whatever they reach is shut down.
    pub(super) async fn sweep(
        &self,
        seen: u64,
        deadline: Instant,
        until_deadline: bool,
        no_primary: &(dyn Fn(String) -> BackendError + Send + Sync),
    ) -> Result<(), BackendError> {
        if self.epoch.load(Ordering::Acquire) != seen && self.state().await == ClientState::Authenticated {
            return Ok(());
        }
        let bound = self.target.node_bound();
        let mut last = IggyError::CannotEstablishConnection;
        let mut why: Vec<String> = Vec::new();
        // Only refusals and dropped connections so far: the SDK's error says it all.
        let mut only_refused = true;
        let mut unlisted = false;
        let mut tries = tokio::task::JoinSet::new();
        let mut pending: HashMap<tokio::task::Id, Pending> = HashMap::new();
        let mut sweep = Sweep::new(self.target.roster().candidates());
        // A node that answers named another the leader: that one is dialled without waiting.
        let mut start_now = true;
        let result = loop {
            let now = Instant::now();
            if now >= deadline {
                break Err(no_primary(why.join("; ")));
            }
            let within_bound = pending.values().map(|p| p.began + bound).filter(|end| *end > now).min();
            // The next try starts when no try is within its bound, or at once after a node that
            // answers named the leader.
            if sweep.has_next() && (start_now || within_bound.is_none()) {
                for p in pending.values_mut().filter(|p| !p.overtaken && p.began + bound <= now) {
                    self.overtake(p, bound, &mut why);
                }
                if let Some(dial) = sweep.next() {
                    let address = dial.address.clone();
                    let task = tries.spawn(self.target.clone().try_node(dial, now, deadline));
                    pending.insert(
                        task.id(),
                        Pending {
                            address,
                            began: now,
                            overtaken: false,
                        },
                    );
                }
                start_now = false;
                continue;
            }
            start_now = false;
            if within_bound.is_none() {
                // Every candidate of this round was tried and no try is within its bound.
                if unlisted {
                    // A leader the roster may not reach is a configuration matter: sweeping
                    // again until the deadline would only log in everywhere again.
                    break Err(no_primary(why.join("; ")));
                }
                if until_deadline {
                    if pending.is_empty() {
                        // Every try ended without a leader: pause (the cluster may be electing
                        // one) rather than spin.
                        let pause = now + SWEEP_PAUSE;
                        if pause >= deadline {
                            break Err(no_primary(why.join("; ")));
                        }
                        tokio::time::sleep_until(pause).await;
                    }
                    // Another round, beside the tries still under way: a login sent during an
                    // election may never be answered, while one sent after it is at once
                    // (DIFF-18).
                    sweep = Sweep::new(self.target.roster().candidates());
                    start_now = true;
                    why.clear();
                    continue;
                }
                if pending.is_empty() {
                    break Err(if only_refused {
                        last.into()
                    } else {
                        no_primary(why.join("; "))
                    });
                }
            }
            let wake = within_bound.unwrap_or(deadline).min(deadline);
            let joined = tokio::select! {
                joined = tries.join_next_with_id() => joined,
                _ = tokio::time::sleep_until(wake) => continue,
            };
            let (id, tried) = match joined {
                Some(Ok((id, tried))) => (id, tried),
                // A try that panicked is a try that reached nothing.
                Some(Err(e)) => (e.id(), Ok(Tried::Silent)),
                None => continue,
            };
            let Some(Pending { address, overtaken, .. }) = pending.remove(&id) else {
                continue;
            };
            match tried {
                Err(e) => break Err(e.into()),
                Ok(Tried::Here(client)) => {
                    tracing::info!("connected to Iggy at {address}");
                    self.install(client, Some(address));
                    self.epoch.fetch_add(1, Ordering::AcqRel);
                    break Ok(());
                }
                Ok(Tried::To(next)) => {
                    why.push(format!("{address}: names {} the leader", next.address));
                    sweep.first(next);
                    start_now = true;
                    only_refused = false;
                }
                Ok(Tried::Later(leader)) => {
                    why.push(format!(
                        "{address}: names {leader} the leader, which did not answer when last tried"
                    ));
                    only_refused = false;
                }
                Ok(Tried::Unlisted { leader, first }) => {
                    let reason = format!(
                        "{address}: names {leader} the leader, which is not in iggy_address \
                         (CLUSTER-ROSTER-2: add it to the roster, or set iggy_follow_unlisted_leader)"
                    );
                    if first {
                        tracing::error!("{reason}");
                    }
                    why.push(reason);
                    unlisted = true;
                    only_refused = false;
                }
                Ok(Tried::Refused(e)) => {
                    tracing::warn!("Iggy at {address} refused the connection's configuration or credentials: {e}");
                    break Err(e.into());
                }
                Ok(Tried::Down(e)) => {
                    tracing::warn!("Iggy at {address} did not take the connection: {e}");
                    why.push(format!("{address}: {e}"));
                    last = e;
                }
                Ok(Tried::Failed(e)) => {
                    tracing::warn!("Iggy at {address} did not take the login: {e}");
                    why.push(format!("{address}: login: {e}"));
                    only_refused = false;
                }
                Ok(Tried::Held) => {
                    why.push(format!(
                        "{address}: fails logins, and another connection's login to it was due first (CLUSTER-FAILOVER-5)"
                    ));
                    only_refused = false;
                }
                Ok(Tried::Silent) => {
                    if !overtaken {
                        tracing::warn!(
                            "Iggy at {address} did not answer the connection, login and cluster metadata before the failover deadline: tried after the other nodes from now on (CLUSTER-FAILOVER-3)"
                        );
                        why.push(format!("{address}: no answer"));
                    }
                    only_refused = false;
                }
            }
        };
        // Tries still under way end by the deadline; whatever they reach is shut down.
        if !tries.is_empty() {
            tokio::spawn(async move {
                while let Some(joined) = tries.join_next().await {
                    if let Ok(Ok(Tried::Here(client))) = joined {
                        retire(client);
                    }
                }
            });
        }
        result
    }

    /// CLUSTER-FAILOVER-3: `try_`, still under way past the node bound, is overtaken by the
    /// next candidate's try: its node goes last for later dials. Its connections are not told to
    /// leave it (a node slow to take logins may still serve); its own answer brings it back, and
    /// its silence until the deadline demotes it ([`Target::try_node`]).
    fn overtake(&self, try_: &mut Pending, bound: Duration, why: &mut Vec<String>) {
        try_.overtaken = true;
        let mut roster = self.target.roster();
        roster.on_answer(&try_.address, Answer::Down, try_.began.into_std());
        // A node that answered after the try began (a try still following its metadata) is
        // not held back: the roster ignores the older failure.
        if roster.is_down(&try_.address) {
            let address = &try_.address;
            tracing::warn!(
                "Iggy at {address} did not answer the connection, login and cluster metadata within {bound:?}: the next node is tried beside it, and it is tried after the others from now on (CLUSTER-FAILOVER-3)"
            );
            why.push(format!("{address}: no answer within {} ms", bound.as_millis()));
        }
    }

    /// Replaces the client after a failure whose outcome is unknown or a node that stopped
    /// answering, so that the next call reconnects (through the roster) before sending.
    /// CLUSTER-FAILOVER-3: with `demote`, the node the client was on is also marked down, so
    /// the next dials try it after every other member.
    pub(super) async fn mark_broken(&self, seen: u64, demote: Option<Demotion<'_>>) {
        let _guard = self.reconnecting.lock().await;
        if self.epoch.load(Ordering::Acquire) == seen {
            let node = self.node.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Some(node), Some(demotion)) = (node, demote) {
                tracing::warn!(
                    "Iggy at {node} {}: tried after the other nodes from now on (CLUSTER-FAILOVER-3)",
                    demotion.why
                );
                self.target.demote(&node, demotion.since);
            }
            if let Ok(fresh) = self.target.client() {
                self.install(Arc::new(fresh), None);
            }
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Why a failed call demotes its node, and when the call began (CLUSTER-FAILOVER-3).
pub(super) struct Demotion<'a> {
    pub(super) why: &'a str,
    pub(super) since: Instant,
}

/// What one dial of one node ended in.
pub(super) enum Dialled {
    /// Logged in; the leader the node's cluster metadata names, if any.
    Up(Arc<IggyClient>, Option<String>),
    /// The connection's configuration, or the credentials, were refused: the same on every node.
    Refused(IggyError),
    /// The connection was refused or broke.
    Down(IggyError),
    /// The node answered the login with an error other than a refusal of the credentials.
    Failed(IggyError),
    /// The node fails logins, and this gateway's next one to it may not go before `until`
    /// (CLUSTER-FAILOVER-5).
    Held,
    /// No answer within the node bound: connect, login or metadata stalled.
    Silent,
}

/// Shuts a client down in the background (its socket may be held by the SDK's request task
/// for a while), or drops it when no runtime runs.
pub(super) fn retire(client: Arc<IggyClient>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = client.shutdown().await;
        });
    }
}

/// A login refused for the credentials themselves: every node answers it alike, so a sweep
/// ends on it.
pub(super) fn refuses_the_credentials(e: &IggyError) -> bool {
    matches!(
        e,
        IggyError::InvalidCredentials
            | IggyError::InvalidUsername
            | IggyError::InvalidPassword
            | IggyError::UserInactive
            | IggyError::Unauthorized
            | IggyError::InvalidPersonalAccessToken
            | IggyError::PersonalAccessTokenExpired(..)
    )
}

/// Errors that say the connection, not the request, failed.
pub(super) fn is_connection_error(e: &IggyError) -> bool {
    classify(e) != Failure::Refused
}

/// CLUSTER-FAILOVER-4: InvalidFormat to a call the gateway built well-formed and may repeat
/// (a read, an offset stored or fetched, a lookup). A node that has not yet learnt the
/// cluster's new primary answers so (DIFF-18: logins and calls during an election; in the
/// cluster tier a consumer's Fetch and OffsetCommit, 5 s after the primary's SIGKILL, on the node
/// the dial stayed on because it could not describe its cluster): the call moves on as after a
/// connection failure, within the failover bound, and the node is not demoted.
pub(super) fn answered_mid_election(e: &IggyError) -> bool {
    matches!(e, IggyError::InvalidFormat)
}

/// Errors that say the stream or topic does not exist.
pub(super) fn is_not_found(e: &IggyError) -> bool {
    matches!(
        e,
        IggyError::StreamNameNotFound(_)
            | IggyError::StreamIdNotFound(_)
            | IggyError::TopicNameNotFound(..)
            | IggyError::TopicIdNotFound(..)
            | IggyError::ResourceNotFound(_)
    )
}
