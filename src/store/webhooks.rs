//! Webhook endpoints: the outbox's targets of kind `webhook` (`outbox_targets`), registered by
//! the platform (no owner: every event) or by a person (the events that person may see).
//!
//! Every read and write names the owner it acts for (`None` for the platform), so a caller
//! never reaches another's endpoint: it is simply not found. The signing secrets are read only
//! by the sender (`super::outbox::target`) and returned once, when made.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// The advisory lock class under which one owner's registrations are counted.
const OWNER_LOCK: i32 = 0x0b0d;

/// An endpoint as its owner reads it (never its secrets).
#[derive(Debug, Clone)]
pub struct Webhook {
    /// Its id.
    pub id: Uuid,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The event kinds it gets.
    pub event_types: Vec<String>,
    /// `enabled` or `disabled`.
    pub status: String,
    /// Why it is disabled.
    pub disabled_reason: Option<String>,
    /// Since when.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Its deliveries have failed since then.
    pub failing_since: Option<DateTime<Utc>>,
    /// Until when the secret before the last rotation signs beside the current one.
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// The last attempt to deliver to it.
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// Whether it succeeded.
    pub last_attempt_ok: Option<bool>,
    /// Its HTTP status.
    pub last_status_code: Option<i32>,
    /// Its error.
    pub last_error: Option<String>,
    /// The event it delivered.
    pub last_event_id: Option<i64>,
    /// That event's kind.
    pub last_event_kind: Option<String>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
}

/// Takes the lock under which `owner`'s endpoints are counted and registered, until the
/// transaction ends.
pub async fn lock_owner(conn: &mut PgConnection, owner: Option<&str>) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1, hashtext($2::text))", OWNER_LOCK, owner.unwrap_or(""))
        .execute(conn)
        .await?;
    Ok(())
}

/// How many endpoints `owner` has.
pub async fn count(conn: &mut PgConnection, owner: Option<&str>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM outbox_targets
            WHERE kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $1"#,
        owner
    )
    .fetch_one(conn)
    .await
}

/// Registers an endpoint for `owner`.
pub async fn create(
    conn: &mut PgConnection,
    id: Uuid,
    owner: Option<&str>,
    url: &str,
    event_types: &[String],
    secret: &str,
) -> sqlx::Result<Webhook> {
    sqlx::query!(
        "INSERT INTO outbox_targets (target_id, kind, url, owner_user_id, event_types, secret)
         VALUES ($1, 'webhook', $2, $3, $4, $5)",
        id,
        url,
        owner,
        event_types,
        secret
    )
    .execute(&mut *conn)
    .await?;
    get(conn, id, owner).await?.ok_or(sqlx::Error::RowNotFound)
}

/// `owner`'s endpoints, oldest first.
pub async fn list(conn: &mut PgConnection, owner: Option<&str>) -> sqlx::Result<Vec<Webhook>> {
    sqlx::query_as!(
        Webhook,
        r#"SELECT target_id AS id, url, event_types AS "event_types!", status, disabled_reason, disabled_at,
                  failing_since, previous_secret_until, last_attempt_at, last_attempt_ok, last_status_code,
                  last_error, last_event_id, last_event_kind, created_at, updated_at
             FROM outbox_targets
            WHERE kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $1
            ORDER BY created_at, target_id"#,
        owner
    )
    .fetch_all(conn)
    .await
}

/// `owner`'s endpoint `id`.
pub async fn get(conn: &mut PgConnection, id: Uuid, owner: Option<&str>) -> sqlx::Result<Option<Webhook>> {
    sqlx::query_as!(
        Webhook,
        r#"SELECT target_id AS id, url, event_types AS "event_types!", status, disabled_reason, disabled_at,
                  failing_since, previous_secret_until, last_attempt_at, last_attempt_ok, last_status_code,
                  last_error, last_event_id, last_event_kind, created_at, updated_at
             FROM outbox_targets
            WHERE target_id = $1 AND kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $2"#,
        id,
        owner
    )
    .fetch_optional(conn)
    .await
}

/// What a change sets (`None`: left as it is).
#[derive(Debug, Clone, Default)]
pub struct Change<'a> {
    /// A new URL.
    pub url: Option<&'a str>,
    /// New event kinds.
    pub event_types: Option<&'a [String]>,
    /// Enabled (its failures forgotten) or disabled by its owner.
    pub enabled: Option<bool>,
}

/// Changes `owner`'s endpoint `id`; `None` when there is no such endpoint. Enabling clears the
/// reason it was disabled and its failures; disabling records that its owner did it.
pub async fn update(
    conn: &mut PgConnection,
    id: Uuid,
    owner: Option<&str>,
    change: &Change<'_>,
) -> sqlx::Result<Option<Webhook>> {
    let updated = sqlx::query!(
        "UPDATE outbox_targets
            SET url = coalesce($3, url),
                event_types = coalesce($4, event_types),
                status = CASE WHEN $5::boolean THEN 'enabled' WHEN NOT $5::boolean THEN 'disabled' ELSE status END,
                disabled_reason = CASE WHEN $5::boolean THEN NULL
                                       WHEN NOT $5::boolean AND status = 'enabled' THEN 'disabled by its owner'
                                       ELSE disabled_reason END,
                disabled_at = CASE WHEN $5::boolean THEN NULL
                                   WHEN NOT $5::boolean AND status = 'enabled' THEN now()
                                   ELSE disabled_at END,
                failing_since = CASE WHEN $5::boolean THEN NULL ELSE failing_since END,
                updated_at = now()
          WHERE target_id = $1 AND kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $2",
        id,
        owner,
        change.url,
        change.event_types,
        change.enabled
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if updated == 0 {
        return Ok(None);
    }
    get(conn, id, owner).await
}

/// Deletes `owner`'s endpoint `id` and its delivery log; false when there is none.
pub async fn delete(conn: &mut PgConnection, id: Uuid, owner: Option<&str>) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "DELETE FROM outbox_targets WHERE target_id = $1 AND kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $2",
        id,
        owner
    )
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Replaces the secret of `owner`'s endpoint `id` with `secret`; the one it had signs beside it
/// until `overlap` from now. `None` when there is no such endpoint.
pub async fn rotate(
    conn: &mut PgConnection,
    id: Uuid,
    owner: Option<&str>,
    secret: &str,
    overlap: std::time::Duration,
) -> anyhow::Result<Option<DateTime<Utc>>> {
    let overlap = super::interval(overlap)?;
    Ok(sqlx::query_scalar!(
        r#"UPDATE outbox_targets
              SET previous_secret = secret, previous_secret_until = now() + $4::interval, secret = $3,
                  updated_at = now()
            WHERE target_id = $1 AND kind = 'webhook' AND owner_user_id IS NOT DISTINCT FROM $2
            RETURNING previous_secret_until AS "until!""#,
        id,
        owner,
        secret,
        overlap
    )
    .fetch_optional(conn)
    .await?)
}
