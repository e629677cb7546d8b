//! The OpenAPI 3.1 description of the HTTP API, generated from the handlers' annotations.
//!
//! `parley openapi` prints it, `GET /api-spec/openapi.json` serves it, and `api-spec/openapi.json`
//! is that output, committed (a test fails when it drifts). Each handler declares its own success
//! answers and the error statuses it can give; [`spec`] then fills in what every operation shares:
//! the error body `{error, code}` on every 4xx/5xx, 401 and 429 (the failed-authentication
//! limiter) on every authenticated operation, and 408 and 413 on every operation that takes a body.

use serde_json::{Value, json};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
};

use crate::http::{
    a2a, agent_cards, agent_turns, agents, assessment, delegations, directory, error::ErrorBody, events, health,
    insights, metrics, negotiations, opportunities, status_page, webhooks,
};

/// Where the spec is served.
pub const SPEC_PATH: &str = "/api-spec/openapi.json";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Parley",
        description = "Bilateral agent negotiation with polling turn delivery.\n\n\
Errors are always `{\"error\": \"<message>\", \"code\": \"<machine code>\"}`. Bodies above 256 KiB are \
refused with 413, bodies that do not arrive in time with 408. An address that keeps failing to \
authenticate is answered 429 with `Retry-After` for a while. Users and the platform authenticate with an HS256 JWT (`bearerJwt`); personal \
agents with their API key, either as `Authorization: Bearer pk_...` (`agentKeyBearer`) or as \
`x-api-key: pk_...` (`agentKey`). Personal agents can also use the MCP endpoint `POST /mcp` \
(Model Context Protocol over streamable HTTP, same API key), which is described by the MCP \
specification rather than here. A2A clients find Parley's agent card at \
`/.well-known/agent-card.json` and call `POST /a2a` (JSON-RPC 2.0; A2A 1.0 and 0.3) with the same \
agent key as a bearer credential.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        health::healthz,
        health::api_health,
        health::readyz,
        metrics::metrics,
        status_page::status_page,
        negotiations::create_negotiation,
        negotiations::get_negotiation,
        negotiations::cancel_negotiation,
        negotiations::answer_question,
        opportunities::list_opportunities,
        opportunities::get_opportunity,
        opportunities::decide_opportunity,
        opportunities::reactivate_opportunity,
        insights::get_insights,
        a2a::get_task,
        a2a::get_conversation,
        crate::a2a::card::get_card,
        crate::a2a::methods::handle,
        agents::create_agent,
        agents::list_agents,
        agents::get_agent,
        agents::get_own_agent,
        agents::update_agent,
        agents::delete_agent,
        agents::create_key,
        agents::revoke_key,
        agents::heartbeat,
        agent_cards::get_card,
        agent_cards::put_card,
        agent_cards::delete_card,
        agent_turns::pickup_turn,
        agent_turns::respond_to_turn,
        agent_turns::extend_claim,
        agent_turns::release_claim,
        agent_turns::list_agent_negotiations,
        agent_turns::get_agent_negotiation,
        directory::put_capability,
        directory::list_capabilities,
        directory::delete_capability,
        directory::put_permissions,
        directory::discover_agents,
        directory::discover_agents_alias,
        directory::rank_agents,
        directory::get_trust,
        delegations::delegate,
        delegations::delegate_as_agentlens,
        delegations::get_delegation,
        delegations::cancel_delegation,
        delegations::list_delegations,
        delegations::delegation_inbox,
        delegations::accept_delegation,
        delegations::complete_delegation,
        delegations::reject_delegation,
        delegations::fail_delegation,
        assessment::assess_task,
        events::stream_events,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::update_webhook,
        webhooks::delete_webhook,
        webhooks::rotate_secret,
        webhooks::list_deliveries,
        webhooks::redeliver,
        openapi_json,
    ),
    components(schemas(ErrorBody)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "negotiations", description = "The platform starts, reads and cancels negotiations"),
        (name = "opportunities", description = "What people see and decide on"),
        (name = "insights", description = "How negotiations, decisions and agents fared, per day"),
        (name = "agents", description = "A person registers personal agents and manages their API keys"),
        (name = "turns", description = "A personal agent's turn delivery: pickup, respond, extend, release"),
        (name = "directory", description = "Capabilities agents offer, discovery, ranking and trust"),
        (name = "delegation", description = "One agent hands work to another: request, accept, execute, return, with fallback"),
        (name = "a2a", description = "A2A: Parley's agent card and its JSON-RPC endpoint (A2A 1.0 and 0.3), where any A2A client delegates through the directory; and the A2A views of a negotiation, a delegation and a delegation attempt"),
        (name = "assessment", description = "Bindu-compatible self-assessment (snake_case)"),
        (name = "events", description = "Live events for the web UI"),
        (name = "webhooks", description = "Pushes: Standard Webhooks endpoints of the platform (every event) and of people (their own events), signed, retried for days, with a delivery log and redelivery"),
        (name = "health", description = "Probes"),
        (name = "ui", description = "The status page"),
        (name = "meta", description = "This document"),
    ),
)]
struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearerJwt",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "HS256 JWT with `sub`, `role` (`user` default, `service`, `admin`) and `exp`; \
                         `parley token` mints one",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agentKeyBearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("pk_ API key")
                    .description(Some("A personal agent's API key as `Authorization: Bearer pk_...`"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agentKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "x-api-key",
                "A personal agent's API key as `x-api-key: pk_...`",
            ))),
        );
    }
}

