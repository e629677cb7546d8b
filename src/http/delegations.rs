//! Delegation's routes: the requester asks, follows and cancels its delegation (its agent key;
//! reads also by its owner or the service), the target reads its inbox and accepts, completes,
//! rejects or fails (its agent key). The rules live in `crate::directory::delegation`; these
//! handlers check the input, call it and shape the answer. Each side sees the other only by anonymous id.

use std::time::Duration;

use axum::{
    Json, Router,
    extract::{FromRequestParts, State},
    http::{HeaderMap, HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentCaller, AgentReader, AnyCaller, PresentedAgentKey, PresentedKey},
    agent_turns::parse_wait,
    api_docs::{AgentDelegationPath, AgentOrItsOwner, AgentPath, OwnAgentKey},
    auth::unexpected,
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, OptionalJson, Page},
};
use crate::directory::delegation::numbers;
use crate::wire::delegations::{
    AcceptedOut, CompletedOut, DelegationAnswer, DelegationOut, EndedOut, InboundOut, InboxOut, ResultOut, answer,
    delegation_out, inbound_out,
};
use crate::{
    auth::{CallerRole, Principal},
    directory::delegation::{Event, RawRequest, Record, Request, Status, store},
    store::agents,
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/agents/delegate", post(delegate))
        .route("/api/delegation/delegate", post(delegate))
        .route("/api/delegations", post(delegate_as_agentlens))
        .route("/api/delegations/{requestId}", get(get_delegation))
        .route("/api/delegations/{requestId}/cancel", post(cancel_delegation))
        .route("/api/agents/{id}/delegations", get(list_delegations))
        .route("/api/agents/{id}/delegations/inbox", get(delegation_inbox))
        .route("/api/agents/{id}/delegations/{requestId}/accept", post(accept_delegation))
        .route("/api/agents/{id}/delegations/{requestId}/complete", post(complete_delegation))
        .route("/api/agents/{id}/delegations/{requestId}/reject", post(reject_delegation))
        .route("/api/agents/{id}/delegations/{requestId}/fail", post(fail_delegation))
}

/// Who reads a delegation: a requester's key, a user (its agents' delegations), or the service.
pub enum Reader {
    /// The requests of these agents.
    Requesters(Vec<Uuid>),
    /// Every request.
    Service,
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = match AnyCaller::from_request_parts(parts, state).await?.0 {
            Principal::Agent(agent) => return Ok(Reader::Requesters(vec![agent.agent_id])),
            Principal::Caller(caller) => caller,
            other => return Err(unexpected(&other)),
        };
        if caller.is_service() {
            return Ok(Reader::Service);
        }
        if caller.role != CallerRole::User {
            return Ok(Reader::Requesters(Vec::new()));
        }
        let mut conn = state.pool().acquire().await?;
        // Deleted agents too: what they asked for stays readable by their owner.
        Ok(Reader::Requesters(agents::ids_for_owner(&mut conn, &caller.sub).await?))
    }
}

/// Body of `POST /api/agents/delegate`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "requestId": "5b1f8c9e-2f4a-4c1e-9d3b-7a6e5f4d3c2b",
    "agentId": "0193b0a4-7000-7000-8000-000000000001",
    "taskType": "code-review",
    "input": {"code": "fn main() {}"},
    "timeoutMs": 30000
}))]
pub struct DelegateIn {
    /// The requester's id for this delegation (a UUID); the same id and body again return the
    /// same delegation. Issued when absent.
    pub request_id: Option<Uuid>,
    /// The requesting agent: the API key's own (optional; another agent's id is refused 403).
    pub agent_id: Option<Uuid>,
    /// The target; without it, the top discovery result for the kind of work.
    pub target_anonymous_id: Option<Uuid>,
    /// The kind of work.
    #[schema(
        pattern = "^(code-review|code-generation|testing|documentation|analysis|summarization|translation|data-extraction|classification|generation|transformation|custom)$"
    )]
    pub task_type: String,
    /// Required for `custom`.
    pub custom_type: Option<String>,
    /// The work; must match the target capability's input schema.
    #[schema(value_type = Object)]
    pub input: Value,
    /// Per attempt, from its start (from `PARLEY_DELEGATION_MIN_TIMEOUT`, 1 000 by default, to
    /// 86 400 000; default 30 000). An attempt given less than the target's `estimatedLatencyMs`
    /// that does not complete does not count against the target's trust. A whole number; an
    /// integral double (`20000.0`) is read as one.
    #[schema(minimum = 1000, maximum = 86_400_000)]
    #[serde(default, deserialize_with = "numbers::whole_timeout_ms")]
    pub timeout_ms: Option<i64>,
    /// Whether a rejected, timed-out or failed attempt goes to the next target (default true).
    pub fallback_enabled: Option<bool>,
    /// Attempts after the first (0 to 10; default 3). A whole number; an integral double
    /// (`3.0`) is read as one.
    #[schema(minimum = 0, maximum = 10)]
    #[serde(default, deserialize_with = "numbers::whole_max_retries")]
    pub max_retries: Option<i64>,
}

