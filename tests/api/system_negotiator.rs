//! How the system negotiator plays, seen over HTTP: stalemates end early with whole compound
//! terms and no repeated counter, an answer in a personal agent's message is accepted at the
//! next system turn while the same words in its private reasoning are not, and the same inputs
//! give the same turns.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp},
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

/// Maya's search for a Rust engineer, met by a Tomas whose profile says little.
fn maya_and_a_terse_tomas() -> Value {
    fixtures::request(
        fixtures::founder(),
        json!({
            "id": "user-tomas",
            "name": "Tomas Novak",
            "profile": { "bio": "Backend engineer", "skills": ["rust"] },
            "intents": [{ "text": "Looking for a fintech startup" }]
        }),
        60.0,
    )
}

/// The terms a message asks evidence of (`... needs evidence of: a, b.`), if it asks.
fn asked_terms(message: &str) -> Option<Vec<String>> {
    let (_, list) = message.split_once("needs evidence of: ")?;
    let list = list.lines().next()?.trim_end_matches('.');
    Some(list.split(", ").map(str::to_owned).collect())
}

/// What users see of each turn: everything but the timestamps.
fn turns_as_seen(negotiation: &Value) -> Vec<Value> {
    negotiation["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            json!([t["turnNumber"], t["side"], t["action"], t["reasoning"], t["message"], t["suggestedRoles"]])
        })
        .collect()
}

