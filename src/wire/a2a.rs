//! The A2A shapes Parley writes: a task with its status, messages and artifacts, and a context.
//!
//! A negotiation is an A2A task (its turns are the messages, its outcome the artifact, its
//! conversation the context), and so is each delegation attempt (the delegation's input is its
//! one message, the output its artifact, the delegation its context). These types are what the
//! HTTP routes serialize and what the OpenAPI document describes: one definition for both, so a
//! field the document names is a field the answer has. Who may read what, and which parts of a
//! turn the reader sees, is decided before a value is built here; these types only carry it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    directory::delegation::Status,
    domain::{DecidedBy, FallbackReason, PlayedBy, SideKind, TaskState},
};

/// The A2A Task `{id, contextId, kind, status, history, artifacts, metadata}` (schema of the
/// answer of `GET /api/tasks/{id}`), of a negotiation or of a delegation attempt.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTask)]
pub struct Task {
    /// The task id: the negotiation id, or a delegation attempt's `taskId`.
    pub id: Uuid,
    /// The A2A context: a negotiation's conversation id, the delegation an attempt belongs to
    /// (the same for all its attempts), or a delegation's (the `contextId` of the message that
    /// asked for it, else the delegation's id).
    pub context_id: String,
    /// Always `task`.
    #[schema(pattern = "^task$")]
    pub kind: &'static str,
    /// The task's state and when it last changed.
    pub status: TaskStatus,
    /// A negotiation: one message per turn. An attempt: the delegation's input.
    pub history: Vec<Message>,
    /// A negotiation: the `negotiation-outcome` artifact once it ended. An attempt: the
    /// `delegation-result` artifact once completed, else none.
    pub artifacts: Vec<Artifact>,
    /// Negotiation or delegation attempt facts.
    pub metadata: TaskMetadata,
}

/// An A2A task status.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aTaskStatus)]
pub struct TaskStatus {
    /// The task state.
    #[schema(value_type = TaskStateSchema)]
    pub state: &'static str,
    /// When it last changed.
    pub timestamp: DateTime<Utc>,
    /// A delegation attempt that ended `rejected`, `failed` or `canceled` with a reason: the
    /// reason, as an `agent` message with one text part. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

/// The schema of an A2A task state: a negotiation's ([`TaskState`]), or a delegation attempt's
/// ([`Status::a2a_state`]). It is written from those two lists, so it names every state a task
/// can show and no other.
pub struct TaskStateSchema;

impl utoipa::PartialSchema for TaskStateSchema {
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

impl ToSchema for TaskStateSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        "A2aTaskState".into()
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

/// Who sent an A2A message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A negotiation's turn, or an attempt's reason for ending.
    Agent,
    /// A delegation's input, from its requester.
    User,
}

/// An A2A message: a negotiation's turn, or a delegation attempt's input.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aMessage)]
pub struct Message {
    /// Its id.
    pub message_id: Uuid,
    /// The context id.
    pub context_id: String,
    /// The task id.
    pub task_id: Uuid,
    /// Always `message`.
    #[schema(pattern = "^message$")]
    pub kind: &'static str,
    /// `agent` (a turn) or `user` (a delegation's input, from its requester).
    #[schema(value_type = String, pattern = "^(agent|user)$")]
    pub role: Role,
    /// A turn: `[{kind: "data", data: {action, assessment: {reasoning, suggestedRoles},
    /// message}}]`, `assessment.reasoning` only on the reader's own side's turns (the service
    /// sees all). A delegation's input: `[{kind: "data", data: input}]`.
    #[schema(value_type = Vec<serde_json::Value>)]
    pub parts: Value,
    /// A turn: who spoke (`agent:{userId}`), the 0-based turn number, and who played and decided
    /// it. Absent on a delegation's input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MessageMetadata>,
}

impl Message {
    /// A message in task `task_id` of context `context_id`.
    pub fn new(message_id: Uuid, context_id: impl ToString, task_id: Uuid, role: Role, parts: Value) -> Message {
        Message {
            message_id,
            context_id: context_id.to_string(),
            task_id,
            kind: "message",
            role,
            parts,
            metadata: None,
        }
    }
}

/// An A2A message's metadata.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aMessageMetadata)]
pub struct MessageMetadata {
    /// `agent:{userId}`.
    pub sender_id: String,
    /// 0-based.
    #[schema(minimum = 0)]
    pub turn_number: u32,
    /// `agent`, `system` or `system_fallback`.
    pub played_by: PlayedBy,
    /// For a `system_fallback` turn: `park_timeout`, `offline` or `hand_back`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<FallbackReason>,
    /// `agent`, `rules` or `model:<name>`.
    #[schema(value_type = String, pattern = "^(agent|rules|model:.+)$")]
    pub decided_by: DecidedBy,
    /// Rendered for an A2A client only (the request named an `A2A-Version`): the turn in the
    /// Bindu negotiation vocabulary, `proposed` (propose), `countered` (counter, question),
    /// `accepted` or `rejected`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^(proposed|countered|accepted|rejected)$")]
    pub proposal_status: Option<&'static str>,
}

/// A turn's action in the Bindu negotiation vocabulary.
pub fn proposal_status(action: crate::domain::Action) -> &'static str {
    use crate::domain::Action;
    match action {
        Action::Propose => "proposed",
        Action::Counter | Action::Question => "countered",
        Action::Accept => "accepted",
        Action::Reject => "rejected",
    }
}

