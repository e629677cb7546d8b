//! `POST /mcp`: the Model Context Protocol over streamable HTTP for personal-agent runtimes.
//!
//! The API key identifies the agent (`Authorization: Bearer pk_...` or `x-api-key`); there is no
//! agent id in the path. A middleware checks the key on every request before the MCP service sees
//! it (401 without a key or with an unknown, revoked or expired one; 403 for an inactive agent)
//! and hands the agent to the tools through the request's extensions. The same middleware refuses
//! a message with a NUL character in any string or key (PostgreSQL cannot store it): a tool call
//! gets the tool error `invalid_body` naming the field, any other message a 400. The tools call the same
//! functions as the HTTP routes: the engine's pickup and respond, the HTTP pickup body, the respond
//! body's validation and the agent's negotiation views, the directory's discovery and
//! ranking (any agent may find others; answers show them only by anonymous id), and
//! delegation's flow with the HTTP routes' answers (the requester's tools act for the key's
//! agent; the target's tools for the agent the attempt is addressed to; each side sees the
//! other only by anonymous id).
//!
//! Transport errors answer like the rest of the API: [`transport_errors`] reads the body itself
//! (413 over the limit, 408 when it trickles, 400 `invalid_body` when it is not JSON) and turns
//! the MCP service's own plain-text refusals (wrong `Accept`, wrong method, ...) into
//! `{error, code}`. JSON-RPC errors, which MCP clients read, pass unchanged.
//!
//! The server is stateless (no MCP sessions) and answers plain JSON, so any number of Parley
//! processes can serve it and each request stands alone. Host-header checks are off: every
//! request must carry a valid API key anyway, so DNS rebinding gains an attacker nothing.

use crate::error_code::ErrorCode;
use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header::CONTENT_TYPE, request::Parts},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, ServerHandler,
    handler::server::{common::Extension, wrapper::Parameters},
    model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    delivery::{AgentIdentity, AgentKey, hash_secret},
    directory::{
        delegation::{self, Event, RawRequest},
        discovery::RawQuery,
    },
    domain::Role,
    http::{
        AppState,
        agent_auth::KEY_PREFIX,
        agent_turns::{AgentListQuery, RespondIn, agent_negotiation, agent_negotiations, parse_wait, pickup_body},
        delegations::{AcceptedOut, CompletedOut, EndedOut, InboxOut, answer, inbound_out},
        directory,
        error::{ApiError, ErrorBody},
        extract::{BODY_LIMIT, body_bytes},
        input,
    },
    store::agents,
};

/// Where the endpoint is mounted.
pub const PATH: &str = "/mcp";

/// The turn-mode contract every runtime gets in `initialize`.
pub const INSTRUCTIONS: &str = "\
You are a personal negotiation agent playing one user's seat in Parley, a bilateral negotiation \
service. You act in turn mode: there is no human in this loop.

Contract:
- Produce no user-facing output. Everything you have to say goes into the tool arguments \
(`reasoning` for why, `message` for the other side).
- What is private: your `reasoning` is seen by your own user and the platform, never by the other \
side; the other side's reasoning is never shown to you, only its action, message and suggested \
roles. Your `message` is read by the other side. `otherUser.intents` holds the intents the \
platform shares; the other user's private intents and `dealBreakers` never reach you, and yours \
never reach them.
- Never ask your user clarifying questions and never wait for them. Decide from the pickup's \
context (ownUser, otherUser, seedAssessment, indexContext, discoveryQuery) and the turn history.
- When unsure, take the most conservative action: `counter` with specific objections (what is \
missing or weak, what would change your mind), or `reject` with the reasons. Accept only when \
the match genuinely serves your user's intents.

Loop: call `pickup_negotiation`; when it returns a turn, decide and call \
`respond_to_negotiation` with its `negotiationId` and `claimToken`. Turn 0 (`turn.number` 0) is \
`propose`, or `reject` when the match does not serve your user; only turn 0 may propose. Later turns: \
`counter`, `question`, `accept` or `reject`; a `message` is optional for each, but the other side weighs \
only what messages say, so a counter or question should say in its message what is missing or what you \
ask. When `turn.isFinalTurn` is true, anything but accept or reject ends the negotiation stalled. Give \
your `reasoning` (at most 10 000 characters, like `message`); \
`suggestedRoles.ownUser` and `.otherUser` are each `agent`, `patient` or `peer` (both `peer` when \
omitted; a call without `reasoning` stores the message as the reasoning). When \
`pickup_negotiation` reports no turn, nothing is waiting: try again later.";

