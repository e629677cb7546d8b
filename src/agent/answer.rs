//! What a worker may answer, checked before anything reaches the service, and the JSON Schemas
//! that tell a model the same rules.
//!
//! A turn's answer is a respond body (without the claim token, which the worker never sees), or
//! an `ask_person` question to the agent's person (`{"action": "ask_person", "question", "options"?}`):
//! checked with the service's own parsing and turn rules, so that an answer the service would
//! refuse counts as the worker's failure without a round trip. A delegation's answer is one of
//! `{"output": ...}` (checked against the capability's output schema, as `complete` checks it),
//! `{"reject": reason}` or `{"error": message}`.

use serde_json::{Value, json};

use crate::{
    directory::schema::Prepared,
    domain::{SideKind, action_allowed},
    http::agent_turns::{ASK_PERSON, Checked, RespondIn},
};

/// A checked delegation answer.
#[derive(Debug, Clone, PartialEq)]
pub enum DelegationAnswer {
    /// The work's result, valid under the capability's output schema.
    Output(Value),
    /// The worker declines the work, with a reason.
    Reject(Option<String>),
    /// The worker reports that the work failed.
    Error(String),
}

/// Checks a turn's answer at turn `number`; returns the respond body to send (without the claim
/// token: the runner adds its own).
pub fn check_turn(answer: &Value, number: u32) -> Result<Value, String> {
    if !answer.is_object() {
        return Err("the answer must be a JSON object (a respond body)".into());
    }
    let mut body: RespondIn = serde_json::from_value(answer.clone()).map_err(|e| format!("not a respond body: {e}"))?;
    // Whatever it says, the claim token is the runner's to send.
    body.claim_token = None;
    if body.action == ASK_PERSON && body.question.is_none() {
        // A model asks in `message` (its schema has no `question`): the message is the question.
        body.question = body.message.take();
    }
    let turn = match body.validate().map_err(|e| e.to_string())? {
        Checked::Ask(ask) => {
            return Ok(json!({ "action": ASK_PERSON, "question": ask.question, "options": ask.options }));
        }
        Checked::Turn(turn) => turn,
    };
    if !action_allowed(turn.action, number, SideKind::Personal) {
        return Err(if number == 0 {
            format!("turn 0 must be a propose or a reject, not {}", turn.action)
        } else {
            format!("{} is not allowed at turn {number}: propose is only for turn 0", turn.action)
        });
    }
    Ok(json!({
        "action": turn.action,
        "message": turn.message,
        "assessment": { "reasoning": turn.reasoning, "suggestedRoles": turn.suggested_roles },
    }))
}

/// Checks a delegation's answer; `output` is the capability's output schema, compiled.
pub fn check_delegation(answer: &Value, output: &Prepared) -> Result<DelegationAnswer, String> {
    const SHAPES: &str =
        r#"the answer must be exactly one of {"output": ...}, {"reject": "reason"} or {"error": "message"}"#;
    let Some(fields) = answer.as_object().filter(|o| o.len() == 1) else { return Err(SHAPES.into()) };
    let (name, value) = fields.iter().next().expect("one field");
    match name.as_str() {
        "output" => {
            output.check(value, "output")?;
            Ok(DelegationAnswer::Output(value.clone()))
        }
        "reject" => match value {
            Value::Null => Ok(DelegationAnswer::Reject(None)),
            Value::String(reason) => {
                Ok(DelegationAnswer::Reject(Some(reason.trim().to_owned()).filter(|r| !r.is_empty())))
            }
            _ => Err("reject must be a reason (a string)".into()),
        },
        "error" => match value.as_str().map(str::trim) {
            Some(message) if !message.is_empty() => Ok(DelegationAnswer::Error(message.to_owned())),
            _ => Err("error must be a message (a non-empty string)".into()),
        },
        _ => Err(SHAPES.into()),
    }
}

/// The actions a model may choose at turn `number`: `propose` or `reject` at turn 0; on the final turn
/// (the cap ends the negotiation after it) `accept` or `reject`, since anything else would end it
/// `stalled`; otherwise the four later actions. With `can_ask` (its person has not answered a
/// question at this turn yet), `ask_person` besides.
pub fn turn_actions(number: u32, is_final: bool, can_ask: bool) -> Vec<&'static str> {
    let mut actions = if number == 0 {
        vec!["propose", "reject"]
    } else if is_final {
        vec!["accept", "reject"]
    } else {
        vec!["counter", "question", "accept", "reject"]
    };
    if can_ask {
        actions.push(ASK_PERSON);
    }
    actions
}

