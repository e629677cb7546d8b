//! The JSON-RPC 2.0 envelope of `POST /a2a`, the two protocol versions, the methods by name,
//! and the errors A2A defines.
//!
//! A request is read in one pass: a body that is not JSON is -32700; one that is not a single
//! request object (`jsonrpc: "2.0"`, a string `method`, an `id` that is a string, a number or
//! null, `params` an object when present) is -32600; a method neither version names is
//! -32601. The version is the method's: 1.0 names are `PascalCase` (`SendMessage`), 0.3 names
//! are paths (`message/send`). The `A2A-Version` header is honoured as the A2A servers do: a
//! 1.0 method is served only under a 1.x header (absent or empty means 0.3, so -32009 says which
//! header to send); a 0.3 method is served under any header.

use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error_code::ErrorCode;

/// The header naming the protocol version a client speaks.
pub const VERSION_HEADER: &str = "a2a-version";

pub use crate::wire::a2a_render::Version;

/// What a method does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Make a delegation from a message, and answer its task (waiting when blocking).
    Send,
    /// Make a delegation and stream its task's updates.
    SendStreaming,
    /// Read a task.
    Get,
    /// List the caller's tasks (1.0 only).
    List,
    /// Cancel a task.
    Cancel,
    /// Stream an existing task's updates.
    Subscribe,
    /// Any push notification configuration method (`super::push_config`).
    PushConfig,
    /// The authenticated extended card: the card says there is none.
    ExtendedCard,
}

/// Every method name, its version and what it does.
pub const METHODS: &[(&str, Version, Operation)] = &[
    ("SendMessage", Version::V1, Operation::Send),
    ("SendStreamingMessage", Version::V1, Operation::SendStreaming),
    ("GetTask", Version::V1, Operation::Get),
    ("ListTasks", Version::V1, Operation::List),
    ("CancelTask", Version::V1, Operation::Cancel),
    ("SubscribeToTask", Version::V1, Operation::Subscribe),
    ("CreateTaskPushNotificationConfig", Version::V1, Operation::PushConfig),
    ("GetTaskPushNotificationConfig", Version::V1, Operation::PushConfig),
    ("ListTaskPushNotificationConfigs", Version::V1, Operation::PushConfig),
    ("DeleteTaskPushNotificationConfig", Version::V1, Operation::PushConfig),
    ("GetExtendedAgentCard", Version::V1, Operation::ExtendedCard),
    ("message/send", Version::V03, Operation::Send),
    ("message/stream", Version::V03, Operation::SendStreaming),
    ("tasks/get", Version::V03, Operation::Get),
    ("tasks/cancel", Version::V03, Operation::Cancel),
    ("tasks/resubscribe", Version::V03, Operation::Subscribe),
    ("tasks/pushNotificationConfig/set", Version::V03, Operation::PushConfig),
    ("tasks/pushNotificationConfig/get", Version::V03, Operation::PushConfig),
    ("tasks/pushNotificationConfig/list", Version::V03, Operation::PushConfig),
    ("tasks/pushNotificationConfig/delete", Version::V03, Operation::PushConfig),
    ("agent/getAuthenticatedExtendedCard", Version::V03, Operation::ExtendedCard),
];

/// A method as called: its name (from [`METHODS`], so a bounded metrics label), version and
/// operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    /// The name, as [`METHODS`] spells it.
    pub name: &'static str,
    /// Its protocol version.
    pub version: Version,
    /// What it does.
    pub operation: Operation,
}

impl Method {
    /// The method of this name, if either version has it.
    pub fn named(name: &str) -> Option<Method> {
        METHODS.iter().find(|(n, ..)| *n == name).map(|&(name, version, operation)| Method { name, version, operation })
    }
}

/// A JSON-RPC request id: a string, a number, or null.
pub type Id = Value;

/// A request read from the body.
#[derive(Debug, Clone)]
pub struct Call {
    /// Its id, echoed in the answer.
    pub id: Id,
    /// The method.
    pub method: Method,
    /// Its params (an empty object when absent).
    pub params: Map<String, Value>,
    /// Whether it came over the HTTP+JSON binding (`super::rest`): answers carry no JSON-RPC
    /// envelope, streamed events neither.
    pub rest: bool,
}

/// An A2A error: a JSON-RPC error code, a message, and Parley's own code when Parley refused
/// something it understood.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i32,
    /// For a human.
    pub message: String,
    /// Parley's code (`input_invalid`, `unknown_target`, `request_id_reused`, ...), carried in
    /// `data`.
    pub parley_code: Option<ErrorCode>,
}

