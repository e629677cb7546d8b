//! Registering an agent by its AgentCard: the card fetched from a card server on loopback (the
//! tests allow private targets for that), the interface chosen on it, what is kept and shown
//! (never the credential), refresh and detach, and every kind of unusable card refused with
//! why. With the setting off, a loopback card URL is refused before any connection is made.
//! Traffic goes to loopback only.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Body,
    http::{StatusCode as S, header},
    response::{IntoResponse, Redirect, Response},
    routing::get,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp};

/// The fields every card carries, with `rest` added.
fn card(name: &str, rest: Value) -> Value {
    let mut c = json!({
        "name": name,
        "description": format!("{name}, a test agent"),
        "version": "1.2.3",
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {"id": "review", "name": "Code review", "description": "Reviews a diff", "tags": ["code"]},
            {"id": "summarize", "name": "Summaries", "description": "Summarizes", "tags": []},
        ],
    });
    c.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
    c
}

/// A card server on 127.0.0.1: its base URL and the name its `/mutable.json` card gives.
struct CardServer {
    base: String,
    port: u16,
    mutable_name: Arc<Mutex<String>>,
}

/// Ten megabytes, sent in 64 KiB chunks without a `Content-Length`.
fn ten_megabytes() -> Body {
    let chunk = bytes::Bytes::from(vec![b' '; 64 * 1024]);
    Body::from_stream(futures::stream::iter((0..160).map(move |_| Ok::<_, std::io::Error>(chunk.clone()))))
}

/// A body that never ends: a client that read it whole would wait until its timeout.
fn endless() -> Body {
    let chunk = bytes::Bytes::from(vec![b' '; 16 * 1024]);
    Body::from_stream(futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone())))
}

