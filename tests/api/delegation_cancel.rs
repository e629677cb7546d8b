//! The requester's cancel (`POST /api/delegations/{requestId}/cancel`, MCP's
//! `cancel_delegation`): a delegation that has not ended ends `canceled` with its live attempt,
//! offered or accepted; no other target is tried; the target's later calls are refused and its
//! inbox no longer lists it; its trust is untouched; the timer finds nothing to do; waiters are
//! woken.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    delegation::{delegated, setup, spawn},
    helpers::{Answer, TestAgent, TestApp},
    mcp::{assert_tool_error, call_tool},
};

/// The requester's cancel of `request_id`.
async fn cancel(app: &TestApp, requester: &TestAgent, request_id: &str) -> Answer {
    app.keyed(requester, Method::POST, &format!("/api/delegations/{request_id}/cancel"), None).await
}

/// The `delegation.status` events recorded for the delegation's attempts, as (attempt, status).
async fn status_events(app: &TestApp, request_id: &str) -> Vec<(i64, String)> {
    sqlx::query_as(
        "SELECT (data->>'attempt')::bigint, data->>'status' FROM events
          WHERE kind = 'delegation.status' AND data->>'requestId' = $1 ORDER BY event_id",
    )
    .bind(request_id)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// The delegation timers waiting to fire.
async fn pending_timers(app: &TestApp) -> i64 {
    app.counted("SELECT count(*) FROM apalis.jobs WHERE job_type = 'parley.delegation_timeout' AND status = 'Pending'")
        .await
}

/// Every trust counter an attempt's end may write, for `agent`: its daily row's four attempt
/// counts and its per-requester-owner counts.
async fn trust_counts(app: &TestApp, agent: &TestAgent) -> (i64, i64) {
    let id = agent.id.parse::<Uuid>().unwrap();
    let days: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(attempts_completed + attempts_unfinished + accepted_completed + accepted_unfinished), 0)::bigint
           FROM agent_trust_days WHERE agent_id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let per_requester: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(counted), 0)::bigint FROM trust_requester_days WHERE target_agent_id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    (days, per_requester)
}

#[tokio::test]
async fn a_cancel_ends_an_offered_attempt_wakes_the_waiter_and_no_other_target_gets_it() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 3).await;
    // Retries left and two more eligible targets: a fallback would have somewhere to go.
    let rid = delegated(&app, &requester, |b| b["maxRetries"] = json!(3)).await;
    assert_eq!(app.inbox(&targets[0].agent, None).await.body["total"], 1);
    assert_eq!(pending_timers(&app).await, 1);

    // The requester waits for the end; the cancel wakes it.
    let waiting = {
        let (client, base, agent, rid) = (app.client.clone(), app.base.clone(), requester.clone(), rid.clone());
        tokio::spawn(async move {
            let r = client
                .get(format!("{base}/api/delegations/{rid}?wait=20"))
                .header("x-api-key", &agent.key)
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let canceled = cancel(&app, &requester, &rid).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    let d = &canceled.body["delegation"];
    assert_eq!(d["status"], "canceled");
    assert_eq!(canceled.body["result"]["status"], "canceled", "{}", canceled.text);
    assert!(canceled.body["result"].get("output").is_none());
    assert!(canceled.body["result"]["executionTimeMs"].as_i64().unwrap() >= 0);
    assert!(d["endedAt"].is_string());
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "no fallback: {}", canceled.text);
    assert_eq!(d["attempts"][0]["status"], "canceled");
    assert_eq!(d["attempts"][0]["reason"], "canceled by the requester");

    let (status, waited) = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "{waited}");
    assert_eq!(waited["delegation"]["status"], "canceled");
    assert!(started.elapsed() < Duration::from_secs(5), "woken by the cancel, not by its wait running out");

    // The read answers the same; nobody is offered it; the target's calls are refused.
    let read = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    assert_eq!(read.body, canceled.body);
    for t in &targets {
        assert_eq!(app.inbox(&t.agent, None).await.body["total"], 0);
    }
    let accept = app.act(&targets[0].agent, &rid, "accept", None).await;
    accept.assert_error(StatusCode::CONFLICT, "invalid_state");
    assert!(accept.text.contains("canceled"), "{}", accept.text);
    app.act(&targets[0].agent, &rid, "reject", None).await.assert_error(StatusCode::CONFLICT, "invalid_state");
    let (status, retries, attempts) = app.stored(&rid).await;
    assert_eq!((status.as_str(), retries, attempts.len()), ("canceled", 0, 1));
    assert_eq!(app.count("delegation_attempts").await, 1);

    // Recorded as every other end is; the timer is gone.
    assert_eq!(status_events(&app, &rid).await, [(1, "request".to_owned()), (1, "canceled".to_owned())]);
    assert_eq!(pending_timers(&app).await, 0);
    // Listed under its status, both ways.
    let out = app.agent_call(&requester, Method::GET, "/delegations?direction=outbound&status=canceled", None).await;
    assert_eq!(out.body["delegations"][0]["requestId"], rid.as_str(), "{}", out.text);
    let inbound =
        app.agent_call(&targets[0].agent, Method::GET, "/delegations?direction=inbound&status=canceled", None).await;
    assert_eq!(inbound.body["requests"][0]["status"], "canceled", "{}", inbound.text);
    // Its attempt's A2A task is canceled, with the reason.
    let task = app
        .keyed(&requester, Method::GET, &format!("/api/tasks/{}", d["attempts"][0]["taskId"].as_str().unwrap()), None)
        .await;
    assert_eq!(task.status, StatusCode::OK, "{}", task.text);
    assert_eq!(task.body["status"]["state"], "canceled", "{}", task.text);
}

