//! Index Network's personal agents read Parley's pickup unchanged: their reference poller builds
//! its turn prompt from the pickup body, and every field it reads must be there and not null.

use reqwest::StatusCode;
use serde_json::{Map, Value, json};

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp, answer},
};

/// The reads Index Network's poller makes to build its turn prompt, replayed on a pickup body.
/// Each read that would throw in its JavaScript (a property of `undefined` or `null`, `.length`
/// or `.map` of something that is not a list) is an error naming the path.
fn index_client_prompt(body: &Value) -> Result<String, String> {
    fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, String> {
        v.pointer(path)
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{path} is not an object: {:?}", v.pointer(path)))
    }
    fn list<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, String> {
        v.pointer(path).and_then(Value::as_array).ok_or_else(|| format!("{path} is not a list: {:?}", v.pointer(path)))
    }
    fn text<'a>(v: &'a Value, path: &str) -> Result<&'a str, String> {
        v.pointer(path).and_then(Value::as_str).ok_or_else(|| format!("{path} is not a string: {:?}", v.pointer(path)))
    }
    let mut prompt = String::new();
    text(body, "/negotiationId")?;
    object(body, "/context/indexContext")?;
    if let Some(p) = body.pointer("/context/indexContext/prompt") {
        prompt += &format!("Index: {}\n", p.as_str().ok_or("indexContext.prompt is not a string")?);
    }
    for who in ["ownUser", "otherUser"] {
        object(body, &format!("/context/{who}"))?;
        object(body, &format!("/context/{who}/profile"))?;
        prompt += &format!("{who}: {}\n", text(body, &format!("/context/{who}/profile/name"))?);
        let intents = list(body, &format!("/context/{who}/intents"))?;
        prompt += &format!("{} intents\n", intents.len());
        for (i, _) in intents.iter().enumerate() {
            let title = text(body, &format!("/context/{who}/intents/{i}/title"))?;
            let description = text(body, &format!("/context/{who}/intents/{i}/description"))?;
            prompt += &format!("- {title}: {description}\n");
        }
    }
    text(body, "/context/seedAssessment/reasoning")?;
    for (i, turn) in list(body, "/turn/history")?.iter().enumerate() {
        let agent = text(body, &format!("/turn/history/{i}/agent"))?;
        let action = text(body, &format!("/turn/history/{i}/action"))?;
        let message = turn.get("message").and_then(Value::as_str).unwrap_or("");
        prompt += &format!("{agent}: {action} {message}\n");
    }
    Ok(prompt)
}

async fn picked(app: &TestApp, agent: &TestAgent) -> Value {
    let picked = app.pickup(agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    picked.body
}

#[tokio::test]
async fn a_pickup_with_the_full_context_reads_as_index_clients_expect() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let mut request = fixtures::good_match();
    request["indexContext"] = json!({ "index": "founders-and-engineers", "prompt": "Founders meet engineers" });
    request["candidateUser"]["intents"] = json!([
        { "id": "intent-fintech", "text": "Looking for a fintech startup to join as a senior backend engineer working on payments. Remote.",
          "confidence": 0.8 },
        { "text": "Mentoring", "title": "Mentor juniors" },
    ]);
    app.start(&request).await;

    let body = picked(&app, &agent).await;
    let prompt = index_client_prompt(&body).unwrap_or_else(|e| panic!("{e}\n{body:#}"));
    assert!(prompt.contains("Index: Founders meet engineers"), "{prompt}");
    assert!(prompt.contains("ownUser: Tomas Novak"), "{prompt}");
    assert!(prompt.contains("otherUser: Maya Chen"), "{prompt}");
    assert!(prompt.contains("source: propose"), "{prompt}");

    let ctx = &body["context"];
    assert_eq!(ctx["ownUser"]["name"], "Tomas Novak");
    assert_eq!(ctx["ownUser"]["profile"]["skills"][0], "rust", "the profile is passed through");
    let intents = ctx["ownUser"]["intents"].as_array().unwrap();
    assert_eq!(intents[0]["id"], "intent-fintech");
    assert_eq!(intents[0]["text"], request["candidateUser"]["intents"][0]["text"], "text is kept");
    assert_eq!(intents[0]["description"], intents[0]["text"]);
    assert_eq!(intents[0]["title"], "Looking for a fintech startup to join as a senior backend…");
    assert_eq!(intents[0]["confidence"], 0.8);
    assert_eq!(intents[1]["id"], "intent-2", "an intent without an id is named by its position");
    assert_eq!(intents[1]["title"], "Mentor juniors");
    assert!(intents[1].get("confidence").is_none(), "confidence is omitted when unknown");
    // The other user's shared intents come in the same shape as one's own.
    let theirs = ctx["otherUser"]["intents"].as_array().unwrap();
    assert_eq!(theirs.len(), 1, "{body}");
    assert_eq!(theirs[0]["text"], "Looking for a senior Rust backend engineer to build our payments API");
    assert_eq!(theirs[0]["description"], theirs[0]["text"]);
    assert!(theirs[0]["title"].is_string());
}

