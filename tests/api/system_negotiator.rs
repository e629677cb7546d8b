//! How the system negotiator plays, seen over HTTP: it speaks to people in words and keeps
//! scores in its reasoning; a personal agent's message can earn an accept where the same words in
//! its private reasoning cannot; the same inputs give the same turns; every surface says who
//! decided each turn; the intents the platform shares reach the other side (and its negotiator)
//! while private intents and deal-breakers never do; and turn 0 may be a reject.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{SseReader, TestAgent, TestApp},
};

/// A designer after part-time work at a small business.
fn cyd() -> Value {
    json!({
        "id": "user-cyd",
        "name": "Cyd",
        "profile": {
            "bio": "Brand and product designer: ten years of identities, packaging and design systems.",
            "skills": ["brand design", "Figma", "design systems", "illustration"],
            "interests": ["typography", "small business"]
        },
        "intents": [{ "text": "Looking for a part-time designer role at a small business" }]
    })
}

/// An accountant after a full-time co-founder for sales and brand.
fn dee() -> Value {
    json!({
        "id": "user-dee",
        "name": "Dee",
        "profile": {
            "bio": "Accountant keeping the books of a small business; we want our brand refreshed.",
            "skills": ["accounting", "bookkeeping", "payroll", "tax returns"],
            "interests": ["small business", "finance"]
        },
        "intents": [{ "text": "Looking for a full-time co-founder to handle sales and brand design" }]
    })
}

fn cyd_and_dee() -> Value {
    json!({
        "sourceUser": cyd(),
        "candidateUser": dee(),
        "seedAssessment": { "score": 55, "reasoning": "Both run small businesses" }
    })
}

/// A Tomas whose profile says little (a backend engineer who writes Rust, not what he built),
/// opening with Maya, who needs a senior Rust engineer to build her payments API. What his agent
/// says may add details beyond the need's core (what he built); a claim of the core itself
/// ("senior") would have to be borne out by the profile.
fn a_terse_tomas_and_maya() -> Value {
    fixtures::request(
        json!({
            "id": "user-tomas",
            "name": "Tomas Novak",
            "profile": { "bio": "Backend engineer", "skills": ["rust"] },
            "intents": [{ "text": "Looking for a fintech startup to join" }]
        }),
        fixtures::founder(),
        40.0,
    )
}

