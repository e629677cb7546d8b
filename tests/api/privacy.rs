//! A turn's reasoning is private to its own side: the other side's user and agent see its
//! action, message and suggested roles only, on every route that shows turns (pickup, the
//! negotiation views, the A2A task, MCP). The outcome follows the turn that ended it: its own
//! side reads that turn's reasoning, the other side the service's sentence and the turn's
//! message, in every view (the negotiation, the A2A task, the agent's views, MCP, a respond's
//! answer, the event stream, pickup's earlier rounds). The service sees everything.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{SseReader, TestAgent, TestApp, answer},
    mcp::{call_tool, initialize},
};

const SECRET: &str = "PRIVATE: my user would settle for less";

/// Every turn in `turns` by `side` has reasoning exactly when `visible`.
fn assert_reasoning(turns: &Value, side: &str, visible: bool, what: &str) {
    let turns = turns.as_array().unwrap_or_else(|| panic!("{what}: no turns"));
    let of_side: Vec<&Value> = turns.iter().filter(|t| t["side"] == side).collect();
    assert!(!of_side.is_empty(), "{what}: no {side} turns");
    for t in of_side {
        assert_eq!(t.get("reasoning").is_some_and(|r| !r.as_str().unwrap_or("").is_empty()), visible, "{what}: {t}");
        assert!(t["action"].is_string() && t["suggestedRoles"].is_object(), "{what}: {t}");
    }
}

#[tokio::test]
async fn the_other_sides_reasoning_never_reaches_a_user_or_agent() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    // A partial fit: Maya's system negotiator counters, naming what her side still misses.
    let started = app.start(&fixtures::partial_fit()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();

    let first = app.pickup(&tomas, None).await.body;
    let token = first["claimToken"].as_str().unwrap().to_owned();
    let mut counter = answer("counter", Some(&token));
    counter["assessment"]["reasoning"] = json!(SECRET);
    let answered = app.respond(&tomas, &id, &counter).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let service = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await.body;
    let system_reasoning = service["turns"][0]["reasoning"].as_str().unwrap().to_owned();
    assert_reasoning(&service["turns"], "source", true, "service");
    assert_reasoning(&service["turns"], "candidate", true, "service");
    assert!(service.to_string().contains(SECRET));

    // Maya (the system side's user) reads her side's reasoning, never Tomas's.
    let maya = app.user_token("user-maya");
    let as_maya = app.get(&format!("/api/negotiations/{id}"), &maya).await;
    assert_reasoning(&as_maya.body["turns"], "source", true, "Maya's negotiation view");
    assert_reasoning(&as_maya.body["turns"], "candidate", false, "Maya's negotiation view");
    assert!(!as_maya.text.contains(SECRET), "{}", as_maya.text);
    let task = app.get(&format!("/api/tasks/{id}"), &maya).await;
    assert_eq!(task.status, StatusCode::OK);
    assert!(!task.text.contains(SECRET), "{}", task.text);
    assert!(task.text.contains(&system_reasoning), "Maya's own side's reasoning stays visible to her");

    // Tomas and his agent read his own reasoning, never the system negotiator's about Maya.
    let as_tomas = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-tomas")).await;
    assert_reasoning(&as_tomas.body["turns"], "candidate", true, "Tomas's negotiation view");
    assert_reasoning(&as_tomas.body["turns"], "source", false, "Tomas's negotiation view");
    assert!(!as_tomas.text.contains(&system_reasoning));
    let task = app.get(&format!("/api/tasks/{id}"), &app.user_token("user-tomas")).await;
    assert!(task.text.contains(SECRET) && !task.text.contains(&system_reasoning), "{}", task.text);
    let agent_view = app.agent_call(&tomas, reqwest::Method::GET, &format!("/negotiations/{id}"), None).await;
    assert_reasoning(&agent_view.body["turns"], "source", false, "the agent's negotiation view");
    assert_reasoning(&agent_view.body["turns"], "candidate", true, "the agent's negotiation view");

    // The next pickup's history: own turns with reasoning, the other side's without.
    let second = app.pickup(&tomas, None).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_reasoning(&second.body["turn"]["history"], "candidate", true, "pickup history");
    assert_reasoning(&second.body["turn"]["history"], "source", false, "pickup history");
    assert!(!second.text.contains(&system_reasoning));

    // Over MCP, the same.
    initialize(&app, &tomas.key).await;
    let shown = call_tool(&app, &tomas.key, "get_negotiation", json!({"negotiationId": id})).await;
    assert_reasoning(&shown["structuredContent"]["turns"], "source", false, "MCP get_negotiation");
    assert_reasoning(&shown["structuredContent"]["turns"], "candidate", true, "MCP get_negotiation");
    let picked = call_tool(&app, &tomas.key, "pickup_negotiation", json!({})).await;
    assert_reasoning(&picked["structuredContent"]["turn"]["history"], "source", false, "MCP pickup");
    assert!(!picked.to_string().contains(&system_reasoning));

    // Once Tomas's agent rejects, Tomas reads his reasoning as the outcome's, Maya the
    // service's sentence and his message.
    let token = second.body["claimToken"].as_str().unwrap().to_owned();
    let mut reject = answer("reject", Some(&token));
    reject["assessment"]["reasoning"] = json!(SECRET);
    let done = app.respond(&tomas, &id, &reject).await;
    assert_eq!(done.body["status"], "completed", "{}", done.text);
    assert_eq!(done.body["outcome"]["reasoning"], SECRET, "his own agent reads his reasoning");
    let as_maya = app.get(&format!("/api/negotiations/{id}"), &maya).await;
    assert!(!as_maya.text.contains(SECRET), "{}", as_maya.text);
    let outcome = &as_maya.body["outcome"];
    assert_eq!(outcome["reasoning"], "Tomas Novak's agent rejected Maya Chen's counter at turn 3.", "{outcome}");
    assert_eq!(outcome["summary"], outcome["reasoning"]);
    assert_eq!(outcome["message"], "my reject");
    let as_tomas = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-tomas")).await.body;
    assert_eq!(as_tomas["outcome"]["reasoning"], SECRET);
    assert_eq!(as_tomas["outcome"]["summary"], outcome["summary"]);
}

