//! The authentication and authorization differential ([`run_auth`]): logins, then users with
//! random permission sets acting through their own sessions, compared step by step between the
//! embedded model and a real Iggy server.

use super::*;

/// What a caller of an authentication or authorization step observes: the value (rendered), or
/// the Iggy error code with the Kafka code a client would be told (ERR-MAP-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthSeen {
    Ok(String),
    Refused { iggy: u32, kafka: i16 },
    TimedOut,
}

pub(super) fn iggy_code(e: &BackendError) -> u32 {
    match e {
        BackendError::Iggy(e) => e.as_code(),
        BackendError::TooManyConsumerOffsets => 3024,
        // CLUSTER-FAILOVER-2: the failover errors are the gateway's, not the server's answer;
        // compared as "Iggy unreachable".
        BackendError::NoPrimary { .. } | BackendError::OutcomeUnknown(_) => {
            iggy_common::IggyError::Disconnected.as_code()
        }
    }
}

/// Runs `call` within [`CALL_TIMEOUT`] and renders its value with `show`.
pub(super) async fn observe<T>(
    call: impl Future<Output = Result<T, BackendError>>,
    show: impl FnOnce(T) -> String,
) -> AuthSeen {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(v)) => AuthSeen::Ok(show(v)),
        Ok(Err(e)) => AuthSeen::Refused {
            iggy: iggy_code(&e),
            kafka: error_code(&e),
        },
        Err(_) => AuthSeen::TimedOut,
    }
}

/// Like [`observe`], for setup steps that must succeed on a side.
pub(super) async fn must<T>(
    side: &str,
    what: &str,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("setup on the {side}: {what}: {e}")),
        Err(_) => Err(format!(
            "setup on the {side}: {what}: no answer within {CALL_TIMEOUT:?}"
        )),
    }
}

/// A permission set drawn once and realized on each side with that side's numeric ids.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    /// No permissions at all (`None`).
    pub none: bool,
    /// manage_streams, read_streams, manage_topics, read_topics, poll_messages, send_messages.
    pub global: [bool; 6],
    /// On the test stream: manage_stream, read_stream, manage_topics, read_topics,
    /// poll_messages, send_messages; `None`: no entry.
    pub stream: Option<[bool; 6]>,
    /// Per topic slot (0, 1: the two topics; 2: the throwaway topic): manage_topic, read_topic,
    /// poll_messages, send_messages; `None`: no entry.
    pub topics: [Option<[bool; 4]>; 3],
    /// Full rights on another stream's id, which must grant nothing here.
    pub elsewhere: bool,
}

pub(super) const GLOBAL_FLAGS: [&str; 6] = [
    "manage_streams",
    "read_streams",
    "manage_topics",
    "read_topics",
    "poll_messages",
    "send_messages",
];

pub(super) const STREAM_FLAGS: [&str; 6] = [
    "manage_stream",
    "read_stream",
    "manage_topics",
    "read_topics",
    "poll_messages",
    "send_messages",
];

pub(super) const TOPIC_FLAGS: [&str; 4] = ["manage_topic", "read_topic", "poll_messages", "send_messages"];

pub(super) fn flags<const N: usize>(rng: &mut SplitMix, percent: u64) -> [bool; N] {
    std::array::from_fn(|_| rng.chance(percent))
}

pub(super) fn names<const N: usize>(set: &[bool; N], names: &[&str; N]) -> String {
    let on: Vec<&str> = set.iter().zip(names).filter(|(b, _)| **b).map(|(_, n)| *n).collect();
    on.join(",")
}

impl Grant {
    pub fn draw(rng: &mut SplitMix) -> Grant {
        if rng.chance(8) {
            return Grant {
                none: true,
                ..Grant::default()
            };
        }
        Grant {
            none: false,
            global: flags(rng, 4),
            stream: rng.chance(50).then(|| flags(rng, 15)),
            topics: std::array::from_fn(|_| rng.chance(60).then(|| flags(rng, 30))),
            elsewhere: rng.chance(15),
        }
    }

