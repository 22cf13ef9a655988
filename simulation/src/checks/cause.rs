//! Why a Produce attempt failed, from the faults on its path while it was in flight: the
//! explanation a duplicate carries. An attempt's path is its producer's link to the gateway it
//! went to, that gateway, its link to Iggy, and Iggy. The most specific fault wins: one the world
//! tagged with the attempt, then a restart, a lost response, a hold, a partition, a delay.

use super::index::{secs, Index};
use crate::history::{
    AttemptOutcome, Fault, FaultId, FaultKind, Hop, ProduceAttempt, ProduceRequest, RecordValue, RequestId,
};
use serde::{Deserialize, Serialize};

/// How many failed attempts a cause line spells out; the rest are counted by cause.
const SHOWN_ATTEMPTS: usize = 4;

/// The fault behind a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Why {
    /// The Produce response was lost between the gateway and the producer, after the write.
    LostProduceResponse,
    /// Iggy wrote the records and its response to the gateway was lost: the gateway answered an
    /// error and the producer retried.
    LostIggyResponse,
    /// The gateway restarted while the attempt was in flight.
    GatewayRestart,
    /// Iggy restarted (data kept) while the attempt was in flight.
    IggyRestart,
    /// The replicated cluster's primary crashed or was isolated with it in flight.
    PrimaryFailed,
    /// The request was held on the producer's link and arrived after the producer gave up.
    HeldRequest,
    /// A link on the path was partitioned while the attempt was in flight.
    Partitioned,
    /// A link on the path was slowed while the attempt was in flight.
    Delayed,
    /// The request was dropped before the gateway or Iggy handled it: it wrote nothing.
    RequestLost,
    /// Abandoned with its connection when an earlier request in flight on it failed
    /// ([`AttemptCause::behind`]); the producer sent the whole window again.
    AbandonedWithConnection,
    /// No fault on its path: the answer was merely late.
    NoFault,
}

/// One failed attempt of a duplicated request, and why it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptCause {
    pub attempt: u32,
    pub gateway: String,
    pub sent_us: u64,
    pub outcome: Option<AttemptOutcome>,
    pub why: Why,
    pub fault: Option<FaultId>,
    /// For [`Why::AbandonedWithConnection`]: the earlier attempt whose failure took it down.
    pub behind: Option<(RequestId, u32)>,
}

/// Everything behind one duplicated request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateCause {
    pub request: RequestId,
    pub producer: String,
    /// Whether the producer had a producer id: its duplicate is then an
    /// [`IdempotentDuplicate`](super::Class::IdempotentDuplicate), a violation.
    pub idempotent: bool,
    /// The request's records that were stored more than once.
    pub values: Vec<RecordValue>,
    /// The offsets of the copies of the first of them.
    pub copies: Vec<i64>,
    /// The acknowledged attempt and the offset it gave the first of them.
    pub acked: Option<(u32, i64)>,
    /// Every attempt that was not acknowledged, with its cause.
    pub failed: Vec<AttemptCause>,
}

impl DuplicateCause {
    /// The cause in one line.
    pub(crate) fn text(&self, index: &Index<'_>) -> String {
        let mut parts: Vec<String> = self
            .failed
            .iter()
            .take(SHOWN_ATTEMPTS)
            .map(|a| {
                let outcome = match a.outcome {
                    Some(AttemptOutcome::Error { code }) => format!("answered error {code}"),
                    Some(AttemptOutcome::TimedOut) => "no answer in time".into(),
                    Some(AttemptOutcome::ConnectionLost) => "connection lost".into(),
                    Some(AttemptOutcome::Acked { .. }) => "acknowledged".into(),
                    None => "never answered".into(),
                };
                let fault = a
                    .fault
                    .map(|id| describe(&index.history.faults[id]))
                    .unwrap_or_default();
                format!(
                    "attempt {} to {} ({outcome}): {}{fault}",
                    a.attempt,
                    a.gateway,
                    why_text(a.why)
                )
            })
            .collect();
        if self.failed.len() > SHOWN_ATTEMPTS {
            let mut rest: Vec<(Why, usize)> = Vec::new();
            for a in &self.failed[SHOWN_ATTEMPTS..] {
                match rest.iter_mut().find(|(why, _)| *why == a.why) {
                    Some((_, n)) => *n += 1,
                    None => rest.push((a.why, 1)),
                }
            }
            let rest: Vec<String> = rest.iter().map(|(why, n)| format!("{n} {}", why_text(*why))).collect();
            parts.push(format!(
                "{} more failed attempts: {}",
                self.failed.len() - SHOWN_ATTEMPTS,
                rest.join(", ")
            ));
        }
        match self.acked {
            Some((attempt, offset)) => parts.push(format!("attempt {attempt} acknowledged at {offset}")),
            None => parts.push("never acknowledged".into()),
        }
        parts.join("; ")
    }
}

pub(crate) fn why_text(why: Why) -> &'static str {
    match why {
        Why::LostProduceResponse => "written, its Produce response lost",
        Why::LostIggyResponse => "written by Iggy, Iggy's response to the gateway lost",
        Why::GatewayRestart => "the gateway restarted with it in flight",
        Why::IggyRestart => "Iggy restarted with it in flight",
        Why::PrimaryFailed => {
            "the Iggy primary failed with it in flight: an unknown outcome, answered retriable and not resent by the gateway (CLUSTER-UNKNOWN-1)"
        }
        Why::HeldRequest => "held on the way and written after the producer gave up",
        Why::Partitioned => "a link on its path was partitioned",
        Why::Delayed => "a link on its path was slowed",
        Why::RequestLost => "dropped before it was handled",
        Why::AbandonedWithConnection => "abandoned with its connection when an earlier request on it failed",
        Why::NoFault => "no fault on its path",
    }
}

