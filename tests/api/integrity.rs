//! The directory under attack, over real HTTP: schemas that would stall a validation, metric
//! labels a client chooses, trust bought with one's own agents or wrecked with impossible
//! timeouts, limits an agent raises for itself, a target one requester floods, a refusing top
//! target, anonymous ids linked through other fields, and the smaller leaks. Each test is one
//! attack and what must hold against it. (A request id used by a second requester is in
//! `delegation.rs`, `a_request_id_belongs_to_its_first_requester`.)

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    directory_calls::{offer, trust},
    fixtures,
    helpers::{TestAgent, TestApp},
};

/// Definitions `d0` .. `d30`, each applying the next twice at the same place, under `not`: 2 KB
/// that asks a validation for some 2^30 visits.
fn exponential_schema() -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..30 {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": next}, {"$ref": next}]}));
    }
    defs.insert("d30".into(), json!({"type": "string"}));
    json!({"$defs": defs, "not": {"$ref": "#/$defs/d0"}})
}

fn capability(task_type: &str, input_schema: Value) -> Value {
    json!({
        "taskType": task_type,
        "inputSchema": input_schema,
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
    })
}

fn asked(target: Option<&str>, task_type: &str, input: Value) -> Value {
    let mut b = json!({"requestId": Uuid::new_v4(), "taskType": task_type, "input": input, "maxRetries": 0});
    if let Some(t) = target {
        b["targetAnonymousId"] = json!(t);
    }
    b
}

