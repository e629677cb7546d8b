//! Webhooks, verified by a library Parley did not write: a receiver (`tests/webhooks/receiver.py`,
//! in a virtualenv the test makes with `standardwebhooks` from PyPI) checks every delivery's
//! signature with the Standard Webhooks reference library and answers as each test scripts it.
//!
//! What is checked: every event reaches the platform's endpoint, signed, in the documented shape
//! and once; failures (500, 503, a timeout) are retried under the same `webhook-id`, after at
//! least a `Retry-After`; a 410 disables the endpoint at once and days of failures do too (in
//! seconds here); a rotated secret signs beside the new one for its overlap, then no more;
//! redelivery by id and by time; a person's endpoint gets that person's events only; a loopback
//! URL is refused without `PARLEY_A2A_ALLOW_PRIVATE_TARGETS`; and the refusals of bad input.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{fixtures, helpers::TestApp};

/// What the receiver's virtualenv holds.
const RECEIVER: &[&str] = &["standardwebhooks==1.1.0"];

/// A running receiver: its base URL and the log of what it received.
pub(crate) struct Receiver {
    pub(crate) base: String,
    log: PathBuf,
    client: reqwest::Client,
    _child: tokio::process::Child,
}

impl Receiver {
    /// Starts `tests/webhooks/receiver.py` on a free port of 127.0.0.1.
    pub(crate) async fn start() -> Receiver {
        let python = tokio::task::spawn_blocking(|| {
            crate::a2a_agents::venv("webhook-receiver-venv", Path::new("python3"), RECEIVER)
        })
        .await
        .unwrap();
        let log = std::env::temp_dir().join(format!("parley-webhooks-{}.jsonl", uuid::Uuid::new_v4()));
        let mut child = tokio::process::Command::new(python)
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks/receiver.py"))
            .args(["--port", "0", "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("starting the webhook receiver");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let base = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(base) = line.strip_prefix("ready ") {
                    return base.trim().to_owned();
                }
            }
            panic!("the receiver ended before it was ready");
        })
        .await
        .expect("the receiver was not ready within 30 s");
        Receiver { base, log, client: reqwest::Client::new(), _child: child }
    }

    /// The URL of `path` at the receiver.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn control(&self, command: &str, body: Value) {
        let r = self.client.post(format!("{}/_control/{command}", self.base)).json(&body).send().await.unwrap();
        assert!(r.status().is_success());
    }

    /// The secrets deliveries to `path` are verified with (each entry's `verifiedWith` holds the
    /// indexes of those that verify it).
    pub(crate) async fn secrets(&self, path: &str, secrets: &[&str]) {
        self.control("secrets", json!({"path": path, "secrets": secrets})).await;
    }

    /// Queues the next answers to `path` (`{status, retryAfter?, delay?}` each).
    pub(crate) async fn script(&self, path: &str, responses: Value) {
        self.control("script", json!({"path": path, "responses": responses})).await;
    }

    /// Every delivery to `path` so far, in arrival order.
    pub(crate) fn received(&self, path: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["path"] == path)
            .collect()
    }

    /// Waits until the deliveries to `path` satisfy `done` (at most `limit`), and returns them.
    pub(crate) async fn wait(&self, path: &str, limit: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let got = self.received(path);
            if done(&got) {
                return got;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out; {path} received {got:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A service whose deliveries are quick to retry: 1 s first retry, 2 s timeout, 60 s window, and
/// private targets allowed (the receiver is on 127.0.0.1).
pub(crate) async fn app_with(adjust: impl FnOnce(&mut parley::Config)) -> TestApp {
    TestApp::spawn_with(|c| {
        c.a2a_allow_private_targets = true;
        c.housekeeping_every = Duration::from_secs(1);
        c.webhooks.timeout = Duration::from_secs(2);
        c.webhooks.retry_first = Duration::from_secs(1);
        c.webhooks.retry_for = Duration::from_secs(60);
        c.webhooks.poll = Duration::from_millis(50);
        adjust(c);
    })
    .await
}

/// The sum of the samples of the counter `name` whose labels include every one of `labels`
/// (the recorder is process-wide: tests compare before and after).
pub(crate) async fn counted(app: &TestApp, name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = app.get("/metrics", &app.service_token()).await.text;
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Registers a webhook at `url` for the caller of `token`; returns the 201 body.
async fn register(app: &TestApp, token: &str, url: &str, events: Option<Value>) -> Value {
    let mut body = json!({ "url": url });
    if let Some(events) = events {
        body["events"] = events;
    }
    let created = app.post("/api/webhooks", token, &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.body
}

/// A system-vs-system negotiation between `source` and `candidate` (nobody has an agent), run
/// to its end; returns its id.
async fn negotiation(app: &TestApp, source: &str, candidate: &str) -> String {
    let mut body = fixtures::good_match();
    body["sourceUser"]["id"] = json!(source);
    body["candidateUser"]["id"] = json!(candidate);
    let started = app.start(&body).await;
    let id = started["negotiation"]["id"].as_str().unwrap().to_owned();
    app.wait_for(&id, Duration::from_secs(20), |v| v["status"] == "completed").await;
    id
}

/// The event log as `(sequence, kind, data)`, oldest first, of the events `who` may see (all
/// when `None`).
async fn events(app: &TestApp, who: Option<&str>) -> Vec<(i64, String, Value)> {
    let rows: Vec<(i64, String, Value, String, String)> =
        sqlx::query_as("SELECT event_id, kind, data, source_user_id, candidate_user_id FROM events ORDER BY event_id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    rows.into_iter()
        .filter(|(.., s, c)| who.is_none_or(|w| w == s || w == c))
        .map(|(id, kind, data, ..)| (id, kind, data))
        .collect()
}

#[tokio::test]
async fn every_event_reaches_the_platform_once_signed_as_the_standard_library_verifies() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let delivered = [("target", "webhook"), ("outcome", "delivered")];
    let delivered_before = counted(&app, "parley_outbox_attempts_total", &delivered).await;
    let every_type = json!([
        "opportunity.status",
        "negotiation.turn",
        "negotiation.outcome",
        "negotiation.round",
        "delegation.status"
    ]);
    let hook = register(&app, &app.service_token(), &receiver.url("/platform"), Some(every_type.clone())).await;
    let secret = hook["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{hook}");
    assert_eq!((hook["status"].clone(), hook["events"].clone()), (json!("enabled"), every_type));
    receiver.secrets("/platform", &[secret]).await;

    negotiation(&app, "user-maya", "user-tomas").await;
    let log = events(&app, None).await;
    assert!(log.len() >= 4, "an opportunity, turns and an outcome: {log:?}");
    receiver.wait("/platform", Duration::from_secs(30), |got| got.len() >= log.len()).await;
    // Settle: nothing more comes (each event once).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.received("/platform");
    assert_eq!(got.len(), log.len(), "each event delivered once: {got:#?}");
    for (sequence, kind, data) in &log {
        let d = got
            .iter()
            .find(|d| d["body"]["sequence"] == *sequence)
            .unwrap_or_else(|| panic!("event {sequence} not delivered"));
        assert_eq!(d["webhookId"], format!("evt_{sequence}"));
        assert_eq!(d["verifiedWith"], json!([0]), "the reference library verified the signature: {d}");
        assert_eq!(d["body"]["type"], *kind);
        assert_eq!(d["body"]["data"], *data);
        assert!(d["body"]["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{d}");
        assert_eq!(d["contentType"], "application/json");
        let sent_at: i64 = d["webhookTimestamp"].as_str().unwrap().parse().unwrap();
        assert!((chrono::Utc::now().timestamp() - sent_at).abs() < 60);
    }
    // The log and the endpoint say so too.
    let id = hook["id"].as_str().unwrap();
    let page = app.get(&format!("/api/webhooks/{id}/deliveries?limit=100"), &app.service_token()).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let deliveries = page.body["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), log.len());
    assert!(deliveries.iter().all(|d| d["status"] == "delivered" && d["attempts"] == 1 && d["lastStatusCode"] == 200));
    assert!(deliveries.windows(2).all(|w| w[0]["sequence"].as_i64() > w[1]["sequence"].as_i64()), "newest first");
    let listed = app.get("/api/webhooks", &app.service_token()).await.body;
    let last = &listed["webhooks"][0]["lastDelivery"];
    assert_eq!((last["ok"].clone(), last["statusCode"].clone()), (json!(true), json!(200)), "{listed}");
    assert!(listed["webhooks"][0].get("secret").is_none(), "the secret is never read back");
    // The attempts are on /metrics, by outcome.
    let delivered_after = counted(&app, "parley_outbox_attempts_total", &delivered).await;
    assert!(delivered_after - delivered_before >= log.len() as f64, "{delivered_before} -> {delivered_after}");
}

#[tokio::test]
async fn failures_are_retried_under_the_same_id_after_any_retry_after() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let outcomes = ["http_error", "timeout", "delivered"];
    let mut before = Vec::new();
    for outcome in outcomes {
        before
            .push(counted(&app, "parley_outbox_attempts_total", &[("target", "webhook"), ("outcome", outcome)]).await);
    }
    let hook =
        register(&app, &app.service_token(), &receiver.url("/flaky"), Some(json!(["negotiation.outcome"]))).await;
    receiver.secrets("/flaky", &[hook["secret"].as_str().unwrap()]).await;
    // A 500, a 503 asking for 3 s, an answer slower than the 2 s timeout, then success.
    receiver
        .script("/flaky", json!([{"status": 500}, {"status": 503, "retryAfter": 3}, {"status": 200, "delay": 4}]))
        .await;
    negotiation(&app, "user-maya", "user-tomas").await;
    let got = receiver.wait("/flaky", Duration::from_secs(40), |got| got.len() >= 4).await;
    let ids: Vec<&Value> = got.iter().map(|d| &d["webhookId"]).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "every attempt under one webhook-id: {ids:?}");
    assert!(got.iter().all(|d| d["verifiedWith"] == json!([0]) && d["body"] == got[0]["body"]), "{got:#?}");
    let at: Vec<f64> = got.iter().map(|d| d["at"].as_f64().unwrap()).collect();
    assert!(at[2] - at[1] >= 2.9, "the retry after the 503 waited its Retry-After: {at:?}");
    assert!(at[1] - at[0] >= 0.4, "retries back off: {at:?}");
    // The slow answer was a timeout; the fourth attempt was delivered.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = hook["id"].as_str().unwrap();
    let log = app.get(&format!("/api/webhooks/{id}/deliveries"), &app.service_token()).await.body;
    let d = &log["deliveries"][0];
    assert_eq!((d["status"].clone(), d["attempts"].clone()), (json!("delivered"), json!(4)), "{log}");
    assert_eq!(d["webhookId"], *ids[0]);
    for (outcome, before) in outcomes.into_iter().zip(before) {
        let after = counted(&app, "parley_outbox_attempts_total", &[("target", "webhook"), ("outcome", outcome)]).await;
        assert!(after > before, "{outcome} counted: {before} -> {after}");
    }
}

#[tokio::test]
async fn a_410_disables_at_once_and_days_of_failures_disable_too() {
    let app = app_with(|c| {
        c.webhooks.retry_for = Duration::from_secs(4);
        c.webhooks.disable_after = Duration::from_secs(3);
    })
    .await;
    let receiver = Receiver::start().await;
    let disabled = async |reason: &str| {
        counted(&app, "parley_outbox_disabled_total", &[("target", "webhook"), ("reason", reason)]).await
    };
    let (gone_before, failing_before) = (disabled("gone").await, disabled("failing").await);
    let gone = register(&app, &app.service_token(), &receiver.url("/gone"), Some(json!(["negotiation.outcome"]))).await;
    let failing =
        register(&app, &app.service_token(), &receiver.url("/down"), Some(json!(["negotiation.outcome"]))).await;
    receiver.script("/gone", json!([{"status": 410}])).await;
    receiver.script("/down", json!(vec![json!({"status": 500}); 50])).await;
    negotiation(&app, "user-maya", "user-tomas").await;
    let token = app.service_token();
    let read =
        async |hook: &Value| app.get(&format!("/api/webhooks/{}", hook["id"].as_str().unwrap()), &token).await.body;
    // The 410: disabled after its one attempt, saying why.
    receiver.wait("/gone", Duration::from_secs(20), |got| !got.is_empty()).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let w = read(&gone).await;
        if w["status"] == "disabled" {
            assert!(w["disabledReason"].as_str().unwrap().contains("410"), "{w}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not disabled: {w}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The failing one: retried until its 4 s window, then given up; disabled once a failure
    // comes 3 s or more after the first (a second outcome, sent after that).
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let w = read(&failing).await;
    assert_eq!(w["status"], "enabled", "not yet: nothing was attempted after 3 s of failures: {w}");
    negotiation(&app, "user-lea", "user-raj").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let w = read(&failing).await;
        if w["status"] == "disabled" {
            assert!(w["disabledReason"].as_str().unwrap().starts_with("every delivery failed for 3s"), "{w}");
            assert!(w["failingSince"].is_string());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not disabled: {w}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(disabled("gone").await > gone_before, "a disabling by 410 counted");
    assert!(disabled("failing").await > failing_before, "a disabling by failures counted");
    // A disabled endpoint gets nothing more, and cannot be redelivered to until enabled again.
    let before = receiver.received("/gone").len();
    negotiation(&app, "user-maya", "user-raj").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.received("/gone").len(), before);
    let id = gone["id"].as_str().unwrap();
    let refused =
        app.post(&format!("/api/webhooks/{id}/redeliver"), &token, &json!({"since": "2020-01-01T00:00:00Z"})).await;
    refused.assert_error(StatusCode::CONFLICT, "invalid_state");
    let enabled = app
        .call(Method::PATCH, &format!("/api/webhooks/{id}"), Some(&token), Some(&json!({"status": "enabled"})))
        .await;
    assert_eq!(
        (enabled.status, enabled.body["status"].clone()),
        (StatusCode::OK, json!("enabled")),
        "{}",
        enabled.text
    );
    assert!(enabled.body["disabledReason"].is_null());
    // What it missed while disabled comes with a redelivery by time.
    let redone =
        app.post(&format!("/api/webhooks/{id}/redeliver"), &token, &json!({"since": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(redone.status, StatusCode::ACCEPTED, "{}", redone.text);
    assert_eq!(redone.body["queued"], 3, "three outcomes in the log: {}", redone.text);
    receiver.wait("/gone", Duration::from_secs(20), |got| got.len() >= before + 3).await;
}

#[tokio::test]
async fn no_more_deliveries_are_in_flight_to_one_endpoint_than_its_concurrency() {
    let app = app_with(|c| c.webhooks.concurrency = 2).await;
    let receiver = Receiver::start().await;
    let every = json!(["opportunity.status", "negotiation.turn", "negotiation.outcome"]);
    register(&app, &app.service_token(), &receiver.url("/slow"), Some(every)).await;
    // Every answer takes a second.
    receiver.script("/slow", json!(vec![json!({"status": 200, "delay": 1}); 100])).await;
    negotiation(&app, "user-maya", "user-tomas").await;
    negotiation(&app, "user-lea", "user-raj").await;
    let expected = events(&app, None).await.len();
    assert!(expected >= 8, "{expected} events");
    let got = receiver.wait("/slow", Duration::from_secs(40), |got| got.len() >= expected).await;
    // At each arrival, the deliveries that arrived less than a second before it are still
    // being answered: with the one arriving, at most two.
    let at: Vec<f64> = got.iter().map(|d| d["at"].as_f64().unwrap()).collect();
    let most = at.iter().map(|t| at.iter().filter(|u| *u <= t && *t - *u < 0.95).count()).max().unwrap();
    assert_eq!(most, 2, "at most 2 in flight, and 2 used: {at:?}");
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_new_one_for_its_overlap_then_no_more() {
    let app = app_with(|c| c.webhooks.secret_overlap = Duration::from_secs(3)).await;
    let receiver = Receiver::start().await;
    let hook =
        register(&app, &app.service_token(), &receiver.url("/rotating"), Some(json!(["negotiation.outcome"]))).await;
    let old = hook["secret"].as_str().unwrap().to_owned();
    let id = hook["id"].as_str().unwrap();
    let rotated = app.post(&format!("/api/webhooks/{id}/rotate"), &app.service_token(), &json!({})).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new = rotated.body["secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    assert!(rotated.body["previousSecretExpiresAt"].is_string());
    receiver.secrets("/rotating", &[&new, &old]).await;
    negotiation(&app, "user-maya", "user-tomas").await;
    let got = receiver.wait("/rotating", Duration::from_secs(20), |got| !got.is_empty()).await;
    assert_eq!(got[0]["verifiedWith"], json!([0, 1]), "both secrets verify during the overlap: {}", got[0]);
    assert_eq!(got[0]["webhookSignature"].as_str().unwrap().split(' ').count(), 2);
    tokio::time::sleep(Duration::from_secs(4)).await;
    negotiation(&app, "user-lea", "user-raj").await;
    let got = receiver.wait("/rotating", Duration::from_secs(20), |got| got.len() >= 2).await;
    assert_eq!(got[1]["verifiedWith"], json!([0]), "after the overlap only the new secret signs: {}", got[1]);
    let read = app.get(&format!("/api/webhooks/{id}"), &app.service_token()).await.body;
    assert!(read["previousSecretExpiresAt"].is_null(), "{read}");
}

#[tokio::test]
async fn redelivery_by_id_sends_the_same_message_again_under_its_id() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let hook = register(&app, &app.service_token(), &receiver.url("/again"), None).await;
    assert!(!hook["events"].as_array().unwrap().contains(&json!("negotiation.turn")), "turns are opt-in: {hook}");
    receiver.secrets("/again", &[hook["secret"].as_str().unwrap()]).await;
    negotiation(&app, "user-maya", "user-tomas").await;
    let expected = events(&app, None).await.into_iter().filter(|(_, k, _)| k != "negotiation.turn").count();
    let first = receiver.wait("/again", Duration::from_secs(20), |got| got.len() >= expected).await;
    let id = hook["id"].as_str().unwrap();
    let which = first[0]["webhookId"].as_str().unwrap().to_owned();
    let asked = app
        .post(&format!("/api/webhooks/{id}/redeliver"), &app.service_token(), &json!({"ids": [which, "evt_999999"]}))
        .await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.text);
    assert_eq!((asked.body["queued"].clone(), asked.body["notQueued"].clone()), (json!(1), json!(["evt_999999"])));
    let again = receiver.wait("/again", Duration::from_secs(20), |got| got.len() > expected).await;
    let resent = again.last().unwrap();
    assert_eq!(resent["webhookId"], which);
    assert_eq!(resent["body"], first[0]["body"], "the same message");
    assert_eq!(resent["verifiedWith"], json!([0]));
    for bad in [
        json!({}),
        json!({"ids": []}),
        json!({"ids": ["msg_1"]}),
        json!({"ids": ["evt_1"], "since": "2020-01-01T00:00:00Z"}),
    ] {
        let refused = app.post(&format!("/api/webhooks/{id}/redeliver"), &app.service_token(), &bad).await;
        refused.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
}

#[tokio::test]
async fn a_person_gets_their_own_events_only_and_manages_their_own_webhooks_only() {
    let app = app_with(|_| {}).await;
    let receiver = Receiver::start().await;
    let (maya, lea) = (app.user_token("user-maya"), app.user_token("user-lea"));
    let mine = register(&app, &maya, &receiver.url("/maya"), None).await;
    let hers = register(&app, &lea, &receiver.url("/lea"), None).await;
    let platform = register(&app, &app.service_token(), &receiver.url("/all"), None).await;
    negotiation(&app, "user-maya", "user-tomas").await;
    negotiation(&app, "user-raj", "user-tomas").await;
    let all = events(&app, None).await.into_iter().filter(|(_, k, _)| k != "negotiation.turn").count();
    let maya_sees =
        events(&app, Some("user-maya")).await.into_iter().filter(|(_, k, _)| k != "negotiation.turn").count();
    assert!(maya_sees > 0 && maya_sees < all);
    receiver.wait("/all", Duration::from_secs(20), |got| got.len() >= all).await;
    let got = receiver.wait("/maya", Duration::from_secs(20), |got| got.len() >= maya_sees).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received("/maya").len(), maya_sees, "only Maya's events: {got:#?}");
    assert!(receiver.received("/lea").is_empty(), "Lea takes part in none");
    for d in receiver.received("/maya") {
        let data = &d["body"]["data"];
        let sequence = d["body"]["sequence"].as_i64().unwrap();
        let (source,): (String,) = sqlx::query_as("SELECT source_user_id FROM events WHERE event_id = $1")
            .bind(sequence)
            .fetch_one(&app.pool)
            .await
            .unwrap();
        assert_eq!(source, "user-maya", "{data}");
    }
    // Each manages their own: the others' are not found, and the platform's list is its own.
    let listed = app.get("/api/webhooks", &maya).await.body;
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1);
    assert_eq!(listed["webhooks"][0]["id"], mine["id"]);
    let theirs = hers["id"].as_str().unwrap();
    for (method, path) in [
        (Method::GET, format!("/api/webhooks/{theirs}")),
        (Method::DELETE, format!("/api/webhooks/{theirs}")),
        (Method::POST, format!("/api/webhooks/{theirs}/rotate")),
        (Method::GET, format!("/api/webhooks/{theirs}/deliveries")),
    ] {
        app.call(method, &path, Some(&maya), Some(&json!({}))).await.assert_error(StatusCode::NOT_FOUND, "not_found");
    }
    let platform_list = app.get("/api/webhooks", &app.service_token()).await.body;
    assert_eq!(platform_list["webhooks"].as_array().unwrap().len(), 1);
    assert_eq!(platform_list["webhooks"][0]["id"], platform["id"]);
    // Agents' keys are not taken here.
    let agent = app.register_agent("user-maya").await;
    let by_key = app.call(Method::GET, "/api/webhooks", Some(&agent.key), None).await;
    assert_eq!(by_key.status, StatusCode::UNAUTHORIZED);
    let deleted =
        app.call(Method::DELETE, &format!("/api/webhooks/{}", mine["id"].as_str().unwrap()), Some(&maya), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_loopback_url_is_refused_without_the_setting_and_bad_input_changes_nothing() {
    let app = TestApp::spawn().await;
    let token = app.service_token();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest",
    ] {
        app.post("/api/webhooks", &token, &json!({"url": url}))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "url_refused");
    }
    for body in [
        json!({"url": "ftp://example.com/"}),
        json!({"url": "not a url"}),
        json!({"url": "https://example.com/", "events": []}),
        json!({"url": "https://example.com/", "events": ["negotiation.everything"]}),
        json!({"url": "https://example.com/", "extra": 1}),
        json!({"events": ["negotiation.outcome"]}),
    ] {
        app.post("/api/webhooks", &token, &body).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    assert_eq!(app.count("outbox_targets").await, 0, "nothing stored");
    app.call(Method::POST, "/api/webhooks", None, Some(&json!({"url": "https://example.com/"})))
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    app.get(&format!("/api/webhooks/{}", uuid::Uuid::new_v4()), &token)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    app.get("/api/webhooks/not-an-id", &token).await.assert_error(StatusCode::NOT_FOUND, "not_found");

    // With the setting, a loopback URL is taken; a change of URL is judged the same way.
    let allowed = app_with(|c| c.webhooks.max_per_owner = 2).await;
    let token = allowed.service_token();
    let hook = register(&allowed, &token, "http://127.0.0.1:9/hook", None).await;
    register(&allowed, &token, "http://127.0.0.1:9/other", None).await;
    allowed
        .post("/api/webhooks", &token, &json!({"url": "http://127.0.0.1:9/third"}))
        .await
        .assert_error(StatusCode::CONFLICT, "limit_reached");
    let id = hook["id"].as_str().unwrap();
    let patch = |body: Value| {
        let (allowed, token) = (&allowed, &token);
        async move { allowed.call(Method::PATCH, &format!("/api/webhooks/{id}"), Some(token), Some(&body)).await }
    };
    patch(json!({"status": "paused"})).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    patch(json!({"url": "gopher://x"})).await.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    let changed = patch(json!({"events": ["negotiation.turn"], "status": "disabled"})).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.text);
    assert_eq!(
        (changed.body["events"].clone(), changed.body["status"].clone()),
        (json!(["negotiation.turn"]), json!("disabled"))
    );
    assert_eq!(changed.body["disabledReason"], "disabled by its owner");
    let q = allowed.get(&format!("/api/webhooks/{id}/deliveries?limit=0"), &token).await;
    q.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
}

#[tokio::test]
async fn the_event_types_webhooks_take_are_the_event_logs() {
    let app = app_with(|_| {}).await;
    let (check,): (String,) =
        sqlx::query_as("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'events_kind_check'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let mut in_sql: Vec<&str> = check.split('\'').skip(1).step_by(2).collect();
    in_sql.sort_unstable();
    let every: Vec<&str> = parley::events::KINDS.iter().map(|k| k.name).collect();
    let mut listed = every.clone();
    listed.sort_unstable();
    assert_eq!(in_sql, listed, "the event table's kinds are the ones webhooks take (add a kind to both)");
    let created = register(&app, &app.service_token(), "http://127.0.0.1:9/x", Some(json!(every))).await;
    assert_eq!(created["events"], json!(every));
}
