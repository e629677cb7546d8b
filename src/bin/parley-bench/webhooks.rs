//! The webhooks phase (`--only webhooks`, never in a default run, since its endpoint would add
//! deliveries to every later phase): a receiver on loopback in this process answers every
//! delivery 204 at once and notes when each arrived.
//!
//! - Latency: the platform's webhook takes every event type while system-vs-system negotiations
//!   are created by [`CREATORS`] clients (a rate one endpoint keeps up with) for the phase's seconds; each delivery's latency is from
//!   its event's `timestamp` (when the event's transaction began) to its arrival, the first
//!   arrival of each `webhook-id`.
//! - Throughput: a second webhook is registered and asked to redeliver everything since the
//!   phase began (a backlog of every event, queued at once); deliveries per second is that
//!   backlog over the time from the redelivery's answer to its last arrival, at the default
//!   concurrency of one endpoint.
//!
//! Both webhooks are deleted at the end.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::StatusCode, routing::post};
use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    agent::{candidate_user, negotiation_body, source_user},
    harness::{Bench, call},
    report::{Results, note},
    timing::{Window, join_all, spawn_all},
};

/// Clients creating negotiations during the latency window: few enough that one endpoint, at
/// its default concurrency, keeps up with the events they make (the backlog measures the most).
const CREATORS: usize = 2;

/// Each `webhook-id`'s first arrival at one path, and its latency in ms.
type Arrivals = HashMap<String, (Instant, f64)>;

/// What the receiver saw, per path.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, Arrivals>>>);

impl Seen {
    fn of(&self, path: &str) -> Vec<(Instant, f64)> {
        self.0.lock().unwrap().get(path).map(|m| m.values().copied().collect()).unwrap_or_default()
    }
}

async fn receive(
    State(seen): State<Seen>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> StatusCode {
    let arrived = Instant::now();
    let now = Utc::now();
    let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let sent: Option<DateTime<Utc>> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["timestamp"].as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()))
        .map(|t| t.with_timezone(&Utc));
    let latency = sent.map(|t| (now - t).num_microseconds().unwrap_or(0) as f64 / 1000.0).unwrap_or(f64::NAN);
    seen.0.lock().unwrap().entry(uri.path().to_owned()).or_default().entry(id).or_insert((arrived, latency));
    StatusCode::NO_CONTENT
}

/// Registers a platform webhook at `url` for every event type; returns its id.
async fn register(bench: &Bench, url: &str) -> anyhow::Result<String> {
    let every: Vec<&str> = parley::events::KINDS.iter().map(|k| k.name).collect();
    let req = bench
        .client
        .post(format!("{}/api/webhooks", bench.base))
        .bearer_auth(&bench.service)
        .json(&json!({"url": url, "events": every}));
    let created = call(req, reqwest::StatusCode::CREATED, "registering a webhook").await?;
    Ok(created["id"].as_str().unwrap_or_default().to_owned())
}

async fn delete(bench: &Bench, id: &str) -> anyhow::Result<()> {
    let req =
        bench.client.request(Method::DELETE, format!("{}/api/webhooks/{id}", bench.base)).bearer_auth(&bench.service);
    call(req, reqwest::StatusCode::NO_CONTENT, "deleting a webhook").await.map(drop)
}

/// Waits (at most `limit`) until `path` has received `n` distinct deliveries.
async fn wait_for(seen: &Seen, path: &str, n: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if seen.of(path).len() >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The phase: latency under load, then the drain rate of a backlog.
pub async fn webhooks(bench: &Arc<Bench>, secs: u64, r: &mut Results) -> anyhow::Result<()> {
    let seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    let app = Router::new().route("/{path}", post(receive)).with_state(seen.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let began = Utc::now() - chrono::Duration::seconds(1);
    let live = register(bench, &format!("{base}/live")).await?;

    note(format!("webhooks: {secs} s of system-vs-system negotiations at {CREATORS} clients, each event delivered"));
    let window = Window::after_warmup(secs);
    let creators = (0..CREATORS).map(|w| {
        let bench = bench.clone();
        async move {
            let mut i = 0usize;
            while window.open() {
                let body = negotiation_body(
                    source_user(5_000_000 + w * 100_000 + i),
                    candidate_user(&format!("bench-hook-candidate-{w}-{i}")),
                );
                i += 1;
                bench.create(&body).await?;
            }
            anyhow::Ok(())
        }
    });
    join_all(spawn_all(creators)).await?;
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE created_at >= $1")
        .bind(began)
        .fetch_one(&bench.pool)
        .await?;
    let events = usize::try_from(events).unwrap_or(0);
    let all_live = wait_for(&seen, "/live", events, Duration::from_secs(60)).await;
    anyhow::ensure!(all_live, "the webhook received {} of {events} events within 60 s", seen.of("/live").len());
    let live_seen = seen.of("/live");
    let mut latencies: Vec<f64> = live_seen
        .iter()
        .filter(|(at, _)| window.contains(*at))
        .map(|(_, ms)| *ms)
        .filter(|ms| ms.is_finite())
        .collect();
    latencies.sort_by(f64::total_cmp);
    let in_window = latencies.len();
    r.set("webhook_events", events);
    r.set_p50_p99("webhook_latency", &latencies, 1);
    r.set_rounded("webhook_latency_max_ms", latencies.last().copied().unwrap_or(0.0), 1);
    r.set_rounded("webhook_deliveries_per_s_live", in_window as f64 / secs as f64, 1);

    note(format!("webhooks: a backlog of {events} events redelivered to a second endpoint"));
    let backlog = register(bench, &format!("{base}/backlog")).await?;
    let req = bench
        .client
        .post(format!("{}/api/webhooks/{backlog}/redeliver", bench.base))
        .bearer_auth(&bench.service)
        .json(&json!({"since": began}));
    let queued_at = Instant::now();
    let queued = call(req, reqwest::StatusCode::ACCEPTED, "redelivering a backlog").await?;
    let queued = queued["queued"].as_u64().unwrap_or(0) as usize;
    let drained = wait_for(&seen, "/backlog", queued, Duration::from_secs(300)).await;
    anyhow::ensure!(drained, "the backlog of {queued} was not delivered within 300 s");
    let last = seen.of("/backlog").iter().map(|(at, _)| *at).max().unwrap_or(queued_at);
    let took = last.saturating_duration_since(queued_at).as_secs_f64();
    r.set("webhook_backlog", queued);
    r.set_rounded("webhook_backlog_secs", took, 2);
    r.set_rounded("webhook_deliveries_per_s_backlog", queued as f64 / took.max(1e-6), 1);
    r.set("webhook_concurrency", bench.state.config().webhooks.concurrency);

    delete(bench, &live).await?;
    delete(bench, &backlog).await?;
    server.abort();
    Ok(())
}
