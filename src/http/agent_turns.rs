//! A personal agent's turn delivery: pickup (long poll), respond, extend, release, and the
//! agent's views of its negotiations.

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
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    agent_auth::{AgentCaller, AgentOrOwner, PresentedAgentKey},
    api_docs::{AgentNegotiationPath, AgentOrItsOwner, AgentPath, OwnAgentKey},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, OptionalJson, Page},
    views::{NegotiationOut, Viewer},
};
use crate::{
    delivery::{AgentIdentity, Claim, TurnAnswer},
    domain::{
        Action, PreviousRound, SeedAssessment, Side, SuggestedRoles, TaskState, Turn, UserContext,
        outcome::is_final_turn,
    },
    store::{messages, tasks},
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
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PickupQuery {
    /// Seconds to wait for a turn (1 to PARLEY_LONG_POLL_MAX; larger values are capped).
    #[param(value_type = Option<u32>, minimum = 1)]
    pub wait: Option<String>,
    /// Negotiation ids, comma-separated (at most 100), whose parked turns this pickup passes
    /// over: an agent backing off on a turn it could not answer serves the user's other turns
    /// meanwhile. The agent's own live claim is returned whatever this says.
    pub skip: Option<String>,
}

/// Most negotiations one pickup may skip.
pub const MAX_SKIP: usize = 100;

/// Parses `skip`: comma-separated negotiation ids, at most [`MAX_SKIP`].
pub fn parse_skip(raw: Option<&str>) -> ApiResult<Vec<Uuid>> {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else { return Ok(Vec::new()) };
    let ids = raw
        .split(',')
        .map(|id| Uuid::parse_str(id.trim()))
        .collect::<Result<Vec<Uuid>, _>>()
        .map_err(|_| ApiError::invalid("skip must be negotiation ids separated by commas"))?;
    if ids.len() > MAX_SKIP {
        return Err(ApiError::invalid(format!("skip names at most {MAX_SKIP} negotiations")));
    }
    Ok(ids)
}

/// The pickup answer: the claimed turn with everything needed to answer it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Pickup, example = json!({
    "negotiationId": "0193b0a4-7000-7000-8000-000000000001",
    "taskId": "0193b0a4-7000-7000-8000-000000000001",
    "claimToken": "ct_Zm9vYmFyYmF6cXV4",
    "opportunity": {"id": "0193b0a4-7000-7000-8000-000000000002", "status": "negotiating",
        "reasoning": "Both want a Rust payments collaboration", "actors": []},
    "turn": {"number": 1, "deadline": "2026-01-01T18:00:00Z", "counterpartyAction": "propose",
        "isFinalTurn": false, "maxTurns": 8,
        "history": [{"turnNumber": 0, "side": "source", "agent": "source", "action": "propose",
            "suggestedRoles": {"ownUser": "patient", "otherUser": "agent"},
            "message": "Maya is building a payments API in Rust and needs a senior engineer."}]},
    "context": {
        "ownUser": {"id": "user-tomas", "name": "Tomas Novak",
            "profile": {"bio": "Senior backend engineer, eight years of Rust", "skills": ["rust", "postgresql", "payments api"],
                "name": "Tomas Novak"},
            "intents": [{"id": "intent-1", "text": "Looking for a fintech startup to join as a senior backend engineer working on payments",
                "title": "Looking for a fintech startup to join as a senior backend…",
                "description": "Looking for a fintech startup to join as a senior backend engineer working on payments"}]},
        "otherUser": {"id": "user-maya", "name": "Maya Chen",
            "profile": {"bio": "Founder of a fintech startup", "skills": ["fundraising"], "interests": ["payments", "rust"],
                "name": "Maya Chen"},
            "intents": []},
        "indexContext": {},
        "seedAssessment": {"score": 88, "reasoning": "Both want a Rust payments collaboration"},
        "isDiscoverer": false,
        "discoveryQuery": "senior rust backend engineer for payments"}
}))]
#[allow(dead_code)]
pub struct PickupDoc {
    /// The negotiation to respond on (= the task id).
    negotiation_id: Uuid,
    /// The A2A task id (the same id).
    task_id: Uuid,
    /// Proof of the claim; send it back with respond, extend and release.
    claim_token: String,
    /// The opportunity being negotiated.
    opportunity: PickupOpportunityDoc,
    /// The turn to take.
    turn: PickupTurnDoc,
    /// Everything the agent argues from.
    context: PickupContextDoc,
}

