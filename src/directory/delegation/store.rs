//! The SQL of delegation: delegations, their attempts, the target's inbox and the trust counters
//! an attempt's end writes. Every function takes the caller's connection and never commits; state
//! moves come from [`super::state`]'s table and are written only from the state that was read.
//!
//! The calls on a delegation's usual path are few statements each, their SQL functions in
//! `migrations/functions/parley_delegation_*.sql`: [`open`] (what a new delegation
//! reads under its requester's lock) and [`offer`] (one attempt, with its timer), [`accept`]
//! (the whole accept), [`target_view`] then [`complete`] (the output is checked in between),
//! and [`inbox_for_key`]. Each of those authenticates the caller's API key itself, so the
//! call costs no separate lookup for it. [`make`] writes a delegation with its first attempt;
//! [`lock_requested`] is where a requester's cancel starts. The listings (the inbox, and an
//! agent's delegations both ways) are in `lists`.
//! A delegation's record (the row and its attempts) is read as one JSON value that SQL builds
//! (`parley_delegation_record`), which [`make`] and [`complete`] also answer. The moves their
//! SQL writes are `SQL_MOVES` (a test constant).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::outcomes::{AcceptOutcome, CompleteOutcome};
#[cfg(test)]
use super::state::Event;
use super::state::Status;
use crate::store::turn_delivery::{KeyAuth, KeyCheck};

/// `sqlx::query_as!` of [`Attempt`]s: every column of `delegation_attempts`, then `$rest`.
macro_rules! attempts_where {
    ($rest:literal, $($arg:expr),+ $(,)?) => {
        sqlx::query_as!(
            Attempt,
            r#"SELECT delegation_id, attempt, task_id, target_agent_id, target_anonymous_id, requester_anonymous_id,
                    capability_id, output_schema, status AS "status: Status", output, reason, created_at,
                    accept_deadline, deadline,
                    accepted_at, ended_at
             FROM delegation_attempts "# + $rest,
            $($arg),+
        )
    };
}

/// `sqlx::query_as!` of [`Delegation`]s: every column of `delegations`, then `$rest` (the
/// conditions, order and lock), checked against the schema at build time like any query.
macro_rules! delegations_where {
    ($rest:literal, $($arg:expr),+ $(,)?) => {
        sqlx::query_as!(
            Delegation,
            r#"SELECT delegation_id, request_id, requester_agent_id, task_type, custom_type, input, requested_target,
                    timeout_ms, fallback_enabled, max_retries, retries_used, status AS "status: Status", output,
                    created_at, ended_at, context_id
             FROM delegations "# + $rest,
            $($arg),+
        )
    };
}

mod lists;
mod pushed;

pub use lists::{InboxItem, inbound, inbox_for_key, outbound};
pub use pushed::{remote_task, set_remote_task};

/// The moves the delegation statements' SQL writes as literals, as (from, event, to): an
/// accept, a complete, and an attempt skipped at its offer because its target is at its
/// inbound limit. A unit test pins them against [`Status::transition`].
#[cfg(test)]
pub const SQL_MOVES: [(Status, Event, Status); 3] = [
    (Status::Request, Event::Accept, Status::Accepted),
    (Status::Accepted, Event::Complete, Status::Completed),
    (Status::Request, Event::Reject, Status::Rejected),
];

/// A delegation as stored (the fields are its columns).
#[derive(Debug, Clone, Deserialize)]
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
    /// Its last attempt's status.
    pub status: Status,
    /// The completed attempt's output.
    pub output: Option<Value>,
    /// Asked.
    pub created_at: DateTime<Utc>,
    /// Ended, once terminal.
    pub ended_at: Option<DateTime<Utc>>,
    /// The A2A context it was asked in (the `contextId` of the message that made it), if any.
    #[serde(default)]
    pub context_id: Option<String>,
}

impl Delegation {
    /// The number of the live (or last) attempt.
    pub fn current_attempt(&self) -> i32 {
        self.retries_used + 1
    }
}

/// One attempt, as stored (the fields are its columns).
#[derive(Debug, Clone, Deserialize)]
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
    /// Where it stands.
    pub status: Status,
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
    /// When the attempt times out from where it stands.
    pub fn due_at(&self) -> DateTime<Utc> {
        match self.status {
            Status::Request => self.accept_deadline.min(self.deadline),
            _ => self.deadline,
        }
    }
}