/// Delegates to `target` as `requester`, and the target accepts and completes it.
async fn delegate_and_complete(app: &TestApp, requester: &TestAgent, target: &TestAgent, anon: &str) {
    let a = app.delegate(requester, &asked(Some(anon), "code-review", json!({"code": "x"}))).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let rid = a.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    let accepted = app.agent_call(target, Method::POST, &format!("/delegations/{rid}/accept"), None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{} after {}", accepted.text, a.text);
    let done = app
        .agent_call(
            target,
            Method::POST,
            &format!("/delegations/{rid}/complete"),
            Some(&json!({"output": {"feedback": "ok"}})),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
}

/// How long `/healthz` takes to answer.
async fn healthz(app: &TestApp) -> Duration {
    let started = Instant::now();
    let r = app.client.get(format!("{}/healthz", app.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    started.elapsed()
}

#[tokio::test]
async fn an_exponential_schema_is_refused_and_one_stored_before_the_bound_never_stalls_the_service() {
    let app = TestApp::spawn().await;
    let target = app.register_agent("user-target").await;
    let bomb = exponential_schema();
    assert!(serde_json::to_string(&bomb).unwrap().len() < 3_000);
    let refused =
        app.agent_call(&target, Method::PUT, "/capabilities", Some(&capability("analysis", bomb.clone()))).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "schema_too_complex");
    assert!(refused.body["error"].as_str().unwrap().contains("inputSchema"), "{}", refused.text);
    assert_eq!(app.count("capabilities").await, 0, "nothing stored");
    let as_output = json!({"taskType": "analysis", "inputSchema": {}, "outputSchema": bomb});
    app.agent_call(&target, Method::PUT, "/capabilities", Some(&as_output))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "schema_too_complex");

    // The same schema stored before the bound existed: a delegation against it is refused by
    // its check (off the async workers), and the service answers other requests meanwhile.
    let anon = offer(&app, &target, &capability("analysis", json!({}))).await;
    sqlx::query("UPDATE capabilities SET input_schema = $1").bind(&bomb).execute(&app.pool).await.unwrap();
    let requester = app.register_agent("user-requester").await;
    let pending = {
        let (app_base, client, key) = (app.base.clone(), app.client.clone(), requester.key.clone());
        let body = asked(Some(&anon), "analysis", json!("a string the schema's not refuses"));
        tokio::spawn(async move {
            let started = Instant::now();
            let r = client
                .post(format!("{app_base}/api/agents/delegate"))
                .header("x-api-key", key)
                .header("prefer", "respond-async")
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status(), r.text().await.unwrap(), started.elapsed())
        })
    };
    let mut slowest = Duration::ZERO;
    while !pending.is_finished() {
        slowest = slowest.max(healthz(&app).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, text, took) = pending.await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("input_invalid"), "{text}");
    assert!(took < Duration::from_secs(5), "answered within the check's cap: {took:?}");
    assert!(slowest < Duration::from_secs(1), "/healthz took {slowest:?} while the delegation was checked");
    assert_eq!(app.count("delegations").await, 0);
}

#[tokio::test]
async fn refused_inputs_are_rate_limited_like_failed_authentications() {
    let app = TestApp::spawn_with(|c| {
        c.input_failure_burst = 3;
        c.input_failure_refill = Duration::from_secs(3600);
    })
    .await;
    let target = app.register_agent("user-target").await;
    let schema = json!({"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}});
    let anon = offer(&app, &target, &capability("code-review", schema)).await;
    let requester = app.register_agent("user-requester").await;
    for _ in 0..3 {
        let r = app.delegate(&requester, &asked(Some(&anon), "code-review", json!({"code": 5}))).await;
        r.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    }
    let limited = app.delegate(&requester, &asked(Some(&anon), "code-review", json!({"code": 5}))).await;
    limited.assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // Until the budget refills, even a valid input is refused at the door.
    let valid = app.delegate(&requester, &asked(Some(&anon), "code-review", json!({"code": "x"}))).await;
    valid.assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // Another requester is not affected.
    let other = app.register_agent("user-other").await;
    let fine = app.delegate(&other, &asked(Some(&anon), "code-review", json!({"code": "x"}))).await;
    assert_eq!(fine.status, StatusCode::ACCEPTED, "{}", fine.text);
}

#[tokio::test]
async fn made_up_http_methods_share_one_label() {
    let app = TestApp::spawn().await;
    let client = reqwest::Client::new();
    for i in 0..200 {
        let method = Method::from_bytes(format!("M{i}X{}", Uuid::new_v4().simple()).as_bytes()).unwrap();
        let path = if i % 2 == 0 { "/api/health".to_owned() } else { format!("/no/such/path/{i}") };
        let r = client.request(method, format!("{}{path}", app.base)).send().await.unwrap();
        assert!(r.status().is_client_error(), "{}", r.status());
    }
    let text = app.get("/metrics", &app.service_token()).await.text;
    let mut methods: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("parley_http_requests_total{"))
        .filter_map(|l| l.split("method=\"").nth(1).and_then(|r| r.split('"').next()).map(str::to_owned))
        .collect();
    methods.sort();
    methods.dedup();
    assert!(methods.contains(&"other".to_owned()), "{methods:?}");
    let standard = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT", "other"];
    assert!(methods.iter().all(|m| standard.contains(&m.as_str())), "{methods:?}");
    assert!(!text.contains("/no/such/path"), "unmatched paths are one label");
    assert!(text.len() < 2_000_000, "{} bytes of metrics", text.len());
}

#[tokio::test]
async fn trust_cannot_be_bought_with_ones_own_agents_or_one_requesters_volume() {
    // Room in the target's window for every delegation here: trust, not the limiter, is tested.
    let app = TestApp::spawn_with(|c| c.inbound_rate = 100).await;
    let target = app.register_agent("user-farmer").await;
    let anon = offer(&app, &target, &capability("code-review", json!({}))).await;
    let caps = app.agent_call(&target, Method::GET, "/capabilities", None).await;
    let id = caps.body["capabilities"][0]["id"].as_str().unwrap().to_owned();
    let permit = app
        .agent_call(
            &target,
            Method::PUT,
            &format!("/capabilities/{id}/permissions"),
            Some(&json!({"inboundRateLimit": 100})),
        )
        .await;
    assert_eq!(permit.status, StatusCode::OK, "{}", permit.text);
    let before = trust(&app, &target).await;

    // Another agent of the same user: its work never counts.
    let sibling = app.register_agent("user-farmer").await;
    for _ in 0..12 {
        delegate_and_complete(&app, &sibling, &target, &anon).await;
    }
    let after = trust(&app, &target).await;
    assert_eq!(
        (&after["rawScore"], &after["totalDelegations"], &after["provisional"]),
        (&before["rawScore"], &json!(0), &json!(true)),
        "{after}"
    );

    // One other owner, many delegations: three a day count, and the score stays provisional.
    let customer = app.register_agent("user-customer").await;
    for _ in 0..10 {
        delegate_and_complete(&app, &customer, &target, &anon).await;
    }
    let t = trust(&app, &target).await;
    assert_eq!(
        (&t["totalDelegations"], &t["successfulDelegations"], &t["provisional"]),
        (&json!(3), &json!(3), &json!(true)),
        "{t}"
    );
    let counted: i64 = sqlx::query_scalar("SELECT count(*) FROM delegation_attempts WHERE counted")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(counted, 3);

    // Ten counted attempts from three other owners make it a score.
    for owner in ["user-c2", "user-c3", "user-c4"] {
        let requester = app.register_agent(owner).await;
        for _ in 0..3 {
            delegate_and_complete(&app, &requester, &target, &anon).await;
        }
    }
    let t = trust(&app, &target).await;
    assert_eq!((&t["totalDelegations"], &t["provisional"]), (&json!(12), &json!(false)), "{t}");
    let found = app.get("/api/agents/discover?taskType=code-review", &app.service_token()).await;
    assert_eq!(found.body["results"][0]["provisional"], false, "discovery reads the same: {}", found.text);
}

#[tokio::test]
async fn impossible_timeouts_are_refused_and_short_ones_never_count_against_the_target() {
    let app = TestApp::spawn_with(|c| c.delegation_accept_timeout = Duration::from_secs(1)).await;
    let target = app.register_agent("user-target").await;
    let mut body = capability("code-review", json!({}));
    body["estimatedLatencyMs"] = json!(60_000);
    let anon = offer(&app, &target, &body).await;
    let requester = app.register_agent("user-requester").await;
    let before = trust(&app, &target).await;

    let mut one_ms = asked(Some(&anon), "code-review", json!({}));
    one_ms["timeoutMs"] = json!(1);
    let refused = app.delegate(&requester, &one_ms).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(refused.text.contains("timeoutMs"), "{}", refused.text);
    assert_eq!(app.count("delegations").await, 0);

    // Less time than the target's own estimate: the attempt times out, and does not count.
    let mut short = asked(Some(&anon), "code-review", json!({}));
    short["timeoutMs"] = json!(1_500);
    for _ in 0..3 {
        let mut b = short.clone();
        b["requestId"] = json!(Uuid::new_v4());
        assert_eq!(app.delegate(&requester, &b).await.status, StatusCode::ACCEPTED);
    }
    wait_until_ended(&app, 3).await;
    let statuses: Vec<(String, Option<bool>)> =
        sqlx::query_as("SELECT status, counted FROM delegation_attempts").fetch_all(&app.pool).await.unwrap();
    assert_eq!(statuses, vec![("timeout".to_owned(), Some(false)); 3]);
    let after = trust(&app, &target).await;
    assert_eq!((&after["rawScore"], &after["totalDelegations"]), (&before["rawScore"], &json!(0)), "{after}");

    // A fair timeout that the target lets pass counts against it.
    let mut fair = asked(Some(&anon), "code-review", json!({}));
    fair["timeoutMs"] = json!(60_000);
    assert_eq!(app.delegate(&requester, &fair).await.status, StatusCode::ACCEPTED);
    wait_until_ended(&app, 4).await;
    assert_eq!(trust(&app, &target).await["totalDelegations"], 1);
}

/// Waits until `n` delegations have ended.
async fn wait_until_ended(app: &TestApp, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ended: i64 = sqlx::query_scalar("SELECT count(*) FROM delegations WHERE ended_at IS NOT NULL")
            .fetch_one(&app.pool)
            .await
            .unwrap();
        if ended >= n {
            return;
        }
        assert!(Instant::now() < deadline, "only {ended} of {n} delegations ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn declared_limits_cannot_raise_the_services_budget() {
    let app = TestApp::spawn_with(|c| {
        c.outbound_rate = 3;
        c.inbound_rate = 100;
    })
    .await;
    let target = app.register_agent("user-target").await;
    let anon = offer(&app, &target, &capability("code-review", json!({}))).await;
    let requester = app.register_agent("user-requester").await;
    offer(&app, &requester, &capability("testing", json!({}))).await;
    let caps = app.agent_call(&requester, Method::GET, "/capabilities", None).await;
    let id = caps.body["capabilities"][0]["id"].as_str().unwrap().to_owned();
    let raise = json!({"enabled": false, "outboundRateLimit": 10_000});
    let refused =
        app.agent_call(&requester, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(&raise)).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(refused.text.contains("PARLEY_OUTBOUND_RATE"), "{}", refused.text);
    // Even a value stored before the rule (straight into the table) only lowers.
    sqlx::query("UPDATE capabilities SET outbound_rate_limit = 10000, enabled = false WHERE capability_id = $1")
        .bind(id.parse::<Uuid>().unwrap())
        .execute(&app.pool)
        .await
        .unwrap();
    for _ in 0..3 {
        let a = app.delegate(&requester, &asked(Some(&anon), "code-review", json!({}))).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    }
    let refused = app.delegate(&requester, &asked(Some(&anon), "code-review", json!({}))).await;
    refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
}

#[tokio::test]
async fn a_second_requester_still_reaches_a_target_another_one_floods() {
    let app = TestApp::spawn().await;
    let target = app.register_agent("user-target").await;
    let anon = offer(&app, &target, &capability("code-review", json!({}))).await;
    let flooder = app.register_agent("user-flooder").await;
    let mut outcomes = Vec::new();
    for _ in 0..10 {
        let a = app.delegate(&flooder, &asked(Some(&anon), "code-review", json!({}))).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
        outcomes.push(a.body["delegation"]["status"].as_str().unwrap().to_owned());
    }
    // The inbound window is 10 a minute; one requesting owner may use half of it.
    assert_eq!(outcomes.iter().filter(|s| *s == "request").count(), 5, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|s| *s == "rejected").count(), 5, "{outcomes:?}");
    // A second agent of the same owner shares that owner's half.
    let flooders_other_agent = app.register_agent("user-flooder").await;
    let a = app.delegate(&flooders_other_agent, &asked(Some(&anon), "code-review", json!({}))).await;
    assert_eq!(a.body["delegation"]["status"], "rejected", "{}", a.text);
    for i in 0..5 {
        let other = app.register_agent(&format!("user-other-{i}")).await;
        let a = app.delegate(&other, &asked(Some(&anon), "code-review", json!({}))).await;
        assert_eq!(a.body["delegation"]["status"], "request", "requester {i}: {}", a.text);
    }
    let inbox = app.agent_call(&target, Method::GET, "/delegations/inbox", None).await;
    assert_eq!(inbox.body["total"], 10);
}

#[tokio::test]
async fn a_top_target_whose_schema_refuses_the_input_is_skipped() {
    let app = TestApp::spawn().await;
    let refusing = app.register_agent("user-refusing").await;
    let mut top = capability("code-review", json!(false));
    top["estimatedCostUsd"] = json!(0.0);
    let refusing_anon = offer(&app, &refusing, &top).await;
    let taking = app.register_agent("user-taking").await;
    let mut second = capability("code-review", json!({"type": "object"}));
    second["estimatedCostUsd"] = json!(50.0);
    let taking_anon = offer(&app, &taking, &second).await;
    let found = app.get("/api/agents/discover?taskType=code-review", &app.service_token()).await;
    assert_eq!(found.body["results"][0]["anonymousAgentId"], refusing_anon.as_str(), "the refusing one ranks first");

    let requester = app.register_agent("user-requester").await;
    let a = app.delegate(&requester, &asked(None, "code-review", json!({"code": "x"}))).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(a.body["delegation"]["attempts"][0]["targetAnonymousId"], taking_anon.as_str(), "{}", a.text);
    // An input every eligible target refuses is refused, naming why.
    let none = app.delegate(&requester, &asked(None, "code-review", json!("not an object"))).await;
    none.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
}

#[tokio::test]
async fn after_rotation_nothing_links_old_and_new_anonymous_ids() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-hidden").await;
    let mut body = capability("code-review", json!({}));
    body["tags"] = json!(["rust"]);
    offer(&app, &agent, &body).await;
    let discover = || async { app.get("/api/agents/discover?taskType=code-review", &app.service_token()).await };
    let rank = || async {
        app.post(
            "/api/agents/rank",
            &app.service_token(),
            &json!({"task_summary": "review rust", "taskType": "code-review"}),
        )
        .await
    };
    let (d1, r1) = (discover().await, rank().await);
    let old = d1.body["results"][0].clone();
    let stored: Uuid = sqlx::query_scalar("SELECT capability_id FROM capabilities").fetch_one(&app.pool).await.unwrap();
    assert_ne!(old["capabilityId"], stored.to_string(), "discovery never shows the stored id");
    assert_eq!(r1.body["candidates"][0]["capabilityId"], old["capabilityId"], "ranking shows the same handle");

    sqlx::query("UPDATE anonymous_ids SET expires_at = now() WHERE current").execute(&app.pool).await.unwrap();
    let (d2, r2) = (discover().await, rank().await);
    let new = &d2.body["results"][0];
    assert_ne!(new["anonymousAgentId"], old["anonymousAgentId"]);
    assert_ne!(new["capabilityId"], old["capabilityId"]);
    for text in [&d2.text, &r2.text] {
        for linked in [&old["anonymousAgentId"], &old["capabilityId"]] {
            assert!(!text.contains(linked.as_str().unwrap()), "{linked} still shown after the rotation: {text}");
        }
        assert!(!text.contains(&stored.to_string()) && !text.contains(&agent.id));
    }
}

#[tokio::test]
async fn a_negotiation_turn_parked_for_the_agents_user_does_not_change_its_ranking() {
    let app = TestApp::spawn().await;
    // user-tomas's agent offers work; the fixture's negotiation parks a turn for user-tomas.
    let agent = app.register_agent("user-tomas").await;
    offer(&app, &agent, &capability("code-review", json!({}))).await;
    let task = json!({"task_summary": "review code", "taskType": "code-review"});
    let before = app.post("/api/agents/rank", &app.service_token(), &task).await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.text);
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap();
    assert_eq!(app.snapshot(id).await.0, "waiting_for_agent", "a turn is parked for the agent's user");
    let after = app.post("/api/agents/rank", &app.service_token(), &task).await;
    assert_eq!(after.body, before.body);
    assert_eq!(after.body["candidates"][0]["assessment"]["queue_depth"], 0);
    // Picked up, it is still not directory work.
    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::OK);
    assert_eq!(app.post("/api/agents/rank", &app.service_token(), &task).await.body, before.body);
}

