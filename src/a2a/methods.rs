//! `POST /a2a`: one call, from its credentials to its answer.
//!
//! Credentials come first, as on every Parley route: the bearer (or `x-api-key`) must be an
//! active agent's key, else HTTP 401 with `WWW-Authenticate: Bearer` (403 for an inactive
//! agent), whatever the body holds. Then the envelope ([`super::rpc::read`]), then the method:
//!
//! - send (`SendMessage`, `message/send`): a delegation from the message ([`super::send`]),
//!   answered as its task; a blocking send waits (no connection held) until the task ends or
//!   `PARLEY_LONG_POLL_MAX` passes, and answers the task as it is then;
//! - get (`GetTask`, `tasks/get`): the caller's task, with `historyLength`; a task the caller
//!   did not ask for is -32001, as an unknown one;
//! - list (`ListTasks`, 1.0): the caller's tasks, newest first, filtered by `contextId` and
//!   `status`, paged by `pageToken`;
//! - cancel (`CancelTask`, `tasks/cancel`): the delegation ends `canceled`, its open attempt
//!   too, with no fallback; an ended task is -32002;
//! - streaming send and subscribe ([`super::stream`]); subscribing to an ended task is -32004;
//! - push notification configurations ([`super::push_config`]): set with a send too; the
//!   extended card: -32007.
//!
//! Parley's refusals of a send (an unknown task type, an input the target's schema refuses, an
//! unknown target, a request id reused with another body) are -32602 with Parley's code in
//! `data`. Limits are HTTP answers a client backs off from: 429 with `Retry-After` (too many
//! delegations, too many refused inputs, too many open streams), 503 when the database is
//! unreachable.

use axum::{
    Json,
    body::Bytes,
    extract::{State, rejection::BytesRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    A2aState, push_config, route,
    rpc::{self, Call, Operation, RpcError, Version},
    send, stream,
};
use crate::{
    auth::{self, Policy, Principal},
    directory::delegation::{DelegationError, Record},
    error_code::ErrorCode,
    runtime::{AgentIdentity, AgentKey},
    wire::a2a_render as render,
    wire::delegation_task as task,
    wire::{
        body::BODY_LIMIT,
        error::{ApiError, is_database_unavailable},
        input::find_nul,
    },
};

/// Tasks a `ListTasks` page holds when it asks for no size, and at most.
const PAGE_SIZE: usize = 50;
const MAX_PAGE_SIZE: usize = 100;
/// Delegations a `ListTasks` call looks through for its filters, at most.
const MAX_SCANNED: usize = 1_000;

/// What a call ends in when it is not a JSON-RPC answer: an HTTP refusal.
pub(crate) enum Refusal {
    /// An HTTP answer with Parley's error body (401, 403, 413, 429, 503).
    Http(ApiError),
    /// A JSON-RPC error.
    Rpc(RpcError),
}

impl From<RpcError> for Refusal {
    fn from(e: RpcError) -> Self {
        Refusal::Rpc(e)
    }
}

/// A delegation service's refusal as the A2A endpoint answers it.
impl From<DelegationError> for Refusal {
    fn from(e: DelegationError) -> Self {
        match e {
            DelegationError::NotFound => Refusal::Rpc(RpcError::task_not_found()),
            other => Refusal::from(ApiError::from(other)),
        }
    }
}

/// Parley's error answer as the A2A endpoint answers it: credentials, limits and an
/// unreachable database over HTTP; a refusal of what was asked as -32602 with its code.
impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Unauthorized(_)
            | ApiError::Forbidden(_)
            | ApiError::RateLimited(_)
            | ApiError::TooMany(..)
            | ApiError::PayloadTooLarge(_)
            | ApiError::RequestTimeout
            | ApiError::Unavailable(_) => Refusal::Http(e),
            ApiError::Internal(e) if is_database_unavailable(&e) => Refusal::Http(ApiError::Internal(e)),
            ApiError::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "internal error in an A2A call");
                Refusal::Rpc(RpcError::internal())
            }
            ApiError::NotFound(_) => Refusal::Rpc(RpcError::task_not_found()),
            other => Refusal::Rpc(RpcError::invalid_params(other.code(), other.message())),
        }
    }
}

/// An HTTP refusal, with `WWW-Authenticate` on a 401.
pub(crate) fn http_refusal(e: ApiError) -> Response {
    let unauthorized = e.status() == StatusCode::UNAUTHORIZED;
    let mut response = e.into_response();
    if unauthorized {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"parley\", charset=\"UTF-8\""));
    }
    response
}

