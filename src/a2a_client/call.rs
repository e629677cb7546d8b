//! Calling an agent's A2A endpoint: the three JSON-RPC calls Parley makes (send a message, read
//! the task it started, cancel that task) written in the dialect the agent's card chose, and what
//! the agent answers read back as one [`RemoteTask`] whatever the dialect.
//!
//! The dialects differ only in their words:
//!
//! | | 1.0 | 0.3 | Bindu |
//! |---|---|---|---|
//! | methods | `SendMessage`, `GetTask`, `CancelTask` | `message/send`, `tasks/get`, `tasks/cancel` | as 0.3 |
//! | header | `A2A-Version: 1.0` | none | none |
//! | task id in get/cancel | `id` | `id` | `taskId` |
//! | parts | no `kind` | `kind` | `kind`; a data part also has `text` |
//! | non-blocking send | `returnImmediately: true` | `blocking: false` | `blocking: false`, and the client names the task (`taskId`) |
//! | states | `TASK_STATE_WORKING` | `working` | `working` |
//! | answer's names | camelCase | camelCase | snake_case |
//!
//! A send is never blocking: the agent answers with a task (followed by reads until it ends) or
//! with a message (the answer itself). The message id Parley sends is derived from what is sent
//! (an attempt, a turn), so a send repeated after a crash carries the same id; it is also the
//! message's context id, and Bindu's task id. No agent drops a repeated message by its id (the
//! SDK's server starts a second task; Bindu's runs it again, or refuses a finished task), so a
//! repeat first looks the task up ([`lookup`]): 1.0 by listing the context's tasks, Bindu by
//! reading the task it was told to make. 0.3 has no way to ask.
//!
//! The output of a task is the first data part of its last artifact that has one; else the text
//! of its last artifact, read as JSON when it is JSON (Bindu answers a text artifact `result`
//! holding JSON). The text of its status message (why it failed) is kept to its first
//! [`MAX_MESSAGE_CHARS`] characters, and its status's `timestamp`, when it has one, says when
//! it reached its state. This module makes no call itself: [`super::outbound`] does, within its
//! limits.

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::card::Dialect;

/// A message Parley sends to an agent.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    /// The message id, stable for what is sent (a repeat after a crash carries the same one);
    /// also its context id, so that a 1.0 agent's task list finds the task it started.
    pub message_id: Uuid,
    /// The data part.
    pub data: &'a Value,
    /// One line of text beside it (what the data is and how to answer).
    pub text: &'a str,
    /// `metadata.parley` of the message.
    pub parley: Value,
}

/// A JSON-RPC call to make: its method and params.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The method, in the dialect's words.
    pub method: &'static str,
    /// The params object.
    pub params: Value,
}

/// The most characters of a task's status message that are kept (the reason an attempt records
/// is no longer).
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// The output modes Parley accepts.
const OUTPUT_MODES: [&str; 2] = ["application/json", "text/plain"];

/// The non-blocking send of `m` in `dialect`.
pub fn send(dialect: Dialect, m: &Outgoing<'_>) -> Request {
    let metadata = json!({ "parley": m.parley });
    match dialect {
        Dialect::V1_0 => Request {
            method: "SendMessage",
            params: json!({
                "message": {
                    "messageId": m.message_id.to_string(),
                    "contextId": m.message_id.to_string(),
                    "role": "ROLE_USER",
                    "parts": [{"data": m.data, "mediaType": "application/json"}, {"text": m.text}],
                    "metadata": metadata,
                },
                "configuration": {"acceptedOutputModes": OUTPUT_MODES, "returnImmediately": true},
                "metadata": metadata,
            }),
        },
        Dialect::V0_3 => Request {
            method: "message/send",
            params: json!({
                "message": {
                    "kind": "message",
                    "messageId": m.message_id.to_string(),
                    "contextId": m.message_id.to_string(),
                    "role": "user",
                    "parts": [{"kind": "data", "data": m.data}, {"kind": "text", "text": m.text}],
                    "metadata": metadata,
                },
                "configuration": {"acceptedOutputModes": OUTPUT_MODES, "blocking": false},
                "metadata": metadata,
            }),
        },
        Dialect::Bindu => {
            // 0.3's send with what Bindu also requires: the task named by Parley (the message
            // id), a `text` beside the data part's data, and no metadata outside the message.
            let mut bindu = send(Dialect::V0_3, m);
            bindu.params["message"]["taskId"] = json!(m.message_id.to_string());
            bindu.params["message"]["parts"][0]["text"] = json!(m.data.to_string());
            if let Some(params) = bindu.params.as_object_mut() {
                params.remove("metadata");
            }
            bindu
        }
    }
}