#[tokio::test]
async fn a_refused_input_is_never_echoed_at_length() {
    let app = TestApp::spawn().await;
    let target = app.register_agent("user-target").await;
    let properties: serde_json::Map<String, Value> =
        (0..10).map(|i| (format!("f{i}"), json!({"type": "string", "maxLength": 5}))).collect();
    let anon =
        offer(&app, &target, &capability("code-review", json!({"type": "object", "properties": properties}))).await;
    let long = "x".repeat(25_000);
    let input: serde_json::Map<String, Value> = (0..10).map(|i| (format!("f{i}"), json!(long))).collect();
    let requester = app.register_agent("user-requester").await;
    let refused = app.delegate(&requester, &asked(Some(&anon), "code-review", Value::Object(input))).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    assert!(refused.text.len() < 2_000, "{} bytes answered", refused.text.len());
    assert!(!refused.text.contains("xxxxxxxxxx"), "{}", refused.text);
    assert!(refused.text.contains("maxLength") && refused.text.contains("input/f"), "{}", refused.text);
}

#[tokio::test]
async fn numbers_past_their_range_are_refused_not_clamped() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-target").await;
    let body =
        r#"{"taskType": "testing", "inputSchema": {}, "outputSchema": {}, "estimatedLatencyMs": 9223372036854775808}"#;
    let r = app
        .client
        .put(format!("{}/api/agents/{}/capabilities", app.base, agent.id))
        .header("x-api-key", &agent.key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("estimatedLatencyMs"), "{text}");
    assert_eq!(app.count("capabilities").await, 0);
}

