//! `POST /api/negotiations`, `GET|DELETE /api/negotiations/{id}`: the platform's view.

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{
    AppState,
    api_docs::{NegotiationPath, PlatformOnly, QuestionPath},
    auth::{Caller, ServiceCaller},
    error::{ApiError, ApiResult},
    extract::{ApiJson, Ids},
    views::{NegotiationOut, OpportunityOut, Viewer, opportunity_views},
};
use crate::{
    delivery::NewNegotiation,
    domain::{SeedAssessment, UserContext},
    store::{messages, opportunities, tasks},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/negotiations", post(create_negotiation))
        .route("/api/negotiations/{id}", get(get_negotiation).delete(cancel_negotiation))
        .route("/api/negotiations/{id}/questions/{question_id}/answer", post(answer_question))
}

/// Longest user id accepted.
const MAX_ID_LEN: usize = 256;

/// The body of `POST /api/negotiations`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "opportunityId": "0193b0a4-6f1e-7c4a-9b1e-2a3c4d5e6f70",
    "sourceUser": {"id": "user-maya", "name": "Maya Chen",
        "profile": {"bio": "Founder of a fintech startup", "skills": ["fundraising"], "interests": ["payments", "rust"]},
        "intents": [{"text": "Looking for a senior Rust backend engineer to build our payments API"}]},
    "candidateUser": {"id": "user-tomas", "name": "Tomas Novak",
        "profile": {"bio": "Senior backend engineer, eight years of Rust", "skills": ["rust", "postgresql", "payments api"]},
        "intents": [{"text": "Looking for a fintech startup to join as a senior backend engineer working on payments"}]},
    "seedAssessment": {"score": 88, "reasoning": "Both want a Rust payments collaboration"},
    "discoveryQuery": "senior rust backend engineer for payments"
}))]
pub struct CreateNegotiationIn {
    /// The platform's opportunity id (a UUID); repeating it with the same body returns the
    /// existing negotiation, with another body is a 409 (`opportunity_id_reused`).
    #[schema(format = Uuid)]
    pub opportunity_id: Option<String>,
    /// The discovering user.
    pub source_user: UserContext,
    /// The other user.
    pub candidate_user: UserContext,
    /// Passed to both sides, verbatim.
    pub index_context: Option<Value>,
    /// The evaluator's assessment.
    pub seed_assessment: SeedAssessment,
    /// What the source user searched for.
    pub discovery_query: Option<String>,
}

impl CreateNegotiationIn {
    /// Checks what serde cannot: ids, ranges, distinct users.
    pub fn validate(self) -> Result<NewNegotiation, ApiError> {
        let opportunity_id = match self.opportunity_id.as_deref() {
            None => None,
            Some(raw) => Some(Uuid::parse_str(raw).map_err(|_| ApiError::invalid("opportunityId must be a UUID"))?),
        };
        for (field, user) in [("sourceUser", &self.source_user), ("candidateUser", &self.candidate_user)] {
            check_user(field, user)?;
        }
        if self.source_user.id == self.candidate_user.id {
            return Err(ApiError::invalid("sourceUser and candidateUser must be different users"));
        }
        check_seed(&self.seed_assessment, &self.source_user.id, &self.candidate_user.id)?;
        Ok(NewNegotiation {
            opportunity_id,
            source: self.source_user,
            candidate: self.candidate_user,
            index_context: self.index_context,
            seed: self.seed_assessment,
            discovery_query: self.discovery_query.filter(|q| !q.trim().is_empty()),
        })
    }
}

/// Checks a user's context as the platform gave it (`field` names it in the message).
pub(crate) fn check_user(field: &str, user: &UserContext) -> Result<(), ApiError> {
    if user.id.trim().is_empty() {
        return Err(ApiError::invalid(format!("{field}.id must not be empty")));
    }
    if user.id.len() > MAX_ID_LEN || user.id.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "{field}.id must be at most {MAX_ID_LEN} bytes without control characters"
        )));
    }
    if user.intents.iter().any(|i| i.text.trim().is_empty()) {
        return Err(ApiError::invalid(format!("{field}.intents[].text must not be empty")));
    }
    if user.intents.iter().filter_map(|i| i.confidence).any(|c| !(0.0..=1.0).contains(&c)) {
        return Err(ApiError::invalid(format!("{field}.intents[].confidence must be between 0 and 1")));
    }
    Ok(())
}

/// Checks an evaluator's assessment of a match between `source_id` and `candidate_id`.
pub(crate) fn check_seed(seed: &SeedAssessment, source_id: &str, candidate_id: &str) -> Result<(), ApiError> {
    if !seed.score.is_finite() || !(0.0..=100.0).contains(&seed.score) {
        return Err(ApiError::invalid("seedAssessment.score must be between 0 and 100"));
    }
    if seed.reasoning.trim().is_empty() {
        return Err(ApiError::invalid("seedAssessment.reasoning must not be empty"));
    }
    if let Some(actors) = &seed.actors
        && actors.iter().any(|a| a.user_id != source_id && a.user_id != candidate_id)
    {
        return Err(ApiError::invalid("seedAssessment.actors[].userId must be one of the two users"));
    }
    Ok(())
}

/// The answer of a create: the opportunity and the negotiation as they stand once the call is
/// done (with two system negotiators, already ended).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CreatedOut {
    /// The opportunity the negotiation decides.
    pub opportunity: OpportunityOut,
    /// The negotiation.
    pub negotiation: NegotiationOut,
}

