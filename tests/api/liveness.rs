//! Liveness and offline parking: agents marked seen (throttled), the heartbeat, and the
//! shorter park window for a user whose agents are not live.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp, answer},
};

const WAIT: Duration = Duration::from_secs(15);

/// A mixed negotiation (Maya: system, Tomas: personal) that stays open after a fallback turn.
async fn start_partial_fit(app: &TestApp) -> String {
    let mut body = fixtures::good_match();
    body["candidateUser"]["profile"]["skills"] = json!(["go", "kubernetes"]);
    app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned()
}

/// A Parley that parks a turn for `offline` when its user's agents are not live and for `live`
/// when they are, with Tomas's personal agent registered.
async fn parking_for(offline: Duration, live: Duration) -> (TestApp, TestAgent) {
    let app = TestApp::spawn_with(|c| {
        c.park_timeout_offline = offline;
        c.park_timeout = live;
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    (app, agent)
}

async fn played_by(app: &TestApp, turn: i32) -> String {
    sqlx::query_scalar("SELECT played_by FROM messages WHERE turn_number = $1")
        .bind(turn)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

async fn heartbeat(app: &TestApp, agent: &TestAgent) -> StatusCode {
    app.agent_call(agent, Method::POST, "/heartbeat", None).await.status
}

async fn agent_view(app: &TestApp, user: &str, agent: &TestAgent) -> Value {
    app.get(&format!("/api/agents/{}", agent.id), &app.user_token(user)).await.body
}

#[tokio::test]
async fn a_turn_parked_for_a_user_whose_agent_was_never_seen_is_taken_after_the_offline_window() {
    let app = TestApp::spawn_with(|c| c.park_timeout_offline = Duration::from_secs(1)).await;
    app.register_agent("user-tomas").await;
    let id = start_partial_fit(&app).await;

    // The long window is two minutes: only the offline window can have run out.
    let view = app.wait_for(&id, WAIT, |v| v["turns"].as_array().unwrap().len() >= 2).await;
    assert_eq!(view["turns"][1]["userId"], "user-tomas");
    assert!(!view["turns"][1]["reasoning"].as_str().unwrap().is_empty(), "taken with Tomas's full context");
    assert_eq!(played_by(&app, 1).await, "system");
}

#[tokio::test]
async fn an_offline_window_of_zero_hands_the_turn_to_the_system_at_once() {
    let app = TestApp::spawn_with(|c| c.park_timeout_offline = Duration::ZERO).await;
    app.register_agent("user-tomas").await;
    let id = start_partial_fit(&app).await;
    app.wait_for(&id, WAIT, |v| v["turns"].as_array().unwrap().len() >= 2).await;
    assert_eq!(played_by(&app, 1).await, "system");
}

#[tokio::test]
async fn a_user_whose_agent_just_long_polled_gets_the_long_window() {
    let (app, agent) = parking_for(Duration::from_secs(1), Duration::from_secs(5)).await;
    // A long-poll with nothing parked: the agent is seen, then it goes quiet.
    assert_eq!(app.pickup(&agent, Some(1)).await.status, StatusCode::NO_CONTENT);
    let id = start_partial_fit(&app).await;

    tokio::time::sleep(Duration::from_secs(3)).await;
    let (state, turns, _) = app.snapshot(&id).await;
    assert_eq!((state.as_str(), turns), ("waiting_for_agent", 1), "the offline window does not apply to a live agent");
    app.wait_for(&id, WAIT, |v| v["turns"].as_array().unwrap().len() >= 2).await;
    assert_eq!(played_by(&app, 1).await, "system", "the long window still ends in a fallback");
}

#[tokio::test]
async fn an_agent_seen_before_the_offline_window_ends_moves_the_turn_to_the_long_window() {
    let (app, agent) = parking_for(Duration::from_secs(2), Duration::from_secs(6)).await;
    let id = start_partial_fit(&app).await;
    // Parked while the agent was not live; it comes back before the offline timer fires.
    assert_eq!(app.snapshot(&id).await.0, "waiting_for_agent");
    assert_eq!(heartbeat(&app, &agent).await, StatusCode::NO_CONTENT);

    tokio::time::sleep(Duration::from_secs(4)).await;
    let (state, turns, _) = app.snapshot(&id).await;
    assert_eq!((state.as_str(), turns), ("waiting_for_agent", 1), "the timer saw a live agent and re-armed");
    app.wait_for(&id, WAIT, |v| v["turns"].as_array().unwrap().len() >= 2).await;
    assert_eq!(played_by(&app, 1).await, "system");
}

#[tokio::test]
async fn a_claim_made_within_the_offline_window_wins() {
    let app = TestApp::spawn_with(|c| c.park_timeout_offline = Duration::from_secs(1)).await;
    let agent = app.register_agent("user-tomas").await;
    let id = start_partial_fit(&app).await;
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();

    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = app.respond(&agent, &id, &answer("accept", Some(&token))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["turnNumber"], 1);
    assert_eq!(played_by(&app, 1).await, "personal");
}

#[tokio::test]
async fn the_heartbeat_answers_the_agents_own_key_only_and_makes_it_live() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let maya = app.register_agent("user-maya").await;

    let before = agent_view(&app, "user-tomas", &tomas).await;
    assert_eq!((before["lastSeenAt"].clone(), before["live"].clone()), (Value::Null, json!(false)));

    let path = format!("{}/api/agents/{}/heartbeat", app.base, tomas.id);
    let without = app.client.post(&path).send().await.unwrap();
    assert_eq!(without.status(), StatusCode::UNAUTHORIZED);
    let other = app.client.post(&path).header("x-api-key", &maya.key).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    assert_eq!(agent_view(&app, "user-tomas", &tomas).await["live"], false, "refused calls see nobody");

    assert_eq!(heartbeat(&app, &tomas).await, StatusCode::NO_CONTENT);
    let after = agent_view(&app, "user-tomas", &tomas).await;
    assert_eq!(after["live"], true);
    assert!(after["lastSeenAt"].is_string(), "{after}");
    let listed = app.get("/api/agents", &app.user_token("user-tomas")).await.body;
    assert_eq!(listed["agents"][0]["live"], true);
}

#[tokio::test]
async fn a_thousand_pickups_write_last_seen_at_only_a_handful_of_times() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    // Counts every write of the column, whatever writes it.
    for statement in [
        "CREATE TABLE seen_writes (at timestamptz NOT NULL DEFAULT clock_timestamp())",
        "CREATE FUNCTION count_seen_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO seen_writes DEFAULT VALUES; RETURN NEW; END $$",
        "CREATE TRIGGER count_seen_write AFTER UPDATE OF last_seen_at ON agents
         FOR EACH ROW EXECUTE FUNCTION count_seen_write()",
    ] {
        sqlx::query(statement).execute(&app.pool).await.unwrap();
    }

    let started = std::time::Instant::now();
    for _ in 0..1000 {
        assert_eq!(app.pickup(&agent, None).await.status, StatusCode::NO_CONTENT);
    }
    let elapsed = started.elapsed();
    let writes: i64 = sqlx::query_scalar("SELECT count(*) FROM seen_writes").fetch_one(&app.pool).await.unwrap();
    // One write at the first pickup, then at most one per 15 s.
    let allowed = 1 + (elapsed.as_secs() / 15) as i64;
    assert!((1..=allowed).contains(&writes), "{writes} writes in {elapsed:?} (at most {allowed})");
    assert_eq!(agent_view(&app, "user-tomas", &agent).await["live"], true);
}

fn at(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str().unwrap_or_else(|| panic!("not a time: {v}")).parse().unwrap()
}

#[tokio::test]
async fn a_waiting_turn_says_whose_agent_it_waits_for_until_when_and_what_happens_then() {
    let app = TestApp::spawn_with(|c| {
        c.park_timeout_offline = Duration::from_secs(60);
        c.park_timeout = Duration::from_secs(120);
        c.claim_timeout = Duration::from_secs(300);
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    let id = start_partial_fit(&app).await;
    let maya = app.user_token("user-maya");
    let path = format!("/api/negotiations/{id}");
    let view = || app.get(&path, &maya);
    // Seconds from the turn's parking (just after turn 0 was stored) to the end of its wait.
    let waits =
        |v: &Value| (at(&v["awaitingUntil"]) - at(&v["turns"][0]["createdAt"])).num_milliseconds() as f64 / 1000.0;

    // Tomas's agent never ran: the turn waits the offline window, then Parley decides.
    let parked = view().await.body;
    assert_eq!(parked["status"], "waiting_for_agent", "{parked}");
    assert_eq!(parked["awaitingUserId"], "user-tomas");
    assert_eq!(parked["awaitingThen"], "system_negotiator");
    assert!((59.0..62.0).contains(&waits(&parked)), "the offline window: {parked}");
    assert_eq!((parked["round"].clone(), parked["earlierRounds"].clone()), (json!(0), json!([])));

    // Once it is live, the long window.
    assert_eq!(heartbeat(&app, &agent).await, StatusCode::NO_CONTENT);
    let live = view().await.body;
    assert!((119.0..122.0).contains(&waits(&live)), "the long window: {live}");
    // Claimed: no earlier than the claim's end (here the later of the two).
    let picked = app.pickup(&agent, None).await;
    let claimed = view().await.body;
    assert_eq!(claimed["status"], "claimed");
    assert_eq!(at(&claimed["awaitingUntil"]), at(&picked.body["turn"]["deadline"]), "{claimed}");
    assert_eq!(claimed["awaitingThen"], "system_negotiator");
    // The agent's own view says the same.
    let own = app.agent_call(&agent, Method::GET, &format!("/negotiations/{id}"), None).await;
    assert_eq!(own.body["awaitingUntil"], claimed["awaitingUntil"], "{}", own.text);
    // Answered and ended: nothing is awaited.
    let token = picked.body["claimToken"].as_str().unwrap();
    assert_eq!(app.respond(&agent, &id, &answer("reject", Some(token))).await.status, StatusCode::OK);
    let ended = view().await.body;
    assert!(ended["awaitingUntil"].is_null() && ended["awaitingThen"].is_null(), "{ended}");

    // Personal vs personal: the negotiation's deadline, then it ends.
    app.register_agent("user-maya").await;
    let pvp = app.start(&fixtures::good_match()).await;
    let pvp = app.get(&format!("/api/negotiations/{}", pvp["negotiation"]["id"].as_str().unwrap()), &maya).await.body;
    assert_eq!(
        (pvp["awaitingUserId"].as_str(), pvp["awaitingThen"].as_str()),
        (Some("user-maya"), Some("negotiation_ends")),
        "{pvp}"
    );
    let left = (at(&pvp["awaitingUntil"]) - at(&pvp["createdAt"])).num_seconds();
    assert!((119..=121).contains(&left), "the personal-vs-personal deadline: {pvp}");
}

#[tokio::test]
async fn an_agent_whose_keys_are_all_revoked_is_not_live_whenever_it_was_seen() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    assert_eq!(heartbeat(&app, &tomas).await, StatusCode::NO_CONTENT);
    assert_eq!(agent_view(&app, "user-tomas", &tomas).await["live"], true);
    let token = app.user_token("user-tomas");
    let revoked =
        app.call(Method::DELETE, &format!("/api/agents/{}/keys/{}", tomas.id, tomas.key_id), Some(&token), None).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    let after = agent_view(&app, "user-tomas", &tomas).await;
    assert_eq!(after["live"], false, "it cannot answer anything: {after}");
    assert!(after["lastSeenAt"].is_string(), "when it was last seen is still told: {after}");
}