/// ` (fault #3: gateway restart at 1.234 s)`
fn describe(fault: &Fault) -> String {
    let what = match &fault.kind {
        FaultKind::Partition { hop } => format!("{hop} partitioned"),
        FaultKind::Hold { hop } => format!("{hop} held"),
        FaultKind::Delay { hop, extra_ms } => format!("{hop} delayed {extra_ms} ms"),
        FaultKind::RequestLost { hop, .. } => format!("request lost on {hop}"),
        FaultKind::ResponseLost { hop, .. } => format!("response lost on {hop}"),
        FaultKind::GatewayRestart { gateway } => format!("{gateway} restarted"),
        FaultKind::IggyRestart => "iggy restarted".into(),
        FaultKind::IggyNodeCrash { node } => format!("{node} crashed (the primary)"),
        FaultKind::IggyNodeIsolated { node } => format!("{node} isolated (the primary)"),
        FaultKind::GatewayCrash { gateway } => format!("{gateway} crashed"),
    };
    format!(" (fault #{}: {what} at {})", fault.id, secs(fault.start_us))
}

/// Why `attempt` of `request` failed: a fault on its own path, or else the failure of an earlier
/// attempt in flight on the same connection that ended at the same moment, with that one's fault.
pub(crate) fn attempt_cause(index: &Index<'_>, request: &ProduceRequest, attempt: &ProduceAttempt) -> AttemptCause {
    let own = own_cause(index, request, attempt);
    if own.why != Why::NoFault || attempt.outcome_us.is_none() {
        return own;
    }
    let sibling = index.history.produces.iter().find_map(|other| {
        if other.producer != request.producer || other.id == request.id {
            return None;
        }
        other
            .attempts
            .iter()
            .find(|a| {
                a.gateway == attempt.gateway
                    && a.connection == attempt.connection
                    && a.outcome_us == attempt.outcome_us
                    && a.sent_us <= attempt.sent_us
                    && !matches!(a.outcome, Some(AttemptOutcome::Acked { .. }))
            })
            .map(|a| (other, a))
    });
    match sibling {
        Some((other, a)) => AttemptCause {
            why: Why::AbandonedWithConnection,
            fault: own_cause(index, other, a).fault,
            behind: Some((other.id, a.attempt)),
            ..own
        },
        None => own,
    }
}

fn own_cause(index: &Index<'_>, request: &ProduceRequest, attempt: &ProduceAttempt) -> AttemptCause {
    let producer = index.producer_name(request);
    let from = attempt.sent_us;
    let to = attempt.outcome_us.unwrap_or(u64::MAX);
    let on_producer_link = |hop: &Hop| matches!(hop, Hop::ClientGateway { client, gateway } if client == producer && *gateway == attempt.gateway);
    let on_iggy_link = |hop: &Hop| matches!(hop, Hop::GatewayIggy { gateway } if *gateway == attempt.gateway);
    let on_path = |hop: &Hop| on_producer_link(hop) || on_iggy_link(hop);
    let tag = Some((request.id, attempt.attempt));
    let faults = &index.history.faults;
    // Most specific first.
    let rank = |fault: &Fault| -> Option<(u8, Why)> {
        let in_window = fault.overlaps(from, to);
        match &fault.kind {
            FaultKind::ResponseLost { hop, produce } if *produce == tag => Some((0, response_lost(hop))),
            FaultKind::RequestLost { produce, .. } if *produce == tag => Some((0, Why::RequestLost)),
            _ if !in_window => None,
            FaultKind::GatewayRestart { gateway } if *gateway == attempt.gateway => Some((1, Why::GatewayRestart)),
            FaultKind::IggyRestart => Some((2, Why::IggyRestart)),
            FaultKind::GatewayCrash { gateway } if *gateway == attempt.gateway => Some((1, Why::GatewayRestart)),
            FaultKind::IggyNodeCrash { .. } | FaultKind::IggyNodeIsolated { .. } => Some((2, Why::PrimaryFailed)),
            FaultKind::ResponseLost { hop, produce: None } if on_path(hop) => Some((3, response_lost(hop))),
            FaultKind::Hold { hop } if on_producer_link(hop) => Some((4, Why::HeldRequest)),
            FaultKind::Partition { hop } if on_path(hop) => Some((5, Why::Partitioned)),
            FaultKind::Delay { hop, .. } if on_path(hop) => Some((6, Why::Delayed)),
            FaultKind::RequestLost { hop, produce: None } if on_path(hop) => Some((7, Why::RequestLost)),
            _ => None,
        }
    };
    let best = faults
        .iter()
        .filter_map(|f| rank(f).map(|(r, why)| (r, f.id, why)))
        .min_by_key(|(r, id, _)| (*r, *id));
    AttemptCause {
        attempt: attempt.attempt,
        gateway: attempt.gateway.clone(),
        sent_us: attempt.sent_us,
        outcome: attempt.outcome,
        why: best.map_or(Why::NoFault, |(_, _, why)| why),
        fault: best.map(|(_, id, _)| id),
        behind: None,
    }
}

fn response_lost(hop: &Hop) -> Why {
    match hop {
        Hop::ClientGateway { .. } => Why::LostProduceResponse,
        Hop::GatewayIggy { .. } => Why::LostIggyResponse,
    }
}
