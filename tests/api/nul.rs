//! Text PostgreSQL cannot store (the NUL character, `\u0000` in JSON, `%00` in a query) is
//! refused at the door: 400 `invalid_body` naming the field (401 in a token), nothing stored,
//! on every route family and over MCP. Valid Unicode of any script passes untouched.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{Answer, TestApp, answer},
    mcp::{assert_tool_error, call_tool, claimed_over_mcp},
};

/// Asserts a 400 `invalid_body` whose message names `field`.
fn assert_refused(answer: &Answer, field: &str) {
    answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let message = answer.body["error"].as_str().unwrap();
    assert!(message.contains(field), "the message should name {field}: {message}");
    assert!(message.contains("NUL"), "the message should say what is wrong: {message}");
}

/// Sets the string at JSON pointer `pointer` of `body` to `value`.
fn with(mut body: Value, pointer: &str, value: &str) -> Value {
    *body.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} is not in the body")) = Value::String(value.into());
    body
}

#[tokio::test]
async fn agent_names_and_descriptions_with_nul_are_refused_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let maya = app.user_token("user-maya");

    let refused = app.post("/api/agents", &maya, &json!({"name": "Maya\u{0}s agent"})).await;
    assert_refused(&refused, "/name");
    let refused =
        app.post("/api/agents", &maya, &json!({"name": "Maya's agent", "description": "runs \u{0} here"})).await;
    assert_refused(&refused, "/description");
    // The same written as the raw JSON escape.
    let raw = app
        .call_raw(Method::POST, "/api/agents", Some(&maya), r#"{"name": "Maya's agent", "description": "a\u0000b"}"#)
        .await;
    assert_refused(&raw, "/description");
    assert_eq!(app.count("agents").await, 0);
    assert_eq!(app.get("/api/agents", &maya).await.body["agents"], json!([]));

    let agent = app.register_agent("user-maya").await;
    let path = format!("/api/agents/{}", agent.id);
    let refused = app.call(Method::PATCH, &path, Some(&maya), Some(&json!({"name": "re\u{0}named"}))).await;
    assert_refused(&refused, "/name");
    let refused = app.call(Method::PATCH, &path, Some(&maya), Some(&json!({"description": "\u{0}"}))).await;
    assert_refused(&refused, "/description");
    let shown = app.get(&path, &maya).await;
    assert_eq!(shown.body["name"], "user-maya's agent");
    assert_eq!(shown.body["description"], Value::Null);

    // Any script and emoji are text like any other.
    let renamed = app.call(Method::PATCH, &path, Some(&maya), Some(&json!({"name": "Мая 陈 🦀 agent"}))).await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.text);
    assert_eq!(app.get(&path, &maya).await.body["name"], "Мая 陈 🦀 agent");
}