/// The `/mcp` route, behind the API-key check.
pub fn router(state: AppState) -> Router<AppState> {
    let for_tools = state.clone();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(BODY_LIMIT)
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(ParleyMcp::new(for_tools.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn(transport_errors))
        .layer(middleware::from_fn_with_state(state, require_agent_key))
}

/// The machine code of a transport-level refusal's status.
fn transport_code(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::InvalidBody,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::NOT_ACCEPTABLE => ErrorCode::NotAcceptable,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::RequestTimeout,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::InvalidRequest,
    }
}

/// Reads and checks the body before the MCP service sees it (JSON, and no NUL in any string or
/// key), and gives its plain-text refusals the API's error body.
async fn transport_errors(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = if parts.method == Method::POST {
        let bytes = match body_bytes(Request::from_parts(parts.clone(), body), &()).await {
            Ok(bytes) => bytes,
            Err(e) => return e.into_response(),
        };
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return ApiError::invalid(format!("invalid JSON: {e}")).into_response();
        }
        if let Err(refused) = input::check_json_bytes(&bytes) {
            return refuse_nul(&bytes, refused);
        }
        bytes
    } else {
        axum::body::Bytes::new()
    };
    let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), BODY_LIMIT).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if status.is_server_error() {
        tracing::error!(%status, error = %text, "the MCP transport failed");
        "internal server error".to_owned()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    let body = ErrorBody { error: message, code: transport_code(status).as_str(), limit: None };
    (status, axum::Json(body)).into_response()
}

fn presented_key(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim().to_owned()).filter(|k| !k.is_empty());
    }
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && token.starts_with(KEY_PREFIX)).then(|| token.to_owned())
}

/// Looks the key up on every request; the agent travels to the tools in the extensions.
async fn require_agent_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(key) = presented_key(req.headers()) else {
        return ApiError::Unauthorized("missing API key (x-api-key or Authorization: Bearer pk_...)".into())
            .into_response();
    };
    let found = match state.pool().acquire().await {
        Ok(mut conn) => agents::authenticate(&mut conn, &hash_secret(&key)).await,
        Err(e) => Err(e),
    };
    let owner = match found {
        Ok(Some(owner)) => owner,
        Ok(None) => return ApiError::Unauthorized("the API key is unknown, revoked or expired".into()).into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if owner.status != agents::AgentStatus::Active {
        return ApiError::Forbidden("the agent is inactive".into()).into_response();
    }
    state.engine.seen(owner.agent_id).await;
    req.extensions_mut().insert(AgentKey::new(&key, Some(owner.agent_id)));
    req.extensions_mut().insert(AgentIdentity { agent_id: owner.agent_id, owner_user_id: owner.owner_user_id });
    next.run(req).await
}

/// The answer to a message holding a NUL character: a tool call is answered like any call with
/// bad arguments, as a tool error; anything else is the HTTP refusal.
fn refuse_nul(bytes: &[u8], refused: ApiError) -> Response {
    let message: Value = serde_json::from_slice(bytes).unwrap_or_default();
    match (message.get("method").and_then(Value::as_str), message.get("id")) {
        (Some("tools/call"), Some(id)) => {
            let result = serde_json::to_value(api_error(refused)).unwrap_or_default();
            Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
        }
        _ => refused.into_response(),
    }
}

/// Arguments of `list_negotiations`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListArgs {
    /// `waiting_for_agent` (the user's turns), `active`, `completed` or `all` (the default).
    pub status: Option<String>,
    /// `true`: only the negotiations in which you answered at least one turn.
    pub answered: Option<bool>,
}

/// Arguments of `get_negotiation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetArgs {
    /// The negotiation id (from `list_negotiations` or `pickup_negotiation`).
    pub negotiation_id: String,
}

/// Roles from the responding user's point of view.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolesArg {
    /// Your own user's role: `agent` (provides), `patient` (receives) or `peer`.
    pub own_user: String,
    /// The other user's role: `agent`, `patient` or `peer`.
    pub other_user: String,
}

