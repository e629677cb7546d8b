//! Registering personal agents and managing their keys.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{fixtures, helpers::TestApp};

#[tokio::test]
async fn a_user_registers_an_agent_and_its_key_is_shown_once_and_stored_hashed() {
    let app = TestApp::spawn().await;
    let token = app.user_token("user-tomas");
    let created =
        app.post("/api/agents", &token, &json!({ "name": "Tomas's agent", "description": "runs on my laptop" })).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let agent = &created.body["agent"];
    assert_eq!(agent["type"], "personal");
    assert_eq!(agent["status"], "active");
    assert_eq!(agent["negotiationMode"], "enabled");
    let key = created.body["apiKey"]["key"].as_str().unwrap();
    assert!(key.starts_with("pk_") && key.len() >= 3 + 32, "{key}");
    assert!(key.starts_with(created.body["apiKey"]["prefix"].as_str().unwrap()));
    let stored: Vec<u8> = sqlx::query_scalar("SELECT key_hash FROM api_keys").fetch_one(&app.pool).await.unwrap();
    assert_ne!(stored, key.as_bytes());
    assert!(!created.text.contains("key_hash"));

    let id = agent["id"].as_str().unwrap();
    let listed = app.get("/api/agents", &token).await;
    assert_eq!(listed.body["agents"].as_array().unwrap().len(), 1);
    assert!(!listed.text.contains(key), "a listing must never show the key");
    let one = app.get(&format!("/api/agents/{id}"), &token).await;
    assert_eq!(one.body["keys"][0]["prefix"], created.body["apiKey"]["prefix"]);

    // Other users see nothing of it.
    let eve = app.user_token("user-eve");
    assert_eq!(app.get("/api/agents", &eve).await.body["agents"], json!([]));
    app.get(&format!("/api/agents/{id}"), &eve).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    // The platform's service token is not a user.
    app.post("/api/agents", &app.service_token(), &json!({ "name": "x" }))
        .await
        .assert_error(StatusCode::FORBIDDEN, "forbidden");
}

#[tokio::test]
async fn bad_agent_bodies_are_refused() {
    let app = TestApp::spawn().await;
    let token = app.user_token("user-tomas");
    for body in [
        json!({}),
        json!({ "name": "" }),
        json!({ "name": "x".repeat(201) }),
        json!({ "name": "a", "negotiationMode": "sometimes" }),
        json!({ "name": 5 }),
        json!({ "name": "a", "extra": 1 }),
    ] {
        app.post("/api/agents", &token, &body).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    assert_eq!(app.count("agents").await, 0);
    let agent = app.register_agent("user-tomas").await;
    let path = format!("/api/agents/{}", agent.id);
    for body in [json!({ "status": "asleep" }), json!({ "negotiationMode": 1 }), json!({ "name": "" })] {
        app.call(Method::PATCH, &path, Some(&token), Some(&body))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    let expired = json!({ "expiresAt": "2001-01-01T00:00:00Z" });
    app.call(Method::POST, &format!("{path}/keys"), Some(&token), Some(&expired))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once_and_other_keys_keep_working() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let token = app.user_token("user-tomas");
    let second = app.call(Method::POST, &format!("/api/agents/{}/keys", agent.id), Some(&token), None).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.text);
    let second_key = second.body["key"].as_str().unwrap().to_owned();

    assert_eq!(app.pickup(&agent, None).await.status, StatusCode::NO_CONTENT);
    let revoked =
        app.call(Method::DELETE, &format!("/api/agents/{}/keys/{}", agent.id, agent.key_id), Some(&token), None).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    app.pickup(&agent, None).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");

    // Bearer works like x-api-key.
    let via_bearer = app
        .client
        .post(format!("{}/api/agents/{}/negotiations/pickup", app.base, agent.id))
        .bearer_auth(&second_key)
        .send()
        .await
        .unwrap();
    assert_eq!(via_bearer.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_key_works_only_for_its_own_agent() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let maya = app.register_agent("user-maya").await;
    let borrowed = crate::helpers::TestAgent { id: tomas.id.clone(), ..maya.clone() };
    app.pickup(&borrowed, None).await.assert_error(StatusCode::FORBIDDEN, "forbidden");
    let nobody = crate::helpers::TestAgent { key: "pk_not-a-real-key".into(), ..tomas.clone() };
    app.pickup(&nobody, None).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let no_key = app.call(Method::POST, &format!("/api/agents/{}/negotiations/pickup", tomas.id), None, None).await;
    no_key.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn keys_and_tokens_where_people_try_them_work_or_say_what_the_route_takes() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let maya = app.register_agent("user-maya").await;
    // An agent reads itself with its own key, as its owner reads it with a user token.
    let itself = app.agent_call(&tomas, Method::GET, "", None).await;
    assert_eq!(itself.status, StatusCode::OK, "{}", itself.text);
    assert_eq!(itself.body["id"], tomas.id.as_str());
    assert_eq!(itself.body, app.get(&format!("/api/agents/{}", tomas.id), &app.user_token("user-tomas")).await.body);
    // Another agent's key may not.
    let borrowed = crate::helpers::TestAgent { id: tomas.id.clone(), ..maya.clone() };
    app.agent_call(&borrowed, Method::GET, "", None).await.assert_error(StatusCode::FORBIDDEN, "forbidden");

    // An agent's key on a route for people: the answer says which token the route takes.
    for (path, takes) in [("/api/opportunities", "a user's or the platform's token"), ("/api/agents", "a user token")] {
        for bearer in [false, true] {
            let mut req = app.client.get(format!("{}{path}", app.base));
            req = if bearer { req.bearer_auth(&tomas.key) } else { req.header("x-api-key", &tomas.key) };
            let refused = crate::helpers::Answer::from(req.send().await.unwrap()).await;
            refused.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
            let message = refused.body["error"].as_str().unwrap();
            assert!(
                message.contains(&format!("this route takes {takes}")) && message.contains("not an agent's API key"),
                "{message}"
            );
        }
    }
    let created = app.call(Method::POST, "/api/negotiations", None, Some(&fixtures::good_match())).await;
    assert_eq!(created.body["error"], "missing bearer token", "no credentials at all: {}", created.text);
}

#[tokio::test]
async fn the_side_kind_follows_the_agents_mode_and_keys() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let token = app.user_token("user-tomas");
    let path = format!("/api/agents/{}", agent.id);
    let patched = app.call(Method::PATCH, &path, Some(&token), Some(&json!({ "negotiationMode": "disabled" }))).await;
    assert_eq!(patched.body["negotiationMode"], "disabled");
    let n = app.start(&fixtures::good_match()).await;
    assert_eq!(n["negotiation"]["sides"]["candidate"]["type"], "system");

    app.call(Method::PATCH, &path, Some(&token), Some(&json!({ "negotiationMode": "enabled" }))).await;
    let mut body = fixtures::good_match();
    body["sourceUser"]["id"] = json!("user-ana");
    let n = app.start(&body).await;
    assert_eq!(n["negotiation"]["sides"]["candidate"]["type"], "personal");
    assert_eq!(n["negotiation"]["maxTurns"], 8);

    // Deleting the agent gives the claimed turn back and removes its keys.
    let picked = app.pickup(&agent, None).await;
    assert_eq!(picked.status, StatusCode::OK);
    let deleted = app.call(Method::DELETE, &path, Some(&token), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let (state, _, _) = app.snapshot(n["negotiation"]["id"].as_str().unwrap()).await;
    assert_eq!(state, "waiting_for_agent");
    assert_eq!(app.count("api_keys").await, 0);
}
