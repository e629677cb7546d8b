//! What `parley agent` relies on from the API: the key alone names its agent (`GET
//! /api/agents/me`), a pickup can skip the negotiations it backs off on (`?skip=`), and a release
//! can say why and hand the turn to the system negotiator (`handBack`).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp, answer},
};

async fn release(app: &TestApp, agent: &TestAgent, negotiation: &str, body: &Value) -> crate::helpers::Answer {
    app.agent_call(agent, Method::POST, &format!("/negotiations/{negotiation}/release"), Some(body)).await
}

/// `(turn_number, played_by, agent_id)` of every stored turn.
async fn turns(app: &TestApp, negotiation: &str) -> Vec<(i32, String, Option<uuid::Uuid>)> {
    sqlx::query_as("SELECT turn_number, played_by, agent_id FROM messages WHERE task_id = $1 ORDER BY turn_number")
        .bind(negotiation.parse::<uuid::Uuid>().unwrap())
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

async fn pending_turn_timers(app: &TestApp, negotiation: &str) -> Vec<(String, Value)> {
    sqlx::query_as(
        "SELECT job_type, convert_from(job, 'UTF8')::jsonb FROM apalis.jobs
          WHERE idempotency_key IN ('park:' || $1, 'claim:' || $1) AND status = 'Pending'",
    )
    .bind(negotiation)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_key_alone_names_its_agent() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let me =
        app.client.get(format!("{}/api/agents/me", app.base)).header("x-api-key", &agent.key).send().await.unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    let me: Value = me.json().await.unwrap();
    assert_eq!(me["id"], agent.id.as_str());
    assert_eq!(me["ownerUserId"], "user-tomas");
    assert_eq!(me["status"], "active");
    assert!(!me.to_string().contains(&agent.key), "the key itself is never shown again");
    // As a bearer token too.
    let bearer = app.call(Method::GET, "/api/agents/me", Some(&agent.key), None).await;
    assert_eq!(bearer.body["id"], agent.id.as_str());

    // No key, a user's token, an unknown key: 401. An inactive agent: 403.
    app.call(Method::GET, "/api/agents/me", None, None).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let jwt = app.call(Method::GET, "/api/agents/me", Some(&app.user_token("user-tomas")), None).await;
    jwt.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    app.call(Method::GET, "/api/agents/me", Some("pk_not_a_key_at_all"), None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let tomas = app.user_token("user-tomas");
    let off = app
        .call(Method::PATCH, &format!("/api/agents/{}", agent.id), Some(&tomas), Some(&json!({"status": "inactive"})))
        .await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    app.call(Method::GET, "/api/agents/me", Some(&agent.key), None)
        .await
        .assert_error(StatusCode::FORBIDDEN, "forbidden");
    // Revoked: 401.
    app.call(Method::PATCH, &format!("/api/agents/{}", agent.id), Some(&tomas), Some(&json!({"status": "active"})))
        .await;
    app.call(Method::DELETE, &format!("/api/agents/{}/keys/{}", agent.id, agent.key_id), Some(&tomas), None).await;
    app.call(Method::GET, "/api/agents/me", Some(&agent.key), None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn pickup_skips_the_negotiations_it_is_told_to_but_never_the_agents_own_claim() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let first = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let second =
        app.start(&fixtures::request(fixtures::pastry_chef(), fixtures::engineer(), 60.0)).await["negotiation"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

    // The oldest turn comes first, unless it is skipped.
    let skipped = app.pickup_path(&agent, &format!("/negotiations/pickup?skip={first}")).await;
    assert_eq!(skipped.status, StatusCode::OK, "{}", skipped.text);
    assert_eq!(skipped.body["negotiationId"], second.as_str());
    // The agent's live claim comes back whatever the skip says (a retried pickup strands nothing).
    let again = app.pickup_path(&agent, &format!("/negotiations/pickup?skip={second},{first}")).await;
    assert_eq!(again.body["claimToken"], skipped.body["claimToken"]);
    let token = skipped.body["claimToken"].as_str().unwrap();
    assert_eq!(release(&app, &agent, &second, &json!({"claimToken": token})).await.status, StatusCode::OK);
    // Everything skipped: nothing to claim.
    let none = app.pickup_path(&agent, &format!("/negotiations/pickup?skip={first},{second}")).await;
    assert_eq!(none.status, StatusCode::NO_CONTENT, "{}", none.text);

    // Bad skips change nothing and say what is wrong.
    for bad in ["not-a-uuid".to_owned(), format!("{first},,"), vec![first.clone(); 101].join(",")] {
        let refused = app.pickup_path(&agent, &format!("/negotiations/pickup?skip={bad}")).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(refused.body["error"].as_str().unwrap().contains("skip"), "{}", refused.text);
    }
    assert_eq!(app.snapshot(&first).await.0, "waiting_for_agent");
    assert_eq!(app.snapshot(&second).await.0, "waiting_for_agent");
}

#[tokio::test]
async fn a_handed_back_turn_is_played_at_once_by_the_system_negotiator() {
    let app = TestApp::spawn().await;
    let (agent, id, token) = app.claimed_negotiation().await;
    let fallbacks = || async {
        let scrape = crate::metrics::scrape(&app).await;
        crate::metrics::total(&scrape, "parley_park_fallbacks_total", &[("window", "hand_back")])
    };
    let before = fallbacks().await;

    let handed =
        release(&app, &agent, &id, &json!({"claimToken": token, "reason": "my program crashed", "handBack": true}))
            .await;
    assert_eq!(handed.status, StatusCode::OK, "{}", handed.text);
    assert_eq!(handed.body["handedBack"], true);
    assert_eq!(handed.body["success"], true);

    // Turn 1 was Tomas's: the system negotiator played it for him, and the negotiation went on
    // (ended, or parked for his agent again at turn 3).
    let stored = turns(&app, &id).await;
    assert_eq!(stored[1].0, 1);
    assert_eq!(stored[1].1, "system", "{stored:?}");
    assert_eq!(stored[1].2, None, "no agent answered it");
    let (state, turn_count, _) = app.snapshot(&id).await;
    assert_eq!(handed.body["status"], state.as_str());
    match state.as_str() {
        // Ended by the system turn played for Tomas, or by Maya's system negotiator after it.
        "completed" => assert!((2..=3).contains(&turn_count), "{turn_count}"),
        "waiting_for_agent" => {
            assert_eq!(turn_count, 3);
            // The next turn's own park timer, not the old claim's.
            let timers = pending_turn_timers(&app, &id).await;
            assert_eq!(timers.len(), 1, "{timers:?}");
            assert_eq!(timers[0].1["turnNumber"], 3, "{timers:?}");
        }
        other => panic!("unexpected state {other}"),
    }
    // Counted as a fallback of its own kind (other tests of this process may add to it).
    assert!(fallbacks().await >= before + 1.0);
    // The claim was released, which counts neither for nor against the agent's trust.
    let released: i32 = sqlx::query_scalar("SELECT claims_released FROM agent_trust_days WHERE agent_id = $1")
        .bind(agent.id.parse::<uuid::Uuid>().unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(released, 1);
    // The same token again: the claim is gone.
    let again = release(&app, &agent, &id, &json!({"claimToken": token, "handBack": true})).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
}

#[tokio::test]
async fn personal_vs_personal_has_no_one_to_hand_a_turn_to_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let _maya = app.register_agent("user-maya").await;
    let started = app.start(&fixtures::request(fixtures::engineer(), fixtures::founder(), 88.0)).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.pickup(&tomas, None).await.body["claimToken"].as_str().unwrap().to_owned();

    let refused =
        release(&app, &tomas, &id, &json!({"claimToken": token, "handBack": true, "reason": "crashed"})).await;
    refused.assert_error(StatusCode::CONFLICT, "no_system_negotiator");
    assert!(refused.body["error"].as_str().unwrap().contains("without handBack"), "{}", refused.text);
    // Still Tomas's claim: the same token answers.
    assert_eq!(app.snapshot(&id).await, ("claimed".to_owned(), 0, 0));
    let answered = app.respond(&tomas, &id, &answer("propose", Some(&token))).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}

#[tokio::test]
async fn a_release_may_say_why_and_bad_bodies_change_nothing() {
    let app = TestApp::spawn().await;
    let (agent, id, token) = app.claimed_negotiation().await;

    for bad in [json!({"claimToken": token, "handBack": "yes"}), json!({"claimToken": token, "reason": 5})] {
        release(&app, &agent, &id, &bad).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert_eq!(app.snapshot(&id).await.0, "claimed");
    }
    // A long reason is kept in part, never refused.
    let long = "x".repeat(5_000);
    let released = release(&app, &agent, &id, &json!({"claimToken": token, "reason": long, "handBack": false})).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text);
    assert_eq!(released.body["handedBack"], false);
    assert_eq!(released.body["status"], "waiting_for_agent");
    assert_eq!(turns(&app, &id).await.len(), 1, "nothing was played for Tomas");
}

impl TestApp {
    /// A pickup on a path of the caller's choosing (for its query).
    async fn pickup_path(&self, agent: &TestAgent, path: &str) -> crate::helpers::Answer {
        self.agent_call(agent, Method::POST, path, None).await
    }
}
