//! The runner's calls to Parley's HTTP API, with the agent's key, and what a failed call means
//! for the runner: stop (the key is refused), try again later (the network, a 5xx, a 429), or
//! accept the refusal (any other 4xx: the call cannot succeed as it is).
//!
//! The key goes only to the service, in `x-api-key`; nothing here hands it to anything else.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

/// Why a call did not give an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// 401 or 403: the key is unknown, revoked or expired, or the agent may not act (inactive).
    /// Retrying cannot help; the runner stops.
    #[error("{0}")]
    KeyRefused(String),
    /// Another 4xx: the call was refused as it is (`code` is the service's machine code).
    #[error("{message} ({status} {code})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The service's machine-readable code.
        code: String,
        /// The service's message.
        message: String,
    },
    /// No answer, or one that says to try again later (network error, 5xx, 429, 408).
    #[error("{message}")]
    Transient {
        /// What went wrong.
        message: String,
        /// How long the service asked to wait (`Retry-After`), if it did.
        retry_after: Option<Duration>,
    },
}

impl CallError {
    fn transient(message: impl Into<String>) -> CallError {
        CallError::Transient { message: message.into(), retry_after: None }
    }

    /// The service's code of a refusal.
    pub fn code(&self) -> Option<&str> {
        match self {
            CallError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// The agent a key belongs to (`GET /api/agents/me`).
#[derive(Debug, Clone)]
pub struct Me {
    /// The agent's id.
    pub id: Uuid,
    /// Its display name.
    pub name: String,
    /// The user it speaks for.
    pub owner: String,
}

/// An accepted delegation attempt.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The acceptance's fenced token.
    pub claim_token: String,
    /// When the attempt times out.
    pub deadline: DateTime<Utc>,
}

/// A client of one Parley service, holding one agent's key.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

/// Time allowed for a call that does not wait on purpose.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed for a long-poll beyond the wait it asks for.
const POLL_SLACK: Duration = Duration::from_secs(15);

impl Client {
    /// A client of the service at `base` (e.g. `http://127.0.0.1:8080`; the API's own prefix,
    /// `http://127.0.0.1:8080/api`, names the same service) for the agent of `key`.
    pub fn new(base: &str, key: &str) -> anyhow::Result<Client> {
        let base = base.trim().trim_end_matches('/');
        let base = base.strip_suffix("/api").unwrap_or(base).to_owned();
        anyhow::ensure!(
            base.starts_with("http://") || base.starts_with("https://"),
            "the service URL must start with http:// or https://, not {base:?}"
        );
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("parley-agent/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client { http, base, key: key.trim().to_owned() })
    }

    /// One call: the answer's status and JSON body (`Null` when empty).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, Value), CallError> {
        let mut request =
            self.http.request(method, format!("{}{path}", self.base)).header("x-api-key", &self.key).timeout(timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CallError::transient(format!("the service did not answer: {}", plain(&e))))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response
            .text()
            .await
            .map_err(|e| CallError::transient(format!("the answer was cut off: {}", plain(&e))))?;
        let body: Value =
            if text.trim().is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::Null) };
        if status.is_success() {
            return Ok((status, body));
        }
        let message = body["error"].as_str().map(str::to_owned).unwrap_or_else(|| format!("HTTP {status}"));
        let code = body["code"].as_str().unwrap_or("").to_owned();
        Err(match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => CallError::KeyRefused(message),
            StatusCode::TOO_MANY_REQUESTS | StatusCode::REQUEST_TIMEOUT => {
                CallError::Transient { message, retry_after }
            }
            s if s.is_server_error() => CallError::Transient { message: format!("{message} ({s})"), retry_after },
            s => CallError::Refused { status: s.as_u16(), code, message },
        })
    }

    /// `GET /api/agents/me`: the key's agent.
    pub async fn me(&self) -> Result<Me, CallError> {
        let (_, body) = self.call(Method::GET, "/api/agents/me", None, CALL_TIMEOUT).await?;
        let id = body["id"].as_str().and_then(|id| Uuid::parse_str(id).ok());
        let Some(id) = id else {
            return Err(CallError::transient("the service's answer to /api/agents/me names no agent"));
        };
        Ok(Me {
            id,
            name: body["name"].as_str().unwrap_or_default().to_owned(),
            owner: body["ownerUserId"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// `POST .../negotiations/pickup?wait=&skip=`: the claimed turn, or `None` after `wait`.
    pub async fn pickup(&self, agent: Uuid, wait: Duration, skip: &[String]) -> Result<Option<Value>, CallError> {
        let mut path = format!("/api/agents/{agent}/negotiations/pickup?wait={}", wait.as_secs().max(1));
        if !skip.is_empty() {
            path.push_str("&skip=");
            path.push_str(&skip.join(","));
        }
        let (status, body) = self.call(Method::POST, &path, None, wait + POLL_SLACK).await?;
        Ok((status == StatusCode::OK).then_some(body))
    }

    /// `POST .../{negotiationId}/respond`: the respond answer.
    pub async fn respond(&self, agent: Uuid, negotiation: &str, body: &Value) -> Result<Value, CallError> {
        let path = format!("/api/agents/{agent}/negotiations/{negotiation}/respond");
        Ok(self.call(Method::POST, &path, Some(body), CALL_TIMEOUT).await?.1)
    }

    /// `POST .../{negotiationId}/extend`: the claim's new deadline.
    pub async fn extend(&self, agent: Uuid, negotiation: &str, token: &str) -> Result<DateTime<Utc>, CallError> {
        let path = format!("/api/agents/{agent}/negotiations/{negotiation}/extend");
        let (_, body) = self.call(Method::POST, &path, Some(&json!({ "claimToken": token })), CALL_TIMEOUT).await?;
        body["deadline"]
            .as_str()
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| CallError::transient("the extend answer carries no deadline"))
    }

    /// `POST .../{negotiationId}/release`: gives the turn back, with `handBack` to the system
    /// negotiator. Returns the answer.
    pub async fn release(
        &self,
        agent: Uuid,
        negotiation: &str,
        token: &str,
        reason: &str,
        hand_back: bool,
    ) -> Result<Value, CallError> {
        let path = format!("/api/agents/{agent}/negotiations/{negotiation}/release");
        let body = json!({ "claimToken": token, "reason": reason, "handBack": hand_back });
        Ok(self.call(Method::POST, &path, Some(&body), CALL_TIMEOUT).await?.1)
    }

    /// `POST /api/agents/{id}/heartbeat`.
    pub async fn heartbeat(&self, agent: Uuid) -> Result<(), CallError> {
        self.call(Method::POST, &format!("/api/agents/{agent}/heartbeat"), None, CALL_TIMEOUT).await.map(|_| ())
    }

    /// `GET .../delegations/inbox?wait=`: the requests waiting for the agent, oldest first.
    pub async fn inbox(&self, agent: Uuid, wait: Duration) -> Result<Vec<Value>, CallError> {
        let path = format!("/api/agents/{agent}/delegations/inbox?wait={}", wait.as_secs().max(1));
        let (_, body) = self.call(Method::GET, &path, None, wait + POLL_SLACK).await?;
        Ok(body["requests"].as_array().cloned().unwrap_or_default())
    }

    /// `GET /api/agents/{id}/capabilities`: the agent's capabilities.
    pub async fn capabilities(&self, agent: Uuid) -> Result<Vec<Value>, CallError> {
        let (_, body) =
            self.call(Method::GET, &format!("/api/agents/{agent}/capabilities"), None, CALL_TIMEOUT).await?;
        Ok(body["capabilities"].as_array().cloned().unwrap_or_default())
    }

    /// `POST .../delegations/{requestId}/accept`.
    pub async fn accept(&self, agent: Uuid, request: &str) -> Result<Accepted, CallError> {
        let path = format!("/api/agents/{agent}/delegations/{request}/accept");
        let (_, body) = self.call(Method::POST, &path, None, CALL_TIMEOUT).await?;
        let claim_token = body["claimToken"].as_str().map(str::to_owned);
        let deadline = body["deadline"].as_str().and_then(|d| d.parse().ok());
        match (claim_token, deadline) {
            (Some(claim_token), Some(deadline)) => Ok(Accepted { claim_token, deadline }),
            _ => Err(CallError::transient("the accept answer carries no claim token or deadline")),
        }
    }

    /// `POST .../delegations/{requestId}/complete`.
    pub async fn complete(&self, agent: Uuid, request: &str, output: &Value, token: &str) -> Result<(), CallError> {
        let path = format!("/api/agents/{agent}/delegations/{request}/complete");
        let body = json!({ "output": output, "claimToken": token });
        self.call(Method::POST, &path, Some(&body), CALL_TIMEOUT).await.map(|_| ())
    }

    /// `POST .../delegations/{requestId}/reject`.
    pub async fn reject(&self, agent: Uuid, request: &str, reason: Option<&str>) -> Result<(), CallError> {
        let path = format!("/api/agents/{agent}/delegations/{request}/reject");
        self.call(Method::POST, &path, Some(&json!({ "reason": reason })), CALL_TIMEOUT).await.map(|_| ())
    }

    /// `POST .../delegations/{requestId}/fail`.
    pub async fn fail(&self, agent: Uuid, request: &str, error: &str, token: &str) -> Result<(), CallError> {
        let path = format!("/api/agents/{agent}/delegations/{request}/fail");
        let body = json!({ "error": error, "claimToken": token });
        self.call(Method::POST, &path, Some(&body), CALL_TIMEOUT).await.map(|_| ())
    }
}

/// A reqwest error in words, without its URL (which would repeat the service's address on every
/// line), with its causes.
fn plain(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "could not connect".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
