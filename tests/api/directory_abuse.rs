//! The directory against users who game it, over real HTTP: trust farmed with an absurd latency
//! estimate, the candidate list of a kind of work flooded by one owner, a target deleted under
//! live and finished attempts, and one user registering without end.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    directory_calls::{offer, put_capability, trust},
    helpers::{TestAgent, TestApp},
};

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

/// One delegation from `requester` to `target`, accepted, then completed or failed.
async fn worked(app: &TestApp, requester: &TestAgent, target: &TestAgent, anon: &str, complete: bool) {
    let a = app.delegate(requester, &asked(Some(anon), "code-review", json!({"code": "x"}))).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let rid = a.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    assert_eq!(app.act(target, &rid, "accept", None).await.status, StatusCode::OK);
    let end = if complete {
        app.act(target, &rid, "complete", Some(&json!({"output": {"feedback": "ok"}}))).await
    } else {
        app.act(target, &rid, "fail", Some(&json!({"error": "could not"}))).await
    };
    assert_eq!(end.status, StatusCode::OK, "{}", end.text);
}

#[tokio::test]
async fn no_declared_latency_estimate_buys_trust() {
    let app = TestApp::spawn().await;
    let farmer = app.register_agent("user-farmer").await;
    // Past the longest timeout a requester may give: refused, naming the field and the bound.
    let mut absurd = capability("code-review", json!({}));
    absurd["estimatedLatencyMs"] = json!(86_400_001);
    let refused = put_capability(&app, &farmer, &absurd).await;
    refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(refused.text.contains("estimatedLatencyMs") && refused.text.contains("86400000"), "{}", refused.text);
    for huge in ["9223372036854775807", "1e300"] {
        let body = format!(r#"{{"taskType": "code-review", "inputSchema": {{}}, "outputSchema": {{}}, "estimatedLatencyMs": {huge}}}"#);
        let r = app.call_raw(Method::PUT, &format!("/api/agents/{}/capabilities", farmer.id), Some(&app.user_token("user-farmer")), body).await;
        r.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }

    // The longest estimate allowed, against an honest one: one success and four failures each,
    // from five other owners, with the default 30 s timeout.
    let mut longest = capability("code-review", json!({}));
    longest["estimatedLatencyMs"] = json!(86_400_000);
    let farmer_anon = offer(&app, &farmer, &longest).await;
    let honest = app.register_agent("user-honest").await;
    let mut fair = capability("code-review", json!({}));
    fair["estimatedLatencyMs"] = json!(2_000);
    let honest_anon = offer(&app, &honest, &fair).await;
    for i in 0..5 {
        let requester = app.register_agent(&format!("user-requester-{i}")).await;
        worked(&app, &requester, &farmer, &farmer_anon, i == 0).await;
        worked(&app, &requester, &honest, &honest_anon, i == 0).await;
    }
    let (f, h) = (trust(&app, &farmer).await, trust(&app, &honest).await);
    eprintln!("after 1 success and 4 failures: farmer (24 h estimate) raw {} {}; honest (2 s estimate) raw {} {}",
        f["rawScore"], f["totalDelegations"], h["rawScore"], h["totalDelegations"]);
    // The honest record counts; the farmer's estimate only took evidence away, success included.
    assert_eq!(h["totalDelegations"], 5, "{h}");
    assert_eq!((&f["totalDelegations"], &f["successfulDelegations"]), (&json!(0), &json!(0)), "{f}");
    assert!(f["rawScore"].as_f64().unwrap() <= 50.0 && f["provisional"] == true, "{f}");
    let short: i64 = app.counted("SELECT count(*) FROM delegation_attempts WHERE short_timeout AND NOT counted").await;
    assert_eq!(short, 5, "every attempt given less than the estimate counted neither way");
}

#[tokio::test]
async fn a_flood_of_one_owners_refusing_capabilities_keeps_no_honest_target_out_of_reach() {
    let app = TestApp::spawn_with(|c| c.inbound_rate = 1_000).await;
    // 20 agents of one owner, priced at nothing and instant, whose schemas refuse every input;
    // then 5 more of theirs that accept everything and reject every attempt.
    let mut refusing = capability("code-review", json!(false));
    refusing["estimatedCostUsd"] = json!(0);
    refusing["estimatedLatencyMs"] = json!(0);
    for _ in 0..20 {
        let a = app.register_agent("user-flood").await;
        offer(&app, &a, &refusing).await;
    }
    let mut taking = capability("code-review", json!({}));
    taking["estimatedCostUsd"] = json!(0);
    taking["estimatedLatencyMs"] = json!(0);
    let mut decoys = Vec::new();
    for _ in 0..5 {
        let a = app.register_agent("user-flood").await;
        offer(&app, &a, &taking).await;
        decoys.push(a);
    }
    // The honest target: dearer and slower, so ranked 26th.
    let honest = app.register_agent("user-honest").await;
    let mut priced = capability("code-review", json!({}));
    priced["estimatedCostUsd"] = json!(50);
    priced["estimatedLatencyMs"] = json!(20_000);
    let honest_anon = offer(&app, &honest, &priced).await;
    let found = app.get("/api/agents/discover?taskType=code-review", &app.service_token()).await;
    let shown: Vec<&str> = found.body["results"].as_array().unwrap().iter().map(|r| r["anonymousAgentId"].as_str().unwrap()).collect();
    assert!(!shown.contains(&honest_anon.as_str()), "the honest target is past discovery's first 20");

    let requester = app.register_agent("user-requester").await;
    let mut body = asked(None, "code-review", json!({"code": "x"}));
    body["maxRetries"] = json!(10);
    let a = app.delegate(&requester, &body).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let rid = a.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    // The owner's decoys reject what they are offered; at most three of them ever are.
    let mut rejected = 0;
    for _ in 0..6 {
        let mut any = false;
        for d in &decoys {
            let inbox = app.inbox(d, None).await;
            if inbox.body["requests"].as_array().unwrap().iter().any(|r| r["requestId"] == rid.as_str()) {
                assert_eq!(app.act(d, &rid, "reject", Some(&json!({"reason": "busy"}))).await.status, StatusCode::OK);
                rejected += 1;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    assert!(rejected <= 3, "one owner took {rejected} of the attempts");
    app.until_offered(&honest, &rid, Duration::from_secs(5)).await;
    let record = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    let attempts = record.body["delegation"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.last().unwrap()["targetAnonymousId"], honest_anon.as_str(), "{}", record.text);
    assert!(attempts.len() <= 4, "{}", record.text);
}