/// The newest delegation of `request_id` whose requester is one of `requesters` (any
/// requester when `None`).
pub async fn find_visible(
    conn: &mut PgConnection,
    request_id: Uuid,
    requesters: Option<&[Uuid]>,
) -> sqlx::Result<Option<Delegation>> {
    delegations_where!(
        r#"WHERE request_id = $1 AND ($2::uuid[] IS NULL OR requester_agent_id = ANY($2))
         ORDER BY delegation_id DESC LIMIT 1"#,
        request_id,
        requesters
    )
    .fetch_optional(conn)
    .await
}

/// The key's verdict, then, with a valid key, the delegation of `request_id` that the key's
/// agent (which must be `agent` when given) asked for, locked (see [`lock`]); `None` when the
/// key is refused or that agent asked for no such delegation. (A lock cannot be taken on the
/// outer side of a join, so these are two statements.)
pub async fn lock_requested(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent: Option<Uuid>,
    request_id: Uuid,
) -> sqlx::Result<(KeyCheck, Option<Delegation>)> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", agent_id, owner_user_id FROM parley_agent_of_key($1, $2)"#,
        key_hash,
        agent
    )
    .fetch_one(&mut *conn)
    .await?;
    let key = KeyCheck::from_parts(r.auth, r.agent_id, r.owner_user_id)?;
    let KeyCheck::Ok { agent_id, .. } = &key else { return Ok((key, None)) };
    let found =
        delegations_where!(r#"WHERE request_id = $1 AND requester_agent_id = $2 FOR UPDATE"#, request_id, *agent_id)
            .fetch_optional(conn)
            .await?;
    Ok((key, found))
}

/// The key's verdict, for any agent of the key (`parley_agent_of_key`), and whether a delegation with `request_id` exists
/// already (any requester's): such a request is answered from the transaction, and its input is
/// never checked again.
pub async fn check_key_for_request(
    conn: &mut PgConnection,
    key_hash: &[u8],
    request_id: Uuid,
) -> sqlx::Result<(KeyCheck, bool)> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", agent_id, owner_user_id,
                  EXISTS (SELECT 1 FROM delegations WHERE request_id = $2) AS "used!"
             FROM parley_agent_of_key($1, NULL)"#,
        key_hash,
        request_id
    )
    .fetch_one(conn)
    .await?;
    Ok((KeyCheck::from_parts(r.auth, r.agent_id, r.owner_user_id)?, r.used))
}

/// The request ids of the delegations whose live attempt is addressed to `target` (offered or
/// accepted).
pub async fn open_at(conn: &mut PgConnection, target: Uuid) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        r#"SELECT d.request_id FROM delegation_attempts a JOIN delegations d ON d.delegation_id = a.delegation_id
            WHERE a.target_agent_id = $1 AND a.status IN ('request', 'accepted')
            ORDER BY d.delegation_id"#,
        target
    )
    .fetch_all(conn)
    .await
}

/// The owner of an agent (deleted agents included), if it exists.
pub async fn owner_of(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("SELECT owner_user_id FROM agents WHERE agent_id = $1", agent_id).fetch_optional(conn).await
}

/// The capability (its id and input schema) that the agent behind `anonymous_id` offers for
/// `task_type`/`custom_type`, whatever its state: what a delegation naming it screens its input
/// against (eligibility is judged in the delegation's transaction).
pub async fn named_capability(
    conn: &mut PgConnection,
    anonymous_id: Uuid,
    task_type: &str,
    custom_type: Option<&str>,
) -> sqlx::Result<Option<(Uuid, Value)>> {
    let r = sqlx::query!(
        r#"SELECT c.capability_id, c.input_schema
             FROM anonymous_ids i
             JOIN capabilities c ON c.agent_id = i.agent_id AND c.task_type = $2
                                AND c.custom_type IS NOT DISTINCT FROM $3
            WHERE i.anonymous_id = $1"#,
        anonymous_id,
        task_type,
        custom_type
    )
    .fetch_optional(conn)
    .await?;
    Ok(r.map(|r| (r.capability_id, r.input_schema)))
}