/// The read of the agent's task `task_id`.
pub fn get(dialect: Dialect, task_id: &str) -> Request {
    match dialect {
        Dialect::V1_0 => Request { method: "GetTask", params: json!({"id": task_id, "historyLength": 0}) },
        Dialect::V0_3 => Request { method: "tasks/get", params: json!({"id": task_id, "historyLength": 0}) },
        Dialect::Bindu => Request { method: "tasks/get", params: json!({"taskId": task_id}) },
    }
}

/// The look-up of the task a message `message_id` may already have started (a send repeated
/// after a crash looks first): 1.0 lists the tasks of the message's context (Parley makes the
/// context id the message id); Bindu reads the task Parley named (the message id); 0.3 has no
/// way to ask, so `None`.
pub fn lookup(dialect: Dialect, message_id: Uuid) -> Option<Request> {
    match dialect {
        Dialect::V1_0 => Some(Request {
            method: "ListTasks",
            params: json!({"contextId": message_id.to_string(), "pageSize": 1, "includeArtifacts": true, "historyLength": 0}),
        }),
        Dialect::Bindu => Some(get(Dialect::Bindu, &message_id.to_string())),
        Dialect::V0_3 => None,
    }
}

/// The task a [`lookup`] found, if any: 1.0 answers a list (empty when the message started
/// none), Bindu the task itself.
pub fn read_lookup(dialect: Dialect, result: &Value) -> Result<Option<RemoteTask>, Unreadable> {
    match result.get("tasks") {
        Some(Value::Array(tasks)) => tasks.first().map(|t| read_task(dialect, t)).transpose(),
        Some(_) => Err(Unreadable("the task list is not a list".into())),
        None => read_task(dialect, result).map(Some),
    }
}

/// The cancel of the agent's task `task_id`.
pub fn cancel(dialect: Dialect, task_id: &str) -> Request {
    match dialect {
        Dialect::V1_0 => Request { method: "CancelTask", params: json!({"id": task_id}) },
        Dialect::V0_3 => Request { method: "tasks/cancel", params: json!({"id": task_id}) },
        Dialect::Bindu => Request { method: "tasks/cancel", params: json!({"taskId": task_id}) },
    }
}

/// The headers a call in `dialect` carries beside the content type.
pub fn version_header(dialect: Dialect) -> Option<(&'static str, &'static str)> {
    match dialect {
        Dialect::V1_0 => Some(("A2A-Version", "1.0")),
        Dialect::V0_3 | Dialect::Bindu => None,
    }
}

/// A task's state, in every dialect's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteState {
    /// Taken, not started.
    Submitted,
    /// Being worked on.
    Working,
    /// The agent asks for more input (Parley sends none: read as a failure to answer).
    InputRequired,
    /// The agent asks for authentication (read as a failure).
    AuthRequired,
    /// Done, with its artifacts.
    Completed,
    /// Cancelled.
    Canceled,
    /// Failed.
    Failed,
    /// Refused by the agent.
    Rejected,
    /// A state this reading does not know.
    Unknown,
}

impl RemoteState {
    /// Reads `TASK_STATE_INPUT_REQUIRED`, `input-required` or `input_required` alike.
    pub fn parse(raw: &str) -> RemoteState {
        let name = raw.strip_prefix("TASK_STATE_").unwrap_or(raw).to_ascii_lowercase().replace('_', "-");
        match name.as_str() {
            "submitted" => RemoteState::Submitted,
            "working" => RemoteState::Working,
            "input-required" => RemoteState::InputRequired,
            "auth-required" => RemoteState::AuthRequired,
            "completed" => RemoteState::Completed,
            "canceled" | "cancelled" => RemoteState::Canceled,
            "failed" => RemoteState::Failed,
            "rejected" => RemoteState::Rejected,
            _ => RemoteState::Unknown,
        }
    }

