//! The model-backed system negotiator against a stand-in OpenAI-compatible server: a legal answer
//! is played and says so; an illegal action, an answer that is not JSON and a model too slow for
//! its time limit each leave the turn to the rules, which say why; a model accept of a match the
//! rules find contradicted, or whose fit is below the rules' accept line, becomes a counter; a
//! model's opening propose of a match the rules would reject becomes a reject; a hand-back is
//! taken by the model's job; and the model never reads the other side's private reasoning.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestApp, answer},
};
use parley::NegotiatorModelConfig;

/// How the stand-in model answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `accept` where allowed, else the first allowed action.
    Agreeable,
    /// Always `question`, which a system turn may never take.
    Illegal,
    /// Prose, not JSON.
    Chatty,
    /// An agreeable answer, but only after 3 seconds.
    Slow,
}

/// A stand-in OpenAI-compatible server answering in `mode`; returns its base URL and the bodies
/// it was sent (copy them out of the lock: the server takes it for every request).
async fn stand_in(mode: Mode) -> (String, Arc<Mutex<Vec<Value>>>) {
    use axum::{Json, Router, routing::post};
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(body.clone());
                let allowed: Vec<String> = body["response_format"]["json_schema"]["schema"]["properties"]["action"]["enum"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                let agreeable = if allowed.iter().any(|a| a == "accept") { "accept".to_owned() } else { allowed[0].clone() };
                let content = match mode {
                    Mode::Agreeable | Mode::Slow => {
                        if mode == Mode::Slow {
                            tokio::time::sleep(Duration::from_secs(3)).await;
                        }
                        json!({"action": agreeable, "message": "From the model: this looks worth a conversation.",
                            "reasoning": "The model's own view."})
                        .to_string()
                    }
                    Mode::Illegal => json!({"action": "question", "message": "Why?", "reasoning": "Curious."}).to_string(),
                    Mode::Chatty => "Sure! I would accept this one.".to_owned(),
                };
                Json(json!({
                    "id": "chatcmpl-stand-in", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, asked)
}

/// A service whose system turns are decided by the stand-in in `mode` (1 s time limit).
async fn app_with(mode: Mode) -> (TestApp, Arc<Mutex<Vec<Value>>>) {
    let (url, asked) = stand_in(mode).await;
    let app = TestApp::spawn_with(move |c| {
        c.negotiator_model = Some(NegotiatorModelConfig {
            url,
            model: "stand-in".into(),
            api_key: None,
            timeout: Duration::from_secs(1),
            concurrency: 2,
            max_answer: 1 << 20,
        })
    })
    .await;
    (app, asked)
}

async fn ended(app: &TestApp, id: &str) -> Value {
    app.wait_for(id, Duration::from_secs(30), |n| n["status"] == "completed").await
}

#[tokio::test]
async fn a_legal_model_answer_is_played_off_the_request_and_says_who_decided() {
    let (app, asked) = app_with(Mode::Agreeable).await;
    let started = app.start(&fixtures::good_match()).await;
    assert_ne!(started["negotiation"]["status"], "completed", "the model decides off the create call: {started:#}");
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let n = ended(&app, &id).await;
    let turns = n["turns"].as_array().unwrap();
    let actions: Vec<&str> = turns.iter().map(|t| t["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["propose", "accept"], "{n:#}");
    for t in turns {
        assert_eq!(
            (t["playedBy"].as_str(), t["decidedBy"].as_str()),
            (Some("system"), Some("model:stand-in")),
            "{t:#}"
        );
        assert_eq!(t["message"], "From the model: this looks worth a conversation.");
    }
    assert_eq!(n["outcome"]["hasOpportunity"], true);
    let asked_now = asked.lock().unwrap().clone();
    assert_eq!(asked_now.len(), 2, "one call per turn");
    assert_eq!(
        asked_now[0]["response_format"]["json_schema"]["schema"]["properties"]["action"]["enum"],
        json!(["propose", "reject"])
    );
    let metrics = app.get("/metrics", &app.service_token()).await.text;
    assert!(metrics.contains("parley_negotiator_model_calls_total{outcome=\"played\"}"), "{metrics}");
}

#[tokio::test]
async fn an_illegal_a_chatty_and_a_slow_model_leave_the_turn_to_the_rules_which_say_why() {
    for (mode, why) in [
        (Mode::Illegal, "`question` is not allowed now"),
        (Mode::Chatty, "not JSON"),
        (Mode::Slow, "did not answer in time"),
    ] {
        let (app, asked) = app_with(mode).await;
        let id = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
        let n = ended(&app, &id).await;
        let first = &n["turns"][0];
        assert_eq!(first["decidedBy"], "rules", "{first:#}");
        let reasoning = first["reasoning"].as_str().unwrap();
        assert!(reasoning.starts_with("The model stand-in gave no usable answer ("), "{reasoning}");
        assert!(reasoning.contains(why), "{why} in {reasoning}");
        // An invalid answer is asked for once more; a slow one has no time left for that.
        let calls = { asked.lock().unwrap().len() };
        let want = if mode == Mode::Slow { 2 } else { 4 };
        assert!(calls <= want, "{calls} calls");
        let metrics = app.get("/metrics", &app.service_token()).await.text;
        assert!(metrics.contains("parley_negotiator_model_calls_total{outcome=\"failed\"}"), "{metrics}");
    }
}

const SECRET: &str = "my-private-reasoning-41b7";

#[tokio::test]
async fn a_model_accept_of_a_contradicted_match_becomes_a_counter_and_never_reads_private_reasoning() {
    let (app, asked) = app_with(Mode::Agreeable).await;
    // Jake's agent claims what his profile contradicts; Sarah's side is the system's.
    let jake = app.register_agent("user-jake").await;
    let body = fixtures::request(
        json!({"id": "user-jake", "name": "Jake Morris",
               "profile": {"bio": "Social media manager; I run Instagram and TikTok accounts for restaurants and bars.",
                           "skills": ["social media", "content creation", "Canva"]},
               "intents": [{"text": "Find freelance social media clients"}]}),
        json!({"id": "user-sarah", "name": "Sarah Lindqvist",
               "profile": {"bio": "CTO of Payroute, a Stockholm fintech.", "skills": ["Rust", "payments"]},
               "intents": [{"text": "Hire a senior Rust backend engineer to build our payments API"}]}),
        35.0,
    );
    let id = app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.claim_token(&jake).await;
    let mut propose = answer("propose", Some(&token));
    propose["message"] = json!("Jake is a senior Rust backend engineer who has built payments APIs.");
    propose["assessment"]["reasoning"] = json!(SECRET);
    let r = app.respond(&jake, &id, &propose).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let n = app.wait_for(&id, Duration::from_secs(30), |n| n["turns"].as_array().is_some_and(|t| t.len() >= 2)).await;
    let sarah = &n["turns"][1];
    assert_ne!(sarah["action"], "accept", "{sarah:#}");
    assert_eq!(sarah["action"], "counter", "{sarah:#}");
    assert_eq!(sarah["decidedBy"], "rules", "the rules overruled the model: {sarah:#}");
    assert!(
        sarah["reasoning"]
            .as_str()
            .unwrap()
            .starts_with("The model stand-in chose to accept, but the rules rule it out"),
        "{sarah:#}"
    );
    // Copied out: a lock held while the stand-in answers would stall it.
    let asked = asked.lock().unwrap().clone();
    assert!(!asked.is_empty());
    for body in asked.iter() {
        let text = body.to_string();
        assert!(!text.contains(SECRET), "the other side's reasoning reached the model: {text}");
        assert!(text.contains("who has built payments APIs"), "the other side's message is there as data");
    }
}

#[tokio::test]
async fn a_model_propose_of_a_match_the_rules_would_reject_becomes_a_reject() {
    let (app, _) = app_with(Mode::Agreeable).await;
    // Sarah's side is the system's and opens; Chris has an agent of his own. The rules' own
    // reading: a WordPress developer for a Rust payments role at a low seed, nothing grounded.
    let _chris = app.register_agent("user-chris").await;
    let body = fixtures::request(
        json!({"id": "user-sarah", "name": "Sarah Lindqvist",
               "profile": {"bio": "CTO of Payroute, a Stockholm fintech.", "skills": ["Rust", "payments"]},
               "intents": [{"text": "Hire a senior Rust backend engineer to build our payments API"}]}),
        json!({"id": "user-chris", "name": "Chris Vale",
               "profile": {"bio": "Florist with a shop in Malmö: weddings and funerals.", "skills": ["floristry"]},
               "intents": [{"text": "Find more wedding customers"}]}),
        20.0,
    );
    let id = app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let n = app.wait_for(&id, Duration::from_secs(30), |n| n["turns"].as_array().is_some_and(|t| !t.is_empty())).await;
    let first = &n["turns"][0];
    assert_eq!(first["action"], "reject", "{first:#}");
    assert_eq!(first["decidedBy"], "rules", "the rules overruled the model: {first:#}");
    let reasoning = first["reasoning"].as_str().unwrap();
    assert!(reasoning.starts_with("The model stand-in chose to propose, but the rules rule it out"), "{reasoning}");
    let n = ended(&app, &id).await;
    assert_eq!(n["outcome"]["hasOpportunity"], false, "{n:#}");
}

#[tokio::test]
async fn a_model_accept_below_the_rules_accept_line_becomes_a_counter() {
    let (app, _) = app_with(Mode::Agreeable).await;
    // Jake's profile grounds part of Sarah's need (a backend engineer in payments, not Rust and
    // not senior) and his agent claims nothing: the rules would ask before deciding.
    let jake = app.register_agent("user-jake").await;
    let body = fixtures::request(
        json!({"id": "user-jake", "name": "Jake Morris",
               "profile": {"bio": "Backend engineer at a bank: Java services for card payments.",
                           "skills": ["Java", "backend", "payments"]},
               "intents": [{"text": "Join a fintech as a backend engineer"}]}),
        json!({"id": "user-sarah", "name": "Sarah Lindqvist",
               "profile": {"bio": "CTO of Payroute, a Stockholm fintech.", "skills": ["Rust", "payments"]},
               "intents": [{"text": "Hire a senior Rust backend engineer to build our payments API"}]}),
        50.0,
    );
    let id = app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.claim_token(&jake).await;
    let mut propose = answer("propose", Some(&token));
    propose["message"] = json!("Jake would be glad to talk.");
    let r = app.respond(&jake, &id, &propose).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let n = app.wait_for(&id, Duration::from_secs(30), |n| n["turns"].as_array().is_some_and(|t| t.len() >= 2)).await;
    let sarah = &n["turns"][1];
    assert_eq!(sarah["action"], "counter", "{sarah:#}");
    assert_eq!(sarah["decidedBy"], "rules", "{sarah:#}");
    let reasoning = sarah["reasoning"].as_str().unwrap();
    assert!(reasoning.starts_with("The model stand-in chose to accept, but the rules rule it out"), "{reasoning}");
    assert!(reasoning.contains("below the rules' accept line 0.65"), "{reasoning}");
}

#[tokio::test]
async fn a_handed_back_turn_is_taken_by_the_models_job() {
    let (app, _) = app_with(Mode::Agreeable).await;
    let tomas = app.register_agent("user-tomas").await;
    let id = app.start(&fixtures::good_match()).await["negotiation"]["id"].as_str().unwrap().to_owned();
    // Maya's opening is the model's; then the turn waits for Tomas's agent.
    app.wait_for(&id, Duration::from_secs(30), |n| n["status"] == "waiting_for_agent").await;
    let token = app.claim_token(&tomas).await;
    let released = app
        .agent_call(
            &tomas,
            reqwest::Method::POST,
            &format!("/negotiations/{id}/release"),
            Some(&json!({"claimToken": token, "handBack": true, "reason": "my program crashed"})),
        )
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text);
    let n = app.wait_for(&id, Duration::from_secs(30), |n| n["turns"].as_array().is_some_and(|t| t.len() >= 2)).await;
    let taken = &n["turns"][1];
    assert_eq!(
        (taken["playedBy"].as_str(), taken["fallbackReason"].as_str(), taken["decidedBy"].as_str()),
        (Some("system_fallback"), Some("hand_back"), Some("model:stand-in")),
        "{n:#}"
    );
}
