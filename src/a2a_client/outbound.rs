//! The calls Parley makes to agents' A2A endpoints, within bounds: every call goes through
//! [`Outbound::call`], which
//!
//! - checks the endpoint's URL against the address guard again at call time (a name may resolve
//!   elsewhere since the card was fetched), and resolves it through the guarded resolver;
//! - waits for a place among the calls this process makes to that agent at once
//!   (`PARLEY_A2A_CALLS_PER_AGENT`) and among all its calls to agents
//!   (`PARLEY_A2A_CALLS_MAX`), no longer than the call itself may take: one slow agent holds
//!   only its own places, and a flood of work cannot open unbounded connections;
//! - gives the call `PARLEY_A2A_CALL_TIMEOUT` in all, and reads at most [`MAX_ANSWER_BYTES`] of
//!   its answer through `crate::bounded_body` (a larger one is refused as soon as it is seen to
//!   be larger);
//! - with a deadline, makes a call that is worth making only until some time (a
//!   send that must reach the agent before its attempt's accept deadline) then or never: the
//!   wait for places ends by then, and a call that got its places too late is not made;
//! - sorts every failure into a [`CallError`] that says whether trying again may help.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use reqwest::{Url, header};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use super::{
    call::{self, Request},
    card::Dialect,
    credential::A2aAuth,
    guard,
};
use crate::bounded_body::{self, BodyError};

/// The most bytes of an answer that are read.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Where and how an agent is called.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The agent.
    pub agent_id: Uuid,
    /// Its JSON-RPC endpoint.
    pub url: String,
    /// How Parley speaks there.
    pub dialect: Dialect,
    /// What Parley presents there.
    pub auth: Option<A2aAuth>,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The address guard refused the endpoint (its URL, or where its name resolves now).
    #[error("the endpoint is refused: {0}")]
    Refused(String),
    /// No place among this process's calls to the agent, or to agents in all, within the call's
    /// time: Parley's own congestion, not the agent's failure.
    #[error("too many calls to agents at once")]
    Busy,
    /// The connection failed or the call ran out of time.
    #[error("the endpoint could not be reached: {0}")]
    Network(String),
    /// An HTTP status other than 200.
    #[error("the endpoint answered HTTP {0}")]
    Status(u16),
    /// The answer was larger than [`MAX_ANSWER_BYTES`].
    #[error("the answer is larger than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    /// A JSON-RPC error answer.
    #[error("the agent answered error {code}: {message}")]
    Rpc {
        /// Its code.
        code: i64,
        /// Its message (at most 200 characters).
        message: String,
    },
    /// Not a JSON-RPC answer, or not the one asked for.
    #[error("the answer could not be read: {0}")]
    Unreadable(String),
}

impl CallError {
    /// Whether the same call may succeed later: the network, a 5xx or 429, Parley's congestion.
    pub fn is_transient(&self) -> bool {
        match self {
            CallError::Busy | CallError::Network(_) => true,
            CallError::Status(code) => *code >= 500 || *code == 429 || *code == 408,
            _ => false,
        }
    }

    /// The outcome label of the metric: `refused`, `busy`, `network`, `http_error`,
    /// `too_large`, `rpc_error` or `unreadable`.
    pub fn outcome(&self) -> &'static str {
        match self {
            CallError::Refused(_) => "refused",
            CallError::Busy => "busy",
            CallError::Network(_) => "network",
            CallError::Status(_) => "http_error",
            CallError::TooLarge => "too_large",
            CallError::Rpc { .. } => "rpc_error",
            CallError::Unreadable(_) => "unreadable",
        }
    }
}

/// What bounds the calls (from the configuration).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The longest one call takes, waiting for its places included.
    pub timeout: Duration,
    /// Calls to one agent at once.
    pub per_agent: usize,
    /// Calls to agents at once, in all.
    pub total: usize,
    /// Whether non-public addresses may be called (`PARLEY_A2A_ALLOW_PRIVATE_TARGETS`).
    pub allow_private: bool,
}