/// Arguments of `respond_to_negotiation`. Index Network's earlier tool took only
/// `{negotiationId, action, message}`; those calls work unchanged: the reasoning is then taken
/// from the message and both roles default to `peer`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RespondArgs {
    /// The `negotiationId` from `pickup_negotiation`.
    pub negotiation_id: String,
    /// `propose` (turn 0 only), `counter`, `question`, `accept` or `reject`.
    pub action: String,
    /// Why you chose this action (at most 10 000 characters); private to your side, the other
    /// side never sees it. May be empty; when omitted, the message is stored as the reasoning.
    pub reasoning: Option<String>,
    /// The roles you suggest; when omitted, both are `peer`.
    pub suggested_roles: Option<RolesArg>,
    /// Text for the other side (at most 10 000 characters); optional for every action, as over
    /// HTTP. The other side weighs only what a message says.
    pub message: Option<String>,
    /// The `claimToken` from `pickup_negotiation`; strongly recommended (a stale claim is refused).
    pub claim_token: Option<String>,
}

/// Arguments of `discover_agents` (the query of `GET /api/agents/discover`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverArgs {
    /// Required: code-review, code-generation, testing, documentation, analysis, summarization,
    /// translation or custom.
    pub task_type: String,
    /// With taskType custom: only this custom type.
    pub custom_type: Option<String>,
    /// Lowest trust percentile, 0-100.
    pub min_trust_score: Option<f64>,
    /// Cost cap in US dollars (> 0).
    pub max_cost_usd: Option<f64>,
    /// Latency cap in milliseconds (> 0).
    pub max_latency_ms: Option<f64>,
    /// Results, 1 to 20 (default 20).
    pub limit: Option<i64>,
}

/// Arguments of `rank_agents`: the body of `POST /api/agents/rank` (the self-assessment
/// request's snake_case fields plus taskType, customType and limit).
#[derive(Debug, Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct RankArgs {
    /// What the task is (1 to 10 000 characters).
    pub task_summary: String,
    /// Longer description.
    pub task_details: Option<String>,
    /// Input MIME types you will send (capabilities take application/json).
    pub input_mime_types: Option<Vec<String>>,
    /// Output MIME types you want.
    pub output_mime_types: Option<Vec<String>>,
    /// Latency budget in milliseconds.
    pub max_latency_ms: Option<f64>,
    /// Budget as a price string such as "$0.50".
    pub max_cost_amount: Option<String>,
    /// Tools the skill must offer.
    pub required_tools: Option<Vec<String>>,
    /// Tools the skill may not allow.
    pub forbidden_tools: Option<Vec<String>>,
    /// Acceptance threshold on the score (default 0).
    pub min_score: Option<f64>,
    /// Subscore weights: skill_match, io_compatibility, performance, load, cost.
    pub weights: Option<std::collections::BTreeMap<String, f64>>,
    /// Only capabilities of this kind of work.
    #[serde(rename = "taskType")]
    pub task_type: Option<String>,
    /// With taskType custom: only this custom type.
    #[serde(rename = "customType")]
    pub custom_type: Option<String>,
    /// Entries in each list, 1 to 20 (default 20).
    pub limit: Option<i64>,
}

/// Arguments of `delegate_task` (the body of `POST /api/agents/delegate`; `agentId` is always
/// the key's own agent).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegateArgs {
    /// Your id for this delegation (a UUID): the same id and arguments again return the same
    /// delegation. Issued when absent.
    pub request_id: Option<String>,
    /// The target's anonymous id (from discover_agents); without it, the top discovery result.
    pub target_anonymous_id: Option<String>,
    /// code-review, code-generation, testing, documentation, analysis, summarization,
    /// translation or custom.
    pub task_type: String,
    /// Required for custom.
    pub custom_type: Option<String>,
    /// The work; must match the target capability's inputSchema.
    pub input: Value,
    /// Per attempt, from its start (1 to 86 400 000; default 30 000).
    pub timeout_ms: Option<i64>,
    /// Whether a rejected, timed-out or failed attempt goes to the next target (default true).
    pub fallback_enabled: Option<bool>,
    /// Attempts after the first (0 to 10; default 3).
    pub max_retries: Option<i64>,
}

/// Arguments naming one delegation by its request id.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestIdArgs {
    /// The delegation's requestId.
    pub request_id: String,
}

/// Arguments of `get_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetDelegationArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// Seconds to wait for it to end (from 1; more than the server's long-poll maximum, 30 by
    /// default, is capped); without it, the answer is immediate.
    pub wait: Option<i64>,
}

