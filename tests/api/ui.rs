//! The web UI's side: human decisions, the listing's decision fields, and the live event stream.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{
    fixtures,
    helpers::{SseReader, TestApp},
};

/// Starts the founder/engineer negotiation, which ends with a pending opportunity; returns the
/// path its people decide on it at.
async fn decision_path_of_a_pending_opportunity(app: &TestApp) -> String {
    let started = app.start(&fixtures::good_match()).await;
    assert_eq!(started["opportunity"]["status"], "pending");
    format!("/api/opportunities/{}/decision", started["opportunity"]["id"].as_str().unwrap())
}

#[tokio::test]
async fn both_people_accepting_makes_the_opportunity_accepted() {
    let app = TestApp::spawn().await;
    let path = decision_path_of_a_pending_opportunity(&app).await;
    let maya = app.user_token("user-maya");
    let first = app.post(&path, &maya, &json!({ "decision": "accept" })).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["status"], "pending");
    assert_eq!(first.body["myDecision"], "accept");
    assert_eq!(first.body["otherDecision"], serde_json::Value::Null);
    assert_eq!(first.body["counterpartUserId"], "user-tomas");
    assert_eq!(first.body["agreedRoles"].as_array().unwrap().len(), 2);

    app.post(&path, &maya, &json!({ "decision": "decline" }))
        .await
        .assert_error(StatusCode::CONFLICT, "already_decided");
    let tomas = app.user_token("user-tomas");
    let listed = app.get("/api/opportunities?status=pending", &tomas).await;
    assert_eq!(listed.body["opportunities"][0]["otherDecision"], "accept");
    assert_eq!(listed.body["opportunities"][0]["myDecision"], serde_json::Value::Null);

    let second = app.post(&path, &tomas, &json!({ "decision": "accept" })).await;
    assert_eq!(second.body["status"], "accepted");
    let stored: Vec<(String, String)> =
        sqlx::query_as("SELECT user_id, decision FROM opportunity_decisions ORDER BY user_id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(stored, vec![("user-maya".into(), "accept".into()), ("user-tomas".into(), "accept".into())]);
    // Deciding a non-pending opportunity is a conflict.
    app.post(&path, &tomas, &json!({ "decision": "decline" })).await.assert_error(StatusCode::CONFLICT, "not_pending");
}

#[tokio::test]
async fn the_first_decline_rejects_and_bad_decisions_change_nothing() {
    let app = TestApp::spawn().await;
    let path = decision_path_of_a_pending_opportunity(&app).await;
    let maya = app.user_token("user-maya");
    for body in
        [json!({ "decision": "maybe" }), json!({}), json!({ "decision": 1 }), json!({ "decision": "accept", "x": 1 })]
    {
        app.post(&path, &maya, &body).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    app.post(&path, &app.user_token("user-eve"), &json!({ "decision": "accept" }))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.post(&path, &app.service_token(), &json!({ "decision": "accept" }))
        .await
        .assert_error(StatusCode::FORBIDDEN, "forbidden");
    app.call(Method::POST, &path, None, Some(&json!({ "decision": "accept" })))
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(app.count("opportunity_decisions").await, 0);

    let declined = app.post(&path, &app.user_token("user-tomas"), &json!({ "decision": "decline" })).await;
    assert_eq!(declined.body["status"], "rejected");
    app.post(&path, &maya, &json!({ "decision": "accept" })).await.assert_error(StatusCode::CONFLICT, "not_pending");

    // A negotiation that ended rejected was never pending.
    let rejected = app.start(&fixtures::mismatch()).await;
    let path = format!("/api/opportunities/{}/decision", rejected["opportunity"]["id"].as_str().unwrap());
    app.post(&path, &app.user_token("user-lea"), &json!({ "decision": "accept" }))
        .await
        .assert_error(StatusCode::CONFLICT, "not_pending");
}

#[tokio::test]
async fn the_event_stream_tells_one_negotiation_in_order_and_only_to_its_people() {
    let app = TestApp::spawn().await;
    let mut service = SseReader::open(&app.base, &app.service_token(), None).await;
    assert!(service.content_type.starts_with("text/event-stream"), "{}", service.content_type);
    let mut maya = SseReader::open(&app.base, &app.user_token("user-maya"), None).await;
    let mut eve = SseReader::open(&app.base, &app.user_token("user-eve"), None).await;

    let started = app.start(&fixtures::good_match()).await;
    let turns = started["negotiation"]["turns"].as_array().unwrap().len();
    let opportunity = started["opportunity"]["id"].as_str().unwrap();

    for reader in [&mut service, &mut maya] {
        let mut seen = Vec::new();
        let mut last_id = 0i64;
        while let Some(e) = reader.next(Duration::from_secs(5)).await {
            let id: i64 = e.id.as_deref().unwrap().parse().unwrap();
            assert!(id > last_id, "ids increase");
            last_id = id;
            assert_eq!(e.data["opportunityId"], opportunity);
            seen.push(e.clone());
            if e.event == "opportunity.status" && e.data["status"] == "pending" {
                break;
            }
        }
        let kinds: Vec<&str> = seen.iter().map(|e| e.event.as_str()).collect();
        let mut expected = vec!["opportunity.status"];
        expected.extend(std::iter::repeat_n("negotiation.turn", turns));
        expected.extend(["negotiation.outcome", "opportunity.status"]);
        assert_eq!(kinds, expected);
        assert_eq!(seen[0].data["status"], "negotiating");
        for (n, e) in seen[1..=turns].iter().enumerate() {
            let mut keys: Vec<&str> = e.data.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                ["action", "negotiationId", "opportunityId", "playedBy", "turnNumber"],
                "a turn event carries no scores: {}",
                e.data
            );
            assert_eq!(e.data["turnNumber"], n as u64);
        }
        assert_eq!(seen[turns + 1].data["hasOpportunity"], true);
        assert_eq!(seen[turns + 2].data["previousStatus"], "negotiating");
    }
    assert!(eve.next(Duration::from_millis(500)).await.is_none(), "another user's stream sees nothing");
}

