//! A personal agent's turn delivery: pickup (long poll), respond, extend, release, and the
//! agent's views of its negotiations. The handlers are thin: each parses its request into the
//! engine's typed command (`crate::delivery::RespondCommand`, `PickupQuery`), calls the engine,
//! and renders the wire's shapes (`crate::wire::pickup`, `crate::wire::agent_views`), which the
//! MCP tools render too.

use std::time::Duration;

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentCaller, AgentOrOwner, PresentedAgentKey},
    api_docs::{AgentNegotiationPath, AgentOrItsOwner, AgentPath, OwnAgentKey},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, OptionalJson},
};
pub use crate::delivery::MAX_SKIP;
/// What a checked respond body is (a turn, or a question to the agent's person), for the agent
/// runner that checks its worker's answers with [`RespondIn::validate`].
pub use crate::delivery::{ASK_PERSON, Checked};
use crate::{
    delivery::{PickupQuery, RespondCommand, Responded},
    domain::{SuggestedRoles, TaskState},
    wire::{
        agent_views::{AgentListing, AgentNegotiationOut, AgentNegotiationPage, agent_negotiation, agent_negotiations},
        pickup::PickupOut,
    },
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/agents/{id}/negotiations", get(list_agent_negotiations))
        .route("/api/agents/{id}/negotiations/pickup", post(pickup_turn))
        .route("/api/agents/{id}/negotiations/{negotiation_id}", get(get_agent_negotiation))
        .route("/api/agents/{id}/negotiations/{negotiation_id}/respond", post(respond_to_turn))
        .route("/api/agents/{id}/negotiations/{negotiation_id}/extend", post(extend_claim))
        .route("/api/agents/{id}/negotiations/{negotiation_id}/release", post(release_claim))
}

/// Query of pickup.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PickupParams {
    /// Seconds to wait for a turn (1 to PARLEY_LONG_POLL_MAX; larger values are capped).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub wait: Option<String>,
    /// Negotiation ids, comma-separated (at most 100), whose parked turns this pickup passes
    /// over: an agent backing off on a turn it could not answer serves the user's other turns
    /// meanwhile. The agent's own live claim is returned whatever this says.
    pub skip: Option<String>,
}

impl PickupParams {
    /// The pickup command: `wait` and `skip` checked by the engine's parsers.
    fn parse(&self, max_wait: Duration) -> ApiResult<PickupQuery> {
        Ok(PickupQuery {
            wait: crate::delivery::wait_from_text(self.wait.as_deref(), max_wait)?,
            skip: crate::delivery::parse_skip(self.skip.as_deref())?,
        })
    }
}

/// Parses a `wait` query parameter: a whole number of seconds > 0, capped at `max` (the
/// engine's rule, [`crate::delivery::wait_from_text`]).
pub fn parse_wait(raw: Option<&str>, max: Duration) -> ApiResult<Option<Duration>> {
    Ok(crate::delivery::wait_from_text(raw, max)?)
}

/// Takes the agent's turn: its live claim if it has one, else the oldest turn parked for its
/// user; 204 when there is none (after waiting up to `wait` seconds).
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/pickup", tag = "turns", operation_id = "pickupTurn",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath, PickupParams),
    responses(
        (status = 200, description = "A claimed turn (the same claim again while it lives)", body = PickupOut),
        (status = 204, description = "No turn is parked for the agent's user (after waiting up to `wait` seconds)"),
        (status = 400, description = "Invalid `wait` or `skip` (`invalid_body`)"),
        (status = 404, description = "The path's agent id is not an id"),
        OwnAgentKey,
    ))]
pub async fn pickup_turn(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    query: Result<ApiQuery<PickupParams>, ApiError>,
) -> ApiResult<Response> {
    let checked = query.and_then(|ApiQuery(q)| q.parse(state.engine.config().long_poll_max));
    let (key, pickup) = key.admit(&state, checked).await?;
    match state.engine.pickup(key, &pickup).await? {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claim) => Ok(Json(PickupOut::of(&claim)?).into_response()),
    }
}

/// The `assessment` of a respond body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssessmentIn {
    /// Why (required; at most 10 000 characters; may be empty, and stays private to its side).
    #[schema(max_length = 10000)]
    pub reasoning: String,
    /// Roles from the responding user's view; when omitted (or null), both are `peer`.
    #[serde(default)]
    pub suggested_roles: Option<SuggestedRoles>,
}

