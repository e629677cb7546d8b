//! Who reads a negotiation, and so whose reasoning they see.
//!
//! A turn's `reasoning` is private to its own side: it is written for (or, by the system
//! negotiator, about) its own user, and may name that user's needs. The service sees every
//! turn's reasoning; a side (its user or its agent) sees its own turns' reasoning and only the
//! `action`, `message` and `suggestedRoles` of the other side's. The outcome follows the same
//! rule for the turn that ended the negotiation (see [`Outcome::for_reader`]). Every view that
//! shows turns or outcomes (the HTTP routes, the A2A task, MCP, pickup's history and earlier
//! rounds, a respond's answer) asks a [`Viewer`].

use super::{Outcome, Side, Turn};

/// Who reads a negotiation, which decides whose `reasoning` they see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// The platform (or an operator): every turn in full.
    Service,
    /// One side's user or agent: its own turns' reasoning, not the other side's.
    Side(Side),
}

impl Viewer {
    /// Whether this reader may see the reasoning of a turn spoken by `speaker`.
    pub fn sees_reasoning_of(self, speaker: Side) -> bool {
        match self {
            Viewer::Service => true,
            Viewer::Side(own) => own == speaker,
        }
    }

    /// The outcome as this reader may see it: the final turn's reasoning only when it is the
    /// reader's own side's (or the reader is the service), else the service's sentence; the
    /// sentence and the final turn's message for everyone. `turns` are the negotiation's turns,
    /// `name_of` names each side's user.
    pub fn outcome(self, outcome: &Outcome, turns: &[Turn], name_of: impl Fn(Side) -> String) -> Outcome {
        let reads = outcome.final_turn(turns).is_none_or(|t| self.sees_reasoning_of(t.side));
        outcome.for_reader(turns, name_of, reads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Action, EndReason, Role, SuggestedRoles, derive_outcome};

    fn turn(n: u32, action: Action, reasoning: &str, message: Option<&str>) -> Turn {
        Turn {
            turn_number: n,
            side: Side::for_turn(n),
            action,
            reasoning: reasoning.to_owned(),
            suggested_roles: SuggestedRoles { own_user: Role::Peer, other_user: Role::Peer },
            message: message.map(str::to_owned),
            played: Some(crate::domain::Played::agent()),
        }
    }

    fn names(side: Side) -> String {
        match side {
            Side::Source => "Maya Chen".into(),
            Side::Candidate => "Tomas Novak".into(),
        }
    }

    fn users(side: Side) -> String {
        names(side).to_lowercase()
    }

    #[test]
    fn the_other_side_reads_the_services_sentence_and_the_message_never_the_final_reasoning() {
        let turns = [
            turn(0, Action::Propose, "Maya needs a Rust engineer", None),
            turn(1, Action::Counter, "Tomas wants remote work", Some("Is it remote?")),
            turn(2, Action::Reject, "Intent mismatch: missing: rust, backend", Some("Not the right fit, sorry")),
        ];
        let stored = derive_outcome(&turns, users, None);
        assert_eq!(stored.reasoning, "Intent mismatch: missing: rust, backend");

        let sentence = "Maya Chen's agent rejected Tomas Novak's counter at turn 2.";
        let other = Viewer::Side(Side::Candidate).outcome(&stored, &turns, names);
        assert_eq!(other.reasoning, sentence);
        assert_eq!(other.summary.as_deref(), Some(sentence));
        assert_eq!(other.message.as_deref(), Some("Not the right fit, sorry"));
        assert!(!serde_json::to_string(&other).unwrap().contains("missing"), "{other:?}");

        for reader in [Viewer::Side(Side::Source), Viewer::Service] {
            let seen = reader.outcome(&stored, &turns, names);
            assert_eq!(seen.reasoning, "Intent mismatch: missing: rust, backend", "{reader:?}");
            assert_eq!(seen.summary.as_deref(), Some(sentence), "{reader:?}");
            assert_eq!(seen.message.as_deref(), Some("Not the right fit, sorry"));
        }
        // Everything else is the stored outcome's.
        assert_eq!((other.has_opportunity, other.turn_count, other.reason), (false, 3, None));
    }

    #[test]
    fn an_accept_names_who_accepted_what() {
        let turns = [
            turn(0, Action::Propose, "r0", None),
            turn(1, Action::Counter, "r1", None),
            turn(2, Action::Question, "r2", None),
            turn(3, Action::Accept, "r3", None),
        ];
        let stored = derive_outcome(&turns, users, None);
        let seen = Viewer::Side(Side::Source).outcome(&stored, &turns, names);
        assert_eq!(seen.reasoning, "Tomas Novak's agent accepted Maya Chen's question at turn 3.");
        assert_eq!(seen.message, None);
        let accepted = [turns[0].clone(), turn(1, Action::Accept, "r1", None)];
        let stored = derive_outcome(&accepted, users, None);
        assert_eq!(stored.summary(&accepted, names), "Tomas Novak's agent accepted Maya Chen's proposal at turn 1.");
    }

    #[test]
    fn an_imposed_end_is_told_alike_to_everyone() {
        let turns = [turn(0, Action::Propose, "private", None), turn(1, Action::Counter, "private too", Some("hm"))];
        for (reason, sentence) in [
            (EndReason::TurnCap, "Stalled: no agreement within the cap of 2 turns."),
            (EndReason::Timeout, "Stalled: the deadline passed after 2 turns without agreement."),
            (EndReason::Canceled, "Canceled by the platform after 2 turns."),
        ] {
            let stored = derive_outcome(&turns, users, Some(reason));
            for reader in [Viewer::Service, Viewer::Side(Side::Source), Viewer::Side(Side::Candidate)] {
                let seen = reader.outcome(&stored, &turns, names);
                assert_eq!(seen.reasoning, stored.reasoning, "{reason:?} {reader:?}");
                assert_eq!(seen.summary.as_deref(), Some(sentence));
                assert_eq!(seen.message, None, "the last turn did not end it");
                assert!(!seen.reasoning.contains("private"));
            }
        }
        let one = derive_outcome(&turns[..1], users, Some(EndReason::Canceled));
        assert_eq!(one.summary(&turns[..1], names), "Canceled by the platform after 1 turn.");
    }
}
