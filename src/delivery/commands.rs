//! The typed commands an adapter hands the turn engine, checked here once whichever adapter
//! received them (HTTP, MCP, and next A2A): a respond ([`RespondCommand`], one rule set wherever
//! it comes from) and a pickup ([`PickupQuery`]: how long to wait, which negotiations to pass
//! over). An adapter maps its own wire shape onto these (a JSON body, a tool's arguments), calls
//! [`RespondCommand::check`] or the wait and skip parsers, and never adds rules of its own.
//! A refusal is [`DeliveryError::Invalid`], answered 400 `invalid_body` by every adapter.

use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

use super::{DeliveryError, TurnAnswer};
use crate::domain::{Action, SuggestedRoles};

/// Longest `reasoning` or `message` accepted.
pub const MAX_TEXT: usize = 10_000;

/// Most negotiations one pickup may skip.
pub const MAX_SKIP: usize = 100;

/// Longest claim token accepted (the service's are far shorter).
const MAX_CLAIM_TOKEN: usize = 200;

/// Longest question an agent may ask its person.
pub const MAX_QUESTION: usize = 500;

/// Most options a question may offer.
pub const MAX_OPTIONS: usize = 5;

/// Longest option of a question.
pub const MAX_OPTION: usize = 100;

/// Longest answer a person may give.
pub const MAX_ANSWER: usize = 1_000;

/// The respond action that asks the agent's person instead of taking the turn.
pub const ASK_PERSON: &str = "ask_person";

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
    /// `propose`, `counter`, `accept`, `reject`, `question` or `ask_person`, as sent.
    pub action: String,
    /// Free text for the other side.
    pub message: Option<String>,
    /// Why (private to the responding side).
    pub reasoning: String,
    /// Roles from the responding user's view; `None`: both `peer`.
    pub suggested_roles: Option<SuggestedRoles>,
    /// `ask_person` only: what the agent asks its person.
    pub question: Option<String>,
    /// `ask_person` only: the answers the person may pick (free text is always possible).
    pub options: Option<Vec<String>>,
}

/// A respond as checked: a turn, or a question to the agent's person.
#[derive(Debug, Clone)]
pub enum Checked {
    /// The agent takes the turn.
    Turn(TurnAnswer),
    /// The agent asks its person first (`ask_person`).
    Ask(AskPerson),
}

/// An `ask_person` respond, checked: the question (trimmed, 1 to [`MAX_QUESTION`] characters)
/// and its options (at most [`MAX_OPTIONS`], each 1 to [`MAX_OPTION`] characters, distinct).
#[derive(Debug, Clone, Serialize)]
pub struct AskPerson {
    /// The question.
    pub question: String,
    /// The options (possibly none).
    pub options: Vec<String>,
    /// The claim token, when the client sends one.
    #[serde(skip)]
    pub claim_token: Option<String>,
}

impl AskPerson {
    /// SHA-256 of the checked body: a repeated ask with the same token must send the same.
    pub fn request_hash(&self) -> Vec<u8> {
        use sha2::Digest;
        sha2::Sha256::digest(serde_json::to_vec(self).unwrap_or_default()).to_vec()
    }
}

/// Checks a person's answer: trimmed, 1 to [`MAX_ANSWER`] characters.
pub fn check_answer(answer: &str) -> Result<String, DeliveryError> {
    let answer = answer.trim();
    if answer.is_empty() || answer.chars().count() > MAX_ANSWER {
        return Err(DeliveryError::Invalid(format!("answer must be 1 to {MAX_ANSWER} characters")));
    }
    Ok(answer.to_owned())
}

impl RespondCommand {
    /// The one rule set of a respond: the action is one of the five, `reasoning` and `message`
    /// are at most [`MAX_TEXT`] characters, a claim token is not empty and not over-long; a blank
    /// message is none and the reasoning is trimmed. Whether the action is allowed at this turn
    /// is the engine's to say (it knows the turn).
    pub fn check(self) -> Result<Checked, DeliveryError> {
        if self.claim_token.as_ref().is_some_and(|t| t.is_empty() || t.len() > MAX_CLAIM_TOKEN) {
            return Err(DeliveryError::Invalid("claimToken is not a claim token".into()));
        }
        if self.action == ASK_PERSON {
            return self.check_ask().map(Checked::Ask);
        }
        if self.question.is_some() || self.options.is_some() {
            return Err(DeliveryError::Invalid("question and options are for action ask_person only".into()));
        }
        self.check_turn().map(Checked::Turn)
    }