#[tokio::test]
async fn negotiation_requests_with_nul_in_any_string_or_key_are_refused_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let cases = [
        "/sourceUser/name",
        "/candidateUser/name",
        "/sourceUser/profile/bio",
        "/candidateUser/profile/skills/0",
        "/sourceUser/intents/0/text",
        "/discoveryQuery",
        "/seedAssessment/reasoning",
        "/indexContext/index",
    ];
    for pointer in cases {
        let body = with(fixtures::good_match(), pointer, "text with a \u{0} inside");
        let refused = app.post("/api/negotiations", &service, &body).await;
        assert_refused(&refused, pointer);
    }
    // Free-form parts: a NUL in a key of the profile or of the index context.
    let mut body = fixtures::good_match();
    body["sourceUser"]["profile"]["favourite\u{0}colour"] = json!("green");
    assert_refused(&app.post("/api/negotiations", &service, &body).await, "/sourceUser/profile/favourite");
    let mut body = fixtures::good_match();
    body["indexContext"] = json!({"nested": [{"k\u{0}": 1}]});
    assert_refused(&app.post("/api/negotiations", &service, &body).await, "/indexContext/nested/0/k");
    // The raw escape deep inside free-form JSON (jsonb's "unsupported Unicode escape sequence").
    let raw = fixtures::good_match().to_string().replace(r#""founders-and-engineers""#, r#""a\u0000b""#);
    assert_refused(&app.call_raw(Method::POST, "/api/negotiations", Some(&service), raw).await, "/indexContext/index");

    for table in ["tasks", "opportunities", "messages", "conversations"] {
        assert_eq!(app.count(table).await, 0, "{table} should be empty");
    }
    assert_eq!(app.get("/api/opportunities", &service).await.body["opportunities"], json!([]));

    // Non-Latin names, emoji and an escaped backslash followed by "u0000" are fine.
    let mut body = fixtures::good_match();
    body["sourceUser"]["name"] = json!("Мая Чен 陈美 🦀");
    body["discoveryQuery"] = json!(r"literally \u0000 in text");
    let created = app.post("/api/negotiations", &service, &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
}

#[tokio::test]
async fn a_respond_with_nul_is_refused_and_the_turn_does_not_advance() {
    let app = TestApp::spawn().await;
    let (agent, id, token) = app.claimed_negotiation().await;
    let before = app.snapshot(&id).await;

    let good = answer("accept", Some(&token));
    let refused = app.respond(&agent, &id, &with(good.clone(), "/message", "ok\u{0}")).await;
    assert_refused(&refused, "/message");
    let refused = app.respond(&agent, &id, &with(good.clone(), "/assessment/reasoning", "\u{0}because")).await;
    assert_refused(&refused, "/assessment/reasoning");
    assert_eq!(app.snapshot(&id).await, before, "the turn must not advance");

    let accepted = app.respond(&agent, &id, &with(good, "/message", "Ja, gerne — 좋아요 ✅")).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
}

#[tokio::test]
async fn query_parameters_with_nul_are_refused() {
    let app = TestApp::spawn().await;
    let service = app.service_token();
    let refused = app.get("/api/opportunities?userId=x%00", &service).await;
    assert_refused(&refused, "userId");
    let refused = app.get("/api/opportunities?status=all&user%00Id=x", &service).await;
    assert_refused(&refused, "user");

    let agent = app.register_agent("user-tomas").await;
    let listed =
        app.agent_call(&agent, Method::GET, "/negotiations?status=all&counterpartUserId=user-%00maya", None).await;
    assert_refused(&listed, "counterpartUserId");
    let picked = app.agent_call(&agent, Method::POST, "/negotiations/pickup?wait=%00", None).await;
    assert_refused(&picked, "wait");

    // Percent-encoded non-Latin text is a value like any other.
    let fine = app.get("/api/opportunities?userId=%E9%99%88%F0%9F%A6%80", &service).await;
    assert_eq!(fine.status, StatusCode::OK, "{}", fine.text);
}

#[tokio::test]
async fn a_token_whose_subject_holds_nul_is_unauthorized_on_every_database_route() {
    let app = TestApp::spawn().await;
    let user = app.user_token("user-\u{0}maya");
    let service = app.token("plat\u{0}form", parley::CallerRole::Service);

    for path in ["/api/opportunities", "/api/agents"] {
        app.get(path, &user).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    app.post("/api/agents", &user, &json!({"name": "an agent"}))
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    app.post("/api/negotiations", &service, &fixtures::good_match())
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    app.get("/api/opportunities", &service).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(app.count("agents").await, 0);
    assert_eq!(app.count("tasks").await, 0);
}

#[tokio::test]
async fn an_mcp_respond_with_nul_is_a_tool_error_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let (agent, id) = claimed_over_mcp(&app).await;
    let before = app.snapshot(&id).await;

    for (field, value) in [("message", "fine"), ("reasoning", "fine")] {
        let mut arguments = json!({"negotiationId": id, "action": "accept", "message": "ok", "reasoning": "because"});
        arguments[field] = json!(format!("{value}\u{0}"));
        let refused = call_tool(&app, &agent.key, "respond_to_negotiation", arguments).await;
        assert_tool_error(&refused, "invalid_body");
        let message = refused["structuredContent"]["error"].as_str().unwrap();
        assert!(message.contains(&format!("/params/arguments/{field}")), "{message}");
    }
    assert_eq!(app.snapshot(&id).await, before, "the turn must not advance");

    let answered = call_tool(
        &app,
        &agent.key,
        "respond_to_negotiation",
        json!({"negotiationId": id, "action": "accept", "message": "Oui, avec plaisir 🤝", "reasoning": "合っている"}),
    )
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
}