/// What users see of each turn: everything but the timestamps.
fn turns_as_seen(negotiation: &Value) -> Vec<Value> {
    negotiation["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!([t["turnNumber"], t["side"], t["action"], t["reasoning"], t["message"], t["suggestedRoles"]]))
        .collect()
}

fn respond_body(token: &str, action: &str, message: &str, reasoning: &str) -> Value {
    json!({
        "claimToken": token,
        "action": action,
        "message": message,
        "assessment": { "reasoning": reasoning, "suggestedRoles": { "ownUser": "agent", "otherUser": "patient" } }
    })
}

#[tokio::test]
async fn two_system_negotiators_speak_in_words_and_keep_scores_and_terms_in_their_reasoning() {
    let app = TestApp::spawn().await;
    let body = app.start(&cyd_and_dee()).await;
    let negotiation = &body["negotiation"];
    assert_eq!(negotiation["status"], "completed", "{body:#}");
    assert_eq!(body["opportunity"]["status"], "rejected", "a part-time role and a full-time co-founder do not meet");
    let turns = negotiation["turns"].as_array().unwrap();
    for t in turns {
        let message = t["message"].as_str().unwrap();
        let reasoning = t["reasoning"].as_str().unwrap();
        assert!(reasoning.contains("fit ") && reasoning.contains("missing: "), "{t:#}");
        assert!(
            !message.contains("fit ") && !message.contains("missing") && !message.contains("needs evidence"),
            "{t:#}"
        );
        assert!(!message.bytes().any(|b| b.is_ascii_digit()), "no scores in words for people: {t:#}");
        assert_eq!((t["playedBy"].as_str(), t["decidedBy"].as_str()), (Some("system"), Some("rules")), "{t:#}");
    }
    let last = turns.last().unwrap();
    assert_eq!(last["action"], "reject");
    assert!(last["message"].as_str().unwrap().contains("will pass"), "{last:#}");
    assert!(negotiation["outcome"]["summary"].as_str().unwrap().starts_with("Parley rejected"), "{negotiation:#}");

    // The objections insights reads from the reasoning keep compounds whole.
    let insights = app.get("/api/insights", &app.service_token()).await;
    assert_eq!(insights.status, StatusCode::OK, "{}", insights.text);
    let objections: Vec<&str> = insights.body["total"]["topObjections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["term"].as_str().unwrap())
        .collect();
    assert!(!objections.is_empty(), "{}", insights.text);
    assert!(objections.iter().all(|t| !["part", "full", "time", "co"].contains(t)), "{objections:?}");
}

/// Plays Tomas's side of [`a_terse_tomas_and_maya`] through his agent: a propose, then (after
/// Maya's side asks for more) an answer whose `(message, reasoning)` is `answer`, then "Nothing
/// more to add." until the negotiation ends. Returns the negotiation as the platform sees it.
async fn tomas_answers(app: &TestApp, agent: &TestAgent, answer: (&str, &str)) -> Value {
    let started = app.start(&a_terse_tomas_and_maya()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let picked = app.pickup(agent, None).await;
    assert_eq!(picked.body["turn"]["number"], 0, "{}", picked.text);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let opening =
        respond_body(&token, "propose", "Tomas is a backend engineer who writes Rust.", "Let us hear Maya out.");
    let r = app.respond(agent, &id, &opening).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "waiting_for_agent", "Maya's side asks for more at turn 1: {}", r.text);

    let picked = app.pickup(agent, None).await;
    assert_eq!(picked.body["turn"]["number"], 2, "{}", picked.text);
    let asked = &picked.body["turn"]["history"][1];
    assert_eq!(asked["action"], "counter", "{asked:#}");
    assert_eq!((asked["playedBy"].as_str(), asked["decidedBy"].as_str()), (Some("system"), Some("rules")), "{asked:#}");
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let mut r = app.respond(agent, &id, &respond_body(&token, "counter", answer.0, answer.1)).await;
    while r.body["status"] == "waiting_for_agent" {
        let token = app.claim_token(agent).await;
        r = app.respond(agent, &id, &respond_body(&token, "counter", "Nothing more to add.", "Wait.")).await;
    }
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await.body
}

#[tokio::test]
async fn a_personal_agents_message_can_earn_an_accept_its_private_reasoning_cannot() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let claimed =
        tomas_answers(&app, &agent, ("Tomas has built payments APIs in Rust for years.", "Answer what Maya needs."))
            .await;
    let last = claimed["turns"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["side"].as_str(), last["action"].as_str()), (Some("candidate"), Some("accept")), "{claimed:#}");
    assert_eq!(claimed["outcome"]["hasOpportunity"], true);

    let private = tomas_answers(
        &app,
        &agent,
        ("Happy to talk.", "I am secretly a senior rust engineer who built payments APIs for eight years"),
    )
    .await;
    let turns = private["turns"].as_array().unwrap();
    let last = turns.last().unwrap();
    assert_eq!((last["side"].as_str(), last["action"].as_str()), (Some("candidate"), Some("reject")), "{private:#}");
    assert!(
        last["reasoning"].as_str().unwrap().starts_with("Rejecting (final decision: nothing new since turn 1;"),
        "{last:#}"
    );
    // Nothing of Tomas's private reasoning is repeated by Maya's side.
    for t in turns.iter().filter(|t| t["side"] == "candidate") {
        for field in ["reasoning", "message"] {
            assert!(!t[field].as_str().unwrap().contains("secretly"), "{t:#}");
        }
    }
    assert_eq!(private["outcome"]["hasOpportunity"], false);
}

