//! The statements of turn delivery: a pickup is one call of `parley_pickup`, a respond one read
//! ([`respond_snapshot`]) and one call of `parley_respond` ([`apply_respond`]). Each does its own
//! authentication by API-key hash, so an agent's turn costs no extra round trip for it.
//!
//! The SQL lives in `migrations/functions/` (`parley_pickup.sql`, `parley_respond.sql`,
//! `parley_park.sql`, `parley_store_turns.sql`, one file each); this module binds it and
//! decodes what it returns. The transitions it makes are the task table's `Claim`, `Respond` and
//! `Park`, written as literals there (so the planner can use the partial indexes on `state`);
//! `TRANSITIONS` (a test constant) names them and a test pins them against the Rust table.

use sqlx::{PgConnection, types::Json};
use uuid::Uuid;

use super::{
    interval,
    messages::TurnRow,
    person_questions::PersonAnswer,
    tasks::{Row as TaskRow, Task},
};
#[cfg(test)]
use crate::domain::TaskEvent;
use crate::domain::{OpportunityStatus, PreviousRound, SideKind, TaskState, Turn};

/// The transitions the SQL of this module makes, as (from, event, to).
#[cfg(test)]
pub const TRANSITIONS: [(TaskState, TaskEvent, TaskState); 3] = [
    (TaskState::WaitingForAgent, TaskEvent::Claim, TaskState::Claimed),
    (TaskState::Claimed, TaskEvent::Respond, TaskState::Working),
    (TaskState::Working, TaskEvent::Park, TaskState::WaitingForAgent),
];

/// What `parley_agent_of_key` answers as `auth` (and every statement that calls it): the
/// function's outcome words. A word that is none of these fails the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum KeyAuth {
    /// A live key, of the agent asked for (or of any agent when none was), which is active.
    Ok,
    /// Unknown, revoked or expired.
    UnknownKey,
    /// The key belongs to another agent than the one asked for.
    OtherAgent,
    /// The key's agent is inactive.
    Inactive,
}

impl KeyAuth {
    /// Every word, in the order the SQL tests them.
    #[cfg(test)]
    pub const ALL: [KeyAuth; 4] = [KeyAuth::UnknownKey, KeyAuth::OtherAgent, KeyAuth::Inactive, KeyAuth::Ok];
}

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
    /// key's agent and user. An `ok` without them is a broken answer, and an error.
    pub fn from_parts(auth: KeyAuth, agent_id: Option<Uuid>, owner_user_id: Option<String>) -> sqlx::Result<KeyCheck> {
        Ok(match (auth, agent_id, owner_user_id) {
            (KeyAuth::Ok, Some(agent_id), Some(owner_user_id)) => KeyCheck::Ok { agent_id, owner_user_id },
            (KeyAuth::Ok, ..) => return Err(sqlx::Error::Decode("a key verdict `ok` without its agent".into())),
            (KeyAuth::UnknownKey, ..) => KeyCheck::UnknownKey,
            (KeyAuth::OtherAgent, ..) => KeyCheck::OtherAgent,
            (KeyAuth::Inactive, ..) => KeyCheck::Inactive,
        })
    }
}

/// A column a row with a task must have (the table declares it `NOT NULL`), or a decode error.
fn required<T>(value: Option<T>, column: &'static str) -> sqlx::Result<T> {
    value.ok_or_else(|| sqlx::Error::Decode(format!("a task row without its {column}").into()))
}

/// The task of a record whose task columns (named as `tasks`' own, each read as an `Option`)
/// are all NULL when it has none: `None` then, else the task, every `NOT NULL` column required.
macro_rules! optional_task {
    ($r:ident) => {
        match $r.task_id {
            None => None,
            Some(task_id) => Some(Task::try_from(TaskRow {
                task_id,
                conversation_id: required($r.conversation_id, "conversation_id")?,
                opportunity_id: required($r.opportunity_id, "opportunity_id")?,
                state: required($r.state, "state")?,
                source_user_id: required($r.source_user_id, "source_user_id")?,
                candidate_user_id: required($r.candidate_user_id, "candidate_user_id")?,
                source_kind: required($r.source_kind, "source_kind")?,
                candidate_kind: required($r.candidate_kind, "candidate_kind")?,
                source_context: required($r.source_context, "source_context")?,
                candidate_context: required($r.candidate_context, "candidate_context")?,
                seed_assessment: required($r.seed_assessment, "seed_assessment")?,
                index_context: $r.index_context,
                discovery_query: $r.discovery_query,
                max_turns: required($r.max_turns, "max_turns")?,
                turn_count: required($r.turn_count, "turn_count")?,
                awaiting_user_id: $r.awaiting_user_id,
                first_parked_at: $r.first_parked_at,
                claim_agent_id: $r.claim_agent_id,
                claim_generation: required($r.claim_generation, "claim_generation")?,
                claim_expires_at: $r.claim_expires_at,
                created_at: required($r.created_at, "created_at")?,
                updated_at: required($r.updated_at, "updated_at")?,
                completed_at: $r.completed_at,
            })?),
        }
    };
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
    /// The closed questions the turn's side asked its person at this turn, oldest first.
    pub person_answers: Vec<PersonAnswer>,
}