/// The delegation of `request_id` whose newest attempt addressed to `target` is the newest,
/// read without a lock (see [`lock_addressed`]).
pub async fn addressed(conn: &mut PgConnection, target: Uuid, request_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    delegations_where!(r#"WHERE delegation_id = parley_delegation_addressed($2, $1)"#, request_id, target)
        .fetch_optional(conn)
        .await
}

/// Locks a delegation for a state change: every change of it and its attempts holds this lock.
pub async fn lock(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    delegations_where!(r#"WHERE delegation_id = $1 FOR UPDATE"#, delegation_id).fetch_optional(conn).await
}

/// Reads a delegation.
pub async fn get(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<Delegation>> {
    delegations_where!(r#"WHERE delegation_id = $1"#, delegation_id).fetch_optional(conn).await
}

/// A delegation and its attempts, first first, in one read.
pub async fn record(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Option<(Delegation, Vec<Attempt>)>> {
    let found = sqlx::query_scalar!(r#"SELECT parley_delegation_record($1) AS "record""#, delegation_id)
        .fetch_one(conn)
        .await?;
    found.map(decode_record).transpose()
}

/// A delegation with its attempts, as just committed or read (`parley_delegation_record` builds
/// it as one JSON value).
#[derive(Debug, Clone, Deserialize)]
pub struct Record {
    /// The delegation.
    pub delegation: Delegation,
    /// Its attempts, first first.
    pub attempts: Vec<Attempt>,
}

/// A delegation's record as `parley_delegation_record` builds it.
fn decode_record(record: Value) -> sqlx::Result<(Delegation, Vec<Attempt>)> {
    let r: Record = serde_json::from_value(record).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok((r.delegation, r.attempts))
}

/// What [`make`] writes: a new delegation, in `request` with no retries used, and its first
/// attempt, offered as [`offer`] offers one. Named fields in place of the SQL function's 22
/// positional parameters, which [`make`] binds once, each checked against the function's
/// signature at build time.
#[derive(Debug, Clone, Copy)]
pub struct NewDelegation<'a> {
    /// The delegation (its id, request, requester, kind of work, input, target, timeout,
    /// fallback, retries and creation time are written).
    pub delegation: &'a Delegation,
    /// Its rank among its requester's delegations (the outbound window's `next_seq`).
    pub seq: i64,
    /// Its first attempt (its task id, target, both anonymous ids, capability, output schema
    /// and deadlines are written).
    pub first: &'a Attempt,
    /// The service's inbound limit for the target's window.
    pub inbound_limit: i32,
}

/// Writes a new delegation with its first attempt (`parley_delegation_make`); returns whether
/// that attempt is live (false: skipped as `rejected`, its target's window being full) and the
/// delegation's record.
pub async fn make(conn: &mut PgConnection, new: NewDelegation<'_>) -> sqlx::Result<(bool, (Delegation, Vec<Attempt>))> {
    let NewDelegation { delegation: d, seq, first: a, inbound_limit } = new;
    let r = sqlx::query!(
        r#"SELECT live AS "live!", delegation_record AS "record!"
           FROM parley_delegation_make($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                                       $18, $19, $20, $21, $22)"#,
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
        d.created_at,
        seq,
        a.task_id,
        a.target_agent_id,
        a.target_anonymous_id,
        a.requester_anonymous_id,
        a.capability_id,
        a.output_schema,
        a.accept_deadline,
        a.deadline,
        parley_jobs::new_timer_id(),
        inbound_limit
    )
    .fetch_one(conn)
    .await?;
    Ok((r.live, decode_record(r.record)?))
}

/// One attempt of a delegation.
pub async fn attempt(conn: &mut PgConnection, delegation_id: Uuid, attempt: i32) -> sqlx::Result<Option<Attempt>> {
    attempts_where!(r#"WHERE delegation_id = $1 AND attempt = $2"#, delegation_id, attempt).fetch_optional(conn).await
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
pub async fn lock_addressed(
    conn: &mut PgConnection,
    target: Uuid,
    request_id: Uuid,
) -> sqlx::Result<Option<Delegation>> {
    delegations_where!(
        r#"WHERE delegation_id = parley_delegation_addressed($2, $1)
         FOR UPDATE"#,
        request_id,
        target
    )
    .fetch_optional(conn)
    .await
}

/// What an accept or a complete answered (`parley_delegation_accept`, `parley_delegation_complete`):
/// `O` is the call's own [`AcceptOutcome`] or [`CompleteOutcome`].
#[derive(Debug, Clone)]
pub struct Moved<O> {
    /// The key.
    pub key: KeyCheck,
    /// With a valid key: what the call did, or why not (`None` with a refused key).
    pub outcome: Option<O>,
    /// The live attempt's status, after the call.
    pub status: Option<Status>,
    /// The delegation (accept only).
    pub delegation_id: Option<Uuid>,
    /// The attempt's number (accept only).
    pub attempt: Option<i32>,
    /// When the attempt times out (accept only).
    pub deadline: Option<DateTime<Utc>>,
    /// What the attempt's output must match (accept only).
    pub output_schema: Option<Value>,
    /// The delegation's record once it ended (complete only).
    pub record: Option<(Delegation, Vec<Attempt>)>,
}

/// Accept, in one statement: the attempt of `request_id` addressed to the key's agent (which
/// must be `agent`'s when given) moves `request -> accepted`, and the delegation's timer to its
/// execution deadline. Autocommit: call it on a pooled connection, outside any transaction.
pub async fn accept(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent: Option<Uuid>,
    request_id: Uuid,
) -> sqlx::Result<Moved<AcceptOutcome>> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", key_agent_id, key_owner_user_id, outcome AS "outcome: AcceptOutcome",
                  status AS "status: Status", delegation_id, attempt, deadline,
                  output_schema
           FROM parley_delegation_accept($1, $2, $3, $4)"#,
        key_hash,
        agent,
        request_id,
        parley_jobs::new_timer_id()
    )
    .fetch_one(conn)
    .await?;
    Ok(Moved {
        key: KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id)?,
        outcome: r.outcome,
        status: r.status,
        delegation_id: r.delegation_id,
        attempt: r.attempt,
        deadline: r.deadline,
        output_schema: r.output_schema,
        record: None,
    })
}

/// The live attempt of a delegation as its target sees it before completing it.
#[derive(Debug, Clone)]
pub struct TargetView {
    /// The delegation.
    pub delegation_id: Uuid,
    /// The live attempt's number.
    pub attempt: i32,
    /// The agent the live attempt is addressed to.
    pub target_agent_id: Uuid,
    /// Its status.
    pub status: Status,
    /// When it times out.
    pub deadline: DateTime<Utc>,
    /// What its output must match.
    pub output_schema: Value,
}

/// The key's verdict and the live attempt of the delegation of `request_id` addressed to the
/// key's agent (`None`: none ever was), in one read.
pub async fn target_view(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent: Option<Uuid>,
    request_id: Uuid,
) -> sqlx::Result<(KeyCheck, Option<TargetView>)> {
    let r = sqlx::query!(
        r#"SELECT k.auth AS "auth!: KeyAuth", k.agent_id AS key_agent_id, k.owner_user_id AS key_owner_user_id,
                  a.delegation_id AS "delegation_id?", a.attempt AS "attempt?",
                  a.target_agent_id AS "target_agent_id?", a.status AS "status?: Status", a.deadline AS "deadline?",
                  a.output_schema AS "output_schema?"
           FROM parley_agent_of_key($1, $2) k
           LEFT JOIN LATERAL (SELECT parley_delegation_addressed(k.agent_id, $3) AS id WHERE k.auth = 'ok') x ON true
           LEFT JOIN delegations d ON d.delegation_id = x.id
           LEFT JOIN delegation_attempts a ON a.delegation_id = d.delegation_id AND a.attempt = d.retries_used + 1"#,
        key_hash,
        agent,
        request_id
    )
    .fetch_one(conn)
    .await?;
    let key = KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id)?;
    let view = (|| {
        Some(TargetView {
            delegation_id: r.delegation_id?,
            attempt: r.attempt?,
            target_agent_id: r.target_agent_id?,
            status: r.status?,
            deadline: r.deadline?,
            output_schema: r.output_schema?,
        })
    })();
    Ok((key, view))
}

/// Complete, in one statement, once `output` was checked against the schema of attempt
/// `attempt` of `delegation_id` ([`target_view`]): that attempt, still live in the delegation of
/// `request_id` addressed to the key's agent, accepted and within its deadline, completes, the
/// delegation ends with `output`, and its timer is cancelled; answers the delegation's final
/// record. The completion counts for the target as [`move_attempt`] says (at most
/// `trust_per_requester` a day from one requesting owner). Autocommit: call it on a pooled
/// connection, outside any transaction.
#[allow(clippy::too_many_arguments)]
pub async fn complete(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent: Option<Uuid>,
    request_id: Uuid,
    delegation_id: Uuid,
    attempt: i32,
    output: &Value,
    trust_per_requester: i32,
) -> sqlx::Result<Moved<CompleteOutcome>> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", key_agent_id, key_owner_user_id, outcome AS "outcome: CompleteOutcome",
                  status AS "status: Status", delegation_record
           FROM parley_delegation_complete($1, $2, $3, $4, $5, $6, $7)"#,
        key_hash,
        agent,
        request_id,
        delegation_id,
        attempt,
        output,
        trust_per_requester
    )
    .fetch_one(conn)
    .await?;
    Ok(Moved {
        key: KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id)?,
        outcome: r.outcome,
        status: r.status,
        delegation_id: None,
        attempt: Some(attempt),
        deadline: None,
        output_schema: None,
        record: r.delegation_record.map(decode_record).transpose()?,
    })
}