/// Body of respond.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "claimToken": "ct_Zm9vYmFyYmF6cXV4",
    "action": "counter",
    "message": "Tomas has built payments APIs in Rust for eight years; what stage is the company at, and is the role hands-on?",
    "assessment": {
        "reasoning": "Strong skills fit; the intent match depends on the company's stage, which Maya's profile does not say.",
        "suggestedRoles": {"ownUser": "agent", "otherUser": "patient"}
    }
}))]
pub struct RespondIn {
    /// The token from pickup; optional for clients of Index Network's API.
    #[schema(min_length = 1, max_length = 200)]
    pub claim_token: Option<String>,
    /// `propose` (turn 0 only), `counter`, `accept`, `reject`, `question`, or `ask_person`
    /// (ask the agent's own person first: the turn waits for their answer, which the next
    /// pickup of the turn carries in `context.personAnswers`).
    #[schema(pattern = "^(propose|counter|accept|reject|question|ask_person)$")]
    pub action: String,
    /// Free text for the other side (at most 10 000 characters). Optional for every action,
    /// `counter` and `question` included: null, absent or blank means none (Index Network's
    /// clients send null). The other side weighs only what a message says, so say what is
    /// missing or what you ask in it.
    #[schema(max_length = 10000)]
    pub message: Option<String>,
    /// The agent's assessment; required for every action but `ask_person`.
    #[serde(default)]
    pub assessment: Option<AssessmentIn>,
    /// `ask_person` only: what to ask the agent's person (1 to 500 characters). The other side
    /// never reads it.
    #[schema(min_length = 1, max_length = 500)]
    pub question: Option<String>,
    /// `ask_person` only: up to 5 answers to offer the person as buttons (each 1 to 100
    /// characters); the person may always answer in their own words.
    #[schema(max_items = 5)]
    pub options: Option<Vec<String>>,
}

impl RespondIn {
    /// The respond command this body carries, checked by the engine's one rule set
    /// ([`RespondCommand::check`]).
    pub fn validate(self) -> ApiResult<Checked> {
        let (reasoning, suggested_roles) = match self.assessment {
            Some(a) => (a.reasoning, a.suggested_roles),
            None if self.action == ASK_PERSON => (String::new(), None),
            None => return Err(ApiError::invalid("assessment is required (with its reasoning)")),
        };
        let command = RespondCommand {
            claim_token: self.claim_token,
            action: self.action,
            message: self.message,
            reasoning,
            suggested_roles,
            question: self.question,
            options: self.options,
        };
        Ok(command.check()?)
    }
}

/// Answers the turn the agent holds.
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/{negotiationId}/respond", tag = "turns", operation_id = "respondToTurn",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentNegotiationPath),
    request_body = RespondIn,
    responses(
        (status = 200, description = "The turn is stored (or this exact respond was already applied); for `ask_person`, the question is asked and the turn waits for the person (`status: waiting_for_person`, `questionId`)", body = Responded),
        (status = 400, description = "Invalid body (`invalid_body`) or action not allowed at this turn (`action_not_allowed`)"),
        (status = 404, description = "Unknown negotiation, or not the agent's user's"),
        (status = 409, description = "`not_claimed`, `claimed_by_other`, `claim_stale`, `turn_already_answered` (the same token with another body), `unknown_claim_token` (a token never issued for this negotiation), `already_completed`, or `limit_reached` (a 4th `ask_person` of the side)"),
        OwnAgentKey,
    ))]
pub async fn respond_to_turn(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    ids: Result<Ids<(Uuid, Uuid)>, ApiError>,
    body: Result<ApiJson<RespondIn>, ApiError>,
) -> ApiResult<Json<Responded>> {
    let checked = ids.and_then(|Ids((_, id))| body.and_then(|ApiJson(b)| b.validate()).map(|answer| (id, answer)));
    let (key, (negotiation_id, answer)) = key.admit(&state, checked).await?;
    Ok(Json(state.engine.respond_checked(key, negotiation_id, &answer).await?))
}

/// Body of extend.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimIn {
    /// The token from pickup; optional like respond's.
    pub claim_token: Option<String>,
}

/// The answer of extend.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedOut {
    /// Always true.
    pub success: bool,
    /// The negotiation.
    pub negotiation_id: Uuid,
    /// The claim token (unchanged).
    pub claim_token: String,
    /// The claim's new deadline.
    pub deadline: DateTime<Utc>,
}

/// Body of release.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({
    "claimToken": "ct_Zm9vYmFyYmF6cXV4",
    "reason": "the agent's program exited with status 1",
    "handBack": true
}))]
pub struct ReleaseIn {
    /// The token from pickup; optional like respond's.
    pub claim_token: Option<String>,
    /// Why the agent gives the turn back (kept in the service's log; at most 2 000 characters
    /// are kept).
    pub reason: Option<String>,
    /// `true`: the agent declines the turn and the system negotiator plays it for the agent's
    /// user at once, instead of the turn waiting to be picked up again. Only a negotiation
    /// against the system negotiator has one: personal vs personal answers 409
    /// `no_system_negotiator` and keeps the claim.
    pub hand_back: Option<bool>,
}

/// The answer of release.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedOut {
    /// Always true.
    pub success: bool,
    /// The negotiation.
    pub negotiation_id: Uuid,
    /// The task's state once the call is done: `waiting_for_agent` after a plain release; after
    /// a hand-back, where the negotiation went on to (`waiting_for_agent` for the user's next
    /// turn, `completed` when the system's turn ended it).
    pub status: TaskState,
    /// Whether the system negotiator played the turn (`handBack`).
    pub handed_back: bool,
}