#[tokio::test]
async fn a_cancel_ends_an_accepted_attempt_and_the_targets_complete_then_changes_nothing() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let target = &targets[0];
    let rid = delegated(&app, &requester, |_| {}).await;
    let accepted = app.act(&target.agent, &rid, "accept", None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    let token = accepted.body["claimToken"].as_str().unwrap().to_owned();
    let trust_before = trust_counts(&app, &target.agent).await;

    let canceled = cancel(&app, &requester, &rid).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    assert_eq!(canceled.body["delegation"]["attempts"][0]["status"], "canceled");
    assert!(canceled.body["delegation"]["attempts"][0]["acceptedAt"].is_string());
    let after = app.stored(&rid).await;

    // The target, which accepted through this same process, completes, fails or rejects: each
    // is refused, saying why, and nothing changes.
    let output = json!({"output": {"feedback": "done anyway"}, "claimToken": token});
    let late = app.act(&target.agent, &rid, "complete", Some(&output)).await;
    late.assert_error(StatusCode::CONFLICT, "invalid_state");
    assert!(late.text.contains("canceled"), "{}", late.text);
    app.act(&target.agent, &rid, "fail", Some(&json!({"error": "x", "claimToken": token})))
        .await
        .assert_error(StatusCode::CONFLICT, "invalid_state");
    app.act(&target.agent, &rid, "reject", None).await.assert_error(StatusCode::CONFLICT, "invalid_state");
    assert_eq!(app.stored(&rid).await, after);
    let read = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    assert_eq!(read.body["result"]["status"], "canceled");
    assert!(read.body["result"].get("output").is_none(), "{}", read.text);
    assert_eq!(app.inbox(&targets[1].agent, None).await.body["total"], 0, "no fallback");

    // A canceled attempt counts neither for nor against its target.
    assert_eq!(trust_counts(&app, &target.agent).await, trust_before);
    assert_eq!(trust_before, (0, 0));
    let counted: Option<bool> = sqlx::query_scalar("SELECT counted FROM delegation_attempts WHERE delegation_id = $1")
        .bind(app.delegation_id(&rid).await)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(counted, Some(false));
    let trust = app.get(&format!("/api/trust/{}", target.agent.id), &app.service_token()).await;
    assert_eq!(trust.status, StatusCode::OK, "{}", trust.text);
    assert_eq!(
        (trust.body["totalDelegations"].as_i64(), trust.body["successfulDelegations"].as_i64()),
        (Some(0), Some(0))
    );

    // The same target's next delegation, completed, counts as usual: the cancel left no trace.
    let next = delegated(&app, &requester, |_| {}).await;
    assert_eq!(app.act(&target.agent, &next, "accept", None).await.status, StatusCode::OK);
    let done = app.act(&target.agent, &next, "complete", Some(&json!({"output": {"feedback": "ok"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(trust_counts(&app, &target.agent).await, (2, 1));
}

#[tokio::test]
async fn the_timer_that_comes_due_after_a_cancel_changes_nothing() {
    // The accept timeout is 2 s here: the workers would time the attempt out by then.
    let app = spawn().await;
    let (requester, targets) = setup(&app, 2).await;
    let rid = delegated(&app, &requester, |_| {}).await;
    let canceled = cancel(&app, &requester, &rid).await;
    assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
    let after = app.stored(&rid).await;
    assert_eq!(pending_timers(&app).await, 0, "the cancel took the timer away in its transaction");

    // Past the accept deadline, with the real workers running: nothing moved, nobody was offered it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(app.stored(&rid).await, after);
    assert_eq!(app.inbox(&targets[1].agent, None).await.body["total"], 0);
    // A stale delivery of the attempt's timer (one already taken by a worker, say) does nothing.
    let id = app.delegation_id(&rid).await;
    let stale = parley_jobs::DelegationTimeout { delegation_id: id, attempt: 1 };
    assert!(!app.state.time_out_delegation(stale).await.unwrap());
    assert_eq!(app.stored(&rid).await, after);
    assert_eq!(status_events(&app, &rid).await.len(), 2);
}

#[tokio::test]
async fn only_the_requester_cancels_and_an_ended_delegation_stays_as_it_ended() {
    let app = spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let target = &targets[0];
    let stranger = app.register_agent("stranger").await;
    let rid = delegated(&app, &requester, |_| {}).await;
    let before = app.stored(&rid).await;

    // Another agent, the target among them, is told there is no such delegation; so is an
    // unknown request id. No key, a bad key, a user's token: 401.
    cancel(&app, &stranger, &rid).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    cancel(&app, &target.agent, &rid).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    cancel(&app, &requester, &Uuid::new_v4().to_string()).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    let path = format!("/api/delegations/{rid}/cancel");
    app.call(Method::POST, &path, None, None).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let owner = app.call(Method::POST, &path, Some(&app.user_token("requester")), None).await;
    owner.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let bad_key = TestAgent { key: "pk_not_a_key".into(), ..requester.clone() };
    cancel(&app, &bad_key, &rid).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    // A path id that is no id names nothing.
    cancel(&app, &requester, "not-an-id").await.assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.stored(&rid).await, before);

    // Canceled once; the second cancel is told it ended, and changes nothing.
    assert_eq!(cancel(&app, &requester, &rid).await.status, StatusCode::OK);
    let canceled = app.stored(&rid).await;
    let again = cancel(&app, &requester, &rid).await;
    again.assert_error(StatusCode::CONFLICT, "delegation_ended");
    assert_eq!(app.stored(&rid).await, canceled);
    assert_eq!(status_events(&app, &rid).await.len(), 2);

    // A completed delegation cannot be canceled either.
    let done_rid = delegated(&app, &requester, |_| {}).await;
    assert_eq!(app.act(&target.agent, &done_rid, "accept", None).await.status, StatusCode::OK);
    let done = app.act(&target.agent, &done_rid, "complete", Some(&json!({"output": {"feedback": "ok"}}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let completed = app.stored(&done_rid).await;
    cancel(&app, &requester, &done_rid).await.assert_error(StatusCode::CONFLICT, "delegation_ended");
    assert_eq!(app.stored(&done_rid).await, completed);
    assert_eq!(completed.0, "completed");
}

#[tokio::test]
async fn cancel_delegation_over_mcp_answers_as_the_route_does() {
    let app = TestApp::spawn().await;
    let (requester, targets) = setup(&app, 1).await;
    let outsider = app.register_agent("outsider").await;
    let rid = delegated(&app, &requester, |_| {}).await;
    let request = json!({"requestId": rid});

    let refused = call_tool(&app, &outsider.key, "cancel_delegation", request.clone()).await;
    assert_tool_error(&refused, "not_found");
    let bad = call_tool(&app, &requester.key, "cancel_delegation", json!({"requestId": "nope"})).await;
    assert_tool_error(&bad, "invalid_body");
    assert_eq!(app.stored(&rid).await.0, "request");

    let canceled = call_tool(&app, &requester.key, "cancel_delegation", request.clone()).await;
    assert_eq!(canceled["isError"], false, "{canceled}");
    assert_eq!(canceled["structuredContent"]["delegation"]["status"], "canceled", "{canceled}");
    assert_eq!(canceled["structuredContent"]["result"]["status"], "canceled");
    let over_http = app.keyed(&requester, Method::GET, &format!("/api/delegations/{rid}"), None).await;
    assert_eq!(canceled["structuredContent"], over_http.body);
    let got = call_tool(&app, &requester.key, "get_delegation", request.clone()).await;
    assert_eq!(got["structuredContent"]["delegation"]["attempts"][0]["status"], "canceled", "{got}");

    // The target's tools are refused; the second cancel is told it ended.
    let accept = call_tool(&app, &targets[0].agent.key, "accept_delegation", request.clone()).await;
    assert_tool_error(&accept, "invalid_state");
    let inbox = call_tool(&app, &targets[0].agent.key, "list_delegation_inbox", json!({})).await;
    assert_eq!(inbox["structuredContent"]["total"], 0, "{inbox}");
    let again = call_tool(&app, &requester.key, "cancel_delegation", request).await;
    assert_tool_error(&again, "delegation_ended");
}
