//! The outbox's deliveries: one row per event and target (`outbox_deliveries`), written by the
//! event's own transaction (`migrations/functions/parley_outbox_fan_out.sql`), and the targets
//! as a sender reads them (`outbox_targets`). The registration of each kind of target is
//! elsewhere (`super::webhooks`, `super::push_configs`).
//!
//! A delivery is `pending` until it is `delivered` or given up (`failed`). A sender takes due
//! deliveries of one target with [`claim`]: under the target's advisory lock, at most the
//! target's concurrency in flight at once, counted from the leases held, across every process.
//! A lease is the attempt's own time plus a margin, so a sender killed mid-call lets its
//! deliveries go by themselves; each outcome is written only by the attempt that holds the
//! lease ([`delivered`], [`retry`], [`give_up`]).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// The advisory lock class under which a target's deliveries are claimed.
const CLAIM_LOCK: i32 = 0x0b0c;

/// A target as a sender reads it.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its id.
    pub target_id: Uuid,
    /// `webhook` or `a2a_push`.
    pub kind: String,
    /// Where deliveries are POSTed.
    pub url: String,
    /// `enabled` or `disabled`.
    pub status: String,
    /// The first failure since the last success.
    pub failing_since: Option<DateTime<Utc>>,
    /// A webhook's signing secret.
    pub secret: Option<String>,
    /// A webhook's secret before the last rotation, while it still signs.
    pub previous_secret: Option<String>,
    /// Until when it signs.
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// A push configuration's delegation (its A2A task), by its request id.
    pub request_id: Option<Uuid>,
    /// A push configuration's routed task (the target's task id), when it follows one.
    pub route_task_id: Option<String>,
    /// A push configuration's protocol version (`1.0` or `0.3`).
    pub a2a_version: Option<String>,
    /// A push configuration's token.
    pub push_token: Option<String>,
    /// A push configuration's authentication scheme.
    pub auth_scheme: Option<String>,
    /// And its credentials.
    pub auth_credentials: Option<String>,
}

/// The target `target_id`, if it exists.
pub async fn target(conn: &mut PgConnection, target_id: Uuid) -> sqlx::Result<Option<Target>> {
    sqlx::query_as!(
        Target,
        r#"SELECT target_id, kind, url, status, failing_since, secret, previous_secret, previous_secret_until,
                  request_id, route_task_id, a2a_version, push_token, auth_scheme, auth_credentials
             FROM outbox_targets WHERE target_id = $1"#,
        target_id
    )
    .fetch_optional(conn)
    .await
}

/// The targets with a pending delivery of `event_id`.
pub async fn targets_of_event(conn: &mut PgConnection, event_id: i64) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        "SELECT target_id FROM outbox_deliveries WHERE event_id = $1 AND status = 'pending' ORDER BY target_id",
        event_id
    )
    .fetch_all(conn)
    .await
}

/// A delivery taken for an attempt, with its event.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The event: its id is its sequence.
    pub event_id: i64,
    /// This attempt's number (1 for the first): the attempt's fence.
    pub attempts: i32,
    /// When its retry window began.
    pub queued_at: DateTime<Utc>,
    /// The event's kind.
    pub kind: String,
    /// Its data.
    pub data: Value,
    /// When it happened.
    pub created_at: DateTime<Utc>,
}

/// Takes up to `concurrency` less the deliveries of `target_id` in flight (by any process): the
/// due ones, oldest first, each leased until `lease` from now and its attempt counted. Nothing
/// when the target is disabled. Commits its own transaction (the lease must be seen by others).
pub async fn claim(
    conn: &mut PgConnection,
    target_id: Uuid,
    concurrency: i64,
    lease: std::time::Duration,
) -> anyhow::Result<Vec<Claimed>> {
    let lease = super::interval(lease)?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // A lease lost to a crash only lets the delivery be taken again: no need to wait on disk.
    sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await?;
    sqlx::query!("SELECT pg_advisory_xact_lock($1, hashtext($2::text))", CLAIM_LOCK, target_id.to_string())
        .execute(&mut *tx)
        .await?;
    let claimed = sqlx::query_as!(
        Claimed,
        r#"WITH busy AS (
               SELECT count(*) AS n FROM outbox_deliveries
                WHERE target_id = $1 AND leased_until IS NOT NULL AND leased_until > now()
           ), due AS (
               SELECT d.event_id FROM outbox_deliveries d
                WHERE d.target_id = $1 AND d.status = 'pending' AND d.next_at <= now()
                  AND (d.leased_until IS NULL OR d.leased_until <= now())
                  AND EXISTS (SELECT 1 FROM outbox_targets t WHERE t.target_id = $1 AND t.status = 'enabled')
                ORDER BY d.next_at, d.event_id
                LIMIT greatest(0, $2 - (SELECT n FROM busy))
                FOR UPDATE OF d SKIP LOCKED
           ), taken AS (
               UPDATE outbox_deliveries d
                  SET leased_until = now() + $3::interval, attempts = d.attempts + 1, last_attempt_at = now()
                 FROM due WHERE d.target_id = $1 AND d.event_id = due.event_id
               RETURNING d.event_id, d.attempts, d.queued_at
           )
           SELECT taken.event_id AS "event_id!", taken.attempts AS "attempts!", taken.queued_at AS "queued_at!",
                  e.kind AS "kind!", e.data AS "data!", e.created_at AS "created_at!"
             FROM taken JOIN events e ON e.event_id = taken.event_id
            ORDER BY taken.event_id"#,
        target_id,
        concurrency,
        lease
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(claimed)
}

