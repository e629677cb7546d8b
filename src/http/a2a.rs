//! The A2A views of a negotiation: the task with its messages and artifacts, and the context.

use axum::{Json, Router, extract::State, routing::get};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::Ids,
};
use crate::store::{conversations, messages, tasks};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/tasks/{id}", get(get_task))
        .route("/api/conversations/{id}", get(get_conversation))
}

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}`.
async fn get_task(State(state): State<AppState>, caller: Caller, Ids(id): Ids<Uuid>) -> ApiResult<Json<Value>> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, id).await?.ok_or(ApiError::NotFound("task"))?;
    if !caller.is_service() && task.side_of(&caller.sub).is_none() {
        return Err(ApiError::NotFound("task"));
    }
    let turns = messages::turns(&mut conn, task.id).await?;
    let artifacts = messages::artifacts(&mut conn, task.id).await?;
    let history: Vec<Value> = turns
        .iter()
        .map(|t| {
            json!({
                "messageId": t.message_id,
                "contextId": task.conversation_id,
                "taskId": task.id,
                "kind": "message",
                "role": "agent",
                "parts": t.parts,
                "metadata": { "senderId": t.sender_id, "turnNumber": t.turn.turn_number },
            })
        })
        .collect();
    let artifacts: Vec<Value> = artifacts
        .iter()
        .map(|a| json!({ "artifactId": a.artifact_id, "name": a.name, "parts": a.parts, "metadata": a.metadata }))
        .collect();
    Ok(Json(json!({
        "id": task.id,
        "contextId": task.conversation_id,
        "kind": "task",
        "status": { "state": task.state, "timestamp": task.updated_at },
        "history": history,
        "artifacts": artifacts,
        "metadata": {
            "opportunityId": task.opportunity_id,
            "sourceUserId": task.source_user_id,
            "candidateUserId": task.candidate_user_id,
            "sourceType": task.source_kind,
            "candidateType": task.candidate_kind,
            "maxTurns": task.max_turns,
            "turnCount": task.turn_count,
        },
    })))
}

/// The A2A context with its participants and tasks.
async fn get_conversation(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<Value>> {
    let mut conn = state.pool().acquire().await?;
    let c = conversations::get(&mut conn, id).await?.ok_or(ApiError::NotFound("conversation"))?;
    if !caller.is_service() && !c.participants.iter().any(|(_, user, _)| *user == caller.sub) {
        return Err(ApiError::NotFound("conversation"));
    }
    let participants: Vec<Value> = c
        .participants
        .iter()
        .map(|(pid, user, side)| json!({ "id": pid, "userId": user, "side": side }))
        .collect();
    Ok(Json(json!({
        "id": c.id,
        "contextId": c.id,
        "kind": "context",
        "opportunityId": c.opportunity_id,
        "participants": participants,
        "taskIds": c.task_ids,
        "createdAt": c.created_at,
    })))
}
