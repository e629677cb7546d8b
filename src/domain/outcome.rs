//! How a negotiation's result is derived from its turns: the outcome artifact, agreed roles, the
//! sentence that says how it ended, and the turn cap that applies to a pairing.
//!
//! Roles are agreed only when the two sides' last suggestions agree: the accepting turn's view
//! of both people's roles is the mirror of the turn it accepted (what one side claims for
//! itself is what the other gave it, and the other way round). Otherwise none are agreed, and
//! the outcome keeps each side's view (`role_views`) so that a reader can say who thought what.
//!
//! The stored outcome keeps the final turn's reasoning, which is private to that turn's side
//! like every turn's. [`Outcome::for_reader`] is the outcome as one reader sees it: the service
//! and the final turn's own side read that reasoning; the other side reads instead
//! [`Outcome::summary`], a sentence the service writes from the turns' actions alone ("Tomas
//! Novak's agent accepted Maya Chen's counter at turn 7."), and the final turn's `message`,
//! which was written for them.

use serde::{Deserialize, Serialize};

use super::{
    opportunity::OpportunityEvent,
    turn::{Action, FallbackReason, Played, PlayedBy, Role, Side, SideKind, SuggestedRoles, Turn},
};

/// Why a negotiation ended without an accept or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The turn cap was reached.
    TurnCap,
    /// The personal-vs-personal deadline passed.
    Timeout,
    /// The platform canceled it.
    Canceled,
}

impl EndReason {
    /// The wire name (`turn_cap`, `timeout`, `canceled`), also used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::TurnCap => "turn_cap",
            EndReason::Timeout => "timeout",
            EndReason::Canceled => "canceled",
        }
    }
}

/// One user's role in an accepted match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgreedRole {
    /// The user.
    pub user_id: String,
    /// Their role.
    pub role: Role,
}

/// One side's view of the roles, from its last turn before the end: the roles it suggested for
/// its own user and for the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleView {
    /// The side's user.
    pub user_id: String,
    /// The roles it suggested, from its user's point of view.
    pub suggested_roles: SuggestedRoles,
    /// Who made the suggestion: the side's agent, or Parley for its user (absent for an outcome
    /// stored before this was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub played_by: Option<PlayedBy>,
}

/// The `negotiation-outcome` artifact, written once when the negotiation ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// True iff the last action was accept.
    pub has_opportunity: bool,
    /// Roles both sides agreed on: only for an accept after at least two turns, and only when
    /// the accepting turn's suggestion mirrors the accepted turn's; empty otherwise.
    pub agreed_roles: Vec<AgreedRole>,
    /// Each side's view of the roles at the end of an accept (the accepting side first): what
    /// each suggested for its own user and for the other, agreed or not. Empty unless an accept
    /// after at least two turns ended it.
    #[serde(default)]
    pub role_views: Vec<RoleView>,
    /// Why it ended. An accept or reject: that final turn's reasoning for the service and the
    /// final turn's own side, and `summary` for the other side (a turn's reasoning is private to
    /// its side). Otherwise why it ended without one, for everyone.
    pub reasoning: String,
    /// Turns taken, the opening propose included.
    pub turn_count: u32,
    /// Set when no accept/reject ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<EndReason>,
    /// How it ended, in a sentence the service writes from the turns' actions and the people's
    /// names, the same for every reader ("Tomas Novak's agent accepted Maya Chen's counter at
    /// turn 7."). Present in every view of an outcome; not part of the stored artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The final turn's `message` (written for the other side), when an accept or reject that
    /// carried one ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An earlier round of an opportunity's negotiation, as a later round carries it: every turn
/// with every side's reasoning (views show each side only its own) and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviousRound {
    /// That round's negotiation (task) id; it stays readable.
    pub negotiation_id: uuid::Uuid,
    /// Its turns, numbered from 0.
    pub turns: Vec<Turn>,
    /// Its outcome (`None` only if it never ended, which a reactivation rules out).
    pub outcome: Option<Outcome>,
}

impl Outcome {
    /// The outcome as a reader sees it. `turns` are the negotiation's turns (the last one
    /// included), `name_of` names each side's user, and `reads_final_reasoning` says whether the
    /// reader may read the reasoning of the turn that ended it (the service and that turn's own
    /// side may; see [`crate::domain::Viewer`]). Every reader gets `summary` and `message`.
    pub fn for_reader(&self, turns: &[Turn], name_of: impl Fn(Side) -> String, reads_final_reasoning: bool) -> Outcome {
        let summary = self.summary(turns, name_of);
        let final_turn = self.final_turn(turns);
        let reasoning = match final_turn {
            Some(_) if !reads_final_reasoning => summary.clone(),
            _ => self.reasoning.clone(),
        };
        Outcome {
            reasoning,
            message: final_turn.and_then(|t| t.message.clone()),
            summary: Some(summary),
            ..self.clone()
        }
    }

