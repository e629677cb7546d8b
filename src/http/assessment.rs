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

/// Bindu's self-assessment request (snake_case, Bindu's wire format). Only `task_summary` is
/// required; unknown fields are ignored; absent, `null` and empty values mean "not given".
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = AssessmentRequest, example = json!({
    "task_summary": "Extract tables from PDF invoices",
    "input_mime_types": ["application/pdf"],
    "max_latency_ms": 5000
}))]
#[allow(dead_code)]
pub struct AssessmentRequestDoc {
    /// What the task is (1 to 10 000 characters).
    #[schema(min_length = 1, max_length = 10000)]
    task_summary: String,
    /// Longer description.
    task_details: Option<String>,
    /// Input MIME types the caller will send.
    input_mime_types: Option<Vec<String>>,
    /// Output MIME types the caller wants.
    output_mime_types: Option<Vec<String>>,
    /// Latency budget in milliseconds (0: none).
    #[schema(minimum = 0)]
    max_latency_ms: Option<f64>,
    /// Budget as a price string such as `"$0.01"`.
    max_cost_amount: Option<String>,
    /// Tools the skills must offer between them.
    required_tools: Option<Vec<String>>,
    /// Tools no skill may allow.
    forbidden_tools: Option<Vec<String>>,
    /// Acceptance threshold on the score (default 0).
    min_score: Option<f64>,
    /// Subscore weight overrides (non-negative; missing keys keep their defaults).
    weights: Option<WeightsDoc>,
}

/// Subscore weights of an assessment request.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = AssessmentWeights)]
#[allow(dead_code)]
pub struct WeightsDoc {
    #[schema(minimum = 0)]
    skill_match: Option<f64>,
    #[schema(minimum = 0)]
    io_compatibility: Option<f64>,
    #[schema(minimum = 0)]
    performance: Option<f64>,
    #[schema(minimum = 0)]
    load: Option<f64>,
    #[schema(minimum = 0)]
    cost: Option<f64>,
}

/// Scores the task against the hub's skills, with the live queue depth.
#[utoipa::path(post, path = "/agent/negotiation", tag = "assessment", operation_id = "assessTask",
    security(()),
    request_body = AssessmentRequestDoc,
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
