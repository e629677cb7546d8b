//! `GET /api/insights`: how negotiations, decisions and personal agents fared over a range, per
//! day and in total, for a user (their own) or the platform (everyone, or one user).
//!
//! This module validates the range and decides whose data the caller may see; what each figure
//! measures, and which reasoning a user's objections are counted from, is documented (and
//! computed) in [`crate::store::insights`].

use axum::{Json, Router, extract::State, routing::get};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::{
    AppState,
    auth::Caller,
    error::{ApiError, ApiResult},
    extract::ApiQuery,
};
use crate::store::insights::{self, Figures, Scope};

/// The range when none is given: the last 30 days.
pub const DEFAULT_DAYS: i64 = 30;
/// The longest range one request may cover.
pub const MAX_DAYS: i64 = 366;

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/insights", get(get_insights))
}

/// Query of the insights.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct InsightsQuery {
    /// Start (inclusive): an RFC 3339 timestamp, or a `YYYY-MM-DD` date (its midnight, UTC).
    /// Default: 30 days before `to`.
    pub from: Option<String>,
    /// End (exclusive): an RFC 3339 timestamp, or a `YYYY-MM-DD` date, which includes that whole
    /// day (UTC). Default: now. Must be after `from`, at most 366 days later.
    pub to: Option<String>,
    /// Service only: only this user's. A user may name only themselves.
    pub user_id: Option<String>,
}

/// One UTC day's figures.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InsightsDay {
    /// The day, `YYYY-MM-DD` (UTC).
    #[schema(value_type = String, format = Date)]
    pub day: NaiveDate,
    /// What happened that day.
    pub figures: Figures,
}

/// The insights of a range.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InsightsOut {
    /// Start of the range (inclusive): the midnight (UTC) that begins the first day the asked
    /// range touches (figures are kept per UTC day, and a day counts whole).
    pub from: DateTime<Utc>,
    /// End of the range (exclusive): the midnight (UTC) that ends the last day the asked range
    /// touches.
    pub to: DateTime<Utc>,
    /// Whose data: the user's id, or null for everyone.
    pub user_id: Option<String>,
    /// The whole range.
    pub total: Figures,
    /// The days with any activity, oldest first.
    pub days: Vec<InsightsDay>,
}

/// Parses a bound: an RFC 3339 timestamp, or a date (its midnight UTC; for the end, the next
/// midnight, so that the day is included).
fn parse_bound(name: &str, value: &str, end: bool) -> Result<DateTime<Utc>, ApiError> {
    if let Ok(date) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        let day = if end { date.succ_opt() } else { Some(date) };
        if let Some(start) = day.and_then(|d| d.and_hms_opt(0, 0, 0)) {
            return Ok(start.and_utc());
        }
    }
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ApiError::invalid(format!("{name} must be an RFC 3339 timestamp or a YYYY-MM-DD date")))
}

/// Validates `from` and `to` and fills in the defaults.
pub fn range(
    from: Option<&str>,
    to: Option<&str>,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let to = match to {
        Some(t) => parse_bound("to", t, true)?,
        None => now,
    };
    let from = match from {
        Some(f) => parse_bound("from", f, false)?,
        None => to - Duration::days(DEFAULT_DAYS),
    };
    if to <= from {
        return Err(ApiError::invalid("to must be after from"));
    }
    if to - from > Duration::days(MAX_DAYS) {
        return Err(ApiError::invalid(format!("the range may cover at most {MAX_DAYS} days")));
    }
    Ok((from, to))
}

/// Insights per UTC day and in total, over every whole UTC day the range touches: negotiations
/// that ended by outcome and reason, mean turns and turns to outcome, median time to outcome
/// (read from buckets, within a fifth), human decisions and expired opportunities,
/// personal agents' answer latency, claim expiries and fallbacks, and the ten terms most often
/// named missing. A user sees only negotiations they are part of, their own decisions and
/// agents, and objections from their own side's counter and reject turns and from outcomes (never
/// the other side's private reasoning); the service sees everyone, or one user with `userId`.
#[utoipa::path(get, path = "/api/insights", tag = "insights", operation_id = "getInsights",
    security(("bearerJwt" = [])),
    params(InsightsQuery),
    responses(
        (status = 200, description = "The insights of the range", body = InsightsOut),
        (status = 400, description = "Invalid `from`, `to` or range (`invalid_body`)"),
        (status = 403, description = "A user asked for another user's insights"),
    ))]
pub async fn get_insights(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<InsightsQuery>,
) -> ApiResult<Json<InsightsOut>> {
    let (from, to) = range(q.from.as_deref(), q.to.as_deref(), Utc::now())?;
    let user_id = if caller.is_service() {
        q.user_id
    } else {
        if q.user_id.as_deref().is_some_and(|u| u != caller.sub) {
            return Err(ApiError::Forbidden("a user may only see their own insights".into()));
        }
        Some(caller.sub.clone())
    };
    // The rollups count whole UTC days: the answer covers every day the range touches.
    let (first_day, last_day) = insights::days_of(from, to);
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let (from, to) = (midnight(first_day), midnight(last_day) + Duration::days(1));
    let mut tx = state.pool().begin().await?;
    // Reads a few hundred rows per scope; never let one request hold a connection for long.
    sqlx::query("SET LOCAL statement_timeout = '5s'").execute(&mut *tx).await?;
    let found = insights::compute(&mut tx, &Scope { from, to, user_id: user_id.as_deref() }).await?;
    tx.commit().await?;
    Ok(Json(InsightsOut {
        from,
        to,
        user_id,
        total: found.total,
        days: found.days.into_iter().map(|(day, figures)| InsightsDay { day, figures }).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn ranges_default_parse_and_are_bounded() {
        let now = at("2026-11-23T12:00:00Z");
        assert_eq!(range(None, None, now).unwrap(), (at("2026-10-24T12:00:00Z"), now));
        assert_eq!(
            range(Some("2026-11-01"), Some("2026-11-02"), now).unwrap(),
            (at("2026-11-01T00:00:00Z"), at("2026-11-03T00:00:00Z"))
        );
        assert_eq!(
            range(Some("2026-11-01T10:00:00+02:00"), Some("2026-11-01T10:00:01Z"), now).unwrap(),
            (at("2026-11-01T08:00:00Z"), at("2026-11-01T10:00:01Z"))
        );
        assert!(range(Some("2026-11-05"), Some("2026-11-04"), now).is_err());
        assert!(range(Some("2026-11-05T00:00:00Z"), Some("2026-11-05T00:00:00Z"), now).is_err());
        assert!(range(Some("2025-01-01"), Some("2026-11-01"), now).is_err());
        assert!(range(Some("2025-11-01"), Some("2026-10-31"), now).is_ok());
        assert!(range(Some("yesterday"), None, now).is_err());
        assert!(range(None, Some("2026-13-01"), now).is_err());
    }
}
