//! Clients written for AgentLens, unchanged: the curls of its discovery and delegation guide as
//! written (only the host, the key and the ids filled in), the query names of its server, the
//! blocking delegate call and its result in AgentLens's words, its newer task types, and the
//! two requests its MCP tools make (`agentlens_discover`, `agentlens_delegate`), read the way
//! those tools read the answers.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::{Answer, TestAgent, TestApp};

/// A request as AgentLens's clients send it: the agent's key as a bearer token.
async fn bearer(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> (Answer, reqwest::header::HeaderMap) {
    let mut req = app.client.request(method, format!("{}{path}", app.base)).bearer_auth(key);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").json(b);
    }
    let resp = req.send().await.unwrap();
    let headers = resp.headers().clone();
    (Answer::from(resp).await, headers)
}

/// The guide's capability, as written.
fn seed_capability() -> Value {
    json!({
        "taskType": "code-review",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"feedback": {"type": "string"}}},
        "estimatedLatencyMs": 5000,
        "estimatedCostUsd": 0.05
    })
}

/// A target offering the guide's capability; returns it and its anonymous id.
async fn seed_target(app: &TestApp, user: &str) -> (TestAgent, String) {
    let target = app.register_agent(user).await;
    let (put, _) = bearer(
        app,
        &target.key,
        reqwest::Method::PUT,
        &format!("/api/agents/{}/capabilities", target.id),
        Some(&seed_capability()),
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    (target, put.body["anonymousAgentId"].as_str().unwrap().to_owned())
}

/// The target's side, played in the background: it waits for the next request in its inbox and
/// answers it with `verb` (`complete` with an output, `reject`, `fail`, or nothing).
fn serve_one(app: &TestApp, target: &TestAgent, verb: &'static str) -> tokio::task::JoinHandle<()> {
    let (client, base, target) = (app.client.clone(), app.base.clone(), target.clone());
    tokio::spawn(async move {
        let inbox = loop {
            let r = client
                .get(format!("{base}/api/agents/{}/delegations/inbox?wait=5", target.id))
                .bearer_auth(&target.key)
                .send()
                .await
                .unwrap();
            let inbox: Value = r.json().await.unwrap();
            if inbox["total"].as_i64().unwrap_or(0) > 0 {
                break inbox;
            }
        };
        let rid = inbox["requests"][0]["requestId"].as_str().unwrap().to_owned();
        let act = |path: String, body: Value| {
            let (client, key) = (client.clone(), target.key.clone());
            async move {
                let r = client.post(path).bearer_auth(key).json(&body).send().await.unwrap();
                assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
            }
        };
        let at = |verb: &str| format!("{base}/api/agents/{}/delegations/{rid}/{verb}", target.id);
        match verb {
            "complete" => {
                act(at("accept"), json!({})).await;
                act(at("complete"), json!({"output": {"feedback": "Returns 1; fine."}})).await;
            }
            "reject" => act(at("reject"), json!({"reason": "not my language"})).await,
            "fail" => {
                act(at("accept"), json!({})).await;
                act(at("fail"), json!({"error": "the linter crashed"})).await;
            }
            _ => {}
        }
    })
}

#[tokio::test]
async fn the_guides_curls_work_as_written() {
    let app = TestApp::spawn().await;
    let (target, target_anon) = seed_target(&app, "user-target").await;
    let requester = app.register_agent("user-requester").await;
    let caps = app.agent_call(&target, reqwest::Method::GET, "/capabilities", None).await;
    let cap_id = caps.body["capabilities"][0]["id"].as_str().unwrap().to_owned();

    // PUT /api/agents/:id/capabilities/:capId/permissions, the guide's body.
    let permissions =
        json!({"enabled": true, "acceptDelegations": true, "inboundRateLimit": 10, "outboundRateLimit": 20});
    let (p, _) = bearer(
        &app,
        &target.key,
        reqwest::Method::PUT,
        &format!("/api/agents/{}/capabilities/{cap_id}/permissions", target.id),
        Some(&permissions),
    )
    .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);

    // Discovery, as the guide writes it.
    let (found, _) = bearer(
        &app,
        &requester.key,
        reqwest::Method::GET,
        "/api/agents/discover?taskType=code-review&minTrustScore=70",
        None,
    )
    .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
    let results = found.body["results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["trustScorePercentile"].as_i64().unwrap() >= 70), "{}", found.text);
    assert_eq!(found.body["total"].as_u64(), Some(results.len() as u64));

    // The guide's delegate call: it holds until the target has answered.
    let target_side = serve_one(&app, &target, "complete");
    let seed = json!({
        "agentId": requester.id,
        "targetAnonymousId": target_anon,
        "taskType": "code-review",
        "input": {"code": "function foo() { return 1; }"},
        "timeoutMs": 30000,
        "fallbackEnabled": true,
        "maxRetries": 3
    });
    let (delegated, _) =
        bearer(&app, &requester.key, reqwest::Method::POST, "/api/delegation/delegate", Some(&seed)).await;
    target_side.await.unwrap();
    assert_eq!(delegated.status, StatusCode::OK, "{}", delegated.text);
    let result = &delegated.body["result"];
    assert_eq!(result["status"], "success", "{}", delegated.text);
    assert_eq!(result["output"], json!({"feedback": "Returns 1; fine."}));
    assert_eq!(result["retriesUsed"], 0);
    assert!(result["executionTimeMs"].as_i64().unwrap() >= 0);
    assert!(Uuid::parse_str(result["requestId"].as_str().unwrap()).is_ok());
    assert_eq!(delegated.body["delegation"]["status"], "completed", "Parley's record keeps its phases");

    // Trust, as the guide reads it.
    let (trust, _) = bearer(&app, &target.key, reqwest::Method::GET, &format!("/api/trust/{}", target.id), None).await;
    assert_eq!(trust.status, StatusCode::OK, "{}", trust.text);
    for field in [
        "agentId",
        "rawScore",
        "healthComponent",
        "delegationComponent",
        "percentile",
        "provisional",
        "totalDelegations",
        "successfulDelegations",
    ] {
        assert!(trust.body.get(field).is_some(), "{field} missing: {}", trust.text);
    }
    assert_eq!(trust.body["successfulDelegations"], 1);
}

#[tokio::test]
async fn the_blocking_call_answers_rejected_error_and_timeout_in_agentlens_words() {
    let app = TestApp::spawn_with(|c| c.delegation_accept_timeout = Duration::from_secs(1)).await;
    let (target, anon) = seed_target(&app, "user-target").await;
    let requester = app.register_agent("user-requester").await;
    let ask = || json!({"targetAnonymousId": anon, "taskType": "code-review", "input": {"code": "x"}, "maxRetries": 0});
    for (verb, word) in [("reject", "rejected"), ("fail", "error"), ("nothing", "timeout")] {
        let target_side = serve_one(&app, &target, verb);
        let (answer, _) =
            bearer(&app, &requester.key, reqwest::Method::POST, "/api/agents/delegate", Some(&ask())).await;
        if verb != "nothing" {
            target_side.await.unwrap();
        } else {
            target_side.abort();
        }
        assert_eq!(answer.status, StatusCode::OK, "{verb}: {}", answer.text);
        assert_eq!(answer.body["result"]["status"], word, "{verb}: {}", answer.text);
        assert!(answer.body["result"].get("output").is_none());
        assert_eq!(answer.body["delegation"]["status"], if word == "error" { "error" } else { word });
    }
}

#[tokio::test]
async fn asked_to_answer_at_once_or_past_its_time_the_call_answers_202_with_where_to_look() {
    let app = TestApp::spawn_with(|c| c.long_poll_max = Duration::from_secs(2)).await;
    let (_target, anon) = seed_target(&app, "user-target").await;
    let requester = app.register_agent("user-requester").await;
    let ask = || json!({"targetAnonymousId": anon, "taskType": "code-review", "input": {"code": "x"}});

    let started = Instant::now();
    let resp = app
        .client
        .post(format!("{}/api/agents/delegate", app.base))
        .bearer_auth(&requester.key)
        .header("prefer", "respond-async")
        .json(&ask())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    assert!(started.elapsed() < Duration::from_secs(2), "answered at once: {:?}", started.elapsed());
    assert_eq!(resp.headers()["preference-applied"], "respond-async");
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["result"]["status"], "pending");
    assert_eq!(location, format!("/api/delegations/{}", body["result"]["requestId"].as_str().unwrap()));
    let (polled, _) = bearer(&app, &requester.key, reqwest::Method::GET, &location, None).await;
    assert_eq!(polled.status, StatusCode::OK, "{}", polled.text);
    assert_eq!(polled.body["result"]["status"], "pending");

    let (zero, headers) =
        bearer(&app, &requester.key, reqwest::Method::POST, "/api/agents/delegate?wait=0", Some(&ask())).await;
    assert_eq!(zero.status, StatusCode::ACCEPTED, "{}", zero.text);
    assert!(headers.get("location").is_some());
    assert!(headers.get("preference-applied").is_none(), "nothing was preferred");

    // Nobody answers: the call holds for as long as it may (PARLEY_LONG_POLL_MAX, 2 s here,
    // below the 30 s timeoutMs), then says where to look.
    let started = Instant::now();
    let (held, headers) =
        bearer(&app, &requester.key, reqwest::Method::POST, "/api/agents/delegate", Some(&ask())).await;
    assert_eq!(held.status, StatusCode::ACCEPTED, "{}", held.text);
    assert!(started.elapsed() >= Duration::from_millis(1900), "held {:?}", started.elapsed());
    assert_eq!(held.body["result"]["status"], "pending");
    assert!(headers["location"].to_str().unwrap().starts_with("/api/delegations/"));
}

