//! What housekeeping forgets: with a history retention, ended negotiations (with everything
//! they held) and ended delegations go once they are older than it, running ones stay, and the
//! insights still count them; trust counters past their window, revoked keys past their grace
//! and the event log past its day (but what a webhook has yet to take) go always; routed A2A tasks
//! go with the history retention, their push configurations with them. Time is passed
//! in (`now`), never slept.

use std::time::Duration;

use chrono::Utc;
use reqwest::{Method, StatusCode};

use crate::{fixtures, helpers::TestApp};

const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test]
async fn ended_negotiations_older_than_the_retention_go_with_their_records_and_their_insights_stay() {
    let app = TestApp::spawn().await;
    // Two ended (system against system) and one still waiting for a personal agent.
    for _ in 0..2 {
        let started = app.start(&fixtures::mismatch()).await;
        let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
        app.wait_for(&id, Duration::from_secs(10), |v| v["status"] == "completed").await;
    }
    let (_agent, running) = app.mixed_negotiation().await;
    let before = app.get("/api/insights", &app.service_token()).await.body["total"].clone();
    assert_eq!(before["negotiations"]["total"], 2, "{before}");
    let opportunities = app.count("opportunities").await;
    let messages = app.count("messages").await;
    assert!(messages > 2, "{messages}");

    let prune = |now, retention| parley::retention::prune(&app.pool, retention, now, 1, Duration::from_secs(60));
    // Off: nothing goes, however old.
    let pruned = prune(Utc::now() + chrono::Duration::days(3650), None).await.unwrap();
    assert_eq!((pruned.opportunities, pruned.delegations), (0, 0));
    assert_eq!(app.count("opportunities").await, opportunities);
    // Not older than the retention yet: nothing goes.
    let pruned = prune(Utc::now(), Some(DAY)).await.unwrap();
    assert_eq!(pruned.opportunities, 0);
    // Two days later, with a one-day retention, in batches of one: the two ended ones go.
    let pruned = prune(Utc::now() + chrono::Duration::days(2), Some(DAY)).await.unwrap();
    assert_eq!(pruned.opportunities, 2, "{pruned:?}");
    assert_eq!(app.count("opportunities").await, opportunities - 2);
    assert_eq!(app.counted("SELECT count(*) FROM tasks WHERE completed_at IS NOT NULL").await, 0);
    assert_eq!(
        app.counted(
            "SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = m.task_id)"
        )
        .await,
        0
    );
    assert_eq!(app.counted("SELECT count(*) FROM artifacts").await, 0, "outcomes go with their negotiations");
    // The running one is whole and still answers; the insights still count the two.
    let view = app.get(&format!("/api/negotiations/{running}"), &app.service_token()).await;
    assert_eq!(view.status, StatusCode::OK, "{}", view.text);
    let after = app.get("/api/insights", &app.service_token()).await.body["total"].clone();
    assert_eq!(after, before, "insights outlive the rows they summarize");
}

#[tokio::test]
async fn trust_counters_past_their_window_and_keys_revoked_long_ago_go_always() {
    // No workers: housekeeping's own first run would otherwise race this test's prune.
    let app = TestApp::spawn_with(|c| c.workers = false).await;
    let [maya] = app.register_agents(["user-maya"]).await;
    let agent: uuid::Uuid = maya.id.parse().unwrap();
    for days_ago in [0i32, 89, 95, 400] {
        sqlx::query("INSERT INTO agent_trust_days (agent_id, day, claims_answered) VALUES ($1, current_date - $2, 1)")
            .bind(agent)
            .bind(days_ago)
            .execute(&app.pool)
            .await
            .unwrap();
    }
    let path = format!("/api/agents/{}/keys/{}", maya.id, maya.key_id);
    let revoked = app.call(Method::DELETE, &path, Some(&app.user_token("user-maya")), None).await;
    assert!(revoked.status.is_success(), "{}", revoked.text);

    let pruned = parley::retention::prune(&app.pool, None, Utc::now(), 1000, Duration::from_secs(60)).await.unwrap();
    assert_eq!(pruned.trust_days, 2, "{pruned:?}");
    let kept: Vec<i32> = sqlx::query_scalar(
        "SELECT (current_date - day)::int FROM agent_trust_days WHERE agent_id = $1 ORDER BY day DESC",
    )
    .bind(agent)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(kept, vec![0, 89], "the 90 days trust reads stay");
    assert_eq!(pruned.revoked_keys, 0, "a key revoked just now is kept for its grace period");
    let later = Utc::now() + chrono::Duration::days(31);
    let pruned = parley::retention::prune(&app.pool, None, later, 1000, Duration::from_secs(60)).await.unwrap();
    assert_eq!(pruned.revoked_keys, 1, "{pruned:?}");
    assert_eq!(app.counted("SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL").await, 0);
}

