//! A model behind an OpenAI-compatible chat completions endpoint (a hosted API, or a local
//! llama.cpp or Ollama server) as the worker.
//!
//! Each item is one `POST {url}/chat/completions`: a system message with the rules, a user
//! message with the item as JSON, and `response_format: {"type": "json_schema", ...}` whose
//! schema encodes the rules, so that a server that constrains decoding cannot produce a turn the
//! service would refuse: turn 0 only `propose`, the final turn only `accept` or `reject`,
//! otherwise the four later actions; a delegation's schema is its capability's output schema.
//! The answer is checked again here (not every server enforces the schema); an invalid one is
//! asked for once more, with what was wrong, and then the item fails like a failing program.
//!
//! The model sees what a program sees: the item without its claim token. The only credential
//! sent is the model's own key (`PARLEY_LLM_API_KEY`), to the model's endpoint.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    answer::{self, DelegationAnswer},
    program::Failure,
};
use crate::{directory::schema::prepare as compile, llm::ChatModel};

/// A model on an OpenAI-compatible server, asked through [`crate::llm::ChatModel`].
#[derive(Clone)]
pub struct Model {
    chat: ChatModel,
}

impl Model {
    /// The model `model` at `url` (the API's base, e.g. `http://127.0.0.1:11434/v1`), with an
    /// optional API key sent as `Authorization: Bearer`.
    pub fn new(url: &str, model: &str, api_key: Option<String>) -> anyhow::Result<Model> {
        Ok(Model { chat: ChatModel::new(url, model, api_key, crate::llm::DEFAULT_MAX_ANSWER)? })
    }

    /// Whether the model's server answers at all (`GET {url}/models`, which OpenAI-compatible
    /// servers serve; any HTTP answer will do, since some refuse it): a runner whose model does
    /// not answer would fail every item, so it does not start.
    pub async fn check(&self) -> Result<(), String> {
        self.chat.reachable(std::time::Duration::from_secs(15)).await.map_err(|why| {
            format!(
                "the model's server at {} does not answer ({why}): start it, or check --llm (for \
                 Ollama http://127.0.0.1:11434/v1, for llama.cpp's llama-server --port 8081, http://127.0.0.1:8081/v1)",
                self.chat.base()
            )
        })
    }

    /// The model's answer to a turn: a checked respond body.
    pub async fn turn(&self, view: &Value, number: u32, is_final: bool, deadline: Instant) -> Result<Value, Failure> {
        // One question to its person per turn: once answered (or not in time), the model decides.
        let can_ask = view["context"]["personAnswers"].as_array().is_none_or(Vec::is_empty);
        let schema = answer::turn_schema(number, is_final, can_ask);
        let rule = compile(&schema).map_err(Failure)?;
        let check = |value: &Value| {
            rule.check(value, "answer")?;
            answer::check_turn(value, number)
        };
        let system = turn_instructions(view, number, is_final, can_ask);
        self.chat.ask(system, view, "turn", &schema, true, deadline, check).await.map_err(Failure)
    }

    /// The model's answer to a delegation: its output, valid under the capability's schema.
    pub async fn delegation(
        &self,
        view: &Value,
        output_schema: &Value,
        deadline: Instant,
    ) -> Result<DelegationAnswer, Failure> {
        let output = compile(output_schema).map_err(Failure)?;
        let check = |value: &Value| {
            output.check(value, "output")?;
            Ok(DelegationAnswer::Output(value.clone()))
        };
        let system = delegation_instructions(view);
        // A capability's schema need not follow strict mode's subset of JSON Schema.
        self.chat
            .ask(system, &task_of(view), "delegation_output", output_schema, false, deadline, check)
            .await
            .map_err(Failure)
    }
}

/// The system message of a turn: who the model speaks for, the actions, what stays private.
fn turn_instructions(view: &Value, number: u32, is_final: bool, can_ask: bool) -> String {
    let own = view["context"]["ownUser"]["name"].as_str().unwrap_or("your user");
    let other = view["context"]["otherUser"]["name"].as_str().unwrap_or("the other user");
    let allowed = answer::turn_actions(number, is_final, can_ask).join(", ");
    let asking = if can_ask {
        "Only when your user's answer would change your decision and the context does not say, you may ask \
         them instead of guessing: action ask_person, with one short yes/no question for your user in `message` \
         (the other side never reads it); your next turn then carries their answer in `context.personAnswers`. \
         Otherwise do not ask your user anything"
    } else {
        "Your user's answers to your questions are in `context.personAnswers` (answer null: they did not answer \
         in time): decide now. Do not ask your user anything more"
    };
    let this_turn = if number == 0 {
        "This is the opening turn: propose the match, saying what each side would gain, or reject it if it does not \
         serve your user."
            .to_owned()
    } else if is_final {
        "This is the last turn the negotiation allows: accept or reject; anything else would end it without a result."
            .to_owned()
    } else {
        format!("This is turn {number}.")
    };
    format!(
        "You are the personal agent of {own} in a negotiation with the agent of {other}: together you decide whether \
         the two of them should be introduced. The user message holds the negotiation as JSON: `context` (your user \
         `ownUser`, the other user `otherUser`, the evaluator's `seedAssessment`), `turn` (its number, whether it is \
         the final one, and the `history` of turns so far) and `opportunity`.\n\
         Actions: propose (the opening turn only; reject is the other opening), counter (state objections or terms), question (ask the other side \
         something), accept (agree: the match goes to both people), reject (decline). Allowed now: {allowed}. \
         {this_turn}\n\
         `message` is read by the other side. `assessment.reasoning` is for your own user only: the other side never \
         sees it. `assessment.suggestedRoles` says what role your user (`ownUser`) and the other user (`otherUser`) \
         would play: agent (gives help), patient (receives it) or peer.\n\
         {asking}, and write nothing for them beyond the reasoning. When unsure, take the \
         conservative action: counter with specific objections, or reject with reasons.\n\
         Answer with one JSON object that matches the schema, and nothing else."
    )
}

/// The system message of a delegation.
fn delegation_instructions(view: &Value) -> String {
    let kind = match (view["taskType"].as_str(), view["customType"].as_str()) {
        (Some("custom"), Some(custom)) => custom.to_owned(),
        (Some(task_type), _) => task_type.to_owned(),
        _ => "a task".to_owned(),
    };
    format!(
        "You are an agent doing a piece of work another agent asked for: {kind}. The user message holds the work as \
         JSON (`input`). Do it, and answer with one JSON object that matches the schema (the work's output), and \
         nothing else."
    )
}

/// What a model needs of a delegation: the kind of work and its input.
fn task_of(view: &Value) -> Value {
    json!({ "taskType": view["taskType"], "customType": view["customType"], "input": view["input"] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_instructions_name_the_sides_and_the_allowed_actions() {
        let view = json!({"context": {"ownUser": {"name": "Tomas"}, "otherUser": {"name": "Maya"}}});
        let first = turn_instructions(&view, 0, false, false);
        assert!(first.contains("personal agent of Tomas") && first.contains("agent of Maya"), "{first}");
        assert!(first.contains("Allowed now: propose, reject."), "{first}");
        assert!(turn_instructions(&view, 7, true, false).contains("Allowed now: accept, reject."));
        let asking = turn_instructions(&view, 3, false, true);
        assert!(
            asking.contains("Allowed now: counter, question, accept, reject, ask_person.") && asking.contains("yes/no")
        );
    }
}
