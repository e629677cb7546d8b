//! A2A push notification configurations: the outbox's targets of kind `a2a_push`
//! (`outbox_targets`), each set by the requester of an A2A task and named by an id of the
//! requester's choosing, unique on that task. The task is a delegation, whose configurations get
//! its `delegation.status` events (the fan-out finds them by request id), or a task a plain
//! message started at an agent Parley routed it to, whose configurations get its `a2a.task`
//! events: written here ([`routed_task_seen`]) whenever Parley sees the task in a state its
//! configurations were not told yet. The credentials are written here and read only by the
//! sender (`super::outbox::target`).

use sqlx::PgConnection;
use uuid::Uuid;

/// The A2A task a configuration follows: a delegation, or a task a plain message started at an
/// agent Parley routed it to (`a2a_routes`: its requester and the target's task id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushTask {
    /// A delegation, and its request id (its status events name it).
    Delegation { delegation_id: Uuid, request_id: Uuid },
    /// A routed task.
    Routed { requester: Uuid, task_id: String },
}

impl PushTask {
    /// The columns that name the task: (delegation, routed requester, routed task id).
    fn key(&self) -> (Option<Uuid>, Option<Uuid>, Option<&str>) {
        match self {
            PushTask::Delegation { delegation_id, .. } => (Some(*delegation_id), None, None),
            PushTask::Routed { requester, task_id } => (None, Some(*requester), Some(task_id.as_str())),
        }
    }
}

/// A configuration as its requester reads it (never its credentials).
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// The requester's id for it.
    pub config_id: String,
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
    /// The task it follows.
    pub task: &'a PushTask,
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

/// Locks the task until the transaction ends: a delegation's moves (and so its status events),
/// or a routed task's new states, wait, so a configuration set meanwhile misses none. False when
/// there is no such task.
pub async fn lock_task(conn: &mut PgConnection, task: &PushTask) -> sqlx::Result<bool> {
    let found = match task {
        PushTask::Delegation { delegation_id, .. } => {
            sqlx::query_scalar!("SELECT 1 AS one FROM delegations WHERE delegation_id = $1 FOR UPDATE", delegation_id)
                .fetch_optional(conn)
                .await?
        }
        PushTask::Routed { requester, task_id } => {
            sqlx::query_scalar!(
                "SELECT 1 AS one FROM a2a_routes WHERE requester_agent_id = $1 AND task_id = $2 FOR UPDATE",
                requester,
                task_id
            )
            .fetch_optional(conn)
            .await?
        }
    };
    Ok(found.is_some())
}

/// Sets a configuration: a new one, or the one of the same id on the task replaced (enabled
/// again). Returns its target id.
pub async fn set(conn: &mut PgConnection, c: &NewPushConfig<'_>) -> sqlx::Result<Uuid> {
    match c.task {
        PushTask::Delegation { delegation_id, request_id } => {
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
                delegation_id,
                request_id,
                c.config_id,
                c.a2a_version,
                c.token,
                c.auth_scheme,
                c.auth_credentials
            )
            .fetch_one(conn)
            .await
        }
        PushTask::Routed { requester, task_id } => {
            sqlx::query_scalar!(
                "INSERT INTO outbox_targets (target_id, kind, url, route_requester_id, route_task_id, config_id,
                                             a2a_version, push_token, auth_scheme, auth_credentials)
                 VALUES ($1, 'a2a_push', $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (route_requester_id, route_task_id, config_id) DO UPDATE
                    SET url = EXCLUDED.url, a2a_version = EXCLUDED.a2a_version, push_token = EXCLUDED.push_token,
                        auth_scheme = EXCLUDED.auth_scheme, auth_credentials = EXCLUDED.auth_credentials,
                        status = 'enabled', disabled_reason = NULL, disabled_at = NULL, failing_since = NULL,
                        updated_at = now()
                 RETURNING target_id",
                Uuid::new_v4(),
                c.url,
                requester,
                task_id,
                c.config_id,
                c.a2a_version,
                c.token,
                c.auth_scheme,
                c.auth_credentials
            )
            .fetch_one(conn)
            .await
        }
    }
}

