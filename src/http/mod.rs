//! The HTTP API: one router per resource, merged here ([`resources`]), the shared layers (body
//! limit, body timeout and deadline, the failed-authentication limiter, security headers, tracing:
//! [`layered`]) and the shared state. The application assembles the whole service from these,
//! the MCP endpoint and the OpenAPI document (`crate::app::router`), so that this module never
//! imports the modules built on it. Handlers are thin: validate, call the engine or the store,
//! shape the answer.

pub mod a2a;
pub mod a2a_attempts;
pub mod agent_auth;
pub mod agent_cards;
pub mod agent_turns;
pub mod agents;
pub mod api_docs;
pub mod assessment;
pub mod auth;
pub mod auth_limiter;
pub mod delegations;
pub mod directory;
pub mod error;
pub mod events;
pub mod extract;
pub mod health;
pub mod input;
pub mod insights;
pub mod metrics;
pub mod negotiations;
pub mod opportunities;
pub mod serve;
pub mod status_page;
pub mod unread_body;
pub mod views;
pub mod webhooks;

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    extract::DefaultBodyLimit,
    http::{HeaderName, HeaderValue, Request, Response, header},
    middleware,
};
use tower::ServiceBuilder;
use tower_http::{
    set_header::SetResponseHeaderLayer,
    timeout::{RequestBodyTimeoutLayer, TimeoutBody},
    trace::TraceLayer,
};

use crate::{delivery::Engine, directory::delegation::Delegations, scoring::Calculator};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The negotiation engine (and through it the pool and configuration).
    pub(crate) engine: Engine,
    /// The delegations (and the directory's schema checker and capability handles).
    pub(crate) delegations: Delegations,
    /// JWT keys.
    pub(crate) jwt: Arc<crate::auth::JwtKeys>,
    /// Failed authentications per client address.
    pub(crate) auth_failures: Arc<auth_limiter::AuthFailureLimiter>,
    /// The hub's own capability calculator for `/agent/negotiation`.
    pub(crate) calculator: Arc<Calculator>,
    /// The queue depth `/agent/negotiation` reports, kept in process for at most 100 ms.
    pub(crate) queue_depth: Arc<assessment::QueueDepth>,
    /// The optional embeddings provider for the assessment.
    pub(crate) embeddings: Option<Arc<crate::embeddings::Embeddings>>,
    /// Committed events, fanned out to this process's SSE streams.
    pub(crate) events: Arc<crate::live::EventHub>,
    /// Turns true when the process starts shutting down: open event streams end then, so that
    /// a graceful shutdown is not held up by clients that never disconnect.
    pub(crate) stopping: tokio::sync::watch::Receiver<bool>,
    /// The event streams open, by token, by user and in all.
    pub(crate) streams: Arc<crate::wire::streams::StreamLimits>,
    /// The A2A task streams open, by agent and in all.
    pub(crate) a2a_streams: Arc<crate::wire::streams::StreamLimits>,
    /// AgentCard fetches per owner (`agent_cards::fetch`).
    pub(crate) card_fetches: Arc<crate::failure_limiter::FailureLimiter<String>>,
}

impl AppState {
    /// Resolves once shutdown has begun.
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let mut rx = self.stopping.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }
}

/// What the tests and the benchmark read, call or switch of a running service, beside its HTTP
/// API (the fields stay crate-private: this is the whole of what the state shows outside).
impl AppState {
    /// The database pool.
    pub fn pool(&self) -> &sqlx::PgPool {
        self.engine.pool()
    }

    /// The configuration the service runs with.
    pub fn config(&self) -> &crate::config::Config {
        self.engine.config()
    }

    /// The keys the service signs and checks JWTs with (tests mint tokens with them).
    pub fn jwt(&self) -> &crate::auth::JwtKeys {
        &self.jwt
    }

    /// The event streams open now, in all.
    pub fn open_streams(&self) -> u32 {
        self.streams.open_now()
    }

    /// The users with a long-poll waiting in this process.
    pub fn waiting_users(&self) -> usize {
        self.engine.wakeups().waiting_users()
    }

    /// The schema checker's compiled validators: the bytes they hold and how many are kept.
    pub fn cached_schemas(&self) -> (usize, usize) {
        self.delegations.schemas().cached()
    }

    /// Delivers a delegation's timer as the worker does (a test delivers it early, late or twice);
    /// whether it ended an attempt.
    pub async fn time_out_delegation(
        &self,
        timer: parley_jobs::DelegationTimeout,
    ) -> Result<bool, crate::directory::delegation::DelegationError> {
        self.delegations.time_out_delegation(timer).await
    }

    /// Turns the agents' `last_seen_at` writes off or on (the benchmark weighs their cost).
    pub fn record_liveness(&self, on: bool) {
        self.engine.runtime().record_liveness(on);
    }

    /// How many `last_seen_at` writes this process made.
    pub fn liveness_writes(&self) -> u64 {
        self.engine.runtime().liveness_writes()
    }
}

/// The policy of every answer but the status page (which sets its own): load nothing, be framed
/// nowhere.
const API_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// `Cache-Control: no-store` for JSON answers (they carry one caller's data).
fn no_store_for_json(response: &Response<Body>) -> Option<HeaderValue> {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    json.then_some(HeaderValue::from_static("no-store"))
}

/// Every resource's routes. The application adds the MCP endpoint and the OpenAPI document
/// (which build on these modules) and then the shared layers ([`layered`]); see `crate::app`.
pub fn resources() -> Router<AppState> {
    let routers = [
        // The platform's negotiations and what people see of them.
        negotiations::router(),
        opportunities::router(),
        insights::router(),
        a2a::router(),
        // Agents, the directory, the work handed to agents and their turns.
        agents::router(),
        agent_cards::router(),
        directory::router(),
        delegations::router(),
        agent_turns::router(),
        assessment::router(),
        // Probes, and the web UI's live events and status page.
        health::router(),
        metrics::router(),
        events::router(),
        status_page::router(),
        // Pushes: webhooks for the platform and for people.
        webhooks::router(),
    ];
    routers.into_iter().fold(Router::new(), Router::merge)
}

/// `routes` under the layers every answer goes through: the body limit, timeout and deadline, the
/// failed-authentication limiter, security headers, metrics, the unread-body rule and tracing;
/// an unknown path is a 404 with the error body.
pub fn layered(routes: Router<AppState>, state: AppState) -> Router {
    let body_timeout = state.engine.config().http_body_timeout;
    let body_deadline = state.engine.config().http_body_deadline;
    let security_headers = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::overriding(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(API_CSP),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(HeaderName::from_static("cache-control"), no_store_for_json));
    // A body that trickles in is cut off, part by part and as a whole: reading it fails, which
    // the extractors answer 408.
    let body_timeout = ServiceBuilder::new()
        .map_request(move |request: Request<Body>| {
            request.map(|body| Body::new(crate::wire::body_deadline::Deadlined::new(body, body_deadline)))
        })
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .map_request(|request: Request<TimeoutBody<Body>>| request.map(Body::new));
    routes
        .fallback(|| async { error::ApiError::NotFound("route") })
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(body_timeout)
        .layer(middleware::from_fn_with_state(state.clone(), auth_limiter::limit_failed_authentication))
        .layer(security_headers)
        .layer(axum::middleware::from_fn(crate::metrics::track_http))
        .layer(axum::middleware::from_fn(unread_body::close_when_unread))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