impl RpcError {
    /// -32700: the body is not JSON.
    pub fn parse_error(message: impl Into<String>) -> RpcError {
        RpcError { code: -32700, message: message.into(), parley_code: None }
    }
    /// -32600: not a JSON-RPC request.
    pub fn invalid_request(message: impl Into<String>) -> RpcError {
        RpcError { code: -32600, message: message.into(), parley_code: None }
    }
    /// -32601: no such method.
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError {
            code: -32601,
            message: format!("method {} is not an A2A method Parley serves", crate::quote::quote(method)),
            parley_code: None,
        }
    }
    /// -32602: the params are wrong, or Parley refused them (`code` says why).
    pub fn invalid_params(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError { code: -32602, message: message.into(), parley_code: Some(code) }
    }
    /// -32603: a failure the caller cannot fix.
    pub fn internal() -> RpcError {
        RpcError { code: -32603, message: "internal error".into(), parley_code: Some(ErrorCode::Internal) }
    }
    /// -32001: no such task for this caller.
    pub fn task_not_found() -> RpcError {
        RpcError { code: -32001, message: "task not found".into(), parley_code: Some(ErrorCode::NotFound) }
    }
    /// -32002: the task has ended and cannot be canceled.
    pub fn not_cancelable(state: &str) -> RpcError {
        RpcError {
            code: -32002,
            message: format!("the task has ended ({state}); it cannot be canceled"),
            parley_code: None,
        }
    }
    /// -32004: an operation this task or service does not support.
    pub fn unsupported(message: impl Into<String>) -> RpcError {
        RpcError { code: -32004, message: message.into(), parley_code: None }
    }
    /// -32005: the request's content type is not JSON.
    pub fn content_type_not_supported(given: &str) -> RpcError {
        RpcError {
            code: -32005,
            message: format!("content type {} is not supported: send application/json", crate::quote::quote(given)),
            parley_code: None,
        }
    }
    /// -32007: there is no extended card.
    pub fn no_extended_card() -> RpcError {
        RpcError { code: -32007, message: "there is no authenticated extended card".into(), parley_code: None }
    }
    /// -32009: a version this method is not served under.
    pub fn version_not_supported(version: &str, method: &str) -> RpcError {
        RpcError {
            code: -32009,
            message: format!(
                "A2A version {} is not supported for {method}: 1.0 methods need the header `A2A-Version: 1.0` \
                 (absent means 0.3, whose methods are message/send, tasks/get, ...)",
                crate::quote::quote(version)
            ),
            parley_code: None,
        }
    }

    /// The reason word of a 1.0 `ErrorInfo`, as the A2A servers name their errors.
    fn reason(&self) -> &'static str {
        match self.code {
            -32001 => "TASK_NOT_FOUND",
            -32002 => "TASK_NOT_CANCELABLE",
            -32003 => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            -32004 => "UNSUPPORTED_OPERATION",
            -32005 => "CONTENT_TYPE_NOT_SUPPORTED",
            -32006 => "INVALID_AGENT_RESPONSE",
            -32007 => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            -32009 => "VERSION_NOT_SUPPORTED",
            -32602 => "INVALID_PARAMS",
            -32600 => "INVALID_REQUEST",
            -32601 => "METHOD_NOT_FOUND",
            -32700 => "PARSE_ERROR",
            _ => "INTERNAL_ERROR",
        }
    }

    /// The error object in `version`'s form: 1.0 carries a `google.rpc.ErrorInfo` in `data`
    /// (`reason`, the domain `a2a-protocol.org`, and Parley's code in `metadata.code`), 0.3 carries `{code}` in `data`.
    pub fn to_json(&self, version: Version) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        let code = self.parley_code.map(ErrorCode::as_str);
        match version {
            Version::V1 => {
                let metadata = code.map_or_else(|| json!({}), |c| json!({ "code": c }));
                error["data"] = json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason(),
                    "domain": "a2a-protocol.org",
                    "metadata": metadata,
                }]);
            }
            Version::V03 => {
                if let Some(c) = code {
                    error["data"] = json!({ "code": c });
                }
            }
        }
        error
    }
}

/// A success answer.
pub fn result(id: &Id, result: impl Serialize) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error answer, in `version`'s form.
pub fn error(id: &Id, e: &RpcError, version: Version) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": e.to_json(version) })
}

/// Whether `method` is served under the request's `A2A-Version` header: a 1.0 method needs a 1.x
/// header (absent or empty means 0.3); a 0.3 method is served under any.
pub fn version_of_v1(headers: &HeaderMap, method: Method) -> Result<(), RpcError> {
    if method.version == Version::V1 {
        let asked = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or_default();
        let asked_name = if asked.is_empty() { "0.3" } else { asked };
        if !serves_v1(asked) {
            return Err(RpcError::version_not_supported(asked_name, method.name));
        }
    }
    Ok(())
}

