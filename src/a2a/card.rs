//! Parley's agent card: what an A2A client reads first, at `/.well-known/agent-card.json` (and
//! `/.well-known/agent.json`, where 0.3 clients look).
//!
//! One "dual" card serves both versions: the 1.0 fields (`supportedInterfaces` naming the
//! JSON-RPC endpoint at 1.0 and at 0.3, `securitySchemes` in their 1.0 form,
//! `securityRequirements`) and, beside them, what a 0.3 client reads (`url`,
//! `preferredTransport`, `protocolVersion`, the scheme's `type`/`scheme`, `security`). A 1.0
//! client picks the 1.0 interface; a 0.3 client reads the 0.3 fields and ignores the others.
//!
//! The card says what anyone may know: the endpoint, that it streams and pushes, that
//! the bearer credential is a Parley agent key (the requester's), and one skill per task type,
//! whose description says what the message's data part holds. It names no agent, owner or
//! count. The URLs come from `PARLEY_PUBLIC_URL`, else from the request's `Host`, and then the
//! card is `private` and varies by `Host`, so no shared cache serves one client's spoofed `Host`
//! to another. It carries an ETag, so a client revalidates it for the price of a 304.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{A2aState, PATH};
use crate::directory::capabilities::TaskType;

/// The version of the card's content (not of the protocol).
const CARD_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The scheme name the card's security entries use.
const SCHEME: &str = "parleyAgentKey";

/// The card of a service whose endpoint is `{base}/a2a`.
pub fn card(base: &str) -> Value {
    let url = format!("{base}{PATH}");
    let skills: Vec<Value> = TaskType::ALL.iter().map(|t| skill(*t)).collect();
    let scheme_description = "A Parley agent key (pk_...), the requesting agent's: `Authorization: Bearer pk_...`.";
    json!({
        "name": "Parley",
        "description": "Delegates work to the agents of Parley's directory. Send one message whose data part is a \
            delegation: `taskType` (a skill id), `input` (the work, checked against the target's input schema), and \
            optionally `targetAnonymousId`, `customType` (with taskType `custom`), `timeoutMs`, `fallbackEnabled`, \
            `maxRetries`. The task is the delegation: it is worked on by the best-ranked eligible agent (or the one \
            named), falls back to the next on a failure, and completes with the output as a data artifact.",
        "version": CARD_VERSION,
        "supportedInterfaces": [
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
        ],
        "provider": { "organization": "Parley", "url": base },
        "capabilities": { "streaming": true, "pushNotifications": true, "extendedAgentCard": false },
        "securitySchemes": {
            SCHEME: {
                "httpAuthSecurityScheme": { "scheme": "Bearer", "bearerFormat": "Parley agent key", "description": scheme_description },
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "Parley agent key",
                "description": scheme_description,
            }
        },
        "securityRequirements": [ { "schemes": { SCHEME: {} } } ],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": skills,
        // What a 0.3 client reads.
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "security": [ { SCHEME: [] } ],
    })
}

/// The skill of one task type.
fn skill(t: TaskType) -> Value {
    let name = t.as_str();
    let custom = if t == TaskType::Custom { ", `customType` naming the kind of work," } else { "" };
    json!({
        "id": name,
        "name": name,
        "description": format!(
            "Delegate `{name}` work: a data part {{\"taskType\": \"{name}\"{custom}, \"input\": {{...}}}}; the \
             target's input schema decides what `input` must hold, and the result is the target's output as a \
             `delegation-result` data artifact."
        ),
        "tags": ["delegation", name],
        "inputModes": ["application/json"],
        "outputModes": ["application/json"],
    })
}

/// The base URL the card's URLs start with: `PARLEY_PUBLIC_URL`, else `http://{Host}`.
pub fn base_url(configured: Option<&str>, headers: &HeaderMap) -> String {
    if let Some(url) = configured {
        return url.to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)))
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// How long and by whom the card may be kept. A card whose URLs come from `PARLEY_PUBLIC_URL` is
/// the same for everyone and may sit in shared caches; one built from the request's `Host` says
/// whatever the client claimed, so only that client may keep it (a shared cache would otherwise
/// hand a spoofed endpoint, where A2A clients send their keys, to everyone after it).
fn cache_control(configured: bool) -> &'static str {
    if configured { "public, max-age=300" } else { "private, max-age=300" }
}

/// A weak ETag of the card's content.
fn etag(card: &Value) -> String {
    let digest = Sha256::digest(card.to_string().as_bytes());
    format!("W/\"{}\"", hex(&digest[..16]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether an `If-None-Match` header names `etag` (weak comparison).
fn matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|c| c == "*" || c.trim_start_matches("W/") == etag.trim_start_matches("W/"))
}

/// `GET /.well-known/agent-card.json` and `/.well-known/agent.json`: the card; 304 when the
/// client's `If-None-Match` names its ETag.
#[utoipa::path(get, path = "/.well-known/agent-card.json", tag = "a2a", operation_id = "getAgentCard",
    security(()),
    responses(
        (status = 200, description = "Parley's A2A agent card (1.0 fields with their 0.3 rendering beside them). Also served at `/.well-known/agent.json`.", body = Object, content_type = "application/json"),
        (status = 304, description = "Not modified since the ETag the client holds"),
    ))]
pub async fn get_card(State(state): State<A2aState>, headers: HeaderMap) -> Response {
    let configured = state.engine.config().public_url.as_deref();
    let card = card(&base_url(configured, &headers));
    let tag = etag(&card);
    let cache = [
        (header::ETAG, HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"card\""))),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache_control(configured.is_some()))),
        (header::VARY, HeaderValue::from_static("Host")),
    ];
    let revalidated =
        headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| matches(v, &tag));
    if revalidated {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (cache, Json(card)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_offers_both_versions_on_one_endpoint_and_a_skill_per_task_type() {
        let c = card("https://parley.example.com");
        let interfaces = c["supportedInterfaces"].as_array().unwrap();
        let versions: Vec<&str> = interfaces.iter().map(|i| i["protocolVersion"].as_str().unwrap()).collect();
        assert_eq!(versions, ["1.0", "0.3"]);
        assert!(interfaces.iter().all(|i| i["url"] == "https://parley.example.com/a2a"));
        assert_eq!(c["url"], "https://parley.example.com/a2a");
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["capabilities"]["pushNotifications"], true);
        let ids: Vec<&str> = c["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids, TaskType::ALL.map(TaskType::as_str));
        assert_eq!(c["securitySchemes"][SCHEME]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(c["securitySchemes"][SCHEME]["type"], "http");
    }

    #[test]
    fn the_base_url_is_the_configured_one_else_the_host() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert_eq!(base_url(None, &headers), "http://127.0.0.1:8080");
        assert_eq!(base_url(Some("https://p.example"), &headers), "https://p.example");
        headers.insert(header::HOST, HeaderValue::from_static("evil.example/<script>"));
        assert_eq!(base_url(None, &headers), "http://localhost");
    }

    #[test]
    fn an_etag_revalidates_weakly() {
        let tag = etag(&card("http://x"));
        assert!(matches(&tag, &tag));
        assert!(matches(tag.trim_start_matches("W/"), &tag));
        assert!(matches("*", &tag));
        assert!(!matches("W/\"other\"", &tag));
    }
}
