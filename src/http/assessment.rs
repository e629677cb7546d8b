//! `POST /agent/negotiation`: the Bindu-compatible self-assessment of the hub's own negotiator.
//!
//! Public and unauthenticated, like Bindu's. The body is parsed by the scoring module so that the
//! validation messages are Bindu's, verbatim; the answer is the calculator's exact wire JSON.
//!
//! The queue depth in the answer comes from [`QueueDepth`], a per-process copy of the count in
//! `task_counts` that is at most [`QueueDepth::MAX_AGE`] (100 ms) old: a request finds it
//! fresh and reads no database, or it is older and that request counts again (and every
//! request that finds it older meanwhile, so the bound holds without a background task). An
//! answer therefore reflects every negotiation started or ended at least 100 ms before the
//! request arrived. When the database cannot be read, the request fails as before (503); a
//! copy older than the bound is never served.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

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
#[utoipa::path(post, path = "/agent/negotiation", tag = "assessment", operation_id = "assessTask",
    security(()),
    request_body = scoring::AssessmentRequest,
    responses(
        (status = 200, description = "The assessment, accepted or rejected (Bindu's wire format and numbers)",
            body = scoring::Assessment,
            example = json!({"accepted": true, "score": 0.7386, "confidence": 0.9,
                "skill_matches": [{"skill_id": "pdf-processing-v1", "skill_name": "PDF Processing", "score": 0.4, "reasons": ["tags: pdf, invoice"]}],
                "matched_tags": ["pdf", "invoice"], "latency_estimate_ms": 2000, "queue_depth": 0,
                "subscores": {"skill_match": 0.4, "io_compatibility": 1.0, "load": 1.0, "cost": 1.0, "performance": 0.6}})),
        (status = 400, description = "Invalid request: Bindu's `error` message, verbatim, with `code`"),
    ))]
pub async fn assess_task(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let bytes = body_bytes(req, &()).await?;
    let request = scoring::parse_request(&bytes).map_err(|e| ApiError::invalid(e.to_string()))?;
    let queue_depth = state.queue_depth.get(state.pool()).await?;
    let cosines = match &state.embeddings {
        Some(e) => e.cosines(&request.task_summary, request.task_details.as_deref()).await,
        None => None,
    };
    let assessment = state.calculator.assess(&request, Some(queue_depth), cosines.as_deref());
    Ok(([(header::CONTENT_TYPE, "application/json")], scoring::assessment_json(&assessment)).into_response())
}

/// The hub's queue depth (active negotiations), kept in process for at most [`Self::MAX_AGE`].
#[derive(Debug, Default)]
pub struct QueueDepth {
    /// The last count and when the statement that read it started.
    last: Mutex<Option<(i64, Instant)>>,
}

impl QueueDepth {
    /// How old a served count may be, measured from the start of the statement that read it.
    pub const MAX_AGE: Duration = Duration::from_millis(100);

    /// The count: the kept one while it is fresh, otherwise counted again (and kept).
    pub async fn get(&self, pool: &sqlx::PgPool) -> Result<i64, sqlx::Error> {
        if let Some(depth) = self.fresh(Instant::now()) {
            return Ok(depth);
        }
        let started = Instant::now();
        let depth = {
            let mut conn = pool.acquire().await?;
            tasks::count_active(&mut conn).await?
        };
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        // Concurrent recounts may finish out of order: keep the one that started last.
        if last.is_none_or(|(_, at)| at < started) {
            *last = Some((depth, started));
        }
        Ok(depth)
    }

    /// The kept count if it was read less than [`Self::MAX_AGE`] before `now`.
    fn fresh(&self, now: Instant) -> Option<i64> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.filter(|(_, at)| now.saturating_duration_since(*at) < Self::MAX_AGE).map(|(depth, _)| depth)
    }
}