    /// Whether the agent is still on it (Parley keeps reading).
    pub fn is_running(self) -> bool {
        matches!(self, RemoteState::Submitted | RemoteState::Working | RemoteState::Unknown)
    }
}

/// What a send or a read answered: the agent's task as far as Parley needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTask {
    /// The agent's id of the task (`None` when the agent answered a message, not a task).
    pub id: Option<String>,
    /// Its state (a message answer is `Completed`).
    pub state: RemoteState,
    /// The output, once there is one (see the module docs).
    pub output: Option<Value>,
    /// The text of its status message, if any (why it failed, or what it asks), at most
    /// [`MAX_MESSAGE_CHARS`] characters.
    pub message: Option<String>,
    /// When it reached its state, as its status's `timestamp` says (none when the agent does
    /// not say, or says it in no form this reading knows).
    pub at: Option<DateTime<Utc>>,
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

/// The answer to a send: a task (1.0 `{task}`, 0.3 and Bindu a task object) or a message
/// (1.0 `{message}`, 0.3 a message object).
pub fn read_send(dialect: Dialect, result: &Value) -> Result<RemoteTask, Unreadable> {
    let object = result.as_object().ok_or_else(|| Unreadable("the send's result is not an object".into()))?;
    if let Some(task) = object.get("task") {
        return read_task(dialect, task);
    }
    if let Some(message) = object.get("message") {
        return Ok(read_message(message));
    }
    match object.get("kind").and_then(Value::as_str) {
        Some("message") => Ok(read_message(result)),
        _ if object.contains_key("status") => read_task(dialect, result),
        _ if object.contains_key("parts") => Ok(read_message(result)),
        _ => Err(Unreadable("the send's result is neither a task nor a message".into())),
    }
}

/// A task object, in any dialect's names (a 1.0 GetTask result, a 0.3 or Bindu task). Bindu
/// wraps a handler's value as `{"result": value}` in its artifact named `result`, and tells a
/// failure only in the task's last agent message: both are read back to what the agent said.
pub fn read_task(dialect: Dialect, task: &Value) -> Result<RemoteTask, Unreadable> {
    let task = task.get("task").filter(|t| t.is_object()).unwrap_or(task);
    let object = task.as_object().ok_or_else(|| Unreadable("the task is not an object".into()))?;
    let id = match object.get("id") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => s.clone(),
        _ => return Err(Unreadable("the task has no id".into())),
    };
    let status = object.get("status").and_then(Value::as_object);
    let state = status
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .map(RemoteState::parse)
        .ok_or_else(|| Unreadable("the task has no status.state".into()))?;
    let message = status.and_then(|s| s.get("message")).and_then(|m| text_of(parts_of(m))).or_else(|| {
        let history = object.get("history").and_then(Value::as_array)?;
        let last = history
            .iter()
            .rev()
            .find(|m| matches!(m.get("role").and_then(Value::as_str), Some("agent" | "ROLE_AGENT")))?;
        text_of(parts_of(last))
    });
    let message =
        message.map(|m| if m.len() > MAX_MESSAGE_CHARS { m.chars().take(MAX_MESSAGE_CHARS).collect() } else { m });
    let at = status.and_then(|s| s.get("timestamp")).and_then(Value::as_str).and_then(timestamp);
    let mut output = object.get("artifacts").and_then(Value::as_array).and_then(|a| output_of(a));
    if dialect == Dialect::Bindu
        && let Some(Value::Object(wrapped)) = &output
        && wrapped.len() == 1
        && let Some(value) = wrapped.get("result")
    {
        output = Some(value.clone());
    }
    Ok(RemoteTask { id: Some(id), state, output, message, at })
}

/// A status timestamp: RFC 3339 (`2026-01-01T12:00:00.5Z`, `...+02:00`), or ISO 8601 without an
/// offset, read as UTC (Python's `datetime.isoformat()` of a naive time).
fn timestamp(raw: &str) -> Option<DateTime<Utc>> {
    let raw = raw.trim();
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|t| t.and_utc()))
}

fn read_message(message: &Value) -> RemoteTask {
    let parts = parts_of(message);
    let output = data_of(parts).or_else(|| text_of(parts).map(|t| json_or_text(&t)));
    RemoteTask { id: None, state: RemoteState::Completed, output, message: None, at: None }
}

