//! One owner per rule for keys and liveness: each test changes or walks the one place a rule is
//! decided and sees every route follow it.
//!
//! - The key verdict is `parley_agent_of_key`'s: replaced in the test's database by one that
//!   calls every key's agent inactive, every kind of route (looked up now, checked in the call's
//!   own statement, MCP, A2A, asking the person) refuses in the same words, and follows the real
//!   function again once it is back.
//! - Whether a key works is `parley_key_works`'s: replaced by one under which only a key with an
//!   expiry works, a key without one is refused everywhere, gives its user a system seat and
//!   leaves its agent not live, while a key with an expiry works.
//! - Whether an agent is live is Rust's (`runtime::liveness::is_live`): the agent view's `live`
//!   and the park window of the user's waiting turn agree on every fact it reads.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp},
};

/// Replaces (or restores) one SQL function in the test's own database.
async fn define(app: &TestApp, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&app.pool).await.unwrap();
}

/// The function's definition as the service applies it.
fn function_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/migrations/functions/{name}.sql", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A call with the agent's key in `x-api-key` (or as a bearer token, for A2A and MCP); returns
/// the status and the refusal's words (`error`, or a JSON-RPC error's message), if any.
async fn with_key(app: &TestApp, key: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, String) {
    let mut req = app.client.request(method, format!("{}{path}", app.base)).header("x-api-key", key);
    if path == "/mcp" {
        req = req.header("accept", "application/json, text/event-stream").header("mcp-protocol-version", "2025-06-18");
    }
    if path.contains("/delegations") {
        req = req.header("prefer", "respond-async");
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
    let words = body["error"].as_str().or(body["error"]["message"].as_str()).unwrap_or_default();
    (status, words.to_owned())
}

/// Every kind of route an agent's key calls: (what it is, method, path, body).
fn key_routes(agent: &TestAgent) -> Vec<(&'static str, Method, String, Option<Value>)> {
    let id = &agent.id;
    let negotiation = Uuid::now_v7();
    let request = Uuid::now_v7();
    vec![
        ("looked up now", Method::GET, "/api/agents/me".into(), None),
        ("looked up now, the path's agent", Method::POST, format!("/api/agents/{id}/heartbeat"), None),
        ("pickup's statement", Method::POST, format!("/api/agents/{id}/negotiations/pickup"), Some(json!({}))),
        (
            "respond's statement",
            Method::POST,
            format!("/api/agents/{id}/negotiations/{negotiation}/respond"),
            Some(json!({"claimToken": "ct_x", "action": "reject", "message": "no", "reasoning": "no"})),
        ),
        (
            "asking the person",
            Method::POST,
            format!("/api/agents/{id}/negotiations/{negotiation}/respond"),
            Some(json!({"claimToken": "ct_x", "action": "ask_person", "question": "May I?"})),
        ),
        (
            "delegate's statement",
            Method::POST,
            "/api/delegations".into(),
            Some(json!({"requestId": request, "taskType": "code-review", "input": {"code": "x"}})),
        ),
        ("the inbox's statement", Method::GET, format!("/api/agents/{id}/delegations/inbox"), None),
        ("accept's statement", Method::POST, format!("/api/agents/{id}/delegations/{request}/accept"), None),
        ("MCP", Method::POST, "/mcp".into(), Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))),
        (
            "A2A",
            Method::POST,
            "/a2a".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": Uuid::now_v7()}})),
        ),
    ]
}

#[tokio::test]
async fn the_key_verdict_is_the_sql_functions_on_every_route() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let routes = key_routes(&agent);
    // The agent is active and its key works; the verdict alone says otherwise.
    define(
        &app,
        "CREATE OR REPLACE FUNCTION parley_agent_of_key(p_key_hash bytea, p_agent uuid)
         RETURNS TABLE (auth text, agent_id uuid, owner_user_id text)
         LANGUAGE sql STABLE AS $$ SELECT 'inactive'::text, NULL::uuid, NULL::text $$",
    )
    .await;
    for (what, method, path, body) in &routes {
        let (status, words) = with_key(&app, &agent.key, method.clone(), path, body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}: {path} answered {status} {words:?}");
        assert!(words.contains("the agent is inactive"), "{what}: {path} said {words:?}");
    }
    // The real verdict back: no route refuses the key.
    define(&app, &function_file("parley_agent_of_key")).await;
    for (what, method, path, body) in &routes {
        let (status, words) = with_key(&app, &agent.key, method.clone(), path, body.clone()).await;
        assert!(
            !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN),
            "{what}: {path} answered {status} {words:?}"
        );
    }
}

