//! The SQL of delegation: delegations, their attempts, the target's inbox and the trust counters
//! an attempt's end writes. Every function takes the caller's connection and never commits; state
//! moves come from [`super::state`]'s table and are written only from the state that was read.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::state::Status;

/// A delegation as stored.
#[derive(Debug, Clone)]
pub struct Delegation {
    /// Its id (a UUIDv7: listings page by it).
    pub delegation_id: Uuid,
    /// The requester's id for it.
    pub request_id: Uuid,
    /// The agent that asked.
    pub requester_agent_id: Uuid,
    /// The kind of work.
    pub task_type: String,
    /// Set for `custom`.
    pub custom_type: Option<String>,
    /// The work.
    pub input: Value,
    /// The target the requester named, if any.
    pub requested_target: Option<Uuid>,
    /// How long each attempt may take, from its start.
    pub timeout_ms: i64,
    /// Whether a failed attempt is followed by another target's.
    pub fallback_enabled: bool,
    /// Most attempts after the first.
    pub max_retries: i32,
    /// Attempts made after the first.
    pub retries_used: i32,
    /// Its last attempt's status (a [`Status`] name).
    pub status: String,
    /// The completed attempt's output.
    pub output: Option<Value>,
    /// Asked.
    pub created_at: DateTime<Utc>,
    /// Ended, once terminal.
    pub ended_at: Option<DateTime<Utc>>,
}

impl Delegation {
    /// The status, parsed.
    pub fn status(&self) -> Status {
        Status::parse(&self.status).unwrap_or(Status::Error)
    }

    /// The number of the live (or last) attempt.
    pub fn current_attempt(&self) -> i32 {
        self.retries_used + 1
    }
}

/// One attempt, as stored.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Its delegation.
    pub delegation_id: Uuid,
    /// 1-based.
    pub attempt: i32,
    /// Its id as an A2A task (`GET /api/tasks/{id}`), issued when it is made.
    pub task_id: Uuid,
    /// The agent it is addressed to.
    pub target_agent_id: Uuid,
    /// The name the requester sees the target under.
    pub target_anonymous_id: Uuid,
    /// The name the target sees the requester under.
    pub requester_anonymous_id: Uuid,
    /// The target's capability.
    pub capability_id: Uuid,
    /// What its output is checked against.
    pub output_schema: Value,
    /// A [`Status`] name.
    pub status: String,
    /// The output, when completed.
    pub output: Option<Value>,
    /// Why it ended, when it did not complete.
    pub reason: Option<String>,
    /// Offered.
    pub created_at: DateTime<Utc>,
    /// Not accepted by then: timeout.
    pub accept_deadline: DateTime<Utc>,
    /// Not finished by then: timeout.
    pub deadline: DateTime<Utc>,
    /// Taken.
    pub accepted_at: Option<DateTime<Utc>>,
    /// Ended.
    pub ended_at: Option<DateTime<Utc>>,
}

impl Attempt {
    /// The status, parsed.
    pub fn status(&self) -> Status {
        Status::parse(&self.status).unwrap_or(Status::Error)
    }

    /// When the attempt times out from where it stands.
    pub fn due_at(&self) -> DateTime<Utc> {
        match self.status() {
            Status::Request => self.accept_deadline.min(self.deadline),
            _ => self.deadline,
        }
    }
}