/// A requester's outbound window: how many delegations it may send per 60 s, and whether it did.
#[derive(Debug, Clone)]
pub struct OutboundWindow {
    /// The requester's outbound limit (the service's, or a lower one its capabilities declare).
    pub limit: i32,
    /// Whether it sent that many in the last 60 s.
    pub full: bool,
    /// When a full window frees up (the oldest delegation counted leaves it).
    pub frees_at: Option<DateTime<Utc>>,
    /// The rank the requester's next delegation takes among its own.
    pub next_seq: i64,
    /// The earliest `created_at` the next delegation may have: its newest one's (ranks and
    /// times go up together, which is what lets the window be read in two probes).
    pub not_before: Option<DateTime<Utc>>,
}

/// What a new delegation reads first, in one statement under its requester's lock
/// (`parley_delegation_open`), for the agent of the key whose hash is `key_hash`.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The key.
    pub key: KeyCheck,
    /// Whether the key's agent is the requester the body names.
    pub own: bool,
    /// The delegation this request id already made (a retried request; read in full apart).
    pub existing: Option<Uuid>,
    /// Whether another requester's delegation has this request id.
    pub taken: bool,
    /// The requester's outbound window (when there is no existing delegation).
    pub window: Option<OutboundWindow>,
    /// The named target's agent and whether its anonymous id is live; `None` when none was
    /// named or the id was never issued.
    pub target: Option<(Uuid, bool)>,
    /// What the named target offers for the kind of work; `None` for an unknown agent.
    pub offer: Option<TargetOffer>,
    /// The requester's current anonymous id, unless it has none that is still valid.
    pub requester_anonymous_id: Option<Uuid>,
}

