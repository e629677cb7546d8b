//! Liveness and readiness.

use axum::{Json, Router, extract::State, routing::get};
use serde::Serialize;

use super::{AppState, error::ApiError};

/// `GET /healthz` (also at `GET /api/health`, which Index Network's agent plugin checks when it
/// starts), `GET /readyz`.
pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/api/health", get(api_health)).route("/readyz", get(readyz))
}

/// The body of both probes.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HealthOut {
    /// `ok` (liveness) or `ready` (readiness).
    #[schema(example = "ok", value_type = String)]
    pub status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "healthz",
    responses((status = 200, description = "The process is up", body = HealthOut)))]
pub async fn healthz() -> Json<HealthOut> {
    Json(HealthOut { status: "ok" })
}

/// The process is up (the same answer as `/healthz`).
#[utoipa::path(get, path = "/api/health", tag = "health", operation_id = "apiHealth",
    responses((status = 200, description = "The process is up", body = HealthOut)))]
pub async fn api_health() -> Json<HealthOut> {
    healthz().await
}

/// The database answers.
#[utoipa::path(get, path = "/readyz", tag = "health", operation_id = "readyz",
    responses(
        (status = 200, description = "The database answers", body = HealthOut),
        (status = 503, description = "The database is unreachable"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<HealthOut>, ApiError> {
    sqlx::query_scalar::<_, i32>("SELECT 1")
        .fetch_one(state.pool())
        .await
        .map_err(|_| ApiError::Unavailable("the database is unreachable".into()))?;
    Ok(Json(HealthOut { status: "ready" }))
}
