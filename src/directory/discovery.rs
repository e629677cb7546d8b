//! Discovery: the enabled capabilities of one kind of work, ranked.
//!
//! Kept: capabilities that are enabled, of active agents, of the asked `taskType` (and
//! `customType`), whose agent's trust percentile is at least the larger of `minTrustScore` and
//! the configured floor, and whose cost and latency are within `maxCostUsd` and `maxLatencyMs`
//! where known. Ranked by the composite score
//!
//! ```text
//! 0.5 * trust/100 + 0.3 * (1 - min(cost/maxCost, 1)) + 0.2 * (1 - min(latency/maxLatency, 1))
//! ```
//!
//! with trust the percentile, maxCost = `maxCostUsd` or 100, maxLatency = `maxLatencyMs` or
//! 30 000, an unknown cost or latency counting 0.5, computed in exact decimals and rounded to 4
//! places; ties go by anonymous id. The whole ranking is one query (trust read from the stored
//! per-agent rows, see [`super::trust`]), so only the shown rows leave the database. Rows carry
//! the anonymous id, never the agent's id or owner.

use std::time::Duration;

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    anonymity,
    trust,
    capabilities::{CapabilityError, TaskType, custom_type_for},
};

/// The most results one discovery shows (and the default).
pub const MAX_LIMIT: i64 = 20;
/// maxCost when the query gives none.
pub const DEFAULT_MAX_COST_USD: f64 = 100.0;
/// maxLatency when the query gives none.
pub const DEFAULT_MAX_LATENCY_MS: f64 = 30_000.0;

/// The query parameters as they arrived.
#[derive(Debug, Clone, Default)]
pub struct RawQuery<'a> {
    /// `taskType` (required).
    pub task_type: Option<&'a str>,
    /// `customType`.
    pub custom_type: Option<&'a str>,
    /// `minTrustScore`.
    pub min_trust_score: Option<&'a str>,
    /// `maxCostUsd`.
    pub max_cost_usd: Option<&'a str>,
    /// `maxLatencyMs`.
    pub max_latency_ms: Option<&'a str>,
    /// `limit`.
    pub limit: Option<&'a str>,
}

/// A checked discovery query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The kind of work.
    pub task_type: TaskType,
    /// For `custom`: only this custom type (all custom ones when absent).
    pub custom_type: Option<String>,
    /// Lowest trust percentile asked for (0 when absent).
    pub min_trust_score: f64,
    /// Cost cap, when given (positive).
    pub max_cost_usd: Option<f64>,
    /// Latency cap, when given (positive).
    pub max_latency_ms: Option<f64>,
    /// Results to show, 1 to [`MAX_LIMIT`].
    pub limit: i64,
}

fn refuse(field: &'static str, message: impl Into<String>) -> CapabilityError {
    CapabilityError { field, message: message.into() }
}

fn number(field: &'static str, value: Option<&str>) -> Result<Option<f64>, CapabilityError> {
    match value.map(str::trim) {
        None => Ok(None),
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(refuse(field, format!("{v:?} is not a number"))),
        },
    }
}

impl Query {
    /// Checks the parameters; the first one at fault is named. A `limit` above
    /// [`MAX_LIMIT`] shows [`MAX_LIMIT`].
    pub fn parse(raw: &RawQuery<'_>) -> Result<Query, CapabilityError> {
        let task_type = raw.task_type.map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| refuse("taskType", "is required"))?;
        let task_type =
            TaskType::parse(task_type).ok_or_else(|| refuse("taskType", format!("must be one of {}", TaskType::names())))?;
        let custom_type = match (task_type, raw.custom_type) {
            // Without a customType, a custom discovery shows every custom capability.
            (TaskType::Custom, None) => None,
            (t, c) => custom_type_for(t, c)?,
        };
        let min_trust_score = number("minTrustScore", raw.min_trust_score)?.unwrap_or(0.0);
        if !(0.0..=100.0).contains(&min_trust_score) {
            return Err(refuse("minTrustScore", "must be from 0 to 100"));
        }
        let max_cost_usd = number("maxCostUsd", raw.max_cost_usd)?;
        if max_cost_usd.is_some_and(|c| c <= 0.0) {
            return Err(refuse("maxCostUsd", "must be greater than 0"));
        }
        let max_latency_ms = number("maxLatencyMs", raw.max_latency_ms)?;
        if max_latency_ms.is_some_and(|l| l <= 0.0) {
            return Err(refuse("maxLatencyMs", "must be greater than 0"));
        }
        let limit = match raw.limit.map(str::trim) {
            None => MAX_LIMIT,
            Some(l) => match l.parse::<i64>() {
                Ok(n) if n >= 1 => n.min(MAX_LIMIT),
                _ => return Err(refuse("limit", "must be a whole number of at least 1")),
            },
        };
        Ok(Query { task_type, custom_type, min_trust_score, max_cost_usd, max_latency_ms, limit })
    }
}

