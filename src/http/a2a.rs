//! The A2A views of a negotiation: the task with its messages and artifacts, and the context.
//! A participant reads the other side's turns without their `reasoning`, and the outcome's
//! reasoning only when its own side's turn ended the negotiation (see [`Viewer`]).
//! A delegation attempt is an A2A task too, read at the same `GET /api/tasks/{id}` by its
//! parties, agent keys included ([`super::a2a_attempts`]); a negotiation's task is read by user,
//! service and admin tokens only, and an agent key is told it does not exist.

use axum::{
    Json, Router,
    extract::{FromRequestParts, State},
    http::request::Parts,
    routing::get,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState, a2a_attempts,
    agent_auth::{AnyAgent, presented_key},
    auth::{Caller, CallerRole},
    error::{ApiError, ApiResult},
    extract::Ids,
    views::Viewer,
};
use crate::{
    delivery::AgentIdentity,
    directory::delegation::{Status, store as delegation_store},
    domain::{Side, SideKind, TaskState},
    store::{conversations, messages, tasks},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/tasks/{id}", get(get_task)).route("/api/conversations/{id}", get(get_conversation))
}

/// Who reads an A2A task: a token (user, service or admin), or a personal agent's API key.
pub enum TaskReader {
    /// A JWT.
    Jwt(Caller),
    /// An active agent, by its key.
    Agent(AgentIdentity),
}

impl TaskReader {
    /// Whether the reader takes part in a delegation attempt (or is the service): the requesting
    /// agent's key and its owner's user token, the target agent's key and its owner's user
    /// token. To anyone else the attempt does not exist (404, as a negotiation one takes no
    /// part in).
    fn takes_part_in(&self, t: &delegation_store::AttemptTask) -> bool {
        match self {
            TaskReader::Agent(agent) => {
                agent.agent_id == t.delegation.requester_agent_id || agent.agent_id == t.attempt.target_agent_id
            }
            TaskReader::Jwt(caller) if caller.is_service() => true,
            TaskReader::Jwt(caller) => {
                caller.role == CallerRole::User && (caller.sub == t.requester_owner || caller.sub == t.target_owner)
            }
        }
    }
}

