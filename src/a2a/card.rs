//! Parley's agent card: what an A2A client reads first, at `/.well-known/agent-card.json` (and
//! `/.well-known/agent.json`, where 0.3 clients look).
//!
//! Each version has its card: `/.well-known/agent-card.json` carries 1.0 fields only
//! (`supportedInterfaces` naming the JSON-RPC endpoint at 1.0 and 0.3 and the HTTP+JSON binding
//! at 1.0, `securitySchemes` in their 1.0 form, `securityRequirements`), which the 1.0 schema
//! accepts; `/.well-known/agent.json`, where 0.3 clients look, is the same service in 0.3's
//! fields (`url`, `preferredTransport`, `protocolVersion`, the scheme's `type`/`scheme`,
//! `security`).
//!
//! The card says what anyone may know: the endpoints, that it streams and pushes, that
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

/// What the card says Parley does (both versions' cards).
const DESCRIPTION: &str = "Routes A2A messages to the agents of Parley's directory, and delegates work to them. A plain \
    message (text, files, data of your own shape) goes to the agent skill that fits it best by meaning and trust, or \
    to the one `metadata.skillId` names; the task is the target's, passed through as it is. A message whose one data \
    part is a delegation (`taskType` (a skill id below), `input`, and optionally `targetAnonymousId`, `customType`, \
    `timeoutMs`, `fallbackEnabled`, `maxRetries`) is worked on by the best-ranked eligible agent, falls back to the \
    next on a failure, and completes with the output as a data artifact.";

/// The skills both cards list: one per task type, and the router's.
fn skills() -> Vec<Value> {
    let mut skills: Vec<Value> = TaskType::ALL.iter().map(|t| skill(*t)).collect();
    skills.push(json!({
        "id": "route",
        "name": "route",
        "description": "Send any message (text, files, data): it reaches the directory agent's skill that fits it best by \
            meaning (full-text ranking of the skills' names, tags, descriptions and examples, weighed with the agents' \
            trust), or the one `metadata.skillId` (or `metadata.parley.skill` as `<anonymousId>/<skillId>`) names. \
            The answer is the target's, unchanged but for `metadata.parley.route`.",
        "tags": ["router", "a2a"],
        "examples": ["Translate 'good morning' into French", "Summarise this report"],
        "inputModes": ["text/plain", "application/json", "application/octet-stream"],
        "outputModes": ["text/plain", "application/json", "application/octet-stream"],
    }));
    skills
}

/// The scheme's description.
const SCHEME_DESCRIPTION: &str = "A Parley agent key (pk_...), the requesting agent's: `Authorization: Bearer pk_...`.";

