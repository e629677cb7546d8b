//! Messages (one per turn) and artifacts (the outcome), the A2A record of a negotiation.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{CorruptRow, parse_enum};
use crate::domain::{Action, DecidedBy, FallbackReason, Outcome, Played, Side, SideKind, SuggestedRoles, Turn};

/// The name of the artifact every completed negotiation carries exactly once.
pub const OUTCOME_ARTIFACT: &str = "negotiation-outcome";

/// A stored turn with its A2A envelope.
#[derive(Debug, Clone)]
pub struct StoredTurn {
    /// The message id.
    pub message_id: Uuid,
    /// The turn.
    pub turn: Turn,
    /// `agent:{userId}`.
    pub sender_id: String,
    /// The user the speaking agent represents.
    pub user_id: String,
    /// The message parts as stored.
    pub parts: serde_json::Value,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
}

impl StoredTurn {
    /// Who played it and how it was decided (always known for a stored turn).
    pub fn played(&self) -> Played {
        self.turn.played.clone().unwrap_or_else(|| Played::system(None, DecidedBy::Rules))
    }
}

/// The A2A sender id of a user's agent.
pub fn sender_id(user_id: &str) -> String {
    format!("agent:{user_id}")
}

/// The message parts of a turn: one data part with action, assessment and message.
pub fn turn_parts(turn: &Turn) -> serde_json::Value {
    json!([{
        "kind": "data",
        "data": {
            "action": turn.action,
            "assessment": { "reasoning": turn.reasoning, "suggestedRoles": turn.suggested_roles },
            "message": turn.message,
        }
    }])
}

/// A turn as `parley_store_turns` stores it (one element of its JSON array).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRow<'a> {
    /// The new message's id.
    pub message_id: Uuid,
    /// Its turn number.
    pub turn_number: u32,
    /// `source` or `candidate`.
    pub side: &'static str,
    /// The user whose agent spoke.
    pub user_id: &'a str,
    /// The action.
    pub action: &'static str,
    /// The message parts.
    pub parts: serde_json::Value,
    /// `personal` or `system`: the kind of seat the turn was played as.
    pub played_by: &'static str,
    /// Why a system turn stood in for a personal agent (`park_timeout`, `offline`, `hand_back`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<&'static str>,
    /// How a system turn was decided (`rules`, `model:<name>`); none for an agent's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The personal agent that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Uuid>,
    /// The generation of the claim it was answered under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_generation: Option<i64>,
    /// Hash of the respond body, hex (for idempotent retries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_hash: Option<String>,
    /// The answer given, when known as the turn is stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
}