/// Reads one call from a body, with the version the answer is written in when it fails (the
/// method's when known, else 0.3, whose error shape every client reads).
pub fn read(body: &[u8], headers: &HeaderMap) -> Result<Call, (Id, RpcError, Version)> {
    let fail = |id: Id, e: RpcError| (id, e, Version::V03);
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        fail(Value::Null, RpcError::parse_error(crate::quote::shorten_quoted(&format!("the body is not JSON: {e}"))))
    })?;
    let Value::Object(mut object) = value else {
        return Err(fail(
            Value::Null,
            RpcError::invalid_request("a request is one JSON object (batches are not served)"),
        ));
    };
    let id = object.remove("id").unwrap_or(Value::Null);
    let id = match id {
        Value::String(_) | Value::Null => id,
        Value::Number(ref n) if n.is_i64() || n.is_u64() => id,
        _ => return Err(fail(Value::Null, RpcError::invalid_request("id must be a string, an integer or null"))),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(fail(id, RpcError::invalid_request("jsonrpc must be exactly \"2.0\"")));
    }
    let Some(name) = object.get("method").and_then(Value::as_str) else {
        return Err(fail(id, RpcError::invalid_request("method must be a string")));
    };
    let method = Method::named(name).ok_or_else(|| fail(id.clone(), RpcError::method_not_found(name)))?;
    let params = match object.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err((
                id,
                RpcError::invalid_params(ErrorCode::InvalidBody, "params must be an object"),
                method.version,
            ));
        }
    };
    if let Err(e) = version_of_v1(headers, method) {
        return Err((id, e, Version::V1));
    }
    Ok(Call { id, method, params, rest: false })
}

/// Whether a header value names a 1.x version (`1`, `1.0`, `1.0.2`, ...).
fn serves_v1(asked: &str) -> bool {
    let mut parts = asked.split('.');
    parts.next() == Some("1") && parts.all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(version: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = version {
            h.insert(VERSION_HEADER, HeaderValue::from_static(v));
        }
        h
    }

    fn call(body: Value, version: Option<&'static str>) -> Result<Call, (Id, RpcError, Version)> {
        read(body.to_string().as_bytes(), &headers(version))
    }

    #[test]
    fn methods_are_dispatched_by_name_to_their_version() {
        let c = call(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}), Some("1.0")).unwrap();
        assert_eq!((c.method.version, c.method.operation), (Version::V1, Operation::Send));
        let c = call(json!({"jsonrpc": "2.0", "id": "a", "method": "message/send"}), None).unwrap();
        assert_eq!((c.method.version, c.method.operation), (Version::V03, Operation::Send));
        assert_eq!(c.id, json!("a"));
        for (name, version, _) in METHODS {
            assert_eq!(Method::named(name).unwrap().version, *version);
            assert_eq!(name.contains('/'), *version == Version::V03, "{name}");
        }
    }

    #[test]
    fn a_1_0_method_needs_a_1_x_header_and_a_0_3_method_takes_any() {
        for (header, served) in [
            (Some("1.0"), true),
            (Some("1"), true),
            (Some("1.0.3"), true),
            (None, false),
            (Some("0.3"), false),
            (Some("2.0"), false),
            (Some(""), false),
        ] {
            let got = call(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}), header);
            match got {
                Ok(_) => assert!(served, "{header:?}"),
                Err((_, e, version)) => {
                    assert!(!served, "{header:?}");
                    assert_eq!((e.code, version), (-32009, Version::V1));
                }
            }
        }
        for header in [None, Some("0.3"), Some("1.0")] {
            assert!(call(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}), header).is_ok());
        }
    }

    #[test]
    fn malformed_envelopes_get_their_codes() {
        let code = |body: &str| read(body.as_bytes(), &headers(None)).unwrap_err().1.code;
        assert_eq!(code("{"), -32700);
        assert_eq!(code("[]"), -32600);
        assert_eq!(code(r#"{"jsonrpc": "1.0", "id": 1, "method": "tasks/get"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": {}, "method": "tasks/get"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1.5, "method": "tasks/get"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1, "method": "tasks/explode"}"#), -32601);
        assert_eq!(code(r#"{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": [1]}"#), -32602);
    }

    #[test]
    fn errors_carry_parleys_code_in_each_versions_form() {
        let e = RpcError::invalid_params(ErrorCode::InputInvalid, "no");
        let v1 = e.to_json(Version::V1);
        assert_eq!(v1["code"], -32602);
        assert_eq!(v1["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(v1["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(v1["data"][0]["metadata"]["code"], "input_invalid");
        let v03 = e.to_json(Version::V03);
        assert_eq!(v03["data"], json!({"code": "input_invalid"}));
        assert!(RpcError::task_not_found().to_json(Version::V03)["data"]["code"] == "not_found");
    }
}
