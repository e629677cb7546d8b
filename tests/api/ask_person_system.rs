//! The system negotiator asking its person: only for a user who opted in
//! (`negotiationPreferences.askWhenUnsure`), only where its evidence is genuinely split, in one
//! yes/no question on the person's page; the answer decides the turn, and no answer in time
//! leaves it to the rules. Without the opt-in it never asks. A question still pending when its
//! negotiation ends is withdrawn with it.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{SseReader, TestApp, answer},
};

/// A climate-policy researcher who wants to interview founders (a personal agent plays for her).
fn julia(tag: &str) -> Value {
    json!({
        "id": format!("user-julia-{tag}"),
        "name": "Julia Weber",
        "profile": {
            "bio": "Climate policy researcher at a Berlin think tank, writing a report on building decarbonisation.",
            "skills": ["policy research", "interviewing"],
            "interests": ["climate tech", "buildings"]
        },
        "intents": [{ "text": "Interview climate-tech founders for my report on building decarbonisation" }]
    })
}

/// A heat-pump founder who wants to meet other founders (the system negotiator plays for him).
fn omar(tag: &str, opted_in: bool) -> Value {
    let mut omar = json!({
        "id": format!("user-omar-{tag}"),
        "name": "Omar Farouk",
        "profile": {
            "bio": "Founder of a Berlin heat-pump installation startup.",
            "skills": ["HVAC", "operations"],
            "interests": ["climate tech"]
        },
        "intents": [{ "text": "Meet other founders in the Berlin climate-tech scene" }]
    });
    if opted_in {
        omar["negotiationPreferences"] = json!({ "askWhenUnsure": true });
    }
    omar
}

/// Julia and Omar: the profiles match on every word of Omar's need, while the platform's
/// evaluator was lukewarm (62): a person could decide either way.
fn julia_and_omar(tag: &str, opted_in: bool) -> Value {
    json!({
        "sourceUser": julia(tag),
        "candidateUser": omar(tag, opted_in),
        "seedAssessment": { "score": 62, "reasoning": "Both are in the Berlin climate-tech scene.", "valencyRole": "peer" }
    })
}

/// Starts Julia and Omar with Julia's agent, which proposes; returns the negotiation's id and
/// the respond's answer.
async fn julia_proposes(app: &TestApp, tag: &str, opted_in: bool) -> (String, Value) {
    let agent = app.register_agent(&format!("user-julia-{tag}")).await;
    let started = app.start(&julia_and_omar(tag, opted_in)).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let token = app.claim_token(&agent).await;
    let mut propose = answer("propose", Some(&token));
    propose["message"] = json!(
        "Julia is part of the Berlin climate scene and would like to interview Omar for her report on building decarbonisation."
    );
    let proposed = app.respond(&agent, &id, &propose).await;
    assert_eq!(proposed.status, StatusCode::OK, "{}", proposed.text);
    (id, proposed.body)
}

async fn questions_of(app: &TestApp, id: &str) -> i64 {
    app.counted(&format!("SELECT count(*) FROM person_questions WHERE task_id = '{id}'")).await
}

/// The last turn as its side's person reads it (with its reasoning).
async fn last_turn_as(app: &TestApp, id: &str, user: &str) -> Value {
    let view = app.get(&format!("/api/negotiations/{id}"), &app.user_token(user)).await;
    assert_eq!(view.status, StatusCode::OK, "{}", view.text);
    view.body["turns"].as_array().unwrap().last().unwrap().clone()
}

#[tokio::test]
async fn a_split_case_asks_the_person_once_and_their_answer_decides() {
    let app = TestApp::spawn().await;
    for (tag, said, decided, opportunity) in [("yes", "yes", "accept", true), ("no", "No.", "reject", false)] {
        let omar_id = format!("user-omar-{tag}");
        let omar_token = app.user_token(&omar_id);
        let mut omar_events = SseReader::open(&app.base, &omar_token, None).await;
        let (id, proposed) = julia_proposes(&app, tag, true).await;
        assert_eq!(proposed["status"], "waiting_for_person", "the system negotiator asks Omar: {proposed}");

        // Omar reads one yes/no question, on his view and as an event.
        let view = app.get(&format!("/api/negotiations/{id}"), &omar_token).await.body;
        assert_eq!(view["waitingFor"], "person", "{view}");
        let question = &view["pendingQuestion"];
        assert_eq!(question["options"], json!(["yes", "no"]), "{view}");
        let text = question["question"].as_str().unwrap();
        assert!(text.starts_with("Would you like to meet Julia Weber") && text.ends_with('?'), "{text}");
        assert_eq!(text.matches('?').count(), 1, "one sentence: {text}");
        let mut told = None;
        while let Some(event) = omar_events.next(Duration::from_secs(5)).await {
            if event.event == "negotiation.question" {
                told = Some(event);
                break;
            }
        }
        let told = told.expect("the question event");
        assert_eq!(
            (told.data["state"].as_str(), told.data["question"].as_str()),
            (Some("asked"), Some(text)),
            "{told:?}"
        );
        // Julia reads that the negotiation waits for the other person, and nothing of the question.
        let julia_view =
            app.get(&format!("/api/negotiations/{id}"), &app.user_token(&format!("user-julia-{tag}"))).await;
        assert_eq!(julia_view.body["waitingFor"], "person");
        assert!(julia_view.body.get("pendingQuestion").is_none(), "{}", julia_view.text);
        assert!(!julia_view.text.contains("Would you like"), "{}", julia_view.text);

        let question_id = question["id"].as_str().unwrap();
        let answered = app
            .post(
                &format!("/api/negotiations/{id}/questions/{question_id}/answer"),
                &omar_token,
                &json!({ "answer": said }),
            )
            .await;
        assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
        let ended = app.wait_for(&id, Duration::from_secs(10), |v| v["status"] == "completed").await;
        assert_eq!(ended["outcome"]["hasOpportunity"], opportunity, "{ended}");
        let last = last_turn_as(&app, &id, &omar_id).await;
        assert_eq!((last["side"].as_str(), last["action"].as_str()), (Some("candidate"), Some(decided)), "{last}");
        assert!(last["reasoning"].as_str().unwrap().starts_with("decided by Omar Farouk's answer"), "{last}");
        assert!(!last["message"].as_str().unwrap().contains("Would you like"), "{last}");
        assert_eq!(questions_of(&app, &id).await, 1, "one question in all");
        // Julia never reads the question or the answer, before or after the end.
        let julia_view =
            app.get(&format!("/api/negotiations/{id}"), &app.user_token(&format!("user-julia-{tag}"))).await;
        assert!(
            !julia_view.text.contains("Would you like") && !julia_view.text.contains("answer"),
            "{}",
            julia_view.text
        );
    }
}