#[tokio::test]
async fn an_answer_to_an_unread_body_closes_the_connection_and_every_request_is_answered() {
    let app = TestApp::spawn().await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    let body = json!({"sourceUser": {"id": "a"}, "padding": "p".repeat(10_000)});
    for i in 0..300 {
        let r = if i % 2 == 0 {
            client.post(format!("{}/api/negotiations", app.base)).bearer_auth("not-a-token").json(&body).send().await
        } else {
            client.get(format!("{}/healthz", app.base)).send().await
        };
        let r = r.unwrap_or_else(|e| panic!("request {i} got no answer: {e}"));
        if i % 2 == 0 {
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(r.headers().get("connection").map(|v| v.to_str().unwrap()), Some("close"));
        } else {
            assert_eq!(r.status(), StatusCode::OK);
        }
    }
}

#[tokio::test]
async fn another_users_agent_is_a_404_on_every_route_that_names_it() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-maya").await;
    let eve = app.user_token("user-eve");
    for path in [
        format!("/api/agents/{}", agent.id),
        format!("/api/agents/{}/capabilities", agent.id),
        format!("/api/trust/{}", agent.id),
        format!("/api/agents/{}/delegations", agent.id),
    ] {
        app.get(&path, &eve).await.assert_error(StatusCode::NOT_FOUND, "not_found");
        let unknown = path.replace(&agent.id, &Uuid::now_v7().to_string());
        app.get(&unknown, &eve).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    }
}

