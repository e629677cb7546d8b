//! Tasks: the negotiation itself, its state, its sides and its claim.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::CorruptRow;
use crate::domain::{Side, SideKind, TaskState, UserContext};

/// A task row, decoded.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task id = the negotiation id.
    pub id: Uuid,
    /// The A2A context.
    pub conversation_id: Uuid,
    /// The opportunity it decides.
    pub opportunity_id: Uuid,
    /// Where it is.
    pub state: TaskState,
    /// The source user's id.
    pub source_user_id: String,
    /// The candidate user's id.
    pub candidate_user_id: String,
    /// Who plays the source side.
    pub source_kind: SideKind,
    /// Who plays the candidate side.
    pub candidate_kind: SideKind,
    /// The source user's full context.
    pub source_context: serde_json::Value,
    /// The candidate user's full context.
    pub candidate_context: serde_json::Value,
    /// The evaluator's assessment.
    pub seed_assessment: serde_json::Value,
    /// The platform's index context, if any.
    pub index_context: Option<serde_json::Value>,
    /// What the source user searched for.
    pub discovery_query: Option<String>,
    /// Turn cap (0 = unlimited).
    pub max_turns: u32,
    /// Turns taken.
    pub turn_count: u32,
    /// Parked/claimed: whose agent the turn waits for.
    pub awaiting_user_id: Option<String>,
    /// Parked/claimed: when this turn was first parked.
    pub first_parked_at: Option<DateTime<Utc>>,
    /// Claimed: the holder.
    pub claim_agent_id: Option<Uuid>,
    /// Increases with every claim.
    pub claim_generation: i64,
    /// Claimed: when the claim lapses.
    pub claim_expires_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
}

impl Task {
    /// The user of a side.
    pub fn user_id(&self, side: Side) -> &str {
        match side {
            Side::Source => &self.source_user_id,
            Side::Candidate => &self.candidate_user_id,
        }
    }

    /// Who plays a side.
    pub fn kind(&self, side: Side) -> SideKind {
        match side {
            Side::Source => self.source_kind,
            Side::Candidate => self.candidate_kind,
        }
    }

    /// A side's context document.
    pub fn context(&self, side: Side) -> anyhow::Result<UserContext> {
        let raw = match side {
            Side::Source => &self.source_context,
            Side::Candidate => &self.candidate_context,
        };
        Ok(serde_json::from_value(raw.clone())?)
    }

    /// A side's display name, when the platform gave one.
    pub fn user_name(&self, side: Side) -> Option<String> {
        let raw = match side {
            Side::Source => &self.source_context,
            Side::Candidate => &self.candidate_context,
        };
        raw.get("name").and_then(serde_json::Value::as_str).map(str::to_owned)
    }

    /// How a side's user is named to people: the platform's name, else the user id.
    pub fn display_name(&self, side: Side) -> String {
        self.user_name(side).filter(|n| !n.trim().is_empty()).unwrap_or_else(|| self.user_id(side).to_owned())
    }

    /// The side a user sits on, if they take part.
    pub fn side_of(&self, user_id: &str) -> Option<Side> {
        if self.source_user_id == user_id {
            Some(Side::Source)
        } else if self.candidate_user_id == user_id {
            Some(Side::Candidate)
        } else {
            None
        }
    }
}

/// A task row as read, its vocabularies typed (a stored name none of theirs fails the read).
/// Its fields are `tasks`' columns: the turn statements build it from theirs.
pub(crate) struct Row {
    pub(super) task_id: Uuid,
    pub(super) conversation_id: Uuid,
    pub(super) opportunity_id: Uuid,
    pub(super) state: TaskState,
    pub(super) source_user_id: String,
    pub(super) candidate_user_id: String,
    pub(super) source_kind: SideKind,
    pub(super) candidate_kind: SideKind,
    pub(super) source_context: serde_json::Value,
    pub(super) candidate_context: serde_json::Value,
    pub(super) seed_assessment: serde_json::Value,
    pub(super) index_context: Option<serde_json::Value>,
    pub(super) discovery_query: Option<String>,
    pub(super) max_turns: i32,
    pub(super) turn_count: i32,
    pub(super) awaiting_user_id: Option<String>,
    pub(super) first_parked_at: Option<DateTime<Utc>>,
    pub(super) claim_agent_id: Option<Uuid>,
    pub(super) claim_generation: i64,
    pub(super) claim_expires_at: Option<DateTime<Utc>>,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
    pub(super) completed_at: Option<DateTime<Utc>>,
}

