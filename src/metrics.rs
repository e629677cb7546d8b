//! What the service counts and measures, exported at `GET /metrics` in the Prometheus text format.
//!
//! Everything is recorded through the `metrics` facade into one process-wide Prometheus recorder
//! (installed once, on the first [`install`]); the exposition is the exporter's, never written by
//! hand. Events are counted where they are committed: a turn, a claim or an ending is recorded
//! after the transaction that made it committed, so a rolled-back attempt is never counted.
//! Quantities that live in the database (parked and claimed turns, pending and overdue timers)
//! are read by one query per scrape, not tracked by hand, so they cannot drift.
//!
//! Label values are bounded: route templates such as `/api/negotiations/:id` (never raw paths or
//! ids; a path no route matches is `unmatched`), the standard methods (any other is `other`),
//! statuses, and
//! the closed sets of actions, side kinds, outcomes and end reasons.

use std::{
    sync::{
        OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    body::Body,
    extract::{MatchedPath, Request},
    middleware::Next,
    response::Response,
};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::{Action, EndReason, SideKind};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Histogram buckets in seconds: 1 ms to 60 s (long-polls and SSE streams last that long).
const SECONDS_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Buckets of the system negotiator's decision time: 50 µs to 100 ms (a decision of the rules
/// is meant to take well under a millisecond, which the general buckets could not show).
const DECISION_BUCKETS: &[f64] = &[0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];

/// Installs the process's recorder (once) and turns recording on or off. Off, every record
/// call returns at once and `/metrics` answers 404; the benchmark compares the two in one run.
pub fn install(enabled: bool) {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(DECISION_SECONDS.to_owned()), DECISION_BUCKETS))
            .expect("the bucket lists are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics will be empty");
        }
        describe();
        register_known_series();
        handle
    });
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether metrics are recorded and served.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn describe() {
    describe_histogram!(
        DECISION_SECONDS,
        metrics::Unit::Seconds,
        "Time the system negotiator's rules took to decide one turn (a model's call, when configured, is not in it)."
    );
    describe_counter!("parley_http_requests_total", "HTTP requests answered, by method, route template and status.");
    describe_histogram!(
        "parley_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to answer an HTTP request (headers sent), by method and route template."
    );
    describe_counter!(
        "parley_turns_total",
        "Turns taken, by who played the side (system, personal, system_fallback) and action."
    );
    describe_counter!("parley_negotiations_started_total", "Negotiations started.");
    describe_counter!(
        "parley_negotiator_model_calls_total",
        "Calls of the model-backed system negotiator, by outcome (played, guarded: the rules overruled it, failed: the rules decided)."
    );
    describe_gauge!(
        "parley_negotiator_model_calls_in_flight",
        "Calls of the model-backed system negotiator in flight."
    );
    describe_counter!(
        "parley_negotiations_ended_total",
        "Negotiations ended, by outcome (accepted, rejected, stalled) and reason."
    );
    describe_counter!("parley_claims_total", "Turns claimed by personal agents.");
    describe_counter!("parley_claim_expiries_total", "Claims that lapsed: the turn was parked again.");
    describe_counter!(
        "parley_park_fallbacks_total",
        "Parked turns taken by the system negotiator when the park window ran out or the agent handed the turn back, by window."
    );
    describe_counter!(
        "parley_person_questions_total",
        "Questions agents asked their people (ask_person), by state: asked, answered, unanswered (the answer window ran out)."
    );
    describe_histogram!(
        "parley_pickup_wait_seconds",
        metrics::Unit::Seconds,
        "How long a pickup waited before it answered (0 for an immediate answer)."
    );
    describe_gauge!("parley_long_poll_waiters", "Pickups waiting in a long-poll right now.");
    describe_gauge!("parley_http_connections", "HTTP connections open right now (each holds a file descriptor).");
    describe_gauge!("parley_sse_streams", "Event streams (GET /api/events) and A2A task streams open right now.");
    describe_gauge!("parley_parked_turns", "Turns parked for a personal agent and not claimed.");
    describe_gauge!("parley_claimed_turns", "Turns claimed by a personal agent and not yet answered.");
    describe_gauge!(
        "parley_timer_jobs_pending",
        "Durable timers armed and not yet run, by the queue they were armed in: the timers' backlog, not a count \
         of turns. A task's one turn timer keeps its queue while later turns keep it, and fires early to find \
         nothing to do, so a parley.claim_timeout timer can be pending while no turn is claimed."
    );
    describe_gauge!("parley_timer_jobs_overdue", "Pending timers more than 5 s past their time, by queue.");
    describe_gauge!("parley_db_pool_connections", "Database pool connections, by state (in_use, idle).");
    describe_counter!(
        "parley_a2a_calls_total",
        "Calls of the A2A endpoint (POST /a2a), by method (its A2A name; `unknown` for any other) and outcome \
         (ok, error: a JSON-RPC error answer, refused: an HTTP refusal such as 401 or 429)."
    );
    describe_counter!(
        "parley_a2a_outbound_calls_total",
        "Calls Parley made to agents registered by their AgentCard, by method (send, lookup, get, cancel) and outcome \
         (ok, refused: the address guard, busy: no place within the call's time, network, http_error, too_large, \
         rpc_error, unreadable)."
    );
    describe_counter!(
        "parley_outbox_attempts_total",
        "Deliveries attempted by the outbox, by target (webhook, a2a_push) and outcome (delivered, http_error, gone: \
         410, timeout, network, refused: the outbound address rule, too_large)."
    );
    describe_histogram!(
        "parley_outbox_attempt_seconds",
        metrics::Unit::Seconds,
        "Time one delivery attempt took (the POST and its answer), by target."
    );
    describe_histogram!(
        "parley_outbox_delivery_seconds",
        metrics::Unit::Seconds,
        "Time from an event to its delivery (retries included), by target."
    );
    describe_counter!(
        "parley_outbox_disabled_total",
        "Targets the outbox disabled, by target and reason (gone: a 410 answer, failing: days of failures)."
    );
    describe_gauge!("parley_outbox_pending_deliveries", "Deliveries not yet delivered nor given up.");
    describe_gauge!("parley_webhooks", "Webhook endpoints registered, by status (enabled, disabled).");
}