    /// As Iggy permissions, for a stream id and the ids of the three topic slots.
    pub fn realize(&self, stream: usize, topics: [usize; 3]) -> Option<Permissions> {
        if self.none {
            return None;
        }
        let g = self.global;
        let global = GlobalPermissions {
            manage_streams: g[0],
            read_streams: g[1],
            manage_topics: g[2],
            read_topics: g[3],
            poll_messages: g[4],
            send_messages: g[5],
            ..GlobalPermissions::default()
        };
        let mut streams = BTreeMap::new();
        let topic_map: BTreeMap<usize, TopicPermissions> = self
            .topics
            .iter()
            .zip(topics)
            .filter_map(|(t, id)| {
                t.map(|t| {
                    (
                        id,
                        TopicPermissions {
                            manage_topic: t[0],
                            read_topic: t[1],
                            poll_messages: t[2],
                            send_messages: t[3],
                        },
                    )
                })
            })
            .collect();
        if self.stream.is_some() || !topic_map.is_empty() {
            let s = self.stream.unwrap_or_default();
            streams.insert(
                stream,
                StreamPermissions {
                    manage_stream: s[0],
                    read_stream: s[1],
                    manage_topics: s[2],
                    read_topics: s[3],
                    poll_messages: s[4],
                    send_messages: s[5],
                    topics: (!topic_map.is_empty()).then_some(topic_map),
                },
            );
        }
        if self.elsewhere {
            streams.insert(
                stream + 1_000,
                StreamPermissions {
                    manage_stream: true,
                    read_stream: true,
                    manage_topics: true,
                    read_topics: true,
                    poll_messages: true,
                    send_messages: true,
                    topics: None,
                },
            );
        }
        Some(Permissions {
            global,
            streams: (!streams.is_empty()).then_some(streams),
        })
    }

    /// A short description: `global{..} stream{..} t0{..} t1{..} x{..} elsewhere`.
    pub fn describe(&self) -> String {
        if self.none {
            return "none".into();
        }
        let mut parts = Vec::new();
        if self.global.contains(&true) {
            parts.push(format!("global{{{}}}", names(&self.global, &GLOBAL_FLAGS)));
        }
        if let Some(s) = &self.stream {
            parts.push(format!("stream{{{}}}", names(s, &STREAM_FLAGS)));
        }
        for (slot, t) in ["t0", "t1", "x"].iter().zip(&self.topics) {
            if let Some(t) = t {
                parts.push(format!("{slot}{{{}}}", names(t, &TOPIC_FLAGS)));
            }
        }
        if self.elsewhere {
            parts.push("elsewhere{all}".into());
        }
        if parts.is_empty() {
            return "empty".into();
        }
        parts.join(" ")
    }
}

/// The outcome of [`run_auth`] when both sides agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthReport {
    /// Steps compared.
    pub checks: usize,
    pub users: u32,
}

/// Collects the differences of one run.
pub(super) struct Compare {
    pub(super) seed: u64,
    pub(super) checks: usize,
    pub(super) diffs: Vec<String>,
}

impl Compare {
    pub(super) fn check(&mut self, context: &str, step: &str, model: AuthSeen, real: AuthSeen) -> bool {
        self.checks += 1;
        if model != real {
            self.diffs
                .push(format!("{context}: {step}: model {model:?}, real {real:?}"));
            return false;
        }
        true
    }
}

/// The names a run uses.
pub(super) struct Names {
    pub(super) stream: String,
    pub(super) topics: [String; 2],
    pub(super) groups: [String; 2],
    pub(super) tag: String,
}

pub(super) const TOPIC_NAMES: [&str; 2] = ["t0", "t1"];

pub(super) fn show_topics(topics: Vec<kafka_iggy_gateway::backend::TopicInfo>) -> String {
    let mut names: Vec<String> = topics
        .into_iter()
        .map(|t| format!("{}/{}", t.name, t.partitions))
        .collect();
    names.sort();
    names.join(" ")
}