/// The opportunity of a pickup.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = PickupOpportunity)]
#[allow(dead_code)]
pub struct PickupOpportunityDoc {
    id: Uuid,
    status: crate::domain::OpportunityStatus,
    /// The evaluator's reasoning.
    reasoning: String,
    /// The evaluator's roles per user (may be empty).
    actors: Vec<crate::domain::SeedActor>,
}

/// The turn of a pickup.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PickupTurn)]
#[allow(dead_code)]
pub struct PickupTurnDoc {
    /// 0-based: the number of turns already taken. Turn 0 is `propose` or `reject`.
    number: u32,
    /// When the claim lapses (ISO 8601); `extend` pushes it.
    deadline: DateTime<Utc>,
    /// The other side's last action, `none` before any turn.
    #[schema(pattern = "^(none|propose|counter|accept|reject|question)$")]
    counterparty_action: String,
    /// The cap ends the negotiation after this turn: anything but accept/reject stalls it.
    is_final_turn: bool,
    /// 0 = unlimited.
    max_turns: u32,
    /// The turns so far.
    history: Vec<HistoryTurnDoc>,
}

/// A past turn as a pickup shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = HistoryTurn)]
#[allow(dead_code)]
pub struct HistoryTurnDoc {
    turn_number: u32,
    side: Side,
    /// The same as `side` (the name Index Network's clients read).
    agent: Side,
    action: Action,
    /// Only on the agent's own side's turns: the other side's reasoning is private to it.
    reasoning: Option<String>,
    suggested_roles: SuggestedRoles,
    message: Option<String>,
    /// `agent`, `system` or `system_fallback` (Parley standing in for the user's agent); absent
    /// only on a turn of an earlier round recorded before turns said who played them.
    played_by: Option<crate::domain::PlayedBy>,
    /// For a `system_fallback` turn: `park_timeout`, `offline` or `hand_back`.
    fallback_reason: Option<crate::domain::FallbackReason>,
    /// `agent`, `rules` or `model:<name>`.
    #[schema(value_type = Option<String>, pattern = "^(agent|rules|model:.+)$")]
    decided_by: Option<String>,
}

/// What the agent argues from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PickupContext)]
#[allow(dead_code)]
pub struct PickupContextDoc {
    /// The agent's own user, in full.
    own_user: AgentUserDoc,
    /// The other user: who they are and what they offer, with the intents the platform shares
    /// (an intent marked `private` stays with its own side; `dealBreakers` never come along).
    other_user: AgentUserDoc,
    /// The platform's index context, verbatim; `{}` when none was given.
    index_context: serde_json::Map<String, Value>,
    /// The evaluator's assessment.
    seed_assessment: SeedAssessment,
    /// Whether the agent's user is the discovering (source) user.
    is_discoverer: bool,
    /// What the source user searched for.
    discovery_query: Option<String>,
    /// The opportunity's earlier rounds of negotiation, oldest first (empty in a first round):
    /// a reactivated opportunity is negotiated again from scratch, with these to learn from.
    previous_rounds: Vec<PreviousRoundDoc>,
}

/// An earlier round of the opportunity's negotiation, as a pickup shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PreviousRound)]
#[allow(dead_code)]
pub struct PreviousRoundDoc {
    /// That round's negotiation id (still readable).
    negotiation_id: Uuid,
    /// Its turns, numbered from 0, shaped like `turn.history`.
    turns: Vec<HistoryTurnDoc>,
    /// How it ended; its `reasoning` is the final turn's only when that turn was the agent's own
    /// side's, else the service's sentence (`summary`).
    outcome: Option<crate::domain::Outcome>,
}

/// A user as an agent sees them (the shape Index Network's clients read).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AgentUser)]
#[allow(dead_code)]
pub struct AgentUserDoc {
    id: String,
    /// The display name the platform gave, else the user id.
    name: String,
    /// The platform's profile, always an object, with `name` added when it has none.
    profile: serde_json::Map<String, Value>,
    /// The user's intents: all of the own user's; the other user's shared ones.
    intents: Vec<AgentIntentDoc>,
}