/// Registers every series whose label values are a closed set, at zero, so dashboards and
/// alerts find them before the first event.
fn register_known_series() {
    for played_by in ["system", "personal", "system_fallback"] {
        for action in Action::ALL {
            counter!("parley_turns_total", "played_by" => played_by, "action" => action.as_str()).absolute(0);
        }
    }
    for (outcome, reason) in [
        ("accepted", "none"),
        ("rejected", "none"),
        ("stalled", "turn_cap"),
        ("stalled", "timeout"),
        ("stalled", "canceled"),
    ] {
        counter!("parley_negotiations_ended_total", "outcome" => outcome, "reason" => reason).absolute(0);
    }
    counter!("parley_negotiations_started_total").absolute(0);
    counter!("parley_claims_total").absolute(0);
    counter!("parley_claim_expiries_total").absolute(0);
    counter!("parley_park_fallbacks_total", "window" => "park_timeout").absolute(0);
    counter!("parley_park_fallbacks_total", "window" => "offline").absolute(0);
    counter!("parley_park_fallbacks_total", "window" => "hand_back").absolute(0);
    for state in ["asked", "answered", "unanswered"] {
        counter!("parley_person_questions_total", "state" => state).absolute(0);
    }
    gauge!("parley_long_poll_waiters").set(0.0);
    gauge!("parley_http_connections").set(0.0);
    gauge!("parley_sse_streams").set(0.0);
    let _ = histogram!("parley_pickup_wait_seconds");
    let _ = histogram!(DECISION_SECONDS);
    for method in A2A_METHODS_OF_NOTE {
        for outcome in ["ok", "error", "refused"] {
            counter!("parley_a2a_calls_total", "method" => *method, "outcome" => outcome).absolute(0);
        }
    }
    for method in ["send", "lookup", "get", "cancel"] {
        counter!("parley_a2a_outbound_calls_total", "method" => method, "outcome" => "ok").absolute(0);
    }
    for target in ["webhook", "a2a_push"] {
        for outcome in ["delivered", "http_error", "gone", "timeout", "network", "refused", "too_large"] {
            counter!("parley_outbox_attempts_total", "target" => target, "outcome" => outcome).absolute(0);
        }
        for reason in ["gone", "failing"] {
            counter!("parley_outbox_disabled_total", "target" => target, "reason" => reason).absolute(0);
        }
    }
}

/// The A2A methods whose series are registered at zero (the others appear when first called).
const A2A_METHODS_OF_NOTE: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "CancelTask",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
];

/// A call of the A2A endpoint: `method` is one of its method names (a closed set) or `unknown`;
/// `outcome` is `ok`, `error` or `refused`.
pub fn a2a_call(method: &'static str, outcome: &'static str) {
    if enabled() {
        counter!("parley_a2a_calls_total", "method" => method, "outcome" => outcome).increment(1);
    }
}

/// A call Parley made to an agent's A2A endpoint: `method` is the call's (`send`, `lookup`,
/// `get`, `cancel`), `outcome` `ok` or why it failed (a closed set: see `a2a_client::outbound`).
pub fn a2a_outbound(method: &'static str, outcome: &'static str) {
    if enabled() {
        counter!("parley_a2a_outbound_calls_total", "method" => method, "outcome" => outcome).increment(1);
    }
}