/// A new delegation (its first attempt is inserted beside it).
pub async fn insert(conn: &mut PgConnection, d: &Delegation) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO delegations (delegation_id, request_id, requester_agent_id, task_type, custom_type, input,
                                    requested_target, timeout_ms, fallback_enabled, max_retries, retries_used, status,
                                    created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, 'request', $11, $11)"#,
        d.delegation_id,
        d.request_id,
        d.requester_agent_id,
        d.task_type,
        d.custom_type,
        d.input,
        d.requested_target,
        d.timeout_ms,
        d.fallback_enabled,
        d.max_retries,
        d.created_at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The newest delegation of `request_id` whose requester is one of `requesters` (any
/// requester when `None`).
pub async fn find_visible(
    conn: &mut PgConnection,
    request_id: Uuid,
    requesters: Option<&[Uuid]>,
) -> sqlx::Result<Option<Delegation>> {
    sqlx::query_as!(
        Delegation,
        r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                  timeout_ms, fallback_enabled, max_retries, retries_used, status, output, created_at, ended_at
           FROM delegations
           WHERE request_id = $1 AND ($2::uuid[] IS NULL OR requester_agent_id = ANY($2))
           ORDER BY delegation_id DESC LIMIT 1"#,
        request_id,
        requesters
    )
    .fetch_optional(conn)
    .await
}

/// Locks a delegation for a state change: every change of it and its attempts holds this lock.
pub async fn lock(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    sqlx::query_as!(
        Delegation,
        r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                  timeout_ms, fallback_enabled, max_retries, retries_used, status, output, created_at, ended_at
           FROM delegations WHERE delegation_id = $1 FOR UPDATE"#,
        delegation_id
    )
    .fetch_optional(conn)
    .await
}

/// Reads a delegation.
pub async fn get(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    sqlx::query_as!(
        Delegation,
        r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                  timeout_ms, fallback_enabled, max_retries, retries_used, status, output, created_at, ended_at
           FROM delegations WHERE delegation_id = $1"#,
        delegation_id
    )
    .fetch_optional(conn)
    .await
}

/// A delegation and its attempts, first first, in one read.
pub async fn record(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<(Delegation, Vec<Attempt>)>> {
    // One row per attempt (a delegation is made with its first), the delegation's columns on each.
    let rows = sqlx::query!(
        r#"SELECT d.request_id, d.requester_agent_id, d.task_type, d.custom_type, d.input, d.requested_target,
                  d.timeout_ms, d.fallback_enabled, d.max_retries, d.retries_used, d.status, d.output,
                  d.created_at, d.ended_at,
                  a.attempt, a.task_id, a.target_agent_id, a.target_anonymous_id, a.requester_anonymous_id,
                  a.capability_id, a.output_schema, a.status AS a_status, a.output AS a_output, a.reason,
                  a.created_at AS a_created_at, a.accept_deadline, a.deadline, a.accepted_at,
                  a.ended_at AS a_ended_at
           FROM delegations d JOIN delegation_attempts a ON a.delegation_id = d.delegation_id
           WHERE d.delegation_id = $1 ORDER BY a.attempt"#,
        delegation_id
    )
    .fetch_all(conn)
    .await?;
    let Some(first) = rows.first() else { return Ok(None) };
    let delegation = Delegation {
        delegation_id,
        request_id: first.request_id,
        requester_agent_id: first.requester_agent_id,
        task_type: first.task_type.clone(),
        custom_type: first.custom_type.clone(),
        input: first.input.clone(),
        requested_target: first.requested_target,
        timeout_ms: first.timeout_ms,
        fallback_enabled: first.fallback_enabled,
        max_retries: first.max_retries,
        retries_used: first.retries_used,
        status: first.status.clone(),
        output: first.output.clone(),
        created_at: first.created_at,
        ended_at: first.ended_at,
    };
    let attempts = rows
        .into_iter()
        .map(|r| Attempt {
            delegation_id,
            attempt: r.attempt,
            task_id: r.task_id,
            target_agent_id: r.target_agent_id,
            target_anonymous_id: r.target_anonymous_id,
            requester_anonymous_id: r.requester_anonymous_id,
            capability_id: r.capability_id,
            output_schema: r.output_schema,
            status: r.a_status,
            output: r.a_output,
            reason: r.reason,
            created_at: r.a_created_at,
            accept_deadline: r.accept_deadline,
            deadline: r.deadline,
            accepted_at: r.accepted_at,
            ended_at: r.a_ended_at,
        })
        .collect();
    Ok(Some((delegation, attempts)))
}

/// One attempt of a delegation.
pub async fn attempt(conn: &mut PgConnection, delegation_id: Uuid, attempt: i32) -> sqlx::Result<Option<Attempt>> {
    sqlx::query_as!(
        Attempt,
        r#"SELECT delegation_id, attempt, task_id, target_agent_id, target_anonymous_id, requester_anonymous_id,
                  capability_id, output_schema, status, output, reason, created_at, accept_deadline, deadline,
                  accepted_at, ended_at
           FROM delegation_attempts WHERE delegation_id = $1 AND attempt = $2"#,
        delegation_id,
        attempt
    )
    .fetch_optional(conn)
    .await
}

/// What a delegation needs to know of a target agent for one kind of work.
#[derive(Debug, Clone)]
pub struct TargetOffer {
    /// Whether the agent is active.
    pub active: bool,
    /// Its capability for the kind of work, if it has one.
    pub capability_id: Option<Uuid>,
    /// What the capability's input must match.
    pub input_schema: Option<Value>,
    /// What the capability's output must match.
    pub output_schema: Option<Value>,
    /// Whether the capability is enabled.
    pub enabled: bool,
    /// Whether it takes delegations.
    pub accept_delegations: bool,
}

/// The agent's status and its capability of `task_type`/`custom_type`, in one read; `None` for
/// an unknown agent.
pub async fn target_offer(
    conn: &mut PgConnection,
    agent_id: Uuid,
    task_type: &str,
    custom_type: Option<&str>,
) -> sqlx::Result<Option<TargetOffer>> {
    sqlx::query_as!(
        TargetOffer,
        r#"SELECT a.status = 'active' AS "active!", c.capability_id AS "capability_id?",
                  c.input_schema AS "input_schema?", c.output_schema AS "output_schema?",
                  coalesce(c.enabled, false) AS "enabled!",
                  coalesce(c.accept_delegations, false) AS "accept_delegations!"
           FROM agents a
           LEFT JOIN capabilities c
             ON c.agent_id = a.agent_id AND c.task_type = $2 AND c.custom_type IS NOT DISTINCT FROM $3
           WHERE a.agent_id = $1"#,
        agent_id,
        task_type,
        custom_type
    )
    .fetch_optional(conn)
    .await
}

/// Locks the delegation of `request_id` whose attempt addressed to `target` is the newest (see
/// [`lock`]), in one statement.
pub async fn lock_addressed(conn: &mut PgConnection, target: Uuid, request_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    sqlx::query_as!(
        Delegation,
        // The delegations of this request id first (an init plan over their index), then their
        // attempts by primary key: left to itself, the planner's generic plan walked every
        // attempt ever addressed to the target.
        r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                  timeout_ms, fallback_enabled, max_retries, retries_used, status, output, created_at, ended_at
           FROM delegations
           WHERE delegation_id = (
               SELECT a.delegation_id FROM delegation_attempts a
                WHERE a.delegation_id = ANY(ARRAY(SELECT d.delegation_id FROM delegations d WHERE d.request_id = $1))
                  AND a.target_agent_id = $2
                ORDER BY a.created_at DESC, a.attempt DESC LIMIT 1)
           FOR UPDATE"#,
        request_id,
        target
    )
    .fetch_optional(conn)
    .await
}

/// What a new delegation checks first, in one read (under the requester's lock): whether this
/// request id made a delegation already, and the requester's outbound window.
pub struct OutboundWindow {
    /// The delegation this request id already made (a retried request; read in full apart).
    pub existing: Option<Uuid>,
    /// The requester's outbound limit (the smallest over its capabilities; the default without any).
    pub limit: i32,
    /// Its delegations of the last 60 s.
    pub sent: i64,
    /// When the oldest of those leaves the window.
    pub frees_at: Option<DateTime<Utc>>,
}

/// The requester's delegation of `request_id`, if any, and its outbound window ([`OutboundWindow`]).
pub async fn outbound_window(conn: &mut PgConnection, requester: Uuid, request_id: Uuid, default: i32) -> sqlx::Result<OutboundWindow> {
    let r = sqlx::query!(
        r#"SELECT (SELECT delegation_id FROM delegations WHERE requester_agent_id = $1 AND request_id = $2) AS existing,
                  (SELECT min(outbound_rate_limit) FROM capabilities WHERE agent_id = $1) AS "limit",
                  count(*) AS "sent!", min(created_at) + interval '60 seconds' AS frees_at
           FROM delegations WHERE requester_agent_id = $1 AND created_at > now() - interval '60 seconds'"#,
        requester,
        request_id
    )
    .fetch_one(conn)
    .await?;
    Ok(OutboundWindow { existing: r.existing, limit: r.limit.unwrap_or(default), sent: r.sent, frees_at: r.frees_at })
}

/// Whether `target` already received as many attempts in the last 60 s as its capability's
/// inbound limit allows.
pub async fn inbound_full(conn: &mut PgConnection, target: Uuid, capability_id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT (SELECT count(*) FROM delegation_attempts
                    WHERE target_agent_id = $1 AND created_at > now() - interval '60 seconds'
                      AND reason IS DISTINCT FROM 'rate_limited')
                  >= coalesce((SELECT inbound_rate_limit FROM capabilities WHERE capability_id = $2), 0) AS "full!""#,
        target,
        capability_id
    )
    .fetch_one(conn)
    .await
}

/// Records how many attempts after the first a delegation made (it stays `request`).
pub async fn set_retries(conn: &mut PgConnection, delegation_id: Uuid, retries_used: i32) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE delegations SET retries_used = $2, updated_at = now() WHERE delegation_id = $1 AND status = 'request'",
        delegation_id,
        retries_used
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A new attempt, in `request`.
pub async fn insert_attempt(conn: &mut PgConnection, a: &Attempt) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO delegation_attempts (delegation_id, attempt, target_agent_id, target_anonymous_id,
                                            requester_anonymous_id, capability_id, output_schema, status, created_at,
                                            accept_deadline, deadline, task_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'request', $8, $9, $10, $11)"#,
        a.delegation_id,
        a.attempt,
        a.target_agent_id,
        a.target_anonymous_id,
        a.requester_anonymous_id,
        a.capability_id,
        a.output_schema,
        a.created_at,
        a.accept_deadline,
        a.deadline,
        a.task_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Every attempt of a delegation, first first.
pub async fn attempts(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Vec<Attempt>> {
    sqlx::query_as!(
        Attempt,
        r#"SELECT delegation_id, attempt, task_id, target_agent_id, target_anonymous_id, requester_anonymous_id,
                  capability_id, output_schema, status, output, reason, created_at, accept_deadline, deadline,
                  accepted_at, ended_at
           FROM delegation_attempts WHERE delegation_id = $1 ORDER BY attempt"#,
        delegation_id
    )
    .fetch_all(conn)
    .await
}

/// The attempt whose A2A task id is `task_id`, with its delegation and the owners of its
/// requester and of its target (who, besides the two agents, may read it).
pub async fn attempt_task(conn: &mut PgConnection, task_id: Uuid) -> sqlx::Result<Option<AttemptTask>> {
    let Some(attempt) = sqlx::query_as!(
        Attempt,
        r#"SELECT delegation_id, attempt, task_id, target_agent_id, target_anonymous_id, requester_anonymous_id,
                  capability_id, output_schema, status, output, reason, created_at, accept_deadline, deadline,
                  accepted_at, ended_at
           FROM delegation_attempts WHERE task_id = $1"#,
        task_id
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let Some(delegation) = get(&mut *conn, attempt.delegation_id).await? else { return Ok(None) };
    let owners = sqlx::query!(
        r#"SELECT (SELECT owner_user_id FROM agents WHERE agent_id = $1) AS "requester_owner!",
                  (SELECT owner_user_id FROM agents WHERE agent_id = $2) AS "target_owner!""#,
        delegation.requester_agent_id,
        attempt.target_agent_id
    )
    .fetch_one(conn)
    .await?;
    Ok(Some(AttemptTask {
        attempt,
        delegation,
        requester_owner: owners.requester_owner,
        target_owner: owners.target_owner,
    }))
}

/// One attempt read as an A2A task: the attempt, its delegation, and both agents' owners.
#[derive(Debug, Clone)]
pub struct AttemptTask {
    /// The attempt.
    pub attempt: Attempt,
    /// Its delegation.
    pub delegation: Delegation,
    /// The user who owns the requesting agent.
    pub requester_owner: String,
    /// The user who owns the target agent.
    pub target_owner: String,
}

/// One move of an attempt, written by [`move_attempt`].
#[derive(Debug, Clone, Copy)]
pub struct AttemptMove<'a> {
    /// The attempt's number.
    pub attempt: i32,
    /// The status it was read in.
    pub from: Status,
    /// The status it moves to.
    pub to: Status,
    /// The output, when it completes.
    pub output: Option<&'a Value>,
    /// Why it ended, when it did not complete.
    pub reason: Option<&'a str>,
    /// The delegation's new retries used and status, when the move settles the delegation too.
    pub delegation: Option<(i32, Status)>,
}

/// Moves an attempt of `d` (see [`AttemptMove`]) in one statement: the attempt; when it ends,
/// its count for or against its target on today's row (completed or not, and, when it had been
/// accepted, whether it was completed in time); and the delegation's status when given, from
/// the status `d` was read in. False, having changed nothing, when the attempt was not in `from`.
pub async fn move_attempt(conn: &mut PgConnection, d: &Delegation, m: AttemptMove<'_>) -> sqlx::Result<bool> {
    let (retries_used, delegation_to) = m.delegation.map_or((None, None), |(r, s)| (Some(r), Some(s.as_str())));
    sqlx::query_scalar!(
        r#"WITH moved AS (
               UPDATE delegation_attempts
                  SET status = $4, output = $5, reason = $6,
                      accepted_at = CASE WHEN $4 = 'accepted' THEN now() ELSE accepted_at END,
                      ended_at = CASE WHEN $4 IN ('completed', 'rejected', 'timeout', 'error') THEN now() ELSE NULL END
                WHERE delegation_id = $1 AND attempt = $2 AND status = $3
               RETURNING target_agent_id
           ), counted AS (
               INSERT INTO agent_trust_days AS t (agent_id, day, attempts_completed, attempts_unfinished,
                                                  accepted_completed, accepted_unfinished)
               SELECT target_agent_id, (now() AT TIME ZONE 'UTC')::date,
                      ($4 = 'completed')::int, ($4 <> 'completed')::int,
                      ($4 = 'completed' AND $3 = 'accepted')::int, ($4 <> 'completed' AND $3 = 'accepted')::int
                 FROM moved WHERE $4 IN ('completed', 'rejected', 'timeout', 'error')
               ON CONFLICT (agent_id, day) DO UPDATE
                  SET attempts_completed = t.attempts_completed + EXCLUDED.attempts_completed,
                      attempts_unfinished = t.attempts_unfinished + EXCLUDED.attempts_unfinished,
                      accepted_completed = t.accepted_completed + EXCLUDED.accepted_completed,
                      accepted_unfinished = t.accepted_unfinished + EXCLUDED.accepted_unfinished,
                      updated_at = now()
           ), settled AS (
               UPDATE delegations
                  SET retries_used = $8, status = $9, output = $5, updated_at = now(),
                      ended_at = CASE WHEN $9 IN ('completed', 'rejected', 'timeout', 'error') THEN now() ELSE NULL END
                WHERE delegation_id = $1 AND status = $7 AND $9::text IS NOT NULL AND EXISTS (SELECT 1 FROM moved)
           )
           SELECT count(*) AS "moved!" FROM moved"#,
        d.delegation_id,
        m.attempt,
        m.from.as_str(),
        m.to.as_str(),
        m.output,
        m.reason,
        d.status,
        retries_used,
        delegation_to
    )
    .fetch_one(conn)
    .await
    .map(|n| n == 1)
}

/// Moves an attempt from `from` to `to` (with its output or reason when it ends); false when it
/// was not in `from`.
pub async fn set_attempt(
    conn: &mut PgConnection,
    delegation_id: Uuid,
    attempt: i32,
    from: Status,
    to: Status,
    output: Option<&Value>,
    reason: Option<&str>,
) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        r#"UPDATE delegation_attempts
              SET status = $4, output = $5, reason = $6,
                  accepted_at = CASE WHEN $4 = 'accepted' THEN now() ELSE accepted_at END,
                  ended_at = CASE WHEN $4 IN ('completed', 'rejected', 'timeout', 'error') THEN now() ELSE NULL END
            WHERE delegation_id = $1 AND attempt = $2 AND status = $3"#,
        delegation_id,
        attempt,
        from.as_str(),
        to.as_str(),
        output,
        reason
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Writes the delegation's status from its live attempt: `retries_used`, the status, and when
/// it ended (with the output), from the status that was read.
pub async fn set_delegation(
    conn: &mut PgConnection,
    d: &Delegation,
    retries_used: i32,
    to: Status,
    output: Option<&Value>,
) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        r#"UPDATE delegations
              SET retries_used = $3, status = $4, output = $5, updated_at = now(),
                  ended_at = CASE WHEN $4 IN ('completed', 'rejected', 'timeout', 'error') THEN now() ELSE NULL END
            WHERE delegation_id = $1 AND status = $2"#,
        d.delegation_id,
        d.status,
        retries_used,
        to.as_str(),
        output
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

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
    pub status: String,
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

/// Attempts in `request` addressed to `target`, oldest first, and how many there are.
pub async fn inbox(conn: &mut PgConnection, target: Uuid, limit: i64) -> sqlx::Result<(Vec<InboxItem>, i64)> {
    let items = sqlx::query_as!(
        InboxItem,
        r#"SELECT d.request_id, a.attempt, a.task_id, a.requester_anonymous_id, d.task_type, d.custom_type, d.input,
                  d.timeout_ms, a.status, a.output, a.reason, a.created_at, a.deadline, d.delegation_id
           FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
           WHERE a.target_agent_id = $1 AND a.status = 'request'
           ORDER BY a.created_at, a.delegation_id LIMIT $2"#,
        target,
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    // A page short of the limit holds every waiting attempt: only a full one needs counting.
    if (items.len() as i64) < limit {
        let total = items.len() as i64;
        return Ok((items, total));
    }
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM delegation_attempts WHERE target_agent_id = $1 AND status = 'request'"#,
        target
    )
    .fetch_one(conn)
    .await?;
    Ok((items, total))
}

/// Attempts addressed to `target`, newest first, optionally of one status, older than `before`.
pub async fn inbound(
    conn: &mut PgConnection,
    target: Uuid,
    status: Option<&str>,
    before: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<InboxItem>> {
    sqlx::query_as!(
        InboxItem,
        r#"SELECT d.request_id, a.attempt, a.task_id, a.requester_anonymous_id, d.task_type, d.custom_type, d.input,
                  d.timeout_ms, a.status, a.output, a.reason, a.created_at, a.deadline, d.delegation_id
           FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
           WHERE a.target_agent_id = $1 AND ($2::text IS NULL OR a.status = $2)
             AND ($3::uuid IS NULL OR d.delegation_id < $3)
           ORDER BY d.delegation_id DESC, a.attempt DESC LIMIT $4"#,
        target,
        status,
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
    status: Option<&str>,
    before: Option<Uuid>,
    limit: i64,
) -> sqlx::Result<Vec<Delegation>> {
    sqlx::query_as!(
        Delegation,
        r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                  timeout_ms, fallback_enabled, max_retries, retries_used, status, output, created_at, ended_at
           FROM delegations
           WHERE requester_agent_id = $1 AND ($2::text IS NULL OR status = $2)
             AND ($3::uuid IS NULL OR delegation_id < $3)
           ORDER BY delegation_id DESC LIMIT $4"#,
        requester,
        status,
        before,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The wake-up key of a target's inbox.
pub fn inbox_key(target: Uuid) -> String {
    format!("delegation-inbox:{target}")
}

/// The wake-up key of one delegation (its requester's waits).
pub fn delegation_key(delegation_id: Uuid) -> String {
    format!("delegation:{delegation_id}")
}