#[tokio::test]
async fn both_spellings_of_each_filter_filter_the_same_and_unknown_parameters_are_refused() {
    let app = TestApp::spawn().await;
    let cheap = app.register_agent("user-cheap").await;
    let mut body = seed_capability();
    body["estimatedCostUsd"] = json!(0.05);
    body["estimatedLatencyMs"] = json!(800);
    app.agent_call(&cheap, reqwest::Method::PUT, "/capabilities", Some(&body)).await;
    let dear = app.register_agent("user-dear").await;
    body["estimatedCostUsd"] = json!(0.5);
    body["estimatedLatencyMs"] = json!(9000);
    app.agent_call(&dear, reqwest::Method::PUT, "/capabilities", Some(&body)).await;
    let caller = app.service_token();
    let count = |answer: &Answer| answer.body["results"].as_array().map(Vec::len);
    for (seed, server) in
        [("maxCostUsd=0.1", "maxCost=0.1"), ("maxLatencyMs=1000", "maxLatency=1000"), ("minTrustScore=0", "minTrust=0")]
    {
        for path in ["/api/agents/discover", "/api/discovery"] {
            let a = app.get(&format!("{path}?taskType=code-review&{seed}"), &caller).await;
            let b = app.get(&format!("{path}?taskType=code-review&{server}"), &caller).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.text);
            assert_eq!(a.body, b.body, "{seed} and {server} filter the same");
            let both = app.get(&format!("{path}?taskType=code-review&{seed}&{server}"), &caller).await;
            assert_eq!(both.body, a.body, "the same value twice is fine");
        }
    }
    let under = app.get("/api/agents/discover?taskType=code-review&maxCost=0.1", &caller).await;
    assert_eq!((count(&under), &under.body["total"]), (Some(1), &json!(1)), "{}", under.text);
    let all = app.get("/api/agents/discover?taskType=code-review&limit=1&scope=all", &caller).await;
    assert_eq!((count(&all), &all.body["total"]), (Some(1), &json!(2)), "total counts every match: {}", all.text);
    assert_eq!(app.get("/api/discovery?taskType=code-review&scope=internal", &caller).await.status, StatusCode::OK);

    let differ = app.get("/api/agents/discover?taskType=code-review&maxCost=0.1&maxCostUsd=0.2", &caller).await;
    differ.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(differ.text.contains("maxCost"), "{}", differ.text);
    for unknown in ["sortBy=cost", "maxPrice=1", "scope=public"] {
        let refused = app.get(&format!("/api/discovery?taskType=code-review&{unknown}"), &caller).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        let name = unknown.split('=').next().unwrap();
        assert!(refused.text.contains(name), "{unknown}: {}", refused.text);
    }
}

