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
//! 30 000, an unknown cost or latency counting 0.5, rounded to 4 places (half away from zero, as
//! the exact decimal would be); ties go by anonymous id. The candidates come from the process's
//! snapshot of the kind (see [`super::index`]), exactly as fresh as the database, so a discovery
//! costs one tiny read when nothing changed. Rows carry the anonymous id, never the agent's id
//! or owner.

use std::time::Duration;

use sqlx::PgConnection;

use super::{
    capabilities::{CapabilityError, TaskType, custom_type_for},
    index::{self, Entry},
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
    /// `minTrust`: AgentLens's server's name for `minTrustScore`.
    pub min_trust: Option<&'a str>,
    /// `maxCost`: AgentLens's server's name for `maxCostUsd`.
    pub max_cost: Option<&'a str>,
    /// `maxLatency`: AgentLens's server's name for `maxLatencyMs`.
    pub max_latency: Option<&'a str>,
    /// `scope`: `internal` or `all` (every agent of a Parley is of one directory).
    pub scope: Option<&'a str>,
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

/// A discovery as an adapter received it, with its numbers as numbers (a tool's arguments);
/// [`Query::from_typed`] checks it. The route's query string arrives as text instead
/// ([`RawQuery`], [`Query::parse`]); both go through the same checks, in the same order.
#[derive(Debug, Clone, Default)]
pub struct DiscoverQuery<'a> {
    /// `taskType` (required).
    pub task_type: Option<&'a str>,
    /// `customType`.
    pub custom_type: Option<&'a str>,
    /// `minTrustScore`.
    pub min_trust_score: Option<f64>,
    /// `maxCostUsd`.
    pub max_cost_usd: Option<f64>,
    /// `maxLatencyMs`.
    pub max_latency_ms: Option<f64>,
    /// `limit`.
    pub limit: Option<i64>,
    /// `scope`: `internal` or `all`.
    pub scope: Option<&'a str>,
}

fn refuse(field: &'static str, message: impl Into<String>) -> CapabilityError {
    CapabilityError::invalid(field, message)
}

/// One filter given under either of its two names (the seed's and AgentLens's server's): the
/// same value under both is fine, different values are refused rather than one ignored.
fn either(
    (name, value): (&'static str, Option<&str>),
    (alias, alias_value): (&'static str, Option<&str>),
) -> Result<Option<f64>, CapabilityError> {
    let (a, b) = (number(name, value)?, number(alias, alias_value)?);
    match (a, b) {
        (Some(x), Some(y)) if x != y => {
            Err(refuse(name, format!("and {alias} are the same filter and must not differ")))
        }
        _ => Ok(a.or(b)),
    }
}

fn number(field: &'static str, value: Option<&str>) -> Result<Option<f64>, CapabilityError> {
    match value.map(str::trim) {
        None => Ok(None),
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(refuse(field, format!("{} is not a number", crate::quote::quote(v)))),
        },
    }
}

/// The kind of work asked for: `taskType` (required), `customType` and `scope`.
fn kind(
    task_type: Option<&str>,
    custom_type: Option<&str>,
    scope: Option<&str>,
) -> Result<(TaskType, Option<String>), CapabilityError> {
    let task_type =
        task_type.map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| refuse("taskType", "is required"))?;
    let task_type = TaskType::parse(task_type)
        .ok_or_else(|| refuse("taskType", format!("must be one of {}", TaskType::names())))?;
    let custom_type = match (task_type, custom_type) {
        // Without a customType, a custom discovery shows every custom capability.
        (TaskType::Custom, None) => None,
        (t, c) => custom_type_for(t, c)?,
    };
    if scope.is_some_and(|s| !matches!(s.trim(), "internal" | "all")) {
        return Err(refuse("scope", "must be internal or all"));
    }
    Ok((task_type, custom_type))
}

fn min_trust_score(value: Option<f64>) -> Result<f64, CapabilityError> {
    let value = value.unwrap_or(0.0);
    if !(0.0..=100.0).contains(&value) {
        return Err(refuse("minTrustScore", "must be from 0 to 100"));
    }
    Ok(value)
}

fn positive(field: &'static str, value: Option<f64>) -> Result<Option<f64>, CapabilityError> {
    if value.is_some_and(|v| v <= 0.0) {
        return Err(refuse(field, "must be greater than 0"));
    }
    Ok(value)
}

fn limit(value: Option<i64>) -> Result<i64, CapabilityError> {
    match value {
        None => Ok(MAX_LIMIT),
        Some(n) if n >= 1 => Ok(n.min(MAX_LIMIT)),
        Some(_) => Err(refuse("limit", "must be a whole number of at least 1")),
    }
}

