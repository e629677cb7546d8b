//! A delegation attempt as an A2A task: what `GET /api/tasks/{id}` answers when `{id}` is an
//! attempt's `taskId` (who may read it is `super::a2a`'s `takes_part_in` to say: the parties and the
//! service). Each side sees the other only by anonymous id,
//! so the task names no agent and no owner. Its context is the delegation (all its attempts
//! share it); its one message is the delegation's input, from the requester (`user`); a
//! completed attempt carries the output as its `delegation-result` artifact, an attempt that
//! ended otherwise carries none, and its status carries the reason as an `agent` message (also
//! in `metadata.reason`).

use serde_json::json;

use crate::{
    directory::delegation::{Status, store::AttemptTask},
    wire::a2a::{self, RESULT_ARTIFACT, derived_id},
};

/// The A2A task of an attempt (the `A2aTask` schema).
pub fn task(t: &AttemptTask) -> a2a::Task {
    let (a, d) = (&t.attempt, &t.delegation);
    let context_id = d.delegation_id;
    let message =
        |what, role, parts| a2a::Message::new(derived_id(a.task_id, what), context_id, a.task_id, role, parts);
    let artifacts = match (a.status, &a.output) {
        (Status::Completed, Some(output)) => vec![a2a::Artifact {
            artifact_id: derived_id(a.task_id, RESULT_ARTIFACT),
            name: RESULT_ARTIFACT.to_owned(),
            parts: a2a::data_parts(output),
            metadata: None,
        }],
        _ => Vec::new(),
    };
    let reason = match (a.status.is_terminal() && a.status != Status::Completed, &a.reason) {
        (true, Some(reason)) => Some(message("reason", a2a::Role::Agent, json!([{ "kind": "text", "text": reason }]))),
        _ => None,
    };
    a2a::Task {
        id: a.task_id,
        context_id: context_id.to_string(),
        kind: "task",
        status: a2a::TaskStatus {
            state: a.status.a2a_state(),
            timestamp: a.ended_at.or(a.accepted_at).unwrap_or(a.created_at),
            message: reason,
        },
        history: vec![message("input", a2a::Role::User, a2a::data_parts(&d.input))],
        artifacts,
        metadata: a2a::TaskMetadata::Attempt(a2a::AttemptMetadata {
            request_id: d.request_id,
            task_type: d.task_type.clone(),
            custom_type: d.custom_type.clone(),
            attempt: a.attempt,
            attempt_status: a.status,
            requester_anonymous_id: a.requester_anonymous_id,
            target_anonymous_id: a.target_anonymous_id,
            timeout_ms: d.timeout_ms,
            created_at: a.created_at,
            accepted_at: a.accepted_at,
            ended_at: a.ended_at,
            deadline: a.deadline,
            reason: a.reason.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

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
