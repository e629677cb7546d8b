//! Webhooks in the fault run: the platform registers one endpoint for every event type, and
//! the receiver ([`Receiver`], in this process, so that it outlives every kill of the service)
//! fails while the faults happen: a 500 now and then, a 503 with `Retry-After: 1`, an answer
//! slower than Parley's timeout. So deliveries are failing, retrying and in flight when the
//! service is killed, its database restarted and its connections terminated. Once the faults are
//! over the receiver answers 200 to everything ([`Receiver::heal`]).
//!
//! Afterwards [`check`] holds what the receiver saw against the event log: nothing lost (every
//! event received and answered 200 at least once), nothing duplicated but under the same
//! `webhook-id` (an event never arrives under two ids, an id never with two bodies), nothing
//! unexpected (every signature verifies with the endpoint's secret, every id names its event's
//! sequence, no delivery given up, none left pending).

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Lcg, Report};

/// One delivery as the receiver saw it.
struct Seen {
    id: String,
    body: Vec<u8>,
    verified: bool,
    answered: u16,
}

struct Inner {
    rng: Lcg,
    healthy: bool,
    secret: Option<Vec<u8>>,
    seen: Vec<Seen>,
}

/// The in-process receiver of the fault run.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    pub async fn start(seed: u64) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
        let inner = Inner { rng: Lcg(seed), healthy: false, secret: None, seen: Vec::new() };
        let receiver = Receiver { url, inner: Arc::new(Mutex::new(inner)) };
        let app = Router::new().route("/hook", post(deliver)).with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        receiver
    }

    /// The endpoint's secret, to verify signatures with.
    pub fn secret(&self, secret: &str) {
        let key = STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
        self.inner.lock().unwrap().secret = Some(key);
    }

    /// From now on, every delivery is answered 200.
    pub fn heal(&self) {
        self.inner.lock().unwrap().healthy = true;
    }

    /// Deliveries received so far.
    pub fn received(&self) -> usize {
        self.inner.lock().unwrap().seen.len()
    }
}

fn verify(key: &[u8], headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{}.{}.", header("webhook-id"), header("webhook-timestamp")).as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    header("webhook-signature").split(' ').any(|s| s == expected)
}

async fn deliver(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    let (answer, wait) = {
        let mut inner = r.inner.lock().unwrap();
        let verified = inner.secret.as_deref().is_some_and(|k| verify(k, &headers, &body));
        let roll = inner.rng.below(100);
        let (answer, wait) = match roll {
            _ if inner.healthy => (200, None),
            0..20 => (500, None),
            20..30 => (503, None),
            30..40 => (200, Some(Duration::from_millis(1500))), // slower than the 1 s timeout
            _ => (200, None),
        };
        let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        // A slow answer is not received: Parley gave up waiting before it came.
        let answered = if wait.is_some() { 0 } else { answer };
        inner.seen.push(Seen { id, body: body.to_vec(), verified, answered });
        (answer, wait)
    };
    if let Some(wait) = wait {
        tokio::time::sleep(wait).await;
    }
    let status = StatusCode::from_u16(answer).unwrap();
    if answer == 503 { (status, [("retry-after", "1")]).into_response() } else { status.into_response() }
}

/// Registers the platform's endpoint for every event type; the receiver learns its secret.
pub async fn register(client: &reqwest::Client, base: &str, token: &str, receiver: &Receiver) {
    let every: Vec<&str> = parley::events::KINDS.iter().map(|k| k.name).collect();
    let created: Value = client
        .post(format!("{base}/api/webhooks"))
        .bearer_auth(token)
        .json(&json!({"url": receiver.url, "events": every}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    receiver.secret(created["secret"].as_str().unwrap_or_else(|| panic!("{created}")));
}

/// Waits (at most `limit`) until the outbox holds no pending delivery.
pub async fn wait_all_delivered(pool: &sqlx::PgPool, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox_deliveries WHERE status = 'pending'")
            .fetch_one(pool)
            .await
            .unwrap();
        if pending == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The webhook report, and its line.
pub async fn check(pool: &sqlx::PgPool, receiver: &Receiver) -> (Report, String) {
    let mut report = Report::default();
    let events: Vec<(i64, String)> =
        sqlx::query_as("SELECT event_id, kind FROM events ORDER BY event_id").fetch_all(pool).await.unwrap();
    let (failed, pending): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'pending') FROM outbox_deliveries",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let inner = receiver.inner.lock().unwrap();
    let mut bodies: HashMap<&str, &[u8]> = HashMap::new();
    let mut ids_of_event: HashMap<i64, HashSet<&str>> = HashMap::new();
    let mut delivered: HashSet<i64> = HashSet::new();
    let mut attempts_per_id: HashMap<&str, usize> = HashMap::new();
    for seen in &inner.seen {
        *attempts_per_id.entry(&seen.id).or_default() += 1;
        let body: Value = serde_json::from_slice(&seen.body).unwrap_or(Value::Null);
        let Some(sequence) = body["sequence"].as_i64() else {
            report.unexpected += 1;
            continue;
        };
        if !seen.verified || seen.id != format!("evt_{sequence}") {
            report.unexpected += 1;
        }
        ids_of_event.entry(sequence).or_default().insert(&seen.id);
        match bodies.get(seen.id.as_str()) {
            Some(first) if *first != seen.body.as_slice() => report.duplicated += 1, // one id, two bodies
            _ => {
                bodies.insert(&seen.id, &seen.body);
            }
        }
        if seen.answered == 200 {
            delivered.insert(sequence);
        }
    }
    report.duplicated += ids_of_event.values().filter(|ids| ids.len() > 1).count() as u64;
    report.lost += events.iter().filter(|(id, _)| !delivered.contains(id)).count() as u64;
    report.unexpected += (failed + pending) as u64;
    let retried = attempts_per_id.values().filter(|n| **n > 1).count();
    let line = format!(
        "{} events, {} deliveries received ({} of them again under the same webhook-id), {} delivered, {failed} given up, \
         {pending} pending",
        events.len(),
        inner.seen.len(),
        retried,
        delivered.len(),
    );
    (report, line)
}
