//! The authorization matrix: every route against every kind of wrong credential gives the
//! documented status and an error body that leaks nothing; and credentials come before
//! validation: a bad credential is answered as one (401, or 403 for the wrong role) on every
//! route even when the path, the query or the body is bad too.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{
    fixtures,
    helpers::{TEST_SECRET, TestApp, answer},
};
use parley::{CallerRole, JwtKeys};

/// Who a route is for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Audience {
    /// The platform (service role).
    Service,
    /// Any user or the service, showing only what the caller may see (404 for others).
    Participant,
    /// A user (role user) acting on their own things.
    Owner,
    /// A personal agent's API key only.
    AgentKey,
    /// Any active agent's API key (the agent reads itself).
    AnyAgentKey,
    /// A personal agent's key or its owner's JWT.
    AgentOrOwner,
    /// A personal agent's key or its owner's JWT; anyone else is told 403.
    AgentManager,
    /// Like `AgentManager`, and the service too.
    AgentReader,
    /// A requester's key, its owner's JWT, or the service; anyone else is told 404.
    Requester,
    /// A requester's API key only; another agent's key is told 404.
    RequesterKey,
    /// Any JWT or agent key, showing only what the caller may see (404 for others): an A2A task.
    TaskReader,
    /// Any valid credentials.
    Anyone,
    /// The owner's JWT or the service's, never an agent's key: an agent's AgentCard.
    OwnerOrPlatform,
}

#[derive(Clone, Copy, Debug)]
enum Cred {
    Nothing,
    Malformed,
    Expired,
    WrongSecret,
    OtherUsersJwt,
    OtherUsersAgentKey,
    RevokedKey,
    WrongRole,
}

const CREDS: [Cred; 8] = [
    Cred::Nothing,
    Cred::Malformed,
    Cred::Expired,
    Cred::WrongSecret,
    Cred::OtherUsersJwt,
    Cred::OtherUsersAgentKey,
    Cred::RevokedKey,
    Cred::WrongRole,
];

fn expected(audience: Audience, cred: Cred) -> StatusCode {
    use Audience as A;
    use Cred as C;
    match (audience, cred) {
        (_, C::Nothing | C::Malformed | C::Expired | C::WrongSecret | C::RevokedKey) => StatusCode::UNAUTHORIZED,
        // An API key is not a JWT, and a JWT is not an API key.
        (A::Service | A::Participant | A::Owner | A::OwnerOrPlatform, C::OtherUsersAgentKey) => {
            StatusCode::UNAUTHORIZED
        }
        (A::AgentKey | A::AnyAgentKey | A::RequesterKey, C::OtherUsersJwt | C::WrongRole) => StatusCode::UNAUTHORIZED,
        (A::AgentKey | A::AgentOrOwner, C::OtherUsersAgentKey) => StatusCode::FORBIDDEN,
        (A::Service, C::OtherUsersJwt) => StatusCode::FORBIDDEN,
        (A::Participant | A::Owner | A::AgentOrOwner | A::OwnerOrPlatform, C::OtherUsersJwt) => StatusCode::NOT_FOUND,
        // Wrong role: a user token where the service is needed, the service where a user is.
        (A::Service | A::Owner, C::WrongRole) => StatusCode::FORBIDDEN,
        (A::AgentOrOwner, C::WrongRole) => StatusCode::NOT_FOUND,
        // Another agent's key is refused before any lookup; another user's agent is as unknown
        // as one that does not exist (no existence oracle).
        (A::AgentManager | A::AgentReader, C::OtherUsersAgentKey) => StatusCode::FORBIDDEN,
        (A::AgentManager | A::AgentReader, C::OtherUsersJwt) => StatusCode::NOT_FOUND,
        (A::AgentManager, C::WrongRole) => StatusCode::FORBIDDEN,
        (A::Requester | A::TaskReader, C::OtherUsersJwt | C::OtherUsersAgentKey) => StatusCode::NOT_FOUND,
        (A::RequesterKey, C::OtherUsersAgentKey) => StatusCode::NOT_FOUND,
        (A::Participant | A::AgentReader | A::Requester | A::TaskReader | A::OwnerOrPlatform, C::WrongRole) => {
            unreachable!("these routes accept every role")
        }
        (A::Anyone, _) => unreachable!("any valid credentials may discover and rank"),
        (A::AnyAgentKey, C::OtherUsersAgentKey) => unreachable!("any agent's key reads its own agent"),
    }
}