/// Query of the calls that may wait.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to wait (1 to PARLEY_LONG_POLL_MAX; larger values are capped).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub wait: Option<String>,
}

/// Query of a delegate call.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DelegateQuery {
    /// Seconds to hold at most (capped by PARLEY_LONG_POLL_MAX); `0` answers at once. Without it
    /// the call holds until the delegation ends or its `timeoutMs` passes.
    #[param(value_type = Option<u32>, minimum = 0)]
    pub wait: Option<String>,
}

/// The answer of `POST /api/delegations`: as [`DelegationAnswer`], with the result's fields at
/// the top level too (where AgentLens's MCP tool reads them).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlatDelegationAnswer {
    /// The result's fields.
    #[serde(flatten)]
    pub top: ResultOut,
    /// The result.
    pub result: ResultOut,
    /// The delegation.
    pub delegation: DelegationOut,
}

/// 200 with the result once ended, else 202 with a `Location` to poll.
fn waited(record: Record, body: impl FnOnce(DelegationAnswer) -> Response) -> Response {
    let ended = record.delegation.status.is_terminal();
    let location = format!("/api/delegations/{}", record.delegation.request_id);
    let mut response = body(answer(record));
    if !ended {
        *response.status_mut() = StatusCode::ACCEPTED;
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
    }
    response
}

fn wait_of(state: &AppState, q: Result<ApiQuery<WaitQuery>, ApiError>) -> ApiResult<Option<Duration>> {
    let ApiQuery(q) = q?;
    parse_wait(q.wait.as_deref(), state.delegations.config().long_poll_max)
}

/// How long a delegate call holds before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// `Prefer: respond-async` or `?wait=0`: 202 at once.
    Async {
        /// Whether the `Prefer` header asked for it (then `Preference-Applied` says so).
        preferred: bool,
    },
    /// Until the delegation ends or this passes: `?wait=N`, or by default its `timeoutMs`,
    /// both capped by `PARLEY_LONG_POLL_MAX`.
    For(Duration),
}

/// Whether the request prefers an asynchronous answer (RFC 7240 `Prefer: respond-async`).
fn prefers_async(headers: &HeaderMap) -> bool {
    headers.get_all("prefer").iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|p| {
        let token = p.split([';', '=']).next().unwrap_or("").trim();
        token.eq_ignore_ascii_case("respond-async")
    })
}

fn hold_of(state: &AppState, headers: &HeaderMap, wait: Option<&str>, request: &Request) -> ApiResult<Hold> {
    let max = state.delegations.config().long_poll_max;
    if prefers_async(headers) {
        return Ok(Hold::Async { preferred: true });
    }
    if wait.is_some_and(|w| w.trim() == "0") {
        return Ok(Hold::Async { preferred: false });
    }
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    Ok(Hold::For(parse_wait(wait, max)?.unwrap_or(timeout.min(max))))
}