pub(super) fn auth_message(n: u8) -> IggyMessage {
    message(&Msg {
        payload: vec![n; 3],
        headers: vec![],
        origin_timestamp_us: 1_764_000_000_000_000,
    })
}

/// One side's observations, in order: the step, and what it answered.
pub(super) type Steps = Vec<(String, AuthSeen)>;

pub(super) fn compare_steps(cmp: &mut Compare, context: &str, model: Steps, real: Steps) {
    if model.len() != real.len() {
        cmp.diffs.push(format!(
            "{context}: the sides took different paths: model {} steps, real {} steps",
            model.len(),
            real.len()
        ));
    }
    let trace = std::env::var_os("KIG_DIFF_TRACE").is_some();
    for ((step, m), (real_step, r)) in model.into_iter().zip(real) {
        debug_assert_eq!(step, real_step);
        if trace {
            eprintln!("{context}: {step}: model {m:?}, real {r:?}");
        }
        cmp.check(context, &step, m, r);
    }
}

/// Root's setup on one side: the stream, its two topics (one partition, two messages each) and a
/// consumer group on each; returns the stream's and the topics' numeric ids.
pub(super) async fn auth_setup<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
) -> Result<(usize, [usize; 2]), String> {
    let st = &names.stream;
    must(side, "ensure_stream", b.ensure_stream(st)).await?;
    let mut ids = [0; 2];
    let mut stream_id = 0;
    for (k, t) in names.topics.iter().enumerate() {
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        must(side, "create_topic", b.create_topic(st, t, spec)).await?;
        must(
            side,
            "append",
            b.append(st, t, 0, vec![auth_message(1), auth_message(2)]),
        )
        .await?;
        must(
            side,
            "create_consumer_group",
            b.create_consumer_group(st, t, &names.groups[k]),
        )
        .await?;
        (stream_id, ids[k]) = must(side, "topic_ids", admin.topic_ids(st, t)).await?;
    }
    Ok((stream_id, ids))
}

pub(super) async fn login<B: Backend>(b: &B, credentials: Login) -> AuthSeen {
    observe(b.open_session(&credentials), |(_, principal)| principal.username).await
}

/// The login cases on one side: passwords right and wrong, unknown and inactive users, personal
/// access tokens valid, garbage, of a deactivated and of a deleted user.
pub(super) async fn login_steps<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
) -> Result<Steps, String> {
    let tag = &names.tag;
    let (active, inactive, gone) = (
        format!("kig{tag}-active"),
        format!("kig{tag}-inactive"),
        format!("kig{tag}-gone"),
    );
    let pw = "pw-login";
    for (user, status) in [
        (&active, UserStatus::Active),
        (&inactive, UserStatus::Inactive),
        (&gone, UserStatus::Active),
    ] {
        must(side, "create_user", admin.create_user(user, pw, status, None)).await?;
    }
    let token = must(side, "create_token", admin.create_token(&active, pw, "tok")).await?;
    let gone_token = must(side, "create_token", admin.create_token(&gone, pw, "tok")).await?;
    let mut steps = Steps::new();
    let mut step = |name: &str, seen: AuthSeen| steps.push((name.to_string(), seen));
    step("password, right", login(b, Login::password(&active, pw)).await);
    step("password, wrong", login(b, Login::password(&active, "wrong-pw")).await);
    step(
        "password, unknown user",
        login(b, Login::password(format!("kig{tag}-nobody"), pw)).await,
    );
    step(
        "password, user created inactive",
        login(b, Login::password(&inactive, pw)).await,
    );
    step(
        "password, username in upper case",
        login(b, Login::password(active.to_uppercase(), pw)).await,
    );
    step(
        "password, username of 2 bytes",
        login(b, Login::password("ab", pw)).await,
    );
    step("token, valid", login(b, Login::token(&active, &token)).await);
    step(
        "token, valid, another username given",
        login(b, Login::token(&inactive, &token)).await,
    );
    step(
        "token, garbage of a token's shape",
        login(b, Login::token(&active, format!("{}=", "Q".repeat(67)))).await,
    );
    step("token, garbage", login(b, Login::token(&active, "not-a-token")).await);
    step("token, empty", login(b, Login::token(&active, "")).await);
    step(
        "root: deactivate the user",
        observe(admin.update_user_status(&active, UserStatus::Inactive), |_| {
            String::new()
        })
        .await,
    );
    step(
        "password, user deactivated",
        login(b, Login::password(&active, pw)).await,
    );
    step("token, user deactivated", login(b, Login::token(&active, &token)).await);
    step(
        "root: reactivate the user",
        observe(admin.update_user_status(&active, UserStatus::Active), |_| String::new()).await,
    );
    step(
        "password, user reactivated",
        login(b, Login::password(&active, pw)).await,
    );
    step("token, user reactivated", login(b, Login::token(&active, &token)).await);
    step(
        "root: delete a user with a token",
        observe(admin.delete_user(&gone), |_| String::new()).await,
    );
    step("token, user deleted", login(b, Login::token(&gone, &gone_token)).await);
    step("password, user deleted", login(b, Login::password(&gone, pw)).await);
    Ok(steps)
}

