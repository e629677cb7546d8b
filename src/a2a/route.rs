//! Plain messages routed to the directory's agents: Parley as an A2A router.
//!
//! A send whose message is not a delegate body (one data part holding `taskType` or `input`) is a
//! plain message: text, files, data of the requester's own shape. It goes to one skill of an
//! agent Parley calls over A2A (registered by its AgentCard, whose skills are stored with it:
//! `crate::store::skills`), chosen in this order:
//!
//! 1. the message continues a task (`taskId`) or a context (`contextId`) a routed message started:
//!    the same target (an unknown `taskId` is -32001);
//! 2. the skill `metadata` names: `skillId`, or `parley.skill` as `<anonymousId>/<skillId>`;
//! 3. the best by meaning: every skill's text (name and tags first, then description, then
//!    examples) ranked against the message's words with PostgreSQL's full-text search
//!    (`ts_rank`, any word matching), normalised by the best rank, weighed as discovery weighs a
//!    score: `0.7 * rank + 0.3 * trust/100` with the agent's trust percentile; a tie goes to
//!    the higher trust. When no skill's text matches at all and exactly one skill is offered, it
//!    is that one; otherwise -32602 `no_skill_matches` listing the skills to choose from.
//!
//! The message is forwarded with its parts unchanged and a message id that keeps the
//! requester's as its prefix (`<messageId>.<tag of the requester>`); what the target answers
//! comes back unchanged but for `metadata.parley.route` on the task or message (the agent's
//! anonymous id and the skill). Reads, cancels and subscriptions of a routed task are forwarded
//! to its target; its push notification configurations are Parley's own (`super::push_config`,
//! set by their methods or in a send's configuration, which is not forwarded), told of every
//! state Parley sees the task in (a send's answer, a read, a cancel, a streamed event) and not
//! told yet. Parley learns a task's states only from the calls that pass through it: a target
//! that moves a task on its own is seen moving at the requester's next read or stream. Streams are passed through event by event, in the
//! target's order. When the requester and the target speak different versions, the shapes are
//! rewritten ([`super::convert`]).

use std::{convert::Infallible, time::Duration};

use axum::response::{
    IntoResponse, Response,
    sse::{Event as SseEvent, KeepAlive, Sse},
};
use futures::{Stream, StreamExt};
use reqwest::{Url, header};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{
    A2aState, convert, push_config,
    rpc::{self, Call, Operation, RpcError, Version},
};
use crate::{
    a2a_client::{
        call::{Request, version_header},
        card::Dialect,
        guard,
        outbound::{CallError, Endpoint, Limits, Outbound},
    },
    config::Config,
    error_code::ErrorCode,
    store::{agent_cards, push_configs, skills},
    wire::streams::Slot,
};

/// The most bytes of one streamed event read from a target.
const MAX_EVENT_BYTES: usize = 1 << 20;
/// How long a target's stream may stay silent.
const STREAM_SILENCE: Duration = Duration::from_secs(120);
/// How many skills a `no_skill_matches` error lists.
const LISTED: usize = 20;
/// The weight of the text rank and of trust (as discovery's `rankScore`).
const TEXT_WEIGHT: f64 = 0.7;
const TRUST_WEIGHT: f64 = 0.3;

/// The calls a router makes to targets.
#[derive(Clone)]
pub struct Forwarder {
    outbound: Outbound,
    streams: reqwest::Client,
    allow_private: bool,
}

impl Forwarder {
    /// The calls, bounded as `config` says for calls to agents.
    pub fn new(config: &Config) -> anyhow::Result<Forwarder> {
        let outbound = Outbound::new(Limits {
            timeout: config.a2a_call_timeout.max(config.long_poll_max),
            per_agent: config.a2a_calls_per_agent as usize,
            total: config.a2a_calls_max as usize,
            allow_private: config.a2a_allow_private_targets,
        })?;
        let streams = guard::client_builder(config.a2a_allow_private_targets)
            .connect_timeout(config.a2a_call_timeout)
            .read_timeout(STREAM_SILENCE)
            .build()?;
        Ok(Forwarder { outbound, streams, allow_private: config.a2a_allow_private_targets })
    }
}

/// Where a routed call goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The target agent's endpoint.
    pub endpoint: Endpoint,
    /// Its current anonymous id.
    pub anonymous_id: Option<Uuid>,
    /// The skill.
    pub skill_id: String,
}

