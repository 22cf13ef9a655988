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

    /// An SDK client for the node at `address` that logs in on every connect and does not
    /// reconnect by itself. The SDK follows the cluster's metadata leader from there
    /// (`leader_aware`), but only ever redials the node it last reached: moving to another node
    /// takes a new client (docs/decisions.md, "Iggy cluster: a roster around the SDK").
    pub(super) fn client_for(&self, address: &str) -> Result<IggyClient, IggyError> {
        let secret = self.credentials.secret.expose().to_string().into();
        let login = match self.credentials.kind {
            SecretKind::Password => Credentials::UsernamePassword(self.credentials.username.clone(), secret),
            SecretKind::PersonalAccessToken => Credentials::PersonalAccessToken(secret),
        };
        let domain = if self.tls.domain.is_empty() {
            address.rsplit_once(':').map_or(address, |(host, _)| host).to_string()
        } else {
            self.tls.domain.clone()
        };
        let config = TcpClientConfig {
            server_address: address.to_string(),
            auto_login: AutoLogin::Enabled(login),
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
        };
        let tcp = TcpClient::create(Arc::new(config))?;
        Ok(IggyClient::create(ClientWrapper::Tcp(tcp), None, None))
    }

    /// A client, not connected, for the first node the roster would dial.
    pub(super) fn client(&self) -> Result<IggyClient, IggyError> {
        let first = self.roster().candidates().into_iter().next().unwrap_or_default();
        self.client_for(&first)
    }
}

/// How long a reconnect that found every roster member down waits before sweeping the roster
/// again, while the failover timeout allows: about the cluster's election time, so a sweep
/// does not spin while the survivors elect a primary.
pub(super) const SWEEP_PAUSE: Duration = Duration::from_millis(200);

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
            target,
            epoch: AtomicU64::new(0),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The current SDK client.
    pub(super) fn client(&self) -> Arc<IggyClient> {
        self.client.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `client` in place and shuts the old one down in the background.
    pub(super) fn install(&self, client: Arc<IggyClient>) {
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
        let epoch = self.epoch.load(Ordering::Acquire);
        if self.state().await == ClientState::Authenticated {
            return Ok(epoch);
        }
        self.reconnect(epoch, deadline, true).await?;
        Ok(self.epoch.load(Ordering::Acquire))
    }

    /// CLUSTER-FAILOVER-1: a new client, logged in, on the first roster member that answers
    /// (the SDK then moves it to the metadata leader), unless another caller already reconnected
    /// since `seen`. Sweeps the roster once, or, with `until_deadline`, again after a pause while
    /// `deadline` allows; each node's answer goes to the roster, and the leader the cluster's
    /// metadata names is remembered, so later dials go there first. A login refusal ends it at
    /// once (it is the same on every node). After only one sweep the last SDK error is returned,
    /// so a gateway pointed at nothing fails at start with `CannotEstablishConnection`;
    /// otherwise [`BackendError::NoPrimary`] (CLUSTER-FAILOVER-2).
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

    /// [`Conn::reconnect`]'s sweeps over the roster, under its lock.
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
        let mut last = IggyError::CannotEstablishConnection;
        let mut why = Vec::new();
        loop {
            let candidates = self.target.roster().candidates();
            for address in candidates {
                let client = Arc::new(self.target.client_for(&address)?);
                let connected = tokio::time::timeout_at(deadline, client.connect()).await;
                match connected {
                    Ok(Ok(())) => {
                        self.target.roster().on_answer(&address, Answer::Connected);
                        // Learn the leader, so later dials go there first; the SDK has moved
                        // this client there already when there is one.
                        if let Ok(Ok(metadata)) = tokio::time::timeout_at(deadline, client.get_cluster_metadata()).await
                        {
                            let leader = leader_address(&metadata);
                            tracing::debug!("Iggy cluster metadata from {address}: leader {leader:?}");
                            self.target.roster().on_answer(&address, Answer::Leader(leader));
                        }
                        tracing::info!("connected to Iggy through {address}");
                        self.install(client);
                        self.epoch.fetch_add(1, Ordering::AcqRel);
                        return Ok(());
                    }
                    Ok(Err(e)) if classify(&e) == Failure::Refused => {
                        retire(client);
                        tracing::warn!("Iggy at {address} refused the login: {e}");
                        return Err(e.into());
                    }
                    Ok(Err(e)) => {
                        retire(client);
                        tracing::warn!("Iggy at {address} did not take the connection: {e}");
                        self.target.roster().on_answer(&address, Answer::Down);
                        why.push(format!("{address}: {e}"));
                        last = e;
                    }
                    Err(_) => {
                        retire(client);
                        self.target.roster().on_answer(&address, Answer::Down);
                        why.push(format!("{address}: no answer in time"));
                        return Err(no_primary(why.join("; ")));
                    }
                }
            }
            if !until_deadline {
                return Err(last.into());
            }
            let pause = Instant::now() + SWEEP_PAUSE;
            if pause >= deadline {
                return Err(no_primary(why.join("; ")));
            }
            tokio::time::sleep_until(pause).await;
            why.clear();
        }
    }

    /// Replaces the client after a failure whose outcome is unknown or a node that stopped
    /// answering, so that the next call reconnects (through the roster) before sending.
    pub(super) async fn mark_broken(&self, seen: u64) {
        let _guard = self.reconnecting.lock().await;
        if self.epoch.load(Ordering::Acquire) == seen {
            if let Ok(fresh) = self.target.client() {
                self.install(Arc::new(fresh));
            }
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }
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

/// Errors that say the connection, not the request, failed.
pub(super) fn is_connection_error(e: &IggyError) -> bool {
    classify(e) != Failure::Refused
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