/// The parts of a message or artifact (none when it has no list).
fn parts_of(v: &Value) -> &[Value] {
    v.get("parts").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The first data part's data: `{"data": ...}` in 1.0, `{"kind": "data", "data": ...}` in 0.3.
fn data_of(parts: &[Value]) -> Option<Value> {
    parts.iter().find_map(|p| {
        let kind = p.get("kind").and_then(Value::as_str);
        if kind.is_some_and(|k| k != "data") {
            return None;
        }
        p.get("data").cloned()
    })
}

/// The text parts, joined with a blank line (none when there are none).
fn text_of(parts: &[Value]) -> Option<String> {
    let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// Text that is JSON, as that JSON; any other text as a JSON string.
fn json_or_text(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The output of a task's artifacts: the first data part of the last artifact that has one;
/// else the last artifact's text (JSON when it is).
pub fn output_of(artifacts: &[Value]) -> Option<Value> {
    artifacts
        .iter()
        .rev()
        .find_map(|a| data_of(parts_of(a)))
        .or_else(|| artifacts.iter().rev().find_map(|a| text_of(parts_of(a))).map(|t| json_or_text(&t)))
}

/// A JSON-RPC error object's code and message.
pub fn error_of(body: &Map<String, Value>) -> Option<(i64, String)> {
    let error = body.get("error")?.as_object()?;
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = error.get("message").and_then(Value::as_str).unwrap_or("").chars().take(200).collect();
    Some((code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(data: &Value) -> Outgoing<'_> {
        Outgoing { message_id: Uuid::nil(), data, text: "one line", parley: json!({"requestId": "r"}) }
    }

    #[test]
    fn each_dialect_sends_in_its_own_words() {
        let data = json!({"q": 1});
        let v1 = send(Dialect::V1_0, &outgoing(&data));
        assert_eq!(v1.method, "SendMessage");
        assert_eq!(v1.params["message"]["role"], "ROLE_USER");
        assert_eq!(v1.params["message"]["parts"][0], json!({"data": {"q": 1}, "mediaType": "application/json"}));
        assert_eq!(v1.params["configuration"]["returnImmediately"], true);
        let v03 = send(Dialect::V0_3, &outgoing(&data));
        assert_eq!(v03.method, "message/send");
        assert_eq!(v03.params["message"]["parts"][0], json!({"kind": "data", "data": {"q": 1}}));
        assert_eq!(v03.params["configuration"]["blocking"], false);
        assert!(v03.params["message"].get("taskId").is_none());
        let bindu = send(Dialect::Bindu, &outgoing(&data));
        assert_eq!(bindu.params["message"]["taskId"], Uuid::nil().to_string());
        assert_eq!(bindu.params["message"]["parts"][0]["text"], "{\"q\":1}");
        assert_eq!(bindu.params["message"]["metadata"]["parley"]["requestId"], "r");
        assert_eq!(get(Dialect::Bindu, "t").params, json!({"taskId": "t"}));
        assert_eq!(cancel(Dialect::V1_0, "t"), Request { method: "CancelTask", params: json!({"id": "t"}) });
    }

    #[test]
    fn states_read_alike_in_every_spelling() {
        assert_eq!(RemoteState::parse("TASK_STATE_INPUT_REQUIRED"), RemoteState::InputRequired);
        assert_eq!(RemoteState::parse("input-required"), RemoteState::InputRequired);
        assert_eq!(RemoteState::parse("completed"), RemoteState::Completed);
        assert_eq!(RemoteState::parse("TASK_STATE_CANCELED"), RemoteState::Canceled);
        assert_eq!(RemoteState::parse("nonsense"), RemoteState::Unknown);
        assert!(RemoteState::Submitted.is_running() && !RemoteState::Failed.is_running());
    }

    #[test]
    fn a_task_is_read_in_1_0_0_3_and_bindu_names() {
        let v1 = json!({"task": {"id": "a", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "x", "parts": [{"text": "hi"}, {"data": {"ok": true}}]}]}});
        let t = read_send(Dialect::V1_0, &v1).unwrap();
        assert_eq!(
            (t.id.as_deref(), t.state, t.output),
            (Some("a"), RemoteState::Completed, Some(json!({"ok": true})))
        );
        let v03 = json!({"kind": "task", "id": "b", "status": {"state": "failed",
            "message": {"kind": "message", "parts": [{"kind": "text", "text": "no disk"}]}}});
        let t = read_send(Dialect::V0_3, &v03).unwrap();
        assert_eq!((t.state, t.message.as_deref(), t.output), (RemoteState::Failed, Some("no disk"), None));
        let bindu = json!({"kind": "task", "id": "c", "context_id": "d", "status": {"state": "completed"},
            "artifacts": [{"name": "result", "parts": [{"kind": "text", "text": "{\"n\": 2}"}]}]});
        assert_eq!(read_task(Dialect::Bindu, &bindu).unwrap().output, Some(json!({"n": 2})));
        // Bindu wraps a value as {"result": value}, and says why it failed in its last message.
        let wrapped = json!({"kind": "task", "id": "e", "status": {"state": "completed"},
            "artifacts": [{"name": "result", "parts": [{"kind": "data", "data": {"result": {"summary": "s"}}}]}]});
        assert_eq!(read_task(Dialect::Bindu, &wrapped).unwrap().output, Some(json!({"summary": "s"})));
        assert_eq!(read_task(Dialect::V0_3, &wrapped).unwrap().output, Some(json!({"result": {"summary": "s"}})));
        let failed = json!({"kind": "task", "id": "f", "status": {"state": "failed"}, "history": [
            {"role": "user", "parts": [{"kind": "text", "text": "do it"}]},
            {"role": "agent", "parts": [{"kind": "text", "text": "Task execution failed: no disk"}]}]});
        assert_eq!(
            read_task(Dialect::Bindu, &failed).unwrap().message.as_deref(),
            Some("Task execution failed: no disk")
        );
        let message = json!({"message": {"messageId": "m", "parts": [{"data": [1, 2]}]}});
        let t = read_send(Dialect::V1_0, &message).unwrap();
        assert_eq!((t.id, t.state, t.output), (None, RemoteState::Completed, Some(json!([1, 2]))));
        assert!(read_send(Dialect::V1_0, &json!({"nothing": 1})).is_err());
        assert!(read_task(Dialect::V1_0, &json!({"status": {"state": "working"}})).is_err());
        // A look-up finds the task a message started, or none.
        let listed = json!({"tasks": [{"id": "g", "status": {"state": "TASK_STATE_WORKING"}}], "totalSize": 1});
        assert_eq!(read_lookup(Dialect::V1_0, &listed).unwrap().unwrap().id.as_deref(), Some("g"));
        assert_eq!(read_lookup(Dialect::V1_0, &json!({"tasks": []})).unwrap(), None);
        assert!(lookup(Dialect::V0_3, Uuid::nil()).is_none());
    }

    #[test]
    fn a_status_says_when_and_its_message_is_kept_short() {
        let task = |status: Value| json!({"id": "t", "status": status});
        let read = |status: Value| read_task(Dialect::V1_0, &task(status)).unwrap();
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let done = read(json!({"state": "TASK_STATE_COMPLETED", "timestamp": "2026-03-01T10:00:00.250Z"}));
        assert_eq!(done.at, Some(at("2026-03-01T10:00:00.250Z")));
        let offset = read(json!({"state": "completed", "timestamp": "2026-03-01T12:00:00+02:00"}));
        assert_eq!(offset.at, Some(at("2026-03-01T10:00:00Z")));
        let naive = read(json!({"state": "completed", "timestamp": "2026-03-01T10:00:00.123456"}));
        assert_eq!(naive.at, Some(at("2026-03-01T10:00:00.123456Z")));
        assert_eq!(read(json!({"state": "completed", "timestamp": "yesterday"})).at, None);
        assert_eq!(read(json!({"state": "completed"})).at, None);
        let said = "no disk ".repeat(120_000);
        let failed = read(json!({"state": "failed", "message": {"role": "ROLE_AGENT", "parts": [{"text": said}]}}));
        assert_eq!(failed.message.unwrap().chars().count(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn the_output_is_the_last_artifacts_data_else_its_text() {
        let artifacts = [
            json!({"parts": [{"kind": "data", "data": {"first": 1}}]}),
            json!({"parts": [{"kind": "text", "text": "not json"}]}),
        ];
        assert_eq!(output_of(&artifacts), Some(json!({"first": 1})));
        assert_eq!(output_of(&artifacts[1..]), Some(json!("not json")));
        assert_eq!(output_of(&[]), None);
    }
}