impl Query {
    /// Checks the query string's parameters; the first one at fault is named. A `limit` above
    /// [`MAX_LIMIT`] shows [`MAX_LIMIT`].
    pub fn parse(raw: &RawQuery<'_>) -> Result<Query, CapabilityError> {
        let (task_type, custom_type) = kind(raw.task_type, raw.custom_type, raw.scope)?;
        let min_trust_score =
            min_trust_score(either(("minTrustScore", raw.min_trust_score), ("minTrust", raw.min_trust))?)?;
        let max_cost_usd =
            positive("maxCostUsd", either(("maxCostUsd", raw.max_cost_usd), ("maxCost", raw.max_cost))?)?;
        let max_latency_ms =
            positive("maxLatencyMs", either(("maxLatencyMs", raw.max_latency_ms), ("maxLatency", raw.max_latency))?)?;
        let limit = match raw.limit.map(str::trim) {
            None => limit(None)?,
            Some(l) => {
                limit(Some(l.parse::<i64>().map_err(|_| refuse("limit", "must be a whole number of at least 1"))?))?
            }
        };
        Ok(Query { task_type, custom_type, min_trust_score, max_cost_usd, max_latency_ms, limit })
    }

    /// Checks a typed discovery with the same rules, in the same order, as [`Query::parse`].
    pub fn from_typed(q: &DiscoverQuery<'_>) -> Result<Query, CapabilityError> {
        let (task_type, custom_type) = kind(q.task_type, q.custom_type, q.scope)?;
        Ok(Query {
            task_type,
            custom_type,
            min_trust_score: min_trust_score(q.min_trust_score)?,
            max_cost_usd: positive("maxCostUsd", q.max_cost_usd)?,
            max_latency_ms: positive("maxLatencyMs", q.max_latency_ms)?,
            limit: limit(q.limit)?,
        })
    }
}

/// One result: a discoverable capability and its composite score. Its `entry` also names the
/// agent behind the anonymous id; the views built from it never show that (they pick their
/// fields one by one).
#[derive(Debug, Clone)]
pub struct Found {
    /// The capability, with what its agent's record says.
    pub entry: Entry,
    /// The composite score, 4 decimals.
    pub composite_score: f64,
}

/// Runs a discovery over the directory's snapshot of the asked kind (see [`super::index`]: one
/// tiny read when nothing changed since the last request; the expired anonymous ids of the
/// agents it may show are replaced before it is rebuilt). `floor` is the configured lowest trust
/// percentile.
pub async fn discover(conn: &mut PgConnection, q: &Query, floor: u32, ttl: Duration) -> sqlx::Result<Discovered> {
    let snapshot = index::snapshot(conn, Some(q.task_type), ttl).await?;
    Ok(rank(&snapshot.entries, q, floor))
}

/// A discovery's answer: the results shown, and how many matched in all (before `limit`).
#[derive(Debug, Clone)]
pub struct Discovered {
    /// Best first, at most the query's `limit`.
    pub results: Vec<Found>,
    /// Every capability that passed the filters.
    pub total: usize,
}

/// The composite score of a capability: see the module docs. Computed in binary floating
/// point, then rounded to 4 places half away from zero as the exact decimal would be (the
/// tolerance absorbs the binary error, some 1e-16, far below the 1e-9 that separates a real
/// half from its neighbours at 4 places).
pub fn composite(percentile: i32, cost: Option<f64>, latency: Option<i64>, max_cost: f64, max_latency: f64) -> f64 {
    let part = |value: Option<f64>, max: f64| value.map_or(0.5, |v| (v / max).min(1.0));
    #[allow(clippy::cast_precision_loss)]
    let latency = latency.map(|l| l as f64);
    let raw = 0.5 * f64::from(percentile) / 100.0
        + 0.3 * (1.0 - part(cost, max_cost))
        + 0.2 * (1.0 - part(latency, max_latency));
    let scaled = raw * 10_000.0;
    let rounded = if scaled >= 0.0 { (scaled + 0.5 + 1e-9).floor() } else { (scaled - 0.5 - 1e-9).ceil() };
    rounded / 10_000.0
}