#[tokio::test]
async fn the_event_log_goes_a_day_later_but_an_event_a_webhook_has_yet_to_take_stays() {
    // No workers: housekeeping's own run would race this test's prune, and the delivery must
    // stay pending.
    let app = TestApp::spawn_with(|c| {
        c.a2a_allow_private_targets = true;
        c.workers = false;
    })
    .await;
    // A webhook for outcomes only, at a loopback port nobody listens on: its deliveries fail and
    // stay pending, holding their events.
    let hook = serde_json::json!({ "url": "http://127.0.0.1:9/hook", "events": ["negotiation.outcome"] });
    let created = app.post("/api/webhooks", &app.service_token(), &hook).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let started = app.start(&fixtures::mismatch()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    app.wait_for(&id, Duration::from_secs(10), |v| v["status"] == "completed").await;
    let events = app.counted("SELECT count(*) FROM events").await;
    let held = app.counted("SELECT count(DISTINCT event_id) FROM outbox_deliveries").await;
    assert_eq!(held, 1, "the outcome's delivery");
    assert!(events > held + 1, "{events}");

    let prune = |now| parley::retention::prune(&app.pool, None, now, 1, Duration::from_secs(60));
    // Within the day nothing goes.
    let pruned = prune(Utc::now()).await.unwrap();
    assert_eq!(pruned.events, 0, "{pruned:?}");
    assert_eq!(app.counted("SELECT count(*) FROM events").await, events);
    // Two days later, in batches of one: every event goes but the one the webhook has yet to take.
    let pruned = prune(Utc::now() + chrono::Duration::days(2)).await.unwrap();
    assert_eq!(pruned.events as i64, events - held, "{pruned:?}");
    assert_eq!(
        app.counted("SELECT count(*) FROM events e WHERE EXISTS (SELECT 1 FROM outbox_deliveries d WHERE d.event_id = e.event_id)").await,
        held
    );
    assert_eq!(app.counted("SELECT count(*) FROM events").await, held);
}

#[tokio::test]
async fn routed_a2a_tasks_older_than_the_retention_go_with_their_push_configurations() {
    let app = TestApp::spawn().await;
    let (requester, target) = (app.register_agent("user-r").await, app.register_agent("user-t").await);
    let (requester_id, target_id) =
        (uuid::Uuid::parse_str(&requester.id).unwrap(), uuid::Uuid::parse_str(&target.id).unwrap());
    for (task, age_days) in [("old-task", 3), ("new-task", 0)] {
        sqlx::query(
            "INSERT INTO a2a_routes (requester_agent_id, task_id, target_agent_id, skill_id, created_at)
             VALUES ($1, $2, $3, 'skill', now() - make_interval(days => $4))",
        )
        .bind(requester_id)
        .bind(task)
        .bind(target_id)
        .bind(age_days)
        .execute(&app.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO outbox_targets (target_id, kind, url, route_requester_id, route_task_id, config_id, a2a_version)
             VALUES ($1, 'a2a_push', 'https://hooks.example.org/a2a', $2, $3, 'c', '1.0')",
        )
        .bind(uuid::Uuid::new_v4())
        .bind(requester_id)
        .bind(task)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let prune = |retention| parley::retention::prune(&app.pool, retention, Utc::now(), 1, Duration::from_secs(60));
    assert_eq!(prune(None).await.unwrap().a2a_routes, 0, "without a retention routes stay");
    let pruned = prune(Some(DAY)).await.unwrap();
    assert_eq!(pruned.a2a_routes, 1, "{pruned:?}");
    assert_eq!(app.counted("SELECT count(*) FROM a2a_routes WHERE task_id = 'new-task'").await, 1);
    assert_eq!(app.counted("SELECT count(*) FROM a2a_routes").await, 1);
    assert_eq!(
        app.counted("SELECT count(*) FROM outbox_targets WHERE route_task_id IS NOT NULL").await,
        1,
        "the old task's configuration went with it"
    );
}
