//! `GET /api/opportunities`, `GET /api/opportunities/{id}`: what people and the platform see;
//! `POST .../decision`, the people's say; `POST .../reactivate`, the platform's second chance.

use axum::{
    Json, Router,
    extract::{Request, State},
    http::StatusCode,
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    AppState,
    api_docs::{OpportunityPath, PlatformOnly, UsersOnly},
    auth::{Caller, ServiceCaller, UserCaller},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, Page, body_bytes, parse_json},
    negotiations::{CreatedOut, check_seed, check_user, load_pair},
    views::{OpportunityOut, opportunity_views},
};
use crate::{
    delivery::Reactivation,
    domain::{Decision, OpportunityStatus, SeedAssessment, UserContext},
    store::opportunities,
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/opportunities", get(list_opportunities))
        .route("/api/opportunities/{id}", get(get_opportunity))
        .route("/api/opportunities/{id}/decision", post(decide_opportunity))
        .route("/api/opportunities/{id}/reactivate", post(reactivate_opportunity))
}

/// Query of the listing.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this status (`all`, the default, for every status).
    #[param(pattern = "^(negotiating|pending|accepted|rejected|stalled|expired|all)$")]
    pub status: Option<String>,
    /// Service only: only this user's.
    pub user_id: Option<String>,
    /// Page size (default 50, at most 200).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// The previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// A page of opportunities.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpportunityPage {
    /// Newest first.
    pub opportunities: Vec<OpportunityOut>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// Lists opportunities, newest first: a user sees their own; the service sees all (filterable
/// by `userId`). Answers `{opportunities, nextCursor}`.
#[utoipa::path(get, path = "/api/opportunities", tag = "opportunities", operation_id = "listOpportunities",
    security(("bearerJwt" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page, newest first", body = OpportunityPage),
        (status = 400, description = "Invalid query (`invalid_body`)"),
        (status = 403, description = "A user asked for another user's opportunities"),
    ))]
pub async fn list_opportunities(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<OpportunityPage>> {
    let status = match q.status.as_deref() {
        None | Some("all") => None,
        Some(s) => Some(OpportunityStatus::parse(s).ok_or_else(|| {
            ApiError::invalid("status must be one of negotiating, pending, accepted, rejected, stalled, expired, all")
        })?),
    };
    let Page { limit, before } = Page::parse(q.limit, q.cursor.as_deref())?;
    let user_id = if caller.is_service() {
        q.user_id.as_deref()
    } else {
        if q.user_id.as_deref().is_some_and(|u| u != caller.sub) {
            return Err(ApiError::Forbidden("a user may only list their own opportunities".into()));
        }
        Some(caller.sub.as_str())
    };
    let mut conn = state.pool().acquire().await?;
    let page = opportunities::list(&mut conn, &opportunities::ListFilter { user_id, status, before, limit: limit + 1 })
        .await?;
    let has_more = page.len() as i64 > limit;
    let viewer = if caller.is_service() { None } else { Some(caller.sub.as_str()) };
    let page: Vec<_> = page.into_iter().take(limit as usize).collect();
    let items = opportunity_views(&mut conn, &page, viewer).await?;
    let next_cursor = if has_more { items.last().map(|o| o.id.to_string()) } else { None };
    Ok(Json(OpportunityPage { opportunities: items, next_cursor }))
}

/// One opportunity, for the service or one of its two people.
#[utoipa::path(get, path = "/api/opportunities/{id}", tag = "opportunities", operation_id = "getOpportunity",
    security(("bearerJwt" = [])),
    params(OpportunityPath),
    responses(
        (status = 200, description = "The opportunity", body = OpportunityOut),
        (status = 404, description = "Unknown, or not visible to the caller"),
    ))]
pub async fn get_opportunity(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<OpportunityOut>> {
    let mut conn = state.pool().acquire().await?;
    let o = opportunities::get(&mut conn, id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    if !caller.is_service() && !o.has_participant(&caller.sub) {
        return Err(ApiError::NotFound("opportunity"));
    }
    let viewer = if caller.is_service() { None } else { Some(caller.sub.as_str()) };
    let mut views = opportunity_views(&mut conn, std::slice::from_ref(&o), viewer).await?;
    Ok(Json(views.remove(0)))
}

/// Body of a decision.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"decision": "accept"}))]
pub struct DecisionIn {
    /// `accept` or `decline`.
    pub decision: Decision,
}

/// A participant's decision on a pending opportunity: the first decline rejects it; once every
/// participant accepted it is accepted. Each person decides once.
#[utoipa::path(post, path = "/api/opportunities/{id}/decision", tag = "opportunities", operation_id = "decideOpportunity",
    security(("bearerJwt" = [])),
    params(OpportunityPath),
    request_body = DecisionIn,
    responses(
        (status = 200, description = "The decision is recorded; the opportunity as it now is", body = OpportunityOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 404, description = "Unknown, or not one of the caller's"),
        (status = 409, description = "Not pending (`not_pending`) or already decided (`already_decided`)"),
        UsersOnly,
    ))]