/// Reads what a new delegation of `request_id` by the key's agent (which must be `requester`
/// when given) needs to decide, after taking the requester's lock (held to the end of the
/// caller's transaction): see [`Opened`]. `default_limit` is the service's outbound limit.
#[allow(clippy::too_many_arguments)]
pub async fn open(
    conn: &mut PgConnection,
    key_hash: &[u8],
    requester: Option<Uuid>,
    request_id: Uuid,
    target: Option<Uuid>,
    task_type: &str,
    custom_type: Option<&str>,
    default_limit: i32,
) -> sqlx::Result<Opened> {
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", key_agent_id, key_owner_user_id, own, existing, taken, outbound_limit, window_full,
                  frees_at, next_seq, not_before,
                  target_agent_id, target_live, target_active, capability_id, input_schema, output_schema, enabled,
                  accept_delegations, requester_anonymous_id
           FROM parley_delegation_open($1, $2, $3, $4, $5, $6, $7)"#,
        key_hash,
        requester,
        request_id,
        target,
        task_type,
        custom_type,
        default_limit
    )
    .fetch_one(conn)
    .await?;
    let window = r.outbound_limit.map(|limit| OutboundWindow {
        limit,
        full: r.window_full.unwrap_or(true),
        frees_at: r.frees_at,
        next_seq: r.next_seq.unwrap_or(1),
        not_before: r.not_before,
    });
    let offer = r.target_active.map(|active| TargetOffer {
        active,
        capability_id: r.capability_id,
        input_schema: r.input_schema,
        output_schema: r.output_schema,
        enabled: r.enabled.unwrap_or(false),
        accept_delegations: r.accept_delegations.unwrap_or(false),
    });
    Ok(Opened {
        key: KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id)?,
        own: r.own.unwrap_or(false),
        existing: r.existing,
        taken: r.taken.unwrap_or(false),
        window,
        target: r.target_agent_id.map(|agent| (agent, r.target_live.unwrap_or(false))),
        offer,
        requester_anonymous_id: r.requester_anonymous_id,
    })
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