/// What held when the directory was probed, kept so that it keeps holding: schemas with
/// catastrophic patterns, remote and looping references, deep nesting and format tricks.
#[tokio::test]
async fn schema_tricks_that_held_keep_holding() {
    let app = TestApp::spawn().await;
    let target = app.register_agent("user-target").await;
    let put = |schema: Value| {
        let app = &app;
        let target = &target;
        async move { app.agent_call(target, Method::PUT, "/capabilities", Some(&capability("analysis", schema))).await }
    };
    put(json!({"$ref": "https://example.com/schema.json"})).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    put(json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "schema_too_complex");
    let mut deep = json!({"type": "string"});
    for _ in 0..100 {
        deep = json!({"items": deep});
    }
    put(deep).await.assert_error(StatusCode::BAD_REQUEST, "schema_too_complex");

    // A pattern that backtracks without end in a naive engine, and a format check.
    let tricky = json!({"type": "object", "properties": {
        "s": {"type": "string", "pattern": "^(a+)+$"},
        "e": {"type": "string", "format": "email"}}});
    let anon = offer(&app, &target, &capability("analysis", tricky)).await;
    let requester = app.register_agent("user-requester").await;
    let evil = format!("{}!", "a".repeat(5_000));
    let started = Instant::now();
    let answer = app.delegate(&requester, &asked(Some(&anon), "analysis", json!({"s": evil, "e": "@@"}))).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    answer.assert_error(StatusCode::BAD_REQUEST, "input_invalid");
    assert!(healthz(&app).await < Duration::from_secs(1));
}