pub async fn decide_opportunity(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids(id): Ids<Uuid>,
    ApiJson(body): ApiJson<DecisionIn>,
) -> ApiResult<Json<OpportunityOut>> {
    crate::delivery::decide(state.pool(), id, &caller.sub, body.decision).await?;
    let o = opportunities::get(state.pool().acquire().await?.as_mut(), id)
        .await?
        .ok_or(ApiError::NotFound("opportunity"))?;
    let mut conn = state.pool().acquire().await?;
    let mut views = opportunity_views(&mut conn, std::slice::from_ref(&o), Some(&caller.sub)).await?;
    Ok(Json(views.remove(0)))
}

/// Body of a reactivation: every field optional (an empty body is `{}`); what is left out is
/// taken from the latest round.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "candidateUser": {"id": "user-tomas", "name": "Tomas Novak",
        "profile": {"bio": "Senior backend engineer, eight years of Rust, now also leading a team",
            "skills": ["rust", "postgresql", "payments api", "team lead"]},
        "intents": [{"text": "Looking for a fintech startup to join as a senior backend engineer working on payments"}]}
}))]
pub struct ReactivateIn {
    /// The discovering user's new context; `id` must be the opportunity's source user. Without
    /// a `name`, the name given before is kept.
    pub source_user: Option<UserContext>,
    /// The other user's new context; `id` must be the opportunity's candidate user. Without a
    /// `name`, the name given before is kept.
    pub candidate_user: Option<UserContext>,
    /// A new assessment for the agents to argue from (the opportunity keeps its score).
    pub seed_assessment: Option<SeedAssessment>,
}

impl ReactivateIn {
    /// Checks the replacements as a create checks them, against the opportunity's two users.
    fn validate(self, o: &opportunities::Opportunity) -> Result<Reactivation, ApiError> {
        for (field, seat, user, expected) in [
            ("sourceUser", "source", &self.source_user, &o.source_user_id),
            ("candidateUser", "candidate", &self.candidate_user, &o.candidate_user_id),
        ] {
            if let Some(user) = user {
                check_user(field, user)?;
                if &user.id != expected {
                    return Err(ApiError::invalid(format!(
                        "{field}.id must be the opportunity's {seat} user, {expected}"
                    )));
                }
            }
        }
        if let Some(seed) = &self.seed_assessment {
            check_seed(seed, &o.source_user_id, &o.candidate_user_id)?;
        }
        Ok(Reactivation { source: self.source_user, candidate: self.candidate_user, seed: self.seed_assessment })
    }
}

/// Negotiates a `stalled` or `expired` opportunity again: it goes back to `negotiating` and a
/// new round starts (a new negotiation in the same conversation, turns from 0, a fresh cap),
/// from the latest round's contexts unless the body replaces them, with the earlier rounds in
/// the agents' context as `previousRounds`. 201 with `{opportunity, negotiation}` (the new
/// round); repeated while that round runs, 200 with the same.
#[utoipa::path(post, path = "/api/opportunities/{id}/reactivate", tag = "opportunities",
    operation_id = "reactivateOpportunity",
    security(("bearerJwt" = [])),
    params(OpportunityPath),
    request_body(content = Option<ReactivateIn>, description = "Optional; an empty body keeps every context"),
    responses(
        (status = 201, description = "A new round started and ran as far as it goes in process", body = CreatedOut),
        (status = 200, description = "The round an earlier reactivation started is still running: that round", body = CreatedOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 404, description = "Unknown opportunity"),
        (status = 409, description = "Neither stalled nor expired (`not_reactivatable`)"),
        PlatformOnly,
    ))]
pub async fn reactivate_opportunity(
    State(state): State<AppState>,
    _caller: ServiceCaller,
    Ids(id): Ids<Uuid>,
    request: Request,
) -> ApiResult<(StatusCode, Json<CreatedOut>)> {
    let bytes = body_bytes(request, &()).await?;
    let body: ReactivateIn =
        if bytes.iter().all(u8::is_ascii_whitespace) { ReactivateIn::default() } else { parse_json(&bytes)? };
    // The two users of an opportunity never change, so they can be checked before the lock.
    let o = opportunities::get(state.pool().acquire().await?.as_mut(), id)
        .await?
        .ok_or(ApiError::NotFound("opportunity"))?;
    let reactivation = body.validate(&o)?;
    let started = state.engine.reactivate(id, &reactivation).await?;
    let (opportunity, negotiation) = load_pair(&state, started.negotiation_id).await?;
    let status = if started.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(CreatedOut { opportunity, negotiation })))
}