#[tokio::test]
async fn a_second_process_on_the_same_database_delivers_every_event_too() {
    let first = TestApp::spawn().await;
    let second = TestApp::spawn_on(&first.database_url, |_| {}).await;
    let mut on_second = SseReader::open(&second.base, &second.service_token(), None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.start(&fixtures::mismatch()).await;
    let mut kinds = Vec::new();
    while let Some(e) = on_second.next(Duration::from_secs(5)).await {
        kinds.push(e.event.clone());
        if e.event == "opportunity.status" && e.data["status"] == "rejected" {
            break;
        }
    }
    assert_eq!(kinds.first().map(String::as_str), Some("opportunity.status"));
    assert_eq!(kinds.last().map(String::as_str), Some("opportunity.status"));
    assert!(kinds.iter().any(|k| k == "negotiation.outcome"));
}

#[tokio::test]
async fn last_event_id_resumes_where_the_client_left_off() {
    let app = TestApp::spawn().await;
    let token = app.user_token("user-maya");
    let mut live = SseReader::open(&app.base, &token, None).await;
    app.start(&fixtures::good_match()).await;
    let first = live.next(Duration::from_secs(5)).await.unwrap();
    let mut rest = Vec::new();
    while let Some(e) = live.next(Duration::from_millis(700)).await {
        rest.push(e.id.unwrap());
    }
    assert!(!rest.is_empty());
    drop(live);

    // Reconnect after the first event: everything after it is replayed, in order.
    let mut resumed = SseReader::open(&app.base, &token, first.id.as_deref()).await;
    let mut replayed = Vec::new();
    while let Some(e) = resumed.next(Duration::from_millis(700)).await {
        replayed.push(e.id.unwrap());
    }
    assert_eq!(replayed, rest);
}

#[tokio::test]
async fn the_status_page_is_served_from_the_binary() {
    let app = TestApp::spawn().await;
    let page = app.call(Method::GET, "/", None, None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("<html"), "{}", &page.text[..page.text.len().min(200)]);
    assert!(!page.text.contains("http://") && !page.text.contains("https://"), "no external fetches");
}

#[tokio::test]
async fn the_views_carry_the_names_the_platform_gave() {
    let app = TestApp::spawn().await;
    let started = app.start(&fixtures::good_match()).await;
    let id = started["opportunity"]["id"].as_str().unwrap().to_owned();
    let negotiation = started["negotiation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["opportunity"]["sourceUserName"], "Maya Chen");
    assert_eq!(started["opportunity"]["candidateUserName"], "Tomas Novak");

    let maya = app.user_token("user-maya");
    let one = app.get(&format!("/api/opportunities/{id}"), &maya).await;
    assert_eq!(one.body["counterpartUserId"], "user-tomas", "{}", one.text);
    assert_eq!(one.body["counterpartName"], "Tomas Novak");
    let listed = app.get("/api/opportunities", &app.user_token("user-tomas")).await;
    assert_eq!(listed.body["opportunities"][0]["counterpartName"], "Maya Chen", "{}", listed.text);
    assert_eq!(listed.body["opportunities"][0]["sourceUserName"], "Maya Chen");

    let seen = app.get(&format!("/api/negotiations/{negotiation}"), &maya).await;
    assert_eq!(seen.body["sides"]["source"]["name"], "Maya Chen", "{}", seen.text);
    assert_eq!(seen.body["sides"]["candidate"]["name"], "Tomas Novak");

    // The owner's view of an agent's negotiations names the other person too.
    let agent = app.register_agent("user-maya").await;
    let mine = app.get(&format!("/api/agents/{}/negotiations", agent.id), &maya).await;
    assert_eq!(mine.body["negotiations"][0]["counterpartUserId"], "user-tomas", "{}", mine.text);
    assert_eq!(mine.body["negotiations"][0]["counterpartName"], "Tomas Novak");

    // Without a name, the fields are null and the ids remain.
    let mut nameless = fixtures::request(fixtures::pastry_chef(), fixtures::kernel_developer(), 35.0);
    nameless["sourceUser"].as_object_mut().unwrap().remove("name");
    let started = app.start(&nameless).await;
    assert_eq!(started["opportunity"]["sourceUserName"], serde_json::Value::Null);
    assert_eq!(started["opportunity"]["candidateUserName"], "Raj Patel");
    let lea = app
        .get(
            &format!("/api/opportunities/{}", started["opportunity"]["id"].as_str().unwrap()),
            &app.user_token("user-raj"),
        )
        .await;
    assert_eq!(lea.body["counterpartName"], serde_json::Value::Null, "{}", lea.text);
    assert_eq!(lea.body["counterpartUserId"], "user-lea");
}
