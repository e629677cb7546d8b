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

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    answer::{self, DelegationAnswer},
    program::Failure,
    report,
};
use crate::directory::schema::prepare as compile;

/// A model on an OpenAI-compatible server.
#[derive(Clone)]
pub struct Model {
    http: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
}

/// How many times an item is asked for: the first answer, and one more after an invalid one.
const ASKS: usize = 2;

impl Model {
    /// The model `model` at `url` (the API's base, e.g. `http://127.0.0.1:11434/v1`), with an
    /// optional API key sent as `Authorization: Bearer`.
    pub fn new(url: &str, model: &str, api_key: Option<String>) -> anyhow::Result<Model> {
        let base = url.trim().trim_end_matches('/');
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "the model URL must start with http:// or https://, not {base:?}"
        );
        anyhow::ensure!(!model.trim().is_empty(), "the model name must not be empty");
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
        Ok(Model {
            http,
            endpoint: format!("{base}/chat/completions"),
            model: model.trim().to_owned(),
            api_key: api_key.map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()),
        })
    }

    /// Whether the model's server answers at all (`GET {url}/models`, which OpenAI-compatible
    /// servers serve; any HTTP answer will do, since some refuse it): a runner whose model does
    /// not answer would fail every item, so it does not start.
    pub async fn check(&self) -> Result<(), String> {
        let base = self.endpoint.trim_end_matches("/chat/completions");
        let mut request = self.http.get(format!("{base}/models")).timeout(Duration::from_secs(15));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) => {
                let why = if e.is_timeout() { "it did not answer in time" } else { "nothing answers there" };
                Err(format!(
                    "the model's server at {base} does not answer ({why}): start it, or check --llm (for \
                     Ollama http://127.0.0.1:11434/v1, for llama.cpp's llama-server --port 8081, http://127.0.0.1:8081/v1)"
                ))
            }
        }
    }

    /// The model's answer to a turn: a checked respond body.
    pub async fn turn(&self, view: &Value, number: u32, is_final: bool, deadline: Instant) -> Result<Value, Failure> {
        let schema = answer::turn_schema(number, is_final);
        let rule = compile(&schema).map_err(Failure)?;
        let check = |value: &Value| {
            rule.check(value, "answer")?;
            answer::check_turn(value, number)
        };
        let system = turn_instructions(view, number, is_final);
        self.ask(system, view, "turn", &schema, true, deadline, check).await
    }

    /// The model's answer to a delegation: its output, valid under the capability's schema.
    pub async fn delegation(&self, view: &Value, output_schema: &Value, deadline: Instant) -> Result<DelegationAnswer, Failure> {
        let output = compile(output_schema).map_err(Failure)?;
        let check = |value: &Value| {
            output.check(value, "output")?;
            Ok(DelegationAnswer::Output(value.clone()))
        };
        let system = delegation_instructions(view);
        // A capability's schema need not follow strict mode's subset of JSON Schema.
        self.ask(system, &task_of(view), "delegation_output", output_schema, false, deadline, check).await
    }

    /// Asks until an answer passes `check`, at most [`ASKS`] times; after an invalid answer the
    /// model is told what was wrong.
    #[allow(clippy::too_many_arguments)]
    async fn ask<T>(
        &self,
        system: String,
        item: &Value,
        name: &str,
        schema: &Value,
        strict: bool,
        deadline: Instant,
        check: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let item = serde_json::to_string_pretty(item).expect("a JSON value serialises");
        let mut messages = vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": item})];
        let mut problem = String::new();
        for _ in 0..ASKS {
            let (said, verdict) = match self.complete(&messages, name, schema, strict, deadline).await {
                Ok(said) => {
                    let verdict = serde_json::from_str(unfenced(&said))
                        .map_err(|e| format!("the model's answer is not JSON ({e})"))
                        .and_then(|value| check(&value));
                    (Some(said), verdict)
                }
                Err(e) => (None, Err(e)),
            };
            match verdict {
                Ok(answer) => return Ok(answer),
                Err(e) => problem = e,
            }
            if Instant::now() >= deadline {
                break;
            }
            if let Some(said) = said {
                messages.push(json!({"role": "assistant", "content": said}));
                messages.push(json!({"role": "user", "content": format!(
                    "That answer cannot be used: {problem}. Answer again with one JSON object that matches the schema."
                )}));
            }
        }
        Err(Failure(format!("the model gave no valid answer in {ASKS} tries: {}", report::tail(&problem, 600))))
    }

    /// One chat completion: the text the model said.
    async fn complete(&self, messages: &[Value], name: &str, schema: &Value, strict: bool, deadline: Instant) -> Result<String, String> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return Err("no time was left to ask the model".into());
        }
        let body = json!({
            "model": self.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": { "name": name, "strict": strict, "schema": schema },
            },
        });
        let mut request = self.http.post(&self.endpoint).json(&body).timeout(timeout);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() { "the model did not answer in time".to_owned() } else { format!("the model's server did not answer: {e}") }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| format!("the model's answer was cut off: {e}"))?;
        if !status.is_success() {
            return Err(format!("the model's server answered {status}: {}", report::tail(&text, 300)));
        }
        let reply: Value = serde_json::from_str(&text).map_err(|_| format!("the model's server answered with no JSON: {}", report::tail(&text, 300)))?;
        let message = &reply["choices"][0]["message"];
        if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
            return Err(format!("the model refused: {}", report::tail(refusal, 300)));
        }
        Ok(message["content"].as_str().ok_or("the model's reply has no message content")?.to_owned())
    }
}