impl Target {
    fn route(&self) -> Value {
        json!({ "agentAnonymousId": self.anonymous_id, "skillId": self.skill_id })
    }
}

fn is_data_part(p: &Value) -> bool {
    p.get("kind").and_then(Value::as_str) == Some("data") || (p.get("kind").is_none() && p.get("data").is_some())
}

/// Whether a send's message is Parley's delegate body: exactly one data part, an object holding
/// `taskType` or `input`.
pub fn is_delegate_body(message: &Map<String, Value>) -> bool {
    let parts: Vec<&Value> = message
        .get("parts")
        .and_then(Value::as_array)
        .map(|p| p.iter().filter(|p| is_data_part(p)).collect())
        .unwrap_or_default();
    match parts.as_slice() {
        [one] => one
            .get("data")
            .and_then(Value::as_object)
            .is_some_and(|d| d.contains_key("taskType") || d.contains_key("input")),
        _ => false,
    }
}

/// The words of a message's text parts (and its data parts' strings), as a `to_tsquery` text
/// matching any of them: at most 32 distinct words of letters and digits.
pub fn query_of(message: &Map<String, Value>) -> String {
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            Value::Object(o) => o.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    for p in message.get("parts").and_then(Value::as_array).into_iter().flatten() {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            texts.push(t);
        } else if let Some(d) = p.get("data") {
            strings(d, &mut texts);
        }
    }
    let mut words: Vec<String> = Vec::new();
    for w in texts.iter().flat_map(|t| t.split(|c: char| !c.is_alphanumeric())) {
        let w = w.to_lowercase();
        if w.chars().count() >= 2 && w.chars().count() <= 40 && !words.contains(&w) {
            words.push(w);
        }
        if words.len() == 32 {
            break;
        }
    }
    words.join(" | ")
}

fn internal(e: impl std::fmt::Display) -> RpcError {
    tracing::error!(error = %e, "routing a plain A2A message failed");
    RpcError::internal()
}

/// The endpoint of `agent_id`, when Parley calls it over A2A in a dialect it routes to.
async fn endpoint_of(state: &A2aState, agent_id: Uuid) -> Result<Option<Endpoint>, RpcError> {
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    let card = agent_cards::get(&mut conn, agent_id).await.map_err(internal)?;
    Ok(card.filter(|c| c.dialect != Dialect::Bindu).map(|c| Endpoint {
        agent_id,
        url: c.interface_url,
        dialect: c.dialect,
        auth: c.auth,
    }))
}

async fn target(
    state: &A2aState,
    agent_id: Uuid,
    skill_id: String,
    anonymous_id: Option<Uuid>,
) -> Result<Target, RpcError> {
    let endpoint = endpoint_of(state, agent_id).await?.ok_or_else(|| {
        RpcError::invalid_params(
            ErrorCode::NoSkillMatches,
            "the agent of that skill is not reachable over A2A any more",
        )
    })?;
    Ok(Target { endpoint, anonymous_id, skill_id })
}

/// The target of `requester`'s routed task `task_id`, if it routed one.
pub async fn target_of_task(state: &A2aState, requester: Uuid, task_id: &str) -> Result<Option<Target>, RpcError> {
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    let Some(route) = skills::route_of_task(&mut conn, requester, task_id).await.map_err(internal)? else {
        return Ok(None);
    };
    drop(conn);
    anonymous_target(state, route.target_agent_id, route.skill_id).await.map(Some)
}