impl TryFrom<Row> for Task {
    type Error = CorruptRow;
    fn try_from(r: Row) -> Result<Self, CorruptRow> {
        let count = |what, n: i32| u32::try_from(n).map_err(|_| CorruptRow { what, value: n.to_string() });
        Ok(Task {
            id: r.task_id,
            conversation_id: r.conversation_id,
            opportunity_id: r.opportunity_id,
            state: r.state,
            source_user_id: r.source_user_id,
            candidate_user_id: r.candidate_user_id,
            source_kind: r.source_kind,
            candidate_kind: r.candidate_kind,
            source_context: r.source_context,
            candidate_context: r.candidate_context,
            seed_assessment: r.seed_assessment,
            index_context: r.index_context,
            discovery_query: r.discovery_query,
            max_turns: count("turn cap", r.max_turns)?,
            turn_count: count("turn count", r.turn_count)?,
            awaiting_user_id: r.awaiting_user_id,
            first_parked_at: r.first_parked_at,
            claim_agent_id: r.claim_agent_id,
            claim_generation: r.claim_generation,
            claim_expires_at: r.claim_expires_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
            completed_at: r.completed_at,
        })
    }
}

/// Fields of a new task.
pub struct NewTask<'a> {
    /// Task id.
    pub id: Uuid,
    /// Context id.
    pub conversation_id: Uuid,
    /// Opportunity id.
    pub opportunity_id: Uuid,
    /// Source user's context.
    pub source: &'a UserContext,
    /// Candidate user's context.
    pub candidate: &'a UserContext,
    /// Source side kind.
    pub source_kind: SideKind,
    /// Candidate side kind.
    pub candidate_kind: SideKind,
    /// Seed assessment.
    pub seed_assessment: &'a serde_json::Value,
    /// Index context.
    pub index_context: Option<&'a serde_json::Value>,
    /// Discovery query.
    pub discovery_query: Option<&'a str>,
    /// Turn cap.
    pub max_turns: u32,
    /// Which round of the opportunity's negotiation this is (0 = the first).
    pub round: u32,
    /// The earlier rounds (`[PreviousRound]`), for a later round.
    pub previous_rounds: Option<&'a serde_json::Value>,
}

/// Inserts a `submitted` task.
pub async fn insert(conn: &mut PgConnection, t: &NewTask<'_>) -> anyhow::Result<()> {
    sqlx::query!(
        r#"INSERT INTO tasks (task_id, conversation_id, opportunity_id, state, source_user_id, candidate_user_id,
                              source_kind, candidate_kind, source_context, candidate_context, seed_assessment,
                              index_context, discovery_query, max_turns, round, previous_rounds)
           VALUES ($1, $2, $3, 'submitted', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"#,
        t.id,
        t.conversation_id,
        t.opportunity_id,
        t.source.id,
        t.candidate.id,
        t.source_kind.as_str(),
        t.candidate_kind.as_str(),
        serde_json::to_value(t.source)?,
        serde_json::to_value(t.candidate)?,
        t.seed_assessment,
        t.index_context,
        t.discovery_query,
        i32::try_from(t.max_turns)?,
        i32::try_from(t.round)?,
        t.previous_rounds,
    )
    .execute(conn)
    .await?;
    Ok(())
}