/// One result, as anyone may see it.
#[derive(Debug, Clone)]
pub struct Found {
    /// The agent's current anonymous id.
    pub anonymous_agent_id: Uuid,
    /// The capability.
    pub capability_id: Uuid,
    /// Its kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// Input JSON Schema.
    pub input_schema: Value,
    /// Output JSON Schema.
    pub output_schema: Value,
    /// Estimate, milliseconds.
    pub estimated_latency_ms: Option<i64>,
    /// Estimate, US dollars.
    pub estimated_cost_usd: Option<f64>,
    /// The agent's trust percentile.
    pub trust_score_percentile: i32,
    /// The events its trust rests on.
    pub trust_events: i64,
    /// The composite score, 4 decimals.
    pub composite_score: f64,
}

/// Runs a discovery: replaces the expired anonymous ids of the agents it may show (usually
/// none), then ranks in one query. `floor` is the configured lowest trust percentile.
pub async fn discover(conn: &mut PgConnection, q: &Query, floor: u32, ttl: Duration) -> sqlx::Result<Vec<Found>> {
    anonymity::refresh_expired(conn, Some(q.task_type.as_str()), q.custom_type.as_deref(), ttl).await?;
    trust::roll(conn).await?;
    let min_trust = q.min_trust_score.max(f64::from(floor));
    sqlx::query_as!(
        Found,
        r#"SELECT ai.anonymous_id AS anonymous_agent_id, c.capability_id, c.task_type, c.custom_type,
                  c.input_schema, c.output_schema, c.estimated_latency_ms, c.estimated_cost_usd,
                  t.percentile AS "trust_score_percentile!", t.events AS "trust_events!",
                  round(0.5 * t.percentile / 100.0
                        + 0.3 * (1 - CASE WHEN c.estimated_cost_usd IS NULL THEN 0.5
                                          ELSE least(c.estimated_cost_usd::numeric / $5::float8::numeric, 1) END)
                        + 0.2 * (1 - CASE WHEN c.estimated_latency_ms IS NULL THEN 0.5
                                          ELSE least(c.estimated_latency_ms::numeric / $6::float8::numeric, 1) END),
                        4)::float8 AS "composite_score!"
           FROM capabilities c
           JOIN agents a ON a.agent_id = c.agent_id AND a.status = 'active'
           JOIN anonymous_ids ai ON ai.agent_id = c.agent_id AND ai.current
           JOIN trust_percentiles t ON t.agent_id = c.agent_id
           WHERE c.enabled AND c.task_type = $1 AND ($2::text IS NULL OR c.custom_type = $2)
             AND t.percentile::float8 >= $3::float8
             AND ($4::float8 IS NULL OR c.estimated_cost_usd IS NULL OR c.estimated_cost_usd <= $4)
             AND ($7::float8 IS NULL OR c.estimated_latency_ms IS NULL OR c.estimated_latency_ms <= $7)
           ORDER BY 11 DESC, ai.anonymous_id, c.capability_id
           LIMIT $8"#,
        q.task_type.as_str(),
        q.custom_type.as_deref(),
        min_trust,
        q.max_cost_usd,
        q.max_cost_usd.unwrap_or(DEFAULT_MAX_COST_USD),
        q.max_latency_ms.unwrap_or(DEFAULT_MAX_LATENCY_MS),
        q.max_latency_ms,
        q.limit
    )
    .fetch_all(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(task: Option<&'static str>, f: impl FnOnce(&mut RawQuery<'static>)) -> Result<Query, CapabilityError> {
        let mut raw = RawQuery { task_type: task, ..RawQuery::default() };
        f(&mut raw);
        Query::parse(&raw)
    }

    #[test]
    fn task_type_is_required_and_must_be_known() {
        assert_eq!(parse(None, |_| {}).unwrap_err().field, "taskType");
        assert_eq!(parse(Some("cooking"), |_| {}).unwrap_err().field, "taskType");
        let q = parse(Some("code-review"), |_| {}).unwrap();
        assert_eq!((q.limit, q.min_trust_score, q.max_cost_usd, q.max_latency_ms), (20, 0.0, None, None));
    }

    #[test]
    fn bad_numbers_are_named_and_a_large_limit_is_capped() {
        assert_eq!(parse(Some("testing"), |r| r.min_trust_score = Some("high")).unwrap_err().field, "minTrustScore");
        assert_eq!(parse(Some("testing"), |r| r.min_trust_score = Some("101")).unwrap_err().field, "minTrustScore");
        assert_eq!(parse(Some("testing"), |r| r.max_cost_usd = Some("0")).unwrap_err().field, "maxCostUsd");
        assert_eq!(parse(Some("testing"), |r| r.max_latency_ms = Some("-5")).unwrap_err().field, "maxLatencyMs");
        assert_eq!(parse(Some("testing"), |r| r.max_latency_ms = Some("NaN")).unwrap_err().field, "maxLatencyMs");
        assert_eq!(parse(Some("testing"), |r| r.limit = Some("0")).unwrap_err().field, "limit");
        assert_eq!(parse(Some("testing"), |r| r.limit = Some("2.5")).unwrap_err().field, "limit");
        assert_eq!(parse(Some("testing"), |r| r.limit = Some("500")).unwrap().limit, 20);
        assert_eq!(parse(Some("testing"), |r| r.custom_type = Some("x")).unwrap_err().field, "customType");
        assert_eq!(parse(Some("custom"), |_| {}).unwrap().custom_type, None);
    }
}