/// The caller: an active agent, by its key (the only credential this endpoint takes).
pub(crate) async fn caller(state: &A2aState, headers: &HeaderMap) -> Result<(AgentIdentity, AgentKey), ApiError> {
    let principal = auth::authenticate(headers, None, &Policy::ANY_AGENT_KEY, &state.jwt, &state.engine)
        .await
        .map_err(ApiError::from)?;
    let Principal::Agent(agent) = principal else {
        return Err(ApiError::Unauthorized(auth::MISSING_KEY.into()));
    };
    let key = auth::key_of(headers, &agent).ok_or_else(|| ApiError::Unauthorized(auth::MISSING_KEY.into()))?;
    Ok((agent, key))
}

/// `POST /a2a`.
#[utoipa::path(post, path = "/a2a", tag = "a2a", operation_id = "a2aJsonRpc",
    description = "A2A over JSON-RPC 2.0, versions 1.0 (`SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, `SubscribeToTask`; send `A2A-Version: 1.0`) and 0.3 (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`), dispatched by method name. A send's message carries one data part holding a delegation (`taskType`, `input`, optionally `targetAnonymousId`, `customType`, `timeoutMs`, `fallbackEnabled`, `maxRetries`); its `messageId` is the idempotency key. The task is the delegation. Streaming methods answer `text/event-stream`, each event a JSON-RPC response. JSON-RPC errors are answered 200 with the A2A codes (-32001 task not found, -32002 not cancelable, -32003 no push, -32004 unsupported, -32009 version, -32602 with Parley's code in `data`).",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    request_body(content = Object, description = "A JSON-RPC 2.0 request", content_type = "application/json"),
    responses(
        (status = 200, description = "A JSON-RPC response (result or error), or for streaming methods an SSE stream of them", body = Object),
        (status = 401, description = "No API key, or an unknown, revoked or expired one (`WWW-Authenticate: Bearer`)"),
        (status = 403, description = "The key's agent is inactive"),
        (status = 413, description = "The body is larger than the limit"),
        (status = 429, description = "Too many delegations, refused inputs or open streams (`Retry-After`)"),
        (status = 503, description = "The database is unreachable"),
    ))]
pub async fn handle(
    State(state): State<A2aState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (agent, key) = match caller(&state, &headers).await {
        Ok(found) => found,
        Err(e) => {
            crate::metrics::a2a_call("unknown", "refused");
            return http_refusal(e);
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            crate::metrics::a2a_call("unknown", "refused");
            let e = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(BODY_LIMIT)
            } else {
                ApiError::RequestTimeout
            };
            return http_refusal(e);
        }
    };
    if let Some(given) = unsupported_content_type(&headers) {
        crate::metrics::a2a_call("unknown", "error");
        let e = RpcError::content_type_not_supported(&given);
        let id = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.get("id").cloned()).unwrap_or(Value::Null);
        let version = if serves_v1_header(&headers) { Version::V1 } else { Version::V03 };
        return Json(rpc::error(&id, &e, version)).into_response();
    }
    let call = match rpc::read(&body, &headers) {
        Ok(call) => call,
        Err((id, e, version)) => {
            crate::metrics::a2a_call("unknown", "error");
            return Json(rpc::error(&id, &e, version)).into_response();
        }
    };
    let (name, version, id) = (call.method.name, call.method.version, call.id.clone());
    let answered = match find_nul(&Value::Object(call.params.clone())) {
        Some(at) => Err(Refusal::Rpc(RpcError::invalid_params(
            ErrorCode::InvalidBody,
            format!("params{at} holds a NUL character, which Parley does not store"),
        ))),
        None => dispatch(&state, &agent, &key, call).await,
    };
    match answered {
        Ok(Answer::Result(result)) => {
            crate::metrics::a2a_call(name, "ok");
            Json(rpc::result(&id, result)).into_response()
        }
        Ok(Answer::Stream(response)) => {
            crate::metrics::a2a_call(name, "ok");
            response
        }
        Err(Refusal::Rpc(e)) => {
            crate::metrics::a2a_call(name, "error");
            Json(rpc::error(&id, &e, version)).into_response()
        }
        Err(Refusal::Http(e)) => {
            crate::metrics::a2a_call(name, "refused");
            http_refusal(e)
        }
    }
}

/// A content type other than JSON's, when the request names one.
pub(crate) fn unsupported_content_type(headers: &HeaderMap) -> Option<String> {
    let given = headers.get(header::CONTENT_TYPE)?.to_str().unwrap_or("(not text)").trim().to_owned();
    let essence = given.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"));
    (!json && !essence.is_empty()).then_some(given)
}

/// Whether the request's `A2A-Version` header asks for 1.x.
fn serves_v1_header(headers: &HeaderMap) -> bool {
    headers.get(rpc::VERSION_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim().starts_with('1'))
}

/// What a call answers: a result (written in the binding's envelope) or a stream.
pub(crate) enum Answer {
    /// The result, without its envelope.
    Result(Value),
    /// An SSE stream, each event in the binding's envelope already.
    Stream(Response),
}