impl<'a> TurnRow<'a> {
    /// A turn for `user_id`, played as its `played` says (a turn without it is the system's,
    /// by its rules), with a fresh message id.
    pub fn new(turn: &Turn, user_id: &'a str) -> TurnRow<'a> {
        let played = turn.played.clone().unwrap_or_else(|| Played::system(None, DecidedBy::Rules));
        TurnRow {
            message_id: Uuid::now_v7(),
            turn_number: turn.turn_number,
            side: turn.side.as_str(),
            user_id,
            action: turn.action.as_str(),
            parts: turn_parts(turn),
            played_by: played.seat().as_str(),
            fallback_reason: played.fallback_reason.map(FallbackReason::as_str),
            decided_by: (played.seat() == SideKind::System).then(|| played.decided_by.into()),
            agent_id: None,
            claim_generation: None,
            request_hash: None,
            response: None,
        }
    }
}

/// Stores turns (in order) and their `negotiation.turn` events (the action only, never scores)
/// through `parley_store_turns`, the one place turns are written. Fails with a unique violation
/// (`messages_task_turn_key`) if a turn number is already stored: a turn is never stored twice.
pub async fn store_turns(
    conn: &mut PgConnection,
    task: &super::tasks::Task,
    turns: &[TurnRow<'_>],
) -> anyhow::Result<()> {
    sqlx::query!(
        "SELECT parley_store_turns($1, $2, $3, $4, $5)",
        task.id,
        task.opportunity_id,
        task.source_user_id,
        task.candidate_user_id,
        // `jsonb`, which the macro checks against `serde_json::Value`: the rows are encoded as
        // JSON straight from their fields instead (their doc is what the function reads).
        sqlx::types::Json(turns) as _
    )
    .execute(conn)
    .await?;
    Ok(())
}

struct Row {
    message_id: Uuid,
    turn_number: i32,
    side: Side,
    sender_id: String,
    action: Action,
    parts: serde_json::Value,
    played_by: SideKind,
    fallback_reason: Option<String>,
    decided_by: Option<String>,
    created_at: DateTime<Utc>,
}

fn decode(r: Row) -> anyhow::Result<StoredTurn> {
    let (side, action, played_by) = (r.side, r.action, r.played_by);
    let data = &r.parts[0]["data"];
    let reasoning = data["assessment"]["reasoning"].as_str().unwrap_or_default().to_owned();
    let suggested_roles: SuggestedRoles = serde_json::from_value(data["assessment"]["suggestedRoles"].clone())
        .map_err(|_| CorruptRow { what: "message parts", value: r.parts.to_string() })?;
    let message = data["message"].as_str().map(str::to_owned);
    let played = match played_by {
        SideKind::Personal => Played::agent(),
        SideKind::System => {
            let fallback = r
                .fallback_reason
                .as_deref()
                .map(|f| parse_enum("fallback_reason", f, FallbackReason::parse))
                .transpose()?;
            // Turns stored before deciders were recorded were all the rules'.
            let decided_by = match r.decided_by {
                Some(d) => DecidedBy::try_from(d.clone()).map_err(|_| CorruptRow { what: "decided_by", value: d })?,
                None => DecidedBy::Rules,
            };
            Played::system(fallback, decided_by)
        }
    };
    let user_id = r.sender_id.strip_prefix("agent:").unwrap_or(&r.sender_id).to_owned();
    Ok(StoredTurn {
        message_id: r.message_id,
        turn: Turn {
            turn_number: u32::try_from(r.turn_number)?,
            side,
            action,
            reasoning,
            suggested_roles,
            message,
            played: Some(played),
        },
        sender_id: r.sender_id,
        user_id,
        parts: r.parts,
        created_at: r.created_at,
    })
}

/// All turns of a task, in order.
pub async fn turns(conn: &mut PgConnection, task_id: Uuid) -> anyhow::Result<Vec<StoredTurn>> {
    let rows = sqlx::query_as!(
        Row,
        r#"SELECT message_id, turn_number, side AS "side: Side", sender_id, action AS "action: Action", parts,
                  played_by AS "played_by: SideKind", fallback_reason, decided_by, created_at
           FROM messages WHERE task_id = $1 ORDER BY turn_number"#,
        task_id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(decode).collect()
}

/// A stored artifact.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// Its id.
    pub artifact_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its parts.
    pub parts: serde_json::Value,
    /// Its metadata.
    pub metadata: serde_json::Value,
}

/// Stores the outcome artifact. The unique (task, name) constraint makes a second outcome fail.
pub async fn insert_outcome(conn: &mut PgConnection, task_id: Uuid, outcome: &Outcome) -> anyhow::Result<()> {
    let parts = json!([{ "kind": "data", "data": outcome }]);
    sqlx::query!(
        r#"INSERT INTO artifacts (artifact_id, task_id, name, parts, metadata) VALUES ($1, $2, $3, $4, $5)"#,
        Uuid::now_v7(),
        task_id,
        OUTCOME_ARTIFACT,
        parts,
        json!({ "hasOpportunity": outcome.has_opportunity }),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The artifacts of a task.
pub async fn artifacts(conn: &mut PgConnection, task_id: Uuid) -> anyhow::Result<Vec<Artifact>> {
    Ok(sqlx::query_as!(
        Artifact,
        "SELECT artifact_id, name, parts, metadata FROM artifacts WHERE task_id = $1 ORDER BY created_at, artifact_id",
        task_id
    )
    .fetch_all(conn)
    .await?)
}

/// The outcome among a task's artifacts, if it has ended with one.
pub fn outcome_of(artifacts: &[Artifact]) -> anyhow::Result<Option<Outcome>> {
    match artifacts.iter().find(|a| a.name == OUTCOME_ARTIFACT) {
        None => Ok(None),
        Some(a) => Ok(Some(serde_json::from_value(a.parts[0]["data"].clone())?)),
    }
}

/// The outcome of a task, if it has ended with one.
pub async fn outcome(conn: &mut PgConnection, task_id: Uuid) -> anyhow::Result<Option<Outcome>> {
    let parts =
        sqlx::query_scalar!("SELECT parts FROM artifacts WHERE task_id = $1 AND name = $2", task_id, OUTCOME_ARTIFACT)
            .fetch_optional(conn)
            .await?;
    match parts {
        None => Ok(None),
        Some(p) => Ok(Some(serde_json::from_value(p[0]["data"].clone())?)),
    }
}

/// Records the answer given for a turn, so that a retry gets the same one.
///
/// Committed without waiting for the WAL flush (`synchronous_commit = off` for this one
/// transaction): the answer is a cache, and a respond retried after a database crash that lost
/// it recomputes it from the task (as it does after a crash just before this write). This saves
/// one flush wait per respond. Call it outside any transaction.
pub async fn set_response(conn: &mut PgConnection, message_id: Uuid, response: &serde_json::Value) -> sqlx::Result<()> {
    use sqlx::Connection;
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await?;
    sqlx::query!("UPDATE messages SET response = $2 WHERE message_id = $1", message_id, response)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The outcomes of these tasks, where they have one.
pub async fn outcomes_for(
    conn: &mut PgConnection,
    task_ids: &[Uuid],
) -> anyhow::Result<std::collections::HashMap<Uuid, Outcome>> {
    let rows = sqlx::query!(
        "SELECT task_id, parts FROM artifacts WHERE task_id = ANY($1) AND name = $2",
        task_ids,
        OUTCOME_ARTIFACT
    )
    .fetch_all(conn)
    .await?;
    let mut out = std::collections::HashMap::new();
    for r in rows {
        out.insert(r.task_id, serde_json::from_value(r.parts[0]["data"].clone())?);
    }
    Ok(out)
}
