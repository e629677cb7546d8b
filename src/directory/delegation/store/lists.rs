//! The delegation listings' SQL: a target's inbox (the attempts waiting for it, read with its
//! key's check in one statement) and the two directions of an agent's delegations (the attempts
//! addressed to it, the delegations it asked for), newest first.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Delegation, Status};
use crate::store::turn_delivery::{KeyAuth, KeyCheck};

/// One waiting request as its target sees it.
#[derive(Debug, Clone)]
pub struct InboxItem {
    /// The delegation's request id.
    pub request_id: Uuid,
    /// The attempt's number.
    pub attempt: i32,
    /// The attempt's id as an A2A task.
    pub task_id: Uuid,
    /// The requester's anonymous id.
    pub requester_anonymous_id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// The work.
    pub input: Value,
    /// The delegation's timeout.
    pub timeout_ms: i64,
    /// The attempt's status.
    pub status: Status,
    /// The attempt's output, once completed.
    pub output: Option<Value>,
    /// Why it ended, when it did not complete.
    pub reason: Option<String>,
    /// Offered.
    pub created_at: DateTime<Utc>,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// The delegation (the listing's cursor).
    pub delegation_id: Uuid,
}

/// The waiting attempts addressed to the agent of the key whose hash is `key_hash` (which must
/// be `agent`'s when given), oldest first, at most `limit`, and how many there are; the key's
/// verdict first, in the same statement.
pub async fn inbox_for_key(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<(KeyCheck, Vec<InboxItem>, i64)> {
    let rows = sqlx::query!(
        r#"SELECT k.auth AS "auth!: KeyAuth", k.agent_id AS key_agent_id, k.owner_user_id AS key_owner_user_id,
                  i.request_id AS "request_id?", i.attempt AS "attempt?", i.task_id AS "task_id?",
                  i.requester_anonymous_id AS "requester_anonymous_id?", i.task_type AS "task_type?",
                  i.custom_type, i.input AS "input?", i.timeout_ms AS "timeout_ms?", i.status AS "status?: Status",
                  i.output, i.reason, i.created_at AS "created_at?", i.deadline AS "deadline?",
                  i.delegation_id AS "delegation_id?"
           FROM parley_agent_of_key($1, $2) k
           LEFT JOIN LATERAL (
               SELECT d.request_id, a.attempt, a.task_id, a.requester_anonymous_id, d.task_type, d.custom_type,
                      d.input, d.timeout_ms, a.status, a.output, a.reason, a.created_at, a.deadline, d.delegation_id
                 FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
                WHERE k.auth = 'ok' AND a.target_agent_id = k.agent_id AND a.status = 'request'
                ORDER BY a.created_at, a.delegation_id LIMIT $3) i ON true
           ORDER BY i.created_at, i.delegation_id"#,
        key_hash,
        agent,
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let key = match rows.first() {
        Some(r) => KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id.clone())?,
        None => KeyCheck::UnknownKey,
    };
    let items: Vec<InboxItem> = rows
        .into_iter()
        .filter_map(|r| {
            Some(InboxItem {
                request_id: r.request_id?,
                attempt: r.attempt?,
                task_id: r.task_id?,
                requester_anonymous_id: r.requester_anonymous_id?,
                task_type: r.task_type?,
                custom_type: r.custom_type,
                input: r.input?,
                timeout_ms: r.timeout_ms?,
                status: r.status?,
                output: r.output,
                reason: r.reason,
                created_at: r.created_at?,
                deadline: r.deadline?,
                delegation_id: r.delegation_id?,
            })
        })
        .collect();
    // A page short of the limit holds every waiting attempt: only a full one needs counting.
    let total =
        match (&key, items.len() as i64) {
            (KeyCheck::Ok { agent_id, .. }, n) if n >= limit => sqlx::query_scalar!(
                r#"SELECT count(*) AS "n!" FROM delegation_attempts WHERE target_agent_id = $1 AND status = 'request'"#,
                agent_id
            )
            .fetch_one(conn)
            .await?,
            (_, n) => n,
        };
    Ok((key, items, total))
}

/// Attempts addressed to `target`, newest first, optionally of one status, older than `before`.
pub async fn inbound(
    conn: &mut PgConnection,
    target: Uuid,
    status: Option<Status>,
    before: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<InboxItem>> {
    sqlx::query_as!(
        InboxItem,
        r#"SELECT d.request_id, a.attempt, a.task_id, a.requester_anonymous_id, d.task_type, d.custom_type, d.input,
                  d.timeout_ms, a.status AS "status: Status", a.output, a.reason, a.created_at, a.deadline,
                  d.delegation_id
           FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
           WHERE a.target_agent_id = $1 AND ($2::text IS NULL OR a.status = $2)
             AND ($3::uuid IS NULL OR d.delegation_id < $3)
           ORDER BY d.delegation_id DESC, a.attempt DESC LIMIT $4"#,
        target,
        status.map(Status::as_str),
        before,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The requester's delegations, newest first, optionally of one status, older than `before`.
pub async fn outbound(
    conn: &mut PgConnection,
    requester: Uuid,
    status: Option<Status>,
    before: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<Delegation>> {
    delegations_where!(
        r#"WHERE requester_agent_id = $1 AND ($2::text IS NULL OR status = $2)
         AND ($3::uuid IS NULL OR delegation_id < $3)
         ORDER BY delegation_id DESC LIMIT $4"#,
        requester,
        status.map(Status::as_str),
        before,
        limit
    )
    .fetch_all(conn)
    .await
}
