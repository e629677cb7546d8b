//! What Parley forgets, and when: run by housekeeping, in small batches (each its own short
//! transaction), so pruning a year of history never pauses turn delivery.
//!
//! Always:
//! - **Trust counters** older than the 90 days anything reads them in (`agent_trust_days`,
//!   `trust_requester_days`).
//! - **Revoked agent keys**, [`REVOKED_KEY_GRACE`] after their revocation (until then a call
//!   with one is still told that the key was revoked).
//! - **The event log**, [`EVENT_LOG_KEEP`] after each event, once no outbox delivery still
//!   holds it (an event stream that reconnects within a day resumes where it was; a webhook keeps
//!   its events until they are delivered or given up).
//! - **The record of A2A sends** (what Parley sent to agents registered by their card, which
//!   their calls are checked against), [`EVENT_LOG_KEEP`] after each send began.
//!
//! With a history retention (`PARLEY_HISTORY_RETENTION`; off by default):
//! - **Ended negotiations**: an opportunity whose every round ended before the cutoff, in a
//!   final status (accepted, rejected, stalled or expired), goes with its negotiations, their
//!   conversation, turns, outcome and the people's decisions.
//! - **Ended delegations**, ended before the cutoff, with their attempts.
//! - **Routed A2A tasks** (where a plain message went, `a2a_routes`), started before the cutoff,
//!   with their push notification configurations: a later call on such a task is told -32001.
//! - **Anonymous ids** that stopped being current and expired before the cutoff: every
//!   attempt that named one was made before it expired, and so is gone too.
//!
//! The insights rollups are never pruned: they outlive the rows they summarize.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// How long a revoked key is kept (and named revoked when used) before it is deleted.
pub const REVOKED_KEY_GRACE: Duration = Duration::from_secs(30 * 86_400);

/// How long the event log and the record of A2A sends are kept.
pub const EVENT_LOG_KEEP: Duration = Duration::from_secs(86_400);

/// The days of trust counters anything reads: the last 90, today included.
const TRUST_WINDOW_DAYS: i32 = 90;

/// What one pruning run deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Opportunities, with their negotiations.
    pub opportunities: u64,
    /// Delegations, with their attempts.
    pub delegations: u64,
    /// Expired anonymous ids.
    pub anonymous_ids: u64,
    /// Rows of trust counters (both tables).
    pub trust_days: u64,
    /// Revoked keys.
    pub revoked_keys: u64,
    /// Events of the event log.
    pub events: u64,
    /// Records of A2A sends.
    pub a2a_sends: u64,
    /// Routed A2A tasks.
    pub a2a_routes: u64,
    /// Whether the run stopped at its time budget with more left to prune.
    pub unfinished: bool,
}

/// Prunes what is due at `now`, `batch` rows at a time, for at most `budget`.
pub async fn prune(
    pool: &PgPool,
    retention: Option<Duration>,
    now: DateTime<Utc>,
    batch: i64,
    budget: Duration,
) -> anyhow::Result<Pruned> {
    let started = Instant::now();
    let mut out = Pruned::default();
    let over = || started.elapsed() >= budget;

    let oldest_read = now.date_naive() - chrono::Days::new(TRUST_WINDOW_DAYS as u64);
    for sql in [
        "DELETE FROM agent_trust_days WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM agent_trust_days WHERE day < $1 LIMIT $2))",
        "DELETE FROM trust_requester_days WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM trust_requester_days WHERE day < $1 LIMIT $2))",
    ] {
        out.trust_days += in_batches(pool, sql, oldest_read, batch, &over).await?;
    }
    let revoked_before = now - chrono::Duration::from_std(REVOKED_KEY_GRACE)?;
    out.revoked_keys += in_batches(
        pool,
        "DELETE FROM api_keys WHERE ctid = ANY(ARRAY(SELECT ctid FROM api_keys WHERE revoked_at < $1 LIMIT $2))",
        revoked_before,
        batch,
        &over,
    )
    .await?;

    let log_before = now - chrono::Duration::from_std(EVENT_LOG_KEEP)?;
    out.events += in_batches(
        pool,
        "DELETE FROM events WHERE event_id = ANY(ARRAY(
            SELECT e.event_id FROM events e
             WHERE e.created_at < $1
               AND NOT EXISTS (SELECT 1 FROM outbox_deliveries d WHERE d.event_id = e.event_id)
             ORDER BY e.created_at LIMIT $2))",
        log_before,
        batch,
        &over,
    )
    .await?;
    out.a2a_sends += in_batches(
        pool,
        "DELETE FROM a2a_sends WHERE ctid = ANY(ARRAY(SELECT ctid FROM a2a_sends WHERE started_at < $1 LIMIT $2))",
        log_before,
        batch,
        &over,
    )
    .await?;

    if let Some(retention) = retention {
        let cutoff = now - chrono::Duration::from_std(retention)?;
        out.opportunities = opportunities(pool, cutoff, batch, &over).await?;
        out.delegations += in_batches(
            pool,
            "DELETE FROM delegations WHERE delegation_id = ANY(ARRAY(
                SELECT delegation_id FROM delegations WHERE ended_at < $1 ORDER BY ended_at LIMIT $2))",
            cutoff,
            batch,
            &over,
        )
        .await?;
        out.a2a_routes += in_batches(
            pool,
            "DELETE FROM a2a_routes WHERE ctid = ANY(ARRAY(SELECT ctid FROM a2a_routes WHERE created_at < $1 LIMIT $2))",
            cutoff,
            batch,
            &over,
        )
        .await?;
        out.anonymous_ids += in_batches(
            pool,
            "DELETE FROM anonymous_ids WHERE anonymous_id = ANY(ARRAY(
                SELECT anonymous_id FROM anonymous_ids WHERE NOT current AND expires_at < $1 LIMIT $2))",
            cutoff,
            batch,
            &over,
        )
        .await?;
    }
    out.unfinished = over();
    Ok(out)
}

