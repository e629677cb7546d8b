//! A personal agent's turn delivery: pickup (long poll), respond, extend, release, and the
//! agent's views of its negotiations (DESIGN.md §5).

use std::time::Duration;

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentCaller, AgentOrOwner},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, OptionalJson},
    views::{NegotiationOut, TurnOut},
};
use crate::{
    delivery::{AgentIdentity, Claim, TurnAnswer},
    domain::{Action, SeedAssessment, Side, SuggestedRoles, TaskState, UserContext, outcome::is_final_turn},
    store::{messages, opportunities, tasks},
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

/// Longest `reasoning` or `message` accepted.
pub const MAX_TEXT: usize = 10_000;

/// Query of pickup.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PickupQuery {
    /// Seconds to wait for a turn (1 to PARLEY_LONG_POLL_MAX; larger values are capped).
    pub wait: Option<String>,
}

/// Parses `wait`: a whole number of seconds > 0, capped at the configured maximum.
pub fn parse_wait(raw: Option<&str>, max: Duration) -> ApiResult<Option<Duration>> {
    let Some(raw) = raw else { return Ok(None) };
    let secs: u64 = raw
        .trim()
        .parse()
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| ApiError::invalid(format!("wait must be a whole number of seconds from 1 to {}", max.as_secs())))?;
    Ok(Some(Duration::from_secs(secs).min(max)))
}

/// Takes the agent's turn: its live claim if it has one, else the oldest turn parked for its
/// user; 204 when there is none (after waiting up to `wait` seconds).
async fn pickup_turn(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    ApiQuery(q): ApiQuery<PickupQuery>,
) -> ApiResult<Response> {
    let wait = parse_wait(q.wait.as_deref(), state.engine.config().long_poll_max)?;
    match state.engine.pickup(&agent, wait).await? {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claim) => Ok(Json(pickup_body(&state, &claim).await?).into_response()),
    }
}

/// The other user as the agent sees them: who they are and what they offer, not their intents.
fn project_other(other: &UserContext) -> Value {
    json!({ "id": other.id, "name": other.name, "profile": other.profile })
}

/// The §5 pickup body.
pub async fn pickup_body(state: &AppState, claim: &Claim) -> ApiResult<Value> {
    let task = &claim.task;
    let mut conn = state.pool().acquire().await?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let opportunity = opportunities::get(&mut conn, task.opportunity_id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    drop(conn);
    let own_side = Side::for_turn(task.turn_count);
    let own = task.context(own_side)?;
    let other = task.context(own_side.other())?;
    let seed: SeedAssessment = serde_json::from_value(task.seed_assessment.clone()).map_err(anyhow::Error::from)?;
    let history: Vec<Value> = turns
        .iter()
        .map(|t| {
            json!({
                "turnNumber": t.turn.turn_number,
                "side": t.turn.side,
                "action": t.turn.action,
                "reasoning": t.turn.reasoning,
                "suggestedRoles": t.turn.suggested_roles,
                "message": t.turn.message,
            })
        })
        .collect();
    let counterparty_action = turns.last().map(|t| t.turn.action.as_str()).unwrap_or("none");
    Ok(json!({
        "negotiationId": task.id,
        "taskId": task.id,
        "claimToken": claim.token,
        "opportunity": {
            "id": opportunity.id,
            "status": opportunity.status,
            "reasoning": seed.reasoning,
            "actors": seed.actors.clone().unwrap_or_default(),
        },
        "turn": {
            "number": task.turn_count,
            "deadline": claim.expires_at,
            "counterpartyAction": counterparty_action,
            "isFinalTurn": is_final_turn(task.turn_count, task.max_turns),
            "maxTurns": task.max_turns,
            "history": history,
        },
        "context": {
            "ownUser": own,
            "otherUser": project_other(&other),
            "indexContext": task.index_context,
            "seedAssessment": task.seed_assessment,
            "isDiscoverer": own_side == Side::Source,
            "discoveryQuery": task.discovery_query,
        },
    }))
}

/// The `assessment` of a respond body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssessmentIn {
    /// Why (required, 1 to 10 000 characters).
    pub reasoning: String,
    /// Roles from the responding user's view.
    pub suggested_roles: SuggestedRoles,
}

/// Body of respond.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RespondIn {
    /// The token from pickup; optional for clients of Index Network's API.
    pub claim_token: Option<String>,
    /// `propose` (turn 0 only), `counter`, `accept`, `reject` or `question`.
    pub action: String,
    /// Free text for the other side (at most 10 000 characters).
    pub message: Option<String>,
    /// The agent's assessment.
    pub assessment: AssessmentIn,
}

impl RespondIn {
    /// Checks the parts serde cannot.
    pub fn validate(self) -> ApiResult<TurnAnswer> {
        let action = Action::parse(&self.action).ok_or_else(|| {
            ApiError::invalid("action must be one of propose, counter, accept, reject, question")
        })?;
        let reasoning = self.assessment.reasoning.trim().to_owned();
        if reasoning.is_empty() {
            return Err(ApiError::invalid("assessment.reasoning must not be empty"));
        }
        if reasoning.chars().count() > MAX_TEXT {
            return Err(ApiError::invalid(format!("assessment.reasoning must be at most {MAX_TEXT} characters")));
        }
        if self.message.as_ref().is_some_and(|m| m.chars().count() > MAX_TEXT) {
            return Err(ApiError::invalid(format!("message must be at most {MAX_TEXT} characters")));
        }
        if self.claim_token.as_ref().is_some_and(|t| t.is_empty() || t.len() > 200) {
            return Err(ApiError::invalid("claimToken is not a claim token"));
        }
        Ok(TurnAnswer {
            action,
            reasoning,
            suggested_roles: self.assessment.suggested_roles,
            message: self.message.filter(|m| !m.trim().is_empty()),
            claim_token: self.claim_token,
        })
    }
}

