//! The typed commands an adapter hands the turn engine, checked here once whichever adapter
//! received them (HTTP, MCP, and next A2A): a respond ([`RespondCommand`], one rule set wherever
//! it comes from) and a pickup ([`PickupQuery`]: how long to wait, which negotiations to pass
//! over). An adapter maps its own wire shape onto these (a JSON body, a tool's arguments), calls
//! [`RespondCommand::check`] or the wait and skip parsers, and never adds rules of its own.
//! A refusal is [`DeliveryError::Invalid`], answered 400 `invalid_body` by every adapter.

use std::time::Duration;

use uuid::Uuid;

use super::{DeliveryError, TurnAnswer};
use crate::domain::{Action, SuggestedRoles};

/// Longest `reasoning` or `message` accepted.
pub const MAX_TEXT: usize = 10_000;

/// Most negotiations one pickup may skip.
pub const MAX_SKIP: usize = 100;

/// Longest claim token accepted (the service's are far shorter).
const MAX_CLAIM_TOKEN: usize = 200;

/// A respond as an adapter received it: typed, not yet checked.
///
/// The contract (the respond body in `docs/agents.md`): `message` is optional for every action,
/// `counter` and `question` included (null, absent or blank means none, as Index Network's
/// clients send it); `reasoning` is required but may be empty; `suggestedRoles` default to
/// `peer`/`peer`. An adapter whose shape lets `reasoning` be left out (the MCP tool) maps that
/// onto this command before it is checked; it adds no rule.
#[derive(Debug, Clone)]
pub struct RespondCommand {
    /// The token from pickup; optional for clients of Index Network's API.
    pub claim_token: Option<String>,
    /// `propose`, `counter`, `accept`, `reject` or `question`, as sent.
    pub action: String,
    /// Free text for the other side.
    pub message: Option<String>,
    /// Why (private to the responding side).
    pub reasoning: String,
    /// Roles from the responding user's view; `None`: both `peer`.
    pub suggested_roles: Option<SuggestedRoles>,
}

impl RespondCommand {
    /// The one rule set of a respond: the action is one of the five, `reasoning` and `message`
    /// are at most [`MAX_TEXT`] characters, a claim token is not empty and not over-long; a blank
    /// message is none and the reasoning is trimmed. Whether the action is allowed at this turn
    /// is the engine's to say (it knows the turn).
    pub fn check(self) -> Result<TurnAnswer, DeliveryError> {
        let action = Action::parse(&self.action).ok_or_else(|| {
            DeliveryError::Invalid("action must be one of propose, counter, accept, reject, question".into())
        })?;
        // An empty reasoning is accepted, as Index Network's own clients may send it: it stays
        // private to its side and shows as empty.
        let reasoning = self.reasoning.trim().to_owned();
        if reasoning.chars().count() > MAX_TEXT {
            return Err(DeliveryError::Invalid(format!("assessment.reasoning must be at most {MAX_TEXT} characters")));
        }
        if self.message.as_ref().is_some_and(|m| m.chars().count() > MAX_TEXT) {
            return Err(DeliveryError::Invalid(format!("message must be at most {MAX_TEXT} characters")));
        }
        if self.claim_token.as_ref().is_some_and(|t| t.is_empty() || t.len() > MAX_CLAIM_TOKEN) {
            return Err(DeliveryError::Invalid("claimToken is not a claim token".into()));
        }
        Ok(TurnAnswer {
            action,
            reasoning,
            suggested_roles: self.suggested_roles.unwrap_or(SuggestedRoles::PEERS),
            message: self.message.filter(|m| !m.trim().is_empty()),
            claim_token: self.claim_token,
        })
    }
}

/// A pickup: how long to wait for a turn and which negotiations' parked turns to pass over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PickupQuery {
    /// Hold up to this long when no turn is parked (already capped); `None`: answer at once.
    pub wait: Option<Duration>,
    /// Negotiations whose parked turns this pickup passes over (at most [`MAX_SKIP`]).
    pub skip: Vec<Uuid>,
}

