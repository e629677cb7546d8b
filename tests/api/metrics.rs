//! `GET /metrics`: the Prometheus exposition, read with a real Prometheus text parser. The
//! recorder is process-wide, so every test here compares before and after, never absolutes.

use std::time::Duration;

use prometheus_parse::{Scrape, Value as Sampled};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{fixtures, helpers::TestApp};

/// Every series an operator can rely on finding.
const REQUIRED: &[&str] = &[
    "parley_http_requests_total",
    "parley_http_request_duration_seconds",
    "parley_turns_total",
    "parley_negotiations_started_total",
    "parley_negotiations_ended_total",
    "parley_claims_total",
    "parley_pickup_wait_seconds",
    "parley_long_poll_waiters",
    "parley_parked_turns",
    "parley_claimed_turns",
    "parley_timer_jobs_pending",
    "parley_timer_jobs_overdue",
    "parley_db_pool_connections",
];

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("a valid Prometheus exposition")
}

pub(crate) async fn scrape(app: &TestApp) -> Scrape {
    let answer = app.get("/metrics", &app.service_token()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    parse(&answer.text)
}

/// The sum of `name`'s samples whose labels include `labels` (a histogram counts its
/// observations).
pub(crate) fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Sampled::Counter(v) | Sampled::Gauge(v) | Sampled::Untyped(v) => *v,
            Sampled::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
            Sampled::Summary(_) => 0.0,
        })
        .sum()
}

#[tokio::test]
async fn metrics_are_for_the_service_role_and_move_with_a_negotiation() {
    let app = TestApp::spawn().await;
    let none = app.call(Method::GET, "/metrics", None, None).await;
    none.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let user = app.get("/metrics", &app.user_token("user-maya")).await;
    user.assert_error(StatusCode::FORBIDDEN, "forbidden");

    let before = scrape(&app).await;
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let outcome = app.wait_for(&id, Duration::from_secs(10), |n| n["status"] == "completed").await;
    let turns = outcome["turns"].as_array().unwrap().len() as f64;
    assert!(turns >= 2.0, "{outcome}");
    let read = app.get(&format!("/api/negotiations/{id}"), &app.service_token()).await;
    assert_eq!(read.status, StatusCode::OK);
    let after = scrape(&app).await;

    for name in REQUIRED {
        assert!(after.samples.iter().any(|s| s.metric == *name), "{name} is missing from /metrics");
    }
    let grew = |name: &str, labels: &[(&str, &str)]| total(&after, name, labels) - total(&before, name, labels);
    assert!(grew("parley_negotiations_started_total", &[]) >= 1.0);
    assert!(grew("parley_negotiations_ended_total", &[("outcome", "accepted"), ("reason", "none")]) >= 1.0);
    assert!(grew("parley_turns_total", &[("played_by", "system"), ("action", "propose")]) >= 1.0);
    assert!(grew("parley_turns_total", &[("played_by", "system")]) >= turns);
    let route = [("method", "GET"), ("route", "/api/negotiations/:id"), ("status", "200")];
    assert!(grew("parley_http_requests_total", &route) >= 1.0);
    assert!(grew("parley_http_request_duration_seconds", &[("route", "/api/negotiations/:id")]) >= 1.0);
    // Bounded labels: route templates, never raw paths or ids.
    for sample in &after.samples {
        for (key, value) in sample.labels.iter() {
            assert!(!value.contains(&id), "{} has {key}={value}", sample.metric);
        }
    }
    assert!(total(&after, "parley_db_pool_connections", &[("state", "in_use")]) >= 0.0);
}

#[tokio::test]
async fn claims_parked_turns_and_pickup_waits_are_counted() {
    let app = TestApp::spawn().await;
    let agent = app.register_agent("user-tomas").await;
    let before = scrape(&app).await;
    // An empty long-poll, then a negotiation whose candidate turn is parked for the agent.
    assert_eq!(app.pickup(&agent, Some(1)).await.status, StatusCode::NO_CONTENT);
    let started = app.start(&fixtures::good_match()).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    let parked = scrape(&app).await;
    assert!(total(&parked, "parley_parked_turns", &[]) >= 1.0);
    let pending_timers = total(&parked, "parley_timer_jobs_pending", &[("queue", "parley.park_timeout")]);
    assert!(pending_timers >= 1.0, "the park timer is pending");

    let picked = app.pickup(&agent, Some(1)).await;
    assert_eq!(picked.status, StatusCode::OK, "{}", picked.text);
    assert_eq!(picked.body["negotiationId"], json!(id));
    let claimed = scrape(&app).await;
    assert!(total(&claimed, "parley_claimed_turns", &[]) >= 1.0);
    assert!(total(&claimed, "parley_claims_total", &[]) - total(&before, "parley_claims_total", &[]) >= 1.0);
    let waits = total(&claimed, "parley_pickup_wait_seconds", &[]) - total(&before, "parley_pickup_wait_seconds", &[]);
    assert!(waits >= 2.0, "both pickups were measured: {waits}");

    let answer = crate::helpers::answer("reject", picked.body["claimToken"].as_str());
    assert_eq!(app.respond(&agent, &id, &answer).await.status, StatusCode::OK);
    let after = scrape(&app).await;
    let personal = [("played_by", "personal"), ("action", "reject")];
    assert!(total(&after, "parley_turns_total", &personal) - total(&before, "parley_turns_total", &personal) >= 1.0);
    let rejected = [("outcome", "rejected")];
    assert!(
        total(&after, "parley_negotiations_ended_total", &rejected)
            - total(&before, "parley_negotiations_ended_total", &rejected)
            >= 1.0
    );
}

#[tokio::test]
async fn the_open_listener_serves_only_metrics_without_credentials() {
    let app = TestApp::spawn_with(|c| c.metrics_bind = Some("127.0.0.1:0".parse().unwrap())).await;
    let port = app.metrics_port.expect("the open listener is bound");
    let base = format!("http://127.0.0.1:{port}");
    let open = app.client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(open.status(), StatusCode::OK);
    assert!(open.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = open.text().await.unwrap();
    assert!(parse(&text).samples.iter().any(|s| s.metric == "parley_parked_turns"));
    for path in ["/healthz", "/api/negotiations", "/api/agents", "/"] {
        let other = app.client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(other.status(), StatusCode::NOT_FOUND, "{path} on the metrics listener");
    }
}
