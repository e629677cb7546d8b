//! `POST /agent/negotiation`: the Bindu-compatible self-assessment of the hub's own negotiator.
//!
//! Public and unauthenticated, like Bindu's. The body is parsed by the scoring module so that the
//! validation messages are Bindu's, verbatim; the answer is the calculator's exact wire JSON.

use axum::{
    Router,
    extract::{Request, State},
    http::header,
    response::{IntoResponse, Response},
    routing::post,
};

use super::{AppState, error::ApiError, extract::body_bytes};
use crate::{scoring, store::tasks};

/// The route.
pub fn router() -> Router<AppState> {
    Router::new().route("/agent/negotiation", post(assess_task))
}

/// Scores the task against the hub's skills, with the live queue depth.
async fn assess_task(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let bytes = body_bytes(req, &()).await?;
    let request = scoring::parse_request(&bytes).map_err(|e| ApiError::invalid(e.to_string()))?;
    let queue_depth = {
        let mut conn = state.pool().acquire().await?;
        tasks::count_active(&mut conn).await?
    };
    let cosines = match &state.embeddings {
        Some(e) => e.cosines(&request.task_summary, request.task_details.as_deref()).await,
        None => None,
    };
    let assessment = state.calculator.assess(&request, Some(queue_depth), cosines.as_deref());
    Ok(([(header::CONTENT_TYPE, "application/json")], scoring::assessment_json(&assessment)).into_response())
}
