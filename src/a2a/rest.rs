//! The HTTP+JSON binding of A2A 1.0 (REST), beside JSON-RPC, with the same semantics: each route
//! is one JSON-RPC method, run by the same dispatch (`super::methods`), answered without the
//! JSON-RPC envelope.
//!
//! | route (under `/a2a/rest`) | method |
//! |---|---|
//! | `POST /message:send` | `SendMessage` (the body is its params) |
//! | `POST /message:stream` | `SendStreamingMessage` (SSE, each event a `StreamResponse`) |
//! | `GET /tasks` | `ListTasks` (filters in the query) |
//! | `GET /tasks/{id}` | `GetTask` (`historyLength` in the query) |
//! | `POST /tasks/{id}:cancel` | `CancelTask` |
//! | `POST` or `GET /tasks/{id}:subscribe` | `SubscribeToTask` (SSE) |
//! | `POST /tasks/{id}/pushNotificationConfigs` | `CreateTaskPushNotificationConfig` |
//! | `GET /tasks/{id}/pushNotificationConfigs` | `ListTaskPushNotificationConfigs` |
//! | `GET /tasks/{id}/pushNotificationConfigs/{configId}` | `GetTaskPushNotificationConfig` |
//! | `DELETE /tasks/{id}/pushNotificationConfigs/{configId}` | `DeleteTaskPushNotificationConfig` |
//! | `GET /extendedAgentCard` | `GetExtendedAgentCard` |
//!
//! Errors are HTTP statuses with an AIP-193 body, `{"error": {"code", "status", "message",
//! "details": [ErrorInfo]}}`, mapped as the specification maps A2A's errors: task not found 404,
//! not cancelable 409, unsupported content type 415, push notifications or an operation not
//! supported, an unsupported version and invalid params 400, an invalid agent answer 502.
//! Credentials, limits and an unreachable database answer as on `POST /a2a`.

use std::collections::HashMap;

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, State, rejection::BytesRejection},
    http::{HeaderMap, Method as HttpMethod, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

use super::{
    A2aState,
    methods::{self, Answer, Refusal},
    rpc::{self, Call, Method, RpcError, Version},
};
use crate::{error_code::ErrorCode, wire::input::find_nul};

/// Where the binding is mounted.
pub const PATH: &str = "/a2a/rest";

/// The HTTP status of an A2A error on this binding, and its canonical name.
fn status_of(code: i32) -> (StatusCode, &'static str) {
    match code {
        -32001 => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        -32002 => (StatusCode::CONFLICT, "FAILED_PRECONDITION"),
        -32005 => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "INVALID_ARGUMENT"),
        -32006 => (StatusCode::BAD_GATEWAY, "INTERNAL"),
        -32601 => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        -32603 => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
        -32003 | -32004 | -32007 | -32009 => (StatusCode::BAD_REQUEST, "UNIMPLEMENTED"),
        _ => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
    }
}

/// An error as this binding answers it.
pub fn error(e: &RpcError) -> Response {
    let (status, name) = status_of(e.code);
    let details = rpc::error(&Value::Null, e, Version::V1)["error"]["data"].clone();
    let body =
        json!({ "error": { "code": status.as_u16(), "status": name, "message": e.message, "details": details } });
    (status, Json(body)).into_response()
}

/// The method and params a route names, else the error to answer.
fn call_of(
    method: &HttpMethod,
    path: &str,
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<(&'static str, Map<String, Value>), RpcError> {
    let body_object = || -> Result<Map<String, Value>, RpcError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(o)) => Ok(o),
            Ok(_) => Err(RpcError::invalid_params(ErrorCode::InvalidBody, "the body must be a JSON object")),
            Err(e) => Err(RpcError::parse_error(crate::quote::shorten_quoted(&format!("the body is not JSON: {e}")))),
        }
    };
    let mut from_query = Map::new();
    for (k, v) in query {
        let value = match k.as_str() {
            "historyLength" | "pageSize" => v.parse::<i64>().map(Value::from).unwrap_or_else(|_| json!(v)),
            "includeArtifacts" => json!(v == "true"),
            _ => json!(v),
        };
        from_query.insert(k.clone(), value);
    }
    let not_found = || RpcError::method_not_found(&format!("{method} {PATH}/{path}"));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let post = *method == HttpMethod::POST;
    let get = *method == HttpMethod::GET;
    let with = |mut params: Map<String, Value>, key: &str, value: &str| {
        params.insert(key.into(), json!(value));
        params
    };
    Ok(match segments.as_slice() {
        ["message:send"] if post => ("SendMessage", body_object()?),
        ["message:stream"] if post => ("SendStreamingMessage", body_object()?),
        ["tasks"] if get => ("ListTasks", from_query),
        ["extendedAgentCard"] if get => ("GetExtendedAgentCard", Map::new()),
        ["tasks", task] if task.ends_with(":cancel") && post => {
            ("CancelTask", with(body_object()?, "id", task.trim_end_matches(":cancel")))
        }
        ["tasks", task] if task.ends_with(":subscribe") && (post || get) => {
            ("SubscribeToTask", with(Map::new(), "id", task.trim_end_matches(":subscribe")))
        }
        ["tasks", task] if get => ("GetTask", with(from_query, "id", task)),
        ["tasks", task, "pushNotificationConfigs"] if post => {
            let mut params = body_object()?;
            if !params.contains_key("config") && params.contains_key("url") {
                // The body may be the configuration itself.
                params = Map::from_iter([("config".to_owned(), Value::Object(params))]);
            }
            ("CreateTaskPushNotificationConfig", with(params, "taskId", task))
        }
        ["tasks", task, "pushNotificationConfigs"] if get => {
            ("ListTaskPushNotificationConfigs", with(from_query, "taskId", task))
        }
        ["tasks", task, "pushNotificationConfigs", config] if get => {
            ("GetTaskPushNotificationConfig", with(with(Map::new(), "taskId", task), "id", config))
        }
        ["tasks", task, "pushNotificationConfigs", config] if *method == HttpMethod::DELETE => {
            ("DeleteTaskPushNotificationConfig", with(with(Map::new(), "taskId", task), "id", config))
        }
        _ => return Err(not_found()),
    })
}