#[tokio::test]
async fn every_route_refuses_every_wrong_credential_and_leaks_nothing() {
    let app = TestApp::spawn().await;
    let [tomas_agent, eve_agent] = app.register_agents(["user-tomas", "user-eve"]).await;
    let started = app.start(&fixtures::good_match()).await;
    let negotiation = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let opportunity = started["opportunity"]["id"].as_str().unwrap().to_owned();
    let context = started["negotiation"]["conversationId"].as_str().unwrap().to_owned();
    let tomas_jwt = app.user_token("user-tomas");
    // A second key of Tomas's agent, revoked.
    let extra = app.call(Method::POST, &format!("/api/agents/{}/keys", tomas_agent.id), Some(&tomas_jwt), None).await;
    let revoked = extra.body["key"].as_str().unwrap().to_owned();
    app.call(
        Method::DELETE,
        &format!("/api/agents/{}/keys/{}", tomas_agent.id, extra.body["id"].as_str().unwrap()),
        Some(&tomas_jwt),
        None,
    )
    .await;

    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({ "sub": "user-tomas", "role": "user", "exp": chrono::Utc::now().timestamp() - 60 }),
        &jsonwebtoken::EncodingKey::from_secret(TEST_SECRET.as_bytes()),
    )
    .unwrap();
    let wrong_secret = JwtKeys::new(b"not-the-secret-at-all-1234")
        .mint("user-tomas", CallerRole::User, std::time::Duration::from_secs(60))
        .unwrap();

    // Tomas's agent delegates to Ana's: the attempt is an A2A task its parties read.
    let ana_agent = app.register_agent("user-ana").await;
    let offer = json!({ "taskType": "testing", "inputSchema": {"type": "object"}, "outputSchema": {} });
    let put = app.agent_call(&ana_agent, Method::PUT, "/capabilities", Some(&offer)).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let asked = app
        .client
        .post(format!("{}/api/agents/delegate", app.base))
        .header("x-api-key", &tomas_agent.key)
        .header("prefer", "respond-async")
        .json(&json!({ "agentId": tomas_agent.id, "taskType": "testing", "input": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), StatusCode::ACCEPTED);
    let asked: Value = asked.json().await.unwrap();
    let attempt_task = asked["delegation"]["attempts"][0]["taskId"].as_str().unwrap().to_owned();
    let (capabilities, delegations) = (app.count("capabilities").await, app.count("delegations").await);
    // Tomas's webhook (stored as registered: the matrix's service refuses loopback URLs).
    let (webhook,): (uuid::Uuid,) = sqlx::query_as(
        "INSERT INTO outbox_targets (target_id, kind, url, owner_user_id, event_types, secret)
         VALUES (gen_random_uuid(), 'webhook', 'https://hooks.example/tomas', 'user-tomas', '{negotiation.outcome}',
                 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') RETURNING target_id",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let w = webhook.to_string();

    let a = &tomas_agent.id;
    let n = &negotiation;
    let routes: Vec<(Method, String, Option<Value>, Audience)> = vec![
        (Method::POST, "/api/negotiations".into(), Some(fixtures::good_match()), Audience::Service),
        (Method::GET, format!("/api/negotiations/{n}"), None, Audience::Participant),
        (Method::DELETE, format!("/api/negotiations/{n}"), None, Audience::Service),
        (
            Method::POST,
            format!("/api/negotiations/{n}/questions/{}/answer", uuid::Uuid::now_v7()),
            Some(json!({"answer": "yes"})),
            Audience::Participant,
        ),
        (Method::GET, "/api/opportunities".into(), None, Audience::Participant),
        (Method::GET, format!("/api/opportunities/{opportunity}"), None, Audience::Participant),
        (Method::GET, "/api/insights".into(), None, Audience::Participant),
        (
            Method::POST,
            format!("/api/opportunities/{opportunity}/decision"),
            Some(json!({ "decision": "accept" })),
            Audience::Owner,
        ),
        (Method::POST, format!("/api/opportunities/{opportunity}/reactivate"), Some(json!({})), Audience::Service),
        (Method::GET, format!("/api/tasks/{n}"), None, Audience::TaskReader),
        (Method::GET, format!("/api/tasks/{attempt_task}"), None, Audience::TaskReader),
        (Method::GET, format!("/api/conversations/{context}"), None, Audience::Participant),
        (Method::GET, "/api/events".into(), None, Audience::Participant),
        (
            Method::POST,
            "/api/webhooks".into(),
            Some(json!({ "url": "https://hooks.example/x" })),
            Audience::Participant,
        ),
        (Method::GET, "/api/webhooks".into(), None, Audience::Participant),
        (Method::GET, format!("/api/webhooks/{w}"), None, Audience::Participant),
        (Method::PATCH, format!("/api/webhooks/{w}"), Some(json!({ "status": "disabled" })), Audience::Participant),
        (Method::DELETE, format!("/api/webhooks/{w}"), None, Audience::Participant),
        (Method::POST, format!("/api/webhooks/{w}/rotate"), None, Audience::Participant),
        (Method::GET, format!("/api/webhooks/{w}/deliveries"), None, Audience::Participant),
        (
            Method::POST,
            format!("/api/webhooks/{w}/redeliver"),
            Some(json!({ "ids": ["evt_1"] })),
            Audience::Participant,
        ),
        (Method::POST, "/api/agents".into(), Some(json!({ "name": "x" })), Audience::Owner),
        (Method::GET, "/api/agents".into(), None, Audience::Owner),
        (Method::GET, "/api/agents/me".into(), None, Audience::AnyAgentKey),
        (
            Method::POST,
            "/a2a".into(),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": n}})),
            Audience::AnyAgentKey,
        ),
        (Method::GET, "/metrics".into(), None, Audience::Service),
        (Method::GET, format!("/api/agents/{a}"), None, Audience::AgentOrOwner),
        (Method::PATCH, format!("/api/agents/{a}"), Some(json!({ "name": "y" })), Audience::Owner),
        (Method::DELETE, format!("/api/agents/{a}"), None, Audience::Owner),
        (Method::POST, format!("/api/agents/{a}/keys"), None, Audience::Owner),
        (Method::DELETE, format!("/api/agents/{a}/keys/{}", tomas_agent.key_id), None, Audience::Owner),
        (Method::POST, format!("/api/agents/{a}/negotiations/pickup"), None, Audience::AgentKey),
        (
            Method::POST,
            format!("/api/agents/{a}/negotiations/{n}/respond"),
            Some(answer("accept", None)),
            Audience::AgentKey,
        ),
        (Method::POST, format!("/api/agents/{a}/negotiations/{n}/extend"), None, Audience::AgentKey),
        (Method::POST, format!("/api/agents/{a}/negotiations/{n}/release"), None, Audience::AgentKey),
        (Method::POST, format!("/api/agents/{a}/heartbeat"), None, Audience::AgentKey),
        (Method::GET, format!("/api/agents/{a}/agent-card"), None, Audience::OwnerOrPlatform),
        (
            Method::PUT,
            format!("/api/agents/{a}/agent-card"),
            Some(json!({ "agentCardUrl": "http://127.0.0.1:9/card" })),
            Audience::OwnerOrPlatform,
        ),
        (Method::DELETE, format!("/api/agents/{a}/agent-card"), None, Audience::OwnerOrPlatform),
        (Method::GET, format!("/api/agents/{a}/negotiations"), None, Audience::AgentOrOwner),
        (Method::GET, format!("/api/agents/{a}/negotiations/{n}"), None, Audience::AgentOrOwner),
        (
            Method::PUT,
            format!("/api/agents/{a}/capabilities"),
            Some(json!({ "taskType": "testing", "inputSchema": {}, "outputSchema": {} })),
            Audience::AgentManager,
        ),
        (Method::GET, format!("/api/agents/{a}/capabilities"), None, Audience::AgentManager),
        (Method::DELETE, format!("/api/agents/{a}/capabilities/{n}"), None, Audience::AgentManager),
        (
            Method::PUT,
            format!("/api/agents/{a}/capabilities/{n}/permissions"),
            Some(json!({ "enabled": false })),
            Audience::AgentManager,
        ),
        (Method::GET, "/api/agents/discover?taskType=testing".into(), None, Audience::Anyone),
        (Method::POST, "/api/agents/rank".into(), Some(json!({ "task_summary": "tests" })), Audience::Anyone),
        (Method::GET, format!("/api/trust/{a}"), None, Audience::AgentReader),
        (
            Method::POST,
            "/api/agents/delegate".into(),
            Some(json!({ "agentId": a, "taskType": "testing", "input": {} })),
            Audience::AgentKey,
        ),
        (
            Method::POST,
            "/api/delegation/delegate".into(),
            Some(json!({ "agentId": a, "taskType": "testing", "input": {} })),
            Audience::AgentKey,
        ),
        (
            Method::POST,
            "/api/delegations".into(),
            Some(json!({ "agentId": a, "taskType": "testing", "input": {} })),
            Audience::AgentKey,
        ),
        (Method::GET, "/api/discovery?taskType=testing".into(), None, Audience::Anyone),
        (Method::GET, format!("/api/delegations/{n}"), None, Audience::Requester),
        (Method::POST, format!("/api/delegations/{n}/cancel"), None, Audience::RequesterKey),
        (Method::GET, format!("/api/agents/{a}/delegations"), None, Audience::AgentReader),
        (Method::GET, format!("/api/agents/{a}/delegations/inbox"), None, Audience::AgentKey),
        (Method::POST, format!("/api/agents/{a}/delegations/{n}/accept"), None, Audience::AgentKey),
        (
            Method::POST,
            format!("/api/agents/{a}/delegations/{n}/complete"),
            Some(json!({ "output": {} })),
            Audience::AgentKey,
        ),
        (Method::POST, format!("/api/agents/{a}/delegations/{n}/reject"), None, Audience::AgentKey),
        (
            Method::POST,
            format!("/api/agents/{a}/delegations/{n}/fail"),
            Some(json!({ "error": "x" })),
            Audience::AgentKey,
        ),
    ];

    let with_cred = |req: reqwest::RequestBuilder, cred: Cred, audience: Audience| match cred {
        Cred::Nothing => req,
        Cred::Malformed => req.header("authorization", "Bearer not.a.jwt"),
        Cred::Expired => req.bearer_auth(&expired),
        Cred::WrongSecret => req.bearer_auth(&wrong_secret),
        Cred::OtherUsersJwt => req.bearer_auth(app.user_token("user-eve")),
        Cred::OtherUsersAgentKey => req.header("x-api-key", &eve_agent.key),
        Cred::RevokedKey => req.header("x-api-key", &revoked),
        Cred::WrongRole => match audience {
            Audience::Service => req.bearer_auth(app.user_token("user-maya")),
            _ => req.bearer_auth(app.service_token()),
        },
    };
    let ids = [a.as_str(), n.as_str(), &opportunity, &context, &attempt_task, &tomas_agent.key_id, &w];
    let leaks = [n.as_str(), &attempt_task, "user-maya", "user-tomas", "user-ana", &tomas_agent.key, &revoked];
    let assert_refused = |what: &str, status: StatusCode, want: StatusCode, text: &str| {
        assert_eq!(status, want, "{what}: {text}");
        let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let keys: Vec<&String> = body.as_object().map(|o| o.keys().collect()).unwrap_or_default();
        assert_eq!(keys, ["error", "code"], "{what}: {text}");
        for secret in leaks {
            assert!(!text.contains(secret), "{what} leaked {secret}: {text}");
        }
    };

    let (mut checked, mut before_validation) = (0, 0);
    for (method, path, body, audience) in &routes {
        for cred in CREDS {
            if matches!(
                audience,
                Audience::Participant
                    | Audience::AgentReader
                    | Audience::Requester
                    | Audience::TaskReader
                    | Audience::OwnerOrPlatform
            ) && matches!(cred, Cred::WrongRole)
            {
                continue;
            }
            if *audience == Audience::Anyone
                && matches!(cred, Cred::OtherUsersJwt | Cred::OtherUsersAgentKey | Cred::WrongRole)
            {
                continue; // any valid credentials may discover and rank: checked in directory.rs and rank.rs
            }
            if matches!(cred, Cred::OtherUsersJwt)
                && *audience == Audience::Participant
                && (path == "/api/opportunities" || path == "/api/insights")
            {
                continue; // a listing shows the caller's own (empty) list: checked below and in insights.rs
            }
            if *audience == Audience::AnyAgentKey && matches!(cred, Cred::OtherUsersAgentKey) {
                continue; // a valid key of any agent: GET /api/agents/me answers its own agent
            }
            if matches!(cred, Cred::OtherUsersJwt) && path == "/api/webhooks" {
                continue; // registers/lists the caller's own webhooks: checked in webhooks.rs
            }
            if matches!(cred, Cred::OtherUsersJwt) && path == "/api/events" {
                continue; // a stream of the caller's own events: scoping is tested in ui.rs
            }
            if matches!(cred, Cred::OtherUsersJwt) && *audience == Audience::Owner && (path == "/api/agents") {
                continue; // creates/lists the caller's own agents
            }
            let mut req = with_cred(app.client.request(method.clone(), format!("{}{path}", app.base)), cred, *audience);
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let text = resp.text().await.unwrap();
            let want = expected(*audience, cred);
            assert_refused(&format!("{method} {path} with {cred:?}"), status, want, &text);
            checked += 1;

            // Credentials before validation: the same credentials with a bad query, a bad body
            // and a path whose ids are not ids get the same refusal. (What a good credential
            // may see, a 404 or another user's 403, may depend on the path and body: not here.)
            let bad_credential = want == StatusCode::UNAUTHORIZED;
            let wrong_role = matches!(cred, Cred::WrongRole) && want == StatusCode::FORBIDDEN;
            if !(bad_credential || wrong_role) {
                continue;
            }
            let separator = if path.contains('?') { '&' } else { '?' };
            let mut bad_inputs = vec![(format!("{path}{separator}limit=many&wait=soon&bogus=1"), false)];
            if [Method::POST, Method::PUT, Method::PATCH].contains(method) {
                bad_inputs.push((path.clone(), true));
            }
            let bad_path = ids.iter().fold(path.clone(), |p, id| p.replace(id, "not-an-id"));
            if bad_credential && bad_path != *path {
                bad_inputs.push((bad_path, false));
            }
            for (bad, bad_body) in bad_inputs {
                let mut req =
                    with_cred(app.client.request(method.clone(), format!("{}{bad}", app.base)), cred, *audience);
                req = match (bad_body, body) {
                    (true, _) => req.header("content-type", "application/json").body("{\"bogus\": "),
                    (false, Some(b)) => req.json(b),
                    (false, None) => req,
                };
                let resp = req.send().await.unwrap();
                let status = resp.status();
                let text = resp.text().await.unwrap();
                let what = if bad_body { "a bad body" } else { "a bad query or path" };
                assert_refused(&format!("{method} {bad} ({what}) with {cred:?}"), status, want, &text);
                before_validation += 1;
            }
        }
    }
    assert!(checked > 140, "only {checked} cases ran");
    // Every operation the OpenAPI document says needs credentials is in the matrix.
    let spec: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/api-spec/openapi.json")).unwrap(),
    )
    .unwrap();
    let fits = |template: &str, path: &str| {
        let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
        t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| t == p || t.starts_with('{'))
    };
    for (template, operations) in spec["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let secured = operation["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|r| r.as_object().is_some_and(|r| !r.is_empty())));
            let covered = routes.iter().any(|(m, path, _, _)| {
                m.as_str().eq_ignore_ascii_case(method) && fits(template, path.split('?').next().unwrap_or_default())
            });
            assert!(!secured || covered, "{method} {template} needs credentials and is not in the matrix");
        }
    }
    assert!(before_validation > 300, "only {before_validation} cases with bad input ran");

    // Nothing changed: the negotiation still waits for Tomas, the agent and its key still work.
    assert_eq!(app.snapshot(n).await.0, "waiting_for_agent");
    assert_eq!(app.count("opportunity_decisions").await, 0);
    assert_eq!(app.count("capabilities").await, capabilities);
    assert_eq!(app.count("delegations").await, delegations);
    let hook = app.get(&format!("/api/webhooks/{w}"), &tomas_jwt).await;
    assert_eq!((hook.status, hook.body["status"].clone()), (StatusCode::OK, json!("enabled")), "{}", hook.text);
    assert_eq!(app.count("outbox_targets").await, 1);
    assert_eq!(app.pickup(&tomas_agent, None).await.status, StatusCode::OK);
    // Another user's listing is their own: empty.
    let eve = app.get("/api/opportunities", &app.user_token("user-eve")).await;
    assert_eq!(eve.body["opportunities"], json!([]));
}