macro_rules! select_task {
    ($tail:literal $(+ $more:literal)*, $($arg:expr),*) => {
        sqlx::query_as!(
            Row,
            r#"SELECT task_id, conversation_id, opportunity_id, state AS "state: TaskState", source_user_id,
                      candidate_user_id, source_kind AS "source_kind: SideKind",
                      candidate_kind AS "candidate_kind: SideKind", source_context, candidate_context, seed_assessment,
                      index_context, discovery_query, max_turns, turn_count, awaiting_user_id, first_parked_at,
                      claim_agent_id, claim_generation, claim_expires_at,
                      created_at, updated_at, completed_at
               FROM tasks "# + $tail $(+ $more)*,
            $($arg),*
        )
    };
}

/// Loads a task.
pub async fn get(conn: &mut PgConnection, id: Uuid) -> anyhow::Result<Option<Task>> {
    let row = select_task!("WHERE task_id = $1", id).fetch_optional(conn).await?;
    Ok(row.map(Task::try_from).transpose()?)
}

/// Loads a task and locks its row until the transaction ends: every state change of a task
/// happens under this lock, so concurrent turns, claims and timers serialise on it.
pub async fn lock(conn: &mut PgConnection, id: Uuid) -> anyhow::Result<Option<Task>> {
    let row = select_task!("WHERE task_id = $1 FOR UPDATE", id).fetch_optional(conn).await?;
    Ok(row.map(Task::try_from).transpose()?)
}

/// The display names the platform gave the two users of each of these tasks (source, candidate),
/// where it gave them: what the views show instead of bare user ids.
pub async fn user_names(
    conn: &mut PgConnection,
    task_ids: &[Uuid],
) -> sqlx::Result<std::collections::HashMap<Uuid, (Option<String>, Option<String>)>> {
    let rows = sqlx::query!(
        r#"SELECT task_id, source_context->>'name' AS "source_name", candidate_context->>'name' AS "candidate_name"
           FROM tasks WHERE task_id = ANY($1)"#,
        task_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.task_id, (r.source_name, r.candidate_name))).collect())
}

/// Loads the task that decides an opportunity now: its latest round's.
pub async fn for_opportunity(conn: &mut PgConnection, opportunity_id: Uuid) -> anyhow::Result<Option<Task>> {
    let row = select_task!("WHERE opportunity_id = $1 ORDER BY round DESC LIMIT 1", opportunity_id)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(Task::try_from).transpose()?)
}

/// The latest round of an opportunity's negotiation: its task id, its round number (0 = the
/// first) and the rounds before it as that task carries them (`None` in a first round).
pub async fn latest_round(
    conn: &mut PgConnection,
    opportunity_id: Uuid,
) -> sqlx::Result<Option<(Uuid, u32, Option<serde_json::Value>)>> {
    let row = sqlx::query!(
        r#"SELECT task_id, round, previous_rounds FROM tasks WHERE opportunity_id = $1 ORDER BY round DESC LIMIT 1"#,
        opportunity_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.task_id, u32::try_from(r.round).unwrap_or(0), r.previous_rounds)))
}