/// What an attempt answered, for the log.
#[derive(Debug, Clone)]
pub struct Attempted<'a> {
    /// The target.
    pub target_id: Uuid,
    /// The event.
    pub event_id: i64,
    /// The attempt's number, as [`claim`] counted it.
    pub attempt: i32,
    /// The HTTP status answered, if any.
    pub status_code: Option<i32>,
    /// Why it failed, if it did.
    pub error: Option<&'a str>,
    /// How long the attempt took, in milliseconds.
    pub response_ms: i32,
}

/// Records a delivered attempt, and the target's last attempt (its failures end; see below for
/// how often). False when
/// the attempt's lease was taken over meanwhile (another attempt's outcome stands).
pub async fn delivered(conn: &mut PgConnection, a: &Attempted<'_>, kind: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox_deliveries
            SET status = 'delivered', delivered_at = now(), leased_until = NULL, last_status_code = $4,
                last_error = NULL, last_response_ms = $5
          WHERE target_id = $1 AND event_id = $2 AND attempts = $3 AND status = 'pending'",
        a.target_id,
        a.event_id,
        a.attempt,
        a.status_code,
        a.response_ms
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    // A target that keeps succeeding is written at most once a second: its last delivery is
    // for people to read, and concurrent deliveries would queue on its row.
    sqlx::query!(
        "UPDATE outbox_targets
            SET failing_since = NULL, last_attempt_at = now(), last_attempt_ok = true, last_status_code = $2,
                last_error = NULL, last_event_id = $3, last_event_kind = $4
          WHERE target_id = $1
            AND (last_attempt_at IS NULL OR last_attempt_at < now() - interval '1 second'
                 OR last_attempt_ok IS NOT TRUE OR failing_since IS NOT NULL)",
        a.target_id,
        a.status_code,
        a.event_id,
        kind
    )
    .execute(&mut *conn)
    .await?;
    Ok(done == 1)
}

/// Records a failed attempt to be tried again at `next_at`, and the target's last attempt (its
/// failing since then or earlier). False when the lease was taken over meanwhile.
pub async fn retry(
    conn: &mut PgConnection,
    a: &Attempted<'_>,
    kind: &str,
    next_at: DateTime<Utc>,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox_deliveries
            SET next_at = $4, leased_until = NULL, last_status_code = $5, last_error = $6, last_response_ms = $7
          WHERE target_id = $1 AND event_id = $2 AND attempts = $3 AND status = 'pending'",
        a.target_id,
        a.event_id,
        a.attempt,
        next_at,
        a.status_code,
        a.error,
        a.response_ms
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    failed_attempt(conn, a, kind).await?;
    Ok(done == 1)
}

/// Records a failed attempt after which the delivery is given up, and the target's last attempt.
pub async fn give_up(conn: &mut PgConnection, a: &Attempted<'_>, kind: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE outbox_deliveries
            SET status = 'failed', leased_until = NULL, last_status_code = $4, last_error = $5, last_response_ms = $6
          WHERE target_id = $1 AND event_id = $2 AND attempts = $3 AND status = 'pending'",
        a.target_id,
        a.event_id,
        a.attempt,
        a.status_code,
        a.error,
        a.response_ms
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    failed_attempt(conn, a, kind).await?;
    Ok(done == 1)
}