/// Arguments of `list_delegation_inbox`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxArgs {
    /// Seconds to wait for a request when none is waiting (from 1; more than the server's
    /// long-poll maximum, 30 by default, is capped); without it, the answer is immediate.
    pub wait: Option<i64>,
}

/// Arguments of `complete_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompleteArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// The result; must match your capability's outputSchema.
    pub output: Value,
    /// The claimToken from accept_delegation (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

/// Arguments of `reject_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// Why (at most 2 000 characters).
    pub reason: Option<String>,
}

/// Arguments of `fail_delegation`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailArgs {
    /// The delegation's requestId.
    pub request_id: String,
    /// What went wrong (at most 2 000 characters).
    pub error: String,
    /// The claimToken from accept_delegation (optional; when sent it must be this attempt's).
    pub claim_token: Option<String>,
}

/// A tool's failure as a tool error: `{error, code}` like the HTTP API's, for the model to read.
fn tool_error(code: ErrorCode, message: impl Into<String>) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": crate::quote::shorten_quoted(&message.into()), "code": code }))
}

fn api_error(e: ApiError) -> CallToolResult {
    if let ApiError::Internal(inner) = &e {
        tracing::error!(error = format!("{inner:#}"), "internal error in an MCP tool");
        return tool_error(ErrorCode::Internal, "internal server error");
    }
    tool_error(e.code(), e.message())
}

fn structured(value: impl serde::Serialize) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => api_error(ApiError::Internal(e.into())),
    }
}

fn key_of(parts: &Parts) -> Result<AgentKey, ErrorData> {
    parts
        .extensions
        .get::<AgentKey>()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
}

fn agent_of(parts: &Parts) -> Result<AgentIdentity, ErrorData> {
    parts
        .extensions
        .get::<AgentIdentity>()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
}

fn parse_uuid(raw: &str, field: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw.trim())
        .map_err(|_| ApiError::invalid(format!("{field} {} is not a UUID", crate::quote::quote(raw))))
}

fn parse_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw.trim()).map_err(|_| {
        ApiError::invalid(format!("negotiationId {} is not a negotiation id (a UUID)", crate::quote::quote(raw)))
    })
}

/// The MCP server: one per request (stateless), over the shared application state.
#[derive(Clone)]
pub struct ParleyMcp {
    state: AppState,
}

impl ParleyMcp {
    /// A server over `state`.
    pub fn new(state: AppState) -> ParleyMcp {
        ParleyMcp { state }
    }

    /// A tool's `wait`, checked and capped as the HTTP `?wait=` is.
    fn wait_of(&self, wait: Option<i64>) -> Result<Option<std::time::Duration>, ApiError> {
        parse_wait(wait.map(|w| w.to_string()).as_deref(), self.state.engine.config().long_poll_max)
    }
}

#[tool_router]
impl ParleyMcp {
    /// The agent's user's negotiations, newest first.
    #[tool(description = "List your user's negotiations, newest first, each with isUsersTurn, latestAction, \
turnCount, answeredTurns and status. status: waiting_for_agent (turns waiting for you), active, completed or all \
(default); answered: true for only the negotiations you answered a turn in.")]
    async fn list_negotiations(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let query = AgentListQuery { status: args.status, answered: args.answered, ..AgentListQuery::default() };
        Ok(match agent_negotiations(&self.state, &agent, &query).await {
            Ok(page) => structured(page),
            Err(e) => api_error(e),
        })
    }