#[tokio::test]
async fn pickups_without_index_context_or_profiles_read_as_index_clients_expect_on_every_turn() {
    let app = TestApp::spawn().await;
    let maya = app.register_agent("user-maya").await;
    let tomas = app.register_agent("user-tomas").await;
    let mut request = fixtures::good_match();
    request.as_object_mut().unwrap().remove("indexContext");
    for user in ["sourceUser", "candidateUser"] {
        request[user].as_object_mut().unwrap().remove("profile");
    }
    request["candidateUser"].as_object_mut().unwrap().remove("name");
    let started = app.start(&request).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();

    // Turn 0: Maya's agent opens, with no history yet.
    let first = picked(&app, &maya).await;
    assert_eq!(first["turn"]["number"], 0);
    index_client_prompt(&first).unwrap_or_else(|e| panic!("{e}\n{first:#}"));
    assert_eq!(first["context"]["indexContext"], json!({}), "an object, never null");
    assert_eq!(first["context"]["ownUser"]["profile"], json!({ "name": "Maya Chen" }));
    assert_eq!(first["context"]["otherUser"]["name"], "user-tomas", "no name given: the user id stands in");
    assert_eq!(first["context"]["otherUser"]["profile"]["name"], "user-tomas");
    let token = first["claimToken"].as_str().unwrap().to_owned();
    assert_eq!(app.respond(&maya, &id, &answer("propose", Some(&token))).await.status, StatusCode::OK);

    // Turns 1 and 2: the history grows, and still every read succeeds.
    for (agent, number) in [(&tomas, 1), (&maya, 2)] {
        let body = picked(&app, agent).await;
        assert_eq!(body["turn"]["number"], number);
        let prompt = index_client_prompt(&body).unwrap_or_else(|e| panic!("{e}\n{body:#}"));
        assert_eq!(body["turn"]["history"].as_array().unwrap().len(), number as usize);
        assert!(prompt.contains("source: propose my propose"), "{prompt}");
        // Shared intents reach the other side, as Index Network shares them.
        let other = if number == 1 { fixtures::founder() } else { fixtures::engineer() };
        assert_eq!(body["context"]["otherUser"]["intents"][0]["text"], other["intents"][0]["text"], "{body}");
        let token = body["claimToken"].as_str().unwrap().to_owned();
        assert_eq!(app.respond(agent, &id, &answer("counter", Some(&token))).await.status, StatusCode::OK);
    }
}

#[tokio::test]
async fn api_health_answers_like_healthz() {
    let app = TestApp::spawn().await;
    let health = app.call(reqwest::Method::GET, "/api/health", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body, app.call(reqwest::Method::GET, "/healthz", None, None).await.body);
    assert_eq!(health.body["status"], "ok");
}

#[tokio::test]
async fn an_empty_reasoning_is_accepted_as_index_clients_may_send_it_and_stays_private() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    app.start(&fixtures::good_match()).await;
    let body = picked(&app, &agent).await;
    let id = body["negotiationId"].as_str().unwrap().to_owned();
    let mut respond = answer("counter", body["claimToken"].as_str());
    respond["assessment"]["reasoning"] = json!("");
    let answered = app.respond(&agent, &id, &respond).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    // The agent's own side reads it back empty; the other side never reads it.
    let own = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-tomas")).await;
    assert_eq!(own.body["turns"][1]["reasoning"], "", "{}", own.text);
    let other = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-maya")).await;
    assert!(other.body["turns"][1].get("reasoning").is_none(), "{}", other.text);
}