/// Answers the turn the agent holds.
async fn respond_to_turn(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<RespondIn>,
) -> ApiResult<Json<Value>> {
    let answer = body.validate()?;
    Ok(Json(state.engine.respond(&agent, negotiation_id, &answer).await?))
}

/// Body of extend and release.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClaimIn {
    /// The token from pickup; optional like respond's.
    pub claim_token: Option<String>,
}

/// Pushes the claim's deadline to now + the claim timeout.
async fn extend_claim(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
    OptionalJson(body): OptionalJson<ClaimIn>,
) -> ApiResult<Json<Value>> {
    let claim = state.engine.extend(&agent, negotiation_id, body.claim_token.as_deref()).await?;
    Ok(Json(json!({ "success": true, "negotiationId": negotiation_id, "claimToken": claim.token, "deadline": claim.expires_at })))
}

/// Gives the turn back to be picked up again.
async fn release_claim(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
    OptionalJson(body): OptionalJson<ClaimIn>,
) -> ApiResult<Json<Value>> {
    let task = state.engine.release(&agent, negotiation_id, body.claim_token.as_deref()).await?;
    Ok(Json(json!({ "success": true, "negotiationId": negotiation_id, "status": task.state })))
}

/// Query of the agent's listing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentListQuery {
    /// `waiting_for_agent`, `active`, `completed` or `all` (default).
    pub status: Option<String>,
    /// Page size (default 50, at most 200).
    pub limit: Option<i64>,
    /// The previous page's `nextCursor`.
    pub cursor: Option<String>,
}

fn is_users_turn(task: &tasks::Task, agent: &AgentIdentity) -> bool {
    matches!(task.state, TaskState::WaitingForAgent | TaskState::Claimed)
        && task.awaiting_user_id.as_deref() == Some(agent.owner_user_id.as_str())
}

/// The negotiations of the agent's user, newest first.
async fn list_agent_negotiations(
    State(state): State<AppState>,
    AgentOrOwner(agent): AgentOrOwner,
    ApiQuery(q): ApiQuery<AgentListQuery>,
) -> ApiResult<Json<Value>> {
    const ACTIVE: [&str; 4] = ["submitted", "working", "waiting_for_agent", "claimed"];
    const DONE: [&str; 3] = ["completed", "canceled", "failed"];
    let (states, awaiting_only): (Vec<&str>, bool) = match q.status.as_deref().unwrap_or("all") {
        "waiting_for_agent" => (vec!["waiting_for_agent", "claimed"], true),
        "active" => (ACTIVE.to_vec(), false),
        "completed" => (DONE.to_vec(), false),
        "all" => (ACTIVE.iter().chain(DONE.iter()).copied().collect(), false),
        _ => return Err(ApiError::invalid("status must be one of waiting_for_agent, active, completed, all")),
    };
    let limit = q.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::invalid("limit must be between 1 and 200"));
    }
    let before = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(Uuid::parse_str(c).map_err(|_| ApiError::invalid("cursor is not valid"))?),
    };
    let mut conn = state.pool().acquire().await?;
    let page = tasks::list_for_user(&mut conn, &agent.owner_user_id, &states, awaiting_only, before, limit + 1).await?;
    let has_more = page.len() as i64 > limit;
    let mut items = Vec::new();
    for task in page.iter().take(limit as usize) {
        let turns = messages::turns(&mut conn, task.id).await?;
        let own_side = task.side_of(&agent.owner_user_id);
        items.push(json!({
            "negotiationId": task.id,
            "opportunityId": task.opportunity_id,
            "status": task.state,
            "isUsersTurn": is_users_turn(task, &agent),
            "latestAction": turns.last().map(|t| t.turn.action),
            "turnCount": task.turn_count,
            "maxTurns": task.max_turns,
            "ownSide": own_side,
            "counterpartUserId": own_side.map(|s| task.user_id(s.other()).to_owned()),
            "updatedAt": task.updated_at,
        }));
    }
    let next_cursor = if has_more { page.get(limit as usize - 1).map(|t| t.id.to_string()) } else { None };
    Ok(Json(json!({ "negotiations": items, "nextCursor": next_cursor })))
}

/// One negotiation from the agent's side: history with `isUsersTurn` and `latestAction`.
async fn get_agent_negotiation(
    State(state): State<AppState>,
    AgentOrOwner(agent): AgentOrOwner,
    Ids((_, negotiation_id)): Ids<(Uuid, Uuid)>,
) -> ApiResult<Json<Value>> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, negotiation_id).await?.ok_or(ApiError::NotFound("negotiation"))?;
    let Some(own_side) = task.side_of(&agent.owner_user_id) else {
        return Err(ApiError::NotFound("negotiation"));
    };
    let turns = messages::turns(&mut conn, task.id).await?;
    let outcome = messages::outcome(&mut conn, task.id).await?;
    let mut body = serde_json::to_value(NegotiationOut::new(&task, &turns, outcome)).map_err(anyhow::Error::from)?;
    body["ownSide"] = json!(own_side);
    body["isUsersTurn"] = json!(is_users_turn(&task, &agent));
    body["latestAction"] = json!(turns.last().map(|t| t.turn.action));
    let _: Option<TurnOut> = None;
    Ok(Json(body))
}
