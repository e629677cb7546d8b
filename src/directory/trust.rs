//! Trust: an agent's record as the one doing the work.
//!
//! - `healthComponent`: the mean, over the last 30 days that had any, of each day's share of
//!   the turns the agent claimed that it answered before the claim expired and the delegation
//!   attempts it accepted that it completed in time, times 100; 50 with none. A claim it gave
//!   back (release) counts neither way.
//! - `delegationComponent`: 100 * completed / finished (completed, rejected, timed out, in
//!   error) delegation attempts addressed to it in the last 90 days; 50 until it has any.
//! - `rawScore` = 0.6 * health + 0.4 * delegation, to 2 decimals.
//! - `percentile`: round(100 * agents with a strictly lower rawScore / (N - 1)) over the N
//!   agents with a capability or a record in the last 90 days (and the agent asked about); 100
//!   when N <= 1.
//! - `provisional` until 10 attempts that counted came from at least 3 other owners.
//!
//! Only attempts that are evidence of work for others count (`parley_delegation_move`): never
//! those between agents of one owner; not against the target those whose requester gave less
//! time than the target's own estimate; and at most `PARLEY_TRUST_PER_REQUESTER` (3) per
//! target, requesting owner and day. So an owner cannot buy a score with its own agents, nor
//! any requester wreck one with volume or impossible timeouts.
//!
//! The counters are written by the transactions that end claims (a trigger on `tasks`) and
//! attempts ([`super::delegation::store::move_attempt`]).
//!
//! Two readers, one definition:
//! - `GET /api/trust/:agentId` ([`of`]) computes the agent's numbers from the per-agent daily
//!   counters (`agent_trust_days`) with the SQL function `parley_trust_scores`, fresh on every
//!   read;
//! - discovery and ranking read the view `trust_percentiles`: a rank over `trust_records`, one
//!   small row per agent of the population holding the numbers that depend on its own counters.
//!   Those rows are written in the transactions that change their inputs (database triggers on
//!   the counters and on capabilities), so the percentiles they give are as fresh as
//!   [`of`]'s; no request reads any agent's history. The 30- and 90-day windows move at UTC
//!   midnight: rows computed on an earlier day are recomputed by the first discovery or ranking
//!   of the new day ([`roll`], one indexed check otherwise).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// An agent's trust.
#[derive(Debug, Clone, PartialEq)]
pub struct Trust {
    /// The agent.
    pub agent_id: Uuid,
    /// 0-100, 2 decimals.
    pub health_component: f64,
    /// 0-100, 2 decimals.
    pub delegation_component: f64,
    /// 0.6 * health + 0.4 * delegation, 2 decimals.
    pub raw_score: f64,
    /// 0-100 among all agents.
    pub percentile: i32,
    /// Claims answered or expired and attempts finished in the last 90 days.
    pub events: i64,
    /// Delegation attempts addressed to it that finished and counted in the last 90 days.
    pub total_delegations: i64,
    /// Of those, completed.
    pub successful_delegations: i64,
    /// When its record last changed, if ever.
    pub updated_at: Option<DateTime<Utc>>,
    /// Whether the score rests on too little to mean much: fewer than 10 counted attempts, or
    /// from fewer than 3 other owners (`parley_trust_provisional`).
    pub provisional: bool,
}

/// The trust of one agent (ranked among all agents).
pub async fn of(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Trust> {
    sqlx::query_as!(
        Trust,
        r#"SELECT agent_id AS "agent_id!", health::float8 AS "health_component!",
                  delegation::float8 AS "delegation_component!", raw::float8 AS "raw_score!",
                  percentile AS "percentile!", events AS "events!", total_delegations AS "total_delegations!",
                  successful_delegations AS "successful_delegations!", updated_at, provisional AS "provisional!"
           FROM parley_trust_scores($1) WHERE agent_id = $1"#,
        agent_id
    )
    .fetch_one(conn)
    .await
}

/// The percentile of one agent, as [`of`] gives it, read from the stored records (after
/// [`roll`]): one count over `trust_records`, no agent's history. An agent without a record
/// (outside the population: no capability and no recent record) is ranked by [`of`].
pub async fn percentile(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<i32> {
    roll(conn).await?;
    let stored = sqlx::query_scalar!(
        r#"SELECT CASE WHEN s.n <= 1 THEN 100 ELSE round(100.0 * s.lower / (s.n - 1))::integer END AS "percentile!"
             FROM (SELECT raw FROM trust_records WHERE agent_id = $1) me,
                  LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE t.raw < me.raw) AS lower
                             FROM trust_records t) s"#,
        agent_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    match stored {
        Some(p) => Ok(p),
        None => Ok(of(conn, agent_id).await?.percentile),
    }
}

/// Recomputes the trust rows computed on an earlier UTC day, when there are any (one indexed
/// check otherwise). One caller does it at a time (a transaction-scoped advisory lock); the
/// others wait, then find nothing left to do.
pub async fn roll(conn: &mut PgConnection) -> sqlx::Result<()> {
    let stale = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM trust_records WHERE as_of < (now() AT TIME ZONE 'UTC')::date) AS "stale!""#
    )
    .fetch_one(&mut *conn)
    .await?;
    if !stale {
        return Ok(());
    }
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", ROLL_LOCK).execute(&mut *conn).await?;
    sqlx::query!(
        "SELECT parley_refresh_trust_records(ARRAY(
             SELECT agent_id FROM trust_records WHERE as_of < (now() AT TIME ZONE 'UTC')::date ORDER BY agent_id))"
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The advisory lock key of [`roll`].
const ROLL_LOCK: i64 = 0x7061_726c_7472_7374;
