//! What one turn of a negotiation says: its action, the roles it suggests, and who may say what.
//!
//! These are wire-visible values (camelCase/lowercase strings); parsing them is the only way to
//! obtain one, so a stored or received turn can never hold an unknown action or role.

use serde::{Deserialize, Serialize};

/// The five things a turn can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Opening move; turn 0 only (turn 0 is a propose, or a reject of a match that does not
    /// serve the speaker's user).
    Propose,
    /// Keep talking: state objections or new terms.
    Counter,
    /// Agree; ends the negotiation with an opportunity.
    Accept,
    /// Decline; ends the negotiation without one.
    Reject,
    /// Ask the other side something; personal agents only, routed exactly like `counter`.
    Question,
}

impl Action {
    /// All actions, in a fixed order (for tables and tests).
    pub const ALL: [Action; 5] = [Action::Propose, Action::Counter, Action::Accept, Action::Reject, Action::Question];

    /// The wire name of the action.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Propose => "propose",
            Action::Counter => "counter",
            Action::Accept => "accept",
            Action::Reject => "reject",
            Action::Question => "question",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether this action ends the negotiation.
    pub fn is_terminal(self) -> bool {
        matches!(self, Action::Accept | Action::Reject)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The role a user would play in the match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Provides what the other needs (helper, mentor, provider).
    Agent,
    /// Receives what the other provides.
    Patient,
    /// Symmetric relationship.
    Peer,
}

impl Role {
    /// All roles.
    pub const ALL: [Role; 3] = [Role::Agent, Role::Patient, Role::Peer];

    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Patient => "patient",
            Role::Peer => "peer",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The role the other user plays when this user plays `self`.
    pub fn complement(self) -> Role {
        match self {
            Role::Agent => Role::Patient,
            Role::Patient => Role::Agent,
            Role::Peer => Role::Peer,
        }
    }
}

/// The roles a turn suggests, from the speaker's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuggestedRoles {
    /// The speaker's own user.
    pub own_user: Role,
    /// The other user.
    pub other_user: Role,
}

impl SuggestedRoles {
    /// Both users as peers: what an answer that suggests no roles stands for.
    pub const PEERS: SuggestedRoles = SuggestedRoles { own_user: Role::Peer, other_user: Role::Peer };
}

/// Which seat of the negotiation a turn belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The user whose discovery produced the match; speaks first (even turns).
    Source,
    /// The other user (odd turns).
    Candidate,
}

impl Side {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Candidate => "candidate",
        }
    }

    /// The side that speaks turn `n` (0-based): the source opens, then they alternate.
    pub fn for_turn(n: u32) -> Side {
        if n.is_multiple_of(2) { Side::Source } else { Side::Candidate }
    }

    /// The opposite seat.
    pub fn other(self) -> Side {
        match self {
            Side::Source => Side::Candidate,
            Side::Candidate => Side::Source,
        }
    }
}

/// Who plays a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SideKind {
    /// Parley's in-process system negotiator.
    System,
    /// The user's own agent, polling for its turns.
    Personal,
}

impl SideKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SideKind::System => "system",
            SideKind::Personal => "personal",
        }
    }
}

/// Whether `action` may be taken at turn `turn_number` (0-based) by a side played by `kind`.
///
/// Turn 0 is a propose, or a reject (a side need not present a match that does not serve its
/// user); only turn 0 may propose; only personal agents ask questions.
pub fn action_allowed(action: Action, turn_number: u32, kind: SideKind) -> bool {
    match (action, turn_number) {
        (Action::Propose | Action::Reject, 0) => true,
        (_, 0) | (Action::Propose, _) => false,
        (Action::Question, _) => kind == SideKind::Personal,
        (Action::Counter | Action::Accept | Action::Reject, _) => true,
    }
}

/// Who took a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlayedBy {
    /// The user's personal agent.
    Agent,
    /// Parley's system negotiator, for a user who has no personal agent.
    System,
    /// Parley's system negotiator, standing in for the user's personal agent (see
    /// [`FallbackReason`]).
    SystemFallback,
}

/// Why the system negotiator took a personal agent's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// The park timer fired: the turn waited `PARLEY_PARK_TIMEOUT` for the agent.
    ParkTimeout,
    /// The offline park timer fired: none of the user's agents was live, and the turn waited
    /// `PARLEY_PARK_TIMEOUT_OFFLINE`.
    Offline,
    /// The agent released the turn with `handBack`.
    HandBack,
}