    /// One negotiation from the agent's side.
    #[tool(description = "Show one negotiation from your user's side: both sides, every turn so far, \
the outcome once it ended, ownSide, isUsersTurn and latestAction.")]
    async fn get_negotiation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<GetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let id = match parse_id(&args.negotiation_id) {
            Ok(id) => id,
            Err(e) => return Ok(api_error(e)),
        };
        Ok(match agent_negotiation(&self.state, &agent, id).await {
            Ok(view) => structured(view),
            Err(e) => api_error(e),
        })
    }

    /// Claims the next parked turn of the agent's user.
    #[tool(description = "Claim the next turn waiting for your user (or the one you already hold). Returns \
{pickedUp: true, negotiationId, claimToken, opportunity, turn: {number, deadline, counterpartyAction, \
isFinalTurn, maxTurns, history}, context: {ownUser, otherUser, indexContext, seedAssessment, isDiscoverer, \
discoveryQuery, previousRounds}}, or {pickedUp: false} when nothing is waiting. History shows the other side's \
action, message and suggested roles, and reasoning only for your own side's turns. previousRounds lists the \
earlier rounds of a reactivated opportunity ([{negotiationId, turns, outcome}], oldest first, the same privacy; \
[] in a first round). Answer it with respond_to_negotiation.")]
    async fn pickup_negotiation(&self, Extension(parts): Extension<Parts>) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let claim = match self.state.engine.pickup(&key, None, &[]).await {
            Ok(claim) => claim,
            Err(e) => return Ok(api_error(e.into())),
        };
        let Some(claim) = claim else {
            return Ok(structured(json!({ "pickedUp": false, "message": "no turn is waiting for your user" })));
        };
        Ok(match pickup_body(&claim) {
            Ok(mut body) => {
                if let Value::Object(map) = &mut body {
                    map.insert("pickedUp".into(), Value::Bool(true));
                }
                structured(body)
            }
            Err(e) => api_error(e),
        })
    }

    /// Answers the turn the agent holds.
    #[tool(description = "Answer the turn you picked up. action: propose (turn 0 only; turn 0 is propose or \
reject), counter, question, accept or reject. message (for the other side) is optional for every action, \
as over HTTP; say in it what is missing or what you ask. reasoning (private to your side) defaults to the \
message, suggestedRoles to peer/peer. Returns \
{success, negotiationId, turnNumber, status, opportunity, outcome?}: status waiting_for_agent means the \
negotiation goes on, completed that it ended.")]
    async fn respond_to_negotiation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RespondArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        Ok(match self.respond(&key, args).await {
            Ok(responded) => structured(responded),
            Err(e) => api_error(e),
        })
    }

    /// Discovery, as `GET /api/agents/discover`.
    #[tool(description = "Find agents offering a kind of work (taskType: code-review, code-generation, testing, \
documentation, analysis, summarization, translation, data-extraction, classification, generation, transformation \
or custom with customType), ranked by \
0.5*trust/100 + 0.3*(1 - min(cost/maxCostUsd, 1)) + 0.2*(1 - min(latency/maxLatencyMs, 1)). Returns {results: \
[{anonymousAgentId, capabilityId, taskType, inputSchema, outputSchema, trustScorePercentile, provisional, \
estimatedLatencyMs?, estimatedCostUsd?, compositeScore, qualityMetrics}], total}. Agents are shown only by anonymous id.")]
    async fn discover_agents(&self, Parameters(args): Parameters<DiscoverArgs>) -> Result<CallToolResult, ErrorData> {
        let numbers = [args.min_trust_score, args.max_cost_usd, args.max_latency_ms].map(|n| n.map(|n| n.to_string()));
        let limit = args.limit.map(|l| l.to_string());
        let raw = RawQuery {
            task_type: Some(&args.task_type),
            custom_type: args.custom_type.as_deref(),
            min_trust_score: numbers[0].as_deref(),
            max_cost_usd: numbers[1].as_deref(),
            max_latency_ms: numbers[2].as_deref(),
            limit: limit.as_deref(),
            ..RawQuery::default()
        };
        Ok(match directory::discover(&self.state, &raw).await {
            Ok(found) => structured(found),
            Err(e) => api_error(e),
        })
    }

    /// Ranking, as `POST /api/agents/rank`.
    #[tool(description = "Rank the agents that could do a task: each discoverable capability (of taskType, when \
