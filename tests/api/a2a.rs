//! The A2A task and context views.

use reqwest::StatusCode;

use crate::{fixtures, helpers::TestApp};

#[tokio::test]
async fn a_finished_negotiation_reads_as_an_a2a_task_with_messages_and_one_outcome_artifact() {
    let app = TestApp::spawn().await;
    let created = app.post("/api/negotiations", &app.service_token(), &fixtures::good_match()).await;
    let id = created.body["negotiation"]["id"].as_str().unwrap().to_owned();
    let context = created.body["negotiation"]["conversationId"].as_str().unwrap().to_owned();

    let task = app.get(&format!("/api/tasks/{id}"), &app.user_token("user-maya")).await;
    assert_eq!(task.status, StatusCode::OK, "{}", task.text);
    let t = &task.body;
    assert_eq!(t["id"], id.as_str());
    assert_eq!(t["contextId"], context.as_str());
    assert_eq!(t["kind"], "task");
    assert_eq!(t["status"]["state"], "completed");
    assert!(t["status"]["timestamp"].is_string());
    let history = t["history"].as_array().unwrap();
    assert!(history.len() >= 2);
    for (i, m) in history.iter().enumerate() {
        assert_eq!(m["kind"], "message");
        assert_eq!(m["role"], "agent");
        assert_eq!(m["taskId"], id.as_str());
        assert_eq!(m["contextId"], context.as_str());
        assert_eq!(m["metadata"]["turnNumber"], i as u64);
        let expected_sender = if i % 2 == 0 { "agent:user-maya" } else { "agent:user-tomas" };
        assert_eq!(m["metadata"]["senderId"], expected_sender);
        let part = &m["parts"][0];
        assert_eq!(part["kind"], "data");
        assert!(part["data"]["action"].is_string());
        // Maya reads her own side's reasoning (even turns), never Tomas's.
        assert_eq!(part["data"]["assessment"]["reasoning"].is_string(), i % 2 == 0, "{m}");
        assert!(part["data"]["assessment"]["suggestedRoles"]["ownUser"].is_string());
    }
    let artifacts = t["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0]["name"], "negotiation-outcome");
    assert_eq!(artifacts[0]["parts"][0]["data"]["hasOpportunity"], true);

    let conversation = app.get(&format!("/api/conversations/{context}"), &app.service_token()).await;
    assert_eq!(conversation.status, StatusCode::OK);
    let participants = conversation.body["participants"].as_array().unwrap();
    let ids: Vec<&str> = participants.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["agent:user-maya", "agent:user-tomas"]);
    assert_eq!(conversation.body["taskIds"][0], id.as_str());

    // Strangers see neither.
    let eve = app.user_token("user-eve");
    app.get(&format!("/api/tasks/{id}"), &eve).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get(&format!("/api/conversations/{context}"), &eve).await.assert_error(StatusCode::NOT_FOUND, "not_found");
}

/// `GET /api/tasks/{id}` as an A2A client reads it (an `A2A-Version` header).
async fn as_a2a_client(app: &TestApp, id: &str, version: &str) -> serde_json::Value {
    let resp = app
        .client
        .get(format!("{}/api/tasks/{id}", app.base))
        .bearer_auth(app.user_token("user-tomas"))
        .header("A2A-Version", version)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

#[tokio::test]
async fn rendered_for_an_a2a_client_a_waiting_turn_is_input_required_and_a_claimed_one_working() {
    let app = TestApp::spawn().await;
    let (agent, id) = app.mixed_negotiation().await;
    // Parley's own states without the header, as before.
    let own = app.get(&format!("/api/tasks/{id}"), &app.user_token("user-tomas")).await;
    assert_eq!(own.body["status"]["state"], "waiting_for_agent");
    assert!(own.body["metadata"].get("parley").is_none());

    let t = as_a2a_client(&app, &id, "0.3").await;
    assert_eq!(t["status"]["state"], "input-required", "{t}");
    assert_eq!(t["metadata"]["parley"]["state"], "waiting_for_agent");
    assert_eq!(t["metadata"]["parley"]["sessionStatus"], "ongoing");
    assert_eq!(t["history"][0]["metadata"]["proposalStatus"], "proposed");
    let t = as_a2a_client(&app, &id, "1.0").await;
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
    assert!(t.get("kind").is_none());
    assert_eq!(t["history"][0]["role"], "ROLE_AGENT");

    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    let t = as_a2a_client(&app, &id, "0.3").await;
    assert_eq!(t["status"]["state"], "working", "{t}");
    assert_eq!(t["metadata"]["parley"]["state"], "claimed");
}

#[tokio::test]
async fn rendered_for_an_a2a_client_an_ended_negotiation_says_its_session_status() {
    let app = TestApp::spawn().await;
    let created = app.post("/api/negotiations", &app.service_token(), &fixtures::good_match()).await;
    let id = created.body["negotiation"]["id"].as_str().unwrap().to_owned();
    let t = as_a2a_client(&app, &id, "0.3").await;
    assert_eq!(t["status"]["state"], "completed");
    let session = t["metadata"]["parley"]["sessionStatus"].as_str().unwrap();
    let opportunity = t["artifacts"][0]["parts"][0]["data"]["hasOpportunity"].as_bool().unwrap();
    assert_eq!(session, if opportunity { "completed" } else { "rejected" }, "{t}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    let action = last["parts"][0]["data"]["action"].as_str().unwrap();
    let expected = match action {
        "accept" => "accepted",
        "reject" => "rejected",
        "counter" | "question" => "countered",
        _ => "proposed",
    };
    assert_eq!(last["metadata"]["proposalStatus"], expected);
}
