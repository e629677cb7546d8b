//! The opportunity's lifecycle, as people see it.
//!
//! ```text
//! negotiating -> pending (both agents accepted) -> accepted (every person accepted)
//!             -> rejected                      -> rejected (a person declined)
//!             -> stalled                       -> expired  (nobody decided in time)
//! ```
//!
//! A `stalled` or `expired` opportunity may be reactivated: back to `negotiating`, for a new
//! round of negotiation.

use serde::{Deserialize, Serialize};

use super::TransitionError;

/// Where an opportunity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpportunityStatus {
    /// Agents are negotiating; visible from the start.
    Negotiating,
    /// Both agents accepted; awaiting the people.
    Pending,
    /// Every person accepted.
    Accepted,
    /// An agent or a person said no.
    Rejected,
    /// The negotiation ended without a decision (turn cap, deadline, cancel).
    Stalled,
    /// Pending for longer than the TTL.
    Expired,
}

/// What can happen to an opportunity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpportunityEvent {
    /// The negotiation ended with an accept.
    AgentsAccepted,
    /// The negotiation ended with a reject.
    AgentsRejected,
    /// The negotiation ended undecided.
    NegotiationStalled,
    /// The last participant accepted.
    EveryoneAccepted,
    /// A participant declined.
    SomeoneDeclined,
    /// The pending TTL passed.
    Expire,
    /// The platform asked for a new round (a second chance).
    Reactivate,
}

impl OpportunityStatus {
    /// Every status.
    pub const ALL: [OpportunityStatus; 6] = [
        OpportunityStatus::Negotiating,
        OpportunityStatus::Pending,
        OpportunityStatus::Accepted,
        OpportunityStatus::Rejected,
        OpportunityStatus::Stalled,
        OpportunityStatus::Expired,
    ];

    /// The stored/wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpportunityStatus::Negotiating => "negotiating",
            OpportunityStatus::Pending => "pending",
            OpportunityStatus::Accepted => "accepted",
            OpportunityStatus::Rejected => "rejected",
            OpportunityStatus::Stalled => "stalled",
            OpportunityStatus::Expired => "expired",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<OpportunityStatus> {
        OpportunityStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The transition table. Anything not listed is an error.
    pub fn transition(self, event: OpportunityEvent) -> Result<OpportunityStatus, TransitionError> {
        use OpportunityEvent as E;
        use OpportunityStatus as S;
        match (self, event) {
            (S::Negotiating, E::AgentsAccepted) => Ok(S::Pending),
            (S::Negotiating, E::AgentsRejected) => Ok(S::Rejected),
            (S::Negotiating, E::NegotiationStalled) => Ok(S::Stalled),
            (S::Pending, E::EveryoneAccepted) => Ok(S::Accepted),
            (S::Pending, E::SomeoneDeclined) => Ok(S::Rejected),
            (S::Pending, E::Expire) => Ok(S::Expired),
            (S::Stalled, E::Reactivate) => Ok(S::Negotiating),
            (S::Expired, E::Reactivate) => Ok(S::Negotiating),
            (from, event) => Err(TransitionError { machine: "opportunity", from: from.as_str(), event: event.name() }),
        }
    }
}

impl OpportunityEvent {
    /// Every event.
    pub const ALL: [OpportunityEvent; 7] = [
        OpportunityEvent::AgentsAccepted,
        OpportunityEvent::AgentsRejected,
        OpportunityEvent::NegotiationStalled,
        OpportunityEvent::EveryoneAccepted,
        OpportunityEvent::SomeoneDeclined,
        OpportunityEvent::Expire,
        OpportunityEvent::Reactivate,
    ];

    /// The event's name.
    pub fn name(self) -> &'static str {
        match self {
            OpportunityEvent::AgentsAccepted => "agents_accepted",
            OpportunityEvent::AgentsRejected => "agents_rejected",
            OpportunityEvent::NegotiationStalled => "negotiation_stalled",
            OpportunityEvent::EveryoneAccepted => "everyone_accepted",
            OpportunityEvent::SomeoneDeclined => "someone_declined",
            OpportunityEvent::Expire => "expire",
            OpportunityEvent::Reactivate => "reactivate",
        }
    }
}

/// A person's decision on a pending opportunity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// They want to meet.
    Accept,
    /// They do not.
    Decline,
}

impl Decision {
    /// The stored/wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Accept => "accept",
            Decision::Decline => "decline",
        }
    }

    /// What this decision does to a pending opportunity, given whether both people have now
    /// accepted (this decision included): the first decline rejects it, the second accept
    /// accepts it, and a first accept changes nothing yet.
    pub fn event(self, both_accepted: bool) -> Option<OpportunityEvent> {
        match self {
            Decision::Decline => Some(OpportunityEvent::SomeoneDeclined),
            Decision::Accept if both_accepted => Some(OpportunityEvent::EveryoneAccepted),
            Decision::Accept => None,
        }
    }
}

impl std::fmt::Display for OpportunityStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{Decision, OpportunityEvent as E, OpportunityStatus as S};

    #[test]
    fn the_first_decline_rejects_and_the_second_accept_accepts() {
        assert_eq!(Decision::Decline.event(false), Some(E::SomeoneDeclined));
        assert_eq!(Decision::Decline.event(true), Some(E::SomeoneDeclined));
        assert_eq!(Decision::Accept.event(false), None);
        assert_eq!(Decision::Accept.event(true), Some(E::EveryoneAccepted));
        for d in [Decision::Accept, Decision::Decline] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
        assert!(serde_json::from_str::<Decision>("\"maybe\"").is_err());
    }

    #[test]
    fn the_transition_table_is_exactly_this() {
        let table = [
            (S::Negotiating, E::AgentsAccepted, S::Pending),
            (S::Negotiating, E::AgentsRejected, S::Rejected),
            (S::Negotiating, E::NegotiationStalled, S::Stalled),
            (S::Pending, E::EveryoneAccepted, S::Accepted),
            (S::Pending, E::SomeoneDeclined, S::Rejected),
            (S::Pending, E::Expire, S::Expired),
            (S::Stalled, E::Reactivate, S::Negotiating),
            (S::Expired, E::Reactivate, S::Negotiating),
        ];
        for s in S::ALL {
            for e in E::ALL {
                let expected = table.iter().find(|(f, ev, _)| *f == s && *ev == e).map(|t| t.2);
                assert_eq!(s.transition(e).ok(), expected, "{s} on {}", e.name());
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in S::ALL {
            assert_eq!(S::parse(s.as_str()), Some(s));
        }
        assert_eq!(S::parse("open"), None);
    }
}
