//! Arming and disarming timers inside the caller's transaction.
//!
//! This module owns every write the service makes to `apalis.jobs`. All functions take the
//! caller's `&mut PgConnection` (pass `&mut *tx`), so a timer exists iff the state change that
//! needs it commits: a rolled-back transaction leaves no job, a committed one leaves exactly one.
//!
//! How a timer is stored and cancelled is written once, in SQL (`jobs/sql/timers.sql`, installed
//! by [`crate::setup`]): these functions call `parley_jobs.arm` and `parley_jobs.disarm`, or the
//! `parley_jobs.arm_*` of the kinds that the service's own SQL functions arm inside their
//! statements too (park, claim, delegation), so that those kinds' queue, key and payload are
//! written once. One apalis row per timer, with a fresh ULID id, an explicit queue (`job_type`),
//! `run_at` rounded *up* to the next whole second (apalis stores whole seconds, and a timer must
//! never fire early), and the idempotency key of its subject (`park:{task_id}`, ...; see
//! [`crate::payload`]).
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
//!
//! A task waits on at most one turn timer, since it is either parked or claimed: arming its park
//! timer moves a pending claim timer of the task into it, and arming its claim timer moves a
//! pending park timer, with one UPDATE of the row instead of a DELETE and an INSERT.
//!
//! A turn timer need not fire exactly at its turn's deadline, only no later: the service's
//! pickup and respond keep the pending turn timer when it is due at or before their new deadline
//! ([`turn_timer_at`]), so a negotiation whose turns come faster than the claim window writes no
//! timer row per turn. A timer that fires for a state that has moved on re-arms the turn timer
//! for the deadline the task has then (the service's handlers do this).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{PgConnection, Postgres};
use uuid::Uuid;

use ulid::Ulid;

use crate::JobsError;
use crate::payload::{
    A2aCall, A2aSubject, ClaimTimeout, DelegationTimeout, NegotiationDeadline, OutboxDelivery, ParkTimeout,
    PendingExpiry, SystemTurn, TimerKind, pending_expiry_key, queues, system_turn_key,
};

/// How many times a timer whose handler keeps failing is retried (with backoff) before it is
/// left `Failed`. `jobs/sql/timers.sql` writes the same number.
pub const MAX_ATTEMPTS: usize = 20;

/// A fresh job id (a ULID), for SQL that arms a timer itself.
pub fn new_timer_id() -> String {
    Ulid::generate().to_string()
}

/// Arms the park timer of `t.task_id` (replacing any pending one) to fire at `run_at`.
pub async fn schedule_park_timeout(
    conn: &mut PgConnection,
    t: &ParkTimeout,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    arm_with_new_id(
        conn,
        sqlx::query("SELECT parley_jobs.arm_park_timeout($1, $2, $3, $4, $5)")
            .bind(t.task_id)
            .bind(i32::try_from(t.turn_number).unwrap_or(i32::MAX))
            .bind(t.generation)
            .bind(run_at),
    )
    .await
}

/// Arms the claim timer of `t.task_id` (replacing any pending one) to fire at `run_at`.
pub async fn schedule_claim_timeout(
    conn: &mut PgConnection,
    t: &ClaimTimeout,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    arm_with_new_id(
        conn,
        sqlx::query("SELECT parley_jobs.arm_claim_timeout($1, $2, $3, $4)")
            .bind(t.task_id)
            .bind(t.generation)
            .bind(run_at),
    )
    .await
}

/// Arms the personal-vs-personal deadline of `t.task_id` (replacing any pending one).
pub async fn schedule_deadline(
    conn: &mut PgConnection,
    t: &NegotiationDeadline,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    arm(conn, queues::NEGOTIATION_DEADLINE, &TimerKind::Deadline.key(t.task_id), t, run_at).await
}

/// Arms the expiry of the pending opportunity `t.opportunity_id` (replacing any pending one).
pub async fn schedule_pending_expiry(
    conn: &mut PgConnection,
    t: &PendingExpiry,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    arm(conn, queues::PENDING_EXPIRY, &pending_expiry_key(t.opportunity_id), t, run_at).await
}

/// Arms the timer of the delegation `t.delegation_id` (replacing any pending one, of an
/// earlier attempt too) to fire at `run_at`.
pub async fn schedule_delegation_timeout(
    conn: &mut PgConnection,
    t: &DelegationTimeout,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    arm_with_new_id(
        conn,
        sqlx::query("SELECT parley_jobs.arm_delegation_timeout($1, $2, $3, $4)")
            .bind(t.delegation_id)
            .bind(t.attempt)
            .bind(run_at),
    )
    .await
}

/// Arms the system-turn job of `t.task_id` (replacing any pending one), due at once.
pub async fn schedule_system_turn(conn: &mut PgConnection, t: &SystemTurn) -> Result<(), JobsError> {
    arm(conn, queues::SYSTEM_TURN, &system_turn_key(t.task_id), t, Utc::now()).await
}

/// Arms the step `t` of an A2A call (replacing any pending step of its subject) to run at
/// `run_at`.
pub async fn schedule_a2a_call(conn: &mut PgConnection, t: &A2aCall, run_at: DateTime<Utc>) -> Result<(), JobsError> {
    arm(conn, queues::A2A_CALL, &t.subject.key(), t, run_at).await
}

