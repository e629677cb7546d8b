//! A send's params read as a delegation request.
//!
//! The message carries one data part whose `data` is the body `POST /api/agents/delegate`
//! takes, without `agentId` (the key's agent is the requester) and `requestId` (the message's
//! `messageId` gives it: a UUID as it is, else the UUIDv5 of the requester's id and the
//! messageId, so that a resend of the same message is the same delegation, and another body
//! under it is refused `request_id_reused`). Text parts beside it are ignored. Numbers may
//! arrive as doubles (`20000.0`): whole ones are read as integers, in the envelope and in
//! `input` (`crate::directory::delegation::numbers`). Both versions' shapes are read: 1.0 parts are `{data}`, 0.3 parts
//! `{kind: "data", data}`; 1.0 blocks unless `configuration.returnImmediately`, 0.3 unless
//! `configuration.blocking` is false.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::rpc::RpcError;
use crate::{
    directory::delegation::{DelegationError, RawRequest, Request, numbers::integral_doubles_as_integers},
    error_code::ErrorCode,
};

/// The longest `messageId` or `contextId` taken.
pub const MAX_ID_LEN: usize = 256;

/// The fields a data part may hold.
const FIELDS: [&str; 7] =
    ["taskType", "customType", "input", "targetAnonymousId", "timeoutMs", "fallbackEnabled", "maxRetries"];

/// A send, read.
#[derive(Debug, Clone)]
pub struct Send {
    /// The delegation it asks for (its request id from the message id).
    pub request: Request,
    /// Whether the answer waits until the task ends (or the long-poll limit).
    pub blocking: bool,
    /// How many history messages the answer carries (all when `None`).
    pub history_length: Option<usize>,
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::invalid_params(ErrorCode::InvalidBody, message)
}

/// An optional string field of `object`, at most [`MAX_ID_LEN`] characters.
fn id_field(object: &Map<String, Value>, name: &str, at: &str) -> Result<Option<String>, RpcError> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_ID_LEN => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{at}.{name} must be a non-empty string of at most {MAX_ID_LEN} characters"))),
    }
}

/// `historyLength` of `object`: a whole number from 0, or absent.
pub fn history_length(object: Option<&Map<String, Value>>) -> Result<Option<usize>, RpcError> {
    match object.and_then(|o| o.get("historyLength")) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|n| n.fract() == 0.0 && (0.0..=1e6).contains(n))
            .map(|n| Some(n as usize))
            .ok_or_else(|| invalid("historyLength must be a whole number from 0")),
    }
}

/// The request id a message id gives, for `requester`.
pub fn request_id(requester: Uuid, message_id: &str) -> Uuid {
    Uuid::parse_str(message_id).unwrap_or_else(|_| Uuid::new_v5(&requester, message_id.as_bytes()))
}

