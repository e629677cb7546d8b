//! Questions a personal agent asked its person (`ask_person`): one row each, written in the
//! transaction that releases the claim and puts the turn in `waiting_for_person`, closed in the
//! one that answers it or ends its window. They belong to the asking side: every read here is
//! by the asking person, the asking agent's own pickup, or the service.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::Side;

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, sqlx::Type, utoipa::ToSchema)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum QuestionStatus {
    /// Waiting for the person.
    Pending,
    /// The person answered.
    Answered,
    /// The answer window ran out.
    Unanswered,
    /// The negotiation ended before the person answered.
    Withdrawn,
}

/// A stored question.
#[derive(Debug, Clone)]
pub struct Question {
    /// Its id.
    pub id: Uuid,
    /// The negotiation.
    pub task_id: Uuid,
    /// The asking person.
    pub user_id: String,
    /// The claim it was asked under.
    pub claim_generation: i64,
    /// Hash of the respond body that asked it.
    pub request_hash: Vec<u8>,
    /// The respond answer given to the agent.
    pub response: Option<Value>,
    /// The question (at most 500 characters).
    pub question: String,
    /// The options offered (possibly none).
    pub options: Vec<String>,
    /// Where it stands.
    pub status: QuestionStatus,
    /// The person's answer, once answered.
    pub answer: Option<String>,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// When its window ends.
    pub expires_at: DateTime<Utc>,
    /// When it was answered or ran out.
    pub answered_at: Option<DateTime<Utc>>,
}

/// A closed question as the asking side's next pickup of its turn carries it (read by the
/// pickup's statement, `parley_pickup`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersonAnswer {
    /// The question's id.
    pub question_id: Uuid,
    /// The question as asked.
    pub question: String,
    /// The options offered (possibly none).
    #[serde(default)]
    pub options: Vec<String>,
    /// The person's answer; `None` when the answer window ran out.
    pub answer: Option<String>,
    /// When the person answered; `None` when the window ran out.
    pub answered_at: Option<DateTime<Utc>>,
}

/// A question to store.
pub struct NewQuestion<'a> {
    /// Its id.
    pub id: Uuid,
    /// The negotiation.
    pub task_id: Uuid,
    /// The asking side.
    pub side: Side,
    /// The asking person.
    pub user_id: &'a str,
    /// The asking agent (`None`: the system negotiator asks).
    pub agent_id: Option<Uuid>,
    /// The turn.
    pub turn_number: u32,
    /// The claim it is asked under.
    pub claim_generation: i64,
    /// Hash of the respond body.
    pub request_hash: &'a [u8],
    /// The respond answer given to the agent (for a repeated ask); `None` for the system's.
    pub response: Option<&'a Value>,
    /// The question.
    pub question: &'a str,
    /// The options.
    pub options: &'a [String],
    /// When its window ends.
    pub expires_at: DateTime<Utc>,
}

macro_rules! select_question {
    ($tail:literal $(, $arg:expr)*) => {
        sqlx::query!(
            r#"SELECT question_id, task_id, user_id, claim_generation, request_hash, response,
                      question, options, status AS "status: QuestionStatus", answer, asked_at, expires_at, answered_at
               FROM person_questions "# + $tail $(, $arg)*
        )
    };
}

macro_rules! question_of {
    ($r:ident) => {
        Question {
            id: $r.question_id,
            task_id: $r.task_id,
            user_id: $r.user_id,
            claim_generation: $r.claim_generation,
            request_hash: $r.request_hash,
            response: $r.response,
            question: $r.question,
            options: serde_json::from_value($r.options).unwrap_or_default(),
            status: $r.status,
            answer: $r.answer,
            asked_at: $r.asked_at,
            expires_at: $r.expires_at,
            answered_at: $r.answered_at,
        }
    };
}