given) is assessed against your task_summary by the capability calculator (skill match, io compatibility, \
its agent's queue, cost against max_cost_amount, latency against max_latency_ms) and ranked by \
rankScore = 0.7*score + 0.3*trust/100. Returns {candidates: [{anonymousAgentId, capabilityId, taskType, \
assessment, trustScorePercentile, provisional, rankScore}], rejected: [{anonymousAgentId, capabilityId, \
taskType, assessment}]}; each assessment explains its score (subscores, skill_matches, rejection_reason).")]
    async fn rank_agents(&self, Parameters(args): Parameters<RankArgs>) -> Result<CallToolResult, ErrorData> {
        let mut body = match serde_json::to_value(&args) {
            Ok(body) => body,
            Err(e) => return Ok(api_error(ApiError::Internal(e.into()))),
        };
        // An argument left out is left out of the body too, as a caller of the route would.
        if let Value::Object(fields) = &mut body {
            fields.retain(|_, v| !v.is_null());
        }
        Ok(match directory::rank(&self.state, &body).await {
            Ok(ranked) => structured(ranked),
            Err(e) => api_error(e),
        })
    }

    /// Delegation, as `POST /api/agents/delegate`.
    #[tool(description = "Delegate a piece of work to another agent (yours is the requester). Without \
targetAnonymousId the top discover_agents result for taskType takes it; input must match its inputSchema. \
Returns {delegation: {requestId, status, attempts: [{attempt, taskId, targetAnonymousId, status, reason?}], \
...}} at once; follow it with get_delegation (with wait to hold until it ends). A rejected, failed or timed-out attempt moves to the next target while \
retries are left (fallbackEnabled, maxRetries).")]
    async fn delegate_task(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<DelegateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let (agent, key) = (agent_of(&parts)?, key_of(&parts)?);
        Ok(match self.delegate(&agent, &key, args).await {
            Ok(value) => value,
            Err(e) => api_error(e),
        })
    }

    /// One of the agent's delegations, as `GET /api/delegations/:requestId` (with its `wait`).
    #[tool(description = "Show one of your delegations by requestId: {result?: {requestId, status, output?, \
executionTimeMs, retriesUsed} once it ended, delegation}. status: request, accepted, completed, rejected, \
timeout or error. With wait (seconds), holds until it ends or the time passes; no result means it has not \
ended yet.")]
    async fn get_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<GetDelegationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        let read = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            let wait = self.wait_of(args.wait)?;
            let requesters = [agent.agent_id];
            let record = self.state.engine.read_delegation(id, Some(&requesters[..])).await?;
            if wait.is_none() {
                return Ok::<_, ApiError>(answer(record));
            }
            let record = self.state.engine.await_delegation(record.delegation.delegation_id, wait).await?;
            Ok(answer(record))
        };
        Ok(match read.await {
            Ok(found) => structured(found),
            Err(e) => api_error(e),
        })
    }

    /// The agent's inbox, as `GET /api/agents/:id/delegations/inbox` (with its `wait`).
    #[tool(description = "List the delegation requests waiting for you, oldest first: {requests: [{requestId, \
attempt, taskId, requesterAnonymousId, taskType, customType?, input, timeoutMs, status, createdAt, deadline}], \
total}. With wait (seconds), holds until one arrives or the time passes. Take one with accept_delegation, then \
complete_delegation or fail_delegation; or reject_delegation.")]
    async fn list_delegation_inbox(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<InboxArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let list = async {
            let wait = self.wait_of(args.wait)?;
            let (items, total) = self.state.engine.delegation_inbox(&key, wait).await?;
            Ok::<_, ApiError>(InboxOut { requests: items.into_iter().map(inbound_out).collect(), total })
        };
        Ok(match list.await {
            Ok(inbox) => structured(inbox),
            Err(e) => api_error(e),
        })
    }

    /// Accept, as `POST /api/agents/:id/delegations/:requestId/accept`.
    #[tool(description = "Take a request addressed to you (from list_delegation_inbox). Returns {accepted: true, \
claimToken, deadline}: finish before the deadline with complete_delegation or fail_delegation.")]
    async fn accept_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RequestIdArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let accept = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            let accepted = self.state.engine.accept_delegation(&key, id).await?;
            Ok::<_, ApiError>(AcceptedOut {
                accepted: true,
                claim_token: accepted.claim_token,
                deadline: accepted.deadline,
            })
        };
        Ok(match accept.await {
            Ok(accepted) => structured(accepted),
            Err(e) => api_error(e),
        })
    }

    /// Complete, as `POST /api/agents/:id/delegations/:requestId/complete`.
    #[tool(description = "Hand back the result of a request you accepted: output must match your capability's \
outputSchema (otherwise output_invalid, and the request stays yours to fix). Returns {completed: true}.")]
    async fn complete_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<CompleteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = key_of(&parts)?;
        let complete = async {
            let id = parse_uuid(&args.request_id, "requestId")?;
            self.state.engine.complete_delegation(&key, id, &args.output, args.claim_token.as_deref()).await?;
            Ok::<_, ApiError>(CompletedOut { completed: true })
        };
        Ok(match complete.await {
            Ok(done) => structured(done),
            Err(e) => api_error(e),
        })
    }

    /// Reject, as `POST /api/agents/:id/delegations/:requestId/reject`.
    #[tool(description = "Decline a request addressed to you (waiting or accepted), with an optional reason; the \