/// An empty `x-api-key` is a key that is missing: the request named a key, so it is refused 401
/// as one without a lookup, and never let through on a bearer token beside it (a user's JWT or
/// even the agent's own key), on the HTTP routes and on MCP alike, with the same answer.
#[tokio::test]
async fn an_empty_api_key_is_refused_alike_on_http_and_mcp() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let jwt = app.user_token("user-tomas");
    let id = &agent.id;
    let routes = [
        (Method::POST, format!("/api/agents/{id}/negotiations/pickup")),
        (Method::POST, format!("/api/agents/{id}/heartbeat")),
        (Method::GET, "/api/agents/me".to_owned()),
        (Method::GET, format!("/api/agents/{id}")),
        (Method::GET, format!("/api/agents/{id}/capabilities")),
        (Method::GET, "/api/agents/discover?taskType=testing".to_owned()),
        (Method::POST, "/api/agents/delegate".to_owned()),
        (Method::POST, "/mcp".to_owned()),
    ];
    for (method, path) in &routes {
        for beside in [None, Some(jwt.as_str()), Some(agent.key.as_str())] {
            for empty in ["", "   "] {
                let mut req =
                    app.client.request(method.clone(), format!("{}{path}", app.base)).header("x-api-key", empty);
                if let Some(token) = beside {
                    req = req.bearer_auth(token);
                }
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
                let resp =
                    req.header("accept", "application/json, text/event-stream").json(&body).send().await.unwrap();
                let status = resp.status();
                let answer: Value = resp.json().await.unwrap();
                let what = format!("{method} {path} with x-api-key {empty:?} beside {}", beside.is_some());
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {answer}");
                assert_eq!(answer, json!({"error": parley::MISSING_KEY, "code": "unauthorized"}), "{what}");
            }
        }
    }
}