impl FromRequestParts<AppState> for TaskReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if presented_key(parts).is_some() {
            let AnyAgent(agent) = AnyAgent::from_request_parts(parts, state).await?;
            return Ok(TaskReader::Agent(agent));
        }
        Caller::from_request_parts(parts, state).await.map(TaskReader::Jwt)
    }
}

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}` (schema of the
/// answer of `GET /api/tasks/{id}`), of a negotiation or of a delegation attempt.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTask)]
#[allow(dead_code)]
pub struct TaskDoc {
    /// The task id: the negotiation id, or a delegation attempt's `taskId`.
    id: Uuid,
    /// The A2A context: a negotiation's conversation id, or the delegation an attempt belongs
    /// to (the same for all its attempts).
    context_id: Uuid,
    /// Always `task`.
    #[schema(pattern = "^task$")]
    kind: String,
    /// The task's state and when it last changed.
    status: TaskStatusDoc,
    /// A negotiation: one message per turn. An attempt: the delegation's input.
    history: Vec<MessageDoc>,
    /// A negotiation: the `negotiation-outcome` artifact once it ended. An attempt: the
    /// `delegation-result` artifact once completed, else none.
    artifacts: Vec<ArtifactDoc>,
    /// Negotiation or delegation attempt facts.
    metadata: TaskMetadataDoc,
}

/// An A2A task status.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTaskStatus)]
#[allow(dead_code)]
pub struct TaskStatusDoc {
    /// The task state.
    state: TaskStateDoc,
    /// When it last changed.
    timestamp: chrono::DateTime<chrono::Utc>,
    /// A delegation attempt that ended `rejected` or `failed` with a reason: the reason, as an
    /// `agent` message with one text part. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<MessageDoc>,
}

/// An A2A task state: a negotiation's ([`TaskState`]), or a delegation attempt's
/// ([`Status::a2a_state`]). Its schema is written from those two lists, so it names every state
/// a task can show and no other. (Serialize only so that [`TaskStatusDoc`] may derive it.)
#[derive(Debug, serde::Serialize)]
pub struct TaskStateDoc;

impl utoipa::PartialSchema for TaskStateDoc {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let mut attempt_states = Vec::new();
        push_new(&mut attempt_states, Status::ALL.map(Status::a2a_state));
        let quoted: Vec<String> = attempt_states.iter().map(|s| format!("`{s}`")).collect();
        let (last, rest) = quoted.split_last().expect("an attempt has states");
        let description = format!(
            "An A2A task state: a negotiation's (`TaskState`), or a delegation attempt's ({} or {last}).",
            rest.join(", ")
        );
        let mut names: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
        push_new(&mut names, attempt_states);
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .description(Some(description))
            .enum_values(Some(names))
            .into()
    }
}

/// Appends the names `list` does not hold yet, in their order.
fn push_new<'a>(list: &mut Vec<&'a str>, names: impl IntoIterator<Item = &'a str>) {
    for name in names {
        if !list.contains(&name) {
            list.push(name);
        }
    }
}

impl utoipa::ToSchema for TaskStateDoc {
    fn name() -> std::borrow::Cow<'static, str> {
        "A2aTaskState".into()
    }
}

/// An A2A message: a negotiation's turn, or a delegation attempt's input.
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
    /// `agent` (a turn) or `user` (a delegation's input, from its requester).
    #[schema(pattern = "^(agent|user)$")]
    role: String,
    /// A turn: `[{kind: "data", data: {action, assessment: {reasoning, suggestedRoles},
    /// message}}]`, `assessment.reasoning` only on the reader's own side's turns (the service
    /// sees all). A delegation's input: `[{kind: "data", data: input}]`.
    parts: Vec<serde_json::Value>,
    /// A turn: who spoke (`agent:{userId}`), the 0-based turn number, and who played and decided
    /// it. Absent on a delegation's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<MessageMetadataDoc>,
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
    /// `agent`, `system` or `system_fallback`.
    played_by: crate::domain::PlayedBy,
    /// For a `system_fallback` turn: `park_timeout`, `offline` or `hand_back`.
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback_reason: Option<crate::domain::FallbackReason>,
    /// `agent`, `rules` or `model:<name>`.
    #[schema(pattern = "^(agent|rules|model:.+)$")]
    decided_by: String,
}

/// An A2A artifact.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aArtifact)]
#[allow(dead_code)]
pub struct ArtifactDoc {
    /// Its id.
    artifact_id: Uuid,
    /// `negotiation-outcome` or `delegation-result`.
    name: String,
    /// `[{kind: "data", data: Outcome}]` (its `reasoning` as the reader may see it), or
    /// `[{kind: "data", data: output}]`.
    parts: Vec<serde_json::Value>,
    /// Free-form metadata.
    metadata: Option<serde_json::Value>,
}

/// The facts on an A2A task: a negotiation's or a delegation attempt's.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[schema(as = A2aTaskMetadata)]
#[allow(dead_code)]
pub enum TaskMetadataDoc {
    /// A negotiation.
    Negotiation(NegotiationMetadataDoc),
    /// A delegation attempt.
    Attempt(AttemptMetadataDoc),
}

/// A delegation attempt's facts on its A2A task. The other side appears only by anonymous id.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aAttemptMetadata)]
#[allow(dead_code)]
pub struct AttemptMetadataDoc {
    /// The delegation's request id.
    request_id: Uuid,
    /// The kind of work.
    task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    custom_type: Option<String>,
    /// 1-based.
    #[schema(minimum = 1)]
    attempt: i32,
    /// The attempt's own status: `request`, `accepted`, `completed`, `rejected`, `timeout` or
    /// `error`.
    #[schema(pattern = "^(request|accepted|completed|rejected|timeout|error)$")]
    attempt_status: String,
    /// The requester, by the anonymous id its target sees.
    requester_anonymous_id: Uuid,
    /// The target, by the anonymous id the requester sees.
    target_anonymous_id: Uuid,
    /// How long the attempt may take from its start.
    timeout_ms: i64,
    /// Offered.
    created_at: chrono::DateTime<chrono::Utc>,
    /// Taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    accepted_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it times out.
    deadline: chrono::DateTime<chrono::Utc>,
    /// Why it ended without completing (the target's reason or error, or `rate_limited`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// Negotiation facts on an A2A task.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aNegotiationMetadata)]
#[allow(dead_code)]
pub struct NegotiationMetadataDoc {
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

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}` of a negotiation
/// (its participants' user tokens and the service) or of a delegation attempt (the requesting
/// and the target agent's keys, their owners' user tokens and the service).
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "a2a", operation_id = "getTask",
    security(("bearerJwt" = []), ("agentKeyBearer" = []), ("agentKey" = [])),
    params(("id" = Uuid, Path, description = "The task id: a negotiation id, or a delegation attempt's `taskId`")),
    responses(
        (status = 200, description = "The A2A task", body = TaskDoc),
        (status = 403, description = "The key's agent is inactive"),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_task(State(state): State<AppState>, reader: TaskReader, Ids(id): Ids<Uuid>) -> ApiResult<Json<Value>> {
    let mut conn = state.pool().acquire().await?;
    let Some(task) = tasks::get(&mut conn, id).await? else {
        let attempt = delegation_store::attempt_task(&mut conn, id).await?;
        return attempt
            .filter(|t| reader.takes_part_in(t))
            .map(|t| Json(a2a_attempts::task(&t)))
            .ok_or(ApiError::NotFound("task"));
    };
    let TaskReader::Jwt(caller) = &reader else { return Err(ApiError::NotFound("task")) };
    let viewer = Viewer::of_caller(caller, &task).ok_or(ApiError::NotFound("task"))?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let artifacts = messages::artifacts(&mut conn, task.id).await?;
    let history: Vec<Value> = turns
        .iter()
        .map(|t| {
            let mut parts = t.parts.clone();
            if !viewer.sees_reasoning_of(t.turn.side) {
                without_reasoning(&mut parts);
            }
            let played = t.played();
            let mut metadata = json!({
                "senderId": t.sender_id,
                "turnNumber": t.turn.turn_number,
                "playedBy": played.played_by,
                "decidedBy": played.decided_by,
            });
            if let Some(reason) = played.fallback_reason {
                metadata["fallbackReason"] = json!(reason);
            }
            json!({
                "messageId": t.message_id,
                "contextId": task.conversation_id,
                "taskId": task.id,
                "kind": "message",
                "role": "agent",
                "parts": parts,
                "metadata": metadata,
            })
        })
        .collect();
    // The outcome's reasoning follows the turn that ended the negotiation, like the turns'.
    let outcome = match messages::outcome_of(&artifacts)? {
        Some(stored) => {
            Some(serde_json::to_value(viewer.task_outcome(&task, &turns, &stored)).map_err(anyhow::Error::from)?)
        }
        None => None,
    };
    let artifacts: Vec<Value> = artifacts
        .iter()
        .map(|a| {
            let parts = match &outcome {
                Some(data) if a.name == messages::OUTCOME_ARTIFACT => json!([{ "kind": "data", "data": data }]),
                _ => a.parts.clone(),
            };
            json!({ "artifactId": a.artifact_id, "name": a.name, "parts": parts, "metadata": a.metadata })
        })
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
    let participants: Vec<Value> =
        c.participants.iter().map(|(pid, user, side)| json!({ "id": pid, "userId": user, "side": side })).collect();
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

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn the_state_schema_names_every_state_a_task_can_show() {
        let schema = serde_json::to_value(TaskStateDoc::schema()).unwrap();
        let names: Vec<&str> = schema["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for state in TaskState::ALL {
            let name = serde_json::to_value(state).unwrap();
            assert!(names.contains(&name.as_str().unwrap()), "{name} is missing from {names:?}");
        }
        for status in Status::ALL {
            assert!(names.contains(&status.a2a_state()), "{} is missing from {names:?}", status.a2a_state());
        }
    }
}
