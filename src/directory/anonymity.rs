//! Anonymous ids: the only name under which another party sees an agent.
//!
//! Random (UUIDv4), valid for a configured time, and replaced once expired: housekeeping
//! replaces the expired ids of the agents with an enabled capability in batches
//! ([`refresh_all_expired`]), and whoever needs an agent's id after it expired and before
//! housekeeping came round issues the new one (a discovery, or the agent reading its own
//! capabilities). At most one id per agent is current (a unique partial index), so two callers
//! replacing the same id at once end with one new id. Old ids are kept: they still resolve, so
//! records made under them keep pointing at their agent.
//!
//! Every agent with a capability has a current id row: a database trigger issues one, already
//! expired, when its first capability arrives without one (so its first real use replaces it).
//! A discovery therefore only has to look for current ids that expired ([`refresh_expired`]:
//! one range read of a small partial index, empty on almost every request since housekeeping
//! replaces them) instead of refreshing every agent it may show.
//!
//! Nothing else that others see may link two of an agent's anonymous ids: a capability is shown
//! under a handle derived from the anonymous id (`crate::runtime::TokenKey::capability_handle`),
//! which changes with it, never under its stored id (stable for the capability's life, and
//! time-ordered).
//!
//! The two names of an agent have their own types, [`AgentId`] (stored, never shown to another
//! party) and [`AnonymousId`] (what others see), so that this module's answers cannot be shown
//! or passed as the other; the typed ids start here and spread outwards from this boundary.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

/// An agent's stored id: who it is to the service and to its owner, never shown to another party.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type, serde::Serialize, serde::Deserialize,
)]
#[sqlx(transparent)]
#[serde(transparent)]
pub struct AgentId(pub Uuid);

/// The name under which other parties see an agent for a while (see the module docs).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, sqlx::Type, serde::Serialize, serde::Deserialize,
)]
#[sqlx(transparent)]
#[serde(transparent)]
pub struct AnonymousId(pub Uuid);

impl std::fmt::Display for AnonymousId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Makes sure each of `agents` has a current, unexpired anonymous id: an expired one is retired
/// and a new one issued, valid for `ttl`.
pub async fn refresh(conn: &mut PgConnection, agents: &[Uuid], ttl: Duration) -> sqlx::Result<()> {
    if agents.is_empty() {
        return Ok(());
    }
    // In one order for every caller: concurrent refreshes then wait on each other's rows one
    // agent at a time, in the same sequence, and never deadlock.
    let mut agents = agents.to_vec();
    agents.sort_unstable();
    agents.dedup();
    let agents = agents.as_slice();
    sqlx::query!(
        "UPDATE anonymous_ids SET current = false WHERE agent_id = ANY($1) AND current AND expires_at <= now()",
        agents
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        r#"INSERT INTO anonymous_ids (anonymous_id, agent_id, expires_at)
           SELECT gen_random_uuid(), a, now() + make_interval(secs => $2)
             FROM unnest($1::uuid[]) a
            WHERE NOT EXISTS (SELECT 1 FROM anonymous_ids x WHERE x.agent_id = a AND x.current)
           ON CONFLICT (agent_id) WHERE current DO NOTHING"#,
        agents,
        ttl.as_secs_f64()
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Replaces the expired current ids of the agents with an enabled capability of `task_type` (any
/// kind when `None`) and `custom_type` (any when `None`): the agents a discovery or ranking of
/// that kind may show. Nothing is written when none expired, the usual case.
pub async fn refresh_expired(
    conn: &mut PgConnection,
    task_type: Option<&str>,
    custom_type: Option<&str>,
    ttl: Duration,
) -> sqlx::Result<()> {
    // The expired current ids first, from their partial index (housekeeping leaves few or none),
    // then their capabilities: asked the other way round, every capability of the kind is
    // looked up in turn to find that none has an expired id.
    let expired = sqlx::query_scalar!(
        r#"WITH expired AS MATERIALIZED (
               SELECT agent_id FROM anonymous_ids WHERE current AND expires_at <= now()
           )
           SELECT e.agent_id AS "agent_id!" FROM expired e
            WHERE EXISTS (SELECT 1 FROM capabilities c
                           WHERE c.agent_id = e.agent_id AND c.enabled
                             AND ($1::text IS NULL OR c.task_type = $1) AND ($2::text IS NULL OR c.custom_type = $2))"#,
        task_type,
        custom_type
    )
    .fetch_all(&mut *conn)
    .await?;
    refresh(conn, &expired, ttl).await
}

/// Replaces the expired current ids of every agent with an enabled capability, at most `batch`
/// agents per transaction, until none is left; returns how many it replaced. Run by
/// housekeeping, so that discoveries almost never find one to replace.
pub async fn refresh_all_expired(pool: &PgPool, ttl: Duration, batch: i64) -> sqlx::Result<u64> {
    let mut done = 0u64;
    loop {
        let mut tx = pool.begin().await?;
        let expired = sqlx::query_scalar!(
            r#"SELECT ai.agent_id FROM anonymous_ids ai
                WHERE ai.current AND ai.expires_at <= now()
                  AND EXISTS (SELECT 1 FROM capabilities c WHERE c.agent_id = ai.agent_id AND c.enabled)
                ORDER BY ai.expires_at LIMIT $1"#,
            batch
        )
        .fetch_all(&mut *tx)
        .await?;
        if expired.is_empty() {
            return Ok(done);
        }
        refresh(&mut tx, &expired, ttl).await?;
        tx.commit().await?;
        done += expired.len() as u64;
        if (expired.len() as i64) < batch {
            return Ok(done);
        }
    }
}

/// The agent's current anonymous id, issuing a new one first when it has none or it expired.
pub async fn current(conn: &mut PgConnection, agent: AgentId, ttl: Duration) -> sqlx::Result<AnonymousId> {
    let agent_id = agent.0;
    // The usual case, read without writing: a current id that has not expired.
    let live = sqlx::query_scalar!(
        r#"SELECT anonymous_id AS "anonymous_id: AnonymousId" FROM anonymous_ids
            WHERE agent_id = $1 AND current AND expires_at > now()"#,
        agent_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(id) = live {
        return Ok(id);
    }
    refresh(conn, &[agent_id], ttl).await?;
    sqlx::query_scalar!(
        r#"SELECT anonymous_id AS "anonymous_id: AnonymousId" FROM anonymous_ids WHERE agent_id = $1 AND current"#,
        agent_id
    )
    .fetch_one(conn)
    .await
}

/// What an anonymous id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The agent.
    pub agent_id: AgentId,
    /// When the id stopped (or stops) being valid for new work.
    pub expires_at: DateTime<Utc>,
    /// Whether it is still the agent's id for new work (current and not expired).
    pub live: bool,
}

/// The agent behind an anonymous id, expired or not; `None` for an id never issued.
pub async fn resolve(conn: &mut PgConnection, anonymous_id: AnonymousId) -> sqlx::Result<Option<Resolved>> {
    sqlx::query_as!(
        Resolved,
        r#"SELECT agent_id AS "agent_id: AgentId", expires_at, (current AND expires_at > now()) AS "live!"
           FROM anonymous_ids WHERE anonymous_id = $1"#,
        anonymous_id.0
    )
    .fetch_optional(conn)
    .await
}
