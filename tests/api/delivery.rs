//! Polling turn delivery: pickup, respond, extend, release, long polling, races.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestApp, answer},
};

#[tokio::test]
async fn pickup_returns_the_parked_turn_with_its_full_context() {
    let app = TestApp::spawn().await;
    let (agent, id) = app.mixed_negotiation().await;
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    let b = &picked.body;
    assert_eq!(b["negotiationId"], id.as_str());
    assert_eq!(b["taskId"], id.as_str());
    assert!(b["claimToken"].as_str().unwrap().starts_with("ct_"));
    assert_eq!(b["opportunity"]["status"], "negotiating");
    assert!(b["opportunity"]["reasoning"].as_str().unwrap().contains("Evaluator"));
    let turn = &b["turn"];
    assert_eq!(turn["number"], 1);
    assert_eq!(turn["counterpartyAction"], "propose");
    assert_eq!(turn["isFinalTurn"], false);
    assert_eq!(turn["maxTurns"], 8);
    assert!(turn["deadline"].is_string());
    assert_eq!(turn["history"].as_array().unwrap().len(), 1);
    assert_eq!(turn["history"][0]["side"], "source");
    assert_eq!(turn["history"][0]["agent"], "source");
    assert!(!turn["history"][0]["message"].as_str().unwrap().is_empty());
    assert!(turn["history"][0].get("reasoning").is_none(), "the other side's reasoning stays private");
    let ctx = &b["context"];
    assert_eq!(ctx["ownUser"]["id"], "user-tomas");
    assert_eq!(ctx["ownUser"]["intents"][0]["text"], fixtures::engineer()["intents"][0]["text"]);
    assert_eq!(ctx["otherUser"]["id"], "user-maya");
    // The platform shares intents unless it marks them private.
    assert_eq!(ctx["otherUser"]["intents"][0]["text"], fixtures::founder()["intents"][0]["text"]);
    assert_eq!(ctx["isDiscoverer"], false);
    assert_eq!(ctx["discoveryQuery"], "senior rust backend engineer for payments");
    assert_eq!(ctx["indexContext"]["index"], "founders-and-engineers");
    assert_eq!(ctx["seedAssessment"]["score"], 88.0);

    // A retried pickup (lost response) gets the same claim back, unchanged.
    let again = app.pickup(&agent, None).await;
    assert_eq!(again.body["claimToken"], b["claimToken"]);
    assert_eq!(again.body["turn"]["deadline"], turn["deadline"]);
    let (state, _, _) = app.snapshot(&id).await;
    assert_eq!(state, "claimed");
}

#[tokio::test]
async fn a_mixed_negotiation_ends_pending_when_the_personal_agent_accepts() {
    let app = TestApp::spawn().await;
    let (agent, id) = app.mixed_negotiation().await;
    let token = app.pickup(&agent, None).await.body["claimToken"].as_str().unwrap().to_owned();
    let done = app.respond(&agent, &id, &answer("accept", Some(&token))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["success"], true);
    assert_eq!(done.body["turnNumber"], 1);
    assert_eq!(done.body["status"], "completed");
    assert_eq!(done.body["opportunity"]["status"], "pending");
    assert_eq!(done.body["outcome"]["hasOpportunity"], true);
    let roles = done.body["outcome"]["agreedRoles"].as_array().unwrap();
    assert_eq!(roles[0], json!({ "userId": "user-tomas", "role": "agent" }));
    assert_eq!(roles[1]["userId"], "user-maya");

    // The same token and body again: the same answer, nothing new stored.
    let retry = app.respond(&agent, &id, &answer("accept", Some(&token))).await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.body, done.body);
    assert_eq!(app.snapshot(&id).await, ("completed".into(), 2, 2));
    // A different body under a used token: the turn was answered already, and the answer says
    // so; after completion without a token, 409.
    let changed = app.respond(&agent, &id, &answer("reject", Some(&token))).await;
    changed.assert_error(StatusCode::CONFLICT, "turn_already_answered");
    assert!(changed.body["error"].as_str().unwrap().contains("already answered"), "{}", changed.text);
    app.respond(&agent, &id, &answer("reject", None)).await.assert_error(StatusCode::CONFLICT, "already_completed");
    assert_eq!(app.count("artifacts").await, 1);
}

