//! Arming and disarming timers inside the caller's transaction.
//!
//! This module owns every write the service makes to `apalis.jobs`. All functions take the
//! caller's `&mut PgConnection` (pass `&mut *tx`), so a timer exists iff the state change that
//! needs it commits: a rolled-back transaction leaves no job, a committed one leaves exactly one.
//!
//! How a timer is stored: one apalis-postgres row, inserted with
//! [`apalis_postgres::queries::push_tasks`] on the caller's connection, with a fresh ULID id, an
//! explicit queue (`job_type`), `run_at` rounded *up* to the next whole second (apalis stores
//! whole seconds, and a timer must never fire early), and the idempotency key of its subject
//! (`park:{task_id}`, ...; see [`crate::payload`]).
//!
//! How cancel works: apalis-postgres 1.0 has an `idempotency_key` column with a UNIQUE index on
//! `(job_type, idempotency_key)` covering *all* rows, finished ones included. So disarming a key
//! is two statements, in this order:
//! 1. `DELETE` the still-pending row(s) with that key (`Pending`, or `Failed` with attempts left):
//!    this is the cancel, and its row count is what the cancel functions return;
//! 2. detach the key (`SET idempotency_key = NULL`) from any other row holding it: finished rows
//!    (kept as history until housekeeping prunes them) and rows a worker has already fetched.
//!    An in-flight timer cannot be recalled; its handler runs and the service's state+generation
//!    guard turns it into a no-op.
//!
//! The DELETE runs first on purpose: if a worker grabs the row between the two statements, the
//! DELETE skips it and the second statement (a new snapshot under READ COMMITTED) still detaches
//! it, so the following INSERT never hits the unique index. Worker fetches use
//! `FOR UPDATE SKIP LOCKED`, so a row this transaction has deleted but not yet committed is never
//! delivered; if the transaction rolls back, the row is back untouched.
//!
//! Scheduling always disarms the key first, so scheduling a kind that is already armed replaces
//! it (re-arming = schedule again; an explicit cancel-then-schedule in one transaction works too).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use apalis::prelude::{TaskBuilder, TaskId};
use ulid::Ulid;

use crate::JobsError;
use crate::payload::{
    ClaimTimeout, NegotiationDeadline, ParkTimeout, PendingExpiry, TimerKind, pending_expiry_key,
    queues,
};

/// How many times a timer whose handler keeps failing is retried (with backoff) before it is
/// left `Failed`.
pub const MAX_ATTEMPTS: usize = 20;

/// Arms the park timer of `t.task_id` (replacing any pending one) to fire at `run_at`.
pub async fn schedule_park_timeout(
    conn: &mut PgConnection,
    t: &ParkTimeout,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    let key = TimerKind::Park.key(t.task_id);
    arm(conn, queues::PARK_TIMEOUT, &key, t, run_at).await
}

/// Arms the claim timer of `t.task_id` (replacing any pending one) to fire at `run_at`.
pub async fn schedule_claim_timeout(
    conn: &mut PgConnection,
    t: &ClaimTimeout,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    let key = TimerKind::Claim.key(t.task_id);
    arm(conn, queues::CLAIM_TIMEOUT, &key, t, run_at).await
}

/// Arms the personal-vs-personal deadline of `t.task_id` (replacing any pending one).
pub async fn schedule_deadline(
    conn: &mut PgConnection,
    t: &NegotiationDeadline,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    let key = TimerKind::Deadline.key(t.task_id);
    arm(conn, queues::NEGOTIATION_DEADLINE, &key, t, run_at).await
}

/// Arms the expiry of the pending opportunity `t.opportunity_id` (replacing any pending one).
pub async fn schedule_pending_expiry(
    conn: &mut PgConnection,
    t: &PendingExpiry,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    let key = pending_expiry_key(t.opportunity_id);
    arm(conn, queues::PENDING_EXPIRY, &key, t, run_at).await
}

/// Cancels the still-pending timers of the given kinds for `task_id`; returns how many pending
/// timers were deleted (0 when none was armed or it is already running).
pub async fn cancel_timers_for_task(
    conn: &mut PgConnection,
    task_id: Uuid,
    kinds: &[TimerKind],
) -> Result<u64, JobsError> {
    let mut deleted = 0;
    for kind in kinds {
        deleted += disarm(conn, kind.queue(), &kind.key(task_id)).await?;
    }
    Ok(deleted)
}

/// Cancels the still-pending expiry timer of `opportunity_id`; returns how many were deleted.
pub async fn cancel_pending_expiry(
    conn: &mut PgConnection,
    opportunity_id: Uuid,
) -> Result<u64, JobsError> {
    disarm(
        conn,
        queues::PENDING_EXPIRY,
        &pending_expiry_key(opportunity_id),
    )
    .await
}

/// Disarms `key` in `queue`, then inserts one new job carrying `payload` due at `run_at`.
pub(crate) async fn arm<P: Serialize>(
    conn: &mut PgConnection,
    queue: &str,
    key: &str,
    payload: &P,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    let args = serde_json::to_vec(payload)?;
    disarm(conn, queue, key).await?;
    let task = TaskBuilder::new(args)
        .task_id(TaskId::from_ulid(Ulid::generate()))
        .run_at_timestamp(whole_seconds_not_before(run_at))
        .idempotency_key(key)
        .max_attempts(MAX_ATTEMPTS)
        .build();
    apalis_postgres::queries::push_tasks(conn, queue, vec![task]).await?;
    Ok(())
}

/// Deletes the still-pending job(s) holding `key` in `queue` and detaches the key from every
/// other row; returns the number of pending jobs deleted. See the module docs for the order.
pub(crate) async fn disarm(
    conn: &mut PgConnection,
    queue: &str,
    key: &str,
) -> Result<u64, JobsError> {
    let deleted = sqlx::query(
        "DELETE FROM apalis.jobs \
         WHERE job_type = $1 AND idempotency_key = $2 \
           AND (status = 'Pending' OR (status = 'Failed' AND attempts < max_attempts))",
    )
    .bind(queue)
    .bind(key)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    sqlx::query(
        "UPDATE apalis.jobs SET idempotency_key = NULL \
         WHERE job_type = $1 AND idempotency_key = $2",
    )
    .bind(queue)
    .bind(key)
    .execute(&mut *conn)
    .await?;
    Ok(deleted)
}

/// `at` as Unix seconds, rounded up so the stored whole-second `run_at` is never earlier.
fn whole_seconds_not_before(at: DateTime<Utc>) -> u64 {
    let secs = at.timestamp() + i64::from(at.timestamp_subsec_nanos() > 0);
    u64::try_from(secs).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn run_at_rounds_up_to_whole_seconds() {
        let exact = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid");
        assert_eq!(whole_seconds_not_before(exact), 1_700_000_000);
        let later = Utc.timestamp_opt(1_700_000_000, 1).single().expect("valid");
        assert_eq!(whole_seconds_not_before(later), 1_700_000_001);
        let before_epoch = Utc.timestamp_opt(-5, 0).single().expect("valid");
        assert_eq!(whole_seconds_not_before(before_epoch), 0);
    }
}
