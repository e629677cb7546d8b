//! A2A push notification configurations: the outbox's targets of kind `a2a_push`
//! (`outbox_targets`), each set by the requester of a delegation (its A2A task) and named by an
//! id of the requester's choosing, unique on that task. Each gets the delegation's
//! `delegation.status` events (the fan-out finds them by request id). The credentials are
//! written here and read only by the sender (`super::outbox::target`).

use sqlx::PgConnection;
use uuid::Uuid;

/// A configuration as its requester reads it (never its credentials).
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// The requester's id for it.
    pub config_id: String,
    /// The delegation (the A2A task).
    pub delegation_id: Uuid,
    /// Where notifications are POSTed.
    pub url: String,
    /// The token sent with each.
    pub token: Option<String>,
    /// The authentication scheme presented.
    pub auth_scheme: Option<String>,
}

/// What a requester sets.
#[derive(Debug, Clone)]
pub struct NewPushConfig<'a> {
    /// The delegation.
    pub delegation_id: Uuid,
    /// Its request id (the events name it).
    pub request_id: Uuid,
    /// The requester's id for the configuration.
    pub config_id: &'a str,
    /// `1.0` or `0.3`.
    pub a2a_version: &'a str,
    /// Where to POST.
    pub url: &'a str,
    /// The token to send.
    pub token: Option<&'a str>,
    /// The `Authorization` scheme.
    pub auth_scheme: Option<&'a str>,
    /// Its credentials.
    pub auth_credentials: Option<&'a str>,
}

/// Locks the delegation `delegation_id` until the transaction ends: its moves (and so its status
/// events) wait, so a configuration set meanwhile misses none.
pub async fn lock_delegation(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!("SELECT 1 AS one FROM delegations WHERE delegation_id = $1 FOR UPDATE", delegation_id)
        .fetch_optional(conn)
        .await?
        .is_some())
}

/// Sets a configuration: a new one, or the one of the same id on the task replaced (enabled
/// again). Returns its target id.
pub async fn set(conn: &mut PgConnection, c: &NewPushConfig<'_>) -> sqlx::Result<Uuid> {
    sqlx::query_scalar!(
        "INSERT INTO outbox_targets (target_id, kind, url, delegation_id, request_id, config_id, a2a_version,
                                     push_token, auth_scheme, auth_credentials)
         VALUES ($1, 'a2a_push', $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (delegation_id, config_id) DO UPDATE
            SET url = EXCLUDED.url, a2a_version = EXCLUDED.a2a_version, push_token = EXCLUDED.push_token,
                auth_scheme = EXCLUDED.auth_scheme, auth_credentials = EXCLUDED.auth_credentials,
                status = 'enabled', disabled_reason = NULL, disabled_at = NULL, failing_since = NULL,
                updated_at = now()
         RETURNING target_id",
        Uuid::new_v4(),
        c.url,
        c.delegation_id,
        c.request_id,
        c.config_id,
        c.a2a_version,
        c.token,
        c.auth_scheme,
        c.auth_credentials
    )
    .fetch_one(conn)
    .await
}

/// How many configurations the task has.
pub async fn count(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM outbox_targets WHERE kind = 'a2a_push' AND delegation_id = $1"#,
        delegation_id
    )
    .fetch_one(conn)
    .await
}

/// The task's configuration `config_id`.
pub async fn get(conn: &mut PgConnection, delegation_id: Uuid, config_id: &str) -> sqlx::Result<Option<PushConfig>> {
    sqlx::query_as!(
        PushConfig,
        r#"SELECT config_id AS "config_id!", delegation_id AS "delegation_id!", url, push_token AS token, auth_scheme
             FROM outbox_targets
            WHERE kind = 'a2a_push' AND delegation_id = $1 AND config_id = $2"#,
        delegation_id,
        config_id
    )
    .fetch_optional(conn)
    .await
}

/// The task's configurations, oldest first.
pub async fn list(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Vec<PushConfig>> {
    sqlx::query_as!(
        PushConfig,
        r#"SELECT config_id AS "config_id!", delegation_id AS "delegation_id!", url, push_token AS token, auth_scheme
             FROM outbox_targets
            WHERE kind = 'a2a_push' AND delegation_id = $1
            ORDER BY created_at, config_id"#,
        delegation_id
    )
    .fetch_all(conn)
    .await
}

/// Deletes the task's configuration `config_id` (and what it had still to send); false when
/// there is none.
pub async fn delete(conn: &mut PgConnection, delegation_id: Uuid, config_id: &str) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        "DELETE FROM outbox_targets WHERE kind = 'a2a_push' AND delegation_id = $1 AND config_id = $2",
        delegation_id,
        config_id
    )
    .execute(conn)
    .await?
    .rows_affected()
        > 0)
}

/// Makes deliveries to `target_id` of the request's status events written after the event
/// `after` (by the requester's owner `owner`), but the first (the submission a send answers
/// with): for a configuration set with the send, whose delegation may have moved before it was
/// stored. Returns how many were made.
pub async fn catch_up(
    conn: &mut PgConnection,
    target_id: Uuid,
    owner: &str,
    request_id: Uuid,
    after: i64,
) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        "INSERT INTO outbox_deliveries (target_id, event_id)
         SELECT $1, e.event_id FROM events e
          WHERE e.source_user_id = $2 AND e.event_id > $4 AND e.kind = 'delegation.status'
            AND e.data->>'requestId' = $3::uuid::text
            AND NOT (e.data->>'status' = 'request' AND e.data->>'attempt' = '1')
         ON CONFLICT (target_id, event_id) DO NOTHING",
        target_id,
        owner,
        request_id,
        after
    )
    .execute(conn)
    .await?
    .rows_affected())
}