/// An intent as an agent sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = AgentIntent)]
#[allow(dead_code)]
pub struct AgentIntentDoc {
    /// The platform's id, else `intent-N` (1-based position).
    id: String,
    /// The intent in the user's words.
    text: String,
    /// A short form: the platform's title, else the text's first sentence, cut at 60 characters.
    title: String,
    /// The same as `text`.
    description: String,
    /// 0 to 1, when the platform gave one.
    confidence: Option<f64>,
    /// True on an own intent the platform keeps from the other side (absent otherwise).
    private: Option<bool>,
}

/// Parses `wait`: a whole number of seconds > 0, capped at the configured maximum.
pub fn parse_wait(raw: Option<&str>, max: Duration) -> ApiResult<Option<Duration>> {
    let Some(raw) = raw else { return Ok(None) };
    let secs: u64 = raw.trim().parse().ok().filter(|s| *s > 0).ok_or_else(|| {
        ApiError::invalid(format!("wait must be a whole number of seconds from 1 to {}", max.as_secs()))
    })?;
    Ok(Some(Duration::from_secs(secs).min(max)))
}

/// Takes the agent's turn: its live claim if it has one, else the oldest turn parked for its
/// user; 204 when there is none (after waiting up to `wait` seconds).
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/pickup", tag = "turns", operation_id = "pickupTurn",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentPath, PickupQuery),
    responses(
        (status = 200, description = "A claimed turn (the same claim again while it lives)", body = PickupDoc),
        (status = 204, description = "No turn is parked for the agent's user (after waiting up to `wait` seconds)"),
        (status = 400, description = "Invalid `wait` or `skip` (`invalid_body`)"),
        (status = 404, description = "The path's agent id is not an id"),
        OwnAgentKey,
    ))]
pub async fn pickup_turn(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    query: Result<ApiQuery<PickupQuery>, ApiError>,
) -> ApiResult<Response> {
    let checked = query.and_then(|ApiQuery(q)| {
        Ok((parse_wait(q.wait.as_deref(), state.engine.config().long_poll_max)?, parse_skip(q.skip.as_deref())?))
    });
    let (wait, skip) = match checked {
        Ok(checked) => checked,
        Err(e) => return Err(key.refuse(&state, e).await),
    };
    match state.engine.pickup(&key.0, wait, &skip).await? {
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(claim) => Ok(Json(pickup_body(&claim)?).into_response()),
    }
}

/// A user as a personal agent is shown them, in the shape Index Network's clients read:
/// `name` beside `profile` and again as `profile.name` (the given name, else the user id),
/// `profile` always an object, and `intents` always a list of `{id, text, title, description,
/// confidence?, private?}`. Give it the user as this side may see them: the own user whole, the
/// other user through [`UserContext::as_seen_by_other_side`] (shared intents only, no
/// `dealBreakers`).
fn agent_view_of_user(user: &UserContext) -> Value {
    let name = user.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| user.id.clone());
    let mut profile = match user.profile.as_ref().map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => serde_json::Map::new(),
    };
    profile.entry("name").or_insert_with(|| Value::String(name.clone()));
    let intents: Vec<Value> = user
        .intents
        .iter()
        .enumerate()
        .map(|(i, intent)| {
            let mut item = json!({
                "id": intent.id.clone().unwrap_or_else(|| format!("intent-{}", i + 1)),
                "text": intent.text,
                "title": intent.display_title(),
                "description": intent.text,
            });
            if let Some(confidence) = intent.confidence {
                item["confidence"] = json!(confidence);
            }
            if intent.private {
                item["private"] = json!(true);
            }
            item
        })
        .collect();
    json!({ "id": user.id, "name": name, "profile": profile, "intents": intents })
}

