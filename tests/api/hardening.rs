//! What protects the service from hostile or careless clients, over real sockets: header, idle and
//! body timeouts, event streams that end with their token, security headers, token rules, MCP
//! transport errors and the failed-authentication limiter.

use std::time::Duration;

use parley::{CallerRole, Claims};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::helpers::{TEST_SECRET, TestApp};

/// Longest a test waits for the server to do something its configuration says it does in ~1 s.
const PATIENCE: Duration = Duration::from_secs(8);

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap()
}

/// Reads until the server closes the connection; `None` if it is still open after [`PATIENCE`].
async fn read_until_closed(socket: &mut TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one whole answer whose body ends with `end`.
async fn read_answer(socket: &mut TcpStream, end: &str) -> String {
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.ends_with(end) {
        let n = tokio::time::timeout(PATIENCE, socket.read(&mut buf)).await.expect("an answer").unwrap();
        assert!(n > 0, "closed before the answer ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    seen
}

fn timeouts(header: u64, idle: u64, body: u64) -> impl FnOnce(&mut parley::Config) {
    move |c| {
        c.http_header_timeout = Duration::from_secs(header);
        c.http_idle_timeout = Duration::from_secs(idle);
        c.http_body_timeout = Duration::from_secs(body);
    }
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_request_head_is_closed() {
    let app = TestApp::spawn_with(timeouts(1, 30, 30)).await;
    let mut socket = connect(&app).await;
    socket.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert!(read_until_closed(&mut socket).await.is_some(), "the server kept a half-sent request head open");
    // The service still answers.
    assert_eq!(app.client.get(format!("{}/healthz", app.base)).send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let app = TestApp::spawn_with(timeouts(30, 1, 30)).await;
    let mut socket = connect(&app).await;
    socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = read_answer(&mut socket, r#"{"status":"ok"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Kept alive, then nothing: the server hangs up.
    assert_eq!(read_until_closed(&mut socket).await.as_deref(), Some(""), "the idle connection stayed open");
}

#[tokio::test]
async fn a_body_that_trickles_in_is_answered_408_with_the_error_body() {
    let app = TestApp::spawn_with(timeouts(30, 30, 1)).await;
    let token = app.service_token();
    let mut socket = connect(&app).await;
    let head = format!(
        "POST /api/negotiations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"sourceUser\""
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut socket).await.expect("the server waited for the body forever");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap();
    assert_eq!(body["code"], "request_timeout", "{answer}");
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(app.count("tasks").await, 0);
}

#[tokio::test]
async fn a_long_poll_longer_than_the_idle_timeout_still_answers() {
    let app = TestApp::spawn_with(|c| {
        timeouts(1, 1, 1)(c);
        c.long_poll_max = Duration::from_secs(3);
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let answer = client
        .post(format!("{}/api/agents/{}/negotiations/pickup?wait=3", app.base, agent.id))
        .header("x-api-key", &agent.key)
        .send()
        .await
        .expect("the long-poll was cut off");
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn the_event_stream_ends_when_its_token_expires() {
    let app = TestApp::spawn().await;
    let token = app.state.jwt().mint("user-maya", CallerRole::User, Duration::from_secs(2)).unwrap();
    let response =
        reqwest::Client::new().get(format!("{}/api/events", app.base)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the stream outlived its token")
        .unwrap_or_default();
    assert!(text.contains("event: reconnect"), "{text}");
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["code"], "token_expired", "{text}");
}

#[tokio::test]
async fn answers_carry_the_security_headers() {
    let app = TestApp::spawn().await;
    let page = app.client.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");

    let json = app
        .client
        .get(format!("{}/api/opportunities", app.base))
        .bearer_auth(app.user_token("user-maya"))
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), StatusCode::OK);
    for (name, value) in
        [("cache-control", "no-store"), ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer")]
    {
        assert_eq!(json.headers().get(name).map(|v| v.to_str().unwrap()), Some(value), "{name}");
    }
    let refused = app.client.get(format!("{}/api/opportunities", app.base)).send().await.unwrap();
    assert_eq!(refused.headers()["cache-control"], "no-store");
}

fn signed(claims: &Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(TEST_SECRET.as_bytes()),
    )
    .unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn a_token_not_valid_yet_is_refused() {
    let app = TestApp::spawn().await;
    let early = signed(&json!({ "sub": "user-maya", "exp": now() + 7200, "nbf": now() + 3600 }));
    app.get("/api/opportunities", &early).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let valid = signed(&json!({ "sub": "user-maya", "exp": now() + 7200, "nbf": now() - 10 }));
    assert_eq!(app.get("/api/opportunities", &valid).await.status, StatusCode::OK);
    // What the service mints carries no nbf and reads back whole.
    let claims: Claims = app.state.jwt().verify(&app.user_token("user-maya")).unwrap();
    assert_eq!(claims.nbf, None);
}

#[tokio::test]
async fn a_token_living_longer_than_the_maximum_is_refused() {
    let app = TestApp::spawn().await;
    let day = 86_400;
    let long = signed(&json!({ "sub": "user-maya", "exp": now() + 31 * day }));
    let answer = app.get("/api/opportunities", &long).await;
    answer.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let within = signed(&json!({ "sub": "user-maya", "exp": now() + 29 * day }));
    assert_eq!(app.get("/api/opportunities", &within).await.status, StatusCode::OK);

    let strict = TestApp::spawn_with(|c| c.jwt_max_ttl = Duration::from_secs(3600)).await;
    let two_hours = signed(&json!({ "sub": "user-maya", "exp": now() + 7200 }));
    strict.get("/api/opportunities", &two_hours).await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[test]
fn the_token_command_refuses_a_ttl_beyond_the_maximum() {
    let dir = std::env::temp_dir().join(format!("parley-token-ttl-{}", uuid::Uuid::now_v7()));
    let token = |ttl: &str, max: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
        c.args(["token", "--sub", "user-maya", "--ttl", ttl])
            .env("PARLEY_DATA_DIR", &dir)
            .env("PARLEY_JWT_SECRET", crate::helpers::TEST_SECRET)
            .env_remove("PARLEY_JWT_MAX_TTL");
        if let Some(max) = max {
            c.env("PARLEY_JWT_MAX_TTL", max);
        }
        c.output().unwrap()
    };
    let refused = token("31d", None);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("PARLEY_JWT_MAX_TTL"), "{err}");
    assert!(refused.stdout.is_empty());
    // Durations are written as they are typed, never in months of 30.44 days.
    let err = String::from_utf8_lossy(&token("90d", None).stderr).into_owned();
    assert!(err.contains("--ttl 90d is longer") && err.contains("(30d, PARLEY_JWT_MAX_TTL)"), "{err}");
    assert!(!err.contains("month"), "{err}");
    assert!(token("30d", None).status.success());
    assert_eq!(token("2h", Some("1h")).status.code(), Some(2));
    assert!(token("30m", Some("1h")).status.success());
}

async fn mcp_post(app: &TestApp, key: &str, body: impl Into<reqwest::Body>) -> (StatusCode, String, Value) {
    let response = app
        .client
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", key)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let text = response.text().await.unwrap();
    (status, content_type, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn mcp_transport_errors_answer_with_the_error_body() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let (status, content_type, body) = mcp_post(&app, &agent.key, "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(content_type.starts_with("application/json"), "{content_type}");
    assert_eq!(body["code"], "invalid_body", "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("JSON")), "{body}");

    let huge = format!(r#"{{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "pad": "{}"}}"#, "x".repeat(300 * 1024));
    let (status, _, body) = mcp_post(&app, &agent.key, huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["code"], "payload_too_large", "{body}");

    // A refusal of the transport itself (the client does not take JSON) has the body too.
    let response = app
        .client
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .header("accept", "text/plain")
        .header("x-api-key", &agent.key)
        .body(r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    let body: Value = response.json().await.unwrap();
    assert!(body["code"].is_string() && body["error"].is_string(), "{body}");
}

#[tokio::test]
async fn a_burst_of_failed_authentications_is_answered_429_and_successes_are_not_counted() {
    let app = TestApp::spawn_with(|c| {
        c.auth_failure_burst = 3;
        c.auth_failure_refill = Duration::from_secs(600);
    })
    .await;
    let good = app.user_token("user-maya");
    for _ in 0..10 {
        assert_eq!(app.get("/api/opportunities", &good).await.status, StatusCode::OK);
    }
    for _ in 0..3 {
        app.get("/api/opportunities", "not-a-token").await.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let response =
        app.client.get(format!("{}/api/opportunities", app.base)).bearer_auth("not-a-token").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=600).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "rate_limited", "{body}");
    // Bad API keys from the same address are refused too.
    let agent_path = format!("/api/agents/{}/negotiations", uuid::Uuid::now_v7());
    let refused =
        app.client.get(format!("{}{agent_path}", app.base)).header("x-api-key", "pk_wrong").send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    // ...and on MCP, which authenticates by the same path.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mcp = app.client.post(format!("{}/mcp", app.base)).header("x-api-key", "pk_wrong").json(&list).send();
    assert_eq!(mcp.await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    // The valid token from the same address is still served.
    assert_eq!(app.get("/api/opportunities", &good).await.status, StatusCode::OK);
    // Requests without credentials to public routes still answer.
    assert_eq!(app.client.get(format!("{}/healthz", app.base)).send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn a_flood_of_bad_keys_never_locks_out_valid_credentials_from_the_same_address() {
    let app = TestApp::spawn_with(|c| {
        c.auth_failure_burst = 5;
        c.auth_failure_refill = Duration::from_secs(600);
    })
    .await;
    let agent = app.register_agent("user-tomas").await;
    let maya = app.user_token("user-maya");
    let pickup = format!("{}/api/agents/{}/negotiations/pickup", app.base, agent.id);
    let bad_key = |n: usize| app.client.post(&pickup).header("x-api-key", format!("pk_not-a-key-{}", n % 3)).send();
    // A client cycling through three bad keys, 40 times, all from 127.0.0.1.
    let mut statuses = Vec::new();
    for n in 0..40 {
        statuses.push(bad_key(n).await.unwrap().status());
    }
    assert!(statuses[..5].iter().all(|s| *s == StatusCode::UNAUTHORIZED), "{statuses:?}");
    assert!(statuses[5..].iter().all(|s| *s == StatusCode::TOO_MANY_REQUESTS), "the flood is refused: {statuses:?}");
    // Meanwhile a person's valid token and an agent's valid key, from the same address, are served.
    for _ in 0..3 {
        assert_eq!(app.get("/api/opportunities", &maya).await.status, StatusCode::OK);
        let picked = app.client.post(&pickup).header("x-api-key", &agent.key).send().await.unwrap();
        assert_eq!(picked.status(), StatusCode::NO_CONTENT, "the agent's own key picks up");
        let beat = app.agent_call(&agent, Method::POST, "/heartbeat", None).await;
        assert_eq!(beat.status, StatusCode::NO_CONTENT);
        // ...and the flood goes on being refused around them.
        assert_eq!(bad_key(0).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    }
    // A new bad key is refused as well once the address is over its budget.
    let fresh = app.client.post(&pickup).header("x-api-key", "pk_another-bad-key").send().await.unwrap();
    assert_eq!(fresh.status(), StatusCode::TOO_MANY_REQUESTS);
    let fresh_token =
        app.client.get(format!("{}/api/opportunities", app.base)).bearer_auth("not.a.jwt").send().await.unwrap();
    assert_eq!(fresh_token.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn failures_from_many_loopback_addresses_count_as_one_machines() {
    let app = TestApp::spawn_with(|c| {
        c.auth_failure_burst = 10;
        c.auth_failure_refill = Duration::from_secs(600);
    })
    .await;
    // Twenty loopback addresses (127.0.0.1 to 127.0.0.20, all this machine) sending bad keys:
    // each address within the burst, together twenty times past it.
    let mut statuses = Vec::new();
    for n in 1..=20u8 {
        let from = reqwest::Client::builder().local_address(std::net::IpAddr::from([127, 0, 0, n])).build().unwrap();
        for k in 0..3 {
            let sent = from.get(format!("{}/api/opportunities", app.base)).bearer_auth(format!("bad-{n}-{k}"));
            statuses.push(sent.send().await.unwrap().status());
        }
    }
    let refused = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count(), 10, "{statuses:?}");
    assert_eq!(refused, 50, "the machine's budget is one: {statuses:?}");
}

#[tokio::test]
async fn a_body_trickled_a_byte_at_a_time_is_cut_off_at_its_deadline() {
    // Each byte comes well within the per-part timeout; the whole body never comes in time.
    let app = TestApp::spawn_with(|c| {
        timeouts(30, 30, 5)(c);
        c.http_body_deadline = Duration::from_secs(1);
    })
    .await;
    let mut socket = connect(&app).await;
    let started = std::time::Instant::now();
    // The public self-assessment: no credentials needed.
    let head =
        "POST /agent/negotiation HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{";
    socket.write_all(head.as_bytes()).await.unwrap();
    let trickle = async {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if socket.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(1_600), trickle).await;
    let answer = read_until_closed(&mut socket).await.expect("the server waited for the body forever");
    let took = started.elapsed();
    eprintln!("a body trickled a byte every 200 ms was answered {} after {took:?}", &answer[..12]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
}

#[tokio::test]
async fn event_streams_are_capped_per_token_per_user_and_in_all_and_counted() {
    let app = TestApp::spawn_with(|c| {
        c.sse_per_token = 2;
        c.sse_per_user = 3;
        c.sse_max = 5;
    })
    .await;
    let client = reqwest::Client::new();
    let open = |token: String| {
        let client = client.clone();
        let url = format!("{}/api/events", app.base);
        async move { client.get(url).bearer_auth(token).send().await.unwrap() }
    };
    // Tokens minted in one second differ by their lifetimes.
    let mint_for = |sub: &str, ttl: u64| app.state.jwt().mint(sub, CallerRole::User, Duration::from_secs(ttl)).unwrap();
    let mint = |sub: &str| mint_for(sub, 600);
    let (a, b, c) = (mint_for("user-1", 600), mint_for("user-1", 601), mint_for("user-1", 602));
    assert_ne!(a, b);
    let mut held = vec![open(a.clone()).await, open(a.clone()).await];
    assert!(held.iter().all(|r| r.status() == StatusCode::OK));
    let third = open(a.clone()).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().contains_key("retry-after"));
    assert!(third.text().await.unwrap().contains("PARLEY_SSE_PER_TOKEN"));
    held.push(open(b).await);
    assert_eq!(held[2].status(), StatusCode::OK);
    let over_user = open(c).await;
    assert_eq!(over_user.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(over_user.text().await.unwrap().contains("PARLEY_SSE_PER_USER"));
    held.push(open(mint("user-2")).await);
    held.push(open(mint("user-3")).await);
    let over_all = open(mint("user-4")).await;
    assert_eq!(over_all.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(over_all.text().await.unwrap().contains("PARLEY_SSE_MAX"));
    assert_eq!(app.state.open_streams(), 5);
    // Counted in /metrics, with the connections (both process-wide: at least these).
    let metrics = app.get("/metrics", &app.service_token()).await;
    let value = |name: &str| -> f64 {
        metrics
            .text
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(value("parley_sse_streams") >= 5.0, "{}", metrics.text);
    assert!(value("parley_http_connections") >= 5.0, "{}", metrics.text);
    // A stream that ends gives its place back.
    held.truncate(4);
    let deadline = std::time::Instant::now() + PATIENCE;
    while app.state.open_streams() > 4 {
        assert!(std::time::Instant::now() < deadline, "the closed stream kept its place");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open(mint("user-4")).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn at_the_connection_cap_a_new_connection_waits_until_one_closes() {
    let app = TestApp::spawn_with(|c| c.http_max_connections = 2).await;
    let first = connect(&app).await;
    let second = connect(&app).await;
    // The two hold the cap (idle, no request): a third is not served...
    let mut third = connect(&app).await;
    third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let waited = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(waited.is_err(), "a connection over the cap was served");
    // ...until one of the two closes; then it is, with the request it already sent.
    drop(first);
    let answer = read_until_closed(&mut third).await.expect("served once a connection closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(second);
}