async fn failed_attempt(conn: &mut PgConnection, a: &Attempted<'_>, kind: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE outbox_targets
            SET failing_since = coalesce(failing_since, now()), last_attempt_at = now(), last_attempt_ok = false,
                last_status_code = $2, last_error = $3, last_event_id = $4, last_event_kind = $5
          WHERE target_id = $1",
        a.target_id,
        a.status_code,
        a.error,
        a.event_id,
        kind
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Disables `target_id` with `reason` (a 410, days of failures); false when it was not enabled.
pub async fn disable(conn: &mut PgConnection, target_id: Uuid, reason: &str) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "UPDATE outbox_targets SET status = 'disabled', disabled_reason = $2, disabled_at = now(), updated_at = now()
          WHERE target_id = $1 AND status = 'enabled'",
        target_id,
        reason
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// A row of a target's delivery log.
#[derive(Debug, Clone)]
pub struct LogRow {
    /// The event (its sequence).
    pub event_id: i64,
    /// Its kind.
    pub kind: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    /// Attempts made.
    pub attempts: i32,
    /// When the delivery was made (the event's fan-out).
    pub created_at: DateTime<Utc>,
    /// When the next attempt is due, while pending.
    pub next_at: DateTime<Utc>,
    /// The last attempt.
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// Its HTTP status.
    pub last_status_code: Option<i32>,
    /// Its error.
    pub last_error: Option<String>,
    /// How long it took.
    pub last_response_ms: Option<i32>,
    /// When it was delivered.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// `target_id`'s deliveries, newest event first, before the event `before` (all when `None`),
/// at most `limit`.
pub async fn log(
    conn: &mut PgConnection,
    target_id: Uuid,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<LogRow>> {
    sqlx::query_as!(
        LogRow,
        r#"SELECT d.event_id, e.kind, d.status, d.attempts, d.created_at, d.next_at, d.last_attempt_at,
                  d.last_status_code, d.last_error, d.last_response_ms, d.delivered_at
             FROM outbox_deliveries d JOIN events e ON e.event_id = d.event_id
            WHERE d.target_id = $1 AND d.event_id < $2
            ORDER BY d.event_id DESC LIMIT $3"#,
        target_id,
        before.unwrap_or(i64::MAX),
        limit
    )
    .fetch_all(conn)
    .await
}

/// Queues again the deliveries of `target_id` for the events `event_ids` that its log holds
/// (pending, delivered or given up alike): due now, their retry window begun again. Returns the
/// events queued.
pub async fn redeliver(conn: &mut PgConnection, target_id: Uuid, event_ids: &[i64]) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        "UPDATE outbox_deliveries
            SET status = 'pending', next_at = now(), queued_at = now(), delivered_at = NULL
          WHERE target_id = $1 AND event_id = ANY($2)
            AND (status <> 'pending' OR leased_until IS NULL OR leased_until <= now())
          RETURNING event_id",
        target_id,
        event_ids
    )
    .fetch_all(conn)
    .await
}

/// Queues for the webhook `target_id` every event of the log since `since` that it takes (its
/// kinds, and its owner's events only when it has one), at most `limit`, oldest first: a
/// delivery made for those that had none (the endpoint was disabled, or registered later),
/// again for those that had one. Returns how many were queued.
pub async fn redeliver_since(
    conn: &mut PgConnection,
    target_id: Uuid,
    since: DateTime<Utc>,
    limit: i64,
) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "INSERT INTO outbox_deliveries (target_id, event_id)
         SELECT t.target_id, e.event_id
           FROM outbox_targets t JOIN events e ON e.kind = ANY (t.event_types)
          WHERE t.target_id = $1 AND t.kind = 'webhook' AND e.created_at >= $2
            AND (t.owner_user_id IS NULL OR e.source_user_id = t.owner_user_id OR e.candidate_user_id = t.owner_user_id)
          ORDER BY e.event_id LIMIT $3
         ON CONFLICT (target_id, event_id) DO UPDATE
            SET status = 'pending', next_at = now(), queued_at = now(), delivered_at = NULL
          WHERE outbox_deliveries.status <> 'pending' OR outbox_deliveries.leased_until IS NULL
             OR outbox_deliveries.leased_until <= now()",
        target_id,
        since,
        limit
    )
    .execute(conn)
    .await?
    .rows_affected())
}

/// The enabled targets with a delivery due for longer than `grace` and not in flight: a job to
/// send it was lost or failed for good (housekeeping arms one again).
pub async fn stranded(conn: &mut PgConnection, grace: std::time::Duration) -> anyhow::Result<Vec<Uuid>> {
    let grace = super::interval(grace)?;
    Ok(sqlx::query_scalar!(
        r#"SELECT DISTINCT d.target_id AS "target_id!"
             FROM outbox_deliveries d JOIN outbox_targets t ON t.target_id = d.target_id
            WHERE d.status = 'pending' AND d.next_at < now() - $1::interval
              AND (d.leased_until IS NULL OR d.leased_until <= now()) AND t.status = 'enabled'
            LIMIT 1000"#,
        grace
    )
    .fetch_all(conn)
    .await?)
}

/// Gives up the pending deliveries whose retry window (`retry_for` from their queueing) has
/// passed and that are not in flight: those of a disabled target, whose attempts stopped.
pub async fn give_up_expired(conn: &mut PgConnection, retry_for: std::time::Duration) -> anyhow::Result<u64> {
    let retry_for = super::interval(retry_for)?;
    Ok(sqlx::query!(
        "UPDATE outbox_deliveries
            SET status = 'failed', last_error = coalesce(last_error, 'not delivered within the retry window')
          WHERE status = 'pending' AND queued_at < now() - $1::interval
            AND (leased_until IS NULL OR leased_until <= now())",
        retry_for
    )
    .execute(conn)
    .await?
    .rows_affected())
}

/// Deletes up to `batch` finished deliveries whose last change is older than `before`.
pub async fn prune(conn: &mut PgConnection, before: DateTime<Utc>, batch: i64) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "DELETE FROM outbox_deliveries d USING (
             SELECT target_id, event_id FROM outbox_deliveries
              WHERE status <> 'pending' AND coalesce(last_attempt_at, queued_at) < $1 LIMIT $2) old
          WHERE d.target_id = old.target_id AND d.event_id = old.event_id",
        before,
        batch
    )
    .execute(conn)
    .await?
    .rows_affected())
}