/// The turns so far as the agent of `own_side` sees them: `agent` beside `side` (Index Network's
/// name for it), and `reasoning` only on the agent's own side's turns.
fn history_for(history: &[Turn], own_side: Side) -> Vec<Value> {
    let viewer = Viewer::Side(own_side);
    history
        .iter()
        .map(|t| {
            let mut turn = json!({
                "turnNumber": t.turn_number,
                "side": t.side,
                "agent": t.side,
                "action": t.action,
                "suggestedRoles": t.suggested_roles,
                "message": t.message,
            });
            if let Some(played) = &t.played {
                turn["playedBy"] = json!(played.played_by);
                turn["decidedBy"] = json!(played.decided_by);
                if let Some(reason) = played.fallback_reason {
                    turn["fallbackReason"] = json!(reason);
                }
            }
            if viewer.sees_reasoning_of(t.side) {
                turn["reasoning"] = json!(t.reasoning);
            }
            turn
        })
        .collect()
}

/// The pickup body, from what the pickup statement returned.
pub fn pickup_body(claim: &Claim) -> ApiResult<Value> {
    let task = &claim.task;
    let own_side = Side::for_turn(task.turn_count);
    let own = task.context(own_side)?;
    let other = task.context(own_side.other())?;
    let seed: SeedAssessment = serde_json::from_value(task.seed_assessment.clone()).map_err(anyhow::Error::from)?;
    let counterparty_action = claim.history.last().map(|t| t.action.as_str()).unwrap_or("none");
    let index_context = match &task.index_context {
        Some(value) if !value.is_null() => value.clone(),
        _ => json!({}),
    };
    Ok(json!({
        "negotiationId": task.id,
        "taskId": task.id,
        "claimToken": claim.token,
        "opportunity": {
            "id": task.opportunity_id,
            "status": claim.opportunity_status,
            "reasoning": seed.reasoning,
            "actors": seed.actors.unwrap_or_default(),
        },
        "turn": {
            "number": task.turn_count,
            "deadline": claim.expires_at,
            "counterpartyAction": counterparty_action,
            "isFinalTurn": is_final_turn(task.turn_count, task.max_turns),
            "maxTurns": task.max_turns,
            "history": history_for(&claim.history, own_side),
        },
        "context": {
            "ownUser": agent_view_of_user(&own),
            "otherUser": agent_view_of_user(&other.as_seen_by_other_side()),
            "indexContext": index_context,
            "seedAssessment": task.seed_assessment,
            "isDiscoverer": own_side == Side::Source,
            "discoveryQuery": task.discovery_query,
            "previousRounds": previous_rounds_for(&claim.previous_rounds, own_side, |side| task.display_name(side)),
        },
    }))
}

/// The opportunity's earlier rounds as the agent of `own_side` sees them: each round's turns
/// shaped like `history` (reasoning only on its own side's turns) and its outcome, whose
/// reasoning follows the same rule (see [`Viewer::outcome`]); `name_of` names each side's user.
pub fn previous_rounds_for(
    rounds: &[PreviousRound],
    own_side: Side,
    name_of: impl Fn(Side) -> String + Copy,
) -> Vec<Value> {
    let viewer = Viewer::Side(own_side);
    rounds
        .iter()
        .map(|r| {
            json!({
                "negotiationId": r.negotiation_id,
                "turns": history_for(&r.turns, own_side),
                "outcome": r.outcome.as_ref().map(|o| viewer.outcome(o, &r.turns, name_of)),
            })
        })
        .collect()
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
    /// `propose` (turn 0 only), `counter`, `accept`, `reject` or `question`.
    #[schema(pattern = "^(propose|counter|accept|reject|question)$")]
    pub action: String,
    /// Free text for the other side (at most 10 000 characters). Optional for every action,
    /// `counter` and `question` included: null, absent or blank means none (Index Network's
    /// clients send null). The other side weighs only what a message says, so say what is
    /// missing or what you ask in it.
    #[schema(max_length = 10000)]
    pub message: Option<String>,
    /// The agent's assessment.
    pub assessment: AssessmentIn,
}

impl RespondIn {
    /// Checks the parts serde cannot.
    pub fn validate(self) -> ApiResult<TurnAnswer> {
        let action = Action::parse(&self.action)
            .ok_or_else(|| ApiError::invalid("action must be one of propose, counter, accept, reject, question"))?;
        // An empty reasoning is accepted, as Index Network's own clients may send it: it stays
        // private to its side and shows as empty.
        let reasoning = self.assessment.reasoning.trim().to_owned();
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
            suggested_roles: self.assessment.suggested_roles.unwrap_or(SuggestedRoles::PEERS),
            message: self.message.filter(|m| !m.trim().is_empty()),
            claim_token: self.claim_token,
        })
    }
}