/// The delegate call behind its three paths: checks the body, makes (or finds) the delegation,
/// holds as [`Hold`] says, and answers 200 with the ended result or 202 with a `Location`,
/// shaped by `body`.
async fn delegate_with(
    state: &AppState,
    key: &PresentedKey,
    headers: &HeaderMap,
    query: Result<ApiQuery<DelegateQuery>, ApiError>,
    body: Result<ApiJson<DelegateIn>, ApiError>,
    shape: impl FnOnce(DelegationAnswer) -> Response,
) -> ApiResult<Response> {
    let checked = query.and_then(|ApiQuery(q)| {
        let ApiJson(body) = body?;
        let min_timeout_ms =
            i64::try_from(state.delegations.config().delegation_min_timeout.as_millis()).unwrap_or(i64::MAX);
        let request = Request::parse(
            &RawRequest {
                request_id: body.request_id,
                agent_id: body.agent_id,
                target_anonymous_id: body.target_anonymous_id,
                task_type: &body.task_type,
                custom_type: body.custom_type.as_deref(),
                input: &body.input,
                timeout_ms: body.timeout_ms,
                fallback_enabled: body.fallback_enabled,
                max_retries: body.max_retries,
            },
            min_timeout_ms,
        )?;
        Ok((hold_of(state, headers, q.wait.as_deref(), &request)?, request))
    });
    let (key, (hold, request)) = key.admit(state, checked).await?;
    let wait = match hold {
        Hold::Async { .. } => None,
        Hold::For(wait) => Some(wait),
    };
    let record = state.delegations.delegate(key, &request, wait).await?;
    let mut response = match hold {
        // Answered at once, whatever the delegation's state: the call only asked for it.
        Hold::Async { .. } => {
            let location = format!("/api/delegations/{}", record.delegation.request_id);
            let mut response = shape(answer(record));
            *response.status_mut() = StatusCode::ACCEPTED;
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        Hold::For(_) => waited(record, shape),
    };
    if hold == (Hold::Async { preferred: true }) {
        response.headers_mut().insert("preference-applied", HeaderValue::from_static("respond-async"));
    }
    Ok(response)
}

super::api_docs::refusals! {
    /// The refusals of a delegate, at each of its paths.
    pub DelegateRefusals {
        400: "Invalid body (`invalid_body`), an input the target's schema refuses (`input_invalid`), or a target that may not take it (`target_not_eligible`)",
        401: "Missing, unknown, revoked or expired API key",
        403: "`agentId` is not the key's agent, or the agent is inactive",
        404: "Unknown or expired target anonymous id (`unknown_target`)",
        409: "The request id was used with another body (`request_id_reused`), or by another requester (`request_id_taken`)",
        429: "More delegations in the last 60 s than the requester's outbound limit, or too many inputs the target's schema refused (`rate_limited`, with `Retry-After`)",
    }
}

/// Delegates a piece of work to another agent, and by default holds until it ended: 200 with the
/// result once the delegation ended, or 202 (result `pending`, with a `Location` to poll) when its
/// `timeoutMs` passed first (capped by `PARLEY_LONG_POLL_MAX`). `Prefer: respond-async` or
/// `?wait=0` answers 202 at once; `?wait=N` holds at most N seconds. No database connection is
/// held while the call waits.
#[utoipa::path(post, path = "/api/agents/delegate", tag = "delegation", operation_id = "delegateTask",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(DelegateQuery,
        ("prefer" = Option<String>, Header, description = "`respond-async` answers 202 at once instead of holding until the delegation ended.")),
    request_body = DelegateIn,
    responses(
        (status = 200, description = "Ended while the call held: the result (`success`, `rejected`, `timeout` or `error`) and the delegation", body = DelegationAnswer),
        (status = 202, description = "Not ended yet (or an asynchronous answer was asked for): result `pending`, `Location` to poll", body = DelegationAnswer),
        DelegateRefusals,
    ))]
pub async fn delegate(
    State(state): State<AppState>,
    key: PresentedKey,
    headers: HeaderMap,
    query: Result<ApiQuery<DelegateQuery>, ApiError>,
    body: Result<ApiJson<DelegateIn>, ApiError>,
) -> ApiResult<Response> {
    delegate_with(&state, &key, &headers, query, body, |a| Json(a).into_response()).await
}