/// `text` without a Markdown code fence around it (some servers add one despite the schema).
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(inner) = t.strip_prefix("```") else { return t };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    // Drop the fence's language tag (```json).
    match inner.find('\n') {
        Some(i) if !inner[..i].trim_start().starts_with(['{', '[']) => inner[i + 1..].trim(),
        _ => inner.trim(),
    }
}

/// The system message of a turn: who the model speaks for, the actions, what stays private.
fn turn_instructions(view: &Value, number: u32, is_final: bool) -> String {
    let own = view["context"]["ownUser"]["name"].as_str().unwrap_or("your user");
    let other = view["context"]["otherUser"]["name"].as_str().unwrap_or("the other user");
    let allowed = answer::turn_actions(number, is_final).join(", ");
    let this_turn = if number == 0 {
        "This is the opening turn: propose the match, saying what each side would gain.".to_owned()
    } else if is_final {
        "This is the last turn the negotiation allows: accept or reject; anything else would end it without a result.".to_owned()
    } else {
        format!("This is turn {number}.")
    };
    format!(
        "You are the personal agent of {own} in a negotiation with the agent of {other}: together you decide whether \
         the two of them should be introduced. The user message holds the negotiation as JSON: `context` (your user \
         `ownUser`, the other user `otherUser`, the evaluator's `seedAssessment`), `turn` (its number, whether it is \
         the final one, and the `history` of turns so far) and `opportunity`.\n\
         Actions: propose (the opening turn only), counter (state objections or terms), question (ask the other side \
         something), accept (agree: the match goes to both people), reject (decline). Allowed now: {allowed}. \
         {this_turn}\n\
         `message` is read by the other side. `assessment.reasoning` is for your own user only: the other side never \
         sees it. `assessment.suggestedRoles` says what role your user (`ownUser`) and the other user (`otherUser`) \
         would play: agent (gives help), patient (receives it) or peer.\n\
         Do not ask your user anything and write nothing for them beyond the reasoning. When unsure, take the \
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
    fn fences_around_an_answer_are_dropped() {
        assert_eq!(unfenced("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(unfenced("```{\"a\": 1}```"), "{\"a\": 1}");
        assert_eq!(unfenced("  {\"a\": 1} "), "{\"a\": 1}");
    }

    #[test]
    fn a_turns_instructions_name_the_sides_and_the_allowed_actions() {
        let view = json!({"context": {"ownUser": {"name": "Tomas"}, "otherUser": {"name": "Maya"}}});
        let first = turn_instructions(&view, 0, false);
        assert!(first.contains("personal agent of Tomas") && first.contains("agent of Maya"), "{first}");
        assert!(first.contains("Allowed now: propose."), "{first}");
        assert!(turn_instructions(&view, 7, true).contains("Allowed now: accept, reject."));
    }

    #[test]
    fn model_urls_must_be_http() {
        assert!(Model::new("localhost:11434/v1", "m", None).is_err());
        assert!(Model::new("http://127.0.0.1:11434/v1/", "", None).is_err());
        let model = Model::new("http://127.0.0.1:11434/v1/", "llama3", Some(" ".into())).unwrap();
        assert_eq!(model.endpoint, "http://127.0.0.1:11434/v1/chat/completions");
        assert!(model.api_key.is_none());
    }
}