/// The A2A state a negotiation's task shows an A2A client: a turn parked for a personal agent
/// waits for input (`input-required`), a claimed one is being worked on (`working`); the other
/// states keep their names.
pub fn negotiation_a2a_state(state: TaskState) -> &'static str {
    match state {
        TaskState::WaitingForAgent | TaskState::WaitingForPerson => "input-required",
        TaskState::Claimed => "working",
        other => other.as_str(),
    }
}

/// A negotiation's own state and its Bindu session status, for an A2A client
/// (`metadata.parley`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aNegotiationFacts)]
pub struct NegotiationFacts {
    /// Parley's state of the task (`waiting_for_agent`, `claimed`, ...).
    #[schema(value_type = String)]
    pub state: &'static str,
    /// `initiated` before the first turn, `ongoing`, `completed` when an opportunity came out,
    /// `rejected` otherwise.
    #[schema(value_type = String, pattern = "^(initiated|ongoing|completed|rejected)$")]
    pub session_status: &'static str,
}

/// An A2A artifact.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aArtifact)]
pub struct Artifact {
    /// Its id.
    pub artifact_id: Uuid,
    /// `negotiation-outcome` or `delegation-result`.
    pub name: String,
    /// `[{kind: "data", data: Outcome}]` (its `reasoning` as the reader may see it), or
    /// `[{kind: "data", data: output}]`.
    #[schema(value_type = Vec<serde_json::Value>)]
    pub parts: Value,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One data part: `[{kind: "data", data}]`, the parts of an input, an output or an outcome.
pub fn data_parts(data: impl Serialize) -> Value {
    serde_json::json!([{ "kind": "data", "data": data }])
}

/// One text part: `[{kind: "text", text}]`.
pub fn text_parts(text: &str) -> Value {
    serde_json::json!([{ "kind": "text", "text": text }])
}

/// The name of a completed delegation's (or attempt's) artifact.
pub const RESULT_ARTIFACT: &str = "delegation-result";

/// A stable id for a part of the task `task_id` named `what` (its message, its artifact): the
/// same on every read, different for every task.
pub fn derived_id(task_id: Uuid, what: &str) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new().chain_update(task_id.as_bytes()).chain_update(what.as_bytes()).finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The facts on an A2A task: a negotiation's or a delegation attempt's.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = A2aTaskMetadata)]
pub enum TaskMetadata {
    /// A negotiation.
    Negotiation(NegotiationMetadata),
    /// A delegation attempt.
    Attempt(AttemptMetadata),
    /// A delegation, as the A2A endpoint's task.
    Delegation(DelegationMetadata),
}

/// A delegation's facts on its A2A task, under `parley` (A2A leaves `metadata` to the server).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = A2aDelegationMetadata)]
pub struct DelegationMetadata {
    /// Parley's facts.
    pub parley: DelegationFacts,
}

