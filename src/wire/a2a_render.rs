//! A task and its updates, written in the caller's A2A protocol version (the A2A endpoint's
//! answers, and `GET /api/tasks/{id}` when the client names a version).
//!
//! The task is built once, in 0.3's names ([`crate::wire::a2a::Task`]: `kind` discriminators,
//! lower-case states, `user`/`agent` roles, which is also what `GET /api/tasks/{id}` answers).
//! A 1.0 caller gets ProtoJSON: no `kind`, states as `TASK_STATE_COMPLETED`, roles as
//! `ROLE_USER`, parts as `{data}` or `{text}`; a send's answer wrapped as `{task}` and each
//! stream event as `{task}`, `{statusUpdate}` or `{artifactUpdate}`. 0.3 streams mark the last
//! status update `final: true`.

use serde_json::{Map, Value, json};

use super::a2a;

/// A protocol version of A2A, as a task is written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A2A 1.0: ProtoJSON (`TASK_STATE_COMPLETED`, `ROLE_USER`, parts without `kind`, results
    /// wrapped as `{task}`).
    V1,
    /// A2A 0.3: `kind` discriminators, lower-case states, `final` on the last status update.
    V03,
}

impl Version {
    /// The version an `A2A-Version` header names: 1.x is 1.0, anything else 0.3 (the A2A
    /// servers' reading: absent or empty means 0.3).
    pub fn of_header(value: &str) -> Version {
        if value.trim().split('.').next() == Some("1") { Version::V1 } else { Version::V03 }
    }
}

/// The task as `version` writes it, with at most `history_length` of its newest history
/// messages (all when `None`).
pub fn task(task: &a2a::Task, version: Version, history_length: Option<usize>) -> Value {
    let mut value = serde_json::to_value(task).unwrap_or(Value::Null);
    if let (Some(n), Some(history)) = (history_length, value.get_mut("history").and_then(Value::as_array_mut)) {
        let skip = history.len().saturating_sub(n);
        history.drain(..skip);
    }
    match version {
        Version::V03 => value,
        Version::V1 => task_v1(value),
    }
}

/// A send's answer: the task, wrapped as `{task}` in 1.0.
pub fn sent(task_value: Value, version: Version) -> Value {
    match version {
        Version::V03 => task_value,
        Version::V1 => json!({ "task": task_value }),
    }
}

/// The first event of a stream: the task.
pub fn task_event(task_value: Value, version: Version) -> Value {
    sent(task_value, version)
}

/// A status update of `task`'s current status; `last` when the stream ends after it.
pub fn status_event(task: &a2a::Task, version: Version, last: bool) -> Value {
    let status = serde_json::to_value(&task.status).unwrap_or(Value::Null);
    match version {
        Version::V03 => json!({
            "kind": "status-update",
            "taskId": task.id,
            "contextId": task.context_id,
            "status": status,
            "final": last,
        }),
        Version::V1 => json!({
            "statusUpdate": { "taskId": task.id, "contextId": task.context_id, "status": status_v1(status) }
        }),
    }
}

/// An artifact update carrying `artifact` whole.
pub fn artifact_event(task: &a2a::Task, artifact: &a2a::Artifact, version: Version) -> Value {
    let artifact = serde_json::to_value(artifact).unwrap_or(Value::Null);
    match version {
        Version::V03 => json!({
            "kind": "artifact-update",
            "taskId": task.id,
            "contextId": task.context_id,
            "artifact": artifact,
            "append": false,
            "lastChunk": true,
        }),
        Version::V1 => json!({
            "artifactUpdate": {
                "taskId": task.id,
                "contextId": task.context_id,
                "artifact": artifact_v1(artifact),
                "append": false,
                "lastChunk": true,
            }
        }),
    }
}

/// A 1.0 state name: `input-required` is `TASK_STATE_INPUT_REQUIRED`.
pub fn state_v1(state: &str) -> String {
    format!("TASK_STATE_{}", state.replace('-', "_").to_ascii_uppercase())
}

/// A 0.3 state name, from either version's: `TASK_STATE_INPUT_REQUIRED` is `input-required`.
pub fn state_v03(state: &str) -> String {
    state.strip_prefix("TASK_STATE_").map_or_else(|| state.to_owned(), |rest| rest.to_lowercase().replace('_', "-"))
}

/// Whether a 0.3 status update in `state` (0.3's words) is its stream's last (`final`): the task
/// ended or waits for its requester.
pub fn final_v03(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "canceled" | "rejected" | "input-required" | "auth-required")
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn task_v1(value: Value) -> Value {
    let mut t = object(value);
    t.remove("kind");
    if let Some(status) = t.remove("status") {
        t.insert("status".into(), status_v1(status));
    }
    if let Some(Value::Array(history)) = t.remove("history") {
        t.insert("history".into(), Value::Array(history.into_iter().map(message_v1).collect()));
    }
    if let Some(Value::Array(artifacts)) = t.remove("artifacts") {
        t.insert("artifacts".into(), Value::Array(artifacts.into_iter().map(artifact_v1).collect()));
    }
    Value::Object(t)
}

