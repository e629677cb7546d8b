//! `POST /agent/negotiation`: the Bindu-compatible self-assessment, and `parley assess`.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{fixtures, helpers::TestApp};

const PATH: &str = "/agent/negotiation";

#[tokio::test]
async fn a_matching_task_is_accepted_with_the_live_queue_depth() {
    let app = TestApp::spawn().await;
    let request = json!({
        "task_summary": "Negotiate a proposed match between two people for an introduction",
        "input_mime_types": ["application/json"],
        "max_latency_ms": 1000
    });
    let answer = app.call(Method::POST, PATH, None, Some(&request)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let b = &answer.body;
    assert_eq!(b["accepted"], true, "{}", answer.text);
    assert_eq!(b["queue_depth"], 0);
    assert!(b["skill_matches"][0]["skill_id"] == "parley-negotiator");
    let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
    assert_eq!(keys.first().map(|k| k.as_str()), Some("accepted"));
    assert_eq!(keys.last().map(|k| k.as_str()), Some("subscores"));

    // A parked negotiation is in a non-terminal state: the depth counts it (within the bound
    // the service keeps its count for).
    crate::negotiations::give_personal_agent(&app, "user-tomas").await;
    let started = app.post("/api/negotiations", &app.service_token(), &fixtures::good_match()).await;
    assert_eq!(started.body["negotiation"]["status"], "waiting_for_agent");
    let answer = depth_reaches(&app, &request, 1).await;
    assert_eq!(answer["subscores"]["load"], 0.5);
}

/// Asks until the answer's `queue_depth` is `depth`; fails after a limit far above the 100 ms
/// the service may keep a count for.
async fn depth_reaches(app: &TestApp, request: &Value, depth: i64) -> Value {
    let limit = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let answer = app.call(Method::POST, PATH, None, Some(request)).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        if answer.body["queue_depth"] == depth {
            return answer.body;
        }
        assert!(
            std::time::Instant::now() < limit,
            "queue_depth stayed {} instead of {depth}",
            answer.body["queue_depth"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_reported_queue_depth_follows_negotiations_starting_and_ending() {
    let app = TestApp::spawn().await;
    let request = json!({ "task_summary": "Negotiate a proposed match between two people for an introduction" });
    // Read once so that the service holds a count of 0.
    depth_reaches(&app, &request, 0).await;
    let agent = app.register_agent("user-tomas").await;
    let started = app.post("/api/negotiations", &app.service_token(), &fixtures::good_match()).await;
    assert_eq!(started.body["negotiation"]["status"], "waiting_for_agent", "{}", started.text);
    depth_reaches(&app, &request, 1).await;

    // The agent ends it: the count goes back down.
    let turn = app.pickup(&agent, None).await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    let (id, token) = (turn.body["negotiationId"].as_str().unwrap(), turn.body["claimToken"].as_str().unwrap());
    let ended = app.respond(&agent, id, &crate::helpers::answer("reject", Some(token))).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.text);
    depth_reaches(&app, &request, 0).await;
}

#[tokio::test]
async fn an_unrelated_task_is_rejected_below_threshold() {
    let app = TestApp::spawn().await;
    let answer = app.call(Method::POST, PATH, None, Some(&json!({ "task_summary": "Transcode 4K video files" }))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["accepted"], false);
    assert_eq!(answer.body["rejection_reason"], "score_below_threshold");
}

#[tokio::test]
async fn malformed_requests_get_binduss_messages_and_never_a_5xx() {
    let app = TestApp::spawn().await;
    let cases: Vec<(String, &str)> = vec![
        ("{not json".into(), "Invalid JSON payload"),
        ("{}".into(), "'task_summary' is required"),
        (json!({ "task_summary": "" }).to_string(), "'task_summary' is required"),
        (
            json!({ "task_summary": "x".repeat(10_001) }).to_string(),
            "task_summary exceeds maximum length of 10000 characters",
        ),
        (
            json!({ "task_summary": "ok", "weights": { "cost": -1 } }).to_string(),
            "Invalid weights: Weight 'cost' must be non-negative",
        ),
    ];
    for (body, message) in cases {
        let answer = app.call_raw(Method::POST, PATH, None, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {}", answer.text);
        assert_eq!(answer.body["error"], message, "{body}");
    }
    for body in [
        json!([1, 2]),
        json!("a string"),
        json!({ "task_summary": 42 }),
        json!({ "task_summary": "ok", "max_latency_ms": "5000" }),
        json!({ "task_summary": "ok", "min_score": "high" }),
        json!({ "task_summary": "ok", "input_mime_types": "text/plain" }),
        json!({ "task_summary": "ok", "input_mime_types": [1] }),
        json!({ "task_summary": "ok", "weights": [1] }),
        json!({ "task_summary": "ok", "weights": { "cost": "1" } }),
        json!({ "task_summary": "ok", "task_details": 7 }),
    ] {
        let answer = app.call(Method::POST, PATH, None, Some(&body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {}", answer.text);
        assert!(answer.body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}: {}", answer.text);
    }
}

#[tokio::test]
async fn parley_assess_prints_exactly_what_the_endpoint_answers() {
    let app = TestApp::spawn().await;
    let dir = tempdir();
    let skills = dir.join("skills.json");
    std::fs::write(&skills, serde_json::to_string(&vec![parley::assessment::default_skill()]).unwrap()).unwrap();
    let request = json!({
        "task_summary": "Negotiate a match between two people",
        "task_details": "Argue for the user, turn by turn",
        "output_mime_types": ["application/json"],
        "max_latency_ms": 20,
        "min_score": 0.2,
        "weights": { "skill_match": 2, "load": 1 }
    });
    let request_file = dir.join("request.json");
    std::fs::write(&request_file, request.to_string()).unwrap();

    let endpoint = app.call(Method::POST, PATH, None, Some(&request)).await;
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["assess", "--skills"])
        .arg(&skills)
        .arg("--request")
        .arg(&request_file)
        .args(["--queue-depth", "0"])
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    assert_eq!(String::from_utf8(cli.stdout).unwrap().trim(), endpoint.text.trim());

    // A bad request file is exit code 2 with a message.
    std::fs::write(&request_file, "{}").unwrap();
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["assess", "--skills"])
        .arg(&skills)
        .arg("--request")
        .arg(&request_file)
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&cli.stderr).contains("'task_summary' is required"));
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("parley-assess-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A local OpenAI-compatible embeddings server: every input gets `[1, 0]`, or a 500 when
/// `fail` is set. Returns its base URL and a counter of calls.
async fn embeddings_server(fail: bool) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use axum::{Json, Router, http::StatusCode as S, routing::post};
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let app = Router::new().route(
        "/v1/embeddings",
        post(move |Json(body): Json<Value>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if fail {
                    return Err(S::INTERNAL_SERVER_ERROR);
                }
                let n = body["input"].as_array().map(|a| a.len()).unwrap_or(1);
                let data: Vec<Value> = (0..n).map(|i| json!({ "embedding": [1.0, 0.0], "index": i })).collect();
                Ok(Json(json!({ "data": data, "model": body["model"] })))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

fn with_provider(url: &str) -> impl FnOnce(&mut parley::Config) + '_ {
    move |c| {
        c.embeddings = Some(parley::EmbeddingsConfig {
            url: url.to_owned(),
            api_key: Some("test-key".into()),
            model: "text-embedding-3-small".into(),
            max_answer: 16 << 20,
        })
    }
}

#[tokio::test]
async fn an_embeddings_provider_adds_semantic_similarity_and_is_cached() {
    let (url, calls) = embeddings_server(false).await;
    let app = TestApp::spawn_with(with_provider(&url)).await;
    let plain = TestApp::spawn().await;
    let request = json!({ "task_summary": "Negotiate a match between two people" });

    let with = app.call(Method::POST, PATH, None, Some(&request)).await;
    let without = plain.call(Method::POST, PATH, None, Some(&request)).await;
    assert_eq!(with.status, StatusCode::OK, "{}", with.text);
    let reasons = with.body["skill_matches"][0]["reasons"].as_array().unwrap();
    assert_eq!(reasons[0], "semantic similarity: 1.00");
    // Hybrid: 0.7 * cosine (1.0) + 0.3 * the keyword score the plain run reports.
    let jaccard = without.body["skill_matches"][0]["score"].as_f64().unwrap();
    let hybrid = with.body["skill_matches"][0]["score"].as_f64().unwrap();
    assert!((hybrid - (0.7 + 0.3 * jaccard)).abs() < 1e-4, "{hybrid} vs {jaccard}");

    // Skill embeddings once, the task once: a repeat is served from the cache.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    app.call(Method::POST, PATH, None, Some(&request)).await;
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_failing_provider_falls_back_to_keywords_without_failing_the_request() {
    let (url, calls) = embeddings_server(true).await;
    let app = TestApp::spawn_with(with_provider(&url)).await;
    let plain = TestApp::spawn().await;
    let request = json!({ "task_summary": "Negotiate a match between two people", "min_score": 0.1 });
    let with = app.call(Method::POST, PATH, None, Some(&request)).await;
    let without = plain.call(Method::POST, PATH, None, Some(&request)).await;
    assert_eq!(with.status, StatusCode::OK);
    assert_eq!(with.text, without.text, "keyword-only, exactly as without a provider");
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}