#[tokio::test]
async fn without_the_opt_in_the_same_case_is_decided_by_the_rules_without_a_question() {
    let app = TestApp::spawn().await;
    let (id, proposed) = julia_proposes(&app, "plain", false).await;
    assert_eq!(proposed["status"], "completed", "{proposed}");
    let last = last_turn_as(&app, &id, "user-omar-plain").await;
    assert_eq!(last["action"], "accept", "the rules accept: {last}");
    assert_eq!(questions_of(&app, &id).await, 0);
}

#[tokio::test]
async fn clear_cases_are_decided_as_always_even_with_the_opt_in() {
    let app = TestApp::spawn().await;
    // Maya (the system side, opted in) and Tomas: a clear match, and a clear mismatch.
    let agent = app.register_agent("user-tomas").await;
    let mut good = fixtures::good_match();
    good["sourceUser"]["negotiationPreferences"] = json!({ "askWhenUnsure": true });
    let started = app.start(&good).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["negotiation"]["turns"][0]["action"], "propose");
    let token = app.claim_token(&agent).await;
    let countered = app.respond(&agent, &id, &answer("counter", Some(&token))).await;
    assert_eq!(countered.status, StatusCode::OK, "{}", countered.text);
    assert_ne!(countered.body["status"], "waiting_for_person", "{}", countered.text);
    assert_eq!(questions_of(&app, &id).await, 0);

    let mut bad = fixtures::mismatch();
    bad["sourceUser"]["negotiationPreferences"] = json!({ "askWhenUnsure": true });
    let started = app.start(&bad).await;
    assert_eq!(started["negotiation"]["status"], "completed", "{started}");
    assert_eq!(started["negotiation"]["turns"][0]["action"], "reject");
    let id = started["negotiation"]["id"].as_str().unwrap();
    assert_eq!(questions_of(&app, id).await, 0);
    assert_eq!(app.count("person_questions").await, 0, "no question in all");
}

#[tokio::test]
async fn no_answer_in_time_leaves_the_turn_to_the_rules() {
    let app = TestApp::spawn_with(|c| c.ask_timeout = Duration::from_secs(1)).await;
    let (id, proposed) = julia_proposes(&app, "late", true).await;
    assert_eq!(proposed["status"], "waiting_for_person", "{proposed}");
    let ended = app.wait_for(&id, Duration::from_secs(20), |v| v["status"] == "completed").await;
    let last = last_turn_as(&app, &id, "user-omar-late").await;
    assert_eq!(last["action"], "accept", "as the rules decide without asking: {last}");
    assert!(!last["reasoning"].as_str().unwrap().starts_with("decided by"), "{last}");
    assert_eq!(ended["turnCount"], 2);
    let unanswered = app
        .counted(&format!("SELECT count(*) FROM person_questions WHERE task_id = '{id}' AND status = 'unanswered'"))
        .await;
    assert_eq!(unanswered, 1);
}

#[tokio::test]
async fn a_question_pending_when_its_negotiation_ends_is_withdrawn_with_it() {
    let app = TestApp::spawn().await;
    // The system negotiator's question, and a personal agent's, each ended another way.
    let (system_asked, _) = julia_proposes(&app, "cancel", true).await;
    let (agent, agent_asked, token) = app.claimed_negotiation().await;
    let body = json!({"claimToken": token, "action": "ask_person", "question": "Equity only: fine?", "options": ["yes", "no"]});
    let asked = app.respond(&agent, &agent_asked, &body).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    for id in [&system_asked, &agent_asked] {
        let pending = format!("SELECT count(*) FROM person_questions WHERE task_id = '{id}' AND status = 'pending'");
        assert_eq!(app.counted(&pending).await, 1);
        let canceled =
            app.call(Method::DELETE, &format!("/api/negotiations/{id}"), Some(&app.service_token()), None).await;
        assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
        let statuses: Vec<String> = sqlx::query_scalar("SELECT status FROM person_questions WHERE task_id = $1::uuid")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
        assert_eq!(statuses, ["withdrawn"], "negotiation {id}");
    }
    // An answer to a withdrawn question is refused as to an ended negotiation.
    let question: uuid::Uuid = sqlx::query_scalar("SELECT question_id FROM person_questions WHERE task_id = $1::uuid")
        .bind(&system_asked)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    app.post(
        &format!("/api/negotiations/{system_asked}/questions/{question}/answer"),
        &app.user_token("user-omar-cancel"),
        &json!({ "answer": "yes" }),
    )
    .await
    .assert_error(StatusCode::CONFLICT, "already_completed");
}
