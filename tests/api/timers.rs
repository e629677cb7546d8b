//! Durable timers through the real apalis workers: claim expiry, park fallback, the
//! personal-vs-personal deadline, pending expiry, races, and timers surviving a killed process.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestApp, answer, post_for_json},
};

const WAIT: Duration = Duration::from_secs(15);

/// A Parley whose claims last `claim` and whose parked turns wait `park` for a live agent.
async fn with_claim_and_park_timeouts(claim: Duration, park: Duration) -> TestApp {
    TestApp::spawn_with(|c| {
        c.claim_timeout = claim;
        c.park_timeout = park;
    })
    .await
}

#[tokio::test]
async fn an_expired_claim_returns_the_turn_and_its_token_goes_stale() {
    let app = TestApp::spawn_with(|c| c.claim_timeout = Duration::from_secs(1)).await;
    let (agent, id) = app.mixed_negotiation().await;
    let first = app.claim_token(&agent).await;

    app.wait_for(&id, WAIT, |v| v["status"] == "waiting_for_agent").await;
    let second = app.claim_token(&agent).await;
    assert_ne!(first, second, "a new claim gets a new token");
    app.respond(&agent, &id, &answer("accept", Some(&first))).await.assert_error(StatusCode::CONFLICT, "claim_stale");
    let generation: i64 = sqlx::query_scalar("SELECT claim_generation FROM tasks").fetch_one(&app.pool).await.unwrap();
    assert_eq!(generation, 2);
}

#[tokio::test]
async fn a_parked_turn_falls_back_to_the_system_negotiator_and_the_next_one_is_parked_again() {
    let app = TestApp::spawn_with(|c| c.park_timeout = Duration::from_secs(1)).await;
    app.register_agent("user-tomas").await;
    // A partial fit, so the system negotiator keeps the negotiation going after the fallback.
    let mut body = fixtures::good_match();
    body["candidateUser"]["profile"]["skills"] = json!(["go", "kubernetes"]);
    let id = app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned();

    let view = app.wait_for(&id, WAIT, |v| v["turns"].as_array().unwrap().len() >= 2).await;
    let fallback = &view["turns"][1];
    assert_eq!(fallback["userId"], "user-tomas");
    assert!(!fallback["reasoning"].as_str().unwrap().is_empty(), "the fallback argues from Tomas's context");
    let played_by: String =
        sqlx::query_scalar("SELECT played_by FROM messages WHERE turn_number = 1").fetch_one(&app.pool).await.unwrap();
    assert_eq!(played_by, "system");
    // The negotiation went on: it ended, or Tomas's next turn is parked for his agent again.
    let view = app
        .wait_for(&id, WAIT, |v| {
            v["status"] == "completed"
                || (v["status"] == "waiting_for_agent" && v["turns"].as_array().unwrap().len() == 3)
        })
        .await;
    if view["status"] == "waiting_for_agent" {
        assert_eq!(view["awaitingUserId"], "user-tomas");
        assert_eq!(view["turnCount"], 3);
    } else {
        assert!(view["outcome"].is_object());
    }
}

#[tokio::test]
async fn personal_agents_that_vanish_end_stalled_at_the_deadline() {
    let app = TestApp::spawn_with(|c| c.pvp_timeout = Duration::from_secs(2)).await;
    app.register_agent("user-maya").await;
    app.register_agent("user-tomas").await;
    let id = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let view = app.wait_for(&id, WAIT, |v| v["status"] == "completed").await;
    assert_eq!(view["outcome"]["reason"], "timeout");
    assert_eq!(view["outcome"]["hasOpportunity"], false);
    let status: String = sqlx::query_scalar("SELECT status FROM opportunities").fetch_one(&app.pool).await.unwrap();
    assert_eq!(status, "stalled");
}

