//! The statements of turn delivery: a pickup is one call of `parley_pickup`, a respond one read
//! ([`respond_snapshot`]) and one call of `parley_respond` ([`apply_respond`]). Each does its own
//! authentication by API-key hash, so an agent's turn costs no extra round trip for it.
//!
//! The SQL lives in `migrations/functions/` (`parley_pickup.sql`, `parley_respond.sql`,
//! `parley_park.sql`, `parley_store_turns.sql`, one file each); this module binds it and
//! decodes what it returns. The transitions it makes are the task table's `Claim`, `Respond` and
//! `Park`, written as literals there (so the planner can use the partial indexes on `state`);
//! [`TRANSITIONS`] names them and a test pins them against the Rust table.

use sqlx::{FromRow, PgConnection, Row as _, postgres::PgRow};
use uuid::Uuid;

use super::{
    interval,
    messages::TurnRow,
    tasks::{Row as TaskRow, Task},
};
use crate::domain::{OpportunityStatus, PreviousRound, TaskEvent, TaskState, Turn};

/// The transitions the SQL of this module makes, as (from, event, to).
pub const TRANSITIONS: [(TaskState, TaskEvent, TaskState); 3] = [
    (TaskState::WaitingForAgent, TaskEvent::Claim, TaskState::Claimed),
    (TaskState::Claimed, TaskEvent::Respond, TaskState::Working),
    (TaskState::Working, TaskEvent::Park, TaskState::WaitingForAgent),
];

/// What the API key says about the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// The key is the path's agent's (or the caller asked as whichever agent the key is of).
    Ok {
        /// The agent.
        agent_id: Uuid,
        /// Its user.
        owner_user_id: String,
    },
    /// Unknown, revoked or expired.
    UnknownKey,
    /// The key belongs to another agent than the one in the path.
    OtherAgent,
    /// The agent is inactive.
    Inactive,
}

impl KeyCheck {
    /// What `parley_agent_of_key` (or a statement that calls it) answered: its `auth`, and the
    /// key's agent and user.
    pub fn from_parts(auth: &str, agent_id: Option<Uuid>, owner_user_id: Option<String>) -> KeyCheck {
        match (auth, agent_id, owner_user_id) {
            ("ok", Some(agent_id), Some(owner_user_id)) => KeyCheck::Ok { agent_id, owner_user_id },
            ("other_agent", ..) => KeyCheck::OtherAgent,
            ("inactive", ..) => KeyCheck::Inactive,
            _ => KeyCheck::UnknownKey,
        }
    }
}

fn key_check(row: &PgRow) -> sqlx::Result<KeyCheck> {
    let auth: String = row.try_get("auth")?;
    Ok(KeyCheck::from_parts(&auth, row.try_get("key_agent_id")?, row.try_get("key_owner_user_id")?))
}

/// The task columns of a row, or `None` when the row has no task.
fn optional_task(row: &PgRow) -> sqlx::Result<Option<Task>> {
    if row.try_get::<Option<Uuid>, _>("task_id")?.is_none() {
        return Ok(None);
    }
    let task = Task::try_from(TaskRow::from_row(row)?).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok(Some(task))
}

fn history(row: &PgRow) -> sqlx::Result<Vec<Turn>> {
    match row.try_get::<Option<sqlx::types::Json<Vec<Turn>>>, _>("history")? {
        Some(turns) => Ok(turns.0),
        None => Ok(Vec::new()),
    }
}