/// `POST /api/agents/delegate` as AgentLens's MCP tool calls it: the same operation, with the
/// result's fields (`requestId`, `status`, `output`, `executionTimeMs`, `retriesUsed`) also at
/// the top level of the answer.
#[utoipa::path(post, path = "/api/delegations", tag = "delegation", operation_id = "delegateTaskFlat",
    description = "An alias of `POST /api/agents/delegate` (same body, same behaviour) whose answer also carries the result's fields at the top level, where AgentLens's MCP tool `agentlens_delegate` reads them.",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(DelegateQuery,
        ("prefer" = Option<String>, Header, description = "`respond-async` answers 202 at once instead of holding until the delegation ended.")),
    request_body = DelegateIn,
    responses(
        (status = 200, description = "Ended while the call held", body = FlatDelegationAnswer),
        (status = 202, description = "Not ended yet, or asked to answer at once", body = FlatDelegationAnswer),
        DelegateRefusals,
    ))]
pub async fn delegate_as_agentlens(
    State(state): State<AppState>,
    key: PresentedKey,
    headers: HeaderMap,
    query: Result<ApiQuery<DelegateQuery>, ApiError>,
    body: Result<ApiJson<DelegateIn>, ApiError>,
) -> ApiResult<Response> {
    delegate_with(&state, &key, &headers, query, body, |a| {
        Json(FlatDelegationAnswer { top: a.result.clone(), result: a.result, delegation: a.delegation }).into_response()
    })
    .await
}

/// A delegation by its request id (its requester's key, the requester's owner, or the service);
/// with `wait`, holds until it ends (200) or the time passes (202).
#[utoipa::path(get, path = "/api/delegations/{requestId}", tag = "delegation", operation_id = "getDelegation",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(("requestId" = Uuid, Path, description = "The delegation's request id"), WaitQuery),
    responses(
        (status = 200, description = "The delegation (with its result once ended)", body = DelegationAnswer),
        (status = 202, description = "Not ended after waiting", body = DelegationAnswer),
        (status = 400, description = "Invalid `wait`"),
        (status = 401, description = "Missing or invalid credentials"),
        (status = 404, description = "No such delegation of the caller's"),
    ))]
pub async fn get_delegation(
    State(state): State<AppState>,
    reader: Reader,
    Ids(request_id): Ids<Uuid>,
    query: Result<ApiQuery<WaitQuery>, ApiError>,
) -> ApiResult<Response> {
    let wait = wait_of(&state, query)?;
    let requesters = match &reader {
        Reader::Requesters(ids) => Some(ids.as_slice()),
        Reader::Service => None,
    };
    let record = state.delegations.read_delegation(request_id, requesters).await?;
    if wait.is_none() {
        return Ok(Json(answer(record)).into_response());
    }
    let record = state.delegations.await_delegation(record.delegation.delegation_id, wait).await?;
    Ok(waited(record, |a| Json(a).into_response()))
}

/// The requester cancels its delegation: if it has not ended, it ends `canceled` with its live
/// attempt (offered or accepted), no other target is tried, and the attempt counts neither for
/// nor against its target, whose later accept or complete is refused (409 `invalid_state`).
#[utoipa::path(post, path = "/api/delegations/{requestId}/cancel", tag = "delegation", operation_id = "cancelDelegation",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(("requestId" = Uuid, Path, description = "The delegation's request id")),
    responses(
        (status = 200, description = "Canceled: the delegation (status `canceled`) with its result (`canceled`)", body = DelegationAnswer),
        (status = 401, description = "Missing, unknown, revoked or expired API key"),
        (status = 403, description = "The key's agent is inactive"),
        (status = 404, description = "No delegation of this id that the key's agent asked for"),
        (status = 409, description = "The delegation has ended already (`delegation_ended`), canceled before included"),
    ))]
pub async fn cancel_delegation(
    State(state): State<AppState>,
    key: PresentedKey,
    ids: Result<Ids<Uuid>, ApiError>,
) -> ApiResult<Json<DelegationAnswer>> {
    let (key, Ids(request_id)) = key.admit(&state, ids).await?;
    let record = state.delegations.cancel(key, request_id).await?;
    Ok(Json(answer(record)))
}

/// The requests waiting for the agent; with `wait`, holds until one arrives or the time passes.
#[utoipa::path(get, path = "/api/agents/{id}/delegations/inbox", tag = "delegation", operation_id = "delegationInbox",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath, WaitQuery),
    responses(
        (status = 200, description = "Waiting requests (possibly none)", body = InboxOut),
        (status = 400, description = "Invalid `wait`"),
        (status = 404, description = "Unknown agent, or another user's"),
        OwnAgentKey,
    ))]