/// The respond answer: the turn's number and where the negotiation and its opportunity stand now
/// (with the outcome once it has ended).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Responded, example = json!({
    "success": true,
    "negotiationId": "0193b0a4-7000-7000-8000-000000000001",
    "turnNumber": 1,
    "status": "completed",
    "opportunity": {"id": "0193b0a4-7000-7000-8000-000000000002", "status": "pending"},
    "outcome": {"hasOpportunity": true,
        "agreedRoles": [{"userId": "user-tomas", "role": "agent"}, {"userId": "user-maya", "role": "patient"}],
        "reasoning": "Strong skills and intent fit", "turnCount": 2,
        "summary": "Tomas Novak's agent accepted Maya Chen's proposal at turn 1."}
}))]
#[allow(dead_code)]
pub struct RespondedDoc {
    /// Always true.
    success: bool,
    /// The negotiation.
    negotiation_id: Uuid,
    /// The turn just stored (0-based).
    turn_number: u32,
    /// The task's state once the call is done: `waiting_for_agent` when a personal turn was
    /// parked next, `completed` when it ended.
    status: TaskState,
    /// The opportunity's id and status.
    opportunity: OpportunityRefDoc,
    /// Set once the negotiation ended; its `reasoning` is the final turn's only when that turn
    /// was the agent's own side's (a system reply may have ended it), else the service's
    /// sentence (`summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<crate::domain::Outcome>,
}

/// An opportunity's id and status.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = OpportunityRef)]
#[allow(dead_code)]
pub struct OpportunityRefDoc {
    id: Uuid,
    status: crate::domain::OpportunityStatus,
}

/// Answers the turn the agent holds.
#[utoipa::path(post, path = "/api/agents/{id}/negotiations/{negotiationId}/respond", tag = "turns", operation_id = "respondToTurn",
    security(("agentKeyBearer" = []), ("agentKey" = [])),
    params(AgentNegotiationPath),
    request_body = RespondIn,
    responses(
        (status = 200, description = "The turn is stored (or this exact respond was already applied)", body = RespondedDoc),
        (status = 400, description = "Invalid body (`invalid_body`) or action not allowed at this turn (`action_not_allowed`)"),
        (status = 404, description = "Unknown negotiation, or not the agent's user's"),
        (status = 409, description = "`not_claimed`, `claimed_by_other`, `claim_stale`, `turn_already_answered` (the same token with another body), `unknown_claim_token` (a token never issued for this negotiation) or `already_completed`"),
        OwnAgentKey,
    ))]
pub async fn respond_to_turn(
    State(state): State<AppState>,
    key: PresentedAgentKey,
    ids: Result<Ids<(Uuid, Uuid)>, ApiError>,
    body: Result<ApiJson<RespondIn>, ApiError>,
) -> ApiResult<Json<Value>> {
    let checked = ids.and_then(|Ids((_, id))| body.and_then(|ApiJson(b)| b.validate()).map(|answer| (id, answer)));
    let (negotiation_id, answer) = match checked {
        Ok(checked) => checked,
        Err(e) => return Err(key.refuse(&state, e).await),
    };
    Ok(Json(state.engine.respond(&key.0, negotiation_id, &answer).await?))
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
        claim_token: state.engine.claim_token(task.id, task.claim_generation),
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

fn is_users_turn(task: &tasks::Task, agent: &AgentIdentity) -> bool {
    matches!(task.state, TaskState::WaitingForAgent | TaskState::Claimed)
        && task.awaiting_user_id.as_deref() == Some(agent.owner_user_id.as_str())
}

/// One negotiation in the agent's listing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationItem {
    /// The negotiation.
    pub negotiation_id: Uuid,
    /// The opportunity it decides.
    pub opportunity_id: Uuid,
    /// The task state.
    pub status: TaskState,
    /// A turn of the agent's user is parked or claimed.
    pub is_users_turn: bool,
    /// The last turn's action; null before any turn.
    pub latest_action: Option<Action>,
    /// Turns taken.
    pub turn_count: u32,
    /// 0 = unlimited.
    pub max_turns: u32,
    /// The agent's user's seat.
    pub own_side: Option<Side>,
    /// The other user.
    pub counterpart_user_id: Option<String>,
    /// The other user's display name, when the platform gave one.
    pub counterpart_name: Option<String>,
    /// Turns this agent answered in it (any agent of the user may answer the user's turns).
    pub answered_turns: i64,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A page of the agent's negotiations.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationPage {
    /// Newest first.
    pub negotiations: Vec<AgentNegotiationItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
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
    agent_negotiations(&state, &agent, &q).await.map(Json)
}