#[tokio::test]
async fn a_pending_opportunity_nobody_decides_on_expires_and_a_decided_one_does_not() {
    let app = TestApp::spawn_with(|c| c.pending_ttl = Duration::from_secs(1)).await;
    let undecided = app.start(&fixtures::good_match()).await["opportunity"]["id"].as_str().unwrap().to_owned();
    let mut other = fixtures::good_match();
    other["sourceUser"]["id"] = json!("user-ana");
    let decided = app.start(&other).await["opportunity"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/opportunities/{decided}/decision");
    app.post(&path, &app.user_token("user-ana"), &json!({ "decision": "decline" })).await;

    let service = app.service_token();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let o = app.get(&format!("/api/opportunities/{undecided}"), &service).await;
        if o.body["status"] == "expired" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never expired: {}", o.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let o = app.get(&format!("/api/opportunities/{decided}"), &service).await;
    assert_eq!(o.body["status"], "rejected");
}

#[tokio::test]
async fn respond_claim_expiry_and_fallback_racing_on_one_turn_leave_exactly_one_winner() {
    let app = with_claim_and_park_timeouts(Duration::from_secs(1), Duration::from_secs(1)).await;
    let agent = app.register_agent("user-tomas").await;
    const ROUNDS: usize = 8;
    let mut ids = Vec::new();
    for i in 0..ROUNDS {
        let mut body = fixtures::good_match();
        body["sourceUser"]["id"] = json!(format!("user-src-{i}"));
        ids.push(app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned());
    }
    // Claim each, then answer right around the moment the claim expires and the park timeout
    // is due, with different delays per round.
    for (i, id) in ids.iter().enumerate() {
        let picked = app.pickup(&agent, None).await;
        if picked.status != StatusCode::OK {
            continue; // already taken over by a fallback
        }
        let token = picked.body["claimToken"].as_str().unwrap().to_owned();
        let delay = Duration::from_millis(700 + 100 * i as u64);
        let app_ref = &app;
        let agent_ref = &agent;
        let id = id.clone();
        tokio::time::sleep(delay).await;
        let r = app_ref
            .respond(agent_ref, picked.body["negotiationId"].as_str().unwrap(), &answer("reject", Some(&token)))
            .await;
        assert!(
            r.status == StatusCode::OK || r.status == StatusCode::CONFLICT,
            "{id}: unexpected {} {}",
            r.status,
            r.text
        );
    }
    // Let every timer run out, then check the invariants in SQL.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let duplicates = app
        .counted("SELECT count(*) FROM (SELECT task_id, turn_number FROM messages GROUP BY 1, 2 HAVING count(*) > 1) d")
        .await;
    assert_eq!(duplicates, 0, "no turn stored twice");
    let turn_one: Vec<(i64,)> = sqlx::query_as("SELECT count(*) FROM messages WHERE turn_number = 1 GROUP BY task_id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(turn_one.len(), ROUNDS, "every negotiation got its turn 1 from exactly one of the racers");
    let gaps = app.counted("SELECT count(*) FROM tasks t WHERE t.turn_count <> (SELECT count(*) FROM messages m WHERE m.task_id = t.task_id)").await;
    assert_eq!(gaps, 0, "no lost turn");
    let outcomes = app.counted("SELECT count(*) FROM tasks t WHERE t.state = 'completed' AND (SELECT count(*) FROM artifacts a WHERE a.task_id = t.task_id) <> 1").await;
    assert_eq!(outcomes, 0, "every completed negotiation has exactly one outcome");
    let stuck = app.counted("SELECT count(*) FROM tasks WHERE state IN ('working', 'submitted')").await;
    assert_eq!(stuck, 0);
}

#[tokio::test]
async fn a_timer_armed_before_the_process_was_killed_fires_after_a_restart() {
    let database_url = crate::helpers::fresh_database().await;
    let data_dir = std::env::temp_dir().join(format!("parley-kill-{}", uuid::Uuid::now_v7()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = |cmd: &mut std::process::Command| {
        cmd.env("DATABASE_URL", &database_url)
            .env("PARLEY_BIND", format!("127.0.0.1:{port}"))
            .env("PARLEY_DATA_DIR", &data_dir)
            .env("PARLEY_JWT_SECRET", crate::helpers::TEST_SECRET)
            .env("PARLEY_PVP_TIMEOUT", "3s")
            .env("PARLEY_TIMER_POLL", "200ms")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    };
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
    serve.arg("serve");
    env(&mut serve);
    let mut child = serve.spawn().unwrap();

    let app = TestApp::spawn_on(&database_url, |c| c.workers = false).await;
    let base = format!("http://127.0.0.1:{port}");
    // Up to a minute: a debug build loads WordNet for seconds, more on a busy machine.
    for _ in 0..600 {
        if reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Two personal agents: the negotiation waits for them, with a 3 s deadline armed.
    app.register_agent("user-maya").await;
    app.register_agent("user-tomas").await;
    let client = reqwest::Client::new();
    let started =
        post_for_json(&client, &format!("{base}/api/negotiations"), &app.service_token(), &fixtures::good_match())
            .await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    // SIGKILL: no shutdown, no chance to run anything.
    child.kill().unwrap();
    child.wait().unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(app.snapshot(&id).await.0, "waiting_for_agent", "nothing ran the timer while no worker lived");

    // A new process with workers picks the overdue timer up.
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
    worker.arg("worker");
    env(&mut worker);
    let mut worker = worker.spawn().unwrap();
    // The worker loads WordNet before it runs timers: seconds in a debug build, more when busy.
    let view = app.wait_for(&id, Duration::from_secs(60), |v| v["status"] == "completed").await;
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert_eq!(view["outcome"]["reason"], "timeout");
}

/// The pending turn timer of `task` as `(queue, generation in its payload, run_at)`; exactly one
/// must be pending.
async fn pending_turn_timer(app: &TestApp, task: &str) -> (String, i64, chrono::DateTime<chrono::Utc>) {
    let rows = pending_turn_timers(app, task).await;
    assert_eq!(rows.len(), 1, "one pending turn timer: {rows:?}");
    rows.into_iter().next().unwrap()
}

/// Every pending turn timer of `task`, as [`pending_turn_timer`] gives one. None while a worker
/// holds the task's timer (fetched, its handler not yet committed), never more than one.
async fn pending_turn_timers(app: &TestApp, task: &str) -> Vec<(String, i64, chrono::DateTime<chrono::Utc>)> {
    let rows: Vec<(String, Value, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT job_type, convert_from(job, 'UTF8')::jsonb, run_at FROM apalis.jobs
          WHERE idempotency_key IN ('park:' || $1, 'claim:' || $1) AND status = 'Pending'",
    )
    .bind(task)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert!(rows.len() <= 1, "at most one pending turn timer: {rows:?}");
    rows.into_iter().map(|(queue, payload, run_at)| (queue, payload["generation"].as_i64().unwrap(), run_at)).collect()
}

/// Turns that come faster than the claim window keep the task's turn timer where it is instead
/// of moving it on every pickup and respond; the kept timer fires early, finds a newer claim and
/// re-arms for that claim's own expiry, which then expires it: never earlier, never missed.
#[tokio::test]
async fn a_kept_turn_timer_fires_early_and_re_arms_for_the_real_deadline() {
    let app = with_claim_and_park_timeouts(Duration::from_secs(3), Duration::from_secs(60)).await;
    let agent = app.register_agent("user-tomas").await;
    // The agent is live (it polled), so its turns are parked with the long window.
    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::NO_CONTENT);
    // A partial fit, so that Maya's system negotiator answers a counter with a counter.
    let id = app.start(&fixtures::partial_fit()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let (queue, _, parked_timer) = pending_turn_timer(&app, &id).await;
    assert_eq!(queue, "parley.park_timeout");

    // First claim: the park timer (due in 60 s) is later than the claim's expiry, so it moves.
    let first = app.pickup(&agent, None).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let (queue, generation, claim_timer) = pending_turn_timer(&app, &id).await;
    assert_eq!((queue.as_str(), generation), ("parley.claim_timeout", 1));
    assert!(claim_timer < parked_timer);

    // Respond: the next turn is parked (due in 60 s); the claim timer is due sooner, so it stays.
    let token = first.body["claimToken"].as_str().unwrap();
    let r = app.respond(&agent, &id, &answer("counter", Some(token))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "waiting_for_agent", "the system countered: {}", r.text);
    assert_eq!(pending_turn_timer(&app, &id).await, ("parley.claim_timeout".to_owned(), 1, claim_timer));

    // A second claim a moment later expires after the kept timer: the kept one stays again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second = app.pickup(&agent, None).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    let claimed_at = std::time::Instant::now();
    assert_eq!(pending_turn_timer(&app, &id).await, ("parley.claim_timeout".to_owned(), 1, claim_timer));

    // The kept timer fires (its claim is long gone) and re-arms for the second claim's expiry.
    // While its handler runs, the task has no pending timer for a moment.
    let deadline = tokio::time::Instant::now() + WAIT;
    let rearmed = loop {
        let t = pending_turn_timers(&app, &id).await;
        if let [t] = &t[..]
            && t.1 == 2
        {
            break t.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "the kept timer never re-armed: {t:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(rearmed.0, "parley.claim_timeout");
    let expires: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT claim_expires_at FROM tasks").fetch_one(&app.pool).await.unwrap();
    assert!(rearmed.2 >= expires && rearmed.2 > claim_timer, "{rearmed:?} vs {expires}");
    let state: String = sqlx::query_scalar("SELECT state FROM tasks").fetch_one(&app.pool).await.unwrap();
    assert_eq!(state, "claimed", "the second claim did not expire early");

    // The second claim expires at its own deadline, and the turn is parked again.
    app.wait_for(&id, WAIT, |v| v["status"] == "waiting_for_agent").await;
    assert!(claimed_at.elapsed() >= Duration::from_millis(2900), "expired early: {:?}", claimed_at.elapsed());
    let (queue, _, _) = pending_turn_timer(&app, &id).await;
    assert_eq!(queue, "parley.park_timeout");
}

#[tokio::test]
async fn extends_never_hold_a_mixed_negotiations_turn_past_its_park_window() {
    let app = with_claim_and_park_timeouts(Duration::from_secs(2), Duration::from_secs(4)).await;
    let (agent, id) = app.mixed_negotiation().await;
    let token = app.claim_token(&agent).await;
    // The agent extends its claim every half second for as long as it is let.
    let extender = {
        let (client, base, agent, id) = (app.client.clone(), app.base.clone(), agent.clone(), id.clone());
        tokio::spawn(async move {
            let url = format!("{base}/api/agents/{}/negotiations/{id}/extend", agent.id);
            let mut deadlines = Vec::new();
            loop {
                let extended = client.post(&url).header("x-api-key", &agent.key).json(&json!({"claimToken": token}));
                let answer: Value = match extended.send().await {
                    Ok(r) if r.status().is_success() => r.json().await.unwrap(),
                    _ => return deadlines,
                };
                deadlines.push(answer["deadline"].as_str().unwrap().to_owned());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    // Past the park window (4 s from the turn's parking) the claim stops moving, lapses, and the
    // system negotiator takes the turn.
    let view = app.wait_for(&id, Duration::from_secs(20), |v| v["turns"].as_array().unwrap().len() >= 2).await;
    let turn = &view["turns"][1];
    assert_eq!(
        (turn["playedBy"].as_str(), turn["fallbackReason"].as_str()),
        (Some("system_fallback"), Some("park_timeout")),
        "{view:#}"
    );
    let deadlines = extender.await.unwrap();
    assert!(deadlines.len() >= 2, "{deadlines:?}");
    let (last, before) = (&deadlines[deadlines.len() - 1], &deadlines[deadlines.len() - 2]);
    assert_eq!(last, before, "the last extends no longer moved the claim: {deadlines:?}");
}