#[tokio::test]
async fn a_counter_lets_the_system_answer_and_parks_the_next_turn_until_the_cap_stalls_it() {
    let app = TestApp::spawn_with(|c| c.turn_caps.mixed = 4).await;
    let (agent, id) = app.mixed_negotiation().await;
    // Turn 1: counter (an Index-style client: no claim token).
    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::OK);
    let r = app.respond(&agent, &id, &answer("counter", None)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["turnNumber"], 1);
    // The system spoke turn 2 (not an end: it countered or accepted/rejected).
    let view = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await;
    let turns = view.body["turns"].as_array().unwrap().clone();
    if r.body["status"] == "completed" {
        // The system negotiator ended it at turn 2: that is a legitimate path too.
        assert_eq!(turns.len(), 3);
        return;
    }
    assert_eq!(r.body["status"], "waiting_for_agent");
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[2]["side"], "source");
    // Turn 3 is the last the cap allows; the agent counters anyway: stalled, turn_cap.
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.body["turn"]["number"], 3);
    assert_eq!(picked.body["turn"]["isFinalTurn"], true);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let r = app.respond(&agent, &id, &answer("question", Some(&token))).await;
    assert_eq!(r.body["status"], "completed", "{}", r.text);
    assert_eq!(r.body["opportunity"]["status"], "stalled");
    assert_eq!(r.body["outcome"]["reason"], "turn_cap");
    assert_eq!(r.body["outcome"]["turnCount"], 4);
}

#[tokio::test]
async fn personal_agents_on_both_sides_negotiate_without_a_cap() {
    let app = TestApp::spawn().await;
    let [maya, tomas] = app.register_agents(["user-maya", "user-tomas"]).await;
    let started = app.start(&fixtures::good_match()).await;
    let n = &started["negotiation"];
    assert_eq!(n["maxTurns"], 0);
    assert_eq!(n["awaitingUserId"], "user-maya");
    let id = n["id"].as_str().unwrap().to_owned();

    // Not your seat: Tomas has nothing to pick up yet.
    assert_eq!(app.pickup(&tomas, None).await.status, StatusCode::NO_CONTENT);
    // Maya's agent must open with a propose.
    let picked = app.pickup(&maya, None).await;
    assert_eq!(picked.body["turn"]["counterpartyAction"], "none");
    assert_eq!(picked.body["context"]["isDiscoverer"], true);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    app.respond(&maya, &id, &answer("counter", Some(&token)))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "action_not_allowed");
    assert_eq!(app.snapshot(&id).await, ("claimed".into(), 0, 0));
    let r = app.respond(&maya, &id, &answer("propose", Some(&token))).await;
    assert_eq!(r.body["status"], "waiting_for_agent");

    // Twelve more turns alternate between the agents: no cap applies.
    let mut speaker = [&tomas, &maya].into_iter().cycle();
    for turn in 1..=12 {
        let agent = speaker.next().unwrap();
        let picked = app.pickup(agent, None).await;
        assert_eq!(picked.body["turn"]["number"], turn);
        let token = picked.body["claimToken"].as_str().unwrap().to_owned();
        app.respond(agent, &id, &answer("propose", Some(&token)))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "action_not_allowed");
        let r = app.respond(agent, &id, &answer("question", Some(&token))).await;
        assert_eq!(r.body["status"], "waiting_for_agent", "{}", r.text);
    }
    let picked = app.pickup(&tomas, None).await;
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let r = app.respond(&tomas, &id, &answer("reject", Some(&token))).await;
    assert_eq!(r.body["opportunity"]["status"], "rejected");
    assert_eq!(r.body["outcome"]["turnCount"], 14);
}

