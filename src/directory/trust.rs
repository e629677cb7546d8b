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
//!   when N <= 1. `otherAgents` says N - 1, so that an agent alone is not read as better than
//!   everyone.
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
//! - `GET /api/trust/:agentId` ([`of`]) computes the agent's numbers from its own daily counters
//!   (`agent_trust_days`, at most 90 rows) with the SQL function `parley_trust_of`, fresh on
//!   every read, and ranks it among the stored records of the rest of the population; no other
//!   agent's history is read;
//! - discovery and ranking read each agent's stored record (`trust_records`: one small row per
//!   agent of the population holding the numbers that depend on its own counters) and the
//!   percentile of its score (`trust_score_ranks`). Those rows are written in the transactions
//!   that change their inputs (database triggers on the counters and on capabilities), so the
//!   percentiles they give are as fresh as the counters; no request reads any agent's history.
//!
//! Ranking never reads the population: `trust_score_counts` holds how many records have each
//! raw score (two decimals from 0 to 100, so at most 10 001 rows), kept by a deferred trigger
//! on `trust_records` as records come, go and change score (`parley_trust_score_counted`), and
//! a percentile is read from those counts alone. Its cost does not grow with the agents.
//!
//! The 30- and 90-day windows move at UTC midnight: the rows computed on an earlier day are
//! recomputed by housekeeping ([`roll`], in batches of a few hundred agents, one transaction
//! each), never by a request. Until it has run on a new day, the other agents' stored rows are
//! those of the day before (the asked agent's own numbers are always today's).

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
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
    /// How many other agents the percentile compares it with (N - 1); 0 when it is alone.
    pub other_agents: i64,
}

/// The trust of one agent, from its own counters, ranked among the stored records of the others.
pub async fn of(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Trust> {
    sqlx::query_as!(
        Trust,
        r#"SELECT agent_id AS "agent_id!", health::float8 AS "health_component!",
                  delegation::float8 AS "delegation_component!", raw::float8 AS "raw_score!",
                  percentile AS "percentile!", events AS "events!", total_delegations AS "total_delegations!",
                  successful_delegations AS "successful_delegations!", updated_at, provisional AS "provisional!",
                  others AS "other_agents!"
           FROM parley_trust_of($1)"#,
        agent_id
    )
    .fetch_one(conn)
    .await
}

/// The percentile of one agent, as [`of`] gives it, read from the stored records: its own
/// record's score ranked by the counts per score (`trust_score_ranks`), no agent's history and
/// no other record. An agent without a record (outside the population: no capability and no
/// recent record) is ranked by [`of`].
pub async fn percentile(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<i32> {
    let stored = sqlx::query_scalar!(
        r#"SELECT k.percentile AS "percentile!"
             FROM trust_records r JOIN trust_score_ranks k ON k.raw = r.raw
            WHERE r.agent_id = $1"#,
        agent_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    match stored {
        Some(p) => Ok(p),
        None => Ok(of(conn, agent_id).await?.percentile),
    }
}

/// Recomputes the trust rows computed on an earlier UTC day (the windows have moved since), at
/// most `batch` agents per transaction, until none is left; returns how many agents it
/// recomputed. Run by housekeeping. One caller does it at a time (a transaction-scoped advisory
/// lock per batch); another finds the rows already done.
pub async fn roll(pool: &PgPool, batch: i64) -> sqlx::Result<u64> {
    let mut done = 0u64;
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query!("SELECT pg_advisory_xact_lock($1)", ROLL_LOCK).execute(&mut *tx).await?;
        let stale = sqlx::query_scalar!(
            "SELECT agent_id FROM trust_records WHERE as_of < (now() AT TIME ZONE 'UTC')::date
              ORDER BY agent_id LIMIT $1",
            batch
        )
        .fetch_all(&mut *tx)
        .await?;
        if stale.is_empty() {
            return Ok(done);
        }
        sqlx::query!("SELECT parley_refresh_trust_records($1)", &stale).execute(&mut *tx).await?;
        tx.commit().await?;
        done += stale.len() as u64;
        if (stale.len() as i64) < batch {
            return Ok(done);
        }
    }
}

/// The advisory lock key of [`roll`].
const ROLL_LOCK: i64 = 0x7061_726c_7472_7374;