#[tokio::test]
async fn whether_a_key_works_is_the_sql_functions_on_every_route() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let token = app.user_token("user-tomas");
    assert_eq!(
        with_key(&app, &agent.key, Method::POST, &format!("/api/agents/{}/heartbeat", agent.id), None).await.0,
        StatusCode::NO_CONTENT
    );
    // From now on only a key with an expiry works: the registered key has none.
    define(
        &app,
        "CREATE OR REPLACE FUNCTION parley_key_works(p_revoked_at timestamptz, p_expires_at timestamptz)
         RETURNS boolean LANGUAGE sql STABLE
         AS $$ SELECT p_revoked_at IS NULL AND p_expires_at IS NOT NULL AND p_expires_at > now() $$",
    )
    .await;
    for (what, method, path, body) in key_routes(&agent) {
        let (status, words) = with_key(&app, &agent.key, method, &path, body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {path} answered {status} {words:?}");
    }
    let view = app.get(&format!("/api/agents/{}", agent.id), &token).await.body;
    assert_eq!(view["live"], false, "seen a moment ago, but with no key that works: {view}");
    let started = app.start(&fixtures::good_match()).await;
    assert_eq!(started["negotiation"]["sides"]["candidate"]["type"], "system", "{started}");

    // A key with an expiry works everywhere.
    let expires = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let key = app
        .call(
            Method::POST,
            &format!("/api/agents/{}/keys", agent.id),
            Some(&token),
            Some(&json!({"expiresAt": expires})),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.text);
    let expiring = TestAgent { key: key.body["key"].as_str().unwrap().to_owned(), ..agent.clone() };
    for (what, method, path, body) in key_routes(&expiring) {
        let (status, words) = with_key(&app, &expiring.key, method, &path, body).await;
        assert!(
            !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN),
            "{what}: {path} answered {status} {words:?}"
        );
    }
    let mut body = fixtures::good_match();
    body["sourceUser"]["id"] = json!("user-ana");
    let started = app.start(&body).await;
    assert_eq!(started["negotiation"]["sides"]["candidate"]["type"], "personal", "{started}");
    let view = app.get(&format!("/api/agents/{}", agent.id), &token).await.body;
    assert_eq!(view["live"], true, "{view}");
}

#[tokio::test]
async fn the_agent_view_and_the_park_window_follow_one_liveness_rule() {
    let app = TestApp::spawn_with(|c| {
        c.park_timeout_offline = Duration::from_secs(60);
        c.park_timeout = Duration::from_secs(120);
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    let (tomas, maya) = (app.user_token("user-tomas"), app.user_token("user-maya"));
    let mut body = fixtures::good_match();
    body["candidateUser"]["profile"]["skills"] = json!(["go", "kubernetes"]);
    let id = app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let at = |v: &Value| v.as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    // (whether the agent view says live, how long the waiting turn waits in seconds)
    let observed = || async {
        let live = app.get(&format!("/api/agents/{}", agent.id), &tomas).await.body["live"].clone();
        let view = app.get(&format!("/api/negotiations/{id}"), &maya).await.body;
        assert_eq!(view["status"], "waiting_for_agent", "{view}");
        let waits = (at(&view["awaitingUntil"]) - at(&view["turns"][0]["createdAt"])).num_seconds();
        (live, if waits < 90 { "offline window" } else { "long window" })
    };
    let seen = |ago: &'static str| {
        let sql = format!("UPDATE agents SET last_seen_at = now() - interval '{ago}'");
        let pool = app.pool.clone();
        async move { sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap() }
    };
    let live = (json!(true), "long window");
    let not_live = (json!(false), "offline window");

    assert_eq!(observed().await, not_live, "never seen");
    seen("1 second").await;
    assert_eq!(observed().await, live, "seen just now");
    seen("1 hour").await;
    assert_eq!(observed().await, not_live, "seen before the liveness window");
    seen("1 second").await;
    sqlx::query("UPDATE agents SET status = 'inactive'").execute(&app.pool).await.unwrap();
    assert_eq!(observed().await, not_live, "seen, but inactive");
    sqlx::query("UPDATE agents SET status = 'active'").execute(&app.pool).await.unwrap();
    assert_eq!(observed().await, live, "active again");
    let revoked =
        app.call(Method::DELETE, &format!("/api/agents/{}/keys/{}", agent.id, agent.key_id), Some(&tomas), None).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    assert_eq!(observed().await, not_live, "seen, but no key of it works");
}