#[tokio::test]
async fn refused_responds_leave_the_negotiation_as_it_was() {
    let app = TestApp::spawn().await;
    let (agent, id) = app.mixed_negotiation().await;
    // Respond without a claim.
    app.respond(&agent, &id, &answer("accept", None)).await.assert_error(StatusCode::CONFLICT, "not_claimed");
    let token = app.pickup(&agent, None).await.body["claimToken"].as_str().unwrap().to_owned();
    let before = app.snapshot(&id).await;

    let mut cases: Vec<(Value, StatusCode, &str)> = vec![
        (answer("propose", Some(&token)), StatusCode::BAD_REQUEST, "action_not_allowed"),
        (answer("accept", Some("ct_not-the-token")), StatusCode::CONFLICT, "unknown_claim_token"),
        (answer("shrug", Some(&token)), StatusCode::BAD_REQUEST, "invalid_body"),
        (json!({ "action": "accept" }), StatusCode::BAD_REQUEST, "invalid_body"),
        (
            json!({ "action": "accept", "assessment": { "suggestedRoles": { "ownUser": "peer", "otherUser": "peer" } } }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            json!({ "action": "accept", "assessment": { "reasoning": "ok", "suggestedRoles": { "ownUser": "boss", "otherUser": "peer" } } }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            json!({ "action": "accept", "assessment": { "reasoning": "x".repeat(10_001), "suggestedRoles": { "ownUser": "peer", "otherUser": "peer" } } }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            json!({ "action": "accept", "message": "m".repeat(10_001), "assessment": { "reasoning": "ok", "suggestedRoles": { "ownUser": "peer", "otherUser": "peer" } } }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (json!([1]), StatusCode::BAD_REQUEST, "invalid_body"),
    ];
    // The token carries its claim's generation under the service's HMAC: the genuine tag with
    // another generation is no claim at all.
    {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut raw = b64.decode(token.strip_prefix("ct_").unwrap()).unwrap();
        assert_eq!(raw.len(), 40, "generation (8 bytes) + HMAC-SHA256 tag");
        raw[7] ^= 0x02;
        cases.push((
            answer("accept", Some(&format!("ct_{}", b64.encode(raw)))),
            StatusCode::CONFLICT,
            "unknown_claim_token",
        ));
    }
    for (body, status, code) in cases.drain(..) {
        app.respond(&agent, &id, &body).await.assert_error(status, code);
        assert_eq!(app.snapshot(&id).await, before, "after {body}");
    }
    app.respond(&agent, "0192f4a0-0000-7000-8000-000000000009", &answer("accept", Some(&token)))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    let raw = app
        .client
        .post(format!("{}/api/agents/{}/negotiations/{id}/respond", app.base, agent.id))
        .header("x-api-key", &agent.key)
        .body("{broken")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    // A token is bound to its negotiation: this one was never issued for another negotiation.
    let other = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let foreign = app.respond(&agent, &other, &answer("accept", Some(&token))).await;
    foreign.assert_error(StatusCode::CONFLICT, "unknown_claim_token");
    assert!(foreign.body["error"].as_str().unwrap().contains("never issued"), "{}", foreign.text);
    // Another user's agent cannot touch it.
    let eve = app.register_agent("user-eve").await;
    app.respond(&eve, &id, &answer("accept", None)).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.snapshot(&id).await, before);
}

#[tokio::test]
async fn a_second_agent_of_the_same_user_sees_the_claim_as_someone_elses() {
    let app = TestApp::spawn().await;
    let (first, id) = app.mixed_negotiation().await;
    let second = app.register_agent("user-tomas").await;
    let token = app.pickup(&first, None).await.body["claimToken"].as_str().unwrap().to_owned();
    // The turn is held: the second agent finds nothing to pick up.
    assert_eq!(app.pickup(&second, None).await.status, StatusCode::NO_CONTENT);
    app.respond(&second, &id, &answer("accept", None)).await.assert_error(StatusCode::CONFLICT, "claimed_by_other");
    app.respond(&second, &id, &answer("accept", Some(&token))).await.assert_error(StatusCode::CONFLICT, "claim_stale");

    // Release gives it back; the second agent now gets it under a new token.
    let released = app
        .agent_call(&first, Method::POST, &format!("/negotiations/{id}/release"), Some(&json!({ "claimToken": token })))
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text);
    assert_eq!(released.body["status"], "waiting_for_agent");
    let picked = app.pickup(&second, None).await;
    let new_token = picked.body["claimToken"].as_str().unwrap().to_owned();
    assert_ne!(new_token, token);
    app.respond(&first, &id, &answer("accept", Some(&token))).await.assert_error(StatusCode::CONFLICT, "claim_stale");

    // Extend pushes the deadline.
    let before = picked.body["turn"]["deadline"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let extended = app
        .agent_call(
            &second,
            Method::POST,
            &format!("/negotiations/{id}/extend"),
            Some(&json!({ "claimToken": new_token })),
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.text);
    assert!(extended.body["deadline"].as_str().unwrap() > before.as_str());
    assert_eq!(extended.body["claimToken"], new_token.as_str());
    let extend_other = app.agent_call(&first, Method::POST, &format!("/negotiations/{id}/extend"), None).await;
    extend_other.assert_error(StatusCode::CONFLICT, "claimed_by_other");
    assert_eq!(app.respond(&second, &id, &answer("accept", Some(&new_token))).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_waiting_pickup_wakes_when_a_turn_is_parked() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let waiter = {
        let app_base = app.base.clone();
        let client = app.client.clone();
        let agent = agent.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let resp = client
                .post(format!("{app_base}/api/agents/{}/negotiations/pickup?wait=5", agent.id))
                .header("x-api-key", &agent.key)
                .send()
                .await
                .unwrap();
            (resp.status(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let parked_at = Instant::now();
    app.start(&fixtures::good_match()).await;
    let (status, _) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(parked_at.elapsed() < Duration::from_secs(3), "woken late: {:?}", parked_at.elapsed());

    // Nothing parked: the wait ends with 204 after its time.
    let started = Instant::now();
    let other = app.register_agent("user-nobody").await;
    let empty = app.pickup(&other, Some(1)).await;
    assert_eq!(empty.status, StatusCode::NO_CONTENT);
    assert!(started.elapsed() >= Duration::from_millis(950));
    // Bad waits are refused.
    for bad in ["0", "-1", "soon"] {
        app.agent_call(&other, Method::POST, &format!("/negotiations/pickup?wait={bad}"), None)
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
}

#[tokio::test]
async fn concurrent_pickups_never_claim_the_same_turn() {
    let app = TestApp::spawn().await;
    const TURNS: usize = 40;
    let agents: Vec<_> = futures::future::join_all((0..16).map(|_| app.register_agent("user-busy"))).await;
    for i in 0..TURNS {
        let mut body = fixtures::good_match();
        body["sourceUser"]["id"] = json!(format!("user-src-{i}"));
        body["candidateUser"]["id"] = json!("user-busy");
        app.start(&body).await;
    }
    // 16 agents of one user poll at once, each claiming and answering until nothing is left.
    let claimed = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::<String>::new()));
    let pollers = (0..16).map(|p| {
        let agent = agents[p % agents.len()].clone();
        let claimed = claimed.clone();
        let app = &app;
        async move {
            loop {
                let picked = app.pickup(&agent, None).await;
                if picked.status == StatusCode::NO_CONTENT {
                    break;
                }
                assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
                let id = picked.body["negotiationId"].as_str().unwrap().to_owned();
                let token = picked.body["claimToken"].as_str().unwrap().to_owned();
                let r = app.respond(&agent, &id, &answer("reject", Some(&token))).await;
                if r.status == StatusCode::OK {
                    claimed.lock().await.push(id);
                } else {
                    panic!("a claimed turn could not be answered: {}", r.text);
                }
            }
        }
    });
    futures::future::join_all(pollers).await;
    let claimed = claimed.lock().await;
    let mut unique = claimed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), TURNS, "every turn answered");
    assert_eq!(claimed.len(), TURNS, "no turn answered twice");
    let (generations, messages): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tasks WHERE claim_generation = 1 AND state = 'completed'),
                (SELECT count(*) FROM messages WHERE turn_number = 1)",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(generations, TURNS as i64, "each turn was claimed exactly once");
    assert_eq!(messages, TURNS as i64, "each turn stored once");
}

#[tokio::test]
async fn an_agents_listing_says_which_negotiations_it_answered_in() {
    let app = TestApp::spawn().await;
    let (first, answered) = app.mixed_negotiation().await;
    let second = app.register_agent("user-tomas").await;
    let untouched = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    // The second agent takes the oldest parked turn and answers it.
    let picked = app.pickup(&second, None).await;
    assert_eq!(picked.body["negotiationId"], answered.as_str());
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    assert_eq!(app.respond(&second, &answered, &answer("accept", Some(&token))).await.status, StatusCode::OK);

    let listed = |agent: crate::helpers::TestAgent, query: &'static str| {
        let app = &app;
        async move {
            let page = app.agent_call(&agent, Method::GET, &format!("/negotiations?status=all{query}"), None).await;
            assert_eq!(page.status, StatusCode::OK, "{}", page.text);
            page.body["negotiations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| (n["negotiationId"].as_str().unwrap().to_owned(), n["answeredTurns"].as_i64().unwrap()))
                .collect::<Vec<_>>()
        }
    };
    // Both agents speak for the same user, so both list both negotiations, newest first, each
    // with the turns that agent answered.
    assert_eq!(listed(second.clone(), "").await, [(untouched.clone(), 0), (answered.clone(), 1)]);
    assert_eq!(listed(first.clone(), "").await, [(untouched.clone(), 0), (answered.clone(), 0)]);
    // `answered=true` keeps the ones it answered a turn in.
    assert_eq!(listed(second.clone(), "&answered=true").await, [(answered.clone(), 1)]);
    assert_eq!(listed(first.clone(), "&answered=true").await, []);
    assert_eq!(listed(first.clone(), "&answered=false").await.len(), 2);
    app.agent_call(&first, Method::GET, "/negotiations?answered=maybe", None)
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
}

#[tokio::test]
async fn roles_are_agreed_only_when_both_sides_suggestions_mirror_each_other() {
    let app = TestApp::spawn().await;
    let maya = app.user_token("user-maya");
    for (own, other, agreed) in [("agent", "patient", true), ("peer", "peer", false), ("patient", "agent", false)] {
        let (agent, id) = app.mixed_negotiation().await;
        let view = app.get(&format!("/api/negotiations/{id}"), &maya).await.body;
        // Maya's system negotiator proposed Tomas as the one who helps (agent) and Maya as patient.
        assert_eq!(view["turns"][0]["suggestedRoles"], json!({"ownUser": "patient", "otherUser": "agent"}), "{view}");
        let token = app.pickup(&agent, None).await.body["claimToken"].as_str().unwrap().to_owned();
        let mut body = answer("accept", Some(&token));
        body["assessment"]["suggestedRoles"] = json!({"ownUser": own, "otherUser": other});
        let done = app.respond(&agent, &id, &body).await;
        assert_eq!(done.status, StatusCode::OK, "{}", done.text);
        let outcome = &done.body["outcome"];
        let opportunity = app
            .get(&format!("/api/opportunities/{}", done.body["opportunity"]["id"].as_str().unwrap()), &maya)
            .await
            .body;
        let expected = if agreed {
            json!([{"userId": "user-tomas", "role": "agent"}, {"userId": "user-maya", "role": "patient"}])
        } else {
            json!([])
        };
        assert_eq!(outcome["agreedRoles"], expected, "Tomas said {own}/{other}: {outcome}");
        assert_eq!(opportunity["agreedRoles"], expected, "{opportunity}");
        // Each side's view, agreed or not, the accepting side first, with who suggested it.
        let views = json!([
            {"userId": "user-tomas", "suggestedRoles": {"ownUser": own, "otherUser": other}, "playedBy": "agent"},
            {"userId": "user-maya", "suggestedRoles": {"ownUser": "patient", "otherUser": "agent"}, "playedBy": "system"},
        ]);
        assert_eq!(outcome["roleViews"], views, "{outcome}");
        assert_eq!(opportunity["roleViews"], views, "{opportunity}");
        assert_eq!(opportunity["endReason"], Value::Null);
    }
}
