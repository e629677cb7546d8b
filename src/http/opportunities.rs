//! `GET /api/opportunities`, `GET /api/opportunities/{id}`: what people and the platform see.

use axum::{
    Json, Router,
    extract::State,
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    AppState,
    auth::{Caller, UserCaller},
    error::{ApiError, ApiResult},
    extract::{ApiJson, ApiQuery, Ids, Page},
    views::{OpportunityOut, opportunity_views},
};
use crate::{
    domain::{OpportunityEvent, OpportunityStatus},
    store::{decisions, opportunities},
};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/opportunities", get(list_opportunities))
        .route("/api/opportunities/{id}", get(get_opportunity))
        .route("/api/opportunities/{id}/decision", post(decide_opportunity))
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
            ApiError::invalid(
                "status must be one of negotiating, pending, accepted, rejected, stalled, expired, all",
            )
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
    let page = opportunities::list(
        &mut conn,
        &opportunities::ListFilter { user_id, status, before, limit: limit + 1 },
    )
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
    params(("id" = Uuid, Path, description = "The opportunity id")),
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
    #[schema(pattern = "^(accept|decline)$")]
    pub decision: String,
}

/// A participant's decision on a pending opportunity: the first decline rejects it; once every
/// participant accepted it is accepted. Each person decides once.
#[utoipa::path(post, path = "/api/opportunities/{id}/decision", tag = "opportunities", operation_id = "decideOpportunity",
    security(("bearerJwt" = [])),
    params(("id" = Uuid, Path, description = "The opportunity id")),
    request_body = DecisionIn,
    responses(
        (status = 200, description = "The decision is recorded; the opportunity as it now is", body = OpportunityOut),
        (status = 400, description = "Invalid body (`invalid_body`)"),
        (status = 403, description = "Not a user token"),
        (status = 404, description = "Unknown, or not one of the caller's"),
        (status = 409, description = "Not pending (`not_pending`) or already decided (`already_decided`)"),
    ))]
pub async fn decide_opportunity(
    State(state): State<AppState>,
    UserCaller(caller): UserCaller,
    Ids(id): Ids<Uuid>,
    ApiJson(body): ApiJson<DecisionIn>,
) -> ApiResult<Json<OpportunityOut>> {
    let decision = body.decision.as_str();
    if !matches!(decision, "accept" | "decline") {
        return Err(ApiError::invalid("decision must be accept or decline"));
    }
    let mut tx = state.pool().begin().await?;
    let o = opportunities::lock(&mut tx, id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    if !o.has_participant(&caller.sub) {
        return Err(ApiError::NotFound("opportunity"));
    }
    if o.status != OpportunityStatus::Pending {
        return Err(ApiError::Conflict {
            code: "not_pending",
            message: format!("the opportunity is {}, not pending", o.status),
        });
    }
    if !decisions::insert(&mut tx, o.id, &caller.sub, decision).await? {
        return Err(ApiError::Conflict { code: "already_decided", message: "you have already decided".into() });
    }
    let made = decisions::for_opportunities(&mut tx, &[o.id]).await?.remove(&o.id).unwrap_or_default();
    let everyone_accepted = [&o.source_user_id, &o.candidate_user_id]
        .iter()
        .all(|u| made.get(u.as_str()).map(String::as_str) == Some("accept"));
    let event = match decision {
        "decline" => Some(OpportunityEvent::SomeoneDeclined),
        _ if everyone_accepted => Some(OpportunityEvent::EveryoneAccepted),
        _ => None,
    };
    if let Some(event) = event {
        opportunities::apply(&mut tx, &o, event).await?.map_err(|e| ApiError::Internal(e.into()))?;
        crate::delivery::on_opportunity_decided(&mut tx, o.id).await?;
    }
    tx.commit().await?;
    let o = opportunities::get(state.pool().acquire().await?.as_mut(), id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    let mut conn = state.pool().acquire().await?;
    let mut views = opportunity_views(&mut conn, std::slice::from_ref(&o), Some(&caller.sub)).await?;
    Ok(Json(views.remove(0)))
}