async fn anonymous_target(state: &A2aState, agent_id: Uuid, skill_id: String) -> Result<Target, RpcError> {
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    let anonymous_id =
        sqlx::query_scalar!("SELECT anonymous_id FROM anonymous_ids WHERE agent_id = $1 AND current", agent_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(internal)?;
    drop(conn);
    target(state, agent_id, skill_id, anonymous_id).await
}

/// Where a routed send goes.
#[derive(Debug, Clone)]
pub enum Routed {
    /// To an agent Parley calls: the message is forwarded there.
    Forward(Target),
    /// To an agent that polls: the send's params rewritten as a delegate body (the skill's
    /// capability, the agent's anonymous id, and the message's parts as the input
    /// `{"parts": [...]}`), which the delegation path makes; the agent picks it up as any
    /// delegation.
    Delegate(Map<String, Value>),
}

/// Where a send goes when it is routed: `None` for a delegate body (and a follow-up on a
/// delegation), which the delegation path answers.
pub async fn target_of_send(
    state: &A2aState,
    requester: Uuid,
    params: &Map<String, Value>,
) -> Result<Option<Routed>, RpcError> {
    let Some(message) = params.get("message").and_then(Value::as_object) else { return Ok(None) };
    let delegate = is_delegate_body(message);
    if let Some(task_id) = message.get("taskId").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        if let Some(target) = target_of_task(state, requester, task_id).await? {
            return Ok(Some(Routed::Forward(target)));
        }
        if delegate {
            return Ok(None);
        }
        let is_delegation = match Uuid::parse_str(task_id) {
            Ok(id) => state.delegations.requested_by(id, requester).await.is_ok(),
            Err(_) => false,
        };
        return if is_delegation { Ok(None) } else { Err(RpcError::task_not_found()) };
    }
    if delegate {
        return Ok(None);
    }
    if let Some(context_id) = message.get("contextId").and_then(Value::as_str).filter(|c| !c.is_empty()) {
        let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
        let route = skills::route_of_context(&mut conn, requester, context_id).await.map_err(internal)?;
        drop(conn);
        if let Some(route) = route {
            return anonymous_target(state, route.target_agent_id, route.skill_id)
                .await
                .map(|t| Some(Routed::Forward(t)));
        }
    }
    chosen(state, requester, params, message).await.map(Some)
}

/// The skill `metadata` names (`skillId`, or `parley.skill` as `<anonymousId>/<skillId>`), as
/// (agent's anonymous id, skill id).
fn named(
    params: &Map<String, Value>,
    message: &Map<String, Value>,
) -> Result<Option<(Option<Uuid>, String)>, RpcError> {
    for metadata in [message.get("metadata"), params.get("metadata")].into_iter().flatten() {
        if let Some(skill) = metadata.pointer("/parley/skill").and_then(Value::as_str) {
            let (anonymous, skill) = skill.split_once('/').ok_or_else(|| {
                RpcError::invalid_params(ErrorCode::InvalidBody, "metadata.parley.skill is `<anonymousId>/<skillId>`")
            })?;
            let anonymous = Uuid::parse_str(anonymous).map_err(|_| {
                RpcError::invalid_params(
                    ErrorCode::InvalidBody,
                    "metadata.parley.skill starts with an anonymous id (a UUID)",
                )
            })?;
            return Ok(Some((Some(anonymous), skill.to_owned())));
        }
        if let Some(skill) = metadata.get("skillId").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            return Ok(Some((None, skill.to_owned())));
        }
    }
    Ok(None)
}

/// The skill a new plain message goes to (see the module docs).
async fn chosen(
    state: &A2aState,
    requester: Uuid,
    params: &Map<String, Value>,
    message: &Map<String, Value>,
) -> Result<Routed, RpcError> {
    let named = named(params, message)?;
    let query = if named.is_some() { String::new() } else { query_of(message) };
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    let candidates = skills::candidates(&mut conn, requester, &query).await.map_err(internal)?;
    let named_agent = match &named {
        Some((Some(anonymous), _)) => skills::agent_of_anonymous(&mut conn, *anonymous).await.map_err(internal)?,
        _ => None,
    };
    drop(conn);
    let choose_best = |fits: Vec<&skills::Candidate>| -> Option<skills::Candidate> {
        let best_rank = fits.iter().map(|c| c.text_rank).fold(0.0_f64, f64::max);
        let score = |c: &skills::Candidate| {
            let text = if best_rank > 0.0 { c.text_rank / best_rank } else { 0.0 };
            TEXT_WEIGHT * text + TRUST_WEIGHT * f64::from(c.trust) / 100.0
        };
        fits.into_iter()
            .max_by(|a, b| score(a).total_cmp(&score(b)).then(a.trust.cmp(&b.trust)).then(b.agent_id.cmp(&a.agent_id)))
            .cloned()
    };
    let best = match &named {
        Some((anonymous, skill)) => {
            let fits: Vec<&skills::Candidate> = candidates
                .iter()
                .filter(|c| &c.skill_id == skill && (anonymous.is_none() || Some(c.agent_id) == named_agent))
                .collect();
            choose_best(fits)
        }
        None => {
            let fits: Vec<&skills::Candidate> = candidates.iter().filter(|c| c.text_rank > 0.0).collect();
            if fits.is_empty() && candidates.len() == 1 { candidates.first().cloned() } else { choose_best(fits) }
        }
    };
    let Some(best) = best else {
        let listed: Vec<String> = candidates
            .iter()
            .take(LISTED)
            .map(|c| match c.anonymous_id {
                Some(a) => format!("{a}/{} ({})", c.skill_id, c.name),
                None => format!("{} ({})", c.skill_id, c.name),
            })
            .collect();
        let what = match &named {
            Some((_, skill)) => format!("no agent offers the skill {}", crate::quote::quote(skill)),
            None => "no agent's skill fits this message".to_owned(),
        };
        let choose = if listed.is_empty() {
            "no agent offers any skill yet".to_owned()
        } else {
            format!(
                "name one in metadata.skillId (or metadata.parley.skill as <anonymousId>/<skillId>): {}",
                listed.join("; ")
            )
        };
        return Err(RpcError::invalid_params(ErrorCode::NoSkillMatches, format!("{what}; {choose}")));
    };
    match (&best.polled, best.anonymous_id) {
        (None, _) => target(state, best.agent_id, best.skill_id, best.anonymous_id).await.map(Routed::Forward),
        (Some((task_type, custom_type)), Some(anonymous)) => {
            Ok(Routed::Delegate(as_delegation(params, message, task_type, custom_type.as_deref(), anonymous)))
        }
        (Some(_), None) => Err(RpcError::invalid_params(
            ErrorCode::NoSkillMatches,
            "the agent of that skill has no anonymous id in the directory right now",
        )),
    }
}