/// The A2A 1.0 card of a service whose endpoints are `{base}/a2a` (JSON-RPC) and
/// `{base}/a2a/rest` (HTTP+JSON): 1.0 fields only.
pub fn card(base: &str) -> Value {
    let url = format!("{base}{PATH}");
    let rest = format!("{base}{}", super::rest::PATH);
    json!({
        "name": "Parley",
        "description": DESCRIPTION,
        "version": CARD_VERSION,
        "supportedInterfaces": [
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
            { "url": rest, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
            { "url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
        ],
        "provider": { "organization": "Parley", "url": base },
        "capabilities": { "streaming": true, "pushNotifications": true, "extendedAgentCard": false },
        "securitySchemes": {
            SCHEME: {
                "httpAuthSecurityScheme": { "scheme": "Bearer", "bearerFormat": "Parley agent key", "description": SCHEME_DESCRIPTION },
            }
        },
        "securityRequirements": [ { "schemes": { SCHEME: { "list": [] } } } ],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills(),
    })
}

/// The A2A 0.3 card, where 0.3 clients look (`/.well-known/agent.json`): the same service in
/// 0.3's fields (`url`, `preferredTransport`, `protocolVersion`, `security`).
pub fn card_v03(base: &str) -> Value {
    let url = format!("{base}{PATH}");
    json!({
        "name": "Parley",
        "description": DESCRIPTION,
        "version": CARD_VERSION,
        "protocolVersion": "0.3.0",
        "url": url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [ { "url": url, "transport": "JSONRPC" } ],
        "provider": { "organization": "Parley", "url": base },
        "capabilities": { "streaming": true, "pushNotifications": true },
        "securitySchemes": {
            SCHEME: { "type": "http", "scheme": "bearer", "bearerFormat": "Parley agent key", "description": SCHEME_DESCRIPTION }
        },
        "security": [ { SCHEME: [] } ],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills(),
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

/// When the process started serving its card: the card's `Last-Modified` (its content changes
/// only with the release and the configuration, both fixed for the process's life).
fn served_since() -> &'static str {
    static SINCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SINCE.get_or_init(|| chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT").to_string())
}

/// A card's answer: 304 when the client's `If-None-Match` names its ETag.
fn answer(card: Value, headers: &HeaderMap, configured: bool) -> Response {
    let tag = etag(&card);
    let cache = [
        (header::ETAG, HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"card\""))),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache_control(configured))),
        (header::VARY, HeaderValue::from_static("Host")),
        (header::LAST_MODIFIED, HeaderValue::from_str(served_since()).unwrap_or(HeaderValue::from_static(""))),
    ];
    let revalidated =
        headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| matches(v, &tag));
    if revalidated {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (cache, Json(card)).into_response()
}

/// `GET /.well-known/agent-card.json`: the 1.0 card; 304 when the client's `If-None-Match`
/// names its ETag.
#[utoipa::path(get, path = "/.well-known/agent-card.json", tag = "a2a", operation_id = "getAgentCard",
    security(()),
    responses(
        (status = 200, description = "Parley's A2A 1.0 agent card (1.0 fields only; the 0.3 card is at `/.well-known/agent.json`), with `Cache-Control: max-age`, `Last-Modified` and an ETag", body = Object, content_type = "application/json"),
        (status = 304, description = "Not modified since the ETag the client holds"),
    ))]
pub async fn get_card(State(state): State<A2aState>, headers: HeaderMap) -> Response {
    let configured = state.engine.config().public_url.as_deref();
    answer(card(&base_url(configured, &headers)), &headers, configured.is_some())
}

/// `GET /.well-known/agent.json`: the 0.3 card, where 0.3 clients look.
pub async fn get_card_v03(State(state): State<A2aState>, headers: HeaderMap) -> Response {
    let configured = state.engine.config().public_url.as_deref();
    answer(card_v03(&base_url(configured, &headers)), &headers, configured.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_offers_both_versions_on_one_endpoint_and_a_skill_per_task_type() {
        let c = card("https://parley.example.com");
        let interfaces = c["supportedInterfaces"].as_array().unwrap();
        let bindings: Vec<(&str, &str)> = interfaces
            .iter()
            .map(|i| (i["protocolBinding"].as_str().unwrap(), i["protocolVersion"].as_str().unwrap()))
            .collect();
        assert_eq!(bindings, [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]);
        assert_eq!(interfaces[1]["url"], "https://parley.example.com/a2a/rest");
        for old in ["url", "preferredTransport", "protocolVersion", "security"] {
            assert!(c.get(old).is_none(), "the 1.0 card carries no 0.3 field {old}");
        }
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["capabilities"]["pushNotifications"], true);
        let ids: Vec<&str> = c["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(ids[..TaskType::ALL.len()], TaskType::ALL.map(TaskType::as_str));
        assert_eq!(ids.last(), Some(&"route"));
        assert_eq!(c["securitySchemes"][SCHEME]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        let old = card_v03("https://parley.example.com");
        assert_eq!(old["url"], "https://parley.example.com/a2a");
        assert_eq!(old["securitySchemes"][SCHEME]["type"], "http");
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
