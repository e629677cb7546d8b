//! Conversations (A2A contexts) and their participants.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::messages::sender_id;
use crate::domain::Side;

/// Creates a conversation for an opportunity with the two `agent:{userId}` participants.
pub async fn insert(
    conn: &mut PgConnection,
    id: Uuid,
    opportunity_id: Uuid,
    source_user_id: &str,
    candidate_user_id: &str,
) -> anyhow::Result<()> {
    sqlx::query!("INSERT INTO conversations (conversation_id, opportunity_id) VALUES ($1, $2)", id, opportunity_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        r#"INSERT INTO conversation_participants (conversation_id, participant_id, user_id, side)
           VALUES ($1, $2, $3, $4), ($1, $5, $6, $7)"#,
        id,
        sender_id(source_user_id),
        source_user_id,
        Side::Source.as_str(),
        sender_id(candidate_user_id),
        candidate_user_id,
        Side::Candidate.as_str(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A conversation with its participants and tasks.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The context id.
    pub id: Uuid,
    /// The opportunity it is about.
    pub opportunity_id: Uuid,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// `(participant id, user id, side)`.
    pub participants: Vec<(String, String, String)>,
    /// Its tasks.
    pub task_ids: Vec<Uuid>,
}

/// Loads a conversation.
pub async fn get(conn: &mut PgConnection, id: Uuid) -> anyhow::Result<Option<Conversation>> {
    let Some(head) = sqlx::query!(
        "SELECT conversation_id, opportunity_id, created_at FROM conversations WHERE conversation_id = $1",
        id
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let participants = sqlx::query!(
        "SELECT participant_id, user_id, side FROM conversation_participants WHERE conversation_id = $1 ORDER BY side DESC",
        id
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.participant_id, r.user_id, r.side))
    .collect();
    let task_ids = sqlx::query_scalar!("SELECT task_id FROM tasks WHERE conversation_id = $1 ORDER BY task_id", id)
        .fetch_all(conn)
        .await?;
    Ok(Some(Conversation {
        id: head.conversation_id,
        opportunity_id: head.opportunity_id,
        created_at: head.created_at,
        participants,
        task_ids,
    }))
}