/// A send's params with its message's parts replaced by one delegate body for a polling agent's
/// capability: `{taskType, customType, targetAnonymousId, input: {"parts": [...]}, fallbackEnabled:
/// false}`; the message id, context, metadata and configuration stay.
fn as_delegation(
    params: &Map<String, Value>,
    message: &Map<String, Value>,
    task_type: &str,
    custom_type: Option<&str>,
    anonymous: Uuid,
) -> Map<String, Value> {
    let parts = message.get("parts").cloned().unwrap_or_else(|| json!([]));
    let mut body = json!({
        "taskType": task_type,
        "targetAnonymousId": anonymous,
        "input": {"parts": parts},
        "fallbackEnabled": false,
    });
    if let Some(custom) = custom_type {
        body["customType"] = json!(custom);
    }
    let mut message = message.clone();
    message.insert("parts".into(), json!([{"kind": "data", "data": body}]));
    let mut params = params.clone();
    params.insert("message".into(), Value::Object(message));
    params
}

/// The message id the target receives: the requester's, then a tag of the requester.
fn forwarded_message_id(requester: Uuid, message_id: &str) -> String {
    let digest = Sha256::digest(requester.as_bytes());
    let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{message_id}.{tag}")
}

/// The method `operation` is called by at a target speaking `dialect`, given the caller's name.
fn target_method(operation: Operation, dialect: Dialect) -> Option<&'static str> {
    let v1 = dialect == Dialect::V1_0;
    Some(match operation {
        Operation::Send => {
            if v1 {
                "SendMessage"
            } else {
                "message/send"
            }
        }
        Operation::SendStreaming => {
            if v1 {
                "SendStreamingMessage"
            } else {
                "message/stream"
            }
        }
        Operation::Get => {
            if v1 {
                "GetTask"
            } else {
                "tasks/get"
            }
        }
        Operation::Cancel => {
            if v1 {
                "CancelTask"
            } else {
                "tasks/cancel"
            }
        }
        Operation::Subscribe => {
            if v1 {
                "SubscribeToTask"
            } else {
                "tasks/resubscribe"
            }
        }
        // A routed task's push configurations are Parley's own (`super::push_config`).
        Operation::PushConfig | Operation::List | Operation::ExtendedCard => return None,
    })
}

/// The call as the target receives it: its method and params.
fn outgoing(call: &Call, requester: Uuid, dialect: Dialect) -> Result<Request, RpcError> {
    let method = target_method(call.method.operation, dialect)
        .ok_or_else(|| RpcError::unsupported("this operation is not forwarded to the agent"))?;
    let mut params = call.params.clone();
    if matches!(call.method.operation, Operation::Send | Operation::SendStreaming) {
        params = match dialect {
            Dialect::V1_0 => convert::send_params_v1(&params),
            _ => convert::send_params_v03(&params),
        };
        if let Some(Value::Object(m)) = params.get_mut("message")
            && let Some(id) = m.get("messageId").and_then(Value::as_str)
        {
            let id = forwarded_message_id(requester, id);
            m.insert("messageId".into(), json!(id));
        }
        // A push configuration in the send is Parley's to keep (`super::push_config`).
        if let Some(Value::Object(c)) = params.get_mut("configuration") {
            for name in push_config::IN_SEND {
                c.remove(name);
            }
        }
    }
    Ok(Request { method, params: Value::Object(params) })
}

