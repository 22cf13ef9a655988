//! Group authorization (docs/spec/auth.md, AUTHZ-GROUP-*): Iggy has no group resource, so
//! whether a principal may act on a Kafka group is whether Iggy lets it poll the group's
//! topics. This module asks Iggy, once per topic and request, and fails closed: an answer that
//! is neither a grant nor a refusal refuses too. It also names whom group resources count
//! against (LIMIT-GROUP-OWNER-1).

use crate::auth::sessions::Session;
use crate::backend::{Backend, BackendError};
use crate::gateway::Gateway;
use crate::groups::{DescribedGroup, Owner};
use kafka_protocol::error::ResponseError;
use std::collections::HashMap;
use std::net::IpAddr;

/// Whom a request's group resources count against: its principal, or without SASL the
/// client's address key, which then stands for the principal (LIMIT-GROUP-OWNER-1): an IPv6
/// client rotating through its /64 is one owner (LIMIT-ADDRESS-KEY-1).
pub(crate) fn owner<B>(gateway: &Gateway<B>, session: &Session<B>, peer: IpAddr) -> Owner {
    match &session.principal {
        Some(principal) => format!("user:{}", principal.username).into(),
        None => format!("address:{}", gateway.config.limits.address_prefixes.key(peer)).into(),
    }
}

/// What Iggy said of a set of topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The session may poll every existing topic of the set.
    Allowed,
    /// Iggy refused the session on this topic.
    Denied(String),
    /// Iggy could not say for this topic (a timeout, a lost connection): refused, retriably.
    Unknown(String),
}

impl Verdict {
    /// The Kafka code a refused group request gets (AUTHZ-GROUP-4): GROUP_AUTHORIZATION_FAILED
    /// for a refusal, COORDINATOR_NOT_AVAILABLE, which clients retry, when Iggy could not answer.
    pub(crate) fn refusal_code(&self) -> Option<i16> {
        match self {
            Verdict::Allowed => None,
            Verdict::Denied(_) => Some(ResponseError::GroupAuthorizationFailed.code()),
            Verdict::Unknown(_) => Some(ResponseError::CoordinatorNotAvailable.code()),
        }
    }
}

/// Whether a missing topic or stream is what Iggy answered: a topic that does not exist holds
/// nothing to protect, so it grants nothing and refuses nothing.
fn is_not_found(e: &BackendError) -> bool {
    crate::error_map::kafka_code(e).0 == ResponseError::UnknownTopicOrPartition.code()
}

/// What Iggy's answer to a poll-permission probe of `topic` says (AUTHZ-GROUP-4): a grant, a
/// refusal, a topic that does not exist (nothing to protect), or no answer, which refuses.
fn verdict_of<T>(topic: &str, answer: &Result<T, BackendError>) -> Verdict {
    match answer {
        Ok(_) => Verdict::Allowed,
        Err(e) if crate::error_map::is_denied(e) => Verdict::Denied(topic.to_string()),
        Err(e) if is_not_found(e) => Verdict::Allowed,
        Err(_) => Verdict::Unknown(topic.to_string()),
    }
}

/// Iggy's answers for one request's session, each topic asked once however many groups name
/// it.
pub(crate) struct PollPermissions<'a, B> {
    gateway: &'a Gateway<B>,
    session: &'a Session<B>,
    known: HashMap<String, Verdict>,
}

impl<'a, B: Backend> PollPermissions<'a, B> {
    pub(crate) fn new(gateway: &'a Gateway<B>, session: &'a Session<B>) -> Self {
        Self {
            gateway,
            session,
            known: HashMap::new(),
        }
    }

    /// Whether anything is checked: without SASL every session may everything.
    pub(crate) fn checks(&self) -> bool {
        self.session.principal.is_some()
    }