/// The rounds of an opportunity's negotiation, oldest first: each one's task id and round number
/// (0 = the first).
pub async fn rounds(conn: &mut PgConnection, opportunity_id: Uuid) -> sqlx::Result<Vec<(Uuid, u32)>> {
    let rows =
        sqlx::query!(r#"SELECT task_id, round FROM tasks WHERE opportunity_id = $1 ORDER BY round"#, opportunity_id)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().map(|r| (r.task_id, u32::try_from(r.round).unwrap_or(0))).collect())
}

/// Moves a locked task to `to` (from `from`), clearing parking and claim fields unless the new
/// state keeps them, and recording the turn count.
pub async fn set_state(
    conn: &mut PgConnection,
    id: Uuid,
    from: TaskState,
    to: TaskState,
    turn_count: u32,
) -> anyhow::Result<()> {
    let r = sqlx::query!(
        r#"UPDATE tasks SET state = $3, turn_count = $4, updated_at = now(),
                  awaiting_user_id = CASE WHEN $3 IN ('waiting_for_agent', 'claimed', 'waiting_for_person') THEN awaiting_user_id END,
                  first_parked_at = CASE WHEN $3 IN ('waiting_for_agent', 'claimed', 'waiting_for_person') THEN first_parked_at END,
                  claim_agent_id = NULL, claim_expires_at = NULL,
                  completed_at = CASE WHEN $3 IN ('completed', 'canceled', 'failed') THEN now() END
           WHERE task_id = $1 AND state = $2"#,
        id,
        from.as_str(),
        to.as_str(),
        i32::try_from(turn_count)?,
    )
    .execute(conn)
    .await?;
    anyhow::ensure!(r.rows_affected() == 1, "task {id} was not in state {from}");
    Ok(())
}

/// A locked task waiting for its person goes back to waiting for its agent (same turn), its park
/// window moved on by the time since `asked_at` (the turn's deadline was suspended meanwhile).
/// Returns the turn's moved first parking.
pub async fn back_from_person(
    conn: &mut PgConnection,
    id: Uuid,
    asked_at: DateTime<Utc>,
) -> anyhow::Result<DateTime<Utc>> {
    let moved = sqlx::query_scalar!(
        r#"UPDATE tasks SET state = 'waiting_for_agent', updated_at = now(),
                  first_parked_at = coalesce(first_parked_at, now()) + greatest(now() - $2, interval '0')
            WHERE task_id = $1 AND state = 'waiting_for_person'
           RETURNING first_parked_at AS "first_parked_at!""#,
        id,
        asked_at
    )
    .fetch_optional(conn)
    .await?;
    moved.ok_or_else(|| anyhow::anyhow!("task {id} was not waiting for its person"))
}

/// The system negotiator of a locked `working` task asks `user_id`, the person it plays for:
/// `working -> waiting_for_person`, awaiting that person, under the next claim generation (the
/// question's own: no claim is made under it). Returns that generation.
pub async fn system_asks(conn: &mut PgConnection, id: Uuid, user_id: &str) -> anyhow::Result<i64> {
    let generation = sqlx::query_scalar!(
        r#"UPDATE tasks SET state = 'waiting_for_person', awaiting_user_id = $2,
                  claim_generation = claim_generation + 1, updated_at = now()
            WHERE task_id = $1 AND state = 'working'
           RETURNING claim_generation"#,
        id,
        user_id
    )
    .fetch_optional(conn)
    .await?;
    generation.ok_or_else(|| anyhow::anyhow!("task {id} was not working"))
}

/// Arms the A2A turn job when one of `user_id`'s negotiating agents is one Parley calls
/// (`parley_a2a_turn_parked`): for a turn parked again outside `parley_park`.
pub async fn a2a_turn_parked(conn: &mut PgConnection, id: Uuid, user_id: &str, turn: u32) -> anyhow::Result<()> {
    sqlx::query!("SELECT parley_a2a_turn_parked($1, $2, $3)", id, user_id, i32::try_from(turn)?).execute(conn).await?;
    Ok(())
}

/// Parks a locked `working` task for `user_id`'s personal agent at turn `turn_count`
/// (`parley_park`): the state, the park timer when `park_timeout` is given (mixed negotiations),
/// and the wake-up of that user's long-polls at commit. Returns when the turn was first parked.
pub async fn park(
    conn: &mut PgConnection,
    id: Uuid,
    user_id: &str,
    turn_count: u32,
    park_timeout: Option<std::time::Duration>,
) -> anyhow::Result<DateTime<Utc>> {
    let parked_at = sqlx::query_scalar!(
        r#"SELECT parley_park($1, $2, $3, $4, $5) AS "parked_at!""#,
        id,
        user_id,
        i32::try_from(turn_count)?,
        park_timeout.map(super::interval).transpose()?,
        parley_jobs::new_timer_id()
    )
    .fetch_one(conn)
    .await?;
    Ok(parked_at)
}

/// Number of tasks not yet in a terminal state (the hub's queue depth).
/// Kept exact by triggers in `task_counts` (16 rows summed), so reading it does not grow with
/// the number of active tasks.
pub async fn count_active(conn: &mut PgConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT coalesce(sum(active), 0)::bigint AS "active!" FROM task_counts"#)
        .fetch_one(conn)
        .await
}

/// Tasks left in `submitted`/`working` (a crash between turns); the recovery pass resumes them.
pub async fn list_runnable(conn: &mut PgConnection, older_than: DateTime<Utc>) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        "SELECT task_id FROM tasks WHERE state IN ('submitted', 'working') AND updated_at < $1 ORDER BY task_id",
        older_than
    )
    .fetch_all(conn)
    .await
}