pub async fn delegation_inbox(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    query: Result<ApiQuery<WaitQuery>, ApiError>,
) -> ApiResult<Json<InboxOut>> {
    let (key, wait) = key.admit(&state, wait_of(&state, query)).await?;
    let (items, total) = state.delegations.delegation_inbox(key, wait).await?;
    Ok(Json(InboxOut { requests: items.into_iter().map(inbound_out).collect(), total }))
}

/// Query of the listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `outbound` (the agent's requests, default) or `inbound` (attempts addressed to it).
    #[param(pattern = "^(inbound|outbound)$")]
    pub direction: Option<String>,
    /// Only this status.
    #[param(pattern = "^(request|accepted|completed|rejected|timeout|error|canceled)$")]
    pub status: Option<String>,
    /// 1 to 200 (default 50).
    pub limit: Option<i64>,
    /// The `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// A page of the agent's delegations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationListOut {
    /// `outbound` or `inbound`.
    pub direction: String,
    /// Outbound: the agent's delegations, newest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegations: Option<Vec<DelegationOut>>,
    /// Inbound: attempts addressed to the agent, newest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<InboundOut>>,
    /// The cursor of the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Uuid>,
}

/// The agent's delegations: the ones it asked for, or the attempts addressed to it.
#[utoipa::path(get, path = "/api/agents/{id}/delegations", tag = "delegation", operation_id = "listDelegations",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath, ListQuery),
    responses(
        (status = 200, description = "A page, newest first", body = DelegationListOut),
        (status = 400, description = "Invalid query"),
        (status = 404, description = "Unknown agent, or another user's"),
        AgentOrItsOwner,
    ))]
pub async fn list_delegations(
    State(state): State<AppState>,
    AgentReader(agent): AgentReader,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<DelegationListOut>> {
    let page = Page::parse(q.limit, q.cursor.as_deref())?;
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            ApiError::invalid("status must be one of request, accepted, completed, rejected, timeout, error, canceled")
        })?),
    };
    let mut conn = state.pool().acquire().await?;
    match q.direction.as_deref().unwrap_or("outbound") {
        "outbound" => {
            let rows = store::outbound(&mut conn, agent.agent_id, status, page.before, page.limit + 1).await?;
            let next_cursor = (rows.len() as i64 > page.limit).then(|| rows[page.limit as usize - 1].delegation_id);
            let rows: Vec<_> = rows.into_iter().take(page.limit as usize).collect();
            let ids: Vec<_> = rows.iter().map(|d| d.delegation_id).collect();
            let mut attempts = store::attempts_of(&mut conn, &ids).await?;
            let out = rows
                .into_iter()
                .map(|d| {
                    let mine = attempts.remove(&d.delegation_id).unwrap_or_default();
                    delegation_out(d, mine)
                })
                .collect();
            Ok(Json(DelegationListOut {
                direction: "outbound".into(),
                delegations: Some(out),
                requests: None,
                next_cursor,
            }))
        }
        "inbound" => {
            let rows = store::inbound(&mut conn, agent.agent_id, status, page.before, page.limit + 1).await?;
            let next_cursor = (rows.len() as i64 > page.limit).then(|| rows[page.limit as usize - 1].delegation_id);
            let out = rows.into_iter().take(page.limit as usize).map(inbound_out).collect();
            Ok(Json(DelegationListOut {
                direction: "inbound".into(),
                delegations: None,
                requests: Some(out),
                next_cursor,
            }))
        }
        _ => Err(ApiError::invalid("direction must be inbound or outbound")),
    }
}

/// Takes the request addressed to the agent: a compare-and-set from `request`, once.
#[utoipa::path(post, path = "/api/agents/{id}/delegations/{requestId}/accept", tag = "delegation", operation_id = "acceptDelegation",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentDelegationPath),
    responses(
        (status = 200, description = "Accepted", body = AcceptedOut),
        (status = 404, description = "No delegation of this id was ever addressed to the agent"),
        (status = 409, description = "No longer `request` (`invalid_state`) or addressed elsewhere (`not_addressed`)"),
        OwnAgentKey,
    ))]
