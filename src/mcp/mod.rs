//! `POST /mcp`: the Model Context Protocol over streamable HTTP for personal-agent runtimes.
//!
//! The API key identifies the agent (`Authorization: Bearer pk_...` or `x-api-key`); there is no
//! agent id in the path. A middleware checks the key on every request before the MCP service sees
//! it (401 without a key or with an unknown, revoked or expired one; 403 for an inactive agent)
//! and hands the agent to the tools through the request's extensions.
//!
//! MCP is an adapter beside HTTP, not built on it: it imports nothing from the HTTP module. Each
//! tool maps its arguments onto the services' typed commands (the engine's `RespondCommand` and
//! pickup wait, the directory's `DiscoverQuery` and `RankRequest`, delegation's request), calls
//! the service, and renders the shapes both adapters share (`crate::wire`), so an answer and a
//! refusal are the same as the HTTP route's. The tools by concern: `turns.rs` (negotiations,
//! pickup, respond), `directory.rs` (discovery, ranking), `delegations.rs` (the requester's and
//! the target's delegation tools); `transport.rs` answers transport errors like the rest of the
//! API (see there), and refuses a message with a NUL character in any string or key.
//!
//! The server is stateless (no MCP sessions) and answers plain JSON, so any number of Parley
//! processes can serve it and each request stands alone. Host-header checks are off: every
//! request must carry a valid API key anyway, so DNS rebinding gains an attacker nothing.

mod delegations;
mod directory;
mod transport;
mod turns;

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    http::request::Parts,
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, ServerHandler,
    handler::server::router::tool::ToolRouter,
    model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig},
    tool_handler,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::json;
use uuid::Uuid;

use crate::{
    auth::{self, JwtKeys, Policy, Principal},
    delivery::Engine,
    directory::delegation::Delegations,
    error_code::ErrorCode,
    runtime::{AgentIdentity, AgentKey},
    wire::{body::BODY_LIMIT, error::ApiError},
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
- Never ask your user clarifying questions in your output and never wait for them. Decide from the \
pickup's context (ownUser, otherUser, seedAssessment, indexContext, discoveryQuery, personAnswers) and \
the turn history. Only when the answer would change your decision and the context does not say, \
consult your user through Parley instead of guessing: `respond_to_negotiation` with action \
`ask_person`, a short `question` and optional `options` (at most 3 per negotiation); your next pickup \
of that turn carries the answer in `context.personAnswers` (null if none came in time).
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

/// What the tools reach: the services, never the HTTP adapter's state.
#[derive(Clone)]
pub struct McpState {
    /// The negotiation engine (and through it the pool and configuration).
    pub engine: Engine,
    /// The delegations (and the directory's capability handles).
    pub delegations: Delegations,
    /// The JWT keys, for the one authentication path (MCP's policy takes agent keys only).
    pub jwt: Arc<JwtKeys>,
}

/// The `/mcp` route, behind the API-key check.
pub fn router<S: Clone + Send + Sync + 'static>(state: McpState) -> Router<S> {
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
        .layer(middleware::from_fn(transport::transport_errors))
        .layer(middleware::from_fn_with_state(state, require_agent_key))
}

/// Checks the key on every request by the one authentication path ([`Policy::ANY_AGENT_KEY`]:
/// 401 without a key, an empty one, or an unknown, revoked or expired one; 403 for an inactive
/// agent); the agent and its key travel to the tools in the extensions.
async fn require_agent_key(State(state): State<McpState>, mut req: Request, next: Next) -> Response {
    let agent = match auth::authenticate(req.headers(), None, &Policy::ANY_AGENT_KEY, &state.jwt, &state.engine).await {
        Ok(Principal::Agent(agent)) => agent,
        Ok(other) => {
            return ApiError::Internal(anyhow::anyhow!("the policy let through {}", other.kind())).into_response();
        }
        Err(refused) => return ApiError::from(refused).into_response(),
    };
    let Some(key) = auth::key_of(req.headers(), &agent) else {
        return ApiError::Unauthorized(auth::MISSING_KEY.into()).into_response();
    };
    req.extensions_mut().insert(key);
    req.extensions_mut().insert(agent);
    next.run(req).await
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

/// The MCP server: one per request (stateless), over the services.
#[derive(Clone)]
pub struct ParleyMcp {
    state: McpState,
}

impl ParleyMcp {
    /// A server over `state`.
    pub fn new(state: McpState) -> ParleyMcp {
        ParleyMcp { state }
    }

    /// A tool's `wait` (seconds), checked and capped by the engine's rule, as the HTTP `?wait=` is.
    fn wait_of(&self, wait: Option<i64>) -> Result<Option<std::time::Duration>, ApiError> {
        Ok(crate::delivery::wait_from_secs(wait, self.state.engine.config().long_poll_max)?)
    }
}

impl ParleyMcp {
    /// Every tool: the turn tools, the directory's and delegation's.
    fn tool_router() -> ToolRouter<ParleyMcp> {
        Self::turn_tools() + Self::directory_tools() + Self::delegation_tools()
    }
}

#[tool_handler(router = Self::tool_router())]
impl ServerHandler for ParleyMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("parley", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
