//! The delegation answers both adapters give: a delegation with its attempts and its result in
//! AgentLens's words (requester side), a request as its target sees it (inbox), and the small
//! answers of accept, complete, reject and fail. A cancel answers the delegation as a read does. Each side sees the other only by anonymous id.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::directory::delegation::{Attempt, InboxItem, Record, Status, store::Delegation};

/// One attempt, as the requester sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptOut {
    /// 1-based.
    pub attempt: i32,
    /// The attempt as an A2A task: `GET /api/tasks/{taskId}`.
    pub task_id: Uuid,
    /// The target, by anonymous id.
    pub target_anonymous_id: Uuid,
    /// `request`, `accepted`, `completed`, `rejected`, `timeout`, `error` or `canceled` (its
    /// requester canceled the delegation while this attempt was live).
    #[schema(pattern = "^(request|accepted|completed|rejected|timeout|error|canceled)$")]
    pub status: String,
    /// Why it ended, when it did not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Offered.
    pub created_at: DateTime<Utc>,
    /// Taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<DateTime<Utc>>,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// When it times out (from its start).
    pub deadline: DateTime<Utc>,
}

/// A delegation, as its requester sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationOut {
    /// The requester's id for it.
    pub request_id: Uuid,
    /// Its last attempt's status: `request`, `accepted`, `completed`, `rejected`, `timeout`,
    /// `error`, or `canceled` once its requester canceled it.
    #[schema(pattern = "^(request|accepted|completed|rejected|timeout|error|canceled)$")]
    pub status: String,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// The work.
    #[schema(value_type = Object)]
    pub input: Value,
    /// The result, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output: Option<Value>,
    /// Per attempt.
    pub timeout_ms: i64,
    /// Whether failed attempts go to the next target.
    pub fallback_enabled: bool,
    /// Most attempts after the first.
    pub max_retries: i32,
    /// Attempts made after the first.
    pub retries_used: i32,
    /// Asked.
    pub created_at: DateTime<Utc>,
    /// Ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Every attempt, first first.
    pub attempts: Vec<AttemptOut>,
}

/// A delegation's result in AgentLens's words (its `DelegationResult`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultOut {
    /// The requester's id for it.
    pub request_id: Uuid,
    /// `success` (completed), `rejected`, `timeout`, `error` or `canceled` (its requester
    /// canceled it; a word AgentLens does not have) once it ended; `pending` while it runs. (The
    /// delegation's own `status` keeps the phase: `request`, `accepted`, `completed`.)
    #[schema(pattern = "^(success|rejected|timeout|error|canceled|pending)$")]
    pub status: &'static str,
    /// The output, when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output: Option<Value>,
    /// From the request to its end, once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_time_ms: Option<i64>,
    /// Attempts made after the first.
    pub retries_used: i32,
}

/// A delegation: its result in AgentLens's words, and Parley's record of it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationAnswer {
    /// The result (`pending` until it ended).
    pub result: ResultOut,
    /// The delegation, with its attempts and their phases.
    pub delegation: DelegationOut,
}

/// An attempt as the requester sees it.
pub fn attempt_out(a: Attempt) -> AttemptOut {
    AttemptOut {
        attempt: a.attempt,
        task_id: a.task_id,
        target_anonymous_id: a.target_anonymous_id,
        status: a.status.as_str().to_owned(),
        reason: a.reason,
        created_at: a.created_at,
        accepted_at: a.accepted_at,
        ended_at: a.ended_at,
        deadline: a.deadline,
    }
}

/// A delegation with its attempts, as the requester sees it.
pub fn delegation_out(d: Delegation, attempts: Vec<Attempt>) -> DelegationOut {
    DelegationOut {
        request_id: d.request_id,
        status: d.status.as_str().to_owned(),
        task_type: d.task_type,
        custom_type: d.custom_type,
        input: d.input,
        output: d.output,
        timeout_ms: d.timeout_ms,
        fallback_enabled: d.fallback_enabled,
        max_retries: d.max_retries,
        retries_used: d.retries_used,
        created_at: d.created_at,
        ended_at: d.ended_at,
        attempts: attempts.into_iter().map(attempt_out).collect(),
    }
}

/// A delegation's status in AgentLens's words: its end (`success` for completed), or `pending`.
/// AgentLens has no cancel: a canceled delegation's result is `canceled`, a word of its own, so
/// that no client takes it for the target's refusal or failure.
fn result_status(status: Status) -> &'static str {
    match status {
        Status::Completed => "success",
        Status::Rejected => "rejected",
        Status::Timeout => "timeout",
        Status::Error => "error",
        Status::Canceled => "canceled",
        Status::Request | Status::Accepted => "pending",
    }
}

/// A delegation's answer: its result and its record.
pub fn answer(record: Record) -> DelegationAnswer {
    let d = record.delegation;
    let ended = d.ended_at.filter(|_| d.status.is_terminal());
    let result = ResultOut {
        request_id: d.request_id,
        status: result_status(d.status),
        output: d.output.clone(),
        execution_time_ms: ended.map(|ended| (ended - d.created_at).num_milliseconds().max(0)),
        retries_used: d.retries_used,
    };
    DelegationAnswer { result, delegation: delegation_out(d, record.attempts) }
}

/// One request as its target sees it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboundOut {
    /// The delegation's request id (what the target's calls take).
    pub request_id: Uuid,
    /// Which attempt of the delegation this is.
    pub attempt: i32,
    /// The attempt as an A2A task: `GET /api/tasks/{taskId}`.
    pub task_id: Uuid,
    /// The requester, by anonymous id.
    pub requester_anonymous_id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// The work.
    #[schema(value_type = Object)]
    pub input: Value,
    /// How long the attempt may take from its start.
    pub timeout_ms: i64,
    /// The attempt's status: `request`, `accepted`, `completed`, `rejected`, `timeout`, `error`
    /// or `canceled`.
    #[schema(pattern = "^(request|accepted|completed|rejected|timeout|error|canceled)$")]
    pub status: String,
    /// Its output, once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output: Option<Value>,
    /// Why it ended, when it did not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Offered.
    pub created_at: DateTime<Utc>,
    /// When it times out.
    pub deadline: DateTime<Utc>,
}

/// A request as its target sees it.
pub fn inbound_out(i: InboxItem) -> InboundOut {
    InboundOut {
        request_id: i.request_id,
        attempt: i.attempt,
        task_id: i.task_id,
        requester_anonymous_id: i.requester_anonymous_id,
        task_type: i.task_type,
        custom_type: i.custom_type,
        input: i.input,
        timeout_ms: i.timeout_ms,
        status: i.status.as_str().to_owned(),
        output: i.output,
        reason: i.reason,
        created_at: i.created_at,
        deadline: i.deadline,
    }
}

/// The inbox answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct InboxOut {
    /// Attempts waiting for this agent, oldest first (at most 100).
    pub requests: Vec<InboundOut>,
    /// How many wait.
    pub total: i64,
}

/// The accept answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedOut {
    /// Always true.
    pub accepted: bool,
    /// The fenced token of this acceptance: `complete` and `fail` may present it.
    pub claim_token: String,
    /// When the attempt times out.
    pub deadline: DateTime<Utc>,
}

/// The answer of `complete`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CompletedOut {
    /// Always true.
    pub completed: bool,
}

/// The answer of `reject` and `fail`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EndedOut {
    /// Always true.
    pub ended: bool,
}
