//! A delegation as an A2A task: what the A2A endpoint's `GetTask`, sends and streams answer,
//! and what `GET /api/tasks/{id}` answers for a delegation's id.
//!
//! The task's id is the delegation's id; its context is the `contextId` of the message that
//! asked for it, else the delegation's id. Its state follows the delegation's open or last
//! attempt ([`state`]): offered to its first target, `submitted`; taken, or offered again to a
//! fallback target, `working`; `completed`, with the output as the `delegation-result` data
//! artifact; `rejected` when the last target declined; `failed` after a timeout or an error,
//! with the reason as the status message; `canceled` by its requester. Its one history message
//! is the requester's input; `metadata.parley` holds the request id, the task type, the
//! retries and every attempt (each target by the anonymous id the requester sees).
//!
//! Pure: the record is read by the caller.

use chrono::{DateTime, Utc};

use crate::{
    directory::delegation::{Attempt, Delegation, Status},
    wire::a2a::{self, DelegationFacts, DelegationMetadata, RESULT_ARTIFACT, Role, TaskMetadata, derived_id},
};

/// The A2A state of a delegation: its status, and for a delegation offered again after a
/// failed attempt, `working` (the work goes on, at another target).
pub fn state(d: &Delegation) -> &'static str {
    match d.status {
        Status::Request if d.retries_used > 0 => "working",
        other => other.a2a_state(),
    }
}

/// When the delegation last changed: its end, else its newest attempt's latest move.
fn changed_at(d: &Delegation, attempts: &[Attempt]) -> DateTime<Utc> {
    let latest = attempts.iter().flat_map(|a| [Some(a.created_at), a.accepted_at, a.ended_at]).flatten().max();
    d.ended_at.or(latest).unwrap_or(d.created_at)
}

/// Why a delegation that ended without completing ended, for its status message.
fn why(d: &Delegation, attempts: &[Attempt]) -> Option<String> {
    let last = attempts.last();
    match d.status {
        Status::Completed | Status::Request | Status::Accepted => None,
        Status::Canceled => Some("canceled by the requester".to_owned()),
        status => Some(match last.and_then(|a| a.reason.clone()) {
            Some(reason) => reason,
            None if status == Status::Timeout => "the last attempt timed out".to_owned(),
            None if status == Status::Rejected => "the last target declined".to_owned(),
            None => "the last attempt failed".to_owned(),
        }),
    }
}

/// The delegation's A2A task (0.3 names; the A2A endpoint writes it in either version).
pub fn task(d: &Delegation, attempts: &[Attempt]) -> a2a::Task {
    let id = d.delegation_id;
    let context_id = d.context_id.clone().unwrap_or_else(|| id.to_string());
    let message = |what, role, parts| a2a::Message::new(derived_id(id, what), &context_id, id, role, parts);
    let artifacts = match (d.status, &d.output) {
        (Status::Completed, Some(output)) => vec![a2a::Artifact {
            artifact_id: derived_id(id, RESULT_ARTIFACT),
            name: RESULT_ARTIFACT.to_owned(),
            parts: a2a::data_parts(output),
            metadata: None,
        }],
        _ => Vec::new(),
    };
    let status = a2a::TaskStatus {
        state: state(d),
        timestamp: changed_at(d, attempts),
        message: why(d, attempts).map(|reason| message("reason", Role::Agent, a2a::text_parts(&reason))),
    };
    a2a::Task {
        id,
        context_id: context_id.clone(),
        kind: "task",
        status,
        history: vec![message("input", Role::User, a2a::data_parts(&d.input))],
        artifacts,
        metadata: TaskMetadata::Delegation(DelegationMetadata {
            parley: DelegationFacts {
                request_id: d.request_id,
                task_type: d.task_type.clone(),
                custom_type: d.custom_type.clone(),
                status: d.status,
                retries_used: d.retries_used,
                max_retries: d.max_retries,
                timeout_ms: d.timeout_ms,
                attempts: attempts.iter().cloned().map(super::delegations::attempt_out).collect(),
            },
        }),
    }
}

/// What a stream tells apart: the state, and which attempt is open (a fallback to another
/// target is news even when the state stays `working`).
pub fn progress(d: &Delegation, attempts: &[Attempt]) -> (&'static str, usize, Option<Status>) {
    (state(d), attempts.len(), attempts.last().map(|a| a.status))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn delegation(status: Status, retries_used: i32) -> Delegation {
        Delegation {
            delegation_id: Uuid::now_v7(),
            request_id: Uuid::new_v4(),
            requester_agent_id: Uuid::new_v4(),
            task_type: "summarization".into(),
            custom_type: None,
            input: json!({"text": "x"}),
            requested_target: None,
            timeout_ms: 30_000,
            fallback_enabled: true,
            max_retries: 3,
            retries_used,
            status,
            output: (status == Status::Completed).then(|| json!({"summary": "y"})),
            created_at: Utc::now(),
            ended_at: status.is_terminal().then(Utc::now),
            context_id: None,
        }
    }

    #[test]
    fn the_state_follows_the_open_or_last_attempt() {
        let table: Vec<(Status, i32, &str)> = vec![
            (Status::Request, 0, "submitted"),
            (Status::Request, 1, "working"),
            (Status::Accepted, 0, "working"),
            (Status::Accepted, 2, "working"),
            (Status::Completed, 0, "completed"),
            (Status::Rejected, 0, "rejected"),
            (Status::Timeout, 1, "failed"),
            (Status::Error, 0, "failed"),
            (Status::Canceled, 0, "canceled"),
        ];
        for (status, retries, expected) in table {
            assert_eq!(state(&delegation(status, retries)), expected, "{status:?} after {retries} retries");
        }
        // Every status has a state, and a live one is a live task.
        for status in Status::ALL {
            let s = state(&delegation(status, 0));
            assert_eq!(status.is_terminal(), !matches!(s, "submitted" | "working"), "{status:?}");
        }
    }

    #[test]
    fn a_completed_task_carries_the_output_and_a_failed_one_the_reason() {
        let done = task(&delegation(Status::Completed, 0), &[]);
        assert_eq!(done.artifacts.len(), 1);
        assert_eq!(done.artifacts[0].name, RESULT_ARTIFACT);
        assert_eq!(done.artifacts[0].parts, json!([{"kind": "data", "data": {"summary": "y"}}]));
        assert!(done.status.message.is_none());
        let failed = task(&delegation(Status::Timeout, 0), &[]);
        assert!(failed.artifacts.is_empty());
        let reason = failed.status.message.expect("a reason");
        assert_eq!(reason.parts, json!([{"kind": "text", "text": "the last attempt timed out"}]));
    }

    #[test]
    fn the_context_is_the_messages_else_the_delegations_id() {
        let mut d = delegation(Status::Request, 0);
        assert_eq!(task(&d, &[]).context_id, d.delegation_id.to_string());
        d.context_id = Some("ctx-1".into());
        let t = task(&d, &[]);
        assert_eq!(t.context_id, "ctx-1");
        assert_eq!(t.history[0].context_id, "ctx-1");
        assert_eq!(t.history[0].role, Role::User);
    }
}