/// Filters, scores and orders a snapshot's entries for `q`: best composite first, ties by
/// anonymous id then capability id, `q.limit` of them (and how many passed the filters).
pub fn rank(entries: &[Entry], q: &Query, floor: u32) -> Discovered {
    let min_trust = q.min_trust_score.max(f64::from(floor));
    let max_cost = q.max_cost_usd.unwrap_or(DEFAULT_MAX_COST_USD);
    let max_latency = q.max_latency_ms.unwrap_or(DEFAULT_MAX_LATENCY_MS);
    #[allow(clippy::cast_precision_loss)]
    let mut kept: Vec<(f64, &Entry)> = entries
        .iter()
        .filter(|e| q.custom_type.as_deref().is_none_or(|c| e.custom_type.as_deref() == Some(c)))
        .filter(|e| f64::from(e.trust_score_percentile) >= min_trust)
        .filter(|e| q.max_cost_usd.is_none_or(|m| e.estimated_cost_usd.is_none_or(|c| c <= m)))
        .filter(|e| q.max_latency_ms.is_none_or(|m| e.estimated_latency_ms.is_none_or(|l| l as f64 <= m)))
        .map(|e| {
            (
                composite(
                    e.trust_score_percentile,
                    e.estimated_cost_usd,
                    e.estimated_latency_ms,
                    max_cost,
                    max_latency,
                ),
                e,
            )
        })
        .collect();
    let order = |a: &(f64, &Entry), b: &(f64, &Entry)| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.anonymous_agent_id.cmp(&b.1.anonymous_agent_id))
            .then_with(|| a.1.capability_id.cmp(&b.1.capability_id))
    };
    let limit = usize::try_from(q.limit).unwrap_or(0);
    let total = kept.len();
    if kept.len() > limit && limit > 0 {
        kept.select_nth_unstable_by(limit - 1, order);
        kept.truncate(limit);
    }
    kept.sort_by(order);
    kept.truncate(limit);
    let results = kept.into_iter().map(|(composite_score, e)| Found { entry: e.clone(), composite_score }).collect();
    Discovered { results, total }
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
    fn composite_rounds_like_the_exact_decimal() {
        // 0.5 * 0.5 + 0.3 * (1 - 0.05) + 0.2 * 0.5 = 0.635
        assert_eq!(composite(50, Some(5.0), None, 100.0, 30_000.0), 0.635);
        // 0.5 * 0.33 + 0.3 * 0.5 + 0.2 * (1 - 0.00001) = 0.514998 -> 0.515
        assert_eq!(composite(33, None, Some(1), 100.0, 100_000.0), 0.515);
        // an exact half at the fifth place goes up: 0.3 * 0.99 + 0.2 * 0.00025 = 0.29705
        assert_eq!(composite(0, Some(1.0), Some(99_975), 100.0, 100_000.0), 0.2971);
        assert_eq!(composite(100, Some(500.0), Some(90_000), 100.0, 30_000.0), 0.5);
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
        assert_eq!(parse(Some("testing"), |r| r.scope = Some("public")).unwrap_err().field, "scope");
        assert!(parse(Some("testing"), |r| r.scope = Some("all")).is_ok());
    }

    #[test]
    fn numbers_as_numbers_are_checked_as_numbers_as_text_are() {
        let typed = |f: &dyn Fn(&mut DiscoverQuery<'static>)| {
            let mut q = DiscoverQuery { task_type: Some("testing"), ..DiscoverQuery::default() };
            f(&mut q);
            Query::from_typed(&q)
        };
        let text = |f: &dyn Fn(&mut RawQuery<'static>)| parse(Some("testing"), f);
        let pairs: [(Result<Query, CapabilityError>, Result<Query, CapabilityError>); 7] = [
            (typed(&|q| q.min_trust_score = Some(40.0)), text(&|r| r.min_trust_score = Some("40"))),
            (typed(&|q| q.min_trust_score = Some(101.0)), text(&|r| r.min_trust_score = Some("101"))),
            (typed(&|q| q.max_cost_usd = Some(0.0)), text(&|r| r.max_cost_usd = Some("0"))),
            (typed(&|q| q.max_latency_ms = Some(900.0)), text(&|r| r.max_latency_ms = Some("900"))),
            (typed(&|q| q.limit = Some(0)), text(&|r| r.limit = Some("0"))),
            (typed(&|q| q.limit = Some(500)), text(&|r| r.limit = Some("500"))),
            (typed(&|q| q.custom_type = Some("x")), text(&|r| r.custom_type = Some("x"))),
        ];
        for (typed, text) in pairs {
            match (typed, text) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!((a.field, a.message), (b.field, b.message)),
                (a, b) => panic!("{a:?} vs {b:?}"),
            }
        }
    }

    #[test]
    fn each_filter_reads_both_spellings_and_refuses_two_values() {
        let both = |f: &dyn Fn(&mut RawQuery<'static>)| parse(Some("testing"), f);
        assert_eq!(both(&|r| r.max_cost = Some("0.1")).unwrap().max_cost_usd, Some(0.1));
        assert_eq!(both(&|r| r.max_latency = Some("900")).unwrap().max_latency_ms, Some(900.0));
        assert_eq!(both(&|r| r.min_trust = Some("40")).unwrap().min_trust_score, 40.0);
        let same = both(&|r| {
            r.max_cost = Some("0.1");
            r.max_cost_usd = Some("0.10");
        });
        assert_eq!(same.unwrap().max_cost_usd, Some(0.1));
        let differ = both(&|r| {
            r.min_trust = Some("40");
            r.min_trust_score = Some("41");
        });
        assert_eq!(differ.unwrap_err().field, "minTrustScore");
    }
}
