//! The A2A views of a negotiation: the task with its messages and artifacts, and the context.
//! A participant reads the other side's turns without their `reasoning` (see [`Viewer`]).

use axum::{Json, Router, extract::State, routing::get};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::Ids,
    views::Viewer,
};
use crate::{
    domain::{Side, SideKind, TaskState},
    store::{conversations, messages, tasks},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/tasks/{id}", get(get_task))
        .route("/api/conversations/{id}", get(get_conversation))
}

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}` (schema of the
/// answer of `GET /api/tasks/{id}`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTask)]
#[allow(dead_code)]
pub struct TaskDoc {
    /// The task id (= the negotiation id).
    id: Uuid,
    /// The A2A context (conversation) id.
    context_id: Uuid,
    /// Always `task`.
    #[schema(pattern = "^task$")]
    kind: String,
    /// The task's state and when it last changed.
    status: TaskStatusDoc,
    /// One message per turn.
    history: Vec<MessageDoc>,
    /// The `negotiation-outcome` artifact once it ended.
    artifacts: Vec<ArtifactDoc>,
    /// Negotiation facts.
    metadata: TaskMetadataDoc,
}

/// An A2A task status.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTaskStatus)]
#[allow(dead_code)]
pub struct TaskStatusDoc {
    /// The task state.
    state: TaskState,
    /// When it last changed.
    timestamp: chrono::DateTime<chrono::Utc>,
}

/// An A2A message: one turn.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aMessage)]
#[allow(dead_code)]
pub struct MessageDoc {
    /// Its id.
    message_id: Uuid,
    /// The context id.
    context_id: Uuid,
    /// The task id.
    task_id: Uuid,
    /// Always `message`.
    #[schema(pattern = "^message$")]
    kind: String,
    /// Always `agent`.
    #[schema(pattern = "^agent$")]
    role: String,
    /// `[{kind: "data", data: {action, assessment: {reasoning, suggestedRoles}, message}}]`;
    /// `assessment.reasoning` only on the reader's own side's turns (the service sees all).
    parts: Vec<serde_json::Value>,
    /// Who spoke (`agent:{userId}`) and the 0-based turn number.
    metadata: MessageMetadataDoc,
}

/// An A2A message's metadata.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aMessageMetadata)]
#[allow(dead_code)]
pub struct MessageMetadataDoc {
    /// `agent:{userId}`.
    sender_id: String,
    /// 0-based.
    #[schema(minimum = 0)]
    turn_number: u32,
}

/// An A2A artifact.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aArtifact)]
#[allow(dead_code)]
pub struct ArtifactDoc {
    /// Its id.
    artifact_id: Uuid,
    /// `negotiation-outcome`.
    name: String,
    /// `[{kind: "data", data: Outcome}]`.
    parts: Vec<serde_json::Value>,
    /// Free-form metadata.
    metadata: Option<serde_json::Value>,
}

/// Negotiation facts on an A2A task.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTaskMetadata)]
#[allow(dead_code)]
pub struct TaskMetadataDoc {
    opportunity_id: Uuid,
    source_user_id: String,
    candidate_user_id: String,
    source_type: SideKind,
    candidate_type: SideKind,
    /// 0 = unlimited.
    max_turns: u32,
    turn_count: u32,
}

/// The A2A context of a negotiation (schema of `GET /api/conversations/{id}`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aContext)]
#[allow(dead_code)]
pub struct ContextDoc {
    /// The context id.
    id: Uuid,
    /// The same id.
    context_id: Uuid,
    /// Always `context`.
    #[schema(pattern = "^context$")]
    kind: String,
    /// The opportunity it belongs to.
    opportunity_id: Uuid,
    /// `agent:{userId}` participants, one per side.
    participants: Vec<ParticipantDoc>,
    /// Its tasks.
    task_ids: Vec<Uuid>,
    /// Created.
    created_at: chrono::DateTime<chrono::Utc>,
}

/// A participant of an A2A context.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aParticipant)]
#[allow(dead_code)]
pub struct ParticipantDoc {
    /// `agent:{userId}`.
    id: String,
    /// The user.
    user_id: String,
    /// `source` or `candidate`.
    side: Side,
}

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}`.
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "a2a", operation_id = "getTask",
    security(("bearerJwt" = [])),
    params(("id" = Uuid, Path, description = "The task (= negotiation) id")),
    responses(
        (status = 200, description = "The A2A task", body = TaskDoc),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_task(State(state): State<AppState>, caller: Caller, Ids(id): Ids<Uuid>) -> ApiResult<Json<Value>> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, id).await?.ok_or(ApiError::NotFound("task"))?;
    let viewer = Viewer::of_caller(&caller, &task).ok_or(ApiError::NotFound("task"))?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let artifacts = messages::artifacts(&mut conn, task.id).await?;
    let history: Vec<Value> = turns
        .iter()
        .map(|t| {
            let mut parts = t.parts.clone();
            if !viewer.sees_reasoning_of(t.turn.side) {
                without_reasoning(&mut parts);
            }
            json!({
                "messageId": t.message_id,
                "contextId": task.conversation_id,
                "taskId": task.id,
                "kind": "message",
                "role": "agent",
                "parts": parts,
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
        (status = 200, description = "The A2A context", body = ContextDoc),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_conversation(
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