fn bad_wait(max: Duration) -> DeliveryError {
    DeliveryError::Invalid(format!("wait must be a whole number of seconds from 1 to {}", max.as_secs()))
}

/// The one rule of a long-poll's `wait`: a whole number of seconds from 1, capped at `max`.
fn wait_of(secs: Option<u64>, max: Duration) -> Result<Duration, DeliveryError> {
    let secs = secs.filter(|s| *s > 0).ok_or_else(|| bad_wait(max))?;
    Ok(Duration::from_secs(secs).min(max))
}

/// A long-poll's `wait` given as a number of seconds (a tool's argument).
pub fn wait_from_secs(secs: Option<i64>, max: Duration) -> Result<Option<Duration>, DeliveryError> {
    secs.map(|secs| wait_of(u64::try_from(secs).ok(), max)).transpose()
}

/// A long-poll's `wait` given as text (a query parameter).
pub fn wait_from_text(raw: Option<&str>, max: Duration) -> Result<Option<Duration>, DeliveryError> {
    raw.map(|raw| wait_of(raw.trim().parse().ok(), max)).transpose()
}

/// A pickup's `skip`: negotiation ids separated by commas, at most [`MAX_SKIP`].
pub fn parse_skip(raw: Option<&str>) -> Result<Vec<Uuid>, DeliveryError> {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else { return Ok(Vec::new()) };
    let ids = raw
        .split(',')
        .map(|id| Uuid::parse_str(id.trim()))
        .collect::<Result<Vec<Uuid>, _>>()
        .map_err(|_| DeliveryError::Invalid("skip must be negotiation ids separated by commas".into()))?;
    if ids.len() > MAX_SKIP {
        return Err(DeliveryError::Invalid(format!("skip names at most {MAX_SKIP} negotiations")));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(action: &str, message: Option<&str>) -> RespondCommand {
        RespondCommand {
            claim_token: None,
            action: action.into(),
            message: message.map(Into::into),
            reasoning: "  why  ".into(),
            suggested_roles: None,
        }
    }

    #[test]
    fn a_counter_or_question_needs_no_message_and_blank_is_none() {
        for action in ["counter", "question", "accept", "reject", "propose"] {
            let answer = command(action, None).check().expect(action);
            assert_eq!(answer.message, None);
            assert_eq!(answer.reasoning, "why");
            assert_eq!(answer.suggested_roles, SuggestedRoles::PEERS);
        }
        assert_eq!(command("counter", Some("  ")).check().unwrap().message, None);
        assert_eq!(command("counter", Some("what stage?")).check().unwrap().message.as_deref(), Some("what stage?"));
    }

    #[test]
    fn refusals_name_the_field() {
        let refused = |c: RespondCommand| match c.check() {
            Err(DeliveryError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(refused(command("haggle", None)).starts_with("action must be one of"));
        assert!(refused(command("counter", Some(&"m".repeat(MAX_TEXT + 1)))).starts_with("message must be"));
        let long_reasoning = RespondCommand { reasoning: "r".repeat(MAX_TEXT + 1), ..command("accept", None) };
        assert!(refused(long_reasoning).starts_with("assessment.reasoning must be"));
        let empty_token = RespondCommand { claim_token: Some(String::new()), ..command("accept", None) };
        assert_eq!(refused(empty_token), "claimToken is not a claim token");
    }

    #[test]
    fn waits_are_the_same_as_numbers_and_as_text() {
        let max = Duration::from_secs(30);
        assert_eq!(wait_from_secs(Some(5), max).unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(wait_from_text(Some(" 5 "), max).unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(wait_from_secs(Some(99), max).unwrap(), Some(max));
        assert_eq!(wait_from_secs(None, max).unwrap(), None);
        for bad in [wait_from_secs(Some(0), max), wait_from_secs(Some(-1), max), wait_from_text(Some("x"), max)] {
            assert!(
                matches!(bad, Err(DeliveryError::Invalid(m)) if m == "wait must be a whole number of seconds from 1 to 30")
            );
        }
    }
}