#[tokio::test]
async fn two_system_negotiators_end_a_stalemate_within_four_turns_with_whole_compound_terms() {
    let app = TestApp::spawn().await;
    let body = app.start(&cyd_and_dee()).await;
    let negotiation = &body["negotiation"];
    assert_eq!(negotiation["status"], "completed", "{body:#}");
    assert_eq!(negotiation["maxTurns"], 6);
    let turns = negotiation["turns"].as_array().unwrap();
    let actions: Vec<&str> = turns.iter().map(|t| t["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["propose", "counter", "counter", "reject"], "{body:#}");
    assert_eq!(negotiation["outcome"]["turnCount"], 4);
    assert_eq!(body["opportunity"]["status"], "rejected");

    // No turn repeats another's words.
    let messages: Vec<&str> = turns.iter().map(|t| t["message"].as_str().unwrap()).collect();
    for (i, m) in messages.iter().enumerate() {
        assert!(!messages[..i].contains(m), "turn {i} repeats an earlier message: {m}");
    }
    // The counters ask for whole compounds, never for their pieces.
    assert_eq!(asked_terms(messages[1]).unwrap(), ["full-time", "co-founder", "handle", "sales"]);
    assert_eq!(asked_terms(messages[2]).unwrap(), ["part-time", "designer", "role"]);
    // The reject says why, in the reasoning and to Cyd.
    let last = &turns[3];
    assert!(
        last["reasoning"].as_str().unwrap().starts_with("Rejecting (final decision: nothing new since turn 1;"),
        "{last:#}"
    );
    assert_eq!(last["message"], "Dee will pass on this match: nothing new since turn 1.");

    // The objections that insights reads from the reasoning keep the compounds whole.
    let insights = app.get("/api/insights", &app.service_token()).await;
    assert_eq!(insights.status, StatusCode::OK, "{}", insights.text);
    let objections: Vec<(&str, i64)> = insights.body["total"]["topObjections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["term"].as_str().unwrap(), o["count"].as_i64().unwrap()))
        .collect();
    for (term, count) in [("full-time", 2), ("co-founder", 2), ("part-time", 1)] {
        assert!(objections.contains(&(term, count)), "{term} x{count} not in {objections:?}");
    }
    assert!(objections.iter().all(|(t, _)| !["part", "full", "time", "co"].contains(t)), "{objections:?}");
}

/// Plays Tomas's side of [`maya_and_a_terse_tomas`] through his personal agent: "Happy to talk."
/// at turn 1, then at turn 3 an answer built by `answer` from the terms Maya's counter at turn 2
/// asked for, as `(message, reasoning)`. Returns the negotiation as the platform sees it.
async fn tomas_answers(app: &TestApp, agent: &TestAgent, answer: impl Fn(&str) -> (String, String)) -> Value {
    let started = app.start(&maya_and_a_terse_tomas()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["negotiation"]["status"], "waiting_for_agent", "{started:#}");

    let respond = |token: String, message: String, reasoning: String| {
        json!({
            "claimToken": token,
            "action": "counter",
            "message": message,
            "assessment": { "reasoning": reasoning, "suggestedRoles": { "ownUser": "agent", "otherUser": "patient" } }
        })
    };
    let picked = app.pickup(agent, None).await;
    assert_eq!(picked.body["turn"]["number"], 1, "{}", picked.text);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let r = app.respond(agent, &id, &respond(token, "Happy to talk.".into(), "Let us hear Maya out.".into())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "waiting_for_agent", "Maya's side counters at turn 2: {}", r.text);

    // Turn 3: the agent reads what Maya's side asked for in its message at turn 2.
    let picked = app.pickup(agent, None).await;
    assert_eq!(picked.body["turn"]["number"], 3, "{}", picked.text);
    let counter = &picked.body["turn"]["history"][2];
    assert_eq!(counter["action"], "counter");
    let asked = asked_terms(counter["message"].as_str().unwrap()).unwrap().join(", ");
    assert_eq!(asked, "senior, build, payments, api");
    let (message, reasoning) = answer(&asked);
    let token = picked.body["claimToken"].as_str().unwrap().to_owned();
    let r = app.respond(agent, &id, &respond(token, message, reasoning)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "completed", "the system decides at turn 4: {}", r.text);
    app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await.body
}

#[tokio::test]
async fn a_personal_agent_answering_the_missing_terms_in_its_message_is_accepted_at_the_next_system_turn() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let n = tomas_answers(&app, &agent, |asked| {
        (format!("I am all of that: {asked}. Eight years of it."), "Answer Maya's objection.".into())
    })
    .await;
    let turns = n["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5, "{n:#}");
    let last = &turns[4];
    assert_eq!((last["turnNumber"].as_u64(), last["side"].as_str(), last["action"].as_str()), (Some(4), Some("source"), Some("accept")));
    let reasoning = last["reasoning"].as_str().unwrap();
    assert!(reasoning.starts_with("Accepting (the fit is convincing; now covered: senior, build, payments, api): "), "{reasoning}");
    assert!(reasoning.contains("missing: none"), "{reasoning}");
    assert_eq!(n["outcome"]["hasOpportunity"], true);
}

#[tokio::test]
async fn the_same_terms_only_in_a_personal_agents_private_reasoning_are_not_accepted() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let n = tomas_answers(&app, &agent, |asked| {
        ("Happy to talk.".into(), format!("I am secretly a senior rust backend engineer who built payments systems: {asked}"))
    })
    .await;
    let turns = n["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 5, "{n:#}");
    let last = &turns[4];
    assert_eq!(last["action"], "reject", "{last:#}");
    let reasoning = last["reasoning"].as_str().unwrap();
    assert!(reasoning.starts_with("Rejecting (final decision: nothing new since turn 2;"), "{reasoning}");
    assert!(reasoning.contains("missing: senior, build, payments, api"), "{reasoning}");
    assert_eq!(last["message"], "Maya Chen will pass on this match: nothing new since turn 2.");
    // Nothing of Tomas's private reasoning is repeated by Maya's side.
    for t in turns.iter().filter(|t| t["side"] == "source") {
        for field in ["reasoning", "message"] {
            assert!(!t[field].as_str().unwrap().contains("secretly"), "{t:#}");
        }
    }
    assert_eq!(n["outcome"]["hasOpportunity"], false);
}

#[tokio::test]
async fn identical_inputs_give_identical_turns() {
    let app = TestApp::spawn().await;
    // Two system negotiators, twice (distinct negotiations of the same people and seed).
    let first = app.start(&cyd_and_dee()).await;
    let second = app.start(&cyd_and_dee()).await;
    assert_ne!(first["negotiation"]["id"], second["negotiation"]["id"]);
    assert_eq!(turns_as_seen(&first["negotiation"]), turns_as_seen(&second["negotiation"]));
    // A personal agent saying the same things twice meets the same system turns.
    let agent = app.register_agent("user-tomas").await;
    let answer = |asked: &str| (format!("I do {asked}."), "Same words.".to_owned());
    let a = tomas_answers(&app, &agent, answer).await;
    let b = tomas_answers(&app, &agent, answer).await;
    assert_ne!(a["id"], b["id"]);
    assert_eq!(turns_as_seen(&a), turns_as_seen(&b));
}
