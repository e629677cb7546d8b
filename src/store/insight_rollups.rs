//! Writing the insights rollups that [`super::insights`] reads: a row per UTC day and scope
//! (everyone, and each user), with counts by key beside it (turns, duration buckets, terms).
//!
//! - **Live:** the transaction that ends a negotiation counts it ([`record_endings`], at the
//!   end of the one finalize path); triggers count decisions, expiries and lapsed claims in the
//!   transactions that make them (`migrations/functions/parley_insights_*.sql` and
//!   `parley_count_claim_end.sql`). A live count goes to one of eight shards of the day, by the
//!   id of what ended, so concurrent endings rarely queue on one row lock.
//! - **Folding:** housekeeping folds the shards of days before yesterday into shard 0
//!   ([`fold`]), so that a year of a scope reads one row per day and key.
//! - **Backfill:** history from before the rollups existed is rolled up after start, in small
//!   batches, by [`backfill_step`] (never by the migration, so `serve` starts at once whatever
//!   the history's size). Each source has a cursor in `insight_backfill`, up to the moment the
//!   rollups' migration ran; everything after it was counted live. Until a source is done, the
//!   insights of the days it has not reached yet show less than happened.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

/// Counts the endings of these negotiations (ended, with their outcome stored) in their days'
/// rollups. Runs inside the caller's transaction.
pub async fn record_endings(conn: &mut PgConnection, task_ids: &[Uuid]) -> sqlx::Result<()> {
    sqlx::query("SELECT parley_insights_negotiations($1)").bind(task_ids).execute(conn).await?;
    Ok(())
}

/// Folds the shards of the days before `before` into shard 0, at most `max_days` days (the
/// oldest first); returns how many days it folded. Each day is one transaction.
pub async fn fold(pool: &PgPool, before: NaiveDate, max_days: i64) -> sqlx::Result<usize> {
    let days: Vec<NaiveDate> = sqlx::query_scalar(
        "SELECT DISTINCT day FROM (
            (SELECT day FROM insight_days WHERE shard <> 0 AND day < $1 ORDER BY day LIMIT $2)
            UNION ALL
            (SELECT day FROM insight_counts WHERE shard <> 0 AND day < $1 ORDER BY day LIMIT $2)) d
          ORDER BY day LIMIT $2",
    )
    .bind(before)
    .bind(max_days)
    .fetch_all(pool)
    .await?;
    for day in &days {
        let mut tx = pool.begin().await?;
        sqlx::query(FOLD_DAYS).bind(day).execute(&mut *tx).await?;
        sqlx::query(FOLD_COUNTS).bind(day).execute(&mut *tx).await?;
        tx.commit().await?;
    }
    Ok(days.len())
}

const FOLD_DAYS: &str = "
    WITH moved AS (DELETE FROM insight_days WHERE day = $1 AND shard <> 0 RETURNING *)
    INSERT INTO insight_days AS d
           (scope, day, shard, negotiations, accepted, rejected, turn_cap, timeout, canceled, turns,
            answered, answer_seconds, fallbacks, system_turns, decisions_accepted, decisions_declined, expired,
            claim_expiries)
    SELECT scope, day, 0, sum(negotiations), sum(accepted), sum(rejected), sum(turn_cap), sum(timeout),
           sum(canceled), sum(turns), sum(answered), sum(answer_seconds), sum(fallbacks), sum(system_turns),
           sum(decisions_accepted), sum(decisions_declined), sum(expired), sum(claim_expiries)
      FROM moved
     GROUP BY scope, day
     ORDER BY scope, day
    ON CONFLICT (scope, day, shard) DO UPDATE
       SET negotiations = d.negotiations + EXCLUDED.negotiations,
           accepted = d.accepted + EXCLUDED.accepted,
           rejected = d.rejected + EXCLUDED.rejected,
           turn_cap = d.turn_cap + EXCLUDED.turn_cap,
           timeout = d.timeout + EXCLUDED.timeout,
           canceled = d.canceled + EXCLUDED.canceled,
           turns = d.turns + EXCLUDED.turns,
           answered = d.answered + EXCLUDED.answered,
           answer_seconds = d.answer_seconds + EXCLUDED.answer_seconds,
           fallbacks = d.fallbacks + EXCLUDED.fallbacks,
           system_turns = d.system_turns + EXCLUDED.system_turns,
           decisions_accepted = d.decisions_accepted + EXCLUDED.decisions_accepted,
           decisions_declined = d.decisions_declined + EXCLUDED.decisions_declined,
           expired = d.expired + EXCLUDED.expired,
           claim_expiries = d.claim_expiries + EXCLUDED.claim_expiries";