/// Starts a negotiation: 201 with `{opportunity, negotiation}`, or 200 with the existing one
/// when `opportunityId` was seen before with the same body (409 `opportunity_id_reused` with
/// another).
#[utoipa::path(post, path = "/api/negotiations", tag = "negotiations", operation_id = "createNegotiation",
    security(("bearerJwt" = [])),
    request_body = CreateNegotiationIn,
    responses(
        (status = 201, description = "Created and run as far as it goes in process", body = CreatedOut),
        (status = 200, description = "This `opportunityId` was seen before with this same body: the existing negotiation", body = CreatedOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 409, description = "This `opportunityId` was used before with another body (`opportunity_id_reused`); nothing changed"),
        PlatformOnly,
    ))]
pub async fn create_negotiation(
    State(state): State<AppState>,
    _caller: ServiceCaller,
    ApiJson(body): ApiJson<CreateNegotiationIn>,
) -> ApiResult<(StatusCode, Json<CreatedOut>)> {
    let input = body.validate()?;
    let started = state.engine.start(&input).await?;
    let (opportunity, negotiation) = load_pair(&state, started.negotiation_id).await?;
    let status = if started.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(CreatedOut { opportunity, negotiation })))
}

/// Loads the opportunity and negotiation views of a task.
pub(crate) async fn load_pair(state: &AppState, task_id: Uuid) -> ApiResult<(OpportunityOut, NegotiationOut)> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, task_id).await?.ok_or(ApiError::NotFound("negotiation"))?;
    let opportunity =
        opportunities::get(&mut conn, task.opportunity_id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let outcome = messages::outcome(&mut conn, task.id).await?;
    let view = opportunity_views(&mut conn, std::slice::from_ref(&opportunity), None).await?.remove(0);
    let negotiation = NegotiationOut::new(&task, &turns, outcome, Viewer::Service)
        .with_rounds_and_wait(&mut conn, &state.engine, &task)
        .await?;
    Ok((view, negotiation))
}

/// The full negotiation, for the platform or a participant user.
#[utoipa::path(get, path = "/api/negotiations/{id}", tag = "negotiations", operation_id = "getNegotiation",
    security(("bearerJwt" = [])),
    params(NegotiationPath),
    responses(
        (status = 200, description = "The negotiation", body = NegotiationOut),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_negotiation(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<NegotiationOut>> {
    let mut conn = state.pool().acquire().await?;
    let task = tasks::get(&mut conn, id).await?.ok_or(ApiError::NotFound("negotiation"))?;
    let viewer = Viewer::of_caller(&caller, &task).ok_or(ApiError::NotFound("negotiation"))?;
    let turns = messages::turns(&mut conn, task.id).await?;
    let outcome = messages::outcome(&mut conn, task.id).await?;
    Ok(Json(
        NegotiationOut::new(&task, &turns, outcome, viewer)
            .with_rounds_and_wait(&mut conn, &state.engine, &task)
            .await?,
    ))
}

/// Cancels a negotiation: the task ends `canceled` with outcome reason `canceled`.
#[utoipa::path(delete, path = "/api/negotiations/{id}", tag = "negotiations", operation_id = "cancelNegotiation",
    security(("bearerJwt" = [])),
    params(NegotiationPath),
    responses(
        (status = 200, description = "Canceled; the negotiation as it ended", body = NegotiationOut),
        (status = 404, description = "Unknown negotiation"),
        (status = 409, description = "It has already ended (`already_completed`)"),
        PlatformOnly,
    ))]
pub async fn cancel_negotiation(
    State(state): State<AppState>,
    _caller: ServiceCaller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<NegotiationOut>> {
    state.engine.cancel(id).await?;
    let (_, negotiation) = load_pair(&state, id).await?;
    Ok(Json(negotiation))
}

/// Body of an answer to a person's question.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"answer": "Yes, it rules him out"}))]
pub struct AnswerIn {
    /// One of the question's options, or free text (1 to 1 000 characters).
    #[schema(min_length = 1, max_length = 1000)]
    pub answer: String,
}

/// A person's question after their answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnsweredOut {
    /// The question.
    pub id: Uuid,
    /// Its negotiation.
    pub negotiation_id: Uuid,
    /// The question as asked.
    pub question: String,
    /// The answer as stored.
    pub answer: String,
    /// When it was answered.
    pub answered_at: chrono::DateTime<chrono::Utc>,
}

/// The person answers the question their agent asked them (`pendingQuestion`): the turn goes
/// back to their agent, whose next pickup carries the answer. Only the asking person may answer;
/// the other side never reads the question or the answer.
#[utoipa::path(post, path = "/api/negotiations/{id}/questions/{questionId}/answer", tag = "negotiations",
    operation_id = "answerQuestion",
    security(("bearerJwt" = [])),
    params(QuestionPath),
    request_body = AnswerIn,
    responses(
        (status = 200, description = "Answered (or this same answer was given already)", body = AnsweredOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 404, description = "Unknown negotiation or question, or not the caller's question"),
        (status = 409, description = "`question_closed` (answered already with another answer, or its window ran out) or `already_completed`"),
    ))]
pub async fn answer_question(
    State(state): State<AppState>,
    caller: Caller,
    Ids((id, question_id)): Ids<(Uuid, Uuid)>,
    ApiJson(body): ApiJson<AnswerIn>,
) -> ApiResult<Json<AnsweredOut>> {
    let q = state.engine.answer_question(&caller.sub, id, question_id, &body.answer).await?;
    Ok(Json(AnsweredOut {
        id: q.id,
        negotiation_id: q.task_id,
        question: q.question,
        answer: q.answer.unwrap_or_default(),
        answered_at: q.answered_at.unwrap_or_else(chrono::Utc::now),
    }))
}