/// The task id a read, cancel or subscription names.
fn named_task(call: &Call) -> Option<&str> {
    call.params.get("id").and_then(Value::as_str)
}

/// Runs one call: a plain message, and any call on a task a plain message started, is routed
/// (`super::route`); everything else is the delegations'.
pub(crate) async fn dispatch(
    state: &A2aState,
    agent: &AgentIdentity,
    key: &AgentKey,
    mut call: Call,
) -> Result<Answer, Refusal> {
    match call.method.operation {
        Operation::Send | Operation::SendStreaming => {
            match route::target_of_send(state, agent.agent_id, &call.params).await? {
                Some(route::Routed::Forward(target)) if call.method.operation == Operation::Send => {
                    return Ok(Answer::Result(route::forward(state, agent.agent_id, &target, &call).await?));
                }
                Some(route::Routed::Forward(target)) => {
                    let slot = stream::slot(state, agent)?;
                    return Ok(Answer::Stream(route::forward_stream(state, agent.agent_id, target, call, slot).await?));
                }
                // A polling agent's skill: a delegation to it, made as any other.
                Some(route::Routed::Delegate(params)) => call.params = params,
                None => {}
            }
        }
        Operation::Get | Operation::Cancel | Operation::Subscribe => {
            let routed = match named_task(&call) {
                Some(task) => route::target_of_task(state, agent.agent_id, task).await?,
                None => None,
            };
            if let Some(target) = routed {
                if call.method.operation == Operation::Subscribe {
                    let slot = stream::slot(state, agent)?;
                    return Ok(Answer::Stream(route::forward_stream(state, agent.agent_id, target, call, slot).await?));
                }
                return Ok(Answer::Result(route::forward(state, agent.agent_id, &target, &call).await?));
            }
        }
        // Push configurations are Parley's own, of a routed task as of a delegation.
        Operation::PushConfig | Operation::List | Operation::ExtendedCard => {}
    }
    delegations(state, agent, key, call).await
}

/// Runs one call on the delegations.
async fn delegations(state: &A2aState, agent: &AgentIdentity, key: &AgentKey, call: Call) -> Result<Answer, Refusal> {
    let version = call.method.version;
    let answer = |result: Value| Ok(Answer::Result(result));
    match call.method.operation {
        Operation::Send => {
            let send = read_send(state, agent, &call.params)?;
            let push = push_config::wanted_in_send(state, &call.params, version).await?;
            let before = if push.is_some() { push_config::newest_event(state).await? } else { 0 };
            let wait = send.blocking.then(|| state.engine.config().long_poll_max);
            let record = state.delegations.delegate(key, &send.request, wait).await?;
            if let Some(push) = &push {
                push_config::attach(state, agent, &record, push, version, before).await?;
            }
            let task = task::task(&record.delegation, &record.attempts);
            answer(render::sent(render::task(&task, version, send.history_length), version))
        }
        Operation::SendStreaming => {
            let send = read_send(state, agent, &call.params)?;
            let push = push_config::wanted_in_send(state, &call.params, version).await?;
            let before = if push.is_some() { push_config::newest_event(state).await? } else { 0 };
            let slot = stream::slot(state, agent)?;
            // Subscribed before the delegation is made: no update can fall before it.
            let events = state.events.subscribe();
            let record = state.delegations.delegate(key, &send.request, None).await?;
            if let Some(push) = &push {
                push_config::attach(state, agent, &record, push, version, before).await?;
            }
            Ok(Answer::Stream(stream::follow(state, agent.agent_id, record, events, slot, &call)))
        }
        Operation::Get => {
            let record = task_of(state, agent, &call.params).await?;
            let history_length = send::history_length(Some(&call.params))?;
            let task = task::task(&record.delegation, &record.attempts);
            answer(render::task(&task, version, history_length))
        }
        Operation::List => answer(list(state, agent, &call.params).await?),
        Operation::Cancel => {
            let record = task_of(state, agent, &call.params).await?;
            if record.delegation.status.is_terminal() {
                return Err(RpcError::not_cancelable(state_name(&record, version).as_str()).into());
            }
            let canceled = match state.delegations.cancel(key, record.delegation.request_id).await {
                Ok(canceled) => canceled,
                Err(DelegationError::NotFound) => return Err(RpcError::task_not_found().into()),
                Err(e) => return Err(cancel_refusal(state, agent, &record, e, version).await),
            };
            let task = task::task(&canceled.delegation, &canceled.attempts);
            answer(render::task(&task, version, None))
        }
        Operation::Subscribe => {
            let slot = stream::slot(state, agent)?;
            let events = state.events.subscribe();
            let record = task_of(state, agent, &call.params).await?;
            if record.delegation.status.is_terminal() {
                return Err(RpcError::unsupported(format!(
                    "the task has ended ({}); read it with GetTask (tasks/get)",
                    state_name(&record, version)
                ))
                .into());
            }
            Ok(Answer::Stream(stream::follow(state, agent.agent_id, record, events, slot, &call)))
        }
        Operation::PushConfig => answer(push_config::handle(state, agent, &call).await?),
        Operation::ExtendedCard => Err(RpcError::no_extended_card().into()),
    }
}