fn opportunity_status(row: &PgRow) -> sqlx::Result<Option<OpportunityStatus>> {
    let status: Option<String> = row.try_get("opportunity_status")?;
    status
        .map(|s| super::parse_enum("opportunity status", &s, OpportunityStatus::parse))
        .transpose()
        .map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// A task as pickup found it, with what its answer shows.
#[derive(Debug, Clone)]
pub struct PickedUp {
    /// The task, claimed.
    pub task: Task,
    /// Whether this call claimed it (false: the agent's live claim, handed back unchanged).
    pub claimed_now: bool,
    /// The opportunity's status.
    pub opportunity_status: OpportunityStatus,
    /// The turns so far.
    pub history: Vec<Turn>,
    /// The opportunity's earlier rounds (empty in a first round).
    pub previous_rounds: Vec<PreviousRound>,
}

/// What `parley_pickup` answered.
#[derive(Debug, Clone)]
pub struct Pickup {
    /// The caller's key.
    pub key: KeyCheck,
    /// The claimed turn; `None` when nothing is parked for the agent's user.
    pub picked_up: Option<PickedUp>,
}

impl<'r> FromRow<'r, PgRow> for Pickup {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let picked_up = match optional_task(row)? {
            None => None,
            Some(task) => Some(PickedUp {
                task,
                claimed_now: row.try_get::<Option<bool>, _>("claimed_now")?.unwrap_or(false),
                opportunity_status: opportunity_status(row)?.unwrap_or(OpportunityStatus::Negotiating),
                history: history(row)?,
                previous_rounds: row
                    .try_get::<Option<sqlx::types::Json<Vec<PreviousRound>>>, _>("previous_rounds")?
                    .map(|rounds| rounds.0)
                    .unwrap_or_default(),
            }),
        };
        Ok(Pickup { key: key_check(row)?, picked_up })
    }
}

/// Pickup in one statement: authenticates the key, then returns the agent's live
/// claim, or claims the oldest turn parked for its user (other than those of the negotiations
/// in `skip`) until now + `claim_timeout`, swapping the park timer for the claim timer. An agent holds at most one
/// claim (the unique index `tasks_one_claim_per_agent`): a lapsed claim its timer has not given
/// back yet is given back first (its park timer re-armed from `park_timeout`), and a pickup
/// that loses the race to a concurrent pickup of the same agent returns that pickup's claim.
/// Autocommit: call it on a pooled connection, outside any transaction.
pub async fn pickup(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent_id: Option<Uuid>,
    claim_timeout: std::time::Duration,
    park_timeout: std::time::Duration,
    skip: &[Uuid],
) -> anyhow::Result<Pickup> {
    Ok(sqlx::query_as::<_, Pickup>("SELECT * FROM parley_pickup($1, $2, $3, $4, $5, $6, $7)")
        .bind(key_hash)
        .bind(agent_id)
        .bind(interval(claim_timeout)?)
        .bind(interval(park_timeout)?)
        .bind(parley_jobs::new_timer_id())
        .bind(parley_jobs::new_timer_id())
        .bind(skip)
        .fetch_one(conn)
        .await?)
}

/// A turn already stored under the claim a respond presents (a retry).
#[derive(Debug, Clone)]
pub struct Replay {
    /// The turn number it stored.
    pub turn_number: u32,
    /// Hash of the body that stored it.
    pub request_hash: Option<Vec<u8>>,
    /// The answer given, once recorded.
    pub response: Option<serde_json::Value>,
}

/// What a respond plans from: the key, the task (only when the key's user takes part in it),
/// its turns and its opportunity's status, and a turn already stored under the presented claim.
#[derive(Debug, Clone)]
pub struct RespondSnapshot {
    /// The caller's key.
    pub key: KeyCheck,
    /// The task; `None` when unknown or not the key's user's.
    pub task: Option<Task>,
    /// Its turns.
    pub history: Vec<Turn>,
    /// Its opportunity's status.
    pub opportunity_status: Option<OpportunityStatus>,
    /// The turn stored under the presented claim generation, if any.
    pub replay: Option<Replay>,
}

impl<'r> FromRow<'r, PgRow> for RespondSnapshot {
    fn from_row(row: &'r PgRow) -> sqlx::Result<Self> {
        let replay = match row.try_get::<Option<i32>, _>("replay_turn_number")? {
            None => None,
            Some(n) => Some(Replay {
                turn_number: u32::try_from(n).unwrap_or(0),
                request_hash: row.try_get("replay_request_hash")?,
                response: row.try_get("replay_response")?,
            }),
        };
        Ok(RespondSnapshot {
            key: key_check(row)?,
            task: optional_task(row)?,
            history: history(row)?,
            opportunity_status: opportunity_status(row)?,
            replay,
        })
    }
}

