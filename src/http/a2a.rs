//! The A2A views of a negotiation: the task with its messages and artifacts, and the context.
//! A participant reads the other side's turns without their `reasoning`, and the outcome's
//! reasoning only when its own side's turn ended the negotiation (see [`Viewer`]).
//! A delegation attempt is an A2A task too, read at the same `GET /api/tasks/{id}` by its
//! parties, agent keys included ([`super::a2a_attempts`]); so is a delegation as a whole (the
//! task the A2A endpoint answers: `crate::wire::delegation_task`), read by its requester's key,
//! the requester's owner and the service; a negotiation's task is read by user, service and
//! admin tokens only, and an agent key is told it does not exist.

use axum::{Json, Router, extract::State, http::HeaderMap, routing::get};
use serde_json::Value;
use uuid::Uuid;

use super::{
    AppState, a2a_attempts,
    agent_auth::AnyCaller,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::Ids,
    views::Viewer,
};
use crate::{
    auth::{CallerRole, Principal},
    directory::delegation::store as delegation_store,
    store::{agents, conversations, messages, tasks},
    wire::{a2a, a2a_render, a2a_render::Version, delegation_task},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/tasks/{id}", get(get_task)).route("/api/conversations/{id}", get(get_conversation))
}

/// Whether `reader` takes part in a delegation attempt (or is the service): the requesting
/// agent's key and its owner's user token, the target agent's key and its owner's user token.
/// To anyone else the attempt does not exist (404, as a negotiation one takes no part in).
fn takes_part_in(reader: &Principal, t: &delegation_store::AttemptTask) -> bool {
    match reader {
        Principal::Agent(agent) => {
            agent.agent_id == t.delegation.requester_agent_id || agent.agent_id == t.attempt.target_agent_id
        }
        Principal::Caller(caller) if caller.is_service() => true,
        Principal::Caller(caller) => {
            caller.role == CallerRole::User && (caller.sub == t.requester_owner || caller.sub == t.target_owner)
        }
        Principal::Key(_) => false,
    }
}

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}` of a negotiation
/// (its participants' user tokens and the service) or of a delegation attempt (the requesting
/// and the target agent's keys, their owners' user tokens and the service).
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "a2a", operation_id = "getTask",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(
        ("id" = Uuid, Path, description = "The task id: a negotiation id, a delegation attempt's `taskId`, or a delegation's id (the task the A2A endpoint answers)"),
        ("A2A-Version" = Option<String>, Header, description = "`1.0` or `0.3`: render the task for an A2A client of that version"),
    ),
    responses(
        (status = 200, description = "The A2A task. With an `A2A-Version` header it is rendered for an A2A client: in that version's form (1.0: ProtoJSON), and a negotiation's `waiting_for_agent` shown as `input-required` and `claimed` as `working`, with Parley's state and the Bindu session status in `metadata.parley` and each turn's proposal status in its metadata", body = a2a::Task),
        (status = 403, description = "The key's agent is inactive"),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_task(
    State(state): State<AppState>,
    AnyCaller(reader): AnyCaller,
    Ids(id): Ids<Uuid>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let version = headers.get("a2a-version").and_then(|v| v.to_str().ok()).map(Version::of_header);
    let task = read_task(&state, &reader, id, version.is_some()).await?;
    Ok(Json(match version {
        Some(version) => a2a_render::task(&task, version, None),
        None => serde_json::to_value(&task).map_err(anyhow::Error::from)?,
    }))
}

/// The task `id` as `reader` may see it; `for_a2a` renders a negotiation's for an A2A client.
async fn read_task(state: &AppState, reader: &Principal, id: Uuid, for_a2a: bool) -> ApiResult<a2a::Task> {
    let reader = reader.clone();
    let mut conn = state.pool().acquire().await?;
    let Some(task) = tasks::get(&mut conn, id).await? else {
        if let Some(attempt) = delegation_store::attempt_task(&mut conn, id).await? {
            return Some(attempt)
                .filter(|t| takes_part_in(&reader, t))
                .map(|t| a2a_attempts::task(&t))
                .ok_or(ApiError::NotFound("task"));
        }
        let (delegation, attempts) =
            delegation_store::record(&mut conn, id).await?.ok_or(ApiError::NotFound("task"))?;
        let requester_owner = match &reader {
            Principal::Caller(caller) if caller.role == CallerRole::User => {
                agents::get(&mut conn, delegation.requester_agent_id).await?.map(|a| a.owner_user_id)
            }
            _ => None,
        };
        let reads = match &reader {
            Principal::Agent(agent) => agent.agent_id == delegation.requester_agent_id,
            Principal::Caller(caller) if caller.is_service() => true,
            Principal::Caller(caller) => requester_owner.as_deref() == Some(caller.sub.as_str()),
            Principal::Key(_) => false,
        };
        if !reads {
            return Err(ApiError::NotFound("task"));
        }
        return Ok(delegation_task::task(&delegation, &attempts));
    };
    let Principal::Caller(caller) = &reader else { return Err(ApiError::NotFound("task")) };
    let viewer = Viewer::of_caller(caller, &task).ok_or(ApiError::NotFound("task"))?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let artifacts = messages::artifacts(&mut conn, task.id).await?;
    let history = turns
        .iter()
        .map(|t| {
            let mut parts = t.parts.clone();
            if !viewer.sees_reasoning_of(t.turn.side) {
                without_reasoning(&mut parts);
            }
            let played = t.played();
            a2a::Message {
                metadata: Some(a2a::MessageMetadata {
                    sender_id: t.sender_id.clone(),
                    turn_number: t.turn.turn_number,
                    played_by: played.played_by,
                    fallback_reason: played.fallback_reason,
                    decided_by: played.decided_by,
                    proposal_status: for_a2a.then(|| a2a::proposal_status(t.turn.action)),
                }),
                ..a2a::Message::new(t.message_id, task.conversation_id, task.id, a2a::Role::Agent, parts)
            }
        })
        .collect();
    // The outcome's reasoning follows the turn that ended the negotiation, like the turns'.
    let outcome = messages::outcome_of(&artifacts)?.map(|stored| viewer.task_outcome(&task, &turns, &stored));
    let artifacts = artifacts
        .into_iter()
        .map(|a| a2a::Artifact {
            parts: match &outcome {
                Some(outcome) if a.name == messages::OUTCOME_ARTIFACT => a2a::data_parts(outcome),
                _ => a.parts,
            },
            artifact_id: a.artifact_id,
            name: a.name,
            metadata: Some(a.metadata),
        })
        .collect();
    let session_status = match (&outcome, task.turn_count) {
        (Some(outcome), _) if outcome.has_opportunity => "completed",
        (Some(_), _) => "rejected",
        (None, 0) => "initiated",
        (None, _) => "ongoing",
    };
    let state = if for_a2a { a2a::negotiation_a2a_state(task.state) } else { task.state.as_str() };
    Ok(a2a::Task {
        id: task.id,
        context_id: task.conversation_id.to_string(),
        kind: "task",
        status: a2a::TaskStatus { state, timestamp: task.updated_at, message: None },
        history,
        artifacts,
        metadata: a2a::TaskMetadata::Negotiation(a2a::NegotiationMetadata {
            opportunity_id: task.opportunity_id,
            source_user_id: task.source_user_id.clone(),
            candidate_user_id: task.candidate_user_id.clone(),
            source_type: task.source_kind,
            candidate_type: task.candidate_kind,
            max_turns: task.max_turns,
            turn_count: task.turn_count,
            parley: for_a2a.then(|| a2a::NegotiationFacts { state: task.state.as_str(), session_status }),
        }),
    })
}

/// Removes `assessment.reasoning` from a turn message's data parts: the other side never reads it.
fn without_reasoning(parts: &mut Value) {
    for part in parts.as_array_mut().into_iter().flatten() {
        if let Some(assessment) = part.pointer_mut("/data/assessment").and_then(Value::as_object_mut) {
            assessment.remove("reasoning");
        }
    }
}

/// The A2A context with its participants and tasks.
#[utoipa::path(get, path = "/api/conversations/{id}", tag = "a2a", operation_id = "getConversation",
    security(("bearerJwt" = [])),
    params(("id" = Uuid, Path, description = "The context (conversation) id")),
    responses(
        (status = 200, description = "The A2A context", body = a2a::Context),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_conversation(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<a2a::Context>> {
    let mut conn = state.pool().acquire().await?;
    let c = conversations::get(&mut conn, id).await?.ok_or(ApiError::NotFound("conversation"))?;
    if !caller.is_service() && !c.participants.iter().any(|(_, user, _)| *user == caller.sub) {
        return Err(ApiError::NotFound("conversation"));
    }
    let participants =
        c.participants.into_iter().map(|(id, user_id, side)| a2a::Participant { id, user_id, side }).collect();
    Ok(Json(a2a::Context {
        id: c.id,
        context_id: c.id,
        kind: "context",
        opportunity_id: c.opportunity_id,
        participants,
        task_ids: c.task_ids,
        created_at: c.created_at,
    }))
}