/// Stores a new pending question.
pub async fn insert(conn: &mut PgConnection, q: &NewQuestion<'_>) -> anyhow::Result<()> {
    sqlx::query!(
        r#"INSERT INTO person_questions (question_id, task_id, side, user_id, agent_id, turn_number, claim_generation,
                                        request_hash, response, question, options, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"#,
        q.id,
        q.task_id,
        q.side.as_str(),
        q.user_id,
        q.agent_id,
        i32::try_from(q.turn_number)?,
        q.claim_generation,
        q.request_hash,
        q.response,
        q.question,
        serde_json::to_value(q.options)?,
        q.expires_at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The question asked under claim `generation` of a task, if any (a repeated ask).
pub async fn by_claim(conn: &mut PgConnection, task_id: Uuid, generation: i64) -> sqlx::Result<Option<Question>> {
    let r = select_question!("WHERE task_id = $1 AND claim_generation = $2", task_id, generation)
        .fetch_optional(conn)
        .await?;
    Ok(r.map(|r| question_of!(r)))
}

/// How many questions `side` has asked in a task.
pub async fn count_for_side(conn: &mut PgConnection, task_id: Uuid, side: Side) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM person_questions WHERE task_id = $1 AND side = $2"#,
        task_id,
        side.as_str()
    )
    .fetch_one(conn)
    .await
}

/// The pending question of a task, locked (at most one is pending).
pub async fn lock_pending(conn: &mut PgConnection, task_id: Uuid) -> sqlx::Result<Option<Question>> {
    let r =
        select_question!("WHERE task_id = $1 AND status = 'pending' FOR UPDATE", task_id).fetch_optional(conn).await?;
    Ok(r.map(|r| question_of!(r)))
}

/// A question of a task, locked.
pub async fn lock(conn: &mut PgConnection, task_id: Uuid, question_id: Uuid) -> sqlx::Result<Option<Question>> {
    let r = select_question!("WHERE task_id = $1 AND question_id = $2 FOR UPDATE", task_id, question_id)
        .fetch_optional(conn)
        .await?;
    Ok(r.map(|r| question_of!(r)))
}

/// Closes a pending question: answered with `answer`, or unanswered when `None`.
pub async fn close(conn: &mut PgConnection, question_id: Uuid, answer: Option<&str>) -> anyhow::Result<()> {
    let r = sqlx::query!(
        r#"UPDATE person_questions
              SET status = CASE WHEN $2::text IS NULL THEN 'unanswered' ELSE 'answered' END,
                  answer = $2, answered_at = now()
            WHERE question_id = $1 AND status = 'pending'"#,
        question_id,
        answer
    )
    .execute(conn)
    .await?;
    anyhow::ensure!(r.rows_affected() == 1, "question {question_id} was not pending");
    Ok(())
}

/// The closed questions (answered or not) of a task's turn, asked by `side`, oldest first: what
/// the system negotiator's next try at that turn reads (an agent's pickup reads the same in its
/// own statement).
pub async fn closed_for_turn(
    conn: &mut PgConnection,
    task_id: Uuid,
    turn_number: u32,
    side: Side,
) -> anyhow::Result<Vec<Question>> {
    let rows = select_question!(
        "WHERE task_id = $1 AND turn_number = $2 AND side = $3 AND status IN ('answered', 'unanswered')
           ORDER BY asked_at",
        task_id,
        i32::try_from(turn_number)?,
        side.as_str()
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| question_of!(r)).collect())
}

/// Withdraws the pending question of a locked task that is ending (at most one is pending):
/// part of the one way a negotiation ends. Returns whether one was pending.
pub async fn withdraw_pending(conn: &mut PgConnection, task_id: Uuid) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        "UPDATE person_questions SET status = 'withdrawn', answered_at = now()
          WHERE task_id = $1 AND status = 'pending'",
        task_id
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() > 0)
}

/// The pending questions of these tasks that `user_id` asked (all askers' when `None`: the
/// service), by task. Only a task still waiting for its person holds one up: a negotiation
/// cancelled or ended by its deadline meanwhile leaves its question unanswerable, and unshown.
pub async fn pending_for_tasks(
    conn: &mut PgConnection,
    task_ids: &[Uuid],
    user_id: Option<&str>,
) -> sqlx::Result<std::collections::HashMap<Uuid, Question>> {
    let rows = select_question!(
        "WHERE task_id = ANY($1) AND status = 'pending' AND ($2::text IS NULL OR user_id = $2)
           AND EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = person_questions.task_id AND t.state = 'waiting_for_person')",
        task_ids,
        user_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.task_id, question_of!(r))).collect())
}
