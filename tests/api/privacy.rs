//! A turn's reasoning is private to its own side: the other side's user and agent see its
//! action, message and suggested roles only, on every route that shows turns (pickup, the
//! negotiation views, the A2A task, MCP). The service sees everything; the outcome's reasoning
//! is shown to both.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TestApp, answer},
    mcp::{call_tool, initialize},
};

/// Maya hires a data engineer with Kubernetes and Terraform; Tomas has the data engineering only.
fn partial_fit() -> Value {
    let maya = json!({
        "id": "user-maya", "name": "Maya Chen",
        "profile": {"bio": "CTO of a climate analytics startup.", "skills": ["data architecture", "climate science"]},
        "intents": [{"text": "Looking for a data engineer with Python, Kubernetes and Terraform for our climate analytics platform"}]
    });
    let tomas = json!({
        "id": "user-tomas", "name": "Tomas Novak",
        "profile": {"bio": "Data engineer building Python pipelines with Spark and Airflow for climate research.",
            "skills": ["Python", "Spark", "Airflow", "data engineering"], "interests": ["climate"]},
        "intents": [{"text": "Looking for a mission-driven climate startup"}]
    });
    fixtures::request(maya, tomas, 70.0)
}

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
    let started = app.start(&partial_fit()).await;
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

    // Once it ends, the outcome's reasoning is shown to both sides.
    let token = second.body["claimToken"].as_str().unwrap().to_owned();
    let done = app.respond(&tomas, &id, &answer("reject", Some(&token))).await;
    assert_eq!(done.body["status"], "completed", "{}", done.text);
    for user in ["user-maya", "user-tomas"] {
        let view = app.get(&format!("/api/negotiations/{id}"), &app.user_token(user)).await.body;
        assert!(!view["outcome"]["reasoning"].as_str().unwrap().is_empty(), "{user}: {view}");
    }
}
