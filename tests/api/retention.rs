//! What housekeeping forgets: with a history retention, ended negotiations (with everything
//! they held) and ended delegations go once they are older than it, running ones stay, and the
//! insights still count them; trust counters past their window and revoked keys past their grace
//! go always. Time is passed in (`now`), never slept.

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
    let app = TestApp::spawn().await;
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
