//! Delegation's rate limits over HTTP: a requester's outbound limit refusing with `Retry-After`
//! while retries of a request still answer, a target at its inbound limit skipped as rejected,
//! windows that free up as their oldest entry leaves the last minute, concurrent offers that never
//! overrun a target's limit, and two instances on one database sharing one count.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    delegation::{body, setup, spawn, spawn_two},
    helpers::{TestAgent, TestApp},
};

/// Sets a permission of the agent's one capability.
async fn permit(app: &TestApp, agent: &TestAgent, patch: &Value) {
    let caps = app.agent_call(agent, Method::GET, "/capabilities", None).await;
    let id = caps.body["capabilities"][0]["id"].as_str().unwrap().to_owned();
    let r = app.agent_call(agent, Method::PUT, &format!("/capabilities/{id}/permissions"), Some(patch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

/// Gives the requester a capability of its own (limits are set on capabilities) and sets its
/// outbound limit to `limit` delegations a minute.
async fn limit_outbound(app: &TestApp, requester: &TestAgent, limit: i64) {
    let own = json!({"taskType": "testing", "inputSchema": {}, "outputSchema": {}});
    let put = app.agent_call(requester, Method::PUT, "/capabilities", Some(&own)).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    permit(app, requester, &json!({"outboundRateLimit": limit})).await;
}

/// Sends the delegate call `body` as `requester`, past its outbound limit: asserts the 429
/// `rate_limited`; returns its `Retry-After`, in seconds.
async fn refused_retry_after(app: &TestApp, requester: &TestAgent, body: &Value) -> u64 {
    let resp = app
        .client
        .post(format!("{}/api/agents/delegate", app.base))
        .header("x-api-key", &requester.key)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let refused: Value = resp.json().await.unwrap();
    assert_eq!(refused["code"], "rate_limited", "{refused}");
    retry_after
}

/// Asks for one more delegation of any target past the requester's outbound limit: asserts the
/// 429 `rate_limited` and its `Retry-After` of 1 to 60 seconds.
async fn assert_outbound_limited(app: &TestApp, requester: &TestAgent) {
    let retry_after = refused_retry_after(app, requester, &body(requester, &Uuid::new_v4().to_string(), None)).await;
    assert!((1..=60).contains(&retry_after), "{retry_after}");
}

#[tokio::test]
async fn the_outbound_limit_refuses_with_retry_after_and_retries_of_a_request_still_answer() {
    let app = spawn().await;
    let (requester, _targets) = setup(&app, 1).await;
    limit_outbound(&app, &requester, 2).await;
    let first = body(&requester, &Uuid::new_v4().to_string(), None);
    assert_eq!(app.delegate(&requester, &first).await.status, StatusCode::ACCEPTED);
    assert_eq!(
        app.delegate(&requester, &body(&requester, &Uuid::new_v4().to_string(), None)).await.status,
        StatusCode::ACCEPTED
    );
    let refused = app.delegate(&requester, &body(&requester, &Uuid::new_v4().to_string(), None)).await;
    refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert_outbound_limited(&app, &requester).await;
    assert_eq!(app.count("delegations").await, 2);
    // The same request again is an answer, not a new delegation.
    assert_eq!(app.delegate(&requester, &first).await.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn a_target_at_its_inbound_limit_is_skipped_as_rejected_rate_limited() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    permit(&app, &targets[0].agent, &json!({"inboundRateLimit": 1})).await;
    let first = Uuid::new_v4().to_string();
    assert_eq!(app.delegate(&requester, &body(&requester, &first, None)).await.status, StatusCode::ACCEPTED);
    let second = Uuid::new_v4().to_string();
    let asked = app.delegate(&requester, &body(&requester, &second, None)).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    let d = &asked.body["delegation"];
    assert_eq!((d["status"].as_str(), d["retriesUsed"].as_i64()), (Some("request"), Some(1)), "{d}");
    assert_eq!(d["attempts"][0]["targetAnonymousId"], targets[0].anon.as_str());
    assert_eq!(d["attempts"][0]["status"], "rejected");
    assert_eq!(d["attempts"][0]["reason"], "rate_limited");
    assert_eq!(d["attempts"][1]["targetAnonymousId"], targets[1].anon.as_str());
    assert_eq!(app.inbox(&targets[0].agent, None).await.body["total"], 1);
    assert_eq!(app.inbox(&targets[1].agent, None).await.body["total"], 1);

    // Without retries the skip is the end.
    let third = Uuid::new_v4().to_string();
    let mut b = body(&requester, &third, Some(&targets[0].anon));
    b["maxRetries"] = json!(0);
    let ended = app.delegate(&requester, &b).await;
    assert_eq!(ended.body["delegation"]["status"], "rejected", "{}", ended.text);
    assert_eq!(ended.body["result"]["status"], "rejected");
}

/// The windows are the last 60 s, read from the agent's newest delegation (or attempt) and its
/// limit-th newest: once the oldest counted one is older than 60 s (its time moved back here,
/// as the clock would have), there is room again, and `Retry-After` says when that happens.
#[tokio::test]
async fn the_rate_windows_free_up_when_their_oldest_leaves_the_last_minute() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let own = app
        .agent_call(
            &requester,
            Method::PUT,
            "/capabilities",
            Some(&json!({"taskType": "testing", "inputSchema": {}, "outputSchema": {}})),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    permit(&app, &requester, &json!({"outboundRateLimit": 2})).await;
    // Four a minute, of which one requesting owner may use two.
    permit(&app, &targets[0].agent, &json!({"inboundRateLimit": 4})).await;
    let to_target = |rid: &str| {
        let mut b = body(&requester, rid, Some(&targets[0].anon));
        b["maxRetries"] = json!(0);
        b
    };
    let (first, second) = (Uuid::new_v4().to_string(), Uuid::new_v4().to_string());
    for rid in [&first, &second] {
        let asked = app.delegate(&requester, &to_target(rid)).await;
        assert_eq!(asked.body["delegation"]["status"], "request", "{}", asked.text);
    }
    app.delegate(&requester, &to_target(&Uuid::new_v4().to_string()))
        .await
        .assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");

    // The first delegation and its attempt leave the window (40 s ago for the second).
    let backdate = |rid: &str, secs: i64| {
        let pool = app.pool.clone();
        let id: Uuid = rid.parse().unwrap();
        async move {
            sqlx::query(
                "UPDATE delegations SET created_at = created_at - make_interval(secs => $2) WHERE request_id = $1",
            )
            .bind(id)
            .bind(secs as f64)
            .execute(&pool)
            .await
            .unwrap();
            sqlx::query(
                "UPDATE delegation_attempts SET created_at = created_at - make_interval(secs => $2)
                  WHERE delegation_id = (SELECT delegation_id FROM delegations WHERE request_id = $1)",
            )
            .bind(id)
            .bind(secs as f64)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    backdate(&second, 40).await;
    backdate(&first, 61).await;
    let third = Uuid::new_v4().to_string();
    let asked = app.delegate(&requester, &to_target(&third)).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    assert_eq!(asked.body["delegation"]["status"], "request", "the target had room: {}", asked.text);

    // Full again (the second and the third); room once the second leaves, in about 20 s.
    let retry_after = refused_retry_after(&app, &requester, &to_target(&Uuid::new_v4().to_string())).await;
    assert!((18..=21).contains(&retry_after), "{retry_after}");

    // The target's window: the second and third attempts and two of another requester's fill
    // it; a third requester's delegation is skipped as rate-limited until the second leaves it.
    let to_target_from = |from: &TestAgent, rid: &str| {
        let mut b = body(from, rid, Some(&targets[0].anon));
        b["maxRetries"] = json!(0);
        b
    };
    let other = app.register_agent("other-requester").await;
    for _ in 0..2 {
        let offered = app.delegate(&other, &to_target_from(&other, &Uuid::new_v4().to_string())).await;
        assert_eq!(offered.body["delegation"]["status"], "request", "{}", offered.text);
    }
    let third_requester = app.register_agent("third-requester").await;
    let skipped = app.delegate(&third_requester, &to_target_from(&third_requester, &Uuid::new_v4().to_string())).await;
    assert_eq!(skipped.body["delegation"]["attempts"][0]["reason"], "rate_limited", "{}", skipped.text);
    backdate(&second, 30).await;
    let offered = app.delegate(&third_requester, &to_target_from(&third_requester, &Uuid::new_v4().to_string())).await;
    assert_eq!(offered.body["delegation"]["status"], "request", "{}", offered.text);
    assert_eq!(app.inbox(&targets[0].agent, None).await.body["total"], 6);
}

/// Offers to one target take their places in its inbound window one at a time: of sixteen
/// requesters delegating to it at once, exactly its limit get through; the others are skipped
/// as rate-limited.
#[tokio::test]
async fn concurrent_offers_to_one_target_never_overrun_its_inbound_limit() {
    let app = spawn().await;
    let (_requester, targets) = setup(&app, 1).await;
    let limit = 5;
    permit(&app, &targets[0].agent, &json!({"inboundRateLimit": limit})).await;
    let mut requesters = Vec::new();
    for i in 0..16 {
        requesters.push(app.register_agent(&format!("requester-{i}")).await);
    }
    let asked = futures::future::join_all(requesters.iter().map(|r| {
        let mut b = body(r, &Uuid::new_v4().to_string(), Some(&targets[0].anon));
        b["maxRetries"] = json!(0);
        let app = &app;
        async move { app.delegate(r, &b).await }
    }))
    .await;
    let mut live = 0;
    for a in &asked {
        assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
        match a.body["delegation"]["status"].as_str() {
            Some("request") => live += 1,
            Some("rejected") => assert_eq!(a.body["delegation"]["attempts"][0]["reason"], "rate_limited"),
            other => panic!("{other:?}: {}", a.text),
        }
    }
    assert_eq!(live, limit);
    assert_eq!(app.inbox(&targets[0].agent, None).await.body["total"], limit);
}

#[tokio::test]
async fn two_instances_on_one_database_share_the_outbound_count() {
    let (first, second) = spawn_two().await;
    let (requester, _targets) = setup(&first, 1).await;
    let limit = 4;
    limit_outbound(&first, &requester, limit).await;
    // Alternating instances: each sees only half the limit itself.
    for i in 0..limit {
        let app = if i % 2 == 0 { &first } else { &second };
        let asked = app.delegate(&requester, &body(&requester, &Uuid::new_v4().to_string(), None)).await;
        assert_eq!(asked.status, StatusCode::ACCEPTED, "delegation {i}: {}", asked.text);
    }
    for app in [&first, &second] {
        assert_outbound_limited(app, &requester).await;
    }
    assert_eq!(first.count("delegations").await, limit);
}
