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
        let body = format!(
            r#"{{"taskType": "code-review", "inputSchema": {{}}, "outputSchema": {{}}, "estimatedLatencyMs": {huge}}}"#
        );
        let r = app
            .call_raw(
                Method::PUT,
                &format!("/api/agents/{}/capabilities", farmer.id),
                Some(&app.user_token("user-farmer")),
                body,
            )
            .await;
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
    eprintln!(
        "after 1 success and 4 failures: farmer (24 h estimate) raw {} {}; honest (2 s estimate) raw {} {}",
        f["rawScore"], f["totalDelegations"], h["rawScore"], h["totalDelegations"]
    );
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
    let shown: Vec<&str> =
        found.body["results"].as_array().unwrap().iter().map(|r| r["anonymousAgentId"].as_str().unwrap()).collect();
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

#[tokio::test]
async fn deleting_a_target_keeps_its_records_and_its_live_attempts_fall_back() {
    let app = TestApp::spawn().await;
    let doomed = app.register_agent("user-doomed").await;
    let mut cheap = capability("code-review", json!({}));
    cheap["estimatedCostUsd"] = json!(0);
    let doomed_anon = offer(&app, &doomed, &cheap).await;
    let other = app.register_agent("user-other").await;
    let mut dear = capability("code-review", json!({}));
    dear["estimatedCostUsd"] = json!(50);
    let other_anon = offer(&app, &other, &dear).await;
    let requester = app.register_agent("user-requester").await;

    // One delegation the doomed target completed, one it holds accepted, one still offered.
    let done = app.delegate(&requester, &asked(Some(&doomed_anon), "code-review", json!({"code": "a"}))).await;
    let done_rid = done.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    app.act(&doomed, &done_rid, "accept", None).await;
    let c = app.act(&doomed, &done_rid, "complete", Some(&json!({"output": {"feedback": "kept"}}))).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.text);
    let mut live = Vec::new();
    for accept in [true, false] {
        let mut body = asked(None, "code-review", json!({"code": "b"}));
        body["maxRetries"] = json!(2);
        let a = app.delegate(&requester, &body).await;
        let rid = a.body["delegation"]["requestId"].as_str().unwrap().to_owned();
        assert_eq!(a.body["delegation"]["attempts"][0]["targetAnonymousId"], doomed_anon.as_str(), "{}", a.text);
        if accept {
            assert_eq!(app.act(&doomed, &rid, "accept", None).await.status, StatusCode::OK);
        }
        live.push(rid);
    }

    let deleted = app
        .call(Method::DELETE, &format!("/api/agents/{}", doomed.id), Some(&app.user_token("user-doomed")), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);

    // The live attempts ended `error` and fell back to the other target at once.
    for rid in &live {
        let record = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
        assert_eq!(
            (record.status, &record.body["delegation"]["status"]),
            (StatusCode::OK, &json!("request")),
            "{}",
            record.text
        );
        let attempts = record.body["delegation"]["attempts"].as_array().unwrap();
        assert_eq!(
            (&attempts[0]["status"], &attempts[0]["reason"]),
            (&json!("error"), &json!("the target was deleted")),
            "{}",
            record.text
        );
        assert_eq!(attempts[1]["targetAnonymousId"], other_anon.as_str(), "{}", record.text);
        app.until_offered(&other, rid, Duration::from_secs(5)).await;
    }
    // The completed one still answers with its output, to its requester and the platform.
    let kept = app.keyed(&requester, Method::GET, &format!("/api/delegations/{done_rid}"), None).await;
    assert_eq!(
        (kept.status, &kept.body["result"]["output"]),
        (StatusCode::OK, &json!({"feedback": "kept"})),
        "{}",
        kept.text
    );
    let by_platform = app.get(&format!("/api/delegations/{done_rid}"), &app.service_token()).await;
    assert_eq!(by_platform.status, StatusCode::OK, "{}", by_platform.text);
    // The deleted agent can neither call nor be found; its records stay whole and counted nothing.
    let me = app.keyed(&doomed, Method::GET, "/api/agents/me", None).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED, "{}", me.text);
    let gone = app.get(&format!("/api/agents/{}", doomed.id), &app.user_token("user-doomed")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let attempts =
        app.counted(&format!("SELECT count(*) FROM delegation_attempts WHERE target_agent_id = '{}'", doomed.id)).await;
    assert_eq!(attempts, 3);
    let counted = app
        .counted(&format!(
            "SELECT count(*) FROM delegation_attempts WHERE target_agent_id = '{}' AND status = 'error' AND counted",
            doomed.id
        ))
        .await;
    assert_eq!(counted, 0);
    let found = app.get("/api/agents/discover?taskType=code-review", &app.service_token()).await;
    assert_eq!(found.body["total"], 1, "{}", found.text);

    // A deleted requester's delegations stay readable by its owner.
    let asked_by = app.delegate(&requester, &asked(Some(&other_anon), "code-review", json!({"code": "c"}))).await;
    let rid = asked_by.body["delegation"]["requestId"].as_str().unwrap().to_owned();
    let owner = app.user_token("user-requester");
    let removed = app.call(Method::DELETE, &format!("/api/agents/{}", requester.id), Some(&owner), None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let read = app.get(&format!("/api/delegations/{rid}"), &owner).await;
    assert!(read.status.is_success(), "{}", read.text);
}

#[tokio::test]
async fn one_user_cannot_register_without_end_and_reads_its_agents_a_page_at_a_time() {
    let app = TestApp::spawn_with(|c| {
        c.max_agents_per_user = 3;
        c.max_capabilities_per_user = 4;
        c.max_keys_per_user = 4;
    })
    .await;
    let token = app.user_token("user-prolific");
    let mut agents = Vec::new();
    for _ in 0..3 {
        agents.push(app.register_agent("user-prolific").await);
    }
    let fourth = app.post("/api/agents", &token, &json!({"name": "one too many"})).await;
    fourth.assert_error(StatusCode::CONFLICT, "limit_reached");
    assert_eq!(fourth.body["limit"], 3, "{}", fourth.text);
    assert!(fourth.text.contains("PARLEY_MAX_AGENTS_PER_USER"), "{}", fourth.text);
    // Keys: three live already (one per agent); one more, then no more.
    let key = app.post(&format!("/api/agents/{}/keys", agents[0].id), &token, &json!({})).await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.text);
    let refused = app.post(&format!("/api/agents/{}/keys", agents[0].id), &token, &json!({})).await;
    refused.assert_error(StatusCode::CONFLICT, "limit_reached");
    assert_eq!(refused.body["limit"], 4);
    // Capabilities: four in all across the user's agents; replacing one is no new one.
    for (i, kind) in ["code-review", "testing", "analysis", "translation"].into_iter().enumerate() {
        offer(&app, &agents[i % 3], &capability(kind, json!({}))).await;
    }
    let fifth = put_capability(&app, &agents[2], &capability("summarization", json!({}))).await;
    fifth.assert_error(StatusCode::CONFLICT, "limit_reached");
    assert_eq!(fifth.body["limit"], 4);
    offer(&app, &agents[0], &capability("code-review", json!({"type": "object"}))).await;
    assert_eq!(app.count("capabilities").await, 4);
    assert_eq!(app.count("agents").await, 3, "nothing refused was stored");

    // Paging: the default page holds them all (the old shape); small pages chain by cursor.
    let all = app.get("/api/agents", &token).await;
    assert_eq!(all.body["agents"].as_array().unwrap().len(), 3);
    assert!(all.body.get("nextCursor").is_none(), "{}", all.text);
    let first = app.get("/api/agents?limit=2", &token).await;
    assert_eq!(first.body["agents"].as_array().unwrap().len(), 2);
    let cursor = first.body["nextCursor"].as_str().unwrap().to_owned();
    let second = app.get(&format!("/api/agents?limit=2&cursor={cursor}"), &token).await;
    assert_eq!(second.body["agents"].as_array().unwrap().len(), 1);
    assert_eq!(second.body["agents"][0]["id"], agents[2].id.as_str());
    app.get("/api/agents?limit=0", &token).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    app.get("/api/agents?cursor=nope", &token).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");

    // Deleting an agent frees its place, its keys' and its capabilities'.
    let d = app.call(Method::DELETE, &format!("/api/agents/{}", agents[0].id), Some(&token), None).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT);
    let again = app.post("/api/agents", &token, &json!({"name": "in its place"})).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.text);
    let new_agent = TestAgent {
        id: again.body["agent"]["id"].as_str().unwrap().to_owned(),
        key: again.body["apiKey"]["key"].as_str().unwrap().to_owned(),
        key_id: again.body["apiKey"]["id"].as_str().unwrap().to_owned(),
    };
    offer(&app, &new_agent, &capability("summarization", json!({}))).await;
}