    /// AUTHZ-GROUP-1: whether Iggy lets the session poll every existing topic of `topics`,
    /// asked by reading `group_id`'s stored offset of partition 0 in the session (Iggy's
    /// GetConsumerOffset rule is its poll rule). Without SASL everyone may.
    pub(crate) async fn verdict(&mut self, group_id: &str, topics: &[&str]) -> Verdict {
        if !self.checks() {
            return Verdict::Allowed;
        }
        let key = crate::offset_store::offsets_group(group_id);
        for &topic in topics {
            let verdict = match self.known.get(topic) {
                Some(verdict) => verdict.clone(),
                None => {
                    let target = self.gateway.config.topics.resolve(topic);
                    let answer = self
                        .session
                        .backend
                        .get_consumer_offset(&target.stream, &target.topic, 0, &key)
                        .await;
                    let verdict = verdict_of(topic, &answer);
                    if let (Verdict::Unknown(_), Err(e)) = (&verdict, &answer) {
                        tracing::warn!(
                            "group {}: Iggy did not say whether {} may poll {}: {e}; refusing (AUTHZ-GROUP-4)",
                            crate::log_text::clip(group_id),
                            self.session.who(),
                            crate::log_text::clip(topic)
                        );
                    }
                    self.known.insert(topic.to_string(), verdict.clone());
                    verdict
                }
            };
            if verdict != Verdict::Allowed {
                if let Verdict::Denied(topic) = &verdict {
                    tracing::info!(
                        "group {}: {} may not poll the group's topic {} (AUTHZ-GROUP-1)",
                        crate::log_text::clip(group_id),
                        self.session.who(),
                        crate::log_text::clip(topic)
                    );
                }
                return verdict;
            }
        }
        Verdict::Allowed
    }

    /// AUTHZ-GROUP-4: whether the session may act on `group_id` as a non-member (leave by
    /// instance id, delete, commit from outside, see it listed): it may poll every topic the
    /// group's members and pending members subscribe to.
    pub(crate) async fn on_group(&mut self, group_id: &str) -> Verdict {
        if !self.checks() {
            return Verdict::Allowed;
        }
        let topics = self.gateway.groups.topics(group_id).unwrap_or_default();
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.verdict(group_id, &topics).await
    }

    /// AUTHZ-GROUP-3: whether the session may see `group` (it could join it). Fails closed.
    pub(crate) async fn may_see(&mut self, group_id: &str, group: &DescribedGroup) -> bool {
        if !self.checks() {
            return true;
        }
        let topics: Vec<&str> = group.topics.iter().map(String::as_str).collect();
        self.verdict(group_id, &topics).await == Verdict::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_common::IggyError;

    #[test]
    fn limit_address_key_1_limit_group_owner_1_one_ipv6_64_is_one_owner_without_sasl() {
        let gateway = crate::embedded_gateway(Default::default(), std::sync::Arc::new(crate::clock::SystemClock), 1);
        let session = &gateway.default_session;
        let of = |address: &str| owner(&gateway, session, address.parse().unwrap());
        assert_eq!(of("2001:db8:0:7::1"), of("2001:db8:0:7:ffff::2"));
        assert_ne!(of("2001:db8:0:7::1"), of("2001:db8:0:8::1"));
        assert_ne!(
            of("192.0.2.1"),
            of("192.0.2.2"),
            "IPv4 by the whole address, by default"
        );
    }

    #[test]
    fn authz_group_4_a_permission_probe_without_an_answer_refuses() {
        let probe = |e: IggyError| verdict_of::<()>("t", &Err(BackendError::Iggy(e)));
        assert_eq!(verdict_of("t", &Ok::<_, BackendError>(None::<u64>)), Verdict::Allowed);
        assert_eq!(probe(IggyError::Unauthorized), Verdict::Denied("t".into()));
        assert_eq!(
            probe(IggyError::TopicNameNotFound("t".into(), "s".into())),
            Verdict::Allowed
        );
        // An Iggy timeout or a lost connection granted everything before (AUTHZ-GROUP-4).
        for unanswered in [
            IggyError::Disconnected,
            IggyError::NotConnected,
            IggyError::CannotEstablishConnection,
        ] {
            let verdict = probe(unanswered);
            assert_eq!(verdict, Verdict::Unknown("t".into()));
            assert_eq!(
                verdict.refusal_code(),
                Some(ResponseError::CoordinatorNotAvailable.code())
            );
        }
        assert_eq!(
            probe(IggyError::Unauthorized).refusal_code(),
            Some(ResponseError::GroupAuthorizationFailed.code())
        );
    }
}