/// A target's answer (or event) in 1.0's shape; `wrap` for a send's or a stream's result.
fn normalised(result: Value, dialect: Dialect, wrap: bool) -> Value {
    if dialect == Dialect::V1_0 { result } else { convert::result_v1(&result, wrap) }
}

/// A 1.0 result in the caller's version; `wrapped` when it is a send's or stream's result.
fn in_version(result: Value, version: Version, wrapped: bool) -> Value {
    match version {
        Version::V1 => result,
        Version::V03 if wrapped => convert::result_v03(&result),
        Version::V03 => convert::task(&result, false),
    }
}

/// Adds `metadata.parley.route` to the task or message of a 1.0 result.
fn mark(result: &mut Value, target: &Target) {
    let inner = if result.get("task").is_some() {
        &mut result["task"]
    } else if result.get("message").is_some() {
        &mut result["message"]
    } else if result.get("status").is_some() {
        result
    } else {
        return;
    };
    if !inner["metadata"].is_object() {
        inner["metadata"] = json!({});
    }
    inner["metadata"]["parley"] = json!({ "route": target.route() });
}

/// The task id and context id a 1.0 send's or stream's result names.
fn ids_of(result: &Value) -> Option<(String, Option<String>)> {
    let (inner, id_key) = if let Some(t) = result.get("task") {
        (t, "id")
    } else if let Some(m) = result.get("message") {
        (m, if m.get("taskId").is_some() { "taskId" } else { "messageId" })
    } else if let Some(u) = result.get("statusUpdate").or_else(|| result.get("artifactUpdate")) {
        (u, "taskId")
    } else {
        return None;
    };
    let id = inner.get(id_key).and_then(Value::as_str)?.to_owned();
    Some((id, inner.get("contextId").and_then(Value::as_str).map(str::to_owned)))
}

async fn remember(state: &A2aState, requester: Uuid, target: &Target, result: &Value) -> Result<(), RpcError> {
    let Some((task_id, context_id)) = ids_of(result) else { return Ok(()) };
    if task_id.chars().count() > 500 || context_id.as_ref().is_some_and(|c| c.chars().count() > 500) {
        return Ok(());
    }
    let mut conn = state.engine.pool().acquire().await.map_err(internal)?;
    let route = skills::Route {
        task_id,
        context_id,
        target_agent_id: target.endpoint.agent_id,
        skill_id: target.skill_id.clone(),
    };
    skills::remember(&mut conn, requester, &route).await.map_err(internal)
}

/// A failed call to a target as the requester is told it: the target's own JSON-RPC error as
/// it was; anything else -32603 saying what happened.
fn call_refusal(e: CallError) -> RpcError {
    match e {
        CallError::Rpc { code, message } => {
            RpcError { code: i32::try_from(code).unwrap_or(-32603), message, parley_code: None }
        }
        other => RpcError { code: -32603, message: format!("the target agent: {other}"), parley_code: None },
    }
}

/// The routed task a 1.0 result shows, and its state: a send's or stream's task or status
/// update, or a read's or cancel's task. `None` for a message, an artifact update, or anything
/// else.
fn state_of(result: &Value) -> Option<(&str, Option<&str>, &str)> {
    let (inner, id_key) = if let Some(t) = result.get("task") {
        (t, "id")
    } else if let Some(u) = result.get("statusUpdate") {
        (u, "taskId")
    } else if result.get("status").is_some() && result.get("id").is_some() {
        (result, "id")
    } else {
        return None;
    };
    let id = inner.get(id_key).and_then(Value::as_str)?;
    let state = inner.pointer("/status/state").and_then(Value::as_str)?;
    Some((id, inner.get("contextId").and_then(Value::as_str), state))
}