/// An attempt of the outbox: `target` is `webhook` or `a2a_push`, `outcome` a closed set (see
/// `outbox::post::Answer::outcome`).
pub fn outbox_attempt(target: &'static str, outcome: &'static str, took: Duration) {
    if enabled() {
        counter!("parley_outbox_attempts_total", "target" => target, "outcome" => outcome).increment(1);
        histogram!("parley_outbox_attempt_seconds", "target" => target).record(took.as_secs_f64());
    }
}

/// An event delivered to a target, `waited` after it happened.
pub fn outbox_delivered(target: &'static str, waited: Duration) {
    if enabled() {
        histogram!("parley_outbox_delivery_seconds", "target" => target).record(waited.as_secs_f64());
    }
}

/// A target disabled by the outbox: `reason` is `gone` or `failing`.
pub fn outbox_disabled(target: &'static str, reason: &'static str) {
    if enabled() {
        counter!("parley_outbox_disabled_total", "target" => target, "reason" => reason).increment(1);
    }
}

/// Counts one answered request and its duration; the route is the matched template.
pub async fn track_http(request: Request<Body>, next: Next) -> Response {
    if !enabled() {
        return next.run(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| route_label(p.as_str()))
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(request.method());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    histogram!("parley_http_request_duration_seconds", "method" => method, "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    counter!("parley_http_requests_total", "method" => method, "route" => route, "status" => status).increment(1);
    response
}

/// A method as a label: the standard ones by name, anything else `other` (a client may send any
/// token as a method, and every distinct label value is a series kept for good).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// A route template as a label: `/api/negotiations/{id}` becomes `/api/negotiations/:id`, the
/// spelling most dashboards use and one that every exposition parser reads (braces inside label
/// values trip some of them).
fn route_label(template: &str) -> String {
    template.replace('{', ":").replace('}', "")
}

/// A committed turn.
pub fn turn(played_by: &'static str, action: Action) {
    if enabled() {
        counter!("parley_turns_total", "played_by" => played_by, "action" => action.as_str()).increment(1);
    }
}

/// A committed turn, by the kind of side that played it.
pub fn turn_by(kind: SideKind, action: Action) {
    turn(kind.as_str(), action);
}

/// A committed start.
pub fn negotiation_started() {
    if enabled() {
        counter!("parley_negotiations_started_total").increment(1);
    }
}

/// A committed ending.
pub fn negotiation_ended(has_opportunity: bool, reason: Option<EndReason>) {
    if !enabled() {
        return;
    }
    let outcome = match (has_opportunity, reason) {
        (true, _) => "accepted",
        (false, None) => "rejected",
        (false, Some(_)) => "stalled",
    };
    let reason = match reason {
        None => "none",
        Some(EndReason::TurnCap) => "turn_cap",
        Some(EndReason::Timeout) => "timeout",
        Some(EndReason::Canceled) => "canceled",
    };
    counter!("parley_negotiations_ended_total", "outcome" => outcome, "reason" => reason).increment(1);
}

/// A committed new claim.
pub fn claimed() {
    if enabled() {
        counter!("parley_claims_total").increment(1);
    }
}

/// A committed claim expiry.
pub fn claim_expired() {
    if enabled() {
        counter!("parley_claim_expiries_total").increment(1);
    }
}

/// A committed park fallback; `window` names the park window that ran out: `park_timeout`
/// (the long one) or `offline` (the user had no live agent); or `hand_back` (the agent handed
/// the turn to the system negotiator).
pub fn park_fallback(window: &'static str) {
    if enabled() {
        counter!("parley_park_fallbacks_total", "window" => window).increment(1);
    }
}

/// A question of an agent to its person was `asked`, `answered`, or closed `unanswered`.
pub fn person_question(state: &'static str) {
    if enabled() {
        counter!("parley_person_questions_total", "state" => state).increment(1);
    }
}

/// The series of the system negotiator's decision time.
const DECISION_SECONDS: &str = "parley_negotiator_decision_seconds";

/// One decision of the system negotiator's rules took `took`.
pub fn negotiator_decision(took: Duration) {
    if enabled() {
        histogram!(DECISION_SECONDS).record(took.as_secs_f64());
    }
}

/// A call of the model-backed system negotiator ended: `played`, `guarded` (the rules overruled
/// its answer) or `failed` (the rules decided instead).
pub fn negotiator_model_call(outcome: &'static str) {
    if enabled() {
        counter!("parley_negotiator_model_calls_total", "outcome" => outcome).increment(1);
    }
}

/// A model call in flight, counted in `parley_negotiator_model_calls_in_flight` while it lives.
pub struct ModelCall(bool);

impl ModelCall {
    /// Starts counting.
    pub fn start() -> ModelCall {
        let on = enabled();
        if on {
            gauge!("parley_negotiator_model_calls_in_flight").increment(1.0);
        }
        ModelCall(on)
    }
}

impl Drop for ModelCall {
    fn drop(&mut self) {
        if self.0 {
            gauge!("parley_negotiator_model_calls_in_flight").decrement(1.0);
        }
    }
}

/// How long a pickup waited.
pub fn pickup_waited(waited: Duration) {
    if enabled() {
        histogram!("parley_pickup_wait_seconds").record(waited.as_secs_f64());
    }
}

/// Counts a long-poll as waiting for as long as the guard lives.
pub struct LongPollWaiter(bool);

impl LongPollWaiter {
    /// Starts counting.
    pub fn start() -> LongPollWaiter {
        let on = enabled();
        if on {
            gauge!("parley_long_poll_waiters").increment(1.0);
        }
        LongPollWaiter(on)
    }
}

impl Drop for LongPollWaiter {
    fn drop(&mut self) {
        if self.0 {
            gauge!("parley_long_poll_waiters").decrement(1.0);
        }
    }
}

/// Counts something open (an HTTP connection, an event stream) for as long as the guard lives.
pub struct Open(Option<&'static str>);

impl Open {
    fn start(gauge: &'static str) -> Open {
        if !enabled() {
            return Open(None);
        }
        gauge!(gauge).increment(1.0);
        Open(Some(gauge))
    }

    /// An accepted HTTP connection (`parley_http_connections`).
    pub fn connection() -> Open {
        Open::start("parley_http_connections")
    }

    /// An event stream (`parley_sse_streams`).
    pub fn sse_stream() -> Open {
        Open::start("parley_sse_streams")
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(gauge) = self.0 {
            gauge!(gauge).decrement(1.0);
        }
    }
}

/// Reads the database's gauges and renders everything; `None` when metrics are off.
pub async fn render(pool: &sqlx::PgPool) -> Result<Option<String>, sqlx::Error> {
    let Some(handle) = HANDLE.get().filter(|_| enabled()) else { return Ok(None) };
    // Setting the database's gauges and rendering is one step: two scrapes at once (of two
    // services in one process, as in the tests) must not render each other's readings.
    static SCRAPE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = SCRAPE.lock().await;
    // One count per state, each predicate exactly that of a partial index (`tasks_parked_idx`,
    // `tasks_one_claim_per_agent`): a handful of index entries, however large the history. A
    // single count over `state IN (...)` matches no partial index (the planner does not split
    // the list over several), and read every task with a parallel sequential scan.
    let (parked, claimed): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tasks WHERE state = 'waiting_for_agent'),
                (SELECT count(*) FROM tasks WHERE state = 'claimed')",
    )
    .fetch_one(pool)
    .await?;
    gauge!("parley_parked_turns").set(parked as f64);
    gauge!("parley_claimed_turns").set(claimed as f64);
    let timers: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT job_type, count(*), count(*) FILTER (WHERE run_at < now() - interval '5 seconds')
           FROM apalis.jobs WHERE status = 'Pending' GROUP BY job_type",
    )
    .fetch_all(pool)
    .await?;
    for queue in parley_jobs::queues::ALL.iter() {
        let (pending, overdue) = timers.iter().find(|(q, ..)| q == queue).map(|(_, p, o)| (*p, *o)).unwrap_or((0, 0));
        gauge!("parley_timer_jobs_pending", "queue" => *queue).set(pending as f64);
        gauge!("parley_timer_jobs_overdue", "queue" => *queue).set(overdue as f64);
    }
    // The outbox's backlog (a partial index of the pending deliveries) and the webhooks by status.
    let (pending, enabled, disabled): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox_deliveries WHERE status = 'pending'),
                (SELECT count(*) FROM outbox_targets WHERE kind = 'webhook' AND status = 'enabled'),
                (SELECT count(*) FROM outbox_targets WHERE kind = 'webhook' AND status = 'disabled')",
    )
    .fetch_one(pool)
    .await?;
    gauge!("parley_outbox_pending_deliveries").set(pending as f64);
    gauge!("parley_webhooks", "status" => "enabled").set(enabled as f64);
    gauge!("parley_webhooks", "status" => "disabled").set(disabled as f64);
    let size = pool.size() as f64;
    let idle = pool.num_idle() as f64;
    gauge!("parley_db_pool_connections", "state" => "in_use").set(size - idle);
    gauge!("parley_db_pool_connections", "state" => "idle").set(idle);
    Ok(Some(handle.render()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn route_templates_become_colon_labels() {
        assert_eq!(
            super::route_label("/api/agents/{id}/negotiations/{negotiationId}"),
            "/api/agents/:id/negotiations/:negotiationId"
        );
        assert_eq!(super::route_label("/healthz"), "/healthz");
    }
}
