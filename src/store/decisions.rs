//! The people's decisions on pending opportunities.

use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

/// Records `user_id`'s decision; `false` when they had already decided.
pub async fn insert(
    conn: &mut PgConnection,
    opportunity_id: Uuid,
    user_id: &str,
    decision: &str,
) -> sqlx::Result<bool> {
    let r = sqlx::query!(
        r#"INSERT INTO opportunity_decisions (opportunity_id, user_id, decision) VALUES ($1, $2, $3)
           ON CONFLICT (opportunity_id, user_id) DO NOTHING"#,
        opportunity_id,
        user_id,
        decision
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Every decision on these opportunities: opportunity -> user -> decision.
pub async fn for_opportunities(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> sqlx::Result<HashMap<Uuid, HashMap<String, String>>> {
    let rows = sqlx::query!(
        "SELECT opportunity_id, user_id, decision FROM opportunity_decisions WHERE opportunity_id = ANY($1)",
        ids
    )
    .fetch_all(conn)
    .await?;
    let mut out: HashMap<Uuid, HashMap<String, String>> = HashMap::new();
    for r in rows {
        out.entry(r.opportunity_id).or_default().insert(r.user_id, r.decision);
    }
    Ok(out)
}
