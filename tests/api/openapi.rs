//! The OpenAPI document: committed and generated are the same, it is served, and it is true:
//! every operation is called against a running server, and every answer's status must be one the
//! operation declares and its body must validate against the declared schema.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{fixtures, helpers::TestApp};

const REGENERATE: &str = "cargo run -q -- openapi > api-spec/openapi.json";

#[test]
fn the_committed_spec_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/api-spec/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = parley::openapi_spec_text();
    assert!(
        committed == generated,
        "api-spec/openapi.json differs from the OpenAPI the code generates; regenerate it with `{REGENERATE}` and commit it"
    );
}

#[test]
fn the_spec_is_openapi_3_1_with_both_kinds_of_credentials() {
    let spec = parley::openapi_spec();
    assert_eq!(spec["openapi"], "3.1.0");
    let schemes = &spec["components"]["securitySchemes"];
    assert_eq!(schemes["bearerJwt"]["scheme"], "bearer");
    assert_eq!(schemes["agentKeyBearer"]["scheme"], "bearer");
    assert_eq!(schemes["agentKey"]["type"], "apiKey");
    assert_eq!(schemes["agentKey"]["in"], "header");
    assert_eq!(schemes["agentKey"]["name"], "x-api-key");
    let pickup = &spec["paths"]["/api/agents/{id}/negotiations/pickup"]["post"];
    assert_eq!(pickup["security"], json!([{ "agentKeyBearer": [] }, { "agentKey": [] }]));
    assert!(pickup["responses"]["200"]["content"]["application/json"]["schema"].is_object());
    assert!(spec["components"]["schemas"]["Pickup"]["example"]["claimToken"].is_string());
    assert!(spec["components"]["schemas"]["RespondIn"]["example"]["action"].is_string());
    // Every error status of every operation carries the shared error body.
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.as_str() >= "400" {
                    assert_eq!(
                        response["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
}

/// The operations that accept an empty body declare their body optional, so that a client
/// generated from the document does not demand one.
#[test]
fn bodies_the_operations_do_without_are_optional() {
    let spec = parley::openapi_spec();
    for path in [
        "/api/agents/{id}/keys",
        "/api/agents/{id}/negotiations/{negotiationId}/extend",
        "/api/agents/{id}/negotiations/{negotiationId}/release",
        "/api/agents/{id}/delegations/{requestId}/reject",
        "/api/opportunities/{id}/reactivate",
    ] {
        let body = &spec["paths"][path]["post"]["requestBody"];
        assert!(body["content"]["application/json"]["schema"].is_object(), "POST {path}: {body}");
        assert_ne!(body["required"], json!(true), "POST {path}");
    }
}

#[tokio::test]
async fn the_spec_is_served() {
    let app = TestApp::spawn().await;
    let answer = app.call(Method::GET, "/api-spec/openapi.json", None, None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, parley::openapi_spec());
}

/// How a request authenticates.
#[derive(Clone)]
enum Auth {
    None,
    Jwt(String),
    Key(String),
}

/// One request and the operation it exercises.
struct Call {
    method: Method,
    template: &'static str,
    path: String,
    auth: Auth,
    body: Option<String>,
}

fn call(method: Method, template: &'static str, path: impl Into<String>, auth: &Auth, body: Option<Value>) -> Call {
    Call { method, template, path: path.into(), auth: auth.clone(), body: body.map(|b| b.to_string()) }
}

/// Walks the spec and checks answers against it.
struct Checker {
    spec: Value,
    seen: BTreeSet<(String, String)>,
    statuses: BTreeSet<(String, String, u16)>,
    validators: std::collections::HashMap<String, jsonschema::Validator>,
}

/// A validator for `schema`, whose `$ref`s point into the spec's components.
fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let document = json!({ "components": { "schemas": spec["components"]["schemas"] }, "allOf": [schema] });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&document)
        .unwrap_or_else(|e| panic!("the schema {schema} does not compile: {e}"))
}

fn errors_of(validator: &jsonschema::Validator, body: &Value) -> Vec<String> {
    validator.iter_errors(body).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

/// What is wrong with `body` under `schema`.
fn schema_errors(spec: &Value, schema: &Value, body: &Value) -> Vec<String> {
    errors_of(&validator(spec, schema), body)
}

#[test]
fn the_checker_rejects_bodies_that_do_not_match() {
    let spec = parley::openapi_spec();
    let error = &json!({"$ref": "#/components/schemas/ErrorBody"});
    assert!(schema_errors(&spec, error, &json!({"error": "x", "code": "y"})).is_empty());
    assert!(!schema_errors(&spec, error, &json!({"error": "x"})).is_empty());
    let turn = &json!({"$ref": "#/components/schemas/TurnOut"});
    let good = json!({"turnNumber": 0, "side": "source", "userId": "u", "action": "propose", "reasoning": "r",
        "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}, "message": null, "playedBy": "system",
        "decidedBy": "rules", "createdAt": "2026-01-01T00:00:00Z"});
    assert!(schema_errors(&spec, turn, &good).is_empty(), "{:?}", schema_errors(&spec, turn, &good));
    for (field, bad) in [
        ("action", json!("haggle")),
        ("createdAt", json!("yesterday")),
        ("turnNumber", json!(-1)),
        ("playedBy", json!("the agent")),
        ("decidedBy", json!("gut feeling")),
    ] {
        let mut wrong = good.clone();
        wrong[field] = bad;
        assert!(!schema_errors(&spec, turn, &wrong).is_empty(), "{field} should be refused");
    }
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Checker {
    fn new() -> Checker {
        Checker {
            spec: parley::openapi_spec(),
            seen: BTreeSet::new(),
            statuses: BTreeSet::new(),
            validators: Default::default(),
        }
    }

    fn operations(&self) -> BTreeSet<(String, String)> {
        let mut ops = BTreeSet::new();
        for (path, item) in self.spec["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                ops.insert((method.to_uppercase(), path.clone()));
            }
        }
        ops
    }

    async fn run(&mut self, app: &TestApp, c: Call) -> (StatusCode, Value) {
        let mut req = app.client.request(c.method.clone(), format!("{}{}", app.base, c.path));
        match &c.auth {
            Auth::None => {}
            Auth::Jwt(t) => req = req.bearer_auth(t),
            Auth::Key(k) => req = req.header("x-api-key", k),
        }
        if let Some(b) = &c.body {
            req = req.header("content-type", "application/json").body(b.clone());
        }
        let response = req.send().await.expect("request failed");
        let status = response.status();
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let method = c.method.as_str().to_lowercase();
        let op_pointer = format!("/paths/{}/{method}", pointer_escape(c.template));
        let op =
            self.spec.pointer(&op_pointer).unwrap_or_else(|| panic!("{} {} is not in the spec", c.method, c.template));
        let declared = &op["responses"][status.as_str()];
        assert!(
            declared.is_object(),
            "{} {} answered {status}, which the spec does not declare for {} {}",
            c.method,
            c.path,
            c.method,
            c.template
        );
        self.seen.insert((c.method.to_string(), c.template.to_owned()));
        self.statuses.insert((c.method.to_string(), c.template.to_owned(), status.as_u16()));
        // A stream never ends: its status and media type are all there is to check.
        if content_type.starts_with("text/event-stream") {
            assert!(declared["content"]["text/event-stream"].is_object(), "{} {}: undeclared stream", c.method, c.path);
            return (status, Value::Null);
        }
        let text = response.text().await.unwrap();
        let Some(content) = declared["content"].as_object() else {
            assert!(
                text.is_empty(),
                "{} {} answered {status} with a body the spec does not declare: {text}",
                c.method,
                c.path
            );
            return (status, Value::Null);
        };
        let media = content_type.split(';').next().unwrap_or("").trim().to_owned();
        assert!(
            content.contains_key(&media),
            "{} {} answered {status} as {media}, declared {:?}",
            c.method,
            c.path,
            content.keys()
        );
        if media != "application/json" {
            return (status, Value::Null);
        }
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} {}: not JSON ({e}): {text}", c.method, c.path));
        let schema = &content["application/json"]["schema"];
        let spec = &self.spec;
        let validator = self.validators.entry(schema.to_string()).or_insert_with(|| validator(spec, schema));
        let errors = errors_of(validator, &body);
        assert!(
            errors.is_empty(),
            "{} {} answered {status} with a body that does not match its schema:\n{}\nbody: {body:#}",
            c.method,
            c.path,
            errors.join("\n")
        );
        (status, body)
    }

    /// Runs `c`, asserting its status too.
    async fn expect(&mut self, app: &TestApp, c: Call, want: StatusCode) -> Value {
        let what = format!("{} {}", c.method, c.path);
        let (status, body) = self.run(app, c).await;
        assert_eq!(status, want, "{what}: {body}");
        body
    }
}

#[tokio::test]
async fn every_operation_answers_as_its_spec_declares() {
    use StatusCode as S;
    let app = TestApp::spawn().await;
    let mut ch = Checker::new();
    let none = Auth::None;
    let service = Auth::Jwt(app.service_token());
    let maya = Auth::Jwt(app.user_token("user-maya"));
    let tomas = Auth::Jwt(app.user_token("user-tomas"));
    let nobody = uuid::Uuid::now_v7().to_string();

    // Probes, the page and this document.
    ch.expect(&app, call(Method::GET, "/healthz", "/healthz", &none, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/api/health", "/api/health", &none, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/readyz", "/readyz", &none, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/", "/", &none, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/api-spec/openapi.json", "/api-spec/openapi.json", &none, None), S::OK).await;

    // Tomas registers a personal agent and manages its keys.
    let created = ch
        .expect(
            &app,
            call(Method::POST, "/api/agents", "/api/agents", &tomas, Some(json!({"name": "Tomas's agent"}))),
            S::CREATED,
        )
        .await;
    let agent = created["agent"]["id"].as_str().unwrap().to_owned();
    let key = Auth::Key(created["apiKey"]["key"].as_str().unwrap().to_owned());
    let a = format!("/api/agents/{agent}");
    ch.expect(&app, call(Method::GET, "/api/agents", "/api/agents", &tomas, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/api/agents/{id}", &a, &tomas, None), S::OK).await;
    ch.expect(&app, call(Method::GET, "/api/agents/me", "/api/agents/me", &key, None), S::OK).await;
    ch.expect(
        &app,
        call(Method::PATCH, "/api/agents/{id}", &a, &tomas, Some(json!({"description": "On my laptop"}))),
        S::OK,
    )
    .await;
    let second = ch
        .expect(&app, call(Method::POST, "/api/agents/{id}/keys", format!("{a}/keys"), &tomas, None), S::CREATED)
        .await;
    let second_id = second["id"].as_str().unwrap();
    ch.expect(
        &app,
        call(Method::DELETE, "/api/agents/{id}/keys/{keyId}", format!("{a}/keys/{second_id}"), &tomas, None),
        S::NO_CONTENT,
    )
    .await;

    // The platform starts a negotiation; Tomas's turn is parked for his agent.
    let started = ch
        .expect(
            &app,
            call(Method::POST, "/api/negotiations", "/api/negotiations", &service, Some(fixtures::good_match())),
            S::CREATED,
        )
        .await;
    let n = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let o = started["opportunity"]["id"].as_str().unwrap().to_owned();
    let ctx = started["negotiation"]["conversationId"].as_str().unwrap().to_owned();
    ch.expect(
        &app,
        call(Method::GET, "/api/negotiations/{id}", format!("/api/negotiations/{n}"), &service, None),
        S::OK,
    )
    .await;
    ch.expect(&app, call(Method::GET, "/api/tasks/{id}", format!("/api/tasks/{n}"), &maya, None), S::OK).await;
    ch.expect(
        &app,
        call(Method::GET, "/api/conversations/{id}", format!("/api/conversations/{ctx}"), &maya, None),
        S::OK,
    )
    .await;
    ch.expect(&app, call(Method::GET, "/api/opportunities", "/api/opportunities?limit=10", &maya, None), S::OK).await;
    ch.expect(
        &app,
        call(Method::GET, "/api/opportunities/{id}", format!("/api/opportunities/{o}"), &maya, None),
        S::OK,
    )
    .await;
    ch.expect(&app, call(Method::GET, "/api/events", "/api/events", &maya, None), S::OK).await;

    // The agent's side: list, read, pickup, extend, release, pickup again, respond.
    let an = "/api/agents/{id}/negotiations/{negotiationId}";
    ch.expect(
        &app,
        call(Method::GET, "/api/agents/{id}/negotiations", format!("{a}/negotiations?status=all"), &key, None),
        S::OK,
    )
    .await;
    ch.expect(&app, call(Method::GET, an, format!("{a}/negotiations/{n}"), &key, None), S::OK).await;
    ch.expect(&app, call(Method::GET, an, format!("{a}/negotiations/{n}"), &tomas, None), S::OK).await;
    let pickup = "/api/agents/{id}/negotiations/pickup";
    ch.expect(&app, call(Method::POST, pickup, format!("{a}/negotiations/pickup?skip={n}"), &key, None), S::NO_CONTENT)
        .await;
    ch.expect(
        &app,
        call(Method::POST, pickup, format!("{a}/negotiations/pickup?skip=nope"), &key, None),
        S::BAD_REQUEST,
    )
    .await;
    let picked =
        ch.expect(&app, call(Method::POST, pickup, format!("{a}/negotiations/pickup"), &key, None), S::OK).await;
    let token = picked["claimToken"].as_str().unwrap().to_owned();
    let claim = json!({ "claimToken": token });
    ch.expect(
        &app,
        call(
            Method::POST,
            "/api/agents/{id}/negotiations/{negotiationId}/extend",
            format!("{a}/negotiations/{n}/extend"),
            &key,
            Some(claim.clone()),
        ),
        S::OK,
    )
    .await;
    let release = "/api/agents/{id}/negotiations/{negotiationId}/release";
    let reason = json!({ "claimToken": token, "reason": "my program failed", "handBack": false });
    ch.expect(&app, call(Method::POST, release, format!("{a}/negotiations/{n}/release"), &key, Some(reason)), S::OK)
        .await;
    ch.expect(
        &app,
        call(
            Method::POST,
            "/api/agents/{id}/negotiations/{negotiationId}/extend",
            format!("{a}/negotiations/{n}/extend"),
            &key,
            Some(claim),
        ),
        S::CONFLICT,
    )
    .await;
    let picked =
        ch.expect(&app, call(Method::POST, pickup, format!("{a}/negotiations/pickup?wait=1"), &key, None), S::OK).await;
    let respond = "/api/agents/{id}/negotiations/{negotiationId}/respond";
    let mut answer = crate::helpers::answer("accept", picked["claimToken"].as_str());
    ch.expect(
        &app,
        call(Method::POST, respond, format!("{a}/negotiations/{n}/respond"), &key, Some(answer.clone())),
        S::OK,
    )
    .await;
    answer["action"] = json!("counter");
    ch.expect(
        &app,
        call(Method::POST, respond, format!("{a}/negotiations/{n}/respond"), &key, Some(answer)),
        S::CONFLICT,
    )
    .await;
    ch.expect(&app, call(Method::POST, pickup, format!("{a}/negotiations/pickup"), &key, None), S::NO_CONTENT).await;
    ch.expect(
        &app,
        call(Method::POST, "/api/agents/{id}/heartbeat", format!("{a}/heartbeat"), &key, None),
        S::NO_CONTENT,
    )
    .await;

    // The agent offers work; anyone finds it; its trust is read.
    let caps = "/api/agents/{id}/capabilities";
    let offer = json!({"taskType": "code-review", "inputSchema": {"type": "object"}, "outputSchema": {}, "estimatedCostUsd": 0.05});
    let offered = ch
        .expect(&app, call(Method::PUT, caps, format!("{a}/capabilities"), &key, Some(offer.clone())), S::CREATED)
        .await;
    ch.expect(&app, call(Method::PUT, caps, format!("{a}/capabilities"), &tomas, Some(offer)), S::OK).await;
    ch.expect(&app, call(Method::GET, caps, format!("{a}/capabilities"), &key, None), S::OK).await;
    let cap = offered["capability"]["id"].as_str().unwrap().to_owned();
    let permissions = "/api/agents/{id}/capabilities/{capabilityId}/permissions";
    ch.expect(
        &app,
        call(
            Method::PUT,
            permissions,
            format!("{a}/capabilities/{cap}/permissions"),
            &key,
            Some(json!({"acceptDelegations": false})),
        ),
        S::OK,
    )
    .await;
    let discover = "/api/agents/discover";
    ch.expect(&app, call(Method::GET, discover, "/api/agents/discover?taskType=code-review", &maya, None), S::OK).await;
    ch.expect(
        &app,
        call(Method::GET, discover, "/api/agents/discover?taskType=code-review&limit=none", &maya, None),
        S::BAD_REQUEST,
    )
    .await;
    ch.expect(
        &app,
        call(Method::GET, "/api/discovery", "/api/discovery?taskType=code-review&maxCost=1", &maya, None),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(Method::GET, "/api/discovery", "/api/discovery?taskType=code-review&sort=cheapest", &maya, None),
        S::BAD_REQUEST,
    )
    .await;
    let rank = "/api/agents/rank";
    let task = json!({"task_summary": "review rust code", "max_cost_amount": "$0.01", "taskType": "code-review"});
    ch.expect(&app, call(Method::POST, rank, rank, &maya, Some(task)), S::OK).await;
    let task = json!({"task_summary": "review rust code", "taskType": "code-review"});
    let ranked = ch.expect(&app, call(Method::POST, rank, rank, &key, Some(task)), S::OK).await;
    assert_eq!(ranked["candidates"].as_array().map(Vec::len), Some(1), "{ranked}");
    ch.expect(
        &app,
        call(Method::POST, rank, rank, &maya, Some(json!({"task_summary": "x", "limit": 0}))),
        S::BAD_REQUEST,
    )
    .await;
    ch.expect(&app, call(Method::GET, "/api/trust/{agentId}", format!("/api/trust/{agent}"), &service, None), S::OK)
        .await;
    ch.expect(
        &app,
        call(
            Method::DELETE,
            "/api/agents/{id}/capabilities/{capabilityId}",
            format!("{a}/capabilities/{cap}"),
            &key,
            None,
        ),
        S::OK,
    )
    .await;

    // Tomas's agent delegates work to Ana's, which takes it, completes one, rejects one, fails one.
    let ana = ch
        .expect(
            &app,
            call(
                Method::POST,
                "/api/agents",
                "/api/agents",
                &Auth::Jwt(app.user_token("user-ana")),
                Some(json!({"name": "Ana's agent"})),
            ),
            S::CREATED,
        )
        .await;
    let target = ana["agent"]["id"].as_str().unwrap().to_owned();
    let tkey = Auth::Key(ana["apiKey"]["key"].as_str().unwrap().to_owned());
    let t = format!("/api/agents/{target}");
    let review =
        json!({"taskType": "code-review", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}});
    let offered =
        ch.expect(&app, call(Method::PUT, caps, format!("{t}/capabilities"), &tkey, Some(review)), S::CREATED).await;
    let anon = offered["anonymousAgentId"].as_str().unwrap().to_owned();
    let delegate = "/api/agents/delegate";
    let ask = |rid: &str| json!({"requestId": rid, "agentId": agent, "targetAnonymousId": anon, "taskType": "code-review", "input": {"code": "x"}});
    let (r1, r2, r3) =
        (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    for r in [&r1, &r2, &r3] {
        ch.expect(&app, call(Method::POST, delegate, format!("{delegate}?wait=0"), &key, Some(ask(r))), S::ACCEPTED)
            .await;
    }
    // The same operation at AgentLens's paths: the seed's, and its MCP tool's (result at the top).
    for alias in ["/api/delegation/delegate", "/api/delegations"] {
        let r = uuid::Uuid::new_v4().to_string();
        let mut body = ask(&r);
        body.as_object_mut().unwrap().remove("agentId");
        let answered =
            ch.expect(&app, call(Method::POST, alias, format!("{alias}?wait=0"), &key, Some(body)), S::ACCEPTED).await;
        assert_eq!(answered["result"]["status"], "pending", "{answered}");
        let reject = format!("{t}/delegations/{r}/reject");
        ch.run(&app, call(Method::POST, "/api/agents/{id}/delegations/{requestId}/reject", reject, &tkey, None)).await;
    }
    ch.expect(
        &app,
        call(
            Method::POST,
            delegate,
            delegate,
            &key,
            Some(json!({"agentId": agent, "taskType": "cooking", "input": {}})),
        ),
        S::BAD_REQUEST,
    )
    .await;
    ch.expect(
        &app,
        call(Method::GET, "/api/agents/{id}/delegations/inbox", format!("{t}/delegations/inbox?wait=1"), &tkey, None),
        S::OK,
    )
    .await;
    let accept = "/api/agents/{id}/delegations/{requestId}/accept";
    let complete = "/api/agents/{id}/delegations/{requestId}/complete";
    let reject = "/api/agents/{id}/delegations/{requestId}/reject";
    let fail = "/api/agents/{id}/delegations/{requestId}/fail";
    for r in [&r1, &r3] {
        ch.expect(&app, call(Method::POST, accept, format!("{t}/delegations/{r}/accept"), &tkey, None), S::OK).await;
    }
    ch.expect(&app, call(Method::POST, accept, format!("{t}/delegations/{r1}/accept"), &tkey, None), S::CONFLICT).await;
    ch.expect(
        &app,
        call(
            Method::POST,
            complete,
            format!("{t}/delegations/{r1}/complete"),
            &tkey,
            Some(json!({"output": "not an object"})),
        ),
        S::BAD_REQUEST,
    )
    .await;
    ch.expect(
        &app,
        call(
            Method::POST,
            complete,
            format!("{t}/delegations/{r1}/complete"),
            &tkey,
            Some(json!({"output": {"feedback": "ok"}})),
        ),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(Method::POST, reject, format!("{t}/delegations/{r2}/reject"), &tkey, Some(json!({"reason": "busy"}))),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(Method::POST, fail, format!("{t}/delegations/{r3}/fail"), &tkey, Some(json!({"error": "crashed"}))),
        S::OK,
    )
    .await;
    ch.expect(&app, call(Method::POST, delegate, format!("{delegate}?wait=1"), &key, Some(ask(&r1))), S::OK).await;
    let read = "/api/delegations/{requestId}";
    let done =
        ch.expect(&app, call(Method::GET, read, format!("/api/delegations/{r1}?wait=1"), &key, None), S::OK).await;
    let declined =
        ch.expect(&app, call(Method::GET, read, format!("/api/delegations/{r2}"), &tomas, None), S::OK).await;
    // Each attempt is an A2A task: completed (with its artifact) and rejected.
    let tasks = "/api/tasks/{id}";
    let done_task = done["delegation"]["attempts"][0]["taskId"].as_str().unwrap().to_owned();
    let declined_task = declined["delegation"]["attempts"][0]["taskId"].as_str().unwrap().to_owned();
    ch.expect(&app, call(Method::GET, tasks, format!("/api/tasks/{done_task}"), &tkey, None), S::OK).await;
    ch.expect(&app, call(Method::GET, tasks, format!("/api/tasks/{declined_task}"), &tomas, None), S::OK).await;
    ch.expect(&app, call(Method::GET, tasks, format!("/api/tasks/{done_task}"), &maya, None), S::NOT_FOUND).await;
    let list = "/api/agents/{id}/delegations";
    ch.expect(&app, call(Method::GET, list, format!("{a}/delegations?direction=outbound&limit=2"), &key, None), S::OK)
        .await;
    ch.expect(&app, call(Method::GET, list, format!("{t}/delegations?direction=inbound"), &tkey, None), S::OK).await;
    ch.expect(&app, call(Method::GET, list, format!("{a}/delegations?direction=sideways"), &key, None), S::BAD_REQUEST)
        .await;

    // The people decide; the platform cancels another negotiation.
    let decision = "/api/opportunities/{id}/decision";
    ch.expect(
        &app,
        call(
            Method::POST,
            decision,
            format!("/api/opportunities/{o}/decision"),
            &maya,
            Some(json!({"decision": "accept"})),
        ),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(
            Method::POST,
            decision,
            format!("/api/opportunities/{o}/decision"),
            &maya,
            Some(json!({"decision": "accept"})),
        ),
        S::CONFLICT,
    )
    .await;
    let other = fixtures::request(fixtures::pastry_chef(), fixtures::engineer(), 60.0);
    let started = ch
        .expect(&app, call(Method::POST, "/api/negotiations", "/api/negotiations", &service, Some(other)), S::CREATED)
        .await;
    let n2 = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let cancel = "/api/negotiations/{id}";
    ch.expect(&app, call(Method::DELETE, cancel, format!("/api/negotiations/{n2}"), &service, None), S::OK).await;
    ch.expect(&app, call(Method::DELETE, cancel, format!("/api/negotiations/{n2}"), &service, None), S::CONFLICT).await;
    // The platform gives the canceled one a second chance: a new round, then the same again.
    let reactivate = "/api/opportunities/{id}/reactivate";
    let o2 = started["opportunity"]["id"].as_str().unwrap().to_owned();
    ch.expect(
        &app,
        call(Method::POST, reactivate, format!("/api/opportunities/{o2}/reactivate"), &service, Some(json!({}))),
        S::CREATED,
    )
    .await;
    ch.expect(
        &app,
        call(Method::POST, reactivate, format!("/api/opportunities/{o2}/reactivate"), &service, Some(json!({}))),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(Method::POST, reactivate, format!("/api/opportunities/{o}/reactivate"), &service, Some(json!({}))),
        S::CONFLICT,
    )
    .await;
    // How it all went, for Tomas and for the platform.
    let insights = ch.expect(&app, call(Method::GET, "/api/insights", "/api/insights", &tomas, None), S::OK).await;
    assert_eq!(insights["total"]["negotiations"]["accepted"], 1, "{insights}");
    ch.expect(&app, call(Method::GET, "/api/insights", "/api/insights?userId=user-maya", &service, None), S::OK).await;

    // The hub's self-assessment.
    let assess = "/agent/negotiation";
    ch.expect(
        &app,
        call(
            Method::POST,
            assess,
            assess,
            &none,
            Some(json!({"task_summary": "Negotiate a match for a Rust engineer"})),
        ),
        S::OK,
    )
    .await;
    ch.expect(
        &app,
        call(Method::POST, assess, assess, &none, Some(json!({"task_details": "no summary"}))),
        S::BAD_REQUEST,
    )
    .await;

    // A2A: the card, and a JSON-RPC call (its errors are JSON-RPC answers, 200).
    let card = "/.well-known/agent-card.json";
    ch.expect(&app, call(Method::GET, card, card, &none, None), S::OK).await;
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": nobody}});
    let got = ch.expect(&app, call(Method::POST, "/a2a", "/a2a", &key, Some(rpc)), S::OK).await;
    assert_eq!(got["error"]["code"], -32001, "{got}");

    // Bad requests, for every operation: no credentials, a body that is not JSON, unknown ids,
    // the wrong kind of credentials.
    let ops = ch.operations();
    for (method, template) in &ops {
        let op = ch.spec["paths"][template][method.to_lowercase()].clone();
        let template: &'static str = Box::leak(template.clone().into_boxed_str());
        let method: Method = method.parse().unwrap();
        let secured =
            op["security"].as_array().is_some_and(|s| s.iter().any(|r| r.as_object().is_some_and(|r| !r.is_empty())));
        let path_for = |id: &str, second: &str| {
            template
                .replacen("{id}", id, 1)
                .replace("{agentId}", id)
                .replace("{negotiationId}", second)
                .replace("{keyId}", second)
                .replace("{capabilityId}", second)
                .replace("{requestId}", second)
                .replace("{questionId}", second)
        };
        let real = path_for(&agent, &n);
        let auth = if template.starts_with("/api/agents/{id}/negotiations")
            || template.starts_with("/api/agents/{id}/delegations")
            || ["/api/agents/delegate", "/api/delegation/delegate", "/api/delegations", "/a2a"].contains(&template)
        {
            key.clone()
        } else if template.starts_with("/api/agents") || template.ends_with("/decision") {
            tomas.clone()
        } else {
            service.clone()
        };
        if secured {
            ch.expect(&app, call(method.clone(), template, real.clone(), &none, None), S::UNAUTHORIZED).await;
            ch.expect(
                &app,
                call(method.clone(), template, real.clone(), &Auth::Jwt("not-a-token".into()), None),
                S::UNAUTHORIZED,
            )
            .await;
        }
        if op.get("requestBody").is_some() {
            let c = Call {
                method: method.clone(),
                template,
                path: real.clone(),
                auth: auth.clone(),
                body: Some("{\"oops\": [".into()),
            };
            // A JSON-RPC endpoint answers a body that is not JSON with a parse error (-32700).
            let want = if template == "/a2a" { S::OK } else { S::BAD_REQUEST };
            ch.expect(&app, c, want).await;
        }
        if template.contains('{') {
            let unknown = path_for(&nobody, &nobody);
            let (status, _) = ch.run(&app, call(method.clone(), template, unknown, &auth, None)).await;
            assert!(status.is_client_error(), "{method} {template} with unknown ids: {status}");
        }
        if secured && template != "/api/events" {
            // Another user's (or the wrong kind of) credentials.
            let (status, _) = ch.run(&app, call(method.clone(), template, real, &maya, None)).await;
            assert!(status.is_client_error() || status.is_success(), "{method} {template} as another user: {status}");
        }
    }
    let key_auth = Auth::Key("pk_not-a-real-key".into());
    ch.expect(&app, call(Method::POST, pickup, format!("{a}/negotiations/pickup"), &key_auth, None), S::UNAUTHORIZED)
        .await;
    ch.expect(
        &app,
        call(Method::POST, pickup, format!("{a}/negotiations/pickup?wait=soon"), &key, None),
        S::BAD_REQUEST,
    )
    .await;
    ch.expect(&app, call(Method::GET, "/api/opportunities", "/api/opportunities?limit=0", &maya, None), S::BAD_REQUEST)
        .await;
    ch.expect(&app, call(Method::GET, "/api/insights", "/api/insights?from=soon", &maya, None), S::BAD_REQUEST).await;
    ch.expect(&app, call(Method::DELETE, "/api/agents/{id}", &a, &tomas, None), S::NO_CONTENT).await;

    let missed: Vec<_> = ops.difference(&ch.seen).collect();
    assert!(missed.is_empty(), "operations never called: {missed:?}");
    // Every operation was also refused at least once.
    for (method, template) in &ops {
        let refused = ch.statuses.iter().any(|(m, t, s)| m == method && t == template && *s >= 400);
        let public =
            ["/healthz", "/api/health", "/readyz", "/", "/api-spec/openapi.json", "/.well-known/agent-card.json"]
                .contains(&template.as_str());
        assert!(refused || public, "{method} {template} was never given a bad request");
    }
}

/// The task types are written out as a pattern wherever the API takes one (capabilities,
/// discovery, ranking): each of those patterns is exactly the list the service parses.
#[test]
fn every_task_type_pattern_is_the_list_the_service_parses() {
    use parley::capabilities::TaskType;
    fn walk(v: &serde_json::Value, found: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v.as_str()) {
                        ("pattern", Some(p)) if p.contains("code-review") => found.push(p.to_owned()),
                        _ => walk(v, found),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(&parley::openapi_spec(), &mut found);
    assert!(found.len() >= 3, "the capability, discovery and ranking task types: {found:?}");
    let expected = format!("^({})$", TaskType::ALL.map(TaskType::as_str).join("|"));
    for pattern in found {
        assert_eq!(pattern, expected);
    }
}