/// What `parley_pickup` answered.
#[derive(Debug, Clone)]
pub struct Pickup {
    /// The caller's key.
    pub key: KeyCheck,
    /// The claimed turn; `None` when nothing is parked for the agent's user.
    pub picked_up: Option<PickedUp>,
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
    // The function's columns, named one by one and typed: its nullability is unknown to the
    // compiler, so every column is read as an `Option` (`?`) and a task's are required below.
    let r = sqlx::query!(
        r#"SELECT auth AS "auth!: KeyAuth", key_agent_id, key_owner_user_id, claimed_now,
                  task_id, conversation_id, opportunity_id, state AS "state?: TaskState", source_user_id,
                  candidate_user_id, source_kind AS "source_kind?: SideKind",
                  candidate_kind AS "candidate_kind?: SideKind", source_context, candidate_context, seed_assessment,
                  index_context, discovery_query, max_turns, turn_count, awaiting_user_id, first_parked_at,
                  claim_agent_id, claim_generation, claim_expires_at, created_at, updated_at, completed_at,
                  opportunity_status AS "opportunity_status?: OpportunityStatus",
                  history AS "history?: Json<Vec<Turn>>", previous_rounds AS "previous_rounds?: Json<Vec<PreviousRound>>",
                  person_answers AS "person_answers?: Json<Vec<PersonAnswer>>"
           FROM parley_pickup($1, $2, $3, $4, $5, $6, $7)"#,
        key_hash,
        agent_id,
        interval(claim_timeout)?,
        interval(park_timeout)?,
        parley_jobs::new_timer_id(),
        parley_jobs::new_timer_id(),
        skip
    )
    .fetch_one(conn)
    .await?;
    let key = KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id.clone())?;
    let picked_up = match optional_task!(r) {
        None => None,
        Some(task) => Some(PickedUp {
            task,
            claimed_now: required(r.claimed_now, "claimed_now")?,
            opportunity_status: required(r.opportunity_status, "opportunity_status")?,
            history: r.history.map(|h| h.0).unwrap_or_default(),
            previous_rounds: r.previous_rounds.map(|p| p.0).unwrap_or_default(),
            person_answers: r.person_answers.map(|a| a.0).unwrap_or_default(),
        }),
    };
    Ok(Pickup { key, picked_up })
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