    /// The turn that ended the negotiation: its last turn when an accept or reject ended it,
    /// `None` when something else did (cap, deadline, cancel).
    pub fn final_turn<'t>(&self, turns: &'t [Turn]) -> Option<&'t Turn> {
        if self.reason.is_some() { None } else { turns.last() }
    }

    /// How the negotiation ended, in one sentence built from the turns' actions and the names
    /// alone, never from anyone's reasoning; turns are numbered from 0 as everywhere.
    pub fn summary(&self, turns: &[Turn], name_of: impl Fn(Side) -> String) -> String {
        let count = self.turn_count;
        let turns_word = if count == 1 { "turn" } else { "turns" };
        match self.reason {
            Some(EndReason::TurnCap) => format!("Stalled: no agreement within the cap of {count} {turns_word}."),
            Some(EndReason::Timeout) => {
                format!("Stalled: the deadline passed after {count} {turns_word} without agreement.")
            }
            Some(EndReason::Canceled) => format!("Canceled by the platform after {count} {turns_word}."),
            None => {
                let Some(last) = turns.last() else { return "Ended before any turn.".to_owned() };
                let verb = match last.action {
                    Action::Accept => "accepted",
                    Action::Reject => "rejected",
                    other => other.as_str(),
                };
                let speaker = name_of(last.side);
                let n = last.turn_number;
                let object = match turns.len().checked_sub(2).map(|i| &turns[i]) {
                    Some(previous) => {
                        let what = match previous.action {
                            Action::Propose => "proposal",
                            Action::Counter => "counter",
                            Action::Question => "question",
                            Action::Accept | Action::Reject => "turn",
                        };
                        format!(" {}'s {what}", name_of(previous.side))
                    }
                    None => " the match".to_owned(),
                };
                // Who decided is never hidden: Parley's own turns say so, and why it took them.
                match last.played.as_ref() {
                    Some(Played { played_by: PlayedBy::System, .. }) => {
                        format!("Parley {verb}{object} for {speaker} at turn {n} ({speaker} has no personal agent).")
                    }
                    Some(Played { played_by: PlayedBy::SystemFallback, fallback_reason, .. }) => {
                        let why = match fallback_reason {
                            Some(FallbackReason::ParkTimeout) => "did not answer in time",
                            Some(FallbackReason::Offline) => "was not running",
                            Some(FallbackReason::HandBack) => "handed the turn back",
                            None => "did not answer",
                        };
                        format!("Parley {verb}{object} for {speaker} at turn {n} ({speaker}'s agent {why}).")
                    }
                    _ => format!("{speaker}'s agent {verb}{object} at turn {n}."),
                }
            }
        }
    }

    /// What the outcome does to the opportunity.
    pub fn opportunity_event(&self) -> OpportunityEvent {
        match (self.has_opportunity, self.reason) {
            (true, _) => OpportunityEvent::AgentsAccepted,
            (false, None) => OpportunityEvent::AgentsRejected,
            (false, Some(_)) => OpportunityEvent::NegotiationStalled,
        }
    }
}

/// Derives the outcome from the turns taken. `reason` is given when something other than the
/// last turn ended it (cap, deadline, cancel); otherwise the last turn must be accept or reject.
pub fn derive_outcome(turns: &[Turn], user_of: impl Fn(Side) -> String, reason: Option<EndReason>) -> Outcome {
    let turn_count = turns.len() as u32;
    let last = turns.last();
    let has_opportunity = reason.is_none() && last.is_some_and(|t| t.action == Action::Accept);
    let mut agreed_roles = Vec::new();
    let mut role_views = Vec::new();
    if has_opportunity && turns.len() >= 2 {
        let accepter = &turns[turns.len() - 1];
        let previous = &turns[turns.len() - 2];
        let (mine, theirs) = (accepter.suggested_roles, previous.suggested_roles);
        if mine.own_user == theirs.other_user && mine.other_user == theirs.own_user {
            agreed_roles.push(AgreedRole { user_id: user_of(accepter.side), role: mine.own_user });
            agreed_roles.push(AgreedRole { user_id: user_of(previous.side), role: theirs.own_user });
        }
        let by = |t: &Turn| t.played.as_ref().map(|p| p.played_by);
        role_views.push(RoleView { user_id: user_of(accepter.side), suggested_roles: mine, played_by: by(accepter) });
        role_views.push(RoleView { user_id: user_of(previous.side), suggested_roles: theirs, played_by: by(previous) });
    }
    let reasoning = match (reason, last) {
        (Some(EndReason::TurnCap), _) => format!("No agreement within the cap of {turn_count} turns."),
        (Some(EndReason::Timeout), _) => "The negotiation passed its deadline without agreement.".to_owned(),
        (Some(EndReason::Canceled), _) => "The negotiation was canceled.".to_owned(),
        (None, Some(t)) => t.reasoning.clone(),
        (None, None) => String::new(),
    };
    Outcome { has_opportunity, agreed_roles, role_views, reasoning, turn_count, reason, summary: None, message: None }
}

