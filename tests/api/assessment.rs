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

    // A parked negotiation is in a non-terminal state: the depth counts it.
    crate::negotiations::give_personal_agent(&app, "user-tomas").await;
    let started = app.post("/api/negotiations", &app.service_token(), &fixtures::good_match()).await;
    assert_eq!(started.body["negotiation"]["status"], "waiting_for_agent");
    let answer = app.call(Method::POST, PATH, None, Some(&request)).await;
    assert_eq!(answer.body["queue_depth"], 1);
    assert_eq!(answer.body["subscores"]["load"], 0.5);
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
        (json!({ "task_summary": "x".repeat(10_001) }).to_string(), "task_summary exceeds maximum length of 10000 characters"),
        (json!({ "task_summary": "ok", "weights": { "cost": -1 } }).to_string(), "Invalid weights: Weight 'cost' must be non-negative"),
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
    std::fs::write(&skills, serde_json::to_string(&vec![parley::scoring::default_skill()]).unwrap()).unwrap();
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
    let _: Value = Value::Null;
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("parley-assess-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