next target gets it when retries are left. Returns {ended: true}.")]
    async fn reject_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<RejectArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        Ok(match self.refuse(&agent, &args.request_id, Event::Reject, args.reason.as_deref(), None).await {
            Ok(ended) => structured(ended),
            Err(e) => api_error(e),
        })
    }

    /// Fail, as `POST /api/agents/:id/delegations/:requestId/fail`.
    #[tool(description = "Report that a request you accepted failed (error says what went wrong); the next \
target gets it when retries are left. Returns {ended: true}.")]
    async fn fail_delegation(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<FailArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let agent = agent_of(&parts)?;
        Ok(
            match self
                .refuse(&agent, &args.request_id, Event::Fail, Some(&args.error), args.claim_token.as_deref())
                .await
            {
                Ok(ended) => structured(ended),
                Err(e) => api_error(e),
            },
        )
    }
}

impl ParleyMcp {
    /// `delegate_task`: the HTTP route's parsing and flow, for the key's agent.
    async fn delegate(
        &self,
        agent: &AgentIdentity,
        key: &AgentKey,
        args: DelegateArgs,
    ) -> Result<CallToolResult, ApiError> {
        let request_id = args.request_id.as_deref().map(|r| parse_uuid(r, "requestId")).transpose()?;
        let target = args.target_anonymous_id.as_deref().map(|t| parse_uuid(t, "targetAnonymousId")).transpose()?;
        let min_timeout_ms =
            i64::try_from(self.state.engine.config().delegation_min_timeout.as_millis()).unwrap_or(i64::MAX);
        let request = delegation::Request::parse(
            &RawRequest {
                request_id,
                agent_id: Some(agent.agent_id),
                target_anonymous_id: target,
                task_type: &args.task_type,
                custom_type: args.custom_type.as_deref(),
                input: &args.input,
                timeout_ms: args.timeout_ms,
                fallback_enabled: args.fallback_enabled,
                max_retries: args.max_retries,
            },
            min_timeout_ms,
        )?;
        let record = self.state.engine.delegate(key, &request, None).await?;
        Ok(structured(answer(record)))
    }

    /// `reject_delegation` and `fail_delegation`.
    async fn refuse(
        &self,
        agent: &AgentIdentity,
        request_id: &str,
        event: Event,
        reason: Option<&str>,
        claim_token: Option<&str>,
    ) -> Result<EndedOut, ApiError> {
        let id = parse_uuid(request_id, "requestId")?;
        self.state.engine.refuse_delegation(agent, id, event, reason, claim_token).await?;
        Ok(EndedOut { ended: true })
    }
}

impl ParleyMcp {
    async fn respond(&self, key: &AgentKey, args: RespondArgs) -> Result<Value, ApiError> {
        let id = parse_id(&args.negotiation_id)?;
        let roles =
            args.suggested_roles.unwrap_or_else(|| RolesArg { own_user: "peer".into(), other_user: "peer".into() });
        // The HTTP body's rules apply (see `RespondIn`); the tool's flat shape only lets
        // `reasoning` be left out, as Index Network's earlier tool had none: the message is then
        // kept as the reasoning.
        let reasoning = args
            .reasoning
            .filter(|r| !r.trim().is_empty())
            .or_else(|| args.message.clone().filter(|m| !m.trim().is_empty()))
            .unwrap_or_default();
        for (field, value) in [("ownUser", &roles.own_user), ("otherUser", &roles.other_user)] {
            if Role::parse(value).is_none() {
                return Err(ApiError::invalid(format!(
                    "suggestedRoles.{field} must be agent, patient or peer, not {}",
                    crate::quote::quote(value)
                )));
            }
        }
        // The HTTP respond body, parsed and validated exactly as the HTTP route does.
        let body = json!({
            "claimToken": args.claim_token,
            "action": args.action,
            "message": args.message,
            "assessment": {
                "reasoning": reasoning,
                "suggestedRoles": { "ownUser": roles.own_user, "otherUser": roles.other_user },
            },
        });
        let respond: RespondIn =
            serde_json::from_value(body).map_err(|e| ApiError::invalid(format!("invalid arguments: {e}")))?;
        let answer = respond.validate()?;
        Ok(self.state.engine.respond(key, id, &answer).await?)
    }
}

#[tool_handler]
impl ServerHandler for ParleyMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("parley", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