async fn card_server() -> CardServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // The same cards on another port of the same host: another origin.
    let other_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_port =
        format!("http://127.0.0.1:{}/v1/.well-known/agent-card.json", other_listener.local_addr().unwrap().port());
    let base = format!("http://127.0.0.1:{port}");
    let mutable_name = Arc::new(Mutex::new("First name".to_owned()));
    let v1 = card(
        "One point oh",
        json!({"supportedInterfaces": [
            {"url": format!("{base}/grpc"), "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]}),
    );
    let v03 = card(
        "Oh point three",
        json!({"url": format!("{base}/a2a/v03"), "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"}),
    );
    // A dual card lists 0.3 first; 1.0 is still chosen.
    let dual = card(
        "Dual",
        json!({
            "supportedInterfaces": [
                {"url": format!("{base}/a2a/v03"), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": format!("{base}/a2a/v1"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            ],
            "url": format!("{base}/a2a/v03"), "protocolVersion": "0.3.0",
        }),
    );
    // Bindu's card, at its older well-known path: claims 1.0, carries Bindu's marks, no
    // interfaces, its endpoint is its `url`.
    let bindu = json!({
        "id": "5f2b8c1e-8a7d-4c3b-9e4f-1a2b3c4d5e6f",
        "name": "bindu_echo",
        "description": "An AI agent exposed as an A2A agent.",
        "url": base,
        "version": "1.0.0",
        "protocolVersion": "1.0.0",
        "skills": [{"id": "echo", "name": "echo", "documentationPath": format!("{base}/agent/skills/echo")}],
        "capabilities": {"streaming": false, "extensions": [
            {"uri": "did:bindu:tester:echo:5f2b8c1e", "description": "DID-based identity for echo", "required": false}
        ]},
        "kind": "agent",
        "numHistorySessions": 10,
        "extraData": {"created": 1767225600, "serverInfo": "bindu Agent Server"},
        "debugMode": false,
        "debugLevel": 1,
        "monitoring": false,
        "telemetry": false,
        "agentTrust": {"identityProvider": "custom", "inheritedRoles": [], "trustVerificationRequired": false,
                       "allowedOperations": {}},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
    });
    let grpc_only = card(
        "Grpc only",
        json!({"supportedInterfaces": [
            {"url": format!("{base}/grpc"), "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": format!("{base}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ]}),
    );
    let json_of = |v: Value| move || std::future::ready(Json(v));
    let name = mutable_name.clone();
    let mutable_base = base.clone();
    let other_host = format!("http://localhost:{port}/v1/.well-known/agent-card.json");
    let app = Router::new()
        .route("/v1/.well-known/agent-card.json", get(json_of(v1)))
        .route("/v03/agent-card.json", get(json_of(v03)))
        .route("/dual.json", get(json_of(dual)))
        .route("/.well-known/agent.json", get(json_of(bindu)))
        .route("/grpc-only.json", get(json_of(grpc_only)))
        .route("/missing-fields.json", get(json_of(json!({"name": "Half a card"}))))
        .route("/not-json", get(|| async { "this is not a card" }))
        .route("/gone.json", get(|| async { (S::NOT_FOUND, "no card here") }))
        .route("/huge.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], ten_megabytes()) }))
        .route("/endless.json", get(|| async { ([(header::CONTENT_TYPE, "application/json")], endless()) }))
        .route("/same-host-redirect", get(|| async { Redirect::temporary("/v03/agent-card.json") }))
        .route("/other-host-redirect", get(move || std::future::ready(Redirect::temporary(&other_host))))
        .route("/other-port-redirect", get(move || std::future::ready(Redirect::temporary(&other_port))))
        .route(
            "/mutable.json",
            get(move || {
                let name = name.lock().unwrap().clone();
                let body = card(&name, json!({"url": format!("{mutable_base}/a2a/v03"), "protocolVersion": "0.3.0"}));
                std::future::ready(Json(body).into_response())
            }),
        )
        .fallback(|| async { Response::builder().status(S::NOT_FOUND).body(Body::empty()).unwrap() });
    let other_app = app.clone();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    tokio::spawn(async move { axum::serve(other_listener, other_app).await.unwrap() });
    CardServer { base, port, mutable_name }
}

/// A Parley that may call agents on loopback, and a card server beside it.
async fn spawn() -> (TestApp, CardServer) {
    let app = TestApp::spawn_with(|c| c.a2a_allow_private_targets = true).await;
    (app, card_server().await)
}

async fn register(app: &TestApp, user: &str, body: &Value) -> Answer {
    app.post("/api/agents", &app.user_token(user), body).await
}

const SECRET: &str = "s3cret-agent-credential-0123456789";

#[tokio::test]
async fn a_1_0_card_registers_an_agent_parley_calls_and_the_credential_is_never_shown() {
    let (app, cards) = spawn().await;
    let card_url = format!("{}/v1/.well-known/agent-card.json", cards.base);
    let created = register(
        &app,
        "user-tomas",
        &json!({"name": "Reviewer", "agentCardUrl": card_url, "a2aAuth": {"scheme": "bearer", "credential": SECRET}}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert!(!created.text.contains(SECRET), "the credential came back: {}", created.text);
    let agent = &created.body["agent"];
    assert_eq!(agent["delivery"], "a2a");
    assert_eq!(agent["agentCardUrl"], card_url.as_str());
    let kept = &created.body["agentCard"];
    assert_eq!(kept["agentCardUrl"], card_url.as_str());
    assert_eq!(kept["interfaceUrl"], format!("{}/a2a", cards.base));
    assert_eq!((kept["dialect"].as_str(), kept["protocolVersion"].as_str()), (Some("1.0"), Some("1.0")));
    assert_eq!(kept["name"], "One point oh");
    assert_eq!(kept["streaming"], true);
    assert_eq!(
        kept["skills"],
        json!([{"id": "review", "name": "Code review"}, {"id": "summarize", "name": "Summaries"}])
    );
    assert_eq!(kept["a2aAuth"], json!({"scheme": "bearer"}));
    assert!(kept["fetchedAt"].is_string());
    let id = agent["id"].as_str().unwrap();

    // Every read shows it is called by Parley, with its card URL, never the credential.
    let owner = app.user_token("user-tomas");
    for path in ["/api/agents".to_owned(), format!("/api/agents/{id}"), format!("/api/agents/{id}/agent-card")] {
        let read = app.get(&path, &owner).await;
        assert_eq!(read.status, StatusCode::OK, "{path}: {}", read.text);
        assert!(!read.text.contains(SECRET), "{path} showed the credential: {}", read.text);
        assert!(read.text.contains(&card_url), "{path}: {}", read.text);
    }
    let listed = app.get("/api/agents", &owner).await;
    assert_eq!(listed.body["agents"][0]["delivery"], "a2a");
    let by_service = app.get(&format!("/api/agents/{id}/agent-card"), &app.service_token()).await;
    assert_eq!(by_service.status, StatusCode::OK, "{}", by_service.text);
    assert_eq!(by_service.body, app.get(&format!("/api/agents/{id}/agent-card"), &owner).await.body);
    assert!(!by_service.text.contains(SECRET));
    // The agent's own key reads the agent (with its card URL), not what Parley presents to it.
    let key = created.body["apiKey"]["key"].as_str().unwrap();
    let me = app.client.get(format!("{}/api/agents/me", app.base)).header("x-api-key", key).send().await.unwrap();
    let me = Answer::from(me).await;
    assert_eq!(me.body["agentCardUrl"], card_url.as_str());
    let by_key = app
        .client
        .get(format!("{}/api/agents/{id}/agent-card", app.base))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap();
    Answer::from(by_key).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");

    // Kept for the calls to come: the interface, the dialect, the whole card, the credential.
    let (interface, dialect, scheme, credential, card_name): (String, String, String, String, String) = sqlx::query_as(
        "SELECT interface_url, dialect, auth_scheme, auth_credential, card->>'name' FROM agent_cards
              WHERE agent_id = $1::uuid",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        (interface.as_str(), dialect.as_str(), scheme.as_str(), credential.as_str(), card_name.as_str()),
        (format!("{}/a2a", cards.base).as_str(), "1.0", "bearer", SECRET, "One point oh")
    );
    // A polling agent says so.
    let polling = app.register_agent("user-tomas").await;
    let read = app.get(&format!("/api/agents/{}", polling.id), &owner).await;
    assert_eq!((read.body["delivery"].as_str(), &read.body["agentCardUrl"]), (Some("polling"), &Value::Null));
    app.get(&format!("/api/agents/{}/agent-card", polling.id), &owner)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");

    // Deleting the agent deletes its card and the credential with it.
    let deleted = app.call(Method::DELETE, &format!("/api/agents/{id}"), Some(&owner), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert_eq!(app.count("agent_cards").await, 0);
}

#[tokio::test]
async fn a_0_3_card_a_bindu_card_and_a_same_host_redirect_register_with_their_dialects() {
    let (app, cards) = spawn().await;
    let cases = [
        ("/v03/agent-card.json", "/a2a/v03", "0.3", "0.3.0", true),
        ("/.well-known/agent.json", "/", "bindu", "1.0.0", false),
        ("/same-host-redirect", "/a2a/v03", "0.3", "0.3.0", true),
    ];
    for (path, interface, dialect, version, streaming) in cases {
        let created =
            register(&app, "user-ana", &json!({"name": "x", "agentCardUrl": format!("{}{path}", cards.base)})).await;
        assert_eq!(created.status, StatusCode::CREATED, "{path}: {}", created.text);
        let kept = &created.body["agentCard"];
        assert_eq!(kept["interfaceUrl"], format!("{}{interface}", cards.base), "{path}");
        assert_eq!(
            (kept["dialect"].as_str(), kept["protocolVersion"].as_str()),
            (Some(dialect), Some(version)),
            "{path}"
        );
        assert_eq!(kept["streaming"], streaming, "{path}");
        assert_eq!(kept["a2aAuth"], Value::Null, "{path}");
    }
    // After a redirect the card is kept under the URL it was read from.
    let listed = app.get("/api/agents", &app.user_token("user-ana")).await;
    assert_eq!(listed.body["agents"][2]["agentCardUrl"], format!("{}/v03/agent-card.json", cards.base));
    assert_eq!(listed.body["agents"][1]["agentCardUrl"], format!("{}/.well-known/agent.json", cards.base));
}

#[tokio::test]
async fn a_jsonrpc_interface_at_1_0_is_preferred_over_0_3() {
    let (app, cards) = spawn().await;
    let created =
        register(&app, "user-ana", &json!({"name": "x", "agentCardUrl": format!("{}/dual.json", cards.base)})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["agentCard"]["interfaceUrl"], format!("{}/a2a/v1", cards.base));
    assert_eq!(created.body["agentCard"]["dialect"], "1.0");
}

#[tokio::test]
async fn unusable_cards_are_refused_saying_why_and_nothing_is_registered() {
    let (app, cards) = spawn().await;
    let cases = [
        ("/grpc-only.json", "no usable JSONRPC interface"),
        ("/missing-fields.json", "lacks required fields"),
        ("/not-json", "not JSON"),
        ("/gone.json", "HTTP 404"),
        ("/huge.json", "larger than 64 KiB"),
        ("/endless.json", "larger than 64 KiB"),
        ("/other-host-redirect", "another origin"),
        ("/other-port-redirect", "another origin"),
    ];
    for (path, why) in cases {
        let started = Instant::now();
        let refused =
            register(&app, "user-ana", &json!({"name": "x", "agentCardUrl": format!("{}{path}", cards.base)})).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "agent_card_invalid");
        let message = refused.body["error"].as_str().unwrap();
        assert!(message.contains(why), "{path}: {message}");
        // The fetch stops at 64 KiB: an endless card is refused long before the 5 s limit.
        assert!(started.elapsed() < Duration::from_secs(4), "{path} took {:?}", started.elapsed());
    }
    // Not URLs, not http(s), too long, a credential without a card: refused before any fetch.
    for (body, code, why) in [
        (json!({"name": "x", "agentCardUrl": "not a url"}), "agent_card_invalid", "not an absolute URL"),
        (json!({"name": "x", "agentCardUrl": "ftp://127.0.0.1/card"}), "agent_card_invalid", "only http and https"),
        (json!({"name": "x", "agentCardUrl": format!("{}/{}", cards.base, "a".repeat(2100))}), "invalid_body", "2048"),
        (json!({"name": "x", "a2aAuth": {"scheme": "bearer", "credential": "x"}}), "invalid_body", "agentCardUrl"),
        (
            json!({"name": "x", "agentCardUrl": format!("{}/v03/agent-card.json", cards.base),
                   "a2aAuth": {"scheme": "digest", "credential": "x"}}),
            "invalid_body",
            "bearer or basic",
        ),
        (
            json!({"name": "x", "agentCardUrl": format!("{}/v03/agent-card.json", cards.base),
                   "a2aAuth": {"scheme": "bearer", "credential": "has spaces in it"}}),
            "invalid_body",
            "visible ASCII",
        ),
    ] {
        let refused = register(&app, "user-ana", &body).await;
        refused.assert_error(StatusCode::BAD_REQUEST, code);
        assert!(refused.body["error"].as_str().unwrap().contains(why), "{body}: {}", refused.text);
    }
    assert_eq!(app.count("agents").await, 0);
    assert_eq!(app.count("agent_cards").await, 0);
}

#[tokio::test]
async fn a_loopback_card_is_refused_without_the_setting_before_any_connection() {
    let app = TestApp::spawn().await;
    // Nothing listens at these ports: the refusal must come from the guard, not a failed connect.
    for url in ["http://127.0.0.1:9/.well-known/agent-card.json", "http://[::1]:9/card", "http://localhost:9/card"] {
        let refused = register(&app, "user-ana", &json!({"name": "x", "agentCardUrl": url})).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "agent_card_invalid");
        let message = refused.body["error"].as_str().unwrap();
        assert!(message.contains("loopback address"), "{url}: {message}");
        assert!(message.contains("PARLEY_A2A_ALLOW_PRIVATE_TARGETS"), "{url}: {message}");
    }
    assert_eq!(app.count("agents").await, 0);
}

#[tokio::test]
async fn put_attaches_and_refreshes_and_delete_detaches() {
    let (app, cards) = spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let owner = app.user_token("user-tomas");
    let path = format!("/api/agents/{}/agent-card", agent.id);
    let put = |body: Value| {
        let (app, path, owner) = (&app, path.clone(), owner.clone());
        async move { app.call(Method::PUT, &path, Some(&owner), Some(&body)).await }
    };
    let mutable = format!("{}/mutable.json", cards.base);

    // A polling agent is attached, with a credential.
    let attached =
        put(json!({"agentCardUrl": mutable, "a2aAuth": {"scheme": "basic", "credential": "dXNlcjpwdw=="}})).await;
    assert_eq!(attached.status, StatusCode::OK, "{}", attached.text);
    assert_eq!(attached.body["name"], "First name");
    assert_eq!(attached.body["a2aAuth"], json!({"scheme": "basic"}));
    assert!(!attached.text.contains("dXNlcjpwdw=="));
    let fetched_at = |a: &Answer| chrono::DateTime::parse_from_rfc3339(a.body["fetchedAt"].as_str().unwrap()).unwrap();
    let first_fetch = fetched_at(&attached);
    assert_eq!(app.get(&format!("/api/agents/{}", agent.id), &owner).await.body["delivery"], "a2a");

    // The card changes; a refresh reads it again and keeps the credential.
    *cards.mutable_name.lock().unwrap() = "Second name".to_owned();
    let refreshed = put(json!({"agentCardUrl": mutable})).await;
    assert_eq!(refreshed.status, StatusCode::OK, "{}", refreshed.text);
    assert_eq!(refreshed.body["name"], "Second name");
    assert_eq!(refreshed.body["a2aAuth"], json!({"scheme": "basic"}));
    assert!(fetched_at(&refreshed) > first_fetch);

    // Another card replaces it; `a2aAuth: null` removes the credential.
    let replaced =
        put(json!({"agentCardUrl": format!("{}/v1/.well-known/agent-card.json", cards.base), "a2aAuth": null})).await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.text);
    assert_eq!((replaced.body["dialect"].as_str(), &replaced.body["a2aAuth"]), (Some("1.0"), &Value::Null));
    let credential: Option<String> =
        sqlx::query_scalar("SELECT auth_credential FROM agent_cards").fetch_one(&app.pool).await.unwrap();
    assert_eq!(credential, None);

    // A refresh to an unusable card is refused and changes nothing.
    put(json!({"agentCardUrl": format!("{}/grpc-only.json", cards.base)}))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "agent_card_invalid");
    assert_eq!(app.get(&path, &owner).await.body["dialect"], "1.0");

    // The platform may refresh it too.
    let by_service =
        app.call(Method::PUT, &path, Some(&app.service_token()), Some(&json!({"agentCardUrl": mutable}))).await;
    assert_eq!(by_service.status, StatusCode::OK, "{}", by_service.text);

    // Detached: the agent polls again.
    let detached = app.call(Method::DELETE, &path, Some(&owner), None).await;
    assert_eq!(detached.status, StatusCode::NO_CONTENT, "{}", detached.text);
    let read = app.get(&format!("/api/agents/{}", agent.id), &owner).await;
    assert_eq!((read.body["delivery"].as_str(), &read.body["agentCardUrl"]), (Some("polling"), &Value::Null));
    app.get(&path, &owner).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    app.call(Method::DELETE, &path, Some(&owner), None).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.count("agent_cards").await, 0);
}

#[tokio::test]
async fn another_users_agent_card_does_not_exist_for_them() {
    let (app, cards) = spawn().await;
    let created = register(
        &app,
        "user-tomas",
        &json!({"name": "x", "agentCardUrl": format!("{}/v03/agent-card.json", cards.base),
                "a2aAuth": {"scheme": "bearer", "credential": SECRET}}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let path = format!("/api/agents/{}/agent-card", created.body["agent"]["id"].as_str().unwrap());
    let eve = app.user_token("user-eve");
    let body = json!({"agentCardUrl": format!("{}/v1/.well-known/agent-card.json", cards.base)});
    for (method, body) in [(Method::GET, None), (Method::PUT, Some(&body)), (Method::DELETE, None)] {
        let refused = app.call(method.clone(), &path, Some(&eve), body).await;
        refused.assert_error(StatusCode::NOT_FOUND, "not_found");
        assert!(
            !refused.text.contains(SECRET) && !refused.text.contains(&cards.port.to_string()),
            "{method}: {}",
            refused.text
        );
    }
    // Nothing changed.
    let kept = app.get(&path, &app.user_token("user-tomas")).await;
    assert_eq!(kept.body["dialect"], "0.3");
}

#[tokio::test]
async fn an_owner_who_keeps_asking_for_card_fetches_is_answered_429_and_others_are_not() {
    let (app, cards) = spawn().await;
    let mutable = format!("{}/mutable.json", cards.base);
    let put = |user: &'static str, agent: String| {
        let (app, mutable) = (&app, mutable.clone());
        async move {
            let path = format!("/api/agents/{agent}/agent-card");
            app.call(Method::PUT, &path, Some(&app.user_token(user)), Some(&json!({"agentCardUrl": mutable}))).await
        }
    };
    let agent = app.register_agent("user-zoe").await;
    for n in 0..CARD_FETCH_BURST {
        let fetched = put("user-zoe", agent.id.clone()).await;
        assert_eq!(fetched.status, StatusCode::OK, "fetch {n}: {}", fetched.text);
    }
    let refused = put("user-zoe", agent.id.clone()).await;
    refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert!(refused.text.contains("AgentCard fetches"), "{}", refused.text);
    // Someone else's fetches are their own.
    let other = app.register_agent("user-ana").await;
    assert_eq!(put("user-ana", other.id.clone()).await.status, StatusCode::OK);
}

/// The card fetches an owner may make at once (the service's `agent_cards::CARD_FETCH_BURST`).
const CARD_FETCH_BURST: u32 = 10;
