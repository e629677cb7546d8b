//! Starting, reading and canceling negotiations between two system negotiators.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{fixtures, helpers::TestApp};

async fn start(app: &TestApp, body: &Value) -> Value {
    let answer = app.post("/api/negotiations", &app.service_token(), body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
    answer.body
}

#[tokio::test]
async fn complementary_people_end_pending_with_agreed_roles() {
    let app = TestApp::spawn().await;
    let body = start(&app, &fixtures::good_match()).await;

    let negotiation = &body["negotiation"];
    assert_eq!(body["opportunity"]["status"], "pending", "{body:#}");
    assert_eq!(negotiation["status"], "completed");
    assert_eq!(negotiation["sides"]["source"]["type"], "system");
    assert_eq!(negotiation["sides"]["candidate"]["type"], "system");
    assert_eq!(negotiation["maxTurns"], 6);
    let turns = negotiation["turns"].as_array().unwrap();
    assert_eq!(turns[0]["action"], "propose");
    assert_eq!(turns[0]["side"], "source");
    assert_eq!(turns[0]["userId"], "user-maya");
    assert_eq!(turns.last().unwrap()["action"], "accept");
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(t["turnNumber"], i as u64);
        assert!(!t["reasoning"].as_str().unwrap().is_empty());
    }
    let outcome = &negotiation["outcome"];
    assert_eq!(outcome["hasOpportunity"], true);
    assert_eq!(outcome["turnCount"], turns.len() as u64);
    assert_eq!(outcome["agreedRoles"].as_array().unwrap().len(), 2);
    assert!(outcome.get("reason").is_none());
    // The evaluator's score stays the opportunity's score.
    assert_eq!(body["opportunity"]["score"], 88.0);
}

#[tokio::test]
async fn people_with_nothing_in_common_end_rejected() {
    let app = TestApp::spawn().await;
    let body = start(&app, &fixtures::mismatch()).await;
    assert_eq!(body["opportunity"]["status"], "rejected", "{body:#}");
    let outcome = &body["negotiation"]["outcome"];
    assert_eq!(outcome["hasOpportunity"], false);
    assert_eq!(outcome["agreedRoles"], json!([]));
    assert_eq!(body["negotiation"]["turns"].as_array().unwrap().last().unwrap()["action"], "reject");
}

#[tokio::test]
async fn the_last_turn_the_cap_allows_is_a_decision() {
    let app = TestApp::spawn_with(|c| c.turn_caps.system = 2).await;
    let body = start(&app, &fixtures::good_match()).await;
    let n = &body["negotiation"];
    assert_eq!(n["maxTurns"], 2);
    let turns = n["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    let last = turns[1]["action"].as_str().unwrap();
    assert!(last == "accept" || last == "reject", "last turn was {last}");
    assert_eq!(n["outcome"]["turnCount"], 2);
}

#[tokio::test]
async fn repeating_a_create_with_the_same_opportunity_id_returns_the_existing_one() {
    let app = TestApp::spawn().await;
    let mut body = fixtures::good_match();
    body["opportunityId"] = json!("0192f4a0-0000-7000-8000-000000000001");
    let first = start(&app, &body).await;
    let again = app.post("/api/negotiations", &app.service_token(), &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["opportunity"]["id"], "0192f4a0-0000-7000-8000-000000000001");
    assert_eq!(again.body["negotiation"]["id"], first["negotiation"]["id"]);
    assert_eq!(app.count("opportunities").await, 1);
    assert_eq!(app.count("tasks").await, 1);
}

#[tokio::test]
async fn an_opportunity_id_reused_for_another_request_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let mut body = fixtures::good_match();
    body["opportunityId"] = json!("0192f4a0-0000-7000-8000-000000000002");
    let first = start(&app, &body).await;
    // The same request with its keys in another order is the same request: a retry.
    let reordered: serde_json::Map<String, Value> =
        body.as_object().unwrap().iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
    let retry = app.post("/api/negotiations", &app.service_token(), &Value::Object(reordered)).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
    assert_eq!(retry.body["negotiation"]["id"], first["negotiation"]["id"]);
    // Another match under the same id: 409, and nothing is made or changed.
    let mut other = fixtures::request(fixtures::founder(), fixtures::pastry_chef(), 40.0);
    other["opportunityId"] = body["opportunityId"].clone();
    let reused = app.post("/api/negotiations", &app.service_token(), &other).await;
    reused.assert_error(StatusCode::CONFLICT, "opportunity_id_reused");
    assert!(reused.body["error"].as_str().unwrap().contains("opportunityId"), "{}", reused.text);
    let mut rescored = body.clone();
    rescored["seedAssessment"]["score"] = json!(12);
    app.post("/api/negotiations", &app.service_token(), &rescored)
        .await
        .assert_error(StatusCode::CONFLICT, "opportunity_id_reused");
    assert_eq!((app.count("opportunities").await, app.count("tasks").await), (1, 1));
    let id = body["opportunityId"].as_str().unwrap();
    let kept = app.get(&format!("/api/opportunities/{id}"), &app.service_token()).await;
    assert_eq!(kept.body["score"], first["opportunity"]["score"], "{}", kept.text);
}