/// Reads what a respond plans from, in one statement (no lock: [`apply_respond`] applies the
/// plan only if the claim is still the one read here).
pub async fn respond_snapshot(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent_id: Option<Uuid>,
    task_id: Uuid,
    claim_generation: Option<i64>,
) -> anyhow::Result<RespondSnapshot> {
    Ok(sqlx::query_as::<_, RespondSnapshot>(
        r#"SELECT k.auth, k.agent_id AS key_agent_id, k.owner_user_id AS key_owner_user_id,
                  t.task_id, t.conversation_id, t.opportunity_id, t.state, t.source_user_id, t.candidate_user_id,
                  t.source_kind, t.candidate_kind, t.source_context, t.candidate_context, t.seed_assessment,
                  t.index_context, t.discovery_query, t.max_turns, t.turn_count, t.awaiting_user_id,
                  t.first_parked_at, t.claim_agent_id, t.claim_generation, t.claim_expires_at,
                  t.created_at, t.updated_at, t.completed_at,
                  o.status AS opportunity_status,
                  CASE WHEN t.task_id IS NOT NULL THEN parley_history(t.task_id) END AS history,
                  r.turn_number AS replay_turn_number, r.request_hash AS replay_request_hash,
                  r.response AS replay_response
           FROM parley_agent_of_key($1, $2) k
           LEFT JOIN tasks t ON k.auth = 'ok' AND t.task_id = $3
                            AND (t.source_user_id = k.owner_user_id OR t.candidate_user_id = k.owner_user_id)
           LEFT JOIN opportunities o ON o.opportunity_id = t.opportunity_id
           LEFT JOIN messages r ON r.task_id = t.task_id AND r.claim_generation = $4"#,
    )
    .bind(key_hash)
    .bind(agent_id)
    .bind(task_id)
    .bind(claim_generation)
    .fetch_one(conn)
    .await?)
}

/// The respond to apply, planned from a [`RespondSnapshot`].
pub struct ApplyRespond<'a> {
    /// SHA-256 of the API key presented: it must be a live key of `agent_id`.
    pub key_hash: &'a [u8],
    /// The task.
    pub task_id: Uuid,
    /// The claim holder.
    pub agent_id: Uuid,
    /// The claim's generation.
    pub generation: i64,
    /// Turns taken when the snapshot was read.
    pub turn_count: u32,
    /// The agent's turn (with its agent, claim generation, request hash and, when known, its
    /// answer), then any system turns after it.
    pub turns: Vec<TurnRow<'a>>,
    /// Park the next turn for this user, with the park timer when a timeout is given; `None`
    /// leaves the task `working`.
    pub park: Option<(&'a str, Option<std::time::Duration>)>,
}

/// Applies a planned respond in one statement; `false` when the claim is no longer the one
/// planned from (nothing changed). Autocommit: call it outside any transaction.
pub async fn apply_respond(conn: &mut PgConnection, a: &ApplyRespond<'_>) -> anyhow::Result<bool> {
    let (park_user, park_timeout) = match a.park {
        Some((user, timeout)) => (Some(user), timeout),
        None => (None, None),
    };
    Ok(sqlx::query_scalar("SELECT parley_respond($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        .bind(a.key_hash)
        .bind(a.task_id)
        .bind(a.agent_id)
        .bind(a.generation)
        .bind(i32::try_from(a.turn_count)?)
        .bind(sqlx::types::Json(&a.turns))
        .bind(park_user)
        .bind(park_timeout.map(interval).transpose()?)
        .bind(parley_jobs::new_timer_id())
        .fetch_one(conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_transitions_are_the_tables() {
        for (from, event, to) in TRANSITIONS {
            assert_eq!(from.transition(event).ok(), Some(to), "{from:?} + {event:?}");
        }
    }
}