/// One user of the authorization part: who, and the two permission sets it holds in turn.
#[derive(Debug, Clone)]
pub(super) struct UserPlan {
    pub(super) index: u32,
    pub(super) name: String,
    pub(super) password: String,
    pub(super) grants: [Grant; 2],
}

/// Every gated operation once through `session`, as one round of steps named `round: op`.
pub(super) async fn round<B: Backend>(
    steps: &mut Steps,
    label: &str,
    s: &B,
    names: &Names,
    throwaway: &str,
    fresh: &str,
    clients: [ClientId; 2],
) {
    let st = names.stream.as_str();
    let ok = |_| String::new();
    let mut push = |op: String, seen: AuthSeen| steps.push((format!("{label}: {op}"), seen));
    push("list_topics".into(), observe(s.list_topics(st), show_topics).await);
    for (k, t) in names.topics.iter().enumerate() {
        push(
            format!("get_topic {t}"),
            observe(s.get_topic(st, t), |t| format!("{:?}", t.map(|t| t.partitions))).await,
        );
        push(
            format!("append {t}/0"),
            observe(s.append(st, t, 0, vec![auth_message(7 + k as u8)]), |o| {
                format!("{o:?}")
            })
            .await,
        );
        let limits = ReadLimits {
            max_messages: 100,
            max_bytes: u64::MAX,
        };
        push(
            format!("read {t}/0 from 0"),
            observe(s.read(st, t, 0, 0, limits), |ms| {
                format!("{:?}", ms.iter().map(|m| m.header.offset).collect::<Vec<_>>())
            })
            .await,
        );
        push(
            format!("watermarks {t}/0"),
            observe(s.watermarks(st, t, 0), |w| {
                format!("{}..{}", w.log_start_offset, w.high_watermark)
            })
            .await,
        );
    }
    push(
        "get_topic of a missing topic".into(),
        observe(s.get_topic(st, "missing"), |t| format!("{:?}", t.map(|t| t.partitions))).await,
    );
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    push(
        format!("create_topic n{fresh}"),
        observe(s.create_topic(st, &format!("n{fresh}"), spec), ok).await,
    );
    push(
        format!("delete_topic {throwaway}"),
        observe(s.delete_topic(st, throwaway), ok).await,
    );
    push(
        format!("create_consumer_group ug{fresh} on t0"),
        observe(s.create_consumer_group(st, &names.topics[0], &format!("ug{fresh}")), ok).await,
    );
    for (k, t) in names.topics.iter().enumerate() {
        let (g, c) = (&names.groups[k], clients[k]);
        let offset = |o: Option<u64>| format!("{o:?}");
        push(
            format!("get_consumer_offset {t}/0 {g}"),
            observe(s.get_consumer_offset(st, t, 0, g), offset).await,
        );
        // The membership the previous round kept (none before the first round): a member's
        // store under the permissions root has changed since it joined.
        push(
            format!("store_consumer_offset {t}/0 {g} 0, member since the previous round"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("leave_consumer_group {t} {g}, joined in the previous round"),
            observe(s.leave_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("store_consumer_offset {t}/0 {g} 0, not a member"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("delete_consumer_offset {t}/0 {g}, not a member"),
            observe(s.delete_consumer_offset(st, t, 0, g, c), ok).await,
        );
        push(
            format!("join_consumer_group {t} {g}"),
            observe(s.join_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("store_consumer_offset {t}/0 {g} 0"),
            observe(s.store_consumer_offset(st, t, 0, g, c, 0), ok).await,
        );
        push(
            format!("get_consumer_offset {t}/0 {g} after the store"),
            observe(s.get_consumer_offset(st, t, 0, g), offset).await,
        );
        push(
            format!("delete_consumer_offset {t}/0 {g}"),
            observe(s.delete_consumer_offset(st, t, 0, g, c), ok).await,
        );
        push(
            format!("leave_consumer_group {t} {g}"),
            observe(s.leave_consumer_group(st, t, g, c), ok).await,
        );
        push(
            format!("join_consumer_group {t} {g}, kept for the next round"),
            observe(s.join_consumer_group(st, t, g, c), ok).await,
        );
    }
}

/// Root makes a throwaway topic for a user to delete; its id is a step (ids are compared).
pub(super) async fn throwaway<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
    topic: &str,
    steps: &mut Steps,
) -> Result<usize, String> {
    let spec = TopicSpec {
        partitions: 1,
        message_expiry_us: None,
    };
    must(side, "create_topic", b.create_topic(&names.stream, topic, spec)).await?;
    let (_, id) = must(side, "topic_ids", admin.topic_ids(&names.stream, topic)).await?;
    steps.push((
        format!("root: id of the new topic {topic}"),
        AuthSeen::Ok(id.to_string()),
    ));
    Ok(id)
}

/// One user's life on one side: created with the first permission set, logged in, a round; its
/// permissions changed under the open session, a round; deactivated, a round; deleted, a round.
pub(super) async fn user_steps<B: Backend, A: Admin>(
    side: &str,
    b: &B,
    admin: &A,
    names: &Names,
    ids: (usize, [usize; 2]),
    plan: &UserPlan,
    clients: [ClientId; 2],
) -> Result<Steps, String> {
    let i = plan.index;
    let mut steps = Steps::new();
    let x0 = format!("x{i}a");
    let x0_id = throwaway(side, b, admin, names, &x0, &mut steps).await?;
    let permissions = plan.grants[0].realize(ids.0, [ids.1[0], ids.1[1], x0_id]);
    steps.push((
        "root: create_user".into(),
        observe(
            admin.create_user(&plan.name, &plan.password, UserStatus::Active, permissions),
            |_| String::new(),
        )
        .await,
    ));
    let opened = tokio::time::timeout(
        CALL_TIMEOUT,
        b.open_session(&Login::password(&plan.name, &plan.password)),
    )
    .await;
    let session = match opened {
        Ok(Ok((session, principal))) => {
            steps.push(("open_session".into(), AuthSeen::Ok(principal.username)));
            session
        }
        Ok(Err(e)) => {
            steps.push((
                "open_session".into(),
                AuthSeen::Refused {
                    iggy: iggy_code(&e),
                    kafka: error_code(&e),
                },
            ));
            return Ok(steps);
        }
        Err(_) => {
            steps.push(("open_session".into(), AuthSeen::TimedOut));
            return Ok(steps);
        }
    };
    round(
        &mut steps,
        "first permissions",
        &session,
        names,
        &x0,
        &format!("{i}a"),
        clients,
    )
    .await;

    let x1 = format!("x{i}b");
    let x1_id = throwaway(side, b, admin, names, &x1, &mut steps).await?;
    let permissions = plan.grants[1].realize(ids.0, [ids.1[0], ids.1[1], x1_id]);
    steps.push((
        "root: update_permissions".into(),
        observe(admin.update_permissions(&plan.name, permissions), |_| String::new()).await,
    ));
    let label = "second permissions, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}b"), clients).await;

    steps.push((
        "root: deactivate".into(),
        observe(admin.update_user_status(&plan.name, UserStatus::Inactive), |_| {
            String::new()
        })
        .await,
    ));
    let label = "deactivated, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}c"), clients).await;

    steps.push((
        "root: delete_user".into(),
        observe(admin.delete_user(&plan.name), |_| String::new()).await,
    ));
    let label = "deleted, same session";
    round(&mut steps, label, &session, names, &x1, &format!("{i}d"), clients).await;
    for c in clients {
        session.release_client(c);
    }
    Ok(steps)
}