/// Tells the routed task's push configurations of the state `result` shows, when they were not
/// told it yet ([`push_configs::routed_task_seen`]). The call's answer does not wait on it
/// failing: the next sight of the task tells them.
async fn observe(state: &A2aState, requester: Uuid, target: &Target, result: &Value) {
    let Some((task_id, context_id, task_state)) = state_of(result) else { return };
    let seen = push_configs::RoutedState { requester, task_id, context_id, state: task_state, route: target.route() };
    let told = async {
        let mut conn = state.engine.pool().acquire().await?;
        push_configs::routed_task_seen(&mut conn, &seen).await
    };
    if let Err(e) = told.await {
        tracing::warn!(error = %e, "a routed task's new state was not recorded for its push configurations");
    }
}

/// Forwards a call that is not a stream to `target` and answers its result in the caller's
/// version. A send's push configuration is checked before the target is called, and kept by
/// Parley for the task it starts.
pub async fn forward(state: &A2aState, requester: Uuid, target: &Target, call: &Call) -> Result<Value, RpcError> {
    let send = call.method.operation == Operation::Send;
    let push = if send { push_config::wanted_in_send(state, &call.params, call.method.version).await? } else { None };
    let request = outgoing(call, requester, target.endpoint.dialect)?;
    let result = state.forwarder.outbound.call(&target.endpoint, &request, None).await.map_err(call_refusal)?;
    let mut result = normalised(result, target.endpoint.dialect, send);
    if send {
        remember(state, requester, target, &result).await?;
        if let (Some(push), Some((task_id, _, _))) = (&push, state_of(&result)) {
            push_config::attach_routed(state, requester, task_id, push, call.method.version).await?;
        }
    }
    observe(state, requester, target, &result).await;
    mark(&mut result, target);
    Ok(in_version(result, call.method.version, send))
}

/// The `data:` payloads of an SSE byte stream, bounded per event.
fn sse_data(
    bytes: impl Stream<Item = Result<axum::body::Bytes, reqwest::Error>> + Send + Unpin + 'static,
) -> impl Stream<Item = Result<Value, String>> + Send {
    futures::stream::unfold((bytes, Vec::<u8>::new(), false), |(mut bytes, mut buffer, done)| async move {
        if done {
            return None;
        }
        loop {
            let normalised_end = buffer.windows(2).position(|w| w == b"\n\n");
            if let Some(end) = normalised_end {
                let event: Vec<u8> = buffer.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue;
                }
                let item =
                    serde_json::from_str::<Value>(&data.join("\n")).map_err(|e| format!("an event is not JSON: {e}"));
                return Some((item, (bytes, buffer, false)));
            }
            if buffer.len() > MAX_EVENT_BYTES {
                return Some((Err("an event is larger than 1 MiB".into()), (bytes, buffer, true)));
            }
            match bytes.next().await {
                Some(Ok(chunk)) => {
                    buffer.extend(chunk.iter().filter(|b| **b != b'\r'));
                }
                Some(Err(e)) => return Some((Err(format!("the stream broke: {e}")), (bytes, buffer, true))),
                None => return None,
            }
        }
    })
}