/// Reads what a respond plans from, in one statement (no lock: [`apply_respond`] applies the
/// plan only if the claim is still the one read here).
pub async fn respond_snapshot(
    conn: &mut PgConnection,
    key_hash: &[u8],
    agent_id: Option<Uuid>,
    task_id: Uuid,
    claim_generation: Option<i64>,
) -> anyhow::Result<RespondSnapshot> {
    let r = sqlx::query!(
        r#"SELECT k.auth AS "auth!: KeyAuth", k.agent_id AS key_agent_id, k.owner_user_id AS key_owner_user_id,
                  t.task_id AS "task_id?", t.conversation_id AS "conversation_id?",
                  t.opportunity_id AS "opportunity_id?", t.state AS "state?: TaskState",
                  t.source_user_id AS "source_user_id?", t.candidate_user_id AS "candidate_user_id?",
                  t.source_kind AS "source_kind?: SideKind", t.candidate_kind AS "candidate_kind?: SideKind",
                  t.source_context AS "source_context?", t.candidate_context AS "candidate_context?",
                  t.seed_assessment AS "seed_assessment?", t.index_context, t.discovery_query,
                  t.max_turns AS "max_turns?", t.turn_count AS "turn_count?", t.awaiting_user_id,
                  t.first_parked_at, t.claim_agent_id, t.claim_generation AS "claim_generation?",
                  t.claim_expires_at, t.created_at AS "created_at?", t.updated_at AS "updated_at?", t.completed_at,
                  o.status AS "opportunity_status?: OpportunityStatus",
                  CASE WHEN t.task_id IS NOT NULL THEN parley_history(t.task_id) END AS "history?: Json<Vec<Turn>>",
                  r.turn_number AS "replay_turn_number?", r.request_hash AS replay_request_hash,
                  r.response AS replay_response
           FROM parley_agent_of_key($1, $2) k
           LEFT JOIN tasks t ON k.auth = 'ok' AND t.task_id = $3
                            AND (t.source_user_id = k.owner_user_id OR t.candidate_user_id = k.owner_user_id)
           LEFT JOIN opportunities o ON o.opportunity_id = t.opportunity_id
           LEFT JOIN messages r ON r.task_id = t.task_id AND r.claim_generation = $4"#,
        key_hash,
        agent_id,
        task_id,
        claim_generation
    )
    .fetch_one(conn)
    .await?;
    let replay = match r.replay_turn_number {
        None => None,
        Some(n) => Some(Replay {
            turn_number: u32::try_from(n)?,
            request_hash: r.replay_request_hash.clone(),
            response: r.replay_response.clone(),
        }),
    };
    Ok(RespondSnapshot {
        key: KeyCheck::from_parts(r.auth, r.key_agent_id, r.key_owner_user_id.clone())?,
        task: optional_task!(r),
        history: r.history.map(|h| h.0).unwrap_or_default(),
        opportunity_status: r.opportunity_status,
        replay,
    })
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
    Ok(sqlx::query_scalar!(
        r#"SELECT parley_respond($1, $2, $3, $4, $5, $6, $7, $8, $9) AS "applied!""#,
        a.key_hash,
        a.task_id,
        a.agent_id,
        a.generation,
        i32::try_from(a.turn_count)?,
        // `jsonb`, which the macro checks against `serde_json::Value`: the turns are encoded as
        // JSON straight from their rows instead (what `parley_store_turns` reads is its doc).
        Json(&a.turns) as _,
        park_user,
        park_timeout.map(interval).transpose()?,
        parley_jobs::new_timer_id()
    )
    .fetch_one(conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::store::sql_source::{case_words, function_source, in_lists, snake_name, without_comments, words_after};

    fn names(states: impl IntoIterator<Item = TaskState>) -> BTreeSet<String> {
        states.into_iter().map(|s| s.as_str().to_owned()).collect()
    }

    #[test]
    fn every_word_the_key_check_answers_is_a_key_auth() {
        let answered = case_words(&function_source("parley_agent_of_key"), "SELECT CASE");
        let typed: BTreeSet<String> = KeyAuth::ALL.iter().map(snake_name).collect();
        assert_eq!(answered, typed);
    }

    #[test]
    fn every_state_the_turn_statements_name_is_a_task_state() {
        for f in ["parley_pickup", "parley_respond", "parley_park"] {
            let sql = function_source(f);
            let mut named = words_after(&sql, "state =");
            named.extend(words_after(&sql, "state <>"));
            if let Some(at) = sql.find("state = CASE") {
                named.extend(case_words(&sql[at..], "CASE"));
            }
            assert!(!named.is_empty(), "{f} names no state");
            for name in named {
                assert!(TaskState::parse(&name).is_some(), "{f} names the state {name:?}");
            }
        }
    }

    #[test]
    fn the_terminal_states_in_the_sql_are_the_tables() {
        let terminal = names(TaskState::ALL.into_iter().filter(|s| s.is_terminal()));
        let live = names(TaskState::ALL.into_iter().filter(|s| !s.is_terminal()));
        let is_states = |list: &BTreeSet<String>| list.iter().any(|w| TaskState::parse(w).is_some());
        // The queue depth counts the live states (`task_counts`), in the function and its trigger.
        let counted: Vec<_> =
            in_lists(&function_source("parley_count_active_tasks")).into_iter().filter(is_states).collect();
        assert_eq!(counted.len(), 4, "the count tests its states four times");
        for list in counted {
            assert_eq!(list, live);
        }
        // The store's own statements: an end stamps `completed_at`, and the ended lists.
        let tasks = without_comments(include_str!("tasks.rs"));
        let lists: Vec<_> = in_lists(&tasks).into_iter().filter(is_states).collect();
        assert!(lists.contains(&terminal), "tasks.rs names the terminal states");
        for list in lists {
            let known = names(list.iter().filter_map(|w| TaskState::parse(w)));
            assert_eq!(known, list, "tasks.rs names a state the table lacks");
            assert!(list.is_subset(&terminal) || list.is_subset(&live), "{list:?} mixes ended and live states");
        }
    }

    #[test]
    fn the_sql_transitions_are_the_tables() {
        for (from, event, to) in TRANSITIONS {
            assert_eq!(from.transition(event).ok(), Some(to), "{from:?} + {event:?}");
        }
    }
}
