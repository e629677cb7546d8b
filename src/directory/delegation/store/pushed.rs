//! The SQL of attempts pushed to agents Parley calls: the id of the task the agent answered
//! with, kept on the attempt.

use sqlx::PgConnection;
use uuid::Uuid;

/// Records `remote_task_id` as the agent's task for attempt `attempt` of `delegation_id`.
pub async fn set_remote_task(
    conn: &mut PgConnection,
    delegation_id: Uuid,
    attempt: i32,
    remote_task_id: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE delegation_attempts SET remote_task_id = $3 WHERE delegation_id = $1 AND attempt = $2",
        delegation_id,
        attempt,
        remote_task_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The agent's task for attempt `attempt` of `delegation_id`, once its send was answered.
pub async fn remote_task(conn: &mut PgConnection, delegation_id: Uuid, attempt: i32) -> sqlx::Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        "SELECT remote_task_id FROM delegation_attempts WHERE delegation_id = $1 AND attempt = $2",
        delegation_id,
        attempt
    )
    .fetch_optional(conn)
    .await?
    .flatten())
}
