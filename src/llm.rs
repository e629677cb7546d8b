//! A model behind an OpenAI-compatible chat completions endpoint (a hosted API, or a local
//! llama.cpp or Ollama server), asked for one JSON answer under a JSON Schema.
//!
//! Two parts of Parley ask a model this way: `parley agent --llm`, which makes a model a personal
//! agent ([`crate::agent`]), and the model-backed system negotiator
//! ([`crate::delivery::model_turns`]). Both send a system message with the rules, a user message
//! with the facts as JSON, and `response_format: {"type": "json_schema", ...}`, so that a server
//! that constrains decoding can only produce an answer of the right shape. The answer is checked
//! again by the caller (not every server enforces the schema); an invalid one is asked for once
//! more, saying what was wrong, and then the ask fails with why.
//!
//! The only credential sent is the model's own key, to the model's own endpoint. An answer is
//! read through [`crate::bounded_body`], at most the model's `max_answer` bytes: a server that
//! answers more is refused as soon as that shows, never read whole.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// A model on an OpenAI-compatible server.
#[derive(Clone)]
pub struct ChatModel {
    http: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<secrecy::SecretString>,
    max_answer: usize,
}

/// The most of an answer read when the caller names no other bound (`parley agent --llm`): 1 MiB,
/// far more than one JSON decision with its reasoning.
pub const DEFAULT_MAX_ANSWER: usize = 1 << 20;

/// How many times one question is asked: the first answer, and one more after an invalid one.
pub const ASKS: usize = 2;

impl ChatModel {
    /// The model `model` at `url` (the API's base, e.g. `http://127.0.0.1:11434/v1`), with an
    /// optional API key sent as `Authorization: Bearer`; at most `max_answer` bytes of an answer
    /// are read.
    pub fn new(url: &str, model: &str, api_key: Option<String>, max_answer: usize) -> anyhow::Result<ChatModel> {
        let base = url.trim().trim_end_matches('/');
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "the model URL must start with http:// or https://, not {base:?}"
        );
        anyhow::ensure!(!model.trim().is_empty(), "the model name must not be empty");
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
        Ok(ChatModel {
            http,
            endpoint: format!("{base}/chat/completions"),
            model: model.trim().to_owned(),
            api_key: api_key.map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).map(Into::into),
            max_answer,
        })
    }

    /// The model's name, as sent.
    pub fn name(&self) -> &str {
        &self.model
    }

    /// The API's base URL, as given.
    pub fn base(&self) -> &str {
        self.endpoint.trim_end_matches("/chat/completions")
    }

    /// Whether the server answers at all (`GET {base}/models`, which OpenAI-compatible servers
    /// serve; any HTTP answer will do, since some refuse it); why not, when it does not.
    pub async fn reachable(&self, timeout: Duration) -> Result<(), &'static str> {
        let mut request = self.http.get(format!("{}/models", self.base())).timeout(timeout);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(secrecy::ExposeSecret::expose_secret(key));
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) if e.is_timeout() => Err("it did not answer in time"),
            Err(_) => Err("nothing answers there"),
        }
    }

    /// Asks until an answer passes `check`, at most [`ASKS`] times and never past `deadline`;
    /// after an invalid answer the model is told what was wrong. `user` is the facts (JSON).
    #[allow(clippy::too_many_arguments)]
    pub async fn ask<T>(
        &self,
        system: String,
        user: &Value,
        name: &str,
        schema: &Value,
        strict: bool,
        deadline: Instant,
        check: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<T, String> {
        let user = serde_json::to_string_pretty(user).expect("a JSON value serialises");
        let mut messages = vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": user})];
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
        Err(format!("the model gave no valid answer in {ASKS} tries: {}", tail(&problem, 600)))
    }

    /// One chat completion: the text the model said.
    async fn complete(
        &self,
        messages: &[Value],
        name: &str,
        schema: &Value,
        strict: bool,
        deadline: Instant,
    ) -> Result<String, String> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return Err("the model did not answer in time".into());
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
            request = request.bearer_auth(secrecy::ExposeSecret::expose_secret(key));
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                "the model did not answer in time".to_owned()
            } else {
                format!("the model's server did not answer: {e}")
            }
        })?;
        let status = response.status();
        let text = match crate::bounded_body::read(response, self.max_answer).await {
            Ok(body) => String::from_utf8_lossy(&body).into_owned(),
            Err(crate::bounded_body::BodyError::TooLarge(max)) => {
                return Err(format!("the model's answer is larger than {max} bytes; it was not read"));
            }
            Err(crate::bounded_body::BodyError::Failed(e)) => {
                return Err(if e.is_timeout() {
                    "the model did not answer in time".to_owned()
                } else {
                    format!("the model's answer was cut off: {e}")
                });
            }
        };
        if !status.is_success() {
            return Err(format!("the model's server answered {status}: {}", tail(&text, 300)));
        }
        let reply: Value = serde_json::from_str(&text)
            .map_err(|_| format!("the model's server answered with no JSON: {}", tail(&text, 300)))?;
        let message = &reply["choices"][0]["message"];
        if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
            return Err(format!("the model refused: {}", tail(refusal, 300)));
        }
        Ok(message["content"].as_str().ok_or("the model's reply has no message content")?.to_owned())
    }
}

/// `text` without a Markdown code fence around it (some servers add one despite the schema).
pub fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(inner) = t.strip_prefix("```") else { return t };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    // Drop the fence's language tag (```json).
    match inner.find('\n') {
        Some(i) if !inner[..i].trim_start().starts_with(['{', '[']) => inner[i + 1..].trim(),
        _ => inner.trim(),
    }
}

/// The last `max` characters of `text` (trimmed), with `...` before them when cut.
pub fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - max).collect();
    format!("...{tail}")
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
    fn model_urls_must_be_http() {
        assert!(ChatModel::new("localhost:11434/v1", "m", None, DEFAULT_MAX_ANSWER).is_err());
        assert!(ChatModel::new("http://127.0.0.1:11434/v1/", "", None, DEFAULT_MAX_ANSWER).is_err());
        let model =
            ChatModel::new("http://127.0.0.1:11434/v1/", "llama3", Some(" ".into()), DEFAULT_MAX_ANSWER).unwrap();
        assert_eq!(model.endpoint, "http://127.0.0.1:11434/v1/chat/completions");
        assert!(model.api_key.is_none());
    }
}
