//! The HTTP API: one router per resource, merged here, with the body limit, tracing and the
//! shared state. Handlers are thin: validate, call the engine or the store, shape the answer.

pub mod a2a;
pub mod agent_auth;
pub mod agent_turns;
pub mod agents;
pub mod assessment;
pub mod auth;
pub mod directory;
pub mod error;
pub mod events;
pub mod extract;
pub mod health;
pub mod negotiations;
pub mod opportunities;
pub mod status_page;
pub mod views;

use std::sync::Arc;

use axum::{Router, extract::DefaultBodyLimit};
use tower_http::trace::TraceLayer;

use crate::{delivery::Engine, scoring::Calculator};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The negotiation engine (and through it the pool and configuration).
    pub engine: Engine,
    /// JWT keys.
    pub jwt: Arc<auth::JwtKeys>,
    /// The hub's own capability calculator for `/agent/negotiation`.
    pub calculator: Arc<Calculator>,
    /// The optional embeddings provider for the assessment.
    pub embeddings: Option<Arc<crate::embeddings::Embeddings>>,
    /// Committed events, fanned out to this process's SSE streams.
    pub events: Arc<crate::live::EventHub>,
    /// Turns true when the process starts shutting down: open event streams end then, so that
    /// a graceful shutdown is not held up by clients that never disconnect.
    pub stopping: tokio::sync::watch::Receiver<bool>,
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

impl AppState {
    /// The database pool.
    pub fn pool(&self) -> &sqlx::PgPool {
        self.engine.pool()
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::router())
        .merge(negotiations::router())
        .merge(opportunities::router())
        .merge(a2a::router())
        .merge(agents::router())
        .merge(directory::router())
        .merge(agent_turns::router())
        .merge(assessment::router())
        .merge(events::router())
        .merge(status_page::router())
        .merge(crate::openapi::router())
        .merge(crate::mcp::router(state.clone()))
        .fallback(|| async { error::ApiError::NotFound("route") })
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
