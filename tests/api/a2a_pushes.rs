//! Work pushed to an agent Parley calls, against a small in-process A2A agent
//! ([`crate::loopback_agent`]) whose tasks do what each test needs: a pushed turn whose task
//! never ends is handed back after three claims, and a delegation attempt whose task completed
//! before its deadline, but was only seen after it, completes instead of timing out. Durations
//! are seconds, through the configuration.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    a2a_agents::register_by_card,
    helpers::{TestAgent, TestApp},
    loopback_agent::{Behaviour, LoopbackAgent},
};

/// Delegates `input` to the agent known as `target` with `timeout_ms`, no fallback; its request id.
async fn delegate(app: &TestApp, requester: &TestAgent, target: &str, input: Value, timeout_ms: u64) -> String {
    let rid = uuid::Uuid::new_v4().to_string();
    let body = json!({
        "requestId": rid, "agentId": requester.id, "targetAnonymousId": target, "taskType": "summarization",
        "input": input, "timeoutMs": timeout_ms, "fallbackEnabled": false,
    });
    let sent = app.delegate_async(requester, &body).await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.text);
    rid
}

/// The delegation once it has ended.
async fn ended(app: &TestApp, requester: &TestAgent, rid: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let read = app.keyed(requester, Method::GET, &format!("/api/delegations/{rid}?wait=2"), None).await;
        let delegation = read.body["delegation"].clone();
        if !matches!(delegation["status"].as_str(), Some("request" | "accepted")) {
            return delegation;
        }
        assert!(tokio::time::Instant::now() < deadline, "the delegation never ended: {:#}", read.body);
    }
}

#[tokio::test]
async fn a_pushed_turn_whose_task_never_ends_is_handed_back_after_three_claims() {
    let agent = LoopbackAgent::start(Behaviour::Hang).await;
    let app = TestApp::spawn_with(|c| {
        c.a2a_allow_private_targets = true;
        c.claim_timeout = Duration::from_secs(4);
    })
    .await;
    let (called, _) = register_by_card(&app, "user-tomas", &agent.card_url()).await;
    // Maya's system negotiator proposes; Tomas's turn is pushed to the agent, which works on it
    // for ever.
    let started = app.start(&crate::fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let view = app.wait_for(&id, Duration::from_secs(60), |v| v["turns"].as_array().unwrap().len() >= 2).await;
    let turn = &view["turns"][1];
    assert_eq!(
        (turn["playedBy"].as_str(), turn["fallbackReason"].as_str()),
        (Some("system_fallback"), Some("hand_back")),
        "{view:#}"
    );
    // Three claims, each sent once; each task cancelled when its claim lapsed.
    let claims: i64 = sqlx::query_scalar("SELECT claim_generation FROM tasks WHERE task_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(claims, 3);
    assert_eq!(agent.calls_of("SendMessage"), 3);
    assert_eq!(agent.working(), 0, "every task the agent was given is cancelled");
    assert!(called.id.parse::<uuid::Uuid>().is_ok());
}

#[tokio::test]
async fn an_attempt_whose_task_completed_before_its_deadline_completes_though_read_after() {
    // The agent's task completes 300 ms before the attempt's deadline, and says when, but its
    // reads show that only from the deadline on: every read before the deadline finds it working.
    let output = json!({"summary": "done in time"});
    let before = chrono::Duration::milliseconds(300);
    let agent = LoopbackAgent::start(Behaviour::AnswerBeforeDeadlineSeenAfter(output.clone(), before)).await;
    let app = crate::a2a_agents::spawn().await;
    let requester = app.register_agent("user-rhea").await;
    let (_, target) = register_by_card(&app, "user-tomas", &agent.card_url()).await;
    let rid = delegate(&app, &requester, &target, json!({"mode": "any"}), 4_000).await;
    let done = ended(&app, &requester, &rid).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["output"], output);
    // Read while it worked, then once more after its deadline: that last read took it.
    assert!(agent.calls_of("GetTask") >= 2, "{}", agent.calls_of("GetTask"));

    // Work finished after the deadline still times out, and the task is cancelled.
    let late = LoopbackAgent::start(Behaviour::Hang).await;
    let (_, slow) = register_by_card(&app, "user-ana", &late.card_url()).await;
    let rid = delegate(&app, &requester, &slow, json!({"mode": "any"}), 2_000).await;
    assert_eq!(ended(&app, &requester, &rid).await["status"], "timeout");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while late.working() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the timed-out task was left working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