/// Moves a locked claim's expiry.
pub async fn extend_claim(conn: &mut PgConnection, id: Uuid, expires_at: DateTime<Utc>) -> anyhow::Result<()> {
    let r = sqlx::query!(
        "UPDATE tasks SET claim_expires_at = $2, updated_at = now() WHERE task_id = $1 AND state = 'claimed'",
        id,
        expires_at
    )
    .execute(conn)
    .await?;
    anyhow::ensure!(r.rows_affected() == 1, "task {id} was not claimed");
    Ok(())
}

/// Which of a user's negotiations a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Those whose turn waits for the user (`waiting_for_agent` or `claimed` for them).
    Awaiting,
    /// Those in progress (`submitted`, `working`, `waiting_for_agent`, `claimed`).
    Active,
    /// Those ended (`completed`, `canceled`, `failed`).
    Ended,
    /// All of them.
    All,
}

/// `select_task!` of the tasks whose ids the rest of the statement gives (an `ARRAY(...)` and
/// its closing), newest first. Each list below names its states literally, so that PostgreSQL
/// can prove it reads from a partial index with a generic plan as with a custom one.
macro_rules! list_tasks {
    ($ids:literal, $($arg:expr),*) => {
        select_task!("WHERE task_id = ANY(ARRAY(" + $ids + ")) ORDER BY task_id DESC", $($arg),*)
    };
}