impl FallbackReason {
    /// The wire name (also the metrics' `window` label).
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::ParkTimeout => "park_timeout",
            FallbackReason::Offline => "offline",
            FallbackReason::HandBack => "hand_back",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<FallbackReason> {
        [FallbackReason::ParkTimeout, FallbackReason::Offline, FallbackReason::HandBack]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// How a turn was decided: `agent` (the personal agent's own judgment), `rules` (the system
/// negotiator's rules) or `model:<name>` (the system negotiator's model, guarded by the rules).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DecidedBy {
    /// The personal agent.
    Agent,
    /// The system negotiator's rules.
    Rules,
    /// The system negotiator's model, by name.
    Model(String),
}

impl From<DecidedBy> for String {
    fn from(d: DecidedBy) -> String {
        match d {
            DecidedBy::Agent => "agent".to_owned(),
            DecidedBy::Rules => "rules".to_owned(),
            DecidedBy::Model(name) => format!("model:{name}"),
        }
    }
}

impl TryFrom<String> for DecidedBy {
    type Error = String;
    fn try_from(s: String) -> Result<DecidedBy, String> {
        match s.as_str() {
            "agent" => Ok(DecidedBy::Agent),
            "rules" => Ok(DecidedBy::Rules),
            _ => match s.strip_prefix("model:") {
                Some(name) if !name.is_empty() => Ok(DecidedBy::Model(name.to_owned())),
                _ => Err(format!("not a decider: {s}")),
            },
        }
    }
}

/// Who took a turn and how it was decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Played {
    /// Who took it.
    pub played_by: PlayedBy,
    /// For a `system_fallback` turn: why the system took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<FallbackReason>,
    /// How it was decided.
    pub decided_by: DecidedBy,
}

impl Played {
    /// A turn of the user's personal agent.
    pub fn agent() -> Played {
        Played { played_by: PlayedBy::Agent, fallback_reason: None, decided_by: DecidedBy::Agent }
    }

    /// A system negotiator's turn decided by `decided_by`, standing in for the agent when
    /// `fallback` says why.
    pub fn system(fallback: Option<FallbackReason>, decided_by: DecidedBy) -> Played {
        let played_by = if fallback.is_some() { PlayedBy::SystemFallback } else { PlayedBy::System };
        Played { played_by, fallback_reason: fallback, decided_by }
    }

    /// The seat's kind this turn was played as.
    pub fn seat(&self) -> SideKind {
        if self.played_by == PlayedBy::Agent { SideKind::Personal } else { SideKind::System }
    }
}

/// One turn already taken, as the negotiator and the history views see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// 0-based position in the negotiation.
    pub turn_number: u32,
    /// The seat that spoke.
    pub side: Side,
    /// What it did.
    pub action: Action,
    /// Why (required, non-empty).
    pub reasoning: String,
    /// The roles it suggested.
    pub suggested_roles: SuggestedRoles,
    /// Optional free text for the other side.
    pub message: Option<String>,
    /// Who took it and how it was decided; `None` only for a turn a caller is still forming,
    /// or one read from an earlier round recorded before this was stored.
    #[serde(flatten, default)]
    pub played: Option<Played>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_zero_admits_only_propose_or_reject() {
        for kind in [SideKind::System, SideKind::Personal] {
            for a in Action::ALL {
                assert_eq!(
                    action_allowed(a, 0, kind),
                    matches!(a, Action::Propose | Action::Reject),
                    "{a} at 0 by {kind:?}"
                );
            }
        }
    }

    #[test]
    fn later_turns_refuse_propose_and_system_questions() {
        for n in [1, 2, 7, 100] {
            for a in Action::ALL {
                let personal = action_allowed(a, n, SideKind::Personal);
                let system = action_allowed(a, n, SideKind::System);
                assert_eq!(personal, a != Action::Propose, "{a} at {n} personal");
                assert_eq!(system, !matches!(a, Action::Propose | Action::Question), "{a} at {n}");
            }
        }
    }

    #[test]
    fn wire_names_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
            assert_eq!(r.complement().complement(), r);
        }
        assert_eq!(Action::parse("Accept"), None);
        assert_eq!(Role::parse("boss"), None);
    }

    #[test]
    fn sides_alternate_from_the_source() {
        assert_eq!(Side::for_turn(0), Side::Source);
        assert_eq!(Side::for_turn(1), Side::Candidate);
        assert_eq!(Side::for_turn(6), Side::Source);
        assert_eq!(Side::Source.other(), Side::Candidate);
    }
}