/// The process's calls to agents (see the module docs). Cheap to clone: clones share the places.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    limits: Limits,
    total: Arc<Semaphore>,
    per_agent: Arc<Mutex<HashMap<Uuid, Arc<Semaphore>>>>,
}

/// How long an idle connection to an agent is kept for the next call.
const IDLE_CONNECTION: std::time::Duration = std::time::Duration::from_secs(4);

impl Outbound {
    /// The calls, bounded by `limits`.
    pub fn new(limits: Limits) -> anyhow::Result<Outbound> {
        let client = guard::client_builder(limits.allow_private)
            .timeout(limits.timeout)
            .connect_timeout(limits.timeout)
            // An idle connection is dropped before the agent's server would close it: servers
            // commonly close idle connections after 5 s (uvicorn, Node), and a request sent on
            // one just as the server closes it fails with "connection closed before message
            // completed", a call lost to the pool rather than to the agent.
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()?;
        Ok(Outbound { client, limits, total: Arc::new(Semaphore::new(limits.total.max(1))), per_agent: Arc::default() })
    }

    /// The agent's places, made on first use; agents no call holds a place of are forgotten
    /// once many are remembered.
    fn agent_places(&self, agent: Uuid) -> Arc<Semaphore> {
        let mut map = self.per_agent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() > 10_000 {
            let per_agent = self.limits.per_agent;
            map.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < per_agent);
        }
        map.entry(agent).or_insert_with(|| Arc::new(Semaphore::new(self.limits.per_agent.max(1)))).clone()
    }

    /// The agent's place and one among all calls, waited for at most `wait`.
    async fn places(
        &self,
        agent: Uuid,
        wait: Duration,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), CallError> {
        let own = self.agent_places(agent);
        let places = async {
            let own = own.acquire_owned().await.map_err(|_| CallError::Busy)?;
            let all = self.total.clone().acquire_owned().await.map_err(|_| CallError::Busy)?;
            Ok((own, all))
        };
        tokio::time::timeout(wait, places).await.map_err(|_| CallError::Busy)?
    }

    /// Makes `request` at `endpoint` and answers its JSON-RPC `result`; with `not_after`, only if
    /// it can be made before then: the wait for places ends by then, and a call whose places
    /// came too late is not made ([`CallError::Busy`]).
    pub async fn call(
        &self,
        endpoint: &Endpoint,
        request: &Request,
        not_after: Option<DateTime<Utc>>,
    ) -> Result<Value, CallError> {
        let url = Url::parse(&endpoint.url).map_err(|e| CallError::Refused(format!("the URL is not valid: {e}")))?;
        guard::check_url(&url, self.limits.allow_private).map_err(|e| CallError::Refused(e.to_string()))?;
        let left = |now: DateTime<Utc>| not_after.map(|at| (at - now).to_std().unwrap_or(Duration::ZERO));
        let wait = left(Utc::now()).map_or(self.limits.timeout, |left| left.min(self.limits.timeout));
        let _places = self.places(endpoint.agent_id, wait).await?;
        if left(Utc::now()).is_some_and(|left| left.is_zero()) {
            return Err(CallError::Busy);
        }
        let id = Uuid::new_v4().to_string();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": request.method, "params": request.params});
        let mut builder = self.client.post(url).header(header::ACCEPT, "application/json").json(&body);
        if let Some((name, value)) = call::version_header(endpoint.dialect) {
            builder = builder.header(name, value);
        }
        if let Some(auth) = &endpoint.auth {
            builder = builder.header(header::AUTHORIZATION, auth.authorization());
        }
        let response = builder.send().await.map_err(network)?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err(CallError::Status(status.as_u16()));
        }
        let bytes = match bounded_body::read(response, MAX_ANSWER_BYTES).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge(_)) => return Err(CallError::TooLarge),
            Err(BodyError::Failed(e)) => return Err(network(e)),
        };
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| CallError::Unreadable(format!("the answer is not JSON: {e}")))?;
        let object = answer.as_object().ok_or_else(|| CallError::Unreadable("the answer is not an object".into()))?;
        if let Some((code, message)) = call::error_of(object) {
            return Err(CallError::Rpc { code, message });
        }
        if object.get("id").and_then(Value::as_str) != Some(id.as_str()) {
            return Err(CallError::Unreadable("the answer's id is not the call's".into()));
        }
        object.get("result").cloned().ok_or_else(|| CallError::Unreadable("the answer has no result".into()))
    }
}