/// The JSON Schema of a turn's answer at turn `number`, encoding [`turn_actions`]. Written for
/// strict structured output: every property required, no others allowed.
pub fn turn_schema(number: u32, is_final: bool, can_ask: bool) -> Value {
    let role = json!({ "type": "string", "enum": ["agent", "patient", "peer"] });
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["action", "message", "assessment"],
        "properties": {
            "action": { "type": "string", "enum": turn_actions(number, is_final, can_ask) },
            "message": { "type": "string", "description": "What the other side reads; for ask_person, the question for your own user (the other side never reads it)." },
            "assessment": {
                "type": "object",
                "additionalProperties": false,
                "required": ["reasoning", "suggestedRoles"],
                "properties": {
                    "reasoning": { "type": "string", "description": "Why, for your own user only." },
                    "suggestedRoles": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["ownUser", "otherUser"],
                        "properties": { "ownUser": role, "otherUser": role },
                    },
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::schema::prepare as compile;

    fn turn(action: &str) -> Value {
        json!({"action": action, "message": "hello", "assessment": {"reasoning": "because",
            "suggestedRoles": {"ownUser": "agent", "otherUser": "patient"}}})
    }

    #[test]
    fn turn_answers_follow_the_services_rules() {
        assert_eq!(check_turn(&turn("propose"), 0).unwrap()["action"], "propose");
        assert!(check_turn(&turn("counter"), 0).unwrap_err().contains("turn 0 must be a propose or a reject"));
        assert_eq!(check_turn(&turn("reject"), 0).unwrap()["action"], "reject");
        assert!(check_turn(&turn("propose"), 3).unwrap_err().contains("only for turn 0"));
        assert!(check_turn(&turn("haggle"), 3).is_err());
        assert!(check_turn(&json!("accept"), 3).is_err());
        // An empty reasoning is the service's to accept (it does, as Index Network's clients
        // may send one); a missing one is not.
        let mut blank = turn("accept");
        blank["assessment"]["reasoning"] = json!("  ");
        assert!(check_turn(&blank, 3).is_ok());
        let mut missing = turn("accept");
        missing["assessment"].as_object_mut().unwrap().remove("reasoning");
        assert!(check_turn(&missing, 3).unwrap_err().contains("reasoning"));
        let mut roles = turn("accept");
        roles["assessment"]["suggestedRoles"]["ownUser"] = json!("boss");
        assert!(check_turn(&roles, 3).is_err());
    }

    #[test]
    fn a_turn_answer_never_carries_a_token_of_the_workers() {
        let mut answer = turn("accept");
        answer["claimToken"] = json!("ct_made_up");
        answer["extra"] = json!(1);
        let body = check_turn(&answer, 1).unwrap();
        assert_eq!(body.as_object().unwrap().keys().collect::<Vec<_>>(), ["action", "message", "assessment"]);
    }

    #[test]
    fn delegation_answers_take_one_of_three_shapes() {
        let schema = compile(&json!({"type": "object", "required": ["feedback"]})).unwrap();
        let ok = check_delegation(&json!({"output": {"feedback": "fine"}}), &schema).unwrap();
        assert_eq!(ok, DelegationAnswer::Output(json!({"feedback": "fine"})));
        assert!(check_delegation(&json!({"output": {"other": 1}}), &schema).unwrap_err().contains("output"));
        assert_eq!(
            check_delegation(&json!({"reject": " busy "}), &schema).unwrap(),
            DelegationAnswer::Reject(Some("busy".into()))
        );
        assert_eq!(
            check_delegation(&json!({"error": "crashed"}), &schema).unwrap(),
            DelegationAnswer::Error("crashed".into())
        );
        assert!(check_delegation(&json!({"error": ""}), &schema).is_err());
        assert!(check_delegation(&json!({"output": {}, "reject": "x"}), &schema).is_err());
        assert!(check_delegation(&json!({"feedback": "fine"}), &schema).is_err());
    }

    #[test]
    fn a_models_ask_person_puts_its_question_in_the_message() {
        let mut asked = turn(ASK_PERSON);
        asked["message"] = json!("Does a 4-day week matter to you?");
        let body = check_turn(&asked, 3).unwrap();
        assert_eq!(
            body,
            json!({"action": "ask_person", "question": "Does a 4-day week matter to you?", "options": []})
        );
        let program = json!({"action": "ask_person", "question": "Equity ok?", "options": ["yes", "no"]});
        assert_eq!(check_turn(&program, 0).unwrap()["options"], json!(["yes", "no"]));
        assert!(check_turn(&json!({"action": "ask_person"}), 3).is_err());
        assert_eq!(turn_actions(3, false, true), ["counter", "question", "accept", "reject", "ask_person"]);
        assert_eq!(turn_actions(0, false, false), ["propose", "reject"]);
    }

    #[test]
    fn the_turn_schema_allows_exactly_the_rules_actions() {
        let check = |number: u32, is_final: bool, action: &str| {
            let schema = compile(&turn_schema(number, is_final, false)).unwrap();
            let mut answer = turn(action);
            answer["message"] = json!("m");
            schema.check(&answer, "answer").is_ok()
        };
        for action in ["propose", "counter", "question", "accept", "reject"] {
            let opening = matches!(action, "propose" | "reject");
            assert_eq!(check(0, false, action), opening, "turn 0: {action}");
            assert_eq!(check(0, true, action), opening, "turn 0 of 1: {action}");
            assert_eq!(check(7, true, action), matches!(action, "accept" | "reject"), "final: {action}");
            assert_eq!(check(3, false, action), action != "propose", "turn 3: {action}");
        }
        // Every answer the schema admits, the service's rules admit too.
        for (number, is_final) in [(0, false), (3, false), (7, true)] {
            for action in turn_actions(number, is_final, true) {
                assert!(check_turn(&turn(action), number).is_ok(), "{action} at {number}");
            }
        }
    }
}