#[tokio::test]
async fn concurrent_creates_with_one_opportunity_id_make_one_negotiation() {
    let app = TestApp::spawn().await;
    let mut body = fixtures::good_match();
    body["opportunityId"] = json!("0192f4a0-0000-7000-8000-0000000000aa");
    let token = app.service_token();
    let calls = (0..8).map(|_| app.post("/api/negotiations", &token, &body));
    let answers = futures::future::join_all(calls).await;
    let created = answers.iter().filter(|a| a.status == StatusCode::CREATED).count();
    assert_eq!(created, 1);
    assert!(answers.iter().all(|a| a.status.is_success()));
    assert_eq!(app.count("tasks").await, 1);
    // Everyone got the same negotiation, and its turns were stored once.
    let id = answers[0].body["negotiation"]["id"].clone();
    assert!(answers.iter().all(|a| a.body["negotiation"]["id"] == id));
    let final_view = app.get(&format!("/api/negotiations/{}", id.as_str().unwrap()), &token).await;
    assert_eq!(final_view.body["status"], "completed");
    assert_eq!(app.count("messages").await as usize, final_view.body["turns"].as_array().unwrap().len());
}

#[tokio::test]
async fn bad_requests_are_refused_and_store_nothing() {
    let app = TestApp::spawn().await;
    let token = app.service_token();
    let good = fixtures::good_match();
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut same_user = good.clone();
    same_user["candidateUser"]["id"] = json!("user-maya");
    cases.push(("same user on both sides", same_user));
    let mut no_candidate = good.clone();
    no_candidate.as_object_mut().unwrap().remove("candidateUser");
    cases.push(("missing candidateUser", no_candidate));
    let mut no_seed = good.clone();
    no_seed.as_object_mut().unwrap().remove("seedAssessment");
    cases.push(("missing seedAssessment", no_seed));
    for score in [json!(-1), json!(100.5), json!("90"), json!(null)] {
        let mut bad = good.clone();
        bad["seedAssessment"]["score"] = score;
        cases.push(("bad seed score", bad));
    }
    let mut empty_id = good.clone();
    empty_id["sourceUser"]["id"] = json!("  ");
    cases.push(("empty user id", empty_id));
    let mut bad_opportunity = good.clone();
    bad_opportunity["opportunityId"] = json!("not-a-uuid");
    cases.push(("opportunityId not a UUID", bad_opportunity));
    let mut bad_role = good.clone();
    bad_role["seedAssessment"]["valencyRole"] = json!("boss");
    cases.push(("unknown role", bad_role));
    let mut stranger = good.clone();
    stranger["seedAssessment"]["actors"] = json!([{ "userId": "someone-else", "role": "peer" }]);
    cases.push(("actor who is not a participant", stranger));
    let mut intents_not_list = good.clone();
    intents_not_list["sourceUser"]["intents"] = json!("a string");
    cases.push(("intents not a list", intents_not_list));
    cases.push(("array body", json!([good.clone()])));
    cases.push(("unknown field", {
        let mut g = good.clone();
        g["surprise"] = json!(1);
        g
    }));

    for (what, body) in cases {
        let answer = app.post("/api/negotiations", &token, &body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{what}: {}", answer.text);
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    for raw in ["{not json", "", "null", "42"] {
        let answer = app.call_raw(Method::POST, "/api/negotiations", Some(&token), raw).await;
        answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(300 * 1024));
    let answer = app.call_raw(Method::POST, "/api/negotiations", Some(&token), huge).await;
    answer.assert_error(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    for table in ["opportunities", "conversations", "tasks", "messages", "artifacts"] {
        assert_eq!(app.count(table).await, 0, "{table} must stay empty");
    }
}

#[tokio::test]
async fn a_bad_nested_field_is_named_by_its_path_in_the_body() {
    let app = TestApp::spawn().await;
    let token = app.service_token();
    let good = fixtures::good_match();
    let error_of = |body: Value| {
        let (app, token) = (&app, &token);
        async move {
            let answer = app.post("/api/negotiations", token, &body).await;
            answer.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
            answer.body["error"].as_str().unwrap().to_owned()
        }
    };

    // A missing field is named by where it is, not only by its own name.
    let mut no_id = good.clone();
    no_id["sourceUser"].as_object_mut().unwrap().remove("id");
    let error = error_of(no_id).await;
    assert!(error.starts_with("invalid request: missing field `sourceUser.id` at line "), "{error}");
    // Deeper, and inside a list.
    let mut no_text = good.clone();
    no_text["candidateUser"]["intents"][0].as_object_mut().unwrap().remove("text");
    let error = error_of(no_text).await;
    assert!(error.contains("missing field `candidateUser.intents[0].text`"), "{error}");
    // A value of the wrong type: the path of that value.
    let mut bad_score = good.clone();
    bad_score["seedAssessment"]["score"] = json!("90");
    let error = error_of(bad_score).await;
    assert!(error.starts_with("invalid request: `seedAssessment.score`: invalid type: string"), "{error}");
    // At the top level the field's own name is its path.
    let mut no_seed = good.clone();
    no_seed.as_object_mut().unwrap().remove("seedAssessment");
    let error = error_of(no_seed).await;
    assert!(error.starts_with("invalid request: missing field `seedAssessment` at line "), "{error}");
    assert_eq!(app.count("tasks").await, 0);
}

#[tokio::test]
async fn participants_and_the_service_can_read_a_negotiation_and_nobody_else() {
    let app = TestApp::spawn().await;
    let body = start(&app, &fixtures::good_match()).await;
    let id = body["negotiation"]["id"].as_str().unwrap();
    let path = format!("/api/negotiations/{id}");
    for who in [app.service_token(), app.user_token("user-maya"), app.user_token("user-tomas")] {
        let answer = app.get(&path, &who).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        assert_eq!(answer.body["id"], id);
    }
    app.get(&path, &app.user_token("user-eve")).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get("/api/negotiations/not-a-uuid", &app.service_token())
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get("/api/negotiations/0192f4a0-0000-7000-8000-000000000009", &app.service_token())
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn opportunities_are_listed_for_their_people_and_filtered_for_the_service() {
    let app = TestApp::spawn().await;
    start(&app, &fixtures::good_match()).await;
    start(&app, &fixtures::mismatch()).await;
    let service = app.service_token();

    let all = app.get("/api/opportunities", &service).await;
    assert_eq!(all.body["opportunities"].as_array().unwrap().len(), 2);
    let pending = app.get("/api/opportunities?status=pending", &service).await;
    let items = pending.body["opportunities"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["sourceUserId"], "user-maya");
    let by_user = app.get("/api/opportunities?userId=user-raj", &service).await;
    assert_eq!(by_user.body["opportunities"].as_array().unwrap().len(), 1);

    let maya = app.get("/api/opportunities", &app.user_token("user-maya")).await;
    let mine = maya.body["opportunities"].as_array().unwrap();
    assert_eq!(mine.len(), 1);
    let id = mine[0]["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/api/opportunities/{id}"), &app.user_token("user-tomas")).await.status,
        StatusCode::OK
    );
    app.get(&format!("/api/opportunities/{id}"), &app.user_token("user-raj"))
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get("/api/opportunities?userId=user-raj", &app.user_token("user-maya"))
        .await
        .assert_error(StatusCode::FORBIDDEN, "forbidden");
    app.get("/api/opportunities?status=maybe", &service).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    app.get("/api/opportunities?limit=0", &service).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");

    // Paging: one at a time, newest first, then nothing.
    let page1 = app.get("/api/opportunities?limit=1", &service).await;
    let cursor = page1.body["nextCursor"].as_str().unwrap().to_owned();
    let page2 = app.get(&format!("/api/opportunities?limit=1&cursor={cursor}"), &service).await;
    assert_eq!(page2.body["opportunities"].as_array().unwrap().len(), 1);
    assert_ne!(page2.body["opportunities"][0]["id"], page1.body["opportunities"][0]["id"]);
    assert_eq!(page2.body["nextCursor"], Value::Null);
}

/// Gives `user_id` a live personal agent directly in the database, so that their seat is played
/// by a personal agent (whose turns are parked).
pub async fn give_personal_agent(app: &TestApp, user_id: &str) {
    let agent = uuid::Uuid::now_v7();
    sqlx::query("INSERT INTO agents (agent_id, owner_user_id, name) VALUES ($1, $2, 'test agent')")
        .bind(agent)
        .bind(user_id)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO api_keys (api_key_id, agent_id, prefix, key_hash) VALUES ($1, $2, 'pk_test', $3)")
        .bind(uuid::Uuid::now_v7())
        .bind(agent)
        .bind(agent.as_bytes().to_vec())
        .execute(&app.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_personal_seat_parks_its_turn_and_canceling_ends_the_negotiation_once() {
    let app = TestApp::spawn().await;
    give_personal_agent(&app, "user-tomas").await;
    let body = start(&app, &fixtures::good_match()).await;
    let n = &body["negotiation"];
    assert_eq!(n["sides"]["candidate"]["type"], "personal");
    assert_eq!(n["maxTurns"], 8);
    assert_eq!(n["status"], "waiting_for_agent");
    assert_eq!(n["awaitingUserId"], "user-tomas");
    assert_eq!(n["turns"].as_array().unwrap().len(), 1);
    assert_eq!(body["opportunity"]["status"], "negotiating");

    let id = n["id"].as_str().unwrap();
    let path = format!("/api/negotiations/{id}");
    let answer = app.call(Method::DELETE, &path, Some(&app.user_token("user-maya")), None).await;
    answer.assert_error(StatusCode::FORBIDDEN, "forbidden");
    let answer = app.call(Method::DELETE, &path, Some(&app.service_token()), None).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.body["status"], "canceled");
    assert_eq!(answer.body["outcome"]["reason"], "canceled");
    assert_eq!(answer.body["outcome"]["hasOpportunity"], false);
    let opportunity = app
        .get(&format!("/api/opportunities/{}", body["opportunity"]["id"].as_str().unwrap()), &app.service_token())
        .await;
    assert_eq!(opportunity.body["status"], "stalled");

    let again = app.call(Method::DELETE, &path, Some(&app.service_token()), None).await;
    again.assert_error(StatusCode::CONFLICT, "already_completed");
    assert_eq!(app.count("artifacts").await, 1);
}

#[tokio::test]
async fn a_negotiation_left_working_by_a_crash_is_resumed_at_start_up() {
    let app = TestApp::spawn().await;
    // Simulate a crash after the opening turn: rewind a finished negotiation to "working after
    // turn 0" (delete later turns and the outcome) as if the process died between turns.
    let body = start(&app, &fixtures::good_match()).await;
    let id: uuid::Uuid = body["negotiation"]["id"].as_str().unwrap().parse().unwrap();
    let opportunity: uuid::Uuid = body["opportunity"]["id"].as_str().unwrap().parse().unwrap();
    sqlx::query("DELETE FROM messages WHERE task_id = $1 AND turn_number > 0")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM artifacts WHERE task_id = $1").bind(id).execute(&app.pool).await.unwrap();
    sqlx::query("UPDATE tasks SET state = 'working', turn_count = 1, completed_at = NULL WHERE task_id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE opportunities SET status = 'negotiating' WHERE opportunity_id = $1")
        .bind(opportunity)
        .execute(&app.pool)
        .await
        .unwrap();

    // A new process on the same database resumes it without being asked.
    let restarted = TestApp::spawn_on(&app.database_url, |_| {}).await;
    let path = format!("/api/negotiations/{id}");
    let mut status = Value::Null;
    for _ in 0..100 {
        let answer = restarted.get(&path, &restarted.service_token()).await;
        status = answer.body["status"].clone();
        if status == "completed" {
            assert_eq!(answer.body["outcome"]["hasOpportunity"], true);
            assert_eq!(answer.body["turns"][0]["turnNumber"], 0);
            let artifacts: i64 = sqlx::query_scalar("SELECT count(*) FROM artifacts WHERE task_id = $1")
                .bind(id)
                .fetch_one(&restarted.pool)
                .await
                .unwrap();
            assert_eq!(artifacts, 1);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the negotiation was not resumed; status {status}");
}

#[tokio::test]
async fn an_acknowledged_accept_is_never_overturned_by_a_concurrent_cancel() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let (mut accepted, mut canceled) = (0, 0);
    for i in 0..12 {
        let mut body = fixtures::good_match();
        body["sourceUser"]["id"] = json!(format!("user-maya-{i}"));
        let started = app.start(&body).await;
        let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
        let token = app.claim_token(&tomas).await;
        let service = app.service_token();
        let accept = crate::helpers::answer("accept", Some(&token));
        let path = format!("/api/negotiations/{id}");
        let (respond, cancel) =
            tokio::join!(app.respond(&tomas, &id, &accept), app.call(Method::DELETE, &path, Some(&service), None),);
        let view = app.get(&format!("/api/negotiations/{id}"), &service).await.body;
        let stored_accept = view["turns"].as_array().unwrap().iter().any(|t| t["action"] == "accept");
        match (respond.status, cancel.status) {
            (StatusCode::OK, StatusCode::CONFLICT) => {
                accepted += 1;
                cancel.assert_error(StatusCode::CONFLICT, "already_completed");
                assert_eq!(
                    (&view["status"], &view["outcome"]["hasOpportunity"]),
                    (&json!("completed"), &json!(true)),
                    "{view}"
                );
                assert!(stored_accept);
            }
            (StatusCode::CONFLICT, StatusCode::OK) => {
                canceled += 1;
                assert_eq!(view["status"], "canceled", "{view}");
                assert!(!stored_accept, "a refused accept left its turn: {view}");
            }
            other => panic!("both or neither won: {other:?}: {} / {}", respond.text, cancel.text),
        }
    }
    eprintln!("accept vs cancel, 12 races: {accepted} accepts won, {canceled} cancels won; the other always 409");
}
