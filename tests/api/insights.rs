//! `GET /api/insights`: hand-computed figures for scripted negotiations and decisions, each
//! user's view limited to their own data and their own side's reasoning (the other side's final
//! reject included), and bad ranges.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp, answer},
};

/// Who takes a scripted turn.
#[derive(Clone, Copy)]
enum By {
    Maya,
    Tomas,
}

/// Plays one personal-vs-personal negotiation between Maya (source) and Tomas (candidate) turn
/// by turn; returns the negotiation view once it ended.
async fn play(app: &TestApp, maya: &TestAgent, tomas: &TestAgent, script: &[(By, &str, &str)]) -> Value {
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    for (by, action, reasoning) in script {
        let agent = match by {
            By::Maya => maya,
            By::Tomas => tomas,
        };
        let picked = app.pickup(agent, Some(5)).await;
        assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
        assert_eq!(picked.body["negotiationId"], id.as_str());
        let mut body = answer(action, picked.body["claimToken"].as_str());
        body["assessment"]["reasoning"] = json!(reasoning);
        let done = app.respond(agent, &id, &body).await;
        assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    }
    app.wait_for(&id, Duration::from_secs(10), |v| v["status"] == "completed").await
}

fn opportunity_of(view: &Value) -> String {
    view["opportunityId"].as_str().unwrap().to_owned()
}