pub async fn accept_delegation(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    ids: Result<Ids<(Uuid, Uuid)>, ApiError>,
) -> ApiResult<Json<AcceptedOut>> {
    let (key, Ids((_, request_id))) = key.admit(&state, ids).await?;
    let accepted = state.delegations.accept_delegation(key, request_id).await?;
    Ok(Json(AcceptedOut { accepted: true, claim_token: accepted.claim_token, deadline: accepted.deadline }))
}

/// Body of `complete`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteIn {
    /// The result; must match the capability's output schema.
    #[schema(value_type = Object)]
    pub output: Value,
    /// The accept's token (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

/// Hands back the result of an accepted request. A refused output leaves it `accepted`.
#[utoipa::path(post, path = "/api/agents/{id}/delegations/{requestId}/complete", tag = "delegation", operation_id = "completeDelegation",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentDelegationPath),
    request_body = CompleteIn,
    responses(
        (status = 200, description = "Completed", body = CompletedOut),
        (status = 400, description = "Invalid body, or an output the schema refuses (`output_invalid`)"),
        (status = 404, description = "No delegation of this id was ever addressed to the agent"),
        (status = 409, description = "Not `accepted` (`invalid_state`), addressed elsewhere (`not_addressed`), or a stale token or passed deadline (`claim_stale`)"),
        OwnAgentKey,
    ))]
pub async fn complete_delegation(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    ids: Result<Ids<(Uuid, Uuid)>, ApiError>,
    body: Result<ApiJson<CompleteIn>, ApiError>,
) -> ApiResult<Json<CompletedOut>> {
    let checked = ids.and_then(|Ids((_, id))| body.map(|ApiJson(b)| (id, b)));
    let (key, (request_id, body)) = key.admit(&state, checked).await?;
    state.delegations.complete_delegation(key, request_id, &body.output, body.claim_token.as_deref()).await?;
    Ok(Json(CompletedOut { completed: true }))
}

/// Body of `reject`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectIn {
    /// Why (kept, at most 2 000 characters).
    pub reason: Option<String>,
}

/// Body of `fail`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailIn {
    /// What went wrong (kept, at most 2 000 characters).
    pub error: String,
    /// The accept's token (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

/// Declines a request (from `request` or `accepted`); the next target gets it if any is left.
#[utoipa::path(post, path = "/api/agents/{id}/delegations/{requestId}/reject", tag = "delegation", operation_id = "rejectDelegation",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentDelegationPath),
    request_body(content = Option<RejectIn>, description = "Optional; an empty body rejects without a reason"),
    responses(
        (status = 200, description = "Rejected", body = EndedOut),
        (status = 400, description = "Invalid body"),
        (status = 404, description = "No delegation of this id was ever addressed to the agent"),
        (status = 409, description = "Already ended (`invalid_state`) or addressed elsewhere (`not_addressed`)"),
        OwnAgentKey,
    ))]
pub async fn reject_delegation(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, request_id)): Ids<(Uuid, Uuid)>,
    OptionalJson(body): OptionalJson<RejectIn>,
) -> ApiResult<Json<EndedOut>> {
    state.delegations.refuse_delegation(&agent, request_id, Event::Reject, body.reason.as_deref(), None).await?;
    Ok(Json(EndedOut { ended: true }))
}

/// Reports that an accepted request failed; the next target gets it if any is left.
#[utoipa::path(post, path = "/api/agents/{id}/delegations/{requestId}/fail", tag = "delegation", operation_id = "failDelegation",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentDelegationPath),
    request_body = FailIn,
    responses(
        (status = 200, description = "Failed", body = EndedOut),
        (status = 400, description = "Invalid body"),
        (status = 404, description = "No delegation of this id was ever addressed to the agent"),
        (status = 409, description = "Not `accepted` (`invalid_state`), addressed elsewhere (`not_addressed`), or a stale token (`claim_stale`)"),
        OwnAgentKey,
    ))]
pub async fn fail_delegation(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, request_id)): Ids<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<FailIn>,
) -> ApiResult<Json<EndedOut>> {
    state
        .delegations
        .refuse_delegation(&agent, request_id, Event::Fail, Some(&body.error), body.claim_token.as_deref())
        .await?;
    Ok(Json(EndedOut { ended: true }))
}