/// Runs `sql` (a `DELETE` of at most `$2` rows older than `$1`, each run its own transaction)
/// until a batch comes back short or the budget is spent; returns the rows deleted.
async fn in_batches<T>(
    pool: &PgPool,
    sql: &'static str,
    older_than: T,
    batch: i64,
    over: &impl Fn() -> bool,
) -> anyhow::Result<u64>
where
    T: for<'q> sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Copy + Send + Sync,
{
    let mut total = 0;
    loop {
        let deleted = sqlx::query(sql).bind(older_than).bind(batch).execute(pool).await?.rows_affected();
        total += deleted;
        if deleted < batch as u64 || over() {
            return Ok(total);
        }
    }
}

/// Deletes the opportunities whose every round ended before `cutoff`. Walks the ended
/// negotiations oldest first with a cursor, so that an opportunity kept for now (a later
/// round still running) never stops the walk.
async fn opportunities(
    pool: &PgPool,
    cutoff: DateTime<Utc>,
    batch: i64,
    over: &impl Fn() -> bool,
) -> anyhow::Result<u64> {
    let mut after = (DateTime::<Utc>::UNIX_EPOCH, uuid::Uuid::nil());
    let mut total = 0;
    loop {
        type Row = (i64, Option<DateTime<Utc>>, Option<uuid::Uuid>, i64);
        let (seen, last_at, last_id, deleted): Row = sqlx::query_as(
            "WITH batch AS (
                SELECT task_id, opportunity_id, completed_at FROM tasks
                 WHERE completed_at < $1 AND (completed_at, task_id) > ($2, $4)
                 ORDER BY completed_at, task_id LIMIT $3
             ), last AS (
                SELECT completed_at, task_id FROM batch ORDER BY completed_at DESC, task_id DESC LIMIT 1
             ), doomed AS (
                SELECT o.opportunity_id FROM opportunities o
                 WHERE o.opportunity_id IN (SELECT opportunity_id FROM batch)
                   AND o.status IN ('accepted', 'rejected', 'stalled', 'expired') AND o.updated_at < $1
                   AND NOT EXISTS (SELECT 1 FROM tasks x WHERE x.opportunity_id = o.opportunity_id
                                      AND (x.completed_at IS NULL OR x.completed_at >= $1))
                   FOR UPDATE OF o SKIP LOCKED
             ), gone AS (
                DELETE FROM opportunities WHERE opportunity_id IN (SELECT opportunity_id FROM doomed) RETURNING 1
             )
             SELECT (SELECT count(*) FROM batch), (SELECT completed_at FROM last), (SELECT task_id FROM last),
                    (SELECT count(*) FROM gone)",
        )
        .bind(cutoff)
        .bind(after.0)
        .bind(batch)
        .bind(after.1)
        .fetch_one(pool)
        .await?;
        total += deleted as u64;
        match (last_at, last_id) {
            (Some(at), Some(id)) if seen == batch && !over() => after = (at, id),
            _ => return Ok(total),
        }
    }
}