/// A person's token where an agent's key goes, or in the key's header: the 401 says which
/// credential the route takes and what was sent instead, on the HTTP routes, MCP and A2A alike,
/// whichever header carried it, and never quotes the token.
#[tokio::test]
async fn a_credential_mix_up_is_answered_with_what_the_route_takes_and_what_was_sent() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let person = app.user_token("user-tomas");
    let platform = app.service_token();
    let id = &agent.id;
    let key_only = [
        (Method::POST, format!("/api/agents/{id}/negotiations/pickup")),
        (Method::POST, format!("/api/agents/{id}/heartbeat")),
        (Method::GET, "/api/agents/me".to_owned()),
        (Method::POST, "/api/agents/delegate".to_owned()),
        (Method::POST, "/mcp".to_owned()),
        (Method::POST, "/a2a".to_owned()),
    ];
    let send = |method: Method, path: String, header: &'static str, value: String| {
        let app = &app;
        async move {
            let req = app.client.request(method, format!("{}{path}", app.base)).header(header, value);
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
            let resp = req.header("accept", "application/json, text/event-stream").json(&body).send().await.unwrap();
            let status = resp.status();
            let answer: Value = resp.json().await.unwrap();
            (status, answer)
        }
    };
    for (method, path) in &key_only {
        for (token, sent) in
            [(&person, "a person's token (a JWT)"), (&platform, "the platform's service token (a JWT)")]
        {
            let (status, answer) = send(method.clone(), path.clone(), "authorization", format!("Bearer {token}")).await;
            let what = format!("{method} {path} with {sent} in Authorization");
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {answer}");
            assert_eq!(answer["code"], "unauthorized", "{what}: {answer}");
            let error = answer["error"].as_str().unwrap();
            assert!(error.starts_with("this route takes an agent's API key (pk_..."), "{what}: {error}");
            assert!(error.ends_with(&format!("but the Authorization header holds {sent}")), "{what}: {error}");

            let (status, answer) = send(method.clone(), path.clone(), "x-api-key", token.clone()).await;
            let what = format!("{method} {path} with {sent} in x-api-key");
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {answer}");
            let error = answer["error"].as_str().unwrap();
            assert!(
                error.starts_with(&format!(
                    "this route takes an agent's API key (pk_...), but the x-api-key header holds {sent}"
                )),
                "{what}: {error}"
            );
            assert!(!error.contains(token.as_str()) && !error.contains("user-tomas"), "{what}: {error}");
        }
        // Neither a key nor a JWT: said so, with what keys look like.
        let (status, answer) = send(method.clone(), path.clone(), "x-api-key", "hunter2".into()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("neither an API key nor a JWT"), "{path}: {answer}");
    }

    // A route that takes the owner's token or the agent's key: the token belongs in Authorization.
    let (status, answer) = send(Method::GET, format!("/api/agents/{id}"), "x-api-key", person.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    assert_eq!(
        answer["error"],
        "the x-api-key header holds a person's token (a JWT), not an agent's API key (pk_...): send a token as \
         `Authorization: Bearer <token>`"
    );
    // A route that takes only a person's token, sent in the key's header.
    let (status, answer) = send(Method::GET, "/api/opportunities".into(), "x-api-key", person.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("as `Authorization: Bearer <token>`; the x-api-key header, which holds a person's token"),
        "{error}"
    );
    // The key itself, in either header, still works.
    for (header, value) in [("x-api-key", agent.key.clone()), ("authorization", format!("Bearer {}", agent.key))] {
        let (status, answer) = send(Method::GET, "/api/agents/me".into(), header, value).await;
        assert_eq!(status, StatusCode::OK, "{header}: {answer}");
    }
}