#[tokio::test]
async fn agentlens_current_task_types_are_registered_and_discovered() {
    let app = TestApp::spawn().await;
    for (i, task_type) in ["data-extraction", "classification", "generation", "transformation"].into_iter().enumerate()
    {
        let agent = app.register_agent(&format!("user-{i}")).await;
        let mut body = seed_capability();
        body["taskType"] = json!(task_type);
        let put = app.agent_call(&agent, reqwest::Method::PUT, "/capabilities", Some(&body)).await;
        assert_eq!(put.status, StatusCode::CREATED, "{task_type}: {}", put.text);
        let found = app.get(&format!("/api/discovery?taskType={task_type}"), &app.service_token()).await;
        assert_eq!(
            found.body["results"][0]["anonymousAgentId"], put.body["anonymousAgentId"],
            "{task_type}: {}",
            found.text
        );
        assert_eq!(found.body["results"][0]["taskType"], task_type);
    }
    let unknown = app.get("/api/discovery?taskType=cooking", &app.service_token()).await;
    unknown.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
}

#[tokio::test]
async fn the_mcp_tools_requests_are_answered_with_the_fields_they_read() {
    let app = TestApp::spawn().await;
    let (target, anon) = seed_target(&app, "user-target").await;
    let requester = app.register_agent("user-requester").await;

    // agentlens_discover: GET /api/discovery with the names it sends.
    let query = "taskType=code-review&minTrustScore=0&maxCostUsd=1&maxLatencyMs=10000&limit=10";
    let (found, _) = bearer(&app, &requester.key, reqwest::Method::GET, &format!("/api/discovery?{query}"), None).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
    let first = &found.body["results"][0];
    assert_eq!(first["anonymousAgentId"], anon.as_str());
    assert_eq!(first["taskType"], "code-review");
    assert!(first["trustScorePercentile"].is_number() && first["provisional"].is_boolean());
    assert_eq!((&first["estimatedCostUsd"], &first["estimatedLatencyMs"]), (&json!(0.05), &json!(5000)));
    assert!(first["qualityMetrics"].is_object());

    // agentlens_delegate: POST /api/delegations, no agentId, and the result read at the top level.
    let target_side = serve_one(&app, &target, "complete");
    let body = json!({"targetAnonymousId": anon, "taskType": "code-review", "input": {"code": "x"},
                      "fallbackEnabled": false, "maxRetries": 3, "timeoutMs": 30000});
    let (delegated, _) = bearer(&app, &requester.key, reqwest::Method::POST, "/api/delegations", Some(&body)).await;
    target_side.await.unwrap();
    assert_eq!(delegated.status, StatusCode::OK, "{}", delegated.text);
    let top = &delegated.body;
    assert!(Uuid::parse_str(top["requestId"].as_str().unwrap()).is_ok());
    assert_eq!(top["status"], "success", "{}", delegated.text);
    assert_eq!(top["output"], json!({"feedback": "Returns 1; fine."}));
    assert!(top["executionTimeMs"].as_i64().is_some());
    assert_eq!(top["retriesUsed"], 0);
    assert_eq!(top["result"]["requestId"], top["requestId"]);

    // agentId, when given, must be the key's own agent.
    let mut other = body.clone();
    other["agentId"] = json!(target.id);
    let (refused, _) = bearer(&app, &requester.key, reqwest::Method::POST, "/api/delegations", Some(&other)).await;
    refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
}