/// The negotiations a user takes part in, newest first: at most `limit`, older than `before`
/// when given, and only those where `answered_by` answered a turn when given.
///
/// Read in the time of one page however long the user's history: the newest rows where the user
/// is the source and those where they are the candidate are read apart, each from its own index
/// in id order and limited to the page (a partial index of the active states for `Active`, of the
/// awaited turns for `Awaiting`), then merged. One condition over both columns
/// (`source_user_id = $1 OR candidate_user_id = $1`) walked the primary key backwards instead,
/// through every other negotiation newer than the user's.
pub async fn list_for_user(
    conn: &mut PgConnection,
    user_id: &str,
    listed: Listed,
    answered_by: Option<Uuid>,
    before: Option<Uuid>,
    limit: i64,
) -> anyhow::Result<Vec<Task>> {
    // A bound the index can seek to even in a generic plan (no id is greater).
    let before = before.unwrap_or(Uuid::max());
    let rows = match listed {
        Listed::Awaiting => {
            list_tasks!(
                "SELECT task_id FROM tasks
                  WHERE awaiting_user_id = $1 AND state IN ('waiting_for_agent', 'claimed') AND task_id < $2
                    AND (source_user_id = $1 OR candidate_user_id = $1)
                    AND ($4::uuid IS NULL
                         OR (SELECT true FROM messages m WHERE m.task_id = tasks.task_id AND m.agent_id = $4 LIMIT 1))
                  ORDER BY task_id DESC LIMIT $3",
                user_id,
                before,
                limit,
                answered_by
            )
            .fetch_all(conn)
            .await?
        }
        Listed::Active => {
            list_tasks!(
                "(SELECT task_id FROM tasks
                   WHERE source_user_id = $1 AND state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person')
                     AND task_id < $2
                     AND ($4::uuid IS NULL
                          OR (SELECT true FROM messages m WHERE m.task_id = tasks.task_id AND m.agent_id = $4 LIMIT 1))
                   ORDER BY task_id DESC LIMIT $3)
                 UNION ALL
                 (SELECT task_id FROM tasks
                   WHERE candidate_user_id = $1 AND state IN ('submitted', 'working', 'waiting_for_agent', 'claimed', 'waiting_for_person')
                     AND source_user_id <> $1 AND task_id < $2
                     AND ($4::uuid IS NULL
                          OR (SELECT true FROM messages m WHERE m.task_id = tasks.task_id AND m.agent_id = $4 LIMIT 1))
                   ORDER BY task_id DESC LIMIT $3)
                 ORDER BY 1 DESC LIMIT $3",
                user_id,
                before,
                limit,
                answered_by
            )
            .fetch_all(conn)
            .await?
        }
        Listed::Ended if answered_by.is_none() => {
            list_tasks!(
                "(SELECT task_id FROM tasks
                   WHERE source_user_id = $1 AND state IN ('completed', 'canceled', 'failed') AND task_id < $2
                   ORDER BY task_id DESC LIMIT $3)
                 UNION ALL
                 (SELECT task_id FROM tasks
                   WHERE candidate_user_id = $1 AND state IN ('completed', 'canceled', 'failed')
                     AND source_user_id <> $1 AND task_id < $2
                   ORDER BY task_id DESC LIMIT $3)
                 ORDER BY 1 DESC LIMIT $3",
                user_id,
                before,
                limit
            )
            .fetch_all(conn)
            .await?
        }
        Listed::All if answered_by.is_none() => {
            list_tasks!(
                "(SELECT task_id FROM tasks
                   WHERE source_user_id = $1 AND task_id < $2
                   ORDER BY task_id DESC LIMIT $3)
                 UNION ALL
                 (SELECT task_id FROM tasks
                   WHERE candidate_user_id = $1 AND source_user_id <> $1 AND task_id < $2
                   ORDER BY task_id DESC LIMIT $3)
                 ORDER BY 1 DESC LIMIT $3",
                user_id,
                before,
                limit
            )
            .fetch_all(conn)
            .await?
        }
        Listed::Ended | Listed::All => {
            // The turns the agent answered, newest task first, from their index (one agent's
            // turns are all of its owner's negotiations): a page of them however long the
            // owner's history.
            let states: &[&str] = match listed {
                Listed::Ended => &["completed", "canceled", "failed"],
                _ => &["submitted", "working", "waiting_for_agent", "claimed", "completed", "canceled", "failed"],
            };
            let states: Vec<String> = states.iter().map(|s| (*s).to_owned()).collect();
            list_tasks!(
                "SELECT t.task_id
                   FROM (SELECT DISTINCT m.task_id FROM messages m
                          WHERE m.agent_id = $4 AND m.task_id < $2 ORDER BY m.task_id DESC) m
                   JOIN LATERAL (SELECT x.task_id FROM tasks x
                                  WHERE x.task_id = m.task_id AND (x.source_user_id = $1 OR x.candidate_user_id = $1)
                                    AND x.state = ANY($5)) t ON true
                  ORDER BY m.task_id DESC LIMIT $3",
                user_id,
                before,
                limit,
                answered_by,
                &states
            )
            .fetch_all(conn)
            .await?
        }
    };
    Ok(rows.into_iter().map(Task::try_from).collect::<Result<_, _>>()?)
}

/// How many turns `agent_id` answered in each of `task_ids` (tasks it answered none in are absent).
pub async fn turns_answered_by(
    conn: &mut PgConnection,
    agent_id: Uuid,
    task_ids: &[Uuid],
) -> sqlx::Result<std::collections::HashMap<Uuid, i64>> {
    let rows = sqlx::query!(
        r#"SELECT task_id, count(*) AS "turns!" FROM messages
            WHERE agent_id = $1 AND task_id = ANY($2) GROUP BY task_id"#,
        agent_id,
        task_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.task_id, r.turns)).collect())
}

/// The tasks an agent holds a claim on.
pub async fn claimed_by(conn: &mut PgConnection, agent_id: Uuid) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!("SELECT task_id FROM tasks WHERE state = 'claimed' AND claim_agent_id = $1", agent_id)
        .fetch_all(conn)
        .await
}