/// Pushes the claim's deadline to now + the claim timeout.
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/{negotiationId}/extend", tag = "turns", operation_id = "extendClaim",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentNegotiationPath),
    request_body(content = Option<ClaimIn>, description = "Optional; `{\"claimToken\": ...}`"),
    responses(
        (status = 200, description = "The claim's deadline was pushed", body = ExtendedOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 404, description = "Unknown negotiation, or not the agent's user's"),
        (status = 409, description = "`not_claimed`, `claimed_by_other`, `claim_stale`, `unknown_claim_token` or `already_completed`"),
        OwnAgentKey,
    ))]
pub async fn extend_claim(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
    OptionalJson(body): OptionalJson<ClaimIn>,
) -> ApiResult<Json<ExtendedOut>> {
    let task = state.engine.extend(&agent, negotiation_id, body.claim_token.as_deref()).await?;
    Ok(Json(ExtendedOut {
        success: true,
        negotiation_id,
        claim_token: state.engine.runtime().tokens.claim_token(task.id, task.claim_generation),
        deadline: task.claim_expires_at.unwrap_or_else(Utc::now),
    }))
}

/// Gives the turn back to be picked up again, or, with `handBack`, to the system negotiator,
/// which plays it at once.
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/{negotiationId}/release", tag = "turns", operation_id = "releaseClaim",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentNegotiationPath),
    request_body(content = Option<ReleaseIn>, description = "Optional; `{\"claimToken\": ..., \"reason\": ..., \"handBack\": true}`"),
    responses(
        (status = 200, description = "The turn is parked again, or the system negotiator played it", body = ReleasedOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 404, description = "Unknown negotiation, or not the agent's user's"),
        (status = 409, description = "`not_claimed`, `claimed_by_other`, `claim_stale`, `unknown_claim_token`, `already_completed`, or `no_system_negotiator` (a hand-back in a personal-vs-personal negotiation)"),
        OwnAgentKey,
    ))]
pub async fn release_claim(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
    OptionalJson(body): OptionalJson<ReleaseIn>,
) -> ApiResult<Json<ReleasedOut>> {
    let reason = crate::directory::delegation::reason_text(body.reason.as_deref());
    let token = body.claim_token.as_deref();
    let handed_back = body.hand_back.unwrap_or(false);
    let task = state.engine.release(&agent, negotiation_id, token, reason.as_deref(), handed_back).await?;
    Ok(Json(ReleasedOut { success: true, negotiation_id, status: task.state, handed_back }))
}

/// Query of the agent's listing.
#[derive(Debug, Deserialize, Default, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgentListQuery {
    /// `waiting_for_agent`, `active`, `completed` or `all` (default).
    #[param(pattern = "^(waiting_for_agent|active|completed|all)$")]
    pub status: Option<String>,
    /// Page size (default 50, at most 200).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// The previous page's `nextCursor`.
    pub cursor: Option<String>,
    /// `true`: only the negotiations in which this agent answered at least one turn (another
    /// agent of the same user, or the system negotiator, may have answered the others).
    pub answered: Option<bool>,
}

/// The negotiations of the agent's user, newest first.
#[utoipa::path(get, path = "/api/agents/{id}/negotiations", tag = "turns", operation_id = "listAgentNegotiations",
    security(("agentKeyBearer" = []), ("agentKey" = []), ("bearerJwt" = [])),
    params(AgentPath, AgentListQuery),
    responses(
        (status = 200, description = "A page, newest first", body = AgentNegotiationPage),
        (status = 400, description = "Invalid query (`invalid_body`)"),
        (status = 404, description = "Unknown agent, or not the caller's"),
        AgentOrItsOwner,
    ))]
pub async fn list_agent_negotiations(
    State(state): State<AppState>,
    AgentOrOwner(agent): AgentOrOwner,
    ApiQuery(q): ApiQuery<AgentListQuery>,
) -> ApiResult<Json<AgentNegotiationPage>> {
    let listing = AgentListing::parse(q.status.as_deref(), q.answered, q.limit, q.cursor.as_deref())?;
    agent_negotiations(&state.engine, &agent, &listing).await.map(Json)
}

/// One negotiation from the agent's side: history with `isUsersTurn` and `latestAction`.
#[utoipa::path(get, path = "/api/agents/{id}/negotiations/{negotiationId}", tag = "turns", operation_id = "getAgentNegotiation",
    security(("agentKeyBearer" = []), ("agentKey" = []), ("bearerJwt" = [])),
    params(AgentNegotiationPath),
    responses(
        (status = 200, description = "The negotiation from the agent's side", body = AgentNegotiationOut),
        (status = 404, description = "Unknown agent or negotiation, or not the caller's"),
        AgentOrItsOwner,
    ))]
pub async fn get_agent_negotiation(
    State(state): State<AppState>,
    AgentOrOwner(agent): AgentOrOwner,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
) -> ApiResult<Json<AgentNegotiationOut>> {
    agent_negotiation(&state.engine, &agent, negotiation_id).await.map(Json)
}