/// Arms an outbox job `t` to run at `run_at` (at once when `run_at` is not in the future). It
/// has no key (see [`OutboxDelivery`]): arming one never replaces another, and never waits on
/// another transaction's arming.
pub async fn schedule_outbox(
    conn: &mut PgConnection,
    t: &OutboxDelivery,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    sqlx::query("SELECT parley_jobs.push($1, $2, $3, greatest($4, clock_timestamp()), $5)")
        .bind(queues::OUTBOX)
        .bind(new_timer_id())
        .bind(serde_json::to_string(t)?)
        .bind(run_at)
        .bind(i32::try_from(MAX_ATTEMPTS).unwrap_or(i32::MAX))
        .execute(conn)
        .await?;
    Ok(())
}

/// Brings the pending A2A call step of `subject` forward to now (a cancel or a deadline that the
/// agent must hear of at once); false when none is pending.
pub async fn hurry_a2a_call(conn: &mut PgConnection, subject: &A2aSubject) -> Result<bool, JobsError> {
    let moved: bool = sqlx::query_scalar("SELECT parley_jobs.hurry($1, $2)")
        .bind(queues::A2A_CALL)
        .bind(subject.key())
        .fetch_one(conn)
        .await?;
    Ok(moved)
}

/// Cancels the pending A2A call step of `subject`; returns how many were deleted.
pub async fn cancel_a2a_call(conn: &mut PgConnection, subject: &A2aSubject) -> Result<u64, JobsError> {
    let deleted: i64 = sqlx::query_scalar("SELECT parley_jobs.disarm($1, $2)")
        .bind(queues::A2A_CALL)
        .bind(subject.key())
        .fetch_one(conn)
        .await?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}

/// Runs one `parley_jobs.arm_*` call whose last argument is the new job's id.
async fn arm_with_new_id(conn: &mut PgConnection, call: Query<'_, Postgres, PgArguments>) -> Result<(), JobsError> {
    call.bind(new_timer_id()).execute(conn).await?;
    Ok(())
}

/// Cancels the still-pending timer of `delegation_id`; returns how many were deleted.
pub async fn cancel_delegation_timeout(conn: &mut PgConnection, delegation_id: Uuid) -> Result<u64, JobsError> {
    let deleted: i64 = sqlx::query_scalar("SELECT parley_jobs.disarm_delegation_timeout($1)")
        .bind(delegation_id)
        .fetch_one(conn)
        .await?;
    Ok(u64::try_from(deleted).unwrap_or(0))
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

/// When the pending turn timer (park or claim) of `task_id` is due, if it has one.
pub async fn turn_timer_at(conn: &mut PgConnection, task_id: Uuid) -> Result<Option<DateTime<Utc>>, JobsError> {
    Ok(sqlx::query_scalar("SELECT parley_jobs.turn_timer_at($1)").bind(task_id).fetch_one(conn).await?)
}

/// When the pending timer of `kind` for `task_id` is due, if there is one (a timer already
/// fetched or running is no longer a promise about the future). One probe of apalis's unique
/// (job_type, idempotency_key) index.
pub async fn pending_timer_at(
    conn: &mut PgConnection,
    kind: TimerKind,
    task_id: Uuid,
) -> Result<Option<DateTime<Utc>>, JobsError> {
    let at: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
        "SELECT CASE WHEN status = 'Pending' THEN run_at END FROM apalis.jobs WHERE job_type = $1 AND idempotency_key = $2",
    )
    .bind(kind.queue())
    .bind(kind.key(task_id))
    .fetch_optional(conn)
    .await?;
    Ok(at.flatten())
}

/// Cancels the still-pending expiry timer of `opportunity_id`; returns how many were deleted.
pub async fn cancel_pending_expiry(conn: &mut PgConnection, opportunity_id: Uuid) -> Result<u64, JobsError> {
    disarm(conn, queues::PENDING_EXPIRY, &pending_expiry_key(opportunity_id)).await
}

/// Deletes the still-pending job(s) holding `key` in `queue` and detaches the key from every
/// other row; returns the number of pending jobs deleted. See the module docs for the order.
pub(crate) async fn disarm(conn: &mut PgConnection, queue: &str, key: &str) -> Result<u64, JobsError> {
    let deleted: i64 =
        sqlx::query_scalar("SELECT parley_jobs.disarm($1, $2)").bind(queue).bind(key).fetch_one(conn).await?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}

/// Disarms `key` in `queue`, then inserts one new job carrying `payload` due at `run_at`.
pub(crate) async fn arm<P: serde::Serialize>(
    conn: &mut PgConnection,
    queue: &str,
    key: &str,
    payload: &P,
    run_at: DateTime<Utc>,
) -> Result<(), JobsError> {
    sqlx::query("SELECT parley_jobs.arm($1, $2, $3, $4, $5, $6)")
        .bind(queue)
        .bind(key)
        .bind(new_timer_id())
        .bind(serde_json::to_string(payload)?)
        .bind(run_at)
        .bind(i32::try_from(MAX_ATTEMPTS).unwrap_or(i32::MAX))
        .execute(conn)
        .await?;
    Ok(())
}