const FOLD_COUNTS: &str = "
    WITH moved AS (DELETE FROM insight_counts WHERE day = $1 AND shard <> 0 RETURNING *)
    INSERT INTO insight_counts AS c (scope, day, kind, key, shard, n)
    SELECT scope, day, kind, key, 0, sum(n)
      FROM moved
     GROUP BY scope, day, kind, key
     ORDER BY scope, day, kind, key
    ON CONFLICT (scope, day, kind, key, shard) DO UPDATE SET n = c.n + EXCLUDED.n";

/// What one backfill step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backfill {
    /// It rolled up one batch of this source; more may follow.
    Rolled(&'static str),
    /// Every source is rolled up.
    Done,
}

/// A source's cursor row: its cutoff, and the last row rolled up (time, id).
type Cursor = (DateTime<Utc>, Option<DateTime<Utc>>, Option<String>);

/// The sources, in the order they are rolled up.
const SOURCES: [&str; 4] = ["negotiations", "decisions", "expiries", "claim_expiries"];

/// Rolls up one batch of the first source not done yet: up to `batch` negotiations, or one UTC
/// day of decisions, expiries or lapsed claims. One transaction, holding the source's cursor
/// row, so that two processes never roll up the same rows.
pub async fn backfill_step(pool: &PgPool, batch: i64) -> anyhow::Result<Backfill> {
    for source in SOURCES {
        let mut tx = pool.begin().await?;
        let cursor: Option<Cursor> = sqlx::query_as(
            "SELECT cutoff, after_at, after_id FROM insight_backfill WHERE source = $1 AND done_at IS NULL FOR UPDATE",
        )
        .bind(source)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((cutoff, after_at, after_id)) = cursor else {
            continue;
        };
        let next = match source {
            "negotiations" => negotiations(&mut tx, cutoff, after_at, after_id, batch).await?,
            _ => one_day(&mut tx, source, cutoff, after_at).await?,
        };
        let done = next.is_none();
        match next {
            Some((at, id)) => {
                sqlx::query("UPDATE insight_backfill SET after_at = $2, after_id = $3 WHERE source = $1")
                    .bind(source)
                    .bind(at)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
            }
            None => {
                sqlx::query("UPDATE insight_backfill SET done_at = now() WHERE source = $1")
                    .bind(source)
                    .execute(&mut *tx)
                    .await?
            }
        };
        tx.commit().await?;
        if done {
            tracing::info!(source, "insights backfill: this source's history is rolled up");
        }
        return Ok(Backfill::Rolled(source));
    }
    Ok(Backfill::Done)
}

/// The next `batch` negotiations that ended before `cutoff`, after the cursor; returns the new
/// cursor, or `None` when this was the last batch.
async fn negotiations(
    tx: &mut PgConnection,
    cutoff: DateTime<Utc>,
    after_at: Option<DateTime<Utc>>,
    after_id: Option<String>,
    batch: i64,
) -> anyhow::Result<Option<(DateTime<Utc>, Option<String>)>> {
    let after_id = after_id.map(|id| id.parse::<Uuid>()).transpose()?.unwrap_or(Uuid::nil());
    let rows: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT task_id, completed_at FROM tasks
          WHERE completed_at IS NOT NULL AND completed_at < $1
            AND (completed_at, task_id) > (coalesce($2, '-infinity'::timestamptz), $3)
          ORDER BY completed_at, task_id LIMIT $4",
    )
    .bind(cutoff)
    .bind(after_at)
    .bind(after_id)
    .bind(batch)
    .fetch_all(&mut *tx)
    .await?;
    let ids: Vec<Uuid> = rows.iter().map(|(id, _)| *id).collect();
    sqlx::query("SELECT parley_insights_negotiations($1, 0::smallint)").bind(&ids).execute(&mut *tx).await?;
    Ok(match rows.last() {
        Some((id, at)) if rows.len() as i64 == batch => Some((*at, Some(id.to_string()))),
        _ => None,
    })
}