/// What Parley knows of a delegation: its request, where it stands, and each attempt (each
/// target by the anonymous id the requester sees).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aDelegationFacts)]
pub struct DelegationFacts {
    /// The delegation's request id (`GET /api/delegations/{requestId}`).
    pub request_id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// Parley's status of the delegation: its last attempt's, or `canceled`.
    #[schema(value_type = String)]
    pub status: Status,
    /// Attempts made after the first.
    pub retries_used: i32,
    /// Most attempts after the first.
    pub max_retries: i32,
    /// How long each attempt may take, from its start.
    pub timeout_ms: i64,
    /// Its attempts, first first.
    pub attempts: Vec<super::delegations::AttemptOut>,
}

/// A delegation attempt's facts on its A2A task. The other side appears only by anonymous id.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aAttemptMetadata)]
pub struct AttemptMetadata {
    /// The delegation's request id.
    pub request_id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// 1-based.
    #[schema(minimum = 1)]
    pub attempt: i32,
    /// The attempt's own status: `request`, `accepted`, `completed`, `rejected`, `timeout`,
    /// `error` or `canceled`.
    #[schema(value_type = String, pattern = "^(request|accepted|completed|rejected|timeout|error|canceled)$")]
    pub attempt_status: Status,
    /// The requester, by the anonymous id its target sees.
    pub requester_anonymous_id: Uuid,
    /// The target, by the anonymous id the requester sees.
    pub target_anonymous_id: Uuid,
    /// How long the attempt may take from its start.
    pub timeout_ms: i64,
    /// Offered.
    pub created_at: DateTime<Utc>,
    /// Taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<DateTime<Utc>>,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// Why it ended without completing (the target's reason or error, or `rate_limited`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Negotiation facts on an A2A task.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aNegotiationMetadata)]
pub struct NegotiationMetadata {
    pub opportunity_id: Uuid,
    pub source_user_id: String,
    pub candidate_user_id: String,
    pub source_type: SideKind,
    pub candidate_type: SideKind,
    /// 0 = unlimited.
    pub max_turns: u32,
    pub turn_count: u32,
    /// Rendered for an A2A client only (the request named an `A2A-Version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parley: Option<NegotiationFacts>,
}

/// The A2A context of a negotiation (schema of `GET /api/conversations/{id}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aContext)]
pub struct Context {
    /// The context id.
    pub id: Uuid,
    /// The same id.
    pub context_id: Uuid,
    /// Always `context`.
    #[schema(pattern = "^context$")]
    pub kind: &'static str,
    /// The opportunity it belongs to.
    pub opportunity_id: Uuid,
    /// `agent:{userId}` participants, one per side.
    pub participants: Vec<Participant>,
    /// Its tasks.
    pub task_ids: Vec<Uuid>,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// A participant of an A2A context.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = A2aParticipant)]
pub struct Participant {
    /// `agent:{userId}`.
    pub id: String,
    /// The user.
    pub user_id: String,
    /// `source` or `candidate`.
    #[schema(value_type = crate::domain::Side)]
    pub side: String,
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn the_state_schema_names_every_state_a_task_can_show() {
        let schema = serde_json::to_value(TaskStateSchema::schema()).unwrap();
        let names: Vec<&str> = schema["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for state in TaskState::ALL {
            assert!(names.contains(&state.as_str()), "{} is missing from {names:?}", state.as_str());
        }
        for status in Status::ALL {
            assert!(names.contains(&status.a2a_state()), "{} is missing from {names:?}", status.a2a_state());
        }
    }

    #[test]
    fn a_message_serializes_with_its_role_and_without_absent_metadata() {
        let id = Uuid::nil();
        let message = Message::new(id, id, id, Role::User, data_parts(serde_json::json!({"q": 1})));
        let v = serde_json::to_value(&message).unwrap();
        assert_eq!(v["role"], "user");
        assert_eq!(v["kind"], "message");
        assert_eq!(v["parts"], serde_json::json!([{ "kind": "data", "data": {"q": 1} }]));
        assert!(v.get("metadata").is_none());
    }
}
