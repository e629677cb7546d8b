//! Transport errors answer like the rest of the API: [`transport_errors`] reads the body itself
//! (413 over the limit, 408 when it trickles, 400 `invalid_body` when it is not JSON), refuses a
//! message with a NUL character in any string or key (a tool call gets the tool error
//! `invalid_body` naming the field, any other message a 400), and turns the MCP service's own
//! plain-text refusals (wrong `Accept`, wrong method, ...) into `{error, code}`. JSON-RPC errors,
//! which MCP clients read, pass unchanged.

use axum::{
    Json,
    extract::Request,
    http::{Method, StatusCode, header::CONTENT_TYPE},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::api_error;
use crate::{
    error_code::ErrorCode,
    wire::{
        body::{BODY_LIMIT, body_bytes},
        error::{ApiError, ErrorBody},
        input,
    },
};

/// The machine code of a transport-level refusal's status.
fn transport_code(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::InvalidBody,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::NOT_ACCEPTABLE => ErrorCode::NotAcceptable,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::RequestTimeout,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::InvalidRequest,
    }
}

/// Reads and checks the body before the MCP service sees it (JSON, and no NUL in any string or
/// key), and gives its plain-text refusals the API's error body.
pub(super) async fn transport_errors(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = if parts.method == Method::POST {
        let bytes = match body_bytes(Request::from_parts(parts.clone(), body), &()).await {
            Ok(bytes) => bytes,
            Err(e) => return e.into_response(),
        };
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return ApiError::invalid(format!("invalid JSON: {e}")).into_response();
        }
        if let Err(refused) = input::check_json_bytes(&bytes) {
            return refuse_nul(&bytes, refused);
        }
        bytes
    } else {
        axum::body::Bytes::new()
    };
    let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), BODY_LIMIT).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if status.is_server_error() {
        tracing::error!(%status, error = %text, "the MCP transport failed");
        "internal server error".to_owned()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    let body = ErrorBody { error: message, code: transport_code(status).as_str(), limit: None };
    (status, axum::Json(body)).into_response()
}

/// The answer to a message holding a NUL character: a tool call is answered like any call with
/// bad arguments, as a tool error; anything else is the HTTP refusal.
fn refuse_nul(bytes: &[u8], refused: ApiError) -> Response {
    let message: Value = serde_json::from_slice(bytes).unwrap_or_default();
    match (message.get("method").and_then(Value::as_str), message.get("id")) {
        (Some("tools/call"), Some(id)) => {
            let result = serde_json::to_value(api_error(refused)).unwrap_or_default();
            Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
        }
        _ => refused.into_response(),
    }
}
