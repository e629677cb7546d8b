//! At most one live claim per agent: retried and concurrent pickups by one agent all get that
//! one claim; a lapsed claim the timer has not swept yet does not hold the agent back.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp, answer},
};

/// Starts `n` mixed negotiations whose candidate, `user`, plays through a personal agent: `n`
/// turns parked for that user.
async fn park_turns_for(app: &TestApp, user: &str, n: usize) {
    for i in 0..n {
        let mut body = fixtures::good_match();
        body["sourceUser"]["id"] = json!(format!("user-src-{i}"));
        body["candidateUser"]["id"] = json!(user);
        assert_eq!(app.start(&body).await["negotiation"]["status"], "waiting_for_agent");
    }
}

/// `(task id, state)` of every task claimed by `agent`, expired or not.
async fn claims_of(app: &TestApp, agent: &TestAgent) -> Vec<String> {
    let agent_id: uuid::Uuid = agent.id.parse().unwrap();
    sqlx::query_scalar::<_, uuid::Uuid>("SELECT task_id FROM tasks WHERE state = 'claimed' AND claim_agent_id = $1")
        .bind(agent_id)
        .fetch_all(&app.pool)
        .await
        .unwrap()
        .into_iter()
        .map(|id| id.to_string())
        .collect()
}

#[tokio::test]
async fn concurrent_pickups_by_one_agent_all_get_its_one_claim() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-busy").await;
    park_turns_for(&app, "user-busy", 40).await;

    // Sixteen pickups by the one agent at once (a client retrying impatiently, or running
    // several workers on one key).
    let answers = futures::future::join_all((0..16).map(|_| app.pickup(&agent, None))).await;
    let mut seen = Vec::new();
    for a in &answers {
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        seen.push((
            a.body["negotiationId"].as_str().unwrap().to_owned(),
            a.body["claimToken"].as_str().unwrap().to_owned(),
        ));
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 1, "every pickup answered with the same claim (turn and token): {seen:?}");
    let claimed = claims_of(&app, &agent).await;
    assert_eq!(claimed, vec![seen[0].0.clone()], "exactly one turn claimed, the one every answer carries");
    let total: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'claimed'").fetch_one(&app.pool).await.unwrap();
    assert_eq!(total, 1, "no other turn claimed");

    // That claim answers as usual; the next pickup claims the next turn.
    let (id, token) = &seen[0];
    assert_eq!(app.respond(&agent, id, &answer("reject", Some(token))).await.status, StatusCode::OK);
    let next = app.pickup(&agent, None).await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.text);
    assert_ne!(next.body["negotiationId"].as_str().unwrap(), id.as_str());
    assert_eq!(claims_of(&app, &agent).await.len(), 1);
}

#[tokio::test]
async fn a_lapsed_claim_not_yet_swept_does_not_hold_the_next_pickup_back() {
    // A claim timer that would fire only long after the claim lapsed: the pickup meets the
    // lapsed claim itself.
    let app = TestApp::spawn_with(|c| {
        c.claim_timeout = Duration::from_secs(1);
        c.timer_poll = Duration::from_secs(3600);
    })
    .await;
    let agent = app.register_agent("user-busy").await;
    park_turns_for(&app, "user-busy", 2).await;
    let first = app.pickup(&agent, None).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let first_id = first.body["negotiationId"].as_str().unwrap().to_owned();
    let first_token = first.body["claimToken"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(claims_of(&app, &agent).await, vec![first_id.clone()], "lapsed, not swept yet");

    // The lapsed claim is given back and the oldest parked turn claimed afresh: the same turn,
    // under a new token; the old token is stale.
    let again = app.pickup(&agent, None).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["negotiationId"], first_id.as_str());
    let token = again.body["claimToken"].as_str().unwrap().to_owned();
    assert_ne!(token, first_token);
    assert_eq!(claims_of(&app, &agent).await, vec![first_id.clone()]);
    app.respond(&agent, &first_id, &answer("reject", Some(&first_token)))
        .await
        .assert_error(StatusCode::CONFLICT, "claim_stale");
    assert_eq!(app.respond(&agent, &first_id, &answer("reject", Some(&token))).await.status, StatusCode::OK);

    // Lapsing again, then the other turn: the lapsed turn went back to waiting.
    let second = app.pickup(&agent, None).await;
    let second_id = second.body["negotiationId"].as_str().unwrap().to_owned();
    assert_ne!(second_id, first_id);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let state: String = sqlx::query_scalar("SELECT state FROM tasks WHERE task_id = $1::uuid")
        .bind(&second_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(state, "claimed");
    let third = app.pickup(&agent, None).await;
    assert_eq!(third.status, StatusCode::OK, "{}", third.text);
    assert_eq!(third.body["negotiationId"], second_id.as_str(), "the only parked turn, claimed again");
    assert_eq!(claims_of(&app, &agent).await, vec![second_id]);
}
