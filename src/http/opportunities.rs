//! `GET /api/opportunities`, `GET /api/opportunities/{id}`: what people and the platform see.

use axum::{Json, Router, extract::State, routing::get};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::{ApiQuery, Ids},
    views::OpportunityOut,
};
use crate::{domain::OpportunityStatus, store::opportunities};

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/opportunities", get(list_opportunities))
        .route("/api/opportunities/{id}", get(get_opportunity))
}

/// Largest page.
const MAX_LIMIT: i64 = 200;

/// Query of the listing.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    /// Only this status.
    pub status: Option<String>,
    /// Service only: only this user's.
    pub user_id: Option<String>,
    /// Page size (default 50, at most 200).
    pub limit: Option<i64>,
    /// The previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// Lists opportunities, newest first: a user sees their own; the service sees all (filterable
/// by `userId`). Answers `{opportunities, nextCursor}`.
async fn list_opportunities(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Value>> {
    let status = match q.status.as_deref() {
        None | Some("all") => None,
        Some(s) => Some(OpportunityStatus::parse(s).ok_or_else(|| {
            ApiError::invalid(
                "status must be one of negotiating, pending, accepted, rejected, stalled, expired, all",
            )
        })?),
    };
    let limit = q.limit.unwrap_or(50);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!("limit must be between 1 and {MAX_LIMIT}")));
    }
    let before = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(Uuid::parse_str(c).map_err(|_| ApiError::invalid("cursor is not valid"))?),
    };
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
    let items: Vec<OpportunityOut> = page.iter().take(limit as usize).map(OpportunityOut::from).collect();
    let next_cursor = if has_more { items.last().map(|o| o.id.to_string()) } else { None };
    Ok(Json(json!({ "opportunities": items, "nextCursor": next_cursor })))
}

/// One opportunity, for the service or one of its two people.
async fn get_opportunity(
    State(state): State<AppState>,
    caller: Caller,
    Ids(id): Ids<Uuid>,
) -> ApiResult<Json<OpportunityOut>> {
    let mut conn = state.pool().acquire().await?;
    let o = opportunities::get(&mut conn, id).await?.ok_or(ApiError::NotFound("opportunity"))?;
    if !caller.is_service() && !o.has_participant(&caller.sub) {
        return Err(ApiError::NotFound("opportunity"));
    }
    Ok(Json(OpportunityOut::from(&o)))
}