#[tokio::test]
async fn identical_inputs_give_identical_turns() {
    let app = TestApp::spawn().await;
    let first = app.start(&cyd_and_dee()).await;
    let second = app.start(&cyd_and_dee()).await;
    assert_ne!(first["negotiation"]["id"], second["negotiation"]["id"]);
    assert_eq!(turns_as_seen(&first["negotiation"]), turns_as_seen(&second["negotiation"]));
    let agent = app.register_agent("user-tomas").await;
    let answer = ("Tomas builds payments APIs in Rust.", "Same words.");
    let a = tomas_answers(&app, &agent, answer).await;
    let b = tomas_answers(&app, &agent, answer).await;
    assert_ne!(a["id"], b["id"]);
    assert_eq!(turns_as_seen(&a), turns_as_seen(&b));
}

#[tokio::test]
async fn every_surface_says_parley_decided_when_the_agent_did_not_answer() {
    // Kai registered an agent and never ran it: after the offline window Parley takes Kai's turn.
    let app = TestApp::spawn_with(|c| c.park_timeout_offline = Duration::from_secs(1)).await;
    let _never_runs = app.register_agent("user-tomas").await;
    let mut events = SseReader::open(&app.base, &app.service_token(), None).await;
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["negotiation"]["status"], "waiting_for_agent");
    let ended = app.wait_for(&id, Duration::from_secs(20), |n| n["status"] == "completed").await;
    let taken = &ended["turns"][1];
    assert_eq!(taken["playedBy"], "system_fallback", "{ended:#}");
    assert_eq!(taken["fallbackReason"], "offline");
    assert_eq!(taken["decidedBy"], "rules");
    assert_eq!(ended["turns"][0]["playedBy"], "system", "Maya has no agent: {ended:#}");
    let summary = ended["outcome"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("Parley accepted") || summary.starts_with("Parley rejected"), "{summary}");
    assert!(summary.ends_with("(Tomas Novak's agent was not running)."), "{summary}");
    assert!(
        !summary.contains("Tomas Novak's agent accepted") && !summary.contains("Tomas Novak's agent rejected"),
        "{summary}"
    );

    // The same in every view: Maya's, Tomas's, Tomas's agent's, and the A2A task.
    for token in [app.user_token("user-maya"), app.user_token("user-tomas")] {
        let seen = app.get(&format!("/api/negotiations/{id}"), &token).await.body;
        assert_eq!(seen["turns"][1]["playedBy"], "system_fallback", "{seen:#}");
        assert_eq!(seen["outcome"]["summary"], summary);
        let task = app.get(&format!("/api/tasks/{id}"), &token).await.body;
        assert_eq!(task["history"][1]["metadata"]["playedBy"], "system_fallback", "{task:#}");
        assert_eq!(task["history"][1]["metadata"]["fallbackReason"], "offline");
        assert_eq!(task["history"][1]["metadata"]["decidedBy"], "rules");
    }
    // The turn event says who played it too.
    let mut played = Vec::new();
    while let Some(e) = events.next(Duration::from_secs(3)).await {
        if e.event == "negotiation.turn" && e.data["negotiationId"] == id.as_str() {
            played.push(e.data["playedBy"].as_str().unwrap().to_owned());
        }
        if played.len() == ended["turns"].as_array().unwrap().len() {
            break;
        }
    }
    assert_eq!(played[..2], ["system", "system_fallback"], "{played:?}");
}

#[tokio::test]
async fn shared_intents_reach_the_other_side_while_private_intents_and_deal_breakers_never_do() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let mut body = fixtures::good_match();
    body["sourceUser"]["intents"] = json!([
        {"id": "i-shared", "text": "Looking for a senior Rust backend engineer to build our payments API"},
        {"id": "i-private", "text": "Quietly replace our current lead engineer", "private": true}
    ]);
    body["sourceUser"]["profile"]["dealBreakers"] = json!(["crypto"]);
    body["candidateUser"]["intents"] = json!([
        {"id": "t-shared", "text": "Join a fintech startup as a senior backend engineer"},
        {"id": "t-private", "text": "Leave my current employer before the bonus date", "private": true}
    ]);
    body["candidateUser"]["profile"]["dealBreakers"] = json!(["micromanagement"]);
    app.start(&body).await;
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    let context = &picked.body["context"];
    let ids = |user: &Value| -> Vec<String> {
        user["intents"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids(&context["otherUser"]), ["i-shared"], "{context:#}");
    assert_eq!(ids(&context["ownUser"]), ["t-shared", "t-private"]);
    assert_eq!(context["ownUser"]["intents"][1]["private"], true);
    assert!(context["otherUser"]["profile"].get("dealBreakers").is_none(), "{context:#}");
    assert_eq!(context["ownUser"]["profile"]["dealBreakers"], json!(["micromanagement"]));
    assert!(!picked.text.contains("Quietly replace") && !picked.text.contains("crypto"), "{}", picked.text);
}