/// The agent's listing (shared by HTTP and MCP).
pub async fn agent_negotiations(
    state: &AppState,
    agent: &AgentIdentity,
    q: &AgentListQuery,
) -> ApiResult<AgentNegotiationPage> {
    let listed = match q.status.as_deref().unwrap_or("all") {
        "waiting_for_agent" => tasks::Listed::Awaiting,
        "active" => tasks::Listed::Active,
        "completed" => tasks::Listed::Ended,
        "all" => tasks::Listed::All,
        _ => return Err(ApiError::invalid("status must be one of waiting_for_agent, active, completed, all")),
    };
    let Page { limit, before } = Page::parse(q.limit, q.cursor.as_deref())?;
    let mut conn = state.pool().acquire().await?;
    let answered_by = q.answered.unwrap_or(false).then_some(agent.agent_id);
    let page = tasks::list_for_user(&mut conn, &agent.owner_user_id, listed, answered_by, before, limit + 1).await?;
    let has_more = page.len() as i64 > limit;
    let shown: Vec<Uuid> = page.iter().take(limit as usize).map(|t| t.id).collect();
    let answered = tasks::turns_answered_by(&mut conn, agent.agent_id, &shown).await?;
    let mut items = Vec::new();
    for task in page.iter().take(limit as usize) {
        let turns = messages::turns(&mut conn, task.id).await?;
        let own_side = task.side_of(&agent.owner_user_id);
        items.push(AgentNegotiationItem {
            negotiation_id: task.id,
            opportunity_id: task.opportunity_id,
            status: task.state,
            is_users_turn: is_users_turn(task, agent),
            latest_action: turns.last().map(|t| t.turn.action),
            turn_count: task.turn_count,
            max_turns: task.max_turns,
            own_side,
            counterpart_user_id: own_side.map(|s| task.user_id(s.other()).to_owned()),
            counterpart_name: own_side.and_then(|s| task.user_name(s.other())),
            answered_turns: answered.get(&task.id).copied().unwrap_or(0),
            updated_at: task.updated_at,
        });
    }
    let next_cursor = if has_more { page.get(limit as usize - 1).map(|t| t.id.to_string()) } else { None };
    Ok(AgentNegotiationPage { negotiations: items, next_cursor })
}

/// A negotiation from an agent's side.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentNegotiationOut {
    /// The whole negotiation.
    #[serde(flatten)]
    pub negotiation: NegotiationOut,
    /// The agent's user's seat.
    pub own_side: Side,
    /// A turn of the agent's user is parked or claimed.
    pub is_users_turn: bool,
    /// The last turn's action; null before any turn.
    pub latest_action: Option<Action>,
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
    agent_negotiation(&state, &agent, negotiation_id).await.map(Json)
}

/// One negotiation from the agent's side (shared by HTTP and MCP).
pub async fn agent_negotiation(
    state: &AppState,
    agent: &AgentIdentity,
    negotiation_id: Uuid,
) -> ApiResult<AgentNegotiationOut> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, negotiation_id).await?.ok_or(ApiError::NotFound("negotiation"))?;
    let Some(own_side) = task.side_of(&agent.owner_user_id) else {
        return Err(ApiError::NotFound("negotiation"));
    };
    let turns = messages::turns(&mut conn, task.id).await?;
    let outcome = messages::outcome(&mut conn, task.id).await?;
    let negotiation = NegotiationOut::new(&task, &turns, outcome, Viewer::Side(own_side))
        .with_rounds_and_wait(&mut conn, &state.engine, &task)
        .await?;
    Ok(AgentNegotiationOut {
        negotiation,
        own_side,
        is_users_turn: is_users_turn(&task, agent),
        latest_action: turns.last().map(|t| t.turn.action),
    })
}