/// Who plays the two sides, which decides the turn cap that applies (the caps themselves are
/// configuration: `PARLEY_MAX_TURNS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pairing {
    /// The system negotiator on both sides.
    System,
    /// A personal agent against the system negotiator.
    Mixed,
    /// Personal agents on both sides.
    Personal,
}

impl Pairing {
    /// The pairing of a negotiation whose sides are played so.
    pub fn of(source: SideKind, candidate: SideKind) -> Pairing {
        match (source, candidate) {
            (SideKind::System, SideKind::System) => Pairing::System,
            (SideKind::Personal, SideKind::Personal) => Pairing::Personal,
            _ => Pairing::Mixed,
        }
    }
}

/// Whether a non-terminal turn just taken exhausted the cap.
pub fn cap_reached(turn_count: u32, max_turns: u32) -> bool {
    max_turns > 0 && turn_count >= max_turns
}

/// Whether the turn about to be taken (0-based `turn_number`) is the last the cap allows.
pub fn is_final_turn(turn_number: u32, max_turns: u32) -> bool {
    max_turns > 0 && turn_number + 1 >= max_turns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: u32, action: Action, own: Role, other: Role) -> Turn {
        Turn {
            turn_number: n,
            side: Side::for_turn(n),
            action,
            reasoning: format!("turn {n}"),
            suggested_roles: SuggestedRoles { own_user: own, other_user: other },
            message: None,
            played: Some(crate::domain::Played::agent()),
        }
    }

    fn users(side: Side) -> String {
        match side {
            Side::Source => "alice".into(),
            Side::Candidate => "bob".into(),
        }
    }

    #[test]
    fn an_accept_agrees_the_roles_when_the_two_last_suggestions_mirror_each_other() {
        let turns = [
            turn(0, Action::Propose, Role::Patient, Role::Agent),
            turn(1, Action::Counter, Role::Agent, Role::Patient),
            turn(2, Action::Accept, Role::Patient, Role::Agent),
        ];
        let o = derive_outcome(&turns, users, None);
        assert!(o.has_opportunity);
        assert_eq!(o.turn_count, 3);
        assert_eq!(o.reasoning, "turn 2");
        assert_eq!(
            o.agreed_roles,
            vec![
                AgreedRole { user_id: "alice".into(), role: Role::Patient },
                AgreedRole { user_id: "bob".into(), role: Role::Agent },
            ]
        );
        assert_eq!(o.role_views.len(), 2);
        assert_eq!(o.opportunity_event(), OpportunityEvent::AgentsAccepted);
        let peers = [turn(0, Action::Propose, Role::Peer, Role::Peer), turn(1, Action::Accept, Role::Peer, Role::Peer)];
        assert_eq!(derive_outcome(&peers, users, None).agreed_roles.len(), 2);
    }

    #[test]
    fn roles_each_side_claimed_for_itself_are_not_agreed_and_each_sides_view_is_kept() {
        // Both say "I am the agent": each side's view, and nothing agreed.
        for (proposed, accepted) in [
            ((Role::Agent, Role::Patient), (Role::Agent, Role::Patient)),
            ((Role::Patient, Role::Agent), (Role::Peer, Role::Peer)),
            ((Role::Agent, Role::Patient), (Role::Patient, Role::Patient)),
        ] {
            let turns =
                [turn(0, Action::Propose, proposed.0, proposed.1), turn(1, Action::Accept, accepted.0, accepted.1)];
            let o = derive_outcome(&turns, users, None);
            assert!(o.has_opportunity && o.agreed_roles.is_empty(), "{proposed:?} / {accepted:?}");
            assert_eq!(
                o.role_views,
                vec![
                    RoleView {
                        user_id: "bob".into(),
                        suggested_roles: SuggestedRoles { own_user: accepted.0, other_user: accepted.1 },
                        played_by: Some(PlayedBy::Agent),
                    },
                    RoleView {
                        user_id: "alice".into(),
                        suggested_roles: SuggestedRoles { own_user: proposed.0, other_user: proposed.1 },
                        played_by: Some(PlayedBy::Agent),
                    },
                ]
            );
        }
    }

    #[test]
    fn a_reject_or_an_imposed_end_has_no_opportunity_and_no_roles() {
        let rejected =
            [turn(0, Action::Propose, Role::Peer, Role::Peer), turn(1, Action::Reject, Role::Peer, Role::Peer)];
        let o = derive_outcome(&rejected, users, None);
        assert!(!o.has_opportunity && o.agreed_roles.is_empty() && o.reason.is_none());
        assert_eq!(o.opportunity_event(), OpportunityEvent::AgentsRejected);

        for reason in [EndReason::TurnCap, EndReason::Timeout, EndReason::Canceled] {
            let o = derive_outcome(&rejected[..1], users, Some(reason));
            assert!(!o.has_opportunity && o.agreed_roles.is_empty());
            assert_eq!(o.reason, Some(reason));
            assert_eq!(o.opportunity_event(), OpportunityEvent::NegotiationStalled);
            assert!(!o.reasoning.is_empty());
        }
    }

    #[test]
    fn the_summary_never_says_an_agent_decided_what_parley_decided() {
        let names = |side: Side| if side == Side::Source { "Zed".to_owned() } else { "Kai".to_owned() };
        let by = |played: Played| {
            let mut t = turn(1, Action::Reject, Role::Peer, Role::Peer);
            t.played = Some(played);
            vec![turn(0, Action::Propose, Role::Peer, Role::Peer), t]
        };
        let rules = crate::domain::DecidedBy::Rules;
        // (who played the reject, the sentence)
        let table = [
            (Played::agent(), "Kai's agent rejected Zed's proposal at turn 1."),
            (
                Played::system(None, rules.clone()),
                "Parley rejected Zed's proposal for Kai at turn 1 (Kai has no personal agent).",
            ),
            (
                Played::system(Some(FallbackReason::Offline), rules.clone()),
                "Parley rejected Zed's proposal for Kai at turn 1 (Kai's agent was not running).",
            ),
            (
                Played::system(Some(FallbackReason::ParkTimeout), rules.clone()),
                "Parley rejected Zed's proposal for Kai at turn 1 (Kai's agent did not answer in time).",
            ),
            (
                Played::system(Some(FallbackReason::HandBack), rules),
                "Parley rejected Zed's proposal for Kai at turn 1 (Kai's agent handed the turn back).",
            ),
        ];
        for (played, want) in table {
            let turns = by(played);
            let o = derive_outcome(&turns, users, None);
            assert_eq!(o.summary(&turns, names), want);
        }
        let mut opening = turn(0, Action::Reject, Role::Peer, Role::Peer);
        opening.played = Some(Played::system(None, crate::domain::DecidedBy::Rules));
        let o = derive_outcome(std::slice::from_ref(&opening), users, None);
        assert_eq!(
            o.summary(&[opening], names),
            "Parley rejected the match for Zed at turn 0 (Zed has no personal agent)."
        );
    }

    #[test]
    fn an_outcome_serialises_as_the_artifact_expects() {
        let o = derive_outcome(&[turn(0, Action::Propose, Role::Peer, Role::Peer)], users, Some(EndReason::TurnCap));
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["hasOpportunity"], false);
        assert_eq!(v["turnCount"], 1);
        assert_eq!(v["reason"], "turn_cap");
        assert_eq!(v["agreedRoles"], serde_json::json!([]));
        assert_eq!(v["roleViews"], serde_json::json!([]));
        // An artifact written before role views were kept still reads.
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("roleViews");
        assert!(serde_json::from_value::<Outcome>(old).unwrap().role_views.is_empty());
    }

    #[test]
    fn caps_follow_the_pairing_and_zero_is_unlimited() {
        use SideKind::{Personal as P, System as S};
        assert_eq!(Pairing::of(S, S), Pairing::System);
        assert_eq!(Pairing::of(S, P), Pairing::Mixed);
        assert_eq!(Pairing::of(P, S), Pairing::Mixed);
        assert_eq!(Pairing::of(P, P), Pairing::Personal);
        assert!(!cap_reached(1_000, 0));
        assert!(!cap_reached(5, 6) && cap_reached(6, 6));
        assert!(is_final_turn(5, 6) && !is_final_turn(4, 6) && !is_final_turn(99, 0));
    }
}