/// This document.
#[utoipa::path(get, path = "/api-spec/openapi.json", tag = "meta", operation_id = "openapi",
    security(()),
    responses((status = 200, description = "The OpenAPI 3.1 description of this API", body = Object)))]
pub async fn openapi_json() -> axum::Json<Value> {
    axum::Json(spec())
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// An operation served at a second path by the same handler: `(method, alias, path, operation id,
/// description)`. The spec shows the alias as a copy of the operation under its own id.
const ALIASES: [(&str, &str, &str, &str, &str); 1] = [(
    "post",
    "/api/delegation/delegate",
    "/api/agents/delegate",
    "delegateTaskSeedPath",
    "An alias of `POST /api/agents/delegate` (same body, same answers), at the path AgentLens's documentation uses.",
)];

/// The spec as JSON, with the shared responses filled in (see the module docs).
pub fn spec() -> Value {
    let mut spec = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes");
    let error_content = json!({
        "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } }
    });
    let Some(paths) = spec.get_mut("paths").and_then(Value::as_object_mut) else { return spec };
    for (method, alias, path, operation_id, description) in ALIASES {
        let mut op = paths[path][method].clone();
        op["operationId"] = json!(operation_id);
        op["description"] = json!(description);
        paths.insert(alias.to_owned(), json!({ method: op }));
    }
    for item in paths.values_mut() {
        for method in METHODS {
            let Some(op) = item.get_mut(method).and_then(Value::as_object_mut) else { continue };
            let authenticated = op
                .get("security")
                .and_then(Value::as_array)
                .is_some_and(|reqs| reqs.iter().any(|r| r.as_object().is_some_and(|r| !r.is_empty())));
            let has_body = op.contains_key("requestBody");
            // An optional body is an absent body, not a JSON `null`.
            if let Some(schema) =
                op.get_mut("requestBody").and_then(|b| b.pointer_mut("/content/application~1json/schema"))
            {
                let nullable_of = schema.get("oneOf").and_then(Value::as_array).and_then(|alternatives| {
                    match alternatives.as_slice() {
                        [inner, null] if null == &json!({ "type": "null" }) => Some(inner.clone()),
                        _ => None,
                    }
                });
                if let Some(inner) = nullable_of {
                    *schema = inner;
                }
            }
            let responses = op.entry("responses").or_insert_with(|| json!({}));
            let responses = responses.as_object_mut().expect("responses is an object");
            if authenticated && !responses.contains_key("401") {
                responses.insert(
                    "401".into(),
                    json!({ "description": "No, malformed, expired or wrongly signed credentials, or an unknown, revoked or expired API key" }),
                );
            }
            if has_body && !responses.contains_key("413") {
                responses.insert("413".into(), json!({ "description": "The body is larger than 256 KiB" }));
            }
            if has_body && !responses.contains_key("408") {
                responses.insert(
                    "408".into(),
                    json!({ "description": "The body did not arrive whole within the body timeout (`PARLEY_HTTP_BODY_TIMEOUT`)" }),
                );
            }
            if authenticated && !responses.contains_key("429") {
                responses.insert(
                    "429".into(),
                    json!({
                        "description": "Too many failed authentications from this address; retry after `Retry-After` seconds",
                        "headers": { "Retry-After": {
                            "description": "Seconds until this address may authenticate again",
                            "schema": { "type": "integer", "minimum": 1 },
                        } },
                    }),
                );
            }
            for (status, response) in responses.iter_mut() {
                let is_error = status.parse::<u16>().is_ok_and(|s| s >= 400);
                if is_error && response.get("content").is_none() {
                    response["content"] = error_content.clone();
                }
            }
            let mut sorted: Vec<(String, Value)> = std::mem::take(responses).into_iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            responses.extend(sorted);
        }
    }
    spec
}

/// The spec as the committed `api-spec/openapi.json` holds it (pretty, with a final newline).
pub fn spec_text() -> String {
    let mut text = serde_json::to_string_pretty(&spec()).expect("the spec serializes");
    text.push('\n');
    text
}

/// `GET /api-spec/openapi.json`.
pub fn router() -> axum::Router<crate::http::AppState> {
    axum::Router::new().route(SPEC_PATH, axum::routing::get(openapi_json))
}