/// Rolls up the UTC day at the cursor (the first day with any row, at the start) of a daily
/// source, before `cutoff`; returns the cursor of the next day that has rows, or `None`.
async fn one_day(
    tx: &mut PgConnection,
    source: &str,
    cutoff: DateTime<Utc>,
    after_at: Option<DateTime<Utc>>,
) -> anyhow::Result<Option<(DateTime<Utc>, Option<String>)>> {
    // The first row's time of this source at or after `$1`, before the cutoff.
    let first = match source {
        "decisions" => "SELECT min(decided_at) FROM opportunity_decisions WHERE decided_at >= $1 AND decided_at < $2",
        "expiries" => {
            "SELECT min(updated_at) FROM opportunities WHERE status = 'expired' AND updated_at >= $1 AND updated_at < $2"
        }
        // Lapsed claims are kept per day; the day of the cutoff was counted by the migration.
        _ => {
            "SELECT min(day)::timestamp AT TIME ZONE 'UTC' FROM agent_trust_days
              WHERE day >= ($1 AT TIME ZONE 'UTC')::date AND day < ($2 AT TIME ZONE 'UTC')::date
                AND claims_expired > 0"
        }
    };
    let start = match after_at {
        Some(at) => Some(at),
        None => sqlx::query_scalar::<_, Option<DateTime<Utc>>>(first)
            .bind(DateTime::<Utc>::UNIX_EPOCH)
            .bind(cutoff)
            .fetch_one(&mut *tx)
            .await?
            .map(|at| at.date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc()),
    };
    let Some(day_start) = start else {
        return Ok(None);
    };
    let day_end = day_start + chrono::Duration::days(1);
    let roll = match source {
        "decisions" => {
            "INSERT INTO insight_days AS d (scope, day, shard, decisions_accepted, decisions_declined)
             SELECT scope, day, 0, count(*) FILTER (WHERE decision = 'accept'), count(*) FILTER (WHERE decision = 'decline')
               FROM (SELECT unnest(ARRAY['', user_id]) AS scope, (decided_at AT TIME ZONE 'UTC')::date AS day, decision
                       FROM opportunity_decisions WHERE decided_at >= $1 AND decided_at < least($2, $3)) x
              GROUP BY scope, day ORDER BY scope, day
             ON CONFLICT (scope, day, shard) DO UPDATE
                SET decisions_accepted = d.decisions_accepted + EXCLUDED.decisions_accepted,
                    decisions_declined = d.decisions_declined + EXCLUDED.decisions_declined"
        }
        "expiries" => {
            "INSERT INTO insight_days AS d (scope, day, shard, expired)
             SELECT scope, day, 0, count(*)
               FROM (SELECT unnest(ARRAY['', source_user_id, candidate_user_id]) AS scope,
                            (updated_at AT TIME ZONE 'UTC')::date AS day
                       FROM opportunities
                      WHERE status = 'expired' AND updated_at >= $1 AND updated_at < least($2, $3)) x
              GROUP BY scope, day ORDER BY scope, day
             ON CONFLICT (scope, day, shard) DO UPDATE SET expired = d.expired + EXCLUDED.expired"
        }
        _ => {
            "INSERT INTO insight_days AS d (scope, day, shard, claim_expiries)
             SELECT scope, day, 0, sum(claims_expired)
               FROM (SELECT unnest(ARRAY['', a.owner_user_id]) AS scope, t.day, t.claims_expired
                       FROM agent_trust_days t JOIN agents a ON a.agent_id = t.agent_id
                      WHERE t.day = ($1 AT TIME ZONE 'UTC')::date AND t.claims_expired > 0
                        AND t.day < ($3 AT TIME ZONE 'UTC')::date) x
              GROUP BY scope, day ORDER BY scope, day
             ON CONFLICT (scope, day, shard) DO UPDATE SET claim_expiries = d.claim_expiries + EXCLUDED.claim_expiries"
        }
    };
    sqlx::query(roll).bind(day_start).bind(day_end).bind(cutoff).execute(&mut *tx).await?;
    let next: Option<DateTime<Utc>> = sqlx::query_scalar(first).bind(day_end).bind(cutoff).fetch_one(&mut *tx).await?;
    Ok(next.map(|at| (at.date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc(), None)))
}

/// Runs the backfill to its end, a batch at a time with `pause` between batches (so that it
/// never holds more than one batch's rows, and leaves the database to the requests); a failed
/// step is logged and tried again after a longer pause.
pub async fn backfill(pool: PgPool, batch: i64, pause: Duration) {
    let mut rolled = 0u64;
    loop {
        match backfill_step(&pool, batch).await {
            Ok(Backfill::Done) => {
                if rolled > 0 {
                    // The rollups grew by a whole history at once: plan their reads on fresh
                    // statistics now, not after autovacuum next notices.
                    if let Err(e) = sqlx::query("ANALYZE insight_days, insight_counts").execute(&pool).await {
                        tracing::warn!(error = %e, "insights backfill: analyzing the rollups failed");
                    }
                    tracing::info!(batches = rolled, "insights backfill: done");
                }
                return;
            }
            Ok(Backfill::Rolled(_)) => {
                rolled += 1;
                if rolled.is_multiple_of(100) {
                    tracing::info!(batches = rolled, "insights backfill: rolling up history from before the rollups");
                }
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "insights backfill: a step failed; trying again");
                tokio::time::sleep(pause.max(Duration::from_secs(5))).await;
            }
        }
    }
}