    /// The rules of `ask_person`: a question of 1 to [`MAX_QUESTION`] characters, at most
    /// [`MAX_OPTIONS`] distinct options of 1 to [`MAX_OPTION`] characters each.
    fn check_ask(self) -> Result<AskPerson, DeliveryError> {
        let question = self.question.as_deref().map(str::trim).unwrap_or_default().to_owned();
        if question.is_empty() || question.chars().count() > MAX_QUESTION {
            return Err(DeliveryError::Invalid(format!(
                "ask_person needs a question of 1 to {MAX_QUESTION} characters"
            )));
        }
        let options: Vec<String> = self.options.unwrap_or_default().iter().map(|o| o.trim().to_owned()).collect();
        if options.len() > MAX_OPTIONS {
            return Err(DeliveryError::Invalid(format!("options holds at most {MAX_OPTIONS} answers")));
        }
        if options.iter().any(|o| o.is_empty() || o.chars().count() > MAX_OPTION) {
            return Err(DeliveryError::Invalid(format!("each option must be 1 to {MAX_OPTION} characters")));
        }
        if options.iter().enumerate().any(|(i, o)| options[..i].contains(o)) {
            return Err(DeliveryError::Invalid("options must differ from each other".into()));
        }
        Ok(AskPerson { question, options, claim_token: self.claim_token })
    }

    /// The rules of a turn.
    fn check_turn(self) -> Result<TurnAnswer, DeliveryError> {
        let action = Action::parse(&self.action).ok_or_else(|| {
            DeliveryError::Invalid(
                "action must be one of propose, counter, accept, reject, question, ask_person".into(),
            )
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
            question: None,
            options: None,
        }
    }

    fn turn(c: RespondCommand) -> Result<TurnAnswer, DeliveryError> {
        match c.check()? {
            Checked::Turn(t) => Ok(t),
            Checked::Ask(a) => panic!("{a:?}"),
        }
    }

    #[test]
    fn ask_person_needs_a_short_question_and_at_most_five_distinct_options() {
        let ask = |question: Option<&str>, options: Option<Vec<&str>>| {
            let c = RespondCommand {
                question: question.map(Into::into),
                options: options.map(|o| o.into_iter().map(Into::into).collect()),
                ..command(ASK_PERSON, None)
            };
            match c.check() {
                Ok(Checked::Ask(a)) => Ok(a),
                Ok(other) => panic!("{other:?}"),
                Err(DeliveryError::Invalid(m)) => Err(m),
                Err(e) => panic!("{e:?}"),
            }
        };
        let a = ask(Some(" Is a 4-day week a must? "), Some(vec!["yes", " no "])).unwrap();
        assert_eq!(
            (a.question.as_str(), a.options.clone()),
            ("Is a 4-day week a must?", vec!["yes".into(), "no".into()])
        );
        assert!(ask(None, None).unwrap_err().starts_with("ask_person needs a question"));
        assert!(ask(Some("  "), None).is_err());
        assert!(ask(Some(&"q".repeat(MAX_QUESTION + 1)), None).is_err());
        assert!(ask(Some(&"q".repeat(MAX_QUESTION)), None).is_ok());
        assert!(ask(Some("q"), Some(vec!["a", "b", "c", "d", "e", "f"])).unwrap_err().starts_with("options holds"));
        assert!(ask(Some("q"), Some(vec!["a", "a"])).is_err());
        assert!(ask(Some("q"), Some(vec![""])).is_err());
        let stray = RespondCommand { question: Some("q".into()), ..command("accept", None) };
        assert!(matches!(stray.check(), Err(DeliveryError::Invalid(_))));
        assert_eq!(check_answer("  yes ").unwrap(), "yes");
        assert!(check_answer(" ").is_err());
        assert!(check_answer(&"a".repeat(MAX_ANSWER + 1)).is_err());
    }

    #[test]
    fn a_counter_or_question_needs_no_message_and_blank_is_none() {
        for action in ["counter", "question", "accept", "reject", "propose"] {
            let answer = turn(command(action, None)).expect(action);
            assert_eq!(answer.message, None);
            assert_eq!(answer.reasoning, "why");
            assert_eq!(answer.suggested_roles, SuggestedRoles::PEERS);
        }
        assert_eq!(turn(command("counter", Some("  "))).unwrap().message, None);
        assert_eq!(turn(command("counter", Some("what stage?"))).unwrap().message.as_deref(), Some("what stage?"));
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
