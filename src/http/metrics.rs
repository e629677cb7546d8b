//! `GET /metrics`: the Prometheus exposition of [`crate::metrics`], for the platform's service
//! token on the API's port, and without credentials on `PARLEY_METRICS_BIND`'s listener (meant
//! for a Prometheus inside a private network), which serves nothing else.

use axum::{
    Router,
    extract::State,
    http::header,
    response::{IntoResponse, Response},
    routing::get,
};

use super::{AppState, api_docs::PlatformOnly, auth::ServiceCaller, error::ApiError};

/// The exposition's media type.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics` on the API's port (service role).
pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// The open listener's whole router: `/metrics` without credentials, 404 for anything else.
pub fn open_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(|State(state): State<AppState>| render(state)))
        .fallback(|| async { ApiError::NotFound("route") })
        .with_state(state)
}

/// Every series the service exports, in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "metrics",
    security(("bearerJwt" = [])),
    responses(
        (status = 200, description = "The Prometheus text exposition", content_type = "text/plain", body = String),
        (status = 404, description = "Metrics are turned off (`PARLEY_METRICS=off`)"),
        PlatformOnly,
    ))]
pub async fn metrics(State(state): State<AppState>, _caller: ServiceCaller) -> Result<Response, ApiError> {
    render(state).await
}

async fn render(state: AppState) -> Result<Response, ApiError> {
    match crate::metrics::render(state.pool()).await.map_err(anyhow::Error::from)? {
        Some(text) => Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()),
        None => Err(ApiError::NotFound("metrics (turned off)")),
    }
}