fn status_v1(value: Value) -> Value {
    let mut s = object(value);
    if let Some(state) = s.get("state").and_then(Value::as_str).map(state_v1) {
        s.insert("state".into(), Value::String(state));
    }
    if let Some(message) = s.remove("message") {
        s.insert("message".into(), message_v1(message));
    }
    Value::Object(s)
}

fn message_v1(value: Value) -> Value {
    let mut m = object(value);
    m.remove("kind");
    if let Some(role) = m.get("role").and_then(Value::as_str) {
        let role = format!("ROLE_{}", role.to_ascii_uppercase());
        m.insert("role".into(), Value::String(role));
    }
    if let Some(parts) = m.remove("parts") {
        m.insert("parts".into(), parts_v1(parts));
    }
    Value::Object(m)
}

fn artifact_v1(value: Value) -> Value {
    let mut a = object(value);
    if let Some(parts) = a.remove("parts") {
        a.insert("parts".into(), parts_v1(parts));
    }
    Value::Object(a)
}

/// 1.0 parts carry no `kind`: a part is what its one content field says.
fn parts_v1(value: Value) -> Value {
    match value {
        Value::Array(parts) => Value::Array(
            parts
                .into_iter()
                .map(|p| {
                    let mut p = object(p);
                    p.remove("kind");
                    Value::Object(p)
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;

    fn sample() -> a2a::Task {
        let id = Uuid::now_v7();
        let message = |what: &str, role, parts| a2a::Message::new(a2a::derived_id(id, what), "ctx", id, role, parts);
        a2a::Task {
            id,
            context_id: "ctx".into(),
            kind: "task",
            status: a2a::TaskStatus {
                state: "input-required",
                timestamp: Utc::now(),
                message: Some(message("reason", a2a::Role::Agent, a2a::text_parts("why"))),
            },
            history: vec![
                message("one", a2a::Role::User, a2a::data_parts(json!({"n": 1}))),
                message("two", a2a::Role::Agent, a2a::data_parts(json!({"n": 2}))),
            ],
            artifacts: vec![a2a::Artifact {
                artifact_id: Uuid::nil(),
                name: a2a::RESULT_ARTIFACT.into(),
                parts: a2a::data_parts(json!({"out": true})),
                metadata: None,
            }],
            metadata: a2a::TaskMetadata::Negotiation(a2a::NegotiationMetadata {
                opportunity_id: Uuid::nil(),
                source_user_id: "a".into(),
                candidate_user_id: "b".into(),
                source_type: crate::domain::SideKind::System,
                candidate_type: crate::domain::SideKind::Personal,
                max_turns: 0,
                turn_count: 2,
                parley: None,
            }),
        }
    }

    #[test]
    fn version_1_0_is_protojson_and_0_3_keeps_its_kinds() {
        let t = sample();
        let v1 = task(&t, Version::V1, None);
        assert!(v1.get("kind").is_none());
        assert_eq!(v1["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(v1["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(v1["status"]["message"]["parts"], json!([{"text": "why"}]));
        assert_eq!(v1["history"][0]["role"], "ROLE_USER");
        assert!(v1["history"][0].get("kind").is_none());
        assert_eq!(v1["history"][0]["parts"], json!([{"data": {"n": 1}}]));
        assert_eq!(v1["artifacts"][0]["parts"], json!([{"data": {"out": true}}]));
        let v03 = task(&t, Version::V03, None);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "input-required");
        assert_eq!(v03["history"][0]["parts"][0]["kind"], "data");
        assert_eq!(sent(v1.clone(), Version::V1)["task"], v1);
    }

    #[test]
    fn history_length_keeps_the_newest_messages() {
        let t = sample();
        assert_eq!(task(&t, Version::V03, Some(1))["history"].as_array().unwrap().len(), 1);
        assert_eq!(task(&t, Version::V03, Some(1))["history"][0]["parts"][0]["data"]["n"], 2);
        assert_eq!(task(&t, Version::V03, Some(0))["history"], json!([]));
        assert_eq!(task(&t, Version::V03, Some(9))["history"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn status_updates_say_final_in_0_3_and_wrap_in_1_0() {
        let t = sample();
        let v03 = status_event(&t, Version::V03, true);
        assert_eq!((v03["kind"].as_str(), v03["final"].as_bool()), (Some("status-update"), Some(true)));
        let v1 = status_event(&t, Version::V1, true);
        assert_eq!(v1["statusUpdate"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert!(v1["statusUpdate"].get("final").is_none());
        let a = artifact_event(&t, &t.artifacts[0], Version::V1);
        assert_eq!(a["artifactUpdate"]["artifact"]["parts"], json!([{"data": {"out": true}}]));
    }

    #[test]
    fn every_state_has_its_1_0_name() {
        let names: Vec<String> =
            ["submitted", "working", "input-required", "completed", "canceled", "failed", "rejected"]
                .map(state_v1)
                .into();
        assert_eq!(
            names,
            [
                "TASK_STATE_SUBMITTED",
                "TASK_STATE_WORKING",
                "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_COMPLETED",
                "TASK_STATE_CANCELED",
                "TASK_STATE_FAILED",
                "TASK_STATE_REJECTED"
            ]
        );
    }
}