/// Offers attempt `a` (in `request`) to its target, arming the delegation's timer for when it
/// times out from there; false when the target's inbound window (at most `inbound_limit`, the
/// service's limit, or the lower one its capability declares, of which one requesting owner may
/// use half) has no room, in which case the attempt is recorded `rejected` (`rate_limited`) at
/// once and no timer is armed (`parley_delegation_offer`).
pub async fn offer(conn: &mut PgConnection, a: &Attempt, inbound_limit: i32) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT parley_delegation_offer($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS "live!""#,
        a.delegation_id,
        a.attempt,
        a.task_id,
        a.target_agent_id,
        a.target_anonymous_id,
        a.requester_anonymous_id,
        a.capability_id,
        a.output_schema,
        a.created_at,
        a.accept_deadline,
        a.deadline,
        parley_jobs::new_timer_id(),
        inbound_limit
    )
    .fetch_one(conn)
    .await
}

/// Every attempt of a delegation, first first.
pub async fn attempts(conn: &mut PgConnection, delegation_id: Uuid) -> sqlx::Result<Vec<Attempt>> {
    Ok(attempts_of(conn, &[delegation_id]).await?.remove(&delegation_id).unwrap_or_default())
}

/// The attempts of each of these delegations, in one query, each delegation's in order.
pub async fn attempts_of(conn: &mut PgConnection, ids: &[Uuid]) -> sqlx::Result<HashMap<Uuid, Vec<Attempt>>> {
    let rows = attempts_where!(r#"WHERE delegation_id = ANY($1) ORDER BY delegation_id, attempt"#, ids)
        .fetch_all(conn)
        .await?;
    let mut out: HashMap<Uuid, Vec<Attempt>> = HashMap::new();
    for a in rows {
        out.entry(a.delegation_id).or_default().push(a);
    }
    Ok(out)
}

/// The attempt whose A2A task id is `task_id`, with its delegation and the owners of its
/// requester and of its target (who, besides the two agents, may read it).
pub async fn attempt_task(conn: &mut PgConnection, task_id: Uuid) -> sqlx::Result<Option<AttemptTask>> {
    let Some(attempt) = attempts_where!(r#"WHERE task_id = $1"#, task_id).fetch_optional(&mut *conn).await? else {
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

/// Moves an attempt of `d` (see [`AttemptMove`]) in one statement (`parley_delegation_move`):
/// the attempt; when it ends, its count for or against its target on today's row (completed or
/// not, and, when it had been accepted, whether it was completed in time), unless the rules of
/// trust leave it out (one owner's agents, a timeout below the target's estimate, more than
/// `trust_per_requester` a day from one requesting owner); and the delegation's status when
/// given, from the status `d` was read in. False, having changed nothing, when the attempt was
/// not in `from`.
pub async fn move_attempt(
    conn: &mut PgConnection,
    d: &Delegation,
    m: AttemptMove<'_>,
    trust_per_requester: i32,
) -> sqlx::Result<bool> {
    let (retries_used, delegation_to) = m.delegation.map_or((None, None), |(r, s)| (Some(r), Some(s.as_str())));
    sqlx::query_scalar!(
        r#"SELECT parley_delegation_move($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS "moved!""#,
        d.delegation_id,
        m.attempt,
        m.from.as_str(),
        m.to.as_str(),
        m.output,
        m.reason,
        d.status.as_str(),
        retries_used,
        delegation_to,
        trust_per_requester
    )
    .fetch_one(conn)
    .await
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
                  ended_at = CASE WHEN $4 IN ('completed', 'rejected', 'timeout', 'error', 'canceled')
                                  THEN now() ELSE NULL END
            WHERE delegation_id = $1 AND status = $2"#,
        d.delegation_id,
        d.status.as_str(),
        retries_used,
        to.as_str(),
        output
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Records the A2A context a delegation was asked in, in the transaction that made it.
pub async fn set_context(conn: &mut PgConnection, delegation_id: Uuid, context_id: &str) -> sqlx::Result<()> {
    sqlx::query!("UPDATE delegations SET context_id = $2 WHERE delegation_id = $1", delegation_id, context_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The wake-up key of a target's inbox.
pub fn inbox_key(target: Uuid) -> String {
    format!("delegation-inbox:{target}")
}

/// The wake-up key of one delegation (its requester's waits).
pub fn delegation_key(delegation_id: Uuid) -> String {
    format!("delegation:{delegation_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moves_written_in_sql_are_the_tables() {
        for (from, event, to) in SQL_MOVES {
            assert_eq!(from.transition(event).ok(), Some(to), "{from:?} --{event:?}--> {to:?}");
        }
    }
}