const FINAL: &str = "PRIVATE-FINAL: Tomas would take less equity; missing: equity, visa";

/// `GET` with an agent's key.
async fn agent_get(app: &TestApp, agent: &TestAgent, path: &str) -> crate::helpers::Answer {
    app.agent_call(agent, Method::GET, path, None).await
}

/// Asserts that `text` (a whole answer) holds none of the private final reasoning.
fn clean(text: &str, what: &str) {
    assert!(!text.contains("PRIVATE-FINAL"), "{what} shows the other side's final reasoning: {text}");
}

#[tokio::test]
async fn the_final_turns_reasoning_reaches_its_own_side_only_in_every_view() {
    let app = TestApp::spawn_with(|c| c.pending_ttl = Duration::from_secs(2)).await;
    let service = app.service_token();
    let maya = app.register_agent("user-maya").await;
    let tomas = app.register_agent("user-tomas").await;
    let mut maya_events = SseReader::open(&app.base, &app.user_token("user-maya"), None).await;
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let opportunity = started["opportunity"]["id"].as_str().unwrap().to_owned();

    // Maya's agent proposes; Tomas's agent accepts, with private reasoning and a message for her.
    let picked = app.pickup(&maya, None).await.body;
    let proposed = app.respond(&maya, &id, &answer("propose", picked["claimToken"].as_str())).await;
    assert_eq!(proposed.status, StatusCode::OK, "{}", proposed.text);
    let picked = app.pickup(&tomas, None).await.body;
    let mut accept = answer("accept", picked["claimToken"].as_str());
    accept["assessment"]["reasoning"] = json!(FINAL);
    accept["message"] = json!("Glad to meet Maya");
    let accepted = app.respond(&tomas, &id, &accept).await;
    assert_eq!(accepted.body["outcome"]["reasoning"], FINAL, "{}", accepted.text);

    let sentence = "Tomas Novak's agent accepted Maya Chen's proposal at turn 1.";
    // Maya: her negotiation view, the A2A task, her agent's view over HTTP and MCP.
    let view = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-maya")).await;
    clean(&view.text, "Maya's negotiation view");
    assert_eq!(view.body["outcome"]["reasoning"], sentence);
    assert_eq!(view.body["outcome"]["summary"], sentence);
    assert_eq!(view.body["outcome"]["message"], "Glad to meet Maya");
    let task = app.get(&format!("/api/tasks/{id}"), &app.user_token("user-maya")).await;
    clean(&task.text, "Maya's A2A task");
    let artifact = &task.body["artifacts"][0];
    assert_eq!(artifact["name"], "negotiation-outcome");
    assert_eq!(artifact["parts"][0]["data"]["reasoning"], sentence, "{artifact}");
    let agent_view = agent_get(&app, &maya, &format!("/negotiations/{id}")).await;
    clean(&agent_view.text, "Maya's agent's view");
    assert_eq!(agent_view.body["outcome"]["reasoning"], sentence);
    initialize(&app, &maya.key).await;
    let shown = call_tool(&app, &maya.key, "get_negotiation", json!({"negotiationId": id})).await;
    clean(&shown.to_string(), "MCP get_negotiation for Maya's agent");
    assert_eq!(shown["structuredContent"]["outcome"]["reasoning"], sentence);

    // Tomas, his agent and the service read it.
    let view = app.get(&format!("/api/negotiations/{id}"), &app.user_token("user-tomas")).await.body;
    assert_eq!(view["outcome"]["reasoning"], FINAL);
    assert_eq!(view["outcome"]["summary"], sentence);
    let task = app.get(&format!("/api/tasks/{id}"), &app.user_token("user-tomas")).await.body;
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["reasoning"], FINAL);
    assert_eq!(agent_get(&app, &tomas, &format!("/negotiations/{id}")).await.body["outcome"]["reasoning"], FINAL);
    initialize(&app, &tomas.key).await;
    let shown = call_tool(&app, &tomas.key, "get_negotiation", json!({"negotiationId": id})).await;
    assert_eq!(shown["structuredContent"]["outcome"]["reasoning"], FINAL);
    let view = app.get(&format!("/api/negotiations/{id}"), &service).await.body;
    assert_eq!(view["outcome"]["reasoning"], FINAL);
    let task = app.get(&format!("/api/tasks/{id}"), &service).await.body;
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["reasoning"], FINAL);

    // Nobody decides, the opportunity expires, and the platform reactivates it.
    let mut expired = false;
    for _ in 0..100 {
        let o = app.get(&format!("/api/opportunities/{opportunity}"), &service).await.body;
        if o["status"] == "expired" {
            expired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(expired, "the pending opportunity did not expire");
    let round = app.post(&format!("/api/opportunities/{opportunity}/reactivate"), &service, &json!({})).await;
    assert_eq!(round.status, StatusCode::CREATED, "{}", round.text);
    let second = round.body["negotiation"]["id"].as_str().unwrap().to_owned();

    // Maya's agent, over MCP, finds the earlier round with the sentence, not Tomas's reasoning.
    let picked = call_tool(&app, &maya.key, "pickup_negotiation", json!({})).await;
    clean(&picked.to_string(), "MCP pickup's previousRounds for Maya's agent");
    let earlier = &picked["structuredContent"]["context"]["previousRounds"][0];
    assert_eq!(earlier["negotiationId"], id.as_str());
    assert_eq!(earlier["outcome"]["reasoning"], sentence, "{earlier}");
    assert_eq!(earlier["outcome"]["message"], "Glad to meet Maya");
    let token = picked["structuredContent"]["claimToken"].as_str().unwrap();
    let proposed = app.respond(&maya, &second, &answer("propose", Some(token))).await;
    assert_eq!(proposed.status, StatusCode::OK, "{}", proposed.text);
    // Tomas's agent finds its own reasoning there.
    let picked = app.pickup(&tomas, None).await;
    assert_eq!(picked.body["context"]["previousRounds"][0]["outcome"]["reasoning"], FINAL, "{}", picked.text);

    // Maya's event stream carried the whole story, and none of Tomas's reasoning.
    let mut seen = Vec::new();
    while let Some(event) = maya_events.next(Duration::from_secs(1)).await {
        seen.push(format!("{} {}", event.event, event.data));
    }
    assert!(seen.iter().any(|e| e.starts_with("negotiation.outcome")), "{seen:#?}");
    assert!(seen.iter().any(|e| e.starts_with("negotiation.round")), "{seen:#?}");
    clean(&seen.join("\n"), "Maya's event stream");
}

#[tokio::test]
async fn a_respond_that_the_other_sides_system_reply_ends_shows_the_sentence() {
    let app = TestApp::spawn().await;
    let maya = app.register_agent("user-maya").await;
    // Over HTTP, then over MCP: Maya's agent speaks until Tomas's system negotiator ends it
    // (at the latest on the last turn the cap allows, where it must accept or reject).
    for over_mcp in [false, true] {
        let mut request = fixtures::good_match();
        if over_mcp {
            request["candidateUser"]["id"] = json!("user-tomas-2");
            request["candidateUser"]["name"] = json!("Tomas Second");
            initialize(&app, &maya.key).await;
        }
        let started = app.start(&request).await;
        let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
        let responded = loop {
            let picked = app.pickup(&maya, None).await.body;
            let token = picked["claimToken"].as_str().unwrap();
            let action = if picked["turn"]["number"] == 0 { "propose" } else { "counter" };
            let responded = if over_mcp {
                let args = json!({"negotiationId": id, "action": action, "reasoning": "Maya's own reasons",
                    "message": "Shall we talk?", "claimToken": token});
                call_tool(&app, &maya.key, "respond_to_negotiation", args).await["structuredContent"].clone()
            } else {
                app.respond(&maya, &id, &answer(action, Some(token))).await.body
            };
            if responded["status"] == "completed" {
                break responded;
            }
            assert_eq!(responded["status"], "waiting_for_agent", "{responded}");
        };

        let full = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await.body;
        let turns = full["turns"].as_array().unwrap();
        let (last, previous) = (&turns[turns.len() - 1], &turns[turns.len() - 2]);
        assert_eq!(last["side"], "candidate", "the system negotiator ended it: {full}");
        let system_reasoning = last["reasoning"].as_str().unwrap();
        assert_eq!(full["outcome"]["reasoning"], system_reasoning);
        assert!(!responded.to_string().contains(system_reasoning), "{responded}");
        let name = if over_mcp { "Tomas Second" } else { "Tomas Novak" };
        let verb = if last["action"] == "accept" { "accepted" } else { "rejected" };
        let what = if previous["action"] == "propose" { "proposal" } else { "counter" };
        // Tomas has no personal agent: the sentence says Parley decided for him.
        assert_eq!(
            responded["outcome"]["reasoning"],
            format!(
                "Parley {verb} Maya Chen's {what} for {name} at turn {} ({name} has no personal agent).",
                last["turnNumber"]
            ),
            "{responded}"
        );
    }
}