/// A cancel the service refused: a delegation that ended meanwhile is -32002, anything else as
/// the service said.
async fn cancel_refusal(
    state: &A2aState,
    agent: &AgentIdentity,
    before: &Record,
    e: DelegationError,
    version: Version,
) -> Refusal {
    match state.delegations.requested_by(before.delegation.delegation_id, agent.agent_id).await {
        Ok(now) if now.delegation.status.is_terminal() => RpcError::not_cancelable(&state_name(&now, version)).into(),
        _ => e.into(),
    }
}

/// A task's state as `version` names it, for a message.
fn state_name(record: &Record, version: Version) -> String {
    let s = task::state(&record.delegation);
    match version {
        Version::V1 => render::state_v1(s),
        Version::V03 => s.to_owned(),
    }
}

fn read_send(state: &A2aState, agent: &AgentIdentity, params: &Map<String, Value>) -> Result<send::Send, RpcError> {
    let min_timeout_ms = i64::try_from(state.engine.config().delegation_min_timeout.as_millis()).unwrap_or(i64::MAX);
    send::read(params, agent.agent_id, min_timeout_ms)
}

/// The caller's task that `params.id` names; any other id is -32001.
async fn task_of(state: &A2aState, agent: &AgentIdentity, params: &Map<String, Value>) -> Result<Record, Refusal> {
    let id = params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(ErrorCode::InvalidBody, "params.id must be a string: the task's id"))?;
    let id = Uuid::parse_str(id).map_err(|_| RpcError::task_not_found())?;
    Ok(state.delegations.requested_by(id, agent.agent_id).await?)
}

/// `ListTasks`: a page of the caller's tasks, newest first.
async fn list(state: &A2aState, agent: &AgentIdentity, params: &Map<String, Value>) -> Result<Value, Refusal> {
    let invalid = |m: &str| Refusal::Rpc(RpcError::invalid_params(ErrorCode::InvalidBody, m));
    let page_size = match params.get("pageSize") {
        None | Some(Value::Null) => PAGE_SIZE,
        Some(v) => match v.as_f64() {
            Some(0.0) => PAGE_SIZE,
            Some(n) if n.fract() == 0.0 && (1.0..=MAX_PAGE_SIZE as f64).contains(&n) => n as usize,
            _ => return Err(invalid("pageSize must be a whole number from 1 to 100")),
        },
    };
    let mut before = match params.get("pageToken").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        None => None,
        Some(token) => Some(Uuid::parse_str(token).map_err(|_| invalid("pageToken is not one this endpoint gave"))?),
    };
    let context = params.get("contextId").and_then(Value::as_str).filter(|c| !c.is_empty());
    let wanted_state = match params.get("status").and_then(Value::as_str) {
        None | Some("" | "TASK_STATE_UNSPECIFIED") => None,
        Some(s) => Some(s.to_owned()),
    };
    let history_length = send::history_length(Some(params))?;
    let include_artifacts = params.get("includeArtifacts").and_then(Value::as_bool).unwrap_or(false);
    let mut tasks = Vec::new();
    let mut scanned = 0;
    let mut next = None;
    'pages: loop {
        let batch = state.delegations.requested_page(agent.agent_id, before, MAX_PAGE_SIZE as i64).await?;
        let exhausted = batch.len() < MAX_PAGE_SIZE;
        for record in batch {
            scanned += 1;
            before = Some(record.delegation.delegation_id);
            let t = task::task(&record.delegation, &record.attempts);
            let fits = context.is_none_or(|c| t.context_id == c)
                && wanted_state.as_deref().is_none_or(|s| render::state_v1(t.status.state) == s);
            if fits {
                if tasks.len() == page_size {
                    next = Some(tasks_last_id(&tasks));
                    break 'pages;
                }
                let mut value = render::task(&t, Version::V1, history_length);
                if !include_artifacts {
                    value.as_object_mut().map(|o| o.remove("artifacts"));
                }
                tasks.push(value);
            }
            if scanned >= MAX_SCANNED {
                next = before.map(|b| b.to_string());
                break 'pages;
            }
        }
        if exhausted {
            break;
        }
    }
    Ok(json!({ "tasks": tasks, "nextPageToken": next.unwrap_or_default(), "pageSize": page_size }))
}

/// The page token after the last task listed: its id.
fn tasks_last_id(tasks: &[Value]) -> String {
    tasks.last().and_then(|t| t["id"].as_str()).unwrap_or_default().to_owned()
}