/// Model vs real for authentication and authorization: the login cases, then `users` users with
/// permission sets drawn from `seed`, each through its own session (see [`user_steps`]). Every
/// difference is listed, with the seed, the user's permission sets, the step and both answers.
/// `model_admin` and `real_admin` act as root on the same sides as `model` and `real`.
pub async fn run_auth<M: Backend, AM: Admin, R: Backend, AR: Admin>(
    model: &M,
    model_admin: &AM,
    real: &R,
    real_admin: &AR,
    users: u32,
    seed: u64,
) -> Result<AuthReport, String> {
    let n = RUN.fetch_add(1, Ordering::Relaxed);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Unique on a reused server: the process, the time and the run.
    let tag = format!("{}-{}-{n}", std::process::id(), secs % 1_000_000);
    let names = Names {
        stream: format!("kig-auth-{tag}"),
        topics: TOPIC_NAMES.map(String::from),
        groups: ["g0".to_string(), "g1".to_string()],
        tag: tag.clone(),
    };
    let fail = |e: String| format!("seed {seed}: {e}");
    let model_ids = auth_setup("model", model, model_admin, &names).await.map_err(fail)?;
    let real_ids = auth_setup("real server", real, real_admin, &names)
        .await
        .map_err(fail)?;
    let mut cmp = Compare {
        seed,
        checks: 0,
        diffs: Vec::new(),
    };
    cmp.check(
        "setup",
        "ids of the first two topics of a new stream",
        AuthSeen::Ok(format!("{:?}", model_ids.1)),
        AuthSeen::Ok(format!("{:?}", real_ids.1)),
    );
    let m = login_steps("model", model, model_admin, &names).await.map_err(fail)?;
    let r = login_steps("real server", real, real_admin, &names)
        .await
        .map_err(fail)?;
    compare_steps(&mut cmp, "logins", m, r);

    let mut rng = SplitMix(seed);
    for index in 0..users {
        let plan = UserPlan {
            index,
            name: format!("kig{tag}-u{index}"),
            password: format!("pw-{index}"),
            grants: [Grant::draw(&mut rng), Grant::draw(&mut rng)],
        };
        let clients = [
            1_000_000 + (n * 1_000 + u64::from(index)) * 2,
            1_000_001 + (n * 1_000 + u64::from(index)) * 2,
        ];
        let m = user_steps("model", model, model_admin, &names, model_ids, &plan, clients)
            .await
            .map_err(fail)?;
        let r = user_steps("real server", real, real_admin, &names, real_ids, &plan, clients)
            .await
            .map_err(fail)?;
        let context = format!(
            "user {} with [{}], then [{}]",
            plan.name,
            plan.grants[0].describe(),
            plan.grants[1].describe()
        );
        compare_steps(&mut cmp, &context, m, r);
    }
    if cmp.diffs.is_empty() {
        return Ok(AuthReport {
            checks: cmp.checks,
            users,
        });
    }
    Err(format!(
        "seed {} (KIG_DIFF_SEED={} repeats the draws): {} of {} steps differ:\n  {}",
        cmp.seed,
        cmp.seed,
        cmp.diffs.len(),
        cmp.checks,
        cmp.diffs.join("\n  ")
    ))
}