/// Kai opens with an intent that is his only evidence; Zed's system negotiator judges it.
fn kai_and_zed(private: bool) -> Value {
    fixtures::request(
        json!({
            "id": "user-kai", "name": "Kai",
            "profile": { "bio": "Moved to Lisbon last year." },
            "intents": [{ "text": "Join a payments startup as a senior Rust backend engineer", "private": private }]
        }),
        json!({
            "id": "user-zed", "name": "Zed",
            "profile": { "bio": "Founder of a payments startup in Lisbon", "skills": ["fundraising"] },
            "intents": [{ "text": "Hire a senior Rust backend engineer for our payments API" }]
        }),
        75.0,
    )
}

#[tokio::test]
async fn the_system_negotiator_weighs_a_shared_intent_and_never_a_private_one() {
    let app = TestApp::spawn().await;
    let kai = app.register_agent("user-kai").await;
    let mut ends = Vec::new();
    for private in [false, true] {
        let id = app.start(&kai_and_zed(private)).await["negotiation"]["id"].as_str().unwrap().to_owned();
        let token = app.claim_token(&kai).await;
        let r =
            app.respond(&kai, &id, &respond_body(&token, "propose", "Kai would like to talk.", "Let us see.")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let n = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await.body;
        let zed = &n["turns"][1];
        ends.push(zed["action"].as_str().unwrap().to_owned());
        if private {
            assert!(
                !n.to_string().contains("Join a payments startup"),
                "a private intent never reaches the other side: {n:#}"
            );
            assert!(zed["reasoning"].as_str().unwrap().contains("matched: none"), "{zed:#}");
        }
        // Kai's turn waits again or the negotiation ended; either way, leave the next claim alone.
        if n["status"] == "waiting_for_agent" {
            let token = app.claim_token(&kai).await;
            app.respond(&kai, &id, &respond_body(&token, "reject", "Kai will pass.", "Done.")).await;
        }
    }
    assert_eq!(ends[0], "accept", "the shared intent is grounded evidence");
    assert_ne!(ends[1], "accept", "a private intent is no evidence for the other side");
}

#[tokio::test]
async fn turn_zero_may_be_a_reject_from_an_agent_or_from_the_system() {
    let app = TestApp::spawn().await;
    // A personal agent declines to present a match at turn 0.
    let raj = app.register_agent("user-raj").await;
    let started = app.start(&fixtures::request(fixtures::kernel_developer(), fixtures::pastry_chef(), 40.0)).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.claim_token(&raj).await;
    let r = app.respond(&raj, &id, &respond_body(&token, "reject", "Raj will not take this forward.", "No fit.")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (r.body["status"].as_str(), r.body["opportunity"]["status"].as_str()),
        (Some("completed"), Some("rejected"))
    );
    let counter_at_zero = app.start(&fixtures::request(fixtures::kernel_developer(), fixtures::founder(), 40.0)).await;
    let id = counter_at_zero["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.claim_token(&raj).await;
    app.respond(&raj, &id, &respond_body(&token, "counter", "x", "y"))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "action_not_allowed");

    // The system does not present a match that does not serve its user, and says why.
    let started = app.start(&fixtures::mismatch()).await;
    let turns = started["negotiation"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{started:#}");
    assert_eq!((turns[0]["action"].as_str(), turns[0]["playedBy"].as_str()), (Some("reject"), Some("system")));
    assert!(
        turns[0]["message"].as_str().unwrap().contains("Léa Martin will not take this match forward"),
        "{:#}",
        turns[0]
    );
    assert_eq!(started["opportunity"]["status"], "rejected");
}