/// A transport failure, with the guard's refusal told apart.
fn network(e: reqwest::Error) -> CallError {
    if let Some(refused) = guard::refusal_in(&e) {
        return CallError::Refused(refused.to_string());
    }
    let what = if e.is_timeout() { "timed out".to_owned() } else { without_url(&e) };
    CallError::Network(what)
}

/// The error's text without the URL reqwest puts in it (it may carry a credential in its query).
fn without_url(e: &reqwest::Error) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut last = None;
    while let Some(c) = cause {
        last = Some(c.to_string());
        cause = c.source();
    }
    last.unwrap_or_else(|| "connection failed".to_owned()).chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_network_5xx_429_and_congestion_are_tried_again() {
        assert!(CallError::Network("reset".into()).is_transient());
        assert!(CallError::Status(503).is_transient());
        assert!(CallError::Status(429).is_transient());
        assert!(CallError::Busy.is_transient());
        assert!(!CallError::Status(404).is_transient());
        assert!(!CallError::TooLarge.is_transient());
        assert!(!CallError::Rpc { code: -32601, message: String::new() }.is_transient());
        assert!(!CallError::Refused("loopback".into()).is_transient());
    }

    /// An endpoint on 127.0.0.1 that answers every call after `delay` with `answer`'s result
    /// (the request's id echoed), counting the calls in flight at once; its URL and the most
    /// calls seen in flight.
    async fn endpoint(delay: Duration, answer: fn(Value) -> Value) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let seen = most.clone();
        let app = axum::Router::new().route(
            "/a2a",
            axum::routing::post(move |axum::Json(call): axum::Json<Value>| {
                let (now, most) = (now.clone(), most.clone());
                async move {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    axum::Json(answer(call))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/a2a", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    fn limits(timeout: Duration, per_agent: usize) -> Limits {
        Limits { timeout, per_agent, total: 64, allow_private: true }
    }

    fn at(url: &str, agent: Uuid) -> Endpoint {
        Endpoint { agent_id: agent, url: url.to_owned(), dialect: Dialect::V1_0, auth: None }
    }

    #[tokio::test]
    async fn one_agent_gets_at_most_its_places_at_once() {
        let (url, most) =
            endpoint(Duration::from_millis(300), |c| json!({"jsonrpc": "2.0", "id": c["id"], "result": {}})).await;
        let outbound = Outbound::new(limits(Duration::from_secs(10), 2)).unwrap();
        let agent = Uuid::now_v7();
        let calls = (0..6).map(|_| {
            let (outbound, endpoint) = (outbound.clone(), at(&url, agent));
            async move { outbound.call(&endpoint, &call::get(Dialect::V1_0, "t"), None).await }
        });
        let answers = futures::future::join_all(calls).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2, "calls in flight to one agent");
    }

    #[tokio::test]
    async fn a_slow_answer_times_out_and_a_huge_one_is_refused() {
        let (slow, _) =
            endpoint(Duration::from_secs(5), |c| json!({"jsonrpc": "2.0", "id": c["id"], "result": {}})).await;
        let outbound = Outbound::new(limits(Duration::from_millis(500), 4)).unwrap();
        let started = std::time::Instant::now();
        let failed = outbound.call(&at(&slow, Uuid::now_v7()), &call::get(Dialect::V1_0, "t"), None).await.unwrap_err();
        assert!(matches!(failed, CallError::Network(ref w) if w == "timed out"), "{failed:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(failed.is_transient());

        let (huge, _) = endpoint(
            Duration::ZERO,
            |c| json!({"jsonrpc": "2.0", "id": c["id"], "result": {"blob": "x".repeat(MAX_ANSWER_BYTES)}}),
        )
        .await;
        let outbound = Outbound::new(limits(Duration::from_secs(5), 4)).unwrap();
        let failed = outbound.call(&at(&huge, Uuid::now_v7()), &call::get(Dialect::V1_0, "t"), None).await.unwrap_err();
        assert_eq!(failed, CallError::TooLarge);
    }

    #[tokio::test]
    async fn a_call_that_cannot_be_made_before_its_deadline_is_not_made() {
        let (url, _) =
            endpoint(Duration::from_millis(800), |c| json!({"jsonrpc": "2.0", "id": c["id"], "result": {}})).await;
        let outbound = Outbound::new(limits(Duration::from_secs(10), 1)).unwrap();
        let agent = Uuid::now_v7();
        // One call holds the agent's one place for 800 ms; another that must start within 300 ms
        // gives up then, without calling.
        let first = {
            let (outbound, endpoint) = (outbound.clone(), at(&url, agent));
            tokio::spawn(async move { outbound.call(&endpoint, &call::get(Dialect::V1_0, "t"), None).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let soon = Utc::now() + chrono::Duration::milliseconds(300);
        let late = outbound.call(&at(&url, agent), &call::get(Dialect::V1_0, "t"), Some(soon)).await;
        assert_eq!(late, Err(CallError::Busy));
        assert!(started.elapsed() < Duration::from_millis(700), "{:?}", started.elapsed());
        assert!(first.await.unwrap().is_ok());
        // A deadline already past: not made at all.
        let past = Utc::now() - chrono::Duration::seconds(1);
        let late = outbound.call(&at(&url, agent), &call::get(Dialect::V1_0, "t"), Some(past)).await;
        assert_eq!(late, Err(CallError::Busy));
    }

    #[tokio::test]
    async fn an_error_answer_and_an_answer_to_another_call_are_told_apart() {
        let (error, _) = endpoint(
            Duration::ZERO,
            |c| json!({"jsonrpc": "2.0", "id": c["id"], "error": {"code": -32001, "message": "Task not found"}}),
        )
        .await;
        let outbound = Outbound::new(limits(Duration::from_secs(5), 4)).unwrap();
        let failed =
            outbound.call(&at(&error, Uuid::now_v7()), &call::get(Dialect::V1_0, "t"), None).await.unwrap_err();
        assert_eq!(failed, CallError::Rpc { code: -32001, message: "Task not found".into() });
        let (other, _) = endpoint(Duration::ZERO, |_| json!({"jsonrpc": "2.0", "id": "not-yours", "result": {}})).await;
        let failed =
            outbound.call(&at(&other, Uuid::now_v7()), &call::get(Dialect::V1_0, "t"), None).await.unwrap_err();
        assert!(matches!(failed, CallError::Unreadable(_)), "{failed:?}");
    }

    #[tokio::test]
    async fn a_non_public_endpoint_is_refused_before_any_connection() {
        let outbound =
            Outbound::new(Limits { timeout: Duration::from_secs(1), per_agent: 1, total: 1, allow_private: false })
                .unwrap();
        let endpoint = Endpoint {
            agent_id: Uuid::nil(),
            url: "http://169.254.169.254/latest".into(),
            dialect: Dialect::V1_0,
            auth: None,
        };
        let refused = outbound.call(&endpoint, &call::get(Dialect::V1_0, "t"), None).await.unwrap_err();
        assert!(matches!(refused, CallError::Refused(_)), "{refused:?}");
    }
}