/// Forwards a streaming call (a streaming send or a subscription) to `target`, and answers an
/// SSE stream of the target's events in order, each as the caller's version writes it (and, on
/// the HTTP+JSON binding, without the JSON-RPC envelope).
pub async fn forward_stream(
    state: &A2aState,
    requester: Uuid,
    target: Target,
    call: Call,
    slot: Slot,
) -> Result<Response, RpcError> {
    let push = if call.method.operation == Operation::SendStreaming {
        push_config::wanted_in_send(state, &call.params, call.method.version).await?
    } else {
        None
    };
    let request = outgoing(&call, requester, target.endpoint.dialect)?;
    let url = Url::parse(&target.endpoint.url).map_err(|e| call_refusal(CallError::Refused(e.to_string())))?;
    guard::check_url(&url, state.forwarder.allow_private)
        .map_err(|e| call_refusal(CallError::Refused(e.to_string())))?;
    let body =
        json!({"jsonrpc": "2.0", "id": Uuid::new_v4().to_string(), "method": request.method, "params": request.params});
    let mut builder = state.forwarder.streams.post(url).header(header::ACCEPT, "text/event-stream").json(&body);
    if let Some((name, value)) = version_header(target.endpoint.dialect) {
        builder = builder.header(name, value);
    }
    if let Some(auth) = &target.endpoint.auth {
        builder = builder.header(header::AUTHORIZATION, auth.authorization());
    }
    let response = builder.send().await.map_err(|e| call_refusal(CallError::Network(e.without_url().to_string())))?;
    if !response.status().is_success() {
        return Err(call_refusal(CallError::Status(response.status().as_u16())));
    }
    let is_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        // An error answered as one JSON-RPC response.
        let answer: Value = response.json().await.map_err(|e| call_refusal(CallError::Unreadable(e.to_string())))?;
        let error = answer.as_object().and_then(crate::a2a_client::call::error_of);
        return Err(match error {
            Some((code, message)) => call_refusal(CallError::Rpc { code, message }),
            None => call_refusal(CallError::Unreadable("the agent did not answer a stream".into())),
        });
    }
    let (dialect, version, id, rest) = (target.endpoint.dialect, call.method.version, call.id.clone(), call.rest);
    let stopped = state.stopped();
    let state = state.clone();
    let remembered = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let events = sse_data(Box::pin(response.bytes_stream()));
    let forwarded = events.then(move |item| {
        let (state, target, id, remembered) = (state.clone(), target.clone(), id.clone(), remembered.clone());
        let push = push.clone();
        async move {
            match item {
                Ok(answer) => {
                    if let Some(error) = answer.get("error") {
                        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                        let message = error.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
                        let e = call_refusal(CallError::Rpc { code, message });
                        return rpc::error(&id, &e, version);
                    }
                    let mut result = normalised(answer.get("result").cloned().unwrap_or(Value::Null), dialect, true);
                    let first = !remembered.load(std::sync::atomic::Ordering::SeqCst);
                    if first && ids_of(&result).is_some() && remember(&state, requester, &target, &result).await.is_ok()
                    {
                        remembered.store(true, std::sync::atomic::Ordering::SeqCst);
                        if let (Some(push), Some((task_id, _))) = (&push, ids_of(&result)) {
                            let attached = push_config::attach_routed(&state, requester, &task_id, push, version).await;
                            if let Err(e) = attached {
                                return rpc::error(&id, &e, version);
                            }
                        }
                    }
                    observe(&state, requester, &target, &result).await;
                    mark(&mut result, &target);
                    rpc::result(&id, in_version(result, version, true))
                }
                Err(e) => {
                    let e = RpcError { code: -32603, message: format!("the target agent: {e}"), parley_code: None };
                    rpc::error(&id, &e, version)
                }
            }
        }
    });
    Ok(sse(forwarded.take_until(stopped), slot, rest).into_response())
}

/// The events as SSE (`event: error` for an error); on the HTTP+JSON binding each event is the
/// result itself, or the error object.
pub fn sse(
    updates: impl Stream<Item = Value> + Send + 'static,
    slot: Slot,
    rest: bool,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let events = updates.map(move |value| {
        let _held = &slot;
        let is_error = value.get("error").is_some();
        let value =
            if rest { value.get("result").cloned().unwrap_or_else(|| json!({"error": value["error"]})) } else { value };
        let event = SseEvent::default().data(value.to_string());
        Ok(if is_error { event.event("error") } else { event })
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("keep-alive"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_delegate_body_is_one_data_part_with_a_task_type_or_input() {
        assert!(is_delegate_body(&message(
            json!({"parts": [{"data": {"taskType": "x", "input": {}}}, {"text": "hi"}]})
        )));
        assert!(is_delegate_body(&message(json!({"parts": [{"kind": "data", "data": {"input": {}}}]}))));
        assert!(!is_delegate_body(&message(json!({"parts": [{"text": "translate this"}]}))));
        assert!(!is_delegate_body(&message(json!({"parts": [{"data": {"city": "Oslo"}}]}))));
        assert!(!is_delegate_body(&message(json!({"parts": [{"data": {"input": 1}}, {"data": {"input": 2}}]}))));
    }

    #[test]
    fn the_query_is_any_of_the_messages_words() {
        let q =
            query_of(&message(json!({"parts": [{"text": "Translate: hello, world! a"}, {"data": {"to": "French"}}]})));
        assert_eq!(q, "translate | hello | world | french");
        assert_eq!(query_of(&message(json!({"parts": [{"text": "' & | !"}]}))), "");
    }

    #[test]
    fn the_forwarded_message_id_keeps_the_requesters_as_its_prefix() {
        let r = Uuid::now_v7();
        let id = forwarded_message_id(r, "tck-message-response-1");
        assert!(id.starts_with("tck-message-response-1."));
        assert_eq!(id, forwarded_message_id(r, "tck-message-response-1"));
        assert_ne!(id, forwarded_message_id(Uuid::now_v7(), "tck-message-response-1"));
    }
}