/// Reads a send's params for `requester`; `min_timeout_ms` is the shortest `timeoutMs` taken.
pub fn read(params: &Map<String, Value>, requester: Uuid, min_timeout_ms: i64) -> Result<Send, RpcError> {
    let message =
        params.get("message").and_then(Value::as_object).ok_or_else(|| invalid("params.message must be an object"))?;
    let message_id =
        id_field(message, "messageId", "message")?.ok_or_else(|| invalid("message.messageId is required"))?;
    let context_id = id_field(message, "contextId", "message")?;
    if id_field(message, "taskId", "message")?.is_some() {
        return Err(invalid(
            "message.taskId: a delegation takes no further messages once made; send a new message (without taskId) for new work",
        ));
    }
    let parts =
        message.get("parts").and_then(Value::as_array).ok_or_else(|| invalid("message.parts must be an array"))?;
    let mut data_parts = parts.iter().filter_map(Value::as_object).filter(|p| {
        p.get("kind").and_then(Value::as_str) == Some("data") || (p.get("kind").is_none() && p.contains_key("data"))
    });
    let part = data_parts.next().ok_or_else(|| {
        invalid(
            "the message needs one data part holding the delegation: {taskType, input, ...} (see the card's skills)",
        )
    })?;
    if data_parts.next().is_some() {
        return Err(invalid("the message has more than one data part; send one delegation per message"));
    }
    let data = integral_doubles_as_integers(part.get("data").cloned().unwrap_or(Value::Null));
    let data =
        data.as_object().ok_or_else(|| invalid("the data part's data must be an object: the delegation body"))?;
    for name in data.keys() {
        if !FIELDS.contains(&name.as_str()) {
            let why = match name.as_str() {
                "requestId" => "the requestId comes from the message's messageId".to_owned(),
                "agentId" => "the requester is the API key's own agent".to_owned(),
                _ => format!("it takes {}", FIELDS.join(", ")),
            };
            return Err(invalid(format!(
                "data.{} is not taken here: {why}",
                crate::quote::quote(name).trim_matches('"')
            )));
        }
    }
    let configuration = params.get("configuration").and_then(Value::as_object);
    let flag = |name: &str| -> Result<Option<bool>, RpcError> {
        match configuration.and_then(|c| c.get(name)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(invalid(format!("configuration.{name} must be a boolean"))),
        }
    };
    let blocking = match (flag("returnImmediately")?, flag("blocking")?) {
        (Some(return_immediately), _) => !return_immediately,
        (None, Some(blocking)) => blocking,
        (None, None) => true,
    };
    let history_length = history_length(configuration)?;
    let text = |name: &'static str| -> Result<Option<&str>, RpcError> {
        match data.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(invalid(format!("data.{name} must be a string"))),
        }
    };
    let whole = |name: &'static str| -> Result<Option<i64>, RpcError> {
        match data.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| invalid(format!("data.{name} must be a whole number"))),
        }
    };
    let target = match text("targetAnonymousId")? {
        None => None,
        Some(s) => Some(Uuid::parse_str(s).map_err(|_| invalid("data.targetAnonymousId must be a UUID"))?),
    };
    let fallback_enabled = match data.get("fallbackEnabled") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(invalid("data.fallbackEnabled must be a boolean")),
    };
    let task_type =
        text("taskType")?.ok_or_else(|| invalid("data.taskType is required (one of the card's skill ids)"))?;
    let input = data.get("input").ok_or_else(|| invalid("data.input is required: the work"))?;
    let raw = RawRequest {
        request_id: Some(request_id(requester, &message_id)),
        agent_id: None,
        target_anonymous_id: target,
        task_type,
        custom_type: text("customType")?,
        input,
        timeout_ms: whole("timeoutMs")?,
        fallback_enabled,
        max_retries: whole("maxRetries")?,
    };
    let mut request = Request::parse(&raw, min_timeout_ms).map_err(|e| match e {
        DelegationError::Invalid { field, message } => invalid(format!("data.{field} {message}")),
        other => invalid(other.to_string()),
    })?;
    request.context_id = context_id;
    Ok(Send { request, blocking, history_length })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn send_v1(data: Value) -> Value {
        json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": data}]}})
    }

    #[test]
    fn a_1_0_send_with_doubles_reads_as_the_delegate_body() {
        let requester = Uuid::now_v7();
        let p = send_v1(
            json!({"taskType": "summarization", "input": {"words": 120.0}, "timeoutMs": 20000.0, "maxRetries": 2.0}),
        );
        let s = read(&params(p), requester, 1000).unwrap();
        assert_eq!(s.request.timeout_ms, 20_000);
        assert_eq!(s.request.max_retries, 2);
        assert_eq!(s.request.input, json!({"words": 120}));
        assert!(s.request.input["words"].is_i64());
        assert!(s.blocking);
        assert_eq!(s.request.request_id, Uuid::new_v5(&requester, b"m-1"));
        assert_eq!(s.request.request_id, request_id(requester, "m-1"), "the same message is the same delegation");
        assert_ne!(request_id(requester, "m-1"), request_id(Uuid::now_v7(), "m-1"), "per requester");
    }

    #[test]
    fn a_0_3_send_with_a_uuid_message_id_and_a_context() {
        let id = Uuid::new_v4();
        let p = json!({
            "message": {"kind": "message", "messageId": id.to_string(), "contextId": "ctx-9", "role": "user",
                        "parts": [{"kind": "text", "text": "please"}, {"kind": "data", "data": {"taskType": "translation", "input": {}}}]},
            "configuration": {"blocking": false, "historyLength": 0}
        });
        let s = read(&params(p), Uuid::now_v7(), 1000).unwrap();
        assert_eq!(s.request.request_id, id);
        assert_eq!(s.request.context_id.as_deref(), Some("ctx-9"));
        assert!(!s.blocking);
        assert_eq!(s.history_length, Some(0));
        let p = json!({"message": {"messageId": "m", "parts": [{"data": {"taskType": "translation", "input": {}}}]},
                       "configuration": {"returnImmediately": true}});
        assert!(!read(&params(p), Uuid::now_v7(), 1000).unwrap().blocking);
    }

    #[test]
    fn what_is_refused_says_why() {
        let why = |p: Value| {
            let e = read(&params(p), Uuid::now_v7(), 1000).unwrap_err();
            assert_eq!((e.code, e.parley_code), (-32602, Some(ErrorCode::InvalidBody)));
            e.message
        };
        assert!(why(json!({})).contains("params.message"));
        assert!(why(json!({"message": {"parts": []}})).contains("messageId"));
        assert!(why(json!({"message": {"messageId": "m", "parts": [{"text": "hi"}]}})).contains("one data part"));
        assert!(
            why(send_v1(json!({"taskType": "summarization", "input": {}, "requestId": "x"}))).contains("messageId")
        );
        assert!(why(send_v1(json!({"taskType": "summarization", "input": {}, "agentId": "x"}))).contains("API key"));
        assert!(
            why(send_v1(json!({"taskType": "summarization", "input": {}, "timeoutMs": 20000.5}))).contains("timeoutMs")
        );
        assert!(why(send_v1(json!({"taskType": "cooking", "input": {}}))).contains("taskType"));
        assert!(why(send_v1(json!({"input": {}}))).contains("taskType"));
        assert!(why(send_v1(json!({"taskType": "summarization"}))).contains("input"));
        let with_task = json!({"message": {"messageId": "m", "taskId": "t", "parts": [{"data": {}}]}});
        assert!(why(with_task).contains("taskId"));
        let two = json!({"message": {"messageId": "m", "parts": [{"data": {}}, {"data": {}}]}});
        assert!(why(two).contains("more than one"));
    }
}
