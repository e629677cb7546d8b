//! Liveness and readiness.

use axum::{Json, Router, extract::State, routing::get};
use serde_json::{Value, json};

use super::{AppState, error::ApiError};

/// `GET /healthz`, `GET /readyz`.
pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

/// The process is up.
async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The database answers.
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    sqlx::query_scalar::<_, i32>("SELECT 1")
        .fetch_one(state.pool())
        .await
        .map_err(|_| ApiError::Unavailable("the database is unreachable".into()))?;
    Ok(Json(json!({ "status": "ready" })))
}