/// Any route of the binding.
pub async fn handle(
    State(state): State<A2aState>,
    method: HttpMethod,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (agent, key) = match methods::caller(&state, &headers).await {
        Ok(found) => found,
        Err(e) => return methods::http_refusal(e),
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let e = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                crate::wire::error::ApiError::PayloadTooLarge(crate::wire::body::BODY_LIMIT)
            } else {
                crate::wire::error::ApiError::RequestTimeout
            };
            return methods::http_refusal(e);
        }
    };
    if method != HttpMethod::GET
        && method != HttpMethod::DELETE
        && !body.is_empty()
        && let Some(given) = methods::unsupported_content_type(&headers)
    {
        return error(&RpcError::content_type_not_supported(&given));
    }
    let (name, params) = match call_of(&method, &path, &query, &body) {
        Ok(found) => found,
        Err(e) => return error(&e),
    };
    let Some(method) = Method::named(name) else { return error(&RpcError::method_not_found(name)) };
    if let Err(e) = rpc::version_of_v1(&headers, method) {
        return error(&e);
    }
    if let Some(at) = find_nul(&Value::Object(params.clone())) {
        let e = RpcError::invalid_params(
            ErrorCode::InvalidBody,
            format!("the body{at} holds a NUL character, which Parley does not store"),
        );
        return error(&e);
    }
    let call = Call { id: Value::Null, method, params, rest: true };
    match methods::dispatch(&state, &agent, &key, call).await {
        Ok(Answer::Result(result)) => {
            crate::metrics::a2a_call(name, "ok");
            let result =
                if name == "DeleteTaskPushNotificationConfig" && result.is_null() { json!({}) } else { result };
            Json(result).into_response()
        }
        Ok(Answer::Stream(response)) => {
            crate::metrics::a2a_call(name, "ok");
            response
        }
        Err(Refusal::Rpc(e)) => {
            crate::metrics::a2a_call(name, "error");
            error(&e)
        }
        Err(Refusal::Http(e)) => {
            crate::metrics::a2a_call(name, "refused");
            methods::http_refusal(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_is_its_method() {
        let q = HashMap::from([("historyLength".to_owned(), "2".to_owned())]);
        let none = HashMap::new();
        let (m, p) = call_of(&HttpMethod::GET, "tasks/t-1", &q, b"").unwrap();
        assert_eq!((m, p["id"].as_str(), p["historyLength"].as_i64()), ("GetTask", Some("t-1"), Some(2)));
        assert_eq!(call_of(&HttpMethod::POST, "tasks/t-1:cancel", &none, b"").unwrap().0, "CancelTask");
        assert_eq!(call_of(&HttpMethod::POST, "tasks/t-1:subscribe", &none, b"").unwrap().1["id"], "t-1");
        assert_eq!(call_of(&HttpMethod::POST, "message:send", &none, b"{\"message\": {}}").unwrap().0, "SendMessage");
        let (m, p) = call_of(&HttpMethod::DELETE, "tasks/t/pushNotificationConfigs/c", &none, b"").unwrap();
        assert_eq!(
            (m, p["taskId"].as_str(), p["id"].as_str()),
            ("DeleteTaskPushNotificationConfig", Some("t"), Some("c"))
        );
        assert_eq!(call_of(&HttpMethod::GET, "nothing/here/at/all", &none, b"").unwrap_err().code, -32601);
        assert_eq!(call_of(&HttpMethod::POST, "message:send", &none, b"{").unwrap_err().code, -32700);
        assert_eq!(status_of(-32001).0, StatusCode::NOT_FOUND);
        assert_eq!(status_of(-32005).0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}