/// How many configurations the task has.
pub async fn count(conn: &mut PgConnection, task: &PushTask) -> sqlx::Result<i64> {
    let (delegation, requester, task_id) = task.key();
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM outbox_targets
            WHERE kind = 'a2a_push'
              AND (delegation_id = $1 OR (route_requester_id = $2 AND route_task_id = $3))"#,
        delegation,
        requester,
        task_id
    )
    .fetch_one(conn)
    .await
}

/// The task's configuration `config_id`.
pub async fn get(conn: &mut PgConnection, task: &PushTask, config_id: &str) -> sqlx::Result<Option<PushConfig>> {
    let (delegation, requester, task_id) = task.key();
    sqlx::query_as!(
        PushConfig,
        r#"SELECT config_id AS "config_id!", url, push_token AS token, auth_scheme
             FROM outbox_targets
            WHERE kind = 'a2a_push' AND config_id = $4
              AND (delegation_id = $1 OR (route_requester_id = $2 AND route_task_id = $3))"#,
        delegation,
        requester,
        task_id,
        config_id
    )
    .fetch_optional(conn)
    .await
}

/// The task's configurations, oldest first.
pub async fn list(conn: &mut PgConnection, task: &PushTask) -> sqlx::Result<Vec<PushConfig>> {
    let (delegation, requester, task_id) = task.key();
    sqlx::query_as!(
        PushConfig,
        r#"SELECT config_id AS "config_id!", url, push_token AS token, auth_scheme
             FROM outbox_targets
            WHERE kind = 'a2a_push'
              AND (delegation_id = $1 OR (route_requester_id = $2 AND route_task_id = $3))
            ORDER BY created_at, config_id"#,
        delegation,
        requester,
        task_id
    )
    .fetch_all(conn)
    .await
}

/// Deletes the task's configuration `config_id` (and what it had still to send); false when
/// there is none.
pub async fn delete(conn: &mut PgConnection, task: &PushTask, config_id: &str) -> sqlx::Result<bool> {
    let (delegation, requester, task_id) = task.key();
    Ok(sqlx::query!(
        "DELETE FROM outbox_targets
          WHERE kind = 'a2a_push' AND config_id = $4
            AND (delegation_id = $1 OR (route_requester_id = $2 AND route_task_id = $3))",
        delegation,
        requester,
        task_id,
        config_id
    )
    .execute(conn)
    .await?
    .rows_affected()
        > 0)
}

/// A routed task seen in a new state: what its `a2a.task` event tells.
#[derive(Debug, Clone)]
pub struct RoutedState<'a> {
    /// The requester.
    pub requester: Uuid,
    /// The target's task id.
    pub task_id: &'a str,
    /// Its context, when the target named one.
    pub context_id: Option<&'a str>,
    /// The state, as A2A 1.0 names it (`TASK_STATE_WORKING`, ...).
    pub state: &'a str,
    /// The route as the requester sees it (`{agentAnonymousId, skillId}`).
    pub route: serde_json::Value,
}

/// Records that a routed task is in `seen.state`: when the task has push configurations and
/// they were not told this state yet, an `a2a.task` event to the requester's person (which the
/// outbox delivers to the configurations) in the same statement. Returns whether one was
/// written.
pub async fn routed_task_seen(conn: &mut PgConnection, seen: &RoutedState<'_>) -> sqlx::Result<bool> {
    Ok(sqlx::query!(
        r#"WITH told AS (
               UPDATE a2a_routes r SET pushed_state = $3
                WHERE r.requester_agent_id = $1 AND r.task_id = $2 AND r.pushed_state IS DISTINCT FROM $3
                  AND EXISTS (SELECT 1 FROM outbox_targets t
                               WHERE t.route_requester_id = r.requester_agent_id AND t.route_task_id = r.task_id
                                 AND t.kind = 'a2a_push' AND t.status = 'enabled')
               RETURNING r.context_id)
           INSERT INTO events (kind, opportunity_id, source_user_id, candidate_user_id, data)
           SELECT 'a2a.task', NULL, a.owner_user_id, a.owner_user_id,
                  jsonb_build_object('requesterAgentId', $1::uuid, 'taskId', $2::text,
                                     'contextId', coalesce($4::text, told.context_id, ''), 'state', $3::text,
                                     'route', $5::jsonb)
             FROM told JOIN agents a ON a.agent_id = $1"#,
        seen.requester,
        seen.task_id,
        seen.state,
        seen.context_id,
        seen.route
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
