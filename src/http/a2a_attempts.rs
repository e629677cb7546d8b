//! A delegation attempt as an A2A task: what `GET /api/tasks/{id}` answers when `{id}` is an
//! attempt's `taskId` (who may read it is `super::a2a`'s `TaskReader` to say: the parties and the
//! service). Each side sees the other only by anonymous id,
//! so the task names no agent and no owner. Its context is the delegation (all its attempts
//! share it); its one message is the delegation's input, from the requester (`user`); a
//! completed attempt carries the output as its `delegation-result` artifact, an attempt that
//! ended otherwise carries none, and its status carries the reason as an `agent` message (also
//! in `metadata.reason`).

use serde_json::{Value, json};
use uuid::Uuid;

use crate::directory::delegation::{Status, store::AttemptTask};

/// The name of a completed attempt's artifact.
pub const RESULT_ARTIFACT: &str = "delegation-result";

/// A stable id for a part of the task named `what` (its message, its artifact): the same on
/// every read, different for every task.
fn derived_id(task_id: Uuid, what: &str) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new().chain_update(task_id.as_bytes()).chain_update(what.as_bytes()).finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The A2A task of an attempt (the `A2aTask` schema).
pub fn task(t: &AttemptTask) -> Value {
    let (a, d) = (&t.attempt, &t.delegation);
    let context_id = d.delegation_id;
    let message = json!({
        "messageId": derived_id(a.task_id, "input"),
        "contextId": context_id,
        "taskId": a.task_id,
        "kind": "message",
        "role": "user",
        "parts": [{ "kind": "data", "data": d.input }],
    });
    let artifacts: Vec<Value> = match (a.status, &a.output) {
        (Status::Completed, Some(output)) => vec![json!({
            "artifactId": derived_id(a.task_id, RESULT_ARTIFACT),
            "name": RESULT_ARTIFACT,
            "parts": [{ "kind": "data", "data": output }],
        })],
        _ => Vec::new(),
    };
    let mut metadata = json!({
        "requestId": d.request_id,
        "taskType": d.task_type,
        "attempt": a.attempt,
        "attemptStatus": a.status,
        "requesterAnonymousId": a.requester_anonymous_id,
        "targetAnonymousId": a.target_anonymous_id,
        "timeoutMs": d.timeout_ms,
        "createdAt": a.created_at,
        "deadline": a.deadline,
    });
    let optional = [
        ("customType", d.custom_type.as_ref().map(|c| json!(c))),
        ("acceptedAt", a.accepted_at.map(|at| json!(at))),
        ("endedAt", a.ended_at.map(|at| json!(at))),
        ("reason", a.reason.as_ref().map(|r| json!(r))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            metadata[key] = value;
        }
    }
    let mut status = json!({
        "state": a.status.a2a_state(),
        "timestamp": a.ended_at.or(a.accepted_at).unwrap_or(a.created_at),
    });
    if let (true, Some(reason)) = (a.status.is_terminal() && a.status != Status::Completed, &a.reason) {
        status["message"] = json!({
            "messageId": derived_id(a.task_id, "reason"),
            "contextId": context_id,
            "taskId": a.task_id,
            "kind": "message",
            "role": "agent",
            "parts": [{ "kind": "text", "text": reason }],
        });
    }
    json!({
        "id": a.task_id,
        "contextId": context_id,
        "kind": "task",
        "status": status,
        "history": [message],
        "artifacts": artifacts,
        "metadata": metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let (t1, t2) = (Uuid::now_v7(), Uuid::now_v7());
        assert_eq!(derived_id(t1, "input"), derived_id(t1, "input"));
        assert_ne!(derived_id(t1, "input"), derived_id(t1, RESULT_ARTIFACT));
        assert_ne!(derived_id(t1, "input"), derived_id(t2, "input"));
        assert_eq!(derived_id(t1, "input").get_version_num(), 8);
    }
}