async fn decide(app: &TestApp, user: &str, opportunity: &str, decision: &str) {
    let answer = app
        .post(
            &format!("/api/opportunities/{opportunity}/decision"),
            &app.user_token(user),
            &json!({ "decision": decision }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
}

fn terms(figures: &Value) -> Vec<(String, i64)> {
    figures["topObjections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["term"].as_str().unwrap().to_owned(), o["count"].as_i64().unwrap()))
        .collect()
}

fn owned(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

#[tokio::test]
async fn insights_count_scripted_negotiations_and_decisions_and_show_each_user_only_their_own() {
    let app = TestApp::spawn_with(|c| {
        c.turn_caps.personal = 3;
        c.pending_ttl = Duration::from_secs(4);
    })
    .await;
    let [maya, tomas] = app.register_agents(["user-maya", "user-tomas"]).await;
    use By::{Maya, Tomas};
    let propose = (Maya, "propose", "Proposing Tomas; missing: proposeonly");

    // Three accepted (2, 2 and 3 turns), two rejected (2 and 3), one stalled by the cap of 3.
    let n1 = play(&app, &maya, &tomas, &[propose, (Tomas, "accept", "Fine; missing: acceptonly")]).await;
    decide(&app, "user-maya", &opportunity_of(&n1), "accept").await;
    decide(&app, "user-tomas", &opportunity_of(&n1), "accept").await;
    let n2 = play(&app, &maya, &tomas, &[propose, (Tomas, "accept", "Fine")]).await;
    decide(&app, "user-maya", &opportunity_of(&n2), "decline").await;
    let n3 = play(
        &app,
        &maya,
        &tomas,
        &[propose, (Tomas, "counter", "Countering: missing: senior, rust"), (Maya, "accept", "Accepting")],
    )
    .await;
    play(&app, &maya, &tomas, &[propose, (Tomas, "reject", "Rejecting: matched: none; missing: rust, kubernetes")])
        .await;
    play(
        &app,
        &maya,
        &tomas,
        &[propose, (Tomas, "counter", "missing: rust (+2 more)"), (Maya, "reject", "Rejecting; missing: Payments.")],
    )
    .await;
    let stalled = play(
        &app,
        &maya,
        &tomas,
        &[propose, (Tomas, "counter", "missing: rust, senior"), (Maya, "counter", "fit 0.4; missing: payments")],
    )
    .await;
    let o = app.get(&format!("/api/opportunities/{}", opportunity_of(&stalled)), &app.service_token()).await;
    assert_eq!(o.body["status"], "stalled", "{}", o.text);
    // Someone else's negotiation (both sides played by the system negotiator).
    let other = app.start(&fixtures::mismatch()).await;
    let other_id = other["negotiation"]["id"].as_str().unwrap().to_owned();
    app.wait_for(&other_id, Duration::from_secs(10), |v| v["status"] == "completed").await;
    // N3's opportunity is left undecided until it expires.
    let n3_opportunity = opportunity_of(&n3);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let o = app.get(&format!("/api/opportunities/{n3_opportunity}"), &app.service_token()).await;
        if o.body["status"] == "expired" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the opportunity never expired: {}", o.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Maya's view.
    let got = app.get("/api/insights", &app.user_token("user-maya")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text);
    assert_eq!(got.body["userId"], "user-maya");
    let total = &got.body["total"];
    assert_eq!(
        total["negotiations"],
        json!({ "total": 6, "accepted": 3, "rejected": 2, "stalled": { "turnCap": 1, "timeout": 0, "canceled": 0 } })
    );
    assert_eq!(total["meanTurns"], 2.5);
    assert_eq!(total["turnsToOutcome"], json!([{ "turns": 2, "negotiations": 3 }, { "turns": 3, "negotiations": 3 }]));
    assert!(total["timeToOutcomeP50Seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(total["decisions"], json!({ "accepted": 1, "declined": 1, "expired": 1 }));
    // Her agent answered six opening turns and three third turns.
    assert_eq!(total["answerLatency"]["turns"], 9);
    assert!(total["answerLatency"]["meanSeconds"].as_f64().unwrap() >= 0.0);
    assert!(total["answerLatency"]["p50Seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(total["claimExpiries"], 0);
    assert_eq!(total["fallbacks"], 0);
    // Her own counter and reject (payments, twice); never Tomas's private reasoning, not his
    // counters (senior) nor the reject that ended a negotiation (kubernetes), nor a propose or
    // an accept.
    assert_eq!(terms(total), owned(&[("payments", 2)]));
    let days = got.body["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{}", got.text);
    assert_eq!(&days[0]["figures"], total);
    for private in ["senior", "kubernetes", "rust", "proposeonly", "acceptonly", "bakery", "investors"] {
        assert!(!got.text.contains(private), "{private} leaked into {}", got.text);
    }

    // Tomas's view: the same negotiations, his side's decisions, turns and objections.
    let got = app.get("/api/insights", &app.user_token("user-tomas")).await;
    let total = &got.body["total"];
    assert_eq!(total["negotiations"]["total"], 6);
    assert_eq!(total["decisions"], json!({ "accepted": 1, "declined": 0, "expired": 1 }));
    assert_eq!(total["answerLatency"]["turns"], 6);
    assert_eq!(terms(total), owned(&[("rust", 4), ("senior", 2), ("kubernetes", 1)]));
    assert!(!got.text.contains("payments"), "Maya's reasoning leaked into {}", got.text);

    // The platform: everyone, or one user.
    let all = app.get("/api/insights", &app.service_token()).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text);
    assert_eq!(all.body["userId"], Value::Null);
    assert_eq!(all.body["total"]["negotiations"]["total"], 7);
    assert_eq!(all.body["total"]["negotiations"]["accepted"], 3);
    assert_eq!(all.body["total"]["negotiations"]["rejected"], 3);
    assert_eq!(all.body["total"]["decisions"], json!({ "accepted": 2, "declined": 1, "expired": 1 }));
    let one = app.get("/api/insights?userId=user-maya", &app.service_token()).await;
    assert_eq!(one.body["total"], got_total(&app, "user-maya").await);

    // Someone with no negotiations sees nothing, and a range before it all is empty.
    let eve = app.get("/api/insights", &app.user_token("user-eve")).await;
    assert_eq!(eve.body["total"]["negotiations"]["total"], 0);
    assert_eq!(eve.body["total"]["meanTurns"], Value::Null);
    assert_eq!(eve.body["total"]["topObjections"], json!([]));
    assert_eq!(eve.body["days"], json!([]));
    let before = app.get("/api/insights?from=2020-01-01&to=2020-12-31", &app.user_token("user-maya")).await;
    assert_eq!(before.status, StatusCode::OK, "{}", before.text);
    assert_eq!(before.body["total"]["negotiations"]["total"], 0);
    assert_eq!(before.body["from"], "2020-01-01T00:00:00Z");
    assert_eq!(before.body["to"], "2021-01-01T00:00:00Z");
}

#[tokio::test]
async fn figures_are_rounded_and_hyphenated_terms_stay_whole() {
    let app = TestApp::spawn_with(|c| c.turn_caps.personal = 3).await;
    let [maya, tomas] = app.register_agents(["user-maya", "user-tomas"]).await;
    use By::{Maya, Tomas};
    let propose = (Maya, "propose", "Proposing Tomas");
    // 3, 2 and 2 turns: a mean of 2.333...
    play(
        &app,
        &maya,
        &tomas,
        &[
            propose,
            (Tomas, "counter", "Countering: missing: part-time, rust"),
            (Maya, "reject", "missing: on-call. The hours matter"),
        ],
    )
    .await;
    play(&app, &maya, &tomas, &[propose, (Tomas, "accept", "Fine")]).await;
    play(&app, &maya, &tomas, &[propose, (Tomas, "reject", "fit 0.2; missing: part-time")]).await;

    let tomas_view = app.get("/api/insights", &app.user_token("user-tomas")).await;
    let total = &tomas_view.body["total"];
    assert_eq!(total["meanTurns"], 2.33, "{}", tomas_view.text);
    assert_eq!(terms(total), owned(&[("part-time", 2), ("rust", 1)]));
    let maya_view = app.get("/api/insights", &app.user_token("user-maya")).await;
    assert_eq!(
        terms(&maya_view.body["total"]),
        owned(&[("on-call", 1)]),
        "the sentence after the term is not part of it"
    );

    // Every mean and median, of the days and of the total, has at most two decimals.
    for view in [&tomas_view, &maya_view] {
        let mut figures = vec![view.body["total"].clone()];
        figures.extend(view.body["days"].as_array().unwrap().iter().map(|d| d["figures"].clone()));
        for f in figures {
            for value in [
                &f["meanTurns"],
                &f["timeToOutcomeP50Seconds"],
                &f["answerLatency"]["meanSeconds"],
                &f["answerLatency"]["p50Seconds"],
            ] {
                let x = value.as_f64().unwrap_or_else(|| panic!("a number: {f}"));
                assert_eq!((x * 100.0).round() / 100.0, x, "{x} is not rounded to two decimals: {f}");
            }
        }
    }
}

#[tokio::test]
async fn one_turn_adds_at_most_ten_objections_however_many_it_names() {
    let app = TestApp::spawn_with(|c| c.turn_caps.personal = 2).await;
    let [maya, tomas] = app.register_agents(["user-maya", "user-tomas"]).await;
    use By::{Maya, Tomas};
    // Tomas's agent names 1 200 terms missing (its reasoning near the 10 000 characters it may
    // have), and a term of 80 characters among the first.
    let mut named: Vec<String> = (0..1_200).map(|i| format!("t{i}")).collect();
    named[2] = "x".repeat(80);
    let reasoning = format!("missing: {}", named.join(", "));
    play(&app, &maya, &tomas, &[(Maya, "propose", "Proposing Tomas"), (Tomas, "counter", &reasoning)]).await;
    let rows = app.counted("SELECT count(*) FROM insight_counts WHERE kind = 'objection'").await;
    assert_eq!(rows, 18, "nine terms counted, for everyone and for Tomas");
    let counted = terms(&got_total(&app, "user-tomas").await);
    let expected: Vec<(String, i64)> =
        ["t0", "t1", "t3", "t4", "t5", "t6", "t7", "t8", "t9"].iter().map(|t| (t.to_string(), 1)).collect();
    let mut sorted = counted.clone();
    sorted.sort();
    assert_eq!(sorted, expected, "the first ten named, the one too long left out: {counted:?}");
}

async fn got_total(app: &TestApp, user: &str) -> Value {
    app.get("/api/insights", &app.user_token(user)).await.body["total"].clone()
}

#[tokio::test]
async fn bad_ranges_and_other_users_are_refused() {
    let app = TestApp::spawn().await;
    let maya = app.user_token("user-maya");
    for query in [
        "from=yesterday",
        "to=2026-13-01",
        "from=2026-11-05&to=2026-11-04",
        "from=2026-11-05T00:00:00Z&to=2026-11-05T00:00:00Z",
        "from=2024-01-01&to=2026-01-01",
        "from=2026-11-01T00:00:00",
        "since=2026-11-01",
    ] {
        app.get(&format!("/api/insights?{query}"), &maya).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    app.get("/api/insights?userId=user-tomas", &maya).await.assert_error(StatusCode::FORBIDDEN, "forbidden");
    let own = app.get("/api/insights?userId=user-maya&from=2026-01-01&to=2026-06-30", &maya).await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.text);
}

/// The figures of everyone and of each user, as the route answers them for the last 30 days.
async fn views(app: &TestApp) -> Vec<Value> {
    let mut out = vec![app.get("/api/insights", &app.service_token()).await.body];
    for user in ["user-maya", "user-tomas"] {
        out.push(app.get("/api/insights", &app.user_token(user)).await.body);
    }
    out
}

#[tokio::test]
async fn history_from_before_the_rollups_is_rolled_up_to_the_same_figures_and_folding_changes_nothing() {
    let app = TestApp::spawn_with(|c| c.turn_caps.personal = 3).await;
    let [maya, tomas] = app.register_agents(["user-maya", "user-tomas"]).await;
    use By::{Maya, Tomas};
    let propose = (Maya, "propose", "Proposing Tomas; missing: rust");
    let n1 = play(&app, &maya, &tomas, &[propose, (Tomas, "accept", "Fine")]).await;
    decide(&app, "user-maya", &opportunity_of(&n1), "accept").await;
    decide(&app, "user-tomas", &opportunity_of(&n1), "decline").await;
    play(
        &app,
        &maya,
        &tomas,
        &[propose, (Tomas, "counter", "missing: senior, rust"), (Maya, "reject", "missing: payments")],
    )
    .await;
    play(&app, &maya, &tomas, &[propose, (Tomas, "reject", "missing: kubernetes")]).await;
    let other = app.start(&fixtures::mismatch()).await;
    let other_id = other["negotiation"]["id"].as_str().unwrap().to_owned();
    app.wait_for(&other_id, Duration::from_secs(10), |v| v["status"] == "completed").await;
    let live = views(&app).await;
    assert_eq!(live[0]["total"]["negotiations"]["total"], 4, "{}", live[0]);
    assert_eq!(live[1]["total"]["decisions"], json!({ "accepted": 1, "declined": 0, "expired": 0 }));

    // As if all of it had happened before the rollups existed: nothing counted, every source's
    // cursor at its start, up to now.
    sqlx::query("DELETE FROM insight_days").execute(&app.pool).await.unwrap();
    sqlx::query("DELETE FROM insight_counts").execute(&app.pool).await.unwrap();
    sqlx::query("UPDATE insight_backfill SET cutoff = now(), after_at = NULL, after_id = NULL, done_at = NULL")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(views(&app).await[0]["total"]["negotiations"]["total"], 0);
    // Two negotiations per batch: the cursor carries the walk across batches.
    let mut steps = 0;
    while parley::insight_rollups::backfill_step(&app.pool, 2).await.unwrap() != parley::insight_rollups::Backfill::Done
    {
        steps += 1;
        assert!(steps < 50, "the backfill never ended");
    }
    assert!(steps >= 3, "four negotiations in batches of two and the decisions take several steps: {steps}");
    assert_eq!(views(&app).await, live, "the backfill counts what live counting counted");

    // Folding every day's shards into one row per key changes no figure.
    let tomorrow = chrono::Utc::now().date_naive() + chrono::Days::new(1);
    parley::insight_rollups::fold(&app.pool, tomorrow, 31).await.unwrap();
    let unfolded = app.counted("SELECT (SELECT count(*) FROM insight_days WHERE shard <> 0) + (SELECT count(*) FROM insight_counts WHERE shard <> 0)").await;
    assert_eq!(unfolded, 0);
    assert_eq!(views(&app).await, live, "folding keeps every figure");
}

/// The turns a negotiation view shows `user` played by `played_by` (`system`, `system_fallback`).
fn turns_played(view: &Value, user: &str, played_by: &str) -> i64 {
    view["turns"].as_array().unwrap().iter().filter(|t| t["userId"] == user && t["playedBy"] == played_by).count()
        as i64
}

/// A person without an agent reads in the insights every turn Parley decided for them, as each of
/// those turns says ("Parley for you"): `systemTurns` counts the turns played for a user with no
/// agent, `fallbacks` those Parley played standing in for the user's agent, and the two never
/// mix.
#[tokio::test]
async fn the_turns_parley_decided_for_a_person_are_counted_as_their_turns_say() {
    let app = TestApp::spawn_with(|c| c.park_timeout_offline = Duration::ZERO).await;
    let service = app.service_token();
    // Neither Maya nor Tomas has an agent: Parley plays every turn for both.
    let first = app.start(&fixtures::good_match()).await;
    let first = app.get(&format!("/api/negotiations/{}", first["negotiation"]["id"].as_str().unwrap()), &service).await;
    assert_eq!(first.body["status"], "completed", "{}", first.text);
    // Tomas registers an agent that never runs: Parley stands in for it at once (offline), while
    // Maya's turns are still Parley's for a person without an agent.
    app.register_agent("user-tomas").await;
    let second = app.start(&fixtures::good_match()).await;
    let id = second["negotiation"]["id"].as_str().unwrap().to_owned();
    let second = app.wait_for(&id, Duration::from_secs(20), |v| v["status"] == "completed").await;
    assert!(turns_played(&second, "user-tomas", "system_fallback") > 0, "{second:#}");
    for user in ["user-maya", "user-tomas"] {
        let total = got_total(&app, user).await;
        let views = [&first.body, &second];
        let system: i64 = views.iter().map(|v| turns_played(v, user, "system")).sum();
        let fallback: i64 = views.iter().map(|v| turns_played(v, user, "system_fallback")).sum();
        assert!(system > 0, "{user}: Parley played for them while they had no agent");
        assert_eq!(total["systemTurns"], system, "{user}: {total:#}");
        assert_eq!(total["fallbacks"], fallback, "{user}: {total:#}");
        assert_eq!(total["answerLatency"]["turns"], 0, "{user}: no agent of theirs answered");
    }
    assert_eq!(got_total(&app, "user-maya").await["fallbacks"], 0);
    // The platform sees both people's turns.
    let all = app.get("/api/insights", &service).await;
    let maya = got_total(&app, "user-maya").await;
    let tomas = got_total(&app, "user-tomas").await;
    assert_eq!(
        all.body["total"]["systemTurns"].as_i64().unwrap(),
        maya["systemTurns"].as_i64().unwrap() + tomas["systemTurns"].as_i64().unwrap()
    );
}
